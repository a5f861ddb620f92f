//! The sessions one connection opened, shared by the server, which opens
//! and runs them, and by the answerer and the editor bridge, which must find
//! the connection of the prompt that asks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::SessionId;
use stockade_agent::agent::Cancel;
use stockade_session::Session;

use crate::mcp::SessionMcp;

/// A session this connection opened, and its running prompt if any.
pub(crate) struct Slot {
    pub(crate) session: Session,
    pub(crate) running: Option<Running>,
    /// The session's MCP servers and the agent offering their tools.
    pub(crate) mcp: Option<SessionMcp>,
    /// Its hosts asked about while a command waits (see `crate::hosts`).
    #[cfg(unix)]
    pub(crate) hosts: Option<crate::hosts::SessionHosts>,
    /// Its paths asked about while a command waits (see `crate::paths`):
    /// held while the session is open, unmounted when it ends.
    #[cfg(target_os = "linux")]
    #[expect(dead_code, reason = "a mark that it is mounted; it holds nothing")]
    pub(crate) paths: Option<crate::paths::SessionPaths>,
}

pub(crate) struct Running {
    pub(crate) cancel: Cancel,
    pub(crate) cx: ConnectionTo<Client>,
    /// The prompt's bash calls now running, newest last: a question about
    /// a host is shown on the call whose command waits for it.
    #[cfg_attr(
        not(unix),
        expect(dead_code, reason = "hosts are asked about on Unix only")
    )]
    pub(crate) commands: Commands,
}

/// A prompt's running bash calls: (call id, title as the editor shows it).
pub(crate) type Commands = Arc<Mutex<Vec<(String, String)>>>;

/// A running command's call, where a question about it is shown.
#[cfg(unix)]
pub(crate) struct RunningCommand {
    pub cx: ConnectionTo<Client>,
    pub session: SessionId,
    pub call_id: String,
    pub title: String,
    /// The asking session's own call whose command waits, as its log names
    /// it: `call_id` itself, or, for a `task` child, the child's bash call
    /// (the question is shown on the parent's task call, but logged in the
    /// child's log like the child's escalations, so the child's later
    /// retry offer finds the paths refused during its call).
    pub logged_call: String,
    /// The session the user sees, when the asker is its `task` child.
    pub origin: Option<Session>,
}

#[cfg(unix)]
impl RunningCommand {
    /// The call shows that it waits for `what` to be approved.
    pub(crate) fn show_waiting(&self, what: &str) {
        self.show(
            agent_client_protocol::v1::schema::ToolCallStatus::Pending,
            format!("{} (waiting for approval of {what})", self.title),
        );
    }

    /// The call runs on, under its own title again, whatever the answer.
    pub(crate) fn show_running(&self) {
        self.show(
            agent_client_protocol::v1::schema::ToolCallStatus::InProgress,
            self.title.clone(),
        );
    }

    fn show(&self, status: agent_client_protocol::v1::schema::ToolCallStatus, title: String) {
        use agent_client_protocol::v1::schema::{
            SessionUpdate, ToolCallId, ToolCallUpdate, ToolCallUpdateFields,
        };
        crate::updates::send(
            &self.cx,
            &self.session,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                ToolCallId::new(self.call_id.as_str()),
                ToolCallUpdateFields::new().status(status).title(title),
            )),
        );
    }
}

/// The sessions of this server, shared with the answerer, which must find
/// the connection of the prompt that asks.
pub(crate) struct Live {
    slots: Mutex<HashMap<String, Slot>>,
    /// The running `task` children: a child's question is asked in the
    /// session the user sees, under the task call that runs it.
    delegations: Arc<stockade_agent::Delegations>,
}

/// Where to ask about a session's call: the connection, the session the
/// client knows, and the call there to show it under.
pub(crate) struct Route {
    pub cx: ConnectionTo<Client>,
    pub session: SessionId,
    /// The parent's `task` call, when the asking session is its child.
    pub task_call: Option<String>,
}

impl Live {
    pub(crate) fn new(delegations: Arc<stockade_agent::Delegations>) -> Self {
        Self {
            slots: Mutex::default(),
            delegations,
        }
    }

    /// Where a question from `session` goes: its own prompt's connection,
    /// or, for a `task` child, the connection of the top session's prompt.
    pub(crate) fn route(&self, session: &stockade_session::SessionId) -> Option<Route> {
        match self.delegations.origin(session) {
            Some(d) => Some(Route {
                cx: self.client_of(d.parent.as_str())?,
                session: SessionId::new(d.parent.as_str()),
                task_call: Some(d.call_id),
            }),
            None => Some(Route {
                cx: self.client_of(session.as_str())?,
                session: SessionId::new(session.as_str()),
                task_call: None,
            }),
        }
    }

    /// The newest bash call running in `session`'s prompt, where a
    /// question about its command is shown; `None` without a running
    /// prompt or command (nobody to ask).
    ///
    /// For a running `task` child: the parent's task call (the session
    /// the user sees), while the child has a bash call without a result.
    #[cfg(unix)]
    pub(crate) fn running_command(&self, session: &Session) -> Option<RunningCommand> {
        if let Some(d) = self.delegations.origin(session.id()) {
            return self.running_task(session, &d);
        }
        let slots = self.lock();
        let running = slots.get(session.id().as_str())?.running.as_ref()?;
        let commands = running
            .commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (call_id, title) = commands.last()?.clone();
        Some(RunningCommand {
            cx: running.cx.clone(),
            session: SessionId::new(session.id().as_str()),
            logged_call: call_id.clone(),
            call_id,
            title,
            origin: None,
        })
    }

    /// The task call running `child`, titled as the client was shown it.
    #[cfg(unix)]
    fn running_task(
        &self,
        child: &Session,
        d: &stockade_agent::Delegation,
    ) -> Option<RunningCommand> {
        let logged_call = child.with_records(|r| {
            stockade_session::unanswered_tool_calls(r)
                .iter()
                .rev()
                .find(|c| c.name == "bash")
                .map(|c| c.id.clone())
        })?;
        let (cx, top) = {
            let slots = self.lock();
            let slot = slots.get(d.parent.as_str())?;
            (slot.running.as_ref()?.cx.clone(), slot.session.clone())
        };
        // The title the client was shown for the call, rebuilt from the
        // same arguments: it is shown again once the question is answered.
        let cwd = top.header().cwd.clone();
        let title = top.with_records(|r| {
            r.iter().rev().find_map(|r| match &r.event {
                stockade_session::Event::AssistantToolCalls { calls, .. } => calls
                    .iter()
                    .find(|c| c.id == d.call_id)
                    .map(|c| crate::updates::tool_call(&c.id, &c.name, &c.arguments, &cwd).title),
                _ => None,
            })
        })?;
        Some(RunningCommand {
            cx,
            session: SessionId::new(d.parent.as_str()),
            call_id: d.call_id.clone(),
            title,
            logged_call,
            origin: Some(top),
        })
    }

    /// The session-wide host answers of `session`, when it asks about hosts.
    #[cfg(unix)]
    fn host_grants(
        &self,
        session: &stockade_session::SessionId,
    ) -> Option<Arc<stockade_local::HostGrants>> {
        self.lock()
            .get(session.as_str())?
            .hosts
            .as_ref()
            .map(crate::hosts::SessionHosts::grants)
    }

    /// Mount questions for every `task` child as it starts: its commands'
    /// unlisted hosts and (supervised Landlock) outside paths are asked in
    /// the session the user sees, on the task call. Unmounted when the
    /// child's task ends.
    #[cfg(unix)]
    pub(crate) fn ask_for_children(self: &Arc<Self>, comp: &crate::compose::Composition) {
        let Some(asking) = Asking::of(comp) else {
            return;
        };
        // Weak: the registry holds this hook and this holds the registry.
        let live = Arc::downgrade(self);
        self.delegations
            .on_child_start(Arc::new(move |child, _: &stockade_agent::Delegation| {
                let live = live.upgrade()?;
                let top = live.delegations.origin(child.id())?.parent;
                // A child asks only where the session the user sees asks
                // (no approval service, no local provider: neither does).
                let grants = live.host_grants(&top)?;
                let runtime = tokio::runtime::Handle::try_current().ok()?;
                crate::hosts::mount_child(&asking, &live, child, grants, &runtime);
                #[cfg(target_os = "linux")]
                crate::paths::mount_child(&asking, &live, child, &runtime);
                let mounted: stockade_agent::ChildMount = Box::new(ChildMounted {
                    local: asking.local.clone(),
                    id: child.id().as_str().to_owned(),
                });
                Some(mounted)
            }));
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // Every change is one map operation, so a panic elsewhere cannot
        // leave a half-made entry behind.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn client_of(&self, session: &str) -> Option<ConnectionTo<Client>> {
        self.lock()
            .get(session)
            .and_then(|s| s.running.as_ref())
            .map(|r| r.cx.clone())
    }
}

/// What a session's questions are asked with, taken from the composition
/// so a child's can be mounted when its task starts.
#[cfg(unix)]
pub(crate) struct Asking {
    pub local: Arc<stockade_local::LocalProvider>,
    pub approval: Arc<stockade_agent::ApprovalService>,
    pub timeout: std::time::Duration,
    pub max_questions: Option<usize>,
}

#[cfg(unix)]
impl Asking {
    /// `None` when nothing can ask: no approval service, or no local
    /// provider.
    pub(crate) fn of(comp: &crate::compose::Composition) -> Option<Self> {
        Some(Self {
            local: comp.local.clone()?,
            approval: comp.approval.clone()?,
            timeout: comp.ask_timeout,
            max_questions: comp.ask_max_questions,
        })
    }
}

/// Who asks one session's questions (hosts and paths alike): the request
/// to the client is made on the server's runtime, since the proxy and the
/// path channel call in on threads of their own.
#[cfg(unix)]
pub(crate) struct Asker {
    pub live: Arc<Live>,
    pub session: Session,
    pub approval: Arc<stockade_agent::ApprovalService>,
    pub runtime: tokio::runtime::Handle,
}

#[cfg(unix)]
impl Asker {
    pub(crate) fn new(
        asking: &Asking,
        live: &Arc<Live>,
        session: &Session,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        Self {
            live: live.clone(),
            session: session.clone(),
            approval: asking.approval.clone(),
            runtime: runtime.clone(),
        }
    }
}

/// Appends a question's event to `session`'s log; a log that cannot be
/// written is said on stderr and the question goes on.
#[cfg(unix)]
pub(crate) fn record(session: &Session, event: stockade_session::Event) {
    if let Err(e) = session.append(event) {
        crate::log(format_args!(
            "session {}: cannot record a question: {e}",
            session.id()
        ));
    }
}

/// A child's questions, withdrawn from the provider when its task ends
/// (the provider's session end does so too; this does not rely on it).
#[cfg(unix)]
struct ChildMounted {
    local: Arc<stockade_local::LocalProvider>,
    id: String,
}

#[cfg(unix)]
impl Drop for ChildMounted {
    fn drop(&mut self) {
        self.local.set_host_approval(Some(&self.id), None);
        #[cfg(target_os = "linux")]
        self.local.set_path_approval(Some(&self.id), None);
    }
}
