//! `stockade.toml`: which capabilities a deployment mounts. Whether to
//! sandbox, and with what, is configuration, never code. Every
//! misconfiguration fails at load, naming the file, the key and what is
//! valid.
//!
//! The file decides the confinement of every later run, so it lives with
//! the user's configuration (`$XDG_CONFIG_HOME/stockade/stockade.toml`),
//! never by default in the directory a session works in: a confined command
//! can write its workspace, and must not be able to write the next run's
//! configuration.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use stockade_core::files::{self, EntryError, ListKind};
use stockade_core::{ApprovalPolicy, FilePolicy, NetworkMode, SandboxMode, net};

use crate::ModeLayers;

/// Overrides the configured default mode (a value of the mode vocabulary).
pub const ENV_MODE: &str = "STOCKADE_MODE";
/// The config file to load when none is named on the command line.
pub const ENV_CONFIG: &str = "STOCKADE_CONFIG";

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The sandbox provider; absent means none is mounted.
    pub sandbox: Option<SandboxSection>,
    #[serde(default)]
    pub policy: PolicySection,
    #[serde(default)]
    pub bash: BashSection,
    #[serde(default)]
    pub fs: FsSection,
    /// The approval seam; absent means escalations fail closed.
    pub approval: Option<ApprovalSection>,
    /// Permission presets; absent means none.
    pub presets: Option<PresetsSection>,
    /// The model endpoint (`base_url`, `model`, `api_key_env`, `timeout`
    /// in seconds, `max_retries`, `stream`).
    #[serde(default)]
    pub model: stockade_model::ModelConfig,
    #[serde(default)]
    pub agent: AgentSection,
    /// `[[hooks]]`: commands run at session start, around tool calls and
    /// when the model ends its turn, through the shell tool's executor.
    #[serde(default)]
    pub hooks: Vec<stockade_agent::hooks::HookConfig>,
    /// `[policy]`'s three lists, expanded when the file is loaded; nothing
    /// later interprets `~` or a group again.
    #[serde(skip)]
    files: FilePolicy,
    /// `[policy] allowed_hosts`, validated and normalized at load.
    #[serde(skip)]
    allowed_hosts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Model steps per prompt before the loop stops.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Offer the `task` tool: the model may delegate a sub-task to a child
    /// session that can never be wider than its parent.
    #[serde(default)]
    pub task: bool,
}

fn default_max_steps() -> u32 {
    32
}

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            max_steps: default_max_steps(),
            task: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    #[serde(default = "default_backend")]
    pub backend: String,
    pub bwrap_path: Option<PathBuf>,
    pub launcher_path: Option<PathBuf>,
    /// An operator-asserted bwrap-compatible runner (argv).
    pub runner_command: Option<Vec<String>>,
    #[serde(default)]
    pub runner_failure_signatures: Vec<String>,
    pub probe_timeout_ms: Option<u64>,
    /// Unix sockets a confined command may still connect to (absolute
    /// paths); every other socket outside the sandbox stays out of reach.
    #[serde(default)]
    pub allow_sockets: Vec<PathBuf>,
}

fn default_backend() -> String {
    "auto".into()
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    #[serde(default = "default_mode")]
    pub mode: SandboxMode,
    /// The workspace root of a call that has no session (relative to the
    /// config file's directory); sessions use their own cwd.
    pub workspace_root: Option<PathBuf>,
    /// Extra writable roots under `workspace-write`, as written: absolute,
    /// `~/`-relative, or a toolchain group (`@cargo`, ...).
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// What nothing confined may read, as written. Left out, the default
    /// list applies; an empty list turns it off.
    pub deny_read: Option<Vec<PathBuf>>,
    /// Paths inside writable roots that stay read-only, as written.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Files the host or an editor runs without asking, kept read-only
    /// wherever they lie in a writable root: a relative name (`.envrc`)
    /// in every writable root, `~/name` in `$HOME` (when a root contains
    /// it). Left out, [`DEFAULT_PROTECT`] applies; an empty list turns it
    /// off.
    pub protect: Option<Vec<PathBuf>>,
    /// The default network mode. Left out, it follows the mode:
    /// `read-only` denies, `workspace-write` allows the listed hosts,
    /// `danger-full-access` is always `allow`.
    pub network: Option<NetworkMode>,
    /// The hosts `allow-listed` lets through (`crates.io`,
    /// `*.github.com`), as written. Left out, the default list applies; an
    /// empty list lets none through.
    pub allowed_hosts: Option<Vec<String>>,
}

fn default_mode() -> SandboxMode {
    crate::DEFAULT_MODE
}

impl Default for PolicySection {
    fn default() -> Self {
        Self {
            mode: default_mode(),
            workspace_root: None,
            writable_roots: Vec::new(),
            deny_read: None,
            read_only: Vec::new(),
            protect: None,
            network: None,
            allowed_hosts: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Implementation {
    #[default]
    Sandboxed,
    Local,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashSection {
    #[serde(default)]
    pub executor: Implementation,
    pub timeout_ms: Option<u64>,
    /// Which shell commands are handed to: `auto` (the default: on Windows
    /// `pwsh` when it is on `PATH`, else Windows PowerShell; elsewhere
    /// bash), `bash`, `pwsh` or `powershell`. Kept as written and checked
    /// at load, so an unknown value is refused naming `bash.shell` and the
    /// value rather than as a bare parse error; read it with
    /// [`BashSection::shell_choice`].
    pub shell: Option<String>,
}

impl BashSection {
    /// `[bash] shell`, `auto` when left out.
    pub fn shell_choice(
        &self,
    ) -> Result<stockade_shell::ShellChoice, stockade_shell::UnknownShell> {
        self.shell
            .as_deref()
            .map_or(Ok(stockade_shell::ShellChoice::Auto), str::parse)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsSection {
    #[serde(default)]
    pub provider: Implementation,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSection {
    #[serde(default = "default_approval")]
    pub policy: ApprovalPolicy,
    /// How long a question asked while a command runs (a host not on the
    /// list) waits for an answer before it is refused; default 60 s.
    pub timeout_ms: Option<u64>,
    /// How many such questions one command may cause; past it, refusals
    /// as without approval. Default 8.
    pub max_questions: Option<usize>,
}

fn default_approval() -> ApprovalPolicy {
    ApprovalPolicy::Ask
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetsSection {
    /// The table; empty means the default table.
    #[serde(default)]
    pub preset: Vec<stockade_agent::Preset>,
}

/// A configuration that cannot be composed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", .path.display())]
    Parse { path: PathBuf, message: String },
    #[error("{}: {key}: {message}", .path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("environment variable {var}: {message}")]
    Env { var: &'static str, message: String },
    #[error(
        "no config file: pass --config FILE, or set ${env} (or $XDG_CONFIG_HOME or $HOME, for {file} beneath it)",
        env = ENV_CONFIG,
        file = DEFAULT_RELATIVE
    )]
    NoDefaultPath,
    /// The file as given cannot be made absolute (no current directory).
    #[error("{}: {source}", .path.display())]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no directory for session logs: set ${var} (or $XDG_STATE_HOME or $HOME)",
        var = crate::ENV_STATE_DIR
    )]
    NoStateDir,
}

/// The default file, beneath the user's configuration directory.
const DEFAULT_RELATIVE: &str = "stockade/stockade.toml";

impl Config {
    /// Parse and validate one file's text; `[policy]`'s lists are expanded
    /// against this process's environment.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        Self::parse_in(path, text, &files::process_env)
    }

    /// [`Config::parse`] with `env` as the environment the lists are
    /// expanded against (`HOME`, and the toolchain groups' own variables).
    pub fn parse_in(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Self, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config.validate(path)?;
        config.files = config.policy.expand(path, env)?;
        config.allowed_hosts = config.policy.hosts(path)?;
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// The file to load when none is named: `$STOCKADE_CONFIG`, else
    /// `$XDG_CONFIG_HOME/stockade/stockade.toml`, else
    /// `$HOME/.config/stockade/stockade.toml` (else, on Windows only,
    /// `%APPDATA%\stockade\stockade.toml`). Never the current directory: that
    /// is usually the workspace, which a confined command may write.
    pub fn default_path() -> Result<PathBuf, ConfigError> {
        default_path_from(|name| std::env::var_os(name))
    }

    /// Apply `$STOCKADE_MODE` over the configured default mode (by
    /// [`crate::MODE_PRECEDENCE`]).
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        self.apply_env_from(|name| std::env::var_os(name))
    }

    /// [`Self::apply_env`] with the variables as `var` gives them.
    pub fn apply_env_from(
        &mut self,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<(), ConfigError> {
        let layers = ModeLayers {
            config: Some(self.policy.mode),
            ..ModeLayers::default()
        };
        self.policy.mode = layers.resolve_reading_env(|| crate::env_mode_from(var))?.0;
        Ok(())
    }

    /// The deployment's file policy, expanded at load. Every call's policy
    /// carries it, whatever the mode.
    pub fn file_policy(&self) -> &FilePolicy {
        &self.files
    }

    /// `[policy] allowed_hosts`, validated at load (the default list when
    /// left out).
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    /// Whether the mounted executor confines (the escalation fields exist).
    pub fn confines(&self) -> bool {
        self.bash.executor == Implementation::Sandboxed
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            key: key.to_owned(),
            message,
        };
        // First, before any check that would read the value as a path: an
        // empty one joined to a directory names that directory (for
        // `workspace_root`, the config's own), and as a program or a list
        // entry it fails later with a message that names no key.
        if let Some(key) = self.empty_path_key() {
            let what = if key.ends_with(']') { "entry" } else { "key" };
            return Err(invalid(
                &key,
                format!("\"\": is empty: write a path, or leave the {what} out"),
            ));
        }
        if self.bash.executor == Implementation::Sandboxed && self.sandbox.is_none() {
            return Err(invalid(
                "bash.executor",
                "\"sandboxed\" needs a [sandbox] section (or set executor = \"local\" to run unconfined)".into(),
            ));
        }
        if let Some(s) = &self.sandbox {
            if let Err(e) = s.backend.parse::<stockade_local::BackendPreference>() {
                return Err(invalid("sandbox.backend", e.to_string()));
            }
            if let Some(rc) = &s.runner_command {
                let rc = stockade_local::RunnerCommand::new(
                    rc.iter().map(Into::into).collect(),
                    s.runner_failure_signatures.clone(),
                );
                if let Err(e) = rc {
                    return Err(invalid("sandbox", e.to_string()));
                }
            } else if !s.runner_failure_signatures.is_empty() {
                return Err(invalid(
                    "sandbox.runner_failure_signatures",
                    "only means something with sandbox.runner_command".into(),
                ));
            }
            if s.probe_timeout_ms == Some(0) {
                return Err(invalid(
                    "sandbox.probe_timeout_ms",
                    "must be greater than zero".into(),
                ));
            }
            // Absolute only: a relative socket path would name a different
            // socket depending on where the command runs.
            if let Some((index, p)) = s
                .allow_sockets
                .iter()
                .enumerate()
                .find(|(_, p)| !p.is_absolute())
            {
                return Err(invalid(
                    &format!("sandbox.allow_sockets[{index}]"),
                    format!("must be an absolute path, got {}", p.display()),
                ));
            }
        }
        if self.presets.is_some() {
            if self.approval.is_none() {
                return Err(invalid(
                    "presets",
                    "permission presets need an [approval] section".into(),
                ));
            }
            if !self.confines() {
                return Err(invalid(
                    "presets",
                    "permission presets need a confining executor (bash.executor = \"sandboxed\")"
                        .into(),
                ));
            }
        }
        if self.approval.as_ref().and_then(|a| a.timeout_ms) == Some(0) {
            return Err(invalid(
                "approval.timeout_ms",
                "must be greater than zero".into(),
            ));
        }
        if self.approval.as_ref().and_then(|a| a.max_questions) == Some(0) {
            return Err(invalid(
                "approval.max_questions",
                "must be greater than zero".into(),
            ));
        }
        if self.bash.timeout_ms == Some(0) {
            return Err(invalid(
                "bash.timeout_ms",
                "must be greater than zero".into(),
            ));
        }
        if let Err(e) = self.bash.shell_choice() {
            return Err(invalid("bash.shell", e.to_string()));
        }
        // What the model client would refuse, refused now: a deployment
        // that cannot reach its model fails at load, not at the first
        // prompt (whether or not its key is set yet).
        if let Err(stockade_model::ModelError::Config { field, reason }) = self.model.check() {
            return Err(invalid(&format!("model.{field}"), reason));
        }
        if let Some(p) = &self.presets {
            stockade_agent::presets::check_table(&p.preset)
                .map_err(|(i, e)| invalid(&format!("presets.preset[{i}]"), e.to_string()))?;
        }
        for (index, hook) in self.hooks.iter().enumerate() {
            hook.validate(index)
                .map_err(|e| invalid(&e.key, e.message))?;
        }
        if self.agent.max_steps == 0 {
            return Err(invalid(
                "agent.max_steps",
                "must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}

impl Config {
    /// The key of the first path-valued setting written as `""`, as the
    /// error names it (`policy.workspace_root`, `policy.read_only[2]`).
    fn empty_path_key(&self) -> Option<String> {
        let empty = |p: &PathBuf| p.as_os_str().is_empty();
        let first_in = |key: &str, list: &[PathBuf]| {
            list.iter().position(empty).map(|i| format!("{key}[{i}]"))
        };
        let one = |key: &str, p: &Option<PathBuf>| {
            p.as_ref().filter(|p| empty(p)).map(|_| key.to_owned())
        };
        let p = &self.policy;
        let sandbox = self.sandbox.as_ref().and_then(|s| {
            one("sandbox.bwrap_path", &s.bwrap_path)
                .or_else(|| one("sandbox.launcher_path", &s.launcher_path))
                .or_else(|| first_in("sandbox.allow_sockets", &s.allow_sockets))
        });
        sandbox
            .or_else(|| one("policy.workspace_root", &p.workspace_root))
            .or_else(|| first_in("policy.writable_roots", &p.writable_roots))
            .or_else(|| {
                first_in(
                    "policy.deny_read",
                    p.deny_read.as_deref().unwrap_or_default(),
                )
            })
            .or_else(|| first_in("policy.read_only", &p.read_only))
            .or_else(|| first_in("policy.protect", p.protect.as_deref().unwrap_or_default()))
    }
}

impl PolicySection {
    /// The allowed hosts, each validated as a host pattern; a bad one fails
    /// the load, naming the key, its index and the entry.
    fn hosts(&self, path: &Path) -> Result<Vec<String>, ConfigError> {
        match &self.allowed_hosts {
            None => Ok(crate::default_allowed_hosts()),
            Some(hosts) => net::parse_hosts(hosts).map_err(|(i, e)| ConfigError::Invalid {
                path: path.to_path_buf(),
                key: format!("policy.allowed_hosts[{i}]"),
                message: e.to_string(),
            }),
        }
    }

    /// The three lists as absolute paths. An entry that cannot be expanded
    /// fails the load, naming the key, its index and the entry. A left-out
    /// `deny_read` that cannot be expanded (no usable `$HOME`) fails too:
    /// never a silently missing list of secrets.
    fn expand(
        &self,
        path: &Path,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<FilePolicy, ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            key,
            message,
        };
        let list = |entries: &[PathBuf], kind: ListKind| {
            files::expand_all(entries, kind, env).map_err(|(i, e): (usize, EntryError)| {
                invalid(format!("policy.{}[{i}]", kind.key()), e.to_string())
            })
        };
        let writable_roots = list(&self.writable_roots, ListKind::WritableRoots)?;
        let deny_read = match &self.deny_read {
            Some(entries) => list(entries, ListKind::DenyRead)?,
            None => crate::default_deny_read(env).map_err(|(_, e)| {
                invalid(
                    format!("policy.{}", ListKind::DenyRead.key()),
                    format!(
                        "left out, so the default list applies, but its entry {e}; set HOME, or write the list out (deny_read = [] for none)"
                    ),
                )
            })?,
        };
        let mut read_only = list(&self.read_only, ListKind::ReadOnly)?;
        let default_protect;
        let protect = match &self.protect {
            Some(entries) => entries.as_slice(),
            None => {
                default_protect = DEFAULT_PROTECT
                    .iter()
                    .map(PathBuf::from)
                    .collect::<Vec<_>>();
                &default_protect
            }
        };
        for (i, entry) in protect.iter().enumerate() {
            let p = protect_entry(entry.as_os_str())
                .map_err(|m| invalid(format!("policy.protect[{i}]"), m))?;
            if !read_only.contains(&p) {
                read_only.push(p);
            }
        }
        Ok(FilePolicy {
            writable_roots,
            deny_read,
            read_only,
        })
    }
}

/// Files in a writable root that the host or an editor runs or obeys
/// without asking, read-only by default (`[policy] protect`): a relative
/// name is that name in every writable root, `~/name` that name in `$HOME`
/// (protected when the workspace or another root contains `$HOME`). Shell
/// start-up files, git's global configuration, direnv's `.envrc`, MCP
/// server lists, editor tasks and settings, and `.gitmodules` (which names
/// what `git submodule` fetches and checks out).
pub const DEFAULT_PROTECT: &[&str] = &[
    ".envrc",
    ".mcp.json",
    ".vscode",
    ".idea",
    ".gitmodules",
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.profile",
    "~/.zshrc",
    "~/.zprofile",
    "~/.zshenv",
    "~/.zlogin",
    "~/.gitconfig",
    "~/.config/git",
];

/// One `protect` entry, checked: a relative name without `..` (kept
/// relative: stockade-roots places it in every writable root at each run),
/// or `~/...` (kept so: `$HOME` is read at each run). An absolute path
/// belongs in `read_only`. The error is the message for the key.
pub fn protect_entry(entry: &OsStr) -> Result<PathBuf, String> {
    use std::path::Component;
    let path = Path::new(entry);
    let bad = |why: &str| Err(format!("{entry:?}: {why}"));
    if entry.is_empty() {
        return bad("is empty");
    }
    if path.is_absolute() {
        return bad(
            "must be a name inside each writable root or start with ~/ (an absolute path belongs in read_only)",
        );
    }
    let mut parts = path.components().peekable();
    if let Some(Component::Normal(first)) = parts.peek()
        && first.as_encoded_bytes().starts_with(b"~")
    {
        if *first != "~" {
            return bad("names another user's home; only ~/ is understood");
        }
        parts.next();
        if parts.peek().is_none() {
            return bad("names $HOME itself; name the files in it");
        }
    }
    for c in parts {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            _ => return bad("must not contain `..` (say the path it means)"),
        }
    }
    // `.` components and doubled slashes are dropped by the rebuild.
    let out: PathBuf = path
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    if out.as_os_str().is_empty() {
        return bad("names the writable root itself");
    }
    Ok(out)
}

/// [`Config::default_path`] over any environment. The XDG variable is
/// ignored when empty or relative, as the XDG spec says; `$STOCKADE_CONFIG`
/// is the user naming a file and is taken as given.
pub(crate) fn default_path_from(
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, ConfigError> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = set(ENV_CONFIG) {
        return Ok(p);
    }
    let absolute = |name: &str| set(name).filter(|p| p.is_absolute());
    if let Some(dir) = absolute("XDG_CONFIG_HOME") {
        return Ok(dir.join(DEFAULT_RELATIVE));
    }
    if let Some(home) = absolute("HOME") {
        return Ok(home.join(".config").join(DEFAULT_RELATIVE));
    }
    if cfg!(windows)
        && let Some(appdata) = absolute("APPDATA")
    {
        return Ok(appdata.join(DEFAULT_RELATIVE));
    }
    Err(ConfigError::NoDefaultPath)
}

#[cfg(test)]
mod tests;
