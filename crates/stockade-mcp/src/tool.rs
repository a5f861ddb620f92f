//! One MCP tool as an agent [`Tool`]: called through the same agent loop as
//! bash and the file tools, so a front end shows its calls like theirs.

use std::sync::Arc;

use stockade_agent::{Tool, ToolContext, ToolOutput};
use stockade_shell::BoxFuture;

use crate::render::render;
use crate::server::McpServer;

/// `<server>__<tool>`: one tool of one running server.
pub struct McpTool {
    server: Arc<McpServer>,
    /// What the model calls it.
    name: String,
    /// What the server calls it.
    remote: String,
    description: String,
    schema: serde_json::Value,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.server.name())
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(crate) fn new(server: Arc<McpServer>, name: String, def: &rmcp::model::Tool) -> Self {
        let what = def
            .description
            .as_deref()
            .or(def.title.as_deref())
            .unwrap_or("(no description)");
        Self {
            description: format!(
                "[MCP server {:?}, tool {:?}] {what}",
                server.name(),
                def.name
            ),
            name,
            remote: def.name.to_string(),
            schema: serde_json::Value::Object((*def.input_schema).clone()),
            server,
        }
    }

    /// The server's own name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }

    pub fn server(&self) -> &str {
        self.server.name()
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let arguments = match args {
                serde_json::Value::Object(map) => map,
                serde_json::Value::Null => serde_json::Map::new(),
                other => {
                    return ToolOutput::error(format!(
                        "{}: the arguments must be a JSON object, not {other}",
                        self.name
                    ));
                }
            };
            match self.server.call(&self.remote, arguments).await {
                Ok(result) => {
                    let (text, is_error) = render(&result);
                    if is_error {
                        ToolOutput::error(text)
                    } else {
                        ToolOutput::ok(text)
                    }
                }
                Err(why) => ToolOutput::error(format!(
                    "MCP server {:?}: tool {:?} failed: {why}",
                    self.server.name(),
                    self.remote
                )),
            }
        })
    }
}
