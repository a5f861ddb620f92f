//! Paths inside a writable root that the fence still refuses: what git runs
//! or obeys outside the sandbox (`.git/hooks`, `.git/config`,
//! `config.worktree`, `commondir`, a worktree's `.git` file). A hook written
//! by a confined call would run unconfined at the user's next `git commit`.
//!
//! They are judged by identity (device and inode), never by spelling: a
//! write is refused when the directory it would create its file in, or any
//! directory above that one, *is* a protected directory, or when the file it
//! would replace *is* a protected file, or when it would create one of the
//! names git reads (`config`, `config.worktree`, `commondir`) in a
//! repository's git directory. So `h/pre-commit` with `h -> .git/hooks`,
//! `sub/../.git/config` or a final symlink to `.git/config` all meet the
//! same refusal, whatever the path looked like.
//!
//! The deployment's `read_only` paths are refused the same way, and so are
//! its deny-read paths (for reads and listings too): a deny-read directory
//! refuses everything beneath it, a deny-read file itself, by identity.
//!
//! Walking up from a handle with `..` is only as stable as the tree above
//! it. Nothing confined can move a directory into or out of a protected one
//! (the runner binds them read-only), so a walk cannot be raced into missing
//! one that matters. A deny-read directory moved inside a writable root
//! fails the next call closed (stockade-roots holds it by identity).

use std::path::PathBuf;

#[cfg(unix)]
pub(crate) use imp::Protection;
#[cfg(not(unix))]
pub(crate) use none::Protection;

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Off Unix only deny-read paths are refused.
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) enum Why {
    /// git runs or obeys it outside the sandbox.
    Git,
    /// The deployment's `read_only` list.
    ReadOnly,
    /// The deployment's `deny_read` list.
    DenyRead,
}

/// A refused path, where it really is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub path: PathBuf,
    pub why: Why,
}

#[cfg(unix)]
mod imp {
    use std::ffi::OsStr;
    use std::io;
    use std::path::PathBuf;
    use std::sync::Arc;

    use cap_std::ambient_authority;
    use cap_std::fs::{Dir, Metadata, MetadataExt as _};
    use stockade_roots::{HeldDenied, Protected};

    use super::{Hit, Why};

    /// More directories above a file than any real path has (`PATH_MAX` is
    /// 4096 bytes, so at most 2048 levels): a walk this long is refused
    /// rather than trusted.
    const MAX_DEPTH: usize = 2048;

    /// The names git reads in a git directory whose creation would redirect
    /// it: `commondir` (to another common dir's hooks and config),
    /// `config.worktree` (per-worktree config), and `config` itself. They
    /// need protecting even while absent, where no identity exists yet.
    const GITDIR_NAMES: &[&str] = &["config", "config.worktree", "commondir"];

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Id {
        dev: u64,
        ino: u64,
    }

    fn id(m: &Metadata) -> Id {
        Id {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    /// What one call must not write (or, for the deny-read entries, read).
    #[derive(Debug, Default)]
    pub(crate) struct Protection {
        /// Directories nothing may be written (or read) beneath.
        dirs: Vec<(Id, Hit)>,
        /// Files that may not be replaced (or read).
        files: Vec<(Id, Hit)>,
        /// Git directories (by identity) in which `GITDIR_NAMES` may not be
        /// created or replaced; the path is the git directory's.
        gitdirs: Vec<(Id, PathBuf)>,
        /// Protect-list names that do not exist: the directory (by
        /// identity) and the name whose creation there is refused. Only an
        /// existing object has an identity to refuse by; these are refused
        /// by name, which holds here because the tools run in-process (no
        /// run can move the directory between the check and the write).
        absent: Vec<(Id, std::ffi::OsString, Hit)>,
    }

    impl Protection {
        /// Also refuse the read-only entries of `list`, for `why`;
        /// pinned-only ones (the `.git` directory, which stays writable) are
        /// left alone.
        pub(crate) fn add(&mut self, list: &[Protected], why: Why) -> io::Result<()> {
            for p in list.iter().filter(|p| p.read_only) {
                let at = Id {
                    dev: p.dev,
                    ino: p.ino,
                };
                let hit = Hit {
                    path: p.path.clone(),
                    why,
                };
                if !p.is_dir {
                    self.files.push((at, hit));
                    continue;
                }
                self.dirs.push((at, hit));
                // Only git's own hooks directory says where a git directory
                // is; a listed directory that happens to be named `hooks`
                // says nothing.
                if why == Why::Git && p.path.file_name() == Some(OsStr::new("hooks")) {
                    // The git directory is what holds `hooks`: reached from
                    // the opened hooks directory, not by its path, so the
                    // identity is that of the directory the list was built
                    // from.
                    let hooks = Dir::from_std_file(p.file.try_clone()?);
                    let gitdir = hooks.open_parent_dir(ambient_authority())?;
                    let gitdir_path = p.path.parent().unwrap_or(&p.path).to_path_buf();
                    self.gitdirs
                        .push((id(&gitdir.dir_metadata()?), gitdir_path));
                }
            }
            Ok(())
        }

        /// Also refuse creating the protect-list names `list` lacks.
        pub(crate) fn add_absent(&mut self, list: &[stockade_roots::audit::Absent]) {
            for a in list {
                self.absent.push((
                    Id {
                        dev: a.dev,
                        ino: a.ino,
                    },
                    a.name.clone(),
                    Hit {
                        path: a.path.clone(),
                        why: Why::ReadOnly,
                    },
                ));
            }
        }

        /// The protect-list name that creating `name` in `parent` would make.
        fn absent_hit(&self, parent: &Dir, name: &OsStr) -> io::Result<Option<Hit>> {
            if self.absent.is_empty() {
                return Ok(None);
            }
            let at = id(&parent.dir_metadata()?);
            Ok(self
                .absent
                .iter()
                .find(|(d, n, _)| *d == at && n == name)
                .map(|(_, _, hit)| hit.clone()))
        }

        /// The refused path that creating the directory `name` in `dir`
        /// would make, or that `dir` (or one above it) is.
        pub(crate) fn create_hit(&self, dir: &Dir, name: &OsStr) -> io::Result<Option<Hit>> {
            if let Some(hit) = self.absent_hit(dir, name)? {
                return Ok(Some(hit));
            }
            self.dir_hit(dir)
        }

        /// Also refuse the deny-read paths `held`, as they were identified
        /// when first seen.
        pub(crate) fn add_denied(&mut self, held: &[Arc<HeldDenied>]) -> io::Result<()> {
            for h in held {
                // Every Unix object has an identity; one without is not
                // judged by a guess.
                let (dev, ino) = h.dev_ino().ok_or_else(|| {
                    io::Error::other(format!("{} has no identity", h.path().display()))
                })?;
                let entry = (
                    Id { dev, ino },
                    Hit {
                        path: h.path().to_path_buf(),
                        why: Why::DenyRead,
                    },
                );
                if h.is_dir() {
                    self.dirs.push(entry);
                } else {
                    self.files.push(entry);
                }
            }
            Ok(())
        }

        /// Also refuse the other mounts of the deny-read paths `held`
        /// (a bind of `$HOME` elsewhere, of a directory or a file inside
        /// one): each is added by the identity it has under its own name.
        /// The same object under a second mount is already refused by
        /// identity; what this adds is a mount whose root lies inside a
        /// denied directory, which the walk up from a handle would leave
        /// through the mount point.
        pub(crate) fn add_mounts(&mut self, held: &[Arc<HeldDenied>]) -> io::Result<()> {
            // Without a mount table (no /proc) only the identity checks
            // remain, which still refuse the same object under a second
            // mount; refusing every read on such a host would help nothing.
            let Ok(mounts) = stockade_roots::aliases::read_mounts() else {
                return Ok(());
            };
            for h in held {
                for alias in stockade_roots::aliases::mount_aliases(&mounts, h.path()) {
                    let Ok(m) = std::fs::symlink_metadata(&alias) else {
                        continue;
                    };
                    if m.file_type().is_symlink() {
                        continue;
                    }
                    let entry = (
                        Id {
                            dev: std::os::unix::fs::MetadataExt::dev(&m),
                            ino: std::os::unix::fs::MetadataExt::ino(&m),
                        },
                        Hit {
                            path: h.path().to_path_buf(),
                            why: Why::DenyRead,
                        },
                    );
                    if m.is_dir() {
                        self.dirs.push(entry);
                    } else {
                        self.files.push(entry);
                    }
                }
            }
            Ok(())
        }

        /// The deny-read directory the file `(dev, ino)`, which has more
        /// than one name, has a name beneath: a hard link to a file inside
        /// a denied directory is that file. Only files with several names
        /// pay for the walk; one the walk cannot finish is refused as
        /// unjudged rather than read.
        pub(crate) fn linked_hit(&self, dev: u64, ino: u64) -> io::Result<Option<Hit>> {
            use stockade_roots::aliases::{Lookup, WALK_LIMIT, find_object};
            let mut budget = WALK_LIMIT;
            let mut walked: Vec<&std::path::Path> = Vec::new();
            // Every denied directory, whatever its device: a filesystem
            // mounted inside one is denied with it.
            for (_, hit) in self.dirs.iter().filter(|(_, h)| h.why == Why::DenyRead) {
                if walked.contains(&hit.path.as_path()) {
                    continue;
                }
                walked.push(&hit.path);
                match find_object(&hit.path, dev, ino, &mut budget)? {
                    Lookup::Found(_) => return Ok(Some(hit.clone())),
                    Lookup::Absent => {}
                    Lookup::Stopped => {
                        return Err(io::Error::other(format!(
                            "the file has several names and {} holds more than {WALK_LIMIT} entries to look for one in",
                            hit.path.display()
                        )));
                    }
                }
            }
            Ok(None)
        }

        fn is_empty(&self) -> bool {
            self.dirs.is_empty()
                && self.files.is_empty()
                && self.gitdirs.is_empty()
                && self.absent.is_empty()
        }

        /// The refused path that `dir`, or a directory above it, is.
        pub(crate) fn dir_hit(&self, dir: &Dir) -> io::Result<Option<Hit>> {
            if self.dirs.is_empty() {
                return Ok(None);
            }
            let mut cur = dir.try_clone()?;
            let mut cur_id = id(&cur.dir_metadata()?);
            for _ in 0..MAX_DEPTH {
                if let Some((_, hit)) = self.dirs.iter().find(|(d, _)| *d == cur_id) {
                    return Ok(Some(hit.clone()));
                }
                let up = cur.open_parent_dir(ambient_authority())?;
                let up_id = id(&up.dir_metadata()?);
                // `..` of the root (of the filesystem, or of a chroot) is
                // itself.
                if up_id == cur_id {
                    return Ok(None);
                }
                (cur, cur_id) = (up, up_id);
            }
            Err(io::Error::other(format!(
                "more than {MAX_DEPTH} directories above it"
            )))
        }

        /// The refused file that the object with `dev` and `ino` is.
        pub(crate) fn file_hit(&self, dev: u64, ino: u64) -> Option<Hit> {
            let at = Id { dev, ino };
            self.files
                .iter()
                .find(|(f, _)| *f == at)
                .map(|(_, hit)| hit.clone())
        }

        /// The refused path a write of `name` in `parent` would replace,
        /// create, or create beneath. `existing` is what `name` is now (never
        /// a symlink), `None` when absent.
        pub(crate) fn target_hit(
            &self,
            parent: &Dir,
            name: &OsStr,
            existing: Option<&Metadata>,
        ) -> io::Result<Option<Hit>> {
            if self.is_empty() {
                return Ok(None);
            }
            if let Some(hit) = existing.and_then(|m| self.file_hit(m.dev(), m.ino())) {
                return Ok(Some(hit));
            }
            if existing.is_none()
                && let Some(hit) = self.absent_hit(parent, name)?
            {
                return Ok(Some(hit));
            }
            if GITDIR_NAMES.iter().any(|n| OsStr::new(n) == name) {
                let at = id(&parent.dir_metadata()?);
                if let Some((_, gitdir)) = self.gitdirs.iter().find(|(g, _)| *g == at) {
                    return Ok(Some(Hit {
                        path: gitdir.join(name),
                        why: Why::Git,
                    }));
                }
            }
            self.dir_hit(parent)
        }
    }
}

/// Off Unix there is no protected list (stockade-roots finds none) and no
/// device and inode to judge by: the fence protects nothing beyond its roots
/// but the deny-read paths, which are judged by where the path resolves
/// (so a hard link is not caught there).
#[cfg(not(unix))]
mod none {
    use std::ffi::OsStr;
    use std::io;
    use std::path::Path;
    use std::sync::Arc;

    use cap_std::fs::{Dir, Metadata};
    use stockade_roots::HeldDenied;

    use super::{Hit, Why};

    #[derive(Debug, Default)]
    pub(crate) struct Protection {
        denied: Vec<Hit>,
    }

    impl Protection {
        pub(crate) fn add_denied(&mut self, held: &[Arc<HeldDenied>]) -> io::Result<()> {
            for h in held {
                self.denied.push(Hit {
                    path: h.path().to_path_buf(),
                    why: Why::DenyRead,
                });
            }
            Ok(())
        }

        /// The deny-read path `path` (absolute) resolves to or beneath: the
        /// path resolved as far as it exists, the rest appended.
        pub(crate) fn path_hit(&self, path: &Path) -> Option<Hit> {
            if self.denied.is_empty() {
                return None;
            }
            let mut existing = path;
            let mut rest = Vec::new();
            let real = loop {
                if let Ok(real) = std::fs::canonicalize(existing) {
                    break real;
                }
                rest.push(existing.file_name()?);
                existing = existing.parent()?;
            };
            let real = rest.iter().rev().fold(real, |p, n| p.join(n));
            self.denied
                .iter()
                .find(|d| real.starts_with(&d.path))
                .cloned()
        }

        pub(crate) fn dir_hit(&self, _: &Dir) -> io::Result<Option<Hit>> {
            Ok(None)
        }

        pub(crate) fn create_hit(&self, _: &Dir, _: &OsStr) -> io::Result<Option<Hit>> {
            Ok(None)
        }

        pub(crate) fn target_hit(
            &self,
            _: &Dir,
            _: &OsStr,
            _: Option<&Metadata>,
        ) -> io::Result<Option<Hit>> {
            Ok(None)
        }
    }
}
