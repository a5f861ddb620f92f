//! What flags and the environment set over `stockade.toml`, in plain types:
//! a front end converts its own arguments into one [`Overrides`], once, and
//! the composition reads nothing else of the invocation.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use stockade_core::{NetworkMode, SandboxMode};
use stockade_local::BackendPreference;

use crate::schema::{ENV_CONFIG, ENV_MODE};

/// Everything a flag or a variable can set. Left at its default, a field
/// changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `$STOCKADE_CONFIG`, as read once.
    pub env_config: Option<OsString>,
    /// `--mode`.
    pub mode: Option<SandboxMode>,
    /// `$STOCKADE_MODE`, as read once; parsed only where it would decide
    /// (see [`crate::ModeLayers::resolve_reading_env`]).
    pub env_mode: Option<OsString>,
    /// `--workspace`.
    pub workspace: Option<PathBuf>,
    /// `--cd`.
    pub cd: Option<PathBuf>,
    /// `--backend`.
    pub backend: Option<BackendPreference>,
    /// `--allow-socket`.
    pub allow_sockets: Vec<PathBuf>,
    /// `--ask`: after a denial, offer one wider retry.
    pub ask: bool,
    /// `--escalate-to`.
    pub escalate_to: Option<SandboxMode>,
    /// `--ask-timeout`: how long a question asked while the command runs
    /// (a host not on the list) waits for an answer before refusing.
    pub ask_timeout: Option<Duration>,
    /// `--writable`.
    pub writable: Vec<OsString>,
    /// `--deny-read`.
    pub deny_read: Vec<OsString>,
    /// `--no-default-deny-read`.
    pub no_default_deny_read: bool,
    /// `--read-only`.
    pub read_only: Vec<OsString>,
    /// `--protect`.
    pub protect: Vec<OsString>,
    /// `--no-default-protect`.
    pub no_default_protect: bool,
    /// `--network`.
    pub network: Option<NetworkMode>,
    /// `--allow-host`.
    pub allow_hosts: Vec<String>,
    /// `--allow-listen`.
    pub allow_listen: Vec<u16>,
    /// `--no-default-hosts`.
    pub no_default_hosts: bool,
}

impl Overrides {
    /// No flags, and the variables of this process read now, once.
    pub fn from_env() -> Self {
        Self {
            env_config: std::env::var_os(ENV_CONFIG),
            env_mode: std::env::var_os(ENV_MODE),
            ..Self::default()
        }
    }

    /// The variables as read, by name (what the loader and the mode table
    /// are given instead of the process environment).
    pub fn var(&self, name: &str) -> Option<OsString> {
        match name {
            ENV_CONFIG => self.env_config.clone(),
            ENV_MODE => self.env_mode.clone(),
            _ => None,
        }
    }
}
