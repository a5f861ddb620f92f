//! Where the configuration and the session logs are found: the file a
//! front end loads (with `$STOCKADE_MODE` applied) and the directory the
//! session logs live in. Both decide later runs' confinement, so both
//! front ends find them by the same rule.

use std::path::{Path, PathBuf};

use crate::overrides::Overrides;
use crate::schema::{Config, ConfigError, ENV_CONFIG, ENV_MODE, default_path_from};

/// The directory under which session logs are kept (in `sessions/`).
pub const ENV_STATE_DIR: &str = "STOCKADE_STATE_DIR";

/// A config as loaded, with where it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    /// The file, absolute.
    pub path: PathBuf,
    /// The file's directory, absolute: relative paths in it are relative to
    /// this.
    pub dir: PathBuf,
}

/// Load the config (`path`, else [`Config::default_path`]: `$STOCKADE_CONFIG`,
/// else `$XDG_CONFIG_HOME/stockade/stockade.toml`, ...) and apply
/// `$STOCKADE_MODE`. Errors name the file as it was given.
pub fn load_config(path: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    load_config_with(&Overrides {
        config: path.map(Path::to_path_buf),
        ..Overrides::from_env()
    })
}

/// [`load_config`] with the flag and the variables as `overrides` holds
/// them (`stockade acp`): `overrides.config`, else the default path
/// (`$STOCKADE_CONFIG` as read, else the XDG rule on the rest of the
/// environment), with `$STOCKADE_MODE` as read applied.
pub fn load_config_with(overrides: &Overrides) -> Result<LoadedConfig, ConfigError> {
    let given = match &overrides.config {
        Some(p) => p.clone(),
        None => default_path(overrides)?,
    };
    load_file(&given, |name| overrides.var(name))
}

/// [`Config::default_path`], with `$STOCKADE_CONFIG` as `overrides` read it.
pub(crate) fn default_path(overrides: &Overrides) -> Result<PathBuf, ConfigError> {
    default_path_from(|name| match name {
        ENV_CONFIG | ENV_MODE => overrides.var(name),
        _ => std::env::var_os(name),
    })
}

/// The config at `given`, with `$STOCKADE_MODE` as `var` gives it.
pub fn load_file(
    given: &Path,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<LoadedConfig, ConfigError> {
    let given = given.to_path_buf();
    let mut config = Config::load(&given)?;
    config.apply_env_from(var)?;
    let path = std::path::absolute(&given).map_err(|source| ConfigError::Path {
        path: given.clone(),
        source,
    })?;
    let dir = path
        .parent()
        .map_or_else(|| path.clone(), Path::to_path_buf);
    Ok(LoadedConfig { config, path, dir })
}

/// The session logs' directory: `$STOCKADE_STATE_DIR/sessions`, else
/// `SessionStore::default_dir()` (`$XDG_STATE_HOME/stockade/sessions`, ...).
pub fn session_dir() -> Result<PathBuf, ConfigError> {
    match std::env::var_os(ENV_STATE_DIR).filter(|v| !v.is_empty()) {
        // Made absolute once, against the directory stockade started in: a
        // relative one would name a different place whenever the current
        // directory changes, and be judged against the roots wrongly.
        Some(d) => Ok(std::path::absolute(PathBuf::from(d))
            .map_err(|_| ConfigError::NoStateDir)?
            .join("sessions")),
        None => stockade_session::SessionStore::default_dir().ok_or(ConfigError::NoStateDir),
    }
}
