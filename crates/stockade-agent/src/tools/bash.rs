//! The bash tool: run a command under the call's resolved policy, with one
//! approved wider retry when the mounted executor confines.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use stockade_core::texts::network as network_texts;
use stockade_core::{NetworkMode, texts};
use stockade_shell::{
    BoxFuture, OutputTap, Shell, ShellError, ShellExecutor, ShellRequest, ShellResult,
};
use tokio::sync::Notify;

use crate::escalation::{self, EscalationArgs, EscalationGate, EscalationTarget, NetworkTarget};
use crate::policy::PolicyService;
use crate::tool::{Tool, ToolContext, ToolOutput, ToolProgress};
use crate::tools::jobs::{Job, Jobs, lock_jobs};
use crate::tools::render;

/// A running command's output is shown at most this often.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// How much of a running command's output is shown: its last this many
/// bytes (the finished result is rendered as the model sees it).
pub const PROGRESS_TAIL: usize = 64 * 1024;

/// The last [`PROGRESS_TAIL`] bytes of stdout and stderr as they arrived,
/// interleaved, and a signal that more arrived.
#[derive(Default)]
struct LiveOutput {
    tail: Mutex<VecDeque<u8>>,
    changed: Notify,
}

impl LiveOutput {
    fn push(&self, chunk: &[u8]) {
        {
            let mut t = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
            let chunk = &chunk[chunk.len().saturating_sub(PROGRESS_TAIL)..];
            let overflow = (t.len() + chunk.len()).saturating_sub(PROGRESS_TAIL);
            t.drain(..overflow);
            t.extend(chunk);
        }
        // Stored as a permit when nobody waits: the next wait returns at once.
        self.changed.notify_one();
    }

    /// What was kept, as text starting at a character boundary.
    fn text(&self) -> String {
        let all: Vec<u8> = self
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .collect();
        // A cut through a UTF-8 sequence leaves continuation bytes in front.
        let start = all
            .iter()
            .position(|b| (*b & 0xC0) != 0x80)
            .unwrap_or(all.len());
        String::from_utf8_lossy(&all[start..]).into_owned()
    }

    /// Show the output through `sink` whenever some arrived, at most once
    /// per [`PROGRESS_INTERVAL`]; ends only by being dropped. Nothing is
    /// shown in the first interval: a command that ends within it is shown
    /// once, finished, without a flicker of partial output.
    async fn pump(&self, sink: &dyn ToolProgress, ctx: &ToolContext) -> Infallible {
        loop {
            tokio::time::sleep(PROGRESS_INTERVAL).await;
            self.changed.notified().await;
            sink.progress(ctx, &self.text());
        }
    }
}

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

pub struct BashTool {
    executor: Arc<dyn ShellExecutor>,
    policy: Arc<PolicyService>,
    gate: EscalationGate,
    default_timeout: Duration,
    pub(crate) jobs: Jobs,
    progress: Option<Arc<dyn ToolProgress>>,
    /// Whether a directory may be offered writable for a narrower retry
    /// (the provider's pins: one holding control state may not); `None`
    /// offers none.
    offerable: Option<OfferableRoot>,
}

/// See [`BashTool::with_offerable_root`].
pub type OfferableRoot = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

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
            progress: None,
            offerable: None,
        }
    }

    /// After writes refused in one directory outside the roots, offer that
    /// directory writable for one retry (see [`crate::narrower_root`]) when
    /// `check` accepts it: the composition holds it as an extra root, which
    /// refuses one that holds the config, the session logs or stockade
    /// itself. Without a check nothing narrower is offered.
    pub fn with_offerable_root(mut self, check: OfferableRoot) -> Self {
        self.offerable = Some(check);
        self
    }

    /// Show a foreground command's output through `sink` while it runs.
    pub fn with_progress(mut self, sink: Arc<dyn ToolProgress>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Run in the foreground, shown live through the progress sink if one
    /// is installed.
    async fn run_foreground(
        &self,
        ctx: &ToolContext,
        request: ShellRequest,
    ) -> Result<ShellResult, ShellError> {
        let Some(sink) = &self.progress else {
            return self.executor.run(self.executor.resolve(request)).await;
        };
        let live = Arc::new(LiveOutput::default());
        let tap = {
            let live = live.clone();
            OutputTap::new(move |_, chunk| live.push(chunk))
        };
        let run = self
            .executor
            .run(self.executor.resolve(request.with_tap(tap)));
        tokio::select! {
            r = run => r,
            never = live.pump(sink.as_ref(), ctx) => match never {},
        }
    }

    /// The approved narrower retry: `request` again with `dir` writable
    /// too. Its result is the call's; denied again, no wider retry is
    /// offered (the one retry was this).
    async fn narrower_retry(
        &self,
        ctx: &ToolContext,
        mut request: ShellRequest,
        dir: &Path,
        offered: bool,
    ) -> ToolOutput {
        if let Some(p) = request.policy.as_mut() {
            p.files.writable_roots.push(dir.to_path_buf());
        }
        match self.run_foreground(ctx, request).await {
            Ok(r) => {
                let failed = !r.exit.success() || r.timed_out;
                // Rendered as a granted retry: no escalation hint.
                let granted = crate::escalation::Grant {
                    mode: r.sandbox.as_ref().map(|f| f.mode),
                    network: None,
                };
                let content = format!("{}\n{}", texts_narrower(dir), render(&r, offered, granted));
                if failed {
                    ToolOutput::error(content)
                } else {
                    ToolOutput::ok(content)
                }
            }
            Err(e) => start_error(e),
        }
    }

    pub fn with_default_timeout(mut self, t: Duration) -> Self {
        self.default_timeout = t;
        self
    }

    /// This tool's background jobs (a `task` ends its child's).
    pub fn jobs(&self) -> Jobs {
        self.jobs.clone()
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
        let effect = crate::effect::command(
            &args.command,
            &crate::tool::resolve_path(
                &self.policy.workspace_root(session),
                args.workdir.as_deref().unwrap_or(Path::new(".")),
            ),
        );
        let granted = match self
            .gate
            .decide_with_network(
                ctx,
                self.name(),
                &args.command,
                &effect,
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
        let mut request = ShellRequest::new(args.command.clone(), workdir).with_policy(policy);
        // A background job runs until it ends or is killed.
        if !args.run_in_background {
            request = request.with_timeout(timeout);
        }
        if args.run_in_background {
            return match self.executor.start(self.executor.resolve(request)) {
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
        let retry = request.clone();
        match self.run_foreground(ctx, request).await {
            Ok(r) => {
                // Refused writes in one directory outside the roots: that
                // directory, writable for one retry, is offered first (the
                // call's one approved retry; a wider mode stays the
                // model's to ask for when it is declined).
                if offered
                    && !granted.any()
                    && let Some(dir) = r.sandbox.as_ref().and_then(crate::narrower_root)
                    && self.offerable.as_ref().is_some_and(|ok| ok(&dir))
                    && self
                        .gate
                        .decide_narrower(ctx, self.name(), &args.command, &effect, effective, &dir)
                        .await
                {
                    return self.narrower_retry(ctx, retry, &dir, offered).await;
                }
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

/// The first line of a narrower retry's result, for the model.
fn texts_narrower(dir: &Path) -> String {
    format!(
        "[sandbox: the first run was refused writing in {}; the user allowed that directory writable for one retry of this call, whose result follows]",
        dir.display()
    )
}

/// What the description opens with: which language a command must be in.
/// The tool keeps the name `bash` whatever the shell (approval prompts,
/// hooks, session logs and editors key on the name), so for PowerShell the
/// text says so plainly.
fn runs(shell: Shell) -> &'static str {
    match shell {
        Shell::Bash => "Run a bash command",
        Shell::Pwsh => {
            "Run a PowerShell command (PowerShell 7, `pwsh -NoProfile -Command`; this tool is named bash but runs PowerShell, so write PowerShell, not bash)"
        }
        Shell::PowerShell => {
            "Run a Windows PowerShell command (PowerShell 5.1, `powershell.exe -NoProfile -Command`; this tool is named bash but runs PowerShell, so write PowerShell, not bash)"
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
        let runs = runs(self.executor.interpreter().shell());
        if !self.executor.confines() {
            return format!("{runs} (not sandboxed in this deployment).");
        }
        let mut d = format!(
            "{runs}. Commands run in a file sandbox: writes outside what the sandbox allows are refused by the kernel, and the result then starts with a marker like \"[sandbox: file access denied under read-only mode]\". Attempt the commands the task needs; do not avoid a command because it might be denied, and never try to work around a denial (other paths, tools, interpreters or encodings).",
        );
        d.push_str(" If a denied command is needed, retry the same command once with `sandbox_permissions` (the narrowest mode that suffices) and a `justification`; the user approves or rejects that single retry.");
        let _ = write!(
            d,
            " The network is confined too (the policy message says how): a refused connection is marked like \"{}\". If the task needs that connection, retry the same command once with `network` (the narrowest that suffices) and a `justification`, the same way.",
            texts::network_denial_marker(Some("example.com"), NetworkMode::Deny)
        );
        d
    }

    fn schema(&self) -> serde_json::Value {
        let command = match self.executor.interpreter().shell() {
            Shell::Bash => "The bash command to run.",
            Shell::Pwsh | Shell::PowerShell => "The PowerShell command to run.",
        };
        let props = serde_json::json!({
            "command": { "type": "string", "description": command },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(executor: Arc<dyn ShellExecutor>) -> BashTool {
        let policy = Arc::new(PolicyService::new(
            stockade_core::SandboxMode::WorkspaceWrite,
            "/w",
        ));
        BashTool::new(executor, policy, EscalationGate::new(None))
    }

    /// A confining executor that is never run: only its description and
    /// schema are read.
    fn confining(interpreter: stockade_shell::Interpreter) -> Arc<dyn ShellExecutor> {
        struct Never;
        impl stockade_core::SandboxProvider for Never {
            fn confine(
                &self,
                _: &[std::ffi::OsString],
                _: &stockade_core::SandboxPolicy,
            ) -> Result<stockade_core::Confined, stockade_core::SandboxUnavailable> {
                Err(stockade_core::SandboxUnavailable::single(
                    "never", "not run",
                ))
            }
        }
        Arc::new(
            stockade_shell::SandboxedExecutor::new(
                Arc::new(Never),
                stockade_core::ExecutionPolicy::new(
                    stockade_core::SandboxMode::WorkspaceWrite,
                    "/w",
                ),
            )
            .with_interpreter(interpreter),
        )
    }

    #[test]
    fn the_description_names_the_shell_the_commands_run_in() {
        use stockade_shell::{Interpreter, UnconfinedExecutor};
        let bash = tool(confining(Interpreter::bash())).description();
        assert!(bash.starts_with("Run a bash command. Commands run in a file sandbox"));
        for (interpreter, opening) in [
            (
                Interpreter::pwsh(),
                "Run a PowerShell command (PowerShell 7, `pwsh",
            ),
            (
                Interpreter::powershell(),
                "Run a Windows PowerShell command (PowerShell 5.1, `powershell.exe",
            ),
        ] {
            let t = tool(confining(interpreter.clone()));
            let d = t.description();
            assert!(d.starts_with(opening), "{d}");
            assert!(d.contains("named bash but runs PowerShell"), "{d}");
            // The denial marker and the retry fields, as for bash.
            assert_eq!(
                d.split_once(". Commands run").map(|(_, rest)| rest),
                bash.split_once(". Commands run").map(|(_, rest)| rest)
            );
            assert_eq!(t.name(), "bash");
            let schema = t.schema();
            assert_eq!(
                schema["properties"]["command"]["description"],
                "The PowerShell command to run."
            );
            assert!(schema["properties"]["sandbox_permissions"].is_object());
            // Unconfined: no sandbox text, no retry fields.
            let u = tool(Arc::new(UnconfinedExecutor::new(interpreter)));
            let d = u.description();
            assert!(d.starts_with(opening), "{d}");
            assert!(d.ends_with("(not sandboxed in this deployment)."), "{d}");
            assert!(!d.contains("sandbox_permissions"), "{d}");
            assert!(u.schema()["properties"]["sandbox_permissions"].is_null());
        }
        assert_eq!(
            tool(Arc::new(UnconfinedExecutor::default())).description(),
            "Run a bash command (not sandboxed in this deployment)."
        );
    }

    #[test]
    fn live_output_keeps_the_last_bytes_from_a_character_boundary() {
        let live = LiveOutput::default();
        live.push(b"start\n");
        assert_eq!(live.text(), "start\n");
        // Past the bound only the last PROGRESS_TAIL bytes stay: here the
        // last 5 bytes of the `é`s (two bytes each), so the first kept byte
        // is the second half of one, which is dropped.
        live.push("é".repeat(10).as_bytes());
        live.push(&vec![b'x'; PROGRESS_TAIL - 5]);
        let text = live.text();
        assert_eq!(text.len(), PROGRESS_TAIL - 1);
        assert!(text.starts_with("ééx"), "{}", &text[..8]);
        assert!(!text.contains('\u{fffd}'));
        // One chunk larger than the bound keeps its own end.
        live.push(&vec![b'y'; 3 * PROGRESS_TAIL]);
        assert_eq!(live.text(), "y".repeat(PROGRESS_TAIL));
    }
}
