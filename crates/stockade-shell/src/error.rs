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
    #[error("empty argv: nothing to run")]
    EmptyArgv,
    #[error("background jobs need a running tokio runtime: {0}")]
    NoRuntime(String),
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
