//! Where a write goes: from an absolute, normalized path to an open parent
//! directory handle plus one final name, with the fence applied on the way.
//!
//! Fenced resolution never compares the remaining path against anything. It
//! picks the writable root the path lies under lexically, starts from that
//! root's *held* directory handle (opened once, when the root was first
//! used, so renaming the root away and putting a symlink at its path cannot
//! redirect it), and asks the kernel to resolve every further component
//! beneath it (cap-std: `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` on
//! Linux, a component-at-a-time `O_NOFOLLOW` walk holding each directory
//! handle elsewhere). A symlink that would leave the root, an absolute
//! symlink, or a magic link makes that resolution fail, whenever it was
//! swapped in. What the caller gets back is a directory *handle* and a single
//! name, so the temp file and the rename that follow are relative to that
//! handle and cannot be redirected by changing the path afterwards.
//!
//! The final component is the one place a symlink is followed by hand: a
//! write to `link` goes to where `link` points (as `echo > link` would), by
//! starting over from the link's target, which must itself lie under a
//! writable root and is resolved beneath it the same way. A symlink swapped
//! onto the final name after it was inspected is harmless: the rename
//! replaces the directory entry (the symlink itself), it never follows it.
//!
//! Inside the roots, the protected paths and the deny-read paths (see
//! `protect`) are refused by the identity of the directory handle the file
//! would be created in and of the file it would replace, checked before any
//! missing parent is created and again on the final parent.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata};
use stockade_core::SandboxMode;
use stockade_roots::HeldDir;

use crate::error::{Access, FsError, ProtectedBy, SymlinkHop};
use crate::lexical::{normalize, pick_root};
use crate::protect::{Hit, Protection, Why};

/// How many final-component symlinks a write follows before giving up (the
/// kernel's own limit for path resolution).
const MAX_SYMLINK_HOPS: usize = 40;

/// The file a write or edit will replace.
pub(crate) struct Target {
    /// The directory the file is in. Everything after this is done relative
    /// to this handle, with single-component names.
    pub parent: Dir,
    /// The file's name in `parent`.
    pub name: OsString,
    /// The absolute path of the file written (after following a final
    /// symlink), for outcomes and messages.
    pub path: PathBuf,
    /// What `name` is now, never a symlink: `None` when it does not exist.
    pub existing: Option<Metadata>,
}

/// One writable root: the directory held for it, and the spellings (each
/// absolute and normalized) a path may name it by.
pub(crate) struct Root {
    /// As the session gave it first (how written paths are reported), then
    /// where it was when held, symlinks resolved, when that differs.
    pub spellings: Vec<PathBuf>,
    pub held: Arc<HeldDir>,
}

/// Whether and how a call is fenced.
pub(crate) enum Fence<'a> {
    /// Anywhere the process itself may write.
    Unfenced,
    Beneath(Beneath<'a>),
}

/// Only beneath one of `roots`, and nothing `protection` refuses.
pub(crate) struct Beneath<'a> {
    /// For the denial text.
    pub mode: SandboxMode,
    pub roots: &'a [Root],
    /// What a denial lists as writable.
    pub writable: &'a [PathBuf],
    pub protection: &'a Protection,
}

impl Beneath<'_> {
    fn denied(&self, requested: &Path, symlink: Option<SymlinkHop>, hit: Option<Hit>) -> FsError {
        let (protected, protected_by) = match hit {
            Some(hit) if hit.why == Why::DenyRead => {
                return refusal(requested, self.mode, Access::Write, hit);
            }
            Some(Hit { path, why }) => (
                Some(path),
                Some(if why == Why::ReadOnly {
                    ProtectedBy::Policy
                } else {
                    ProtectedBy::Git
                }),
            ),
            None => (None, None),
        };
        FsError::Denied {
            path: requested.to_path_buf(),
            mode: self.mode,
            writable: self.writable.to_vec(),
            symlink,
            protected,
            protected_by,
        }
    }

    /// Refuse a write of `name` in `parent` that would replace, create, or
    /// create beneath a protected path.
    fn refuse_protected(
        &self,
        requested: &Path,
        opened: &Opened,
        existing: Option<&Metadata>,
        hop: &Option<SymlinkHop>,
    ) -> Result<(), FsError> {
        match self
            .protection
            .target_hit(&opened.parent, &opened.name, existing)
        {
            Ok(None) => Ok(()),
            Ok(Some(hit)) => Err(self.denied(requested, hop.clone(), Some(hit))),
            // Fails closed: a file whose place cannot be judged is not
            // written.
            Err(source) => Err(FsError::Io {
                op: "check for protected paths at",
                path: opened.path.clone(),
                source,
            }),
        }
    }
}

/// The refusal of `access` to `requested`, which reached the deny-read path
/// `hit`.
pub(crate) fn refusal(requested: &Path, mode: SandboxMode, access: Access, hit: Hit) -> FsError {
    FsError::DenyRead {
        path: requested.to_path_buf(),
        mode,
        access,
        denied: hit.path,
    }
}

/// Resolve `requested` (absolute, normalized) to the file to replace.
/// `create_parents` creates missing parent directories (beneath the root
/// when fenced), which a write wants and an edit does not.
pub(crate) fn locate(
    fence: &Fence<'_>,
    requested: &Path,
    create_parents: bool,
) -> Result<Target, FsError> {
    let mut logical = requested.to_path_buf();
    let mut hop: Option<SymlinkHop> = None;
    for _ in 0..=MAX_SYMLINK_HOPS {
        let opened = match fence {
            Fence::Unfenced => open_parent_ambient(requested, &logical, create_parents)?,
            Fence::Beneath(fence) => {
                open_parent_beneath(requested, &logical, fence, &hop, create_parents)?
            }
        };
        let metadata = match opened.parent.symlink_metadata(&opened.name) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(FsError::Io {
                    op: "inspect",
                    path: opened.path,
                    source,
                });
            }
        };
        match metadata {
            Some(m) if m.file_type().is_symlink() => {
                let target = opened
                    .parent
                    .read_link_contents(&opened.name)
                    .map_err(|source| FsError::Io {
                        op: "read the symlink",
                        path: opened.path.clone(),
                        source,
                    })?;
                // A relative target is relative to the directory the link
                // really is in, which differs from its lexical parent when a
                // symlink inside the root led there.
                logical = normalize(&opened.real_parent().join(&target));
                hop = Some(SymlinkHop {
                    link: opened.path,
                    target,
                });
            }
            Some(m) if !m.is_file() => {
                return Err(FsError::NotAFile { path: opened.path });
            }
            existing => {
                if let Fence::Beneath(fence) = fence {
                    fence.refuse_protected(requested, &opened, existing.as_ref(), &hop)?;
                }
                return Ok(Target {
                    parent: opened.parent,
                    name: opened.name,
                    path: opened.path,
                    existing,
                });
            }
        }
    }
    Err(FsError::TooManySymlinks {
        path: requested.to_path_buf(),
    })
}

/// A parent directory handle, and how to find where it really is.
struct Opened {
    parent: Dir,
    name: OsString,
    path: PathBuf,
    origin: Origin,
}

enum Origin {
    Ambient {
        parent: PathBuf,
    },
    Beneath {
        root_dir: Dir,
        root: PathBuf,
        parent_rel: PathBuf,
    },
}

impl Opened {
    /// The parent's path with symlinks resolved (beneath the root when
    /// fenced). Only used to aim the next hop, which is fenced again, so a
    /// race here can misdirect a hop inside the fence but never out of it.
    fn real_parent(&self) -> PathBuf {
        match &self.origin {
            Origin::Ambient { parent } => std::fs::canonicalize(parent).unwrap_or(parent.clone()),
            Origin::Beneath {
                root_dir,
                root,
                parent_rel,
            } => {
                let rel = if parent_rel.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent_rel
                };
                match root_dir.canonicalize(rel) {
                    Ok(real) => normalize(&root.join(real)),
                    Err(_) => root.join(parent_rel),
                }
            }
        }
    }
}

fn open_parent_ambient(
    requested: &Path,
    logical: &Path,
    create_parents: bool,
) -> Result<Opened, FsError> {
    let (Some(parent), Some(name)) = (logical.parent(), logical.file_name()) else {
        // `/` (or a bare prefix): not a file anyone can write.
        return Err(FsError::NotAFile {
            path: logical.to_path_buf(),
        });
    };
    if create_parents {
        std::fs::create_dir_all(parent).map_err(|source| FsError::Io {
            op: "create the parent directories of",
            path: logical.to_path_buf(),
            source,
        })?;
    }
    let dir = Dir::open_ambient_dir(parent, ambient_authority())
        .map_err(|e| dir_error(e, requested, logical))?;
    Ok(Opened {
        parent: dir,
        name: name.to_os_string(),
        path: logical.to_path_buf(),
        origin: Origin::Ambient {
            parent: parent.to_path_buf(),
        },
    })
}

fn open_parent_beneath(
    requested: &Path,
    logical: &Path,
    fence: &Beneath<'_>,
    hop: &Option<SymlinkHop>,
    create_parents: bool,
) -> Result<Opened, FsError> {
    // Lexically outside every root: refused without opening anything
    // beneath the roots.
    let Some((held, root, rel)) = pick_root_or_alias(fence.roots, logical) else {
        return Err(fence.denied(requested, hop.clone(), None));
    };
    let (Some(parent_rel), Some(name)) = (rel.parent(), rel.file_name()) else {
        // The root itself.
        return Err(FsError::NotAFile {
            path: logical.to_path_buf(),
        });
    };
    // A duplicate of the held handle, never the root's path opened again:
    // whatever is at that path now, this is the directory that was granted.
    let root_dir = held
        .file()
        .try_clone()
        .map(Dir::from_std_file)
        .map_err(|source| FsError::Io {
            op: "open the writable root",
            path: root.clone(),
            source,
        })?;
    let beneath_error = |e: io::Error| {
        if is_escape(&e) {
            fence.denied(requested, diagnose(&root_dir, &root, parent_rel), None)
        } else {
            dir_error(e, requested, logical)
        }
    };
    let guard = |dir: &Dir, name: &std::ffi::OsStr| match fence.protection.create_hit(dir, name) {
        Ok(None) => Ok(()),
        Ok(Some(hit)) => Err(fence.denied(requested, hop.clone(), Some(hit))),
        Err(source) => Err(FsError::Io {
            op: "check for protected paths above",
            path: logical.to_path_buf(),
            source,
        }),
    };
    let parent = if parent_rel.as_os_str().is_empty() {
        root_dir
            .try_clone()
            .map_err(|e| dir_error(e, requested, logical))?
    } else {
        open_dir_beneath(&root_dir, parent_rel, create_parents, &guard).map_err(|e| match e {
            Step::Io(e) => beneath_error(e),
            Step::Refused(e) => *e,
        })?
    };
    Ok(Opened {
        parent,
        name: name.to_os_string(),
        path: root.join(&rel),
        origin: Origin::Beneath {
            root_dir,
            parent_rel: parent_rel.to_path_buf(),
            root,
        },
    })
}

/// Why a step of `open_dir_beneath` stopped.
enum Step {
    Io(io::Error),
    /// The guard refused to create a directory there (boxed: an `FsError`
    /// is large, and this path is rare).
    Refused(Box<FsError>),
}

impl From<io::Error> for Step {
    fn from(e: io::Error) -> Self {
        Step::Io(e)
    }
}

/// Open `rel` beneath `root_dir`, creating missing directories on the way
/// when `create`. Each step is an `open_dir` beneath the root, so an escaping
/// symlink anywhere surfaces as cap-std's escape error (which
/// `create_dir_all` would report as a bare "File exists"), and each `mkdir`
/// is `mkdirat` in the directory handle just opened beneath the root, which
/// never follows the name it creates. `guard` judges that handle before each
/// `mkdir`, so nothing is created inside a protected directory.
fn open_dir_beneath(
    root_dir: &Dir,
    rel: &Path,
    create: bool,
    guard: &dyn Fn(&Dir, &std::ffi::OsStr) -> Result<(), FsError>,
) -> Result<Dir, Step> {
    match root_dir.open_dir(rel) {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {}
        opened => return Ok(opened?),
    }
    let mut here = PathBuf::new();
    let mut containing = root_dir.try_clone()?;
    for component in rel.components() {
        here.push(component);
        containing = match root_dir.open_dir(&here) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                guard(&containing, component.as_os_str())
                    .map_err(|e| Step::Refused(Box::new(e)))?;
                match containing.create_dir(component) {
                    // Someone else created it, or it is a dangling symlink:
                    // the next open decides which.
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(Step::Io(e)),
                }
                root_dir.open_dir(&here)?
            }
            Err(e) => return Err(Step::Io(e)),
        };
    }
    Ok(containing)
}

/// The root `path` lies under by any of its spellings (the most specific
/// match wins), the spelling written paths are reported with (the first),
/// and the rest of the path. A spelling only decides which held handle
/// resolution starts from; it is never opened.
fn pick_root_or_alias<'r>(
    roots: &'r [Root],
    path: &Path,
) -> Option<(&'r Arc<HeldDir>, PathBuf, PathBuf)> {
    let (spellings, owners): (Vec<PathBuf>, Vec<&Root>) = roots
        .iter()
        .flat_map(|r| r.spellings.iter().map(move |s| (s.clone(), r)))
        .unzip();
    let (matched, rest) = pick_root(&spellings, path)?;
    let owner = *owners.get(spellings.iter().position(|s| s == matched)?)?;
    let shown = owner.spellings.first().map_or(matched, |s| s.as_path());
    Some((&owner.held, shown.to_path_buf(), rest))
}

/// cap-std reports a resolution that would leave its directory as this
/// synthetic error (`EXDEV` from `openat2` is translated to it), which has no
/// OS error code, unlike a real `EACCES`.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

/// Which symlink in `parent_rel` led outside, for the message. Runs only
/// after the refusal, so it decides nothing; a race makes it find nothing.
fn diagnose(root_dir: &Dir, root: &Path, parent_rel: &Path) -> Option<SymlinkHop> {
    let mut here = PathBuf::new();
    for component in parent_rel.components() {
        here.push(component);
        let m = root_dir.symlink_metadata(&here).ok()?;
        if m.file_type().is_symlink() && root_dir.open_dir(&here).is_err_and(|e| is_escape(&e)) {
            let target = root_dir.read_link_contents(&here).ok()?;
            return Some(SymlinkHop {
                link: root.join(&here),
                target,
            });
        }
    }
    None
}

/// A parent directory that could not be opened (and was not an escape).
/// Anything but a plain absence keeps the OS's own words (`Not a
/// directory`, `Too many levels of symbolic links`), which say which.
fn dir_error(e: io::Error, requested: &Path, logical: &Path) -> FsError {
    if e.kind() == io::ErrorKind::NotFound {
        return FsError::NotFound {
            path: requested.to_path_buf(),
        };
    }
    FsError::Io {
        op: "open the directory of",
        path: logical.to_path_buf(),
        source: e,
    }
}
