//! Per-call policy resolution: explicit escalation > session override >
//! configured default, for the file mode and for the network alike; the
//! session header's cwd > configured fallback root for the workspace root.
//! The deployment's file policy and allowed hosts ride every resolved
//! policy, whichever of those chose the modes, and so does the calling
//! session's id, as the scope of what a provider allocates per session.

use std::path::PathBuf;

use stockade_core::{ExecutionPolicy, FilePolicy, NetworkMode, NetworkPolicy, SandboxMode};
use stockade_session::Session;

/// The hosts a coding agent needs by default: the public package registries
/// and code hosts. Replaceable by the deployment (`allowed_hosts`); a service composed
/// without a list lets these through.
pub const DEFAULT_ALLOWED_HOSTS: &[&str] = &[
    // Rust
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    // JavaScript
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    // Python
    "pypi.org",
    "files.pythonhosted.org",
    // Go
    "proxy.golang.org",
    "sum.golang.org",
    // JVM
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    "services.gradle.org",
    // Code hosts
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
];

/// [`DEFAULT_ALLOWED_HOSTS`] as a list.
pub fn default_allowed_hosts() -> Vec<String> {
    DEFAULT_ALLOWED_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .collect()
}

/// Which mode a call gets without an escalation, from the session's own
/// switch (if any) and the configured default. The composition root passes
/// its one precedence table (`stockade_config::session_mode`); a service
/// built without one lets the session's switch win, as DESIGN §5 states.
pub type ModeRule = fn(session: Option<SandboxMode>, configured: SandboxMode) -> SandboxMode;

fn session_over_configured(session: Option<SandboxMode>, configured: SandboxMode) -> SandboxMode {
    session.unwrap_or(configured)
}

#[derive(Debug, Clone)]
pub struct PolicyService {
    default_mode: SandboxMode,
    mode_rule: ModeRule,
    fallback_root: PathBuf,
    files: FilePolicy,
    /// `[policy] network`; `None` follows the file mode
    /// ([`NetworkMode::default_for`]).
    default_network: Option<NetworkMode>,
    allowed_hosts: Vec<String>,
    /// Loopback ports a confined server may listen on.
    listen: Vec<u16>,
}

/// Why a call runs under the network mode it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkSource {
    /// The file mode is `danger-full-access`: nothing is confined, so
    /// neither is the network, whatever the knob says.
    Unconfined,
    /// The session's `sandbox/network` override.
    Session,
    /// `[policy] network`, or the file mode's default when that is not set.
    Default,
}

impl PolicyService {
    pub fn new(default_mode: SandboxMode, fallback_root: impl Into<PathBuf>) -> Self {
        Self {
            default_mode,
            mode_rule: session_over_configured,
            fallback_root: fallback_root.into(),
            files: FilePolicy::default(),
            default_network: None,
            allowed_hosts: default_allowed_hosts(),
            listen: Vec::new(),
        }
    }

    /// The same service letting a confined server listen on these loopback
    /// ports (`stockade exec --allow-listen`).
    pub fn with_listen(mut self, ports: Vec<u16>) -> Self {
        self.listen = ports;
        self
    }

    /// The same service ranking the session's switch against the
    /// configured default by `rule`.
    pub fn with_mode_rule(mut self, rule: ModeRule) -> Self {
        self.mode_rule = rule;
        self
    }

    /// The same service stamping `files` on every policy it resolves.
    pub fn with_files(mut self, files: FilePolicy) -> Self {
        self.files = files;
        self
    }

    /// The same service with `network` as the configured default network
    /// mode (`None`: the default that goes with the file mode).
    pub fn with_default_network(mut self, network: Option<NetworkMode>) -> Self {
        self.default_network = network;
        self
    }

    /// The same service letting `hosts` through under `allow-listed`. The
    /// patterns are the caller's to validate (`net::parse_hosts`), once,
    /// where they are read.
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    pub fn default_mode(&self) -> SandboxMode {
        self.default_mode
    }

    /// `[policy] network` as configured (`None`: it follows the file mode).
    pub fn configured_network(&self) -> Option<NetworkMode> {
        self.default_network
    }

    /// The hosts `allow-listed` lets through.
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    /// The deployment's file policy (extra roots, deny-read, read-only).
    pub fn files(&self) -> &FilePolicy {
        &self.files
    }

    /// The mode a call gets without an escalation.
    pub fn effective_mode(&self, session: Option<&Session>) -> SandboxMode {
        // `$STOCKADE_MODE` is already in the configured default (applied at
        // load), so it is not read again here.
        (self.mode_rule)(
            session.and_then(Session::sandbox_override),
            self.default_mode,
        )
    }

    /// The network default under file mode `mode`: the configured one,
    /// else the one that goes with the mode. `danger-full-access` is always
    /// `allow`.
    pub fn default_network(&self, mode: SandboxMode) -> NetworkMode {
        match mode {
            SandboxMode::DangerFullAccess => NetworkMode::Allow,
            _ => self
                .default_network
                .unwrap_or(NetworkMode::default_for(mode)),
        }
    }

    /// The network mode a call gets without an escalation, and why.
    pub fn effective_network_with_source(
        &self,
        session: Option<&Session>,
    ) -> (NetworkMode, NetworkSource) {
        let mode = self.effective_mode(session);
        if mode == SandboxMode::DangerFullAccess {
            return (NetworkMode::Allow, NetworkSource::Unconfined);
        }
        match session.and_then(Session::network_override) {
            Some(n) => (n, NetworkSource::Session),
            None => (self.default_network(mode), NetworkSource::Default),
        }
    }

    /// The network mode a call gets without an escalation.
    pub fn effective_network(&self, session: Option<&Session>) -> NetworkMode {
        self.effective_network_with_source(session).0
    }

    pub fn workspace_root(&self, session: Option<&Session>) -> PathBuf {
        session.map_or_else(|| self.fallback_root.clone(), |s| s.header().cwd.clone())
    }

    /// The complete policy stamped onto one call whose network is not
    /// widened.
    pub fn resolve(
        &self,
        session: Option<&Session>,
        granted: Option<SandboxMode>,
    ) -> ExecutionPolicy {
        self.resolve_with_network(session, granted, None)
    }

    /// The complete policy stamped onto one call: `granted` and
    /// `granted_network` are what the user allowed for this call only.
    ///
    /// A granted file mode does not move the network: the user approved a
    /// file mode, not a wider network, so without `granted_network` the call
    /// keeps the session's. Only `danger-full-access` (granted or not)
    /// means `allow`, because nothing confines that run at all.
    pub fn resolve_with_network(
        &self,
        session: Option<&Session>,
        granted: Option<SandboxMode>,
        granted_network: Option<NetworkMode>,
    ) -> ExecutionPolicy {
        let mode = granted.unwrap_or_else(|| self.effective_mode(session));
        let network = match mode {
            SandboxMode::DangerFullAccess => NetworkMode::Allow,
            _ => granted_network.unwrap_or_else(|| self.effective_network(session)),
        };
        ExecutionPolicy::new(mode, self.workspace_root(session))
            .with_files(self.files.clone())
            .with_network(
                NetworkPolicy::new(network, self.allowed_hosts.clone())
                    .with_listen(self.listen.clone()),
            )
            // The calling session scopes what a provider allocates per
            // session (the Windows private temp), so sessions sharing a
            // workspace never share it; a delegated child is a session of
            // its own. Session-less callers keep the provider's scope.
            .with_session(session.map(|s| s.id().as_str().to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_session::SessionStore;

    #[test]
    fn a_sessions_calls_are_scoped_to_it_and_session_less_calls_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path().join("sessions"));
        let (a, b) = (
            store.create(dir.path()).unwrap(),
            store.create(dir.path()).unwrap(),
        );
        let child = store.create_child(&a, dir.path()).unwrap();
        let service = PolicyService::new(SandboxMode::WorkspaceWrite, "/fallback");
        let scope = |s: Option<&Session>| service.resolve(s, None).session;
        assert_eq!(scope(None), None);
        assert_eq!(scope(Some(&a)).as_deref(), Some(a.id().as_str()));
        assert_eq!(scope(Some(&b)).as_deref(), Some(b.id().as_str()));
        assert_ne!(scope(Some(&a)), scope(Some(&b)));
        assert_eq!(scope(Some(&child)).as_deref(), Some(child.id().as_str()));
        // The scope rides a granted retry and its sandbox policy too, and
        // grants nothing: two sessions' calls differ only in it.
        let granted = service.resolve_with_network(
            Some(&a),
            Some(SandboxMode::WorkspaceWrite),
            Some(NetworkMode::Allow),
        );
        assert_eq!(granted.session.as_deref(), Some(a.id().as_str()));
        assert_eq!(
            granted.sandbox_policy().unwrap().session.as_deref(),
            Some(a.id().as_str())
        );
        assert!(
            service
                .resolve(Some(&a), None)
                .same_permissions(&service.resolve(Some(&b), None))
        );
    }
}
