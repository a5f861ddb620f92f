//! The policy-context message: before each model step, one complete, sourced
//! statement of the current sandbox (files and network) and approval policy. It is reconciled
//! against what the session already shows; history is never rewritten.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use stockade_core::{ApprovalPolicy, NetworkMode, SandboxMode};
use stockade_session::{Event, Record, Role, Session, SessionError};

use crate::approval::ApprovalService;
use crate::policy::{NetworkSource, PolicyService};

/// Paths as the message lists them.
fn list(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// The `source` of every policy-context message.
pub const SOURCE: &str = "sandbox:policy";

#[derive(Clone)]
pub struct PolicyContext {
    policy: Arc<PolicyService>,
    approval: Option<Arc<ApprovalService>>,
    confines: bool,
    files_fenced: bool,
}

impl PolicyContext {
    pub fn new(
        policy: Arc<PolicyService>,
        approval: Option<Arc<ApprovalService>>,
        confines: bool,
    ) -> Self {
        Self {
            policy,
            approval,
            confines,
            files_fenced: false,
        }
    }

    /// The in-process file tools obey the same policy (a fenced file system
    /// is mounted), so the message may say so.
    pub fn with_fenced_files(mut self, fenced: bool) -> Self {
        self.files_fenced = fenced;
        self
    }

    /// The complete message for the session's current state.
    pub fn render(&self, session: &Session) -> String {
        let mut m = String::from(
            "[sandbox:policy] Current policy for this session. It supersedes every earlier policy message.\n",
        );
        if !self.confines && !self.files_fenced {
            m.push_str("Sandbox: none. Commands are not sandboxed in this deployment; no escalation exists.\n");
            return m;
        }
        if !self.confines {
            m.push_str("Commands are not sandboxed in this deployment; file edits are.\n");
        }
        let mode = self.policy.effective_mode(Some(session));
        let source = match session.sandbox_override() {
            Some(_) => "set for this session",
            None => "configured default",
        };
        let _ = writeln!(m, "Sandbox mode: {mode} ({source}).");
        let root = self.policy.workspace_root(Some(session));
        let files = self.policy.files();
        let who = match (self.confines, self.files_fenced) {
            (true, true) => "Commands and file edits",
            (true, false) => "Commands",
            (false, _) => "File edits",
        };
        let _ = match mode {
            SandboxMode::ReadOnly => writeln!(
                m,
                "  {who} may write only /dev/null; every other write is refused."
            ),
            SandboxMode::WorkspaceWrite => {
                let mut roots = vec![root];
                roots.extend(files.writable_roots.iter().cloned());
                writeln!(
                    m,
                    "  {who} may write only under {}, /tmp and $TMPDIR (and /dev/null); other writes are refused.",
                    list(&roots)
                )
            }
            SandboxMode::DangerFullAccess => writeln!(
                m,
                "  {who} are not confined: any write this user account may make is allowed."
            ),
        };
        // Only the confining modes enforce the lists; under
        // danger-full-access nothing of them is claimed. "Wherever the
        // sandbox enforces it": a backend with a gap says so in its own
        // report, and this message must not promise more than the weakest.
        if mode != SandboxMode::DangerFullAccess {
            if !files.deny_read.is_empty() {
                let _ = writeln!(
                    m,
                    "  Never read (refused wherever the sandbox enforces it): {}.",
                    list(&files.deny_read)
                );
            }
            // Said under read-only too: one approved retry under
            // workspace-write still keeps these read-only.
            if !files.read_only.is_empty() {
                let _ = writeln!(
                    m,
                    "  Read-only even inside writable roots: {}.",
                    list(&files.read_only)
                );
            }
        }
        // Only commands reach the network; where they are not confined,
        // nothing about it is claimed.
        if self.confines {
            let (network, source) = self.policy.effective_network_with_source(Some(session));
            let source = match source {
                NetworkSource::Unconfined => "danger-full-access",
                NetworkSource::Session => "set for this session",
                NetworkSource::Default => "configured default",
            };
            let hosts = self.policy.allowed_hosts();
            let _ = match network {
                NetworkMode::Deny => writeln!(
                    m,
                    "Network: deny ({source}): no network except loopback inside the sandbox."
                ),
                NetworkMode::AllowListed if hosts.is_empty() => writeln!(
                    m,
                    "Network: allow-listed ({source}): only allowed hosts, through a proxy, and none are allowed: no network except loopback inside the sandbox."
                ),
                NetworkMode::AllowListed => writeln!(
                    m,
                    "Network: allow-listed ({source}): only these hosts, through a proxy: {}.",
                    hosts.join(", ")
                ),
                NetworkMode::Allow => writeln!(
                    m,
                    "Network: allow ({source}): any host this machine can reach."
                ),
            };
        }
        let Some(approval) = &self.approval else {
            m.push_str("Approval: none configured. A request for a wider retry fails; a denied command stays denied.\n");
            return m;
        };
        let policy = approval.policy(session);
        let source = match session.approval_override() {
            Some(_) => "set for this session",
            None => "configured default",
        };
        let _ = writeln!(m, "Approval policy: {policy} ({source}).");
        let _ = match policy {
            ApprovalPolicy::Ask => writeln!(
                m,
                "  After a denial you may retry the same command once with sandbox_permissions (for a file denial) or network (for a network denial) and a justification; the user approves or rejects that one retry."
            ),
            ApprovalPolicy::Never => writeln!(
                m,
                "  No wider retry can be approved in this session; a denied command stays denied."
            ),
        };
        m
    }

    /// Append one superseding snapshot when what the session last showed
    /// differs from the current state; otherwise add nothing.
    pub fn reconcile(&self, session: &Session) -> Result<Option<Record>, SessionError> {
        let desired = self.render(session);
        let shown = session.with_records(|records| {
            records.iter().rev().find_map(|r| match &r.event {
                Event::Message {
                    source: Some(s),
                    content,
                    ..
                } if s == SOURCE => Some(content.clone()),
                _ => None,
            })
        });
        if shown.as_deref() == Some(desired.as_str()) {
            return Ok(None);
        }
        session
            .append(Event::Message {
                role: Role::Context,
                content: desired,
                source: Some(SOURCE.to_owned()),
            })
            .map(Some)
    }
}
