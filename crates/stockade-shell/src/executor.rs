use std::ffi::OsString;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use stockade_core::{
    Confined, ExecutionPolicy, NetworkMode, SandboxMode, SandboxProvider, SandboxUnavailable,
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
    /// The shell command strings are handed to.
    fn interpreter(&self) -> &Interpreter;
    /// Fill in everything the request left to the executor (the policy).
    fn resolve(&self, request: ShellRequest) -> ShellSpec;
    /// Run in the foreground and return the result.
    fn run(&self, spec: ShellSpec) -> BoxFuture<'_, Result<ShellResult, ShellError>>;
    /// Start a background job. Needs a tokio runtime.
    fn start(&self, spec: ShellSpec) -> Result<JobHandle, ShellError>;
}

/// Which shell an [`Interpreter`] is: what the shell tool tells the model
/// it runs, and whose dialect its output is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// `bash -c`
    Bash,
    /// PowerShell 7+ (`pwsh`).
    Pwsh,
    /// Windows PowerShell 5.1 (`powershell.exe`), shipped with Windows.
    PowerShell,
}

impl Shell {
    /// Whether this is one of the PowerShells (the same language and the
    /// same .NET denial dialect).
    pub fn is_powershell(self) -> bool {
        matches!(self, Shell::Pwsh | Shell::PowerShell)
    }
}

/// `[bash] shell`: which shell commands are handed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShellChoice {
    /// On Windows `pwsh` when it is on `PATH`, else Windows PowerShell;
    /// elsewhere bash.
    #[default]
    Auto,
    Bash,
    Pwsh,
    PowerShell,
}

/// A `[bash] shell` value outside [`ShellChoice::VALUES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown shell {value:?}: expected one of \"auto\", \"bash\", \"pwsh\", \"powershell\"")]
pub struct UnknownShell {
    pub value: String,
}

impl ShellChoice {
    /// Every accepted spelling, in the order the error lists them.
    pub const VALUES: [&'static str; 4] = ["auto", "bash", "pwsh", "powershell"];

    pub const fn as_str(self) -> &'static str {
        match self {
            ShellChoice::Auto => "auto",
            ShellChoice::Bash => "bash",
            ShellChoice::Pwsh => "pwsh",
            ShellChoice::PowerShell => "powershell",
        }
    }
}

impl std::str::FromStr for ShellChoice {
    type Err = UnknownShell;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(ShellChoice::Auto),
            "bash" => Ok(ShellChoice::Bash),
            "pwsh" => Ok(ShellChoice::Pwsh),
            "powershell" => Ok(ShellChoice::PowerShell),
            _ => Err(UnknownShell {
                value: s.to_owned(),
            }),
        }
    }
}

/// The host family as far as choosing a shell goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOs {
    Windows,
    /// Linux, macOS and the rest: bash is the shell.
    Other,
}

impl HostOs {
    pub const fn current() -> Self {
        if cfg!(windows) {
            HostOs::Windows
        } else {
            HostOs::Other
        }
    }
}

/// Whether `program` names an executable file in an absolute `PATH`
/// directory (with a `PATHEXT` extension on Windows, as `CreateProcess`
/// would find it). A relative entry is skipped: it would name a different
/// directory depending on where the command runs.
pub fn on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    let extensions: Vec<String> = if cfg!(windows) {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into())
            .split(';')
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        Vec::new()
    };
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .any(|dir| {
            dir.join(program).is_file()
                || extensions
                    .iter()
                    .any(|ext| dir.join(format!("{program}{ext}")).is_file())
        })
}

/// The shell a command string is handed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    shell: Shell,
    prefix: Vec<OsString>,
    /// This shell's own wording of a denied file effect, added to the
    /// backend's signatures.
    denial_signatures: Vec<String>,
}

/// How .NET (`Access to the path '...' is denied.`) and Win32/cmd (`Access
/// is denied.`) word a denied file effect: both PowerShells speak it.
const POWERSHELL_DENIALS: [&str; 2] = ["Access to the path", "Access is denied"];

impl Interpreter {
    /// `bash -c COMMAND`
    pub fn bash() -> Self {
        Self {
            shell: Shell::Bash,
            prefix: vec!["bash".into(), "-c".into()],
            denial_signatures: vec![],
        }
    }

    /// `pwsh -NoProfile -Command COMMAND`, the Windows twin, with .NET's and
    /// Win32's wording of an access denial.
    pub fn pwsh() -> Self {
        Self::powershell_like(Shell::Pwsh, "pwsh")
    }

    /// `powershell.exe -NoProfile -Command COMMAND`: Windows PowerShell 5.1,
    /// present on every Windows, for hosts without PowerShell 7. Same
    /// dialect as [`Interpreter::pwsh`].
    pub fn powershell() -> Self {
        Self::powershell_like(Shell::PowerShell, "powershell.exe")
    }

    fn powershell_like(shell: Shell, program: &str) -> Self {
        Self {
            shell,
            // No profile: a profile script is the user's, not the command's,
            // and would run inside every confined command.
            prefix: vec![program.into(), "-NoProfile".into(), "-Command".into()],
            denial_signatures: POWERSHELL_DENIALS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The interpreter `choice` means on `os`, given which programs `exists`
    /// (looked up by bare name, e.g. `"pwsh"`). Pure, so every case is
    /// tested on any host; [`Interpreter::for_host`] feeds it this host.
    ///
    /// An explicit choice is honoured as given, even when the program is
    /// missing: the command then fails to start, which says what is wrong,
    /// rather than running in a shell nobody chose. Only `auto` looks.
    pub fn select(choice: ShellChoice, os: HostOs, exists: &dyn Fn(&str) -> bool) -> Self {
        match (choice, os) {
            (ShellChoice::Bash, _) | (ShellChoice::Auto, HostOs::Other) => Self::bash(),
            (ShellChoice::Pwsh, _) => Self::pwsh(),
            (ShellChoice::PowerShell, _) => Self::powershell(),
            // Windows PowerShell ships with Windows; PowerShell 7 is the one
            // users install on purpose, so it wins when present.
            (ShellChoice::Auto, HostOs::Windows) if exists("pwsh") => Self::pwsh(),
            (ShellChoice::Auto, HostOs::Windows) => Self::powershell(),
        }
    }

    /// [`Interpreter::select`] for this host and its `PATH`.
    pub fn for_host(choice: ShellChoice) -> Self {
        Self::select(choice, HostOs::current(), &on_path)
    }

    /// Which shell this is.
    pub fn shell(&self) -> Shell {
        self.shell
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
        terminal: r.terminal.clone(),
        audit_on_caller: r.audit_on_caller,
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

/// Plain `bash -c COMMAND` (or the chosen interpreter's): honestly
/// unconfined.
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

    fn interpreter(&self) -> &Interpreter {
        &self.interpreter
    }

    fn resolve(&self, request: ShellRequest) -> ShellSpec {
        // Whatever the request asked, this executor runs it with full
        // access; the spec says so rather than carrying a policy nobody
        // enforces.
        let policy = ExecutionPolicy::new(SandboxMode::DangerFullAccess, request.workdir.clone());
        ShellSpec { request, policy }
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
    /// Only the value [`ShellExecutor::resolve`] falls back to when a
    /// request brings no policy; nothing after `resolve` reads it.
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
    /// `default_policy` is what [`ShellExecutor::resolve`] stamps on a
    /// request that brings no policy of its own (direct callers; the tools
    /// layer always brings one). It is decided there, once per call.
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

    /// `piped`: the caller must know the command started while it runs
    /// (`spawn_piped`), which only a runner inside reports.
    fn launch(&self, spec: &ShellSpec, piped: bool) -> Result<Launch, ShellError> {
        let policy = &spec.policy;
        let argv = self.interpreter.argv(&spec.request.command);
        let Some(mut sandbox) = policy.sandbox_policy() else {
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
                after_run: None,
                direct: false,
                relay: None,
            };
            return Ok(launch(spec, argv, Some(wrap), self.limits));
        };
        sandbox.approval = spec.request.approval.clone();
        let confined = self.provider.confine(&argv, &sandbox)?;
        // A terminal of its own is made the command's controlling one by
        // a runner inside (`--ctty`).
        let direct = !piped && spec.request.terminal.is_none();
        let (argv, wrap) = wrap_confined(
            policy.mode,
            sandbox.network.mode,
            confined,
            &self.interpreter.denial_signatures,
            direct,
        );
        Ok(launch(spec, argv, Some(wrap), self.limits))
    }
}

/// What the spawner reads of a confined run: every fact the provider gave,
/// plus the interpreter's own denial lines. The destructuring names every
/// field, so a fact added to [`Confined`] fails to compile here until the
/// spawner is told what to do with it, rather than being dropped.
/// `direct_ok`: the run may take [`Confined::direct`] when there is one.
fn wrap_confined(
    mode: SandboxMode,
    network: NetworkMode,
    confined: Confined,
    interpreter_denials: &[String],
    direct_ok: bool,
) -> (Vec<OsString>, Wrap) {
    let Confined {
        mut argv,
        backend,
        enforcement,
        mut denial_signatures,
        runner_failure_rules,
        writable_roots,
        pass_fds,
        status,
        gaps,
        runner_env_remove,
        deny_read,
        read_only,
        network_log,
        after_run,
        direct,
    } = confined;
    let mut pass_fds = pass_fds;
    let mut relay = None;
    let direct = match direct.filter(|_| direct_ok) {
        Some(d) => {
            argv = d.argv;
            pass_fds = d.pass_fds;
            relay = d.relay;
            true
        }
        None => false,
    };
    denial_signatures.extend(interpreter_denials.iter().cloned());
    let wrap = Wrap {
        mode,
        backend: Some(backend),
        enforcement: Some(enforcement),
        denial_signatures,
        rules: runner_failure_rules,
        writable_roots,
        gaps,
        pass_fds,
        status,
        runner_env_remove,
        deny_read,
        read_only,
        network,
        network_log,
        after_run,
        direct,
        relay,
    };
    (argv, wrap)
}

impl ShellExecutor for SandboxedExecutor {
    fn confines(&self) -> bool {
        true
    }

    fn interpreter(&self) -> &Interpreter {
        &self.interpreter
    }

    fn resolve(&self, request: ShellRequest) -> ShellSpec {
        let policy = request
            .policy
            .clone()
            .unwrap_or_else(|| self.default_policy.clone());
        ShellSpec { request, policy }
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'_, Result<ShellResult, ShellError>> {
        let launch = self.launch(&spec, false);
        Box::pin(async move { run_launch(launch?).await })
    }

    fn start(&self, spec: ShellSpec) -> Result<JobHandle, ShellError> {
        JobHandle::start(self.launch(&spec, false)?)
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
        let launch = self.launch(&self.resolve(request), true)?;
        crate::piped::start(launch, program).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn argv_of(i: &Interpreter) -> Vec<OsString> {
        i.argv(&Command::Shell("echo hi".into()))
    }

    type Exists = dyn Fn(&str) -> bool;

    #[test]
    fn every_choice_on_every_host_selects_its_interpreter() {
        let with_pwsh = |p: &str| p == "pwsh";
        let without = |_: &str| false;
        let every = |_: &str| true;
        let cases: [(ShellChoice, HostOs, &Exists, Shell); 14] = [
            // auto: PowerShell 7 when found, else Windows PowerShell; bash
            // off Windows whatever is installed.
            (ShellChoice::Auto, HostOs::Windows, &with_pwsh, Shell::Pwsh),
            (
                ShellChoice::Auto,
                HostOs::Windows,
                &without,
                Shell::PowerShell,
            ),
            (ShellChoice::Auto, HostOs::Other, &every, Shell::Bash),
            (ShellChoice::Auto, HostOs::Other, &without, Shell::Bash),
            // Explicit choices are honoured as given, found or not.
            (ShellChoice::Bash, HostOs::Windows, &every, Shell::Bash),
            (ShellChoice::Bash, HostOs::Windows, &without, Shell::Bash),
            (ShellChoice::Bash, HostOs::Other, &without, Shell::Bash),
            (ShellChoice::Pwsh, HostOs::Windows, &without, Shell::Pwsh),
            (ShellChoice::Pwsh, HostOs::Windows, &with_pwsh, Shell::Pwsh),
            (ShellChoice::Pwsh, HostOs::Other, &without, Shell::Pwsh),
            (ShellChoice::Pwsh, HostOs::Other, &with_pwsh, Shell::Pwsh),
            (
                ShellChoice::PowerShell,
                HostOs::Windows,
                &with_pwsh,
                Shell::PowerShell,
            ),
            (
                ShellChoice::PowerShell,
                HostOs::Windows,
                &without,
                Shell::PowerShell,
            ),
            (
                ShellChoice::PowerShell,
                HostOs::Other,
                &every,
                Shell::PowerShell,
            ),
        ];
        for (choice, host, exists, want) in cases {
            let got = Interpreter::select(choice, host, exists);
            assert_eq!(got.shell(), want, "{choice:?} on {host:?}");
        }
    }

    #[test]
    fn auto_asks_only_for_pwsh_and_only_on_windows() {
        let asked = std::sync::Mutex::new(Vec::<String>::new());
        let exists = |p: &str| {
            asked.lock().unwrap().push(p.to_owned());
            false
        };
        Interpreter::select(ShellChoice::Auto, HostOs::Other, &exists);
        Interpreter::select(ShellChoice::Pwsh, HostOs::Windows, &exists);
        assert_eq!(*asked.lock().unwrap(), Vec::<String>::new());
        Interpreter::select(ShellChoice::Auto, HostOs::Windows, &exists);
        assert_eq!(*asked.lock().unwrap(), ["pwsh"]);
    }

    #[test]
    fn each_interpreter_hands_over_its_own_argv_and_dialect() {
        let bash = Interpreter::bash();
        assert_eq!(argv_of(&bash), os(&["bash", "-c", "echo hi"]));
        assert!(bash.denial_signatures.is_empty());
        assert!(!bash.shell().is_powershell());
        let pwsh = Interpreter::pwsh();
        assert_eq!(
            argv_of(&pwsh),
            os(&["pwsh", "-NoProfile", "-Command", "echo hi"])
        );
        let ps = Interpreter::powershell();
        assert_eq!(
            argv_of(&ps),
            os(&["powershell.exe", "-NoProfile", "-Command", "echo hi"])
        );
        for i in [&pwsh, &ps] {
            assert!(i.shell().is_powershell());
            assert_eq!(
                i.denial_signatures,
                ["Access to the path", "Access is denied"]
            );
        }
        // An argv command is never wrapped in any shell.
        let direct = Command::Argv(os(&["git", "status"]));
        assert_eq!(pwsh.argv(&direct), os(&["git", "status"]));
    }

    #[test]
    fn choices_parse_from_exactly_their_spellings() {
        for v in ShellChoice::VALUES {
            let c: ShellChoice = v.parse().unwrap();
            assert_eq!(c.as_str(), v);
        }
        assert_eq!(ShellChoice::default(), ShellChoice::Auto);
        for bad in ["", "zsh", "Bash", "pwsh.exe", "powershell.exe", " auto"] {
            let e = bad.parse::<ShellChoice>().unwrap_err();
            assert_eq!(e.value, bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn executors_report_their_interpreter() {
        assert_eq!(
            UnconfinedExecutor::default().interpreter().shell(),
            Shell::Bash
        );
        assert_eq!(
            UnconfinedExecutor::new(Interpreter::powershell())
                .interpreter()
                .shell(),
            Shell::PowerShell
        );
    }

    #[cfg(unix)]
    #[test]
    fn on_path_finds_installed_programs_only() {
        assert!(on_path("sh"));
        assert!(!on_path("stockade-no-such-program-7f3a"));
    }
}
