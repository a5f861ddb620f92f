//! `stockade acp` leaves no process of a session behind when the connection
//! ends: the real binary, a real editor connection over its stdio, real
//! process trees. A background job runs a `setsid` pair, and the prompt's
//! foreground command daemonizes with `setsid -f` and then runs on; each
//! daemon appends to a file once a second. The client hangs up mid-prompt;
//! the server must exit, and afterwards neither file grows and no process
//! carrying the run's marker (in its argv or environment) remains. On
//! Landlock, bwrap and danger-full-access, as root and (when we are root)
//! as `nobody`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{InitializeRequest, NewSessionRequest};
use common::{Answer, Seen, Setup, World, call, prompt};
use serde_json::json;
use stockade_testkit::scripted::ScriptedReply;
use stockade_testkit::users::users;

/// A failure detector only: what has not happened after this long hangs.
const HANG: Duration = Duration::from_secs(60);

fn marker() -> String {
    stockade_testkit::procs::marker("acp-tree")
}

use stockade_testkit::procs::marked;

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// A daemon loop appending to `file`, its marker in argv and environment.
fn daemon(mark: &str, file: &str) -> String {
    format!("sh -c ': {mark}; while :; do date >> {file}; sleep 1; done'")
}

async fn connection_end_leaves_nothing(mode: &'static str, backend: &str) {
    for who in users() {
        let mark = marker();
        let export = format!("export STOCKADE_TREE_MARK={mark}");
        let background = json!({
            "command": format!("{export}; setsid sh -c \"{} & wait\" & wait", daemon(&mark, "bg")),
            "description": "a setsid pair in a background job",
            "run_in_background": true,
        });
        let foreground = json!({
            "command": format!("{export}; setsid -f {}; while :; do sleep 1; done", daemon(&mark, "fg")),
            "description": "daemonize, then run on",
        });
        let Some(w) = World::new(vec![
            call("bg-1", "bash", background),
            call("fg-1", "bash", foreground),
            ScriptedReply::Hang,
        ]) else {
            return;
        };
        let setup = Setup {
            mode,
            approval: None,
            presets: false,
        };
        let config = w.dir.path().join("stockade.toml");
        let state = w.dir.path().join("state");
        let backend_line = format!("backend = \"{backend}\"");
        let server = w
            .server_at(&setup, &config, &state, |t| {
                // No proxy: the network is not what this is about.
                t.replace("backend = \"landlock\"", &backend_line)
                    .replace("[policy]\n", "[policy]\nnetwork = \"deny\"\n")
            })
            .run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let (mut child, transport) = common::spawn(&server, &seen, Stdio::piped());
        let stderr = child.stderr.take().unwrap();
        let log = tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let mut s = String::new();
            let mut stderr = stderr;
            let _ = stderr.read_to_string(&mut s).await;
            s
        });
        let ws = w.ws.clone();
        let (bg, fg) = (ws.join("bg"), ws.join("fg"));
        let (bg2, fg2) = (bg.clone(), fg.clone());
        let seen2 = seen.clone();
        let talk = common::client(transport, Answer::Allow, seen, async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            // Still running when the client hangs up.
            let _pending = cx.send_request(prompt(&s.session_id, "start the daemons"));
            let start = Instant::now();
            while size(&bg2) == 0 || size(&fg2) == 0 {
                if start.elapsed() > HANG {
                    return Ok(false);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(true)
        });
        let wrote = tokio::time::timeout(2 * HANG, talk)
            .await
            .expect("the conversation timed out")
            .expect("the client failed");
        // The client is gone, and with it the server's stdin.
        let exited = tokio::time::timeout(HANG, child.wait()).await;
        let left = marked(&mark);
        let (b0, f0) = (size(&bg), size(&fg));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let (b1, f1) = (size(&bg), size(&fg));
        let left_later = marked(&mark);
        for pid in left.iter().chain(&left_later) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
        let status = exited.unwrap_or_else(|_| {
            panic!("{who:?} {mode}/{backend}: stockade acp did not exit after the connection ended")
        });
        // Its status is not the point: a client that hangs up mid-stream
        // may leave the server a broken pipe to report.
        status.unwrap();
        let log = log.await.unwrap();
        assert!(
            wrote,
            "{who:?} {mode}/{backend}: the daemons never wrote (the test is void)\n{log}\n{:#?}",
            seen2.updates()
        );
        assert_eq!(
            (b0, f0),
            (b1, f1),
            "{who:?} {mode}/{backend}: a daemon wrote after stockade acp exited\n{log}"
        );
        assert!(
            left.is_empty() && left_later.is_empty(),
            "{who:?} {mode}/{backend}: processes outlived stockade acp: {left:?} {left_later:?}\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn under_landlock_no_process_of_a_session_outlives_the_connection() {
    connection_end_leaves_nothing("workspace-write", "landlock").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn under_bwrap_no_process_of_a_session_outlives_the_connection() {
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        connection_end_leaves_nothing("workspace-write", "bwrap").await;
    }
}

/// Nothing wraps the commands: `stockade acp`, their subreaper, ends them.
#[tokio::test(flavor = "multi_thread")]
async fn under_danger_full_access_no_process_of_a_session_outlives_the_connection() {
    connection_end_leaves_nothing("danger-full-access", "landlock").await;
}
