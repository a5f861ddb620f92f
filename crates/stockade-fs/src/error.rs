//! Every way a file operation fails. `Display` is model-facing: each message
//! names the path, and a denial also names what is writable (or what the
//! deny-read list holds), so the model can tell a fence from a typo without
//! another call.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use stockade_core::{SandboxMode, texts};
use stockade_roots::RootError;

/// What a call was doing when the deny-read list refused it, as the denial
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    List,
    /// A write or an edit.
    Write,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Read => "reading",
            Access::List => "listing",
            Access::Write => "writing",
        }
    }
}

/// Why a path inside the writable roots stays read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectedBy {
    /// git runs or obeys it outside the sandbox (`.git/hooks`,
    /// `.git/config`, ...).
    Git,
    /// The deployment's `read_only` list names it.
    Policy,
}

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
        denied_message(path, *mode, writable, symlink.as_ref(), protected.as_deref(), *protected_by)
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
        /// beneath) a path that stays read-only there: one the host later
        /// runs or obeys outside the sandbox (`.git/hooks`, `.git/config`,
        /// ...) or one the deployment's `read_only` list names: the
        /// protected path, where it really is.
        protected: Option<PathBuf>,
        /// Why `protected` stays read-only; set exactly when it is.
        protected_by: Option<ProtectedBy>,
    },
    /// `path` is, or lies beneath, a path on the deployment's deny-read
    /// list (judged by identity: a symlink, a hard link or a `..` alias
    /// meets the same refusal). Refused in both confining modes, so only
    /// `danger-full-access` lifts it. Nothing was read or changed.
    #[error("{}", deny_read_message(path, *mode, *access, denied))]
    DenyRead {
        /// The path the call asked for, absolute and lexically normalized.
        path: PathBuf,
        mode: SandboxMode,
        access: Access,
        /// The deny-read path it reached, where it really is.
        denied: PathBuf,
    },
    /// A writable root could not be held, or no longer names the directory
    /// held for it (a confined command may have moved it and put something
    /// else at its path), or the paths to protect inside it could not be
    /// found, or a deny-read path moved inside one. The call fails closed:
    /// nothing was read or written.
    #[error("cannot {op} {}: {source}", path.display())]
    Root {
        /// What was being done (`read`, `list`, `write`).
        op: &'static str,
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
            | FsError::DenyRead { path, .. }
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
        matches!(self, FsError::Denied { .. } | FsError::DenyRead { .. })
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

    /// Why the path [`FsError::protected_path`] names stays read-only.
    pub fn protected_by(&self) -> Option<ProtectedBy> {
        match self {
            FsError::Denied { protected_by, .. } => *protected_by,
            _ => None,
        }
    }

    /// The deny-read path a denial refused, `None` for any other denial or
    /// error.
    pub fn deny_read_path(&self) -> Option<&Path> {
        match self {
            FsError::DenyRead { denied, .. } => Some(denied),
            _ => None,
        }
    }

    /// The mode a denial was judged under, `None` for any other error.
    pub fn denied_mode(&self) -> Option<SandboxMode> {
        match self {
            FsError::Denied { mode, .. } | FsError::DenyRead { mode, .. } => Some(*mode),
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
    by: Option<ProtectedBy>,
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
        out.push_str(match by.unwrap_or(ProtectedBy::Git) {
            ProtectedBy::Git => {
                ", which git runs or obeys outside the sandbox, so it stays read-only in this mode"
            }
            ProtectedBy::Policy => {
                ", which the deployment's read_only list keeps read-only inside the writable roots"
            }
        });
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

/// `[sandbox: file access denied under <mode> mode] reading <path> ...`:
/// the marker first, as for every denial, then the secret it reached. Both
/// confining modes refuse it, so the text says which mode would not.
fn deny_read_message(path: &Path, mode: SandboxMode, access: Access, denied: &Path) -> String {
    let mut out = texts::denial_marker(mode);
    let _ = write!(
        out,
        " {} {} is refused: it is or lies beneath {}, which is on the deny-read list: nothing confined may read it",
        access.verb(),
        path.display(),
        denied.display()
    );
    if access == Access::Write {
        out.push_str(" or write it");
    }
    out.push_str(
        " (read-only and workspace-write both refuse it; only danger-full-access does not)",
    );
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
            protected_by: None,
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
            protected_by: None,
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
            protected_by: None,
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
            protected_by: Some(ProtectedBy::Git),
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
            protected_by: Some(ProtectedBy::Git),
        };
        assert!(
            err.to_string().contains(
                "/w/ws/.git/hooks (/w/ws/pc is a symlink to .git/hooks/pre-commit), which git"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_policy_read_only_denial_says_whose_list_keeps_it() {
        let err = FsError::Denied {
            path: PathBuf::from("/w/ws/vendor/x"),
            mode: SandboxMode::WorkspaceWrite,
            writable: vec![PathBuf::from("/w/ws")],
            symlink: None,
            protected: Some(PathBuf::from("/w/ws/vendor")),
            protected_by: Some(ProtectedBy::Policy),
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under workspace-write mode] writing /w/ws/vendor/x is refused: it is or lies beneath the protected path /w/ws/vendor, which the deployment's read_only list keeps read-only inside the writable roots"
        );
        assert_eq!(err.protected_by(), Some(ProtectedBy::Policy));
        assert_eq!(err.deny_read_path(), None);
    }

    #[test]
    fn a_deny_read_denial_names_the_path_the_secret_and_the_only_mode_that_reads_it() {
        let err = FsError::DenyRead {
            path: PathBuf::from("/w/ws/key"),
            mode: SandboxMode::ReadOnly,
            access: Access::Read,
            denied: PathBuf::from("/h/.ssh"),
        };
        assert_eq!(
            err.to_string(),
            "[sandbox: file access denied under read-only mode] reading /w/ws/key is refused: it is or lies beneath /h/.ssh, which is on the deny-read list: nothing confined may read it (read-only and workspace-write both refuse it; only danger-full-access does not)"
        );
        assert!(err.is_denied());
        assert_eq!(err.denied_mode(), Some(SandboxMode::ReadOnly));
        assert_eq!(err.deny_read_path(), Some(Path::new("/h/.ssh")));
        assert_eq!(err.path(), Path::new("/w/ws/key"));
        assert_eq!(err.writable_roots(), None);
        let err = FsError::DenyRead {
            path: PathBuf::from("/h/.ssh/new"),
            mode: SandboxMode::WorkspaceWrite,
            access: Access::Write,
            denied: PathBuf::from("/h/.ssh"),
        };
        assert!(
            err.to_string().starts_with(
                "[sandbox: file access denied under workspace-write mode] writing /h/.ssh/new is refused"
            ),
            "{err}"
        );
        assert!(err.to_string().contains("may read it or write it"), "{err}");
    }

    #[test]
    fn a_root_error_is_no_denial_and_carries_the_root_text() {
        let err = FsError::Root {
            op: "write",
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
