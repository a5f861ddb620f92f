//! What the editor is shown: the agent loop's updates as `session/update`
//! notifications while a prompt runs, and a session's log replayed as the
//! same notifications on `session/load`.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, ContentChunk, Diff, SessionId, SessionNotification, SessionUpdate,
    ToolCall, ToolCallContent, ToolCallId, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use stockade_agent::FileDiff;
use stockade_agent::agent::{AgentUpdate, Observer};
use stockade_agent::resolve_path;
use stockade_session::{Event, HookRun, Record, Role, Session};

use crate::log;

/// Sends one update; a failure means the client is gone, which the prompt
/// notices on its own (its response cannot be sent either), so it is only
/// logged.
pub(crate) fn send(cx: &ConnectionTo<Client>, id: &SessionId, update: SessionUpdate) {
    if let Err(e) = cx.send_notification(SessionNotification::new(id.clone(), update)) {
        log(format_args!("session {id}: cannot send an update: {e}"));
    }
}

fn text(t: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(t.into()))
}

/// The arguments as JSON, or the raw text when the model sent invalid JSON
/// (the client still sees what was asked).
fn arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Whether the call asks to run wider than the session's mode. Such a call
/// stays `pending` until the user allows it: it is not running yet.
pub(crate) fn asks_escalation(args: &Value) -> bool {
    args.get("sandbox_permissions")
        .is_some_and(|v| !v.is_null())
}

/// The editor's view of a call: a title, a kind and the file it touches,
/// its path absolute (a relative one is the session's `cwd`'s, as the tools
/// resolve it). A command's location is the directory it runs in.
pub(crate) fn describe(
    name: &str,
    args: &Value,
    cwd: &Path,
) -> (String, ToolKind, Vec<ToolCallLocation>) {
    let field = |k: &str| args.get(k).and_then(Value::as_str);
    let at = |p: &str| ToolCallLocation::new(resolve_path(cwd, Path::new(p)));
    match name {
        "bash" => (
            field("command").map_or_else(|| "bash".to_owned(), str::to_owned),
            ToolKind::Execute,
            vec![at(field("workdir").unwrap_or(""))],
        ),
        "read" | "write" | "edit" => {
            let path = field("path").unwrap_or("");
            let kind = if name == "read" {
                ToolKind::Read
            } else {
                ToolKind::Edit
            };
            let locations = if path.is_empty() {
                Vec::new()
            } else {
                vec![at(path)]
            };
            (
                format!("{name} {path}").trim_end().to_owned(),
                kind,
                locations,
            )
        }
        "task" => (
            format!("task: {}", field("description").unwrap_or("")),
            ToolKind::Think,
            Vec::new(),
        ),
        "job_output" => {
            let id = args.get("job_id").map(Value::to_string).unwrap_or_default();
            (
                format!("job_output {id}").trim_end().to_owned(),
                ToolKind::Read,
                Vec::new(),
            )
        }
        other => (other.to_owned(), ToolKind::Other, Vec::new()),
    }
}

pub(crate) fn tool_call(id: &str, name: &str, raw_arguments: &str, cwd: &Path) -> ToolCall {
    let args = arguments(raw_arguments);
    let (title, kind, locations) = describe(name, &args, cwd);
    ToolCall::new(ToolCallId::new(id), title)
        .kind(kind)
        .status(ToolCallStatus::Pending)
        .locations(locations)
        .raw_input(args)
}

/// A finished call: the change it made to a file first (an editor shows it
/// as a diff), what only the user is shown (a task's child calls), then its
/// result as the model read it.
fn finished(
    id: &str,
    content: &str,
    is_error: bool,
    diff: Option<&FileDiff>,
    before: Option<&str>,
) -> ToolCallUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let mut shown = Vec::new();
    if let Some(d) = diff {
        shown.push(ToolCallContent::Diff(
            Diff::new(d.path.clone(), d.new_text.clone()).old_text(d.old_text.clone()),
        ));
    }
    if let Some(before) = before {
        shown.push(text_content(before));
    }
    shown.push(text_content(content));
    ToolCallUpdate::new(
        ToolCallId::new(id),
        ToolCallUpdateFields::new().status(status).content(shown),
    )
}

fn text_content(text: &str) -> ToolCallContent {
    ToolCallContent::Content(Content::new(ContentBlock::from(text.to_owned())))
}

/// A hook that did not simply succeed, shown as a finished call of its own
/// (`hook-<seq>`, its record's place in the log): what happened, then its
/// stderr's end.
pub(crate) fn hook_call(seq: u64, run: &HookRun) -> ToolCall {
    let mut what = Vec::new();
    if run.vetoed {
        what.push("stopped the call".to_owned());
    }
    if run.runner_failed {
        what.push("the sandbox runner failed".to_owned());
    } else if let Some(e) = &run.error {
        what.push(format!("could not run: {e}"));
    }
    if run.denied {
        let under = run.mode.map(|m| format!(" under {m}")).unwrap_or_default();
        what.push(format!("the sandbox refused something it tried{under}"));
    }
    if run.timed_out {
        what.push("timed out and was killed".to_owned());
    }
    match (run.exit_code, run.signal) {
        (Some(c), _) if c != 0 => what.push(format!("exit code {c}")),
        (None, Some(s)) => what.push(format!("killed by signal {s}")),
        _ => {}
    }
    let mut text = format!(
        "hook {} (hooks[{}]): {}",
        run.event,
        run.index,
        what.join("; ")
    );
    let stderr = run.stderr.trim_end();
    if !stderr.is_empty() {
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        text.push_str("\nstderr:\n");
        text.push_str(&tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    ToolCall::new(
        ToolCallId::new(format!("hook-{seq}")),
        format!("hook {}: {}", run.event, run.command),
    )
    .kind(ToolKind::Other)
    .status(ToolCallStatus::Failed)
    .content(vec![text_content(&text)])
}

/// A running call's output so far, replacing what was shown of it before.
pub(crate) fn output_so_far(id: &str, text: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        ToolCallId::new(id),
        ToolCallUpdateFields::new().content(vec![text_content(text)]),
    )
}

pub(crate) fn in_progress(id: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        ToolCallId::new(id),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    )
}

/// Streams one prompt's updates to the client.
pub(crate) struct Streamer {
    pub cx: ConnectionTo<Client>,
    pub id: SessionId,
    /// The session's workspace: relative paths in calls are its.
    pub cwd: PathBuf,
    /// The bash calls running now (a question about a host is shown on
    /// the newest).
    pub commands: crate::live::Commands,
}

impl Observer for Streamer {
    fn update(&self, _: &Session, update: AgentUpdate) {
        match update {
            AgentUpdate::Text(t) => send(
                &self.cx,
                &self.id,
                SessionUpdate::AgentMessageChunk(text(t)),
            ),
            AgentUpdate::Reasoning(t) => {
                send(
                    &self.cx,
                    &self.id,
                    SessionUpdate::AgentThoughtChunk(text(t)),
                );
            }
            AgentUpdate::ToolCallStarted {
                id,
                name,
                arguments,
            } => {
                let call = tool_call(&id, &name, &arguments, &self.cwd);
                let escalating = call.raw_input.as_ref().is_some_and(asks_escalation);
                if name == "bash" {
                    self.commands
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((id.clone(), call.title.clone()));
                }
                send(&self.cx, &self.id, SessionUpdate::ToolCall(call));
                // An escalating call runs only once allowed; the answerer
                // marks it in progress then.
                if !escalating {
                    send(
                        &self.cx,
                        &self.id,
                        SessionUpdate::ToolCallUpdate(in_progress(&id)),
                    );
                }
            }
            AgentUpdate::HookFailed { seq, run } => send(
                &self.cx,
                &self.id,
                SessionUpdate::ToolCall(hook_call(seq, &run)),
            ),
            AgentUpdate::ToolCallFinished { id, output, .. } => {
                self.commands
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .retain(|(c, _)| *c != id);
                send(
                    &self.cx,
                    &self.id,
                    SessionUpdate::ToolCallUpdate(finished(
                        &id,
                        &output.content,
                        output.is_error,
                        output.diff.as_ref(),
                        output.shown.as_deref(),
                    )),
                );
            }
        }
    }
}

/// What the editor is shown for a call the log holds no result for: the
/// process running it died (kill -9, a crash, the editor ending it) before
/// the call finished.
pub(crate) const STOPPED_MID_CALL: &str =
    "the agent stopped before this call finished; its outcome is unknown";

/// A call that will never finish: failed, saying why.
fn stopped(id: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        ToolCallId::new(id),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Failed)
            .content(vec![text_content(STOPPED_MID_CALL)]),
    )
}

/// The conversation as the user saw it, from the log alone (so without the
/// diffs, which are not logged). Policy-context and loop notes are for the
/// model, audit and knob events for people reading the log, so neither is
/// replayed. `cwd` is the session's workspace.
///
/// Every call ends: one without a result is failed with
/// [`STOPPED_MID_CALL`] where the model's conversation gives it its
/// interrupted result ([`stockade_session::conversation()`]: before the
/// next message or tool calls, or at the end of the log). Only the calls
/// still unanswered at the end while `in_flight` (a prompt of this process
/// is running them) are left open: their results are on their way.
pub(crate) fn replay(records: &[Record], cwd: &Path, in_flight: bool) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    // The last tool calls' ids that have no result yet, in call order.
    let mut pending: Vec<&str> = Vec::new();
    let close = |pending: &mut Vec<&str>, out: &mut Vec<SessionUpdate>| {
        out.extend(
            pending
                .drain(..)
                .map(|id| SessionUpdate::ToolCallUpdate(stopped(id))),
        );
    };
    for r in records {
        match &r.event {
            Event::Message { .. } | Event::UserImage { .. } | Event::AssistantToolCalls { .. } => {
                close(&mut pending, &mut out);
            }
            // One result answers one call, as in the fold.
            Event::ToolResult { call_id, .. } => {
                if let Some(i) = pending.iter().position(|id| *id == call_id.as_str()) {
                    pending.remove(i);
                }
            }
            _ => {}
        }
        match &r.event {
            Event::Message {
                role: Role::User,
                content,
                ..
            } => out.push(SessionUpdate::UserMessageChunk(text(content.clone()))),
            Event::Message {
                role: Role::Assistant,
                content,
                ..
            } => out.push(SessionUpdate::AgentMessageChunk(text(content.clone()))),
            Event::AssistantToolCalls {
                content,
                reasoning,
                calls,
            } => {
                if let Some(r) = reasoning.as_ref().filter(|r| !r.is_empty()) {
                    out.push(SessionUpdate::AgentThoughtChunk(text(r.clone())));
                }
                if !content.is_empty() {
                    out.push(SessionUpdate::AgentMessageChunk(text(content.clone())));
                }
                pending = calls.iter().map(|c| c.id.as_str()).collect();
                for c in calls {
                    out.push(SessionUpdate::ToolCall(tool_call(
                        &c.id,
                        &c.name,
                        &c.arguments,
                        cwd,
                    )));
                }
            }
            Event::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => out.push(SessionUpdate::ToolCallUpdate(finished(
                call_id, content, *is_error, None, None,
            ))),
            Event::Message { .. }
            | Event::UserImage { .. }
            | Event::ApprovalAsked { .. }
            | Event::ApprovalDecided { .. }
            | Event::SandboxMode { .. }
            | Event::SandboxNetwork { .. }
            | Event::ApprovalPolicy { .. }
            | Event::HostAsked { .. }
            | Event::HostAnswered { .. }
            | Event::PathAsked { .. }
            | Event::PathAnswered { .. } => {}
            Event::HookRan(run) => {
                if run.failed() {
                    out.push(SessionUpdate::ToolCall(hook_call(r.seq, run)));
                }
            }
        }
    }
    if !in_flight {
        close(&mut pending, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use stockade_session::ToolCall as LoggedCall;

    fn records(events: Vec<Event>) -> Vec<Record> {
        events
            .into_iter()
            .zip(1..)
            .map(|(event, seq)| Record {
                seq,
                at_unix_ms: 0,
                event,
            })
            .collect()
    }

    fn calls(ids: &[&str]) -> Event {
        Event::AssistantToolCalls {
            content: String::new(),
            reasoning: None,
            calls: ids
                .iter()
                .map(|id| LoggedCall {
                    id: (*id).into(),
                    name: "bash".into(),
                    arguments: r#"{"command":"sleep 600"}"#.into(),
                })
                .collect(),
        }
    }

    fn result(id: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            tool: "bash".into(),
            content: "ok".into(),
            is_error: false,
        }
    }

    fn user(text: &str) -> Event {
        Event::Message {
            role: Role::User,
            content: text.into(),
            source: None,
        }
    }

    /// Each update in a word: `user`, `call ID`, `ID completed`, `ID failed
    /// (stopped)` for the stand-in.
    fn shown(events: Vec<Event>, in_flight: bool) -> Vec<String> {
        replay(&records(events), Path::new("/w"), in_flight)
            .into_iter()
            .map(|u| match u {
                SessionUpdate::UserMessageChunk(_) => "user".to_owned(),
                SessionUpdate::ToolCall(c) => format!("call {}", c.tool_call_id.0),
                SessionUpdate::ToolCallUpdate(u) => {
                    let stopped = serde_json::to_string(&u.fields.content)
                        .unwrap()
                        .contains(STOPPED_MID_CALL);
                    format!(
                        "{} {:?}{}",
                        u.tool_call_id.0,
                        u.fields.status.unwrap(),
                        if stopped { " (stopped)" } else { "" }
                    )
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_call_the_log_holds_no_result_for_ends_failed() {
        assert_eq!(
            shown(vec![user("go"), calls(&["a", "b"]), result("a")], false),
            [
                "user",
                "call a",
                "call b",
                "a Completed",
                "b Failed (stopped)"
            ]
        );
    }

    #[test]
    fn a_call_interrupted_earlier_fails_where_the_conversation_moved_on() {
        assert_eq!(
            shown(
                vec![
                    user("go"),
                    calls(&["a"]),
                    user("again"),
                    calls(&["c"]),
                    result("c")
                ],
                false
            ),
            [
                "user",
                "call a",
                "a Failed (stopped)",
                "user",
                "call c",
                "c Completed"
            ]
        );
    }

    proptest::proptest! {
        /// The editor is shown a call as stopped exactly where the model is
        /// given its interrupted result, in the same order, whatever the
        /// log holds (repeated ids, results for no call, knob events).
        #[test]
        fn the_editor_and_the_model_agree_on_which_calls_were_cut_short(
            steps in proptest::collection::vec((0u8..5, proptest::collection::vec(0u8..4, 0..4)), 0..24)
        ) {
            let events: Vec<Event> = steps
                .iter()
                .map(|(kind, ids)| {
                    let ids: Vec<String> = ids.iter().map(|i| format!("c{i}")).collect();
                    let first = ids.first().cloned().unwrap_or_else(|| "c0".into());
                    match kind {
                        0 => user("go"),
                        1 => calls(&ids.iter().map(String::as_str).collect::<Vec<_>>()),
                        2 | 3 => result(&first),
                        _ => Event::SandboxMode {
                            mode: stockade_core::SandboxMode::ReadOnly,
                            source: stockade_session::KnobSource::User,
                        },
                    }
                })
                .collect();
            let records = records(events);
            let model: Vec<String> = stockade_session::conversation(&records)
                .into_iter()
                .filter_map(|e| match e {
                    std::borrow::Cow::Owned(Event::ToolResult { call_id, .. }) => Some(call_id),
                    _ => None,
                })
                .collect();
            let editor: Vec<String> = replay(&records, Path::new("/w"), false)
                .into_iter()
                .filter_map(|u| match u {
                    SessionUpdate::ToolCallUpdate(u)
                        if serde_json::to_string(&u.fields.content)
                            .unwrap()
                            .contains(STOPPED_MID_CALL) =>
                    {
                        Some(u.tool_call_id.0.to_string())
                    }
                    _ => None,
                })
                .collect();
            proptest::prop_assert_eq!(editor, model);
        }
    }

    #[test]
    fn calls_a_running_prompt_still_runs_are_left_open() {
        assert_eq!(
            shown(vec![user("go"), calls(&["a"])], true),
            ["user", "call a"]
        );
        // Earlier interrupted ones still end.
        assert_eq!(
            shown(vec![calls(&["a"]), user("go"), calls(&["b"])], true),
            ["call a", "a Failed (stopped)", "user", "call b"]
        );
    }
}
