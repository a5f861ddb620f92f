//! The approval seam: one question (may this call run wider?), an ordered
//! chain of answerers where the first answer wins, and an audit pair in the
//! session log for every ask.

use std::sync::Arc;

use stockade_core::{ApprovalOutcome, ApprovalPolicy, NetworkMode, SandboxMode};
use stockade_session::{Event, Session, SessionError};
use stockade_shell::BoxFuture;

/// What the user is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub session: stockade_session::SessionId,
    pub tool: String,
    pub call_id: String,
    /// The model's justification, shown to the user.
    pub reason: String,
    /// The mode the call would run under if allowed.
    pub target: SandboxMode,
    /// The network the call would run under if allowed, when the request
    /// widens it; `None` leaves the network as the session has it.
    pub network: Option<NetworkMode>,
    /// What would run (the command, or the path for a file tool).
    pub subject: String,
    /// What the call would do, as [`crate::effect`] keys it: the identity
    /// a rejection is remembered by.
    pub effect: String,
    /// The narrower retry (see [`crate::narrower`]): this directory
    /// writable besides the call's roots, once, under `target` (the call's
    /// own mode). `None` for a wider mode or network.
    pub writable_root: Option<std::path::PathBuf>,
}

impl ApprovalRequest {
    /// What the call would run under, as the user is shown it:
    /// `"workspace-write"`, or `"read-only" with network "allow"`.
    pub fn under(&self) -> String {
        if let Some(dir) = &self.writable_root {
            return format!("\"{}\" with {} writable", self.target, dir.display());
        }
        match self.network {
            None => format!("\"{}\"", self.target),
            Some(network) => stockade_core::texts::network::Widening {
                mode: Some(self.target),
                network,
            }
            .to_string(),
        }
    }
}

/// One link of the chain. `None` passes the question on.
pub trait Answerer: Send + Sync {
    fn answer<'a>(&'a self, request: &'a ApprovalRequest)
    -> BoxFuture<'a, Option<ApprovalOutcome>>;
}

/// An answerer that always gives the same answer (policy answerers, tests).
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub ApprovalOutcome);

impl Answerer for Fixed {
    fn answer<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        Box::pin(async move { Some(self.0) })
    }
}

/// Rejects requests whose subject contains any of these texts and passes
/// the rest on: a deployment prepends it before the UI answerer.
#[derive(Debug, Clone)]
pub struct RejectMatching(pub Vec<String>);

impl Answerer for RejectMatching {
    fn answer<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        let hit = self.0.iter().any(|p| r.subject.contains(p.as_str()));
        Box::pin(async move { hit.then_some(ApprovalOutcome::Rejected) })
    }
}

struct Pending<'a> {
    session: &'a Session,
    request: &'a ApprovalRequest,
    decided: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.decided {
            // Best effort: a log that cannot be written already failed the
            // ask that opened it.
            let _ = self.session.append(Event::ApprovalDecided {
                call_id: self.request.call_id.clone(),
                tool: self.request.tool.clone(),
                outcome: ApprovalOutcome::Cancelled,
            });
        }
    }
}

#[derive(Clone)]
pub struct ApprovalService {
    answerers: Vec<Arc<dyn Answerer>>,
    default_policy: ApprovalPolicy,
}

impl std::fmt::Debug for ApprovalService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalService")
            .field("answerers", &self.answerers.len())
            .field("default_policy", &self.default_policy)
            .finish()
    }
}

impl ApprovalService {
    pub fn new(default_policy: ApprovalPolicy, answerers: Vec<Arc<dyn Answerer>>) -> Self {
        Self {
            answerers,
            default_policy,
        }
    }

    pub fn default_policy(&self) -> ApprovalPolicy {
        self.default_policy
    }

    /// The session's effective policy: its override ?? the configured default.
    pub fn policy(&self, session: &Session) -> ApprovalPolicy {
        session.approval_policy(self.default_policy)
    }

    /// The chain's answer under `policy`, recorded nowhere: the first
    /// answerer that answers decides, none is `unavailable`, and under
    /// `never` none is consulted. [`Self::ask`] records it in the session's
    /// log; a caller without a session (`stockade exec`'s one retry) has no
    /// log to keep it in.
    pub async fn answer(
        &self,
        policy: ApprovalPolicy,
        request: &ApprovalRequest,
    ) -> ApprovalOutcome {
        if policy == ApprovalPolicy::Ask {
            for a in &self.answerers {
                if let Some(o) = a.answer(request).await {
                    return o;
                }
            }
        }
        ApprovalOutcome::Unavailable
    }

    /// Ask, record the ask and the decision, and return the outcome. Under
    /// policy `never` no answerer is consulted.
    pub async fn ask(
        &self,
        session: &Session,
        request: &ApprovalRequest,
    ) -> Result<ApprovalOutcome, SessionError> {
        session.append(Event::ApprovalAsked {
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            reason: request.reason.clone(),
            target: request.target,
            network: request.network,
            subject: Some(request.subject.clone()),
            effect: Some(request.effect.clone()),
            writable_root: request.writable_root.clone(),
        })?;
        // If the turn is cancelled while the answerers are out, this future
        // is dropped mid-await: the guard still records the decision, so
        // every ask in the log has its decision.
        let mut pending = Pending {
            session,
            request,
            decided: false,
        };
        let outcome = self.answer(self.policy(session), request).await;
        pending.decided = true;
        session.append(Event::ApprovalDecided {
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            outcome,
        })?;
        Ok(outcome)
    }
}
