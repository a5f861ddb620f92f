//! The escalation keeps the design's word, end to end through `stockade
//! acp`: a rejection permits no re-ask (a model that insists gets the
//! rejection again and nobody is asked), and a retry once granted is not
//! offered again when it is still denied.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use common::{Answer, Seen, Setup, World, call, escalated, last_content, say, touch};
use serde_json::json;
use stockade_core::{SandboxMode, texts};

const READ_ONLY_ASK: Setup = Setup {
    mode: "read-only",
    approval: Some("ask"),
    presets: false,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_command_is_never_asked_about_again() {
    let mut other = escalated(touch("other"), "workspace-write");
    other["justification"] = json!("a different file");
    let mut insist = escalated(touch("marker"), "workspace-write");
    insist["justification"] = json!("really, the task needs it");
    let script = vec![
        call("call-1", "bash", touch("marker")),
        call(
            "call-2",
            "bash",
            escalated(touch("marker"), "workspace-write"),
        ),
        // The same command, the same target: the answer stands.
        call(
            "call-3",
            "bash",
            escalated(touch("marker"), "workspace-write"),
        ),
        call("call-4", "bash", insist),
        // Wider than what was rejected: a new question.
        call(
            "call-5",
            "bash",
            escalated(touch("marker"), "danger-full-access"),
        ),
        // Narrower than that rejection: answered by it.
        call(
            "call-6",
            "bash",
            escalated(touch("marker"), "workspace-write"),
        ),
        // Another command: asked.
        call("call-7", "bash", other),
        say("giving up"),
    ];
    let Some(w) = World::new(script) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(
        &w,
        w.server(&READ_ONLY_ASK),
        Answer::Reject,
        seen.clone(),
        "create the marker file",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let asked: Vec<String> = seen
        .asks()
        .iter()
        .map(|a| a.tool_call.tool_call_id.0.to_string())
        .collect();
    assert_eq!(asked, ["call-2", "call-5", "call-7"]);
    let requests = w.model_messages();
    let result = |i: usize| last_content(&requests[i]);
    let ww = format!(
        "{}\n{}",
        texts::rejected(SandboxMode::WorkspaceWrite),
        texts::REJECTED_NO_REASK
    );
    for i in [2, 3, 4] {
        assert_eq!(result(i), ww, "request {i}");
    }
    let dfa = format!(
        "{}\n{}",
        texts::rejected(SandboxMode::DangerFullAccess),
        texts::REJECTED_NO_REASK
    );
    assert_eq!(result(5), dfa);
    assert_eq!(result(6), ww);
    assert!(!w.ws.join("marker").exists() && !w.ws.join("other").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_retry_still_denied_is_not_offered_again() {
    let outside = json!({
        "command": "touch /etc/stockade-never",
        "description": "write outside"
    });
    let script = vec![
        call("call-1", "bash", outside.clone()),
        call("call-2", "bash", escalated(outside, "workspace-write")),
        say("done"),
    ];
    let Some(w) = World::new(script) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    common::one_prompt(
        &w,
        w.server(&READ_ONLY_ASK),
        Answer::Allow,
        seen.clone(),
        "write it",
    )
    .await;
    let requests = w.model_messages();
    let first = last_content(&requests[1]);
    let retried = last_content(&requests[2]);
    assert!(first.contains(texts::ESCALATION_HINT), "{first}");
    assert!(
        retried.starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
        "{retried}"
    );
    assert!(
        retried.contains("granted by the user for this call only"),
        "{retried}"
    );
    assert!(!retried.contains(texts::ESCALATION_HINT), "{retried}");
    assert!(!std::path::Path::new("/etc/stockade-never").exists());
}

/// `session/cancel` while the user has not answered the approval: the call
/// never ran, and its recorded result says so (not that processes were
/// killed); the next prompt's request replays exactly that.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_cancelled_while_waiting_for_the_user_is_recorded_as_never_run() {
    use agent_client_protocol::schema::ProtocolVersion;
    use agent_client_protocol::v1::schema::{
        CancelNotification, InitializeRequest, NewSessionRequest,
    };
    use std::time::Duration;
    let script = vec![
        call(
            "call-1",
            "bash",
            escalated(touch("marker"), "workspace-write"),
        ),
        say("next"),
    ];
    let Some(w) = World::new(script) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let asked = seen.clone();
    let stops = common::run(
        w.server(&READ_ONLY_ASK),
        Answer::Hold,
        seen.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let pending = cx.send_request(common::prompt(&s.session_id, "create it"));
            while asked.asks().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cx.send_notification(CancelNotification::new(s.session_id.clone()))?;
            let first = pending.block_task().await?.stop_reason;
            let second = cx
                .send_request(common::prompt(&s.session_id, "again"))
                .block_task()
                .await?
                .stop_reason;
            Ok((first, second))
        },
    )
    .await;
    assert_eq!(stops, (StopReason::Cancelled, StopReason::EndTurn));
    assert!(!w.ws.join("marker").exists());
    let requests = w.model_messages();
    let replayed = serde_json::to_string(requests.last().unwrap()).unwrap();
    assert!(
        replayed.contains(stockade_agent::agent::CANCELLED_BEFORE_IT_RAN),
        "{replayed}"
    );
    assert!(
        !replayed.contains(stockade_agent::agent::CANCELLED_KILLED),
        "{replayed}"
    );
}
