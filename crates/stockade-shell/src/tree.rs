//! Ending a command's whole process tree, however it re-parented.
//!
//! A process group is not a tree: `setsid` leaves it, and a process whose
//! parent dies is re-parented away. Two mechanisms cannot be escaped that
//! way (Linux; elsewhere these are no-ops and the group kill is all there
//! is):
//!
//! - [`adopt_orphans`] makes this process a child subreaper: every orphan of
//!   every tree below it is re-parented here, never past it, so
//!   [`kill_descendants`] (walk our children's trees through
//!   `/proc/<pid>/task/*/children`, SIGKILL, reap our own children, walk
//!   again until a walk finds nothing) ends everything this process started.
//! - [`kill_below`] ends the tree below one child that is still running
//!   (a runner that is itself a subreaper, like `landlock-run`, keeps its
//!   tree closed while it lives): every descendant is stopped first, walk
//!   after walk until one finds nothing new (a stopped process cannot fork,
//!   and a fork in progress shows as a new child the next walk stops), then
//!   all are killed through pidfds taken while each was still in the tree,
//!   and waited for until each has exited.

/// Make orphans of every tree below this process its children (Linux);
/// elsewhere a no-op. Process-wide: call it where this process owns the
/// trees it starts (`stockade exec`, `stockade acp`).
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    {
        // Failing leaves orphans to init: the walks below still end what
        // is below a live child, only orphans of finished runs could
        // linger.
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// SIGKILL every descendant of this process and reap every child, until a
/// walk finds none. A child we may not signal (it changed its uid) is left
/// alone and never waited for, so no command can make this hang.
pub fn kill_descendants() {
    #[cfg(target_os = "linux")]
    linux::kill_descendants();
}

/// SIGKILL every descendant of `root` (not `root` itself), stopping them all
/// first so none can fork its way past the walk, and wait until each has
/// exited; the caller kills and reaps `root`. Their own parents reap them.
pub fn kill_below(root: u32) {
    #[cfg(target_os = "linux")]
    linux::kill_below(root);
    #[cfg(not(target_os = "linux"))]
    let _ = root;
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::OwnedFd;

    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::io::Errno;
    use rustix::process::{
        Pid, PidfdFlags, Signal, WaitOptions, getpid, kill_process, pidfd_open, pidfd_send_signal,
        waitpid,
    };

    /// The children of every thread of `pid`.
    fn children_of(pid: i32) -> Vec<i32> {
        let mut out = Vec::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return out;
        };
        for task in tasks.flatten() {
            let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
        out
    }

    /// State and parent from `/proc/<pid>/stat` (after the last `)`: a
    /// command name may contain spaces and parentheses).
    fn stat(pid: i32) -> Option<(char, i32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = rest.next()?.chars().next()?;
        let ppid = rest.next()?.parse().ok()?;
        Some((state, ppid))
    }

    /// Every live (not yet dead) process below `root`, each with the parent
    /// it was listed under.
    fn walk(root: i32) -> Vec<(i32, i32)> {
        let mut out: Vec<(i32, i32)> = children_of(root).into_iter().map(|c| (c, root)).collect();
        let mut next = 0;
        while next < out.len() {
            let pid = out[next].0;
            next += 1;
            for c in children_of(pid) {
                if !out.iter().any(|(p, _)| *p == c) {
                    out.push((c, pid));
                }
            }
        }
        out.retain(|(pid, _)| stat(*pid).is_some_and(|(s, _)| s != 'Z' && s != 'X'));
        out
    }

    /// A pidfd on `pid` while it is still `parent`'s child: one opened on a
    /// pid reused since the walk names a process whose parent is another
    /// (or, were it `parent`, a process of the tree anyway).
    fn hold(pid: i32, parent: i32) -> Result<OwnedFd, Errno> {
        let fd = pidfd_open(Pid::from_raw(pid).ok_or(Errno::SRCH)?, PidfdFlags::empty())?;
        match stat(pid) {
            Some((_, ppid)) if ppid == parent => Ok(fd),
            _ => Err(Errno::SRCH),
        }
    }

    /// One walk below `root`: stops and holds every process not held yet;
    /// whether there was any (or one moved and must be looked at again).
    fn stop_new(root: i32, held: &mut Vec<(i32, OwnedFd)>, refused: &mut Vec<i32>) -> bool {
        let mut new = false;
        for (pid, parent) in walk(root) {
            if held.iter().any(|(p, _)| *p == pid) || refused.contains(&pid) {
                continue;
            }
            match hold(pid, parent) {
                // EPERM: not ours to stop (its uid changed).
                Ok(fd) => match pidfd_send_signal(&fd, Signal::STOP) {
                    Ok(()) => {
                        held.push((pid, fd));
                        new = true;
                    }
                    Err(_) => refused.push(pid),
                },
                // Re-parented since the walk (or gone): the next walk lists
                // it under its new parent.
                Err(_) => new = true,
            }
        }
        new
    }

    pub(super) fn kill_below(root: u32) {
        let Ok(root) = i32::try_from(root) else {
            return;
        };
        let mut held: Vec<(i32, OwnedFd)> = Vec::new();
        let mut refused: Vec<i32> = Vec::new();
        // Stop, walk after walk, until a walk finds nothing new (a stopped
        // process makes nothing new), then kill all. One resumed meanwhile
        // by another of the tree (SIGCONT) could have forked: the walk
        // after the kill finds its child, and the round repeats. A killed
        // process forks no more, so the rounds end.
        while stop_new(root, &mut held, &mut refused) {
            while stop_new(root, &mut held, &mut refused) {}
            for (_, fd) in &held {
                let _ = pidfd_send_signal(fd, Signal::KILL);
            }
        }
        // Returned only once each has exited (its pidfd turns readable), so
        // nothing of the tree runs after the caller reports the run. A
        // process stuck in the kernel (uninterruptible, never for long
        // unless a filesystem hangs) is not waited for without end.
        let deadline = std::time::Instant::now() + STUCK;
        for (_, fd) in &held {
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let timeout = Timespec {
                    tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                    tv_nsec: i64::from(left.subsec_nanos()),
                };
                let mut fds = [PollFd::new(fd, PollFlags::IN)];
                match poll(&mut fds, Some(&timeout)) {
                    Err(Errno::INTR) => continue,
                    _ => break,
                }
            }
        }
    }

    /// How long [`kill_below`] waits for a killed tree to exit.
    const STUCK: std::time::Duration = std::time::Duration::from_secs(10);

    pub(super) fn kill_descendants() {
        let me = getpid().as_raw_pid();
        let mut untouchable: Vec<i32> = Vec::new();
        loop {
            // No child at all: then no descendant either (an orphan comes to
            // us, never past us, so a live descendant has a live chain of
            // parents up to one of our children), and nothing is read from
            // /proc: each read of /proc/<pid>/task/* leaves an entry the
            // kernel must drop again when that process is reaped.
            if reap_exited() {
                return;
            }
            let mut live = false;
            let mut killed = Vec::new();
            for (pid, parent) in walk(me) {
                if untouchable.contains(&pid) {
                    continue;
                }
                live = true;
                let sent = if parent == me {
                    // Our own child: its pid is ours until we reap it.
                    Pid::from_raw(pid)
                        .ok_or(Errno::SRCH)
                        .and_then(|p| kill_process(p, Signal::KILL))
                } else {
                    hold(pid, parent).and_then(|fd| pidfd_send_signal(&fd, Signal::KILL))
                };
                match sent {
                    Ok(()) if parent == me => killed.push(pid),
                    Ok(()) => {}
                    Err(Errno::PERM) => untouchable.push(pid),
                    Err(_) => {}
                }
            }
            if !live {
                // Whatever is left we may not signal; it is never waited
                // for.
                reap_exited();
                return;
            }
            if killed.is_empty() {
                // Only deeper ones, dying: their parents reap them, or they
                // become ours. Not a busy loop meanwhile.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // Only children we killed are waited for: once reaped, their
            // own children have been handed to us for the next walk.
            for pid in killed {
                if let Some(p) = Pid::from_raw(pid) {
                    while let Err(Errno::INTR) = waitpid(Some(p), WaitOptions::empty()) {}
                }
            }
        }
    }

    /// `__WALL`, which rustix does not name: children made by `clone` with
    /// another exit signal count too.
    const WALL: u32 = 0x4000_0000;

    /// Reap every child that already exited, without waiting; whether no
    /// child at all is left.
    fn reap_exited() -> bool {
        let options = WaitOptions::NOHANG | WaitOptions::from_bits_retain(WALL);
        loop {
            match rustix::process::wait(options) {
                Ok(Some(_)) => {}
                Ok(None) => return false,
                Err(e) => return e == Errno::CHILD,
            }
        }
    }
}
