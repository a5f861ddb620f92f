//! The conversation as a model request must show it, folded from the log.
//!
//! An OpenAI-compatible API refuses (HTTP 400) any request in which an
//! assistant message's tool calls are not each followed by a tool message. A
//! call loses its result whenever the process dies or the log cannot be
//! written between the `assistant/tool-calls` event and its `tool/result`
//! (kill -9, an editor disconnect, a full disk). Without repair every later
//! prompt of that session would be refused.
//!
//! The repair is a fold, applied the same way on every rebuild, rather than
//! events appended to the log: by the time anyone looks, the log may already
//! hold later messages after the unanswered calls (a prompt was appended, and
//! refused), and an appended result can no longer land where the API needs
//! it. The log stays what happened; the fold says what the model is shown.

use std::borrow::Cow;

use crate::{Event, Record, ToolCall};

/// The one result given to a tool call the log holds no result for. Its
/// outcome is unknown: the tool may not have started, or may have run fully
/// or in part, so the model is told to check before relying on it.
pub const INTERRUPTED_TOOL_RESULT: &str = "interrupted: this tool call did not finish (the session stopped while it ran) and its outcome is unknown; it may or may not have taken effect, so check before relying on it";

/// The `tool/result` standing in for `call`'s missing one.
pub fn interrupted_result(call: &ToolCall) -> Event {
    Event::ToolResult {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        content: INTERRUPTED_TOOL_RESULT.to_owned(),
        is_error: true,
    }
}

/// The log's events with every tool call answered, in an order the API
/// accepts: after each `assistant/tool-calls` come its recorded results, then
/// one [`interrupted_result`] per call still unanswered (in call order), all
/// before the next message or tool-calls event. A `tool/result` answering no
/// pending call (a repeat, or one recorded after the conversation moved on)
/// is left out: a tool message without its call is refused too. Every other
/// event passes through in place.
pub fn conversation(records: &[Record]) -> Vec<Cow<'_, Event>> {
    let mut out = Vec::with_capacity(records.len());
    // The calls of the last tool-calls event not answered yet, in call order.
    let mut pending: Vec<&ToolCall> = Vec::new();
    for record in records {
        match &record.event {
            Event::ToolResult { call_id, .. } => {
                if let Some(i) = pending.iter().position(|c| c.id == *call_id) {
                    pending.remove(i);
                    out.push(Cow::Borrowed(&record.event));
                }
            }
            Event::Message { .. } | Event::UserImage { .. } => {
                close(&mut pending, &mut out);
                out.push(Cow::Borrowed(&record.event));
            }
            Event::AssistantToolCalls { calls, .. } => {
                close(&mut pending, &mut out);
                pending = calls.iter().collect();
                out.push(Cow::Borrowed(&record.event));
            }
            // Not shown to the model, so they cannot break the pairing.
            Event::ApprovalAsked { .. }
            | Event::ApprovalDecided { .. }
            | Event::SandboxMode { .. }
            | Event::SandboxNetwork { .. }
            | Event::ApprovalPolicy { .. }
            | Event::HookRan(_)
            | Event::HostAsked { .. }
            | Event::HostAnswered { .. }
            | Event::PathAsked { .. }
            | Event::PathAnswered { .. } => out.push(Cow::Borrowed(&record.event)),
        }
    }
    close(&mut pending, &mut out);
    out
}

/// The calls of the log's last tool-calls event that have no result yet, in
/// call order: what a session stopped in the middle of.
pub fn unanswered_tool_calls(records: &[Record]) -> Vec<&ToolCall> {
    let mut pending: Vec<&ToolCall> = Vec::new();
    for record in records {
        match &record.event {
            Event::AssistantToolCalls { calls, .. } => pending = calls.iter().collect(),
            Event::ToolResult { call_id, .. } => pending.retain(|c| c.id != *call_id),
            Event::Message { .. } => pending.clear(),
            _ => {}
        }
    }
    pending
}

fn close<'a>(pending: &mut Vec<&'a ToolCall>, out: &mut Vec<Cow<'a, Event>>) {
    out.extend(
        pending
            .drain(..)
            .map(|call| Cow::Owned(interrupted_result(call))),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

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

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }
    }

    fn calls(ids: &[&str]) -> Event {
        Event::AssistantToolCalls {
            content: String::new(),
            reasoning: None,
            calls: ids.iter().map(|id| call(id)).collect(),
        }
    }

    fn result(id: &str, content: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            tool: "bash".into(),
            content: content.into(),
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

    fn fold(events: Vec<Event>) -> Vec<Event> {
        conversation(&records(events))
            .into_iter()
            .map(Cow::into_owned)
            .collect()
    }

    #[test]
    fn a_complete_log_passes_through_unchanged() {
        let events = vec![
            user("hi"),
            calls(&["a", "b"]),
            result("a", "1"),
            result("b", "2"),
            user("more"),
        ];
        assert_eq!(fold(events.clone()), events);
        assert!(unanswered_tool_calls(&records(events)).is_empty());
    }

    #[test]
    fn unanswered_calls_get_the_interrupted_result_before_the_next_message() {
        let events = vec![
            user("hi"),
            calls(&["a", "b", "c"]),
            result("b", "2"),
            user("again"),
        ];
        assert_eq!(
            unanswered_tool_calls(&records(events[..3].to_vec())),
            [&call("a"), &call("c")]
        );
        assert!(unanswered_tool_calls(&records(events.clone())).is_empty());
        assert_eq!(
            fold(events),
            vec![
                user("hi"),
                calls(&["a", "b", "c"]),
                result("b", "2"),
                interrupted_result(&call("a")),
                interrupted_result(&call("c")),
                user("again"),
            ]
        );
    }

    #[test]
    fn a_log_ending_in_calls_is_answered_and_late_results_are_dropped() {
        assert_eq!(
            fold(vec![calls(&["a"]), calls(&["b"])]),
            vec![
                calls(&["a"]),
                interrupted_result(&call("a")),
                calls(&["b"]),
                interrupted_result(&call("b")),
            ]
        );
        // A result after the conversation moved on, and a repeated one.
        assert_eq!(
            fold(vec![
                calls(&["a"]),
                result("a", "1"),
                result("a", "again"),
                user("x"),
                result("a", "late"),
            ]),
            vec![calls(&["a"]), result("a", "1"), user("x")]
        );
    }

    #[test]
    fn the_text_says_interrupted_and_unknown() {
        assert!(INTERRUPTED_TOOL_RESULT.contains("interrupted"));
        assert!(INTERRUPTED_TOOL_RESULT.contains("outcome is unknown"));
    }
}
