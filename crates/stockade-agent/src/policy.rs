//! Per-call policy resolution: explicit escalation > session override >
//! configured default for the mode; the session header's cwd > configured
//! fallback root for the workspace root. The deployment's file policy rides
//! every resolved policy, whichever of those chose the mode.

use std::path::PathBuf;

use stockade_core::{ExecutionPolicy, FilePolicy, SandboxMode};
use stockade_session::Session;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyService {
    default_mode: SandboxMode,
    fallback_root: PathBuf,
    files: FilePolicy,
}

impl PolicyService {
    pub fn new(default_mode: SandboxMode, fallback_root: impl Into<PathBuf>) -> Self {
        Self {
            default_mode,
            fallback_root: fallback_root.into(),
            files: FilePolicy::default(),
        }
    }

    /// The same service stamping `files` on every policy it resolves.
    pub fn with_files(mut self, files: FilePolicy) -> Self {
        self.files = files;
        self
    }

    pub fn default_mode(&self) -> SandboxMode {
        self.default_mode
    }

    /// The deployment's file policy (extra roots, deny-read, read-only).
    pub fn files(&self) -> &FilePolicy {
        &self.files
    }

    /// The mode a call gets without an escalation.
    pub fn effective_mode(&self, session: Option<&Session>) -> SandboxMode {
        session.map_or(self.default_mode, |s| s.sandbox_mode(self.default_mode))
    }

    pub fn workspace_root(&self, session: Option<&Session>) -> PathBuf {
        session.map_or_else(|| self.fallback_root.clone(), |s| s.header().cwd.clone())
    }

    /// The complete policy stamped onto one call.
    pub fn resolve(
        &self,
        session: Option<&Session>,
        granted: Option<SandboxMode>,
    ) -> ExecutionPolicy {
        ExecutionPolicy::new(
            granted.unwrap_or_else(|| self.effective_mode(session)),
            self.workspace_root(session),
        )
        .with_files(self.files.clone())
    }
}
