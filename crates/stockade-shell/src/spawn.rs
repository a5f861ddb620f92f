//! A confined run started without fork (`landlock_run::spawn`): its
//! runner's descriptors are placed by posix_spawn's file actions instead
//! of a `pre_exec` hook, which would make std fork and copy this process's
//! address space (the SDK runs inside an agent that may hold gigabytes).
//! The child is waited for through a pidfd; what tokio's `Child` does for
//! the fork path (wait, kill, reap on drop) is done here.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;

use rustix::process::{
    Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, WaitIdStatus, pidfd_open, pidfd_send_signal,
    waitid,
};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::process::Launch;
use crate::spec::Stdin;

/// A child started by [`start`].
pub(crate) struct Spawned {
    pid: u32,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    /// stdout and stderr as one: the terminal's master, or one pipe
    /// (passthrough into one shared file).
    pub merged: Option<pipe::Receiver>,
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = std::io::pipe()?;
    Ok((r.into(), w.into()))
}

/// The child's environment as std's spawn would make it: this process's,
/// with `set` over it and `remove` taken out.
fn environment(set: &[(OsString, OsString)], remove: &[OsString]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .collect();
    env.extend(set.iter().cloned());
    env.retain(|(k, _)| !remove.contains(k));
    env
}

/// Starts `launch` with `placed` (the held descriptors and the status
/// pipe's write end) at the numbers the runner's argv names. `merge`: stdout
/// and stderr share one pipe (see `terminal::shared_output`).
pub(crate) fn start(
    launch: &Launch,
    program: &Path,
    args: &[OsString],
    placed: Vec<(OwnedFd, RawFd)>,
    merge: bool,
) -> io::Result<Spawned> {
    let mut fds: Vec<(OwnedFd, RawFd)> = Vec::with_capacity(placed.len() + 3);
    let mut stdin = None;
    let (mut stdout, mut stderr, mut merged) = (None, None, None);
    if let Some(t) = &launch.terminal {
        // Its terminal on all three (the runner makes it the controlling
        // terminal, `--ctty`); what it shows is read from the master.
        let slave = t.slave()?;
        fds.push((slave.try_clone()?, 0));
        fds.push((slave.try_clone()?, 1));
        fds.push((slave, 2));
        let wired = t.reader()?;
        fds.extend(placed);
        return finish(launch, program, args, fds, None, None, None, Some(wired));
    }
    match &launch.stdin {
        Stdin::Null => fds.push((std::fs::File::open("/dev/null")?.into(), 0)),
        // Left as it is: the child inherits our 0, whatever it is.
        Stdin::Inherit => {}
        Stdin::Bytes(_) => {
            let (r, w) = pipe_pair()?;
            fds.push((r, 0));
            stdin = Some(pipe::Sender::from_owned_fd(w)?);
        }
    }
    if merge {
        let (r, w) = pipe_pair()?;
        fds.push((w.try_clone()?, 1));
        fds.push((w, 2));
        merged = Some(r);
    } else {
        // Passthrough: our stdout is the command's (inherited as it is).
        if !launch.passthrough {
            let (r, w) = pipe_pair()?;
            fds.push((w, 1));
            stdout = Some(r);
        }
        let (r, w) = pipe_pair()?;
        fds.push((w, 2));
        stderr = Some(r);
    }
    fds.extend(placed);
    let receiver = |r: Option<OwnedFd>| r.map(pipe::Receiver::from_owned_fd).transpose();
    let (stdout, stderr, merged) = (receiver(stdout)?, receiver(stderr)?, receiver(merged)?);
    finish(launch, program, args, fds, stdin, stdout, stderr, merged)
}

/// Spawns with `fds` placed, and keeps our ends of its stdio.
#[allow(clippy::too_many_arguments)]
fn finish(
    launch: &Launch,
    program: &Path,
    args: &[OsString],
    fds: Vec<(OwnedFd, RawFd)>,
    stdin: Option<pipe::Sender>,
    stdout: Option<pipe::Receiver>,
    stderr: Option<pipe::Receiver>,
    merged: Option<pipe::Receiver>,
) -> io::Result<Spawned> {
    let remove = launch
        .wrap
        .as_ref()
        .map(|w| w.runner_env_remove.as_slice())
        .unwrap_or_default();
    let pid = landlock_run::spawn::spawn(landlock_run::spawn::Spawn {
        program,
        args,
        env: environment(&launch.env, remove),
        cwd: &launch.workdir,
        fds,
        own_group: launch.own_group,
    })?;
    // Our child, unreaped until we wait: its pid cannot be reused before
    // this open.
    let raw = Pid::from_raw(i32::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?)
        .ok_or_else(|| io::Error::other("pid 0"))?;
    let pidfd = match pidfd_open(raw, PidfdFlags::NONBLOCK) {
        Ok(fd) => fd,
        Err(e) => {
            // No handle to wait with: end it, and reap it, rather than
            // leave a process no one watches.
            let _ = rustix::process::kill_process(raw, Signal::KILL);
            let _ = rustix::process::waitpid(Some(raw), rustix::process::WaitOptions::empty());
            return Err(e.into());
        }
    };
    // Deprecated because a generic `T` may close or swap its descriptor
    // while registered (tokio#8587); an `OwnedFd` owned by the AsyncFd and
    // never handed out mutably keeps the one descriptor until it is
    // dropped, which is what `register`'s contract asks.
    #[allow(deprecated)]
    let pidfd = AsyncFd::new(pidfd)?;
    Ok(Spawned {
        pid,
        pidfd,
        status: None,
        stdin,
        stdout,
        stderr,
        merged,
    })
}

fn exit_status(s: WaitIdStatus) -> ExitStatus {
    // The wait status a waitpid would have given.
    let raw = match (s.exit_status(), s.terminating_signal()) {
        (Some(code), _) => (code & 0xff) << 8,
        (None, Some(sig)) => sig | if s.dumped() { 0x80 } else { 0 },
        (None, None) => 0,
    };
    ExitStatus::from_raw(raw)
}

impl Spawned {
    /// The pid while it is not reaped (as tokio's `Child::id`).
    pub(crate) fn id(&self) -> Option<u32> {
        self.status.is_none().then_some(self.pid)
    }

    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        loop {
            let mut ready = self.pidfd.readable().await?;
            match waitid(
                WaitId::PidFd(self.pidfd.get_ref().as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {
                Ok(Some(s)) => {
                    let s = exit_status(s);
                    self.status = Some(s);
                    return Ok(s);
                }
                Ok(None) => ready.clear_ready(),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// SIGKILL, unless it was reaped already.
    pub(crate) fn start_kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        pidfd_send_signal(self.pidfd.get_ref(), Signal::KILL).map_err(Into::into)
    }
}

/// As tokio's `kill_on_drop`: killed, and reaped off the runtime (a
/// process in uninterruptible sleep must not stall it), so no zombie is
/// left behind a dropped run.
impl Drop for Spawned {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let _ = pidfd_send_signal(self.pidfd.get_ref(), Signal::KILL);
        if let Ok(fd) = self.pidfd.get_ref().try_clone() {
            std::thread::spawn(move || {
                while let Err(rustix::io::Errno::INTR) =
                    waitid(WaitId::PidFd(fd.as_fd()), WaitIdOptions::EXITED)
                {}
            });
        }
    }
}
