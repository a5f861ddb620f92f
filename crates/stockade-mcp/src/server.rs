//! One MCP server: a child started through the session's executor, spoken to
//! over its stdout and stdin with `rmcp`'s client.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion, Tool as ToolDef,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use stockade_core::ExecutionPolicy;
use stockade_shell::{ExitFacts, PipedChild, PipedFacts, ShellRequest};
use tokio::io::AsyncReadExt as _;
use tokio::process::ChildStderr;

use crate::launcher::Launcher;

/// How long a server may take to start and answer `initialize` and
/// `tools/list` (a server fetched on first use, `npx -y ...`, takes a while).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit once its stdin is closed, before its
/// process group is killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How much of a server's stderr is kept for an error message.
const STDERR_LINES: usize = 8;
const STDERR_LINE_BYTES: usize = 512;

/// Where a server's stderr lines go as they arrive: `(server, line)`.
pub type StderrSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// A stdio MCP server as the editor names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    /// The executable (absolute, as ACP requires).
    pub command: PathBuf,
    pub args: Vec<String>,
    /// Set for the server on top of the inherited environment.
    pub env: Vec<(String, String)>,
}

/// Why a server could not be started; the message names the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server {server:?}: {message}")]
pub struct StartError {
    pub server: String,
    pub message: String,
}

type Tail = Arc<Mutex<VecDeque<String>>>;

/// A started, initialized server.
pub struct McpServer {
    name: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    child: tokio::sync::Mutex<PipedChild>,
    facts: Option<PipedFacts>,
    tools: Vec<ToolDef>,
    tail: Tail,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("facts", &self.facts)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Start `spec` in `workdir` through `launcher` under `policy`, speak
    /// `initialize`, and list its tools. Bounded by [`START_TIMEOUT`]; on
    /// any failure the child's whole group is killed and the error says
    /// how it ended and what it last printed on stderr.
    pub async fn start(
        spec: &ServerSpec,
        launcher: &Launcher,
        policy: &ExecutionPolicy,
        workdir: &Path,
        sink: Option<StderrSink>,
    ) -> Result<Self, StartError> {
        let fail = |message: String| StartError {
            server: spec.name.clone(),
            message,
        };
        let mut argv: Vec<OsString> = vec![spec.command.clone().into()];
        argv.extend(spec.args.iter().map(OsString::from));
        let mut request = ShellRequest::argv(argv, workdir);
        for (k, v) in &spec.env {
            request = request.with_env(k, v);
        }
        let mut child = launcher
            .spawn(request, policy)
            .await
            .map_err(|e| fail(format!("cannot start {}: {e}", spec.command.display())))?;
        let facts = child.facts().cloned();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(fail("the child has no stdio pipes".into()));
        };
        let tail: Tail = Arc::default();
        let stderr_task = child
            .stderr
            .take()
            .map(|e| tokio::spawn(drain(e, spec.name.clone(), tail.clone(), sink)));
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("stockade", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let started = tokio::time::timeout(START_TIMEOUT, async {
            let service = info
                .serve((stdout, stdin))
                .await
                .map_err(|e| format!("initialize failed: {e}"))?;
            let offers_tools = service
                .peer()
                .peer_info()
                .is_some_and(|i| i.capabilities.tools.is_some());
            let tools = if offers_tools {
                service
                    .peer()
                    .list_all_tools()
                    .await
                    .map_err(|e| format!("tools/list failed: {e}"))?
            } else {
                Vec::new()
            };
            Ok::<_, String>((service, tools))
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer to initialize and tools/list within {} s",
                START_TIMEOUT.as_secs()
            ))
        });
        match started {
            Ok((service, tools)) => Ok(Self {
                name: spec.name.clone(),
                peer: service.peer().clone(),
                service: Mutex::new(Some(service)),
                child: tokio::sync::Mutex::new(child),
                facts,
                tools,
                tail,
                stderr_task,
            }),
            Err(why) => {
                let ended = tokio::time::timeout(EXIT_GRACE, child.wait()).await.ok();
                child.kill();
                if let Some(t) = &stderr_task {
                    // What it printed before it ended is worth the wait.
                    let _ = tokio::time::timeout(EXIT_GRACE, async {
                        while !t.is_finished() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    })
                    .await;
                    t.abort();
                }
                Err(fail(format!("{why}{}", afterword(ended, &tail))))
            }
        }
    }

    /// The name the editor gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the sandbox wrapped around it; `None`: it runs unconfined.
    pub fn facts(&self) -> Option<&PipedFacts> {
        self.facts.as_ref()
    }

    /// The tools it offered at start.
    pub fn tool_defs(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Call `tool` with `arguments`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, String> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        match self.peer.call_tool(params).await {
            Ok(r) => Ok(r),
            Err(ServiceError::McpError(e)) => Err(format!("the server refused the call: {e}")),
            Err(e) => {
                // The transport is gone: say whether the server is.
                let ended = match self.child.try_lock() {
                    Ok(mut c) => c.try_wait(),
                    Err(_) => None,
                };
                Err(format!("{e}{}", afterword(ended, &self.tail)))
            }
        }
    }

    /// Close its stdin (the MCP way to ask a stdio server to exit), give it
    /// a moment (half a second), then kill its process group.
    pub async fn shutdown(&self) {
        let service = self
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(service) = service {
            let _ = tokio::time::timeout(EXIT_GRACE, service.cancel()).await;
        }
        let mut child = self.child.lock().await;
        if tokio::time::timeout(EXIT_GRACE, child.wait())
            .await
            .is_err()
        {
            child.kill();
            let _ = child.wait().await;
        }
    }

    /// Kill its process group now (no grace).
    pub fn kill(&self) {
        if let Ok(mut c) = self.child.try_lock() {
            c.kill();
        }
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // The child kills its own group when dropped; the stderr reader
        // ends with the pipe, or here.
        self.child.get_mut().kill();
        if let Some(t) = &self.stderr_task {
            t.abort();
        }
    }
}

/// `; it exited (...); its stderr ended with: ...`, for an error message.
fn afterword(ended: Option<ExitFacts>, tail: &Tail) -> String {
    let mut out = String::new();
    match ended {
        Some(ExitFacts {
            code: Some(code), ..
        }) => out.push_str(&format!("; the server exited with status {code}")),
        Some(ExitFacts {
            signal: Some(sig), ..
        }) => out.push_str(&format!("; the server was killed by signal {sig}")),
        Some(_) => out.push_str("; the server exited"),
        None => {}
    }
    let lines: Vec<String> = tail
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .cloned()
        .collect();
    if !lines.is_empty() {
        out.push_str("; its stderr ended with: ");
        out.push_str(&lines.join(" | "));
    }
    out
}

/// Read the server's stderr to its end: each line to `sink`, the last few
/// kept for an error message, none of it growing memory.
async fn drain(mut from: ChildStderr, server: String, tail: Tail, sink: Option<StderrSink>) {
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let emit = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line).trim_end().to_owned();
        line.clear();
        if text.is_empty() {
            return;
        }
        if let Some(s) = &sink {
            s(&server, &text);
        }
        let mut t = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if t.len() == STDERR_LINES {
            t.pop_front();
        }
        t.push_back(text);
    };
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&mut line);
            } else if line.len() < STDERR_LINE_BYTES {
                line.push(b);
            }
        }
    }
    emit(&mut line);
}
