//! The composition root, above the agent: the `stockade.toml` schema and
//! its validation (its sections deserialize into the agent's own types:
//! hook entries, permission presets), loading it, [`Overrides`] (what flags
//! and the environment set, in plain types), the default tables (deny-read,
//! allowed hosts) and the one mode precedence table; and composition in two
//! levels: [`sandbox`] (an invocation's provider, policy service and
//! executor: `stockade exec`), built from [`policy_service`] and
//! [`provider`], which `stockade acp`'s [`agent`] composes through too.
//! Both front ends load through here, so which file is read, how
//! `$STOCKADE_MODE` ranks among the other sources of the mode, which policy
//! a run gets and where the session logs live are decided once.
#![forbid(unsafe_code)]

mod compose;
mod defaults;
mod load;
mod mode;
mod overrides;
mod sandbox;
mod schema;

pub use compose::{
    ComposeError, Composition, EditorHooks, Environment, Log, Sessions, agent, fallback_root,
};
pub use defaults::{
    DEFAULT_ALLOWED_HOSTS, DEFAULT_DENY_READ, default_allowed_hosts, default_deny_read,
};
pub use load::{
    ENV_STATE_DIR, LoadedConfig, load_config, load_config_with, load_file, session_dir,
};
pub use mode::{
    DEFAULT_MODE, MODE_PRECEDENCE, ModeLayers, ModeSource, env_mode, env_mode_from, session_mode,
};
pub use overrides::Overrides;
pub use sandbox::{
    ASK_TIMEOUT, InvocationError, Sandbox, ask_max_questions, ask_timeout, local_settings,
    policy_service, provider, sandbox,
};
pub use schema::{
    AgentSection, ApprovalSection, BashSection, Config, ConfigError, DEFAULT_PROTECT, ENV_CONFIG,
    ENV_MODE, FsSection, Implementation, PolicySection, PresetsSection, SandboxSection,
    protect_entry,
};
