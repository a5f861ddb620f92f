//! The ACP agent side: one connection, many sessions, one running prompt per
//! session.
//!
//! The SDK runs request handlers inside its dispatch loop, which processes
//! no other message until a handler returns. So `session/prompt` only
//! registers the prompt and moves the agent loop into a spawned task: the
//! loop itself waits for `session/request_permission` answers and must see
//! `session/cancel`, both of which arrive through that same loop.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    CurrentModeUpdate, Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    SessionId, SessionMode, SessionModeState, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, ErrorCode};
use stockade_agent::agent::{Agent as AgentLoop, Cancel, StopReason as AgentStop};
use stockade_agent::presets::{CONFIGURED, CUSTOM};
use stockade_config::Config;
use stockade_roots::RootPins;
use stockade_session::{Session, SessionStore};

use crate::answerer::AcpAnswerer;
use crate::compose::{Composition, EditorHooks, Environment, Sessions, compose};
use crate::control::ControlFiles;
use crate::editor::EditorBridge;
use crate::error::ServeError;
use crate::live::{Live, Running, Slot};
use crate::log;
use crate::mcp::SessionMcp;
use crate::updates::{Streamer, replay, send};

/// The ACP server for one composition.
pub struct AcpServer {
    comp: Composition,
    store: SessionStore,
    live: Arc<Live>,
    /// The roots the composition's provider and fence grant, held once: a
    /// session's cwd is held here when the session starts.
    pins: Arc<RootPins>,
    control: ControlFiles,
    /// What the client lends the tools (its buffers, a live output view).
    editor: Arc<EditorBridge>,
}

impl std::fmt::Debug for AcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpServer")
            .field("comp", &self.comp)
            .field("store", &self.store)
            .field("control", &self.control)
            .finish_non_exhaustive()
    }
}

/// The message itself says what went wrong: editors show an error's
/// message, not its data.
fn invalid(message: impl std::fmt::Display) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message.to_string())
}

fn internal(message: impl std::fmt::Display) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, message.to_string())
}

/// The name the configured default is offered under as a mode.
const CONFIGURED_NAME: &str = "Configured default";

impl AcpServer {
    /// Compose `config` with this server's answerer as the approval chain's
    /// last link. Refused ([`ServeError::ControlState`]) when the config file
    /// or the session store lies beneath a temp root or beneath the
    /// configured fallback workspace: a confined run could rewrite it; and
    /// ([`ServeError::ExtraRoot`]) when an extra writable root contains
    /// either, or cannot be held.
    pub fn new(
        config: &Config,
        env: &Environment,
        store: SessionStore,
    ) -> Result<Self, ServeError> {
        let control = ControlFiles {
            config: env.config_file.clone(),
            log_dir: store.dir().to_path_buf(),
        };
        control.check_at_startup(config, env)?;
        let delegations = Arc::new(stockade_agent::Delegations::default());
        let live = Arc::new(Live::new(delegations.clone()));
        let answerer = Arc::new(AcpAnswerer { live: live.clone() });
        let editor = Arc::new(EditorBridge::new(live.clone()));
        let hooks = EditorHooks {
            progress: Some(editor.clone()),
            files: Some(editor.clone()),
        };
        let sessions = Sessions {
            store: store.clone(),
            delegations,
        };
        let comp = compose(config, env, answerer, hooks, &sessions)?;
        // A `task` child's commands ask too, on the parent's task call.
        #[cfg(unix)]
        live.ask_for_children(&comp);
        control.hold_extra_roots(config, env)?;
        Ok(Self {
            comp,
            store,
            live,
            pins: env.pins.clone(),
            control,
            editor,
        })
    }

    pub fn composition(&self) -> &Composition {
        &self.comp
    }

    pub fn store(&self) -> &SessionStore {
        &self.store
    }

    /// Serve one client on `transport` until it disconnects. Running prompts
    /// end with the connection (their tool processes are killed).
    pub async fn serve(self, transport: impl ConnectTo<Agent> + 'static) -> Result<(), ServeError> {
        // Each handler owns a handle on the one server.
        let me = Arc::new(self);
        let (a, b, c, d, e) = (me.clone(), me.clone(), me.clone(), me.clone(), me.clone());
        let auth = me.comp.auth.clone();
        let live = me.live.clone();
        let ending = me.clone();
        let served = Agent
            .v1()
            .name("stockade")
            .on_receive_request(
                async move |req: InitializeRequest,
                            responder: Responder<InitializeResponse>,
                            _cx: ConnectionTo<Client>| {
                    responder.respond(a.initialize(&req))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                // Off the dispatch loop: its MCP servers take a while to start.
                async move |req: NewSessionRequest,
                            responder: Responder<NewSessionResponse>,
                            cx: ConnectionTo<Client>| {
                    let this = b.clone();
                    cx.spawn(
                        async move { responder.respond_with_result(this.new_session(req).await) },
                    )
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: LoadSessionRequest,
                            responder: Responder<LoadSessionResponse>,
                            cx: ConnectionTo<Client>| {
                    let this = c.clone();
                    cx.clone().spawn(async move {
                        responder.respond_with_result(this.load_session(req, &cx).await)
                    })
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: SetSessionModeRequest,
                            responder: Responder<SetSessionModeResponse>,
                            cx: ConnectionTo<Client>| {
                    responder.respond_with_result(d.set_mode(req, &cx))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                // The prompt task outlives this call, so it gets its own Arc.
                async move |req: PromptRequest,
                            responder: Responder<PromptResponse>,
                            cx: ConnectionTo<Client>| {
                    me.clone().prompt(req, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: AuthenticateRequest,
                            responder: Responder<AuthenticateResponse>,
                            _cx: ConnectionTo<Client>| {
                    responder.respond_with_result(
                        auth.authenticate(&req)
                            .map(|()| AuthenticateResponse::new()),
                    )
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |n: CancelNotification, _cx: ConnectionTo<Client>| {
                    e.cancel(&n.session_id);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_to(transport)
            .await;
        // The connection is over: every prompt still running is cancelled
        // (its command's tree is killed as the run settles), and with it
        // goes every session's MCP servers. What is still left below this
        // process is ended by `crate::serve` before it returns.
        for slot in live.lock().values() {
            if let Some(r) = &slot.running {
                r.cancel.cancel();
            }
        }
        let open: Vec<(String, SessionMcp)> = live
            .lock()
            .iter_mut()
            .filter_map(|(id, s)| s.mcp.take().map(|m| (id.clone(), m)))
            .collect();
        for (id, m) in &open {
            crate::mcp::stop(m, &format!("session {id}")).await;
        }
        // ACP has no session/close: a session ends with its connection.
        // Once its servers are stopped, what the provider allocated for it
        // (the Windows private temp) is released, session by session.
        let ended: Vec<String> = live.lock().keys().cloned().collect();
        for id in &ended {
            #[cfg(unix)]
            crate::hosts::unmount(&ending.comp, id);
            #[cfg(target_os = "linux")]
            crate::paths::unmount(&ending.comp, id);
            ending.comp.end_session(id);
        }
        served?;
        Ok(())
    }

    /// Serve the client on this process's stdin and stdout. Stdout carries
    /// protocol frames only; everything else this crate says goes to stderr.
    /// A line that is not UTF-8 or longer than
    /// [`MAX_FRAME_BYTES`](crate::MAX_FRAME_BYTES) is answered with a parse
    /// error and the next line is served.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let transport = crate::frames::transport(
            std::io::stdin(),
            tokio::io::stdout(),
            crate::MAX_FRAME_BYTES,
        )
        .map_err(Error::into_internal_error)?;
        self.serve(transport).await
    }

    fn initialize(&self, req: &InitializeRequest) -> InitializeResponse {
        if req.protocol_version != ProtocolVersion::V1 {
            log(format_args!(
                "the client asked for protocol {:?}; answering with v1, the one spoken here",
                req.protocol_version
            ));
        }
        self.editor.client_capabilities(&req.client_capabilities);
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(crate::prompt::capabilities(self.comp.images))
                    .mcp_capabilities(crate::mcp::capabilities()),
            )
            .auth_methods(self.comp.auth.methods())
            .agent_info(
                Implementation::new("stockade", env!("CARGO_PKG_VERSION")).title("stockade"),
            )
    }

    /// The presets as modes, then the configured default when no preset is
    /// it, and which one the session is in. A combination outside all of
    /// them is shown as a `custom` mode while it is current, so the client
    /// always has a current mode to show; selecting it changes nothing.
    fn modes(&self, session: &Session) -> Option<SessionModeState> {
        let presets = self.comp.presets.as_ref()?;
        let mut modes: Vec<SessionMode> = presets
            .presets()
            .iter()
            .map(|p| {
                SessionMode::new(p.name.clone(), p.name.clone()).description(format!(
                    "sandbox {}, network {}, approval {}",
                    p.mode, p.network, p.approval
                ))
            })
            .collect();
        if presets.offers_configured() {
            let c = presets.configured();
            modes.push(
                SessionMode::new(CONFIGURED, CONFIGURED_NAME).description(format!(
                    "sandbox {}, network {}, approval {} (as configured)",
                    c.mode, c.network, c.approval
                )),
            );
        }
        let current = presets.current(session);
        if current == CUSTOM {
            let mode = self.comp.policy.effective_mode(Some(session));
            let network = self.comp.policy.effective_network(Some(session));
            let approval = self
                .comp
                .approval
                .as_ref()
                .map_or_else(|| "none".to_owned(), |a| a.policy(session).to_string());
            modes.push(SessionMode::new(CUSTOM, CUSTOM).description(format!(
                "sandbox {mode}, network {network}, approval {approval} (no preset)"
            )));
        }
        Some(SessionModeState::new(current.to_owned(), modes))
    }

    fn register(&self, session: Session, mcp: Option<SessionMcp>) -> SessionId {
        let id = session.id().as_str().to_owned();
        let mut slots = self.live.lock();
        // A second load of a session already open keeps its running prompt
        // (and its MCP servers: none are started for it).
        slots.entry(id.clone()).or_insert_with(|| Slot {
            #[cfg(unix)]
            hosts: crate::hosts::SessionHosts::mount(&self.comp, &self.live, &session),
            #[cfg(target_os = "linux")]
            paths: crate::paths::SessionPaths::mount(&self.comp, &self.live, &session),
            session,
            running: None,
            mcp,
        });
        SessionId::new(id)
    }

    fn session(&self, id: &SessionId) -> Result<Session, Error> {
        self.live
            .lock()
            .get(&*id.0)
            .map(|s| s.session.clone())
            .ok_or_else(|| {
                invalid(format!(
                    "no session {id} on this connection (session/new or session/load it first)"
                ))
            })
    }

    /// Hold `cwd` as the session's workspace and refuse it when a run
    /// there could write the control state. `/`, a planted symlink or a
    /// workspace moved since this process held it is refused too.
    fn admit(&self, cwd: &Path) -> Result<(), Error> {
        let held = self.pins.workspace(cwd).map_err(invalid)?;
        self.control
            .refuse_beneath(&self.pins, Some(&*held))
            .map_err(invalid)
    }

    async fn new_session(&self, req: NewSessionRequest) -> Result<NewSessionResponse, Error> {
        let cwd = &req.cwd;
        if !cwd.is_absolute() {
            return Err(invalid(format!("cwd {} is not absolute", cwd.display())));
        }
        if !cwd.is_dir() {
            return Err(invalid(format!("cwd {} is not a directory", cwd.display())));
        }
        self.admit(cwd)?;
        // Started before the session exists, so a server that fails leaves
        // no session behind. A new session has no knobs of its own yet: the
        // configured defaults, in its workspace.
        let specs = crate::mcp::specs(&req.mcp_servers)?;
        let mut policy = self.comp.policy.resolve(None, None);
        policy.workspace_root = cwd.clone();
        let mcp = crate::mcp::start(&self.comp, &specs, &policy, cwd, "session/new").await?;
        let session = match self.store.create(cwd) {
            Ok(s) => s,
            Err(e) => {
                if let Some(m) = &mcp {
                    crate::mcp::stop(m, "session/new").await;
                }
                return Err(internal(e));
            }
        };
        let modes = self.modes(&session);
        self.session_started(&session, "new").await;
        let id = self.register(session, mcp);
        Ok(NewSessionResponse::new(id).modes(modes))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, Error> {
        let sid: stockade_session::SessionId = req
            .session_id
            .0
            .parse()
            .map_err(|e| invalid(format!("session id {}: {e}", req.session_id)))?;
        let specs = crate::mcp::specs(&req.mcp_servers)?;
        // Checked before the log is opened: opening repairs a torn tail, and
        // a refused session is not touched.
        let header = self.store.header(&sid).map_err(invalid)?;
        self.admit(&header.cwd)?;
        let session = self.store.open(&sid).map_err(|e| invalid(e.to_string()))?;
        if session.header().cwd != header.cwd {
            return Err(invalid(format!(
                "session {sid}: its log changed while it was being resumed"
            )));
        }
        if let Some(t) = &session.replay_report().torn_tail {
            log(format_args!(
                "session {sid}: the log's torn last line was dropped: {t:?}"
            ));
        }
        // The workspace root is the one the session was created with: the
        // log's policy was stated for it.
        if session.header().cwd != req.cwd {
            log(format_args!(
                "session/load of {sid} named cwd {}; the session keeps its own, {}",
                req.cwd.display(),
                session.header().cwd.display()
            ));
        }
        // Its MCP servers under the session's own policy, before anything is
        // replayed: one that fails fails the load.
        let open = self.live.lock().contains_key(sid.as_str());
        let mcp = if open {
            if !specs.is_empty() {
                log(format_args!(
                    "session/load of {sid}: already open on this connection; its MCP servers stay as they are"
                ));
            }
            None
        } else {
            let policy = self.comp.policy.resolve(Some(&session), None);
            let cwd = session.header().cwd.clone();
            crate::mcp::start(&self.comp, &specs, &policy, &cwd, &format!("session {sid}")).await?
        };
        let id = SessionId::new(sid.as_str());
        let cwd = session.header().cwd.clone();
        // A prompt of this process running the log's last calls will finish
        // them; any other call without a result never will. Asked before
        // and after the records are read, so a prompt that starts or ends
        // in between still counts as running.
        let running = || {
            self.live
                .lock()
                .get(sid.as_str())
                .is_some_and(|s| s.running.is_some())
        };
        let before = running();
        let updates = session.with_records(|r| replay(r, &cwd, before || running()));
        for update in updates {
            send(cx, &id, update);
        }
        let modes = self.modes(&session);
        if !open {
            self.session_started(&session, "load").await;
        }
        self.register(session, mcp);
        Ok(LoadSessionResponse::new().modes(modes))
    }

    /// The `session_start` hooks. Their outcome is in the session's log; a
    /// log that cannot be written is reported here, and the session goes on.
    async fn session_started(&self, session: &Session, source: &str) {
        if let Err(e) = self.comp.agent.session_started(session, source).await {
            log(format_args!(
                "session {}: session_start hooks: {e}",
                session.id()
            ));
        }
    }

    fn set_mode(
        &self,
        req: SetSessionModeRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<SetSessionModeResponse, Error> {
        let Some(presets) = &self.comp.presets else {
            return Err(invalid("this deployment composes no permission presets"));
        };
        let session = self.session(&req.session_id)?;
        let changed = presets
            .select(&session, &req.mode_id.0)
            .map_err(|e| invalid(e.to_string()))?;
        log(format_args!(
            "session {}: mode {} selected ({changed} knob(s) changed)",
            req.session_id, req.mode_id
        ));
        // The user changed something: hosts answered for the session are
        // asked about again (the fold of the log agrees: the knob events
        // just recorded end their answers).
        #[cfg(unix)]
        if changed > 0
            && let Some(h) = self
                .live
                .lock()
                .get(&*req.session_id.0)
                .and_then(|s| s.hosts.as_ref())
        {
            h.forget();
        }
        send(
            cx,
            &req.session_id,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                presets.current(&session).to_owned(),
            )),
        );
        Ok(SetSessionModeResponse::new())
    }

    fn cancel(&self, id: &SessionId) {
        match self
            .live
            .lock()
            .get(&*id.0)
            .and_then(|s| s.running.as_ref())
        {
            Some(r) => r.cancel.cancel(),
            None => log(format_args!(
                "session/cancel for {id}: no prompt is running"
            )),
        }
    }

    /// The agent for the session's next prompt: the composition's, or the
    /// session's own when its MCP servers add tools. When the session's
    /// policy moved since they started (a mode or network change), they
    /// are restarted under the new one first, so a server never runs under
    /// another policy than the session's commands; one that fails to come
    /// back fails the prompt, naming it (and the next prompt tries again).
    async fn session_agent(
        &self,
        id: &SessionId,
        session: &Session,
    ) -> Result<Arc<AgentLoop>, Error> {
        let policy = self.comp.policy.resolve(Some(session), None);
        let stale = {
            let mut slots = self.live.lock();
            let Some(slot) = slots.get_mut(&*id.0) else {
                return Ok(self.comp.agent.clone());
            };
            match &slot.mcp {
                None => return Ok(self.comp.agent.clone()),
                // The session scope is no permission: servers started by
                // session/new, before the session existed, keep running.
                Some(m)
                    if m.policy
                        .as_ref()
                        .is_some_and(|p| p.same_permissions(&policy)) =>
                {
                    return Ok(m.agent.clone());
                }
                Some(_) => slot.mcp.take(),
            }
        };
        let Some(old) = stale else {
            return Ok(self.comp.agent.clone());
        };
        let what = format!("session {id}");
        log(format_args!(
            "{what}: {}; restarting its MCP servers under {}, network {}",
            if old.policy.is_some() {
                "the session's sandbox changed"
            } else {
                "its MCP servers failed to restart before"
            },
            policy.mode,
            policy.network.mode
        ));
        crate::mcp::stop(&old, &what).await;
        let cwd = session.header().cwd.clone();
        let started = crate::mcp::start(&self.comp, &old.specs, &policy, &cwd, &what).await;
        let (agent, mcp) = match started {
            Ok(Some(m)) => (Ok(m.agent.clone()), m),
            Ok(None) => return Ok(self.comp.agent.clone()),
            // The specs stay for the next prompt's attempt.
            Err(e) => (Err(e), old.failed()),
        };
        if let Some(slot) = self.live.lock().get_mut(&*id.0) {
            slot.mcp = Some(mcp);
        }
        agent
    }

    fn prompt(
        self: Arc<Self>,
        req: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let id = req.session_id.clone();
        // Refused before anything is recorded: a prompt the model cannot
        // take, or cannot be sent yet, leaves the session as it was.
        if !self.comp.auth.ready() {
            return responder.respond_with_error(self.comp.auth.required());
        }
        let text = match crate::prompt::text(&req.prompt, self.comp.images) {
            Ok(t) => t,
            Err(e) => return responder.respond_with_error(e),
        };
        let images = if self.comp.images {
            crate::prompt::images(&req.prompt)
        } else {
            Vec::new()
        };
        let started = {
            let mut slots = self.live.lock();
            match slots.get_mut(&*id.0) {
                None => Err(invalid(format!("no session {id} on this connection"))),
                Some(s) if s.running.is_some() => Err(invalid(format!(
                    "session {id} is already running a prompt; cancel it first"
                ))),
                Some(s) => {
                    let cancel = Cancel::default();
                    let commands = crate::live::Commands::default();
                    s.running = Some(Running {
                        cancel: cancel.clone(),
                        cx: cx.clone(),
                        commands: commands.clone(),
                    });
                    Ok((s.session.clone(), cancel, commands))
                }
            }
        };
        let (session, cancel, commands) = match started {
            Ok(v) => v,
            Err(e) => return responder.respond_with_error(e),
        };
        let this = self.clone();
        cx.clone().spawn(async move {
            let streamer = Streamer {
                cx,
                id: id.clone(),
                cwd: session.header().cwd.clone(),
                commands,
            };
            // A `$/cancel_request` for the prompt means the same as
            // `session/cancel`: stop, and answer `cancelled`.
            let withdrawn = responder.cancellation();
            let agent = match this.session_agent(&id, &session).await {
                Ok(a) => a,
                Err(e) => {
                    if let Some(s) = this.live.lock().get_mut(&*id.0) {
                        s.running = None;
                    }
                    return responder.respond_with_error(e);
                }
            };
            let run = agent.prompt_with_images(&session, &text, &images, &streamer, &cancel);
            tokio::pin!(run);
            let result = tokio::select! {
                r = &mut run => r,
                () = withdrawn.cancelled() => {
                    cancel.cancel();
                    run.await
                }
            };
            if let Some(s) = this.live.lock().get_mut(&*id.0) {
                s.running = None;
            }
            match result {
                Ok(stop) => responder.respond(PromptResponse::new(match stop {
                    AgentStop::EndTurn => StopReason::EndTurn,
                    AgentStop::MaxSteps => StopReason::MaxTurnRequests,
                    AgentStop::Cancelled => StopReason::Cancelled,
                })),
                Err(e) => {
                    log(format_args!("session {id}: prompt failed: {e}"));
                    responder.respond_with_error(internal(e))
                }
            }
        })
    }
}
