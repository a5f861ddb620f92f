use std::path::{Path, PathBuf};

use crate::files::FilePolicy;
use crate::mode::{ConfiningMode, SandboxMode};
use crate::net::NetworkPolicy;

/// The complete per-call policy, resolved before an executor runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionPolicy {
    pub mode: SandboxMode,
    pub workspace_root: PathBuf,
    /// The deployment's file policy beyond the mode (extra roots, secrets,
    /// read-only paths). It rides every call, whatever the mode.
    #[serde(default)]
    pub files: FilePolicy,
    /// What the call may reach over the network.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// The session the call belongs to (its id), `None` for a session-less
    /// caller (`stockade exec`). A scope, not a permission: it widens or
    /// narrows nothing, it only tells a provider whose per-session
    /// allocations (the Windows private temp directory and its SID) the
    /// call uses, so two sessions on one workspace never share them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// The subset a provider sees. It cannot express `danger-full-access`, so no
/// provider is ever asked to "confine" an unconfined run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxPolicy {
    pub mode: ConfiningMode,
    pub workspace_root: PathBuf,
    #[serde(default)]
    pub files: FilePolicy,
    /// What the call may reach over the network.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// The calling session's scope (see [`ExecutionPolicy::session`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Who is asked, while the command waits, about what the run's
    /// confinement would refuse and can hold (see [`crate::run_approval`]);
    /// set from one request (the SDK's callback), it takes the place of
    /// any approval the provider keeps for the session. A callback, not a
    /// setting: never serialized.
    #[serde(skip)]
    pub approval: Option<crate::RunApproval>,
}

impl ExecutionPolicy {
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace_root: workspace_root.into(),
            files: FilePolicy::default(),
            network: NetworkPolicy::default(),
            session: None,
        }
    }

    /// The same policy with `files` as its file policy.
    pub fn with_files(mut self, files: FilePolicy) -> Self {
        self.files = files;
        self
    }

    /// The same policy with `network` as its network policy.
    pub fn with_network(mut self, network: NetworkPolicy) -> Self {
        self.network = network;
        self
    }

    /// The same policy scoped to `session` (see [`ExecutionPolicy::session`]).
    pub fn with_session(mut self, session: Option<String>) -> Self {
        self.session = session;
        self
    }

    /// Whether `other` governs a call exactly as this policy does, whatever
    /// session either is scoped to: what may be written, read and reached
    /// is the same.
    pub fn same_permissions(&self, other: &Self) -> bool {
        // Compared with the scope cleared rather than field by field, so a
        // knob added later is compared without anyone remembering to.
        let unscoped = |p: &Self| Self {
            session: None,
            ..p.clone()
        };
        unscoped(self) == unscoped(other)
    }

    /// What to hand a provider, or `None` when the call runs unconfined.
    pub fn sandbox_policy(&self) -> Option<SandboxPolicy> {
        self.mode.confining().map(|mode| SandboxPolicy {
            mode,
            workspace_root: self.workspace_root.clone(),
            files: self.files.clone(),
            network: self.network.clone(),
            session: self.session.clone(),
            approval: None,
        })
    }
}

impl SandboxPolicy {
    pub fn new(mode: ConfiningMode, workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace_root: workspace_root.into(),
            files: FilePolicy::default(),
            network: NetworkPolicy::default(),
            session: None,
            approval: None,
        }
    }

    /// The same policy with `files` as its file policy.
    pub fn with_files(mut self, files: FilePolicy) -> Self {
        self.files = files;
        self
    }

    /// The same policy with `network` as its network policy.
    pub fn with_network(mut self, network: NetworkPolicy) -> Self {
        self.network = network;
        self
    }

    /// The same policy scoped to `session` (see [`ExecutionPolicy::session`]).
    pub fn with_session(mut self, session: Option<String>) -> Self {
        self.session = session;
        self
    }

    /// The extra writable roots this policy grants (none under read-only).
    pub fn extra_roots(&self) -> &[PathBuf] {
        match self.mode {
            ConfiningMode::WorkspaceWrite => &self.files.writable_roots,
            ConfiningMode::ReadOnly => &[],
        }
    }

    pub fn workspace_root(&self) -> &Path {
        &self.workspace_root
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn danger_full_access_has_no_sandbox_policy() {
        let p = ExecutionPolicy::new(SandboxMode::DangerFullAccess, "/w");
        assert_eq!(p.sandbox_policy(), None);
        let p = ExecutionPolicy::new(SandboxMode::ReadOnly, "/w");
        assert_eq!(
            p.sandbox_policy(),
            Some(SandboxPolicy::new(ConfiningMode::ReadOnly, "/w"))
        );
    }

    #[test]
    fn the_session_scope_rides_to_the_provider_and_is_no_permission() {
        let p = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, "/w")
            .with_session(Some("abc".into()));
        assert_eq!(
            p.sandbox_policy(),
            Some(
                SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/w")
                    .with_session(Some("abc".into()))
            )
        );
        let unscoped = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, "/w");
        assert_ne!(p, unscoped);
        assert!(p.same_permissions(&unscoped));
        assert!(!p.same_permissions(&ExecutionPolicy::new(SandboxMode::ReadOnly, "/w")));
        // Session-less policies serialize as before; a scope round-trips.
        let text = serde_json::to_string(&unscoped).unwrap();
        assert!(!text.contains("session"), "{text}");
        let back: ExecutionPolicy =
            serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn policy_rejects_unknown_modes_when_deserialized() {
        let err =
            serde_json::from_str::<ExecutionPolicy>(r#"{"mode":"full","workspace_root":"/w"}"#)
                .unwrap_err();
        assert!(
            err.to_string().contains("invalid sandbox mode \"full\""),
            "{err}"
        );
    }
}
