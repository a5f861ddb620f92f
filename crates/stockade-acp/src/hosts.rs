//! A host not on the session's list, asked about while the command that
//! wants it waits: a `session/request_permission` on the running bash call
//! (`allow_once`, `allow_always`, `reject_once`, `reject_always`), the call
//! showing that it waits meanwhile. Mounted per session on the local
//! provider (both Linux backends: every connection passes its proxy) when
//! the composition has an approval service; without one, an unlisted host
//! is refused at once, as before.
//!
//! Every question and answer is a session-log event with the host
//! (`network/host-asked`, `network/host-answered`). `allow_always` adds
//! the host to the session's list and `reject_always` keeps it refused,
//! for the session only (never the config file): both are folded from the
//! log when the session is loaded, and forgotten when the user changes the
//! session's mode.
//!
//! A `task` child's commands are asked too, in the session the user sees,
//! on the task call that runs the child (mounted as the child starts, see
//! `Live::ask_for_children`); the questions and answers are logged in the
//! child's log, as its escalations are.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, ToolCallContent, ToolCallId, ToolCallUpdate, ToolCallUpdateFields,
};
use stockade_agent::ApprovalService;
use stockade_core::ApprovalPolicy;
use stockade_local::{HostAnswer, HostApproval, HostApprover, HostGrants, HostQuestion, HostReply};
use stockade_session::{Event, HostAnswer as Logged, Session};

use crate::compose::Composition;
use crate::live::{Asker, Asking, Live, record};
use crate::log;

/// The option ids a host question offers.
pub const ALLOW_ALWAYS: &str = "allow_always";
pub const REJECT_ALWAYS: &str = "reject_always";

/// One session's runtime approval of hosts, mounted on the provider.
pub(crate) struct SessionHosts {
    grants: Arc<HostGrants>,
}

impl SessionHosts {
    /// Mount it for `session` (its earlier session-wide answers restored
    /// from its log), or `None` when nothing can ask: no approval service,
    /// or no local provider. Must be called within the server's runtime.
    pub(crate) fn mount(comp: &Composition, live: &Arc<Live>, session: &Session) -> Option<Self> {
        let asking = Asking::of(comp)?;
        let grants = Arc::new(HostGrants::new());
        let (allowed, refused) = session.host_answers();
        // Names the proxy itself logged: they parse. One that does not is
        // asked about again, which is the safe side.
        for h in &allowed {
            let _ = grants.allow(h);
        }
        for h in &refused {
            let _ = grants.refuse(h);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        mount_on(&asking, live, session, grants.clone(), &runtime);
        Some(Self { grants })
    }

    /// Its session-wide answers, which its `task` children share.
    pub(crate) fn grants(&self) -> Arc<HostGrants> {
        self.grants.clone()
    }

    /// The user changed something: every host is asked about again.
    pub(crate) fn forget(&self) {
        self.grants.forget();
    }
}

/// Mount questions for `child`, a running `task` child, sharing `grants`,
/// the session-wide answers of the session the user sees. A child can
/// never run wider than its parent, and its questions are shown in the
/// parent's session: an `allow_always` there is the user's answer for the
/// session they see (the parent, and every child it delegates to), and one
/// the parent gave already covers the child without asking.
pub(crate) fn mount_child(
    asking: &Asking,
    live: &Arc<Live>,
    child: &Session,
    grants: Arc<HostGrants>,
    runtime: &tokio::runtime::Handle,
) {
    mount_on(asking, live, child, grants, runtime);
}

fn mount_on(
    asking: &Asking,
    live: &Arc<Live>,
    session: &Session,
    grants: Arc<HostGrants>,
    runtime: &tokio::runtime::Handle,
) {
    let asker = Arc::new(Asker::new(asking, live, session, runtime));
    let mut approval = HostApproval::new(asker, grants).with_timeout(asking.timeout);
    if let Some(n) = asking.max_questions {
        approval = approval.with_max_questions(n);
    }
    asking
        .local
        .set_host_approval(Some(session.id().as_str()), Some(approval));
}

/// The session `id` is over: no more questions for it.
pub(crate) fn unmount(comp: &Composition, id: &str) {
    if let Some(local) = &comp.local {
        local.set_host_approval(Some(id), None);
    }
}

impl HostApprover for Asker {
    fn ask(&self, question: HostQuestion, reply: HostReply) {
        let (live, session, approval) = (
            self.live.clone(),
            self.session.clone(),
            self.approval.clone(),
        );
        self.runtime
            .spawn(ask(live, session, approval, question, reply));
    }
}

/// Asks the client; a reply dropped unanswered refuses this command only.
async fn ask(
    live: Arc<Live>,
    session: Session,
    approval: Arc<ApprovalService>,
    q: HostQuestion,
    mut reply: HostReply,
) {
    // Under `never` no one is asked: refused as without approval.
    if approval.policy(&session) == ApprovalPolicy::Never {
        return;
    }
    // No prompt running (a background job's late connection): nobody to
    // ask.
    let Some(at) = live.running_command(&session) else {
        return;
    };
    let what = format!("network access to {}:{}", q.host, q.port);
    record(
        &session,
        Event::HostAsked {
            host: q.host.clone(),
            port: q.port,
            call_id: Some(at.logged_call.clone()),
        },
    );
    let call = ToolCallId::new(at.call_id.as_str());
    at.show_waiting(&what);
    // A child's question on the task call says so, as its escalations do.
    let task = if at.origin.is_some() { "task: " } else { "" };
    let request = RequestPermissionRequest::new(
        at.session.clone(),
        ToolCallUpdate::new(
            call.clone(),
            ToolCallUpdateFields::new()
                .title(format!("{task}Allow {what}?"))
                .content(vec![ToolCallContent::Content(Content::new(
                    ContentBlock::from(format!(
                        "The running command wants {what}, which is not on the session's host list; its connection waits for your answer."
                    )),
                ))]),
        ),
        vec![
            PermissionOption::new(
                crate::ALLOW_ONCE,
                "Allow for this command",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(
                ALLOW_ALWAYS,
                "Allow for this session",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(
                crate::REJECT_ONCE,
                "Refuse",
                PermissionOptionKind::RejectOnce,
            ),
            PermissionOption::new(
                REJECT_ALWAYS,
                "Refuse for this session",
                PermissionOptionKind::RejectAlways,
            ),
        ],
    );
    // The proxy stops waiting (timeout, the command ended): the request is
    // dropped, which tells the client to withdraw it.
    let response = tokio::select! {
        r = at.cx.send_request(request).block_task() => Some(r),
        () = reply.withdrawn() => None,
    };
    let (answer, logged) = match response {
        Some(Ok(r)) => match r.outcome {
            RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                crate::ALLOW_ONCE => (Some(HostAnswer::AllowOnce), Logged::AllowedOnce),
                ALLOW_ALWAYS => (Some(HostAnswer::AllowForSession), Logged::AllowedForSession),
                REJECT_ALWAYS => (Some(HostAnswer::Refuse), Logged::RefusedForSession),
                crate::REJECT_ONCE => (None, Logged::RefusedOnce),
                other => {
                    log(format_args!(
                        "session {}: unknown permission option {other:?}; {} refused",
                        session.id(),
                        q.host
                    ));
                    (None, Logged::Unanswered)
                }
            },
            // Cancelled, or a later protocol revision's outcome.
            _ => (None, Logged::Unanswered),
        },
        Some(Err(e)) => {
            log(format_args!(
                "session {}: session/request_permission failed: {e}; {} refused",
                session.id(),
                q.host
            ));
            (None, Logged::Unanswered)
        }
        None => (None, Logged::Unanswered),
    };
    let answered = Event::HostAnswered {
        host: q.host.clone(),
        answer: logged,
    };
    // A child's session-wide answer is the parent's grant (see
    // `mount_child`): logged there too, so loading the parent folds it.
    if let Some(top) = &at.origin
        && matches!(
            logged,
            Logged::AllowedForSession | Logged::RefusedForSession
        )
    {
        record(top, answered.clone());
    }
    record(&session, answered);
    at.show_running();
    match answer {
        Some(a) => reply.answer(a),
        None => drop(reply),
    }
}
