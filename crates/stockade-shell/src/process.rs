//! Spawning and supervising one process; shared by foreground runs and
//! background jobs so both classify the same way.

use std::ffi::OsString;
use std::future::Future;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use stockade_core::status::RunnerStatus;
use stockade_core::{
    AfterRunHandle, AfterRunReport, Enforcement, Gap, NetworkLogHandle, NetworkMode, PassFd,
    RunnerFailureRule, SandboxMode, SandboxUnavailable, StatusChannel,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::error::{FdConflict, ShellError};
use crate::output::{Bounded, OutputLimits, Scanner, Verdict};
use crate::spec::{ExitFacts, OutputStream, OutputTap, SandboxFacts, ShellResult, Stdin};

/// How long output readers may run on after the process group is gone: a
/// descendant that left the group (setsid) may hold a pipe open forever.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// How long a command that ended while a question held its terminal's
/// output waits for the question to be let go (`OutputHold`: its holder is
/// told the run is ending) before the drain above starts; past it what is
/// left unread is not shown.
const HOLD_GRACE: Duration = Duration::from_secs(5);

/// How long a runner whose command was killed may take to reap its tree and
/// exit before it is killed too.
const RUNNER_GRACE: Duration = Duration::from_secs(2);

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
    pub gaps: Vec<Gap>,
    /// Held descriptors the runner's argv names by number.
    pub pass_fds: Vec<PassFd>,
    /// Where the runner reports whether it started the command. When set,
    /// it alone decides runner failure; `rules` only name the runner's lines.
    pub status: Option<StatusChannel>,
    /// Variables the runner starts without (the loader's); the runner's
    /// argv hands the inherited values back to the command.
    pub runner_env_remove: Vec<OsString>,
    /// What the wrap makes unreadable and keeps read-only (for facts, and
    /// so a refused read beneath a deny-read path reads as a denial).
    pub deny_read: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub network: NetworkMode,
    /// The run's proxy record of refused hosts (allow-listed).
    pub network_log: Option<NetworkLogHandle>,
    /// The provider's audit, called once the run's tree has ended.
    pub after_run: Option<AfterRunHandle>,
    /// The runner runs the command itself (`Confined::direct`): its own
    /// line for an exec that failed is the launcher's record.
    pub direct: bool,
    /// A direct run under `allow-listed`: the proxy's listener is made in
    /// its network namespace before the command may start.
    pub relay: Option<stockade_core::DirectRelay>,
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
    pub tap: Option<OutputTap>,
    pub terminal: Option<crate::Terminal>,
    /// See [`crate::ShellRequest::audit_on_caller`].
    pub audit_on_caller: bool,
    pub limits: OutputLimits,
    /// `None` under an executor that does not confine.
    pub wrap: Option<Wrap>,
}

pub(crate) struct Streams {
    pub stdout: Bounded,
    pub stderr: Bounded,
    pub scanner: Scanner,
    /// What the runner wrote on its status channel (bounded, see `fds`).
    pub status: Vec<u8>,
    /// The write end of a direct run's block pipe, kept (never written)
    /// after the proxy's listener could not be made and the runner and
    /// what was below it were killed: it closes only once the run is
    /// over, so nothing that outlived the kill can read an end of file and
    /// go on to the command's exec.
    // Held, never read: its drop is the point. No runner here blocks.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub held_block: Option<std::fs::File>,
}

pub(crate) type Shared = Arc<Mutex<Streams>>;

pub(crate) fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Streams> {
    // Readers never panic while holding the lock; if one did, the buffers
    // are still valid bytes, so keep going rather than losing the output.
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Running {
    launch: Launch,
    child: Proc,
    group: GroupGuard,
    readers: Vec<tokio::task::JoinHandle<()>>,
    pub shared: Shared,
    started: Instant,
}

/// The started process: through tokio's fork path, or (a confined run
/// whose runner takes held descriptors, see `crate::spawn`) without fork.
enum Proc {
    Forked(Child),
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    Spawned(crate::spawn::Spawned),
}

impl Proc {
    fn id(&self) -> Option<u32> {
        match self {
            Proc::Forked(c) => c.id(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Proc::Spawned(c) => c.id(),
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Proc::Forked(c) => c.wait().await,
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Proc::Spawned(c) => c.wait().await,
        }
    }

    fn start_kill(&mut self) -> std::io::Result<()> {
        match self {
            Proc::Forked(c) => c.start_kill(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Proc::Spawned(c) => c.start_kill(),
        }
    }
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// A started process and the ends of its stdio that are ours.
struct Started {
    child: Proc,
    stdin: Option<Writer>,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
    /// The terminal, or the one pipe for stdout and stderr.
    wired: Option<Reader>,
    status: Option<fds::StatusReader>,
    /// The write end of a direct run's block pipe (`Wrap::relay`).
    block: Option<std::fs::File>,
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

/// A run dropped before it settled (its caller was cancelled, or the
/// runtime shut down): the tree below the runner ends first, while the
/// runner is alive and unreaped (so its pid is still its own) and, as a
/// subreaper, keeps every orphan of its tree below it; then the fields'
/// drops kill the group and the runner.
impl Drop for Running {
    fn drop(&mut self) {
        if let Some(group) = self.group.0 {
            sys::kill_tree_below(group);
        }
        // Still audited (`settle` took the hook when it ran): the tree
        // below the runner has ended (`kill_below` waits for each), and a
        // runner writes nothing in the roots. No one reads the facts; what
        // the host would run is set aside all the same.
        if let Some(h) = self.launch.wrap.as_mut().and_then(|w| w.after_run.take()) {
            let _ = h.0.after_run();
        }
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

    /// Stops the unreaped child `group` names.
    pub(super) fn stop(group: Group) {
        let _ = rustix::process::kill_process(group, Signal::STOP);
    }

    /// Every descendant of the unreaped child `group` leads, however it
    /// left the group (`setsid`, re-parenting inside the runner).
    pub(super) fn kill_tree_below(group: Group) {
        if let Ok(pid) = u32::try_from(group.as_raw_pid()) {
            crate::tree::kill_below(pid);
        }
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

    pub(super) fn kill_tree_below(_: Group) {}

    pub(super) fn stop(_: Group) {}

    pub(super) fn new_group(_: &mut tokio::process::Command) {}

    pub(super) fn workdir_usable(dir: &std::path::Path) -> bool {
        std::fs::metadata(dir).is_ok_and(|m| m.is_dir())
    }

    pub(super) fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
        None
    }

    pub(super) const KILLED: Option<i32> = None;
}

#[cfg(unix)]
mod fds {
    use std::os::fd::{AsFd, OwnedFd};
    use std::path::PathBuf;

    use command_fds::{CommandFdExt, FdMapping};
    use tokio::io::AsyncReadExt;
    use tokio::net::unix::pipe::Receiver;
    use tokio::process::Command;

    use super::{Launch, Shared, ShellError, Wrap, lock};
    use crate::error::FdConflict;

    pub(super) type StatusReader = Receiver;

    /// Descriptors of ours and the numbers the child finds them at.
    pub(super) type Placed = Vec<(OwnedFd, i32)>;

    /// What a run places, the status channel's read end, and the write
    /// end of a direct run's block pipe.
    pub(super) type Placements = (Placed, Option<StatusReader>, Option<std::fs::File>);

    /// Running out of descriptors (or pipes) is an ordinary start failure:
    /// nothing ran and the runner is not to blame.
    fn start_error(launch: &Launch, source: std::io::Error) -> ShellError {
        ShellError::Start {
            program: launch.argv.first().map(PathBuf::from).unwrap_or_default(),
            workdir: launch.workdir.clone(),
            source,
        }
    }

    /// Each held descriptor, and the status pipe's write end, with the
    /// number the child must find it at (every copy the parent makes is
    /// close-on-exec), and the status pipe's read end. Nothing when the
    /// run places nothing.
    pub(super) fn placements(launch: &Launch) -> Result<Placements, ShellError> {
        let Some(Wrap {
            pass_fds,
            status,
            relay,
            ..
        }) = &launch.wrap
        else {
            return Ok((Vec::new(), None, None));
        };
        let mut mappings = Vec::with_capacity(pass_fds.len() + 1);
        for p in pass_fds {
            // A duplicate of the file the provider holds open, never a
            // re-open of its path: a path a previous run could have swapped.
            let parent_fd = p
                .file
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| start_error(launch, e))?;
            mappings.push((parent_fd, p.child_fd));
        }
        let mut reader = None;
        if let Some(channel) = status {
            // std's pipe is close-on-exec on every Unix (pipe2 where the
            // OS has it), so no other child inherits either end.
            let (rx, tx) = std::io::pipe().map_err(|e| start_error(launch, e))?;
            reader = Some(Receiver::from_owned_fd(rx.into()).map_err(|e| start_error(launch, e))?);
            mappings.push((tx.into(), channel.child_fd));
        }
        let mut block = None;
        if let Some(relay) = relay {
            let (rx, tx) = std::io::pipe().map_err(|e| start_error(launch, e))?;
            mappings.push((rx.into(), relay.block_fd));
            block = Some(std::fs::File::from(OwnedFd::from(tx)));
        }
        Ok((mappings, reader, block))
    }

    /// Arrange for the child to find each of `placements` at its number.
    /// The copies are owned by `cmd` (the dup2 onto the child's number
    /// happens in the child after fork), so a concurrent spawn of another
    /// command never inherits one, and dropping `cmd` after spawn closes
    /// the parent's write end.
    pub(super) fn place(
        cmd: &mut Command,
        launch: &Launch,
    ) -> Result<(Option<StatusReader>, Option<std::fs::File>), ShellError> {
        let (placed, reader, block) = placements(launch)?;
        if placed.is_empty() {
            // No pre_exec hook at all: std keeps its faster spawn path.
            return Ok((reader, block));
        }
        let first = placed.first().map_or(-1, |m| m.1);
        let mappings = placed
            .into_iter()
            .map(|(parent_fd, child_fd)| FdMapping {
                parent_fd,
                child_fd,
            })
            .collect();
        cmd.fd_mappings(mappings)
            .map_err(|_| ShellError::FdPlacement {
                // check_slots already refused duplicates; this is a backstop.
                child_fd: first,
                conflict: FdConflict::Duplicate,
            })?;
        Ok((reader, block))
    }

    /// A runner writes a line or two; nothing it writes may grow memory.
    /// Only the last record counts, so the tail is kept, from a line start.
    const MAX_STATUS: usize = 16 * 1024;

    fn push_bounded(buf: &mut Vec<u8>, chunk: &[u8]) {
        buf.extend_from_slice(chunk);
        if buf.len() > MAX_STATUS {
            let cut = buf.len() - MAX_STATUS;
            let start = buf[cut - 1..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(buf.len(), |p| cut + p);
            buf.drain(..start);
        }
    }

    /// Read the channel to EOF as it arrives, so a long record can never
    /// block the runner on a full pipe.
    pub(super) fn watch(mut from: StatusReader, shared: Shared) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            loop {
                let n = match from.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                push_bounded(&mut lock(&shared).status, &buf[..n]);
            }
        })
    }

    /// [`watch`] for a direct run under `allow-listed`
    /// (`stockade_core::DirectRelay`): once bwrap's first document names
    /// its child, the proxy's listener is made in that child's network
    /// namespace and only then is the child let go on to the command. Each
    /// connection accepted there is handed to the proxy whole. The
    /// listener closes when the channel does (bwrap has exited). A
    /// listener that cannot be made kills bwrap (`runner`, its pid, taken
    /// as a pidfd now, while it cannot have been reaped), keeps the block
    /// pipe shut until the run is over, and ends the channel with a
    /// failure record: a runner failure, with nothing of the command run.
    #[cfg(target_os = "linux")]
    pub(super) fn relay_then_watch(
        mut from: StatusReader,
        shared: Shared,
        block: std::fs::File,
        relay: stockade_core::DirectRelay,
        runner: Option<u32>,
    ) -> tokio::task::JoinHandle<()> {
        use rustix::process::{Pid, PidfdFlags, Signal};
        use stockade_core::status::{BwrapChild, RunnerStatus};
        let runner_id = runner;
        let runner = runner
            .and_then(|id| Pid::from_raw(i32::try_from(id).ok()?))
            .and_then(|pid| rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok());
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let mut block = Some(block);
            let mut listener = None;
            let mut failed = false;
            loop {
                tokio::select! {
                    read = from.read(&mut buf) => {
                        let n = match read {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        // After a refusal the record is ours and last:
                        // nothing bwrap had queued may follow it.
                        if failed {
                            continue;
                        }
                        let first = {
                            let mut streams = lock(&shared);
                            push_bounded(&mut streams.status, &buf[..n]);
                            // bwrap writes its first document in pieces:
                            // only a whole line names the child.
                            (block.is_some() && streams.status.contains(&b'\n'))
                                .then(|| BwrapChild::first_line(&streams.status))
                        };
                        let Some(first) = first else {
                            continue;
                        };
                        let Some(mut gate) = block.take() else {
                            continue;
                        };
                        // A first line that names no child would leave the
                        // child waiting for ever: refused like a failure.
                        let opened = first
                            .ok_or_else(|| ("bwrap's first status line names no child".to_owned(), None))
                            .and_then(|child| open_listener(child, relay.port));
                        match opened {
                            Ok(l) => {
                                listener = Some(l);
                                // The child reads one byte, or EOF; either
                                // lets it go, and the listener is there.
                                let _ = std::io::Write::write_all(&mut gate, b"x");
                            }
                            Err((why, named)) => {
                                // bwrap's child sets no parent-death signal
                                // before its block descriptor, so bwrap's
                                // death would not end it: bwrap is stopped
                                // (so nothing below it moves on when a child
                                // of its dies), everything below it killed
                                // while it still holds it, the child where
                                // it was found too, then bwrap. The gate
                                // stays shut until the run is over, and the
                                // record is written now (a process that
                                // inherited the channel could keep it from
                                // its end).
                                if let Some(pidfd) = &runner {
                                    let _ = rustix::process::pidfd_send_signal(pidfd, Signal::STOP);
                                }
                                // Only while bwrap is alive (unreaped) is
                                // its pid its own: a run dropped meanwhile
                                // has had its tree killed already.
                                if let (Some(id), Some(pidfd)) = (runner_id, &runner)
                                    && !exited(pidfd)
                                {
                                    crate::tree::kill_below(id);
                                }
                                if let Some(named) = named {
                                    let _ = named.kill();
                                }
                                if let Some(pidfd) = &runner {
                                    let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
                                }
                                let record = RunnerStatus::failure_record(
                                    &stockade_core::texts::relay_listener_failed(&why),
                                );
                                let mut streams = lock(&shared);
                                push_bounded(&mut streams.status, record.as_bytes());
                                streams.held_block = Some(gate);
                                failed = true;
                            }
                        }
                    }
                    conn = accepted(listener.as_ref()) => match conn {
                        // A proxy whose queue is full cannot take it: the
                        // client sees its connection closed.
                        Ok((conn, _)) => {
                            let _ = landlock_run::netns_listener::hand_over(
                                relay.relay_end.as_fd(),
                                conn.as_fd(),
                            );
                        }
                        // Out of descriptors, mostly: a pause, so a lasting
                        // one cannot spin this task.
                        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                    },
                }
            }
        })
    }

    /// The listener in the named child's namespace; on a failure, why, and
    /// the child where it was found.
    #[cfg(target_os = "linux")]
    fn open_listener(
        child: stockade_core::status::BwrapChild,
        port: u16,
    ) -> Result<tokio::net::TcpListener, (String, Option<landlock_run::netns_listener::NamedChild>)>
    {
        let named = landlock_run::netns_listener::NamedChild::find(child)
            .map_err(|e| (e.to_string(), None))?;
        let listener = named
            .listen(port)
            .map_err(|e| e.to_string())
            .and_then(|l| tokio::net::TcpListener::from_std(l).map_err(|e| e.to_string()));
        listener.map_err(|why| (why, Some(named)))
    }

    /// A pidfd polls readable once its process has exited.
    #[cfg(target_os = "linux")]
    fn exited(pidfd: &OwnedFd) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        poll(&mut fds, Some(&Timespec::default())) != Ok(0)
    }

    #[cfg(target_os = "linux")]
    async fn accepted(
        listener: Option<&tokio::net::TcpListener>,
    ) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
        match listener {
            Some(l) => l.accept().await,
            None => std::future::pending().await,
        }
    }

    /// No runner here makes a namespace to relay into, and no provider
    /// here offers a relay; one would be a runner failure, its block pipe
    /// kept shut until the run is over.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn relay_then_watch(
        from: StatusReader,
        shared: Shared,
        block: std::fs::File,
        _: stockade_core::DirectRelay,
        _: Option<u32>,
    ) -> tokio::task::JoinHandle<()> {
        lock(&shared).held_block = Some(block);
        tokio::spawn(async move {
            let _ = watch(from, shared.clone()).await;
            let record = stockade_core::status::RunnerStatus::failure_record(
                &stockade_core::texts::relay_listener_failed("not supported on this platform"),
            );
            push_bounded(&mut lock(&shared).status, record.as_bytes());
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_kept_tail_starts_at_a_line() {
            let mut buf = Vec::new();
            push_bounded(&mut buf, &vec![b'x'; MAX_STATUS]);
            // Still the same (torn) line: it must not read as `ok`.
            push_bounded(&mut buf, b"ok\n");
            assert!(!buf.starts_with(b"ok"));
            push_bounded(&mut buf, &vec![b'x'; MAX_STATUS]);
            push_bounded(&mut buf, b"\nok\n");
            assert_eq!(buf, b"ok\n");
            let mut buf = b"fail a\n".to_vec();
            push_bounded(&mut buf, &vec![b'y'; 2 * MAX_STATUS]);
            assert!(buf.is_empty());
            push_bounded(&mut buf, b"\nfail b");
            assert_eq!(
                stockade_core::status::RunnerStatus::parse(&buf),
                stockade_core::status::RunnerStatus::Failed("b".into())
            );
        }
    }
}

#[cfg(not(unix))]
mod fds {
    use tokio::process::Command;

    use super::{Launch, Shared, ShellError, Wrap};
    use crate::error::FdConflict;

    /// No channel can be opened here, so there is never one to read.
    pub(super) type StatusReader = std::convert::Infallible;

    /// Providers hand out no descriptors on these targets; one that did
    /// would name a descriptor the child cannot have, so refuse to start.
    pub(super) fn place(
        _: &mut Command,
        launch: &Launch,
    ) -> Result<(Option<StatusReader>, Option<std::fs::File>), ShellError> {
        let Some(Wrap {
            pass_fds,
            status,
            relay,
            ..
        }) = &launch.wrap
        else {
            return Ok((None, None));
        };
        match pass_fds
            .first()
            .map(|p| p.child_fd)
            .or(status.map(|s| s.child_fd))
            .or(relay.as_ref().map(|r| r.block_fd))
        {
            Some(child_fd) => Err(ShellError::FdPlacement {
                child_fd,
                conflict: FdConflict::Unsupported,
            }),
            None => Ok((None, None)),
        }
    }

    pub(super) fn watch(reader: StatusReader, _: Shared) -> tokio::task::JoinHandle<()> {
        match reader {}
    }

    pub(super) fn relay_then_watch(
        reader: StatusReader,
        _: Shared,
        _: std::fs::File,
        _: stockade_core::DirectRelay,
        _: Option<u32>,
    ) -> tokio::task::JoinHandle<()> {
        match reader {}
    }
}

/// Refuse, before anything is opened or started, a descriptor the child
/// cannot be given at its number: the standard streams are the executor's,
/// and two descriptors cannot share one number.
fn check_slots(wrap: Option<&Wrap>) -> Result<(), ShellError> {
    let Some(w) = wrap else {
        return Ok(());
    };
    let slots = w
        .pass_fds
        .iter()
        .map(|p| p.child_fd)
        .chain(w.status.map(|s| s.child_fd))
        .chain(w.relay.as_ref().map(|r| r.block_fd));
    let mut seen = Vec::new();
    for child_fd in slots {
        let conflict = if child_fd < 3 {
            Some(FdConflict::Reserved)
        } else if seen.contains(&child_fd) {
            Some(FdConflict::Duplicate)
        } else {
            None
        };
        if let Some(conflict) = conflict {
            return Err(ShellError::FdPlacement { child_fd, conflict });
        }
        seen.push(child_fd);
    }
    Ok(())
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

/// A request that sets a loader variable itself cannot have it reach the
/// command without reaching the runner first, so it is refused rather than
/// silently dropped.
fn check_loader_env(launch: &Launch) -> Result<(), ShellError> {
    let Some(w) = &launch.wrap else { return Ok(()) };
    if w.runner_env_remove.is_empty() {
        return Ok(());
    }
    match launch
        .env
        .iter()
        .find(|(k, _)| k.as_encoded_bytes().starts_with(b"LD_") || w.runner_env_remove.contains(k))
    {
        Some((name, _)) => Err(ShellError::LoaderEnv { name: name.clone() }),
        None => Ok(()),
    }
}

pub(crate) fn spawn(launch: Launch) -> Result<Running, ShellError> {
    // On a terminal the runner (or `setsid`) also makes it the command's
    // controlling terminal, where it can be asked to.
    let ctty = launch.terminal.as_ref().and_then(|_| {
        let backend = launch.wrap.as_ref().and_then(|w| w.backend);
        crate::terminal::ctty_argv(backend, &launch.argv, &launch.workdir)
    });
    let (program, args) = match ctty.as_deref().unwrap_or(&launch.argv).split_first() {
        Some(split) => split,
        None => return Err(ShellError::EmptyArgv),
    };
    check_slots(launch.wrap.as_ref())?;
    check_loader_env(&launch)?;
    let started = match without_fork(&launch, program, args)? {
        Some(started) => started,
        None => forked(&launch, program, args)?,
    };
    running(launch, started)
}

/// A confined run whose runner takes held descriptors, through
/// `crate::spawn` (on a terminal too: the runner makes it the controlling
/// terminal itself, `--ctty`); `None` for every other run.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn without_fork(
    launch: &Launch,
    program: &OsString,
    args: &[OsString],
) -> Result<Option<Started>, ShellError> {
    let program = std::path::Path::new(program);
    let placing = launch
        .wrap
        .as_ref()
        .is_some_and(|w| !w.pass_fds.is_empty() || w.status.is_some());
    if !placing || !program.is_absolute() {
        return Ok(None);
    }
    let (placed, status, block) = fds::placements(launch)?;
    let merge = launch.passthrough && crate::terminal::shared_output();
    let mut child = crate::spawn::start(launch, program, args, placed, merge)
        .map_err(|e| spawn_error(launch, e))?;
    let boxed = |r: Option<tokio::net::unix::pipe::Receiver>| r.map(|r| Box::new(r) as Reader);
    Ok(Some(Started {
        stdin: child.stdin.take().map(|w| Box::new(w) as Writer),
        stdout: boxed(child.stdout.take()),
        stderr: boxed(child.stderr.take()),
        wired: boxed(child.merged.take()),
        status,
        block,
        child: Proc::Spawned(child),
    }))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn without_fork(_: &Launch, _: &OsString, _: &[OsString]) -> Result<Option<Started>, ShellError> {
    Ok(None)
}

/// Through tokio's `Command`: std's posix_spawn when nothing but stdio is
/// placed, a fork when a `pre_exec` hook places more.
fn forked(launch: &Launch, program: &OsString, args: &[OsString]) -> Result<Started, ShellError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&launch.workdir)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(match &launch.stdin {
            Stdin::Null => Stdio::null(),
            Stdin::Inherit => Stdio::inherit(),
            Stdin::Bytes(_) => Stdio::piped(),
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
    if let Some(w) = &launch.wrap {
        for name in &w.runner_env_remove {
            cmd.env_remove(name);
        }
    }
    if launch.own_group {
        sys::new_group(&mut cmd);
    }
    // Every fd std and tokio open is O_CLOEXEC, so the child inherits only
    // 0, 1 and 2, plus what `place` maps onto the numbers the runner expects.
    let (status, block) = fds::place(&mut cmd, launch)?;
    let wired = crate::terminal::wire(&mut cmd, launch.terminal.as_ref(), launch.passthrough)
        .map_err(|source| ShellError::Start {
            program: PathBuf::from(program),
            workdir: launch.workdir.clone(),
            source,
        })?;
    let spawned = cmd.spawn();
    // The child has its copies now. Dropping the command closes the
    // parent's (the held descriptors' duplicates and the status pipe's write
    // end), so the channel reaches EOF once the runner's own copies close.
    drop(cmd);
    let mut child = spawned.map_err(|e| spawn_error(launch, e))?;
    Ok(Started {
        stdin: child.stdin.take().map(|w| Box::new(w) as Writer),
        stdout: child.stdout.take().map(|r| Box::new(r) as Reader),
        stderr: child.stderr.take().map(|r| Box::new(r) as Reader),
        wired: wired.map(|r| Box::new(r) as Reader),
        status,
        block,
        child: Proc::Forked(child),
    })
}

fn running(launch: Launch, started: Started) -> Result<Running, ShellError> {
    let Started {
        child,
        stdin,
        stdout,
        stderr,
        wired,
        status: status_reader,
        block,
    } = started;
    // Armed even without a group of our own: a runner that starts a session
    // (landlock-run's setsid) leads a group whose id is the child's pid, and
    // no other group can carry that id while the child lives.
    let group = GroupGuard(sys::group_of(child.id()));
    let scanner = match &launch.wrap {
        // A runner with a status channel says itself whether it started the
        // command; stderr, which the command can write, decides nothing
        // about that. Its rules only name the runner's own lines.
        Some(w) if w.status.is_some() => Scanner::new(w.denial_signatures.clone(), vec![])
            .with_runner_lines(w.backend, &w.rules)
            .with_read_denials(&w.deny_read, &launch.workdir)
            .with_writable(&w.writable_roots, &w.read_only)
            .with_network_narrowed(w.network != NetworkMode::Allow),
        Some(w) => Scanner::new(w.denial_signatures.clone(), w.rules.clone())
            .with_read_denials(&w.deny_read, &launch.workdir)
            .with_writable(&w.writable_roots, &w.read_only)
            .with_network_narrowed(w.network != NetworkMode::Allow),
        None => Scanner::new(vec![], vec![]),
    };
    let shared: Shared = Arc::new(Mutex::new(Streams {
        stdout: Bounded::new(launch.limits),
        stderr: Bounded::new(launch.limits),
        scanner,
        status: Vec::new(),
        held_block: None,
    }));
    let mut readers = Vec::new();
    if let (Stdin::Bytes(bytes), Some(mut pipe)) = (&launch.stdin, stdin) {
        let bytes = bytes.clone();
        // Written beside the readers so a command that writes much before
        // reading cannot deadlock against us; a command that exits or
        // closes stdin early ends the write with EPIPE, which is its choice.
        readers.push(tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        }));
    }
    if let Some(out) = stdout {
        readers.push(tokio::spawn(read(
            out,
            shared.clone(),
            OutputStream::Stdout,
            None::<tokio::io::Stdout>,
            launch.tap.clone(),
            None,
        )));
    }
    if let Some(err) = stderr {
        let sink = launch.passthrough.then(tokio::io::stderr);
        readers.push(tokio::spawn(read(
            err,
            shared.clone(),
            OutputStream::Stderr,
            sink,
            launch.tap.clone(),
            None,
        )));
    }
    if let Some(from) = wired {
        // The terminal (or the one pipe) carries stdout and stderr both:
        // read as stderr is, shown on stdout. The terminal's copier stops
        // while a question is asked there (`OutputHold`); counted from here,
        // before it first reads.
        let copier = launch.terminal.as_ref().map(|t| t.hold().copier());
        readers.push(tokio::spawn(read(
            from,
            shared.clone(),
            OutputStream::Stderr,
            launch.passthrough.then(tokio::io::stdout),
            launch.tap.clone(),
            copier,
        )));
    }
    if let Some(reader) = status_reader {
        // Drained with the output, under the same grace: a runner that
        // somehow keeps the channel open cannot hang settle.
        let relay = launch.wrap.as_ref().and_then(|w| w.relay.clone());
        readers.push(match (relay, block) {
            (Some(relay), Some(block)) => {
                fds::relay_then_watch(reader, shared.clone(), block, relay, child.id())
            }
            _ => fds::watch(reader, shared.clone()),
        });
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

async fn read<R, W>(
    mut from: R,
    shared: Shared,
    stream: OutputStream,
    mut sink: Option<W>,
    tap: Option<OutputTap>,
    mut copier: Option<crate::terminal::Copier>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let got = match copier.as_mut() {
            Some(c) => c.read(&mut from, &mut buf).await,
            None => from.read(&mut buf).await,
        };
        let n = match got {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        {
            let mut s = lock(&shared);
            match stream {
                OutputStream::Stderr => {
                    s.stderr.push(chunk);
                    s.scanner.feed(chunk);
                }
                OutputStream::Stdout => s.stdout.push(chunk),
            }
        }
        // Outside the lock: the tap is the caller's code.
        if let Some(t) = &tap {
            t.chunk(stream, chunk);
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
        // On a timeout or cancellation the runner is still unreaped, so
        // the tree below it (what left the group too) ends first.
        match end {
            End::Exited(_) if !self.launch.own_group => self.group.disarm(),
            End::Exited(_) => self.group.kill(),
            End::TimedOut | End::Cancelled => {
                if let Some(group) = self.group.0 {
                    sys::kill_tree_below(group);
                }
                // A runner whose command is gone reaps what was below it and
                // exits on its own; killed at once instead, the zombies it
                // had not reaped yet would be handed to the subreaper above
                // (`stockade acp`), which reaps none before it ends. Once it
                // is reaped its group is empty (everything below was killed)
                // and its id may be reused: disarmed, not killed.
                let runner = self
                    .launch
                    .wrap
                    .as_ref()
                    .is_some_and(|w| w.backend.is_some());
                if runner
                    && tokio::time::timeout(RUNNER_GRACE, self.child.wait())
                        .await
                        .is_ok()
                {
                    self.group.disarm();
                } else {
                    self.group.kill();
                }
            }
        }
        let status = match end {
            End::Exited(s) => Some(s),
            End::TimedOut | End::Cancelled => {
                // Covers a child without a group of its own (and Windows).
                let _ = self.child.start_kill();
                self.child.wait().await.ok()
            }
        };
        // A question that holds the terminal's output is let go first (its
        // holder sees the run ending), so the rest is copied, not lost.
        let hold = self.launch.terminal.as_ref().map(crate::Terminal::hold);
        let _ending = hold.as_ref().map(crate::terminal::OutputHold::ending);
        if let Some(h) = &hold {
            let _ = tokio::time::timeout(HOLD_GRACE, h.released()).await;
        }
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
        let mut exit = exit_facts(status);
        let channel = self.launch.wrap.as_ref().and_then(|w| w.status);
        let direct = self.launch.wrap.as_ref().is_some_and(|w| w.direct);
        let (stdout, stderr, verdict) = {
            let mut s = lock(&self.shared);
            let verdict = s.scanner.verdict(exit.code);
            let verdict = match channel {
                None => verdict,
                Some(_) => {
                    let mut reported = RunnerStatus::parse(&s.status);
                    // bwrap running the command itself reports an exec
                    // that failed only by its line and its status 1: the
                    // shell's status instead, as the launcher's record.
                    if direct
                        && reported == RunnerStatus::Silent
                        && exit.code == Some(1)
                        && let Some(r @ RunnerStatus::NotExecutable { code, .. }) = s
                            .scanner
                            .first_runner_line()
                            .and_then(RunnerStatus::bwrap_exec_failure)
                    {
                        // In the shell's words too, as the launcher says
                        // it, after bwrap's own line.
                        if let RunnerStatus::NotExecutable { message, .. } = &r {
                            let line = format!("{message}\n");
                            s.stderr.push(line.as_bytes());
                            if self.launch.passthrough {
                                use std::io::Write as _;
                                let _ = std::io::stderr().write_all(line.as_bytes());
                            }
                        }
                        exit.code = Some(code);
                        reported = r;
                    }
                    judge(
                        reported,
                        verdict,
                        s.scanner.first_runner_line(),
                        &exit,
                        !matches!(end, End::Exited(_)),
                    )
                }
            };
            let (refused, hosts) = s.scanner.network();
            let net_seen = (refused, hosts.to_vec());
            (
                s.stdout.snapshot(),
                s.stderr.snapshot(),
                (verdict, net_seen),
            )
        };
        let (verdict, (net_refused, mut net_hosts)) = verdict;
        let (file_denied, denied_paths, runner_failure) = match verdict {
            Verdict::RunnerFailed(line) => (false, vec![], Some(line)),
            Verdict::Ran { denied, paths } => (denied, paths, None),
        };
        // The proxy's record is the authority on which hosts it refused;
        // stderr only adds what never reached it (a lookup, a direct dial).
        let proxy_refused = self
            .launch
            .wrap
            .as_ref()
            .and_then(|w| w.network_log.as_ref())
            .map(|l| l.0.refused())
            .unwrap_or_default();
        let network_denied = runner_failure.is_none() && (net_refused || !proxy_refused.is_empty());
        for h in proxy_refused.into_iter().rev() {
            if !net_hosts.contains(&h) {
                net_hosts.insert(0, h);
            }
        }
        if !network_denied {
            net_hosts.clear();
        }
        let denied = file_denied || network_denied;
        // The provider's look at what the run left that the host would
        // run: only now, with the runner reaped (both backends end the
        // command's whole tree with it), and before anything is reported.
        let after_run = match self.launch.wrap.as_mut().and_then(|w| w.after_run.take()) {
            Some(h) if self.launch.audit_on_caller => h.0.after_run(),
            Some(h) => tokio::task::spawn_blocking(move || h.0.after_run())
                .await
                .unwrap_or_else(|e| AfterRunReport {
                    quarantined: vec![],
                    unchecked: vec![format!("the after-run audit did not finish: {e}")],
                }),
            None => AfterRunReport::default(),
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
            deny_read: w.deny_read.clone(),
            read_only: w.read_only.clone(),
            network: w.network,
            file_denied,
            network_denied,
            network_denied_hosts: net_hosts.clone(),
            unproxied_hosts: lock(&self.shared)
                .scanner
                .unproxied_hosts()
                .iter()
                .filter(|h| net_hosts.contains(h))
                .cloned()
                .collect(),
            proxy_problems: w
                .network_log
                .as_ref()
                .map(|l| l.0.problems())
                .unwrap_or_default(),
            gaps: w.gaps.clone(),
            after_run: after_run.clone(),
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

// Long-running children with piped stdio (`crate::piped`, an MCP server):
// the same checks and descriptor placement as `spawn`, the streams and the
// child's lifetime left to the caller.

/// The status channel's read end, as [`piped_command`] hands it out.
pub(crate) type StatusReader = fds::StatusReader;

/// The command [`spawn`] would start for `launch` (argv, workdir, env, the
/// runner's loader-variable removal, a process group of its own when asked,
/// held descriptors and the status pipe placed at their numbers), with
/// stdin, stdout and stderr piped, and the status channel's read end.
pub(crate) fn piped_command(
    launch: &Launch,
) -> Result<(Command, Option<StatusReader>), ShellError> {
    let (program, args) = launch.argv.split_first().ok_or(ShellError::EmptyArgv)?;
    check_slots(launch.wrap.as_ref())?;
    check_loader_env(launch)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&launch.workdir)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(w) = &launch.wrap {
        for name in &w.runner_env_remove {
            cmd.env_remove(name);
        }
    }
    if launch.own_group {
        sys::new_group(&mut cmd);
    }
    // A piped run is never direct (`SandboxedExecutor::launch`), so it has
    // no block pipe; one would only let the runner go on unrelayed.
    let (status, _block) = fds::place(&mut cmd, launch)?;
    Ok((cmd, status))
}

/// How [`spawn`] reads a rejected spawn (the runner's failure when it can
/// only be about the runner), for [`piped_command`]'s command.
pub(crate) fn piped_spawn_error(launch: &Launch, err: std::io::Error) -> ShellError {
    spawn_error(launch, err)
}

/// SIGKILL the tree below the child `child_id`, then the process group it
/// leads (nothing where there are no process groups). `child_id` is given
/// only while the child is unreaped (tokio's `Child::id`), so it names no
/// one else.
pub(crate) fn kill_group_of(child_id: Option<u32>) {
    if let Some(group) = sys::group_of(child_id) {
        // Stopped first, so it cannot see its tree die and exit with a
        // status of its own: it dies of the SIGKILL, as its caller asked.
        sys::stop(group);
        sys::kill_tree_below(group);
        sys::kill_group(group);
    }
}

/// The verdict for a runner with a status channel. `stderr` is the
/// stderr-only verdict (denials; no runner rules), `runner_line` the first
/// line bearing the runner's prefix, `interrupted` a timeout or cancellation.
fn judge(
    reported: RunnerStatus,
    stderr: Verdict,
    runner_line: Option<&str>,
    exit: &ExitFacts,
    interrupted: bool,
) -> Verdict {
    let not_started = Verdict::Ran {
        denied: false,
        paths: vec![],
    };
    match reported {
        // The command ran: whatever it printed or exited with is its own.
        RunnerStatus::Started => match stderr {
            Verdict::Ran { .. } => stderr,
            // Unreachable (no rules were given); never a runner failure.
            Verdict::RunnerFailed(_) => not_started,
        },
        // The sandbox was up; the command could not be executed. Its exit
        // status (127/126) and line are its own, and nothing was denied.
        RunnerStatus::NotExecutable { .. } => not_started,
        // Nothing ran. A timeout or cancellation is what the caller asked
        // about and is reported as such; stderr denial lines, if any, were
        // the runner's, not a refused effect of the command.
        _ if interrupted => not_started,
        RunnerStatus::Failed(why) if why.trim().is_empty() => {
            Verdict::RunnerFailed("the runner failed without saying why".into())
        }
        RunnerStatus::Failed(why) => Verdict::RunnerFailed(why),
        // The runner died before it could report (for bwrap: its own setup
        // failed). The command never ran, so its stderr is the runner's.
        RunnerStatus::Silent => Verdict::RunnerFailed(match runner_line {
            Some(line) => line.to_owned(),
            None => format!(
                "the runner exited before starting the command ({})",
                describe_exit(exit)
            ),
        }),
    }
}

fn describe_exit(exit: &ExitFacts) -> String {
    match (exit.code, exit.signal) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "exit status unknown".into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(denied: bool) -> Verdict {
        Verdict::Ran {
            denied,
            paths: if denied {
                vec![PathBuf::from("/x")]
            } else {
                vec![]
            },
        }
    }

    const EXIT_1: ExitFacts = ExitFacts {
        code: Some(1),
        signal: None,
    };

    #[test]
    fn a_started_command_is_never_a_runner_failure() {
        for interrupted in [false, true] {
            let v = judge(
                RunnerStatus::Started,
                ran(true),
                Some("bwrap: fake"),
                &EXIT_1,
                interrupted,
            );
            assert_eq!(v, ran(true), "the denial is kept");
        }
    }

    #[test]
    fn a_command_that_cannot_be_executed_is_neither_denied_nor_a_runner_failure() {
        let reported = RunnerStatus::NotExecutable {
            code: 126,
            message: "./x: Permission denied".into(),
        };
        // Its "Permission denied" line is the exec's, not a refused effect.
        let v = judge(reported, ran(true), Some("bwrap: fake"), &EXIT_1, false);
        assert_eq!(v, ran(false));
    }

    #[test]
    fn a_failure_record_or_silence_is_a_runner_failure_unless_interrupted() {
        assert_eq!(
            judge(
                RunnerStatus::Failed("why".into()),
                ran(true),
                None,
                &EXIT_1,
                false
            ),
            Verdict::RunnerFailed("why".into())
        );
        assert_eq!(
            judge(
                RunnerStatus::Failed(" ".into()),
                ran(false),
                None,
                &EXIT_1,
                false
            ),
            Verdict::RunnerFailed("the runner failed without saying why".into())
        );
        assert_eq!(
            judge(
                RunnerStatus::Silent,
                ran(false),
                Some("bwrap: x"),
                &EXIT_1,
                false
            ),
            Verdict::RunnerFailed("bwrap: x".into())
        );
        assert_eq!(
            judge(RunnerStatus::Silent, ran(false), None, &EXIT_1, false),
            Verdict::RunnerFailed(
                "the runner exited before starting the command (exit status 1)".into()
            )
        );
        let killed = ExitFacts {
            code: None,
            signal: Some(9),
        };
        assert_eq!(
            judge(RunnerStatus::Silent, ran(false), None, &killed, false),
            Verdict::RunnerFailed(
                "the runner exited before starting the command (killed by signal 9)".into()
            )
        );
        for reported in [RunnerStatus::Silent, RunnerStatus::Failed("why".into())] {
            assert_eq!(
                judge(reported, ran(true), Some("bwrap: x"), &killed, true),
                ran(false)
            );
        }
    }
}
