//! The deployment's file policy in the agent layer: every resolved policy
//! carries it, whichever of escalation, session override or default chose
//! the mode, and the policy context states it exactly where a confining
//! mode enforces it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use common::world;
use serde_json::json;
use stockade_agent::{
    ApprovalService, BashTool, EscalationGate, Fixed, PolicyContext, PolicyService, Tool,
    ToolContext,
};
use stockade_core::{
    ApprovalOutcome, ApprovalPolicy, Confined, FilePolicy, SandboxMode, SandboxPolicy,
    SandboxProvider, SandboxUnavailable,
};
use stockade_session::KnobSource;
use stockade_shell::{SandboxedExecutor, ShellExecutor};

fn files() -> FilePolicy {
    FilePolicy {
        writable_roots: vec!["/home/u/.npm".into(), "/opt/shared".into()],
        deny_read: vec!["/home/u/.ssh".into(), "/home/u/.aws".into()],
        read_only: vec!["/home/u/proj/.env".into()],
    }
}

#[test]
fn every_path_of_resolution_carries_the_file_policy() {
    let w = world();
    let policy = PolicyService::new(SandboxMode::ReadOnly, &w.ws).with_files(files());
    assert_eq!(policy.files(), &files());
    // No session: the configured default.
    let p = policy.resolve(None, None);
    assert_eq!((p.mode, &p.files), (SandboxMode::ReadOnly, &files()));
    let s = w.store.create(&w.ws).unwrap();
    let p = policy.resolve(Some(&s), None);
    assert_eq!((p.mode, &p.files), (SandboxMode::ReadOnly, &files()));
    // A session override.
    s.set_sandbox_mode(SandboxMode::WorkspaceWrite, KnobSource::User)
        .unwrap();
    let p = policy.resolve(Some(&s), None);
    assert_eq!((p.mode, &p.files), (SandboxMode::WorkspaceWrite, &files()));
    // An escalation, confining or not: the lists still ride along (a
    // provider never sees danger-full-access, so nothing enforces them
    // there).
    for granted in [SandboxMode::WorkspaceWrite, SandboxMode::DangerFullAccess] {
        let p = policy.resolve(Some(&s), Some(granted));
        assert_eq!((p.mode, &p.files), (granted, &files()));
    }
    // A service without lists stamps none.
    let bare = PolicyService::new(SandboxMode::ReadOnly, &w.ws);
    assert!(bare.resolve(Some(&s), None).files.is_empty());
}

/// Records the policy each confine is asked for, then refuses: nothing runs.
#[derive(Default)]
struct Recording(Mutex<Vec<SandboxPolicy>>);

impl SandboxProvider for Recording {
    fn confine(
        &self,
        _: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        self.0.lock().unwrap().push(policy.clone());
        Err(SandboxUnavailable::single("recording", "records only"))
    }
}

#[tokio::test]
async fn bash_hands_the_provider_the_file_policy_by_default_override_and_escalation() {
    let w = world();
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &w.ws).with_files(files()));
    let provider = Arc::new(Recording::default());
    let exec: Arc<dyn ShellExecutor> = Arc::new(SandboxedExecutor::new(
        provider.clone(),
        policy.resolve(None, None),
    ));
    let approval = Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Fixed(ApprovalOutcome::AllowedOnce))],
    ));
    let tool = BashTool::new(exec, policy, EscalationGate::new(Some(approval)));
    let s = w.store.create(&w.ws).unwrap();
    let ctx = |call: &str| ToolContext {
        session: Some(s.clone()),
        call_id: call.into(),
    };
    let plain = json!({ "command": "true", "description": "nothing" });
    tool.call(&ctx("default"), plain.clone()).await;
    let mut wider = plain.clone();
    wider["sandbox_permissions"] = json!("workspace-write");
    wider["justification"] = json!("the task needs it");
    tool.call(&ctx("escalated"), wider).await;
    s.set_sandbox_mode(SandboxMode::WorkspaceWrite, KnobSource::User)
        .unwrap();
    tool.call(&ctx("override"), plain).await;

    let seen = provider.0.lock().unwrap().clone();
    let modes: Vec<String> = seen.iter().map(|p| p.mode.to_string()).collect();
    assert_eq!(modes, ["read-only", "workspace-write", "workspace-write"]);
    for p in &seen {
        assert_eq!(p.files, files(), "{}", p.mode);
    }
}

#[test]
fn the_policy_context_states_the_lists_where_they_are_enforced() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let approval = Arc::new(ApprovalService::new(ApprovalPolicy::Ask, vec![]));
    let render = |mode: SandboxMode| {
        let policy = Arc::new(PolicyService::new(mode, &w.ws).with_files(files()));
        PolicyContext::new(policy, Some(approval.clone()), true)
            .with_fenced_files(true)
            .render(&s)
            .replace(&w.ws.display().to_string(), "<workspace>")
    };
    let ww = render(SandboxMode::WorkspaceWrite);
    assert!(
        ww.contains(
            "may write only under <workspace>, /home/u/.npm, /opt/shared, /tmp and $TMPDIR"
        ),
        "{ww}"
    );
    insta::assert_snapshot!("policy_context_workspace_write_with_lists", ww);

    let ro = render(SandboxMode::ReadOnly);
    assert!(
        !ro.contains("/opt/shared") && ro.contains("may write only /dev/null"),
        "no extra root is writable under read-only: {ro}"
    );
    assert!(ro.contains("Never read (refused wherever the sandbox enforces it): /home/u/.ssh"));
    insta::assert_snapshot!("policy_context_read_only_with_lists", ro);

    let dfa = render(SandboxMode::DangerFullAccess);
    for path in ["/opt/shared", "/home/u/.ssh", "/home/u/proj/.env"] {
        assert!(!dfa.contains(path), "nothing is claimed enforced: {dfa}");
    }
    insta::assert_snapshot!("policy_context_danger_full_access_with_lists", dfa);

    // Without lists the message is what it always was.
    let plain = PolicyContext::new(
        Arc::new(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws)),
        Some(approval.clone()),
        true,
    )
    .render(&s);
    assert!(!plain.contains("Never read") && !plain.contains("Read-only even"));
    // Empty lists (deny_read = []) say nothing either.
    let empty = PolicyContext::new(
        Arc::new(
            PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws)
                .with_files(FilePolicy::default()),
        ),
        Some(approval),
        true,
    )
    .render(&s);
    assert_eq!(plain, empty);
}
