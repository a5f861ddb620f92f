use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::mode::Enforcement;
use crate::policy::SandboxPolicy;
use crate::runner_failure::RunnerFailureRule;

/// The structured code every "no confinement could be had" error carries.
pub const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";

/// What a provider hands back: the argv to spawn INSTEAD of the caller's, and
/// the facts needed to read what happened to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// Spawn exactly this; it runs the caller's argv inside the confinement.
    pub argv: Vec<OsString>,
    /// Which backend built it (`bwrap`, `landlock`, `runner-command`, ...).
    pub backend: &'static str,
    pub enforcement: Enforcement,
    /// Stderr substrings this backend's kernel prints on a denied file effect.
    pub denial_signatures: Vec<String>,
    /// Structured evidence that the runner itself failed.
    pub runner_failure_rules: Vec<RunnerFailureRule>,
    /// What this wrap lets the command write, as the backend grants it, so a
    /// denial can say which roots were writable.
    pub writable_roots: Vec<PathBuf>,
    /// Descriptors the spawner must place at fixed numbers in the child
    /// (held writable roots, protected paths), because `argv` names them by
    /// number rather than by a path a confined run could have moved.
    pub pass_fds: Vec<PassFd>,
    /// Where the runner reports whether it started the command, on a channel
    /// the command cannot write. `None`: only `runner_failure_rules` (an
    /// operator `runner_command`) tell a runner failure.
    pub status: Option<StatusChannel>,
    /// What this backend does NOT govern on this host, by name.
    pub gaps: Vec<Gap>,
    /// Variables the runner must start without: the dynamic loader's
    /// (`LD_PRELOAD`, `LD_LIBRARY_PATH`, ...), which could name a library a
    /// confined run wrote and so run it unconfined inside the runner. The
    /// runner hands the inherited values back to the command (`argv` says
    /// how); a spawner refuses a request that sets one of them itself
    /// rather than drop it.
    pub runner_env_remove: Vec<std::ffi::OsString>,
    /// What this wrap makes unreadable (the policy's deny-read paths that
    /// exist, as the command sees them). A `Permission denied` line naming
    /// a path beneath one is a denial on every backend.
    pub deny_read: Vec<PathBuf>,
    /// Paths inside the writable roots this wrap keeps read-only (the
    /// policy's `read_only` that exist; the git paths are not listed).
    pub read_only: Vec<PathBuf>,
    /// Where this run's refused network requests are recorded (the proxy
    /// of an `allow-listed` run); read once the run has ended.
    pub network_log: Option<NetworkLogHandle>,
    /// What the spawner calls once the command's whole tree has ended and
    /// before it reports the result (foreground runs and background jobs
    /// alike): the provider's look, outside the sandbox, at what the run
    /// left that the host would later run (see [`AfterRun`]).
    pub after_run: Option<AfterRunHandle>,
    /// The same confinement with the runner running the command itself
    /// (bwrap without the launcher inside), one process fewer; `None`
    /// where that would confine less on this host. For a run that needs
    /// no report while the command runs and no terminal of its own: its
    /// status channel carries the runner's report only once the command
    /// has ended, and only a runner inside can make a terminal the
    /// command's controlling one. Spawned at most once (its descriptors
    /// are read to their end by the runner).
    pub direct: Option<Direct>,
}

/// [`Confined::direct`]: spawn `argv` instead, with `pass_fds` placed
/// instead of [`Confined::pass_fds`] (the closer's relay end, for one, is
/// not the runner's to hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Direct {
    pub argv: Vec<OsString>,
    pub pass_fds: Vec<PassFd>,
    /// `allow-listed`: the proxy's way into the runner's private network
    /// namespace, which the spawner opens before the command may start.
    pub relay: Option<DirectRelay>,
}

/// How the spawner lets the proxy into a direct run's network namespace.
/// The runner stops before the command's exec until a byte arrives on
/// `block_fd` (a pipe the spawner places there and keeps the write end
/// of); first it names its child and that child's network namespace on
/// the status channel. The spawner checks that the namespace is the one
/// named, listens on the sandbox's `127.0.0.1:port` from inside it (the
/// address the command's proxy variables give), and hands each
/// connection to the proxy over `relay_end` (as `stockade_proxy::hand_over`
/// does, with the connection itself). The listener exists before the
/// command starts and lives as long as the runner does; a spawner that
/// cannot make it kills the runner before unblocking it and reports a
/// runner failure.
#[derive(Debug, Clone)]
pub struct DirectRelay {
    pub port: u16,
    pub block_fd: i32,
    /// The proxy's relay end (a datagram socket), held as [`PassFd`]'s
    /// files are.
    pub relay_end: Arc<std::fs::File>,
}

/// Two relays are equal when they hand over on the same end.
impl PartialEq for DirectRelay {
    fn eq(&self, other: &Self) -> bool {
        self.port == other.port
            && self.block_fd == other.block_fd
            && Arc::ptr_eq(&self.relay_end, &other.relay_end)
    }
}
impl Eq for DirectRelay {}

impl Confined {
    /// The one constructor: what every wrap has (the argv to spawn, the
    /// backend that built it, how fully it confines). Every other fact
    /// starts empty (no descriptors, no status channel, no gaps, ...) and
    /// is added with its `with_*` call, so a new fact is one method here
    /// rather than one more field at every backend.
    pub fn new(argv: Vec<OsString>, backend: &'static str, enforcement: Enforcement) -> Self {
        Self {
            argv,
            backend,
            enforcement,
            denial_signatures: Vec::new(),
            runner_failure_rules: Vec::new(),
            writable_roots: Vec::new(),
            pass_fds: Vec::new(),
            status: None,
            gaps: Vec::new(),
            runner_env_remove: Vec::new(),
            deny_read: Vec::new(),
            read_only: Vec::new(),
            network_log: None,
            after_run: None,
            direct: None,
        }
    }

    pub fn with_denial_signatures(mut self, signatures: Vec<String>) -> Self {
        self.denial_signatures = signatures;
        self
    }

    pub fn with_runner_failure_rules(mut self, rules: Vec<RunnerFailureRule>) -> Self {
        self.runner_failure_rules = rules;
        self
    }

    pub fn with_writable_roots(mut self, roots: Vec<PathBuf>) -> Self {
        self.writable_roots = roots;
        self
    }

    pub fn with_pass_fds(mut self, fds: Vec<PassFd>) -> Self {
        self.pass_fds = fds;
        self
    }

    pub fn with_status(mut self, status: StatusChannel) -> Self {
        self.status = Some(status);
        self
    }

    pub fn with_gaps(mut self, gaps: Vec<Gap>) -> Self {
        self.gaps = gaps;
        self
    }

    pub fn with_runner_env_remove(mut self, names: Vec<OsString>) -> Self {
        self.runner_env_remove = names;
        self
    }

    pub fn with_deny_read(mut self, paths: Vec<PathBuf>) -> Self {
        self.deny_read = paths;
        self
    }

    pub fn with_read_only(mut self, paths: Vec<PathBuf>) -> Self {
        self.read_only = paths;
        self
    }

    pub fn with_network_log(mut self, log: Option<NetworkLogHandle>) -> Self {
        self.network_log = log;
        self
    }

    pub fn with_after_run(mut self, audit: Option<AfterRunHandle>) -> Self {
        self.after_run = audit;
        self
    }

    pub fn with_direct(mut self, direct: Option<Direct>) -> Self {
        self.direct = direct;
        self
    }
}

/// The provider's audit of what a run left behind, performed by the
/// spawner outside the sandbox after the command's whole tree has ended.
pub trait AfterRun: Send + Sync + fmt::Debug {
    /// Look, act (set aside what the host must not pick up) and say what
    /// was done. Called at most once per run.
    fn after_run(&self) -> AfterRunReport;
}

/// A shared [`AfterRun`]; two handles are equal when they are the same.
#[derive(Debug, Clone)]
pub struct AfterRunHandle(pub Arc<dyn AfterRun>);

impl PartialEq for AfterRunHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for AfterRunHandle {}

/// What the after-run audit did: each entry is a fact of the run's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AfterRunReport {
    /// Entries the run created or replaced that the host would later run,
    /// each renamed aside in its own directory (nothing is deleted).
    pub quarantined: Vec<Quarantined>,
    /// What could not be looked at or set aside, and why.
    pub unchecked: Vec<String>,
}

impl AfterRunReport {
    pub fn is_empty(&self) -> bool {
        self.quarantined.is_empty() && self.unchecked.is_empty()
    }
}

/// Why an entry was set aside after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuarantineReason {
    /// A name on the protect list (`.envrc`, `~/.gitconfig`, ...) that the
    /// run created or replaced.
    ProtectedName,
    /// The `.git` of a gitlink (a nested repository staged in the index)
    /// that the run created, or whose configuration it made name a program:
    /// the user's next `git status` would recurse into it and run that.
    NestedRepository,
}

/// One entry set aside: `path` was renamed to `moved_to`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Quarantined {
    #[serde(serialize_with = "display_path")]
    pub path: PathBuf,
    #[serde(serialize_with = "display_path")]
    pub moved_to: PathBuf,
    pub reason: QuarantineReason,
}

fn display_path<S: serde::Serializer>(p: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

/// The one wording of a quarantine, for the user and the model alike.
impl fmt::Display for Quarantined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.reason {
            QuarantineReason::ProtectedName => {
                "the run created a file the host or an editor runs without asking"
            }
            QuarantineReason::NestedRepository => {
                "the run made a nested repository staged as a gitlink, which the next git status would run"
            }
        };
        write!(
            f,
            "stockade: after the run: {what}: {} was moved aside to {} (do not recreate it; the host would run it unconfined)",
            self.path.display(),
            self.moved_to.display()
        )
    }
}

/// What a run's network guard refused, by host, read after the run.
pub trait NetworkLog: Send + Sync + fmt::Debug {
    /// Hosts refused so far for this run, deduplicated, in order.
    fn refused(&self) -> Vec<String>;
    /// The proxy's own failures so far (a listener it could not serve),
    /// which make connections fail without any host being refused.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A shared [`NetworkLog`]; two handles are equal when they are the same log.
#[derive(Debug, Clone)]
pub struct NetworkLogHandle(pub Arc<dyn NetworkLog>);

impl PartialEq for NetworkLogHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for NetworkLogHandle {}

/// One open descriptor handed to the child at `child_fd`. The spawner maps a
/// duplicate of `file` there; the original stays with whoever holds it.
#[derive(Debug, Clone)]
pub struct PassFd {
    pub child_fd: i32,
    pub file: Arc<std::fs::File>,
}

/// Two `PassFd`s are equal when they hand the same open file to the same slot.
impl PartialEq for PassFd {
    fn eq(&self, other: &Self) -> bool {
        self.child_fd == other.child_fd && Arc::ptr_eq(&self.file, &other.file)
    }
}
impl Eq for PassFd {}

/// The runner's status channel: the spawner opens a pipe, hands its write
/// end to the child at `child_fd` and reads the records of
/// [`crate::status`] from the other end once the process has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusChannel {
    pub child_fd: i32,
}

/// Something a policy names that this backend cannot govern here. The names
/// are the closed set in [`crate::gaps`]; `detail` says why and what it means.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gap {
    pub name: &'static str,
    pub detail: String,
}

impl Gap {
    pub fn new(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            detail: detail.into(),
        }
    }
}

/// One backend that was tried, and why it could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendAttempt {
    pub backend: String,
    pub detail: String,
}

/// No usable backend: fail closed, never a silent unconfined passthrough.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SandboxUnavailable {
    /// Every backend tried, in order, with why it failed.
    pub attempts: Vec<BackendAttempt>,
}

impl SandboxUnavailable {
    pub const CODE: &'static str = SANDBOX_UNAVAILABLE;

    pub fn new(attempts: Vec<BackendAttempt>) -> Self {
        Self { attempts }
    }

    pub fn single(backend: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(vec![BackendAttempt {
            backend: backend.into(),
            detail: detail.into(),
        }])
    }

    pub fn code(&self) -> &'static str {
        Self::CODE
    }
}

/// `sandbox unavailable: bwrap: <why>; landlock: <why>`
impl fmt::Display for SandboxUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sandbox unavailable: ")?;
        if self.attempts.is_empty() {
            return f.write_str("no backend was tried");
        }
        for (i, a) in self.attempts.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            // A runner's own line names itself ("bwrap: ..."): once is enough.
            let detail = a
                .detail
                .strip_prefix(a.backend.as_str())
                .and_then(|rest| rest.strip_prefix(": "))
                .unwrap_or(&a.detail);
            write!(f, "{}: {}", a.backend, detail)?;
        }
        Ok(())
    }
}

/// Ending a session left some of its allocations behind. What is left is
/// inert (on Windows: a random temp SID no later token carries, and its
/// directory), so the session is over all the same; this only reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ending session {session}: {backend}: {detail}")]
pub struct SessionEndError {
    pub session: String,
    pub backend: String,
    pub detail: String,
}

/// The seam every confining consumer stands on. Policy rides each call, never
/// the provider, so two calls may confine under different policies at once.
pub trait SandboxProvider: Send + Sync {
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable>;

    /// Session `session` is over: release what was allocated for calls
    /// scoped to it ([`SandboxPolicy::session`]), e.g. revoke the Windows
    /// private temp ACE and remove that directory. Only that session's
    /// allocations: other sessions and session-less calls keep theirs.
    /// Idempotent; a session never seen is a no-op. A later call scoped to
    /// the same session gets fresh allocations. Backends that allocate
    /// nothing per session keep this default.
    fn end_session(&self, session: &str) -> Result<(), SessionEndError> {
        let _ = session;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_line_naming_its_backend_is_not_named_twice() {
        let e = SandboxUnavailable::single("bwrap", "bwrap: Can't mount proc");
        assert_eq!(
            e.to_string(),
            "sandbox unavailable: bwrap: Can't mount proc"
        );
        // Only the exact prefix: a detail that merely starts alike stays.
        let e = SandboxUnavailable::single("bwrap", "bwrapper: x");
        assert_eq!(e.to_string(), "sandbox unavailable: bwrap: bwrapper: x");
    }

    #[test]
    fn unavailable_names_every_attempt() {
        let e = SandboxUnavailable::new(vec![
            BackendAttempt {
                backend: "bwrap".into(),
                detail: "not found on PATH".into(),
            },
            BackendAttempt {
                backend: "landlock".into(),
                detail: "kernel has no Landlock".into(),
            },
        ]);
        assert_eq!(e.code(), "SANDBOX_UNAVAILABLE");
        assert_eq!(
            e.to_string(),
            "sandbox unavailable: bwrap: not found on PATH; landlock: kernel has no Landlock"
        );
    }
}
