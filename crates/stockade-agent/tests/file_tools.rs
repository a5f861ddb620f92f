//! The file tools under the same policy as bash: fenced writes, reads
//! fenced by the deny-read list, the shared escalation gate, per-session
//! roots.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use common::world;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use stockade_agent::tools::files::file_tools;
use stockade_agent::{
    ApprovalService, BashTool, EscalationGate, Fixed, PolicyService, Tool, ToolContext,
};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, FilePolicy, SandboxMode, texts};
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
    tools_with(default, root, outcome, fs, FilePolicy::default())
}

/// The tools under a deployment whose file policy is `files`.
fn tools_with(
    default: SandboxMode,
    root: &Path,
    outcome: Option<ApprovalOutcome>,
    fs: Arc<dyn FileSystem>,
    files: FilePolicy,
) -> (impl Tool, impl Tool, impl Tool) {
    let policy = Arc::new(PolicyService::new(default, root).with_files(files));
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
fn every_file_tool_advertises_escalation_exactly_when_fenced() {
    let w = world();
    let (read, write, edit) = tools(SandboxMode::ReadOnly, &w.ws, None, fenced());
    for t in [&read as &dyn Tool, &write, &edit] {
        assert_eq!(
            t.schema()["properties"]["sandbox_permissions"]["enum"],
            json!(["workspace-write", "danger-full-access"]),
            "{}",
            t.name()
        );
        assert!(t.schema()["properties"].get("justification").is_some());
        assert!(
            t.description().contains("never work around it"),
            "{}",
            t.name()
        );
    }
    let (read, write, edit) = tools(SandboxMode::ReadOnly, &w.ws, None, Arc::new(LocalFs));
    for t in [&read as &dyn Tool, &write, &edit] {
        assert!(
            t.schema()["properties"]
                .get("sandbox_permissions")
                .is_none(),
            "{}",
            t.name()
        );
    }
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
fn the_fenced_read_tool_is_pinned() {
    let w = world();
    let (read, _, _) = tools(SandboxMode::WorkspaceWrite, &w.ws, None, fenced());
    insta::assert_snapshot!("read_schema_fenced", pretty_sorted(&read.schema()));
    insta::assert_snapshot!("read_description_fenced", read.description());
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
    // Reads are fenced by the deny-read list alone, like reads under bash.
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

fn read_args(path: &Path, escalate: Option<&str>) -> serde_json::Value {
    let mut v = json!({ "path": path });
    if let Some(to) = escalate {
        v["sandbox_permissions"] = json!(to);
        v["justification"] = json!("the task needs it");
    }
    v
}

/// `outside/id` (denied) and `ws/id-link` pointing at it.
fn denied_secret(w: &common::World) -> (PathBuf, PathBuf, FilePolicy) {
    let secret = w.outside.join("id");
    std::fs::write(&secret, "private\n").unwrap();
    let link = w.ws.join("id-link");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let files = FilePolicy {
        deny_read: vec![secret.clone()],
        ..FilePolicy::default()
    };
    (secret, link, files)
}

#[tokio::test]
async fn read_refuses_a_denied_file_with_the_marker_in_every_confining_mode() {
    let w = world();
    let (secret, link, files) = denied_secret(&w);
    let real = std::fs::canonicalize(&secret).unwrap();
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let s = w.store.create(&w.ws).unwrap();
        let (read, write, _) = tools_with(mode, &w.ws, None, fenced(), files.clone());
        for asked in [&secret, &link] {
            let out = read.call(&ctx(&s, "r"), read_args(asked, None)).await;
            assert!(out.is_error, "{mode}: {}", out.content);
            assert!(
                out.content.starts_with(&format!(
                    "{} reading {}",
                    texts::denial_marker(mode),
                    asked.display()
                )),
                "{}",
                out.content
            );
            assert!(
                out.content.contains(&real.display().to_string()),
                "names the denied path: {}",
                out.content
            );
            assert!(out.content.contains(texts::DENIAL_INSTRUCTION));
            assert!(out.content.contains(texts::ESCALATION_HINT));
            assert!(!out.content.contains("private"), "{}", out.content);
        }
        // Writing it is refused as the secret, in either mode.
        let out = write.call(&ctx(&s, "w"), write_args(&link, None)).await;
        assert!(
            out.content.starts_with(&texts::denial_marker(mode))
                && out.content.contains("deny-read list"),
            "{mode}: {}",
            out.content
        );
        // A file beside it reads as ever.
        std::fs::write(w.ws.join("plain"), "plain\n").unwrap();
        let out = read
            .call(&ctx(&s, "p"), read_args(Path::new("plain"), None))
            .await;
        assert_eq!((out.is_error, out.content.as_str()), (false, "plain\n"));
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "private\n");
}

#[tokio::test]
async fn a_denied_read_escalates_and_only_danger_full_access_reads_it() {
    let w = world();
    let (secret, link, files) = denied_secret(&w);
    let s = w.store.create(&w.ws).unwrap();
    s.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    let (read, _, _) = tools_with(
        SandboxMode::WorkspaceWrite,
        &w.ws,
        Some(ApprovalOutcome::AllowedOnce),
        fenced(),
        files.clone(),
    );
    // Granted, workspace-write still confines: the deny-read list holds
    // there too, and the denial says so.
    let out = read
        .call(&ctx(&s, "ww"), read_args(&link, Some("workspace-write")))
        .await;
    assert!(
        out.is_error
            && out
                .content
                .starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("only danger-full-access"),
        "{}",
        out.content
    );
    let out = read
        .call(
            &ctx(&s, "dfa"),
            read_args(&link, Some("danger-full-access")),
        )
        .await;
    assert_eq!((out.is_error, out.content.as_str()), (false, "private\n"));
    assert_eq!(
        s.with_records(|r| r
            .iter()
            .filter(|r| matches!(r.event, Event::ApprovalAsked { .. }))
            .count()),
        2
    );
    // Nothing is stored: the next read is refused again.
    let out = read.call(&ctx(&s, "again"), read_args(&secret, None)).await;
    assert!(
        out.content
            .starts_with(&texts::denial_marker(SandboxMode::ReadOnly)),
        "{}",
        out.content
    );
    // A rejected ask reads nothing.
    let (read, _, _) = tools_with(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(ApprovalOutcome::Rejected),
        fenced(),
        files,
    );
    let out = read
        .call(
            &ctx(&s, "rej"),
            read_args(&secret, Some("danger-full-access")),
        )
        .await;
    assert_eq!(
        out.content,
        format!(
            "{}\n{}",
            texts::rejected(SandboxMode::DangerFullAccess),
            texts::REJECTED_NO_REASK
        )
    );
    // The unfenced file system offers no escalation to read with.
    let (read, _, _) = tools(SandboxMode::ReadOnly, &w.ws, None, Arc::new(LocalFs));
    let out = read
        .call(
            &ctx(&s, "local"),
            read_args(&secret, Some("danger-full-access")),
        )
        .await;
    assert_eq!(out.content, texts::ESCALATION_NOT_OFFERED);
}

/// A write still denied after the user granted its one retry does not
/// offer the retry again; the first denial did.
#[tokio::test]
async fn a_granted_write_still_denied_is_not_offered_again() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let (_, write, _) = tools(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(ApprovalOutcome::AllowedOnce),
        fenced(),
    );
    let target = w.outside.join("f");
    let first = write.call(&ctx(&s, "w1"), write_args(&target, None)).await;
    assert!(
        first.is_error && first.content.contains(texts::ESCALATION_HINT),
        "{}",
        first.content
    );
    let retried = write
        .call(&ctx(&s, "w2"), write_args(&target, Some("workspace-write")))
        .await;
    assert!(
        retried.is_error
            && retried
                .content
                .starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
        "{}",
        retried.content
    );
    assert!(
        !retried.content.contains(texts::ESCALATION_HINT),
        "{}",
        retried.content
    );
    assert!(!target.exists());
}

/// A rejection is remembered by its effect: after the user refused a
/// wider write of one file, the edit tool, a respelled path (relative,
/// with `.` and `..`) and a narrower mode are answered from that refusal
/// (no one is asked, nothing is written); another file is a new question.
#[tokio::test]
async fn a_rejected_write_answers_every_spelling_of_that_file_through_write_and_edit() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let (_, write, edit) = tools(
        SandboxMode::ReadOnly,
        &w.ws,
        Some(ApprovalOutcome::Rejected),
        fenced(),
    );
    let target = w.ws.join("f");
    std::fs::write(&target, "old\n").unwrap();
    let asks = || {
        s.with_records(|r| {
            r.iter()
                .filter(|r| matches!(r.event, Event::ApprovalAsked { .. }))
                .count()
        })
    };
    let rejected = format!(
        "{}\n{}",
        texts::rejected(SandboxMode::DangerFullAccess),
        texts::REJECTED_NO_REASK
    );
    let out = write
        .call(
            &ctx(&s, "w1"),
            write_args(&target, Some("danger-full-access")),
        )
        .await;
    assert_eq!(out.content, rejected);
    assert_eq!(asks(), 1);
    let respelled = [
        w.ws.join(".").join("f"),
        w.ws.join("sub").join("..").join("f"),
        PathBuf::from("f"),
        PathBuf::from("./f"),
    ];
    for (i, path) in respelled.iter().enumerate() {
        let calls: [(&dyn Tool, serde_json::Value); 3] = [
            (&write, write_args(path, Some("danger-full-access"))),
            (&edit, edit_args(path, Some("danger-full-access"))),
            (&edit, edit_args(path, Some("workspace-write"))),
        ];
        for (tool, args) in calls {
            let out = tool.call(&ctx(&s, &format!("r{i}")), args).await;
            assert!(out.is_error, "{path:?}: {}", out.content);
            assert!(
                out.content.contains(texts::REJECTED_NO_REASK),
                "{path:?}: {}",
                out.content
            );
        }
    }
    assert_eq!(asks(), 1, "a respelled request asked the user again");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old\n");
    // Another file is another effect: asked (and rejected) anew.
    let other = w.ws.join("g");
    std::fs::write(&other, "old\n").unwrap();
    edit.call(&ctx(&s, "g1"), edit_args(&other, Some("workspace-write")))
        .await;
    assert_eq!(asks(), 2);
}
