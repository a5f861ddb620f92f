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
//! Walking up from a handle with `..` is only as stable as the tree above
//! it. Nothing confined can move a directory into or out of a protected one
//! (the runner binds them read-only), so a walk cannot be raced into missing
//! one that matters.

#[cfg(unix)]
pub(crate) use imp::Protection;
#[cfg(not(unix))]
pub(crate) use none::Protection;

#[cfg(unix)]
mod imp {
    use std::ffi::OsStr;
    use std::io;
    use std::path::PathBuf;

    use cap_std::ambient_authority;
    use cap_std::fs::{Dir, Metadata, MetadataExt as _};
    use stockade_roots::Protected;

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

    /// What one call must not write.
    #[derive(Debug, Default)]
    pub(crate) struct Protection {
        /// Directories nothing may be written beneath.
        dirs: Vec<(Id, PathBuf)>,
        /// Files that may not be replaced.
        files: Vec<(Id, PathBuf)>,
        /// Git directories (by identity) in which `GITDIR_NAMES` may not be
        /// created or replaced; the path is the git directory's.
        gitdirs: Vec<(Id, PathBuf)>,
    }

    impl Protection {
        /// The read-only entries of `list`; pinned-only ones (the `.git`
        /// directory, which stays writable) are left alone.
        pub(crate) fn of(list: &[Protected]) -> io::Result<Self> {
            let mut out = Self::default();
            for p in list.iter().filter(|p| p.read_only) {
                let at = Id {
                    dev: p.dev,
                    ino: p.ino,
                };
                if !p.is_dir {
                    out.files.push((at, p.path.clone()));
                    continue;
                }
                out.dirs.push((at, p.path.clone()));
                if p.path.file_name() == Some(OsStr::new("hooks")) {
                    // The git directory is what holds `hooks`: reached from
                    // the opened hooks directory, not by its path, so the
                    // identity is that of the directory the list was built
                    // from.
                    let hooks = Dir::from_std_file(p.file.try_clone()?);
                    let gitdir = hooks.open_parent_dir(ambient_authority())?;
                    let gitdir_path = p.path.parent().unwrap_or(&p.path).to_path_buf();
                    out.gitdirs.push((id(&gitdir.dir_metadata()?), gitdir_path));
                }
            }
            Ok(out)
        }

        fn is_empty(&self) -> bool {
            self.dirs.is_empty() && self.files.is_empty() && self.gitdirs.is_empty()
        }

        /// The protected path that `dir`, or a directory above it, is.
        pub(crate) fn dir_hit(&self, dir: &Dir) -> io::Result<Option<PathBuf>> {
            if self.dirs.is_empty() {
                return Ok(None);
            }
            let mut cur = dir.try_clone()?;
            let mut cur_id = id(&cur.dir_metadata()?);
            for _ in 0..MAX_DEPTH {
                if let Some((_, path)) = self.dirs.iter().find(|(d, _)| *d == cur_id) {
                    return Ok(Some(path.clone()));
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

        /// The protected path a write of `name` in `parent` would replace,
        /// create, or create beneath. `existing` is what `name` is now (never
        /// a symlink), `None` when absent.
        pub(crate) fn target_hit(
            &self,
            parent: &Dir,
            name: &OsStr,
            existing: Option<&Metadata>,
        ) -> io::Result<Option<PathBuf>> {
            if self.is_empty() {
                return Ok(None);
            }
            if let Some(m) = existing {
                let at = id(m);
                if let Some((_, path)) = self.files.iter().find(|(f, _)| *f == at) {
                    return Ok(Some(path.clone()));
                }
            }
            if GITDIR_NAMES.iter().any(|n| OsStr::new(n) == name) {
                let at = id(&parent.dir_metadata()?);
                if let Some((_, gitdir)) = self.gitdirs.iter().find(|(g, _)| *g == at) {
                    return Ok(Some(gitdir.join(name)));
                }
            }
            self.dir_hit(parent)
        }
    }
}

/// Off Unix there is no protected list (stockade-roots finds none): the
/// fence protects nothing beyond its roots.
#[cfg(not(unix))]
mod none {
    use std::ffi::OsStr;
    use std::io;
    use std::path::PathBuf;

    use cap_std::fs::{Dir, Metadata};

    #[derive(Debug)]
    pub(crate) struct Protection;

    impl Protection {
        pub(crate) fn none() -> Self {
            Self
        }

        pub(crate) fn dir_hit(&self, _: &Dir) -> io::Result<Option<PathBuf>> {
            Ok(None)
        }

        pub(crate) fn target_hit(
            &self,
            _: &Dir,
            _: &OsStr,
            _: Option<&Metadata>,
        ) -> io::Result<Option<PathBuf>> {
            Ok(None)
        }
    }
}
