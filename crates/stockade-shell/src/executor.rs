use std::ffi::OsString;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use stockade_core::{
    ExecutionPolicy, NetworkMode, SandboxMode, SandboxProvider, SandboxUnavailable,
};

use crate::error::ShellError;
use crate::job::JobHandle;
use crate::output::OutputLimits;
use crate::process::{self, Launch, Wrap};
use crate::spec::{Command, ShellRequest, ShellResult, ShellSpec};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The seam every shell consumer (the bash tool, the CLI) stands on.
pub trait ShellExecutor: Send + Sync {
    /// Whether this executor can honour a sandbox policy. The tools layer
    /// advertises escalation fields only when it does.
    fn confines(&self) -> bool;
    /// Fill in everything the request left to the executor (the policy).
    fn resolve(&self, request: ShellRequest) -> ShellSpec;
    /// Run in the foreground and return the result.
    fn run(&self, spec: ShellSpec) -> BoxFuture<'_, Result<ShellResult, ShellError>>;
    /// Start a background job. Needs a tokio runtime.
    fn start(&self, spec: ShellSpec) -> Result<JobHandle, ShellError>;
}

/// The shell a command string is handed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    prefix: Vec<OsString>,
    /// This shell's own wording of a denied file effect, added to the
    /// backend's signatures.
    denial_signatures: Vec<String>,
}

impl Interpreter {
    /// `bash -c COMMAND`
    pub fn bash() -> Self {
        Self {
            prefix: vec!["bash".into(), "-c".into()],
            denial_signatures: vec![],
        }
    }

    /// `pwsh -NoProfile -Command COMMAND`, the Windows twin, with .NET's and
    /// Win32's wording of an access denial.
    pub fn pwsh() -> Self {
        Self {
            prefix: vec!["pwsh".into(), "-NoProfile".into(), "-Command".into()],
            denial_signatures: vec!["Access to the path".into(), "Access is denied".into()],
        }
    }

    /// What the provider (or the OS) is handed for `command`.
    pub fn argv(&self, command: &Command) -> Vec<OsString> {
        match command {
            Command::Shell(text) => {
                let mut argv = self.prefix.clone();
                argv.push(text.into());
                argv
            }
            Command::Argv(argv) => argv.clone(),
        }
    }
}

fn launch(
    spec: &ShellSpec,
    argv: Vec<OsString>,
    wrap: Option<Wrap>,
    limits: OutputLimits,
) -> Launch {
    let r = &spec.request;
    Launch {
        argv,
        workdir: r.workdir.clone(),
        env: r.env.clone(),
        timeout: r.timeout,
        stdin: r.stdin.clone(),
        passthrough: r.passthrough,
        own_group: r.own_process_group,
        tap: r.tap.clone(),
        limits,
        wrap,
    }
}

async fn run_launch(launch: Launch) -> Result<ShellResult, ShellError> {
    let settled = process::spawn(launch)?.settle(std::future::pending()).await;
    match settled.runner_failure {
        Some((backend, line)) => Err(SandboxUnavailable::single(backend, line).into()),
        None => Ok(settled.result),
    }
}

/// Plain `bash -c COMMAND`: honestly unconfined.
#[derive(Debug, Clone)]
pub struct UnconfinedExecutor {
    interpreter: Interpreter,
    limits: OutputLimits,
}

impl Default for UnconfinedExecutor {
    fn default() -> Self {
        Self::new(Interpreter::bash())
    }
}

impl UnconfinedExecutor {
    pub fn new(interpreter: Interpreter) -> Self {
        Self {
            interpreter,
            limits: OutputLimits::default(),
        }
    }

    pub fn with_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }

    fn launch(&self, spec: &ShellSpec) -> Launch {
        launch(
            spec,
            self.interpreter.argv(&spec.request.command),
            None,
            self.limits,
        )
    }
}

impl ShellExecutor for UnconfinedExecutor {
    fn confines(&self) -> bool {
        false
    }

    fn resolve(&self, request: ShellRequest) -> ShellSpec {
        ShellSpec {
            request,
            policy: None,
        }
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'_, Result<ShellResult, ShellError>> {
        let launch = self.launch(&spec);
        Box::pin(run_launch(launch))
    }

    fn start(&self, spec: ShellSpec) -> Result<JobHandle, ShellError> {
        JobHandle::start(self.launch(&spec))
    }
}

/// Hands the provider exactly `[interpreter..., COMMAND]` and spawns exactly
/// the argv it returns, so `BASH_ENV` and every shell semantic happen inside
/// the confinement.
#[derive(Clone)]
pub struct SandboxedExecutor {
    provider: Arc<dyn SandboxProvider>,
    default_policy: ExecutionPolicy,
    interpreter: Interpreter,
    limits: OutputLimits,
}

impl std::fmt::Debug for SandboxedExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxedExecutor")
            .field("default_policy", &self.default_policy)
            .field("interpreter", &self.interpreter)
            .finish()
    }
}

impl SandboxedExecutor {
    /// `default_policy` serves direct callers that bring no policy of their
    /// own (the tools layer always brings one).
    pub fn new(provider: Arc<dyn SandboxProvider>, default_policy: ExecutionPolicy) -> Self {
        Self {
            provider,
            default_policy,
            interpreter: Interpreter::bash(),
            limits: OutputLimits::default(),
        }
    }

    pub fn with_interpreter(mut self, interpreter: Interpreter) -> Self {
        self.interpreter = interpreter;
        self
    }

    pub fn with_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }

    fn launch(&self, spec: &ShellSpec) -> Result<Launch, ShellError> {
        let policy = spec.policy.as_ref().unwrap_or(&self.default_policy);
        let argv = self.interpreter.argv(&spec.request.command);
        let Some(sandbox) = policy.sandbox_policy() else {
            // danger-full-access: the grant (or the configuration) is the
            // authority; the provider is never asked.
            let wrap = Wrap {
                mode: SandboxMode::DangerFullAccess,
                backend: None,
                enforcement: None,
                denial_signatures: vec![],
                rules: vec![],
                writable_roots: vec![],
                gaps: vec![],
                pass_fds: vec![],
                status: None,
                runner_env_remove: vec![],
                deny_read: vec![],
                read_only: vec![],
                network: NetworkMode::Allow,
                network_log: None,
            };
            return Ok(launch(spec, argv, Some(wrap), self.limits));
        };
        let confined = self.provider.confine(&argv, &sandbox)?;
        let mut denial_signatures = confined.denial_signatures;
        denial_signatures.extend(self.interpreter.denial_signatures.iter().cloned());
        let wrap = Wrap {
            mode: policy.mode,
            backend: Some(confined.backend),
            enforcement: Some(confined.enforcement),
            denial_signatures,
            rules: confined.runner_failure_rules,
            writable_roots: confined.writable_roots,
            gaps: confined.gaps,
            pass_fds: confined.pass_fds,
            status: confined.status,
            runner_env_remove: confined.runner_env_remove,
            deny_read: confined.deny_read,
            read_only: confined.read_only,
            network: sandbox.network.mode,
            network_log: confined.network_log,
        };
        Ok(launch(spec, confined.argv, Some(wrap), self.limits))
    }
}

impl ShellExecutor for SandboxedExecutor {
    fn confines(&self) -> bool {
        true
    }

    fn resolve(&self, request: ShellRequest) -> ShellSpec {
        let policy = request
            .policy
            .clone()
            .unwrap_or_else(|| self.default_policy.clone());
        ShellSpec {
            request,
            policy: Some(policy),
        }
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'_, Result<ShellResult, ShellError>> {
        let launch = self.launch(&spec);
        Box::pin(async move { run_launch(launch?).await })
    }

    fn start(&self, spec: ShellSpec) -> Result<JobHandle, ShellError> {
        JobHandle::start(self.launch(&spec)?)
    }
}

// Long-running children with piped stdio (an MCP server): the same wrap as a
// command, handed back running (see `crate::piped`).

/// What `request` asks to run, for a start failure to name.
fn program_of(interpreter: &Interpreter, request: &ShellRequest) -> std::path::PathBuf {
    interpreter
        .argv(&request.command)
        .into_iter()
        .next()
        .map(Into::into)
        .unwrap_or_default()
}

impl UnconfinedExecutor {
    /// Start `request` (usually [`ShellRequest::argv`]) as a long-running
    /// child with piped stdin, stdout and stderr, unconfined. Its timeout,
    /// stdin and passthrough fields do not apply.
    pub async fn spawn_piped(
        &self,
        request: ShellRequest,
    ) -> Result<crate::PipedChild, ShellError> {
        let program = program_of(&self.interpreter, &request);
        let launch = self.launch(&self.resolve(request));
        crate::piped::start(launch, program).await
    }
}

impl SandboxedExecutor {
    /// Start `request` (usually [`ShellRequest::argv`]) as a long-running
    /// child with piped stdin, stdout and stderr, confined under the
    /// request's policy (else this executor's default) exactly as a command
    /// is: the provider's argv, its held descriptors, the loader-variable
    /// rules, a process group of its own. Returns once the runner said it
    /// started the child; a runner failure is `SANDBOX_UNAVAILABLE`. Its
    /// timeout, stdin and passthrough fields do not apply.
    pub async fn spawn_piped(
        &self,
        request: ShellRequest,
    ) -> Result<crate::PipedChild, ShellError> {
        let program = program_of(&self.interpreter, &request);
        let launch = self.launch(&self.resolve(request))?;
        crate::piped::start(launch, program).await
    }
}
