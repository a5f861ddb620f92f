//! An agent killed mid-call: the real `stockade acp` runs a long bash call,
//! is killed with SIGKILL while the call runs (its log holds the call and
//! no result), and a new `stockade acp` over the same store replays the
//! session on `session/load`. The editor must see that call end, failed
//! with the reason, not run forever. As root and (when we are root) as
//! `nobody`.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    InitializeRequest, LoadSessionRequest, NewSessionRequest, SessionUpdate, ToolCallStatus,
};
use common::{Answer, Seen, Setup, World, call, prompt, session_logs};
use serde_json::json;
use stockade_testkit::procs::{marked, marker};
use stockade_testkit::users::users;

/// A failure detector only: what has not happened after this long hangs.
const HANG: Duration = Duration::from_secs(60);

const SETUP: Setup = Setup {
    mode: "workspace-write",
    approval: None,
    presets: false,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_call_cut_short_by_a_killed_agent_replays_as_failed() {
    for who in users() {
        let mark = marker("acp-killed");
        let long = json!({
            "command": format!("export KILLED_MARK={mark}; echo started > started; sleep 600"),
            "description": "a call that outlives its agent",
        });
        let Some(w) = World::new(vec![call("call-long", "bash", long)]) else {
            return;
        };
        let config = w.dir.path().join("stockade.toml");
        let state = w.dir.path().join("state");
        // No proxy: the network is not what this is about.
        let binary = || {
            w.server_at(&SETUP, &config, &state, |t| {
                t.replace("[policy]\n", "[policy]\nnetwork = \"deny\"\n")
            })
            .run_as(who)
        };
        let first = binary();
        w.own(who);

        let seen = Arc::new(Seen::default());
        let (mut child, transport) = common::spawn(&first, &seen, Stdio::null());
        let pid = child.id().unwrap();
        let ws = w.ws.clone();
        let started = ws.join("started");
        let seen2 = seen.clone();
        let session = Arc::new(std::sync::Mutex::new(None));
        let session2 = session.clone();
        let talk = common::client(transport, Answer::Allow, seen, async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            *session2.lock().unwrap() = Some(s.session_id.clone());
            let _pending = cx.send_request(prompt(&s.session_id, "run the long thing"));
            let t = Instant::now();
            while !(started.is_file()
                && seen2
                    .statuses("call-long")
                    .contains(&ToolCallStatus::InProgress))
            {
                if t.elapsed() > HANG {
                    panic!("{who:?}: the call never started: {:#?}", seen2.updates());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let killed = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
            Ok(())
        });
        // The client may well fail: its agent is gone mid-conversation
        // (a broken pipe when it next writes).
        let _ = tokio::time::timeout(2 * HANG, talk)
            .await
            .expect("the conversation timed out");
        let id = session
            .lock()
            .unwrap()
            .take()
            .expect("a session was opened");
        let status = tokio::time::timeout(HANG, child.wait())
            .await
            .expect("the killed agent is reaped")
            .unwrap();
        // The call's processes outlive a killed agent (nothing was left to
        // reap them): not this test's subject, so they are ended here.
        for p in marked(&mark) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &p.to_string()])
                .status();
        }
        {
            use std::os::unix::process::ExitStatusExt as _;
            assert_eq!(status.signal(), Some(9), "{who:?}: {status}");
        }
        // The log is as a killed agent leaves it: the call, no result.
        let logs = session_logs(&state);
        assert_eq!(logs.len(), 1);
        let kinds: Vec<&str> = logs[0]
            .1
            .iter()
            .filter_map(|e| e["type"].as_str())
            .collect();
        assert!(
            kinds.contains(&"assistant/tool-calls") && !kinds.contains(&"tool/result"),
            "{who:?}: {kinds:?}"
        );

        // A new agent over the same store.
        let second = Arc::new(Seen::default());
        let ws = w.ws.clone();
        common::run(binary(), Answer::Allow, second.clone(), async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(LoadSessionRequest::new(id, &ws))
                .block_task()
                .await?;
            Ok(())
        })
        .await;
        assert_eq!(
            second.statuses("call-long"),
            [ToolCallStatus::Pending, ToolCallStatus::Failed],
            "{who:?}: {:#?}",
            second.updates()
        );
        let last = second
            .updates()
            .into_iter()
            .rev()
            .find_map(|n| match n.update {
                SessionUpdate::ToolCallUpdate(u) if &*u.tool_call_id.0 == "call-long" => Some(u),
                _ => None,
            })
            .unwrap();
        let content = serde_json::to_string(&last.fields.content).unwrap();
        assert!(
            content.contains("the agent stopped before this call finished"),
            "{who:?}: {content}"
        );
    }
}
