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
    // A `.git` another user left ABOVE the workspace (say `/tmp/.git`) is
    // not this repository (git itself refuses it as dubious ownership), and
    // must not let that user make every run fail. One at or inside the
    // workspace is protected whoever owns it.
    if top != workspace.path() {
        let owner = workspace.file().metadata().map(|m| m.uid()).ok();
        let dotgit_owner = std::fs::symlink_metadata(&dotgit).map(|m| m.uid()).ok();
        if owner.is_none() || owner != dotgit_owner {
            return Ok(Vec::new());
        }
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
    let mut gitdirs: Vec<(PathBuf, GitDirKind)> = vec![(gitdir.clone(), GitDirKind::Own)];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir"))
        && let Ok(c) = std::fs::canonicalize(gitdir.join(common.trim()))
        && c != gitdir
    {
        gitdirs.push((c, GitDirKind::Own));
    }
    // Every other git directory git may use from here: submodules' (nested
    // to any depth, bounded) and linked worktrees'. Their config and hooks
    // run just the same when the user works in them.
    let mut i = 0;
    while i < gitdirs.len() && gitdirs.len() < MAX_GITDIRS {
        let (dir, _) = gitdirs[i].clone();
        for (sub, kind) in [
            ("modules", GitDirKind::Own),
            ("worktrees", GitDirKind::Worktree),
        ] {
            collect_gitdirs(&dir.join(sub), kind, &mut gitdirs);
        }
        i += 1;
    }
    let mut configs = Vec::new();
    for (dir, kind) in gitdirs {
        let Ok(dir) = std::fs::canonicalize(&dir) else {
            continue;
        };
        configs.push(dir.join("config"));
        configs.push(dir.join("config.worktree"));
        if beneath(&dir, writable).is_none() {
            continue;
        }
        protect_gitdir(&dir, kind, &mut out)?;
    }
    protect_config_targets(&top, &configs, writable, &mut out)?;
    // The list was found from the workspace's path: it is only this
    // repository's if the path still names the held directory now that the
    // list is built (every caller, runner or fence, gets this check).
    workspace.verify(writable)?;
    Ok(out)
}

/// What a (protected) config points git at that would run or configure it:
/// `core.hooksPath` (a hooks directory, relative to the working tree),
/// `include.path` / `includeIf.*.path` (more config, relative to the file
/// naming it) and a `core.fsmonitor` that names an existing file. Those
/// lying beneath a writable root are protected too; one that does not
/// exist there yet is refused, since a confined run could create it.
fn protect_config_targets(
    top: &Path,
    configs: &[PathBuf],
    writable: &[PathBuf],
    out: &mut Vec<Protected>,
) -> Result<(), RootError> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut queue: Vec<PathBuf> = configs.to_vec();
    while let Some(config) = queue.pop() {
        if seen.contains(&config) || seen.len() > MAX_GITDIRS {
            continue;
        }
        seen.push(config.clone());
        let Ok(text) = std::fs::read_to_string(&config) else {
            continue;
        };
        let base = config.parent().unwrap_or(top).to_path_buf();
        for (section, key, value) in config_entries(&text) {
            let (target, is_dir, must_exist) = match (section.as_str(), key.as_str()) {
                ("core", "hookspath") => (resolve(top, &value), true, true),
                ("include" | "includeif", "path") => (resolve(&base, &value), false, true),
                ("core", "fsmonitor") if value.contains('/') => {
                    (resolve(top, &value), false, false)
                }
                _ => continue,
            };
            if beneath(&target, writable).is_none() {
                continue;
            }
            match std::fs::symlink_metadata(&target) {
                Ok(_) => {
                    if !is_dir {
                        queue.push(target.clone());
                    }
                    out.push(open(&target, is_dir)?);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && must_exist => {
                    return Err(RootError::Protect {
                        path: target,
                        source: io::Error::other(format!(
                            "named by {} but missing inside a writable root, where a confined run could create it",
                            config.display()
                        )),
                    });
                }
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// `~/x` against `$HOME`, a relative path against `base`.
fn resolve(base: &Path, value: &str) -> PathBuf {
    match value.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .unwrap_or_else(|| base.join(value)),
        None => base.join(value),
    }
}

/// `(section, key, value)` of each `key = value` line, section and key
/// lower-cased (subsections dropped), quotes and trailing comments removed.
/// Enough for the keys above; git's full syntax is wider.
fn config_entries(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let head = rest.split(']').next().unwrap_or("");
            section = head
                .split(|c: char| c.is_whitespace() || c == '"' || c == '.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            // `[section] key = value` on one line.
            let after = rest.split_once(']').map_or("", |(_, a)| a.trim());
            if let Some((k, v)) = after.split_once('=') {
                out.push((section.clone(), k.trim().to_ascii_lowercase(), clean(v)));
            }
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_ascii_lowercase(), clean(v)));
        }
    }
    out
}

fn clean(v: &str) -> String {
    let v = v.trim();
    let v = match v.strip_prefix('"') {
        Some(rest) => rest.split('"').next().unwrap_or(""),
        None => v.split([';', '#']).next().unwrap_or("").trim(),
    };
    v.to_owned()
}

/// At most this many git directories are protected for one workspace.
const MAX_GITDIRS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GitDirKind {
    /// A repository's own git directory (the main one, a submodule's).
    Own,
    /// A linked worktree's (`<common>/worktrees/<name>`): it has a
    /// `commondir` of its own and takes hooks and config from there.
    Worktree,
}

/// The git directories directly below `parent` (submodules nest theirs in
/// `modules/<path>/...`, so a directory without `HEAD` is searched on).
fn collect_gitdirs(parent: &Path, kind: GitDirKind, out: &mut Vec<(PathBuf, GitDirKind)>) {
    let mut stack = vec![(parent.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if out.len() >= MAX_GITDIRS {
                return;
            }
            let Ok(ft) = e.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let p = e.path();
            if p.join("HEAD").is_file() {
                out.push((p, kind));
            } else if depth < 8 {
                stack.push((p, depth + 1));
            }
        }
    }
}

/// Protect one git directory's control files. The names git reads there
/// (`commondir`, `config.worktree`) would redirect it even while absent, so
/// absent ones are created first, harmless: an empty `config.worktree`
/// (read only when the protected config enables it) and, in a repository's
/// own git directory, `commondir` naming itself (`.`). Everything is done
/// relative to the git directory opened without following any symlink, so
/// a component swapped meanwhile fails the call instead of redirecting it.
fn protect_gitdir(dir: &Path, kind: GitDirKind, out: &mut Vec<Protected>) -> Result<(), RootError> {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    let err = |path: &Path, source: io::Error| RootError::Protect {
        path: path.to_path_buf(),
        source,
    };
    let fd = crate::open_dir(dir).map_err(|e| err(dir, e))?;
    let create = |name: &str, body: &[u8]| -> Result<(), RootError> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match openat(&fd, name, flags, Mode::from_raw_mode(0o644)) {
            Ok(f) => {
                use std::io::Write;
                File::from(f)
                    .write_all(body)
                    .map_err(|e| err(&dir.join(name), e))
            }
            Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(err(&dir.join(name), e.into())),
        }
    };
    if kind == GitDirKind::Own {
        match mkdirat(&fd, "hooks", Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(err(&dir.join("hooks"), e.into())),
        }
        create("commondir", b".\n")?;
    }
    create("config.worktree", b"")?;
    let names: &[(&str, bool)] = match kind {
        GitDirKind::Own => &[
            ("hooks", true),
            ("config", false),
            ("config.worktree", false),
            ("commondir", false),
        ],
        GitDirKind::Worktree => &[
            ("config.worktree", false),
            ("commondir", false),
            // Where the worktree's checkout is: rewritten, git would run
            // this worktree's operations somewhere else.
            ("gitdir", false),
        ],
    };
    for (name, is_dir) in names {
        #[cfg(target_os = "linux")]
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        #[cfg(not(target_os = "linux"))]
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let p = dir.join(name);
        let f = match openat(&fd, *name, flags, Mode::empty()) {
            Ok(f) => File::from(f),
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(err(&p, e.into())),
        };
        let m = f.metadata().map_err(|e| err(&p, e))?;
        if m.file_type().is_symlink() {
            return Err(RootError::ProtectedSymlink { path: p });
        }
        if m.is_dir() != *is_dir {
            return Err(err(
                &p,
                io::Error::other(if *is_dir {
                    "not a directory"
                } else {
                    "not a file"
                }),
            ));
        }
        out.push(Protected {
            path: p,
            file: Arc::new(f),
            is_dir: m.is_dir(),
            read_only: true,
            dev: m.dev(),
            ino: m.ino(),
        });
    }
    Ok(())
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

/// The deployment's read-only paths (`[policy] read_only`) that lie beneath
/// one of `writable`, opened like the git paths. One that does not exist is
/// not protected (there is nothing to keep); one that is a symlink refuses
/// the run, as for git (what it points to cannot be kept read-only).
pub fn named_protected(
    paths: &[PathBuf],
    writable: &[PathBuf],
) -> Result<Vec<Protected>, RootError> {
    let mut out = Vec::new();
    for path in paths {
        if beneath(path, writable).is_none() {
            continue;
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) => out.push(open(path, m.is_dir())?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RootError::Protect {
                    path: path.clone(),
                    source,
                });
            }
        }
    }
    Ok(out)
}
