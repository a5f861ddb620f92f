//! A host not on the list, asked about through `stockade acp` while the
//! command that wants it waits: the real binary, the real Landlock launcher
//! and proxy, a scripted model, as root and (when we are root) as
//! `nobody`. The listener is the test's own on 127.0.0.1, outside the
//! sandbox; `other.test` is mapped to it in the proxy's resolver (the
//! `stockade` binary is built with the test hook by the workspace's test
//! build).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

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

fn curl() -> bool {
    let curl = std::process::Command::new("sh")
        .args(["-c", "command -v curl"])
        .status()
        .is_ok_and(|s| s.success());
    stockade_testkit::require("curl", curl)
}

fn bash(command: &str) -> Value {
    json!({ "command": command, "description": "fetch" })
}

/// Allow-listed, loopback listed (what the test's name resolves to), and
/// `other.test` mapped to the listener.
fn server(w: &World, who: Who, port: u16) -> Binary {
    w.server_at(&WRITE_ASK, &w.config_path(), &w.state, |t| {
        t.replace(
            "deny_read = []\n",
            "deny_read = []\nnetwork = \"allow-listed\"\nallowed_hosts = [\"127.0.0.1\"]\n",
        )
    })
    .env(
        "STOCKADE_PROXY_RESOLVE",
        &format!("other.test=127.0.0.1:{port}"),
    )
    .run_as(who)
}

const FETCH: &str = "curl -sS -m 60 http://other.test/";

fn host_events(w: &World) -> Vec<Value> {
    let mut logs = common::session_logs(&w.state);
    assert_eq!(logs.len(), 1);
    logs.remove(0)
        .1
        .into_iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("network/host-"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_running_call_asks_and_allow_always_lasts_the_session_and_its_load() {
    if !curl() {
        return;
    }
    for who in users() {
        let srv = stockade_testkit::http::ok_server();
        let script = vec![
            call("call-1", "bash", bash(&format!("echo x >> count; {FETCH}"))),
            call("call-2", "bash", bash(FETCH)),
            say("done"),
            call("call-3", "bash", bash(FETCH)),
            say("done again"),
        ];
        let Some(w) = World::new(script) else { return };
        let first = server(&w, who, srv.port);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop = common::one_prompt(
            &w,
            first,
            Answer::Pick("allow_always"),
            seen.clone(),
            "fetch",
        )
        .await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        // One question, on the running call, with the four options.
        let asks = seen.asks();
        assert_eq!(asks.len(), 1, "{who:?}: {asks:?}");
        assert_eq!(&*asks[0].tool_call.tool_call_id.0, "call-1");
        let options: Vec<&str> = asks[0].options.iter().map(|o| &*o.option_id.0).collect();
        assert_eq!(
            options,
            ["allow_once", "allow_always", "reject_once", "reject_always"]
        );
        let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
        assert!(title.contains("other.test:80"), "{title}");
        // The call was running when it was asked, showed that it waited,
        // then ran on to completion.
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
        let frames: Vec<String> = seen
            .frames
            .lock()
            .unwrap()
            .iter()
            .filter(|(d, _)| *d == common::Dir::ToClient)
            .map(|(_, l)| l.clone())
            .collect();
        let at = |pred: &dyn Fn(&Value) -> bool| {
            frames
                .iter()
                .position(|l| pred(&serde_json::from_str::<Value>(l).unwrap()))
                .unwrap()
        };
        let asked = at(&|v| v["method"] == "session/request_permission");
        let waiting = at(&|v| {
            v["params"]["update"]["toolCallId"] == "call-1"
                && v["params"]["update"]["title"].as_str().is_some_and(|t| {
                    t.contains("waiting for approval of network access to other.test:80")
                })
        });
        let done = at(&|v| {
            v["params"]["update"]["toolCallId"] == "call-1"
                && v["params"]["update"]["status"] == "completed"
        });
        assert!(waiting < asked && asked < done, "{frames:#?}");
        // Both calls reached the host; the command that asked ran once.
        assert_eq!(srv.hits(), 2, "{who:?}");
        assert_eq!(std::fs::read_to_string(w.ws.join("count")).unwrap(), "x\n");
        let events = host_events(&w);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0]["type"], "network/host-asked");
        assert_eq!(events[0]["host"], "other.test");
        assert_eq!(events[0]["call_id"], "call-1");
        assert_eq!(events[1]["type"], "network/host-answered");
        assert_eq!(events[1]["answer"], "allowed-for-session");
        // Loaded in a new server: the answer is folded from the log, and
        // nobody is asked again.
        let session = common::session_logs(&w.state).remove(0).0["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let again = Arc::new(Seen::default());
        let ws = w.ws.clone();
        let stop = common::run(
            server(&w, who, srv.port),
            Answer::Reject,
            again.clone(),
            async move |cx| {
                use agent_client_protocol::schema::ProtocolVersion;
                use agent_client_protocol::v1::schema::{InitializeRequest, LoadSessionRequest};
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let id = agent_client_protocol::v1::schema::SessionId::new(session.as_str());
                cx.send_request(LoadSessionRequest::new(id.clone(), &ws))
                    .block_task()
                    .await?;
                Ok(cx
                    .send_request(common::prompt(&id, "again"))
                    .block_task()
                    .await?
                    .stop_reason)
            },
        )
        .await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        assert!(again.asks().is_empty(), "{who:?}: {:?}", again.asks());
        assert_eq!(srv.hits(), 3, "{who:?}");
        let messages = w.model_messages();
        let last = common::last_content(messages.last().unwrap());
        assert!(last.contains("ok") && !last.contains("[sandbox:"), "{last}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reject_once_is_todays_refusal_and_is_logged() {
    if !curl() {
        return;
    }
    for who in users() {
        let srv = stockade_testkit::http::ok_server();
        let script = vec![call("call-1", "bash", bash(FETCH)), say("done")];
        let Some(w) = World::new(script) else { return };
        let first = server(&w, who, srv.port);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop = common::one_prompt(
            &w,
            first,
            Answer::Pick("reject_once"),
            seen.clone(),
            "fetch",
        )
        .await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        assert_eq!(seen.asks().len(), 1, "{who:?}");
        assert_eq!(srv.hits(), 0, "{who:?}");
        let messages = w.model_messages();
        let result = common::last_content(messages.last().unwrap());
        let marker = stockade_core::texts::network_denial_marker(
            Some("other.test"),
            stockade_core::NetworkMode::AllowListed,
        );
        assert!(result.contains(&marker), "{who:?}: {result}");
        let events = host_events(&w);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[1]["answer"], "refused-once");
    }
}

/// A session-wide allow is forgotten when the user changes the session's
/// mode: the next command asks again (Who::Me; the users' legs are above).
#[tokio::test(flavor = "multi_thread")]
async fn a_mode_change_forgets_the_sessions_host_answers() {
    use agent_client_protocol::v1::schema::SetSessionModeRequest;
    if !curl() {
        return;
    }
    let srv = stockade_testkit::http::ok_server();
    let script = vec![
        call("call-1", "bash", bash(FETCH)),
        say("done"),
        call("call-2", "bash", bash(FETCH)),
        say("done"),
        call("call-3", "bash", bash(FETCH)),
        say("done"),
    ];
    let Some(w) = World::new(script) else { return };
    const PRESETS: Setup = Setup {
        mode: "workspace-write",
        approval: Some("ask"),
        presets: true,
    };
    let server = w
        .server_at(&PRESETS, &w.config_path(), &w.state, |t| {
            t.replace(
                "deny_read = []\n",
                "deny_read = []\nnetwork = \"allow-listed\"\nallowed_hosts = [\"127.0.0.1\"]\n",
            )
        })
        .env(
            "STOCKADE_PROXY_RESOLVE",
            &format!("other.test=127.0.0.1:{}", srv.port),
        );
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    common::run(
        server,
        Answer::Pick("allow_always"),
        seen.clone(),
        async move |cx| {
            let id = common::open_session(&cx, &ws).await?;
            let asks = |n: &str| cx.send_request(common::prompt(&id, n)).block_task();
            asks("first").await?;
            // Remembered: the second command is not asked about.
            asks("second").await?;
            cx.send_request(SetSessionModeRequest::new(id.clone(), "danger-full-access"))
                .block_task()
                .await?;
            cx.send_request(SetSessionModeRequest::new(id.clone(), "workspace-write"))
                .block_task()
                .await?;
            asks("third").await?;
            Ok(())
        },
    )
    .await;
    let asks: Vec<String> = seen
        .asks()
        .iter()
        .map(|a| a.tool_call.tool_call_id.0.to_string())
        .collect();
    assert_eq!(asks, ["call-1", "call-3"]);
    assert_eq!(srv.hits(), 3);
}
