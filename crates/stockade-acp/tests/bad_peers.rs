//! The transport survives bad peers: a line of stdin that is not UTF-8 or
//! longer than `MAX_FRAME_BYTES` is answered with a parse error and the
//! next request is served; a closed or broken stderr never ends the binary
//! (`stockade acp` or `stockade exec`), and never makes it panic (101).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{Setup, World, stockade};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

const SETUP: Setup = Setup {
    mode: "read-only",
    approval: None,
    presets: false,
};

fn initialize(id: u64) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": { "protocolVersion": 1 },
    })
    .to_string()
}

/// The next frame on the server's stdout, as JSON.
async fn next_frame(out: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("the server answers in time")
        .unwrap()
        .expect("the server is still serving");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a frame: {line:?}: {e}"))
}

fn assert_parse_error(v: &Value) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert_eq!(v["id"], Value::Null, "{v}");
    assert_eq!(v["error"]["code"], -32700, "{v}");
}

fn assert_initialized(v: &Value, id: u64) {
    assert_eq!(v["id"], id, "{v}");
    assert_eq!(v["result"]["protocolVersion"], 1, "{v}");
}

fn serve(w: &World, stderr: Stdio) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = w
        .server(&SETUP)
        .command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("stockade acp");
    let out = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, out)
}

/// Close stdin and expect a clean exit (never a panic's 101).
async fn hang_up(mut child: Child) {
    drop(child.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits at end of input")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_utf8_is_a_parse_error_and_serving_goes_on() {
    let Some(w) = World::new(vec![]) else { return };
    let (mut child, mut out) = serve(&w, Stdio::null());
    let stdin = child.stdin.as_mut().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}\n")
        .await
        .unwrap();
    stdin
        .write_all(format!("{}\n", initialize(2)).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    assert_parse_error(&next_frame(&mut out).await);
    assert_initialized(&next_frame(&mut out).await, 2);

    // Readable JSON with an id but no valid request: the SDK answers it
    // with that id, and the next request is still served.
    let stdin = child.stdin.as_mut().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"nope\"}}\n")
        .await
        .unwrap();
    stdin
        .write_all(format!("{}\n", initialize(8)).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let v = next_frame(&mut out).await;
    assert_eq!(v["id"], 7, "{v}");
    assert!(v["error"]["code"].is_i64(), "{v}");
    assert_initialized(&next_frame(&mut out).await, 8);
    hang_up(child).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_line_is_discarded_answered_and_serving_goes_on() {
    let Some(w) = World::new(vec![]) else { return };
    let (mut child, mut out) = serve(&w, Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    // Written while the answers are read: one byte over the cap, then a
    // request.
    let writer = tokio::spawn(async move {
        let chunk = vec![b'a'; 1024 * 1024];
        let mut left = stockade_acp::MAX_FRAME_BYTES + 1;
        while left > 0 {
            let n = left.min(chunk.len());
            stdin.write_all(&chunk[..n]).await.unwrap();
            left -= n;
        }
        stdin.write_all(b"\n").await.unwrap();
        stdin
            .write_all(format!("{}\n", initialize(3)).as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        stdin
    });
    let v = next_frame(&mut out).await;
    assert_parse_error(&v);
    assert!(
        v["error"]["data"].as_str().unwrap().contains("frame limit"),
        "{v}"
    );
    assert_initialized(&next_frame(&mut out).await, 3);
    child.stdin = Some(writer.await.unwrap());
    hang_up(child).await;
}

/// A pipe whose reading end is already closed: every write to it fails
/// (`EPIPE`), as when the editor stopped reading the agent's log.
fn broken_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

#[tokio::test(flavor = "multi_thread")]
async fn acp_serves_with_a_broken_stderr() {
    let Some(w) = World::new(vec![]) else { return };
    let (mut child, mut out) = serve(&w, broken_pipe());
    let stdin = child.stdin.as_mut().unwrap();
    // The startup line and this one's protocol note both go to stderr.
    let old = json!({
        "jsonrpc": "2.0", "id": 4, "method": "initialize",
        "params": { "protocolVersion": 0 },
    });
    stdin
        .write_all(format!("{old}\n{}\n", initialize(5)).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    assert_eq!(next_frame(&mut out).await["id"], 4);
    assert_initialized(&next_frame(&mut out).await, 5);
    hang_up(child).await;
}

/// `stockade ARGS` through a shell with stderr closed (`2>&-`) and with it
/// a broken pipe: the usage error's status either way, never 101.
async fn exits_with_bad_stderr(args: &[&str], want: i32) {
    let Some(bin) = stockade() else { return };
    let closed = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&-")
        .arg(&bin)
        .args(args)
        .env_remove("STOCKADE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .await
        .unwrap();
    assert_eq!(
        closed.code(),
        Some(want),
        "stderr closed: {args:?}: {closed}"
    );
    let broken = tokio::process::Command::new(&bin)
        .args(args)
        .env_remove("STOCKADE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(broken_pipe())
        .status()
        .await
        .unwrap();
    assert_eq!(
        broken.code(),
        Some(want),
        "stderr broken: {args:?}: {broken}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn acp_refusal_with_a_bad_stderr_keeps_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing").join("stockade.toml");
    exits_with_bad_stderr(&["acp", "--config", missing.to_str().unwrap()], 2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_usage_error_with_a_bad_stderr_keeps_its_status() {
    exits_with_bad_stderr(
        &["exec", "--allow-socket", "relative.sock", "--", "true"],
        2,
    )
    .await;
}
