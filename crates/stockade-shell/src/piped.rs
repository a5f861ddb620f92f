//! Long-running children with piped stdio (an MCP server speaking JSON-RPC
//! on its stdin and stdout): started exactly as a command is (the same
//! provider wrap, held descriptors, status channel, loader-variable rules and
//! process group; `process::piped_command`), but handed back running, with
//! its standard streams, instead of being read to the end.
//!
//! Whether the runner started the child is read from the status channel
//! before [`SandboxedExecutor::spawn_piped`](crate::SandboxedExecutor::spawn_piped)
//! returns: a `fail` record, or silence, is `SANDBOX_UNAVAILABLE`; a program
//! that cannot be executed is an ordinary start failure. The child leads a
//! process group of its own (unless the request turns that off), and
//! [`PipedChild::kill`], like dropping it, kills the whole group.

use std::path::PathBuf;
use std::time::Duration;

use stockade_core::status::RunnerStatus;
use stockade_core::{
    AfterRunHandle, AfterRunReport, Enforcement, Gap, NetworkLogHandle, NetworkMode, SandboxMode,
    SandboxUnavailable,
};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use crate::error::ShellError;
use crate::process::{self, Launch, StatusReader};
use crate::spec::ExitFacts;

/// How long a runner may take to say whether it started the child.
const STATUS_WAIT: Duration = Duration::from_secs(30);
/// After `ok`, how long a later record (the exec itself failed) may take
/// to arrive when the channel stays open (bwrap keeps a copy).
#[cfg(unix)]
const AFTER_OK: Duration = Duration::from_millis(100);
/// How much of a silent runner's stderr is read for its reason, and how
/// long that may take.
const STDERR_PEEK: u64 = 16 * 1024;
const STDERR_WAIT: Duration = Duration::from_secs(1);

/// What the sandbox wrapped around a piped child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipedFacts {
    pub mode: SandboxMode,
    /// `None` for danger-full-access: nothing wrapped it.
    pub backend: Option<&'static str>,
    pub enforcement: Option<Enforcement>,
    pub network: NetworkMode,
    /// What the wrap lets the child write, as the backend grants it.
    pub writable_roots: Vec<PathBuf>,
    /// What the backend does not govern here, by name.
    pub gaps: Vec<Gap>,
}

/// A started long-running child. The standard streams are the caller's to
/// take; the child and its process group are killed by [`Self::kill`] or
/// when this is dropped.
pub struct PipedChild {
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    child: Child,
    /// Set once the child was reaped: its group id may then be reused, so it
    /// is never signalled again.
    exit: Option<ExitFacts>,
    facts: Option<PipedFacts>,
    /// The run's record of refused hosts (its proxy), held as long as the
    /// child runs.
    _network_log: Option<NetworkLogHandle>,
    /// The wrap's after-run audit, run once the child and its group have
    /// ended: a long-running server may create what the host runs later
    /// (an `.envrc`, a staged nested repo) as a command may.
    after_run: Option<AfterRunHandle>,
    audited: Option<AfterRunReport>,
}

impl std::fmt::Debug for PipedChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipedChild")
            .field("id", &self.child.id())
            .field("exit", &self.exit)
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

impl PipedChild {
    /// The OS id of the child (the runner, when wrapped), while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// What the sandbox wrapped around it; `None` under an executor that
    /// does not confine.
    pub fn facts(&self) -> Option<&PipedFacts> {
        self.facts.as_ref()
    }

    /// What the after-run audit set aside, once the child was reaped
    /// (`None` before, or when nothing wrapped it).
    pub fn after_run(&self) -> Option<&AfterRunReport> {
        self.audited.as_ref()
    }

    /// How it ended, if it has.
    pub fn try_wait(&mut self) -> Option<ExitFacts> {
        if self.exit.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.reaped(Some(status));
        }
        self.exit
    }

    /// Wait for it to end. What is left of its process group is killed
    /// then (a descendant it started in the background).
    pub async fn wait(&mut self) -> ExitFacts {
        if let Some(exit) = self.exit {
            return exit;
        }
        let status = self.child.wait().await.ok();
        self.reaped(status)
    }

    /// SIGKILL the child's whole process group (and the child itself, which
    /// covers a child without a group of its own and Windows). It is reaped
    /// by [`Self::wait`], or in the background once dropped.
    pub fn kill(&mut self) {
        if self.exit.is_none() {
            // Before reaping: while the leader is unreaped its id cannot
            // name anyone else's group. (It stops the runner and ends the
            // tree below it first: a `setsid` daemon of the server.)
            process::kill_group_of(self.child.id());
            let _ = self.child.start_kill();
        }
    }

    fn reaped(&mut self, status: Option<std::process::ExitStatus>) -> ExitFacts {
        // Stray members of its group go with it, as after a command.
        process::kill_group_of(self.child.id());
        // The runner has exited and its group is gone: a Landlock
        // supervisor ends its whole tree before exiting (and `kill` ended it
        // below a killed one), bwrap's pid namespace dies with its first
        // process. Only then is the audit final.
        if let Some(h) = self.after_run.take() {
            self.audited = Some(h.0.after_run());
        }
        let exit = match status {
            Some(s) => ExitFacts {
                code: s.code(),
                signal: signal_of(&s),
            },
            None => ExitFacts {
                code: None,
                signal: None,
            },
        };
        self.exit = Some(exit);
        exit
    }
}

impl Drop for PipedChild {
    fn drop(&mut self) {
        // kill_on_drop covers the child; the group is ours to end.
        self.kill();
        // Dropped unreaped: the tree below the runner has ended (kill_below
        // waits for each), the runner itself was just sent SIGKILL and
        // writes nothing in the roots. (Owners end servers through
        // kill-then-wait, which audits in `reaped`.)
        if let Some(h) = self.after_run.take() {
            let _ = h.0.after_run();
        }
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// Spawn `launch` with piped stdio and, when its runner has a status
/// channel, wait for the runner's word. `program` is what the caller asked
/// to run (named in a start failure).
pub(crate) async fn start(launch: Launch, program: PathBuf) -> Result<PipedChild, ShellError> {
    let (mut cmd, status) = process::piped_command(&launch)?;
    let spawned = cmd.spawn();
    // The child has its copies; dropping the command closes the parent's
    // (the status pipe's write end among them).
    drop(cmd);
    let mut child = spawned.map_err(|e| process::piped_spawn_error(&launch, e))?;
    let facts = launch.wrap.as_ref().map(|w| PipedFacts {
        mode: w.mode,
        backend: w.backend,
        enforcement: w.enforcement,
        network: w.network,
        writable_roots: w.writable_roots.clone(),
        gaps: w.gaps.clone(),
    });
    let mut piped = PipedChild {
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
        child,
        exit: None,
        facts,
        _network_log: launch.wrap.as_ref().and_then(|w| w.network_log.clone()),
        after_run: launch.wrap.as_ref().and_then(|w| w.after_run.clone()),
        audited: None,
    };
    if let Some(reader) = status {
        let reported = reported(reader).await;
        let backend = launch.wrap.as_ref().and_then(|w| w.backend);
        if let Err(e) = judge(&mut piped, reported, backend, program, &launch).await {
            piped.kill();
            return Err(e);
        }
    }
    Ok(piped)
}

/// What the runner said: the last record once the channel closed, `ok` once
/// nothing followed it for [`AFTER_OK`], `None` when it said nothing within
/// [`STATUS_WAIT`].
#[cfg(unix)]
async fn reported(mut from: StatusReader) -> Option<RunnerStatus> {
    use tokio::time::{Instant, timeout_at};
    let deadline = Instant::now() + STATUS_WAIT;
    let mut ok_by: Option<Instant> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let until = ok_by.map_or(deadline, |t| t.min(deadline));
        match timeout_at(until, from.read(&mut chunk)).await {
            Err(_) => return ok_by.map(|_| RunnerStatus::Started),
            Ok(Ok(0) | Err(_)) => return Some(RunnerStatus::parse(&buf)),
            Ok(Ok(n)) => {
                buf.extend_from_slice(&chunk[..n]);
                // A runner writes a line or two; keep the tail, bounded.
                if buf.len() > 16 * 1024 {
                    buf.drain(..buf.len() - 16 * 1024);
                }
                ok_by = match RunnerStatus::parse(&buf) {
                    RunnerStatus::Started => ok_by.or(Some(Instant::now() + AFTER_OK)),
                    _ => None,
                };
            }
        }
    }
}

#[cfg(not(unix))]
async fn reported(from: StatusReader) -> Option<RunnerStatus> {
    match from {}
}

async fn judge(
    piped: &mut PipedChild,
    reported: Option<RunnerStatus>,
    backend: Option<&'static str>,
    program: PathBuf,
    launch: &Launch,
) -> Result<(), ShellError> {
    let backend = backend.unwrap_or("sandbox");
    let unavailable = |why: String| Err(SandboxUnavailable::single(backend, why).into());
    match reported {
        Some(RunnerStatus::Started) => Ok(()),
        // The sandbox was up; the program itself cannot be run.
        Some(RunnerStatus::NotExecutable { code, message }) => Err(ShellError::Start {
            program,
            workdir: launch.workdir.clone(),
            source: std::io::Error::new(
                if code == 127 {
                    std::io::ErrorKind::NotFound
                } else {
                    std::io::ErrorKind::PermissionDenied
                },
                message,
            ),
        }),
        Some(RunnerStatus::Failed(why)) if why.trim().is_empty() => {
            unavailable("the runner failed without saying why".into())
        }
        Some(RunnerStatus::Failed(why)) => unavailable(why),
        // The runner died before it could report (bwrap's own setup, say):
        // its stderr is the runner's, the child never ran.
        Some(RunnerStatus::Silent) => {
            let line = runner_line(piped).await;
            let line = match line {
                Some(l) => l,
                None => {
                    let exit = tokio::time::timeout(STDERR_WAIT, piped.wait()).await.ok();
                    format!(
                        "the runner exited before starting the command ({})",
                        match exit {
                            Some(ExitFacts {
                                code: Some(code), ..
                            }) => format!("exit status {code}"),
                            Some(ExitFacts {
                                signal: Some(signal),
                                ..
                            }) => format!("killed by signal {signal}"),
                            _ => "exit status unknown".into(),
                        }
                    )
                }
            };
            unavailable(line)
        }
        None => unavailable(format!(
            "the runner did not say within {} s whether it started the command",
            STATUS_WAIT.as_secs()
        )),
    }
}

/// The first line a silent runner left on stderr.
async fn runner_line(piped: &mut PipedChild) -> Option<String> {
    let err = piped.stderr.take()?;
    let mut text = Vec::new();
    let _ = tokio::time::timeout(STDERR_WAIT, err.take(STDERR_PEEK).read_to_end(&mut text)).await;
    String::from_utf8_lossy(&text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}
