//! A real model (DeepSeek) against a read-only session: it meets a denial
//! and escalates, once approved and once rejected. Runs only with
//! DEEPSEEK_API_KEY set; without it the test says it was skipped and why.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::sync::Arc;
use std::time::Duration;

use stockade_agent::agent::{Agent, Cancel, Silent};
use stockade_agent::{
    ApprovalService, BashTool, EscalationGate, Fixed, PolicyContext, PolicyService, Tool,
};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, SandboxMode, texts};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_model::{ModelConfig, OpenAiCompatible};
use stockade_session::{Event, SessionStore};
use stockade_shell::{SandboxedExecutor, ShellExecutor};

const KEY: &str = "DEEPSEEK_API_KEY";

async fn drive(outcome: ApprovalOutcome) -> (bool, Vec<Event>) {
    let base = stockade_testkit::scratch_base(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("with-key-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let exe = std::env::current_exe().unwrap();
    let settings = LocalSettings {
        backend: BackendPreference::Landlock,
        launcher_path: Some(exe.parent().unwrap().parent().unwrap().join("landlock-run")),
        ..Default::default()
    };
    let provider = Arc::new(LocalProvider::new(settings).unwrap());
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &ws));
    let approval = Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Fixed(outcome))],
    ));
    let exec: Arc<dyn ShellExecutor> =
        Arc::new(SandboxedExecutor::new(provider, policy.resolve(None, None)));
    let bash: Arc<dyn Tool> = Arc::new(BashTool::new(
        exec,
        policy.clone(),
        EscalationGate::new(Some(approval.clone())),
    ));
    let model = OpenAiCompatible::new(ModelConfig {
        timeout: Duration::from_secs(120),
        ..Default::default()
    })
    .unwrap();
    let agent = Agent::new(
        Arc::new(model),
        vec![bash],
        PolicyContext::new(policy, Some(approval), true),
    )
    .with_max_steps(6);
    let store = SessionStore::new(dir.path().join("state"));
    let session = store.create(&ws).unwrap();
    let prompt = "Run exactly this bash command in the workspace: echo hi > hello.txt . If the sandbox denies it, follow the result's instructions to retry it once. Then reply with one word: done.";
    agent
        .prompt(&session, prompt, &Silent, &Cancel::default())
        .await
        .unwrap();
    let events = session.records().into_iter().map(|r| r.event).collect();
    (ws.join("hello.txt").exists(), events)
}

#[tokio::test]
async fn a_real_model_is_driven_through_an_approved_and_a_rejected_escalation() {
    if std::env::var_os(KEY).is_none_or(|v| v.is_empty()) {
        eprintln!(
            "skipped: {KEY} is not set, so no real model can be reached (the keyless tier covers the loop)"
        );
        return;
    }
    let (written, events) = drive(ApprovalOutcome::AllowedOnce).await;
    let asked = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::ApprovalAsked {
                    target: SandboxMode::WorkspaceWrite,
                    ..
                }
            )
        })
        .count();
    assert!(asked >= 1, "the model did not escalate: {events:#?}");
    assert!(written, "allowed once, yet the file is absent: {events:#?}");

    let (written, events) = drive(ApprovalOutcome::Rejected).await;
    assert!(!written, "rejected, yet the file exists");
    let rejection = texts::rejected(SandboxMode::WorkspaceWrite);
    assert!(
        events.iter().any(
            |e| matches!(e, Event::ToolResult { content, .. } if content.starts_with(&rejection))
        ),
        "the model never saw the rejection: {events:#?}"
    );
}
