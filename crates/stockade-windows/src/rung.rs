//! The Windows rung of the local provider: `restricted-token`.
//!
//! Sole candidate, no probe, always `partial`. `confine` allocates a private
//! temp directory and its SID per (workspace, session) — the session being
//! the policy's scope, [`SandboxPolicy::session`] — on the first
//! workspace-write call of that pair, makes the standing workspace ACE
//! exact, grants the temp ACE, and wraps the caller's argv in the runner.
//! Session-less calls (`stockade exec`) share one pair per workspace for the
//! rung's lifetime. Ending a session revokes and removes only that
//! session's pairs; dropping the rung revokes and removes every pair left.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use stockade_core::{
    Confined, ConfiningMode, Enforcement, RunnerFailureRule, SandboxPolicy, SandboxUnavailable,
    SessionEndError,
};
use stockade_local::{BackendReport, Platform, PlatformRung, Rung};

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

/// One live allocation and the scope it belongs to.
#[derive(Debug, Clone)]
struct Scoped {
    /// The session whose calls use it; `None` for session-less calls.
    session: Option<String>,
    alloc: Allocation,
}

/// The rung over a [`Win32`] implementation.
pub struct WindowsRung<W: Win32> {
    sys: W,
    runner: Result<PathBuf, String>,
    /// One allocation per (canonical workspace, session), until that session
    /// ends or the rung is dropped.
    allocations: Mutex<Vec<Scoped>>,
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

    fn allocations(&self) -> MutexGuard<'_, Vec<Scoped>> {
        // A panic while holding the lock cannot leave a half-made entry: an
        // allocation is pushed only once complete.
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The live allocations of every scope (for diagnostics and tests).
    pub fn live(&self) -> Vec<Allocation> {
        self.allocations().iter().map(|s| s.alloc.clone()).collect()
    }

    /// The live allocations of one scope: `session`'s, or the session-less
    /// ones for `None`.
    pub fn live_for(&self, session: Option<&str>) -> Vec<Allocation> {
        self.allocations()
            .iter()
            .filter(|s| s.session.as_deref() == session)
            .map(|s| s.alloc.clone())
            .collect()
    }

    /// Revoke every temp ACE and remove every temp directory now. Idempotent;
    /// also done on drop. The standing workspace ACEs stay.
    pub fn release(&self) -> Result<(), ReleaseError> {
        let drained: Vec<Scoped> = self.allocations().drain(..).collect();
        self.release_all(&drained)
    }

    /// End `session`: revoke its temp ACEs and remove its temp directories
    /// (one per workspace it wrote in), leaving every other session's and
    /// the session-less ones alone. Idempotent, and a session never seen is
    /// a no-op. The entries are forgotten even when cleanup fails: what is
    /// left is inert (no later token carries that random SID), and a later
    /// call scoped to the same session draws a fresh pair instead of
    /// reusing a half-released one.
    pub fn end(&self, session: &str) -> Result<(), ReleaseError> {
        let ended: Vec<Scoped> = {
            let mut live = self.allocations();
            let (ended, kept) = live
                .drain(..)
                .partition(|s| s.session.as_deref() == Some(session));
            *live = kept;
            ended
        };
        // Released outside the lock: other sessions keep confining while
        // this one's directories are removed.
        self.release_all(&ended)
    }

    fn release_all(&self, entries: &[Scoped]) -> Result<(), ReleaseError> {
        let mut failures = Vec::new();
        for s in entries {
            if let Err(e) = grants::release(&self.sys, &s.alloc) {
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
                let session = policy.session.as_deref();
                let mut live = self.allocations();
                let found = live
                    .iter()
                    .find(|s| s.alloc.workspace == workspace && s.session.as_deref() == session);
                let alloc = match found {
                    Some(s) => s.alloc.clone(),
                    None => {
                        let alloc = grants::allocate(&self.sys, &workspace)?;
                        live.push(Scoped {
                            session: policy.session.clone(),
                            alloc: alloc.clone(),
                        });
                        alloc
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

impl<W: Win32> Rung for WindowsRung<W> {
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
        Ok(Confined::new(out, BACKEND, Enforcement::Partial)
            .with_denial_signatures(DENIAL_SIGNATURES.iter().map(|s| (*s).to_owned()).collect())
            .with_runner_failure_rules(failure_rules())
            .with_writable_roots(writable_roots)
            .with_gaps(
                [
                    stockade_core::files::unenforced(&policy.files, BACKEND),
                    stockade_core::net::unenforced(&policy.network, BACKEND),
                ]
                .concat(),
            ))
    }
}

impl<W: Win32> PlatformRung for WindowsRung<W> {
    fn platform(&self) -> Platform {
        Platform::Windows
    }

    fn end_session(&self, session: &str) -> Result<(), SessionEndError> {
        self.end(session).map_err(|e| SessionEndError {
            session: session.to_owned(),
            backend: BACKEND.into(),
            detail: e.to_string(),
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
