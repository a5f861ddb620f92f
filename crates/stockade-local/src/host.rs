//! The host facts the chain needs, behind a trait so chain selection, caching
//! and fail-closed behaviour are tested with injected verdicts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::{Backend, LocalSettings};

pub trait Host: Send + Sync {
    /// Where this backend's runner is, or why it cannot be found.
    fn locate(&self, backend: Backend, settings: &LocalSettings) -> Result<PathBuf, String>;
    /// The running kernel's Landlock ABI, `None` without Landlock.
    fn landlock_abi(&self) -> Option<u8>;
    /// Whether the Landlock launcher's supervisor (metadata and protected
    /// paths) can run here; why not otherwise.
    fn landlock_supervision(&self) -> Result<(), String> {
        Err("the Landlock supervisor exists only on Linux".into())
    }
    /// Run the backend's real profile for a temporary workspace: a write
    /// outside must be denied and a write inside must succeed.
    fn probe(
        &self,
        backend: Backend,
        runner: &Path,
        fd_closer: Option<&Path>,
        timeout: Duration,
    ) -> Result<(), String>;
    /// `$TMPDIR`, canonical, when it is set and a directory.
    fn tmpdir(&self) -> Option<PathBuf>;
    /// Bytes that change whenever a cached `auto` verdict could be wrong, or
    /// `None` when no trustworthy key can be built (then nothing is cached).
    fn verdict_key(&self, runners: &[(Backend, Option<&Path>)]) -> Option<Vec<u8>>;

    // The Seatbelt rung's facts. Their defaults read the real host, so a
    // host that never serves Seatbelt (Linux) need not restate them; the
    // injected test hosts override them.

    /// `$TMPDIR` exactly as set (non-empty), before any resolution.
    fn tmpdir_as_set(&self) -> Option<PathBuf> {
        std::env::var_os("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from)
    }
    /// `path` with every symlink resolved, `None` when it cannot be.
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }
    /// Whether `path` is a regular file (following symlinks).
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
}

/// The host of the platform this was built for.
pub fn default_host() -> Arc<dyn Host> {
    #[cfg(target_os = "linux")]
    {
        Arc::new(crate::linux::LinuxHost)
    }
    #[cfg(target_os = "macos")]
    {
        Arc::new(crate::seatbelt::MacHost)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Arc::new(NoLinuxHost)
    }
}

/// Off Linux the Linux chain is never consulted; every fact is "absent".
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
struct NoLinuxHost;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
impl Host for NoLinuxHost {
    fn locate(&self, backend: Backend, _: &LocalSettings) -> Result<PathBuf, String> {
        Err(format!("{backend} exists only on Linux"))
    }
    fn landlock_abi(&self) -> Option<u8> {
        None
    }
    fn probe(
        &self,
        backend: Backend,
        _: &Path,
        _: Option<&Path>,
        _: Duration,
    ) -> Result<(), String> {
        Err(format!("{backend} exists only on Linux"))
    }
    fn tmpdir(&self) -> Option<PathBuf> {
        None
    }
    fn verdict_key(&self, _: &[(Backend, Option<&Path>)]) -> Option<Vec<u8>> {
        None
    }
}
