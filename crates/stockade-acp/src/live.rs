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
}

pub(crate) struct Running {
    pub(crate) cancel: Cancel,
    pub(crate) cx: ConnectionTo<Client>,
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
