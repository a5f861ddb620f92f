//! The file-system seam of the in-process file tools (read, write, edit).
//!
//! Those tools run inside the agent's process, where an argv wrapper means
//! nothing, so they obey the call's [`ExecutionPolicy`] here instead:
//!
//! - [`LocalFs`] is unfenced ([`FileSystem::fences`] is `false`); its writes
//!   are still atomic.
//! - [`SandboxedFs`] fences `write` and `edit` by the call's policy, with the
//!   same writable set as the bash sandbox: nothing under `read-only`; under
//!   `workspace-write` the workspace root, `/tmp` and `$TMPDIR` except the
//!   paths git runs or obeys outside the sandbox (`.git/hooks`,
//!   `.git/config`, ...); everything under `danger-full-access`. A refusal
//!   is [`FsError::Denied`], whose text starts with the bash denial marker.
//!
//! Reads and listings are never fenced, as reads under bash are not.
//!
//! # How a fenced write is resolved
//!
//! The writable roots are held ([`RootPins`]): each is opened once, the
//! first time it is used (the temp roots when the pins are built), and
//! every later call first checks that its path still names the held
//! directory, failing closed ([`FsError::Root`]) otherwise. A confined
//! command that renames the workspace away and puts a symlink to `/` at its
//! path therefore stops the file tools instead of aiming them.
//!
//! The path is made absolute (a relative one against the workspace root) and
//! `.`/`..` are applied lexically. A path that then lies under no writable
//! root (by the root's spelling as given or as resolved when held) is
//! refused without opening anything beneath the roots. Otherwise resolution
//! starts from that root's held directory handle, never its path, and every
//! remaining component is resolved by the kernel beneath it (cap-std:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` on Linux, a
//! per-component `O_NOFOLLOW` walk on macOS, the equivalent on Windows), so
//! a symlink leading out, an absolute symlink or a `/proc` magic link fails
//! the resolution whenever it appears.
//! The temp file is created (create-new) in the resulting parent handle and
//! renamed over the final name within that handle. A final-component symlink
//! is followed by starting over from its target, fenced the same way.
//!
//! Missing parent directories are created by `write` (beneath the root when
//! fenced, with the same resolution), never by `edit`.
//!
//! Under workspace-write the workspace repository's protected paths (found
//! per call by [`stockade_roots::git_protected`], Unix only) are refused by
//! identity: the directory the file lands in and every directory above it
//! are compared (device, inode) with the protected directories, and the file
//! replaced with the protected files, so no alias of `.git/hooks` gets past.
//!
//! Not defended: a process that can already write outside the root moving a
//! directory out of it while a write holds that directory's handle. Inside
//! the sandbox nothing can (bash under `workspace-write` cannot write there).
#![forbid(unsafe_code)]

mod atomic;
mod error;
mod lexical;
mod locate;
mod protect;

use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stockade_core::{ExecutionPolicy, SandboxMode};
use stockade_roots::HeldDir;

pub use atomic::TEMP_PREFIX;
pub use error::{FsError, SymlinkHop};
pub use stockade_roots::{RootError, RootPins};

use crate::lexical::{absolutize, normalize, root_form};
use crate::locate::{Beneath, Fence, Root, Target, locate};
use crate::protect::Protection;

/// What the in-process file tools do to files.
pub trait FileSystem: Send + Sync {
    /// Whether writes are fenced by the call's policy. The tools advertise
    /// the escalation fields only then.
    fn fences(&self) -> bool;

    /// The contents of the regular file at `path`. Unfenced, like reads under
    /// bash. A relative `path` is relative to the process's working
    /// directory: callers with a workspace join it first.
    fn read(&self, path: &Path) -> Result<Vec<u8>, FsError> {
        read_file(path)
    }

    /// The entries of the directory `dir`, sorted by name; symlinks are
    /// reported as symlinks, not followed. Unfenced.
    fn list(&self, dir: &Path) -> Result<Vec<DirEntryInfo>, FsError> {
        list_dir(dir)
    }

    /// Create or replace `path` with `contents`, atomically (a temp file in
    /// the same directory, synced, then renamed over it), under `policy`. A
    /// relative `path` resolves against `policy.workspace_root`; missing
    /// parent directories are created; a final symlink is written through.
    fn write(
        &self,
        path: &Path,
        contents: &[u8],
        policy: &ExecutionPolicy,
    ) -> Result<WriteOutcome, FsError>;

    /// Replace the exact text `old` with `new` in the UTF-8 file at `path`,
    /// written back atomically under `policy`. `old` must occur exactly once
    /// ([`FsError::OldTextNotFound`], [`FsError::NotUnique`] otherwise)
    /// unless `replace_all`, which replaces every occurrence (at least one).
    fn edit(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        replace_all: bool,
        policy: &ExecutionPolicy,
    ) -> Result<EditOutcome, FsError>;
}

/// One entry of [`FileSystem::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    /// The entry's name, exactly as the OS has it (not necessarily UTF-8).
    pub name: OsString,
    pub kind: EntryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A device, FIFO, socket, ...
    Other,
}

/// A successful [`FileSystem::write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The file written: absolute, and past a final symlink when there was
    /// one.
    pub path: PathBuf,
    /// Whether the file did not exist before.
    pub created: bool,
    pub bytes: usize,
}

/// A successful [`FileSystem::edit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOutcome {
    /// The file edited (as for [`WriteOutcome::path`]).
    pub path: PathBuf,
    /// How many occurrences were replaced (1 unless `replace_all`).
    pub replacements: usize,
}

/// The unfenced provider: writes go wherever the process may write. Still
/// atomic.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFs;

impl FileSystem for LocalFs {
    fn fences(&self) -> bool {
        false
    }

    fn write(
        &self,
        path: &Path,
        contents: &[u8],
        policy: &ExecutionPolicy,
    ) -> Result<WriteOutcome, FsError> {
        let requested = requested_path(path, policy)?;
        write_to(locate(&Fence::Unfenced, &requested, true)?, contents)
    }

    fn edit(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        replace_all: bool,
        policy: &ExecutionPolicy,
    ) -> Result<EditOutcome, FsError> {
        let requested = requested_path(path, policy)?;
        edit_at(
            locate(&Fence::Unfenced, &requested, false)?,
            old,
            new,
            replace_all,
        )
    }
}

/// The fenced provider: `write` and `edit` obey the call's mode (see the
/// crate docs for how).
#[derive(Debug, Clone)]
pub struct SandboxedFs {
    /// The writable roots, held. Shared with the session's runner, so the
    /// file tools and bash grant the same directories and a root moved by
    /// one confined run fails both.
    pins: Arc<RootPins>,
}

impl Default for SandboxedFs {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxedFs {
    /// The host's temp roots as the bash sandbox grants them (`/tmp` and a
    /// usable `$TMPDIR`), held now, in pins of its own.
    pub fn new() -> Self {
        Self::with_pins(Arc::new(RootPins::from_env()))
    }

    /// The writable roots held in `pins` (the session's, shared with its
    /// runner); each workspace is held there on its first use.
    pub fn with_pins(pins: Arc<RootPins>) -> Self {
        Self { pins }
    }

    /// Exactly these temp roots, held now (tests use private ones so the
    /// host's `/tmp` is not part of the fence). At most two: the first is
    /// held as `/tmp`, the second as `$TMPDIR`, and any further one is not
    /// granted. One that is missing, not a directory or the filesystem root
    /// is not granted either: it would make workspace-write mean
    /// everything, or nothing stable.
    pub fn with_temp_roots(roots: Vec<PathBuf>) -> Self {
        let mut roots = roots.into_iter();
        let tmp = roots.next();
        let tmpdir = roots.next();
        let pins = match (tmp, tmpdir) {
            (None, _) => RootPins::without_temp_roots(),
            (Some(tmp), tmpdir) => RootPins::new(Some(&tmp), tmpdir.map(PathBuf::into_os_string)),
        };
        Self::with_pins(Arc::new(pins))
    }

    /// The pins this provider fences by.
    pub fn pins(&self) -> &Arc<RootPins> {
        &self.pins
    }

    /// The temp roots writable under workspace-write, each as given and,
    /// when it differs, as resolved when held.
    pub fn temp_roots(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for held in self.pins.temp_roots() {
            for s in spellings(held) {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// What `policy` lets the file tools write: `None` when unfenced
    /// (danger-full-access), empty under read-only (only `/dev/null` is
    /// writable, and the tools write no device), else the workspace root (as
    /// given, normalized) followed by the temp roots. Protected paths inside
    /// them are refused all the same.
    pub fn writable_roots(&self, policy: &ExecutionPolicy) -> Option<Vec<PathBuf>> {
        match policy.mode {
            SandboxMode::ReadOnly => Some(Vec::new()),
            SandboxMode::WorkspaceWrite => {
                let workspace = root_form(&policy.workspace_root)
                    .unwrap_or_else(|_| policy.workspace_root.clone());
                let mut roots = vec![workspace];
                for t in self.temp_roots() {
                    if !roots.contains(&t) {
                        roots.push(t);
                    }
                }
                Some(roots)
            }
            SandboxMode::DangerFullAccess => None,
        }
    }

    /// Where a write or edit of `path` under `policy` goes, or its refusal.
    fn locate(
        &self,
        path: &Path,
        policy: &ExecutionPolicy,
        create_parents: bool,
    ) -> Result<Target, FsError> {
        match policy.mode {
            SandboxMode::DangerFullAccess => locate(
                &Fence::Unfenced,
                &requested_path(path, policy)?,
                create_parents,
            ),
            SandboxMode::ReadOnly => Err(FsError::Denied {
                // Refused whatever the path; if even the workspace root is
                // unusable, name the path as given.
                path: requested_path(path, policy).unwrap_or_else(|_| path.to_path_buf()),
                mode: policy.mode,
                writable: Vec::new(),
                symlink: None,
                protected: None,
            }),
            SandboxMode::WorkspaceWrite => self.locate_beneath(path, policy, create_parents),
        }
    }

    /// A workspace-write call: beneath the held roots, never into a
    /// protected path.
    fn locate_beneath(
        &self,
        path: &Path,
        policy: &ExecutionPolicy,
        create_parents: bool,
    ) -> Result<Target, FsError> {
        let requested = requested_path(path, policy)?;
        let closed = |source: RootError| FsError::Root {
            path: requested.clone(),
            source,
        };
        let given = std::path::absolute(&policy.workspace_root).map_err(|source| FsError::Io {
            op: "resolve against the workspace root",
            path: path.to_path_buf(),
            source,
        })?;
        // Held on first use, verified (with the temp roots) on every later
        // one: a workspace or temp root moved since fails the call here,
        // before anything is opened.
        let workspace = self.pins.workspace(&given).map_err(closed)?;
        let protection = self.protection(&workspace).map_err(|e| match e {
            Protect::Root(source) => closed(source),
            Protect::Io(source) => FsError::Io {
                op: "identify the protected paths for",
                path: requested.clone(),
                source,
            },
        })?;
        let mut roots = vec![Root {
            spellings: spellings(&workspace),
            held: workspace,
        }];
        for held in self.pins.temp_roots() {
            roots.push(Root {
                spellings: spellings(held),
                held: held.clone(),
            });
        }
        let writable = self.writable_roots(policy).unwrap_or_default();
        locate(
            &Fence::Beneath(Beneath {
                mode: policy.mode,
                roots: &roots,
                writable: &writable,
                protection: &protection,
            }),
            &requested,
            create_parents,
        )
    }

    /// The workspace repository's protected paths, found afresh (a run may
    /// have made the workspace a repository since the last call); the
    /// lookup re-verifies the workspace once the list is built.
    #[cfg(unix)]
    fn protection(&self, workspace: &HeldDir) -> Result<Protection, Protect> {
        let writable = self.pins.writable_paths(Some(workspace));
        let list = stockade_roots::git_protected(workspace, &writable).map_err(Protect::Root)?;
        Protection::of(&list).map_err(Protect::Io)
    }

    /// Off Unix nothing is protected beyond the roots.
    #[cfg(not(unix))]
    fn protection(&self, _: &HeldDir) -> Result<Protection, Protect> {
        Ok(Protection::none())
    }
}

/// Why the protected paths could not be found (off Unix nothing is looked
/// for, so nothing fails).
#[cfg_attr(not(unix), allow(dead_code))]
enum Protect {
    Root(RootError),
    Io(std::io::Error),
}

/// The spellings of a held root: as given (normalized), then as resolved
/// when held, when that differs.
fn spellings(held: &HeldDir) -> Vec<PathBuf> {
    let given = normalize(held.given());
    let resolved = normalize(held.path());
    if given == resolved {
        vec![given]
    } else {
        vec![given, resolved]
    }
}

impl FileSystem for SandboxedFs {
    fn fences(&self) -> bool {
        true
    }

    fn write(
        &self,
        path: &Path,
        contents: &[u8],
        policy: &ExecutionPolicy,
    ) -> Result<WriteOutcome, FsError> {
        write_to(self.locate(path, policy, true)?, contents)
    }

    fn edit(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        replace_all: bool,
        policy: &ExecutionPolicy,
    ) -> Result<EditOutcome, FsError> {
        // Located (and so fenced) before anything is read: a refused edit is
        // refused whether or not the file exists or the text matches.
        edit_at(self.locate(path, policy, false)?, old, new, replace_all)
    }
}

/// `path` made absolute against the call's workspace root, `.`/`..` applied.
fn requested_path(path: &Path, policy: &ExecutionPolicy) -> Result<PathBuf, FsError> {
    let base = root_form(&policy.workspace_root).map_err(|source| FsError::Io {
        op: "resolve against the workspace root",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(absolutize(&base, path))
}

fn write_to(target: Target, contents: &[u8]) -> Result<WriteOutcome, FsError> {
    atomic::replace(&target, contents).map_err(|source| FsError::Io {
        op: "write",
        path: target.path.clone(),
        source,
    })?;
    Ok(WriteOutcome {
        created: target.existing.is_none(),
        bytes: contents.len(),
        path: target.path,
    })
}

fn edit_at(
    target: Target,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<EditOutcome, FsError> {
    let path = target.path.clone();
    if target.existing.is_none() {
        return Err(FsError::NotFound { path });
    }
    if old.is_empty() {
        return Err(FsError::EmptyOldText { path });
    }
    // Read through the same handle the result is written to, so the text
    // edited is the text replaced.
    let mut bytes = Vec::new();
    target
        .parent
        .open(&target.name)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| FsError::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
    let text = String::from_utf8(bytes).map_err(|_| FsError::InvalidUtf8 { path: path.clone() })?;
    let (edited, replacements) =
        replace_text(&text, old, new, replace_all).map_err(|count| match count {
            0 => FsError::OldTextNotFound { path: path.clone() },
            count => FsError::NotUnique {
                path: path.clone(),
                count,
            },
        })?;
    write_to(target, edited.as_bytes())?;
    Ok(EditOutcome { path, replacements })
}

/// `text` with `old` replaced, and how many times; `Err(count)` when `old`
/// does not occur (0) or occurs more than once without `replace_all`.
/// Occurrences are counted without overlap, as they are replaced.
fn replace_text(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), usize> {
    let count = text.matches(old).count();
    match count {
        0 => Err(0),
        1 => Ok((text.replacen(old, new, 1), 1)),
        n if replace_all => Ok((text.replace(old, new), n)),
        n => Err(n),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, FsError> {
    let io = |op: &'static str| {
        move |source: std::io::Error| match source.kind() {
            std::io::ErrorKind::NotFound => FsError::NotFound {
                path: path.to_path_buf(),
            },
            _ => FsError::Io {
                op,
                path: path.to_path_buf(),
                source,
            },
        }
    };
    // Only regular files: reading a FIFO or a device could block or never
    // end.
    if !std::fs::metadata(path).map_err(io("read"))?.is_file() {
        return Err(FsError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    std::fs::read(path).map_err(io("read"))
}

fn list_dir(dir: &Path) -> Result<Vec<DirEntryInfo>, FsError> {
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound {
            path: dir.to_path_buf(),
        },
        _ => FsError::Io {
            op: "list",
            path: dir.to_path_buf(),
            source,
        },
    };
    if !std::fs::metadata(dir).map_err(io)?.is_dir() {
        return Err(FsError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let kind = match entry.file_type() {
            Ok(t) if t.is_symlink() => EntryKind::Symlink,
            Ok(t) if t.is_dir() => EntryKind::Dir,
            Ok(t) if t.is_file() => EntryKind::File,
            _ => EntryKind::Other,
        };
        entries.push(DirEntryInfo {
            name: entry.file_name(),
            kind,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

#[cfg(test)]
mod tests;
