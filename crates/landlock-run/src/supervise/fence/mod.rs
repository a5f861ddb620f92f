//! What the supervisor decides, and the operation it then performs itself.
//!
//! Never "check a path, then let the kernel resolve it again": a confined
//! thread could swap a symlink in between. Every call is resolved here, in the
//! supervisor, into open handles (an `O_PATH` descriptor for the object and
//! one for its parent directory), the handles are classified by identity
//! (device and inode, walking `..` up to a writable root), and the operation
//! is performed on those same handles. Paths the child names are bytes from
//! its memory, copied once by the caller of this module.
//!
//! One file per phase: `resolve` (names into handles), `classify` (handles
//! by identity), `perform` (the call on those handles); `grant` keeps what
//! an approval channel allowed at run time; the types they share and the
//! fence's construction are here.
//!
//! Only safe code: the kernel interface (reading the child's memory, the
//! notification ioctls) lives in `notify.rs` and `crate::sys`.
#![forbid(unsafe_code)]

mod cache;
mod classify;
mod grant;
mod perform;
mod resolve;

pub use grant::{Answer, Outside, take_outside};

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{
    self, AtFlags, CWD, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat, Timespec,
    Timestamps, XattrFlags,
};
use rustix::io::Errno;

use classify::parent_of_named;

/// `(st_dev, st_ino)`: what a name can never fake.
type Id = (u64, u64);

fn id(st: &Stat) -> Id {
    (st.st_dev, st.st_ino)
}

fn kind(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

/// Where a resolved object lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Beneath a writable root and not protected.
    Inside,
    /// Beneath a directory granted while the command ran (`--ask-fd`), and
    /// not beneath a writable root: as `Inside`, except that nothing is
    /// made, changed or reached through a dot-name beneath the grant (see
    /// `grant::beneath_grant`).
    Granted,
    /// A protected object or beneath a protected directory.
    Protected,
    /// A deny-read object or beneath a deny-read directory (and not beneath
    /// a writable root inside it): neither read nor changed.
    Denied,
    /// Anywhere else.
    Outside,
}

/// What the child asked for, decoded from its registers and memory.
#[derive(Debug, Clone)]
pub enum Call {
    /// listen(2) under deny and allow-listed (see `Fence::listen`).
    Listen {
        fd: i32,
        backlog: i32,
    },
    /// connect(2) where the supervisor governs TCP (see `Fence::connect`):
    /// the address as copied out of the child, once.
    Connect {
        fd: i32,
        addr: Vec<u8>,
    },
    /// open, openat, creat: with a write, create, truncate or tmpfile
    /// flag; read-only too when reads are governed (see `Fence::read_open`).
    Open {
        dirfd: i32,
        path: Vec<u8>,
        flags: u32,
        mode: u32,
    },
    Mkdir {
        dirfd: i32,
        path: Vec<u8>,
        mode: u32,
    },
    Mknod {
        dirfd: i32,
        path: Vec<u8>,
        mode: u32,
        dev: u64,
    },
    Symlink {
        target: Vec<u8>,
        dirfd: i32,
        path: Vec<u8>,
    },
    /// unlink, unlinkat, rmdir (`AT_REMOVEDIR`).
    Unlink {
        dirfd: i32,
        path: Vec<u8>,
        flags: u32,
    },
    Rename {
        old_dirfd: i32,
        old: Vec<u8>,
        new_dirfd: i32,
        new: Vec<u8>,
        flags: u32,
    },
    Link {
        old_dirfd: i32,
        old: Vec<u8>,
        new_dirfd: i32,
        new: Vec<u8>,
        flags: u32,
    },
    Truncate {
        path: Vec<u8>,
        len: u64,
    },
    Chmod {
        target: Target,
        mode: u32,
    },
    Chown {
        target: Target,
        uid: u32,
        gid: u32,
    },
    /// `None`: both to now.
    Utimes {
        target: Target,
        times: Option<[(i64, i64); 2]>,
    },
    SetXattr {
        target: Target,
        name: Vec<u8>,
        value: Vec<u8>,
        flags: u32,
    },
    RemoveXattr {
        target: Target,
        name: Vec<u8>,
    },
}

/// The object of a metadata call.
#[derive(Debug, Clone)]
pub enum Target {
    Path {
        dirfd: i32,
        path: Vec<u8>,
        follow: bool,
    },
    /// A descriptor of the child's (fchmod, fsetxattr, `AT_EMPTY_PATH`, ...).
    Fd(i32),
}

/// What the call returns in the child.
#[derive(Debug)]
pub enum Outcome {
    Value(i64),
    /// A descriptor to install in the child (open).
    Fd {
        fd: OwnedFd,
        cloexec: bool,
    },
    Err(Errno),
    /// Let the kernel perform the call itself
    /// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Only for a read-only open of an
    /// object outside every writable root, which the child's own Landlock
    /// domain then judges (see `Fence::read_open`).
    Continue,
}

/// The notifying thread, as seen from here.
#[derive(Debug, Clone, Copy)]
pub struct Child {
    pub tid: u32,
}

const AT_FDCWD: i32 = -100;
/// The flags an open must carry to be governed (the filter notifies on these).
const O_TMPFILE_BIT: u32 = 0o20_000_000;
const O_WRITE_MODES: u32 = 0o3;
const O_CREAT_BIT: u32 = 0o100;
const O_TRUNC_BIT: u32 = 0o1000;
/// Symlinks followed in one resolution, as the kernel's MAXSYMLINKS.
const MAX_LINKS: usize = 40;
/// `..` steps before a walk gives up (and calls the object outside).
const MAX_DEPTH: usize = 4096;
/// How often a create is retried when a name appears between look-up and create.
const MAX_RETRIES: usize = 8;

const PIPEFS_MAGIC: i64 = 0x5049_5045;
const SOCKFS_MAGIC: i64 = 0x534F_434B;
const ANON_INODE_FS_MAGIC: i64 = 0x0904_1934;

/// The roots and protected objects, by identity, fixed for the run.
#[derive(Debug, Default)]
pub struct Fence {
    /// Writable root directories: everything beneath may change.
    dirs: HashSet<Id>,
    /// Writable files (`/dev/null`): data only, never metadata.
    files: HashSet<Id>,
    /// Read-only objects inside the roots, with everything beneath them.
    protected: HashSet<Id>,
    /// Deny-read objects (`--deny-read`), with everything beneath them:
    /// never read, listed or changed through the supervisor, whatever name
    /// reaches them (a symlink, `..`, a descriptor, a hard link the caller
    /// named).
    denied: HashSet<Id>,
    /// Cannot be renamed or removed: the protected objects, their ancestors
    /// up to a root, and the roots themselves.
    pinned: HashSet<Id>,
    /// The kernel's sticky-directory protections (`fs.protected_symlinks`,
    /// `fs.protected_regular`, `fs.protected_fifos`), which it applies only
    /// when it follows a link or opens with O_CREAT itself; the supervisor
    /// does both its own way, so it applies them here.
    sticky: Sticky,
    /// `--allow-listen`: the only ports an inet socket of the command's
    /// may listen on, bound to a loopback address.
    listen_ports: Vec<u16>,
    /// Where a governed connect may go (see `allow_connect`).
    connect: ConnectRules,
    /// `--ctty`: the command's own terminal (see `own_terminal`).
    terminal: Option<OwnedFd>,
    /// Directory classes, working directories and umasks kept between
    /// calls (see `cache`).
    cache: cache::Caches,
    /// `--ask-fd`: an outside-only refusal may be asked about, and what
    /// the answers granted (see `grant`).
    /// Cleared when nothing more will be asked (the bound reached, the
    /// channel gone): a refusal then costs what it costs without one.
    asking: std::sync::atomic::AtomicBool,
    granted: std::sync::RwLock<grant::Granted>,
    /// Whether `granted` holds anything (read without its lock).
    any_granted: std::sync::atomic::AtomicBool,
}

/// What a governed connect(2) may reach.
#[derive(Debug, Default, Clone, Copy)]
pub struct ConnectRules {
    /// The proxy's port on 127.0.0.1: the only inet destination (none
    /// under deny).
    pub proxy_port: Option<u16>,
    /// AF_UNIX pathname and abstract addresses may be connected by the
    /// supervisor: only where the child's Landlock domain would not have
    /// judged them itself (no resolve_unix, no abstract scoping), since the
    /// supervisor is outside that domain.
    pub unix_pathname: bool,
    pub unix_abstract: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Sticky {
    symlinks: u8,
    regular: u8,
    fifos: u8,
}

impl Sticky {
    /// Unreadable: the strictest level the kernel knows.
    fn read() -> Sticky {
        let level = |name: &str, strictest: u8| {
            std::fs::read_to_string(format!("/proc/sys/fs/{name}"))
                .ok()
                .and_then(|t| t.trim().parse::<u8>().ok())
                .unwrap_or(strictest)
        };
        Sticky {
            symlinks: level("protected_symlinks", 1),
            regular: level("protected_regular", 2),
            fifos: level("protected_fifos", 2),
        }
    }
}

/// A resolved name: the directory that holds it, the last component, and the
/// object when it exists. `parent` is `None` for an object named without a
/// usable last component (`.`, `..`, `/`, a descriptor).
struct Entry {
    parent: Option<OwnedFd>,
    name: CString,
    obj: Option<Obj>,
}

struct Obj {
    fd: OwnedFd,
    st: Stat,
}

impl Obj {
    fn open(dir: BorrowedFd<'_>, name: &CStr) -> Result<Obj, Errno> {
        let fd = fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Obj::from_fd(fd)
    }

    fn from_fd(fd: OwnedFd) -> Result<Obj, Errno> {
        let st = fs::fstat(&fd)?;
        Ok(Obj { fd, st })
    }

    fn is_dir(&self) -> bool {
        kind(&self.st) == FileType::Directory
    }

    fn is_symlink(&self) -> bool {
        kind(&self.st) == FileType::Symlink
    }

    /// The magic `/proc/self/fd/N` name: opening or changing it reaches
    /// exactly this inode, whatever its names are by now.
    fn proc_path(&self) -> CString {
        proc_fd_path(self.fd.as_fd())
    }
}

fn proc_fd_path(fd: BorrowedFd<'_>) -> CString {
    use std::os::fd::AsRawFd;
    let text = format!("/proc/self/fd/{}", fd.as_raw_fd());
    // A decimal number has no NUL byte.
    CString::new(text).unwrap_or_default()
}

fn cstring(bytes: &[u8]) -> Result<CString, Errno> {
    CString::new(bytes).map_err(|_| Errno::INVAL)
}

fn dir_path() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

impl Fence {
    /// `rw`: the writable grants (directories or files); `protect`: objects
    /// inside them that must stay read-only. Fails when a protected object is
    /// not beneath a writable root directory.
    pub fn new(rw: &[OwnedFd], protect: &[OwnedFd]) -> Result<Fence, String> {
        let mut fence = Fence {
            sticky: Sticky::read(),
            ..Fence::default()
        };
        for fd in rw {
            let st = fs::fstat(fd).map_err(|e| format!("cannot stat a writable grant: {e}"))?;
            if kind(&st) == FileType::Directory {
                fence.dirs.insert(id(&st));
                fence.pinned.insert(id(&st));
            } else {
                fence.files.insert(id(&st));
            }
        }
        for fd in protect {
            let obj = fs::fstat(fd).map_err(|e| format!("cannot stat a protected path: {e}"))?;
            fence.protected.insert(id(&obj));
            fence.pinned.insert(id(&obj));
            let start = if kind(&obj) == FileType::Directory {
                fs::openat(fd, c"..", dir_path(), Mode::empty())
            } else {
                parent_of_named(fd.as_fd(), &obj).map_err(|_| Errno::NOENT)
            }
            .map_err(|e| format!("cannot open the directory of a protected path: {e}"))?;
            fence.pin_up_to_root(start)?;
        }
        Ok(fence)
    }

    /// `--deny-read` objects, held open by the caller: refused by identity
    /// wherever a walk up from an object meets one before a writable root.
    pub fn deny_read(&mut self, objects: &[OwnedFd]) -> Result<(), String> {
        for fd in objects {
            let st = fs::fstat(fd).map_err(|e| format!("cannot stat a deny-read path: {e}"))?;
            self.denied.insert(id(&st));
        }
        Ok(())
    }

    /// `--allow-listen`: a listen is performed only on a socket bound to
    /// a loopback address at one of `ports`.
    pub fn allow_listen(&mut self, ports: &[u16]) {
        self.listen_ports = ports.to_vec();
    }

    /// Where a governed connect may go.
    pub fn allow_connect(&mut self, rules: ConnectRules) {
        self.connect = rules;
    }

    /// `--ask-fd`: refusals made only because a place is outside every
    /// writable root are recorded for a question (see `grant`).
    pub fn ask(&mut self) {
        *self.asking.get_mut() = true;
    }

    /// Nothing more will be asked in this run.
    pub fn stop_asking(&self) {
        self.asking
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    fn asking(&self) -> bool {
        self.asking.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `--ctty`: `terminal` is the command's controlling terminal. A
    /// writable open of `/dev/tty` means that terminal to the kernel, but
    /// performed here it would open ours (the caller's): it opens
    /// `terminal` instead.
    pub fn own_terminal(&mut self, terminal: OwnedFd) {
        self.terminal = Some(terminal);
    }

    /// Thread `tid` is making a call the filter notifies only so that the
    /// supervisor sees it (umask, or with `exec` execve or execveat): the
    /// kernel performs it once answered (`Outcome::Continue`).
    pub fn observe(&self, tid: u32, exec: bool) -> Outcome {
        self.cache.observe(tid, exec);
        Outcome::Continue
    }

    /// Thread `tid` made a notified call: any observed call of its own has
    /// finished.
    pub fn seen(&self, tid: u32) {
        self.cache.seen(tid);
    }

    fn pin_up_to_root(&mut self, mut dir: OwnedFd) -> Result<(), String> {
        for _ in 0..MAX_DEPTH {
            let st = fs::fstat(&dir).map_err(|e| format!("cannot stat: {e}"))?;
            if self.dirs.contains(&id(&st)) {
                return Ok(());
            }
            self.pinned.insert(id(&st));
            let up = fs::openat(&dir, c"..", dir_path(), Mode::empty())
                .map_err(|e| format!("cannot open ..: {e}"))?;
            if fs::fstat(&up).map(|s| id(&s)) == Ok(id(&st)) {
                break;
            }
            dir = up;
        }
        Err("a protected path is not beneath a writable root".into())
    }
}

#[cfg(test)]
mod tests {
    use super::perform::{inet_target, timestamps};
    use super::resolve::for_child;
    use super::*;

    fn child() -> Child {
        Child { tid: 42 }
    }

    #[test]
    fn this_process_names_are_spelled_for_the_child() {
        let c = child();
        assert_eq!(for_child(c, b"/dev/stdout"), b"/proc/42/fd/1");
        assert_eq!(for_child(c, b"/dev/fd/7"), b"/proc/42/fd/7");
        assert_eq!(for_child(c, b"/proc/self/fd/3/x"), b"/proc/42/fd/3/x");
        assert_eq!(for_child(c, b"/proc/thread-self/cwd"), b"/proc/42/cwd");
        assert_eq!(for_child(c, b"/proc/selfish"), b"/proc/selfish");
        assert_eq!(for_child(c, b"/dev/stdout2"), b"/dev/stdout2");
    }

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut a = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        a.extend(port.to_be_bytes());
        a.extend(ip);
        a.extend([0u8; 8]);
        a
    }

    fn v6(ip: std::net::Ipv6Addr, port: u16) -> Vec<u8> {
        let mut a = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        a.extend(port.to_be_bytes());
        a.extend([0u8; 4]);
        a.extend(ip.octets());
        a.extend([0u8; 4]);
        a
    }

    /// Only 127.0.0.1 (or its v4-mapped form) at the proxy's port passes;
    /// another port, another loopback address, ::1, any other address and
    /// no proxy at all (deny) are EACCES; short addresses are EINVAL as
    /// the kernel says, other families EAFNOSUPPORT.
    #[test]
    fn a_governed_connect_reaches_only_the_proxy() {
        let p = Some(3128);
        let ok = inet_target(&v4([127, 0, 0, 1], 3128), p).unwrap().unwrap();
        assert_eq!(ok, "127.0.0.1:3128".parse().unwrap());
        let mapped = "::ffff:127.0.0.1".parse().unwrap();
        assert!(inet_target(&v6(mapped, 3128), p).unwrap().is_some());
        for refused in [
            v4([127, 0, 0, 1], 3129),
            v4([127, 0, 0, 2], 3128),
            v4([10, 0, 0, 1], 3128),
            v4([0, 0, 0, 0], 3128),
            v6(std::net::Ipv6Addr::LOCALHOST, 3128),
            v6("::ffff:10.0.0.1".parse().unwrap(), 3128),
        ] {
            assert_eq!(inet_target(&refused, p), Err(Errno::ACCESS), "{refused:?}");
        }
        assert_eq!(
            inet_target(&v4([127, 0, 0, 1], 3128), None),
            Err(Errno::ACCESS)
        );
        assert_eq!(
            inet_target(&v4([127, 0, 0, 1], 3128)[..15], p),
            Err(Errno::INVAL)
        );
        assert_eq!(inet_target(&[], p), Err(Errno::INVAL));
        let unspec = (libc::AF_UNSPEC as u16).to_ne_bytes();
        assert_eq!(inet_target(&unspec, p), Ok(None));
        let unix = (libc::AF_UNIX as u16).to_ne_bytes();
        assert_eq!(inet_target(&unix, p), Err(Errno::AFNOSUPPORT));
    }

    #[test]
    fn timestamps_default_to_now() {
        let ts = timestamps(None);
        assert_eq!(ts.last_access.tv_nsec, (1 << 30) - 1);
        assert_eq!(ts.last_modification.tv_nsec, (1 << 30) - 1);
        let ts = timestamps(Some([(1, 2), (3, 4)]));
        assert_eq!(
            (ts.last_access.tv_sec, ts.last_modification.tv_nsec),
            (1, 4)
        );
    }
}
