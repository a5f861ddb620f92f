//! Every way a file operation fails. `Display` is model-facing: each message
//! names the path, and a denial also names what is writable, so the model can
//! tell a fence from a typo without another call.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use stockade_core::{SandboxMode, texts};
use stockade_roots::RootError;

/// A symlink whose target took a write outside the writable roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymlinkHop {
    /// The symlink, as an absolute path.
    pub link: PathBuf,
    /// Its target, verbatim (relative targets are relative to the link's
    /// directory).
    pub target: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The call's policy does not allow writing `path`. Nothing on disk
    /// changed (beyond, for a write, missing parent directories created
    /// beneath a writable root before a symlink was found to lead out).
    #[error(
        "{}",
        denied_message(path, *mode, writable, symlink.as_ref(), protected.as_deref())
    )]
    Denied {
        /// The refused path, absolute and lexically normalized.
        path: PathBuf,
        mode: SandboxMode,
        /// The writable roots under `mode` (empty under read-only, where only
        /// `/dev/null` is writable and the file tools write nothing).
        writable: Vec<PathBuf>,
        /// The symlink that led outside, when that is how the path escaped
        /// and it could be identified; for a protected path, the final
        /// symlink that led to it, if any.
        symlink: Option<SymlinkHop>,
        /// Set when `path` lies inside a writable root but is (or lies
        /// beneath) a path the host later runs or obeys outside the sandbox
        /// (`.git/hooks`, `.git/config`, ...): the protected path, where it
        /// really is.
        protected: Option<PathBuf>,
    },
    /// A writable root could not be held, or no longer names the directory
    /// held for it (a confined command may have moved it and put something
    /// else at its path), or the paths to protect inside it could not be
    /// found. The call fails closed: nothing was written.
    #[error("cannot write {}: {source}", path.display())]
    Root {
        /// The path the call asked for, absolute and lexically normalized.
        path: PathBuf,
        /// What is wrong with the root; its text names the root.
        #[source]
        source: RootError,
    },
    #[error("{} does not exist", path.display())]
    NotFound { path: PathBuf },
    /// A directory, or something other than a regular file (a device, a
    /// FIFO, a socket), which the file tools never read, replace or edit.
    #[error("{} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "the text to replace occurs {count} times in {}: include more surrounding lines so it occurs exactly once, or set replace_all to replace every occurrence",
        path.display()
    )]
    NotUnique { path: PathBuf, count: usize },
    #[error(
        "the text to replace does not occur in {} (it must match exactly, including whitespace and indentation)",
        path.display()
    )]
    OldTextNotFound { path: PathBuf },
    #[error("the text to replace is empty: give the exact text to replace in {}", path.display())]
    EmptyOldText { path: PathBuf },
    #[error(
        "{} is not valid UTF-8 text, so it cannot be edited by text replacement",
        path.display()
    )]
    InvalidUtf8 { path: PathBuf },
    #[error("{}: too many levels of symbolic links", path.display())]
    TooManySymlinks { path: PathBuf },
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done, as a verb phrase (`read`, `write`, ...).
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl FsError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FsError::Denied { path, .. }
            | FsError::Root { path, .. }
            | FsError::NotFound { path }
            | FsError::NotAFile { path }
            | FsError::NotADirectory { path }
            | FsError::NotUnique { path, .. }
            | FsError::OldTextNotFound { path }
            | FsError::EmptyOldText { path }
            | FsError::InvalidUtf8 { path }
            | FsError::TooManySymlinks { path }
            | FsError::Io { path, .. } => path,
        }
    }

    /// Whether the policy refused the operation (as opposed to it failing).
    pub fn is_denied(&self) -> bool {
        matches!(self, FsError::Denied { .. })
    }

    /// The writable roots a denial was judged against, `None` for any other
    /// error. Empty under read-only.
    pub fn writable_roots(&self) -> Option<&[PathBuf]> {
        match self {
            FsError::Denied { writable, .. } => Some(writable),
            _ => None,
        }
    }

    /// The protected path a denial refused to write (or write beneath),
    /// `None` for any other denial or error.
    pub fn protected_path(&self) -> Option<&Path> {
        match self {
            FsError::Denied { protected, .. } => protected.as_deref(),
            _ => None,
        }
    }

    /// The mode a denial was judged under, `None` for any other error.
    pub fn denied_mode(&self) -> Option<SandboxMode> {
        match self {
            FsError::Denied { mode, .. } => Some(*mode),
            _ => None,
        }
    }
}

/// `[sandbox: file access denied under <mode> mode] writing <path> ...`: the
/// marker first and verbatim, so whatever recognizes a bash denial
/// recognizes this one.
fn denied_message(
    path: &Path,
    mode: SandboxMode,
    writable: &[PathBuf],
    symlink: Option<&SymlinkHop>,
    protected: Option<&Path>,
) -> String {
    let mut out = texts::denial_marker(mode);
    let _ = write!(out, " writing {}", path.display());
    if writable.is_empty() {
        out.push_str(" is refused: only /dev/null is writable");
        return out;
    }
    let hop = |out: &mut String| {
        if let Some(hop) = symlink {
            let _ = write!(
                out,
                " ({} is a symlink to {})",
                hop.link.display(),
                hop.target.display()
            );
        }
    };
    if let Some(protected) = protected {
        // Named where it really is, so an alias (a symlink to `.git/hooks`,
        // `sub/../.git/config`) shows what it reached.
        let _ = write!(
            out,
            " is refused: it is or lies beneath the protected path {}",
            protected.display()
        );
        hop(&mut out);
        out.push_str(
            ", which git runs or obeys outside the sandbox, so it stays read-only in this mode",
        );
        return out;
    }
    out.push_str(" is outside the writable roots");
    hop(&mut out);
    out.push_str(": ");
    for (i, root) in writable.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}", root.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_denial_starts_with_the_marker_and_names_the_path() {
        let err = FsError::Denied {
            path: PathBuf::from("/w/ws/notes.md"),
            mode: SandboxMode::ReadOnly,
            writable: vec![],
            symlink: None,
            protected: None,
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under read-only mode] writing /w/ws/notes.md is refused: only /dev/null is writable"
        );
        assert!(err.is_denied());
        assert_eq!(err.writable_roots(), Some(&[][..]));
        assert_eq!(err.denied_mode(), Some(SandboxMode::ReadOnly));
    }

    #[test]
    fn a_workspace_write_denial_lists_the_roots_and_the_symlink() {
        let writable = vec![PathBuf::from("/w/ws"), PathBuf::from("/tmp")];
        let err = FsError::Denied {
            path: PathBuf::from("/etc/x"),
            mode: SandboxMode::WorkspaceWrite,
            writable: writable.clone(),
            symlink: None,
            protected: None,
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under workspace-write mode] writing /etc/x is outside the writable roots: /w/ws, /tmp"
        );
        let err = FsError::Denied {
            path: PathBuf::from("/w/ws/out/x"),
            mode: SandboxMode::WorkspaceWrite,
            writable: writable.clone(),
            symlink: Some(SymlinkHop {
                link: PathBuf::from("/w/ws/out"),
                target: PathBuf::from("/etc"),
            }),
            protected: None,
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under workspace-write mode] writing /w/ws/out/x is outside the writable roots (/w/ws/out is a symlink to /etc): /w/ws, /tmp"
        );
        assert_eq!(err.writable_roots(), Some(&writable[..]));
        assert_eq!(err.path(), Path::new("/w/ws/out/x"));
    }

    #[test]
    fn a_protected_denial_names_the_path_the_protected_path_and_the_alias() {
        let err = FsError::Denied {
            path: PathBuf::from("/w/ws/h/pre-commit"),
            mode: SandboxMode::WorkspaceWrite,
            writable: vec![PathBuf::from("/w/ws")],
            symlink: None,
            protected: Some(PathBuf::from("/w/ws/.git/hooks")),
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under workspace-write mode] writing /w/ws/h/pre-commit is refused: it is or lies beneath the protected path /w/ws/.git/hooks, which git runs or obeys outside the sandbox, so it stays read-only in this mode"
        );
        assert!(err.is_denied());
        assert_eq!(err.protected_path(), Some(Path::new("/w/ws/.git/hooks")));
        let err = FsError::Denied {
            path: PathBuf::from("/w/ws/pc"),
            mode: SandboxMode::WorkspaceWrite,
            writable: vec![PathBuf::from("/w/ws")],
            symlink: Some(SymlinkHop {
                link: PathBuf::from("/w/ws/pc"),
                target: PathBuf::from(".git/hooks/pre-commit"),
            }),
            protected: Some(PathBuf::from("/w/ws/.git/hooks")),
        };
        assert!(
            err.to_string().contains(
                "/w/ws/.git/hooks (/w/ws/pc is a symlink to .git/hooks/pre-commit), which git"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_root_error_is_no_denial_and_carries_the_root_text() {
        let err = FsError::Root {
            path: PathBuf::from("/w/ws/a.txt"),
            source: RootError::FilesystemRoot {
                what: stockade_roots::RootKind::Workspace,
                path: PathBuf::from("/"),
            },
        };
        assert_eq!(
            err.to_string(),
            "cannot write /w/ws/a.txt: workspace /: is the filesystem root; granting it would make every file writable"
        );
        assert!(!err.is_denied());
        assert_eq!(err.path(), Path::new("/w/ws/a.txt"));
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn edit_errors_name_the_path_and_the_count() {
        let path = PathBuf::from("/w/ws/a.rs");
        let e = FsError::NotUnique {
            path: path.clone(),
            count: 3,
        };
        assert!(
            e.to_string()
                .starts_with("the text to replace occurs 3 times in /w/ws/a.rs")
        );
        let e = FsError::OldTextNotFound { path: path.clone() };
        assert!(e.to_string().contains("does not occur in /w/ws/a.rs"));
        let e = FsError::Io {
            op: "read",
            path,
            source: io::Error::other("boom"),
        };
        assert_eq!(e.to_string(), "cannot read /w/ws/a.rs: boom");
        assert!(!e.is_denied());
        assert_eq!(e.writable_roots(), None);
    }
}
