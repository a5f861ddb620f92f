//! What no bind or identity rule made before a run can hold, because the
//! names do not exist yet: a protect-list name the run creates (`.envrc`,
//! `~/.gitconfig` when `$HOME` lies in a writable root, `.vscode/`, ...),
//! and a nested repository the run makes and stages in the workspace's
//! index as a gitlink (the user's next `git status` recurses into it and
//! runs what its configuration names: `core.fsmonitor`, filters, ...).
//!
//! [`Snapshot::take`] looks before the run: which protect-list names exist
//! in each writable root (by identity), and, for each gitlink the
//! workspace repository's index stages, what its `.git` is (identity, and
//! what its configuration names). [`Snapshot::audit`] looks again once
//! the command's whole tree has ended, outside the sandbox: a protect-list
//! name that appeared (or was replaced), and the `.git` of a gitlink that
//! is new, replaced, or whose configuration now names something it did
//! not name before, are renamed aside in their own directory
//! (`<name>.stockade-quarantine-<run>`): nothing is lost, and nothing the
//! host picks up by name is left.
//!
//! A symlink the run left in a git directory it could write, where git
//! writes through it (`SQUASH_MSG -> ~/.bashrc`), is set aside the same way
//! (see `gitdir_links`).
//!
//! Every step after the run walks from a directory held open before it,
//! one component at a time, without following a symlink: the run may have
//! put one in place of any directory.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use thiserror::Error;

use crate::HeldDir;
use crate::bounded::{MAX_CONFIG, read_at, read_path};
use crate::gitconfig::{self, Target};
use crate::gitindex::{self, IndexError};

/// At most this many bytes of an index (or shared index) are read.
const MAX_INDEX: u64 = 512 << 20;
/// At most this many configuration files are read for one nested repo.
const MAX_CONFIG_FILES: usize = 32;
/// At most this many gitlinks are looked at after one run.
const MAX_GITLINKS: usize = 100_000;

/// What the audit set aside, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// A protect-list name the run created or replaced.
    ProtectedName,
    /// The `.git` of a gitlink the run made, replaced or reconfigured.
    NestedRepository,
    /// A symlink the run left where git writes in a git directory
    /// (`SQUASH_MSG -> ~/.bashrc`): git would write through it.
    GitDirSymlink,
}

/// One entry renamed aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    pub path: PathBuf,
    pub moved_to: PathBuf,
    pub kind: ActionKind,
}

/// What the audit could not look at or set aside.
#[derive(Debug, Error)]
pub enum AuditError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: {source}", path.display())]
    Index { path: PathBuf, source: IndexError },
    #[error("{}: too many gitlinks to look at ({count}); the first {MAX_GITLINKS} were", path.display())]
    TooMany { path: PathBuf, count: usize },
}

/// The audit's findings.
#[derive(Debug, Default)]
pub struct Report {
    pub actions: Vec<Action>,
    pub unchecked: Vec<AuditError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Id {
    dev: u64,
    ino: u64,
}

/// One protect-list name beneath one writable root.
#[derive(Debug)]
struct Name {
    root: Arc<HeldDir>,
    parts: Vec<OsString>,
    /// The identity of each leading part before the run, `None` from the
    /// first one that did not exist (or was not a directory to go on in).
    before: Vec<Option<Id>>,
}

/// A gitlink's `.git` as it was (or is).
#[derive(Debug, Clone, PartialEq, Eq)]
enum DotGit {
    Absent,
    /// A directory, with what its configuration names.
    Dir {
        id: Id,
        names: Vec<Target>,
    },
    /// A gitfile (its text) or a symlink (its target).
    Other {
        id: Id,
        content: Vec<u8>,
    },
}

impl DotGit {
    fn id(&self) -> Option<Id> {
        match self {
            Self::Absent => None,
            Self::Dir { id, .. } | Self::Other { id, .. } => Some(*id),
        }
    }
}

/// The workspace repository: where its index is, and its gitlinks' state.
#[derive(Debug)]
struct Repo {
    top: OwnedFd,
    top_path: PathBuf,
    gitdir: OwnedFd,
    gitdir_path: PathBuf,
    hash_len: usize,
    before: Vec<(Vec<u8>, DotGit)>,
}

/// The look before a run, to compare with after it.
#[derive(Debug)]
pub struct Snapshot {
    run: String,
    writable: Vec<PathBuf>,
    names: Vec<Name>,
    repo: Option<Repo>,
    /// The git directories the run may write, watched for symlinks.
    git_dirs: Vec<crate::gitdir_links::Watch>,
    /// What could not be looked at before the run (reported after it).
    before_errors: Vec<String>,
}

impl Snapshot {
    /// Look before a run: `roots` are the run's writable roots (held),
    /// `named` the protect and read-only lists (a relative name in every
    /// root, `~/name` in `$HOME`, an absolute path as is), `workspace` the
    /// run's workspace (its repository's index names the gitlinks).
    pub fn take(roots: &[Arc<HeldDir>], named: &[PathBuf], workspace: &Path) -> Self {
        let writable: Vec<PathBuf> = roots.iter().map(|r| r.path().to_path_buf()).collect();
        let home = home();
        let mut names = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        for root in roots {
            for parts in names_in(root.path(), named, home.as_deref()) {
                let full = parts
                    .iter()
                    .fold(root.path().to_path_buf(), |p, n| p.join(n));
                if seen.contains(&full) {
                    continue;
                }
                seen.push(full);
                let before = identities(root.file().as_fd(), &parts);
                names.push(Name {
                    root: root.clone(),
                    parts,
                    before,
                });
            }
        }
        let mut before_errors = Vec::new();
        let repo = match Repo::find(workspace, &writable) {
            Ok((r, err)) => {
                before_errors.extend(err.map(|e| format!("before the run: {e}")));
                r
            }
            Err(e) => {
                before_errors.push(format!("before the run: {e}"));
                None
            }
        };
        let mut git_dirs = Vec::new();
        for dir in writable_git_dirs(workspace, &writable) {
            match crate::gitdir_links::Watch::take(&dir) {
                Ok(w) => git_dirs.push(w),
                Err(e) => before_errors.push(format!("before the run: {}: {e}", dir.display())),
            }
        }
        Self {
            run: run_id(),
            writable,
            names,
            repo,
            git_dirs,
            before_errors,
        }
    }

    /// Look again after the run, set aside what appeared, and say so. Call
    /// only once nothing the run started is left running.
    pub fn audit(&self) -> (Report, Vec<String>) {
        let mut report = Report::default();
        for name in &self.names {
            name.audit(&self.run, &mut report);
        }
        if let Some(repo) = &self.repo {
            repo.audit(&self.run, &self.writable, &mut report);
        }
        for w in &self.git_dirs {
            let found = w.audit(|dir, name| quarantine(dir, name, &self.run));
            report
                .actions
                .extend(found.moved.into_iter().map(|(path, moved_to)| Action {
                    path,
                    moved_to,
                    kind: ActionKind::GitDirSymlink,
                }));
            report.unchecked.extend(
                found
                    .errors
                    .into_iter()
                    .map(|(path, source)| AuditError::Io { path, source }),
            );
        }
        (report, self.before_errors.clone())
    }
}

/// The git directories of the workspace's repository that lie in a writable
/// root: its own, its common directory, and (from there) each linked
/// worktree's. Found as `git_protected` finds them; another user's `.git`
/// above the workspace is not this repository.
fn writable_git_dirs(workspace: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let Some((top, dotgit)) = crate::protect::find_dotgit(workspace) else {
        return Vec::new();
    };
    let Ok(meta) = std::fs::symlink_metadata(&dotgit) else {
        return Vec::new();
    };
    if top != workspace && std::fs::metadata(workspace).map(|m| m.uid()).ok() != Some(meta.uid()) {
        return Vec::new();
    }
    let gitdir = if meta.is_file() {
        match crate::protect::read_gitdir_file(&dotgit, &top) {
            Some(g) => g,
            None => return Vec::new(),
        }
    } else if meta.is_dir() {
        dotgit
    } else {
        return Vec::new();
    };
    let mut dirs = vec![gitdir.clone()];
    if let Some(common) = crate::protect::common_dir(&gitdir) {
        dirs.push(common);
    }
    let common = dirs.last().cloned().unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for e in entries.flatten().take(256) {
            if e.file_type().is_ok_and(|t| t.is_dir()) && !dirs.contains(&e.path()) {
                dirs.push(e.path());
            }
        }
    }
    dirs.retain(|d| crate::beneath(d, writable).is_some());
    dirs
}

/// `$HOME` as absolute and resolved (roots are resolved), if set.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .map(|h| crate::canonical(&h).unwrap_or(h))
}

/// The entries of `named` that lie in `root`, as parts relative to it: a
/// relative name in every root, `~/name` in `$HOME`, an absolute path
/// where it lies beneath.
fn names_in(root: &Path, named: &[PathBuf], home: Option<&Path>) -> Vec<Vec<OsString>> {
    let mut out = Vec::new();
    for entry in named {
        let rel = match entry.strip_prefix("~") {
            Ok(rest) => match home.map(|h| h.join(rest)) {
                Some(a) => match a.strip_prefix(root) {
                    Ok(r) => r.to_path_buf(),
                    Err(_) => continue,
                },
                None => continue,
            },
            Err(_) if entry.is_absolute() => match entry.strip_prefix(root) {
                Ok(r) => r.to_path_buf(),
                Err(_) => continue,
            },
            Err(_) => entry.clone(),
        };
        if let Some(parts) = plain_parts(&rel)
            && !out.contains(&parts)
        {
            out.push(parts);
        }
    }
    out
}

/// A protect-list name that does not exist: the directory it (or the
/// first missing directory on its way) would be created in, by identity,
/// and that name. The file tools refuse creating it there, as they refuse
/// writing a protected path that exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absent {
    pub dev: u64,
    pub ino: u64,
    pub name: OsString,
    /// The protect-list path it leads to.
    pub path: PathBuf,
}

/// The protect-list names (`named`, as [`Snapshot::take`] reads them)
/// missing beneath `roots`, walked from the held roots without following
/// a symlink (a symlink on the way is `named_protected`'s to judge).
pub fn absent_names(roots: &[&HeldDir], named: &[PathBuf]) -> Vec<Absent> {
    let home = home();
    let mut out: Vec<Absent> = Vec::new();
    for root in roots {
        for parts in names_in(root.path(), named, home.as_deref()) {
            let path = parts
                .iter()
                .fold(root.path().to_path_buf(), |p, n| p.join(n));
            let mut dir: Option<OwnedFd> = None;
            for (i, part) in parts.iter().enumerate() {
                let here = match &dir {
                    Some(d) => lstat_at(d, part),
                    None => lstat_at(root.file().as_fd(), part),
                };
                match here {
                    Ok(None) => {
                        let st = match &dir {
                            Some(d) => rustix::fs::fstat(d),
                            None => rustix::fs::fstat(root.file()),
                        };
                        #[allow(clippy::unnecessary_cast)] // i32 on macOS
                        if let Ok(st) = st {
                            let a = Absent {
                                dev: st.st_dev as u64,
                                ino: st.st_ino as u64,
                                name: part.clone(),
                                path: path.clone(),
                            };
                            if !out.contains(&a) {
                                out.push(a);
                            }
                        }
                        break;
                    }
                    Ok(Some((_, FileType::Directory))) if i + 1 < parts.len() => {
                        let next = match &dir {
                            Some(d) => open_dir_at(d, part),
                            None => open_dir_at(root.file().as_fd(), part),
                        };
                        match next {
                            Ok(d) => dir = Some(d),
                            Err(_) => break,
                        }
                    }
                    _ => break,
                }
            }
        }
    }
    out
}

/// A run's id, unique enough to name its quarantined entries apart from
/// another run's: the time and this process.
fn run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}-{:x}", std::process::id(), t)
}

/// `path`'s normal components, or `None` if it has any other (`..`, a
/// root): a protect entry never does, and one that did must not walk out.
fn plain_parts(path: &Path) -> Option<Vec<OsString>> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(target_os = "linux")]
const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
#[cfg(not(target_os = "linux"))]
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// `name` in `dir` as a directory, never through a symlink.
fn open_dir_at(dir: impl AsFd, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
}

/// `name` in `dir`, not followed: its identity and type, `None` if absent.
fn lstat_at(dir: impl AsFd, name: &OsStr) -> io::Result<Option<(Id, FileType)>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        // The types differ by platform (`i32` on macOS); only equality
        // of the same platform's values is used.
        #[allow(clippy::unnecessary_cast)]
        Ok(st) => Ok(Some((
            Id {
                dev: st.st_dev as u64,
                ino: st.st_ino as u64,
            },
            FileType::from_raw_mode(st.st_mode),
        ))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The identity of each leading part of `parts` beneath `root`, walking
/// only through real directories; `None` from the first absent part.
fn identities(root: impl AsFd, parts: &[OsString]) -> Vec<Option<Id>> {
    let mut out = vec![None; parts.len()];
    let mut dir: Option<OwnedFd> = None;
    for (i, part) in parts.iter().enumerate() {
        let here = match &dir {
            Some(d) => lstat_at(d, part),
            None => lstat_at(root.as_fd(), part),
        };
        let Ok(Some((id, kind))) = here else { break };
        out[i] = Some(id);
        if kind != FileType::Directory || i + 1 == parts.len() {
            break;
        }
        let next = match &dir {
            Some(d) => open_dir_at(d, part),
            None => open_dir_at(root.as_fd(), part),
        };
        match next {
            Ok(d) => dir = Some(d),
            Err(_) => break,
        }
    }
    out
}

/// Rename `name` in `dir` aside to `<name>.stockade-quarantine-<run>`,
/// never replacing anything there. Returns the new name.
fn quarantine(dir: impl AsFd, name: &OsStr, run: &str) -> io::Result<OsString> {
    let mut aside = name.to_os_string();
    aside.push(".stockade-quarantine-");
    aside.push(run);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    rustix::fs::renameat_with(
        dir.as_fd(),
        name,
        dir.as_fd(),
        &aside,
        rustix::fs::RenameFlags::NOREPLACE,
    )?;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        if lstat_at(dir.as_fd(), &aside)?.is_some() {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        rustix::fs::renameat(dir.as_fd(), name, dir.as_fd(), &aside)?;
    }
    Ok(aside)
}

impl Name {
    fn audit(&self, run: &str, report: &mut Report) {
        let mut dir: Option<OwnedFd> = None;
        let mut path = self.root.path().to_path_buf();
        for (i, part) in self.parts.iter().enumerate() {
            path.push(part);
            let here = match &dir {
                Some(d) => lstat_at(d, part),
                None => lstat_at(self.root.file().as_fd(), part),
            };
            let (id, kind) = match here {
                Ok(Some(x)) => x,
                Ok(None) => return,
                Err(source) => {
                    report.unchecked.push(AuditError::Io { path, source });
                    return;
                }
            };
            let last = i + 1 == self.parts.len();
            let changed = self.before.get(i).copied().flatten() != Some(id);
            // The name itself appeared or was replaced; or a symlink now
            // stands where a directory on its way was (or was not), which
            // would lead the host to a name planted elsewhere.
            if changed && (last || kind == FileType::Symlink) {
                let held = match &dir {
                    Some(d) => quarantine(d, part, run),
                    None => quarantine(self.root.file().as_fd(), part, run),
                };
                match held {
                    Ok(aside) => report.actions.push(Action {
                        moved_to: path.with_file_name(aside),
                        path,
                        kind: ActionKind::ProtectedName,
                    }),
                    Err(source) => report.unchecked.push(AuditError::Io { path, source }),
                }
                return;
            }
            if last || kind != FileType::Directory {
                return;
            }
            let next = match &dir {
                Some(d) => open_dir_at(d, part),
                None => open_dir_at(self.root.file().as_fd(), part),
            };
            match next {
                Ok(d) => dir = Some(d),
                Err(e) => {
                    report.unchecked.push(AuditError::Io {
                        path,
                        source: e.into(),
                    });
                    return;
                }
            }
        }
    }
}

/// What a repository's configuration files name (programs, hooks
/// directories, included files), following includes; `top` is its
/// worktree, `first` the files in its git directory, read from `gitdir`.
fn config_names(gitdir: impl AsFd, gitdir_path: &Path, top: &Path) -> Vec<Target> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let mut out: Vec<Target> = Vec::new();
    let mut queue: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for f in ["config", "config.worktree"] {
        if let Ok(b) = read_at(gitdir.as_fd(), OsStr::new(f), MAX_CONFIG) {
            queue.push((gitdir_path.join(f), b));
        }
    }
    let mut read = 0;
    while let Some((path, bytes)) = queue.pop() {
        read += 1;
        let base = path.parent().unwrap_or(top).to_path_buf();
        for (section, key, value) in gitconfig::entries(&bytes) {
            for t in gitconfig::classify(&section, &key, &value, top, &base, home.as_deref()) {
                if let Target::Include(inc) = &t
                    && read + queue.len() < MAX_CONFIG_FILES
                    && !out.contains(&t)
                    && let Ok(b) = read_path(inc, MAX_CONFIG)
                {
                    queue.push((inc.clone(), b));
                }
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// The nearest `.git` at or above `from`: the directory holding it.
fn find_top(from: &Path) -> Option<PathBuf> {
    let mut dir = Some(from);
    while let Some(d) = dir {
        if std::fs::symlink_metadata(d.join(".git")).is_ok() {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

/// The git directory a gitfile's `gitdir:` line names, relative to `top`.
fn gitfile_target(text: &[u8], top: &Path) -> Option<PathBuf> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
    crate::canonical(&top.join(line.trim())).ok()
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> AuditError + '_ {
    move |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Repo {
    /// The repository `workspace` is in, with its gitlinks' state; `None`
    /// outside a repository.
    fn find(
        workspace: &Path,
        writable: &[PathBuf],
    ) -> Result<(Option<Self>, Option<AuditError>), AuditError> {
        let Some(top_path) = find_top(workspace) else {
            return Ok((None, None));
        };
        // A `.git` another user left above the workspace (`/tmp/.git`) is
        // not this repository (git refuses it as dubious ownership, and
        // `git_protected` ignores it): its index must not name what is set
        // aside here.
        if top_path != workspace {
            use std::os::unix::fs::MetadataExt;
            let owner = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.uid()).ok();
            let ws_owner = owner(workspace);
            if ws_owner.is_none() || ws_owner != owner(&top_path.join(".git")) {
                return Ok((None, None));
            }
        }
        let top = rustix::fs::open(&top_path, DIR_FLAGS, Mode::empty())
            .map_err(|e| io_at(&top_path)(e.into()))?;
        let dotgit = top_path.join(".git");
        let gitdir_path = match lstat_at(&top, OsStr::new(".git")).map_err(io_at(&dotgit))? {
            Some((_, FileType::Directory)) => dotgit,
            Some((_, FileType::RegularFile)) => {
                let text = read_at(&top, OsStr::new(".git"), MAX_CONFIG).map_err(io_at(&dotgit))?;
                match gitfile_target(&text, &top_path) {
                    Some(g) => g,
                    None => return Ok((None, None)),
                }
            }
            Some((_, FileType::Symlink)) => match crate::canonical(&dotgit) {
                Ok(g) => g,
                Err(_) => return Ok((None, None)),
            },
            _ => return Ok((None, None)),
        };
        let gitdir = rustix::fs::open(&gitdir_path, DIR_FLAGS, Mode::empty())
            .map_err(|e| io_at(&gitdir_path)(e.into()))?;
        let hash_len = hash_len(&gitdir, &gitdir_path);
        let mut repo = Self {
            top,
            top_path,
            gitdir,
            gitdir_path,
            hash_len,
            before: Vec::new(),
        };
        // An index that cannot be read now still gets looked at after the
        // run (every gitlink then counts as new): the audit must not be
        // switched off by what an earlier run left.
        let (links, err) = repo.gitlinks();
        for link in links {
            if !repo.in_writable(&link, writable) {
                continue;
            }
            let state = repo.dot_git(&link).unwrap_or(DotGit::Absent);
            repo.before.push((link, state));
        }
        Ok((Some(repo), err))
    }

    fn in_writable(&self, link: &[u8], writable: &[PathBuf]) -> bool {
        let p = self.top_path.join(OsStr::from_bytes(link));
        writable.iter().any(|w| p.starts_with(w))
    }

    /// The gitlinks the index (and a split index's shared index) stages
    /// now, with what stopped the reading.
    fn gitlinks(&self) -> (Vec<Vec<u8>>, Option<AuditError>) {
        let path = self.gitdir_path.join("index");
        let bytes = match read_at(&self.gitdir, OsStr::new("index"), MAX_INDEX) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return (Vec::new(), None),
            Err(source) => return (Vec::new(), Some(AuditError::Io { path, source })),
        };
        let index = match gitindex::parse(&bytes, self.hash_len) {
            Ok(i) => i,
            Err(source) => return (Vec::new(), Some(AuditError::Index { path, source })),
        };
        let mut links = index.gitlinks;
        if let Some(shared) = index.shared {
            let name = format!("sharedindex.{shared}");
            let spath = self.gitdir_path.join(&name);
            match read_at(&self.gitdir, OsStr::new(&name), MAX_INDEX)
                .map_err(io_at(&spath))
                .and_then(|b| {
                    gitindex::parse(&b, self.hash_len).map_err(|source| AuditError::Index {
                        path: spath.clone(),
                        source,
                    })
                }) {
                Ok(s) => links.extend(s.gitlinks),
                Err(e) => return (links, Some(e)),
            }
        }
        links.sort();
        links.dedup();
        (links, None)
    }

    /// The directory at gitlink `link`, walked from the top without
    /// following a symlink (git does not recurse through one either).
    fn open_link(&self, link: &[u8]) -> Option<(OwnedFd, PathBuf)> {
        let mut dir: Option<OwnedFd> = None;
        let mut path = self.top_path.clone();
        for part in link.split(|&b| b == b'/') {
            if part.is_empty() || part == b"." || part == b".." {
                return None;
            }
            let part = OsStr::from_bytes(part);
            path.push(part);
            let next = match &dir {
                Some(d) => open_dir_at(d, part),
                None => open_dir_at(&self.top, part),
            };
            dir = Some(next.ok()?);
        }
        dir.map(|d| (d, path))
    }

    /// What `.git` is at gitlink `link` now.
    fn dot_git(&self, link: &[u8]) -> Option<DotGit> {
        let (dir, path) = self.open_link(link)?;
        let name = OsStr::new(".git");
        let Ok(Some((id, kind))) = lstat_at(&dir, name) else {
            return Some(DotGit::Absent);
        };
        Some(match kind {
            FileType::Directory => {
                let names = match open_dir_at(&dir, name) {
                    Ok(g) => config_names(&g, &path.join(".git"), &path),
                    Err(_) => Vec::new(),
                };
                DotGit::Dir { id, names }
            }
            FileType::Symlink => DotGit::Other {
                id,
                content: rustix::fs::readlinkat(&dir, name, Vec::new())
                    .map(|c| c.into_bytes())
                    .unwrap_or_default(),
            },
            _ => DotGit::Other {
                id,
                content: read_at(&dir, name, MAX_CONFIG).unwrap_or_default(),
            },
        })
    }

    fn audit(&self, run: &str, writable: &[PathBuf], report: &mut Report) {
        let (mut links, err) = self.gitlinks();
        if let Some(e) = err {
            report.unchecked.push(e);
        }
        // A gitlink staged before and still checked out counts too when the
        // index cannot be read now.
        links.extend(self.before.iter().map(|(l, _)| l.clone()));
        links.sort();
        links.dedup();
        if links.len() > MAX_GITLINKS {
            report.unchecked.push(AuditError::TooMany {
                path: self.gitdir_path.join("index"),
                count: links.len(),
            });
            links.truncate(MAX_GITLINKS);
        }
        for link in links {
            if !self.in_writable(&link, writable) {
                continue;
            }
            let Some(now) = self.dot_git(&link) else {
                continue;
            };
            let before = self
                .before
                .iter()
                .find(|(l, _)| *l == link)
                .map(|(_, s)| s)
                .unwrap_or(&DotGit::Absent);
            if !unsafe_change(before, &now) {
                continue;
            }
            let Some((dir, path)) = self.open_link(&link) else {
                continue;
            };
            let dotgit = path.join(".git");
            match quarantine(&dir, OsStr::new(".git"), run) {
                Ok(aside) => report.actions.push(Action {
                    path: dotgit,
                    moved_to: path.join(aside),
                    kind: ActionKind::NestedRepository,
                }),
                Err(source) => report.unchecked.push(AuditError::Io {
                    path: dotgit,
                    source,
                }),
            }
        }
    }
}

/// Whether `.git` at a gitlink changed in a way git would run: it
/// appeared, was replaced, a gitfile or link now points elsewhere, or its
/// configuration names something it did not.
fn unsafe_change(before: &DotGit, now: &DotGit) -> bool {
    match (before, now) {
        (_, DotGit::Absent) => false,
        (DotGit::Absent, _) => true,
        _ if before.id() != now.id() => true,
        (DotGit::Dir { names: was, .. }, DotGit::Dir { names, .. }) => {
            names.iter().any(|n| !was.contains(n))
        }
        (DotGit::Other { content: was, .. }, DotGit::Other { content, .. }) => was != content,
        _ => true,
    }
}

/// 32 for a SHA-256 repository (`extensions.objectFormat`), else 20.
fn hash_len(gitdir: impl AsFd, gitdir_path: &Path) -> usize {
    let mut files = vec![read_at(gitdir.as_fd(), OsStr::new("config"), MAX_CONFIG)];
    // A linked worktree's git directory names the common one.
    if let Ok(common) = read_at(gitdir.as_fd(), OsStr::new("commondir"), MAX_CONFIG) {
        let common = OsString::from_vec(common.trim_ascii().to_vec());
        files.push(read_path(
            &gitdir_path.join(common).join("config"),
            MAX_CONFIG,
        ));
    }
    let sha256 = files.into_iter().flatten().any(|b| {
        gitconfig::entries(&b).iter().any(|(s, k, v)| {
            s == "extensions" && k == "objectformat" && v.eq_ignore_ascii_case("sha256")
        })
    });
    if sha256 { 32 } else { 20 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ino: u64) -> Id {
        Id { dev: 1, ino }
    }

    #[test]
    fn only_what_git_would_newly_run_is_unsafe() {
        let fsmon = Target::Program("/w/evil/mon.sh".into());
        let dir = |ino, names: Vec<Target>| DotGit::Dir { id: id(ino), names };
        // New, replaced, gone.
        assert!(unsafe_change(&DotGit::Absent, &dir(1, vec![])));
        assert!(unsafe_change(&dir(1, vec![]), &dir(2, vec![])));
        assert!(!unsafe_change(&dir(1, vec![]), &DotGit::Absent));
        // The same directory: only a newly named program counts, so a
        // user's own nested repository with its own helper is left alone.
        assert!(!unsafe_change(&dir(1, vec![]), &dir(1, vec![])));
        assert!(unsafe_change(&dir(1, vec![]), &dir(1, vec![fsmon.clone()])));
        assert!(!unsafe_change(
            &dir(1, vec![fsmon.clone()]),
            &dir(1, vec![fsmon])
        ));
        // A gitfile pointed elsewhere.
        let file = |c: &[u8]| DotGit::Other {
            id: id(3),
            content: c.to_vec(),
        };
        assert!(!unsafe_change(&file(b"gitdir: a"), &file(b"gitdir: a")));
        assert!(unsafe_change(&file(b"gitdir: a"), &file(b"gitdir: b")));
        assert!(unsafe_change(&file(b"gitdir: a"), &dir(3, vec![])));
    }

    #[test]
    fn absent_names_are_where_they_would_be_created() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let root = HeldDir::hold(crate::RootKind::Workspace, d.path(), &[]).unwrap();
        std::fs::write(d.path().join(".mcp.json"), "{}").unwrap();
        let named: Vec<PathBuf> = [".envrc", ".mcp.json", ".config/git", "/elsewhere/x"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let got = absent_names(&[&root], &named);
        let top = std::fs::metadata(d.path()).unwrap();
        let want = |name: &str, path: &str| Absent {
            dev: top.dev(),
            ino: top.ino(),
            name: name.into(),
            path: d.path().join(path),
        };
        assert_eq!(
            got,
            vec![want(".envrc", ".envrc"), want(".config", ".config/git")]
        );
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    }

    /// A gitlink whose `.git` appears is set aside even when the index
    /// could not be read before the run (an earlier run's garbage must not
    /// switch the audit off), and one staged before and untouched stays.
    #[test]
    fn gitlinks_are_audited_even_after_an_unreadable_index() {
        if std::process::Command::new("git")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(std::env::var_os("CI").is_none(), "git is needed in CI");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let root = Arc::new(HeldDir::hold(crate::RootKind::Workspace, &ws, &[]).unwrap());
        git(&ws, &["init", "-q"]);
        std::fs::create_dir(ws.join("mine")).unwrap();
        git(&ws.join("mine"), &["init", "-q"]);
        git(
            &ws.join("mine"),
            &["commit", "-q", "--allow-empty", "-m", "m"],
        );
        let sha = git(&ws.join("mine"), &["rev-parse", "HEAD"]);
        git(
            &ws,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},mine"),
            ],
        );
        let good = std::fs::read(ws.join(".git/index")).unwrap();
        // Untouched: nothing happens.
        let snap = Snapshot::take(std::slice::from_ref(&root), &[], &ws);
        let (report, before) = snap.audit();
        assert!(
            report.actions.is_empty() && before.is_empty(),
            "{report:?} {before:?}"
        );
        // Garbage before the run; a nested repo staged during it.
        std::fs::write(ws.join(".git/index"), b"DIRC garbage").unwrap();
        let snap = Snapshot::take(std::slice::from_ref(&root), &[], &ws);
        std::fs::write(ws.join(".git/index"), &good).unwrap();
        std::fs::create_dir(ws.join("evil")).unwrap();
        git(&ws.join("evil"), &["init", "-q"]);
        git(
            &ws,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},evil"),
            ],
        );
        let (report, before) = snap.audit();
        assert_eq!(before.len(), 1, "{before:?}");
        let moved: Vec<&Path> = report.actions.iter().map(|a| a.path.as_path()).collect();
        // `mine` counts as new too: the index before could not say.
        assert_eq!(
            moved,
            vec![
                ws.join("evil/.git").as_path(),
                ws.join("mine/.git").as_path()
            ]
        );
        assert!(
            report
                .actions
                .iter()
                .all(|a| a.kind == ActionKind::NestedRepository)
        );
        assert!(!ws.join("evil/.git").exists());
    }

    #[test]
    fn protect_entries_never_walk_out() {
        assert_eq!(
            plain_parts(Path::new("./.config/git")),
            Some(vec![".config".into(), "git".into()])
        );
        assert_eq!(plain_parts(Path::new("../x")), None);
        assert_eq!(plain_parts(Path::new("/x")), None);
        assert_eq!(plain_parts(Path::new(".")), None);
    }

    #[test]
    fn an_appeared_name_is_set_aside_and_an_old_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let root = Arc::new(HeldDir::hold(crate::RootKind::Workspace, d.path(), &[]).unwrap());
        std::fs::write(d.path().join(".mcp.json"), "{}").unwrap();
        let named: Vec<PathBuf> = [".envrc", ".mcp.json", ".config/git", "sub/../x"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let snap = Snapshot::take(std::slice::from_ref(&root), &named, d.path());
        std::fs::write(d.path().join(".envrc"), "echo pwned").unwrap();
        std::fs::create_dir_all(d.path().join(".config/git")).unwrap();
        let (report, _) = snap.audit();
        let moved: Vec<&Path> = report.actions.iter().map(|a| a.path.as_path()).collect();
        assert_eq!(
            moved,
            vec![
                d.path().join(".envrc").as_path(),
                d.path().join(".config/git").as_path()
            ]
        );
        assert!(!d.path().join(".envrc").exists());
        assert!(report.actions[0].moved_to.exists());
        assert!(d.path().join(".mcp.json").exists());
        assert!(d.path().join(".config").is_dir());
        // A symlink planted in place of a directory on the way is set
        // aside itself, never followed.
        let snap = Snapshot::take(std::slice::from_ref(&root), &named, d.path());
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(elsewhere.path().join("git")).unwrap();
        std::fs::rename(d.path().join(".config"), d.path().join("old")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), d.path().join(".config")).unwrap();
        let (report, _) = snap.audit();
        assert_eq!(report.actions.len(), 1, "{report:?}");
        assert_eq!(report.actions[0].path, d.path().join(".config"));
        assert!(elsewhere.path().join("git").is_dir());
    }
}
