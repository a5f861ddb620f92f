use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use stockade_core::{
    AfterRunReport, Enforcement, ExecutionPolicy, Gap, NetworkMode, SandboxMode, texts,
};

use crate::output::CapturedOutput;

/// Where the child's stdin comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Stdin {
    #[default]
    Null,
    /// The caller's own stdin (a CLI running an interactive command).
    Inherit,
    /// These bytes, then end of file (a hook reading its event). A command
    /// that stops reading early is not an error: the rest is dropped.
    Bytes(Arc<[u8]>),
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A command string handed to the executor's interpreter (`bash -c`).
    Shell(String),
    /// An argv run as is (`stockade exec -- CMD ARGS...`): no interpreter,
    /// arguments byte for byte.
    Argv(Vec<OsString>),
}

/// Which stream a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Sees each chunk of a command's output as it is read, for a live view
/// (an editor showing a running command). Called on the reader task, so it
/// must be quick and must not block; capture and classification do not
/// depend on it.
#[derive(Clone)]
pub struct OutputTap(Arc<TapFn>);

type TapFn = dyn Fn(OutputStream, &[u8]) + Send + Sync;

impl OutputTap {
    pub fn new(f: impl Fn(OutputStream, &[u8]) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub(crate) fn chunk(&self, stream: OutputStream, bytes: &[u8]) {
        (self.0)(stream, bytes);
    }
}

impl std::fmt::Debug for OutputTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputTap")
    }
}

/// The same tap, not an equal closure: requests compare by what they ask.
impl PartialEq for OutputTap {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for OutputTap {}

/// What a caller asks to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRequest {
    pub command: Command,
    pub workdir: PathBuf,
    /// Added to (or overriding) the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Option<Duration>,
    /// A complete per-call policy; `None` takes the executor's default.
    pub policy: Option<ExecutionPolicy>,
    pub stdin: Stdin,
    /// Hand the command this process's stdout and copy its stderr through
    /// as it arrives (stdout is then not captured).
    pub passthrough: bool,
    /// Run in a process group of its own so a timeout or cancellation kills
    /// every descendant. A CLI running a command in the foreground of a
    /// terminal turns this off so the command can read the terminal.
    pub own_process_group: bool,
    /// Shown every chunk of output as it arrives (see [`OutputTap`]).
    pub tap: Option<OutputTap>,
    /// Run on this pseudo-terminal (its slave as stdin, stdout, stderr and
    /// controlling terminal), reading what it shows as stderr is read, and
    /// copying it to stdout under `passthrough` (see [`crate::Terminal`]).
    /// `stdin` does not apply.
    pub terminal: Option<crate::Terminal>,
}

impl ShellRequest {
    pub fn new(command: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        Self::of(Command::Shell(command.into()), workdir.into())
    }

    pub fn argv(argv: Vec<OsString>, workdir: impl Into<PathBuf>) -> Self {
        Self::of(Command::Argv(argv), workdir.into())
    }

    fn of(command: Command, workdir: PathBuf) -> Self {
        Self {
            command,
            workdir,
            env: Vec::new(),
            timeout: None,
            policy: None,
            stdin: Stdin::Null,
            passthrough: false,
            own_process_group: true,
            tap: None,
            terminal: None,
        }
    }

    /// Feed `bytes` to the command's stdin, then end of file.
    pub fn with_stdin_bytes(mut self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.stdin = Stdin::Bytes(bytes.into());
        self
    }

    pub fn with_policy(mut self, policy: ExecutionPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn with_tap(mut self, tap: OutputTap) -> Self {
        self.tap = Some(tap);
        self
    }

    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// A request resolved by its executor. The policy is explicit here, so
/// running a spec never reads mutable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSpec {
    pub request: ShellRequest,
    /// `None` only under an executor that does not confine.
    pub policy: Option<ExecutionPolicy>,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExitFacts {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitFacts {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// What the sandbox did to this one process.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SandboxFacts {
    pub mode: SandboxMode,
    /// `None` for danger-full-access, which no backend touches.
    pub backend: Option<&'static str>,
    pub enforcement: Option<Enforcement>,
    /// The command ran and the kernel refused at least one file effect.
    pub denied: bool,
    /// The runner itself failed (background jobs; foreground runs return an
    /// error instead).
    pub runner_failed: bool,
    /// Why the runner failed, when `runner_failed`: its `fail` record, its
    /// own stderr line when it went silent, or its stderr fatal line when
    /// it has no status channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_failure: Option<String>,
    /// Paths named on the denied lines, as far as they can be read there
    /// (for reports; never acted on).
    #[serde(serialize_with = "display_paths")]
    pub denied_paths: Vec<PathBuf>,
    /// What the wrap let the command write.
    #[serde(serialize_with = "display_paths")]
    pub writable_roots: Vec<PathBuf>,
    /// What the wrap made unreadable (the deny-read paths that exist).
    #[serde(serialize_with = "display_paths")]
    pub deny_read: Vec<PathBuf>,
    /// What the wrap kept read-only inside the writable roots (besides the
    /// git paths).
    #[serde(serialize_with = "display_paths")]
    pub read_only: Vec<PathBuf>,
    /// The run's network mode.
    pub network: NetworkMode,
    /// A file effect was refused (`denied` also counts network refusals).
    pub file_denied: bool,
    /// A network connection was refused (by the proxy, or a lookup or
    /// connection the narrowed network made fail).
    pub network_denied: bool,
    /// The hosts refused, where known.
    pub network_denied_hosts: Vec<String>,
    /// What the backend did not govern on this host, so a result never
    /// reads as more confined than it was. Empty under danger-full-access,
    /// which claims to govern nothing in the first place.
    pub gaps: Vec<Gap>,
    /// What the provider's audit after the run set aside (and could not
    /// look at): entries the run created that the host would later run.
    #[serde(skip_serializing_if = "AfterRunReport::is_empty")]
    pub after_run: AfterRunReport,
}

impl SandboxFacts {
    /// The markers a denial report starts with: the file marker for a
    /// refused file effect, one network marker per refused host (or one
    /// without a host).
    pub fn markers(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.file_denied {
            out.push(texts::denial_marker(self.mode));
        }
        if self.network_denied {
            if self.network_denied_hosts.is_empty() {
                out.push(texts::network_denial_marker(None, self.network));
            }
            for h in &self.network_denied_hosts {
                out.push(texts::network_denial_marker(Some(h), self.network));
            }
        }
        out
    }

    /// What the audit after the run did, one line each, for the user and
    /// the model alike (whether or not anything was denied).
    pub fn after_run_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .after_run
            .quarantined
            .iter()
            .map(ToString::to_string)
            .collect();
        out.extend(
            self.after_run
                .unchecked
                .iter()
                .map(|u| texts::after_run_unchecked(u)),
        );
        out
    }

    /// What a denial report says after the marker: each path the denied
    /// lines name, then what was writable (after a refused file effect).
    pub fn denial_details(&self) -> Vec<String> {
        self.denial_details_in(&stockade_core::files::process_env)
    }

    /// [`Self::denial_details`] with the toolchain groups placed by `env`.
    pub fn denial_details_in(&self, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in &self.denied_paths {
            out.push(format!("denied: {}", p.display()));
            if let Some(secret) = self.deny_read.iter().find(|d| p.starts_with(d)) {
                out.push(format!(
                    "{} is on the deny-read list: nothing confined may read it",
                    secret.display()
                ));
            } else if let Some(group) = stockade_core::files::group_of(p, env) {
                out.push(texts::group_hint(group));
            }
        }
        if self.file_denied && !self.writable_roots.is_empty() {
            let roots: Vec<String> = self
                .writable_roots
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            out.push(format!(
                "writable under {}: {}",
                self.mode,
                roots.join(", ")
            ));
        }
        out
    }
}

fn display_paths<S: serde::Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.display().to_string()))
}

/// The facts of one finished command.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShellResult {
    pub exit: ExitFacts,
    pub stdout: CapturedOutput,
    pub stderr: CapturedOutput,
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
    pub timed_out: bool,
    pub cancelled: bool,
    /// `None` under an executor that does not confine.
    pub sandbox: Option<SandboxFacts>,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl ShellResult {
    /// A job whose supervisor vanished (runtime shutdown): never a success.
    pub(crate) fn lost() -> Self {
        Self {
            exit: ExitFacts {
                code: None,
                signal: None,
            },
            stdout: CapturedOutput::default(),
            stderr: CapturedOutput::default(),
            duration: Duration::ZERO,
            timed_out: false,
            cancelled: true,
            sandbox: None,
        }
    }

    pub fn denied(&self) -> bool {
        self.sandbox.as_ref().is_some_and(|s| s.denied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_names_the_secret_or_the_group_that_would_allow_it() {
        let facts = SandboxFacts {
            network: NetworkMode::Allow,
            file_denied: true,
            network_denied: false,
            network_denied_hosts: vec![],
            mode: SandboxMode::WorkspaceWrite,
            backend: Some("bwrap"),
            enforcement: Some(Enforcement::Full),
            denied: true,
            runner_failed: false,
            runner_failure: None,
            denied_paths: vec![
                "/h/.ssh/id_ed25519".into(),
                "/h/.npm/_cacache/tmp".into(),
                "/etc/passwd".into(),
            ],
            writable_roots: vec!["/dev/null".into(), "/w".into(), "/h/cache".into()],
            deny_read: vec!["/h/.ssh".into()],
            read_only: vec![],
            gaps: vec![],
            after_run: Default::default(),
        };
        let env = |n: &str| (n == "HOME").then(|| OsString::from("/h"));
        let lines = facts.denial_details_in(&env);
        assert_eq!(lines[0], "denied: /h/.ssh/id_ed25519");
        assert!(
            lines[1].contains("/h/.ssh") && lines[1].contains("deny-read"),
            "{lines:?}"
        );
        assert_eq!(lines[2], "denied: /h/.npm/_cacache/tmp");
        assert_eq!(lines[3], texts::group_hint("@npm"));
        assert_eq!(lines[4], "denied: /etc/passwd");
        assert_eq!(
            lines[5],
            "writable under workspace-write: /dev/null, /w, /h/cache"
        );
        assert_eq!(lines.len(), 6);
    }
}
