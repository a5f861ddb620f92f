//! The file tools under the same policy as bash: fenced writes, the shared
//! escalation gate, per-session roots.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use common::world;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use stockade_agent::tools::files::file_tools;
use stockade_agent::{
    ApprovalService, BashTool, EscalationGate, Fixed, PolicyService, Tool, ToolContext,
};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, SandboxMode, texts};
use stockade_fs::{FileSystem, LocalFs, SandboxedFs};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_session::{Event, KnobSource, Session};
use stockade_shell::{SandboxedExecutor, ShellExecutor};

fn fenced() -> Arc<dyn FileSystem> {
    // No host temp roots: the tests own every writable root.
    Arc::new(SandboxedFs::with_temp_roots(vec![]))
}

fn tools(
    default: SandboxMode,
    root: &Path,
    outcome: Option<ApprovalOutcome>,
    fs: Arc<dyn FileSystem>,
) -> (impl Tool, impl Tool, impl Tool) {
    let policy = Arc::new(PolicyService::new(default, root));
    let approval = outcome.map(|o| {
        Arc::new(ApprovalService::new(
            ApprovalPolicy::Ask,
            vec![Arc::new(Fixed(o))],
        ))
    });
    file_tools(fs, policy, EscalationGate::new(approval))
}

fn ctx(s: &Session, id: &str) -> ToolContext {
    ToolContext {
        session: Some(s.clone()),
        call_id: id.into(),
    }
}

fn write_args(path: &Path, escalate: Option<&str>) -> serde_json::Value {
    let mut v = json!({ "path": path, "content": "new\n" });
    if let Some(to) = escalate {
        v["sandbox_permissions"] = json!(to);
        v["justification"] = json!("the task needs it");
    }
    v
}

fn edit_args(path: &Path, escalate: Option<&str>) -> serde_json::Value {
    let mut v = json!({ "path": path, "old_string": "old", "new_string": "new" });
    if let Some(to) = escalate {
        v["sandbox_permissions"] = json!(to);
        v["justification"] = json!("the task needs it");
    }
    v
}

#[test]
fn write_and_edit_advertise_escalation_exactly_when_fenced() {
    let w = world();
    let (read, write, edit) = tools(SandboxMode::ReadOnly, &w.ws, None, fenced());
    assert!(
        read.schema()["properties"]
            .get("sandbox_permissions")
            .is_none()
    );
    for t in [&write as &dyn Tool, &edit] {
        assert_eq!(
            t.schema()["properties"]["sandbox_permissions"]["enum"],
            json!(["workspace-write", "danger-full-access"])
        );
        assert!(t.schema()["properties"].get("justification").is_some());
    }
    let (_, write, edit) = tools(SandboxMode::ReadOnly, &w.ws, None, Arc::new(LocalFs));
    for t in [&write as &dyn Tool, &edit] {
        assert!(
            t.schema()["properties"]
                .get("sandbox_permissions")
                .is_none(),
            "{}",
            t.name()
        );
    }
}

#[tokio::test]
async fn read_only_refuses_with_the_bash_marker_and_names_path_and_roots() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let (read, write, edit) = tools(SandboxMode::ReadOnly, &w.ws, None, fenced());
    let f = w.ws.join("f");
    std::fs::write(&f, "old\n").unwrap();
    for (tool, args) in [
        (&write as &dyn Tool, write_args(&f, None)),
        (&edit, edit_args(&f, None)),
    ] {
        let out = tool.call(&ctx(&s, "c"), args).await;
        assert!(out.is_error);
        assert!(
            out.content
                .starts_with(&texts::denial_marker(SandboxMode::ReadOnly)),
            "{}",
            out.content
        );
        assert!(
            out.content.contains(&f.display().to_string()),
            "{}",
            out.content
        );
        assert!(
            out.content.contains("only /dev/null is writable"),
            "{}",
            out.content
        );
        assert!(out.content.contains(texts::DENIAL_INSTRUCTION));
        assert!(out.content.contains(texts::ESCALATION_HINT));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "old\n");
    }
    // Reads stay unfenced, like reads under bash.
    let out = read.call(&ctx(&s, "r"), json!({ "path": "f" })).await;
    assert_eq!(out.content, "old\n");
}

#[tokio::test]
async fn workspace_write_writes_inside_and_names_the_writable_roots_outside() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let (_, write, edit) = tools(SandboxMode::WorkspaceWrite, &w.ws, None, fenced());
    let out = write
        .call(&ctx(&s, "c"), write_args(Path::new("sub/new.txt"), None))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(w.ws.join("sub/new.txt")).unwrap(),
        "new\n"
    );
    let target = w.outside.join("x");
    let out = write.call(&ctx(&s, "c2"), write_args(&target, None)).await;
    assert!(
        out.content
            .starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
        "{}",
        out.content
    );
    assert!(out.content.contains(&target.display().to_string()));
    assert!(
        out.content.contains(&w.ws.display().to_string()),
        "names the writable root: {}",
        out.content
    );
    assert!(!target.exists());
    let out = write
        .call(&ctx(&s, "c3"), write_args(&w.ws.join("../outside/y"), None))
        .await;
    assert!(out.is_error && !w.outside.join("y").exists());
    // edit errors are clear.
    std::fs::write(w.ws.join("e"), "old old\n").unwrap();
    let out = edit
        .call(&ctx(&s, "e1"), edit_args(Path::new("e"), None))
        .await;
    assert!(out.is_error && out.content.contains('2'), "{}", out.content);
    let out = edit
        .call(
            &ctx(&s, "e2"),
            json!({ "path": "e", "old_string": "zzz", "new_string": "y" }),
        )
        .await;
    assert!(out.is_error, "{}", out.content);
    let out = edit
        .call(
            &ctx(&s, "e3"),
            json!({ "path": "e", "old_string": "old", "new_string": "new", "replace_all": true }),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(w.ws.join("e")).unwrap(),
        "new new\n"
    );
}

#[tokio::test]
async fn every_escalation_outcome_for_write_and_edit() {
    let w = world();
    let f = w.outside.join("target");
    let cases: Vec<(Option<ApprovalOutcome>, Option<String>)> = vec![
        (Some(ApprovalOutcome::AllowedOnce), None),
        (
            Some(ApprovalOutcome::Rejected),
            Some(format!(
                "{}\n{}",
                texts::rejected(SandboxMode::DangerFullAccess),
                texts::REJECTED_NO_REASK
            )),
        ),
        (
            Some(ApprovalOutcome::Cancelled),
            Some(texts::cancelled(SandboxMode::DangerFullAccess)),
        ),
        (
            Some(ApprovalOutcome::Unavailable),
            Some(texts::unavailable(SandboxMode::DangerFullAccess)),
        ),
        (
            None,
            Some(texts::no_approval_service(SandboxMode::DangerFullAccess)),
        ),
    ];
    for (i, (outcome, want)) in cases.into_iter().enumerate() {
        let s = w.store.create(&w.ws).unwrap();
        let (_, write, edit) = tools(SandboxMode::WorkspaceWrite, &w.ws, outcome, fenced());
        for (tool, args) in [
            (
                &write as &dyn Tool,
                write_args(&f, Some("danger-full-access")),
            ),
            (&edit, edit_args(&f, Some("danger-full-access"))),
        ] {
            std::fs::write(&f, "old\n").unwrap();
            let out = tool.call(&ctx(&s, &format!("c{i}")), args).await;
            match &want {
                None => {
                    assert!(!out.is_error, "case {i} {}: {}", tool.name(), out.content);
                    assert!(
                        out.content
                            .contains("granted by the user for this call only"),
                        "{}",
                        out.content
                    );
                    assert_eq!(std::fs::read_to_string(&f).unwrap(), "new\n");
                }
                Some(text) => {
                    assert!(out.is_error);
                    assert_eq!(&out.content, text, "case {i} {}", tool.name());
                    assert_eq!(
                        std::fs::read_to_string(&f).unwrap(),
                        "old\n",
                        "case {i} {} changed the file",
                        tool.name()
                    );
                }
            }
        }
    }
    // Not wider, a missing justification, no session: nobody is asked.
    let s = w.store.create(&w.ws).unwrap();
    let (_, write, _) = tools(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(ApprovalOutcome::AllowedOnce),
        fenced(),
    );
    let out = write
        .call(&ctx(&s, "n"), write_args(&f, Some("workspace-write")))
        .await;
    assert_eq!(
        out.content,
        texts::not_wider(SandboxMode::WorkspaceWrite, SandboxMode::WorkspaceWrite)
    );
    let mut args = write_args(&f, Some("danger-full-access"));
    args["justification"] = json!("");
    assert_eq!(
        write.call(&ctx(&s, "j"), args).await.content,
        texts::MISSING_JUSTIFICATION
    );
    let agentless = ToolContext {
        session: None,
        call_id: "x".into(),
    };
    let out = write
        .call(&agentless, write_args(&f, Some("danger-full-access")))
        .await;
    assert_eq!(
        out.content,
        texts::no_session(SandboxMode::DangerFullAccess)
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "old\n");
    assert_eq!(
        s.with_records(|r| r
            .iter()
            .filter(|r| matches!(r.event, Event::ApprovalAsked { .. }))
            .count()),
        0
    );
    // A grant to workspace-write from read-only is the narrow case.
    let s = w.store.create(&w.ws).unwrap();
    s.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    let g = w.ws.join("granted");
    let out = write
        .call(&ctx(&s, "g"), write_args(&g, Some("workspace-write")))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(g.exists());
    let again = w.ws.join("again");
    let out = write.call(&ctx(&s, "h"), write_args(&again, None)).await;
    assert!(
        out.content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly)),
        "no grant is stored"
    );
}

#[tokio::test]
async fn two_sessions_with_different_roots_write_only_in_their_own() {
    let w = world();
    let (ws_a, ws_b) = (w.ws.clone(), w.outside.clone());
    let exe = std::env::current_exe().unwrap();
    let launcher = exe.parent().unwrap().parent().unwrap().join("landlock-run");
    let mut providers: Vec<(&str, Arc<LocalProvider>)> = Vec::new();
    for (name, backend) in [
        ("bwrap", BackendPreference::Bwrap),
        ("landlock", BackendPreference::Landlock),
    ] {
        let s = LocalSettings {
            backend,
            launcher_path: Some(launcher.clone()),
            ..Default::default()
        };
        let p = Arc::new(LocalProvider::new(s).unwrap());
        if name == "bwrap"
            && std::process::Command::new("bwrap")
                .arg("--version")
                .output()
                .is_err()
        {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "bwrap must exist in CI"
            );
            continue;
        }
        providers.push((name, p));
    }
    for (backend, provider) in providers {
        let policy = Arc::new(PolicyService::new(
            SandboxMode::WorkspaceWrite,
            "/nonexistent-fallback",
        ));
        let exec: Arc<dyn ShellExecutor> =
            Arc::new(SandboxedExecutor::new(provider, policy.resolve(None, None)));
        let bash = BashTool::new(exec, policy.clone(), EscalationGate::new(None));
        let (_, write, _) = file_tools(fenced(), policy, EscalationGate::new(None));
        let a = w.store.create(&ws_a).unwrap();
        let b = w.store.create(&ws_b).unwrap();
        for (me, mine, theirs, tag) in [(&a, &ws_a, &ws_b, "a"), (&b, &ws_b, &ws_a, "b")] {
            let own = mine.join(format!("{backend}-{tag}-bash"));
            let cmd = json!({ "command": format!("touch '{}'", own.display()), "description": "own root" });
            let (c1, c2) = (ctx(me, "1"), ctx(me, "2"));
            let file = mine.join(format!("{backend}-{tag}-file"));
            let (r1, r2) = tokio::join!(
                bash.call(&c1, cmd),
                write.call(&c2, write_args(&file, None))
            );
            assert!(!r1.is_error, "{backend} {tag}: {}", r1.content);
            assert!(!r2.is_error, "{backend} {tag}: {}", r2.content);
            let foreign = theirs.join(format!("{backend}-{tag}-intrusion"));
            let cmd = json!({ "command": format!("touch '{}'", foreign.display()), "description": "neighbour root" });
            let r = bash.call(&ctx(me, "3"), cmd).await;
            assert!(
                r.content
                    .starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
                "{backend} {tag}: {}",
                r.content
            );
            let r = write.call(&ctx(me, "4"), write_args(&foreign, None)).await;
            assert!(
                r.content
                    .starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
                "{backend} {tag}: {}",
                r.content
            );
            assert!(!foreign.exists());
        }
    }
}
