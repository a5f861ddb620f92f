//! MCP servers named in `session/new` and `session/load`, end to end over the
//! real `stockade acp` binary: the server (a python3 script speaking MCP by
//! hand, crates/stockade-mcp/tests/fixtures/write_server.py) runs confined
//! like bash, its tools reach the model as `<server>__<tool>` and the editor
//! as tool calls, and it is gone when the connection closes or the agent is
//! killed outright. When `CI=true` a missing runner or python3 fails.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::ErrorCode;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    InitializeRequest, LoadSessionRequest, McpServer, McpServerHttp, McpServerStdio,
    NewSessionRequest, StopReason, ToolCallStatus,
};
use common::{Answer, Binary, Dir, Seen, Setup, World, call, last_content, prompt, run, say};
use serde_json::{Value, json};

const PYTHON: &str = "/usr/bin/python3";

const WRITE: Setup = Setup {
    mode: "workspace-write",
    approval: None,
    presets: false,
};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stockade-mcp/tests/fixtures/write_server.py")
}

fn python() -> bool {
    stockade_testkit::require("/usr/bin/python3", Path::new(PYTHON).is_file())
}

/// A token no other process carries: finds the server (and its runner) in
/// /proc whatever pid namespace it runs in.
fn marker(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("acp-mcp-{label}-{}-{nanos}", std::process::id())
}

/// The server as an editor names it; `--linger`: it ignores the end of its
/// stdin, so only a kill ends it.
fn server(name: &str, marker: &str, extra: &[&str]) -> McpServer {
    let mut args = vec![
        script().display().to_string(),
        "--marker".into(),
        marker.into(),
        "--linger".into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    McpServer::Stdio(McpServerStdio::new(name, PYTHON).args(args))
}

/// Processes whose command line carries `marker`.
fn carrying(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline"))
            && cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

/// Bounded: whether every process carrying `marker` is gone within 10 s.
async fn gone(marker: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if carrying(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The backends this host can run: the harness's Landlock launcher always,
/// bwrap when it is installed (required under CI).
fn backends() -> Vec<&'static str> {
    let mut out = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        out.push("bwrap");
    }
    out
}

/// The harness's server under `backend`.
fn binary(w: &World, backend: &str) -> Binary {
    let config = w.dir.path().join(format!("stockade-{backend}.toml"));
    w.server_at(&WRITE, &config, &w.state, |text| {
        text.replace(
            "backend = \"landlock\"",
            &format!("backend = \"{backend}\""),
        )
    })
}

/// The model writes inside the workspace, then outside it, then ends.
fn write_script(dir: &Path) -> Vec<stockade_testkit::scripted::ScriptedReply> {
    vec![
        call(
            "call-1",
            "files__write_file",
            json!({ "path": dir.join("ws/inside.txt"), "text": "hello" }),
        ),
        call(
            "call-2",
            "files__write_file",
            json!({ "path": dir.join("outside.txt"), "text": "no" }),
        ),
        say("done"),
    ]
}

/// The prompt's `session/update` frames only (the handshake's frames are
/// other suites' business).
fn updates(seen: &Seen, w: &World) -> String {
    seen.transcript(w, Dir::ToClient)
        .lines()
        .filter(|l| l.contains("\"session/update\""))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_server_writes_inside_only_and_ends_with_the_connection() {
    if !python() {
        return;
    }
    for backend in backends() {
        let Some(w) = World::new_with(write_script) else {
            return;
        };
        let token = marker(backend);
        let seen = Arc::new(Seen::default());
        let ws = w.ws.clone();
        let srv = server("files", &token, &[]);
        let t = token.clone();
        let stop = run(
            binary(&w, backend),
            Answer::Reject,
            seen.clone(),
            async move |cx| {
                let init = cx
                    .send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let mcp = &init.agent_capabilities.mcp_capabilities;
                assert!(!mcp.http && !mcp.sse, "stdio only");
                let s = cx
                    .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![srv]))
                    .block_task()
                    .await?;
                assert!(!carrying(&t).is_empty(), "the server runs for the session");
                Ok(cx
                    .send_request(prompt(&s.session_id, "write the files"))
                    .block_task()
                    .await?
                    .stop_reason)
            },
        )
        .await;
        assert_eq!(stop, StopReason::EndTurn, "{backend}");
        // `run` hung up and waited for the server process to end.
        assert!(
            gone(&token).await,
            "{backend}: the MCP server outlived the connection"
        );

        assert_eq!(
            std::fs::read_to_string(w.ws.join("inside.txt")).unwrap(),
            "hello",
            "{backend}"
        );
        assert!(
            !w.dir.path().join("outside.txt").exists(),
            "{backend}: the write outside the workspace landed"
        );
        use ToolCallStatus::*;
        assert_eq!(seen.statuses("call-1"), [Pending, InProgress, Completed]);
        assert_eq!(seen.statuses("call-2"), [Pending, InProgress, Failed]);

        let requests = w.model.requests();
        let offered: Vec<&Value> = requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                t["function"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("files__")
            })
            .collect();
        assert_eq!(offered.len(), 2, "{offered:?}");
        assert_eq!(offered[0]["function"]["name"], "files__write_file");
        assert_eq!(
            offered[0]["function"]["description"],
            "[MCP server \"files\", tool \"write_file\"] Write TEXT to the file at PATH."
        );
        assert_eq!(
            offered[0]["function"]["parameters"]["required"],
            json!(["path", "text"])
        );
        let messages = w.model_messages();
        assert_eq!(
            last_content(&messages[1]),
            format!("wrote 5 bytes to {}", w.ws.join("inside.txt").display())
        );
        let denied = last_content(&messages[2]);
        let why = match backend {
            "bwrap" => "Read-only file system",
            _ => "Permission denied",
        };
        assert_eq!(
            denied,
            format!(
                "cannot write {}: {why}",
                w.dir.path().join("outside.txt").display()
            )
        );
        insta::assert_snapshot!(format!("mcp_updates_{backend}"), updates(&seen, &w));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_agent_leaves_no_server_running() {
    if !python() {
        return;
    }
    for backend in backends() {
        let Some(w) = World::new(vec![]) else {
            return;
        };
        let token = marker(&format!("kill-{backend}"));
        let seen = Arc::new(Seen::default());
        let (mut child, transport) =
            common::spawn(&binary(&w, backend), &seen, std::process::Stdio::null());
        let pid = child.id().unwrap();
        let ws = w.ws.clone();
        let srv = server("files", &token, &[]);
        // The client holds the connection open once the session is up.
        let (up_tx, up) = tokio::sync::oneshot::channel();
        let client = tokio::spawn(common::client(
            transport,
            Answer::Reject,
            seen.clone(),
            async move |cx| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                cx.send_request(NewSessionRequest::new(&ws).mcp_servers(vec![srv]))
                    .block_task()
                    .await?;
                let _ = up_tx.send(());
                std::future::pending::<()>().await;
                Ok(())
            },
        ));
        tokio::time::timeout(Duration::from_secs(60), up)
            .await
            .expect("session/new timed out")
            .expect("the client failed before the session was up");
        assert!(
            !carrying(&token).is_empty(),
            "the server runs for the session"
        );
        // kill -9 of `stockade acp`, with the connection still open.
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let _ = child.wait().await;
        let gone_after_kill = gone(&token).await;
        client.abort();
        assert!(
            gone_after_kill,
            "{backend}: the MCP server outlived a killed agent: {:?}",
            carrying(&token)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_fails_the_session_naming_it() {
    if !python() {
        return;
    }
    let Some(w) = World::new(vec![]) else {
        return;
    };
    let token = marker("fail");
    let ws = w.ws.clone();
    let seen = Arc::new(Seen::default());
    let (ok, broken) = (
        server("fine", &token, &[]),
        server("broken", &token, &["--fail-init"]),
    );
    let http = McpServer::Http(McpServerHttp::new("remote", "https://example.invalid/mcp"));
    let (e, refused) = run(w.server(&WRITE), Answer::Reject, seen, async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let e = cx
            .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![ok, broken]))
            .block_task()
            .await
            .unwrap_err();
        let refused = cx
            .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![http]))
            .block_task()
            .await
            .unwrap_err();
        Ok((e, refused))
    })
    .await;
    assert_eq!(e.code, ErrorCode::INTERNAL_ERROR);
    assert!(
        e.message
            .starts_with("MCP server \"broken\": initialize failed"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("exited with status 3")
            && e.message.contains("refusing to start (--fail-init)"),
        "{}",
        e.message
    );
    assert_eq!(e.data, Some(json!({ "mcpServer": "broken" })));
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert!(
        refused
            .message
            .starts_with("MCP server \"remote\": the http transport is not supported"),
        "{}",
        refused.message
    );
    assert!(gone(&token).await, "the healthy server was left running");
    // Nothing was created for the refused sessions.
    let logs = std::fs::read_dir(w.state.join("sessions"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(logs, 0, "a refused session left a log");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loaded_session_gets_its_servers_again() {
    if !python() {
        return;
    }
    let Some(w) = World::new_with(|dir| {
        vec![
            say("ready"),
            call(
                "call-1",
                "files__write_file",
                json!({ "path": dir.join("ws/again.txt"), "text": "back" }),
            ),
            say("done"),
        ]
    }) else {
        return;
    };
    let token = marker("load");
    let ws = w.ws.clone();
    let first = server("files", &token, &[]);
    let id = run(
        w.server(&WRITE),
        Answer::Reject,
        Arc::new(Seen::default()),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![first]))
                .block_task()
                .await?;
            cx.send_request(prompt(&s.session_id, "get ready"))
                .block_task()
                .await?;
            Ok(s.session_id)
        },
    )
    .await;
    assert!(gone(&token).await);
    let token = marker("load-again");
    let again = server("files", &token, &[]);
    let ws = w.ws.clone();
    let t = token.clone();
    let stop = run(
        w.server(&WRITE),
        Answer::Reject,
        Arc::new(Seen::default()),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(LoadSessionRequest::new(id.clone(), &ws).mcp_servers(vec![again]))
                .block_task()
                .await?;
            assert!(!carrying(&t).is_empty());
            Ok(cx
                .send_request(prompt(&id, "write it"))
                .block_task()
                .await?
                .stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(w.ws.join("again.txt")).unwrap(),
        "back"
    );
    assert!(gone(&token).await);
}

/// A mode change narrows the servers too: they are restarted under the
/// session's new policy before the next prompt runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_narrowed_mode_restarts_the_servers_under_it() {
    if !python() {
        return;
    }
    let Some(w) = World::new_with(|dir| {
        vec![
            call(
                "call-1",
                "files__write_file",
                json!({ "path": dir.join("ws/narrowed.txt"), "text": "x" }),
            ),
            say("done"),
        ]
    }) else {
        return;
    };
    let token = marker("narrow");
    let ws = w.ws.clone();
    let srv = server("files", &token, &[]);
    let setup = Setup {
        mode: "workspace-write",
        approval: Some("ask"),
        presets: true,
    };
    let seen = Arc::new(Seen::default());
    let stop = run(
        w.server(&setup),
        Answer::Reject,
        seen.clone(),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![srv]))
                .block_task()
                .await?;
            cx.send_request(
                agent_client_protocol::v1::schema::SetSessionModeRequest::new(
                    s.session_id.clone(),
                    "read-only",
                ),
            )
            .block_task()
            .await?;
            Ok(cx
                .send_request(prompt(&s.session_id, "write it"))
                .block_task()
                .await?
                .stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(
        !w.ws.join("narrowed.txt").exists(),
        "the server wrote under read-only"
    );
    assert_eq!(
        seen.statuses("call-1"),
        [
            ToolCallStatus::Pending,
            ToolCallStatus::InProgress,
            ToolCallStatus::Failed
        ]
    );
    let told = last_content(&w.model_messages()[1]);
    assert!(told.starts_with("cannot write"), "{told}");
    assert!(gone(&token).await);
}

/// `[bash] executor = "local"`: the servers run unconfined, like bash.
#[tokio::test(flavor = "multi_thread")]
async fn an_unconfined_composition_runs_servers_unconfined() {
    if !python() {
        return;
    }
    let Some(w) = World::new_with(|dir| {
        vec![
            call(
                "call-1",
                "files__write_file",
                json!({ "path": dir.join("anywhere.txt"), "text": "x" }),
            ),
            say("done"),
        ]
    }) else {
        return;
    };
    let token = marker("unconfined");
    let ws = w.ws.clone();
    let srv = server("files", &token, &[]);
    let config = w.dir.path().join("stockade-local.toml");
    let bin = w.server_at(&WRITE, &config, &w.state, |text| {
        text.replace("executor = \"sandboxed\"", "executor = \"local\"")
    });
    let stop = run(
        bin,
        Answer::Reject,
        Arc::new(Seen::default()),
        async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![srv]))
                .block_task()
                .await?;
            Ok(cx
                .send_request(prompt(&s.session_id, "write it"))
                .block_task()
                .await?
                .stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(w.dir.path().join("anywhere.txt").is_file());
    assert!(gone(&token).await);
}
