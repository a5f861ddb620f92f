use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
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
    /// Asked while the command waits about what its confinement would
    /// refuse and can hold (a host not on the list; under supervised
    /// Landlock, a place outside the writable roots), in place of any
    /// approval the provider keeps for the session. `None`: as the
    /// provider is set up (see [`stockade_core::run_approval`]).
    pub approval: Option<stockade_core::RunApproval>,
    /// Run the provider's after-run audit on the task awaiting the run
    /// instead of tokio's blocking pool. For a caller whose runtime has
    /// nothing else to run meanwhile (`stockade exec`): the pool's first
    /// use starts a thread, ~0.1 ms of a short command. Others keep the
    /// pool: the audit reads the git index, which in a large repository
    /// would hold a shared runtime's thread for milliseconds.
    pub audit_on_caller: bool,
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
            approval: None,
            audit_on_caller: false,
        }
    }

    /// Feed `bytes` to the command's stdin, then end of file.
    pub fn with_stdin_bytes(mut self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.stdin = Stdin::Bytes(bytes.into());
        self
    }

    /// Audit after the run on the awaiting task (see
    /// [`Self::audit_on_caller`]).
    pub fn with_audit_on_caller(mut self) -> Self {
        self.audit_on_caller = true;
        self
    }

    /// Ask `approval` while the command waits (see [`Self::approval`]).
    pub fn with_approval(mut self, approval: stockade_core::RunApproval) -> Self {
        self.approval = Some(approval);
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
    /// The one policy this call runs under, decided once by
    /// [`ShellExecutor::resolve`](crate::ShellExecutor::resolve): the
    /// request's, else the executor's default. Launching a spec never
    /// falls back again. An executor that does not confine states
    /// `danger-full-access`, which is what its calls run under.
    pub policy: ExecutionPolicy,
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
    /// Of those, the hosts a client looked up itself instead of asking the
    /// proxy (Node's `fetch`): what allows them is the client's proxy
    /// setting, not (only) the host list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unproxied_hosts: Vec<String>,
    /// The network proxy's own failures during the run (it prints nothing
    /// itself): connections may have failed for these, not for a refusal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_problems: Vec<String>,
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

    /// What the audit after the run did, and the network proxy's own
    /// failures, one line each, for the user and the model alike (whether
    /// or not anything was denied).
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
        out.extend(self.proxy_problems.iter().map(|p| texts::proxy_problem(p)));
        out
    }

    /// What a denial report says after the markers: each refused path and
    /// how to allow it (or why it cannot be), what was writable, then how
    /// to allow each refused host. The one text for the user's stderr and
    /// the model alike.
    pub fn denial_details(&self) -> Vec<String> {
        self.denial_details_in(&stockade_core::files::process_env)
    }

    /// [`Self::denial_details`] with the toolchain groups placed by `env`.
    pub fn denial_details_in(&self, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<String> {
        let mut out = self.file_details_in(env);
        out.extend(self.network_details());
        out
    }

    /// The file half of [`Self::denial_details`].
    pub fn file_details(&self) -> Vec<String> {
        self.file_details_in(&stockade_core::files::process_env)
    }

    /// [`Self::file_details`] with the toolchain groups placed by `env`.
    pub fn file_details_in(&self, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let push = |out: &mut Vec<String>, line: String| {
            if !out.contains(&line) {
                out.push(line);
            }
        };
        for p in &self.denied_paths {
            out.push(texts::denied_path(p));
            let hint = if let Some(secret) = self.deny_read.iter().find(|d| p.starts_with(d)) {
                Some(texts::deny_read_hint(secret))
            } else if let Some(why) = self.protection(p) {
                Some(texts::protected_hint(p, why))
            } else if self.mode == SandboxMode::ReadOnly {
                Some(texts::READ_ONLY_MODE_HINT.to_owned())
            } else if let Some(group) = stockade_core::files::group_of(p, env) {
                Some(texts::group_hint(group))
            } else {
                match dir_to_add(p) {
                    Some(dir) if dir.parent().is_none() => Some(texts::root_not_writable(p)),
                    // Granting it would not help: the mode bits refuse too.
                    Some(dir) if !crate::output::caller_may_use(&dir) => {
                        Some(texts::not_writable_by_you(&dir))
                    }
                    Some(dir) => Some(texts::writable_hint(&dir)),
                    None => None,
                }
            };
            if let Some(h) = hint {
                push(&mut out, h);
            }
        }
        if self.file_denied && !self.writable_roots.is_empty() {
            out.push(texts::writable_set(self.mode, &self.writable_roots));
        }
        out
    }

    /// The network half of [`Self::denial_details`]: per refused host, how
    /// to allow it, or (for a client that bypassed the proxy) why it could
    /// not reach it at all.
    pub fn network_details(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.network_denied {
            return out;
        }
        for h in &self.network_denied_hosts {
            let unproxied = self.unproxied_hosts.contains(h);
            if !unproxied || self.network == NetworkMode::Deny {
                out.push(texts::allow_host_hint(h, self.network));
            }
            if unproxied {
                out.push(texts::unproxied_hint(h));
            }
        }
        out
    }

    /// Why `p`, refused inside the writable set, is kept read-only there;
    /// `None` outside the set (or for a path the report cannot place).
    fn protection(&self, p: &Path) -> Option<texts::Protection> {
        if !p.is_absolute() || !self.writable_roots.iter().any(|r| p.starts_with(r)) {
            return None;
        }
        Some(if self.read_only.iter().any(|r| p.starts_with(r)) {
            texts::Protection::Listed
        } else if p.components().any(|c| c.as_os_str() == ".git") {
            texts::Protection::Git
        } else {
            texts::Protection::GitNamed
        })
    }
}

/// The directory `--writable` would have to add for a refused `p`: `p`
/// itself when it is a directory, else the deepest ancestor that exists
/// (a refused file's directory; the first existing parent of a directory a
/// command failed to create). `None` for a path the report cannot place.
fn dir_to_add(p: &Path) -> Option<PathBuf> {
    if !p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let clean: PathBuf = p.components().collect();
    let mut at = clean.as_path();
    loop {
        if std::fs::metadata(at).is_ok_and(|m| m.is_dir()) {
            return Some(at.to_path_buf());
        }
        at = at.parent()?;
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
        // A directory of the test's own, so the hint is offered as any user.
        let mine = tempfile::tempdir().unwrap();
        let refused = mine.path().join("f");
        let facts = SandboxFacts {
            network: NetworkMode::Allow,
            file_denied: true,
            network_denied: false,
            network_denied_hosts: vec![],
            unproxied_hosts: vec![],
            proxy_problems: vec![],
            mode: SandboxMode::WorkspaceWrite,
            backend: Some("bwrap"),
            enforcement: Some(Enforcement::Full),
            denied: true,
            runner_failed: false,
            runner_failure: None,
            denied_paths: vec![
                "/h/.ssh/id_ed25519".into(),
                "/h/.npm/_cacache/tmp".into(),
                refused.clone(),
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
        assert_eq!(lines[1], texts::deny_read_hint(Path::new("/h/.ssh")));
        assert!(lines[1].contains("--deny-read"), "{lines:?}");
        assert_eq!(lines[2], "denied: /h/.npm/_cacache/tmp");
        assert_eq!(lines[3], texts::group_hint("@npm"));
        assert_eq!(lines[4], texts::denied_path(&refused));
        // The directory to add is the refused file's.
        assert_eq!(lines[5], texts::writable_hint(mine.path()));
        assert_eq!(
            lines[6],
            "writable under workspace-write: /dev/null, /w, /h/cache"
        );
        assert_eq!(lines.len(), 7);
        // Only the secret's line names a list; no `--writable` for it.
        assert!(!lines[1].contains("--writable"));
    }

    fn file_facts(denied: &[&str]) -> SandboxFacts {
        SandboxFacts {
            network: NetworkMode::AllowListed,
            file_denied: true,
            network_denied: false,
            network_denied_hosts: vec![],
            unproxied_hosts: vec![],
            proxy_problems: vec![],
            mode: SandboxMode::WorkspaceWrite,
            backend: Some("landlock"),
            enforcement: Some(Enforcement::Full),
            denied: true,
            runner_failed: false,
            runner_failure: None,
            denied_paths: denied.iter().map(PathBuf::from).collect(),
            writable_roots: vec!["/w".into()],
            deny_read: vec![],
            read_only: vec!["/w/keep".into()],
            gaps: vec![],
            after_run: Default::default(),
        }
    }

    #[test]
    fn a_protected_path_says_why_and_offers_no_flag() {
        let none = |_: &str| None;
        for (path, why) in [
            ("/w/.git/config", texts::Protection::Git),
            ("/w/.git/hooks/pre-commit", texts::Protection::Git),
            ("/w/keep/f", texts::Protection::Listed),
            ("/w/.husky/pre-commit", texts::Protection::GitNamed),
        ] {
            let lines = file_facts(&[path]).file_details_in(&none);
            assert_eq!(
                lines[1],
                texts::protected_hint(Path::new(path), why),
                "{lines:?}"
            );
            assert!(
                lines.iter().all(|l| !l.contains("`--writable ")),
                "{lines:?}"
            );
        }
        // Outside the set: the directory to add, said once for two files.
        let mine = tempfile::tempdir().unwrap();
        let a = mine.path().join("a");
        let b = mine.path().join("b");
        let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
        let lines = file_facts(&[a, b, "/nonexistent-dir/x/y"]).file_details_in(&none);
        let hints: Vec<&String> = lines.iter().filter(|l| l.contains("--writable")).collect();
        assert_eq!(hints, [&texts::writable_hint(mine.path())], "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| *l == texts::root_not_writable(Path::new("/nonexistent-dir/x/y"))),
            "{lines:?}"
        );
        // Under read-only no extra root applies: the mode is what to change.
        let mut f = file_facts(&[a, b]);
        f.mode = SandboxMode::ReadOnly;
        let lines = f.file_details_in(&none);
        let said = lines.iter().filter(|l| *l == texts::READ_ONLY_MODE_HINT);
        assert_eq!(said.count(), 1, "{lines:?}");
    }

    /// The proxy prints nothing while a command runs; its own failures
    /// reach the user and the model after the run, once each.
    #[test]
    fn the_proxys_own_failures_are_said_after_the_run() {
        let mut f = file_facts(&[]);
        assert!(f.after_run_lines().is_empty());
        f.proxy_problems = vec!["cannot serve the Unix socket: x".into()];
        assert_eq!(
            f.after_run_lines(),
            [texts::proxy_problem("cannot serve the Unix socket: x")]
        );
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["proxy_problems"][0], "cannot serve the Unix socket: x");
    }

    #[test]
    fn a_refused_host_says_how_to_allow_it() {
        let mut f = file_facts(&[]);
        f.file_denied = false;
        f.network_denied = true;
        f.network_denied_hosts = vec!["a.test".into(), "b.test".into()];
        f.unproxied_hosts = vec!["b.test".into()];
        let lines = f.network_details();
        assert!(lines[0].contains("`--allow-host a.test`"), "{lines:?}");
        assert!(lines[0].contains("allowed_hosts"), "{lines:?}");
        // A host Node looked up itself: its proxy setting, not the list.
        assert_eq!(lines[1], texts::unproxied_hint("b.test"));
        assert!(lines[1].contains("NODE_USE_ENV_PROXY=1"), "{lines:?}");
        assert_eq!(lines.len(), 2);
        f.network = NetworkMode::Deny;
        let lines = f.network_details();
        assert!(
            lines[0].contains("--network allow-listed --allow-host a.test"),
            "{lines:?}"
        );
        assert!(lines[1].contains("--allow-host b.test"), "{lines:?}");
        assert_eq!(lines[2], texts::unproxied_hint("b.test"));
        assert_eq!(lines.len(), 3, "{lines:?}");
        f.network_denied = false;
        assert!(f.network_details().is_empty());
    }
}
