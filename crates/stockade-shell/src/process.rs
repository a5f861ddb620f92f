//! Spawning and supervising one process; shared by foreground runs and
//! background jobs so both classify the same way.

use std::ffi::OsString;
use std::future::Future;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use stockade_core::{Enforcement, RunnerFailureRule, SandboxMode, SandboxUnavailable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::error::ShellError;
use crate::output::{Bounded, OutputLimits, Scanner, Verdict};
use crate::spec::{ExitFacts, SandboxFacts, ShellResult, Stdin};

/// How long output readers may run on after the process group is gone: a
/// descendant that left the group (setsid) may hold a pipe open forever.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What the sandbox wrapped around this process.
#[derive(Debug, Clone)]
pub(crate) struct Wrap {
    pub mode: SandboxMode,
    /// `None` for danger-full-access (nothing wrapped).
    pub backend: Option<&'static str>,
    pub enforcement: Option<Enforcement>,
    pub denial_signatures: Vec<String>,
    pub rules: Vec<RunnerFailureRule>,
    pub writable_roots: Vec<PathBuf>,
}

/// Everything needed to spawn and read one process.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub argv: Vec<OsString>,
    pub workdir: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Option<Duration>,
    pub stdin: Stdin,
    pub passthrough: bool,
    pub own_group: bool,
    pub limits: OutputLimits,
    /// `None` under an executor that does not confine.
    pub wrap: Option<Wrap>,
}

pub(crate) struct Streams {
    pub stdout: Bounded,
    pub stderr: Bounded,
    pub scanner: Scanner,
}

pub(crate) type Shared = Arc<Mutex<Streams>>;

pub(crate) fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Streams> {
    // Readers never panic while holding the lock; if one did, the buffers
    // are still valid bytes, so keep going rather than losing the output.
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Running {
    launch: Launch,
    child: Child,
    group: GroupGuard,
    readers: Vec<tokio::task::JoinHandle<()>>,
    pub shared: Shared,
    started: Instant,
}

/// Kills the process group if the supervising future is dropped
/// (cancellation) before the group was reaped.
struct GroupGuard(Option<sys::Group>);

impl GroupGuard {
    fn disarm(&mut self) {
        self.0 = None;
    }

    fn kill(&mut self) {
        if let Some(group) = self.0.take() {
            sys::kill_group(group);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(unix)]
mod sys {
    use rustix::process::{Pid, Signal, kill_process_group};

    pub(super) type Group = Pid;

    pub(super) fn group_of(child_id: Option<u32>) -> Option<Group> {
        child_id.and_then(|id| Pid::from_raw(i32::try_from(id).ok()?))
    }

    pub(super) fn kill_group(group: Group) {
        // ESRCH (already gone) is the common case and fine.
        let _ = kill_process_group(group, Signal::KILL);
    }

    pub(super) fn new_group(cmd: &mut tokio::process::Command) {
        cmd.process_group(0);
    }

    pub(super) fn workdir_usable(dir: &std::path::Path) -> bool {
        std::fs::metadata(dir).is_ok_and(|m| m.is_dir())
            && rustix::fs::access(dir, rustix::fs::Access::EXEC_OK).is_ok()
    }

    pub(super) fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
        std::os::unix::process::ExitStatusExt::signal(status)
    }

    pub(super) const KILLED: Option<i32> = Some(Signal::KILL.as_raw());
}

#[cfg(not(unix))]
mod sys {
    // Windows has no process groups to signal; the child is killed directly
    // (kill_on_drop) and the restricted-token runner owns its descendants.
    pub(super) type Group = ();

    pub(super) fn group_of(_: Option<u32>) -> Option<Group> {
        None
    }

    pub(super) fn kill_group(_: Group) {}

    pub(super) fn new_group(_: &mut tokio::process::Command) {}

    pub(super) fn workdir_usable(dir: &std::path::Path) -> bool {
        std::fs::metadata(dir).is_ok_and(|m| m.is_dir())
    }

    pub(super) fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
        None
    }

    pub(super) const KILLED: Option<i32> = None;
}

/// A spawn rejection is a runner failure only when the workdir is usable and
/// the OS says ENOENT/EACCES, which then can only be about the runner we
/// exec'd (missing, not executable, or a script whose interpreter is
/// missing). Anything else keeps ordinary command-start semantics.
fn spawn_error(launch: &Launch, err: std::io::Error) -> ShellError {
    let program = PathBuf::from(&launch.argv[0]);
    let attributable = matches!(
        err.kind(),
        ErrorKind::NotFound | ErrorKind::PermissionDenied
    ) && sys::workdir_usable(&launch.workdir);
    match &launch.wrap {
        Some(Wrap {
            backend: Some(backend),
            ..
        }) if attributable => ShellError::SandboxUnavailable(SandboxUnavailable::single(
            *backend,
            format!("cannot start runner {}: {err}", program.display()),
        )),
        _ => ShellError::Start {
            program,
            workdir: launch.workdir.clone(),
            source: err,
        },
    }
}

pub(crate) fn spawn(launch: Launch) -> Result<Running, ShellError> {
    let (program, args) = match launch.argv.split_first() {
        Some(split) => split,
        None => return Err(ShellError::EmptyArgv),
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&launch.workdir)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(match launch.stdin {
            Stdin::Null => Stdio::null(),
            Stdin::Inherit => Stdio::inherit(),
        })
        // Passthrough hands stdout over untouched (a terminal stays a
        // terminal for the command); stderr is always read, because that is
        // where denials and runner failures show.
        .stdout(if launch.passthrough {
            Stdio::inherit()
        } else {
            Stdio::piped()
        })
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if launch.own_group {
        sys::new_group(&mut cmd);
    }
    // Every fd std and tokio open is O_CLOEXEC, so the child inherits only
    // 0, 1 and 2.
    let mut child = cmd.spawn().map_err(|e| spawn_error(&launch, e))?;
    // Armed even without a group of our own: a runner that starts a session
    // (landlock-run's setsid) leads a group whose id is the child's pid, and
    // no other group can carry that id while the child lives.
    let group = GroupGuard(sys::group_of(child.id()));
    let (sigs, rules) = match &launch.wrap {
        Some(w) => (w.denial_signatures.clone(), w.rules.clone()),
        None => (vec![], vec![]),
    };
    let shared: Shared = Arc::new(Mutex::new(Streams {
        stdout: Bounded::new(launch.limits),
        stderr: Bounded::new(launch.limits),
        scanner: Scanner::new(sigs, rules),
    }));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(read(
            out,
            shared.clone(),
            false,
            None::<tokio::io::Stdout>,
        )));
    }
    if let Some(err) = child.stderr.take() {
        let sink = launch.passthrough.then(tokio::io::stderr);
        readers.push(tokio::spawn(read(err, shared.clone(), true, sink)));
    }
    Ok(Running {
        launch,
        child,
        group,
        readers,
        shared,
        started: Instant::now(),
    })
}

async fn read<R, W>(mut from: R, shared: Shared, is_stderr: bool, mut sink: Option<W>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        {
            let mut s = lock(&shared);
            if is_stderr {
                s.stderr.push(chunk);
                s.scanner.feed(chunk);
            } else {
                s.stdout.push(chunk);
            }
        }
        if let Some(w) = sink.as_mut() {
            // A closed terminal must not stop capture or classification.
            if w.write_all(chunk).await.is_err() || w.flush().await.is_err() {
                sink = None;
            }
        }
    }
}

/// How the wait ended.
enum End {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

/// A settled process, before it is read as a result or a runner failure.
pub(crate) struct Settled {
    pub result: ShellResult,
    /// The runner's fatal line, when a rule matched.
    pub runner_failure: Option<(&'static str, String)>,
}

impl Running {
    /// Wait for the process (bounded by its timeout, or until `cancel`
    /// resolves), kill what is left of its group, drain and classify.
    pub(crate) async fn settle(mut self, cancel: impl Future<Output = ()>) -> Settled {
        let timeout = async {
            match self.launch.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let end = tokio::select! {
            status = self.child.wait() => match status {
                Ok(s) => End::Exited(s),
                // The child is gone in a way we cannot observe; treat it as
                // killed so nothing is reported as a success.
                Err(_) => End::Cancelled,
            },
            _ = timeout => End::TimedOut,
            _ = cancel => End::Cancelled,
        };
        // Kill the group before reaping the leader on a timeout or
        // cancellation, so its pgid cannot have been reused. After a normal
        // exit, stray descendants (`cmd &`) go with a group of our own; a
        // caller that shares its group (a CLI in a terminal) keeps them.
        match end {
            End::Exited(_) if !self.launch.own_group => self.group.disarm(),
            _ => self.group.kill(),
        }
        let status = match end {
            End::Exited(s) => Some(s),
            End::TimedOut | End::Cancelled => {
                // Covers a child without a group of its own (and Windows).
                let _ = self.child.start_kill();
                self.child.wait().await.ok()
            }
        };
        let drained = async {
            for r in self.readers.iter_mut() {
                let _ = r.await;
            }
        };
        if tokio::time::timeout(DRAIN_GRACE, drained).await.is_err() {
            for r in &self.readers {
                r.abort();
            }
        }
        let exit = exit_facts(status);
        let (stdout, stderr, verdict) = {
            let mut s = lock(&self.shared);
            let verdict = s.scanner.verdict(exit.code);
            (s.stdout.snapshot(), s.stderr.snapshot(), verdict)
        };
        let (denied, denied_paths, runner_failure) = match verdict {
            Verdict::RunnerFailed(line) => (false, vec![], Some(line)),
            Verdict::Ran { denied, paths } => (denied, paths, None),
        };
        let sandbox = self.launch.wrap.as_ref().map(|w| SandboxFacts {
            mode: w.mode,
            backend: w.backend,
            enforcement: w.enforcement,
            denied,
            runner_failed: runner_failure.is_some(),
            runner_failure: runner_failure.clone(),
            denied_paths: denied_paths.clone(),
            writable_roots: w.writable_roots.clone(),
        });
        let backend = self.launch.wrap.as_ref().and_then(|w| w.backend);
        Settled {
            result: ShellResult {
                exit,
                stdout,
                stderr,
                duration: self.started.elapsed(),
                timed_out: matches!(end, End::TimedOut),
                cancelled: matches!(end, End::Cancelled),
                sandbox,
            },
            runner_failure: runner_failure.map(|l| (backend.unwrap_or("sandbox"), l)),
        }
    }
}

fn exit_facts(status: Option<std::process::ExitStatus>) -> ExitFacts {
    match status {
        Some(s) => ExitFacts {
            code: s.code(),
            signal: sys::signal_of(&s),
        },
        None => ExitFacts {
            code: None,
            signal: sys::KILLED,
        },
    }
}
