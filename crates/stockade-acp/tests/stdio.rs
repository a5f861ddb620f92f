//! The server as an editor starts it: a child process speaking ACP on its
//! stdin and stdout. Stdout must carry protocol frames and nothing else; the
//! logs go to stderr.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{InitializeRequest, NewSessionRequest, StopReason};
use common::{Answer, Dir, Seen, Setup, World, call, escalated, prompt, say, touch};
use tokio::io::AsyncReadExt as _;

#[tokio::test(flavor = "multi_thread")]
async fn over_stdio_stdout_carries_frames_only() {
    let Some(w) = World::new(vec![
        call("call-1", "bash", touch("marker")),
        call(
            "call-2",
            "bash",
            escalated(touch("marker"), "workspace-write"),
        ),
        say("done"),
    ]) else {
        return;
    };
    let server = w.server(&Setup {
        mode: "read-only",
        approval: Some("ask"),
        presets: false,
    });
    let seen = Arc::new(Seen::default());
    let (mut child, transport) = common::spawn(&server, &seen, Stdio::piped());
    let mut stderr = child.stderr.take().unwrap();
    let ws = w.ws.clone();
    let talk = common::client(transport, Answer::Allow, seen.clone(), async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let s = cx
            .send_request(NewSessionRequest::new(&ws))
            .block_task()
            .await?;
        let r = cx
            .send_request(prompt(&s.session_id, "create the marker file"))
            .block_task()
            .await?;
        Ok(r.stop_reason)
    });
    let stop = tokio::time::timeout(Duration::from_secs(120), talk)
        .await
        .expect("the conversation timed out")
        .expect("the client failed");
    assert_eq!(stop, StopReason::EndTurn);
    assert!(w.ws.join("marker").is_file());
    assert_eq!(seen.asks().len(), 1);

    // The client hung up (its stdin end is dropped): the server ends cleanly.
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits at end of input")
        .unwrap();
    let mut log = String::new();
    stderr.read_to_string(&mut log).await.unwrap();
    assert!(status.success(), "{status}; stderr:\n{log}");
    assert!(log.contains("stockade acp: serving ACP on stdio"), "{log}");

    // Every line on stdout was a JSON-RPC 2.0 frame.
    let frames = seen.frames.lock().unwrap().clone();
    let to_client: Vec<&String> = frames
        .iter()
        .filter(|(d, _)| *d == Dir::ToClient)
        .map(|(_, l)| l)
        .collect();
    assert!(!to_client.is_empty());
    for line in to_client {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a protocol frame on stdout: {line:?}: {e}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    // The session log landed under $STOCKADE_STATE_DIR/sessions.
    let logs = std::fs::read_dir(w.state.join("sessions")).unwrap().count();
    assert_eq!(logs, 1);
}
