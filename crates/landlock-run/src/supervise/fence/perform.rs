//! Performing: each governed call decided on the handles `resolve` gave
//! and `classify` judged, then done here on those same handles.
#![forbid(unsafe_code)]

use super::classify::sticky_foreign;
use super::resolve::{child_fd, child_socket, for_child};
use super::*;

impl Fence {
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
    pub(super) fn listen(&self, child: Child, fd: i32, backlog: i32) -> Result<(), Errno> {
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
    pub(super) fn connect(&self, child: Child, fd: i32, addr: &[u8]) -> Result<(), Errno> {
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

    pub(super) fn connect_unix(
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
                let mode = Mode::from_raw_mode(mode & !self.cache.umask(child.tid) & 0o7777);
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
                let perm = Mode::from_raw_mode(mode & !self.cache.umask(child.tid) & 0o7777);
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
        self.require(&obj, None, None, false)?;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        fs::open(obj.proc_path(), flags, Mode::empty())
    }

    pub(super) fn metadata(
        &self,
        child: Child,
        target: &Target,
        op: impl FnOnce(&Obj) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let (obj, parent, name) = match target {
            Target::Fd(fd) => (Obj::from_fd(child_fd(child, *fd)?)?, None, None),
            Target::Path {
                dirfd,
                path,
                follow,
            } => {
                let entry = self.resolve(child, *dirfd, path, *follow)?;
                let obj = entry.obj.ok_or(Errno::NOENT)?;
                (obj, entry.parent, Some(entry.name))
            }
        };
        self.require(
            &obj,
            parent.as_ref().map(|p| p.as_fd()),
            name.as_deref(),
            false,
        )?;
        op(&obj)
    }

    /// mkdir, mknod, symlink: a new name in an inside directory.
    pub(super) fn create(
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

    pub(super) fn unlink(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        let entry = self.resolve(child, dirfd, path, false)?;
        let Some(parent) = entry.parent else {
            // rmdir(".") and unlink of "." or "..": refused by the kernel too.
            let dir = flags & AtFlags::REMOVEDIR.bits() != 0;
            return Err(if dir { Errno::INVAL } else { Errno::ISDIR });
        };
        let obj = entry.obj.ok_or(Errno::NOENT)?;
        self.require_entry(parent.as_fd(), &entry.name)?;
        if self.protected.contains(&id(&obj.st)) || self.is_pinned(&obj) {
            return Err(Errno::ACCESS);
        }
        let done = fs::unlinkat(
            &parent,
            &entry.name,
            AtFlags::from_bits_retain(flags) & AtFlags::REMOVEDIR,
        );
        self.cache.forget_files();
        done
    }

    pub(super) fn rename(
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
        self.require_entry(from_dir.as_fd(), &from.name)?;
        self.require_entry(to_dir.as_fd(), &to.name)?;
        for o in [Some(obj), to.obj.as_ref()].into_iter().flatten() {
            if self.protected.contains(&id(&o.st)) || self.is_pinned(o) {
                return Err(Errno::ACCESS);
            }
        }
        // A directory that moves takes its subtree along: no class kept
        // from before the move may outlive it (see `cache`).
        let moves_dir = [Some(obj), to.obj.as_ref()]
            .into_iter()
            .flatten()
            .any(Obj::is_dir);
        if moves_dir {
            self.cache.forget_dirs();
        }
        self.cache.forget_files();
        let done = fs::renameat_with(
            from_dir,
            &from.name,
            to_dir,
            &to.name,
            RenameFlags::from_bits_retain(flags),
        );
        if moves_dir {
            self.cache.forget_dirs();
        }
        self.cache.forget_files();
        done
    }

    pub(super) fn link(
        &self,
        child: Child,
        (old_dirfd, old): (i32, &[u8]),
        (new_dirfd, new): (i32, &[u8]),
        flags: u32,
    ) -> Result<(), Errno> {
        let empty = flags & AtFlags::EMPTY_PATH.bits() != 0 && old.is_empty();
        let follow = flags & AtFlags::SYMLINK_FOLLOW.bits() != 0;
        let (obj, parent, name) = if empty {
            (Obj::from_fd(child_fd(child, old_dirfd)?)?, None, None)
        } else {
            let e = self.resolve(child, old_dirfd, old, follow)?;
            (e.obj.ok_or(Errno::NOENT)?, e.parent, Some(e.name))
        };
        if obj.is_dir() {
            return Err(Errno::PERM);
        }
        self.require(
            &obj,
            parent.as_ref().map(|p| p.as_fd()),
            name.as_deref(),
            false,
        )?;
        let (to_dir, to_name) = self.new_name(child, new_dirfd, new)?;
        // The magic name reaches the inode itself, so no name the child can
        // still change is looked up again.
        let done = fs::linkat(
            CWD,
            obj.proc_path(),
            &to_dir,
            &to_name,
            AtFlags::SYMLINK_FOLLOW,
        );
        self.cache.forget_files();
        done
    }

    pub(super) fn truncate(&self, child: Child, path: &[u8], len: u64) -> Result<(), Errno> {
        let entry = self.resolve(child, AT_FDCWD, path, true)?;
        let obj = entry.obj.ok_or(Errno::NOENT)?;
        let parent = entry.parent.as_ref().map(|p| p.as_fd());
        self.require(&obj, parent, Some(&entry.name), false)?;
        match kind(&obj.st) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Errno::ISDIR),
            _ => return Err(Errno::INVAL),
        }
        let flags = OFlags::WRONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = fs::open(obj.proc_path(), flags, Mode::empty())?;
        fs::ftruncate(&file, len)
    }

    /// O_CREAT on an existing file, as the kernel checks it
    /// (protected_regular, protected_fifos): the reopen below has no O_CREAT.
    pub(super) fn may_open_existing_with_create(
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

    pub(super) fn open(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
        flags: u32,
        mode: u32,
    ) -> Outcome {
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
    pub(super) fn read_open(
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
            Class::Inside | Class::Granted | Class::Protected if served => {
                let reopen = (requested - OFlags::CLOEXEC - OFlags::NOFOLLOW)
                    | OFlags::NOCTTY
                    | OFlags::CLOEXEC;
                fs::open(obj.proc_path(), reopen, Mode::empty()).map(Some)
            }
            Class::Inside | Class::Granted | Class::Protected | Class::Outside => Ok(None),
        }
    }

    pub(super) fn open_inner(
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
        let perm = || Mode::from_raw_mode(mode & !self.cache.umask(child.tid) & 0o7777);
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
                let parent = entry.parent.as_ref().map(|p| p.as_fd());
                self.require(&obj, parent, Some(&entry.name), true)?;
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
            self.require_entry(parent.as_fd(), &entry.name)?;
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

pub(super) fn symlink_itself() -> AtFlags {
    AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW
}

pub(super) fn timestamps(times: Option<[(i64, i64); 2]>) -> Timestamps {
    /// `UTIME_NOW`
    const NOW: i64 = (1 << 30) - 1;
    let [a, m] = times.unwrap_or([(0, NOW), (0, NOW)]);
    let ts = |(tv_sec, tv_nsec): (i64, i64)| Timespec { tv_sec, tv_nsec };
    Timestamps {
        last_access: ts(a),
        last_modification: ts(m),
    }
}

/// Judges a connect's address (as copied from the child) on an inet
/// socket: `Ok(None)` for AF_UNSPEC (dissolving an association, as the
/// kernel does), `Ok(Some(to))` only for 127.0.0.1 (or ::ffff:127.0.0.1)
/// at `proxy_port`; EACCES for every other destination, and the kernel's
/// own errors for a malformed address.
pub(super) fn inet_target(
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
