//! The Windows rung of the local provider: `restricted-token`.
//!
//! Sole candidate, no probe, always `partial`. `confine` allocates this
//! provider's private temp directory and SIDs for the workspace (once per
//! provider lifetime and workspace), makes the standing workspace ACE exact,
//! grants the temp ACE, and wraps the caller's argv in the runner. Dropping
//! the rung revokes every temp ACE and removes every temp directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use stockade_core::{
    Confined, ConfiningMode, Enforcement, RunnerFailureRule, SandboxPolicy, SandboxUnavailable,
};
use stockade_local::{BackendReport, Platform, PlatformRung};

use crate::api::Win32;
use crate::error::{Error, Step};
use crate::grants::{self, Allocation, ReleaseError};
use crate::runner::{self, RunnerArgs};

/// The backend name, as in `Confined::backend` and `stockade probe`.
pub const BACKEND: &str = "restricted-token";
/// What a denied write looks like on stderr: .NET/PowerShell
/// (`Access to the path '...' is denied.`) and Win32/cmd (`Access is denied.`).
pub const DENIAL_SIGNATURES: [&str; 2] = ["Access to the path", "Access is denied"];
/// Why enforcement is `partial`, stated wherever the rung reports itself.
pub const PARTIAL_REASON: &str = "enforcement is partial: an object whose ACL grants Everyone write access stays writable (Everyone must remain a restricting SID), and so does the target of a hard link from the workspace (an NTFS ACL belongs to the file, not to the link)";

/// The rung over a [`Win32`] implementation.
pub struct WindowsRung<W: Win32> {
    sys: W,
    runner: Result<PathBuf, String>,
    /// One allocation per canonical workspace, for this rung's lifetime.
    allocations: Mutex<Vec<Allocation>>,
}

impl<W: Win32> WindowsRung<W> {
    /// A rung whose runner is at `runner`, or whose runner could not be
    /// located (`Err(why)`): it then fails closed on every call.
    pub fn new(sys: W, runner: Result<PathBuf, String>) -> Self {
        Self {
            sys,
            runner,
            allocations: Mutex::new(Vec::new()),
        }
    }

    pub fn runner(&self) -> Result<&Path, &str> {
        self.runner.as_deref().map_err(String::as_str)
    }

    fn allocations(&self) -> MutexGuard<'_, Vec<Allocation>> {
        // A panic while holding the lock cannot leave a half-made entry: an
        // allocation is pushed only once complete.
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The live allocations (for diagnostics and tests).
    pub fn live(&self) -> Vec<Allocation> {
        self.allocations().clone()
    }

    /// Revoke every temp ACE and remove every temp directory now. Idempotent;
    /// also done on drop. The standing workspace ACEs stay.
    pub fn release(&self) -> Result<(), ReleaseError> {
        let drained: Vec<Allocation> = self.allocations().drain(..).collect();
        let mut failures = Vec::new();
        for a in &drained {
            if let Err(e) = grants::release(&self.sys, a) {
                failures.extend(e.failures);
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ReleaseError { failures })
        }
    }

    fn runner_path(&self) -> Result<&Path, Error> {
        let path = self
            .runner
            .as_deref()
            .map_err(|why| Error::RunnerUnlocated { why: why.clone() })?;
        if !self.sys.is_file(path) {
            return Err(Error::RunnerMissing {
                path: path.to_path_buf(),
            });
        }
        Ok(path)
    }

    fn args_for(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<(PathBuf, RunnerArgs), Error> {
        if argv.is_empty() {
            return Err(Error::Usage {
                detail: "no command to confine".into(),
            });
        }
        let runner = self.runner_path()?.to_path_buf();
        let args = match policy.mode {
            // Read-only carries no capability: nothing is allocated, no ACL is
            // read or written, and any standing workspace ACE stays inert.
            ConfiningMode::ReadOnly => RunnerArgs::read_only(argv.to_vec()),
            ConfiningMode::WorkspaceWrite => {
                let workspace = grants::canonical(
                    &self.sys,
                    policy.workspace_root(),
                    Step::CanonicalizeWorkspace,
                )?;
                let mut live = self.allocations();
                let alloc = match live.iter().find(|a| a.workspace == workspace) {
                    Some(a) => a.clone(),
                    None => {
                        let a = grants::allocate(&self.sys, &workspace)?;
                        live.push(a.clone());
                        a
                    }
                };
                RunnerArgs::from_allocation(&alloc, argv.to_vec())
            }
        };
        Ok((runner, args))
    }
}

impl<W: Win32> Drop for WindowsRung<W> {
    fn drop(&mut self) {
        // Nothing can be reported from a drop; whatever is left is inert (a
        // random temp SID no later token carries). Callers that want the
        // failures call `release` first.
        let _ = self.release();
    }
}

/// The runner-failure rule: the reserved exit code AND a `stockade-winrun: `
/// line. A child may exit with any code, so the code alone is no evidence.
pub fn failure_rules() -> Vec<RunnerFailureRule> {
    vec![runner::failure_rule()]
}

impl<W: Win32> PlatformRung for WindowsRung<W> {
    fn platform(&self) -> Platform {
        Platform::Windows
    }

    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let (runner, args) = self
            .args_for(argv, policy)
            .map_err(|e| SandboxUnavailable::single(BACKEND, e.to_string()))?;
        let mut out = vec![runner.into_os_string()];
        out.extend(args.to_args());
        let writable_roots = [&args.workspace, &args.temp]
            .into_iter()
            .flatten()
            .map(|(p, _)| p.clone())
            .collect();
        Ok(Confined {
            argv: out,
            backend: BACKEND,
            enforcement: Enforcement::Partial,
            denial_signatures: DENIAL_SIGNATURES.iter().map(|s| (*s).to_owned()).collect(),
            runner_failure_rules: failure_rules(),
            writable_roots,
            pass_fds: vec![],
            status: None,
            gaps: [
                stockade_core::files::unenforced(&policy.files, BACKEND),
                stockade_core::net::unenforced(&policy.network, BACKEND),
            ]
            .concat(),
            runner_env_remove: vec![],
            deny_read: vec![],
            read_only: vec![],
            network_log: None,
        })
    }

    fn report(&self) -> BackendReport {
        let (runner, usable, detail) = match self.runner_path() {
            Ok(p) => (
                Some(p.to_path_buf()),
                true,
                format!("sole candidate, not probed; {PARTIAL_REASON}"),
            ),
            Err(e) => (self.runner.as_ref().ok().cloned(), false, e.to_string()),
        };
        BackendReport {
            backend: BACKEND.into(),
            runner,
            usable,
            detail,
            enforcement: usable.then_some(Enforcement::Partial),
            landlock_abi: None,
            protections: Vec::new(),
            gaps: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
