//! The one escalation gate every confining tool (bash, write, edit) uses:
//! strictly wider or nothing, a justification, then the approval ask, all
//! before anything runs.

use std::sync::Arc;

use stockade_core::{ApprovalOutcome, SandboxMode, texts};

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

/// A tool's argument schema: `props`, plus the escalation fields exactly
/// when `escalation_offered` (the mounted executor or file system confines).
pub fn object_schema(
    mut props: serde_json::Value,
    required: &[&str],
    escalation_offered: bool,
) -> serde_json::Value {
    if escalation_offered
        && let (Some(p), serde_json::Value::Object(extra)) =
            (props.as_object_mut(), schema_properties())
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
fn schema_properties() -> serde_json::Value {
    serde_json::json!({
        "sandbox_permissions": {
            "type": "string",
            "enum": ["workspace-write", "danger-full-access"],
            "description": "Only to retry a command the sandbox denied: run this one call under a wider mode, after the user approves. Pick the narrowest mode that suffices."
        },
        "justification": {
            "type": "string",
            "description": "With sandbox_permissions: one sentence, shown to the user, saying why this call needs the wider mode."
        }
    })
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
        args: &EscalationArgs,
        effective: SandboxMode,
    ) -> Result<Option<SandboxMode>, ToolOutput> {
        let Some(target) = args.sandbox_permissions.map(SandboxMode::from) else {
            return Ok(None);
        };
        if target <= effective {
            return Err(ToolOutput::error(texts::not_wider(target, effective)));
        }
        let reason = match args.justification.as_deref().map(str::trim) {
            Some(r) if !r.is_empty() => r.to_owned(),
            _ => return Err(ToolOutput::error(texts::MISSING_JUSTIFICATION)),
        };
        let Some(approval) = &self.approval else {
            return Err(ToolOutput::error(texts::no_approval_service(target)));
        };
        let Some(session) = &ctx.session else {
            return Err(ToolOutput::error(texts::no_session(target)));
        };
        let request = ApprovalRequest {
            session: session.id().clone(),
            tool: tool.to_owned(),
            call_id: ctx.call_id.clone(),
            reason,
            target,
            subject: subject.to_owned(),
        };
        // An ask that cannot be recorded is not an ask: fail closed.
        let outcome = approval
            .ask(session, &request)
            .await
            .map_err(|e| ToolOutput::error(format!("{}: {e}", texts::cancelled(target))))?;
        match outcome {
            ApprovalOutcome::AllowedOnce => Ok(Some(target)),
            ApprovalOutcome::Rejected => Err(ToolOutput::error(format!(
                "{}\n{}",
                texts::rejected(target),
                texts::REJECTED_NO_REASK
            ))),
            ApprovalOutcome::Cancelled => Err(ToolOutput::error(texts::cancelled(target))),
            ApprovalOutcome::Unavailable => Err(ToolOutput::error(texts::unavailable(target))),
        }
    }
}
