//! The agent loop: per prompt, model step -> tool calls -> results until the
//! model ends its turn or the step limit is hit. Before each step the
//! policy-context reconciliation runs. Everything goes to the session log,
//! and each request is rebuilt from the log alone, so a session resumes from
//! its log with nothing else.

use std::sync::Arc;

use stockade_core::ApprovalOutcome;
use stockade_model::{ChatMessage, Delta, ModelClient, ModelError, ModelToolCall, ToolSpec};
use stockade_session::{Event, Record, Role, Session, SessionError, ToolCall};
use tokio::sync::watch;

use crate::context::PolicyContext;
use crate::hooks::{HookEvent, HookScope, Hooks, Verdict};
use crate::tool::{Tool, ToolContext, ToolOutput};

/// Marks messages the loop itself wrote (errors, cancellations).
pub const SOURCE_AGENT: &str = "stockade:agent";

/// The result of a call the turn's cancellation reached before it ran
/// anything (it was queued, or waiting for the user's answer).
pub const CANCELLED_BEFORE_IT_RAN: &str = "cancelled before it ran: nothing was run";
/// The result of a call whose running processes the cancellation killed.
pub const CANCELLED_KILLED: &str = "cancelled: the tool's processes were killed";

/// How the last approval of `call_id` was decided, if it was asked at all.
/// `Some(None)`: asked, not (yet) decided.
fn approval_of(session: &Session, call_id: &str) -> Option<Option<ApprovalOutcome>> {
    session.with_records(|records| {
        let mut asked = false;
        let mut decided = None;
        for r in records {
            match &r.event {
                Event::ApprovalAsked { call_id: c, .. } if c == call_id => asked = true,
                Event::ApprovalDecided {
                    call_id: c,
                    outcome,
                    ..
                } if c == call_id => decided = Some(*outcome),
                _ => {}
            }
        }
        asked.then_some(decided)
    })
}

/// What the loop reports while it runs (an editor's UI, a CLI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentUpdate {
    Text(String),
    Reasoning(String),
    ToolCallStarted {
        id: String,
        name: String,
        arguments: String,
    },
    ToolCallFinished {
        id: String,
        name: String,
        output: ToolOutput,
    },
    /// A hook that did not simply succeed (its `hook/ran` record is at
    /// `seq` in the log): the user should see it; the model does not.
    HookFailed {
        seq: u64,
        run: stockade_session::HookRun,
    },
}

pub trait Observer: Send + Sync {
    fn update(&self, session: &Session, update: AgentUpdate);
}

/// Hands each hook run that did not simply succeed to `observer`.
fn hook_reporter<'a>(
    observer: &'a dyn Observer,
    session: &'a Session,
) -> impl Fn(u64, &stockade_session::HookRun) + Sync + 'a {
    move |seq, run| {
        observer.update(
            session,
            AgentUpdate::HookFailed {
                seq,
                run: run.clone(),
            },
        );
    }
}

/// Ignores every update.
pub struct Silent;
impl Observer for Silent {
    fn update(&self, _: &Session, _: AgentUpdate) {}
}

/// An image attached to a prompt: base64 `data` of `mime_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub mime_type: String,
    pub data: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxSteps,
    Cancelled,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Cancels one running prompt: the model request is dropped and running
/// tool processes are killed (their process groups go with the futures).
#[derive(Clone, Debug)]
pub struct Cancel(watch::Sender<bool>);

impl Default for Cancel {
    fn default() -> Self {
        Self(watch::channel(false).0)
    }
}

impl Cancel {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    async fn cancelled(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives in self, so wait_for only ends by the flag.
        let _ = rx.wait_for(|c| *c).await;
    }
}

#[derive(Clone)]
pub struct Agent {
    model: Arc<dyn ModelClient>,
    tools: Vec<Arc<dyn Tool>>,
    context: PolicyContext,
    system_prompt: String,
    max_steps: u32,
    hooks: Option<Arc<Hooks>>,
}

/// The stable system prompt. It deliberately does not state the sandbox mode:
/// with the mode in every request the model stopped attempting commands that
/// might be denied (the seed's measurement); the sourced policy-context
/// message and the denial marker carry the policy where it matters.
pub const SYSTEM_PROMPT: &str = "You are a coding agent working in the user's workspace. Use the tools to inspect and change files and to run commands. Attempt the commands the task needs. When a result reports a sandbox denial, follow its instructions exactly.";

impl Agent {
    pub fn new(
        model: Arc<dyn ModelClient>,
        tools: Vec<Arc<dyn Tool>>,
        context: PolicyContext,
    ) -> Self {
        Self {
            model,
            tools,
            context,
            system_prompt: SYSTEM_PROMPT.into(),
            max_steps: 32,
            hooks: None,
        }
    }

    /// Run `hooks` at this agent's session starts, around its tool calls
    /// and at the end of its turns.
    pub fn with_hooks(mut self, hooks: Arc<Hooks>) -> Self {
        self.hooks = (!hooks.is_empty()).then_some(hooks);
        self
    }

    /// The `session_start` hooks, for a session created (`source` `new`),
    /// loaded (`load`) or delegated to by a task (`task`). Their outcome is
    /// in the log; nothing they do stops the session.
    pub async fn session_started(
        &self,
        session: &Session,
        source: &str,
    ) -> Result<(), SessionError> {
        let Some(hooks) = &self.hooks else {
            return Ok(());
        };
        let mut payload = serde_json::Map::new();
        payload.insert("source".into(), source.into());
        if let Some(parent) = &session.header().parent {
            payload.insert("parent_session_id".into(), parent.as_str().into());
        }
        hooks
            .run(
                session,
                HookEvent::SessionStart,
                HookScope::default(),
                payload,
            )
            .await
            .map(|_| ())
    }

    /// The `stop` hooks, then `reason`; a cancellation while they run
    /// kills them and the turn ends cancelled.
    async fn stop_hooks(
        &self,
        session: &Session,
        reason: StopReason,
        cancel: &Cancel,
        observer: &dyn Observer,
    ) -> Result<StopReason, SessionError> {
        let Some(hooks) = &self.hooks else {
            return Ok(reason);
        };
        let mut payload = serde_json::Map::new();
        let name = match reason {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxSteps => "max_steps",
            StopReason::Cancelled => "cancelled",
        };
        payload.insert("stop_reason".into(), name.into());
        let report = hook_reporter(observer, session);
        tokio::select! {
            r = hooks.run_reporting(session, HookEvent::Stop, HookScope::default(), payload, &report) => r.map(|_| reason),
            _ = cancel.cancelled() => Ok(StopReason::Cancelled),
        }
    }

    pub fn with_max_steps(mut self, n: u32) -> Self {
        self.max_steps = n.max(1);
        self
    }

    pub fn with_system_prompt(mut self, p: impl Into<String>) -> Self {
        self.system_prompt = p.into();
        self
    }

    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// This agent with `tools` offered after its own (a session's MCP
    /// servers' tools): the same model, context and limits.
    pub fn with_more_tools(&self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        let mut agent = self.clone();
        agent.tools.extend(tools);
        agent
    }

    /// The request the model sees, rebuilt from the log. Through
    /// [`stockade_session::conversation`], so a tool call the log holds no
    /// result for (the process died while it ran) is answered with the
    /// interrupted result rather than poisoning every later request.
    pub fn messages(&self, records: &[Record]) -> Vec<ChatMessage> {
        let mut out = vec![ChatMessage::system(self.system_prompt.clone())];
        for event in stockade_session::conversation(records) {
            match event.as_ref() {
                Event::Message { role, content, .. } => out.push(match role {
                    Role::User => ChatMessage::user(content.clone()),
                    Role::Assistant => ChatMessage::assistant(content.clone()),
                    Role::System | Role::Context => ChatMessage::system(content.clone()),
                }),
                Event::AssistantToolCalls {
                    content,
                    reasoning,
                    calls,
                } => out.push(ChatMessage::assistant_tool_calls(
                    content.clone(),
                    reasoning.clone(),
                    calls
                        .iter()
                        .map(|c| ModelToolCall::new(&c.id, &c.name, &c.arguments))
                        .collect(),
                )),
                Event::ToolResult {
                    call_id, content, ..
                } => out.push(ChatMessage::tool(call_id.clone(), content.clone())),
                // Audit and knob events are for people and folds, not the model.
                Event::ApprovalAsked { .. }
                | Event::ApprovalDecided { .. }
                | Event::SandboxMode { .. }
                | Event::SandboxNetwork { .. }
                | Event::ApprovalPolicy { .. }
                | Event::HookRan(_)
                | Event::HostAsked { .. }
                | Event::HostAnswered { .. }
                | Event::PathAsked { .. }
                | Event::PathAnswered { .. } => {}
                Event::UserImage { mime_type, data } => out.push(ChatMessage::UserImage {
                    mime_type: mime_type.clone(),
                    data: data.clone(),
                }),
            }
        }
        out
    }

    fn note(&self, session: &Session, text: String) -> Result<(), SessionError> {
        session
            .append(Event::Message {
                role: Role::System,
                content: text,
                source: Some(SOURCE_AGENT.into()),
            })
            .map(|_| ())
    }

    /// Run one prompt to the end of the model's turn.
    pub async fn prompt(
        &self,
        session: &Session,
        text: &str,
        observer: &dyn Observer,
        cancel: &Cancel,
    ) -> Result<StopReason, AgentError> {
        self.prompt_with_images(session, text, &[], observer, cancel)
            .await
    }

    /// [`Self::prompt`] with images attached to the user's message (only
    /// for a model that takes them: the caller decides), each logged after
    /// the message so a resumed session sends them again.
    pub async fn prompt_with_images(
        &self,
        session: &Session,
        text: &str,
        images: &[Image],
        observer: &dyn Observer,
        cancel: &Cancel,
    ) -> Result<StopReason, AgentError> {
        session.append(Event::Message {
            role: Role::User,
            content: text.into(),
            source: None,
        })?;
        for image in images {
            session.append(Event::UserImage {
                mime_type: image.mime_type.clone(),
                data: image.data.clone(),
            })?;
        }
        let specs: Vec<ToolSpec> = self
            .tools
            .iter()
            .map(|t| ToolSpec::from(t.as_ref()))
            .collect();
        for _ in 0..self.max_steps {
            if cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            self.context.reconcile(session)?;
            let messages = session.with_records(|r| self.messages(r));
            let on_delta = |d: Delta| match d {
                Delta::Content(t) => observer.update(session, AgentUpdate::Text(t)),
                Delta::Reasoning(t) => observer.update(session, AgentUpdate::Reasoning(t)),
            };
            let turn = tokio::select! {
                t = self.model.complete(&messages, &specs, &on_delta) => t,
                _ = cancel.cancelled() => {
                    self.note(session, "the user cancelled this turn".into())?;
                    return Ok(StopReason::Cancelled);
                }
            };
            let turn = match turn {
                Ok(t) => t,
                Err(e) => {
                    // The session shows what went wrong; the caller gets it too.
                    self.note(session, format!("model error: {e}"))?;
                    return Err(e.into());
                }
            };
            if turn.tool_calls.is_empty() {
                session.append(Event::Message {
                    role: Role::Assistant,
                    content: turn.content,
                    source: None,
                })?;
                return Ok(self
                    .stop_hooks(session, StopReason::EndTurn, cancel, observer)
                    .await?);
            }
            session.append(Event::AssistantToolCalls {
                content: turn.content.clone(),
                reasoning: turn.reasoning.clone(),
                calls: turn
                    .tool_calls
                    .iter()
                    .map(|c| ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
            })?;
            // The user's `cancelled` answer to an approval ends the turn: the
            // prompt was cancelled before they responded, so neither the
            // rest of this step nor another model step runs.
            let mut answered_cancelled = false;
            for call in &turn.tool_calls {
                let output = if cancel.is_cancelled() || answered_cancelled {
                    ToolOutput::error(CANCELLED_BEFORE_IT_RAN)
                } else {
                    observer.update(
                        session,
                        AgentUpdate::ToolCallStarted {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        },
                    );
                    tokio::select! {
                        o = self.hooked_call(session, call, observer) => o?,
                        _ = cancel.cancelled() => {
                            // Dropping the call records an open approval as
                            // cancelled; one that never got an allow ran
                            // nothing.
                            let ran = matches!(
                                approval_of(session, &call.id),
                                None | Some(Some(ApprovalOutcome::AllowedOnce))
                            );
                            ToolOutput::error(if ran { CANCELLED_KILLED } else { CANCELLED_BEFORE_IT_RAN })
                        }
                    }
                };
                if output.ends_turn
                    || approval_of(session, &call.id) == Some(Some(ApprovalOutcome::Cancelled))
                {
                    answered_cancelled = true;
                }
                // Every call gets its result, so the log always replays into
                // a request the API accepts.
                session.append(Event::ToolResult {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    content: output.content.clone(),
                    is_error: output.is_error,
                })?;
                observer.update(
                    session,
                    AgentUpdate::ToolCallFinished {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        output,
                    },
                );
            }
            if cancel.is_cancelled() || answered_cancelled {
                return Ok(StopReason::Cancelled);
            }
        }
        self.note(
            session,
            format!("stopped after {} model steps", self.max_steps),
        )?;
        Ok(self
            .stop_hooks(session, StopReason::MaxSteps, cancel, observer)
            .await?)
    }

    /// The call between its `pre_tool` and `post_tool` hooks. A veto is the
    /// call's result; the tool never runs.
    async fn hooked_call(
        &self,
        session: &Session,
        call: &ModelToolCall,
        observer: &dyn Observer,
    ) -> Result<ToolOutput, SessionError> {
        let Some(hooks) = &self.hooks else {
            return Ok(self.call_tool(session, call).await);
        };
        let scope = || HookScope {
            tool: Some(&call.name),
            call_id: Some(&call.id),
        };
        let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
        let mut payload = serde_json::Map::new();
        payload.insert("tool".into(), call.name.clone().into());
        payload.insert("call_id".into(), call.id.clone().into());
        payload.insert("arguments".into(), arguments);
        let report = hook_reporter(observer, session);
        if let Verdict::Veto(reason) = hooks
            .run_reporting(
                session,
                HookEvent::PreTool,
                scope(),
                payload.clone(),
                &report,
            )
            .await?
        {
            return Ok(ToolOutput::error(reason));
        }
        let output = self.call_tool(session, call).await;
        if hooks.any(HookEvent::PostTool, Some(&call.name)) {
            payload.insert(
                "result".into(),
                serde_json::json!({"content": output.content, "is_error": output.is_error}),
            );
            hooks
                .run_reporting(session, HookEvent::PostTool, scope(), payload, &report)
                .await?;
        }
        Ok(output)
    }

    async fn call_tool(&self, session: &Session, call: &ModelToolCall) -> ToolOutput {
        let Some(tool) = self.tools.iter().find(|t| t.name() == call.name) else {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
            return ToolOutput::error(format!(
                "no tool named {:?}; tools: {}",
                call.name,
                names.join(", ")
            ));
        };
        let args: serde_json::Value =
            match serde_json::from_str(if call.arguments.trim().is_empty() {
                "{}"
            } else {
                &call.arguments
            }) {
                Ok(v) => v,
                Err(e) => {
                    return ToolOutput::error(format!(
                        "arguments for {} are not valid JSON: {e}",
                        call.name
                    ));
                }
            };
        let ctx = ToolContext {
            session: Some(session.clone()),
            call_id: call.id.clone(),
        };
        tool.call(&ctx, args).await
    }
}
