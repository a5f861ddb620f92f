//! `stockade acp` end to end without a key: a scripted model on loopback,
//! the real Landlock launcher, and a real ACP client over newline-delimited
//! JSON. When `CI=true` a missing launcher is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    PermissionOptionKind, SessionUpdate, SetSessionModeRequest, StopReason, ToolCallStatus,
};
use common::{
    Answer, Dir, Seen, Setup, World, call, escalated, last_content, policy_messages, prompt, run,
    say, touch,
};
use serde_json::json;
use stockade_core::{SandboxMode, texts};
use stockade_testkit::scripted::ScriptedReply;

const READ_ONLY_ASK: Setup = Setup {
    mode: "read-only",
    approval: Some("ask"),
    presets: false,
};

/// The model touches `marker`, is denied, retries escalated, then ends.
fn escalation_script() -> Vec<ScriptedReply> {
    vec![
        call("call-1", "bash", touch("marker")),
        call(
            "call-2",
            "bash",
            escalated(touch("marker"), "workspace-write"),
        ),
        say("done"),
    ]
}

/// Initialize, open a session in the workspace, send one prompt: the stop
/// reason.
async fn one_prompt(w: &World, setup: &Setup, answer: Answer, seen: &Arc<Seen>) -> StopReason {
    common::one_prompt(
        w,
        w.server(setup),
        answer,
        seen.clone(),
        "create the marker file",
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_write_escalated_and_allowed_lands_on_disk() {
    let Some(w) = World::new(escalation_script()) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let stop = one_prompt(&w, &READ_ONLY_ASK, Answer::Allow, &seen).await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(w.ws.join("marker").is_file(), "the allowed retry ran");

    let asks = seen.asks();
    assert_eq!(asks.len(), 1, "exactly the escalated retry is asked");
    let kinds: Vec<(String, PermissionOptionKind)> = asks[0]
        .options
        .iter()
        .map(|o| (o.option_id.0.to_string(), o.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("allow_once".to_owned(), PermissionOptionKind::AllowOnce),
            ("reject_once".to_owned(), PermissionOptionKind::RejectOnce),
        ]
    );
    assert_eq!(&*asks[0].tool_call.tool_call_id.0, "call-2");

    // The denied call ran and failed; the escalated one waited for the
    // answer, then ran.
    use ToolCallStatus::*;
    assert_eq!(seen.statuses("call-1"), [Pending, InProgress, Failed]);
    assert_eq!(seen.statuses("call-2"), [Pending, InProgress, Completed]);

    let requests = w.model_messages();
    assert_eq!(requests.len(), 3);
    let denied = last_content(&requests[1]);
    assert!(
        denied.starts_with(&texts::denial_marker(SandboxMode::ReadOnly)),
        "{denied}"
    );
    let granted = last_content(&requests[2]);
    assert!(
        granted.contains("sandbox: workspace-write (landlock")
            && granted.contains("granted by the user for this call only"),
        "{granted}"
    );

    insta::assert_snapshot!(
        "allowed_frames_to_client",
        seen.transcript(&w, Dir::ToClient)
    );
    insta::assert_snapshot!("allowed_frames_to_agent", seen.transcript(&w, Dir::ToAgent));
    insta::assert_snapshot!(
        "allowed_model_requests",
        w.normalise(&serde_json::to_string_pretty(&requests).unwrap())
    );
}

/// A wider network is asked for like a wider mode, and the user is shown
/// both what the call would run under and the network it would reach.
#[tokio::test(flavor = "multi_thread")]
async fn a_network_escalation_names_the_network_to_the_user() {
    let mut args = touch("marker");
    args["network"] = json!("allow");
    args["justification"] = json!("the task needs a registry");
    let Some(w) = World::new(vec![call("call-1", "bash", args), say("done")]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let stop = one_prompt(&w, &READ_ONLY_ASK, Answer::Reject, &seen).await;
    assert_eq!(stop, StopReason::EndTurn);
    let asks = seen.asks();
    assert_eq!(asks.len(), 1);
    let fields = &asks[0].tool_call.fields;
    assert_eq!(
        fields.title.as_deref(),
        Some("bash under \"read-only\" with network \"allow\": touch marker")
    );
    let shown = serde_json::to_string(&fields.content).unwrap();
    assert!(
        shown.contains(
            "The agent asks to run this one call under \\\"read-only\\\" with network \\\"allow\\\": the task needs a registry"
        ),
        "{shown}"
    );
    let requests = w.model_messages();
    let told = last_content(&requests[1]);
    let rejected =
        stockade_core::texts::network::rejected(stockade_core::texts::network::Widening {
            mode: None,
            network: stockade_core::NetworkMode::Allow,
        });
    assert!(told.starts_with(&rejected), "{told}");
    assert!(!w.ws.join("marker").exists(), "nothing ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_escalation_runs_nothing_and_the_model_is_told() {
    let Some(w) = World::new(escalation_script()) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let stop = one_prompt(&w, &READ_ONLY_ASK, Answer::Reject, &seen).await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(
        !w.ws.join("marker").exists(),
        "a rejected retry runs nothing"
    );
    assert_eq!(seen.asks().len(), 1);
    use ToolCallStatus::*;
    assert_eq!(seen.statuses("call-2"), [Pending, Failed], "it never ran");

    let requests = w.model_messages();
    let told = last_content(&requests[2]);
    assert!(
        told.contains("the user rejected escalating this command to \"workspace-write\""),
        "{told}"
    );
    assert_eq!(
        told,
        format!(
            "{}\n{}",
            texts::rejected(SandboxMode::WorkspaceWrite),
            texts::REJECTED_NO_REASK
        )
    );
    insta::assert_snapshot!(
        "rejected_frames_to_client",
        seen.transcript(&w, Dir::ToClient)
    );
}

/// The client answering `cancelled` ("the prompt turn was cancelled before
/// the user responded") ends the turn: nothing runs, the model is not
/// called again, the stop reason is `cancelled`, and the call is recorded
/// with the cancelled text (the next prompt's request shows it).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_permission_answer_ends_the_turn() {
    let mut script = escalation_script();
    script.truncate(2);
    script.push(say("next"));
    let Some(w) = World::new(script) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let stops = run(
        w.server(&READ_ONLY_ASK),
        Answer::Cancel,
        seen.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let first = cx
                .send_request(prompt(&s.session_id, "create the marker file"))
                .block_task()
                .await?;
            let second = cx
                .send_request(prompt(&s.session_id, "and now?"))
                .block_task()
                .await?;
            Ok((first.stop_reason, second.stop_reason))
        },
    )
    .await;
    assert_eq!(stops, (StopReason::Cancelled, StopReason::EndTurn));
    assert!(!w.ws.join("marker").exists());
    let requests = w.model_messages();
    // Two requests in the first turn (none after the cancelled answer),
    // one in the second, which replays the cancelled call's result.
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let replayed = serde_json::to_string(&requests[2]).unwrap();
    let cancelled = serde_json::to_string(&texts::cancelled(SandboxMode::WorkspaceWrite)).unwrap();
    assert!(replayed.contains(cancelled.trim_matches('"')), "{replayed}");
    use ToolCallStatus::*;
    assert_eq!(seen.statuses("call-2"), [Pending, Failed]);
}

#[tokio::test(flavor = "multi_thread")]
async fn approval_policy_never_asks_nobody_and_fails_closed() {
    let Some(w) = World::new(escalation_script()) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let setup = Setup {
        mode: "read-only",
        approval: Some("never"),
        presets: false,
    };
    one_prompt(&w, &setup, Answer::Allow, &seen).await;
    assert!(seen.asks().is_empty(), "nobody is asked under `never`");
    assert!(!w.ws.join("marker").exists());
    assert_eq!(
        last_content(&w.model_messages()[2]),
        texts::unavailable(SandboxMode::WorkspaceWrite)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_approval_every_escalation_fails_closed_with_its_own_text() {
    let Some(w) = World::new(escalation_script()) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let setup = Setup {
        mode: "read-only",
        approval: None,
        presets: false,
    };
    one_prompt(&w, &setup, Answer::Allow, &seen).await;
    assert!(seen.asks().is_empty());
    assert!(!w.ws.join("marker").exists());
    assert_eq!(
        last_content(&w.model_messages()[2]),
        texts::no_approval_service(SandboxMode::WorkspaceWrite)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_tool_write_escalated_and_allowed_lands_on_disk() {
    let write = json!({ "path": "notes.txt", "content": "hello\n" });
    let Some(w) = World::new(vec![
        call("call-1", "write", write.clone()),
        call("call-2", "write", escalated(write, "workspace-write")),
        say("written"),
    ]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    one_prompt(&w, &READ_ONLY_ASK, Answer::Allow, &seen).await;
    assert_eq!(
        std::fs::read_to_string(w.ws.join("notes.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(seen.asks().len(), 1);
    let requests = w.model_messages();
    assert!(last_content(&requests[1]).contains("denied"));
    assert!(
        last_content(&requests[2]).contains("granted by the user for this call only"),
        "{}",
        last_content(&requests[2])
    );
}

const PRESETS: Setup = Setup {
    mode: "read-only",
    approval: Some("ask"),
    presets: true,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_preset_switch_adds_exactly_one_policy_message() {
    let Some(w) = World::new(vec![say("one"), say("two"), say("three")]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let modes = run(
        w.server(&PRESETS),
        Answer::Allow,
        seen.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let id = s.session_id.clone();
            cx.send_request(prompt(&id, "first")).block_task().await?;
            cx.send_request(SetSessionModeRequest::new(id.clone(), "danger-full-access"))
                .block_task()
                .await?;
            cx.send_request(prompt(&id, "second")).block_task().await?;
            // The same preset again changes nothing, so nothing new is said.
            cx.send_request(SetSessionModeRequest::new(id.clone(), "danger-full-access"))
                .block_task()
                .await?;
            cx.send_request(prompt(&id, "third")).block_task().await?;
            // A name outside the table is refused, naming the valid ones.
            let err = cx
                .send_request(SetSessionModeRequest::new(id.clone(), "yolo"))
                .block_task()
                .await
                .unwrap_err();
            Ok((s.modes, err))
        },
    )
    .await;
    let (modes, err) = modes;
    let modes = modes.expect("presets are advertised as modes");
    // read-only + ask (+ its default network, deny) is the first preset.
    assert_eq!(&*modes.current_mode_id.0, "read-only");
    let ids: Vec<&str> = modes.available_modes.iter().map(|m| &*m.id.0).collect();
    assert_eq!(ids, ["read-only", "workspace-write", "danger-full-access"]);
    assert!(
        err.message
            .contains("read-only, workspace-write, danger-full-access"),
        "{err:?}"
    );

    let current: Vec<String> = seen
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(current, ["danger-full-access", "danger-full-access"]);

    let requests = w.model_messages();
    let counts: Vec<usize> = requests.iter().map(|m| policy_messages(m).len()).collect();
    assert_eq!(
        counts,
        [1, 2, 2],
        "one superseding message after the switch"
    );
    let new = &policy_messages(&requests[1])[1];
    assert!(
        new.contains("Sandbox mode: danger-full-access (set for this session)")
            && new.contains("Approval policy: never (set for this session)"),
        "{new}"
    );
    insta::assert_snapshot!(
        "preset_switch_policy_messages",
        policy_messages(&requests[2]).join("\n---\n")
    );
}

/// The network knob is one of the knobs a preset sets: a configured network
/// outside every preset reads as the `configured` mode, naming the network,
/// and selecting a preset records the network through its own event.
#[tokio::test(flavor = "multi_thread")]
async fn a_preset_sets_the_network_too_and_custom_names_it() {
    let Some(w) = World::new(vec![]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let server = w.server_at(&PRESETS, &w.config_path(), &w.state, |text| {
        text.replace("deny_read = []\n", "deny_read = []\nnetwork = \"allow\"\n")
    });
    let (modes, id) = run(server, Answer::Allow, seen.clone(), async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let s = cx
            .send_request(NewSessionRequest::new(&ws))
            .block_task()
            .await?;
        cx.send_request(SetSessionModeRequest::new(
            s.session_id.clone(),
            "read-only",
        ))
        .block_task()
        .await?;
        Ok((s.modes, s.session_id))
    })
    .await;
    let modes = modes.expect("presets are advertised as modes");
    assert_eq!(&*modes.current_mode_id.0, "configured");
    let configured = modes.available_modes.last().unwrap();
    assert_eq!(
        configured.description.as_deref(),
        Some("sandbox read-only, network allow, approval ask (as configured)")
    );
    let current: Vec<String> = seen
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(current, ["read-only"]);
    // Only the network moved, and the log says who moved it.
    let log =
        std::fs::read_to_string(w.state.join("sessions").join(format!("{}.jsonl", id.0))).unwrap();
    let knobs: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"type\":\"sandbox/") || l.contains("\"type\":\"approval/policy\""))
        .collect();
    assert_eq!(knobs.len(), 1, "{log}");
    assert!(
        knobs[0].contains(
            r#""event":{"type":"sandbox/network","mode":"deny","source":{"kind":"preset","name":"read-only"}}"#
        ),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loaded_session_keeps_its_mode_and_replays_its_conversation() {
    let Some(w) = World::new(vec![
        say("hello"),
        call("call-1", "bash", touch("marker")),
        say("touched"),
    ]) else {
        return;
    };
    let ws = w.ws.clone();
    let first = Arc::new(Seen::default());
    let id = run(
        w.server(&PRESETS),
        Answer::Allow,
        first.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            cx.send_request(SetSessionModeRequest::new(
                s.session_id.clone(),
                "workspace-write",
            ))
            .block_task()
            .await?;
            cx.send_request(prompt(&s.session_id, "say hello"))
                .block_task()
                .await?;
            Ok(s.session_id)
        },
    )
    .await;

    // A new server (a new `stockade acp` process) over the same store.
    let second = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let (loaded, stop) = run(
        w.server(&PRESETS),
        Answer::Reject,
        second.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let loaded = cx
                .send_request(LoadSessionRequest::new(id.clone(), &ws))
                .block_task()
                .await?;
            let r = cx
                .send_request(prompt(&id, "touch the marker"))
                .block_task()
                .await?;
            Ok((loaded, r.stop_reason))
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let modes = loaded.modes.expect("modes after load");
    assert_eq!(&*modes.current_mode_id.0, "workspace-write");
    // The mode is in force, not only reported: the plain touch succeeds.
    assert!(w.ws.join("marker").is_file());
    assert!(second.asks().is_empty());

    let requests = w.model_messages();
    let policy = policy_messages(&requests[1]);
    assert_eq!(policy.len(), 1, "the resumed session's state is unchanged");
    assert!(policy[0].contains("Sandbox mode: workspace-write (set for this session)"));

    // The replay came before the load's response, in conversation order.
    let replayed: Vec<String> = second
        .updates()
        .into_iter()
        .take(2)
        .map(|n| match n.update {
            SessionUpdate::UserMessageChunk(c) | SessionUpdate::AgentMessageChunk(c) => {
                serde_json::to_value(&c.content).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(replayed, ["say hello", "hello"]);
    insta::assert_snapshot!(
        "load_frames_to_client",
        second.transcript(&w, Dir::ToClient)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_cancel_stops_the_prompt_which_answers_cancelled() {
    let Some(w) = World::new(vec![ScriptedReply::Hang]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let model = &w.model;
    let stop = run(
        w.server(&READ_ONLY_ASK),
        Answer::Allow,
        seen,
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let pending = cx.send_request(prompt(&s.session_id, "think forever"));
            while model.requests().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cx.send_notification(CancelNotification::new(s.session_id.clone()))?;
            Ok(pending.block_task().await?.stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::Cancelled);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_sessions_with_different_cwds_stay_isolated() {
    let Some(w) = World::new(vec![
        call("a-1", "bash", touch("a")),
        say("a done"),
        call("b-1", "bash", touch("b")),
        say("b done"),
    ]) else {
        return;
    };
    let other = w.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let seen = Arc::new(Seen::default());
    let (ws, other2) = (w.ws.clone(), other.clone());
    let setup = Setup {
        mode: "workspace-write",
        approval: Some("ask"),
        presets: true,
    };
    run(w.server(&setup), Answer::Allow, seen, async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let a = cx
            .send_request(NewSessionRequest::new(&ws))
            .block_task()
            .await?;
        let b = cx
            .send_request(NewSessionRequest::new(&other2))
            .block_task()
            .await?;
        // b goes read-only... via no preset; a's switch must not leak into b.
        cx.send_request(SetSessionModeRequest::new(
            a.session_id.clone(),
            "danger-full-access",
        ))
        .block_task()
        .await?;
        cx.send_request(prompt(&a.session_id, "touch a"))
            .block_task()
            .await?;
        cx.send_request(prompt(&b.session_id, "touch b"))
            .block_task()
            .await?;
        Ok(())
    })
    .await;
    assert!(w.ws.join("a").is_file() && !other.join("a").exists());
    assert!(other.join("b").is_file() && !w.ws.join("b").exists());
    let requests = w.model_messages();
    // Request 3 is b's first: its own default policy, rooted in its own cwd.
    let b_policy = policy_messages(&requests[2]);
    assert_eq!(b_policy.len(), 1);
    assert!(
        b_policy[0].contains("Sandbox mode: workspace-write (configured default)")
            && b_policy[0].contains(&other.display().to_string()),
        "{}",
        b_policy[0]
    );
    assert!(
        !requests[2].to_string().contains("touch a"),
        "b's model request holds nothing of a's conversation"
    );
}

/// Waits (bounded) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "waited too long for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn session_cancel_kills_a_running_tool() {
    let Some(w) = World::new(vec![call(
        "call-1",
        "bash",
        json!({ "command": "sleep 30; touch late", "description": "wait, then write" }),
    )]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let setup = Setup {
        mode: "workspace-write",
        approval: Some("ask"),
        presets: false,
    };
    let watch = seen.clone();
    let started = std::time::Instant::now();
    let stop = run(
        w.server(&setup),
        Answer::Allow,
        seen.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let pending = cx.send_request(prompt(&s.session_id, "wait"));
            until("the tool to run", || {
                watch
                    .statuses("call-1")
                    .contains(&ToolCallStatus::InProgress)
            })
            .await;
            cx.send_notification(CancelNotification::new(s.session_id.clone()))?;
            Ok(pending.block_task().await?.stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the sleep was killed"
    );
    use ToolCallStatus::*;
    assert_eq!(seen.statuses("call-1"), [Pending, InProgress, Failed]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.ws.join("late").exists());
    assert_eq!(w.model.requests().len(), 1, "no step after the cancel");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_while_the_user_decides_withdraws_the_question() {
    let Some(w) = World::new(escalation_script()) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let watch = seen.clone();
    let stop = run(
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
            let pending = cx.send_request(prompt(&s.session_id, "create the marker file"));
            until("the permission request", || !watch.asks().is_empty()).await;
            cx.send_notification(CancelNotification::new(s.session_id.clone()))?;
            Ok(pending.block_task().await?.stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::Cancelled);
    assert!(!w.ws.join("marker").exists());
    assert_eq!(w.model.requests().len(), 2, "no step after the cancel");
    let to_client = seen.transcript(&w, Dir::ToClient);
    assert!(
        to_client.contains("\"method\":\"$/cancel_request\""),
        "the pending question is withdrawn:\n{to_client}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_error_answers_the_prompt_with_its_message() {
    let Some(w) = World::new(vec![ScriptedReply::error(
        400,
        "the scripted model refuses",
    )]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let err = run(
        w.server(&READ_ONLY_ASK),
        Answer::Allow,
        seen,
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            Ok(cx
                .send_request(prompt(&s.session_id, "hello"))
                .block_task()
                .await
                .unwrap_err())
        },
    )
    .await;
    assert!(
        err.message.contains("HTTP 400") && err.message.contains("the scripted model refuses"),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_for_unknown_sessions_and_bad_cwds_are_refused() {
    let Some(w) = World::new(vec![]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let errs = run(
        w.server(&READ_ONLY_ASK),
        Answer::Allow,
        seen,
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let relative = cx
                .send_request(NewSessionRequest::new("ws"))
                .block_task()
                .await
                .unwrap_err();
            let missing = cx
                .send_request(NewSessionRequest::new(ws.join("nope")))
                .block_task()
                .await
                .unwrap_err();
            let unknown = cx
                .send_request(prompt(
                    &agent_client_protocol::v1::schema::SessionId::new(
                        "00112233445566778899aabbccddeeff",
                    ),
                    "hi",
                ))
                .block_task()
                .await
                .unwrap_err();
            let not_logged = cx
                .send_request(LoadSessionRequest::new(
                    "00112233445566778899aabbccddeeff",
                    &ws,
                ))
                .block_task()
                .await
                .unwrap_err();
            let no_presets = cx
                .send_request(SetSessionModeRequest::new(
                    "00112233445566778899aabbccddeeff",
                    "workspace-write",
                ))
                .block_task()
                .await
                .unwrap_err();
            Ok([relative, missing, unknown, not_logged, no_presets].map(|e| e.message))
        },
    )
    .await;
    insta::assert_snapshot!("refusals", w.normalise(&errs.join("\n")));
}

#[test]
fn the_example_composition_composes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/acp-agent/stockade.toml");
    let mut loaded = stockade_config::load_config(Some(&path)).unwrap();
    // Keyless: the key is read at composition, and this test has none.
    loaded.config.model.api_key_env = String::new();
    // Session logs outside every temp root, or the server refuses them.
    let base = stockade_testkit::scratch_base(env!("CARGO_TARGET_TMPDIR").as_ref());
    let state = tempfile::tempdir_in(base).unwrap();
    let env = stockade_acp::Environment {
        config_dir: loaded.dir,
        verdict_cache_dirs: Vec::new(),
        config_file: Some(loaded.path),
        pins: Default::default(),
    };
    let server = stockade_acp::AcpServer::new(
        &loaded.config,
        &env,
        stockade_session::SessionStore::new(state.path()),
    )
    .unwrap();
    let comp = server.composition();
    assert!(comp.confines);
    assert_eq!(comp.policy.default_mode(), SandboxMode::WorkspaceWrite);
    assert!(comp.approval.is_some());
    let names: Vec<&str> = comp
        .presets
        .as_ref()
        .unwrap()
        .presets()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["read-only", "workspace-write", "danger-full-access"]
    );
    // Left out of the example, the network follows the mode.
    assert_eq!(comp.policy.configured_network(), None);
    assert_eq!(
        comp.policy.default_network(comp.policy.default_mode()),
        stockade_core::NetworkMode::AllowListed
    );
    assert_eq!(
        comp.policy.allowed_hosts(),
        stockade_config::default_allowed_hosts()
    );
}
