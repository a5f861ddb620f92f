//! Linked worktrees and submodule checkouts: a workspace whose `.git` is a
//! file (`gitdir: <path>`) keeps its repository outside the workspace, so a
//! commit there writes the main repository's git directory
//! (`<repo>/.git/worktrees/<name>/` for the checkout's HEAD, index and
//! logs; `objects/`, `refs/`, `logs/`, `packed-refs` and their lock files
//! in the common directory) or a submodule's (`<super>/.git/modules/<name>`).
//! `workspace-write` grants that directory as one more held root, with what
//! git would obey kept read-only inside it (see
//! `protect::linked_protected`): `hooks/`, `config`,
//! `config.worktree`, `info/`, `commondir`, and every other worktree's
//! directory.
//!
//! The `.git` file is no evidence: it lies in the workspace, so an earlier
//! run may have written it (pointing it at `~/.ssh`, or at another
//! repository's worktree directory). The directory it names is granted only
//! when that directory says the same from outside the workspace:
//!
//! - a linked worktree's: it is `<common>/worktrees/<name>`, its
//!   `commondir` names `<common>`, its `gitdir` names this workspace's
//!   `.git` file, and `<common>` is a repository's git directory (`HEAD`,
//!   `objects/`, `refs/`, `config`);
//! - a submodule's: it lies in a `modules/` directory of a repository's git
//!   directory, is one itself, and its `core.worktree` names this
//!   workspace's top;
//!
//! and every directory and file those checks read is owned by the
//! workspace's owner. Anything else grants nothing and says why.
//!
//! What a confined command can do with the grant: write objects, refs,
//! reflogs and `packed-refs` of the main repository (rewrite a branch of
//! the main checkout, add objects, expire a reflog), and create new names
//! in the common directory (a new `worktrees/<x>`, a stray file). That is
//! data git stores and shows, never runs: a rewritten ref is visible to the
//! user (`git log`, `git status`), an object is inert until checked out.
//! What git executes or obeys (hooks, configuration and what it names,
//! `info/`, `commondir`, other checkouts' HEAD and index) stays read-only,
//! as it does for a `.git` directory inside the workspace. Legacy remote
//! definitions (`remotes/`, `branches/`) that do not exist yet can be
//! created, as in a workspace's own `.git`: they name where a fetch goes,
//! never a program.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use crate::protect::{bounded_text_bytes, find_dotgit};
use crate::{HeldDir, Protected, RootError, RootKind, RootPins, beneath};

/// The result gap's name when a `.git` file is refused.
pub const GAP: &str = "git-linked";

/// What the workspace's git directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkedKind {
    /// `<common>/worktrees/<name>` of a linked worktree.
    Worktree,
    /// `<super git dir>/modules/<name>` of a submodule checkout.
    Submodule,
}

/// A validated `.git` file and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: LinkedKind,
    /// The checkout's top (the directory holding `.git`).
    pub top: PathBuf,
    /// The workspace's `.git` file.
    pub dotgit: PathBuf,
    /// The git directory it names (resolved).
    pub gitdir: PathBuf,
    /// What is granted: the common directory of a linked worktree, the
    /// submodule's own git directory.
    pub grant: PathBuf,
}

/// What a validated `.git` file grants for one run.
#[derive(Debug)]
pub struct LinkedGrant {
    /// The granted git directory, held.
    pub held: Arc<HeldDir>,
    /// What stays read-only inside it.
    pub protected: Vec<Protected>,
    pub found: Found,
}

/// Why a `.git` file grants nothing outside the workspace.
#[derive(Debug, thiserror::Error)]
pub enum LinkedError {
    #[error("{}: cannot be read ({source}); nothing outside the workspace is granted", dotgit.display())]
    Unreadable {
        dotgit: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: has no `gitdir:` line; nothing outside the workspace is granted", dotgit.display())]
    NoGitdir { dotgit: PathBuf },
    #[error("{}: names {}, which cannot be reached ({source}); nothing outside the workspace is granted", dotgit.display(), target.display())]
    Missing {
        dotgit: PathBuf,
        target: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{}: names {}, which is neither a linked worktree's git directory (<repository>/.git/worktrees/<name>) nor a submodule's (<superproject>/.git/modules/<name>); nothing outside the workspace is granted",
        dotgit.display(), gitdir.display()
    )]
    NotLinked { dotgit: PathBuf, gitdir: PathBuf },
    #[error(
        "{}: names {}, but {} is owned by uid {found}, not by the workspace's owner (uid {expected}); nothing outside the workspace is granted",
        dotgit.display(), gitdir.display(), path.display()
    )]
    Owner {
        dotgit: PathBuf,
        gitdir: PathBuf,
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error(
        "{}: names {}, but {} does not name it back ({}); a `.git` file a confined run could have planted grants nothing outside the workspace",
        dotgit.display(), gitdir.display(), file.display(),
        names.as_deref().map_or_else(|| "unreadable".to_owned(), |n| format!("it names {}", n.display()))
    )]
    NotBack {
        dotgit: PathBuf,
        gitdir: PathBuf,
        /// The file that should point back (`gitdir`, `commondir`, `config`).
        file: PathBuf,
        /// What it names instead, when it could be read.
        names: Option<PathBuf>,
    },
    #[error(
        "{}: names {}, but {} is not a repository's git directory (HEAD, objects, refs and config); nothing outside the workspace is granted",
        dotgit.display(), gitdir.display(), path.display()
    )]
    NotRepository {
        dotgit: PathBuf,
        gitdir: PathBuf,
        path: PathBuf,
    },
    #[error(
        "{}: {} is not granted: Landlock without its supervisor (this kernel) cannot keep its hooks and config read-only inside a writable root, so commits from this checkout fail",
        dotgit.display(), grant.display()
    )]
    Unsupervised { dotgit: PathBuf, grant: PathBuf },
    #[error("{}: the git directory it names is not granted: {source}", dotgit.display())]
    Root {
        dotgit: PathBuf,
        #[source]
        source: RootError,
    },
}

/// At most this many `modules/` levels are looked up for a superproject.
const MAX_NESTING: usize = 16;

/// The `.git` file of the checkout `workspace` is in, validated. `Ok(None)`
/// when there is none (or a `.git` directory), when the workspace's owner
/// does not own one above it, or when what it would grant already lies in
/// `writable` (the protected set of that root covers it).
pub fn find(workspace: &HeldDir, writable: &[PathBuf]) -> Result<Option<Found>, LinkedError> {
    let Some((top, dotgit)) = find_dotgit(workspace.path()) else {
        return Ok(None);
    };
    let Ok(owner) = workspace.file().metadata().map(|m| m.uid()) else {
        return Ok(None);
    };
    let Ok(meta) = std::fs::symlink_metadata(&dotgit) else {
        return Ok(None);
    };
    // Above the workspace, another user's `.git` is not this checkout (as
    // in `git_protected`).
    if !meta.is_file() || (top != workspace.path() && meta.uid() != owner) {
        return Ok(None);
    }
    let bytes = bounded_text_bytes(&dotgit).map_err(|source| LinkedError::Unreadable {
        dotgit: dotgit.clone(),
        source,
    })?;
    let line = bytes
        .split(|b| *b == b'\n')
        .find_map(|l| l.strip_prefix(b"gitdir:"))
        .ok_or_else(|| LinkedError::NoGitdir {
            dotgit: dotgit.clone(),
        })?;
    let target = top.join(OsStr::from_bytes(line.trim_ascii()));
    let gitdir = crate::canonical(&target).map_err(|source| LinkedError::Missing {
        dotgit: dotgit.clone(),
        target: target.clone(),
        source,
    })?;
    let v = Validate {
        dotgit: &dotgit,
        gitdir: &gitdir,
        owner,
    };
    let worktree_parent = gitdir
        .parent()
        .filter(|p| p.file_name() == Some(OsStr::new("worktrees")))
        .and_then(Path::parent);
    let (kind, grant) = match worktree_parent {
        Some(common) if gitdir.join("commondir").exists() => {
            if beneath(common, writable).is_some() {
                return Ok(None);
            }
            v.worktree(common)?;
            (LinkedKind::Worktree, common.to_path_buf())
        }
        _ => {
            if beneath(&gitdir, writable).is_some() {
                return Ok(None);
            }
            v.submodule(&top)?;
            (LinkedKind::Submodule, gitdir.clone())
        }
    };
    Ok(Some(Found {
        kind,
        top,
        dotgit,
        gitdir,
        grant,
    }))
}

struct Validate<'a> {
    dotgit: &'a Path,
    gitdir: &'a Path,
    owner: u32,
}

impl Validate<'_> {
    fn owned(&self, path: &Path) -> Result<std::fs::Metadata, LinkedError> {
        let m = std::fs::symlink_metadata(path).map_err(|source| LinkedError::Missing {
            dotgit: self.dotgit.to_path_buf(),
            target: path.to_path_buf(),
            source,
        })?;
        if m.uid() != self.owner {
            return Err(LinkedError::Owner {
                dotgit: self.dotgit.to_path_buf(),
                gitdir: self.gitdir.to_path_buf(),
                path: path.to_path_buf(),
                found: m.uid(),
                expected: self.owner,
            });
        }
        Ok(m)
    }

    /// A repository's git directory, owned by the workspace's owner.
    fn repository(&self, dir: &Path) -> Result<(), LinkedError> {
        let not = || LinkedError::NotRepository {
            dotgit: self.dotgit.to_path_buf(),
            gitdir: self.gitdir.to_path_buf(),
            path: dir.to_path_buf(),
        };
        if !self.owned(dir)?.is_dir() {
            return Err(not());
        }
        let kind = |name: &str| std::fs::symlink_metadata(dir.join(name)).ok();
        let ok = kind("HEAD").is_some_and(|m| m.is_file())
            && kind("config").is_some_and(|m| m.is_file())
            && kind("objects").is_some_and(|m| m.is_dir())
            && kind("refs").is_some_and(|m| m.is_dir());
        if ok { Ok(()) } else { Err(not()) }
    }

    /// `file` (in the git directory, owned by the owner) names `want`,
    /// resolved against `base` when relative.
    fn names_back(&self, file: &Path, text: Option<&[u8]>, want: &Path) -> Result<(), LinkedError> {
        let base = self.gitdir;
        let named = text.map(|t| base.join(OsStr::from_bytes(t.trim_ascii())));
        let resolved = named.as_ref().and_then(|n| crate::canonical(n).ok());
        if resolved.as_deref() == Some(want) {
            return Ok(());
        }
        Err(LinkedError::NotBack {
            dotgit: self.dotgit.to_path_buf(),
            gitdir: self.gitdir.to_path_buf(),
            file: file.to_path_buf(),
            names: named,
        })
    }

    /// `<common>/worktrees/<name>`: its `commondir` names `common`, its
    /// `gitdir` names the workspace's `.git` file, and `common` is a
    /// repository.
    fn worktree(&self, common: &Path) -> Result<(), LinkedError> {
        self.owned(self.gitdir)?;
        self.repository(common)?;
        let commondir = self.gitdir.join("commondir");
        self.owned(&commondir)?;
        let text = bounded_text_bytes(&commondir).ok();
        self.names_back(&commondir, text.as_deref(), common)?;
        let back = self.gitdir.join("gitdir");
        self.owned(&back)?;
        let text = bounded_text_bytes(&back).ok();
        self.names_back(&back, text.as_deref(), self.dotgit)
    }

    /// `<super>/modules/<name>` (nested to any bounded depth): the nearest
    /// `modules` above it lies in a repository's git directory, it is one
    /// itself, and its `core.worktree` names the checkout's top.
    fn submodule(&self, top: &Path) -> Result<(), LinkedError> {
        let superproject = self
            .gitdir
            .ancestors()
            .skip(1)
            .take(MAX_NESTING)
            .find(|a| a.file_name() == Some(OsStr::new("modules")))
            .and_then(Path::parent)
            .ok_or_else(|| LinkedError::NotLinked {
                dotgit: self.dotgit.to_path_buf(),
                gitdir: self.gitdir.to_path_buf(),
            })?;
        self.repository(superproject)?;
        self.repository(self.gitdir)?;
        let config = self.gitdir.join("config");
        self.owned(&config)?;
        let worktree = bounded_text_bytes(&config).ok().and_then(|bytes| {
            crate::gitconfig::entries(&bytes)
                .into_iter()
                .filter(|(s, k, _)| s == "core" && k == "worktree")
                .map(|(_, _, v)| v)
                .next_back()
        });
        self.names_back(&config, worktree.as_ref().map(|w| w.as_bytes()), top)
    }
}

impl RootPins {
    /// The git directory outside the workspace that a commit from the
    /// linked worktree (or submodule checkout) `workspace` needs, validated
    /// (see [`find`]) and held like every root: resolved once, opened and
    /// identified; a later call verifies it still names what was held.
    /// `Ok(None)`: nothing to grant. With it, what stays read-only inside
    /// (the protected list to bind).
    pub fn linked_git(&self, workspace: &HeldDir) -> Result<Option<LinkedGrant>, LinkedError> {
        let base = self.writable_paths_unlinked(Some(workspace));
        // Whatever was held for this workspace is granted only while its
        // `.git` file still validates.
        let found = match find(workspace, &base) {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.forget_linked(workspace);
                return Ok(None);
            }
            Err(e) => {
                self.forget_linked(workspace);
                return Err(e);
            }
        };
        let root_err = |source: RootError| LinkedError::Root {
            dotgit: found.dotgit.clone(),
            source,
        };
        let mut guards = self.all_writable_paths();
        let held = {
            let mut map = self.linked.lock().unwrap_or_else(PoisonError::into_inner);
            guards.retain(|g| map.get(workspace.path()).is_none_or(|h| h.path() != g));
            match map.get(workspace.path()) {
                Some(h) if h.given() == found.grant => {
                    if let Err(e) = h.verify(&guards) {
                        map.remove(workspace.path());
                        return Err(root_err(e));
                    }
                    h.clone()
                }
                _ => {
                    let h = Arc::new(
                        HeldDir::hold(RootKind::LinkedGit, &found.grant, &guards)
                            .map_err(root_err)?,
                    );
                    map.insert(workspace.path().to_path_buf(), h.clone());
                    h
                }
            }
        };
        if let Err(e) = self.refuse_containing(&held) {
            self.forget_linked(workspace);
            return Err(root_err(e));
        }
        let mut writable = base;
        writable.push(held.path().to_path_buf());
        let protected = crate::protect::linked_protected(&found, &writable).map_err(|e| {
            self.forget_linked(workspace);
            root_err(e)
        })?;
        // Found from the workspace's path: only this checkout's if the path
        // still names the held workspace now.
        workspace.verify(&writable).map_err(|e| {
            self.forget_linked(workspace);
            root_err(e)
        })?;
        Ok(Some(LinkedGrant {
            held,
            protected,
            found,
        }))
    }

    fn forget_linked(&self, workspace: &HeldDir) {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(workspace.path());
    }
}

#[cfg(test)]
mod tests;
