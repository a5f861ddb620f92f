//! What the supervisor remembers between calls, so that a governed call
//! costs little more than its notification: the class of a directory, of
//! a file reached through a descriptor, a thread's working directory, a
//! thread's umask. Nothing here is trusted
//! past what would have been read afresh:
//!
//! - **Directory classes**, by identity *and* mount (the `..` walk crosses
//!   mounts, so one directory can lie differently under two of them). Each
//!   entry holds the directory open, so its inode number and its mount id
//!   cannot be reused while the entry lives. A class follows only from the
//!   directory's ancestors; every rename is performed by the fence, and one
//!   that moves a directory clears the cache before and after it
//!   (`forget_dirs`). A walk whose result could predate such a rename is not
//!   kept (`epoch`). Changes made outside the run (a rename by another user of
//!   the machine, a mount) are outside what the fence governs anyway.
//! - **Files reached through a descriptor** (fchmod, fchown, futimens, ...
//!   of a file the command opened), judged inside by the kernel's name of
//!   that descriptor: kept by identity and mount with that name, and used
//!   only while `/proc/self/fd/N` of the new descriptor still reads the very
//!   same name (one `readlink`, which the walk needed anyway, instead of
//!   re-resolving that name from `/`). Emptied around every rename, link
//!   and unlink the fence performs.
//! - **Working directories**, per thread, checked on every use: the
//!   thread's current cwd is looked up (one `statx` of `/proc/<tid>/cwd`)
//!   and the held handle is used only when it is that very directory on
//!   that very mount. chdir, fchdir, threads with or without a shared
//!   `fs_struct`, exec and a recycled tid need no bookkeeping: what is
//!   compared is what the kernel says the thread's cwd is now.
//! - **umasks**, per thread: the only source is `/proc/<tid>/status`, too
//!   dear to read per create. The filter notifies `umask`, `execve` and
//!   `execveat` (then lets them run: `observe`), and every one of them
//!   drops every umask kept (a thread shares its umask with every thread
//!   of its `fs_struct`, which is not visible from here). The kernel makes
//!   the change only after the answer, so the caller is *pending* until it
//!   is seen again (its next notification) or gone (an exec by a
//!   non-leader thread ends under the leader's tid): while any thread is
//!   pending, no umask is kept or used. An entry holds a pidfd of its
//!   thread (`PIDFD_THREAD`) and counts only while that thread lives, so a
//!   tid reused by another task never inherits it; exec is the one way a
//!   tid changes task without dying (the leader's tid passes to the
//!   thread that execs), which is why exec is observed.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustix::fs::{Statx, StatxFlags};
use rustix::process::{Pid, PidfdFlags};

use super::*;

/// A directory (or a file) as a `..` walk sees it: device, inode and mount.
pub(super) type Place = (u64, u64, u64);

/// `STATX_MNT_ID_UNIQUE` (Linux 6.8): never reused; older kernels fill
/// `STATX_MNT_ID`, which a held descriptor keeps from reuse as well.
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;
/// `PIDFD_THREAD` (Linux 6.9) is `O_EXCL`.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

fn place(sx: &Statx) -> Option<Place> {
    let mnt = StatxFlags::MNT_ID.bits() | STATX_MNT_ID_UNIQUE;
    if sx.stx_mask & mnt == 0 || sx.stx_mask & StatxFlags::INO.bits() == 0 {
        return None;
    }
    let dev = fs::makedev(sx.stx_dev_major, sx.stx_dev_minor);
    Some((dev, sx.stx_ino, sx.stx_mnt_id))
}

pub(super) fn place_of(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: AtFlags,
) -> Result<Option<Place>, Errno> {
    let want =
        StatxFlags::INO | StatxFlags::MNT_ID | StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE);
    Ok(place(&fs::statx(dir, path, flags, want)?))
}

#[derive(Debug, Default)]
pub(super) struct Caches {
    dirs: Mutex<Dirs>,
    files: Mutex<Files>,
    tasks: Mutex<Tasks>,
}

/// Files found inside through a descriptor (see `Fence::class_unnamed`),
/// by place, each with the kernel's name of the descriptor it was judged
/// through and held open (so that no other file takes its inode number
/// while it is kept). Few: what a command does to a file through a
/// descriptor it does soon after opening it.
#[derive(Debug, Default)]
struct Files {
    /// Bumped by every rename, link and unlink the fence performs.
    epoch: u64,
    map: HashMap<Place, (Vec<u8>, OwnedFd)>,
}

/// Kept files at most; the map is emptied when full.
const FILES: usize = 64;

#[derive(Debug, Default)]
struct Dirs {
    /// Bumped by every rename of a directory, before and after it.
    epoch: u64,
    map: HashMap<Place, (Class, OwnedFd)>,
}

#[derive(Debug, Default)]
struct Tasks {
    /// Bumped by every observed call and whenever a pending thread is
    /// cleared: a umask read before it may be stale.
    epoch: u64,
    pending: Vec<u32>,
    umask: HashMap<u32, (u32, OwnedFd)>,
    cwd: HashMap<u32, (Place, Arc<OwnedFd>)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked left a map that is merely incomplete.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many entries of each kind may hold a descriptor: a share of what
/// the descriptor limit leaves after the workers' own, so that a full
/// cache never makes a call fail for want of one (it is emptied instead).
fn budget(share: u64) -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    usize::try_from((limit.saturating_sub(256) / share).min(4096)).unwrap_or(0)
}

impl Caches {
    /// The class of `dir`, when a walk from it was kept; otherwise the
    /// ticket to keep the walk that the caller is about to make.
    pub(super) fn dir_class(&self, dir: BorrowedFd<'_>) -> Result<Lookup<Class>, Errno> {
        let Some(at) = place_of(dir, c"", AtFlags::EMPTY_PATH)? else {
            return Ok(Lookup::Uncached);
        };
        let dirs = lock(&self.dirs);
        Ok(match dirs.map.get(&at) {
            Some((class, _)) => Lookup::Hit(*class),
            None => Lookup::Miss(Ticket {
                at,
                epoch: dirs.epoch,
            }),
        })
    }

    /// Keeps `class` for the walked directory unless a rename of a
    /// directory happened since the ticket was taken.
    pub(super) fn keep_dir(&self, ticket: Ticket, dir: BorrowedFd<'_>, class: Class) {
        let Ok(held) = rustix::io::fcntl_dupfd_cloexec(dir, 0) else {
            return;
        };
        let mut dirs = lock(&self.dirs);
        if dirs.epoch != ticket.epoch {
            return;
        }
        if dirs.map.len() >= budget(4) {
            dirs.map.clear();
        }
        dirs.map.insert(ticket.at, (class, held));
    }

    /// Before and after a rename that moves a directory.
    pub(super) fn forget_dirs(&self) {
        let mut dirs = lock(&self.dirs);
        dirs.epoch += 1;
        dirs.map.clear();
    }

    /// Whether the non-directory `obj`, at `at` and named `link` by the
    /// kernel now (`/proc/self/fd/N` of a descriptor of it), was judged
    /// inside through that very name; otherwise the ticket to keep the
    /// judgement the caller is about to make. The name is the kernel's
    /// path of the descriptor's own dentry, so an equal name on the same
    /// mount is the same chain of directories: the file was not moved,
    /// nor any directory above it (a move renames the path; an unlinked
    /// file's name ends in " (deleted)"), and a directory's class follows
    /// from its chain alone.
    pub(super) fn file_inside(&self, at: Place, link: &[u8]) -> Lookup<()> {
        let files = lock(&self.files);
        match files.map.get(&at) {
            Some((name, _)) if name.as_slice() == link => Lookup::Hit(()),
            _ => Lookup::Miss(Ticket {
                at,
                epoch: files.epoch,
            }),
        }
    }

    /// Keeps `obj` (named `link`) as inside, unless the fence renamed,
    /// linked or unlinked anything since the ticket was taken.
    pub(super) fn keep_file(&self, ticket: Ticket, obj: BorrowedFd<'_>, link: &[u8]) {
        let Ok(held) = rustix::io::fcntl_dupfd_cloexec(obj, 0) else {
            return;
        };
        let mut files = lock(&self.files);
        if files.epoch != ticket.epoch {
            return;
        }
        if files.map.len() >= FILES.min(budget(16)) {
            files.map.clear();
        }
        files.map.insert(ticket.at, (link.to_vec(), held));
    }

    /// Around every rename, link and unlink: nothing judged before it is
    /// kept, and no removed file stays held open here.
    pub(super) fn forget_files(&self) {
        let mut files = lock(&self.files);
        files.epoch += 1;
        files.map.clear();
    }

    /// The thread's working directory: the held handle when it is still the
    /// thread's cwd (same inode, same mount), else a fresh one.
    pub(super) fn cwd(&self, tid: u32) -> Result<Arc<OwnedFd>, Errno> {
        let path = format!("/proc/{tid}/cwd");
        let now = match place_of(CWD, &cstring(path.as_bytes())?, AtFlags::empty()) {
            Err(Errno::NOENT) => return Err(Errno::BADF),
            other => other?,
        };
        if let Some(now) = now
            && let Some((held, fd)) = lock(&self.tasks).cwd.get(&tid)
            && *held == now
        {
            return Ok(fd.clone());
        }
        let fd = match fs::open(&path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
            Err(Errno::NOENT) => return Err(Errno::BADF),
            other => Arc::new(other?),
        };
        // Kept under the identity of what was opened, so a chdir between
        // the statx and the open is caught by the next call's comparison.
        if let Some(opened) = place_of(fd.as_fd(), c"", AtFlags::EMPTY_PATH)? {
            let mut tasks = lock(&self.tasks);
            if tasks.cwd.len() >= budget(16) {
                tasks.cwd.clear();
            }
            tasks.cwd.insert(tid, (opened, fd.clone()));
        }
        Ok(fd)
    }

    /// The thread's umask, from the cache when that is safe, else from
    /// `/proc/<tid>/status` (kept when nothing could have changed it
    /// meanwhile).
    pub(super) fn umask(&self, tid: u32) -> u32 {
        let epoch = {
            let mut tasks = lock(&self.tasks);
            tasks.prune_pending();
            if tasks.pending.is_empty()
                && let Some((mask, pidfd)) = tasks.umask.get(&tid)
            {
                if alive(pidfd) {
                    return *mask;
                }
                tasks.umask.remove(&tid);
            }
            tasks.epoch
        };
        // The pidfd first: if its thread still lives after the read, the
        // status read was of that thread.
        let pidfd = Pid::from_raw(tid as i32).and_then(|pid| {
            rustix::process::pidfd_open(pid, PidfdFlags::from_bits_retain(PIDFD_THREAD)).ok()
        });
        let Some(mask) = read_umask(tid) else {
            return 0o077;
        };
        if let Some(pidfd) = pidfd
            && alive(&pidfd)
        {
            let mut tasks = lock(&self.tasks);
            if tasks.epoch == epoch && tasks.pending.is_empty() {
                if tasks.umask.len() >= budget(16) {
                    tasks.umask.clear();
                }
                tasks.umask.insert(tid, (mask, pidfd));
            }
        }
        mask
    }

    /// Thread `tid` made a call that may change its umask (umask) or its
    /// tid (with `exec`: execve, execveat); the kernel performs it after the
    /// answer. An exec keeps the umask, and the tid of a thread-group
    /// leader, which only a non-leader's exec takes over: a leader's exec
    /// changes nothing kept here (a pidfd opens without PIDFD_THREAD only
    /// for a leader; a non-leader cannot become one but by its own exec).
    pub(super) fn observe(&self, tid: u32, exec: bool) {
        if exec
            && Pid::from_raw(tid as i32)
                .is_some_and(|pid| rustix::process::pidfd_open(pid, PidfdFlags::empty()).is_ok())
        {
            return;
        }
        let mut tasks = lock(&self.tasks);
        tasks.epoch += 1;
        tasks.umask.clear();
        if !tasks.pending.contains(&tid) {
            tasks.pending.push(tid);
        }
    }

    /// Thread `tid` made another call: whatever it observed is done.
    pub(super) fn seen(&self, tid: u32) {
        let mut tasks = lock(&self.tasks);
        if let Some(i) = tasks.pending.iter().position(|t| *t == tid) {
            tasks.pending.swap_remove(i);
            tasks.epoch += 1;
            tasks.umask.clear();
        }
    }
}

impl Tasks {
    /// A pending thread that is gone finished its call (or never will).
    fn prune_pending(&mut self) {
        let before = self.pending.len();
        self.pending.retain(|tid| {
            Pid::from_raw(*tid as i32)
                .is_some_and(|pid| rustix::process::test_kill_process(pid) != Err(Errno::SRCH))
        });
        if self.pending.len() != before {
            self.epoch += 1;
            self.umask.clear();
        }
    }
}

/// Whether the thread behind `pidfd` still lives (a thread pidfd reads as
/// ready once its thread has exited).
fn alive(pidfd: &OwnedFd) -> bool {
    let (rc, revents) = crate::sys::poll_now(pidfd, libc::POLLIN);
    rc == 0 && revents == 0
}

fn read_umask(tid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
}

pub(super) enum Lookup<T> {
    Hit(T),
    Miss(Ticket),
    /// No identity to key on (no mount id): walk, and keep nothing.
    Uncached,
}

pub(super) struct Ticket {
    at: Place,
    epoch: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread pidfd reads as alive while its thread runs and as gone once
    /// it has exited: what a recycled tid is told apart by.
    #[test]
    fn a_thread_pidfd_tells_a_dead_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid()).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let pidfd =
            rustix::process::pidfd_open(tid, PidfdFlags::from_bits_retain(PIDFD_THREAD)).unwrap();
        assert!(alive(&pidfd));
        done_tx.send(()).unwrap();
        t.join().unwrap();
        // The kernel releases a joined thread's task before join returns
        // only after its exit notification: wait for it boundedly.
        let mut gone = false;
        for _ in 0..1000 {
            if !alive(&pidfd) {
                gone = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(gone);
    }

    /// Run on a thread of its own: a non-leader, whose exec would move
    /// the leader's tid to it.
    #[test]
    fn the_umask_is_kept_and_dropped_on_observed_calls() {
        std::thread::spawn(|| {
            let c = Caches::default();
            let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
            let leader = rustix::process::getpid().as_raw_nonzero().get() as u32;
            assert_ne!(tid, leader);
            let m = c.umask(tid);
            assert_eq!(read_umask(tid), Some(m));
            assert!(lock(&c.tasks).umask.contains_key(&tid));
            // The leader's exec keeps every umask and every tid.
            c.observe(leader, true);
            assert!(lock(&c.tasks).umask.contains_key(&tid));
            assert!(lock(&c.tasks).pending.is_empty());
            // A non-leader's exec: dropped, and pending until seen again.
            c.observe(tid, true);
            assert!(lock(&c.tasks).umask.is_empty());
            assert_eq!(c.umask(tid), m);
            assert!(lock(&c.tasks).umask.is_empty());
            c.seen(tid);
            assert_eq!(c.umask(tid), m);
            assert!(lock(&c.tasks).umask.contains_key(&tid));
            // umask by anyone drops every kept umask.
            c.observe(leader, false);
            assert!(lock(&c.tasks).umask.is_empty());
            c.seen(leader);
            assert_eq!(c.umask(tid), m);
            assert!(lock(&c.tasks).umask.contains_key(&tid));
        })
        .join()
        .unwrap();
    }
}
