//! The approval chain's last link: the user, asked in the editor through
//! `session/request_permission`.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, SessionUpdate, ToolCallContent, ToolCallId, ToolCallUpdate,
    ToolCallUpdateFields,
};
use stockade_agent::{Answerer, ApprovalRequest};
use stockade_core::ApprovalOutcome;
use stockade_shell::BoxFuture;

use crate::live::Live;
use crate::log;
use crate::updates::{in_progress, send};

/// The option ids offered. Only these two: a grant is never persisted, so
/// there is no "always" to offer.
pub const ALLOW_ONCE: &str = "allow_once";
pub const REJECT_ONCE: &str = "reject_once";

pub(crate) struct AcpAnswerer {
    pub live: Arc<Live>,
}

impl AcpAnswerer {
    async fn ask(&self, r: &ApprovalRequest) -> Option<ApprovalOutcome> {
        // Asked only from inside a running prompt, whose connection is the
        // one to ask. No running prompt: nobody to ask, the chain decides.
        // A `task` child's question is asked in the session the user sees,
        // under the task call that runs the child.
        let route = self.live.route(&r.session)?;
        let (cx, id) = (route.cx, route.session);
        let delegated = route.task_call.is_some();
        let call_id = route.task_call.unwrap_or_else(|| r.call_id.clone());
        let title = format!("{} under {}: {}", r.tool, r.under(), r.subject);
        let fields = ToolCallUpdateFields::new()
            .title(if delegated {
                format!("task: {title}")
            } else {
                title
            })
            .content(vec![ToolCallContent::Content(Content::new(
                ContentBlock::from(format!(
                    "The agent asks to run this one call under {}: {}",
                    r.under(),
                    r.reason
                )),
            ))]);
        let request = RequestPermissionRequest::new(
            id.clone(),
            ToolCallUpdate::new(ToolCallId::new(call_id.as_str()), fields),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        // Dropping this future (the prompt was cancelled) drops the request,
        // which tells the client to withdraw it.
        let outcome = match cx.send_request(request).block_task().await {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == ALLOW_ONCE => {
                    ApprovalOutcome::AllowedOnce
                }
                RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == REJECT_ONCE => {
                    ApprovalOutcome::Rejected
                }
                RequestPermissionOutcome::Selected(s) => {
                    // Not an answer to this question: nothing may run, and
                    // "rejected" would put words in the user's mouth.
                    log(format_args!(
                        "session {id}: unknown permission option {:?}; treated as cancelled",
                        s.option_id.0
                    ));
                    ApprovalOutcome::Cancelled
                }
                RequestPermissionOutcome::Cancelled => ApprovalOutcome::Cancelled,
                // A later protocol revision's outcome: fail closed.
                _ => ApprovalOutcome::Cancelled,
            },
            Err(e) => {
                log(format_args!(
                    "session {id}: session/request_permission failed: {e}; treated as cancelled"
                ));
                ApprovalOutcome::Cancelled
            }
        };
        // A task call is running already; only a call of the session's own
        // waited, pending, for the answer.
        if outcome == ApprovalOutcome::AllowedOnce && !delegated {
            send(
                &cx,
                &id,
                SessionUpdate::ToolCallUpdate(in_progress(&r.call_id)),
            );
        }
        Some(outcome)
    }
}

impl Answerer for AcpAnswerer {
    fn answer<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        Box::pin(self.ask(r))
    }
}
