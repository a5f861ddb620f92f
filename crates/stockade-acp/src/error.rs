use std::path::PathBuf;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] stockade_agent::config::ConfigError),
    #[error("sandbox provider: {message}")]
    Sandbox { message: String },
    #[error(transparent)]
    Presets(#[from] stockade_agent::PresetError),
    #[error("model: {0}")]
    Model(#[from] stockade_agent::model::ModelError),
    #[error(
        "no directory for session logs: set ${var} (or $XDG_STATE_HOME or $HOME)",
        var = crate::ENV_STATE_DIR
    )]
    NoStateDir,
    #[error("{}: {source}", .path.display())]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ACP connection: {0}")]
    Protocol(agent_client_protocol::Error),
}

impl From<agent_client_protocol::Error> for ServeError {
    fn from(e: agent_client_protocol::Error) -> Self {
        Self::Protocol(e)
    }
}
