//! The MCP servers an editor names in `session/new` and `session/load`.
//! Stdio only (every ACP agent must support it; `mcpCapabilities` says
//! `http: false, sse: false`). Each is started for the session through
//! bash's executor under the session's policy, so its file effects are
//! confined exactly as a command's; its tools are offered to the session's
//! agent as `<server>__<tool>`; it is stopped with the session (the
//! connection's end, or the agent killed: the runner dies with it).
//!
//! A server that cannot be started or does not answer `initialize` fails
//! the request with a JSON-RPC error naming it (`data.mcpServer`), and no
//! session is created or resumed: a session silently missing a tool the
//! editor configured would be worse than one the user has to fix.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{McpCapabilities, McpServer};
use agent_client_protocol::{Error, ErrorCode};
use serde_json::json;
use stockade_agent::agent::Agent;
use stockade_core::ExecutionPolicy;
use stockade_mcp::{McpServers, ServerSpec, StderrSink};

use crate::compose::Composition;
use crate::log;

/// What a session's servers add: the servers, the agent that offers their
/// tools after its own, and the policy they were started under (`None`:
/// they are not running, a restart failed).
pub(crate) struct SessionMcp {
    pub specs: Vec<ServerSpec>,
    pub policy: Option<ExecutionPolicy>,
    pub servers: Arc<McpServers>,
    pub agent: Arc<Agent>,
}

impl SessionMcp {
    /// The same servers, stopped, waiting for the next attempt.
    pub(crate) fn failed(self) -> Self {
        Self {
            specs: self.specs,
            policy: None,
            servers: Arc::new(McpServers::default()),
            agent: self.agent,
        }
    }
}

/// Stdio only; the schema's flags are for the other transports.
pub(crate) fn capabilities() -> McpCapabilities {
    McpCapabilities::new().http(false).sse(false)
}

fn refused(server: &str, message: String) -> Error {
    Error::new(
        ErrorCode::INVALID_PARAMS,
        format!("MCP server {server:?}: {message}"),
    )
    .data(json!({ "mcpServer": server }))
}

/// The servers of a request, as stockade starts them. An http or sse server
/// (not advertised) or a command that is not an absolute path (ACP asks for
/// one; a bare name would be looked up on the runner's PATH) is refused.
pub(crate) fn specs(servers: &[McpServer]) -> Result<Vec<ServerSpec>, Error> {
    servers
        .iter()
        .map(|s| match s {
            McpServer::Stdio(s) if s.command.is_absolute() => Ok(ServerSpec {
                name: s.name.clone(),
                command: s.command.clone(),
                args: s.args.clone(),
                env: s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect(),
            }),
            McpServer::Stdio(s) => Err(refused(
                &s.name,
                format!("command {} is not an absolute path", s.command.display()),
            )),
            McpServer::Http(h) => Err(refused(
                &h.name,
                "the http transport is not supported (mcpCapabilities.http is false); stdio servers are".into(),
            )),
            McpServer::Sse(h) => Err(refused(
                &h.name,
                "the sse transport is not supported (mcpCapabilities.sse is false); stdio servers are".into(),
            )),
            _ => Err(Error::new(
                ErrorCode::INVALID_PARAMS,
                "an MCP server of a transport stockade does not support (stdio only)",
            )),
        })
        .collect()
}

/// Start `specs` in `cwd` under `policy` for `what` (a session, for the
/// log). `None` when there are none.
pub(crate) async fn start(
    comp: &Composition,
    specs: &[ServerSpec],
    policy: &ExecutionPolicy,
    cwd: &Path,
    what: &str,
) -> Result<Option<SessionMcp>, Error> {
    if specs.is_empty() {
        return Ok(None);
    }
    let sink: StderrSink = Arc::new(|server: &str, line: &str| {
        log(format_args!("MCP server {server:?}: {line}"));
    });
    let servers = McpServers::start(specs, &comp.mcp, policy, cwd, Some(sink))
        .await
        .map_err(|e| {
            log(format_args!("{what}: {e}"));
            Error::new(ErrorCode::INTERNAL_ERROR, e.to_string())
                .data(json!({ "mcpServer": e.server }))
        })?;
    for s in servers.servers() {
        let how = match s.facts() {
            None => "UNCONFINED ([bash] executor = \"local\")".to_owned(),
            Some(f) => match (f.backend, f.enforcement) {
                (Some(b), Some(e)) => format!(
                    "confined by {b} ({e} enforcement) under {}, network {}",
                    f.mode, f.network
                ),
                _ => format!("under {} (unconfined)", f.mode),
            },
        };
        let tools: Vec<&str> = servers
            .mcp_tools()
            .iter()
            .filter(|t| t.server() == s.name())
            .map(|t| stockade_agent::Tool::name(t.as_ref()))
            .collect();
        log(format_args!(
            "{what}: MCP server {:?} started {how}; tools: {}",
            s.name(),
            if tools.is_empty() {
                "none".to_owned()
            } else {
                tools.join(", ")
            }
        ));
    }
    let agent = Arc::new(comp.agent.with_more_tools(servers.tools()));
    Ok(Some(SessionMcp {
        specs: specs.to_vec(),
        policy: Some(policy.clone()),
        servers: Arc::new(servers),
        agent,
    }))
}

/// Stop them: stdin closed, a moment's grace, then their process groups.
pub(crate) async fn stop(mcp: &SessionMcp, what: &str) {
    mcp.servers.shutdown().await;
    log(format_args!(
        "{what}: {} MCP server(s) stopped",
        mcp.servers.servers().len()
    ));
}
