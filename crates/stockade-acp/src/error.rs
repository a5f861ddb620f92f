use std::path::PathBuf;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] stockade_config::ConfigError),
    #[error("sandbox provider: {message}")]
    Sandbox { message: String },
    #[error(transparent)]
    Presets(#[from] stockade_agent::PresetError),
    #[error("model: {0}")]
    Model(#[from] stockade_model::ModelError),
    #[error("{}: {source}", .path.display())]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ACP connection: {0}")]
    Protocol(agent_client_protocol::Error),
    /// A file that decides later runs' confinement (the config, the session
    /// logs) lies where a confined run could write it.
    #[error(transparent)]
    ControlState(stockade_roots::RootError),
    /// `[policy] workspace_root` cannot be held as a writable root.
    #[error("{}: policy.workspace_root: {source}", .config.display())]
    FallbackWorkspace {
        config: PathBuf,
        #[source]
        source: stockade_roots::RootError,
    },
    /// An entry of `[policy] writable_roots` cannot be held as a writable
    /// root: `/` (through a symlink), a planted symlink, or a root that
    /// contains control state (both are named).
    #[error(
        "{}: policy.{}: {source}",
        .config.display(),
        stockade_core::files::ListKind::WritableRoots.key()
    )]
    ExtraRoot {
        config: PathBuf,
        #[source]
        source: stockade_roots::RootError,
    },
}

impl ServeError {
    /// Whether the deployment itself is unusable as given (a usage error for
    /// the binary), as opposed to a failure while serving.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Config(_)
                | Self::ControlState(_)
                | Self::FallbackWorkspace { .. }
                | Self::ExtraRoot { .. }
        )
    }
}

/// The same variant, and so the same text, as before the composition
/// moved to stockade-config.
impl From<stockade_config::ComposeError> for ServeError {
    fn from(e: stockade_config::ComposeError) -> Self {
        use stockade_config::ComposeError as C;
        match e {
            C::Config(e) => Self::Config(e),
            C::Sandbox { message } => Self::Sandbox { message },
            C::Presets(e) => Self::Presets(e),
            C::Model(e) => Self::Model(e),
            // Every variant is named above; a new one is a sandbox
            // provider failure until it gets its own.
            other => Self::Sandbox {
                message: other.to_string(),
            },
        }
    }
}

impl From<agent_client_protocol::Error> for ServeError {
    fn from(e: agent_client_protocol::Error) -> Self {
        Self::Protocol(e)
    }
}
