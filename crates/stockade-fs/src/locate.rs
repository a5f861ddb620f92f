//! Where a write goes: from an absolute, normalized path to an open parent
//! directory handle plus one final name, with the fence applied on the way.
//!
//! Fenced resolution never compares the remaining path against anything. It
//! picks the writable root the path lies under lexically, opens that root as
//! a directory, and asks the kernel to resolve every further component
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

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata};
use stockade_core::SandboxMode;

use crate::error::{FsError, SymlinkHop};
use crate::lexical::{normalize, pick_root};

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

/// Whether and how a call is fenced.
pub(crate) enum Fence<'a> {
    /// Anywhere the process itself may write.
    Unfenced,
    /// Only beneath one of `roots` (absolute and normalized), judged under
    /// `mode` for the denial text.
    Beneath {
        mode: SandboxMode,
        roots: &'a [PathBuf],
    },
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
            Fence::Beneath { mode, roots } => {
                open_parent_beneath(requested, &logical, *mode, roots, &hop, create_parents)?
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
    mode: SandboxMode,
    roots: &[PathBuf],
    hop: &Option<SymlinkHop>,
    create_parents: bool,
) -> Result<Opened, FsError> {
    let denied = |symlink: Option<SymlinkHop>| FsError::Denied {
        path: requested.to_path_buf(),
        mode,
        writable: roots.to_vec(),
        symlink,
    };
    // Lexically outside every root: refused without touching the disk
    // beyond the roots themselves.
    let Some((root, rel)) = pick_root_or_alias(roots, logical) else {
        return Err(denied(hop.clone()));
    };
    let (Some(parent_rel), Some(name)) = (rel.parent(), rel.file_name()) else {
        // The root itself.
        return Err(FsError::NotAFile {
            path: logical.to_path_buf(),
        });
    };
    let root_dir =
        Dir::open_ambient_dir(&root, ambient_authority()).map_err(|source| FsError::Io {
            op: "open the writable root",
            path: root.clone(),
            source,
        })?;
    let beneath_error = |e: io::Error| {
        if is_escape(&e) {
            denied(diagnose(&root_dir, &root, parent_rel))
        } else {
            dir_error(e, requested, logical)
        }
    };
    let parent = if parent_rel.as_os_str().is_empty() {
        root_dir
            .try_clone()
            .map_err(|e| dir_error(e, requested, logical))?
    } else {
        open_dir_beneath(&root_dir, parent_rel, create_parents).map_err(beneath_error)?
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

/// Open `rel` beneath `root_dir`, creating missing directories on the way
/// when `create`. Each step is an `open_dir` beneath the root, so an escaping
/// symlink anywhere surfaces as cap-std's escape error (which
/// `create_dir_all` would report as a bare "File exists"), and each `mkdir`
/// is `mkdirat` in a directory opened beneath the root, which never follows
/// the name it creates.
fn open_dir_beneath(root_dir: &Dir, rel: &Path, create: bool) -> io::Result<Dir> {
    match root_dir.open_dir(rel) {
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => {}
        opened => return opened,
    }
    let mut here = PathBuf::new();
    for component in rel.components() {
        here.push(component);
        match root_dir.open_dir(&here) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => match root_dir.create_dir(&here) {
                // Someone else created it, or it is a dangling symlink: the
                // next open decides which.
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
    root_dir.open_dir(rel)
}

/// The root `path` lies under, as configured or, failing that, as its
/// canonical form (`/private/tmp` for `/tmp` on macOS), with the rest of the
/// path. The handle is always opened from the root as configured; an alias
/// only widens which spellings of the same directory are recognized.
fn pick_root_or_alias(roots: &[PathBuf], path: &Path) -> Option<(PathBuf, PathBuf)> {
    if let Some((root, rest)) = pick_root(roots, path) {
        return Some((root.to_path_buf(), rest));
    }
    let aliases: Vec<PathBuf> = roots
        .iter()
        .map(|r| std::fs::canonicalize(r).map_or_else(|_| r.clone(), |c| normalize(&c)))
        .collect();
    let (alias, rest) = pick_root(&aliases, path)?;
    let index = aliases.iter().position(|a| a == alias)?;
    Some((roots[index].clone(), rest))
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
