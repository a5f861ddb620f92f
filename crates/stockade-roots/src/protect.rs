//! Paths inside writable roots that the host later executes or obeys, and
//! so must stay read-only in confining modes: the workspace repository's
//! `.git/hooks` and `.git/config` (for a worktree or a `.git` file, those of
//! the `gitdir:` target and of its common directory too), and the `.git`
//! file itself (rewriting it would point git at planted hooks).
//!
//! Each one is opened once (`O_PATH | O_NOFOLLOW`) so a runner can bind the
//! opened object read-only, and identified so the file fence can refuse
//! writes to it by identity rather than by a path a run could alias.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{HeldDir, RootError, beneath};

/// One protected path, opened.
#[derive(Debug, Clone)]
pub struct Protected {
    /// Where it is (resolved), which is where the command sees it.
    pub path: PathBuf,
    /// The object itself, opened without following a final symlink.
    pub file: Arc<File>,
    pub is_dir: bool,
    /// `false` for a directory that is only pinned in place (the `.git`
    /// directory: a runner binds it onto itself, writable, so it cannot be
    /// renamed away and replaced by one with planted hooks); the file fence
    /// leaves those alone.
    pub read_only: bool,
    pub dev: u64,
    pub ino: u64,
}

/// The protected paths of the repository `workspace` is in, limited to
/// those beneath one of `writable` (the others are read-only anyway). A
/// missing `hooks` directory is created (empty, as `git init` would) so it
/// can be protected before a run could plant one.
pub fn git_protected(
    workspace: &HeldDir,
    writable: &[PathBuf],
) -> Result<Vec<Protected>, RootError> {
    let Some((top, dotgit)) = find_dotgit(workspace.path()) else {
        return Ok(Vec::new());
    };
    // A `.git` another user left above the workspace (say `/tmp/.git`) is
    // not this repository (git itself refuses it as dubious ownership), and
    // must not let that user make every run fail.
    let owner = workspace.file().metadata().map(|m| m.uid()).ok();
    let dotgit_owner = std::fs::symlink_metadata(&dotgit).map(|m| m.uid()).ok();
    if owner.is_none() || owner != dotgit_owner {
        return Ok(Vec::new());
    }
    let mut out: Vec<Protected> = Vec::new();
    let meta = std::fs::symlink_metadata(&dotgit).map_err(|source| RootError::Protect {
        path: dotgit.clone(),
        source,
    })?;
    let gitdir = if meta.is_file() {
        if beneath(&dotgit, writable).is_some() {
            out.push(open(&dotgit, false)?);
        }
        match read_gitdir_file(&dotgit, &top) {
            Some(g) => g,
            None => return Ok(out),
        }
    } else if meta.file_type().is_symlink() {
        return Err(RootError::ProtectedSymlink { path: dotgit });
    } else {
        if beneath(&dotgit, writable).is_some() {
            let mut pin = open(&dotgit, true)?;
            pin.read_only = false;
            out.push(pin);
        }
        dotgit
    };
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        let common = gitdir.join(common.trim());
        if let Ok(c) = std::fs::canonicalize(&common)
            && !dirs.contains(&c)
        {
            dirs.push(c);
        }
    }
    for dir in dirs {
        let Ok(dir) = std::fs::canonicalize(&dir) else {
            continue;
        };
        if beneath(&dir, writable).is_none() {
            continue;
        }
        let hooks = dir.join("hooks");
        match std::fs::symlink_metadata(&hooks) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir(&hooks).map_err(|source| RootError::Protect {
                    path: hooks.clone(),
                    source,
                })?;
            }
            _ => {}
        }
        for (name, is_dir) in [
            ("hooks", true),
            ("config", false),
            ("config.worktree", false),
            // A worktree's pointer to the common dir: rewritten, it would
            // send git to planted hooks.
            ("commondir", false),
        ] {
            let p = dir.join(name);
            match std::fs::symlink_metadata(&p) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => return Err(RootError::Protect { path: p, source }),
                Ok(_) => out.push(open(&p, is_dir)?),
            }
        }
    }
    Ok(out)
}

/// The nearest `.git` at or above `from`, with the directory holding it.
fn find_dotgit(from: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut dir = Some(from);
    while let Some(d) = dir {
        let candidate = d.join(".git");
        if std::fs::symlink_metadata(&candidate).is_ok() {
            return Some((d.to_path_buf(), candidate));
        }
        dir = d.parent();
    }
    None
}

/// `gitdir: <path>` of a `.git` file, relative to the directory holding it.
fn read_gitdir_file(dotgit: &Path, top: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dotgit).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
    let target = top.join(line.trim());
    std::fs::canonicalize(target).ok()
}

/// Linux can open an object without read access to it; elsewhere a
/// read-only open does the same job for binding and identity.
#[cfg(target_os = "linux")]
const PATH_ONLY: i32 = libc::O_PATH;
#[cfg(not(target_os = "linux"))]
const PATH_ONLY: i32 = 0;

fn open(path: &Path, want_dir: bool) -> Result<Protected, RootError> {
    let err = |source: io::Error| RootError::Protect {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(PATH_ONLY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(err)?;
    let m = file.metadata().map_err(err)?;
    if m.file_type().is_symlink() {
        return Err(RootError::ProtectedSymlink {
            path: path.to_path_buf(),
        });
    }
    if m.is_dir() != want_dir && !(want_dir && m.is_file()) {
        return Err(err(io::Error::other(if want_dir {
            "not a directory"
        } else {
            "not a file"
        })));
    }
    Ok(Protected {
        path: path.to_path_buf(),
        file: Arc::new(file),
        is_dir: m.is_dir(),
        read_only: true,
        dev: m.dev(),
        ino: m.ino(),
    })
}
