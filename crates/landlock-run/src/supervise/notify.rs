//! The kernel side of supervision: the seccomp listener (receive, check,
//! answer, install a descriptor), reading the child's memory, and the one
//! ioctl performed for it. The system calls themselves are in `crate::sys`;
//! the decoding is safe code.
#![forbid(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::io::Errno;

use super::fence::{Call, Outcome, Target};
use super::filter::{self, Sys};
use crate::sys;

/// One notification: which thread, which call, its registers.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub id: u64,
    pub tid: u32,
    pub nr: i64,
    pub args: [u64; 6],
}

pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    pub fn new(fd: OwnedFd) -> Listener {
        // Each notification is answered while its thread waits, so a
        // direct hand-over of the CPU is what the wait is; an older kernel
        // keeps the ordinary wake-up.
        let _ = sys::notif_sync_wake_up(&fd);
        Listener { fd }
    }

    /// Blocks for the next notification. `Ok(None)`: the notifying thread
    /// went away before it could be read (ENOENT); try again. `Err` with
    /// `ErrorKind::NotConnected`: no process uses the filter any more.
    pub fn recv(&self) -> io::Result<Option<Request>> {
        match sys::notif_recv(&self.fd) {
            Ok(n) => Ok(Some(Request {
                id: n.id,
                tid: n.pid,
                nr: i64::from(n.data.nr),
                args: n.data.args,
            })),
            // Once every user of the filter is gone, RECV fails at once,
            // forever: tell that apart from one thread that died, or the
            // workers would spin.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && self.hung_up() => Err(
                io::Error::new(io::ErrorKind::NotConnected, "the filter has no users"),
            ),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The listener reports POLLHUP when no task uses the filter.
    fn hung_up(&self) -> bool {
        let (rc, revents) = sys::poll_now(&self.fd, libc::POLLIN);
        rc > 0 && revents & libc::POLLIN == 0 && revents & (libc::POLLHUP | libc::POLLERR) != 0
    }

    /// The thread is still blocked in this very call: what was read from
    /// its memory and /proc belongs to it, not to a recycled tid.
    pub fn valid(&self, id: u64) -> bool {
        sys::notif_id_valid(&self.fd, id)
    }

    /// Answers `id`. A thread that died meanwhile (ENOENT) needs no answer.
    pub fn respond(&self, id: u64, outcome: Outcome) {
        let mut flags = 0;
        let (val, error) = match outcome {
            Outcome::Value(v) => (v, 0),
            Outcome::Continue => {
                flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
                (0, 0)
            }
            Outcome::Err(e) => (0, -e.raw_os_error()),
            Outcome::Fd { fd, cloexec } => {
                let mut add = libc::seccomp_notif_addfd {
                    id,
                    flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                    srcfd: fd.as_raw_fd() as u32,
                    newfd: 0,
                    newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
                };
                // With FLAG_SEND the install and the answer are one step:
                // the call returns the new number, nothing else can answer.
                if sys::notif_addfd(&self.fd, &mut add).is_ok() {
                    return;
                }
                (0, -libc::EMFILE)
            }
        };
        let mut resp = libc::seccomp_notif_resp {
            id,
            val,
            error,
            flags,
        };
        let _ = sys::notif_send(&self.fd, &mut resp);
    }
}

/// Copies `len` bytes at `addr` out of thread `tid`.
fn read_exact(tid: u32, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
    if buf.is_empty() {
        return Ok(());
    }
    let n = sys::process_vm_read(tid, addr, buf);
    if n == buf.len() as isize {
        Ok(())
    } else if n < 0 {
        Err(Errno::from_io_error(&io::Error::last_os_error()).unwrap_or(Errno::FAULT))
    } else {
        Err(Errno::FAULT)
    }
}

const PAGE: u64 = 4096;
/// PATH_MAX, NUL included; also the longest xattr name the kernel takes (255).
const PATH_MAX: usize = 4096;
const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: usize = 65536;

/// The first read of a string: most paths end well before it, and a
/// read to the end of the page copied up to 4 KiB for each of them.
const FIRST_READ: usize = 256;

/// A NUL-terminated string at `addr`, read page by page (the first read
/// shorter) so that a string ending just before an unmapped page is still
/// read.
fn read_cstr(tid: u32, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
    if addr == 0 {
        return Err(Errno::FAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let room = (PAGE - at % PAGE) as usize;
        let first = if out.is_empty() { FIRST_READ } else { room };
        let mut chunk = vec![0u8; room.min(first).min(max - out.len())];
        read_exact(tid, at, &mut chunk)?;
        if let Some(end) = chunk.iter().position(|b| *b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk);
        at += chunk.len() as u64;
    }
    Err(Errno::NAMETOOLONG)
}

fn read_vec(tid: u32, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; len];
    if len > 0 && addr == 0 {
        return Err(Errno::FAULT);
    }
    read_exact(tid, addr, &mut buf)?;
    Ok(buf)
}

fn read_i64s<const N: usize>(tid: u32, addr: u64) -> Result<[i64; N], Errno> {
    let bytes = read_vec(tid, addr, N * 8)?;
    let mut out = [0i64; N];
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        out[i] = i64::from_ne_bytes(word);
    }
    Ok(out)
}

/// What the supervisor does for one request.
pub enum Decoded {
    Call(Call),
    /// A call notified only to be seen (`filter::OBSERVED`); `exec`: an
    /// execve or execveat (else umask).
    Observed {
        exec: bool,
    },
    Ioctl {
        fd: i32,
        cmd: u32,
        arg: Vec<u8>,
    },
}

const AT_FDCWD: i32 = -100;
/// sizeof(struct sockaddr_storage).
const SOCKADDR_STORAGE: usize = 128;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_EMPTY_PATH: u64 = 0x1000;

/// Reads the call's arguments out of the child. Registers are taken as the
/// C types the kernel takes them as (ints truncate).
pub fn decode(req: &Request) -> Result<Decoded, Errno> {
    let sys = filter::lookup(req.nr).ok_or(Errno::NOSYS)?;
    let a = req.args;
    let tid = req.tid;
    let int = |i: usize| a[i] as u32 as i32;
    let uint = |i: usize| a[i] as u32;
    let path = |i: usize| read_cstr(tid, a[i], PATH_MAX);
    // A metadata call's object: a path (following the last symlink unless
    // told not to) or, with AT_EMPTY_PATH and "", the descriptor itself.
    let target = |dirfd: i32, path_arg: usize, flags: u64| -> Result<Target, Errno> {
        let p = read_cstr(tid, a[path_arg], PATH_MAX)?;
        if p.is_empty() && flags & AT_EMPTY_PATH != 0 {
            return Ok(Target::Fd(dirfd));
        }
        Ok(Target::Path {
            dirfd,
            path: p,
            follow: flags & AT_SYMLINK_NOFOLLOW == 0,
        })
    };
    let at_path = |path: Vec<u8>, follow: bool| Target::Path {
        dirfd: AT_FDCWD,
        path,
        follow,
    };
    let times_spec = |addr: u64| -> Result<Option<[(i64, i64); 2]>, Errno> {
        if addr == 0 {
            return Ok(None);
        }
        let [s0, n0, s1, n1] = read_i64s::<4>(tid, addr)?;
        Ok(Some([(s0, n0), (s1, n1)]))
    };
    // struct timeval[2]: microseconds.
    let times_val = |addr: u64| -> Result<Option<[(i64, i64); 2]>, Errno> {
        if addr == 0 {
            return Ok(None);
        }
        let [s0, u0, s1, u1] = read_i64s::<4>(tid, addr)?;
        if !(0..1_000_000).contains(&u0) || !(0..1_000_000).contains(&u1) {
            return Err(Errno::INVAL);
        }
        Ok(Some([(s0, u0 * 1000), (s1, u1 * 1000)]))
    };
    let xattr_value = |addr: u64, size: u64| -> Result<Vec<u8>, Errno> {
        let size = usize::try_from(size).map_err(|_| Errno::TOOBIG)?;
        if size > XATTR_SIZE_MAX {
            return Err(Errno::TOOBIG);
        }
        read_vec(tid, addr, size)
    };
    let name = |i: usize| {
        read_cstr(tid, a[i], XATTR_NAME_MAX + 1).map_err(|e| match e {
            Errno::NAMETOOLONG => Errno::RANGE,
            e => e,
        })
    };
    let call = match sys {
        Sys::Umask => return Ok(Decoded::Observed { exec: false }),
        Sys::Execve | Sys::Execveat => return Ok(Decoded::Observed { exec: true }),
        Sys::Open => Call::Open {
            dirfd: AT_FDCWD,
            path: path(0)?,
            flags: uint(1),
            mode: uint(2),
        },
        Sys::Openat => Call::Open {
            dirfd: int(0),
            path: path(1)?,
            flags: uint(2),
            mode: uint(3),
        },
        Sys::Creat => Call::Open {
            dirfd: AT_FDCWD,
            path: path(0)?,
            flags: (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u32,
            mode: uint(1),
        },
        Sys::Mkdir => Call::Mkdir {
            dirfd: AT_FDCWD,
            path: path(0)?,
            mode: uint(1),
        },
        Sys::Mkdirat => Call::Mkdir {
            dirfd: int(0),
            path: path(1)?,
            mode: uint(2),
        },
        Sys::Mknod => Call::Mknod {
            dirfd: AT_FDCWD,
            path: path(0)?,
            mode: uint(1),
            dev: a[2],
        },
        Sys::Mknodat => Call::Mknod {
            dirfd: int(0),
            path: path(1)?,
            mode: uint(2),
            dev: a[3],
        },
        Sys::Symlink => Call::Symlink {
            target: path(0)?,
            dirfd: AT_FDCWD,
            path: path(1)?,
        },
        Sys::Symlinkat => Call::Symlink {
            target: path(0)?,
            dirfd: int(1),
            path: path(2)?,
        },
        Sys::Unlink => Call::Unlink {
            dirfd: AT_FDCWD,
            path: path(0)?,
            flags: 0,
        },
        Sys::Rmdir => Call::Unlink {
            dirfd: AT_FDCWD,
            path: path(0)?,
            flags: libc::AT_REMOVEDIR as u32,
        },
        Sys::Unlinkat => Call::Unlink {
            dirfd: int(0),
            path: path(1)?,
            flags: uint(2),
        },
        Sys::Rename => Call::Rename {
            old_dirfd: AT_FDCWD,
            old: path(0)?,
            new_dirfd: AT_FDCWD,
            new: path(1)?,
            flags: 0,
        },
        Sys::Renameat => Call::Rename {
            old_dirfd: int(0),
            old: path(1)?,
            new_dirfd: int(2),
            new: path(3)?,
            flags: 0,
        },
        Sys::Renameat2 => Call::Rename {
            old_dirfd: int(0),
            old: path(1)?,
            new_dirfd: int(2),
            new: path(3)?,
            flags: uint(4),
        },
        Sys::Link => Call::Link {
            old_dirfd: AT_FDCWD,
            old: path(0)?,
            new_dirfd: AT_FDCWD,
            new: path(1)?,
            flags: 0,
        },
        Sys::Linkat => Call::Link {
            old_dirfd: int(0),
            old: path(1)?,
            new_dirfd: int(2),
            new: path(3)?,
            flags: uint(4),
        },
        Sys::Truncate => Call::Truncate {
            path: path(0)?,
            len: u64::try_from(a[1] as i64).map_err(|_| Errno::INVAL)?,
        },
        Sys::Chmod => Call::Chmod {
            target: at_path(path(0)?, true),
            mode: uint(1),
        },
        Sys::Fchmod => Call::Chmod {
            target: Target::Fd(int(0)),
            mode: uint(1),
        },
        Sys::Fchmodat => Call::Chmod {
            target: target(int(0), 1, 0)?,
            mode: uint(2),
        },
        Sys::Fchmodat2 => Call::Chmod {
            target: target(int(0), 1, a[3])?,
            mode: uint(2),
        },
        Sys::Chown => Call::Chown {
            target: at_path(path(0)?, true),
            uid: uint(1),
            gid: uint(2),
        },
        Sys::Lchown => Call::Chown {
            target: at_path(path(0)?, false),
            uid: uint(1),
            gid: uint(2),
        },
        Sys::Fchown => Call::Chown {
            target: Target::Fd(int(0)),
            uid: uint(1),
            gid: uint(2),
        },
        Sys::Fchownat => Call::Chown {
            target: target(int(0), 1, a[4])?,
            uid: uint(2),
            gid: uint(3),
        },
        Sys::Utime => {
            // struct utimbuf: two time_t, whole seconds.
            let times = if a[1] == 0 {
                None
            } else {
                let [at, mt] = read_i64s::<2>(tid, a[1])?;
                Some([(at, 0), (mt, 0)])
            };
            Call::Utimes {
                target: at_path(path(0)?, true),
                times,
            }
        }
        Sys::Utimes => Call::Utimes {
            target: at_path(path(0)?, true),
            times: times_val(a[1])?,
        },
        Sys::Futimesat => Call::Utimes {
            target: if a[1] == 0 {
                Target::Fd(int(0))
            } else {
                Target::Path {
                    dirfd: int(0),
                    path: path(1)?,
                    follow: true,
                }
            },
            times: times_val(a[2])?,
        },
        Sys::Utimensat => {
            let flags = a[3];
            // A NULL path: the descriptor itself (futimens).
            let target = if a[1] == 0 {
                if int(0) == AT_FDCWD {
                    return Err(Errno::FAULT);
                }
                Target::Fd(int(0))
            } else {
                target(int(0), 1, flags)?
            };
            Call::Utimes {
                target,
                times: times_spec(a[2])?,
            }
        }
        Sys::Setxattr | Sys::Lsetxattr => Call::SetXattr {
            target: at_path(path(0)?, sys == Sys::Setxattr),
            name: name(1)?,
            value: xattr_value(a[2], a[3])?,
            flags: uint(4),
        },
        Sys::Fsetxattr => Call::SetXattr {
            target: Target::Fd(int(0)),
            name: name(1)?,
            value: xattr_value(a[2], a[3])?,
            flags: uint(4),
        },
        Sys::Removexattr | Sys::Lremovexattr => Call::RemoveXattr {
            target: at_path(path(0)?, sys == Sys::Removexattr),
            name: name(1)?,
        },
        Sys::Fremovexattr => Call::RemoveXattr {
            target: Target::Fd(int(0)),
            name: name(1)?,
        },
        Sys::Listen => Call::Listen {
            fd: int(0),
            backlog: int(1),
        },
        Sys::Connect => {
            // As the kernel's move_addr_to_kernel: at most a
            // sockaddr_storage, copied once.
            let len = usize::try_from(int(2)).map_err(|_| Errno::INVAL)?;
            if len > SOCKADDR_STORAGE {
                return Err(Errno::INVAL);
            }
            Call::Connect {
                fd: int(0),
                addr: read_vec(tid, a[1], len)?,
            }
        }
        Sys::Ioctl => {
            let cmd = uint(1);
            let len = filter::ioctl_arg_len(cmd).ok_or(Errno::NOTTY)?;
            return Ok(Decoded::Ioctl {
                fd: int(0),
                cmd,
                arg: read_vec(tid, a[2], len)?,
            });
        }
    };
    Ok(Decoded::Call(call))
}

/// Performs a governed inode-flag ioctl on `file` with the child's argument,
/// copied: the kernel reads our copy, not memory the child can still change.
pub fn ioctl_set(file: &OwnedFd, cmd: u32, arg: &mut [u8]) -> Outcome {
    match sys::ioctl_set(file, cmd, arg) {
        Ok(rc) => Outcome::Value(i64::from(rc)),
        Err(e) => Outcome::Err(e),
    }
}
