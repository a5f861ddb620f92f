use std::path::PathBuf;

use stockade_core::SandboxUnavailable;

/// Why a command did not produce a result. In every case nothing ran, or
/// (for `SandboxUnavailable` after start) the runner refused before the
/// command could.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// `SANDBOX_UNAVAILABLE`: the provider found no backend, the runner could
    /// not be started, or the started runner reported its own failure.
    #[error("{}: {}", SandboxUnavailable::CODE, .0)]
    SandboxUnavailable(SandboxUnavailable),
    /// The command could not be started for an ordinary reason (bad workdir,
    /// resource limits, ...).
    #[error("cannot start {} in {}: {source}", .program.display(), .workdir.display())]
    Start {
        program: PathBuf,
        workdir: PathBuf,
        source: std::io::Error,
    },
    /// A descriptor the provider asked for cannot be placed in the child
    /// at `child_fd`, so nothing was started.
    #[error("cannot place a descriptor at fd {child_fd} in the child: {conflict}")]
    FdPlacement { child_fd: i32, conflict: FdConflict },
    /// The request sets a dynamic-loader variable, which the runner must
    /// start without (it could name a library a confined run wrote).
    #[error(
        "{}: the sandbox runner starts without the dynamic loader's variables; set it in the command instead ({}=... CMD)",
        name.display(), name.display()
    )]
    LoaderEnv { name: std::ffi::OsString },
    #[error("empty argv: nothing to run")]
    EmptyArgv,
    #[error("background jobs need a running tokio runtime: {0}")]
    NoRuntime(String),
}

/// Why a descriptor cannot go where the provider asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FdConflict {
    /// 0, 1 and 2 are the command's standard streams, which the executor
    /// owns; a negative number is no descriptor at all.
    #[error("fds 0-2 are the standard streams and negative numbers are not descriptors")]
    Reserved,
    /// Two descriptors (held files or the status channel) asked for it.
    #[error("another descriptor is placed there too")]
    Duplicate,
    /// This platform has no way to hand a child a descriptor by number.
    #[error("this platform cannot hand descriptors to a child by number")]
    Unsupported,
}

impl ShellError {
    /// The structured code, when there is one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ShellError::SandboxUnavailable(_) => Some(SandboxUnavailable::CODE),
            _ => None,
        }
    }
}

impl From<SandboxUnavailable> for ShellError {
    fn from(e: SandboxUnavailable) -> Self {
        ShellError::SandboxUnavailable(e)
    }
}
