//! The network knob through `stockade acp` end to end: a denied connection
//! is a network denial the model sees, an approved `network: "allow"` retry
//! runs that one call with the network, and the next call is denied again.
//! Loopback only: the listener is the test's own, outside the sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use common::{Answer, Seen, Setup, World, call, say};
use serde_json::json;
use stockade_core::{NetworkMode, texts};

const READ_ONLY_ASK: Setup = Setup {
    mode: "read-only",
    approval: Some("ask"),
    presets: false,
};

fn fetch(port: u16) -> serde_json::Value {
    json!({
        "command": format!("curl -sS -m 5 http://127.0.0.1:{port}/"),
        "description": "fetch from the local service"
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_network_retry_reaches_out_once_and_only_once() {
    let curl = std::process::Command::new("sh")
        .args(["-c", "command -v curl"])
        .status()
        .is_ok_and(|s| s.success());
    if !stockade_testkit::require("curl", curl) {
        return;
    }
    let srv = stockade_testkit::http::ok_server();
    let port = srv.port;
    let mut widened = fetch(port);
    widened["network"] = json!("allow");
    widened["justification"] = json!("the task needs the local service");
    let script = vec![
        call("call-1", "bash", fetch(port)),
        call("call-2", "bash", widened),
        call("call-3", "bash", fetch(port)),
        say("done"),
    ];
    let Some(w) = World::new(script) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(
        &w,
        w.server(&READ_ONLY_ASK),
        Answer::Allow,
        seen.clone(),
        "fetch it",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    // Exactly the approved call reached the listener.
    assert_eq!(srv.hits(), 1);
    assert_eq!(seen.asks().len(), 1, "only the widened retry is asked");
    let requests = w.model_messages();
    let result = |i: usize| common::last_content(&requests[i]);
    let marker = texts::network_denial_marker(Some("127.0.0.1"), NetworkMode::Deny);
    assert!(result(1).contains(&marker), "{}", result(1));
    assert!(
        result(1).contains(texts::NETWORK_DENIAL_INSTRUCTION),
        "{}",
        result(1)
    );
    assert!(
        result(2).contains("ok") && !result(2).contains("[sandbox:"),
        "{}",
        result(2)
    );
    // Nothing was remembered: the next call is back under deny.
    assert!(result(3).contains(&marker), "{}", result(3));
}
