//! The file-system seam of the in-process file tools (read, write, edit).
//!
//! Those tools run inside the agent's process, where an argv wrapper means
//! nothing, so they obey the call's [`ExecutionPolicy`] here instead:
//!
//! - [`LocalFs`] is unfenced ([`FileSystem::fences`] is `false`); its writes
//!   are still atomic.
//! - [`SandboxedFs`] fences `write` and `edit` by the call's policy, with the
//!   same writable set as the bash sandbox: nothing under `read-only`; under
//!   `workspace-write` the workspace root, `/tmp` and `$TMPDIR`; everything
//!   under `danger-full-access`. A refusal is [`FsError::Denied`], whose text
//!   starts with the bash denial marker.
//!
//! Reads and listings are never fenced, as reads under bash are not.
//!
//! # How a fenced write is resolved
//!
//! The path is made absolute (a relative one against the workspace root) and
//! `.`/`..` are applied lexically. A path that then lies under no writable
//! root is refused without opening anything. Otherwise that root is opened
//! as a directory and every remaining component is resolved by the kernel
//! beneath it (cap-std: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` on Linux, a per-component `O_NOFOLLOW` walk on
//! macOS, the equivalent on Windows), so a symlink leading out, an absolute
//! symlink or a `/proc` magic link fails the resolution whenever it appears.
//! The temp file is created (create-new) in the resulting parent handle and
//! renamed over the final name within that handle. A final-component symlink
//! is followed by starting over from its target, fenced the same way.
//!
//! Missing parent directories are created by `write` (beneath the root when
//! fenced, with the same resolution), never by `edit`.
//!
//! Not defended: a process that can already write outside the root moving a
//! directory out of it while a write holds that directory's handle. Inside
//! the sandbox nothing can (bash under `workspace-write` cannot write there).
#![forbid(unsafe_code)]

mod atomic;
mod error;
mod lexical;
mod locate;

use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use stockade_core::{ExecutionPolicy, SandboxMode};

pub use atomic::TEMP_PREFIX;
pub use error::{FsError, SymlinkHop};

use crate::lexical::{absolutize, is_filesystem_root, root_form};
use crate::locate::{Fence, Target, locate};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxedFs {
    /// Writable under workspace-write besides the call's workspace root.
    temp_roots: Vec<PathBuf>,
}

impl Default for SandboxedFs {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxedFs {
    /// The host's temp roots as the bash sandbox grants them: `/tmp` and
    /// `$TMPDIR` when set, a directory, and not `/` (as set and canonical,
    /// so both spellings of it are recognized).
    pub fn new() -> Self {
        Self::with_temp_roots(host_temp_roots())
    }

    /// Exactly these temp roots (tests use private ones so the host's `/tmp`
    /// is not part of the fence). A filesystem root is dropped, never
    /// accepted: it would make workspace-write mean everything.
    pub fn with_temp_roots(roots: Vec<PathBuf>) -> Self {
        let mut temp_roots: Vec<PathBuf> = Vec::new();
        for root in roots {
            let Ok(root) = root_form(&root) else { continue };
            if !is_filesystem_root(&root) && !temp_roots.contains(&root) {
                temp_roots.push(root);
            }
        }
        Self { temp_roots }
    }

    /// The temp roots writable under workspace-write.
    pub fn temp_roots(&self) -> &[PathBuf] {
        &self.temp_roots
    }

    /// What `policy` lets the file tools write: `None` when unfenced
    /// (danger-full-access), empty under read-only (only `/dev/null` is
    /// writable, and the tools write no device), else the workspace root
    /// followed by the temp roots.
    pub fn writable_roots(&self, policy: &ExecutionPolicy) -> Option<Vec<PathBuf>> {
        match policy.mode {
            SandboxMode::ReadOnly => Some(Vec::new()),
            SandboxMode::WorkspaceWrite => {
                let workspace = root_form(&policy.workspace_root)
                    .unwrap_or_else(|_| policy.workspace_root.clone());
                let mut roots = vec![workspace];
                for t in &self.temp_roots {
                    if !roots.contains(t) {
                        roots.push(t.clone());
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
        match self.writable_roots(policy) {
            None => locate(
                &Fence::Unfenced,
                &requested_path(path, policy)?,
                create_parents,
            ),
            Some(roots) if roots.is_empty() => Err(FsError::Denied {
                // Refused whatever the path; if even the workspace root is
                // unusable, name the path as given.
                path: requested_path(path, policy).unwrap_or_else(|_| path.to_path_buf()),
                mode: policy.mode,
                writable: roots,
                symlink: None,
            }),
            Some(roots) => locate(
                &Fence::Beneath {
                    mode: policy.mode,
                    roots: &roots,
                },
                &requested_path(path, policy)?,
                create_parents,
            ),
        }
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

#[cfg(unix)]
fn host_temp_roots() -> Vec<PathBuf> {
    temp_roots_from(Path::new("/tmp"), std::env::var_os("TMPDIR"))
}

/// Off Unix there is no `/tmp`; the host temp root is the OS's temp dir.
#[cfg(not(unix))]
fn host_temp_roots() -> Vec<PathBuf> {
    let t = std::env::temp_dir();
    if t.is_dir() { vec![t] } else { Vec::new() }
}

/// `tmp` when it is a directory, and `$TMPDIR` (`tmpdir`) when it is set and
/// a directory, canonical and also as set. Any of them resolving to `/` is
/// left out: the ambient environment must not widen the promise.
#[cfg(unix)]
fn temp_roots_from(tmp: &Path, tmpdir: Option<OsString>) -> Vec<PathBuf> {
    let usable = |p: &Path| {
        std::fs::canonicalize(p)
            .ok()
            .filter(|c| c.is_dir() && !is_filesystem_root(c))
    };
    let mut roots = Vec::new();
    if usable(tmp).is_some() {
        roots.push(tmp.to_path_buf());
    }
    if let Some(set) = tmpdir.filter(|t| !t.is_empty()).map(PathBuf::from)
        && let Some(canonical) = usable(&set)
    {
        roots.push(canonical);
        roots.push(set);
    }
    roots
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
