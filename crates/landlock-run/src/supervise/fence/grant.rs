//! Run-time grants (`--ask-fd`): a path or a directory outside every
//! writable root, allowed for the rest of the command by whoever answers
//! the approval channel.
//!
//! A refusal qualifies for a question only when the one reason is that the
//! object lies outside every writable root (`Class::Outside`): protected,
//! deny-read and every other refusal is made before or instead of that
//! verdict and never recorded here. The refused place is recorded as held
//! handles (the directory, by descriptor, and the name in it), and what an
//! answer grants is that held directory (beneath it), or that one name in
//! it and the object it named, by identity: a symlink swapped or a
//! directory renamed after the question changes nothing about what was
//! granted, and nothing is looked up by name again.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::PoisonError;

use super::*;

/// What one answer may grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Refuse,
    /// The one name in its directory (and the object it named then).
    Path,
    /// The directory holding the name, and everything beneath it.
    Directory,
}

/// A refusal made only because the place lies outside every writable root.
#[derive(Debug)]
pub struct Outside {
    /// The directory the refused name is in, held since the refusal.
    dir: OwnedFd,
    dir_id: Id,
    name: CString,
    /// The object the name reached at the refusal, when it existed.
    obj: Option<(Id, OwnedFd)>,
}

impl Outside {
    /// What identifies the question: the directory by identity and the
    /// name in it (the same place however the child spelled it).
    pub fn key(&self) -> (Id, CString) {
        (self.dir_id, self.name.clone())
    }

    /// The absolute path, as bytes, for the person answering: the kernel's
    /// current name of the held directory, then the name. Shown only; never
    /// looked up again.
    pub fn path(&self) -> Vec<u8> {
        let mut out = fs::readlink(proc_fd_path(self.dir.as_fd()), Vec::new())
            .map(|c| c.into_bytes())
            .unwrap_or_default();
        if out.last() != Some(&b'/') {
            out.push(b'/');
        }
        out.extend_from_slice(self.name.as_bytes());
        out
    }
}

/// Grants made during this run, each holding what it names open (so no
/// identity it is keyed by can be reused by another object).
#[derive(Debug, Default)]
pub(super) struct Granted {
    dirs: HashMap<Id, OwnedFd>,
    entries: HashMap<(Id, CString), OwnedFd>,
    objects: HashMap<Id, OwnedFd>,
}

thread_local! {
    /// The first outside-only refusal of the call this worker performs.
    static REFUSED: RefCell<Option<Outside>> = const { RefCell::new(None) };
}

/// Clears and returns this worker's recorded refusal.
pub fn take_outside() -> Option<Outside> {
    REFUSED.with(|r| r.borrow_mut().take())
}

/// Kernel interfaces, not places: a write there sets the kernel's state
/// (proc, sysfs, cgroups, tracing, bpf, efivars, ...) or a device's.
const KERNEL_FS_MAGIC: [i64; 12] = [
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x1cd1,      // devpts
    0x0027_e0eb, // cgroup
    0x6367_7270, // cgroup2
    0x6462_6720, // debugfs
    0x7472_6163, // tracefs
    0x7363_6673, // securityfs
    0xcafe_4a11, // bpf
    0x6265_6570, // configfs
    0xde5e_81e4, // efivarfs
    0x6165_676c, // pstore
];

/// Whether a refusal may become a question: only a place in a file tree
/// (a regular file, a directory, a symlink, or a name not there yet) on a
/// file system that holds files. A device node (`/dev/tty` opened by every
/// shell without a terminal, a disk) or a kernel interface is refused as
/// without a channel, never offered: no user should be asked to let a
/// command write a device or a sysctl, and a shell's start-up probe must
/// not cost a question.
// `f_type`'s type differs by architecture.
#[allow(clippy::unnecessary_cast)]
fn askable(dir: Option<BorrowedFd<'_>>, obj: Option<&Obj>) -> bool {
    if obj.is_some_and(|o| {
        !matches!(
            kind(&o.st),
            FileType::RegularFile | FileType::Directory | FileType::Symlink
        )
    }) {
        return false;
    }
    let on = obj.map(|o| o.fd.as_fd()).or(dir);
    match on.map(fs::fstatfs) {
        Some(Ok(st)) => !KERNEL_FS_MAGIC.contains(&(st.f_type as i64)),
        Some(Err(_)) => false,
        None => true,
    }
}

impl Fence {
    fn granted(&self) -> std::sync::RwLockReadGuard<'_, Granted> {
        self.granted.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the held directory `here` is a granted directory (a walk
    /// from beneath it stops there, as at a writable root).
    pub(super) fn is_granted_dir(&self, here: &Id) -> bool {
        // Grants only exist where questions were asked: without any, no
        // lock is taken on a walk.
        self.any_granted.load(std::sync::atomic::Ordering::Relaxed)
            && self.granted().dirs.contains_key(here)
    }

    /// An outside verdict on `name` in `dir` (and, when it exists, on
    /// `obj`): allowed when a grant covers it; otherwise recorded for a
    /// question (when asking) and refused.
    pub(super) fn outside(
        &self,
        dir: Option<BorrowedFd<'_>>,
        name: Option<&CStr>,
        obj: Option<&Obj>,
    ) -> Result<(), Errno> {
        let granted = self.any_granted.load(std::sync::atomic::Ordering::Relaxed);
        if !granted && !self.asking() {
            return Err(Errno::ACCESS);
        }
        let dir_id = match dir {
            Some(d) => Some(id(&fs::fstat(d)?)),
            None => None,
        };
        {
            let g = self.granted();
            if obj.is_some_and(|o| g.objects.contains_key(&id(&o.st))) {
                return Ok(());
            }
            if let (Some(d), Some(n)) = (dir_id, name)
                && g.entries.contains_key(&(d, n.to_owned()))
            {
                return Ok(());
            }
        }
        if !self.asking() || !askable(dir, obj) {
            return Err(Errno::ACCESS);
        }
        if let (Some(d), Some(dir_id), Some(name)) = (dir, dir_id, name) {
            let held = rustix::io::fcntl_dupfd_cloexec(d, 0)?;
            let obj = match obj {
                Some(o) => Some((id(&o.st), rustix::io::fcntl_dupfd_cloexec(&o.fd, 0)?)),
                None => None,
            };
            REFUSED.with(|r| {
                let mut slot = r.borrow_mut();
                if slot.is_none() {
                    *slot = Some(Outside {
                        dir: held,
                        dir_id,
                        name: name.to_owned(),
                        obj,
                    });
                }
            });
        }
        Err(Errno::ACCESS)
    }

    /// Whether a grant made since `q` was recorded already covers it.
    pub fn covers(&self, q: &Outside) -> bool {
        {
            let g = self.granted();
            if g.entries.contains_key(&q.key())
                || q.obj
                    .as_ref()
                    .is_some_and(|(i, _)| g.objects.contains_key(i))
            {
                return true;
            }
        }
        matches!(
            self.class_dir(q.dir.as_fd()),
            Ok(Class::Inside | Class::Granted)
        )
    }

    /// A call beneath a granted directory (`Class::Granted`): `dir` with the
    /// entry `name`, or the object `obj` by its own name. Refused when a
    /// name beneath the grant starts with a dot: what the user's tools run
    /// later without asking (`.git` and its hooks, hook managers, `.envrc`,
    /// editor and agent settings, rc files) lives under such names, and a
    /// grant of a directory must not let a command plant it there for the
    /// user's next `git status` or `cd`. The names are the kernel's current
    /// ones for the held handles; every rename beneath a grant is performed
    /// here under this same rule, so no dot-name can be made to look clean
    /// and then be renamed back.
    pub(super) fn beneath_grant(
        &self,
        dir: Option<BorrowedFd<'_>>,
        name: Option<&CStr>,
        obj: Option<&Obj>,
    ) -> Result<(), Errno> {
        if name.is_some_and(|n| n.to_bytes().first() == Some(&b'.')) {
            return Err(Errno::ACCESS);
        }
        let place = match (dir, obj) {
            (Some(d), _) => d,
            (None, Some(o)) => o.fd.as_fd(),
            (None, None) => return Err(Errno::ACCESS),
        };
        let here = fs::readlink(proc_fd_path(place), Vec::new())?.into_bytes();
        let g = self.granted();
        for held in g.dirs.values() {
            let Ok(top) = fs::readlink(proc_fd_path(held.as_fd()), Vec::new()) else {
                continue;
            };
            let top = top.as_bytes();
            let rest = if here == top {
                Some(&[][..])
            } else if here.starts_with(top) && here.get(top.len()) == Some(&b'/') {
                Some(&here[top.len() + 1..])
            } else if top == b"/" && here.first() == Some(&b'/') {
                Some(&here[1..])
            } else {
                None
            };
            if let Some(rest) = rest {
                let dotted = rest.split(|b| *b == b'/').any(|c| c.first() == Some(&b'.'));
                return if dotted { Err(Errno::ACCESS) } else { Ok(()) };
            }
        }
        // Beneath a grant by identity, yet under none of their names now:
        // nothing to judge the names by, so nothing is allowed.
        Err(Errno::ACCESS)
    }

    /// Records the answer's grant; later calls are judged with it.
    pub fn grant(&self, q: Outside, answer: Answer) {
        let mut g = self.granted.write().unwrap_or_else(PoisonError::into_inner);
        if answer != Answer::Refuse {
            self.any_granted
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        match answer {
            Answer::Refuse => {}
            Answer::Path => {
                if let Some((i, fd)) = q.obj {
                    g.objects.insert(i, fd);
                }
                g.entries.insert((q.dir_id, q.name), q.dir);
            }
            Answer::Directory => {
                g.dirs.insert(q.dir_id, q.dir);
                drop(g);
                // Kept classes of directories beneath it said outside.
                self.cache.forget_dirs();
            }
        }
    }
}
