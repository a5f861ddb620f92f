//! The local provider this platform serves, for `probe`.

use std::path::PathBuf;

use stockade_local::{BackendPreference, LocalProvider, LocalSettings};

pub(crate) fn provider(
    backend: BackendPreference,
    allow_sockets: Vec<PathBuf>,
) -> Result<LocalProvider, stockade_local::SettingsError> {
    stockade_config::provider(
        LocalSettings {
            backend,
            verdict_cache_dirs: LocalSettings::default_verdict_cache_dirs(),
            allow_sockets,
            ..Default::default()
        },
        None,
    )
}
