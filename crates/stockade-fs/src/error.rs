//! Every way a file operation fails. `Display` is model-facing: each message
//! names the path, and a denial also names what is writable, so the model can
//! tell a fence from a typo without another call.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use stockade_core::{SandboxMode, texts};

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
    #[error("{}", denied_message(path, *mode, writable, symlink.as_ref()))]
    Denied {
        /// The refused path, absolute and lexically normalized.
        path: PathBuf,
        mode: SandboxMode,
        /// The writable roots under `mode` (empty under read-only, where only
        /// `/dev/null` is writable and the file tools write nothing).
        writable: Vec<PathBuf>,
        /// The symlink that led outside, when that is how the path escaped
        /// and it could be identified.
        symlink: Option<SymlinkHop>,
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
) -> String {
    let mut out = texts::denial_marker(mode);
    let _ = write!(out, " writing {}", path.display());
    if writable.is_empty() {
        out.push_str(" is refused: only /dev/null is writable");
        return out;
    }
    out.push_str(" is outside the writable roots");
    if let Some(hop) = symlink {
        let _ = write!(
            out,
            " ({} is a symlink to {})",
            hop.link.display(),
            hop.target.display()
        );
    }
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
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under workspace-write mode] writing /w/ws/out/x is outside the writable roots (/w/ws/out is a symlink to /etc): /w/ws, /tmp"
        );
        assert_eq!(err.writable_roots(), Some(&writable[..]));
        assert_eq!(err.path(), Path::new("/w/ws/out/x"));
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
