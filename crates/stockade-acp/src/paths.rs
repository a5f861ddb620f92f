//! A place outside every writable root, asked about while the command that
//! wants it waits (supervised Landlock under workspace-write: only its
//! supervisor can hold a refused file operation): a
//! `session/request_permission` on the running bash call with
//! `allow_path`, `allow_directory` and `reject_once`, the call showing that
//! it waits meanwhile. Mounted per session on the local provider when the
//! composition has an approval service; the provider itself mounts it only
//! where it can ask, and it and the launcher refuse without asking what
//! may never be offered (stockade's control state, names the user's tools
//! execute later, devices and kernel interfaces).
//!
//! A grant lasts for the rest of that command only: nothing is remembered
//! for the session, so nothing is folded when it is loaded. Every question
//! and answer is a session-log event with the path (`fs/path-asked`,
//! `fs/path-answered`), for audits.
//!
//! A `task` child's commands are asked too, in the session the user sees,
//! on the task call that runs the child (mounted as the child starts, see
//! `Live::ask_for_children`); logged in the child's log under the child's
//! call, as its escalations are, so its retry offer sees what it refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, ToolCallContent, ToolCallId, ToolCallUpdate, ToolCallUpdateFields,
};
use stockade_agent::ApprovalService;
use stockade_core::ApprovalPolicy;
use stockade_local::{PathAnswer, PathApproval, PathApprover, PathQuestion, PathReply};
use stockade_session::{Event, PathAnswer as Logged, Session};

use crate::compose::Composition;
use crate::live::{Asker, Asking, Live, record};
use crate::log;

/// The option ids a path question offers (with [`crate::REJECT_ONCE`]).
pub const ALLOW_PATH: &str = "allow_path";
pub const ALLOW_DIRECTORY: &str = "allow_directory";

/// How often a waiting question checks whether the command still waits
/// for it (the provider's reply says so only when asked).
const RECHECK: Duration = Duration::from_millis(200);

/// One session's questions about paths, mounted on the provider. Holds
/// nothing: every grant is the command's own, kept by its supervisor.
pub(crate) struct SessionPaths;

impl SessionPaths {
    /// Mount it for `session`, or `None` when nothing can ask: no approval
    /// service, or no local provider. Must be called within the server's
    /// runtime.
    pub(crate) fn mount(comp: &Composition, live: &Arc<Live>, session: &Session) -> Option<Self> {
        let asking = Asking::of(comp)?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        mount_child(&asking, live, session, &runtime);
        Some(Self)
    }
}

/// Mount questions for `session`: one the user opened, or a running `task`
/// child (asked on its parent's task call, see [`Live::running_command`]).
pub(crate) fn mount_child(
    asking: &Asking,
    live: &Arc<Live>,
    session: &Session,
    runtime: &tokio::runtime::Handle,
) {
    let asker = Arc::new(Asker::new(asking, live, session, runtime));
    let mut approval = PathApproval::new(asker).with_timeout(asking.timeout);
    if let Some(n) = asking.max_questions {
        approval = approval.with_max_questions(u32::try_from(n).unwrap_or(u32::MAX));
    }
    asking
        .local
        .set_path_approval(Some(session.id().as_str()), Some(approval));
}

/// The session `id` is over: no more questions for it.
pub(crate) fn unmount(comp: &Composition, id: &str) {
    if let Some(local) = &comp.local {
        local.set_path_approval(Some(id), None);
    }
}

impl PathApprover for Asker {
    fn ask(&self, question: PathQuestion, reply: PathReply) {
        let (live, session, approval) = (
            self.live.clone(),
            self.session.clone(),
            self.approval.clone(),
        );
        self.runtime
            .spawn(ask(live, session, approval, question, reply));
    }
}

/// The path as an editor may show it (see `escaped`).
fn shown(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    stockade_core::run_approval::escaped(path.as_os_str().as_bytes())
}

/// Until the command no longer waits for `reply` (its time is up, or it
/// ended).
async fn withdrawn(reply: &PathReply) {
    while reply.is_pending() {
        tokio::time::sleep(RECHECK).await;
    }
}

/// The client's answer as the provider's and the log's; anything but an
/// allow refuses this command's write.
fn answer_of(session: &Session, q: &PathQuestion, option: &str) -> (PathAnswer, Logged) {
    match option {
        ALLOW_PATH => (PathAnswer::AllowPath, Logged::AllowPath),
        ALLOW_DIRECTORY => (PathAnswer::AllowDirectory, Logged::AllowDirectory),
        crate::REJECT_ONCE => (PathAnswer::Refuse, Logged::Refused),
        other => {
            log(format_args!(
                "session {}: unknown permission option {other:?}; {} refused",
                session.id(),
                shown(&q.path)
            ));
            (PathAnswer::Refuse, Logged::Refused)
        }
    }
}

/// Asks the client; anything but an allow refuses, for this command only.
async fn ask(
    live: Arc<Live>,
    session: Session,
    approval: Arc<ApprovalService>,
    q: PathQuestion,
    reply: PathReply,
) {
    // Under `never` no one is asked: refused as without approval.
    if approval.policy(&session) == ApprovalPolicy::Never {
        return reply.answer(PathAnswer::Refuse);
    }
    // No prompt running (a background job's late write): nobody to ask.
    let Some(at) = live.running_command(&session) else {
        return reply.answer(PathAnswer::Refuse);
    };
    let (path, op) = (shown(&q.path), q.op.to_string());
    let what = format!("writing {path} ({op})");
    record(
        &session,
        Event::PathAsked {
            op: op.clone(),
            path: q.path.clone(),
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
                        "The running command wants {what}, which lies outside every writable root; it waits for your answer. A grant lasts for the rest of this command only."
                    )),
                ))]),
        ),
        vec![
            PermissionOption::new(
                ALLOW_PATH,
                format!("Allow writing {path} for this command"),
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(
                ALLOW_DIRECTORY,
                "Allow its directory for this command",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(crate::REJECT_ONCE, "Refuse", PermissionOptionKind::RejectOnce),
        ],
    );
    // The command stops waiting (timeout, it ended): the request is
    // dropped, which tells the client to withdraw it.
    let response = tokio::select! {
        r = at.cx.send_request(request).block_task() => Some(r),
        () = withdrawn(&reply) => None,
    };
    let (answer, logged) = match response {
        Some(Ok(r)) => match r.outcome {
            RequestPermissionOutcome::Selected(s) => answer_of(&session, &q, &s.option_id.0),
            // Cancelled, or a later protocol revision's outcome.
            _ => (PathAnswer::Refuse, Logged::Refused),
        },
        Some(Err(e)) => {
            log(format_args!(
                "session {}: session/request_permission failed: {e}; {path} refused",
                session.id(),
            ));
            (PathAnswer::Refuse, Logged::Refused)
        }
        None => (PathAnswer::Refuse, Logged::TimedOut),
    };
    record(
        &session,
        Event::PathAnswered {
            path: q.path.clone(),
            answer: logged,
        },
    );
    at.show_running();
    reply.answer(answer);
}
