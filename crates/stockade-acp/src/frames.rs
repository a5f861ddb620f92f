//! The stdio transport, hardened against a bad peer: stdin is cut into
//! frames (lines) here, before the SDK sees it, and every line that is not a
//! JSON-RPC message is answered here with an error carrying the request's
//! id whenever it can be read: a line that is not UTF-8, longer than
//! [`MAX_FRAME_BYTES`], not JSON (parse error, `-32700`), or JSON that is no
//! JSON-RPC 2.0 message (invalid request, `-32600`). The SDK would answer
//! the last two itself, but always with `id: null`, and a client whose
//! request is answered with no id waits for that request forever.
//!
//! The id is taken from the parsed object when the line is JSON, else read
//! from the line's start by a scan of its top-level members in order
//! ([`id_in_prefix`]): only an `id` whose value is complete and followed by
//! `,` or `}` counts, so an over-long `{"jsonrpc":"2.0","id":7,...` is
//! answered with id 7. A line the SDK handles right (a valid message, a
//! batch array, a malformed response, which is never answered) goes to it
//! as it came.
//!
//! Stdin is read on a thread of its own with a bounded buffer: an oversized
//! line is discarded up to its newline, never held whole. Every frame this
//! process writes, the SDK's and the error answers alike, goes through one
//! locked writer, a whole line at a time, so frames never interleave.

use std::io::{self, BufRead, BufReader, Read};
use std::pin::Pin;
use std::sync::Arc;

use agent_client_protocol::RawJsonRpcMessage;
use futures::{Sink, Stream};
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt as _};
use tokio::sync::{Mutex, mpsc};

/// The longest frame (one line of stdin, without its line ending) the
/// server accepts: 16 MiB. A longer line is discarded without being
/// buffered whole, answered with a parse error, and the next line is served.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC's "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

/// The SDK's line transport, as [`transport`] builds it.
pub(crate) type LineTransport = agent_client_protocol::Lines<
    Pin<Box<dyn Sink<String, Error = io::Error> + Send>>,
    Pin<Box<dyn Stream<Item = io::Result<String>> + Send>>,
>;

/// What one line of input turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// For the SDK.
    Line(String),
    /// Answered here, with this id (`null` when it cannot be read).
    Bad { id: Value, why: Bad },
}

#[derive(Debug, PartialEq, Eq)]
enum Bad {
    NotUtf8,
    TooLong,
    NotJson(String),
    NotMessage(String),
}

/// A line transport for the SDK over `input` and `output`, with frames of
/// at most `cap` bytes. `input` is read on a thread of its own (a blocking
/// read is never left pending on the runtime, so shutdown does not wait
/// for the peer; the screening parse runs there too). Fails when that
/// thread cannot be started.
pub(crate) fn transport<R, W>(input: R, output: W, cap: usize) -> io::Result<LineTransport>
where
    R: Read + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let out = Arc::new(Mutex::new(output));
    // One frame in flight: with the one being read and the one the SDK
    // holds, memory stays a few frames whatever the peer sends.
    let (tx, rx) = mpsc::channel(1);
    std::thread::Builder::new()
        .name("stockade-acp-stdin".to_owned())
        .spawn(move || read_frames(BufReader::with_capacity(64 * 1024, input), cap, &tx))?;

    let incoming = futures::stream::unfold((rx, out.clone()), move |(mut rx, out)| async move {
        loop {
            let item = match rx.recv().await? {
                Ok(Frame::Line(line)) => Ok(line),
                Ok(Frame::Bad { id, why }) => match write_line(&out, answer(id, &why, cap)).await {
                    Ok(()) => continue,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            return Some((item, (rx, out)));
        }
    });
    let outgoing = futures::sink::unfold(out, |out, line: String| async move {
        write_line(&out, line).await?;
        Ok::<_, io::Error>(out)
    });
    Ok(agent_client_protocol::Lines::new(
        Box::pin(outgoing),
        Box::pin(incoming),
    ))
}

/// One whole line, then a flush, under the writer's lock.
async fn write_line<W: AsyncWrite + Unpin>(out: &Mutex<W>, line: String) -> io::Result<()> {
    let mut bytes = line.into_bytes();
    bytes.push(b'\n');
    let mut out = out.lock().await;
    out.write_all(&bytes).await?;
    out.flush().await
}

/// The error answering a line that never reached the SDK.
fn answer(id: Value, why: &Bad, cap: usize) -> String {
    let (code, message, data) = match why {
        Bad::NotUtf8 => (
            PARSE_ERROR,
            "Parse error",
            "the line is not valid UTF-8".to_owned(),
        ),
        Bad::TooLong => (
            PARSE_ERROR,
            "Parse error",
            format!("the line is longer than the {cap}-byte frame limit; it was discarded"),
        ),
        Bad::NotJson(e) => (PARSE_ERROR, "Parse error", e.clone()),
        Bad::NotMessage(e) => (INVALID_REQUEST, "Invalid request", e.clone()),
    };
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message, "data": data },
    })
    .to_string()
}

/// What the SDK must not see: a line it would answer with `id: null`. A
/// valid message, a batch (it has no id of its own) and a malformed
/// response (which nobody answers) go to the SDK unchanged.
fn screen(line: String) -> Frame {
    // The SDK's own parse (`RawJsonRpcMessage` reads a `Value` first), so
    // what passes here is exactly what it accepts.
    let typed = match serde_json::from_str::<RawJsonRpcMessage>(&line) {
        Ok(_) => return Frame::Line(line),
        Err(e) => e,
    };
    match serde_json::from_str::<Value>(&line) {
        Err(e) => Frame::Bad {
            id: id_in_prefix(line.as_bytes()),
            // Where, never what: serde's message can quote the input.
            why: Bad::NotJson(format!(
                "the line is not JSON ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            )),
        },
        Ok(Value::Array(_)) => Frame::Line(line),
        Ok(Value::Object(o))
            if !o.contains_key("method")
                && (o.contains_key("result") || o.contains_key("error")) =>
        {
            Frame::Line(line)
        }
        Ok(v) => Frame::Bad {
            id: readable_id(v.get("id")),
            why: Bad::NotMessage(shorten(&format!(
                "not a JSON-RPC 2.0 request, notification or response: {typed}"
            ))),
        },
    }
}

/// An id a client can match: a string or a number; anything else is `null`.
fn readable_id(id: Option<&Value>) -> Value {
    id.filter(|v| v.is_string() || v.is_number())
        .cloned()
        .unwrap_or(Value::Null)
}

/// At most 200 characters: the reason is for a person, and serde may quote
/// a long value of the peer's.
fn shorten(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// The top-level `id` of a JSON object that may be cut short, invalid
/// later on, or not UTF-8 after the id: the members are read in order from
/// the start, each key a whole JSON string and each value before the `id`
/// skipped whole (nested ones too), and the id counts only when its value
/// is a complete string or number followed by `,` or `}`. Anything else
/// (no object, a member that is not well-formed, the bytes ending before
/// the id is determined) is `null`: never a guess. The scan is linear in
/// `bytes`, which the caller bounds.
fn id_in_prefix(bytes: &[u8]) -> Value {
    let mut s = Scan { b: bytes, at: 0 };
    s.id().unwrap_or(Value::Null)
}

struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek() == Some(c)).then(|| self.at += 1)
    }

    fn id(&mut self) -> Option<Value> {
        self.eat(b'{')?;
        loop {
            self.ws();
            let key = self.string()?;
            self.eat(b':')?;
            self.ws();
            let start = self.at;
            if serde_json::from_slice::<String>(key).ok()? == "id" {
                match self.peek()? {
                    b'"' => {
                        self.string()?;
                    }
                    b'-' | b'0'..=b'9' => self.number(),
                    _ => return None,
                }
                let value = self.b.get(start..self.at)?;
                self.ws();
                if !matches!(self.peek(), Some(b',' | b'}')) {
                    return None;
                }
                let id: Value = serde_json::from_slice(value).ok()?;
                return Some(readable_id(Some(&id)));
            }
            self.value()?;
            self.ws();
            match self.peek()? {
                b',' => self.at += 1,
                _ => return None,
            }
        }
    }

    /// A whole JSON string (its bytes with the quotes), escapes skipped.
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        self.at += 1;
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return self.b.get(start..self.at);
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    fn number(&mut self) {
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
    }

    /// Skips one value whole: a string, a scalar, or a nested object or
    /// array (by its brackets, strings skipped so theirs do not count).
    /// The scalars inside are not checked: they cannot move the top level.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                // The closers still owed, innermost last: a mismatched one
                // leaves the nesting unknown, so no id is read past it.
                let mut open = Vec::new();
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' => open.push(b'}'),
                        b'[' => open.push(b']'),
                        c @ (b'}' | b']') => {
                            if open.pop()? != c {
                                return None;
                            }
                            if open.is_empty() {
                                self.at += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
            }
            _ => {
                let start = self.at;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
                {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }
}

/// Cut `input` into frames until it ends, its read fails, or nobody
/// listens any more. At most `cap + 1` bytes of a line are held (the `+ 1`
/// for a `\r` before the newline); an over-long line's id is read from
/// those before they are dropped.
fn read_frames(mut input: impl BufRead, cap: usize, tx: &mpsc::Sender<io::Result<Frame>>) {
    let mut line = Vec::new();
    // Once the line is over the cap: its id, read from what was held.
    let mut over: Option<Value> = None;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        if buf.is_empty() {
            // End of input: a last line without its newline still counts.
            if over.is_some() || !line.is_empty() {
                let _ = tx.blocking_send(Ok(frame(std::mem::take(&mut line), over.take(), cap)));
            }
            return;
        }
        let (chunk, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        if over.is_none() {
            if line.len() + chunk.len() > cap + 1 {
                // `line` never holds more than `cap + 1` bytes, so this
                // fills it to exactly that, from a chunk longer than `room`.
                let room = cap + 1 - line.len();
                line.extend_from_slice(&chunk[..room]);
                over = Some(id_in_prefix(&line));
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + usize::from(ended);
        input.consume(used);
        if ended {
            let f = frame(std::mem::take(&mut line), over.take(), cap);
            if tx.blocking_send(Ok(f)).is_err() {
                return;
            }
        }
    }
}

fn frame(mut line: Vec<u8>, over: Option<Value>, cap: usize) -> Frame {
    if let Some(id) = over {
        return Frame::Bad {
            id,
            why: Bad::TooLong,
        };
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.len() > cap {
        return Frame::Bad {
            id: id_in_prefix(&line),
            why: Bad::TooLong,
        };
    }
    match String::from_utf8(line) {
        Ok(line) => screen(line),
        Err(e) => Frame::Bad {
            id: id_in_prefix(e.as_bytes()),
            why: Bad::NotUtf8,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn frames(input: &[u8], cap: usize) -> Vec<String> {
        let (tx, mut rx) = mpsc::channel(64);
        // A tiny buffer, so lines cross reads.
        read_frames(BufReader::with_capacity(3, input), cap, &tx);
        drop(tx);
        let mut got = Vec::new();
        while let Ok(f) = rx.try_recv() {
            got.push(show(&f.unwrap()));
        }
        got
    }

    /// A frame in one word and its id, so expectations stay readable.
    fn show(f: &Frame) -> String {
        match f {
            Frame::Line(l) => format!("line {l}"),
            Frame::Bad { id, why } => {
                let why = match why {
                    Bad::NotUtf8 => "not-utf8",
                    Bad::TooLong => "too-long",
                    Bad::NotJson(_) => "not-json",
                    Bad::NotMessage(_) => "not-message",
                };
                format!("{why} {id}")
            }
        }
    }

    fn screened(line: &str) -> String {
        show(&screen(line.to_owned()))
    }

    #[test]
    fn lines_are_cut_at_newlines_and_crlf() {
        assert_eq!(
            frames(b"[1]\r\n[22]\n\n[3]", 8),
            ["line [1]", "line [22]", "not-json null", "line [3]"]
        );
    }

    #[test]
    fn invalid_utf8_is_one_bad_frame_with_its_id_then_reading_goes_on() {
        assert_eq!(
            frames(b"{\"id\":4,\"m\":\"x\xff\xfey\"}\n[1]\n\xff\n", 64),
            ["not-utf8 4", "line [1]", "not-utf8 null"]
        );
    }

    #[test]
    fn the_cap_is_inclusive_and_one_more_byte_is_too_long() {
        assert_eq!(
            frames(b"[1234567]\n[12345678]\r\n[1234567]\r\n[1]\n[123456789", 9),
            [
                "line [1234567]",
                "too-long null",
                "line [1234567]",
                "line [1]",
                "too-long null"
            ]
        );
        assert_eq!(
            frames(&[b'x'; 100], 8),
            ["too-long null"],
            "a long line without a newline is still one frame"
        );
    }

    /// The id of an over-long line is read from the bytes held before the
    /// rest is dropped: whole when it lies within them, else `null`.
    #[test]
    fn an_over_long_line_is_answered_with_the_id_at_its_start() {
        let long = |head: &str| {
            let mut l = head.as_bytes().to_vec();
            l.extend(std::iter::repeat_n(b'a', 200));
            l.extend(b"\"}}\n[1]\n");
            l
        };
        let head = r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"p":""#;
        assert_eq!(frames(&long(head), 64), ["too-long 7", "line [1]"]);
        let head = r#"{"jsonrpc":"2.0","method":"m","id":"abc","params":{"p":""#;
        assert_eq!(frames(&long(head), 64), ["too-long \"abc\"", "line [1]"]);
        // The id's value is cut by the cap: not determined.
        let head = r#"{"jsonrpc":"2.0","id":123456789,"params":{"p":""#;
        assert_eq!(frames(&long(head), 30), ["too-long null", "line [1]"]);
        // After the bytes held: not read.
        let head = r#"{"jsonrpc":"2.0","params":{"p":"aaaaaaaaaaaaaaaaaaaa"},"id":5,"x":""#;
        assert_eq!(frames(&long(head), 40), ["too-long null", "line [1]"]);
    }

    #[test]
    fn what_the_sdk_handles_right_goes_to_it_unchanged() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m","extra":true}"#,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":null}"#,
            // A malformed response: the SDK drops it (nobody answers one).
            r#"{"jsonrpc":"1.0","id":3,"result":1}"#,
            r#"{"id":3,"error":"no"}"#,
            // A batch: one invalid request with no id of its own.
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            "[]",
        ] {
            assert_eq!(screened(line), format!("line {line}"));
        }
    }

    #[test]
    fn a_json_object_that_is_no_message_is_answered_with_its_id() {
        for (line, want) in [
            (r#"{"jsonrpc":"1.0","id":3,"method":"m"}"#, "3"),
            (r#"{"id":4,"method":"m"}"#, "4"),
            (r#"{"jsonrpc":2,"id":"s","method":"m"}"#, "\"s\""),
            (r#"{"jsonrpc":"2.0","id":5,"method":7}"#, "5"),
            (r#"{"jsonrpc":"2.0","id":5,"method":null}"#, "5"),
            (r#"{"jsonrpc":"2.0","id":6,"method":"m","params":"p"}"#, "6"),
            (r#"{"jsonrpc":"2.0","id":6,"method":"m","params":3}"#, "6"),
            (r#"{"jsonrpc":"2.0","id":7,"method":"m","result":1}"#, "7"),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#, "1.5"),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
                "18446744073709551615",
            ),
            (
                r#"{"method":"m","jsonrpc":"2.0","id":-2,"params":[1],"error":{}} "#,
                "-2",
            ),
            // Not an id a client can match: null.
            (r#"{"jsonrpc":"2.0","id":{"n":1},"method":"m"}"#, "null"),
            (r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#, "null"),
            (r#"{"jsonrpc":"2.0","method":"m","params":1}"#, "null"),
            ("17", "null"),
        ] {
            assert_eq!(screened(line), format!("not-message {want}"), "{line}");
        }
    }

    #[test]
    fn invalid_json_is_answered_with_the_id_its_start_determines() {
        for (line, want) in [
            (r#"{"jsonrpc":"2.0","id":7,"method":"m","#, "7"),
            (r#"{"jsonrpc":"2.0","id":7}}"#, "7"),
            (
                r#" { "jsonrpc" : "2.0" , "id" : "a\"b" , oops"#,
                "\"a\\\"b\"",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"m","params":{"a":[1,{"b":"}]"}],"c":"\\"},"id":9,"#,
                "9",
            ),
            (r#"{"i\u0064":8,"#, "8"),
            (r#"{"jsonrpc":"2.0","id":-3e2,"method""#, "-300.0"),
            // Not determined: null.
            (r#"{"jsonrpc":"2.0","id":12"#, "null"),
            (r#"{"jsonrpc":"2.0","id":"12"#, "null"),
            (r#"{"a":{"id":1}"#, "null"),
            (r#"{"a":[1}],"id":2,"#, "null"),
            (r#"[{"id":1},"#, "null"),
            (r#"{"id":true,"#, "null"),
            (r#"{"id":nul,"#, "null"),
            (r#"{"jsonrpc" "2.0","id":1,"#, "null"),
            (r#"{"jsonrpc":"2.0" "id":1,"#, "null"),
            (r#"{jsonrpc:"2.0","id":1,"#, "null"),
            ("", "null"),
        ] {
            assert_eq!(screened(line), format!("not-json {want}"), "{line}");
        }
    }

    #[test]
    fn the_answer_is_an_error_with_the_id() {
        let v: Value =
            serde_json::from_str(&answer(json!(7), &Bad::TooLong, MAX_FRAME_BYTES)).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], PARSE_ERROR);
        assert!(v["error"]["data"].as_str().unwrap().contains("frame limit"));
        let v: Value =
            serde_json::from_str(&answer(Value::Null, &Bad::NotMessage("x".into()), 1)).unwrap();
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["code"], INVALID_REQUEST);
    }
}
