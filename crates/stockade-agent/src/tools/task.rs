//! `task`: delegate a sub-task to a child agent session.
//!
//! The child is created with [`SessionStore::create_child`]: its log is its
//! own, its header names the parent, and the parent's explicit knobs (mode,
//! network, approval) are seeded into it as delegated, so it can never run
//! wider than the parent did at the moment of delegation. It runs on the
//! same executor, provider, approval chain and model as the parent; its
//! escalations still ask the user, shown under the parent's task call, and
//! a front end mounts what its commands ask through while it runs
//! ([`Delegations::on_child_start`]). It is offered no `task` tool of its
//! own: delegation is one level deep.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use stockade_session::{Event, Role, Session, SessionId, SessionStore};
use stockade_shell::BoxFuture;

use crate::agent::{Agent, AgentUpdate, Cancel, Observer, StopReason};
use crate::tool::{Tool, ToolContext, ToolOutput, ToolProgress};
use crate::tools::jobs::{Jobs, lock_jobs};

/// Where a delegated session came from: its parent and the parent's `task`
/// call that runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub parent: SessionId,
    pub call_id: String,
}

/// What a front end mounts for a running child (e.g. the channel its
/// commands ask the user through), held until the child's task ends and
/// then dropped.
pub type ChildMount = Box<dyn Send>;

/// Called as a child starts, once it is registered (so [`Delegations::origin`]
/// finds it), with the child and where it came from.
pub type ChildStart = Arc<dyn Fn(&Session, &Delegation) -> Option<ChildMount> + Send + Sync>;

/// The running children of this process's sessions. A front end asks it
/// where to show a child's questions: under the task call of the session
/// the user is looking at.
#[derive(Default)]
pub struct Delegations {
    running: Mutex<HashMap<SessionId, Delegation>>,
    /// Set by the front end after it is composed (it holds this registry,
    /// so it cannot be passed in when the registry is made).
    on_start: Mutex<Option<ChildStart>>,
}

impl std::fmt::Debug for Delegations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegations")
            .field("running", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl Delegations {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Delegation>> {
        // Every change is one map operation: a panic elsewhere leaves it whole.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Call `start` as each later child starts; what it returns is dropped
    /// when that child's task ends, however it ends. Replaces an earlier one.
    pub fn on_child_start(&self, start: ChildStart) {
        *self.on_start.lock().unwrap_or_else(PoisonError::into_inner) = Some(start);
    }

    fn started(&self, child: &Session, delegation: &Delegation) -> Option<ChildMount> {
        // Cloned out so the hook runs without this lock held.
        let start = self
            .on_start
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        start(child, delegation)
    }

    /// The session the user sees for `session` and the call there that
    /// runs it, when `session` is a running child (followed up to the
    /// top); `None` for a session that is not delegated.
    pub fn origin(&self, session: &SessionId) -> Option<Delegation> {
        let running = self.lock();
        let mut found = running.get(session)?.clone();
        // Bounded by the map's size, so a cycle (which creation order makes
        // impossible) cannot loop forever.
        for _ in 0..running.len() {
            match running.get(&found.parent) {
                Some(up) => found = up.clone(),
                None => break,
            }
        }
        Some(found)
    }

    fn enter(self: &Arc<Self>, child: SessionId, delegation: Delegation) -> Entered {
        self.lock().insert(child.clone(), delegation);
        Entered {
            registry: self.clone(),
            child,
        }
    }
}

/// Removes the child from the registry when the task ends, however it ends.
struct Entered {
    registry: Arc<Delegations>,
    child: SessionId,
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.child);
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskArgs {
    /// A short title, shown to the user.
    description: String,
    /// Everything the child needs: it sees none of the parent's conversation.
    prompt: String,
}

/// Called when a child session ends (its task finished, failed or was
/// dropped), e.g. to release what the provider allocated for it.
pub type SessionEnd = Arc<dyn Fn(&Session) + Send + Sync>;

pub struct TaskTool {
    child_agent: Arc<Agent>,
    store: SessionStore,
    delegations: Arc<Delegations>,
    progress: Option<Arc<dyn ToolProgress>>,
    jobs: Option<Jobs>,
    on_end: Option<SessionEnd>,
}

impl TaskTool {
    /// `child_agent` runs every child: the parent's tools without `task`.
    pub fn new(
        child_agent: Arc<Agent>,
        store: SessionStore,
        delegations: Arc<Delegations>,
    ) -> Self {
        Self {
            child_agent,
            store,
            delegations,
            progress: None,
            jobs: None,
            on_end: None,
        }
    }

    /// Show the child's tool calls under the task call while it runs.
    pub fn with_progress(mut self, sink: Arc<dyn ToolProgress>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The shell tool's background jobs: a child's are killed when its task
    /// ends, so nothing it started outlives the session that could read it.
    pub fn with_jobs(mut self, jobs: Jobs) -> Self {
        self.jobs = Some(jobs);
        self
    }

    pub fn with_session_end(mut self, on_end: SessionEnd) -> Self {
        self.on_end = Some(on_end);
        self
    }

    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: TaskArgs = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(format!("invalid arguments for task: {e}")),
        };
        let Some(parent) = &ctx.session else {
            return ToolOutput::error("task needs a session to delegate from");
        };
        let child = match self.store.create_child(parent, parent.header().cwd.clone()) {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("cannot create the task's session: {e}")),
        };
        let delegation = Delegation {
            parent: parent.id().clone(),
            call_id: ctx.call_id.clone(),
        };
        let _entered = self
            .delegations
            .enter(child.id().clone(), delegation.clone());
        // Dropped before `_entered` (locals drop in reverse), after `_ended`.
        let _mounted = self.delegations.started(&child, &delegation);
        let _ended = Ended {
            tool: self,
            child: &child,
        };
        let view = Nested {
            title: args.description,
            calls: Mutex::default(),
            sink: self.progress.clone(),
            ctx: ctx.clone(),
        };
        view.show();
        if let Err(e) = self.child_agent.session_started(&child, "task").await {
            return ToolOutput::error(format!("task session {}: {e}", child.id()));
        }
        // The parent's cancellation drops this future, and with it the
        // child's: its running commands are killed with their groups.
        let stop = self
            .child_agent
            .prompt(&child, &args.prompt, &view, &Cancel::default())
            .await;
        let last = last_answer(&child);
        let footer = format!("[task session {}]", child.id());
        let output = match stop {
            Ok(StopReason::EndTurn) => ToolOutput::ok(format!("{last}\n\n{footer}")),
            Ok(StopReason::MaxSteps) => ToolOutput::error(format!(
                "the task stopped at its step limit before finishing. Its last answer: {last}\n\n{footer}"
            )),
            // Only the child's own question can cancel it here (the
            // parent's cancellation drops this future): the user's
            // `cancelled` answer ends the parent's turn too.
            Ok(StopReason::Cancelled) => ToolOutput {
                ends_turn: true,
                ..ToolOutput::error(format!("the task was cancelled\n\n{footer}"))
            },
            Err(e) => ToolOutput::error(format!("the task failed: {e}\n\n{footer}")),
        };
        output.with_shown(view.text())
    }
}

/// Ends the child when the task call ends, however it ends (a dropped call
/// included): its background jobs are killed, then the session end runs.
struct Ended<'a> {
    tool: &'a TaskTool,
    child: &'a Session,
}

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        if let Some(jobs) = &self.tool.jobs {
            let mut jobs = lock_jobs(jobs);
            jobs.retain(|_, j| {
                let mine = j.session.as_ref() == Some(self.child.id());
                if mine {
                    j.handle.kill();
                }
                !mine
            });
        }
        if let Some(end) = &self.tool.on_end {
            end(self.child);
        }
    }
}

/// The child's last assistant message, or a note that it gave none.
fn last_answer(child: &Session) -> String {
    child
        .with_records(|records| {
            records.iter().rev().find_map(|r| match &r.event {
                Event::Message {
                    role: Role::Assistant,
                    content,
                    ..
                } if !content.trim().is_empty() => Some(content.clone()),
                _ => None,
            })
        })
        .unwrap_or_else(|| "(the task gave no answer)".to_owned())
}

/// One child call as shown under the task call.
struct Shown {
    id: String,
    line: String,
    state: &'static str,
}

/// The child's progress, shown as the task call's content: a line per
/// child tool call, marked as it runs and ends.
struct Nested {
    title: String,
    calls: Mutex<Vec<Shown>>,
    sink: Option<Arc<dyn ToolProgress>>,
    ctx: ToolContext,
}

/// A call's arguments on one short line.
fn summary(name: &str, arguments: &str) -> String {
    let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let field = |k: &str| args.get(k).and_then(serde_json::Value::as_str);
    let what = match name {
        "bash" => field("command"),
        "read" | "write" | "edit" => field("path"),
        _ => None,
    };
    let mut line = match what {
        Some(w) => format!("{name} {w}"),
        None => name.to_owned(),
    };
    let line_end = line.find('\n').unwrap_or(line.len()).min(120);
    let mut end = line_end;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    if end < line.len() {
        line.truncate(end);
        line.push('…');
    }
    line
}

impl Nested {
    fn lock(&self) -> MutexGuard<'_, Vec<Shown>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn text(&self) -> String {
        let mut text = format!("task: {}\n", self.title);
        for c in self.lock().iter() {
            let _ = writeln!(text, "  {} {}", c.state, c.line);
        }
        text
    }

    fn show(&self) {
        if let Some(sink) = &self.sink {
            sink.progress(&self.ctx, &self.text());
        }
    }
}

impl Observer for Nested {
    fn update(&self, _: &Session, update: AgentUpdate) {
        match update {
            AgentUpdate::ToolCallStarted {
                id,
                name,
                arguments,
            } => self.lock().push(Shown {
                id,
                line: summary(&name, &arguments),
                state: "running",
            }),
            AgentUpdate::ToolCallFinished { id, output, .. } => {
                if let Some(c) = self.lock().iter_mut().rev().find(|c| c.id == id) {
                    c.state = if output.is_error { "failed" } else { "done" };
                }
            }
            AgentUpdate::HookFailed { seq, run } => self.lock().push(Shown {
                id: format!("hook-{seq}"),
                line: format!("hook {} (hooks[{}])", run.event, run.index),
                state: "failed",
            }),
            AgentUpdate::Text(_) | AgentUpdate::Reasoning(_) => return,
        }
        self.show();
    }
}

impl Tool for TaskTool {
    fn name(&self) -> &'static str {
        "task"
    }

    fn description(&self) -> String {
        "Delegate a self-contained sub-task to a helper agent and get its final answer. The helper has the same tools (except task) and runs under the same sandbox, never a wider one; it sees none of this conversation, so the prompt must say everything it needs. Use it for independent work whose details you do not need to see.".into()
    }

    fn schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "description": { "type": "string", "description": "A short title for the sub-task, 3-8 words." },
                "prompt": { "type": "string", "description": "The complete instructions for the helper." }
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        })
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.run(ctx, args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_one_short_line() {
        assert_eq!(summary("bash", r#"{"command":"ls -la"}"#), "bash ls -la");
        assert_eq!(summary("write", r#"{"path":"a.txt"}"#), "write a.txt");
        assert_eq!(summary("job_output", r#"{"job_id":1}"#), "job_output");
        assert_eq!(summary("bash", "not json"), "bash");
        let long = summary("bash", &format!(r#"{{"command":"{}"}}"#, "é".repeat(200)));
        assert!(long.ends_with('…') && long.len() <= 124, "{long}");
        assert_eq!(summary("bash", r#"{"command":"a\nb"}"#), "bash a…");
    }

    #[test]
    fn an_origin_is_followed_to_the_top() {
        let reg = Arc::new(Delegations::default());
        let id = |s: &str| -> SessionId { s.repeat(32).parse().unwrap() };
        let (root, mid, leaf) = (id("a"), id("b"), id("c"));
        let _m = reg.enter(
            mid.clone(),
            Delegation {
                parent: root.clone(),
                call_id: "t1".into(),
            },
        );
        {
            let _l = reg.enter(
                leaf.clone(),
                Delegation {
                    parent: mid.clone(),
                    call_id: "t2".into(),
                },
            );
            let o = reg.origin(&leaf).unwrap();
            assert_eq!((o.parent, o.call_id.as_str()), (root.clone(), "t1"));
        }
        // Ended: no longer delegated.
        assert!(reg.origin(&leaf).is_none());
        assert!(reg.origin(&root).is_none());
        assert_eq!(reg.origin(&mid).unwrap().call_id, "t1");
    }
}
