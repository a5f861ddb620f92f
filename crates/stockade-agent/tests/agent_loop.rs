//! The agent loop against a scripted model server on loopback, with the
//! real Landlock runner: a denial, an approved retry, the log as the store.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use common::world;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stockade_agent::agent::{Agent, AgentUpdate, Cancel, Observer, StopReason};
use stockade_agent::{
    ApprovalService, BashTool, EscalationGate, Fixed, PolicyContext, PolicyService, Tool,
};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, SandboxMode, texts};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_model::{ModelConfig, ModelToolCall, OpenAiCompatible};
use stockade_session::Session;
use stockade_shell::{SandboxedExecutor, ShellExecutor};
use stockade_testkit::scripted::{ScriptedReply, ScriptedServer};

fn agent(server: &ScriptedServer, ws: &std::path::Path, outcome: ApprovalOutcome) -> Agent {
    let exe = std::env::current_exe().unwrap();
    let launcher = exe.parent().unwrap().parent().unwrap().join("landlock-run");
    let settings = LocalSettings {
        backend: BackendPreference::Landlock,
        launcher_path: Some(launcher),
        ..Default::default()
    };
    let provider = Arc::new(LocalProvider::new(settings).unwrap());
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, ws));
    let approval = Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Fixed(outcome))],
    ));
    let exec: Arc<dyn ShellExecutor> =
        Arc::new(SandboxedExecutor::new(provider, policy.resolve(None, None)));
    let bash = BashTool::new(
        exec,
        policy.clone(),
        EscalationGate::new(Some(approval.clone())),
    );
    let jobs = bash.job_output();
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(bash), Arc::new(jobs)];
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
        tools,
        PolicyContext::new(policy, Some(approval), true),
    )
}

#[derive(Default)]
struct Recorder(Mutex<Vec<AgentUpdate>>);
impl Observer for Recorder {
    fn update(&self, _: &Session, u: AgentUpdate) {
        self.0.lock().unwrap().push(u);
    }
}

fn call(id: &str, args: serde_json::Value) -> ModelToolCall {
    ModelToolCall::new(id, "bash", args.to_string())
}

#[tokio::test]
async fn a_denied_command_is_retried_once_with_approval_and_the_log_is_the_store() {
    let w = world();
    let f = w.ws.join("made-by-agent");
    let touch = serde_json::json!({ "command": format!("touch '{}'", f.display()), "description": "create the file" });
    let mut escalated = touch.clone();
    escalated["sandbox_permissions"] = "workspace-write".into();
    escalated["justification"] = "the task is to create this file".into();
    let server = ScriptedServer::start(vec![
        ScriptedReply::tool_calls("", vec![call("call_1", touch)]),
        ScriptedReply::tool_calls("retrying with approval", vec![call("call_2", escalated)])
            .with_reasoning("it was denied"),
        ScriptedReply::text("done"),
    ])
    .unwrap();
    let agent = agent(&server, &w.ws, ApprovalOutcome::AllowedOnce);
    let session = w.store.create(&w.ws).unwrap();
    let seen = Recorder::default();
    let stop = agent
        .prompt(&session, "create the file", &seen, &Cancel::default())
        .await
        .unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    assert!(f.exists(), "the approved retry ran");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let second = requests[1]["messages"].as_array().unwrap();
    let tool_msg = second.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly))
    );
    let third = requests[2]["messages"].as_array().unwrap();
    // Thinking mode: reasoning of a turn with tool calls goes back.
    assert!(
        third
            .iter()
            .any(|m| m["reasoning_content"] == "it was denied"),
        "{third:?}"
    );
    let last_tool = third.iter().rev().find(|m| m["role"] == "tool").unwrap();
    assert!(
        last_tool["content"]
            .as_str()
            .unwrap()
            .contains("granted by the user for this call only")
    );
    // One policy context, before the first step; unchanged after.
    for r in &requests {
        let n = r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("[sandbox:policy]"))
            })
            .count();
        assert_eq!(n, 1);
    }
    // The system prompt never states the mode.
    assert!(
        !requests[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("read-only")
    );
    let updates = seen.0.lock().unwrap();
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, AgentUpdate::ToolCallFinished { id, .. } if id == "call_2"))
    );
    drop(updates);

    // Resume from the log alone: the next request is rebuilt identically.
    let rebuilt = session.with_records(|r| agent.messages(r));
    let id = session.id().clone();
    drop(session);
    let resumed = w.store.open(&id).unwrap();
    assert_eq!(resumed.with_records(|r| agent.messages(r)), rebuilt);
}

#[tokio::test]
async fn cancellation_stops_the_step_and_kills_the_tool() {
    let w = world();
    let late = w.ws.join("late");
    let cmd = serde_json::json!({ "command": format!("sleep 2; echo > '{}'", late.display()), "description": "slow", "sandbox_permissions": "workspace-write", "justification": "x" });
    let server =
        ScriptedServer::start(vec![ScriptedReply::tool_calls("", vec![call("c", cmd)])]).unwrap();
    let agent = agent(&server, &w.ws, ApprovalOutcome::AllowedOnce);
    let session = w.store.create(&w.ws).unwrap();
    let cancel = Cancel::default();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        c2.cancel();
    });
    let t = Instant::now();
    let stop = agent
        .prompt(&session, "go", &stockade_agent::agent::Silent, &cancel)
        .await
        .unwrap();
    assert_eq!(stop, StopReason::Cancelled);
    assert!(t.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !late.exists(),
        "the tool's process ran on after cancellation"
    );
    let last = session.records().pop().unwrap();
    assert!(
        format!("{:?}", last.event).contains("cancelled"),
        "{last:?}"
    );
}

#[tokio::test]
async fn a_model_error_is_a_clear_error_in_the_session() {
    let w = world();
    let server = ScriptedServer::start(vec![ScriptedReply::error(
        400,
        "bad request: tools[0] is invalid",
    )])
    .unwrap();
    let agent = agent(&server, &w.ws, ApprovalOutcome::Rejected);
    let session = w.store.create(&w.ws).unwrap();
    let e = agent
        .prompt(
            &session,
            "hi",
            &stockade_agent::agent::Silent,
            &Cancel::default(),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("HTTP 400"), "{e}");
    assert!(e.to_string().contains("tools[0] is invalid"), "{e}");
    let last = session.records().pop().unwrap();
    assert!(
        format!("{:?}", last.event).contains("model error"),
        "{last:?}"
    );
}
