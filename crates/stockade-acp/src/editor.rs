//! What the editor lends the tools: its buffers for the read tool (when the
//! client advertises `fs.readTextFile`) and a live view of a running
//! command's output. Both reach the editor through the connection of the
//! session's running prompt; outside a prompt there is nobody to ask.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol::v1::schema::{
    ClientCapabilities, ReadTextFileRequest, SessionId, SessionUpdate,
};
use stockade_agent::{EditorFiles, ToolContext, ToolProgress};
use stockade_shell::BoxFuture;

use crate::live::Live;
use crate::log;
use crate::updates::{output_so_far, send};

/// The editor of this connection, as the tools see it.
pub(crate) struct EditorBridge {
    live: Arc<Live>,
    /// The client's `initialize` advertised `fs.readTextFile`.
    reads: AtomicBool,
}

impl EditorBridge {
    pub(crate) fn new(live: Arc<Live>) -> Self {
        Self {
            live,
            reads: AtomicBool::new(false),
        }
    }

    /// What the client said it can do, at `initialize` (a second
    /// `initialize` replaces it).
    pub(crate) fn client_capabilities(&self, caps: &ClientCapabilities) {
        self.reads.store(caps.fs.read_text_file, Ordering::Relaxed);
    }
}

impl ToolProgress for EditorBridge {
    fn progress(&self, ctx: &ToolContext, text: &str) {
        let Some(session) = &ctx.session else { return };
        let Some(cx) = self.live.client_of(session.id().as_str()) else {
            return;
        };
        send(
            &cx,
            &SessionId::new(session.id().as_str()),
            SessionUpdate::ToolCallUpdate(output_so_far(&ctx.call_id, text)),
        );
    }
}

impl EditorFiles for EditorBridge {
    fn read_text<'a>(
        &'a self,
        ctx: &'a ToolContext,
        path: &'a Path,
    ) -> BoxFuture<'a, Option<Result<String, String>>> {
        Box::pin(async move {
            if !self.reads.load(Ordering::Relaxed) {
                return None;
            }
            let session = ctx.session.as_ref()?;
            // A `task` child reads through the editor of the session it
            // was delegated from.
            let route = self.live.route(session.id())?;
            let (cx, id) = (route.cx, route.session);
            // Dropping this future (the prompt was cancelled) withdraws the
            // request, as for a permission request.
            match cx
                .send_request(ReadTextFileRequest::new(id.clone(), path))
                .block_task()
                .await
            {
                Ok(r) => Some(Ok(r.content)),
                Err(e) => {
                    log(format_args!(
                        "session {id}: fs/read_text_file {} failed: {e}; the disk is read instead",
                        path.display()
                    ));
                    Some(Err(e.message))
                }
            }
        })
    }
}
