//! The bash tool: run a command under the call's resolved policy, with one
//! approved wider retry when the mounted executor confines.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use stockade_core::{NetworkMode, texts};
use stockade_session::SessionId;
use stockade_shell::{BoxFuture, JobHandle, ShellError, ShellExecutor, ShellRequest};

use crate::escalation::{
    self, EscalationArgs, EscalationGate, EscalationTarget, Grant, NetworkTarget, network_texts,
};
use crate::policy::PolicyService;
use crate::tool::{Tool, ToolContext, ToolOutput};
use crate::tools::render;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    command: String,
    /// Required so the model says what it runs; shown in the UI, not used here.
    #[serde(rename = "description")]
    _description: String,
    workdir: Option<PathBuf>,
    timeout_ms: Option<u64>,
    #[serde(default)]
    run_in_background: bool,
    sandbox_permissions: Option<EscalationTarget>,
    network: Option<NetworkTarget>,
    justification: Option<String>,
}

/// A background job, visible only to the session that started it.
pub(crate) struct Job {
    pub session: Option<SessionId>,
    pub handle: JobHandle,
    pub granted: Grant,
}

pub(crate) type Jobs = Arc<Mutex<HashMap<u64, Job>>>;

pub(crate) fn lock_jobs(jobs: &Jobs) -> std::sync::MutexGuard<'_, HashMap<u64, Job>> {
    // A panic elsewhere never leaves the map half-written (inserts are single
    // calls), so its contents stay valid.
    jobs.lock().unwrap_or_else(PoisonError::into_inner)
}

pub struct BashTool {
    executor: Arc<dyn ShellExecutor>,
    policy: Arc<PolicyService>,
    gate: EscalationGate,
    default_timeout: Duration,
    pub(crate) jobs: Jobs,
}

impl BashTool {
    pub fn new(
        executor: Arc<dyn ShellExecutor>,
        policy: Arc<PolicyService>,
        gate: EscalationGate,
    ) -> Self {
        Self {
            executor,
            policy,
            gate,
            default_timeout: Duration::from_secs(120),
            jobs: Arc::default(),
        }
    }

    pub fn with_default_timeout(mut self, t: Duration) -> Self {
        self.default_timeout = t;
        self
    }

    /// The `job_output` tool reading this tool's jobs.
    pub fn job_output(&self) -> crate::tools::job_output::JobOutputTool {
        crate::tools::job_output::JobOutputTool::new(self.jobs.clone(), self.executor.confines())
    }

    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: BashArgs = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(format!("invalid arguments for bash: {e}")),
        };
        let offered = self.executor.confines();
        if !offered && (args.sandbox_permissions.is_some() || args.justification.is_some()) {
            return ToolOutput::error(texts::ESCALATION_NOT_OFFERED);
        }
        if !offered && args.network.is_some() {
            return ToolOutput::error(network_texts::NOT_OFFERED);
        }
        let session = ctx.session.as_ref();
        let effective = self.policy.effective_mode(session);
        let effective_network = self.policy.effective_network(session);
        let escalation = EscalationArgs {
            sandbox_permissions: args.sandbox_permissions,
            justification: args.justification.clone(),
        };
        let granted = match self
            .gate
            .decide_with_network(
                ctx,
                self.name(),
                &args.command,
                &escalation,
                args.network,
                effective,
                effective_network,
            )
            .await
        {
            Ok(g) => g,
            Err(refused) => return refused,
        };
        let policy = self
            .policy
            .resolve_with_network(session, granted.mode, granted.network);
        let workdir = match &args.workdir {
            Some(w) if w.is_absolute() => w.clone(),
            Some(w) => policy.workspace_root.join(w),
            None => policy.workspace_root.clone(),
        };
        let timeout = args
            .timeout_ms
            .map_or(self.default_timeout, Duration::from_millis);
        let mut request = ShellRequest::new(args.command, workdir).with_policy(policy);
        // A background job runs until it ends or is killed.
        if !args.run_in_background {
            request = request.with_timeout(timeout);
        }
        let spec = self.executor.resolve(request);
        if args.run_in_background {
            return match self.executor.start(spec) {
                Ok(handle) => {
                    let id = handle.id();
                    lock_jobs(&self.jobs).insert(
                        id,
                        Job {
                            session: ctx.session.as_ref().map(|s| s.id().clone()),
                            handle,
                            granted,
                        },
                    );
                    ToolOutput::ok(format!(
                        "started background job {id}; read its output with job_output {{\"job_id\": {id}}}"
                    ))
                }
                Err(e) => start_error(e),
            };
        }
        match self.executor.run(spec).await {
            Ok(r) => {
                let failed = !r.exit.success() || r.timed_out;
                let content = render(&r, offered, granted);
                if failed {
                    ToolOutput::error(content)
                } else {
                    ToolOutput::ok(content)
                }
            }
            Err(e) => start_error(e),
        }
    }
}

fn start_error(e: ShellError) -> ToolOutput {
    ToolOutput::error(e.to_string())
}

impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> String {
        let mut d = String::from(
            "Run a bash command. Commands run in a file sandbox: writes outside what the sandbox allows are refused by the kernel, and the result then starts with a marker like \"[sandbox: file access denied under read-only mode]\". Attempt the commands the task needs; do not avoid a command because it might be denied, and never try to work around a denial (other paths, tools, interpreters or encodings).",
        );
        if self.executor.confines() {
            d.push_str(" If a denied command is needed, retry the same command once with `sandbox_permissions` (the narrowest mode that suffices) and a `justification`; the user approves or rejects that single retry.");
            let _ = write!(
                d,
                " The network is confined too (the policy message says how): a refused connection is marked like \"{}\". If the task needs that connection, retry the same command once with `network` (the narrowest that suffices) and a `justification`, the same way.",
                texts::network_denial_marker(Some("example.com"), NetworkMode::Deny)
            );
        } else {
            d = String::from("Run a bash command (not sandboxed in this deployment).");
        }
        d
    }

    fn schema(&self) -> serde_json::Value {
        let props = serde_json::json!({
            "command": { "type": "string", "description": "The bash command to run." },
            "description": { "type": "string", "description": "What the command does, in 5-10 words." },
            "workdir": { "type": "string", "description": "Directory to run in, absolute or relative to the workspace (default: the workspace)." },
            "timeout_ms": { "type": "integer", "minimum": 1, "description": "Kill the command (and everything it started) after this many milliseconds." },
            "run_in_background": { "type": "boolean", "description": "Start the command and return at once; read its output with job_output." }
        });
        escalation::command_schema(props, &["command", "description"], self.executor.confines())
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.run(ctx, args))
    }
}
