//! `[policy]`'s file lists through `stockade acp`, end to end: the model is
//! told the extra roots and the secrets, an extra root that would make the
//! control state writable refuses the start naming both, and a confined
//! command writes into an extra root but not beside it.
//!
//! The real `stockade acp` binary, a scripted model on loopback and the real
//! Landlock launcher. When `CI=true` a missing launcher is a failure, never a
//! skip.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use common::{Answer, Binary, Seen, Setup, World, call, last_content, policy_messages, say};
use serde_json::json;
use stockade_core::{SandboxMode, texts};

const WORKSPACE_WRITE: Setup = Setup {
    mode: "workspace-write",
    approval: Some("ask"),
    presets: false,
};

/// The lists in place of the harness's `deny_read = []`.
fn with_lists(writable: &[&Path], deny_read: &[&Path]) -> impl FnOnce(String) -> String + use<> {
    let quoted = |v: &[&Path]| {
        v.iter()
            .map(|p| format!("\"{}\"", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lists = format!(
        "writable_roots = [{}]\ndeny_read = [{}]\n",
        quoted(writable),
        quoted(deny_read)
    );
    move |text: String| {
        assert!(text.contains("deny_read = []\n"), "{text}");
        text.replacen("deny_read = []\n", &lists, 1)
    }
}

fn refused_at_start(out: &std::process::Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "nothing is served: {out:?}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
}

fn bash(id: &str, command: &str) -> stockade_testkit::scripted::ScriptedReply {
    call(
        id,
        "bash",
        json!({ "command": command, "description": "use the extra root" }),
    )
}

/// One session in the workspace, one prompt: the stop reason.
async fn one_prompt(w: &World, server: Binary) -> StopReason {
    let seen = Arc::new(Seen::default());
    common::one_prompt(w, server, Answer::Reject, seen, "use the shared directory").await
}

struct Dirs {
    extra: PathBuf,
    sibling: PathBuf,
    secrets: PathBuf,
}

/// `<dir>/extra` (the extra root), `<dir>/sibling` beside it, and
/// `<dir>/secrets/key`: all outside the workspace and every temp root.
fn dirs(dir: &Path) -> Dirs {
    let d = Dirs {
        extra: dir.join("extra"),
        sibling: dir.join("sibling"),
        secrets: dir.join("secrets"),
    };
    for p in [&d.extra, &d.sibling, &d.secrets] {
        std::fs::create_dir(p).unwrap();
    }
    std::fs::write(d.secrets.join("key"), "TOPSECRET\n").unwrap();
    d
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_is_told_the_lists_and_a_command_writes_into_an_extra_root_only() {
    // Commands run in the workspace, `<dir>/ws`.
    let Some(w) = World::new_with(|dir| {
        let write = |id: &str, path: PathBuf| {
            call(id, "write", json!({ "path": path, "content": "written\n" }))
        };
        vec![
            bash("inside", "echo made > ../extra/made"),
            bash("beside", "echo made > ../sibling/made"),
            bash("secret", "cat ../secrets/key"),
            write("write-inside", dir.join("extra/written")),
            write("write-beside", dir.join("sibling/written")),
            say("done"),
        ]
    }) else {
        return;
    };
    let d = dirs(w.dir.path());
    let server = w.server_at(
        &WORKSPACE_WRITE,
        &w.config_path(),
        &w.state,
        with_lists(&[&d.extra], &[&d.secrets]),
    );
    assert_eq!(one_prompt(&w, server).await, StopReason::EndTurn);

    let requests = w.model_messages();
    // (a) The policy context names the extra root and the secrets.
    let policy = policy_messages(&requests[0]).join("\n");
    assert!(
        policy.contains(&format!(
            "may write only under {}, {}, /tmp and $TMPDIR",
            w.ws.display(),
            d.extra.display()
        )),
        "{policy}"
    );
    assert!(
        policy.contains(&format!(
            "Never read (refused wherever the sandbox enforces it): {}.",
            d.secrets.display()
        )),
        "{policy}"
    );

    // (c) The write into the extra root lands; the one beside it is denied.
    let inside = last_content(&requests[1]);
    assert_eq!(
        std::fs::read_to_string(d.extra.join("made"))
            .ok()
            .as_deref(),
        Some("made\n"),
        "the extra root was not writable: {inside}"
    );
    let beside = last_content(&requests[2]);
    assert!(!d.sibling.join("made").exists(), "{beside}");
    assert!(
        beside.starts_with(&texts::denial_marker(SandboxMode::WorkspaceWrite)),
        "{beside}"
    );
    // And the secret stays unread.
    let secret = last_content(&requests[3]);
    assert!(!secret.contains("TOPSECRET"), "{secret}");

    // The file tools get the same policy: the extra root, not beside it.
    let inside = last_content(&requests[4]);
    assert_eq!(
        std::fs::read_to_string(d.extra.join("written"))
            .ok()
            .as_deref(),
        Some("written\n"),
        "the write tool was refused the extra root: {inside}"
    );
    let beside = last_content(&requests[5]);
    assert!(!d.sibling.join("written").exists(), "{beside}");
    assert!(beside.contains("denied"), "{beside}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_extra_root_holding_control_state_refuses_to_start_naming_both() {
    let Some(w) = World::new(vec![]) else {
        return;
    };
    // The config's own directory as an extra root.
    let out = w
        .server_at(
            &WORKSPACE_WRITE,
            &w.config_path(),
            &w.state,
            with_lists(&[w.dir.path()], &[]),
        )
        .start_alone();
    let config = std::fs::canonicalize(w.config_path()).unwrap();
    refused_at_start(
        &out,
        &[
            "policy.writable_roots",
            &format!("writable root {}", w.dir.path().display()),
            &format!("config {}", config.display()),
        ],
    );

    // The session logs inside an extra root.
    let extra = w.dir.path().join("shared");
    std::fs::create_dir(&extra).unwrap();
    let state = extra.join("state");
    let out = w
        .server_at(
            &WORKSPACE_WRITE,
            &w.config_path(),
            &state,
            with_lists(&[&extra], &[]),
        )
        .start_alone();
    refused_at_start(
        &out,
        &[
            &format!("writable root {}", extra.display()),
            "session log directory",
            &state.join("sessions").display().to_string(),
        ],
    );

    // An entry the load refuses names the file, the key and its index.
    let out = w
        .server_at(&WORKSPACE_WRITE, &w.config_path(), &w.state, |t| {
            t.replacen(
                "deny_read = []\n",
                "deny_read = []\nwritable_roots = [\"/ok\", \"rel\"]\n",
                1,
            )
        })
        .start_alone();
    refused_at_start(
        &out,
        &[&format!(
            "{}: policy.writable_roots[1]: \"rel\": must be an absolute path or start with ~/",
            w.config_path().display()
        )],
    );

    // Outside the control state: it starts, and ends with its (absent)
    // client.
    let out = w
        .server_at(
            &WORKSPACE_WRITE,
            &w.config_path(),
            &w.state,
            with_lists(&[&extra], &[]),
        )
        .start_alone();
    assert!(out.status.success(), "{out:?}");
}
