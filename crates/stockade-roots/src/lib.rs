//! Writable roots, held.
//!
//! A confined command may try to prepare the *next* run: rename the
//! workspace (or `$TMPDIR`) away and put a symlink to `/` in its place, so
//! that a path re-resolved at the next confine names somewhere else. Every
//! writable root is therefore resolved once per session (or CLI
//! invocation), identified by device and inode, and held open; runners get
//! the held directory (a descriptor), never the path again. Later uses check
//! that the path still names the held directory and fail closed otherwise.
//!
//! Resolution itself refuses a symlink that lies inside a writable root
//! (`/tmp/ws -> /`): a confined run could have planted it, so it is no
//! evidence of what the user meant.
#![forbid(unsafe_code)]

#[cfg(unix)]
pub mod aliases;
#[cfg(unix)]
pub mod audit;
#[cfg(unix)]
mod bounded;
mod extra;
#[cfg(unix)]
mod gitconfig;
#[cfg(unix)]
mod gitdir_links;
#[cfg(unix)]
pub mod gitindex;
#[cfg(unix)]
mod protect;
mod resolve;
#[cfg(unix)]
pub mod worktree;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

pub use extra::HeldDenied;
#[cfg(unix)]
pub use protect::{Protected, git_protected, named_protected, pin_ancestors};
pub use resolve::{Composing, beneath, canonical, composing, resolve_guarded};

/// Which root a held directory is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootKind {
    Workspace,
    Tmp,
    TmpDir,
    /// A root of the deployment's `writable_roots`.
    Extra,
    /// A path of the deployment's `deny_read`.
    DenyRead,
    /// The git directory a linked worktree or submodule checkout commits
    /// to (see `worktree`).
    LinkedGit,
}

impl RootKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            RootKind::Workspace => "workspace",
            RootKind::Tmp => "/tmp",
            RootKind::TmpDir => "$TMPDIR",
            RootKind::Extra => "writable root",
            RootKind::DenyRead => "deny-read path",
            RootKind::LinkedGit => "linked git directory",
        }
    }
}

impl fmt::Display for RootKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a root (or a file that must lie outside every root) is refused.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("{what} {}: must be an absolute path", path.display())]
    Relative { what: RootKind, path: PathBuf },
    #[error(
        "{what} {}: is the filesystem root; granting it would make every file writable",
        path.display()
    )]
    FilesystemRoot { what: RootKind, path: PathBuf },
    #[error("{what} {}: {source}", path.display())]
    Open {
        what: RootKind,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{what} {}: not a directory", path.display())]
    NotADirectory { what: RootKind, path: PathBuf },
    #[error(
        "{what} {}: passes through the symlink {}, which lies in the writable root {}: a confined run could have planted it",
        path.display(), link.display(), root.display()
    )]
    PlantedSymlink {
        what: RootKind,
        path: PathBuf,
        link: PathBuf,
        root: PathBuf,
    },
    #[error(
        "{what} {}: no longer names the directory held for it (held at {}, now {}): a confined run may have moved it; nothing ran. Start a new session (or invocation) to use what is there now",
        path.display(), held.display(), now
    )]
    Moved {
        what: RootKind,
        path: PathBuf,
        held: PathBuf,
        now: String,
    },
    #[error(
        "{what} {}: contains the {control} {}, which decides later runs; a confined command must not be able to change it",
        path.display(), control_path.display()
    )]
    ContainsControlState {
        what: RootKind,
        path: PathBuf,
        /// What the contained file is (`config`, `verdict cache`, ...).
        control: String,
        control_path: PathBuf,
    },
    #[error(
        "protected path {}: is a symlink; stockade cannot keep what it points to read-only, so nothing runs",
        path.display()
    )]
    ProtectedSymlink { path: PathBuf },
    #[error("protected path {}: {source}", path.display())]
    Protect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{what} {}: lies beneath the writable root {}, where a confined command could change it",
        path.display(), root.display()
    )]
    BeneathWritableRoot {
        /// What the file is (`config`, `state directory`, `runner bwrap`, ...).
        what: String,
        path: PathBuf,
        root: PathBuf,
    },
}

impl RootError {
    /// The path the error is about, as given.
    pub fn path(&self) -> &Path {
        match self {
            RootError::Relative { path, .. }
            | RootError::FilesystemRoot { path, .. }
            | RootError::Open { path, .. }
            | RootError::NotADirectory { path, .. }
            | RootError::PlantedSymlink { path, .. }
            | RootError::Moved { path, .. }
            | RootError::ContainsControlState { path, .. }
            | RootError::BeneathWritableRoot { path, .. }
            | RootError::ProtectedSymlink { path }
            | RootError::Protect { path, .. } => path,
        }
    }
}

/// What a held directory is, independent of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    Some(Identity {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// Off Unix the held handle still pins the directory (Windows refuses to
/// rename an open directory); identity is then its resolved path.
#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<Identity> {
    None
}

/// One writable root, resolved once and held open.
#[derive(Debug)]
pub struct HeldDir {
    what: RootKind,
    given: PathBuf,
    path: PathBuf,
    file: Arc<File>,
    id: Option<Identity>,
}

impl HeldDir {
    /// Resolve `given` (absolute) refusing symlinks inside `guards`, open the
    /// directory it names, and check that the opened directory is still
    /// what the path names (a swap between resolution and open fails).
    pub fn hold(what: RootKind, given: &Path, guards: &[PathBuf]) -> Result<Self, RootError> {
        if !given.is_absolute() {
            return Err(RootError::Relative {
                what,
                path: given.to_path_buf(),
            });
        }
        let path = resolve_guarded(what, given, guards)?;
        if path.parent().is_none() {
            return Err(RootError::FilesystemRoot {
                what,
                path: given.to_path_buf(),
            });
        }
        let file = open_dir(&path).map_err(|source| match source.kind() {
            io::ErrorKind::NotADirectory => RootError::NotADirectory {
                what,
                path: given.to_path_buf(),
            },
            _ => RootError::Open {
                what,
                path: given.to_path_buf(),
                source,
            },
        })?;
        let m = file.metadata().map_err(|source| RootError::Open {
            what,
            path: given.to_path_buf(),
            source,
        })?;
        if !m.is_dir() {
            return Err(RootError::NotADirectory {
                what,
                path: given.to_path_buf(),
            });
        }
        let held = Self {
            what,
            given: given.to_path_buf(),
            path,
            file: Arc::new(file),
            id: identity(&m),
        };
        held.verify(guards)?;
        Ok(held)
    }

    pub fn kind(&self) -> RootKind {
        self.what
    }

    /// The path as the session (or invocation) was given it.
    pub fn given(&self) -> &Path {
        &self.given
    }

    /// Where the directory was when it was held: symlinks resolved. This is
    /// where runners show it to the command.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The held directory. Hand a duplicate of it to a runner; never reopen
    /// the path.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Fail closed unless the given path (resolved again, refusing planted
    /// symlinks) still names the held directory at the place it was held.
    pub fn verify(&self, guards: &[PathBuf]) -> Result<(), RootError> {
        let moved = |now: String| RootError::Moved {
            what: self.what,
            path: self.given.clone(),
            held: self.path.clone(),
            now,
        };
        let now = resolve_guarded(self.what, &self.given, guards)?;
        if now != self.path {
            return Err(moved(format!("{}", now.display())));
        }
        let m = open_dir(&now)
            .and_then(|f| f.metadata())
            .map_err(|e| moved(e.to_string()))?;
        if let (Some(held), Some(seen)) = (self.id, identity(&m))
            && held != seen
        {
            return Err(moved(format!(
                "a different directory (device {} inode {}, held device {} inode {})",
                seen.dev, seen.ino, held.dev, held.ino
            )));
        }
        Ok(())
    }
}

/// Open the fully resolved `path` one component at a time from `/`, each
/// relative to the directory before it and without following a symlink: a
/// component swapped for a symlink after resolution (by a confined run
/// racing us, say `/tmp/a` exchanged with `/tmp/b -> /elsewhere`) fails the
/// open instead of redirecting it. O_NOFOLLOW on the whole path would only
/// guard the last component.
#[cfg(unix)]
fn open_dir(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags, openat};
    use std::path::Component;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open("/", flags, Mode::empty())?;
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(name) => dir = openat(&dir, name, flags, Mode::empty())?,
            // A resolved path has neither; refuse rather than interpret.
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a resolved absolute path",
                ));
            }
        }
    }
    Ok(File::from(dir))
}

#[cfg(windows)]
fn open_dir(path: &Path) -> io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    // FILE_FLAG_BACKUP_SEMANTICS: the only way to open a directory handle.
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
}

#[cfg(not(any(unix, windows)))]
fn open_dir(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// The writable roots of one provider (and the fence that shares it): the
/// host temp roots, held when this is built, and every workspace the first
/// time it is used.
#[derive(Debug)]
pub struct RootPins {
    temp: Vec<Arc<HeldDir>>,
    tmpdir_note: Option<String>,
    workspaces: Mutex<HashMap<PathBuf, Arc<HeldDir>>>,
    /// The deployment's extra writable roots, held on first use.
    extras: Mutex<HashMap<PathBuf, Arc<HeldDir>>>,
    /// Files that decide later runs, which no extra root may contain.
    control: Mutex<Vec<(String, PathBuf)>>,
    /// Deny-read paths, held by identity on first sight.
    denied: Mutex<HashMap<PathBuf, Arc<HeldDenied>>>,
    /// By resolved workspace: the git directory outside it that its linked
    /// worktree (or submodule checkout) commits to, held while its `.git`
    /// file validates (see `worktree`).
    linked: Mutex<HashMap<PathBuf, Arc<HeldDir>>>,
}

impl Default for RootPins {
    fn default() -> Self {
        Self::from_env()
    }
}

impl RootPins {
    /// `/tmp` and `$TMPDIR` as this process sees them now.
    #[cfg(unix)]
    pub fn from_env() -> Self {
        Self::new(Some(Path::new("/tmp")), std::env::var_os("TMPDIR"))
    }

    /// Off Unix the host temp root is the OS's temp dir.
    #[cfg(not(unix))]
    pub fn from_env() -> Self {
        let t = std::env::temp_dir();
        let mut pins = Self::new(None, None);
        if let Ok(h) = HeldDir::hold(RootKind::TmpDir, &t, &[]) {
            pins.temp.push(Arc::new(h));
        }
        pins
    }

    /// `tmp` (when a directory) and `tmpdir` (a `$TMPDIR` value). A
    /// `$TMPDIR` that is empty, relative, `/`, not a directory, or reached
    /// through a symlink inside `tmp` is not granted; `tmpdir_note` says why.
    pub fn new(tmp: Option<&Path>, tmpdir: Option<OsString>) -> Self {
        let mut temp: Vec<Arc<HeldDir>> = Vec::new();
        if let Some(tmp) = tmp
            && let Ok(h) = HeldDir::hold(RootKind::Tmp, tmp, &[])
        {
            temp.push(Arc::new(h));
        }
        let mut tmpdir_note = None;
        if let Some(set) = tmpdir.filter(|t| !t.is_empty()).map(PathBuf::from) {
            let guards: Vec<PathBuf> = temp.iter().map(|h| h.path().to_path_buf()).collect();
            match HeldDir::hold(RootKind::TmpDir, &set, &guards) {
                Ok(h) if temp.iter().any(|t| t.path() == h.path()) => {}
                Ok(h) => temp.push(Arc::new(h)),
                Err(e) => tmpdir_note = Some(format!("not granted: {e}")),
            }
        }
        Self {
            temp,
            tmpdir_note,
            workspaces: Mutex::new(HashMap::new()),
            extras: Mutex::new(HashMap::new()),
            control: Mutex::new(Vec::new()),
            denied: Mutex::new(HashMap::new()),
            linked: Mutex::new(HashMap::new()),
        }
    }

    /// No temp roots at all (tests, or a host without them).
    pub fn without_temp_roots() -> Self {
        Self::new(None, None)
    }

    /// The held temp roots, `/tmp` first.
    pub fn temp_roots(&self) -> &[Arc<HeldDir>] {
        &self.temp
    }

    /// Why `$TMPDIR` is not among the temp roots, when it was set.
    pub fn tmpdir_note(&self) -> Option<&str> {
        self.tmpdir_note.as_deref()
    }

    /// The resolved temp roots: symlinks inside them are refused wherever a
    /// root is resolved.
    fn temp_guards(&self) -> Vec<PathBuf> {
        self.temp.iter().map(|h| h.path().to_path_buf()).collect()
    }

    /// The workspace named `given`: held on first use, verified on every
    /// later one. Moving it (or a component of its path) afterwards fails
    /// closed here, for every later caller of this registry.
    pub fn workspace(&self, given: &Path) -> Result<Arc<HeldDir>, RootError> {
        let mut map = self
            .workspaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Every root held so far guards the resolution: a symlink one
        // session's run planted in its workspace must not widen another
        // session's (`proj/sub -> ..` held as the parent of `proj`).
        let mut guards = self.temp_guards();
        for w in map.values() {
            if w.given() != given && !guards.iter().any(|g| g == w.path()) {
                guards.push(w.path().to_path_buf());
            }
        }
        let held = match map.get(given) {
            Some(held) => {
                held.verify(&guards)?;
                held.clone()
            }
            None => {
                let held = Arc::new(HeldDir::hold(RootKind::Workspace, given, &guards)?);
                map.insert(given.to_path_buf(), held.clone());
                held
            }
        };
        // A `$TMPDIR` inside the workspace (a project-local tmp) was
        // resolved before the workspace was known: a symlink a confined run
        // planted there for it must fail closed too.
        let mut with_ws = guards;
        with_ws.push(held.path().to_path_buf());
        for t in &self.temp {
            t.verify(&with_ws)?;
        }
        Ok(held)
    }

    /// Every temp root still names what was held.
    pub fn verify_temp(&self) -> Result<(), RootError> {
        let guards = self.temp_guards();
        self.temp.iter().try_for_each(|t| t.verify(&guards))
    }

    /// The resolved writable roots of a workspace-write run in `workspace`
    /// (the widest set a session can switch to without an escalation).
    pub fn writable_paths(&self, workspace: Option<&HeldDir>) -> Vec<PathBuf> {
        let mut out = self.writable_paths_unlinked(workspace);
        if let Some(w) = workspace {
            let linked = self.linked.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(l) = linked.get(w.path())
                && !out.iter().any(|p| p == l.path())
            {
                out.push(l.path().to_path_buf());
            }
        }
        out
    }

    /// [`RootPins::writable_paths`] without the linked git directory.
    pub(crate) fn writable_paths_unlinked(&self, workspace: Option<&HeldDir>) -> Vec<PathBuf> {
        let mut out = self.temp_guards();
        if let Some(w) = workspace
            && !out.iter().any(|p| p == w.path())
        {
            out.push(w.path().to_path_buf());
        }
        self.push_extras(&mut out);
        out
    }

    fn push_extras(&self, out: &mut Vec<PathBuf>) {
        let extras = self.extras.lock().unwrap_or_else(PoisonError::into_inner);
        for e in extras.values() {
            if !out.iter().any(|p| p == e.path()) {
                out.push(e.path().to_path_buf());
            }
        }
    }

    /// The resolved temp roots and every workspace held so far: where no
    /// state that decides a later run may live.
    pub fn all_writable_paths(&self) -> Vec<PathBuf> {
        let mut out = self.temp_guards();
        let map = self
            .workspaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for w in map.values() {
            if !out.iter().any(|p| p == w.path()) {
                out.push(w.path().to_path_buf());
            }
        }
        drop(map);
        self.push_extras(&mut out);
        let linked = self.linked.lock().unwrap_or_else(PoisonError::into_inner);
        for l in linked.values() {
            if !out.iter().any(|p| p == l.path()) {
                out.push(l.path().to_path_buf());
            }
        }
        out
    }

    /// Refuse `path` (a config file, a state directory, a runner) when it
    /// lies beneath a writable root of runs in `workspace`.
    pub fn refuse_beneath(
        &self,
        what: &str,
        path: &Path,
        workspace: Option<&HeldDir>,
    ) -> Result<(), RootError> {
        match beneath(path, &self.writable_paths(workspace)) {
            Some(root) => Err(RootError::BeneathWritableRoot {
                what: what.to_owned(),
                path: path.to_path_buf(),
                root,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests;
