//! `[sandbox]` as the local provider's settings, written once for both
//! front ends (`exec` lays its flags over the result, `acp` serves it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stockade_local::{LocalProvider, LocalSettings, RunnerCommand, SettingsError};
use stockade_roots::RootPins;

use crate::schema::{ConfigError, SandboxSection};

/// The provider's settings `s` asks for: its paths relative to `dir` (the
/// config file's directory), verdicts cached in `verdict_cache_dir`. `path`
/// is the config file, for the error. Validation at load already refused
/// every value parsed here, so an error is a bug in that validation,
/// reported rather than hidden.
pub fn local_settings(
    s: &SandboxSection,
    path: &Path,
    dir: &Path,
    verdict_cache_dir: Option<PathBuf>,
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
        verdict_cache_dir,
        allow_sockets: s.allow_sockets.clone(),
    })
}

/// The local provider `settings` ask for, granting the roots `pins` holds
/// (shared with the file fence where there is one). On Windows it serves
/// the restricted-token rung, which lives in its own crate; without it the
/// provider fails closed.
pub fn provider(
    settings: LocalSettings,
    pins: Arc<RootPins>,
) -> Result<LocalProvider, SettingsError> {
    let provider = LocalProvider::new(settings)?.with_pins(pins);
    #[cfg(windows)]
    let provider = provider.with_rung(stockade_windows::rung(None));
    Ok(provider)
}
