//! From a validated `stockade.toml` to a running agent (what `stockade acp`
//! serves): the provider, the executor, the file system, the policy,
//! approval and preset services, the tools, the policy context and the
//! model. Which of them confine is the configuration's choice; this module
//! only mounts what it names.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stockade_agent::agent::Agent;
use stockade_agent::hooks::Hooks;
use stockade_agent::tools::files::file_tools;
use stockade_agent::{
    Answerer, ApprovalService, BashTool, Delegations, EditorFiles, EscalationGate, PolicyContext,
    PolicyService, PresetService, TaskTool, Tool, ToolProgress,
};
use stockade_core::SandboxProvider;
use stockade_fs::{FileSystem, LocalFs, SandboxedFs};
use stockade_local::LocalProvider;
use stockade_mcp::Launcher as McpLauncher;
use stockade_model::{ModelClient, ModelConfig, ModelError};
use stockade_roots::RootPins;
use stockade_session::SessionStore;
use stockade_shell::{Interpreter, SandboxedExecutor, ShellExecutor, UnconfinedExecutor};

use crate::schema::{Config, ConfigError, Implementation};

/// Why a composition could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ComposeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("sandbox provider: {message}")]
    Sandbox { message: String },
    #[error(transparent)]
    Presets(#[from] stockade_agent::PresetError),
    #[error("model: {0}")]
    Model(#[from] ModelError),
}

/// Where a front end's log lines go (`stockade acp`: stderr, prefixed).
pub type Log = fn(fmt::Arguments<'_>);

/// What the front end lends the tools; the default lends nothing (commands
/// are shown when they finish, files are read from disk).
#[derive(Default, Clone)]
pub struct EditorHooks {
    /// Shown a running command's output.
    pub progress: Option<Arc<dyn ToolProgress>>,
    /// Read by the read tool, after the fence allowed the path.
    pub files: Option<Arc<dyn EditorFiles>>,
}

/// Where sessions live, for the `task` tool's children.
#[derive(Debug, Clone)]
pub struct Sessions {
    pub store: SessionStore,
    /// The running children, shared with the front end, which shows a
    /// child's questions under its parent's task call.
    pub delegations: Arc<Delegations>,
}

/// Where the pieces that are not in `stockade.toml` come from.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// The config file's directory: relative paths in the file are relative
    /// to it, so the file means the same whatever the editor's current
    /// directory is.
    pub config_dir: PathBuf,
    /// Where `auto` may keep its probe verdict between processes, in order
    /// (the first beneath no writable root is used); empty keeps it for
    /// this process only.
    /// [`stockade_local::LocalSettings::default_verdict_cache_dirs`] is
    /// where `stockade exec` keeps it, so both share one verdict.
    pub verdict_cache_dirs: Vec<PathBuf>,
    /// The config file itself (absolute), when the composition came from
    /// one: it decides every later run's confinement, so it must lie outside
    /// every root a run may write (checked at startup and per session).
    pub config_file: Option<PathBuf>,
    /// The writable roots, held once for this process and shared by the
    /// provider and the file fence, so bash and the file tools grant the
    /// same held directories.
    pub pins: Arc<RootPins>,
}

/// Everything the server needs, composed once per process. `M` is what the
/// front end keeps of the model it was given (acp: its key, as ACP
/// authentication).
pub struct Composition<M> {
    pub agent: Arc<Agent>,
    pub policy: Arc<PolicyService>,
    pub approval: Option<Arc<ApprovalService>>,
    pub presets: Option<Arc<PresetService>>,
    /// Whether the mounted executor confines (escalation exists at all).
    pub confines: bool,
    /// What the front end keeps of the model (acp: the model's key, which
    /// prompts wait for).
    pub auth: M,
    /// How a session's MCP servers are started (through bash's executor).
    pub mcp: McpLauncher,
    /// The configured model takes images (`[model] images`).
    pub images: bool,
    /// The mounted provider (`[sandbox]`), which bash and the MCP servers
    /// confine through, kept to end sessions on it (`None`: none mounted,
    /// nothing to end).
    pub provider: Option<Arc<dyn SandboxProvider>>,
    /// The same provider as what it is: the front end mounts each session's
    /// runtime approval on it (`LocalProvider::set_host_approval`).
    pub local: Option<Arc<LocalProvider>>,
    /// How long a question asked while a command waits is held for an
    /// answer (`[approval] timeout_ms`, else [`crate::ASK_TIMEOUT`]).
    pub ask_timeout: Duration,
    /// How many questions one command may cause (`[approval]
    /// max_questions`, else the proxy's default).
    pub ask_max_questions: Option<usize>,
    log: Log,
}

impl<M> Composition<M> {
    /// Session `id` is over: the provider releases what it allocated for
    /// the session's calls (on Windows its private temp directory and SID).
    /// What a failed cleanup leaves is inert, so it is logged, not fatal.
    pub fn end_session(&self, id: &str) {
        if let Some(p) = &self.provider {
            end_session(p.as_ref(), id, self.log);
        }
    }
}

fn end_session(provider: &dyn SandboxProvider, id: &str, log: Log) {
    if let Err(e) = provider.end_session(id) {
        log(format_args!("{e}"));
    }
}

impl<M: fmt::Debug> fmt::Debug for Composition<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Composition")
            .field("policy", &self.policy)
            .field("approval", &self.approval)
            .field("presets", &self.presets.as_ref().map(|p| p.presets().len()))
            .field("confines", &self.confines)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

fn relative_to(dir: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// The workspace root of a call without a session: `[policy]
/// workspace_root` (relative to the config's directory), else the config's
/// directory. ACP calls always carry a session, whose cwd is the root.
pub fn fallback_root(config: &Config, env: &Environment) -> PathBuf {
    match &config.policy.workspace_root {
        Some(p) => relative_to(&env.config_dir, p),
        None => env.config_dir.clone(),
    }
}

fn provider(config: &Config, env: &Environment) -> Result<Option<LocalProvider>, ComposeError> {
    let Some(s) = &config.sandbox else {
        return Ok(None);
    };
    let settings = crate::local_settings(
        s,
        env.config_file.as_deref().unwrap_or(&env.config_dir),
        &env.config_dir,
        env.verdict_cache_dirs.clone(),
    )
    .map_err(|e| ComposeError::Sandbox {
        message: match e {
            // The message as the provider reports it: the key, not the file.
            ConfigError::Invalid { key, message, .. } => format!("{key}: {message}"),
            other => other.to_string(),
        },
    })?;
    crate::sandbox::provider(settings, Some(env.pins.clone()))
        .map(Some)
        .map_err(|e| ComposeError::Sandbox {
            message: e.to_string(),
        })
}

/// Mount what `config` names. `answerer` is the last link of the approval
/// chain (the ACP client, asked through `session/request_permission`); it
/// is consulted only when `[approval]` is configured. `editor` is what the
/// editor lends the tools; `sessions` is where a `task`'s children go.
/// `model` makes the model client from `[model]` (and what the front end
/// keeps of it), at the point where its misconfiguration is reported;
/// `log` is where a failed session end is told.
pub fn agent<M>(
    config: &Config,
    env: &Environment,
    answerer: Arc<dyn Answerer>,
    editor: EditorHooks,
    sessions: &Sessions,
    model: impl FnOnce(&ModelConfig) -> Result<(M, Arc<dyn ModelClient>), ModelError>,
    log: Log,
) -> Result<Composition<M>, ComposeError> {
    // The file policy and the allowed hosts ride every call this service
    // resolves: bash and the file tools get the same lists.
    // `acp` has no flags: the config as written, by the rules `exec` lays
    // its flags over it with. Nothing in an unchanged config can fail them.
    let policy = Arc::new(
        crate::sandbox::policy_service(
            config,
            fallback_root(config, env),
            &crate::Overrides::default(),
        )
        .map_err(|e| ComposeError::Sandbox { message: e.message })?,
    );
    let local = provider(config, env)?.map(Arc::new);
    let provider: Option<Arc<dyn SandboxProvider>> =
        local.clone().map(|p| -> Arc<dyn SandboxProvider> { p });
    // `[bash] shell`, resolved against this host once: on Windows
    // PowerShell (7 when on PATH), elsewhere bash, unless configured.
    let shell = config.bash.shell_choice().map_err(|e| {
        ComposeError::Config(ConfigError::Invalid {
            path: env
                .config_file
                .clone()
                .unwrap_or_else(|| env.config_dir.clone()),
            key: "bash.shell".into(),
            message: e.to_string(),
        })
    })?;
    let interpreter = Interpreter::for_host(shell);
    // A session's MCP servers start through the executor bash runs on, so
    // they are confined exactly as a command is (or, opted out, are not).
    let (executor, mcp): (Arc<dyn ShellExecutor>, McpLauncher) =
        match (config.bash.executor, provider.clone()) {
            (Implementation::Sandboxed, Some(p)) => {
                let e = SandboxedExecutor::new(p, policy.resolve(None, None))
                    .with_interpreter(interpreter);
                (Arc::new(e.clone()), McpLauncher::Sandboxed(e))
            }
            (Implementation::Sandboxed, None) => {
                return Err(ComposeError::Sandbox {
                    message: "bash.executor = \"sandboxed\" needs a [sandbox] section".into(),
                });
            }
            (Implementation::Local, _) => (
                Arc::new(UnconfinedExecutor::new(interpreter.clone())),
                McpLauncher::Unconfined(UnconfinedExecutor::new(interpreter)),
            ),
        };
    let confines = executor.confines();
    let fs: Arc<dyn FileSystem> = match config.fs.provider {
        // The provider's own pins: the fence and bash grant the same held
        // directories.
        Implementation::Sandboxed => Arc::new(SandboxedFs::with_pins(env.pins.clone())),
        Implementation::Local => Arc::new(LocalFs),
    };
    let approval = config
        .approval
        .as_ref()
        .map(|a| Arc::new(ApprovalService::new(a.policy, vec![answerer])));
    let presets = match &config.presets {
        Some(section) => {
            let table = if section.preset.is_empty() {
                PresetService::default_table()
            } else {
                section.preset.clone()
            };
            Some(Arc::new(PresetService::new(
                table,
                policy.clone(),
                approval.clone(),
                confines,
            )?))
        }
        None => None,
    };

    let gate = EscalationGate::new(approval.clone());
    // Hooks ride the shell tool's executor: confined exactly as its
    // commands are, under the session's own policy.
    let hooks = Arc::new(Hooks::new(
        config.hooks.clone(),
        executor.clone(),
        policy.clone(),
    ));
    let mut bash = BashTool::new(executor, policy.clone(), gate.clone());
    if let Some(ms) = config.bash.timeout_ms {
        bash = bash.with_default_timeout(Duration::from_millis(ms));
    }
    if let Some(p) = &editor.progress {
        bash = bash.with_progress(p.clone());
    }
    // A narrower retry's directory is offered only once the provider's pins
    // hold it as an extra root (never one holding control state).
    let pins = env.pins.clone();
    bash = bash.with_offerable_root(Arc::new(move |dir: &Path| {
        matches!(pins.extra_root(dir), Ok(Some(_)))
    }));
    let job_output = bash.job_output();
    let jobs = bash.jobs();
    let (mut read, write, edit) = file_tools(fs.clone(), policy.clone(), gate);
    if let Some(f) = editor.files {
        read = read.with_editor(f);
    }
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(bash),
        Arc::new(job_output),
        Arc::new(read),
        Arc::new(write),
        Arc::new(edit),
    ];
    let context = PolicyContext::new(policy.clone(), approval.clone(), confines)
        .with_fenced_files(fs.fences());
    // The API key is read now; a missing one leaves the server up, asking
    // the editor to authenticate, and any other model misconfiguration
    // fails at startup rather than at the first prompt.
    let (auth, model) = model(&config.model)?;
    if config.agent.task {
        // The child gets every tool but `task`: delegation is one level.
        let child = Agent::new(model.clone(), tools.clone(), context.clone())
            .with_max_steps(config.agent.max_steps)
            .with_hooks(hooks.clone());
        let mut task = TaskTool::new(
            Arc::new(child),
            sessions.store.clone(),
            sessions.delegations.clone(),
        )
        .with_jobs(jobs);
        if let Some(p) = &editor.progress {
            task = task.with_progress(p.clone());
        }
        // A child is a session of its own (its own private temp on
        // Windows), ended when its task call ends.
        if let Some(p) = &provider {
            let p = p.clone();
            task = task.with_session_end(Arc::new(move |child| {
                end_session(p.as_ref(), child.id().as_str(), log);
            }));
        }
        tools.push(Arc::new(task));
    }
    let agent = Agent::new(model, tools, context)
        .with_max_steps(config.agent.max_steps)
        .with_hooks(hooks);
    Ok(Composition {
        agent: Arc::new(agent),
        policy,
        approval,
        presets,
        confines,
        auth,
        mcp,
        images: config.model.images,
        provider,
        local,
        ask_timeout: crate::sandbox::ask_timeout(&crate::Overrides::default(), Some(config)),
        ask_max_questions: crate::sandbox::ask_max_questions(Some(config)),
        log,
    })
}
