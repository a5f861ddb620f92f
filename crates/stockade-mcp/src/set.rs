//! The MCP servers of one session, started together and stopped together.

use std::path::Path;
use std::sync::Arc;

use stockade_agent::Tool;
use stockade_core::ExecutionPolicy;

use crate::launcher::Launcher;
use crate::names::{server_part, tool_name, unique};
use crate::server::{McpServer, ServerSpec, StartError, StderrSink};
use crate::tool::McpTool;

/// A session's servers and their tools. Dropping it kills every server's
/// process group; [`Self::shutdown`] asks them to exit first.
#[derive(Debug, Default)]
pub struct McpServers {
    servers: Vec<Arc<McpServer>>,
    tools: Vec<Arc<McpTool>>,
}

impl McpServers {
    /// Start every server in `specs` (concurrently) in `workdir` under
    /// `policy`. All or nothing: when one fails, the others are stopped and
    /// the error names the server (and how many others failed too). Two
    /// servers whose names read the same once sanitized are refused: their
    /// tools could not be told apart.
    pub async fn start(
        specs: &[ServerSpec],
        launcher: &Launcher,
        policy: &ExecutionPolicy,
        workdir: &Path,
        sink: Option<StderrSink>,
    ) -> Result<Self, StartError> {
        for (i, a) in specs.iter().enumerate() {
            if let Some(b) = specs[..i]
                .iter()
                .find(|b| server_part(&b.name) == server_part(&a.name))
            {
                return Err(StartError {
                    server: a.name.clone(),
                    message: format!(
                        "another MCP server of this session is named {:?}; its tools would be named alike (`{}__...`)",
                        b.name,
                        server_part(&a.name)
                    ),
                });
            }
        }
        let started = futures::future::join_all(
            specs
                .iter()
                .map(|s| McpServer::start(s, launcher, policy, workdir, sink.clone())),
        )
        .await;
        let mut servers = Vec::new();
        let mut failed = Vec::new();
        for r in started {
            match r {
                Ok(s) => servers.push(Arc::new(s)),
                Err(e) => failed.push(e),
            }
        }
        if let Some(first) = failed.first() {
            for s in &servers {
                s.shutdown().await;
            }
            let mut e = first.clone();
            if failed.len() > 1 {
                let others: Vec<String> = failed[1..]
                    .iter()
                    .map(|e| format!("{:?}", e.server))
                    .collect();
                e.message
                    .push_str(&format!(" (failed too: {})", others.join(", ")));
            }
            return Err(e);
        }
        let mut taken: Vec<String> = Vec::new();
        let mut tools = Vec::new();
        for s in &servers {
            for def in s.tool_defs() {
                let name = unique(tool_name(s.name(), &def.name), &taken);
                taken.push(name.clone());
                tools.push(Arc::new(McpTool::new(s.clone(), name, def)));
            }
        }
        Ok(Self { servers, tools })
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    /// Every server's tools, as the agent offers them.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|t| t.clone() as Arc<dyn Tool>)
            .collect()
    }

    /// The adapters themselves (their model and server names).
    pub fn mcp_tools(&self) -> &[Arc<McpTool>] {
        &self.tools
    }

    /// Ask every server to exit (stdin closed), then kill what is left of
    /// their process groups.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        // A running prompt may still hold the tools (and so the servers):
        // the session is over, so are they.
        for s in &self.servers {
            s.kill();
        }
    }
}
