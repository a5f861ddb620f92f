//! A session whose last tool calls never got their results (the process was
//! killed while they ran) must not poison the next request: OpenAI-compatible
//! APIs refuse tool calls not followed by their tool messages.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::world;
use stockade_agent::agent::{Agent, Cancel, Silent, StopReason};
use stockade_agent::{PolicyContext, PolicyService};
use stockade_core::SandboxMode;
use stockade_model::{ModelConfig, OpenAiCompatible};
use stockade_session::{Event, INTERRUPTED_TOOL_RESULT, Role, ToolCall};
use stockade_testkit::scripted::{ScriptedReply, ScriptedServer};

fn agent(server: &ScriptedServer, ws: &std::path::Path) -> Agent {
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, ws));
    let model = OpenAiCompatible::with_api_key(
        ModelConfig {
            base_url: server.base_url(),
            api_key_env: String::new(),
            timeout: Duration::from_secs(10),
            max_retries: 0,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    Agent::new(
        Arc::new(model),
        Vec::new(),
        PolicyContext::new(policy, None, false),
    )
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "bash".into(),
        arguments: r#"{"command":"sleep 100"}"#.into(),
    }
}

#[tokio::test]
async fn calls_left_without_results_are_answered_as_interrupted_before_the_next_prompt() {
    let w = world();
    let session = w.store.create(&w.ws).unwrap();
    session
        .append(Event::Message {
            role: Role::User,
            content: "run three things".into(),
            source: None,
        })
        .unwrap();
    session
        .append(Event::AssistantToolCalls {
            content: String::new(),
            reasoning: None,
            calls: vec![call("call_a"), call("call_b"), call("call_c")],
        })
        .unwrap();
    // Only the second finished before the process died.
    session
        .append(Event::ToolResult {
            call_id: "call_b".into(),
            tool: "bash".into(),
            content: "done".into(),
            is_error: false,
        })
        .unwrap();
    // Resume from the file, as a new process would.
    let id = session.id().clone();
    drop(session);
    let session = w.store.open(&id).unwrap();

    let server = ScriptedServer::start(vec![ScriptedReply::text("ok")]).unwrap();
    let agent = agent(&server, &w.ws);
    let stop = agent
        .prompt(&session, "carry on", &Silent, &Cancel::default())
        .await
        .unwrap();
    assert_eq!(stop, StopReason::EndTurn);

    let requests = server.requests();
    let messages = requests[0]["messages"].as_array().unwrap();
    let at = messages
        .iter()
        .position(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .unwrap();
    let ids: Vec<&str> = messages[at]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c"]);
    // The recorded result first, then one interrupted result per unanswered
    // call in call order: every call id answered, before the new prompt.
    let tools: Vec<(&str, &str)> = messages[at + 1..at + 4]
        .iter()
        .map(|m| {
            assert_eq!(m["role"], "tool", "{m}");
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("call_b", "done"),
            ("call_a", INTERRUPTED_TOOL_RESULT),
            ("call_c", INTERRUPTED_TOOL_RESULT),
        ]
    );
    assert_eq!(messages[at + 4]["role"], "user");
    assert_eq!(messages[at + 4]["content"], "carry on");
    let tool_messages = messages.iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(tool_messages, 3);

    // The log itself is history and is not rewritten; the answer is the same
    // on every rebuild.
    let results = session.with_records(|rs| {
        rs.iter()
            .filter(|r| matches!(r.event, Event::ToolResult { .. }))
            .count()
    });
    assert_eq!(results, 1);
    let again = session.with_records(|rs| agent.messages(rs));
    let roles: Vec<&str> = again.iter().map(|m| m.role()).collect();
    let sent: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles[..sent.len()], sent[..]);
}
