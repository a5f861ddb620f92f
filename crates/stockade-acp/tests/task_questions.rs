//! A `task` child's commands ask too: an unlisted host, and (supervised
//! Landlock) a write outside every writable root, are asked in the session
//! the user sees, on the parent's running task call, while the child's
//! command waits. The real binary, the real Landlock launcher, proxy and
//! supervisor, a scripted model, as root and (when we are root) as
//! `nobody`. Without the child's questions mounted, both are refused at
//! once and nothing is asked: every assertion on the question fails.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{StopReason, ToolCallStatus};
use common::{Answer, Binary, Seen, Setup, World, call, say};
use serde_json::{Value, json};
use stockade_testkit::users::{Who, users};

const WRITE_ASK: Setup = Setup {
    mode: "workspace-write",
    approval: Some("ask"),
    presets: false,
};

const TASK: &str = "[agent]\ntask = true\n";

const FETCH: &str = "curl -sS -m 60 http://other.test/";

fn curl() -> bool {
    let curl = std::process::Command::new("sh")
        .args(["-c", "command -v curl"])
        .status()
        .is_ok_and(|s| s.success());
    stockade_testkit::require("curl", curl)
}

fn bash(command: &str) -> Value {
    json!({ "command": command, "description": "child work" })
}

fn task() -> Value {
    json!({ "description": "sub work", "prompt": "do the sub work" })
}

/// Allow-listed, loopback listed, `other.test` mapped to the listener on
/// `port`, the task tool on.
fn hosts_server(w: &World, who: Who, port: u16) -> Binary {
    w.server_at(&WRITE_ASK, &w.config_path(), &w.state, |t| {
        let t = t.replace(
            "deny_read = []\n",
            "deny_read = []\nnetwork = \"allow-listed\"\nallowed_hosts = [\"127.0.0.1\"]\n",
        );
        format!("{t}\n{TASK}")
    })
    .env(
        "STOCKADE_PROXY_RESOLVE",
        &format!("other.test=127.0.0.1:{port}"),
    )
    .run_as(who)
}

/// (parent, child) events of a world with one delegation.
fn parent_and_child(state: &Path) -> (Vec<Value>, Vec<Value>) {
    let mut all = common::session_logs(state);
    assert_eq!(all.len(), 2, "{all:?}");
    all.sort_by_key(|(h, _)| h["parent"].is_string());
    let child = all.pop().unwrap().1;
    let parent = all.pop().unwrap().1;
    (parent, child)
}

fn of_type(events: &[Value], prefix: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with(prefix)))
        .cloned()
        .collect()
}

/// Where in the frames sent to the client the first one matching `pred`
/// lies.
fn frame_at(seen: &Seen, pred: &dyn Fn(&Value) -> bool) -> usize {
    let frames: Vec<String> = seen
        .frames
        .lock()
        .unwrap()
        .iter()
        .filter(|(d, _)| *d == common::Dir::ToClient)
        .map(|(_, l)| l.clone())
        .collect();
    frames
        .iter()
        .position(|l| pred(&serde_json::from_str::<Value>(l).unwrap()))
        .unwrap_or_else(|| panic!("no such frame in {frames:#?}"))
}

/// The question was asked on the task call `call-1` while it ran: the call
/// showed that it waited (pending, its title naming `waiting`), then ran
/// on to completion.
fn asked_on_the_running_task_call(seen: &Seen, who: Who, waiting: &str) {
    assert_eq!(
        seen.statuses("call-1"),
        [
            ToolCallStatus::Pending,
            ToolCallStatus::InProgress,
            ToolCallStatus::Pending,
            ToolCallStatus::InProgress,
            ToolCallStatus::Completed
        ],
        "{who:?}"
    );
    let pending = frame_at(seen, &|v| {
        v["params"]["update"]["toolCallId"] == "call-1"
            && v["params"]["update"]["status"] == "pending"
            && v["params"]["update"]["title"].as_str().is_some_and(|t| {
                t.starts_with("task: sub work (waiting for approval of") && t.contains(waiting)
            })
    });
    let asked = frame_at(seen, &|v| v["method"] == "session/request_permission");
    let resumed = frame_at(seen, &|v| {
        v["params"]["update"]["toolCallId"] == "call-1"
            && v["params"]["update"]["status"] == "in_progress"
            && v["params"]["update"]["title"] == "task: sub work"
    });
    let done = frame_at(seen, &|v| {
        v["params"]["update"]["toolCallId"] == "call-1"
            && v["params"]["update"]["status"] == "completed"
    });
    // `resumed` is the first in-progress with the title: the one sent
    // after the answer (the call's own start sends no title).
    assert!(
        pending < asked && asked < resumed && resumed < done,
        "{who:?}"
    );
}

/// A child's fetch of an unlisted host asks on the parent's task call;
/// then the parent fetches the same host itself. `allow_once` lets the
/// child's connection through and the parent is asked again;
/// `allow_always` is the parent's session grant (the child never runs
/// wider than the parent), so the parent's own fetch is not asked.
async fn child_fetch(who: Who, pick: &'static str) {
    let srv = stockade_testkit::http::ok_server();
    let script = vec![
        call("call-1", "task", task()),
        call(
            "child-1",
            "bash",
            bash(&format!("echo x >> count; {FETCH}")),
        ),
        say("child done"),
        call("call-2", "bash", bash(FETCH)),
        say("done"),
    ];
    let Some(w) = World::new(script) else { return };
    let server = hosts_server(&w, who, srv.port);
    w.own(who);
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(&w, server, Answer::Pick(pick), seen.clone(), "go").await;
    assert_eq!(stop, StopReason::EndTurn, "{who:?}");

    let asks = seen.asks();
    let expected = if pick == "allow_always" { 1 } else { 2 };
    assert_eq!(asks.len(), expected, "{who:?} {pick}: {asks:?}");
    // The child's question: on the task call, the four host options.
    assert_eq!(&*asks[0].tool_call.tool_call_id.0, "call-1");
    let options: Vec<&str> = asks[0].options.iter().map(|o| &*o.option_id.0).collect();
    assert_eq!(
        options,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
    assert!(
        title.starts_with("task: Allow network access to other.test:80"),
        "{title}"
    );
    if expected == 2 {
        assert_eq!(&*asks[1].tool_call.tool_call_id.0, "call-2");
    }
    asked_on_the_running_task_call(&seen, who, "network access to other.test:80");

    // Both fetches reached the host; the child's command ran once.
    assert_eq!(srv.hits(), 2, "{who:?} {pick}");
    assert_eq!(std::fs::read_to_string(w.ws.join("count")).unwrap(), "x\n");
    let requests = w.model.requests();
    let child_result = common::last_content(&requests[2]["messages"]);
    assert!(
        child_result.contains("ok") && !child_result.contains("[sandbox:"),
        "{child_result}"
    );

    // The child's question and answer are in its own log, under its own
    // call, as its escalations are; a session-wide answer is the parent's
    // too (folded when the parent is loaded).
    let (parent, child) = parent_and_child(&w.state);
    let ch = of_type(&child, "network/host-");
    assert_eq!(ch.len(), 2, "{ch:?}");
    assert_eq!(ch[0]["type"], "network/host-asked");
    assert_eq!(ch[0]["host"], "other.test");
    assert_eq!(ch[0]["call_id"], "child-1");
    assert_eq!(ch[1]["type"], "network/host-answered");
    let ph = of_type(&parent, "network/host-");
    if pick == "allow_always" {
        assert_eq!(ch[1]["answer"], "allowed-for-session");
        assert_eq!(ph.len(), 1, "{ph:?}");
        assert_eq!(ph[0]["type"], "network/host-answered");
        assert_eq!(ph[0]["answer"], "allowed-for-session");
    } else {
        assert_eq!(ch[1]["answer"], "allowed-once");
        // Only the parent's own question for call-2.
        assert_eq!(ph.len(), 2, "{ph:?}");
        assert_eq!(ph[0]["call_id"], "call-2");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_childs_unlisted_host_is_asked_on_the_task_call_and_allow_once_connects() {
    if !curl() {
        return;
    }
    for who in users() {
        child_fetch(who, "allow_once").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_childs_allow_always_is_the_parents_session_grant() {
    if !curl() {
        return;
    }
    for who in users() {
        child_fetch(who, "allow_always").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_childs_write_outside_is_asked_on_the_task_call_and_written_without_a_rerun() {
    for who in users() {
        let mut target = PathBuf::new();
        let Some(w) = World::new_with(|dir| {
            // By the kernel's name for it (what the supervisor reports).
            target = std::fs::canonicalize(dir).unwrap().join("outside/a");
            let command = format!(
                "echo 1 >> count; echo hi > '{}' && echo wrote-a",
                target.display()
            );
            vec![
                call("call-1", "task", task()),
                call("child-1", "bash", bash(&command)),
                say("child done"),
                say("done"),
            ]
        }) else {
            return;
        };
        std::fs::create_dir(target.parent().unwrap()).unwrap();
        let server = w
            .server_at(&WRITE_ASK, &w.config_path(), &w.state, |t| {
                format!("{t}\n{TASK}")
            })
            .run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop =
            common::one_prompt(&w, server, Answer::Pick("allow_path"), seen.clone(), "go").await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");

        let asks = seen.asks();
        assert_eq!(asks.len(), 1, "{who:?}: {asks:?}");
        assert_eq!(&*asks[0].tool_call.tool_call_id.0, "call-1");
        let options: Vec<&str> = asks[0].options.iter().map(|o| &*o.option_id.0).collect();
        assert_eq!(options, ["allow_path", "allow_directory", "reject_once"]);
        let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
        assert!(
            title.contains(&format!("task: Allow writing {} (write)", target.display())),
            "{who:?}: {title}"
        );
        asked_on_the_running_task_call(&seen, who, "writing");

        // Written by the child's command that asked, which ran once.
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n", "{who:?}");
        assert_eq!(
            std::fs::read_to_string(w.ws.join("count")).unwrap(),
            "1\n",
            "{who:?}"
        );
        let requests = w.model.requests();
        let child_result = common::last_content(&requests[2]["messages"]);
        assert!(
            child_result.contains("wrote-a") && !child_result.contains("[sandbox:"),
            "{child_result}"
        );

        // In the child's log, under the child's call; none in the parent's.
        let (parent, child) = parent_and_child(&w.state);
        let ch = of_type(&child, "fs/path-");
        assert_eq!(ch.len(), 2, "{ch:?}");
        assert_eq!(ch[0]["type"], "fs/path-asked");
        assert_eq!(ch[0]["call_id"], "child-1");
        assert_eq!(ch[1]["type"], "fs/path-answered");
        assert_eq!(ch[1]["answer"], "allow-path");
        assert!(of_type(&parent, "fs/path-").is_empty(), "{parent:?}");
    }
}
