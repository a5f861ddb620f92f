//! The transport survives bad peers: a line of stdin that is not UTF-8,
//! longer than `MAX_FRAME_BYTES`, not JSON or not a JSON-RPC message is
//! answered with an error carrying the request's id whenever it can be read
//! (a 20 MB `session/prompt` too), and the next request is served; a closed
//! or broken stderr never ends the binary (`stockade acp` or `stockade
//! exec`), and never makes it panic (101).
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

fn assert_parse_error(v: &Value, id: Value) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert_eq!(v["id"], id, "{v}");
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
    // The id came before the bad bytes: the answer carries it.
    assert_parse_error(&next_frame(&mut out).await, json!(1));
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
    assert_parse_error(&v, Value::Null);
    assert!(
        v["error"]["data"].as_str().unwrap().contains("frame limit"),
        "{v}"
    );
    assert_initialized(&next_frame(&mut out).await, 3);
    child.stdin = Some(writer.await.unwrap());
    hang_up(child).await;
}

/// A 20 MB `session/prompt` (well past the frame limit) is answered with
/// an error carrying its id, read from the frame's first bytes, instead of
/// a turn that never ends; the rest is discarded, and the next request on
/// the same connection is served.
#[tokio::test(flavor = "multi_thread")]
async fn a_20_mb_prompt_is_answered_with_its_id_and_serving_goes_on() {
    let Some(w) = World::new(vec![]) else { return };
    let (mut child, mut out) = serve(&w, Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{}\n", initialize(1)).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    assert_initialized(&next_frame(&mut out).await, 1);
    const SIZE: usize = 20 * 1024 * 1024;
    const { assert!(SIZE > stockade_acp::MAX_FRAME_BYTES) };
    let writer = tokio::spawn(async move {
        let head = r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"00112233445566778899aabbccddeeff","prompt":[{"type":"text","text":""#;
        stdin.write_all(head.as_bytes()).await.unwrap();
        let chunk = vec![b'a'; 1024 * 1024];
        let mut left = SIZE;
        while left > 0 {
            let n = left.min(chunk.len());
            stdin.write_all(&chunk[..n]).await.unwrap();
            left -= n;
        }
        stdin.write_all(b"\"}]}}\n").await.unwrap();
        let next = json!({
            "jsonrpc": "2.0", "id": "after", "method": "session/new",
            "params": { "cwd": "relative", "mcpServers": [] },
        });
        stdin
            .write_all(format!("{next}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        stdin
    });
    let v = next_frame(&mut out).await;
    assert_parse_error(&v, json!(7));
    assert!(
        v["error"]["data"].as_str().unwrap().contains("frame limit"),
        "{v}"
    );
    // Served: the SDK's own answer to that request (its cwd is refused).
    let v = next_frame(&mut out).await;
    assert_eq!(v["id"], "after", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not absolute"),
        "{v}"
    );
    child.stdin = Some(writer.await.unwrap());
    hang_up(child).await;
}

/// How one fuzzed frame breaks a request whose id is readable.
#[derive(Debug, Clone)]
enum Break {
    /// `jsonrpc` wrong or missing.
    Version(&'static str),
    /// `method` not a string.
    Method(&'static str),
    /// `params` neither object nor array.
    Params(&'static str),
    /// A request and a response at once.
    Result,
    /// Members nobody knows (the SDK ignores them: a valid request).
    Unknown,
    /// Params of the wrong shape for the method (a valid envelope).
    Shape,
    /// Cut short this many bytes after the id.
    Cut(usize),
    /// Garbage after the object.
    Trailing(&'static str),
    /// A byte that is not UTF-8 in a string after the id.
    NotUtf8,
    /// A member after the id that is not JSON.
    BadMember,
}

fn break_strategy() -> impl proptest::strategy::Strategy<Value = Break> {
    use proptest::prelude::*;
    prop_oneof![
        prop::sample::select(vec!["\"1.0\"", "2", "null", "\"2\"", ""]).prop_map(Break::Version),
        prop::sample::select(vec!["7", "null", "{}", "[\"m\"]", "true"]).prop_map(Break::Method),
        prop::sample::select(vec!["\"p\"", "3", "false"]).prop_map(Break::Params),
        Just(Break::Result),
        Just(Break::Unknown),
        Just(Break::Shape),
        (0usize..200).prop_map(Break::Cut),
        prop::sample::select(vec!["x", "}", ",", "{}", "\"s\""]).prop_map(Break::Trailing),
        Just(Break::NotUtf8),
        Just(Break::BadMember),
    ]
}

/// A fuzzed frame: `id` at a random place before `method` and `params`,
/// random whitespace between tokens, broken as `b` says.
fn fuzzed(id: &Value, b: &Break, ws: &[&str; 4], id_first: bool) -> Vec<u8> {
    let version = match b {
        Break::Version("") => String::new(),
        Break::Version(v) => format!("\"jsonrpc\"{}:{}{v},", ws[0], ws[1]),
        _ => format!("\"jsonrpc\"{}:{}\"2.0\",", ws[0], ws[1]),
    };
    let id_member = format!("\"id\"{}:{}{id}{},", ws[2], ws[3], ws[0]);
    let method = match b {
        Break::Method(m) => (*m).to_owned(),
        Break::NotUtf8 => "\"session/~~\"".to_owned(),
        _ => "\"session/prompt\"".to_owned(),
    };
    let params = match b {
        Break::Params(p) => (*p).to_owned(),
        Break::Shape => "[1,2]".to_owned(),
        _ => r#"{"sessionId":"00112233445566778899aabbccddeeff","prompt":[{"type":"text","text":"a{}[]\"b"}]}"#
            .to_owned(),
    };
    let mut rest = format!("\"method\"{}:{method},{}\"params\":{params}", ws[1], ws[2]);
    match b {
        Break::Result => rest.push_str(",\"result\":{}"),
        Break::Unknown => rest.push_str(",\"x-extra\":[{\"id\":1}]"),
        Break::BadMember => rest.insert_str(0, "nope:1,"),
        _ => {}
    }
    let body = if id_first {
        format!("{{{}{id_member}{version}{rest}}}", ws[3])
    } else {
        format!("{{{}{version}{id_member}{rest}}}", ws[3])
    };
    let mut bytes = body.into_bytes();
    match b {
        Break::Cut(n) => {
            let at = bytes
                .windows(id_member.len())
                .position(|w| w == id_member.as_bytes())
                .unwrap()
                + id_member.len();
            // Always short of the closing brace: never valid JSON.
            bytes.truncate((at + n).min(bytes.len() - 1));
        }
        Break::Trailing(t) => bytes.extend_from_slice(t.as_bytes()),
        Break::NotUtf8 => {
            // The method's `~~`, made a byte that is not UTF-8.
            let at = bytes.windows(2).position(|w| w == b"~~").unwrap();
            bytes.splice(at..at + 2, [0xff]);
        }
        _ => {}
    }
    bytes
}

/// Send `frames` (while reading, so neither pipe fills), then `last`; each
/// frame must be answered once with an error carrying its id, never
/// `null`. The answer to `last` (whose id is `last_id`) is returned: the
/// SDK answers some frames from its handlers, so the order is not fixed.
async fn fuzz_round(
    child: &mut Child,
    out: &mut Lines<BufReader<ChildStdout>>,
    frames: &[(Value, Vec<u8>, Break)],
    last: String,
    last_id: &Value,
) -> Value {
    let mut stdin = child.stdin.take().unwrap();
    let sent: Vec<Vec<u8>> = frames.iter().map(|(_, f, _)| f.clone()).collect();
    let writer = tokio::spawn(async move {
        for f in sent {
            stdin.write_all(&f).await.unwrap();
            stdin.write_all(b"\n").await.unwrap();
        }
        stdin
            .write_all(format!("{last}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        stdin
    });
    let mut answers = std::collections::HashMap::new();
    for _ in 0..=frames.len() {
        let v = next_frame(out).await;
        assert!(!v["id"].is_null(), "an answer without the id: {v}");
        assert!(
            answers.insert(v["id"].to_string(), v.clone()).is_none(),
            "answered twice: {v}"
        );
    }
    for (id, frame, b) in frames {
        let v = answers.get(&id.to_string()).unwrap_or_else(|| {
            panic!(
                "no answer with id {id} to {b:?}: {}",
                String::from_utf8_lossy(frame)
            )
        });
        assert!(v["error"]["code"].is_i64(), "not an error: {v}");
    }
    child.stdin = Some(writer.await.unwrap());
    answers
        .remove(&last_id.to_string())
        .expect("the last request is answered")
}

/// Frames broken in every way the fuzz knows, each with a readable id (a
/// number or a string, before the frame goes wrong), before `initialize`
/// and after it (where a valid envelope reaches the method's own params
/// parsing): each is answered with an error carrying exactly that id, none
/// with `null`, and the next request is served each time.
#[tokio::test(flavor = "multi_thread")]
async fn every_malformed_frame_with_a_readable_id_is_answered_with_it() {
    use proptest::strategy::{Strategy as _, ValueTree as _};
    use proptest::test_runner::TestRunner;
    let Some(w) = World::new(vec![]) else { return };
    let ws = proptest::sample::select(vec!["", " ", "\t", "  "]);
    let case = (
        break_strategy(),
        proptest::array::uniform4(ws),
        proptest::bool::ANY,
        proptest::bool::ANY,
    );
    let mut runner = TestRunner::default();
    let mut frames = |from: u32| {
        (from..from + 300)
            .map(|n| {
                let (b, ws, id_first, numeric) = case.new_tree(&mut runner).unwrap().current();
                let id = if numeric {
                    json!(i64::from(n) * 7919 - 1_000_000)
                } else {
                    json!(format!("fz-{n} \"q\""))
                };
                (id.clone(), fuzzed(&id, &b, &ws, id_first), b)
            })
            .collect::<Vec<_>>()
    };
    let (before, after) = (frames(0), frames(300));
    let (mut child, mut out) = serve(&w, Stdio::null());
    let v = fuzz_round(&mut child, &mut out, &before, initialize(1), &json!(1)).await;
    assert_initialized(&v, 1);
    let next = json!({
        "jsonrpc": "2.0", "id": "next", "method": "session/new",
        "params": { "cwd": "relative", "mcpServers": [] },
    });
    let v = fuzz_round(
        &mut child,
        &mut out,
        &after,
        next.to_string(),
        &json!("next"),
    )
    .await;
    assert_eq!(v["id"], "next", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not absolute"),
        "{v}"
    );
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
