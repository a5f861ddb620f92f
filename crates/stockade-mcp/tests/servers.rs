//! A real stdio MCP server (tests/fixtures/write_server.py on /usr/bin/python3)
//! started through the real runners: its writes are confined like a bash
//! command's, its tools reach the agent namespaced, and it is gone once the
//! session's set is shut down or dropped. When `CI=true` a missing runner
//! or python3 is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_agent::{Tool, ToolContext};
use stockade_core::{ExecutionPolicy, SandboxMode, SandboxProvider};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_mcp::{Launcher, McpServers, ServerSpec};
use stockade_shell::{SandboxedExecutor, UnconfinedExecutor};

const PYTHON: &str = "/usr/bin/python3";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/write_server.py")
}

fn python() -> bool {
    stockade_testkit::require("/usr/bin/python3", Path::new(PYTHON).is_file())
}

struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn scratch() -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("mcp-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&outside).unwrap();
    Scratch {
        _dir: dir,
        ws,
        outside,
    }
}

/// A token no other process carries: what finds the server (and its runner)
/// in /proc, whatever pid namespace it runs in.
fn marker(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mcp-marker-{label}-{}-{nanos}", std::process::id())
}

fn spec(name: &str, marker: &str, extra: &[&str]) -> ServerSpec {
    let mut args = vec![
        script().display().to_string(),
        "--marker".into(),
        marker.into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    ServerSpec {
        name: name.into(),
        command: PYTHON.into(),
        args,
        env: vec![],
    }
}

/// Processes whose command line carries `marker`.
fn carrying(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline"))
            && cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == marker.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

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

fn real_providers() -> Vec<(&'static str, Arc<dyn SandboxProvider>)> {
    let mut out: Vec<(&'static str, Arc<dyn SandboxProvider>)> = Vec::new();
    let launcher = stockade_testkit::built_launcher();
    let have_bwrap = stockade_testkit::have_bwrap();
    stockade_testkit::require("the built landlock-run", launcher.is_some());
    stockade_testkit::require("bwrap", have_bwrap);
    if have_bwrap && launcher.is_some() {
        let s = LocalSettings {
            backend: BackendPreference::Bwrap,
            launcher_path: launcher.clone(),
            ..Default::default()
        };
        out.push(("bwrap", Arc::new(LocalProvider::new(s).unwrap())));
    }
    if launcher.is_some() {
        let s = LocalSettings {
            backend: BackendPreference::Landlock,
            launcher_path: launcher,
            ..Default::default()
        };
        out.push(("landlock", Arc::new(LocalProvider::new(s).unwrap())));
    }
    out
}

fn ctx() -> ToolContext {
    ToolContext {
        session: None,
        call_id: "call-1".into(),
    }
}

fn tool<'a>(set: &'a [Arc<dyn Tool>], name: &str) -> &'a Arc<dyn Tool> {
    set.iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confined_server_writes_inside_the_workspace_only() {
    if !python() {
        return;
    }
    for (backend, provider) in real_providers() {
        let s = scratch();
        let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws);
        let launcher = Launcher::Sandboxed(SandboxedExecutor::new(provider, policy.clone()));
        let token = marker(backend);
        let set = McpServers::start(
            &[spec("files", &token, &[])],
            &launcher,
            &policy,
            &s.ws,
            None,
        )
        .await
        .unwrap();
        let facts = set.servers()[0].facts().cloned().unwrap();
        assert_eq!(facts.backend, Some(backend));
        assert_eq!(facts.mode, SandboxMode::WorkspaceWrite);
        let tools = set.tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["files__write_file", "files__image"]);
        let write = tool(&tools, "files__write_file");
        assert!(
            write
                .description()
                .contains("Write TEXT to the file at PATH.")
        );
        assert_eq!(
            write.schema()["required"],
            serde_json::json!(["path", "text"])
        );

        let inside = s.ws.join("inside.txt");
        let out = write
            .call(
                &ctx(),
                serde_json::json!({ "path": inside, "text": "hello" }),
            )
            .await;
        assert!(!out.is_error, "{backend}: {}", out.content);
        assert_eq!(std::fs::read_to_string(&inside).unwrap(), "hello");

        let outside = s.outside.join("escape.txt");
        let out = write
            .call(&ctx(), serde_json::json!({ "path": outside, "text": "no" }))
            .await;
        assert!(out.is_error, "{backend}: {}", out.content);
        assert!(out.content.starts_with("cannot write"), "{}", out.content);
        assert!(!outside.exists(), "{backend}: the write outside landed");

        let out = tool(&tools, "files__image")
            .call(&ctx(), serde_json::json!({}))
            .await;
        assert_eq!(
            out.content,
            "[image content (image/png, 12 base64 bytes), not shown]\none pixel"
        );

        assert!(!carrying(&token).is_empty(), "{backend}: the server runs");
        set.shutdown().await;
        assert!(gone(&token).await, "{backend}: left running after shutdown");
        // A call after the end fails, naming the server.
        let out = write
            .call(&ctx(), serde_json::json!({ "path": inside, "text": "x" }))
            .await;
        assert!(
            out.is_error && out.content.contains("\"files\""),
            "{}",
            out.content
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ignores_the_end_of_its_stdin_is_killed() {
    if !python() {
        return;
    }
    for (backend, provider) in real_providers() {
        let s = scratch();
        let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws);
        let launcher = Launcher::Sandboxed(SandboxedExecutor::new(provider, policy.clone()));
        // Shut down: stdin closed, then the group killed.
        let token = marker(backend);
        let set = McpServers::start(
            &[spec("linger", &token, &["--linger"])],
            &launcher,
            &policy,
            &s.ws,
            None,
        )
        .await
        .unwrap();
        set.shutdown().await;
        assert!(gone(&token).await, "{backend}: shutdown left it running");
        // Dropped: killed at once.
        let token = marker(backend);
        let set = McpServers::start(
            &[spec("linger", &token, &["--linger"])],
            &launcher,
            &policy,
            &s.ws,
            None,
        )
        .await
        .unwrap();
        assert!(!carrying(&token).is_empty());
        drop(set);
        assert!(gone(&token).await, "{backend}: drop left it running");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unconfined_launcher_runs_the_server_unconfined() {
    if !python() {
        return;
    }
    let s = scratch();
    let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws);
    let launcher = Launcher::Unconfined(UnconfinedExecutor::default());
    assert!(!launcher.confines());
    let token = marker("unconfined");
    let set = McpServers::start(
        &[spec("files", &token, &[])],
        &launcher,
        &policy,
        &s.ws,
        None,
    )
    .await
    .unwrap();
    assert!(set.servers()[0].facts().is_none());
    let outside = s.outside.join("anywhere.txt");
    let out = tool(&set.tools(), "files__write_file")
        .call(&ctx(), serde_json::json!({ "path": outside, "text": "x" }))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(outside.is_file());
    drop(set);
    assert!(gone(&token).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_fails_to_start_is_named_with_why() {
    if !python() {
        return;
    }
    let mut cases: Vec<(&str, Launcher)> = vec![(
        "unconfined",
        Launcher::Unconfined(UnconfinedExecutor::default()),
    )];
    let s = scratch();
    let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws);
    for (backend, provider) in real_providers() {
        cases.push((
            backend,
            Launcher::Sandboxed(SandboxedExecutor::new(provider, policy.clone())),
        ));
    }
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    for (label, launcher) in cases {
        let log = logged.clone();
        let sink: stockade_mcp::StderrSink = Arc::new(move |server: &str, line: &str| {
            log.lock().unwrap().push(format!("{server}: {line}"));
        });
        let token = marker(label);
        let e = McpServers::start(
            &[
                spec("fine", &token, &[]),
                spec("broken", &token, &["--fail-init"]),
            ],
            &launcher,
            &policy,
            &s.ws,
            Some(sink),
        )
        .await
        .unwrap_err();
        assert_eq!(e.server, "broken", "{label}");
        let shown = e.to_string();
        assert!(
            shown.starts_with("MCP server \"broken\": initialize failed"),
            "{label}: {shown}"
        );
        assert!(shown.contains("exited with status 3"), "{label}: {shown}");
        assert!(
            shown.contains("refusing to start (--fail-init)"),
            "{label}: {shown}"
        );
        assert!(
            gone(&token).await,
            "{label}: the healthy one was left running"
        );
        assert!(
            logged
                .lock()
                .unwrap()
                .iter()
                .any(|l| l == "broken: write-server: refusing to start (--fail-init)"),
            "{label}"
        );

        let mut missing = spec("ghost", &token, &[]);
        missing.command = "/nonexistent/mcp-server".into();
        let e = McpServers::start(&[missing], &launcher, &policy, &s.ws, None)
            .await
            .unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.starts_with("MCP server \"ghost\": cannot start /nonexistent/mcp-server"),
            "{label}: {shown}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_named_alike_are_refused() {
    let s = scratch();
    let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws);
    let launcher = Launcher::Unconfined(UnconfinedExecutor::default());
    let e = McpServers::start(
        &[spec("a.b", "x", &[]), spec("a_b", "x", &[])],
        &launcher,
        &policy,
        &s.ws,
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(e.server, "a_b");
    assert!(e.message.contains("\"a.b\""), "{e}");
}
