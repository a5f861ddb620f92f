//! The `task` tool end to end through `stockade acp`, with the scripted
//! model and the real Landlock runner: a child session does the sub-task
//! and its answer returns to the parent; its calls are shown nested under
//! the task call; its log is its own, linked to the parent; it is never
//! wider than the parent at delegation, and its escalation asks the user in
//! the parent's session, under the task call.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, SessionUpdate, SetSessionModeRequest, StopReason, ToolCallContent,
};
use common::{Answer, Seen, Setup, World, call, escalated, last_content, say, touch};
use serde_json::{Value, json};

const TASK: &str = "[agent]\ntask = true\n";

use common::session_logs as logs;

/// (parent, child) logs of a world with one delegation.
fn parent_and_child(state: &Path) -> ((Value, Vec<Value>), (Value, Vec<Value>)) {
    let mut all = logs(state);
    assert_eq!(all.len(), 2, "{all:?}");
    all.sort_by_key(|(h, _)| h["parent"].is_string());
    let child = all.pop().unwrap();
    let parent = all.pop().unwrap();
    (parent, child)
}

fn task(description: &str, prompt: &str) -> Value {
    json!({ "description": description, "prompt": prompt })
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The texts shown as the content of `call_id`'s updates, in order.
fn shown(seen: &Seen, call_id: &str) -> Vec<String> {
    let mut out = Vec::new();
    for n in seen.updates() {
        if let SessionUpdate::ToolCallUpdate(u) = n.update
            && &*u.tool_call_id.0 == call_id
        {
            for c in u.fields.content.unwrap_or_default() {
                if let ToolCallContent::Content(c) = c
                    && let ContentBlock::Text(t) = c.content
                {
                    out.push(t.text);
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_runs_in_a_child_session_and_its_answer_returns() {
    let script = vec![
        call(
            "call-1",
            "task",
            task("make the marker", "create child-marker"),
        ),
        // The child's turn.
        call("child-1", "bash", touch("child-marker")),
        say("child-marker is there"),
        // The parent again.
        say("done"),
    ];
    let Some(w) = World::new(script) else { return };
    let setup = Setup {
        mode: "workspace-write",
        approval: None,
        presets: false,
    };
    let server = w.server_at(&setup, &w.config_path(), &w.state, |t| {
        format!("{t}\n{TASK}")
    });
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(&w, server, Answer::Reject, seen.clone(), "delegate it").await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(w.ws.join("child-marker").exists());

    let requests = w.model.requests();
    assert_eq!(requests.len(), 4);
    // The parent is offered task; the child is not (one level deep).
    assert!(tool_names(&requests[0]).contains(&"task".to_owned()));
    assert!(!tool_names(&requests[1]).contains(&"task".to_owned()));
    assert!(tool_names(&requests[1]).contains(&"bash".to_owned()));
    // The child sees its prompt, not the parent's conversation.
    let child_first = requests[1]["messages"].to_string();
    assert!(child_first.contains("create child-marker"));
    assert!(!child_first.contains("delegate it"));
    // The child's answer is the task's result.
    let result = last_content(&requests[3]["messages"]);
    assert!(result.starts_with("child-marker is there"), "{result}");

    // Shown nested under the task call, never as the parent's own calls.
    let nested = shown(&seen, "call-1");
    assert!(
        nested.iter().any(|t| t.contains("task: make the marker")
            && t.contains("running bash touch child-marker")),
        "{nested:?}"
    );
    // Finished: the child's calls, then the answer the model read.
    let [.., calls, answer] = nested.as_slice() else {
        panic!("{nested:?}")
    };
    assert!(calls.contains("done bash touch child-marker"), "{nested:?}");
    assert_eq!(answer, &result);
    assert!(
        seen.updates().iter().all(|n| !matches!(&n.update,
            SessionUpdate::ToolCall(c) if &*c.tool_call_id.0 == "child-1")),
        "a child call surfaced as the parent's"
    );
    assert_eq!(
        seen.statuses("call-1").last(),
        Some(&agent_client_protocol::v1::schema::ToolCallStatus::Completed)
    );

    // Two logs: the child's header names the parent.
    let ((ph, pe), (ch, ce)) = parent_and_child(&w.state);
    assert_eq!(ch["parent"], ph["id"]);
    assert_eq!(ch["cwd"], ph["cwd"]);
    assert!(
        ce.iter()
            .any(|e| e["type"] == "tool/result" && e["call_id"] == "child-1")
    );
    assert!(
        pe.iter()
            .any(|e| e["type"] == "tool/result" && e["call_id"] == "call-1")
    );
    assert!(!pe.iter().any(|e| e["call_id"] == "child-1"));
    // The parent set no knob, so none was seeded: both fold to the default.
    assert!(!ce.iter().any(|e| e["type"] == "sandbox/mode"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_is_never_wider_than_its_parent_and_asks_through_it() {
    for who in stockade_testkit::users::users() {
        never_wider(who).await;
    }
}

async fn never_wider(who: stockade_testkit::users::Who) {
    let script = vec![
        call("call-1", "task", task("write files", "create the files")),
        // Denied: the parent switched to read-only before delegating.
        call("child-1", "bash", touch("plain")),
        // Asked in the parent's session, under the task call; allowed once.
        call(
            "child-2",
            "bash",
            escalated(touch("granted"), "workspace-write"),
        ),
        // The grant was for one call.
        call("child-3", "bash", touch("again")),
        say("one of three"),
        say("done"),
    ];
    let Some(w) = World::new(script) else { return };
    let setup = Setup {
        mode: "workspace-write",
        approval: Some("ask"),
        presets: true,
    };
    let server = w
        .server_at(&setup, &w.config_path(), &w.state, |t| {
            format!("{t}\n{TASK}")
        })
        .run_as(who);
    w.own(who);
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let (sid, stop) = common::run(server, Answer::Allow, seen.clone(), async move |cx| {
        let id = common::open_session(&cx, &ws).await?;
        cx.send_request(SetSessionModeRequest::new(id.clone(), "read-only"))
            .block_task()
            .await?;
        let stop = cx
            .send_request(common::prompt(&id, "delegate it"))
            .block_task()
            .await?
            .stop_reason;
        Ok((id, stop))
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(!w.ws.join("plain").exists());
    assert!(w.ws.join("granted").exists());
    assert!(!w.ws.join("again").exists());

    // One question, in the session the user sees, under the task call.
    let asks = seen.asks();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].session_id, sid);
    assert_eq!(&*asks[0].tool_call.tool_call_id.0, "call-1");
    let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
    assert!(title.starts_with("task: bash under"), "{title}");
    assert!(title.contains("touch granted"), "{title}");

    // The child was seeded with the parent's override, tagged delegated.
    let ((ph, _), (_, ce)) = parent_and_child(&w.state);
    let seeded: Vec<&Value> = ce.iter().filter(|e| e["type"] == "sandbox/mode").collect();
    assert_eq!(seeded.len(), 1, "{ce:?}");
    assert_eq!(seeded[0]["mode"], "read-only");
    assert_eq!(seeded[0]["source"]["kind"], "delegated");
    assert_eq!(seeded[0]["source"]["parent"], ph["id"]);
    // The child's approvals are in its own log.
    assert!(
        ce.iter()
            .any(|e| e["type"] == "approval/decided" && e["call_id"] == "child-2")
    );

    let requests = w.model.requests();
    let results: Vec<String> = requests[2..5]
        .iter()
        .map(|r| last_content(&r["messages"]))
        .collect();
    assert!(
        results[0].starts_with("[sandbox: file access denied under read-only mode]"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("exit code: 0"), "{}", results[1]);
    assert!(
        results[2].starts_with("[sandbox: file access denied under read-only mode]"),
        "{}",
        results[2]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_answer_to_a_childs_question_ends_the_parents_turn() {
    let script = vec![
        call("call-1", "task", task("write a file", "create it")),
        call(
            "child-1",
            "bash",
            escalated(touch("granted"), "danger-full-access"),
        ),
        // Never reached: neither the child nor the parent asks the model again.
        say("unreachable"),
        say("unreachable"),
    ];
    let Some(w) = World::new(script) else { return };
    let setup = Setup {
        mode: "read-only",
        approval: Some("ask"),
        presets: false,
    };
    let server = w.server_at(&setup, &w.config_path(), &w.state, |t| {
        format!("{t}\n{TASK}")
    });
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(&w, server, Answer::Cancel, seen.clone(), "delegate it").await;
    assert_eq!(stop, StopReason::Cancelled);
    assert_eq!(seen.asks().len(), 1);
    assert!(!w.ws.join("granted").exists());
    assert_eq!(
        w.model.requests().len(),
        2,
        "a model step ran after the cancel"
    );
    let ((_, pe), _) = parent_and_child(&w.state);
    let result = pe
        .iter()
        .find(|e| e["type"] == "tool/result" && e["call_id"] == "call-1")
        .unwrap();
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("the task was cancelled")
    );
}
