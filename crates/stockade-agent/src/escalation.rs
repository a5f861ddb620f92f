//! The one escalation gate every confining tool (bash, write, edit) uses:
//! strictly wider or nothing, a justification, then the approval ask, all
//! before anything runs. Bash may widen the network too (the in-process
//! file tools open no connections), alone or with the file mode.

use std::sync::Arc;

use stockade_core::texts::network::{self as network_texts, Widening};
use stockade_core::{ApprovalOutcome, NetworkMode, SandboxMode, texts};

use crate::approval::{ApprovalRequest, ApprovalService};
use crate::tool::{ToolContext, ToolOutput};

/// The escalation fields of a tool's arguments.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct EscalationArgs {
    pub sandbox_permissions: Option<EscalationTarget>,
    pub justification: Option<String>,
}

/// The closed escalation vocabulary the schema offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EscalationTarget {
    WorkspaceWrite,
    DangerFullAccess,
}

impl From<EscalationTarget> for SandboxMode {
    fn from(t: EscalationTarget) -> Self {
        match t {
            EscalationTarget::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            EscalationTarget::DangerFullAccess => SandboxMode::DangerFullAccess,
        }
    }
}

/// The closed network escalation vocabulary the bash schema offers: every
/// network mode but the narrowest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkTarget {
    AllowListed,
    Allow,
}

impl From<NetworkTarget> for NetworkMode {
    fn from(t: NetworkTarget) -> Self {
        match t {
            NetworkTarget::AllowListed => NetworkMode::AllowListed,
            NetworkTarget::Allow => NetworkMode::Allow,
        }
    }
}

/// What the user allowed for one call; `None` fields run as the session
/// does. Never stored: the next call resolves afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grant {
    pub mode: Option<SandboxMode>,
    pub network: Option<NetworkMode>,
}

impl Grant {
    /// Whether anything was granted.
    pub fn any(&self) -> bool {
        self.mode.is_some() || self.network.is_some()
    }
}

/// A tool's argument schema: `props`, plus the escalation fields exactly
/// when `escalation_offered` (the mounted executor or file system confines).
pub fn object_schema(
    props: serde_json::Value,
    required: &[&str],
    escalation_offered: bool,
) -> serde_json::Value {
    schema_with(props, required, escalation_offered, false)
}

/// [`object_schema`] for a tool that runs commands: the network field
/// besides the file mode's, exactly when escalation is offered.
pub fn command_schema(
    props: serde_json::Value,
    required: &[&str],
    escalation_offered: bool,
) -> serde_json::Value {
    schema_with(props, required, escalation_offered, true)
}

fn schema_with(
    mut props: serde_json::Value,
    required: &[&str],
    escalation_offered: bool,
    network: bool,
) -> serde_json::Value {
    if escalation_offered
        && let (Some(p), serde_json::Value::Object(extra)) =
            (props.as_object_mut(), schema_properties(network))
    {
        p.extend(extra);
    }
    serde_json::json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false
    })
}

/// The schema properties a confining tool adds, and only a confining one.
fn schema_properties(network: bool) -> serde_json::Value {
    let mut props = serde_json::json!({
        "sandbox_permissions": {
            "type": "string",
            "enum": ["workspace-write", "danger-full-access"],
            "description": "Only to retry a command the sandbox denied: run this one call under a wider mode, after the user approves. Pick the narrowest mode that suffices."
        },
        "justification": {
            "type": "string",
            "description": "With sandbox_permissions: one sentence, shown to the user, saying why this call needs the wider mode."
        }
    });
    if network {
        props["network"] = serde_json::json!({
            "type": "string",
            "enum": ["allow-listed", "allow"],
            "description": "Only to retry a command whose network connection the sandbox denied: run this one call with a wider network, after the user approves. `allow-listed` reaches only the allowed hosts; `allow` reaches any host. Pick the narrowest that suffices."
        });
        props["justification"]["description"] = serde_json::json!(
            "With sandbox_permissions or network: one sentence, shown to the user, saying why this call needs the wider access."
        );
    }
    props
}

/// The text of one non-grant outcome, for the file mode alone (core's
/// texts) or a request naming the network (their network twins).
struct Refusals {
    mode: SandboxMode,
    network: Option<Widening>,
}

impl Refusals {
    fn missing_justification(&self) -> String {
        match self.network {
            None => texts::MISSING_JUSTIFICATION.to_owned(),
            Some(_) => network_texts::MISSING_JUSTIFICATION.to_owned(),
        }
    }

    fn rejected(&self) -> String {
        let first = match self.network {
            None => texts::rejected(self.mode),
            Some(w) => network_texts::rejected(w),
        };
        format!("{first}\n{}", texts::REJECTED_NO_REASK)
    }

    fn cancelled(&self) -> String {
        self.network
            .map_or_else(|| texts::cancelled(self.mode), network_texts::cancelled)
    }

    fn unavailable(&self) -> String {
        self.network
            .map_or_else(|| texts::unavailable(self.mode), network_texts::unavailable)
    }

    fn no_approval_service(&self) -> String {
        self.network.map_or_else(
            || texts::no_approval_service(self.mode),
            network_texts::no_approval_service,
        )
    }

    fn no_session(&self) -> String {
        self.network
            .map_or_else(|| texts::no_session(self.mode), network_texts::no_session)
    }
}

/// The shared gate.
#[derive(Clone, Default)]
pub struct EscalationGate {
    approval: Option<Arc<ApprovalService>>,
}

impl EscalationGate {
    pub fn new(approval: Option<Arc<ApprovalService>>) -> Self {
        Self { approval }
    }

    /// `Ok(None)`: no escalation asked, run under `effective`. `Ok(Some(m))`:
    /// the user allowed this one call under `m`. `Err(output)`: nothing may
    /// run; the output says why.
    pub async fn decide(
        &self,
        ctx: &ToolContext,
        tool: &str,
        subject: &str,
        effect: &str,
        args: &EscalationArgs,
        effective: SandboxMode,
    ) -> Result<Option<SandboxMode>, ToolOutput> {
        // The network is never widened here, so its effective value only
        // shows in texts this path does not produce.
        let grant = self
            .decide_with_network(
                ctx,
                tool,
                subject,
                effect,
                args,
                None,
                effective,
                NetworkMode::Allow,
            )
            .await?;
        Ok(grant.mode)
    }

    /// [`Self::decide`] for a request that may widen the file mode, the
    /// network, or both: each named target must be strictly wider than the
    /// call's effective value, and one ask covers both.
    #[allow(clippy::too_many_arguments)] // one gate, every input of the question
    pub async fn decide_with_network(
        &self,
        ctx: &ToolContext,
        tool: &str,
        subject: &str,
        effect: &str,
        args: &EscalationArgs,
        network: Option<NetworkTarget>,
        effective: SandboxMode,
        effective_network: NetworkMode,
    ) -> Result<Grant, ToolOutput> {
        let mode_target = args.sandbox_permissions.map(SandboxMode::from);
        let network_target = network.map(NetworkMode::from);
        if mode_target.is_none() && network_target.is_none() {
            return Ok(Grant::default());
        }
        if let Some(target) = mode_target
            && target <= effective
        {
            return Err(ToolOutput::error(texts::not_wider(target, effective)));
        }
        if let Some(target) = network_target
            && target <= effective_network
        {
            return Err(ToolOutput::error(network_texts::not_wider(
                target,
                effective_network,
            )));
        }
        // Nothing confines a danger-full-access run, its network included:
        // the user is asked for that mode alone, which already means
        // `allow`, rather than shown a network the run would not keep.
        let network_target =
            network_target.filter(|_| mode_target != Some(SandboxMode::DangerFullAccess));
        let target = mode_target.unwrap_or(effective);
        let refusals = Refusals {
            mode: target,
            network: network_target.map(|network| Widening {
                mode: mode_target,
                network,
            }),
        };
        let reason = match args.justification.as_deref().map(str::trim) {
            Some(r) if !r.is_empty() => r.to_owned(),
            _ => return Err(ToolOutput::error(refusals.missing_justification())),
        };
        let Some(approval) = &self.approval else {
            return Err(ToolOutput::error(refusals.no_approval_service()));
        };
        let Some(session) = &ctx.session else {
            return Err(ToolOutput::error(refusals.no_session()));
        };
        // Asked and rejected before, for this very effect (however spelled,
        // through whichever tool) at this width or wider: no one is asked
        // again, the answer stands.
        if session.rejected_before(tool, subject, effect, target, network_target) {
            return Err(ToolOutput::error(refusals.rejected()));
        }
        let request = ApprovalRequest {
            session: session.id().clone(),
            tool: tool.to_owned(),
            call_id: ctx.call_id.clone(),
            reason,
            target,
            network: network_target,
            subject: subject.to_owned(),
            effect: effect.to_owned(),
            writable_root: None,
        };
        // An ask that cannot be recorded is not an ask: fail closed.
        let outcome = approval
            .ask(session, &request)
            .await
            .map_err(|e| ToolOutput::error(format!("{}: {e}", refusals.cancelled())))?;
        match outcome {
            ApprovalOutcome::AllowedOnce => Ok(Grant {
                mode: mode_target,
                network: network_target,
            }),
            ApprovalOutcome::Rejected => Err(ToolOutput::error(refusals.rejected())),
            ApprovalOutcome::Cancelled => Err(ToolOutput::error(refusals.cancelled())),
            ApprovalOutcome::Unavailable => Err(ToolOutput::error(refusals.unavailable())),
        }
    }
}

impl EscalationGate {
    /// After a run of `effective` refused writes in `dir` only (see
    /// [`crate::narrower_root`]): whether the user allows one retry of the
    /// call with `dir` writable too. Asked like an escalation (approval
    /// service, session, policy `ask`, recorded), never twice for an effect
    /// the user rejected at this width or wider; anything but an allow is
    /// no, and the call's result stays the first run's.
    pub async fn decide_narrower(
        &self,
        ctx: &ToolContext,
        tool: &str,
        subject: &str,
        effect: &str,
        effective: SandboxMode,
        dir: &std::path::Path,
    ) -> bool {
        let (Some(approval), Some(session)) = (&self.approval, &ctx.session) else {
            return false;
        };
        if session.rejected_before(tool, subject, effect, effective, None) {
            return false;
        }
        // The user refused writing there while this call's command waited
        // (a path question): asking again as a retry would ask twice.
        let refused = session
            .with_records(|r| stockade_session::knobs::paths_refused_during(r, &ctx.call_id));
        if refused.iter().any(|p| p.starts_with(dir)) {
            return false;
        }
        let request = ApprovalRequest {
            session: session.id().clone(),
            tool: tool.to_owned(),
            call_id: ctx.call_id.clone(),
            reason: format!(
                "the command was refused writing in {}, outside the writable roots; retry it once with that directory writable too",
                dir.display()
            ),
            target: effective,
            network: None,
            subject: subject.to_owned(),
            effect: effect.to_owned(),
            writable_root: Some(dir.to_path_buf()),
        };
        matches!(
            approval.ask(session, &request).await,
            Ok(ApprovalOutcome::AllowedOnce)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::network_texts::*;
    use super::*;

    #[test]
    fn every_non_grant_outcome_naming_the_network_has_its_own_text() {
        let w = Widening {
            mode: None,
            network: NetworkMode::Allow,
        };
        let both = Widening {
            mode: Some(SandboxMode::WorkspaceWrite),
            network: NetworkMode::Allow,
        };
        let m = SandboxMode::WorkspaceWrite;
        let texts = [
            not_wider(NetworkMode::Allow, NetworkMode::Allow),
            MISSING_JUSTIFICATION.to_owned(),
            rejected(w),
            cancelled(w),
            unavailable(w),
            no_approval_service(w),
            no_session(w),
            NOT_OFFERED.to_owned(),
            rejected(both),
            // and none reads like the file mode's own
            texts::not_wider(m, m),
            texts::MISSING_JUSTIFICATION.to_owned(),
            texts::rejected(m),
            texts::cancelled(m),
            texts::unavailable(m),
            texts::no_approval_service(m),
            texts::no_session(m),
            texts::ESCALATION_NOT_OFFERED.to_owned(),
        ];
        for (i, a) in texts.iter().enumerate() {
            for b in &texts[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(w.to_string(), "network \"allow\"");
        assert_eq!(
            both.to_string(),
            "\"workspace-write\" with network \"allow\""
        );
    }

    #[test]
    fn the_hint_names_only_wider_networks() {
        assert!(escalation_hint(NetworkMode::Allow).is_none());
        let deny = escalation_hint(NetworkMode::Deny).unwrap_or_default();
        assert!(deny.contains("`allow-listed`") && deny.contains("`allow`"));
        let listed = escalation_hint(NetworkMode::AllowListed).unwrap_or_default();
        assert!(!listed.contains("`allow-listed`") && listed.contains("`allow`"));
    }
}
