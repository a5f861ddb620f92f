//! The sandbox both front ends run commands in: `[sandbox]` as the local
//! provider's settings and the provider itself, written once for both
//! (`acp` serves them as configured), and [`sandbox`], an invocation's whole
//! sandbox (`stockade exec`): the config it names with the flags over it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stockade_agent::{Answerer, ApprovalRequest, ApprovalService, PolicyService};
use stockade_core::files::{self, FilePolicy, ListKind};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, NetworkMode, SandboxMode, net};
use stockade_local::{LocalProvider, LocalSettings, RunnerCommand, SettingsError};
use stockade_roots::RootPins;
use stockade_shell::SandboxedExecutor;

use crate::load::LoadedConfig;
use crate::overrides::Overrides;
use crate::schema::{Config, ConfigError, SandboxSection};

/// The provider's settings `s` asks for: its paths relative to `dir` (the
/// config file's directory), verdicts cached in the first of `verdict_cache_dirs` beneath no writable root. `path`
/// is the config file, for the error. Validation at load already refused
/// every value parsed here, so an error is a bug in that validation,
/// reported rather than hidden.
pub fn local_settings(
    s: &SandboxSection,
    path: &Path,
    dir: &Path,
    verdict_cache_dirs: Vec<PathBuf>,
) -> Result<LocalSettings, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        key: key.to_owned(),
        message,
    };
    let backend = s
        .backend
        .parse::<stockade_local::BackendPreference>()
        .map_err(|e| invalid("sandbox.backend", e.to_string()))?;
    let runner_command = match &s.runner_command {
        Some(argv) => Some(
            RunnerCommand::new(
                argv.iter().map(Into::into).collect(),
                s.runner_failure_signatures.clone(),
            )
            .map_err(|e| invalid("sandbox", e.to_string()))?,
        ),
        None => None,
    };
    let defaults = LocalSettings::default();
    Ok(LocalSettings {
        backend,
        bwrap_path: s.bwrap_path.as_deref().map(|p| dir.join(p)),
        launcher_path: s.launcher_path.as_deref().map(|p| dir.join(p)),
        runner_command,
        probe_timeout: s
            .probe_timeout_ms
            .map_or(defaults.probe_timeout, Duration::from_millis),
        verdict_cache_dirs,
        allow_sockets: s.allow_sockets.clone(),
    })
}

/// The local provider `settings` ask for, granting the roots `pins` holds
/// (shared with the file fence where there is one; `None`: its own). On
/// Windows it serves the restricted-token rung, which lives in its own
/// crate; without it the provider fails closed.
pub fn provider(
    settings: LocalSettings,
    pins: Option<Arc<RootPins>>,
) -> Result<LocalProvider, SettingsError> {
    let provider = LocalProvider::new(settings)?;
    let provider = match pins {
        Some(pins) => provider.with_pins(pins),
        None => provider,
    };
    #[cfg(windows)]
    let provider = provider.with_rung(stockade_windows::rung(None));
    Ok(provider)
}

/// An invocation's sandbox (`stockade exec`): everything decided before
/// anything runs.
#[derive(Debug)]
pub struct Sandbox {
    /// Its roots held for the whole invocation (the retry too).
    pub provider: Arc<LocalProvider>,
    /// The invocation's policy: `resolve(None, None)` is the run's, a
    /// granted retry resolves wider through it.
    pub policy: Arc<PolicyService>,
    /// Confines every run of the invocation through `provider`.
    pub executor: SandboxedExecutor,
    /// The workspace root, absolute.
    pub workspace: PathBuf,
    /// The command's working directory, absolute and a directory.
    pub workdir: PathBuf,
    /// The file mode `--ask` offers after a file denial (`None` without
    /// `--ask`, or when nothing is wider).
    pub escalate_to: Option<SandboxMode>,
    /// How long a question asked while a run waits (a host not on the
    /// list, under `--ask`) is held for an answer: `--ask-timeout`, else
    /// the config's `approval.timeout_ms`, else [`ASK_TIMEOUT`].
    pub ask_timeout: Duration,
    /// How many questions one run may cause: the config's `[approval]
    /// max_questions`, else the proxy's default.
    pub ask_max_questions: Option<usize>,
}

/// How long a question asked while a command runs waits for an answer
/// unless the invocation or the config says otherwise.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(60);

impl Sandbox {
    /// The invocation's one approved wider retry of `command`, under
    /// `target` (and `network`, when that widens too), asked through the
    /// agent's approval seam with `answerer` its only link: whether the
    /// user allowed it once. Nothing remembers the answer.
    pub async fn retry_approved(
        &self,
        answerer: Arc<dyn Answerer>,
        command: &[OsString],
        target: SandboxMode,
        network: Option<NetworkMode>,
    ) -> bool {
        let request = ApprovalRequest {
            session: no_session(),
            tool: "exec".into(),
            call_id: String::new(),
            reason: String::new(),
            target,
            network,
            // Shown, never run: the command runs from `command` itself.
            subject: command
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            effect: String::new(),
            writable_root: None,
        };
        let approval = ApprovalService::new(ApprovalPolicy::Ask, vec![answerer]);
        approval.answer(ApprovalPolicy::Ask, &request).await == ApprovalOutcome::AllowedOnce
    }
}

/// `exec` runs in no session: its request names the all-zero id, which no
/// session is given (ids are drawn at random) and nothing records.
fn no_session() -> stockade_session::SessionId {
    const NONE: &str = "00000000000000000000000000000000";
    // 32 lowercase hex digits, the whole of a well-formed id, so the parse
    // cannot fail (the test below holds it to that).
    NONE.parse()
        .unwrap_or_else(|_| unreachable!("{NONE} is a well-formed session id"))
}

/// Why an invocation cannot run as given (nothing ran): the flag or file
/// and what is wrong, as the user is told it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct InvocationError {
    pub message: String,
}

impl InvocationError {
    fn new(message: impl std::fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }
}

/// Compose an invocation's sandbox from the config `overrides` names (if
/// any) and the overrides over it. The checks run in this order, and the
/// first that fails is the error: the workspace, the working directory,
/// the config, the mode, the file lists, the toolchain caches, the
/// sockets, the escalation target, the provider's settings, the held
/// workspace, the config's place, the extra roots, the network.
pub fn sandbox(overrides: &Overrides) -> Result<Sandbox, InvocationError> {
    // Nothing runs until this returns: paths resolved while composing are
    // resolved once (see `stockade_roots::Composing`).
    let _composing = stockade_roots::composing();
    let workspace = absolute_dir("--workspace", overrides.workspace.as_deref())
        .map_err(InvocationError::new)?;
    let workdir = command_dir(overrides.cd.as_deref()).map_err(InvocationError::new)?;
    let loaded = exec_config(overrides).map_err(InvocationError::new)?;
    let config = loaded.as_ref().map(|l| &l.config);
    let mode = exec_mode(overrides, config).map_err(InvocationError::new)?;
    let files = file_policy(overrides, config).map_err(InvocationError::new)?;
    // `--writable @npm` means the cache even before npm first made it.
    if let Some((dir, e)) = stockade_local::create_group_caches(&overrides.writable).first() {
        return Err(InvocationError::new(format_args!(
            "--writable: cannot create {}: {e}",
            dir.display()
        )));
    }
    // A relative socket would name a different socket wherever CMD runs.
    if let Some(p) = overrides.allow_sockets.iter().find(|p| !p.is_absolute()) {
        return Err(InvocationError::new(format_args!(
            "--allow-socket {}: must be an absolute path",
            p.display()
        )));
    }
    let escalate_to = match (overrides.ask, overrides.escalate_to, mode.wider()) {
        (false, _, _) => None,
        (true, Some(to), _) if to > mode => Some(to),
        (true, Some(to), _) => {
            return Err(InvocationError::new(format_args!(
                "--escalate-to {to} is not wider than the mode ({mode})"
            )));
        }
        (true, None, wider) => wider,
    };
    let settings = exec_settings(overrides, loaded.as_ref()).map_err(InvocationError::new)?;
    let provider = match provider(settings, None) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            return Err(InvocationError::new(format_args!(
                "invalid sandbox settings: {e}"
            )));
        }
    };
    // Held before anything runs, through the provider's own pins: `/`, a
    // symlink a confined run planted in /tmp, or a workspace moved in its
    // place is refused here, and every run of this invocation (the retry
    // too) gets this directory, never whatever the path names later.
    let held = provider
        .pins()
        .workspace(&workspace)
        .map_err(InvocationError::new)?;
    // The config decides every later run's confinement: one a run of this
    // workspace (or of the temp roots) could rewrite is refused, and no
    // extra root may contain it.
    if let Some(l) = &loaded {
        provider
            .pins()
            .refuse_beneath("config", &l.path, Some(&held))
            .map_err(InvocationError::new)?;
        provider.pins().add_control_path("config", &l.path);
    }
    protect_agent_state(&provider, overrides);
    // Extra roots likewise, once, before anything runs (one that holds
    // stockade itself or the verdict cache is refused, naming both).
    for root in &files.writable_roots {
        provider
            .pins()
            .extra_root(root)
            .map_err(InvocationError::new)?;
    }
    let hosts = allowed_hosts(overrides, config).map_err(InvocationError::new)?;
    let policy = Arc::new(assemble(
        mode,
        workspace.clone(),
        files,
        hosts,
        overrides,
        config,
    ));
    let executor = SandboxedExecutor::new(provider.clone(), policy.resolve(None, None));
    let ask_timeout = ask_timeout(overrides, config);
    let ask_max_questions = ask_max_questions(config);
    Ok(Sandbox {
        provider,
        policy,
        executor,
        workspace,
        workdir,
        escalate_to,
        ask_timeout,
        ask_max_questions,
    })
}

/// `--ask-timeout`, else `[approval] timeout_ms` (validated non-zero at
/// load), else [`ASK_TIMEOUT`].
pub fn ask_timeout(overrides: &Overrides, config: Option<&Config>) -> Duration {
    overrides
        .ask_timeout
        .or_else(|| {
            config
                .and_then(|c| c.approval.as_ref())
                .and_then(|a| a.timeout_ms)
                .map(Duration::from_millis)
        })
        .unwrap_or(ASK_TIMEOUT)
}

/// `[approval] max_questions` (validated non-zero at load).
pub fn ask_max_questions(config: Option<&Config>) -> Option<usize> {
    config
        .and_then(|c| c.approval.as_ref())
        .and_then(|a| a.max_questions)
}

/// The policy service both front ends resolve every call through, for
/// calls without a session rooted at `root`: `config` (its mode with
/// `$STOCKADE_MODE` applied at load, its lists, network and hosts) with
/// `overrides` laid over it by the same rules `exec` uses. `acp`, which
/// has no flags, passes none: the config as written.
pub fn policy_service(
    config: &Config,
    root: PathBuf,
    overrides: &Overrides,
) -> Result<PolicyService, InvocationError> {
    let config = Some(config);
    let mode = exec_mode(overrides, config).map_err(InvocationError::new)?;
    let files = file_policy(overrides, config).map_err(InvocationError::new)?;
    let hosts = allowed_hosts(overrides, config).map_err(InvocationError::new)?;
    Ok(assemble(mode, root, files, hosts, overrides, config))
}

/// The service for what was decided: the mode ranked against a session's
/// switch by [`crate::session_mode`]; the network `--network`, else the
/// config's, else the mode's default (always `allow` under
/// danger-full-access, which the service decides).
fn assemble(
    mode: SandboxMode,
    root: PathBuf,
    files: FilePolicy,
    hosts: Vec<String>,
    overrides: &Overrides,
    config: Option<&Config>,
) -> PolicyService {
    PolicyService::new(mode, root)
        .with_mode_rule(crate::session_mode)
        .with_files(files)
        .with_default_network(overrides.network.or(config.and_then(|c| c.policy.network)))
        .with_allowed_hosts(hosts)
        .with_listen(overrides.allow_listen.clone())
}

/// The invocation's host list: the config's, else the default list;
/// `--no-default-hosts` keeps only what the config wrote out, then
/// `--allow-host` adds.
fn allowed_hosts(overrides: &Overrides, config: Option<&Config>) -> Result<Vec<String>, String> {
    let mut hosts = match (config, overrides.no_default_hosts) {
        (Some(c), false) => c.allowed_hosts().to_vec(),
        (Some(c), true) if c.policy.allowed_hosts.is_some() => c.allowed_hosts().to_vec(),
        (_, true) => Vec::new(),
        (None, false) => crate::default_allowed_hosts(),
    };
    let given =
        net::parse_hosts(&overrides.allow_hosts).map_err(|(_, e)| format!("--allow-host {e}"))?;
    for h in given {
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    Ok(hosts)
}

/// A directory the invocation names (`flag`), absolute: a relative one is
/// resolved against the current directory once, here, and never again;
/// none is the current directory.
fn absolute_dir(flag: &str, given: Option<&Path>) -> Result<PathBuf, String> {
    match given {
        Some(w) => std::path::absolute(w).map_err(|e| {
            format!(
                "{flag} {}: cannot be made absolute against the current directory: {e}",
                w.display()
            )
        }),
        None => std::env::current_dir()
            .map_err(|e| format!("{flag}: cannot read the current directory: {e}")),
    }
}

/// `--cd`: absolute, and a directory now (the runner would otherwise fail
/// with a message about its own chdir, or the launch about the runner).
fn command_dir(given: Option<&Path>) -> Result<PathBuf, String> {
    let dir = absolute_dir("--cd", given)?;
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(format!("--cd {}: not a directory", dir.display())),
        Err(e) => Err(format!("--cd {}: {e}", dir.display())),
    }
}

/// The invocation's file policy: the config's lists (expanded when it was
/// loaded), then the flags expanded once. The deny list is the config's
/// (the default list when it left `deny_read` out; with no config, the
/// default list); `--no-default-deny-read` keeps only what the config wrote
/// out. The error names the flag and the value.
fn file_policy(overrides: &Overrides, config: Option<&Config>) -> Result<FilePolicy, String> {
    let env = files::process_env;
    let list = |values: &[OsString], kind: ListKind| {
        files::expand_all(values, kind, &env).map_err(|(_, e)| format!("{} {e}", kind.flag()))
    };
    let base = config.map(|c| c.file_policy().clone()).unwrap_or_default();
    let mut deny_read = match (config, overrides.no_default_deny_read) {
        (Some(_), false) => base.deny_read.clone(),
        (Some(c), true) if c.policy.deny_read.is_some() => base.deny_read.clone(),
        (_, true) => Vec::new(),
        (None, false) => crate::default_deny_read(&env).map_err(|(_, e)| {
            format!("the default deny-read list {e} (or pass --no-default-deny-read)")
        })?,
    };
    let merge = |into: &mut Vec<PathBuf>, more: Vec<PathBuf>| {
        for p in more {
            if !into.contains(&p) {
                into.push(p);
            }
        }
    };
    merge(
        &mut deny_read,
        list(&overrides.deny_read, ListKind::DenyRead)?,
    );
    let mut writable_roots = base.writable_roots;
    merge(
        &mut writable_roots,
        list(&overrides.writable, ListKind::WritableRoots)?,
    );
    let mut read_only = base.read_only;
    merge(
        &mut read_only,
        list(&overrides.read_only, ListKind::ReadOnly)?,
    );
    // The protect list rides on read_only (its names are relative or
    // ~/, which read_only's absolute entries never are). The default
    // applies as deny-read's does: the config's (its default when it left
    // `protect` out), else the default; --no-default-protect keeps only
    // what the config wrote out.
    let defaults: Vec<PathBuf> = crate::DEFAULT_PROTECT.iter().map(PathBuf::from).collect();
    match (config, overrides.no_default_protect) {
        (Some(c), true) if c.policy.protect.is_none() => {
            read_only.retain(|p| !defaults.contains(p));
        }
        (None, true) | (Some(_), _) => {}
        (None, false) => merge(&mut read_only, defaults),
    }
    let mut protect = Vec::new();
    for name in &overrides.protect {
        protect.push(crate::protect_entry(name).map_err(|e| format!("--protect {e}"))?);
    }
    merge(&mut read_only, protect);
    Ok(FilePolicy {
        writable_roots,
        deny_read,
        read_only,
    })
}

/// The config `exec` reads: `--config`, else `$STOCKADE_CONFIG`, else
/// none. A file at the default path is never read unless named: a run of
/// an earlier invocation whose writable roots covered that path could have
/// planted it, and it would decide this run's confinement. `$STOCKADE_MODE`
/// is applied over its mode by the loader.
fn exec_config(overrides: &Overrides) -> Result<Option<LoadedConfig>, String> {
    let path = match &overrides.config {
        Some(p) => p.clone(),
        None => match &overrides.env_config {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => return Ok(None),
        },
    };
    crate::load_file(&path, |name| overrides.var(name))
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Register what decides `stockade acp`'s later runs (its default config
/// file and its session logs, whether or not they exist yet) as control
/// state, so no extra writable root of this run may contain them.
fn protect_agent_state(provider: &LocalProvider, overrides: &Overrides) {
    if let Ok(path) = crate::load::default_path(overrides) {
        provider.pins().add_control_path("config", &path);
    }
    if let Ok(dir) = crate::session_dir() {
        provider
            .pins()
            .add_control_path("session log directory", &dir);
    }
}

/// The mode, by [`crate::MODE_PRECEDENCE`]: `--mode`, else
/// `$STOCKADE_MODE` (already applied to a loaded config's), else the
/// config's, else the default. `exec` has no session.
fn exec_mode(overrides: &Overrides, config: Option<&Config>) -> Result<SandboxMode, String> {
    let layers = crate::ModeLayers {
        flag: overrides.mode,
        config: config.map(|c| c.policy.mode),
        ..Default::default()
    };
    layers
        .resolve_reading_env(|| crate::env_mode_from(|name| overrides.var(name)))
        .map(|(mode, _)| mode)
        .map_err(|e| e.to_string())
}

/// The provider's settings: the config's [sandbox] (paths relative to the
/// config's directory), `--backend` and `--allow-socket` over it.
fn exec_settings(
    overrides: &Overrides,
    loaded: Option<&LoadedConfig>,
) -> Result<LocalSettings, String> {
    let verdict_cache_dirs = LocalSettings::default_verdict_cache_dirs();
    let sandbox = loaded.and_then(|l| l.config.sandbox.as_ref().map(|sb| (l, sb)));
    let mut settings = match sandbox {
        Some((l, sb)) => {
            local_settings(sb, &l.path, &l.dir, verdict_cache_dirs).map_err(|e| e.to_string())?
        }
        None => LocalSettings {
            verdict_cache_dirs,
            ..Default::default()
        },
    };
    if let Some(b) = overrides.backend {
        settings.backend = b;
    }
    for s in &overrides.allow_sockets {
        if !settings.allow_sockets.contains(s) {
            settings.allow_sockets.push(s.clone());
        }
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    #[test]
    fn execs_request_names_a_well_formed_id_no_session_is_given() {
        let id = super::no_session();
        assert_eq!(id.as_str().len(), stockade_session::SessionId::LEN);
        assert!(id.as_str().bytes().all(|b| b == b'0'));
    }
}
