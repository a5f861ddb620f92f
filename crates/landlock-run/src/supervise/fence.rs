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
//! Only safe code: the kernel interface (reading the child's memory, the
//! notification ioctls) lives in `notify.rs`.
#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{
    self, AtFlags, CWD, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat, Timespec,
    Timestamps, XattrFlags,
};
use rustix::io::Errno;

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

/// Whether `dir` is a sticky directory the protections cover at `level`
/// (1: world-writable, 2: group-writable too) and `owner` is neither us nor
/// the directory's owner.
fn sticky_foreign(dir: &Stat, owner: u32, level: u8) -> bool {
    const STICKY: u32 = 0o1000;
    let writable = match level {
        0 => return false,
        1 => 0o002,
        _ => 0o022,
    };
    dir.st_mode & STICKY != 0
        && dir.st_mode & writable != 0
        && owner != rustix::process::geteuid().as_raw()
        && owner != dir.st_uid
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

    /// `--ctty`: `terminal` is the command's controlling terminal. A
    /// writable open of `/dev/tty` means that terminal to the kernel, but
    /// performed here it would open ours (the caller's): it opens
    /// `terminal` instead.
    pub fn own_terminal(&mut self, terminal: OwnedFd) {
        self.terminal = Some(terminal);
    }

    /// The command's terminal, when `obj` is `/dev/tty` (character device
    /// 5:0) and the run has one.
    fn controlling_terminal(&self, obj: &Obj) -> Option<BorrowedFd<'_>> {
        let tty = kind(&obj.st) == FileType::CharacterDevice
            && rustix::fs::major(obj.st.st_rdev) == 5
            && rustix::fs::minor(obj.st.st_rdev) == 0;
        self.terminal.as_ref().filter(|_| tty).map(|t| t.as_fd())
    }

    /// listen(2) on the child's socket `fd`, performed here on the same
    /// socket (taken with pidfd_getfd), judged by its family (SO_DOMAIN,
    /// which the kernel fixed at creation; seccomp cannot see it). AF_UNIX:
    /// a Unix-socket server (tmux, ssh-agent, a language server) listens,
    /// and only what may connect to it is the question, which the socket
    /// rules answer. AF_INET/AF_INET6: only bound (an unbound socket would
    /// be bound by the kernel to every address), to 127.0.0.0/8, ::1 or
    /// ::ffff:127.0.0.0/104, at a granted port. A bound socket cannot be
    /// bound again, so what was checked is what listens. Every other
    /// family: refused.
    fn listen(&self, child: Child, fd: i32, backlog: i32) -> Result<(), Errno> {
        let socket = child_socket(child, fd)?;
        match rustix::net::sockopt::socket_domain(&socket)? {
            rustix::net::AddressFamily::UNIX => return rustix::net::listen(&socket, backlog),
            rustix::net::AddressFamily::INET | rustix::net::AddressFamily::INET6 => {}
            _ => return Err(Errno::ACCESS),
        }
        let listener = std::net::TcpListener::from(socket);
        let addr = listener.local_addr().map_err(|_| Errno::ACCESS)?;
        let loopback = match addr.ip() {
            std::net::IpAddr::V4(ip) => ip.is_loopback(),
            std::net::IpAddr::V6(ip) => {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        };
        if !loopback || !self.listen_ports.contains(&addr.port()) {
            return Err(Errno::ACCESS);
        }
        rustix::net::listen(&listener, backlog)
    }

    /// connect(2) on the child's socket `fd`, performed here on the same
    /// socket (pidfd_getfd) with the address copied out of the child once:
    /// a `SECCOMP_USER_NOTIF_FLAG_CONTINUE` would let the kernel read the
    /// address again, and look the descriptor up again, after the check (a
    /// second thread can rewrite the one and dup2 another socket onto the
    /// other), so nothing is continued. The socket's own family decides
    /// (SO_DOMAIN): an inet socket reaches only 127.0.0.1 (or its
    /// v4-mapped form) at the proxy's port; AF_UNSPEC (dissolving an
    /// association) is passed through. A non-blocking socket shares its
    /// open file description with ours, so EINPROGRESS comes back as is.
    /// AF_UNIX: performed here only where the child's Landlock domain has
    /// no rule of its own for that kind of address (see `ConnectRules`),
    /// so doing it from outside that domain changes nothing; relative
    /// paths are the child's, through its working directory.
    fn connect(&self, child: Child, fd: i32, addr: &[u8]) -> Result<(), Errno> {
        let socket = child_socket(child, fd)?;
        let family = addr
            .get(..2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .ok_or(Errno::INVAL)?;
        let domain = rustix::net::sockopt::socket_domain(&socket)?;
        if domain == rustix::net::AddressFamily::UNIX {
            return self.connect_unix(child, &socket, family, addr);
        }
        if domain != rustix::net::AddressFamily::INET && domain != rustix::net::AddressFamily::INET6
        {
            return Err(Errno::ACCESS);
        }
        let Some(target) = inet_target(addr, self.connect.proxy_port)? else {
            return rustix::net::connect_unspec(&socket);
        };
        // Rebuilt from the checked values: what is connected is what was
        // judged, whatever else the child's copy carried.
        match target {
            std::net::SocketAddr::V4(v4) => rustix::net::connect(&socket, &v4),
            std::net::SocketAddr::V6(v6) => rustix::net::connect(
                &socket,
                &std::net::SocketAddrV6::new(*v6.ip(), v6.port(), 0, 0),
            ),
        }
    }

    fn connect_unix(
        &self,
        child: Child,
        socket: &OwnedFd,
        family: u16,
        addr: &[u8],
    ) -> Result<(), Errno> {
        if i32::from(family) == libc::AF_UNSPEC {
            return rustix::net::connect_unspec(socket);
        }
        if i32::from(family) != libc::AF_UNIX {
            return Err(Errno::INVAL);
        }
        let path = addr.get(2..).unwrap_or_default();
        if path.first() == Some(&0) {
            if !self.connect.unix_abstract {
                return Err(Errno::PERM);
            }
            let name = rustix::net::SocketAddrUnix::new_abstract_name(&path[1..])?;
            return rustix::net::connect(socket, &name);
        }
        if !self.connect.unix_pathname {
            return Err(Errno::ACCESS);
        }
        // sun_path need not end in NUL; the name ends at the first one.
        let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
        let path = &path[..end];
        if path.is_empty() {
            return Err(Errno::INVAL);
        }
        let named = if path.first() == Some(&b'/') {
            for_child(child, path)
        } else {
            [format!("/proc/{}/cwd/", child.tid).as_bytes(), path].concat()
        };
        let name = rustix::net::SocketAddrUnix::new(std::ffi::OsStr::from_bytes(&named))?;
        rustix::net::connect(socket, &name)
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

    /// Walks `..` from `dir` to the first writable root or protected
    /// directory. Nothing can move a directory across that boundary during the
    /// run (every rename is performed here), so the answer holds for the
    /// handle after the walk.
    fn class_dir(&self, dir: BorrowedFd<'_>) -> Result<Class, Errno> {
        let mut st = fs::fstat(dir)?;
        let mut up: Option<OwnedFd> = None;
        for _ in 0..MAX_DEPTH {
            let here = id(&st);
            if self.denied.contains(&here) {
                return Ok(Class::Denied);
            }
            if self.protected.contains(&here) {
                return Ok(Class::Protected);
            }
            if self.dirs.contains(&here) {
                return Ok(Class::Inside);
            }
            let from = up.as_ref().map_or(dir, |fd| fd.as_fd());
            let next = fs::openat(from, c"..", dir_path(), Mode::empty())?;
            let next_st = fs::fstat(&next)?;
            if id(&next_st) == here {
                return Ok(Class::Outside);
            }
            st = next_st;
            up = Some(next);
        }
        Ok(Class::Outside)
    }

    /// `data`: the call writes contents (an open), where writable files such
    /// as `/dev/null` count; metadata never does.
    fn class_obj(
        &self,
        obj: &Obj,
        parent: Option<BorrowedFd<'_>>,
        data: bool,
    ) -> Result<Class, Errno> {
        let me = id(&obj.st);
        // A denied file by any of its names (a hard link the caller found
        // is denied as an object, wherever it lies).
        if self.denied.contains(&me) {
            return Ok(Class::Denied);
        }
        if self.protected.contains(&me) {
            return Ok(Class::Protected);
        }
        if self.files.contains(&me) {
            return Ok(if data { Class::Inside } else { Class::Outside });
        }
        if obj.is_dir() {
            return self.class_dir(obj.fd.as_fd());
        }
        match parent {
            Some(p) => self.class_dir(p),
            None => self.class_unnamed(obj),
        }
    }

    /// A non-directory reached through a descriptor: its name is where the
    /// kernel says it is, confirmed by identity before it counts.
    fn class_unnamed(&self, obj: &Obj) -> Result<Class, Errno> {
        // Pipes, sockets and anonymous inodes have no place in the tree
        // (Landlock does not govern them either); an unlinked file has no
        // name anyone could reach.
        let magic = fs::fstatfs(&obj.fd)?.f_type as i64;
        if [PIPEFS_MAGIC, SOCKFS_MAGIC, ANON_INODE_FS_MAGIC].contains(&magic)
            || obj.st.st_nlink == 0
        {
            return Ok(Class::Inside);
        }
        match parent_of_named(obj.fd.as_fd(), &obj.st) {
            Ok(parent) => self.class_dir(parent.as_fd()),
            Err(()) => Ok(Class::Outside),
        }
    }

    fn is_pinned(&self, obj: &Obj) -> bool {
        self.pinned.contains(&id(&obj.st))
    }

    /// Performs `call` for `child` if the fence allows it.
    pub fn perform(&self, child: Child, call: &Call) -> Outcome {
        let result = match call {
            Call::Open {
                dirfd,
                path,
                flags,
                mode,
            } => return self.open(child, *dirfd, path, *flags, *mode),
            Call::Mkdir { dirfd, path, mode } => self.create(child, *dirfd, path, |dir, name| {
                let mode = Mode::from_raw_mode(mode & !umask(child) & 0o7777);
                fs::mkdirat(dir, name, mode)
            }),
            Call::Mknod {
                dirfd,
                path,
                mode,
                dev,
            } => self.create(child, *dirfd, path, |dir, name| {
                // A zero type is a regular file, as mknod(2) says.
                let kind = match mode & 0o170_000 {
                    0 => FileType::RegularFile,
                    t => FileType::from_raw_mode(t),
                };
                let perm = Mode::from_raw_mode(mode & !umask(child) & 0o7777);
                fs::mknodat(dir, name, kind, perm, *dev)
            }),
            Call::Symlink {
                target,
                dirfd,
                path,
            } => {
                let target = cstring(target);
                self.create(child, *dirfd, path, |dir, name| {
                    fs::symlinkat(target.as_deref().map_err(|e| *e)?, dir, name)
                })
            }
            Call::Unlink { dirfd, path, flags } => self.unlink(child, *dirfd, path, *flags),
            Call::Rename {
                old_dirfd,
                old,
                new_dirfd,
                new,
                flags,
            } => self.rename(child, (*old_dirfd, old), (*new_dirfd, new), *flags),
            Call::Link {
                old_dirfd,
                old,
                new_dirfd,
                new,
                flags,
            } => self.link(child, (*old_dirfd, old), (*new_dirfd, new), *flags),
            Call::Truncate { path, len } => self.truncate(child, path, *len),
            Call::Listen { fd, backlog } => self.listen(child, *fd, *backlog),
            Call::Connect { fd, addr } => self.connect(child, *fd, addr),
            Call::Chmod { target, mode } => self.metadata(child, target, |obj| {
                if obj.is_symlink() {
                    return Err(Errno::OPNOTSUPP);
                }
                fs::chmodat(
                    CWD,
                    obj.proc_path(),
                    Mode::from_raw_mode(*mode),
                    AtFlags::empty(),
                )
            }),
            Call::Chown { target, uid, gid } => self.metadata(child, target, |obj| {
                // -1 keeps the owner or the group as it is.
                let uid = (*uid != u32::MAX).then(|| rustix::process::Uid::from_raw(*uid));
                let gid = (*gid != u32::MAX).then(|| rustix::process::Gid::from_raw(*gid));
                if obj.is_symlink() {
                    fs::chownat(&obj.fd, c"", uid, gid, symlink_itself())
                } else {
                    fs::chownat(CWD, obj.proc_path(), uid, gid, AtFlags::empty())
                }
            }),
            Call::Utimes { target, times } => self.metadata(child, target, |obj| {
                let ts = timestamps(*times);
                if obj.is_symlink() {
                    fs::utimensat(&obj.fd, c"", &ts, symlink_itself())
                } else {
                    fs::utimensat(CWD, obj.proc_path(), &ts, AtFlags::empty())
                }
            }),
            Call::SetXattr {
                target,
                name,
                value,
                flags,
            } => {
                let name = cstring(name);
                self.metadata(child, target, |obj| {
                    // The kernel allows user.* on regular files and
                    // directories only; the rest needs capabilities neither
                    // side holds.
                    if obj.is_symlink() {
                        return Err(Errno::PERM);
                    }
                    let flags = XattrFlags::from_bits_retain(*flags);
                    let name = name.as_deref().map_err(|e| *e)?;
                    fs::setxattr(obj.proc_path(), name, value, flags)
                })
            }
            Call::RemoveXattr { target, name } => {
                let name = cstring(name);
                self.metadata(child, target, |obj| {
                    if obj.is_symlink() {
                        return Err(Errno::PERM);
                    }
                    fs::removexattr(obj.proc_path(), name.as_deref().map_err(|e| *e)?)
                })
            }
        };
        match result {
            Ok(()) => Outcome::Value(0),
            Err(e) => Outcome::Err(e),
        }
    }

    /// The child's file behind its descriptor `fd`, reopened read-only for an
    /// ioctl, when it lies inside and is not protected.
    pub fn ioctl_file(&self, child: Child, fd: i32) -> Result<OwnedFd, Errno> {
        let obj = Obj::from_fd(child_fd(child, fd)?)?;
        self.require(&obj, None, false)?;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        fs::open(obj.proc_path(), flags, Mode::empty())
    }

    fn require(&self, obj: &Obj, parent: Option<BorrowedFd<'_>>, data: bool) -> Result<(), Errno> {
        match self.class_obj(obj, parent, data)? {
            Class::Inside => Ok(()),
            Class::Protected | Class::Outside | Class::Denied => Err(Errno::ACCESS),
        }
    }

    /// The directory an entry is made or removed in must be inside.
    fn require_dir(&self, dir: BorrowedFd<'_>) -> Result<(), Errno> {
        match self.class_dir(dir)? {
            Class::Inside => Ok(()),
            Class::Protected | Class::Outside | Class::Denied => Err(Errno::ACCESS),
        }
    }

    fn metadata(
        &self,
        child: Child,
        target: &Target,
        op: impl FnOnce(&Obj) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let (obj, parent) = match target {
            Target::Fd(fd) => (Obj::from_fd(child_fd(child, *fd)?)?, None),
            Target::Path {
                dirfd,
                path,
                follow,
            } => {
                let entry = self.resolve(child, *dirfd, path, *follow)?;
                let obj = entry.obj.ok_or(Errno::NOENT)?;
                (obj, entry.parent)
            }
        };
        self.require(&obj, parent.as_ref().map(|p| p.as_fd()), false)?;
        op(&obj)
    }

    /// mkdir, mknod, symlink: a new name in an inside directory.
    fn create(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
        op: impl FnOnce(BorrowedFd<'_>, &CStr) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let (parent, name) = self.new_name(child, dirfd, path)?;
        // The kernel does not follow a last-component symlink here, so a
        // name planted since the look-up only makes this fail (EEXIST).
        op(parent.as_fd(), &name)
    }

    /// A name that does not exist yet, in a directory inside the fence.
    fn new_name(&self, child: Child, dirfd: i32, path: &[u8]) -> Result<(OwnedFd, CString), Errno> {
        let entry = self.resolve(child, dirfd, path, false)?;
        let Some(parent) = entry.parent else {
            return Err(Errno::EXIST);
        };
        if entry.obj.is_some() {
            return Err(Errno::EXIST);
        }
        self.require_dir(parent.as_fd())?;
        Ok((parent, entry.name))
    }

    fn unlink(&self, child: Child, dirfd: i32, path: &[u8], flags: u32) -> Result<(), Errno> {
        let entry = self.resolve(child, dirfd, path, false)?;
        let Some(parent) = entry.parent else {
            // rmdir(".") and unlink of "." or "..": refused by the kernel too.
            let dir = flags & AtFlags::REMOVEDIR.bits() != 0;
            return Err(if dir { Errno::INVAL } else { Errno::ISDIR });
        };
        let obj = entry.obj.ok_or(Errno::NOENT)?;
        self.require_dir(parent.as_fd())?;
        if self.protected.contains(&id(&obj.st)) || self.is_pinned(&obj) {
            return Err(Errno::ACCESS);
        }
        fs::unlinkat(
            &parent,
            &entry.name,
            AtFlags::from_bits_retain(flags) & AtFlags::REMOVEDIR,
        )
    }

    fn rename(
        &self,
        child: Child,
        (old_dirfd, old): (i32, &[u8]),
        (new_dirfd, new): (i32, &[u8]),
        flags: u32,
    ) -> Result<(), Errno> {
        let from = self.resolve(child, old_dirfd, old, false)?;
        let to = self.resolve(child, new_dirfd, new, false)?;
        let (Some(from_dir), Some(to_dir)) = (&from.parent, &to.parent) else {
            return Err(Errno::BUSY);
        };
        let obj = from.obj.as_ref().ok_or(Errno::NOENT)?;
        self.require_dir(from_dir.as_fd())?;
        self.require_dir(to_dir.as_fd())?;
        for o in [Some(obj), to.obj.as_ref()].into_iter().flatten() {
            if self.protected.contains(&id(&o.st)) || self.is_pinned(o) {
                return Err(Errno::ACCESS);
            }
        }
        fs::renameat_with(
            from_dir,
            &from.name,
            to_dir,
            &to.name,
            RenameFlags::from_bits_retain(flags),
        )
    }

    fn link(
        &self,
        child: Child,
        (old_dirfd, old): (i32, &[u8]),
        (new_dirfd, new): (i32, &[u8]),
        flags: u32,
    ) -> Result<(), Errno> {
        let empty = flags & AtFlags::EMPTY_PATH.bits() != 0 && old.is_empty();
        let follow = flags & AtFlags::SYMLINK_FOLLOW.bits() != 0;
        let (obj, parent) = if empty {
            (Obj::from_fd(child_fd(child, old_dirfd)?)?, None)
        } else {
            let e = self.resolve(child, old_dirfd, old, follow)?;
            (e.obj.ok_or(Errno::NOENT)?, e.parent)
        };
        if obj.is_dir() {
            return Err(Errno::PERM);
        }
        self.require(&obj, parent.as_ref().map(|p| p.as_fd()), false)?;
        let (to_dir, to_name) = self.new_name(child, new_dirfd, new)?;
        // The magic name reaches the inode itself, so no name the child can
        // still change is looked up again.
        fs::linkat(
            CWD,
            obj.proc_path(),
            &to_dir,
            &to_name,
            AtFlags::SYMLINK_FOLLOW,
        )
    }

    fn truncate(&self, child: Child, path: &[u8], len: u64) -> Result<(), Errno> {
        let entry = self.resolve(child, AT_FDCWD, path, true)?;
        let obj = entry.obj.ok_or(Errno::NOENT)?;
        self.require(&obj, entry.parent.as_ref().map(|p| p.as_fd()), false)?;
        match kind(&obj.st) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Errno::ISDIR),
            _ => return Err(Errno::INVAL),
        }
        let flags = OFlags::WRONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = fs::open(obj.proc_path(), flags, Mode::empty())?;
        fs::ftruncate(&file, len)
    }

    fn resolve(&self, child: Child, dirfd: i32, path: &[u8], follow: bool) -> Result<Entry, Errno> {
        resolve_with(child, dirfd, path, follow, self.sticky)
    }

    /// O_CREAT on an existing file, as the kernel checks it
    /// (protected_regular, protected_fifos): the reopen below has no O_CREAT.
    fn may_open_existing_with_create(
        &self,
        obj: &Obj,
        parent: Option<&OwnedFd>,
    ) -> Result<(), Errno> {
        let level = match kind(&obj.st) {
            FileType::RegularFile => self.sticky.regular,
            FileType::Fifo => self.sticky.fifos,
            _ => return Ok(()),
        };
        match parent {
            Some(p) if sticky_foreign(&fs::fstat(p)?, obj.st.st_uid, level) => Err(Errno::ACCESS),
            _ => Ok(()),
        }
    }

    fn open(&self, child: Child, dirfd: i32, path: &[u8], flags: u32, mode: u32) -> Outcome {
        if flags & (O_WRITE_MODES | O_CREAT_BIT | O_TRUNC_BIT | O_TMPFILE_BIT) == 0 {
            return match self.read_open(child, dirfd, path, flags) {
                Ok(Some(fd)) => Outcome::Fd {
                    fd,
                    cloexec: flags & OFlags::CLOEXEC.bits() != 0,
                },
                Ok(None) => Outcome::Continue,
                Err(e) => Outcome::Err(e),
            };
        }
        match self.open_inner(child, dirfd, path, flags, mode) {
            Ok(fd) => Outcome::Fd {
                fd,
                cloexec: flags & OFlags::CLOEXEC.bits() != 0,
            },
            Err(e) => Outcome::Err(e),
        }
    }

    /// A read-only open (notified only when a deny-read path lies beneath
    /// a writable root, see `crate::syscalls::reads_governed`). Landlock
    /// cannot take read back beneath a directory it grants, so the caller
    /// grants the writable roots above a denied path without read_file,
    /// and reads beneath them are decided here: resolved into held handles
    /// like every governed call (symlinks followed here, `..`, the child's
    /// `/proc/self/fd/N`), classified by identity, refused (EACCES) when a
    /// walk up meets a denied object before a writable root, and otherwise
    /// performed on the same handle, so a name swapped after the check
    /// changes nothing. `Ok(None)`: the object lies outside every writable
    /// root, or is not a regular file or directory (a FIFO would hold a
    /// worker until a writer came, a device is the kernel's to judge): the
    /// kernel performs the call under the child's Landlock domain, which
    /// grants read beside every denied path and never on one, so whatever
    /// a name swapped meanwhile reaches is judged there.
    fn read_open(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
        flags: u32,
    ) -> Result<Option<OwnedFd>, Errno> {
        let requested = OFlags::from_bits_retain(flags);
        let follow = !requested.contains(OFlags::NOFOLLOW);
        let entry = self.resolve(child, dirfd, path, follow)?;
        let obj = entry.obj.ok_or(Errno::NOENT)?;
        if obj.is_symlink() {
            return Err(Errno::LOOP);
        }
        let class = self.class_obj(&obj, entry.parent.as_ref().map(|p| p.as_fd()), true)?;
        let served = matches!(kind(&obj.st), FileType::RegularFile | FileType::Directory);
        match class {
            Class::Denied => Err(Errno::ACCESS),
            Class::Inside | Class::Protected if served => {
                let reopen = (requested - OFlags::CLOEXEC - OFlags::NOFOLLOW)
                    | OFlags::NOCTTY
                    | OFlags::CLOEXEC;
                fs::open(obj.proc_path(), reopen, Mode::empty()).map(Some)
            }
            Class::Inside | Class::Protected | Class::Outside => Ok(None),
        }
    }

    fn open_inner(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
        flags: u32,
        mode: u32,
    ) -> Result<OwnedFd, Errno> {
        let requested = OFlags::from_bits_retain(flags);
        // Ours is close-on-exec; the child's copy gets its own flag at install.
        // A terminal we open never becomes the supervisor's controlling one.
        let base = (requested - OFlags::CLOEXEC) | OFlags::NOCTTY | OFlags::CLOEXEC;
        let perm = || Mode::from_raw_mode(mode & !umask(child) & 0o7777);
        if flags & O_TMPFILE_BIT != 0 {
            let entry = self.resolve(child, dirfd, path, true)?;
            let dir = entry.obj.ok_or(Errno::NOENT)?;
            if !dir.is_dir() {
                return Err(Errno::NOTDIR);
            }
            self.require_dir(dir.fd.as_fd())?;
            return fs::openat(&dir.fd, c".", base, perm());
        }
        let create = requested.contains(OFlags::CREATE);
        let exclusive = create && requested.contains(OFlags::EXCL);
        let follow = !requested.contains(OFlags::NOFOLLOW) && !exclusive;
        for _ in 0..MAX_RETRIES {
            let entry = self.resolve(child, dirfd, path, follow)?;
            if let Some(obj) = entry.obj {
                if exclusive {
                    return Err(Errno::EXIST);
                }
                if obj.is_symlink() {
                    return Err(Errno::LOOP);
                }
                let reopen = base - OFlags::CREATE - OFlags::EXCL - OFlags::NOFOLLOW;
                if let Some(tty) = self.controlling_terminal(&obj) {
                    return fs::open(proc_fd_path(tty), reopen, Mode::empty());
                }
                self.require(&obj, entry.parent.as_ref().map(|p| p.as_fd()), true)?;
                if create {
                    self.may_open_existing_with_create(&obj, entry.parent.as_ref())?;
                }
                return fs::open(obj.proc_path(), reopen, Mode::empty());
            }
            if !create {
                return Err(Errno::NOENT);
            }
            // "name/" can only be a directory, which open never creates.
            if path.last() == Some(&b'/') {
                return Err(Errno::ISDIR);
            }
            let Some(parent) = entry.parent else {
                return Err(Errno::ISDIR);
            };
            self.require_dir(parent.as_fd())?;
            // O_EXCL and no symlinks: what is created is a new file in this
            // very directory; a name that appeared meanwhile is looked up again.
            let how = base | OFlags::EXCL;
            let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH;
            match fs::openat2(&parent, &entry.name, how, perm(), resolve) {
                Err(Errno::EXIST | Errno::LOOP) if !exclusive => continue,
                other => return other,
            }
        }
        Err(Errno::AGAIN)
    }
}

fn symlink_itself() -> AtFlags {
    AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW
}

fn timestamps(times: Option<[(i64, i64); 2]>) -> Timestamps {
    /// `UTIME_NOW`
    const NOW: i64 = (1 << 30) - 1;
    let [a, m] = times.unwrap_or([(0, NOW), (0, NOW)]);
    let ts = |(tv_sec, tv_nsec): (i64, i64)| Timespec { tv_sec, tv_nsec };
    Timestamps {
        last_access: ts(a),
        last_modification: ts(m),
    }
}

/// The child's file mode creation mask, read when it creates something (it
/// can change at any time, and only the kernel knows it). Unreadable: the
/// strictest mask, so nothing is created more open than asked.
fn umask(child: Child) -> u32 {
    let path = format!("/proc/{}/status", child.tid);
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0o077;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .unwrap_or(0o077)
}

/// Judges a connect's address (as copied from the child) on an inet
/// socket: `Ok(None)` for AF_UNSPEC (dissolving an association, as the
/// kernel does), `Ok(Some(to))` only for 127.0.0.1 (or ::ffff:127.0.0.1)
/// at `proxy_port`; EACCES for every other destination, and the kernel's
/// own errors for a malformed address.
fn inet_target(
    addr: &[u8],
    proxy_port: Option<u16>,
) -> Result<Option<std::net::SocketAddr>, Errno> {
    let family = addr
        .get(..2)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .ok_or(Errno::INVAL)?;
    let port = || u16::from_be_bytes([addr[2], addr[3]]);
    let target = match i32::from(family) {
        libc::AF_UNSPEC => return Ok(None),
        libc::AF_INET if addr.len() >= 16 => {
            let ip = std::net::Ipv4Addr::new(addr[4], addr[5], addr[6], addr[7]);
            std::net::SocketAddr::from((ip, port()))
        }
        libc::AF_INET6 if addr.len() >= 24 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&addr[8..24]);
            std::net::SocketAddr::from((std::net::Ipv6Addr::from(octets), port()))
        }
        libc::AF_INET | libc::AF_INET6 => return Err(Errno::INVAL),
        _ => return Err(Errno::AFNOSUPPORT),
    };
    let proxy = std::net::Ipv4Addr::LOCALHOST;
    let to_proxy = match target.ip() {
        std::net::IpAddr::V4(ip) => ip == proxy,
        std::net::IpAddr::V6(ip) => ip.to_ipv4_mapped() == Some(proxy),
    };
    if !to_proxy || proxy_port != Some(target.port()) {
        return Err(Errno::ACCESS);
    }
    Ok(Some(target))
}

/// The child's descriptor `fd` (or its working directory for `AT_FDCWD`),
/// opened here through procfs: the same file, a handle of our own.
/// The child's socket `fd` itself (not a reopened name: a socket has
/// none), from its thread group.
fn child_socket(child: Child, fd: i32) -> Result<OwnedFd, Errno> {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.tid)).map_err(|_| Errno::SRCH)?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw)
        .ok_or(Errno::SRCH)?;
    let pidfd = rustix::process::pidfd_open(tgid, rustix::process::PidfdFlags::empty())?;
    let socket =
        rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty())?;
    match fs::fstat(&socket) {
        Ok(st) if kind(&st) == FileType::Socket => Ok(socket),
        Ok(_) => Err(Errno::NOTSOCK),
        Err(e) => Err(e),
    }
}

fn child_fd(child: Child, fd: i32) -> Result<OwnedFd, Errno> {
    let path = if fd == AT_FDCWD {
        format!("/proc/{}/cwd", child.tid)
    } else if fd >= 0 {
        format!("/proc/{}/fd/{fd}", child.tid)
    } else {
        return Err(Errno::BADF);
    };
    match fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Err(Errno::NOENT) => Err(Errno::BADF),
        other => other,
    }
}

/// The directory a named non-directory sits in, by the kernel's own name for
/// it, accepted only if that directory still holds this very inode there.
fn parent_of_named(fd: BorrowedFd<'_>, st: &Stat) -> Result<OwnedFd, ()> {
    let link = fs::readlink(proc_fd_path(fd), Vec::new()).map_err(|_| ())?;
    let bytes = link.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(());
    }
    let cut = bytes.iter().rposition(|b| *b == b'/').ok_or(())?;
    let (dir, name) = (&bytes[..cut.max(1)], &bytes[cut + 1..]);
    let dir = cstring(dir).map_err(|_| ())?;
    let name = cstring(name).map_err(|_| ())?;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let parent = fs::openat2(CWD, &dir, dir_path(), Mode::empty(), resolve).map_err(|_| ())?;
    match fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(there) if id(&there) == id(st) => Ok(parent),
        _ => Err(()),
    }
}

/// `path` with the names that mean "this process" spelled for the child:
/// `/dev/std*`, `/dev/fd/N` and `/proc/self`, `/proc/thread-self`.
fn for_child(child: Child, path: &[u8]) -> Vec<u8> {
    let tid = child.tid.to_string();
    let std_names: [(&[u8], &[u8]); 3] = [
        (b"/dev/stdin", b"/proc/self/fd/0"),
        (b"/dev/stdout", b"/proc/self/fd/1"),
        (b"/dev/stderr", b"/proc/self/fd/2"),
    ];
    let mut p = path.to_vec();
    if let Some((_, to)) = std_names.iter().find(|(from, _)| *from == path) {
        p = to.to_vec();
    } else if let Some(rest) = path.strip_prefix(b"/dev/fd/") {
        p = [b"/proc/self/fd/".as_slice(), rest].concat();
    }
    for prefix in [b"/proc/self".as_slice(), b"/proc/thread-self"] {
        if let Some(rest) = p.strip_prefix(prefix)
            && (rest.is_empty() || rest.first() == Some(&b'/'))
        {
            return [b"/proc/".as_slice(), tid.as_bytes(), rest].concat();
        }
    }
    p
}

/// `/proc/<tid>/fd/N[/rest]` and `/proc/<tid>/cwd[/rest]` for the child's own
/// tid: the magic links, opened here on its behalf. Returns the handle and
/// what is left of the path.
fn child_magic(child: Child, path: &[u8]) -> Option<(Result<OwnedFd, Errno>, Vec<u8>)> {
    let tid = child.tid.to_string();
    let own = [b"/proc/".as_slice(), tid.as_bytes(), b"/"].concat();
    let rest = path.strip_prefix(own.as_slice())?;
    let split = |s: &[u8]| -> (Vec<u8>, Vec<u8>) {
        match s.iter().position(|b| *b == b'/') {
            Some(i) => (s[..i].to_vec(), s[i + 1..].to_vec()),
            None => (s.to_vec(), Vec::new()),
        }
    };
    if let Some(after) = rest.strip_prefix(b"fd/") {
        let (num, rest) = split(after);
        let n = std::str::from_utf8(&num).ok()?.parse::<i32>().ok()?;
        return Some((child_fd(child, n), rest));
    }
    if rest == b"cwd" || rest.starts_with(b"cwd/") {
        let (_, rest) = split(rest);
        return Some((child_fd(child, AT_FDCWD), rest));
    }
    None
}

/// Resolves the child's `(dirfd, path)` here, into the parent directory and
/// the object (when it exists). A last-component symlink is followed (when
/// `follow`, or when a trailing slash asks for a directory) by reading it and
/// resolving its target again, never through the kernel's own follow, so
/// every step is a handle this function holds. Magic links are never
/// followed, except the child's own descriptors and working directory named
/// through `/proc/self`.
fn resolve_with(
    child: Child,
    dirfd: i32,
    path: &[u8],
    follow: bool,
    sticky: Sticky,
) -> Result<Entry, Errno> {
    if path.is_empty() {
        return Err(Errno::NOENT);
    }
    // `None`: the child's dirfd argument (resolved lazily: an absolute path
    // ignores it).
    let mut base: Option<OwnedFd> = None;
    let mut path = path.to_vec();
    for _ in 0..MAX_LINKS {
        path = for_child(child, &path);
        if let Some((fd, rest)) = child_magic(child, &path) {
            let fd = fd?;
            if rest.is_empty() {
                return Ok(Entry {
                    parent: None,
                    name: CString::default(),
                    obj: Some(Obj::from_fd(fd)?),
                });
            }
            base = Some(fd);
            path = rest;
            continue;
        }
        let absolute = path.first() == Some(&b'/');
        let trailing = path.len() > 1 && path.last() == Some(&b'/');
        let trimmed: &[u8] = {
            let mut end = path.len();
            while end > 1 && path[end - 1] == b'/' {
                end -= 1;
            }
            &path[..end]
        };
        let cut = trimmed.iter().rposition(|b| *b == b'/');
        let (dir, name): (&[u8], &[u8]) = match cut {
            Some(0) => (b"/", &trimmed[1..]),
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (b"", trimmed),
        };
        let base_fd = match (&base, absolute) {
            (_, true) => None,
            (Some(fd), false) => Some(fd.as_fd()),
            (None, false) => None,
        };
        let owned_base;
        let at: BorrowedFd<'_> = match base_fd {
            Some(fd) => fd,
            None if absolute => CWD,
            None => {
                owned_base = child_fd(child, dirfd)?;
                owned_base.as_fd()
            }
        };
        if name.is_empty() || name == b"." || name == b".." {
            let whole = cstring(trimmed)?;
            let fd = fs::openat2(
                at,
                &whole,
                dir_path(),
                Mode::empty(),
                ResolveFlags::NO_MAGICLINKS,
            )?;
            return Ok(Entry {
                parent: None,
                name: CString::default(),
                obj: Some(Obj::from_fd(fd)?),
            });
        }
        let parent = if dir.is_empty() {
            fs::openat(at, c".", dir_path(), Mode::empty())?
        } else {
            fs::openat2(
                at,
                cstring(dir)?.as_c_str(),
                dir_path(),
                Mode::empty(),
                ResolveFlags::NO_MAGICLINKS,
            )?
        };
        let name = cstring(name)?;
        let obj = match Obj::open(parent.as_fd(), &name) {
            Ok(obj) => Some(obj),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(e),
        };
        match obj {
            Some(o) if o.is_symlink() && (follow || trailing) => {
                // As the kernel would on following it (protected_symlinks).
                if sticky_foreign(&fs::fstat(&parent)?, o.st.st_uid, sticky.symlinks.min(1)) {
                    return Err(Errno::ACCESS);
                }
                let target = fs::readlinkat(&o.fd, c"", Vec::new())?;
                path = target.into_bytes();
                base = Some(parent);
            }
            Some(o) if trailing && !o.is_dir() => return Err(Errno::NOTDIR),
            obj => {
                return Ok(Entry {
                    parent: Some(parent),
                    name,
                    obj,
                });
            }
        }
    }
    Err(Errno::LOOP)
}

#[cfg(test)]
mod tests {
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
