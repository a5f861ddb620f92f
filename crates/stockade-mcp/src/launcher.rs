use stockade_core::ExecutionPolicy;
use stockade_shell::{PipedChild, SandboxedExecutor, ShellError, ShellRequest, UnconfinedExecutor};

/// How a session's MCP servers are started: through the executor bash
/// runs on, so they are exactly as confined as a command.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// Confined under each session's policy (`danger-full-access` runs
    /// unwrapped, as a command does).
    Sandboxed(SandboxedExecutor),
    /// The deployment opted out of confinement (`[bash] executor =
    /// "local"`): servers run unconfined, and say so.
    Unconfined(UnconfinedExecutor),
}

impl Launcher {
    /// Whether servers started here are confined at all.
    pub fn confines(&self) -> bool {
        matches!(self, Self::Sandboxed(_))
    }

    /// Start `request` with piped stdio; `policy` rides a confining launch.
    pub(crate) async fn spawn(
        &self,
        request: ShellRequest,
        policy: &ExecutionPolicy,
    ) -> Result<PipedChild, ShellError> {
        match self {
            Self::Sandboxed(e) => e.spawn_piped(request.with_policy(policy.clone())).await,
            Self::Unconfined(e) => e.spawn_piped(request).await,
        }
    }
}
