//! Paths inside writable roots that the host later executes or obeys, and
//! so must stay read-only in confining modes: inside the workspace
//! repository's git directories everything but what git writes while
//! working (objects, refs, logs, the index, `HEAD`s, lock files, rebase and
//! merge state), `modules` as a whole, what the configuration git would
//! read names (hooks directories, programs, included files), the `.git`
//! file itself (rewriting it would point git at planted hooks), and the
//! deployment's read-only and protect lists (files the host or an editor
//! runs without asking: shell rc files, `.envrc`, `.vscode/`, ...).
//!
//! Each one is opened once (`O_PATH | O_NOFOLLOW`) so a runner can bind the
//! opened object read-only, and identified so the file fence can refuse
//! writes to it by identity rather than by a path a run could alias. The
//! directories between each one and its root are pinned
//! ([`pin_ancestors`]), and so are `worktrees/` and each linked worktree's
//! directory: renamed away, they would carry the read-only binds with them
//! and leave the names free for planted ones.
//!
//! The git directory of a linked worktree or submodule checkout lies
//! outside the workspace; when its `.git` file validates it is granted as a
//! root of its own ([`crate::worktree`]) and protected here the same way
//! ([`linked_protected`]), with every other worktree's directory read-only
//! as a whole.
//!
//! What this cannot hold (see the README): a name that does not exist yet
//! outside a git directory (`.envrc`, a program a config names) can be
//! created by a confined command, since only an existing object can be
//! bound or identified; a new non-allowlisted entry of `.git` itself (a new
//! `.git/worktrees/<name>`, say) can be created, because git creates lock
//! files beside them and so `.git` stays writable (likewise in a granted
//! common directory: a new `worktrees/<x>` naming another checkout back
//! would have that checkout granted the same directory, with the same
//! carve-outs); a symlink in place of a protected name outside a git
//! directory can be replaced. A symlink a run leaves where git writes
//! (`SQUASH_MSG`, a reflog: git writes through it) is set aside after the
//! run (`gitdir_links`).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::gitconfig::{self, Target};
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
/// those beneath one of `writable` (the others are read-only anyway).
///
/// Inside every git directory git uses from here (the repository's own,
/// its common directory, its linked worktrees' directories) only what
/// commits, branches, stash, rebase and fetch write stays writable (see
/// [`writable_entry`]); every other entry that exists is read-only, and the
/// names git would obey if they appeared (`hooks`, `info`, `modules`,
/// `commondir`, `config.worktree`) are created first, harmless and empty,
/// so they exist to be protected. `modules` is read-only as a whole: a
/// confined command can neither change a submodule's git directory nor
/// make a new one.
///
/// Then the configuration git would read here (system, global, every git
/// directory's, and what they include; see `gitconfig`) names more: each
/// hooks directory (`core.hooksPath`, created when missing; `.husky/` as a
/// whole when it lies in one), each program or script a command value
/// names, each included file; those beneath a writable root are protected.
///
/// A symlink where a protected entry should be never fails the run: the
/// directory holding it becomes read-only as a whole (so the link cannot be
/// changed), and what it points to is protected when it lies in a writable
/// root.
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
    let mut set = Set {
        writable,
        out: Vec::new(),
    };
    let meta = std::fs::symlink_metadata(&dotgit).map_err(|source| RootError::Protect {
        path: dotgit.clone(),
        source,
    })?;
    let gitdir = if meta.is_file() {
        if beneath(&dotgit, writable).is_some() {
            set.push(open(&dotgit, false)?);
        }
        match read_gitdir_file(&dotgit, &top) {
            Some(g) => g,
            None => return Ok(set.out),
        }
    } else if meta.file_type().is_symlink() {
        // git follows a `.git` link; what it reaches is protected below.
        // The link itself cannot be bound (see the README's gaps).
        match crate::canonical(&dotgit) {
            Ok(g) if g.is_dir() => g,
            _ => return Ok(set.out),
        }
    } else {
        if beneath(&dotgit, writable).is_some() {
            let mut pin = open(&dotgit, true)?;
            pin.read_only = false;
            set.push(pin);
        }
        dotgit
    };
    let mut own: Vec<PathBuf> = Vec::new();
    let mut linked: Vec<PathBuf> = Vec::new();
    let gitdir_is_linked = match common_dir(&gitdir) {
        Some(common) => {
            linked.push(gitdir.clone());
            own.push(common);
            true
        }
        None => {
            own.push(gitdir.clone());
            false
        }
    };
    // The repositories enclosing this one (a submodule's superprojects):
    // the user's next `git status` there reads their configuration and
    // recurses into this checkout, so their git directories count too.
    let mut above = top.parent().map(Path::to_path_buf);
    let owner = workspace.file().metadata().map(|m| m.uid()).ok();
    for _ in 0..8 {
        let Some((outer_top, outer)) = above.as_deref().and_then(find_dotgit) else {
            break;
        };
        let meta = std::fs::symlink_metadata(&outer).ok();
        if meta.as_ref().map(|m| m.uid()) != owner || !meta.is_some_and(|m| m.is_dir()) {
            break;
        }
        if beneath(&outer, writable).is_some() && !own.contains(&outer) {
            let mut pin = open(&outer, true)?;
            pin.read_only = false;
            set.push(pin);
            own.push(outer);
        }
        above = outer_top.parent().map(Path::to_path_buf);
    }
    // Every other git directory git may use from here: linked worktrees'
    // (protected entry by entry) and submodules', nested to any depth
    // (bounded), whose configuration is read for what it names.
    let mut submodules: Vec<PathBuf> = Vec::new();
    for dir in own.clone() {
        collect_gitdirs(&dir.join("modules"), &mut submodules);
        if let Ok(entries) = std::fs::read_dir(dir.join("worktrees")) {
            for e in entries.flatten().take(MAX_GITDIRS) {
                if e.file_type().is_ok_and(|t| t.is_dir()) && !linked.contains(&e.path()) {
                    linked.push(e.path());
                }
            }
        }
    }
    for dir in &own {
        if beneath(dir, writable).is_some() {
            protect_gitdir(dir, GitDirKind::Own, &mut set)?;
        }
    }
    // From a linked worktree, the workspace's own worktree directory is
    // the only one a run needs: every other one is read-only as a whole
    // (its HEAD and index are that checkout's, not this one's). From the
    // main checkout they stay writable entry by entry (`git worktree`
    // manages them from there).
    let from_linked = gitdir_is_linked.then(|| gitdir.clone());
    for dir in &linked {
        if beneath(dir, writable).is_none() {
            continue;
        }
        match &from_linked {
            Some(own) if own != dir => set.whole(dir)?,
            _ => {
                pin_worktree_dir(dir, &mut set)?;
                protect_gitdir(dir, GitDirKind::Worktree, &mut set)?;
            }
        }
    }
    let mut all = own;
    all.extend(linked);
    all.extend(submodules);
    let (files, targets) = gitconfig::targets(&top, &all);
    for file in files {
        set.path(&file)?;
    }
    for target in targets {
        match target {
            Target::Hooks(dir) => set.hooks(&top, &dir)?,
            Target::Program(p) | Target::Include(p) => set.path(&p)?,
        }
    }
    // The list was found from the workspace's path: it is only this
    // repository's if the path still names the held directory now that the
    // list is built (every caller, runner or fence, gets this check).
    workspace.verify(writable)?;
    Ok(set.out)
}

/// The protected list being built, deduplicated by identity.
struct Set<'a> {
    writable: &'a [PathBuf],
    out: Vec<Protected>,
}

impl Set<'_> {
    fn push(&mut self, p: Protected) {
        if let Some(q) = self
            .out
            .iter_mut()
            .find(|q| q.dev == p.dev && q.ino == p.ino && q.path == p.path)
        {
            q.read_only |= p.read_only;
            return;
        }
        if self.covered(&p.path) {
            return;
        }
        self.out.push(p);
    }

    /// Beneath a directory already read-only as a whole.
    fn covered(&self, path: &Path) -> bool {
        self.out
            .iter()
            .any(|q| q.read_only && q.is_dir && path != q.path && path.starts_with(&q.path))
    }

    /// A directory read-only as a whole (a real one: a symlink in its place
    /// is protected as what it reaches, by [`Set::path`]).
    fn whole(&mut self, dir: &Path) -> Result<(), RootError> {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {
                let p = open(dir, true)?;
                self.push(p);
                Ok(())
            }
            _ => self.path(dir),
        }
    }

    /// Protect what `path` is, when it lies in a writable root: a missing
    /// one is left (nothing to hold; see the README's gaps), a symlink is
    /// protected as what it resolves to.
    fn path(&mut self, path: &Path) -> Result<(), RootError> {
        // Most candidates do not exist: one look settles those.
        let meta = std::fs::symlink_metadata(path);
        if matches!(&meta, Err(e) if e.kind() == io::ErrorKind::NotFound)
            || beneath(path, self.writable).is_none()
            || self.covered(path)
        {
            return Ok(());
        }
        match meta {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(real) = crate::canonical(path)
                    && beneath(&real, self.writable).is_some()
                    && !self.covered(&real)
                {
                    let is_dir = real.is_dir();
                    self.push(open(&real, is_dir)?);
                }
                Ok(())
            }
            Ok(m) => {
                let p = open(path, m.is_dir())?;
                self.push(p);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(RootError::Protect {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// A hooks directory git would run from: created when missing inside a
    /// writable root (as `hooks` itself is), so a confined run cannot be the
    /// one to create it; a Husky one is protected as the whole `.husky/`,
    /// whose scripts the generated hooks source.
    fn hooks(&mut self, top: &Path, dir: &Path) -> Result<(), RootError> {
        if beneath(dir, self.writable).is_none() {
            return Ok(());
        }
        if std::fs::symlink_metadata(dir).is_err() {
            std::fs::create_dir_all(dir).map_err(|source| RootError::Protect {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let real = crate::canonical(dir).unwrap_or_else(|_| dir.to_path_buf());
        let husky = real
            .ancestors()
            .find(|a| a.file_name() == Some(OsStr::new(".husky")))
            .or_else(|| {
                dir.ancestors()
                    .take_while(|a| a.starts_with(top))
                    .find(|a| a.file_name() == Some(OsStr::new(".husky")))
            })
            .map(Path::to_path_buf);
        match husky {
            Some(h) => self.path(&h),
            None => self.path(dir),
        }
    }
}

/// A linked worktree's git directory and the `worktrees` directory holding
/// it are pinned (bwrap binds them onto themselves; the supervisor pins the
/// ancestors of what it protects anyway): renamed away and replaced by a
/// fresh one with a planted `commondir`, they would send the user's next
/// git in that checkout to a planted repository, hooks and all.
fn pin_worktree_dir(dir: &Path, set: &mut Set<'_>) -> Result<(), RootError> {
    for d in [dir.parent(), Some(dir)].into_iter().flatten() {
        if beneath(d, set.writable).is_none() {
            continue;
        }
        if std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
            let mut pin = open(d, true)?;
            pin.read_only = false;
            set.push(pin);
        }
    }
    Ok(())
}

/// What stays read-only in the git directory granted to a workspace that
/// is a linked worktree or a submodule checkout (see [`crate::worktree`]):
/// in the repository's common directory everything but what commits,
/// branches, stash and rebase write (as for a `.git` inside the
/// workspace, so `hooks`, `info`, `config`, `config.worktree` and
/// `commondir` are read-only, made first when missing), the workspace's
/// own worktree directory entry by entry (its `config.worktree`,
/// `commondir` and `gitdir` read-only), every other worktree's directory as
/// a whole, and what the configuration git reads there names.
///
/// Found from the validated grant itself, never from the workspace's
/// `.git` file again: a run could rewrite that file between two reads.
pub(crate) fn linked_protected(
    found: &crate::worktree::Found,
    writable: &[PathBuf],
) -> Result<Vec<Protected>, RootError> {
    use crate::worktree::LinkedKind;
    let mut set = Set {
        writable,
        out: Vec::new(),
    };
    let mut read = vec![found.grant.clone()];
    protect_gitdir(&found.grant, GitDirKind::Own, &mut set)?;
    if found.kind == LinkedKind::Worktree {
        pin_worktree_dir(&found.gitdir, &mut set)?;
        protect_gitdir(&found.gitdir, GitDirKind::Worktree, &mut set)?;
        read.push(found.gitdir.clone());
        if let Ok(entries) = std::fs::read_dir(found.grant.join("worktrees")) {
            for e in entries.flatten().take(MAX_GITDIRS) {
                let p = e.path();
                if p != found.gitdir {
                    set.whole(&p)?;
                }
            }
        }
    }
    let (files, targets) = gitconfig::targets(&found.top, &read);
    for file in files {
        set.path(&file)?;
    }
    for target in targets {
        match target {
            Target::Hooks(dir) => set.hooks(&found.top, &dir)?,
            Target::Program(p) | Target::Include(p) => set.path(&p)?,
        }
    }
    Ok(set.out)
}

/// The common directory a linked worktree's git directory names in
/// `commondir`, when that is another directory.
pub(crate) fn common_dir(gitdir: &Path) -> Option<PathBuf> {
    let common = bounded_text(&gitdir.join("commondir"))?;
    let c = crate::canonical(&gitdir.join(common.trim())).ok()?;
    (c != gitdir).then_some(c)
}

/// What git writes in a git directory during commits, branches, stash,
/// rebase, merge, bisect and fetch: everything else in it stays read-only.
/// `worktrees` holds the linked worktrees' directories, each protected on
/// its own with this same list.
fn writable_entry(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    matches!(
        name,
        "objects"
            | "refs"
            | "logs"
            | "index"
            | "HEAD"
            | "packed-refs"
            | "COMMIT_EDITMSG"
            | "MERGE_MSG"
            | "MERGE_MODE"
            | "MERGE_RR"
            | "SQUASH_MSG"
            | "TAG_EDITMSG"
            | "NOTES_EDITMSG"
            | "EDIT_DESCRIPTION"
            | "AUTO_MERGE"
            | "MERGE_AUTOSTASH"
            | "BRANCH_DESCRIPTION"
            | "rebase-merge"
            | "rebase-apply"
            | "sequencer"
            | "rr-cache"
            | "shallow"
            | "gc.pid"
            | "gc.log"
            | "lfs"
            | "worktrees"
            | "fsmonitor--daemon.ipc"
    ) || name.ends_with("_HEAD")
        || name.ends_with(".lock")
        || name.starts_with("BISECT_")
        || name.starts_with("sharedindex.")
        || name.starts_with("index.stash.")
}

/// The names git reads in a git directory to find hooks, configuration,
/// another git directory or a remote: a symlink under one of them makes the
/// directory holding it read-only for the run.
const GIT_READS: &[&str] = &[
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "hooks",
    "info",
    "modules",
    "worktrees",
    "branches",
    "remotes",
];

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

/// The git directories below `parent` (submodules nest theirs in
/// `modules/<path>/...`, so a directory without `HEAD` is searched on).
fn collect_gitdirs(parent: &Path, out: &mut Vec<PathBuf>) {
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
                out.push(p.clone());
                // A submodule's own submodules live in its `modules`.
                stack.push((p.join("modules"), depth + 1));
            } else if depth < 8 {
                stack.push((p, depth + 1));
            }
        }
    }
}

/// Protect one git directory: every entry not on [`writable_entry`]'s list.
/// The names git reads there would redirect it even while absent, so absent
/// ones are created first, harmless: in a repository's own git directory an
/// empty `hooks`, `info` and `modules` and `commondir` naming itself (`.`);
/// in both kinds an empty `config.worktree` (read only when the protected
/// config enables it). Everything is done relative to the git directory
/// opened without following any symlink, so a component swapped meanwhile
/// fails the call instead of redirecting it.
fn protect_gitdir(dir: &Path, kind: GitDirKind, set: &mut Set<'_>) -> Result<(), RootError> {
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
        for name in ["hooks", "info", "modules"] {
            match mkdirat(&fd, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(err(&dir.join(name), e.into())),
            }
        }
        create("commondir", b".\n")?;
    }
    create("config.worktree", b"")?;
    let names = std::fs::read_dir(dir).map_err(|e| err(dir, e))?;
    let mut symlinked = false;
    for entry in names {
        let entry = entry.map_err(|e| err(dir, e))?;
        let name = entry.file_name();
        if writable_entry(&name) {
            // A link in place of a writable entry (`objects -> /etc`) gives
            // nothing git runs; one in place of `worktrees` could stand for
            // a worktree directory, so it counts as any other link.
            if name != "worktrees" || !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
        }
        #[cfg(target_os = "linux")]
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        #[cfg(not(target_os = "linux"))]
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let p = dir.join(&name);
        let f = match openat(&fd, &name, flags, Mode::empty()) {
            Ok(f) => File::from(f),
            Err(rustix::io::Errno::NOENT) => continue,
            #[cfg(not(target_os = "linux"))]
            Err(rustix::io::Errno::LOOP) => {
                if GIT_READS.iter().any(|n| OsStr::new(n) == name) {
                    symlinked = true;
                    set.path(&p)?;
                }
                continue;
            }
            Err(e) => return Err(err(&p, e.into())),
        };
        let m = f.metadata().map_err(|e| err(&p, e))?;
        if m.file_type().is_symlink() {
            // Planted where git looks (`hooks -> /`): the link is kept by
            // making this directory read-only for the run, and what it
            // reaches is protected where writable. Later runs go on. A
            // link under a name git never reads is left alone: it would
            // only cost the run its git directory.
            if GIT_READS.iter().any(|n| OsStr::new(n) == name) {
                symlinked = true;
                set.path(&p)?;
            }
            continue;
        }
        set.push(Protected {
            path: p,
            file: Arc::new(f),
            is_dir: m.is_dir(),
            read_only: true,
            dev: m.dev(),
            ino: m.ino(),
        });
    }
    if symlinked {
        let mut whole = open(dir, true)?;
        whole.read_only = true;
        set.push(whole);
    }
    Ok(())
}

/// The nearest `.git` at or above `from`, with the directory holding it.
pub(crate) fn find_dotgit(from: &Path) -> Option<(PathBuf, PathBuf)> {
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

/// A small text file a run may have replaced (by a FIFO, a huge file):
/// read through [`crate::bounded`].
pub(crate) fn bounded_text(path: &Path) -> Option<String> {
    let bytes = crate::bounded::read_path(path, crate::bounded::MAX_CONFIG).ok()?;
    String::from_utf8(bytes).ok()
}

/// [`bounded_text`]'s bytes, for a path that need not be UTF-8.
pub(crate) fn bounded_text_bytes(path: &Path) -> io::Result<Vec<u8>> {
    crate::bounded::read_path(path, crate::bounded::MAX_CONFIG)
}

/// `gitdir: <path>` of a `.git` file, relative to the directory holding it.
pub(crate) fn read_gitdir_file(dotgit: &Path, top: &Path) -> Option<PathBuf> {
    let text = bounded_text(dotgit)?;
    let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
    let target = top.join(line.trim());
    crate::canonical(&target).ok()
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

/// Pin every directory between a protected object of `list` and the
/// writable root it lies in (bound onto itself, writable; the file fence
/// leaves pins alone). bwrap binds each protected object where it is, and a
/// directory holding a bind can still be renamed: `mv tools tools-old;
/// mkdir -p tools/hooks` would carry the read-only hooks directory away
/// and let a new one be planted where git looks (as would renaming
/// `.git/worktrees/<name>` and planting a `commondir`). The supervisor
/// already refuses renaming the ancestors of what it protects; this gives
/// bwrap the same. A pinned directory cannot be renamed or removed by the
/// run; what is in it stays writable.
pub fn pin_ancestors(list: &mut Vec<Protected>, writable: &[PathBuf]) -> Result<(), RootError> {
    let mut pins: Vec<Protected> = Vec::new();
    for p in list.iter() {
        let Some(root) = beneath(&p.path, writable) else {
            continue;
        };
        for a in p.path.ancestors().skip(1) {
            if a == root || !a.starts_with(&root) {
                break;
            }
            if list.iter().chain(pins.iter()).any(|q| q.path == a) {
                continue;
            }
            let mut pin = open(a, true)?;
            pin.read_only = false;
            pins.push(pin);
        }
    }
    list.extend(pins);
    Ok(())
}

/// The deployment's read-only paths (`[policy] read_only` and `protect`)
/// that lie beneath one of `writable`, opened like the git paths.
///
/// An absolute entry is one path: one that does not exist is not protected
/// (there is nothing to keep); one that is a symlink refuses the run, as
/// the deployment named that very path. A relative entry (`.envrc`,
/// `.vscode`: the `protect` list's names) is that name in every writable
/// root, and `~/name` that name in `$HOME` (when `$HOME` lies in one); a
/// symlink there never refuses the run (a confined run could plant one in
/// every workspace, and dotfile managers link rc files): what it resolves to
/// is protected when writable.
pub fn named_protected(
    paths: &[PathBuf],
    writable: &[PathBuf],
) -> Result<Vec<Protected>, RootError> {
    let mut set = Set {
        writable,
        out: Vec::new(),
    };
    for path in paths {
        if path.is_relative() {
            match path.strip_prefix("~") {
                Ok(rest) => {
                    if let Some(home) = std::env::var_os("HOME")
                        .map(PathBuf::from)
                        .filter(|h| h.is_absolute())
                    {
                        set.path(&home.join(rest))?;
                    }
                }
                Err(_) => {
                    for root in writable {
                        set.path(&root.join(path))?;
                    }
                }
            }
            continue;
        }
        if beneath(path, writable).is_none() {
            continue;
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) => set.push(open(path, m.is_dir())?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RootError::Protect {
                    path: path.clone(),
                    source,
                });
            }
        }
    }
    Ok(set.out)
}
