//! The host facts the chain needs, behind a trait so chain selection, caching
//! and fail-closed behaviour are tested with injected verdicts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::{Backend, LocalSettings};

/// A runner file as found, with its stamp from the look that found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    /// Identity and content (`None`: it could not be looked at). What the
    /// verdict key carries and the selection later checks the file by.
    pub stamp: Option<String>,
}

pub trait Host: Send + Sync {
    /// Where this backend's runner is, or why it cannot be found.
    fn locate(&self, backend: Backend, settings: &LocalSettings) -> Result<PathBuf, String>;
    /// [`Host::locate`] with the found file's stamp. This default looks at
    /// the file again; a host whose search already read its metadata
    /// stamps from that read, so a run looks at each runner once to find
    /// and key it, and once more right before it runs it.
    fn locate_stamped(
        &self,
        backend: Backend,
        settings: &LocalSettings,
    ) -> Result<Located, String> {
        let path = self.locate(backend, settings)?;
        let stamp = crate::runner_stamp(&path);
        Ok(Located { path, stamp })
    }
    /// The running kernel's Landlock ABI, `None` without Landlock.
    fn landlock_abi(&self) -> Option<u8>;
    /// Whether the bwrap `runner` (as located) can run the command itself
    /// with the launcher's filters: it loads seccomp programs from
    /// descriptors (`--add-seccomp-fd`, bwrap 0.6) and reports a started
    /// command on its status descriptor (`--json-status-fd`). `false`
    /// keeps the launcher inside as its closer, which never confines less.
    fn bwrap_runs_direct(&self, _runner: &Located) -> bool {
        false
    }
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
    /// A runner's part is its path and the stamp it was found with (one
    /// without a stamp makes no key).
    fn verdict_key(&self, runners: &[(Backend, Option<&Located>)]) -> Option<Vec<u8>>;

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
    fn verdict_key(&self, _: &[(Backend, Option<&Located>)]) -> Option<Vec<u8>> {
        None
    }
}
