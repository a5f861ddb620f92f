//! The local provider this platform serves, for `exec` and `probe`.

use std::path::PathBuf;

use stockade_local::{BackendPreference, LocalProvider, LocalSettings};

pub(crate) fn provider(
    backend: BackendPreference,
    allow_sockets: Vec<PathBuf>,
) -> Result<LocalProvider, stockade_local::SettingsError> {
    provider_with(LocalSettings {
        backend,
        verdict_cache_dir: LocalSettings::default_verdict_cache_dir(),
        allow_sockets,
        ..Default::default()
    })
}

pub(crate) fn provider_with(
    settings: LocalSettings,
) -> Result<LocalProvider, stockade_local::SettingsError> {
    let provider = LocalProvider::new(settings)?;
    // The Windows restricted-token rung lives in its own crate; the provider
    // serves it only on Windows and fails closed without it.
    #[cfg(windows)]
    let provider = provider.with_rung(stockade_windows::rung(None));
    Ok(provider)
}
