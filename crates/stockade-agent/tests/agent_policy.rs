//! The agent layer end to end with real runners: per-session policy, the
//! approval seam, one approved wider retry, the policy context, presets.
//!
//! When `CI=true` a missing runner is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use common::world;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stockade_agent::{
    Answerer, ApprovalRequest, ApprovalService, BashTool, EscalationGate, Fixed, PolicyContext,
    PolicyService, PresetService, RejectMatching, Tool, ToolContext, ToolOutput,
};
use stockade_core::texts::network::{self as network_texts, Widening};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, NetworkMode, SandboxMode, texts};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_session::{Event, KnobSource, Session};
use stockade_shell::{BoxFuture, SandboxedExecutor, ShellExecutor, UnconfinedExecutor};

fn launcher() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("landlock-run");
    assert!(
        p.is_file() || !stockade_testkit::in_ci(),
        "landlock-run must be built in CI"
    );
    p
}

/// The real Landlock backend (always present where the workspace builds).
fn provider() -> Arc<LocalProvider> {
    let s = LocalSettings {
        backend: BackendPreference::Landlock,
        launcher_path: Some(launcher()),
        ..Default::default()
    };
    Arc::new(LocalProvider::new(s).unwrap())
}

struct Composed {
    bash: BashTool,
    policy: Arc<PolicyService>,
    approval: Option<Arc<ApprovalService>>,
}

fn compose(
    default: SandboxMode,
    fallback: &Path,
    approval: Option<Arc<ApprovalService>>,
) -> Composed {
    let policy = Arc::new(PolicyService::new(default, fallback));
    let executor: Arc<dyn ShellExecutor> = Arc::new(SandboxedExecutor::new(
        provider(),
        policy.resolve(None, None),
    ));
    let bash = BashTool::new(
        executor,
        policy.clone(),
        EscalationGate::new(approval.clone()),
    );
    Composed {
        bash,
        policy,
        approval,
    }
}

fn approval(outcome: ApprovalOutcome) -> Arc<ApprovalService> {
    Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Fixed(outcome))],
    ))
}

fn ctx(session: &Session, call: &str) -> ToolContext {
    ToolContext {
        session: Some(session.clone()),
        call_id: call.into(),
    }
}

async fn bash(tool: &BashTool, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
    tool.call(ctx, args).await
}

fn touch(path: &Path) -> serde_json::Value {
    json!({ "command": format!("touch '{}'", path.display()), "description": "create a marker" })
}

fn escalate(path: &Path, to: &str) -> serde_json::Value {
    let mut v = touch(path);
    v["sandbox_permissions"] = json!(to);
    v["justification"] = json!("the task needs this file");
    v
}

fn asks(session: &Session) -> usize {
    session.with_records(|r| {
        r.iter()
            .filter(|r| matches!(r.event, Event::ApprovalAsked { .. }))
            .count()
    })
}

/// Key order depends on serde_json's `preserve_order`, which feature
/// unification turns on in some builds and not others: pin a sorted form.
fn pretty_sorted(v: &serde_json::Value) -> String {
    fn sort(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                serde_json::Value::Object(
                    keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect(),
                )
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string_pretty(&sort(v)).unwrap()
}

#[test]
fn the_schema_has_escalation_fields_exactly_when_the_executor_confines() {
    let w = world();
    let confined = compose(SandboxMode::WorkspaceWrite, &w.ws, None);
    insta::assert_snapshot!(
        "bash_schema_confined",
        pretty_sorted(&confined.bash.schema())
    );
    insta::assert_snapshot!("bash_description_confined", confined.bash.description());
    let policy = Arc::new(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws));
    let open = BashTool::new(
        Arc::new(UnconfinedExecutor::default()),
        policy,
        EscalationGate::new(None),
    );
    let schema = open.schema();
    assert!(schema["properties"].get("sandbox_permissions").is_none());
    assert!(schema["properties"].get("justification").is_none());
    insta::assert_snapshot!("bash_schema_unconfined", pretty_sorted(&schema));
    assert!(
        confined.bash.schema()["properties"]["sandbox_permissions"]["enum"]
            == json!(["workspace-write", "danger-full-access"])
    );
    assert!(
        confined.bash.schema()["properties"]["network"]["enum"] == json!(["allow-listed", "allow"])
    );
    assert!(schema["properties"].get("network").is_none());
}

#[tokio::test]
async fn the_fields_do_not_exist_under_the_unconfined_executor() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &w.ws));
    let open = BashTool::new(
        Arc::new(UnconfinedExecutor::default()),
        policy,
        EscalationGate::new(None),
    );
    let marker = w.ws.join("marker");
    let out = bash(
        &open,
        &ctx(&s, "c1"),
        escalate(&marker, "danger-full-access"),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(out.content, texts::ESCALATION_NOT_OFFERED);
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_denied_result_carries_marker_instruction_and_hint() {
    let w = world();
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let s = w.store.create(&w.ws).unwrap();
    let out = bash(&c.bash, &ctx(&s, "c1"), touch(&w.ws.join("f"))).await;
    assert!(out.is_error);
    let first: Vec<&str> = out.content.lines().take(2).collect();
    assert_eq!(
        first,
        [
            texts::denial_marker(SandboxMode::ReadOnly).as_str(),
            texts::DENIAL_INSTRUCTION
        ]
    );
    assert!(
        out.content.contains(texts::ESCALATION_HINT),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains(&format!("denied: {}", w.ws.join("f").display())),
        "{}",
        out.content
    );
    assert!(!w.ws.join("f").exists());
}

#[tokio::test]
async fn a_target_not_wider_than_the_effective_mode_asks_no_one() {
    let w = world();
    let c = compose(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(approval(ApprovalOutcome::AllowedOnce)),
    );
    let s = w.store.create(&w.ws).unwrap();
    let marker = w.outside.join("marker");
    let out = bash(
        &c.bash,
        &ctx(&s, "c1"),
        escalate(&marker, "workspace-write"),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        texts::not_wider(SandboxMode::WorkspaceWrite, SandboxMode::WorkspaceWrite)
    );
    assert_eq!(asks(&s), 0);
    assert!(!marker.exists());
    // The effective mode is per session: an override to danger-full-access
    // makes every target non-widening.
    s.set_sandbox_mode(SandboxMode::DangerFullAccess, KnobSource::User)
        .unwrap();
    let out = bash(
        &c.bash,
        &ctx(&s, "c2"),
        escalate(&marker, "danger-full-access"),
    )
    .await;
    assert_eq!(
        out.content,
        texts::not_wider(SandboxMode::DangerFullAccess, SandboxMode::DangerFullAccess)
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn every_non_grant_outcome_runs_nothing_and_says_so() {
    let w = world();
    let marker = w.ws.join("marker");
    let s = w.store.create(&w.ws).unwrap();
    let cases: Vec<(Option<Arc<ApprovalService>>, String)> = vec![
        (
            Some(approval(ApprovalOutcome::Rejected)),
            format!(
                "{}\n{}",
                texts::rejected(SandboxMode::WorkspaceWrite),
                texts::REJECTED_NO_REASK
            ),
        ),
        (
            Some(approval(ApprovalOutcome::Cancelled)),
            texts::cancelled(SandboxMode::WorkspaceWrite),
        ),
        (
            Some(approval(ApprovalOutcome::Unavailable)),
            texts::unavailable(SandboxMode::WorkspaceWrite),
        ),
        (
            Some(Arc::new(ApprovalService::new(
                ApprovalPolicy::Never,
                vec![Arc::new(Fixed(ApprovalOutcome::AllowedOnce))],
            ))),
            texts::unavailable(SandboxMode::WorkspaceWrite),
        ),
        (
            None,
            texts::no_approval_service(SandboxMode::WorkspaceWrite),
        ),
    ];
    for (i, (approval, want)) in cases.into_iter().enumerate() {
        // A session per case: within one, the first rejection would answer
        // every later request for the same command (no re-ask).
        let s = w.store.create(&w.ws).unwrap();
        let c = compose(SandboxMode::ReadOnly, &w.ws, approval);
        let out = bash(
            &c.bash,
            &ctx(&s, &format!("call-{i}")),
            escalate(&marker, "workspace-write"),
        )
        .await;
        assert!(out.is_error, "case {i}");
        assert_eq!(out.content, want, "case {i}");
        assert!(!marker.exists(), "case {i} ran the command");
    }
    // No session to route the ask through.
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(approval(ApprovalOutcome::AllowedOnce)),
    );
    let agentless = ToolContext {
        session: None,
        call_id: "x".into(),
    };
    let out = bash(&c.bash, &agentless, escalate(&marker, "workspace-write")).await;
    assert_eq!(out.content, texts::no_session(SandboxMode::WorkspaceWrite));
    assert!(!marker.exists());
    // A missing justification asks no one either.
    let mut args = escalate(&marker, "workspace-write");
    args["justification"] = json!("  ");
    let before = asks(&s);
    let out = bash(&c.bash, &ctx(&s, "j"), args).await;
    assert_eq!(out.content, texts::MISSING_JUSTIFICATION);
    assert_eq!(asks(&s), before);
    assert!(!marker.exists());
}

#[tokio::test]
async fn allowed_once_widens_only_its_own_call_and_is_logged() {
    let w = world();
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(approval(ApprovalOutcome::AllowedOnce)),
    );
    let s = w.store.create(&w.ws).unwrap();
    let f = w.ws.join("f");
    let denied = bash(&c.bash, &ctx(&s, "c1"), touch(&f)).await;
    assert!(
        denied
            .content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly))
    );
    let out = bash(&c.bash, &ctx(&s, "c2"), escalate(&f, "workspace-write")).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("sandbox: workspace-write (landlock, full enforcement), granted by the user for this call only"), "{}", out.content);
    assert!(f.exists());
    // No grant is stored: the next plain call is read-only again.
    let g = w.ws.join("g");
    let out = bash(&c.bash, &ctx(&s, "c3"), touch(&g)).await;
    assert!(
        out.content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly))
    );
    assert!(!g.exists());
    assert_eq!(s.sandbox_override(), None);
    let audit: Vec<String> = s.with_records(|r| {
        r.iter()
            .filter_map(|r| match &r.event {
                Event::ApprovalAsked {
                    call_id,
                    target,
                    reason,
                    ..
                } => Some(format!("asked {call_id} {target} {reason}")),
                Event::ApprovalDecided {
                    call_id, outcome, ..
                } => Some(format!("decided {call_id} {outcome}")),
                _ => None,
            })
            .collect()
    });
    assert_eq!(
        audit,
        [
            "asked c2 workspace-write the task needs this file",
            "decided c2 allowed-once"
        ]
    );
}

/// Allows after a pause, so a neighbouring call runs while the grant is
/// pending and after it.
struct SlowAllow;
impl Answerer for SlowAllow {
    fn answer<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Some(ApprovalOutcome::AllowedOnce)
        })
    }
}

#[tokio::test]
async fn a_concurrent_call_keeps_its_own_mode_while_another_is_granted() {
    let w = world();
    let service = Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(SlowAllow)],
    ));
    let c = compose(SandboxMode::ReadOnly, &w.ws, Some(service));
    let s = w.store.create(&w.ws).unwrap();
    let (a, b) = (w.ws.join("granted"), w.ws.join("plain"));
    let ca = ctx(&s, "a");
    let cb = ctx(&s, "b");
    let plain =
        json!({ "command": format!("sleep 0.4; touch '{}'", b.display()), "description": "x" });
    let (ra, rb) = tokio::join!(
        bash(&c.bash, &ca, escalate(&a, "workspace-write")),
        bash(&c.bash, &cb, plain)
    );
    assert!(!ra.is_error, "{}", ra.content);
    assert!(a.exists());
    assert!(
        rb.content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly)),
        "{}",
        rb.content
    );
    assert!(!b.exists());
}

#[tokio::test]
async fn a_policy_answerer_before_the_ui_answerer_wins() {
    let w = world();
    let chain: Vec<Arc<dyn Answerer>> = vec![
        Arc::new(RejectMatching(vec!["rm -rf".into()])),
        Arc::new(Fixed(ApprovalOutcome::AllowedOnce)),
    ];
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(Arc::new(ApprovalService::new(ApprovalPolicy::Ask, chain))),
    );
    let s = w.store.create(&w.ws).unwrap();
    let victim = w.ws.join("victim");
    std::fs::create_dir(&victim).unwrap();
    let args = json!({
        "command": format!("rm -rf '{}'", victim.display()),
        "description": "remove",
        "sandbox_permissions": "workspace-write",
        "justification": "cleanup"
    });
    let out = bash(&c.bash, &ctx(&s, "r"), args).await;
    assert!(
        out.content
            .starts_with(&texts::rejected(SandboxMode::WorkspaceWrite))
    );
    assert!(victim.exists());
    let out = bash(
        &c.bash,
        &ctx(&s, "t"),
        escalate(&w.ws.join("ok"), "workspace-write"),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test]
async fn a_granted_danger_full_access_never_touches_the_provider_and_a_granted_confining_mode_still_fails_closed()
 {
    use stockade_core::{Confined, SandboxPolicy, SandboxProvider, SandboxUnavailable};
    struct Broken;
    impl SandboxProvider for Broken {
        fn confine(
            &self,
            _: &[std::ffi::OsString],
            _: &SandboxPolicy,
        ) -> Result<Confined, SandboxUnavailable> {
            Err(SandboxUnavailable::single("bwrap", "probe failed: test"))
        }
    }
    let w = world();
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &w.ws));
    let exec: Arc<dyn ShellExecutor> = Arc::new(SandboxedExecutor::new(
        Arc::new(Broken),
        policy.resolve(None, None),
    ));
    let tool = BashTool::new(
        exec,
        policy,
        EscalationGate::new(Some(approval(ApprovalOutcome::AllowedOnce))),
    );
    let s = w.store.create(&w.ws).unwrap();
    let marker = w.outside.join("dfa");
    let out = bash(
        &tool,
        &ctx(&s, "d"),
        escalate(&marker, "danger-full-access"),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(marker.exists());
    let ww = w.ws.join("ww");
    let out = bash(&tool, &ctx(&s, "w"), escalate(&ww, "workspace-write")).await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("SANDBOX_UNAVAILABLE: sandbox unavailable: bwrap: probe failed: test"),
        "{}",
        out.content
    );
    assert!(!ww.exists());
}

#[tokio::test]
async fn background_jobs_report_through_job_output_per_session() {
    let w = world();
    let c = compose(SandboxMode::ReadOnly, &w.ws, None);
    let jobs = c.bash.job_output();
    let (s1, s2) = (
        w.store.create(&w.ws).unwrap(),
        w.store.create(&w.ws).unwrap(),
    );
    let start = json!({ "command": format!("echo hi; touch '{}'", w.ws.join("bg").display()), "description": "bg", "run_in_background": true });
    let out = bash(&c.bash, &ctx(&s1, "b"), start).await;
    assert!(
        out.content.starts_with("started background job "),
        "{}",
        out.content
    );
    let id: u64 = out.content["started background job ".len()..]
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let other = jobs
        .call(&ctx(&s2, "o"), json!({ "job_id": id, "wait": true }))
        .await;
    assert_eq!(
        other.content,
        format!("no background job {id} in this session")
    );
    let done = jobs
        .call(&ctx(&s1, "o"), json!({ "job_id": id, "wait": true }))
        .await;
    assert!(
        done.content
            .contains(&texts::denial_marker(SandboxMode::ReadOnly)),
        "{}",
        done.content
    );
    assert!(done.content.contains("stdout:\nhi\n"), "{}", done.content);
    assert!(!w.ws.join("bg").exists());
}

// ---- the policy context ---------------------------------------------------

fn context_messages(s: &Session) -> Vec<String> {
    s.with_records(|r| {
        r.iter()
            .filter_map(|r| match &r.event {
                Event::Message {
                    source: Some(src),
                    content,
                    ..
                } if src == stockade_agent::context::SOURCE => Some(content.clone()),
                _ => None,
            })
            .collect()
    })
}

#[test]
fn reconciliation_adds_nothing_when_unchanged_and_one_snapshot_per_change() {
    let w = world();
    let c = compose(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let ctxm = PolicyContext::new(c.policy.clone(), c.approval.clone(), true);
    let s = w.store.create(&w.ws).unwrap();
    assert!(ctxm.reconcile(&s).unwrap().is_some());
    assert!(ctxm.reconcile(&s).unwrap().is_none());
    assert!(ctxm.reconcile(&s).unwrap().is_none());
    s.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    assert!(ctxm.reconcile(&s).unwrap().is_some());
    assert!(ctxm.reconcile(&s).unwrap().is_none());
    let msgs = context_messages(&s);
    assert_eq!(msgs.len(), 2);
    let text = msgs[1].replace(&w.ws.display().to_string(), "<workspace>");
    insta::assert_snapshot!("policy_context_read_only_override", text);
    let first = msgs[0].replace(&w.ws.display().to_string(), "<workspace>");
    insta::assert_snapshot!("policy_context_default_workspace_write", first);
}

#[test]
fn policy_context_for_every_composition() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let policy = Arc::new(PolicyService::new(SandboxMode::DangerFullAccess, &w.ws));
    let never = Arc::new(ApprovalService::new(ApprovalPolicy::Never, vec![]));
    let unconfined = PolicyContext::new(policy.clone(), None, false).render(&s);
    let files_only = PolicyContext::new(policy.clone(), None, false)
        .with_fenced_files(true)
        .render(&s);
    insta::assert_snapshot!("policy_context_files_only", files_only);
    let no_approval = PolicyContext::new(policy.clone(), None, true).render(&s);
    let never = PolicyContext::new(policy, Some(never), true).render(&s);
    insta::assert_snapshot!("policy_context_unconfined", unconfined);
    insta::assert_snapshot!("policy_context_no_approval", no_approval);
    insta::assert_snapshot!("policy_context_never", never);
}

#[test]
fn a_resumed_session_keeps_overrides_and_sees_a_changed_default() {
    let w = world();
    let id = {
        let c = compose(
            SandboxMode::WorkspaceWrite,
            &w.ws,
            Some(approval(ApprovalOutcome::Rejected)),
        );
        let s = w.store.create(&w.ws).unwrap();
        s.set_approval_policy(ApprovalPolicy::Never, KnobSource::User)
            .unwrap();
        PolicyContext::new(c.policy.clone(), c.approval.clone(), true)
            .reconcile(&s)
            .unwrap();
        s.id().clone()
    };
    // The process restarts with a different configured default mode.
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let s = w.store.open(&id).unwrap();
    assert_eq!(
        c.approval.as_ref().unwrap().policy(&s),
        ApprovalPolicy::Never
    );
    assert_eq!(c.policy.effective_mode(Some(&s)), SandboxMode::ReadOnly);
    let added = PolicyContext::new(c.policy.clone(), c.approval.clone(), true)
        .reconcile(&s)
        .unwrap();
    assert!(
        added.is_some(),
        "the changed default must enter the next message"
    );
    let last = context_messages(&s).pop().unwrap();
    assert!(
        last.contains("Sandbox mode: read-only (configured default)."),
        "{last}"
    );
    assert!(
        last.contains("Approval policy: never (set for this session)."),
        "{last}"
    );
}

// ---- presets --------------------------------------------------------------

#[test]
fn presets_write_through_only_what_changes_and_read_back() {
    let w = world();
    let c = compose(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let presets = PresetService::new(
        PresetService::default_table(),
        c.policy.clone(),
        c.approval.clone(),
        true,
    )
    .unwrap();
    let s = w.store.create(&w.ws).unwrap();
    assert_eq!(presets.current(&s), "workspace-write");
    assert_eq!(
        presets.select(&s, "workspace-write").unwrap(),
        0,
        "a no-op selection records nothing"
    );
    assert_eq!(s.records().len(), 0);
    assert_eq!(presets.select(&s, "danger-full-access").unwrap(), 2);
    assert_eq!(presets.current(&s), "danger-full-access");
    s.set_approval_policy(ApprovalPolicy::Ask, KnobSource::User)
        .unwrap();
    assert_eq!(presets.current(&s), "custom");
    assert_eq!(
        presets.select(&s, "workspace-write").unwrap(),
        1,
        "only the mode changes"
    );
    let e = presets.select(&s, "yolo").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown preset \"yolo\": expected one of read-only, workspace-write, danger-full-access"
    );
    let knobs: Vec<String> = s.with_records(|r| {
        r.iter()
            .filter_map(|r| match &r.event {
                Event::SandboxMode { mode, source } => Some(format!("mode {mode} {source:?}")),
                Event::ApprovalPolicy { policy, source } => {
                    Some(format!("approval {policy} {source:?}"))
                }
                _ => None,
            })
            .collect()
    });
    insta::assert_snapshot!("preset_knob_events", knobs.join("\n"));
}

#[test]
fn presets_refuse_a_partial_composition() {
    let w = world();
    let policy = Arc::new(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws));
    let e = PresetService::new(PresetService::default_table(), policy.clone(), None, true)
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "permission presets need an approval service (configure [approval])"
    );
    let e = PresetService::new(
        PresetService::default_table(),
        policy,
        Some(approval(ApprovalOutcome::Rejected)),
        false,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        "permission presets need a confining executor (a sandboxed bash executor)"
    );
}

#[tokio::test]
async fn delegation_never_widens() {
    let w = world();
    let c = compose(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let parent = w.store.create(&w.ws).unwrap();
    parent
        .set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    let child = w.store.create_child(&parent, &w.ws).unwrap();
    assert_eq!(c.policy.effective_mode(Some(&child)), SandboxMode::ReadOnly);
    let f = w.ws.join("child-write");
    let out = bash(&c.bash, &ctx(&child, "c"), touch(&f)).await;
    assert!(
        out.content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly))
    );
    assert!(!f.exists());
}

#[tokio::test]
async fn two_sessions_in_one_process_never_mix() {
    let w = world();
    let ws2 = w.outside.clone();
    let c = compose(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let ctxm = PolicyContext::new(c.policy.clone(), c.approval.clone(), true);
    let a = w.store.create(&w.ws).unwrap();
    let b = w.store.create(&ws2).unwrap();
    b.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    ctxm.reconcile(&a).unwrap();
    ctxm.reconcile(&b).unwrap();
    let (ca, cb) = (ctx(&a, "a1"), ctx(&b, "b1"));
    let (ra, rb) = tokio::join!(
        bash(&c.bash, &ca, touch(&w.ws.join("a"))),
        bash(&c.bash, &cb, touch(&ws2.join("b")))
    );
    assert!(!ra.is_error, "{}", ra.content);
    assert!(w.ws.join("a").exists());
    assert!(
        rb.content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly))
    );
    assert!(!ws2.join("b").exists());
    // a writes only in its own root.
    let out = bash(&c.bash, &ctx(&a, "a2"), touch(&ws2.join("from-a"))).await;
    assert!(out.is_error && !ws2.join("from-a").exists());
    assert_eq!(a.sandbox_override(), None);
    assert!(context_messages(&a)[0].contains("workspace-write"));
    assert!(context_messages(&b)[0].contains("read-only"));
    assert!(
        a.records()
            .iter()
            .all(|r| !matches!(&r.event, Event::SandboxMode { .. }))
    );
}

#[tokio::test]
async fn the_model_facing_texts_are_pinned() {
    let m = SandboxMode::WorkspaceWrite;
    let net = Widening {
        mode: None,
        network: NetworkMode::Allow,
    };
    let both = Widening {
        mode: Some(m),
        network: NetworkMode::AllowListed,
    };
    let all = [
        (
            "denial_marker(read-only)",
            texts::denial_marker(SandboxMode::ReadOnly),
        ),
        ("DENIAL_INSTRUCTION", texts::DENIAL_INSTRUCTION.to_owned()),
        ("ESCALATION_HINT", texts::ESCALATION_HINT.to_owned()),
        ("not_wider", texts::not_wider(m, m)),
        (
            "MISSING_JUSTIFICATION",
            texts::MISSING_JUSTIFICATION.to_owned(),
        ),
        ("rejected", texts::rejected(m)),
        ("REJECTED_NO_REASK", texts::REJECTED_NO_REASK.to_owned()),
        ("cancelled", texts::cancelled(m)),
        ("unavailable", texts::unavailable(m)),
        ("no_approval_service", texts::no_approval_service(m)),
        ("no_session", texts::no_session(m)),
        (
            "runner_failed",
            texts::runner_failed("bwrap: setting up uid map: Permission denied"),
        ),
        (
            "ESCALATION_NOT_OFFERED",
            texts::ESCALATION_NOT_OFFERED.to_owned(),
        ),
        (
            "network_denial_marker(crates.io, deny)",
            texts::network_denial_marker(Some("crates.io"), NetworkMode::Deny),
        ),
        (
            "NETWORK_DENIAL_INSTRUCTION",
            texts::NETWORK_DENIAL_INSTRUCTION.to_owned(),
        ),
        (
            "network escalation_hint(deny)",
            network_texts::escalation_hint(NetworkMode::Deny).unwrap(),
        ),
        (
            "network escalation_hint(allow-listed)",
            network_texts::escalation_hint(NetworkMode::AllowListed).unwrap(),
        ),
        (
            "network not_wider",
            network_texts::not_wider(NetworkMode::AllowListed, NetworkMode::Allow),
        ),
        (
            "network MISSING_JUSTIFICATION",
            network_texts::MISSING_JUSTIFICATION.to_owned(),
        ),
        ("network rejected", network_texts::rejected(net)),
        ("network rejected (both)", network_texts::rejected(both)),
        ("network cancelled", network_texts::cancelled(net)),
        ("network unavailable", network_texts::unavailable(net)),
        (
            "network no_approval_service",
            network_texts::no_approval_service(net),
        ),
        ("network no_session", network_texts::no_session(net)),
        ("network NOT_OFFERED", network_texts::NOT_OFFERED.to_owned()),
    ];
    let text: Vec<String> = all.iter().map(|(k, v)| format!("{k}:\n{v}")).collect();
    insta::assert_snapshot!("model_facing_texts", text.join("\n\n"));
    // And a whole denied bash result as the model reads it.
    let w = world();
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let s = w.store.create(&w.ws).unwrap();
    let out = bash(&c.bash, &ctx(&s, "c1"), touch(&w.ws.join("f"))).await;
    insta::assert_snapshot!(
        "denied_bash_result",
        out.content
            .replace(&w.ws.display().to_string(), "<workspace>")
    );
}

/// Never answers: the ask is dropped with the turn.
struct Hang;
impl Answerer for Hang {
    fn answer<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_cancelled_ask_still_records_its_decision() {
    let w = world();
    let service = Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Hang)],
    ));
    let c = compose(SandboxMode::ReadOnly, &w.ws, Some(service));
    let s = w.store.create(&w.ws).unwrap();
    let marker = w.ws.join("m");
    let cx = ctx(&s, "hang");
    let call = bash(&c.bash, &cx, escalate(&marker, "workspace-write"));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), call)
            .await
            .is_err()
    );
    let audit: Vec<String> = s.with_records(|r| {
        r.iter()
            .filter_map(|r| match &r.event {
                Event::ApprovalAsked { call_id, .. } => Some(format!("asked {call_id}")),
                Event::ApprovalDecided {
                    call_id, outcome, ..
                } => Some(format!("decided {call_id} {outcome}")),
                _ => None,
            })
            .collect()
    });
    assert_eq!(audit, ["asked hang", "decided hang cancelled"]);
    assert!(!marker.exists());
}

/// A rejection is remembered by what the command does, not how it is
/// spelled: whitespace, quoting, `bash -c` / `sh -c` wrappers, a workdir
/// named another way, the network field instead of the mode it is part of.
/// None of those asks the user again, and nothing runs. A different
/// command, or a wider request, is a new question.
#[tokio::test]
async fn a_rejection_answers_every_spelling_of_the_same_command() {
    let w = world();
    let c = compose(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(approval(ApprovalOutcome::Rejected)),
    );
    let s = w.store.create(&w.ws).unwrap();
    let marker = w.ws.join("marker");
    let call = |command: String, extra: serde_json::Value| {
        let mut v = json!({ "command": command, "description": "make a marker",
                            "justification": "the task needs this file" });
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        v
    };
    let plain = format!("touch {}", marker.display());
    let out = bash(
        &c.bash,
        &ctx(&s, "c0"),
        call(
            plain.clone(),
            json!({"sandbox_permissions": "danger-full-access"}),
        ),
    )
    .await;
    assert!(
        out.content.contains(texts::REJECTED_NO_REASK),
        "{}",
        out.content
    );
    assert_eq!(asks(&s), 1);
    let spellings = [
        format!("  touch   {}  ", marker.display()),
        format!("touch '{}'", marker.display()),
        format!("bash -c 'touch {}'", marker.display()),
        format!("sh -c \"touch   '{}'\"", marker.display()),
        format!("/bin/sh -lc 'bash -c \"touch {}\"'", marker.display()),
        format!("/usr/bin/env bash -c 'touch {}'", marker.display()),
    ];
    let fields = [
        json!({"sandbox_permissions": "danger-full-access"}),
        json!({"sandbox_permissions": "workspace-write"}),
        // danger-full-access confines nothing: the network alone is
        // narrower than what was refused.
        json!({"network": "allow"}),
        json!({"sandbox_permissions": "workspace-write", "network": "allow-listed"}),
        json!({"sandbox_permissions": "workspace-write", "workdir": "."}),
        json!({"sandbox_permissions": "workspace-write", "workdir": w.ws}),
        json!({"sandbox_permissions": "workspace-write", "description": "something else", "timeout_ms": 5000}),
    ];
    for (i, spelling) in spellings.iter().enumerate() {
        for (j, extra) in fields.iter().enumerate() {
            let out = bash(
                &c.bash,
                &ctx(&s, &format!("c{i}-{j}")),
                call(spelling.clone(), extra.clone()),
            )
            .await;
            assert!(out.is_error, "{spelling} {extra}: {}", out.content);
            assert!(
                out.content.contains(texts::REJECTED_NO_REASK),
                "{spelling} {extra}: {}",
                out.content
            );
        }
    }
    assert_eq!(asks(&s), 1, "a respelled request asked the user again");
    assert!(!marker.exists());
    // Another command, or the same one in another directory, is a new
    // question.
    let sub = w.ws.join("sub");
    std::fs::create_dir(&sub).unwrap();
    bash(
        &c.bash,
        &ctx(&s, "n1"),
        call(
            format!("touch {}.2", marker.display()),
            json!({"sandbox_permissions": "workspace-write"}),
        ),
    )
    .await;
    assert_eq!(asks(&s), 2);
    bash(
        &c.bash,
        &ctx(&s, "n2"),
        call(
            plain,
            json!({"sandbox_permissions": "workspace-write", "workdir": "sub"}),
        ),
    )
    .await;
    assert_eq!(asks(&s), 3);
    assert!(!marker.exists());
}
