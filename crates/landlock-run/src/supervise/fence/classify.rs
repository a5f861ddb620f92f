//! Classifying: where a resolved handle lies (writable, protected,
//! outside), by identity (device and inode), walking `..` up to a writable
//! root.
#![forbid(unsafe_code)]

use super::cache::{self, Lookup};
use super::*;

/// Whether `dir` is a sticky directory the protections cover at `level`
/// (1: world-writable, 2: group-writable too) and `owner` is neither us nor
/// the directory's owner.
pub(super) fn sticky_foreign(dir: &Stat, owner: u32, level: u8) -> bool {
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

impl Fence {
    /// The command's terminal, when `obj` is `/dev/tty` (character device
    /// 5:0) and the run has one.
    pub(super) fn controlling_terminal(&self, obj: &Obj) -> Option<BorrowedFd<'_>> {
        let tty = kind(&obj.st) == FileType::CharacterDevice
            && rustix::fs::major(obj.st.st_rdev) == 5
            && rustix::fs::minor(obj.st.st_rdev) == 0;
        self.terminal.as_ref().filter(|_| tty).map(|t| t.as_fd())
    }

    /// Walks `..` from `dir` to the first writable root or protected
    /// directory. Nothing can move a directory across that boundary during the
    /// run (every rename is performed here), so the answer holds for the
    /// handle after the walk, and is kept for the next call that names the
    /// same directory on the same mount (`cache`).
    pub(super) fn class_dir(&self, dir: BorrowedFd<'_>) -> Result<Class, Errno> {
        let ticket = match self.cache.dir_class(dir)? {
            Lookup::Hit(class) => return Ok(class),
            Lookup::Miss(ticket) => Some(ticket),
            Lookup::Uncached => None,
        };
        let class = self.walk_dir(dir)?;
        if let (Some(ticket), Some(class)) = (ticket, class) {
            self.cache.keep_dir(ticket, dir, class);
        }
        Ok(class.unwrap_or(Class::Outside))
    }

    /// The walk itself; `None` when it gave up (`MAX_DEPTH`), which counts
    /// as outside but is not kept.
    fn walk_dir(&self, dir: BorrowedFd<'_>) -> Result<Option<Class>, Errno> {
        let mut st = fs::fstat(dir)?;
        let mut up: Option<OwnedFd> = None;
        for _ in 0..MAX_DEPTH {
            let here = id(&st);
            if self.denied.contains(&here) {
                return Ok(Some(Class::Denied));
            }
            if self.protected.contains(&here) {
                return Ok(Some(Class::Protected));
            }
            if self.dirs.contains(&here) {
                return Ok(Some(Class::Inside));
            }
            if self.is_granted_dir(&here) {
                return Ok(Some(Class::Granted));
            }
            let from = up.as_ref().map_or(dir, |fd| fd.as_fd());
            let next = fs::openat(from, c"..", dir_path(), Mode::empty())?;
            let next_st = fs::fstat(&next)?;
            if id(&next_st) == here {
                return Ok(Some(Class::Outside));
            }
            st = next_st;
            up = Some(next);
        }
        Ok(None)
    }

    /// `data`: the call writes contents (an open), where writable files such
    /// as `/dev/null` count; metadata never does.
    pub(super) fn class_obj(
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
    pub(super) fn class_unnamed(&self, obj: &Obj) -> Result<Class, Errno> {
        let at = cache::place_of(obj.fd.as_fd(), c"", AtFlags::EMPTY_PATH)?;
        let link = fs::readlink(proc_fd_path(obj.fd.as_fd()), Vec::new()).map(CString::into_bytes);
        let ticket = match (at, &link) {
            (Some(at), Ok(link)) => match self.cache.file_inside(at, link) {
                Lookup::Hit(()) => return Ok(Class::Inside),
                Lookup::Miss(ticket) => Some(ticket),
                Lookup::Uncached => None,
            },
            _ => None,
        };
        // Pipes, sockets and anonymous inodes have no place in the tree
        // (Landlock does not govern them either); an unlinked file has no
        // name anyone could reach.
        let magic = fs::fstatfs(&obj.fd)?.f_type as i64;
        if [PIPEFS_MAGIC, SOCKFS_MAGIC, ANON_INODE_FS_MAGIC].contains(&magic)
            || obj.st.st_nlink == 0
        {
            return Ok(Class::Inside);
        }
        let Ok(link) = link else {
            return Ok(Class::Outside);
        };
        let class = match parent_of_link(&link, &obj.st) {
            Ok(parent) => self.class_dir(parent.as_fd())?,
            Err(()) => return Ok(Class::Outside),
        };
        if let (Class::Inside, Some(ticket)) = (class, ticket) {
            self.cache.keep_file(ticket, obj.fd.as_fd(), &link);
        }
        Ok(class)
    }

    pub(super) fn is_pinned(&self, obj: &Obj) -> bool {
        self.pinned.contains(&id(&obj.st))
    }

    /// `name`: the object's name in `parent`, when the call named it
    /// (what a question about an outside object asks about, see `grant`).
    pub(super) fn require(
        &self,
        obj: &Obj,
        parent: Option<BorrowedFd<'_>>,
        name: Option<&CStr>,
        data: bool,
    ) -> Result<(), Errno> {
        match self.class_obj(obj, parent, data)? {
            Class::Inside => Ok(()),
            Class::Granted => self.beneath_grant(None, None, Some(obj)),
            Class::Outside => self.outside(parent, name, Some(obj)),
            Class::Protected | Class::Denied => Err(Errno::ACCESS),
        }
    }

    /// The directory an entry is made or removed in must be inside.
    pub(super) fn require_dir(&self, dir: BorrowedFd<'_>) -> Result<(), Errno> {
        match self.class_dir(dir)? {
            Class::Inside => Ok(()),
            Class::Granted => self.beneath_grant(Some(dir), None, None),
            Class::Outside => self.outside(Some(dir), None, None),
            Class::Protected | Class::Denied => Err(Errno::ACCESS),
        }
    }

    /// `require_dir` for the entry `name` in `dir`: outside, the one
    /// name may be granted (see `grant`).
    pub(super) fn require_entry(&self, dir: BorrowedFd<'_>, name: &CStr) -> Result<(), Errno> {
        match self.class_dir(dir)? {
            Class::Inside => Ok(()),
            Class::Granted => self.beneath_grant(Some(dir), Some(name), None),
            Class::Outside => self.outside(Some(dir), Some(name), None),
            Class::Protected | Class::Denied => Err(Errno::ACCESS),
        }
    }
}

/// The directory a named non-directory sits in, by the kernel's own name for
/// it, accepted only if that directory still holds this very inode there.
pub(super) fn parent_of_named(fd: BorrowedFd<'_>, st: &Stat) -> Result<OwnedFd, ()> {
    let link = fs::readlink(proc_fd_path(fd), Vec::new()).map_err(|_| ())?;
    parent_of_link(link.as_bytes(), st)
}

/// `parent_of_named` with the kernel's name of the descriptor read already.
fn parent_of_link(bytes: &[u8], st: &Stat) -> Result<OwnedFd, ()> {
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
