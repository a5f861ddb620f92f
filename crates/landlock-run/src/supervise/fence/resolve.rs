//! Resolving: the child's `(dirfd, path)` turned into handles held here
//! (the parent directory and the object), every step a descriptor of ours,
//! never a name the kernel looks up again.
#![forbid(unsafe_code)]

use super::classify::sticky_foreign;
use super::*;

impl Fence {
    /// A name that does not exist yet, in a directory inside the fence.
    /// A name that exists, whatever it is (a dangling symlink, and with a
    /// trailing slash too), is EEXIST before anything else is asked, as
    /// the kernel answers mkdir, mknod, symlink and link: one look-up in
    /// the held parent, nothing opened, nothing classified.
    pub(super) fn new_name(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
    ) -> Result<(OwnedFd, CString), Errno> {
        let entry = resolve_with(self, child, dirfd, path, Last::Create)?;
        let Some(parent) = entry.parent else {
            return Err(Errno::EXIST);
        };
        if entry.obj.is_some() {
            return Err(Errno::EXIST);
        }
        self.require_entry(parent.as_fd(), &entry.name)?;
        Ok((parent, entry.name))
    }

    pub(super) fn resolve(
        &self,
        child: Child,
        dirfd: i32,
        path: &[u8],
        follow: bool,
    ) -> Result<Entry, Errno> {
        let last = if follow { Last::Follow } else { Last::NoFollow };
        resolve_with(self, child, dirfd, path, last)
    }
}

/// What becomes of the last component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Last {
    /// A symlink there is followed.
    Follow,
    /// A symlink there is the object (unless a trailing slash asks for a
    /// directory).
    NoFollow,
    /// A name to create: if anything is there, EEXIST.
    Create,
}

/// The child's descriptor `fd` (or its working directory for `AT_FDCWD`),
/// opened here through procfs: the same file, a handle of our own.
/// The child's socket `fd` itself (not a reopened name: a socket has
/// none), from its thread group.
pub(super) fn child_socket(child: Child, fd: i32) -> Result<OwnedFd, Errno> {
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

pub(super) fn child_fd(child: Child, fd: i32) -> Result<OwnedFd, Errno> {
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

/// `path` with the names that mean "this process" spelled for the child:
/// `/dev/std*`, `/dev/fd/N` and `/proc/self`, `/proc/thread-self`.
pub(super) fn for_child(child: Child, path: &[u8]) -> Vec<u8> {
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
pub(super) fn child_magic(child: Child, path: &[u8]) -> Option<(Result<OwnedFd, Errno>, Vec<u8>)> {
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
pub(super) fn resolve_with(
    fence: &Fence,
    child: Child,
    dirfd: i32,
    path: &[u8],
    last: Last,
) -> Result<Entry, Errno> {
    let follow = last == Last::Follow;
    let sticky = fence.sticky;
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
        let cwd;
        let at: BorrowedFd<'_> = match base_fd {
            Some(fd) => fd,
            None if absolute => CWD,
            None if dirfd == AT_FDCWD => {
                cwd = fence.cache.cwd(child.tid)?;
                cwd.as_fd()
            }
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
        if last == Last::Create {
            // On the held parent: the name the kernel would create in.
            return match fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => Err(Errno::EXIST),
                Err(Errno::NOENT) => Ok(Entry {
                    parent: Some(parent),
                    name,
                    obj: None,
                }),
                Err(e) => Err(e),
            };
        }
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
