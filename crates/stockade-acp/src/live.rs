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
    #[cfg(unix)]
    pub(crate) fn running_command(
        &self,
        session: &stockade_session::SessionId,
    ) -> Option<RunningCommand> {
        let slots = self.lock();
        let running = slots.get(session.as_str())?.running.as_ref()?;
        let commands = running
            .commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (call_id, title) = commands.last()?.clone();
        Some(RunningCommand {
            cx: running.cx.clone(),
            session: SessionId::new(session.as_str()),
            call_id,
            title,
        })
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
