use stockade_session::Session;
use stockade_shell::BoxFuture;

/// Who is calling a tool.
#[derive(Clone)]
pub struct ToolContext {
    /// `None` for an agentless caller: escalations then fail closed.
    pub session: Option<Session>,
    pub call_id: String,
}

/// What a tool hands back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
        }
    }
}

/// A model-callable tool.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> String;
    /// The JSON schema of the arguments object.
    fn schema(&self) -> serde_json::Value;
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput>;
}
