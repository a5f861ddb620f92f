//! The stdio transport, hardened against a bad peer: stdin is cut into
//! frames (lines) here, before the SDK sees it, so a line that is not UTF-8
//! or longer than [`MAX_FRAME_BYTES`] is answered with a JSON-RPC parse
//! error (`-32700`, `id: null`) and the next line is served. A line that is
//! UTF-8 goes to the SDK as it came, which answers malformed JSON itself
//! (with the request's id when it can read one).
//!
//! Stdin is read on a thread of its own with a bounded buffer: an oversized
//! line is discarded up to its newline, never held whole. Every frame this
//! process writes, the SDK's and the error answers alike, goes through one
//! locked writer, a whole line at a time, so frames never interleave.

use std::io::{self, BufRead, BufReader, Read};
use std::pin::Pin;
use std::sync::Arc;

use futures::{Sink, Stream};
use tokio::io::{AsyncWrite, AsyncWriteExt as _};
use tokio::sync::{Mutex, mpsc};

/// The longest frame (one line of stdin, without its line ending) the
/// server accepts: 16 MiB. A longer line is discarded without being
/// buffered whole, answered with a parse error, and the next line is served.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC's "Parse error".
const PARSE_ERROR: i64 = -32700;

/// The SDK's line transport, as [`transport`] builds it.
pub(crate) type LineTransport = agent_client_protocol::Lines<
    Pin<Box<dyn Sink<String, Error = io::Error> + Send>>,
    Pin<Box<dyn Stream<Item = io::Result<String>> + Send>>,
>;

/// What one line of input turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    Line(String),
    NotUtf8,
    TooLong,
}

/// A line transport for the SDK over `input` and `output`, with frames of
/// at most `cap` bytes. `input` is read on a thread of its own (a blocking
/// read is never left pending on the runtime, so shutdown does not wait
/// for the peer). Fails when that thread cannot be started.
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
                Ok(bad) => match write_line(&out, parse_error(&bad, cap)).await {
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

/// The answer to a line that never reached the SDK.
fn parse_error(bad: &Frame, cap: usize) -> String {
    let why = match bad {
        Frame::NotUtf8 => "the line is not valid UTF-8".to_owned(),
        _ => format!("the line is longer than the {cap}-byte frame limit; it was discarded"),
    };
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": PARSE_ERROR, "message": "Parse error", "data": why },
    })
    .to_string()
}

/// Cut `input` into frames until it ends, its read fails, or nobody
/// listens any more. At most `cap + 1` bytes of a line are held (the `+ 1`
/// for a `\r` before the newline).
fn read_frames(mut input: impl BufRead, cap: usize, tx: &mpsc::Sender<io::Result<Frame>>) {
    let mut line = Vec::new();
    let mut over = false;
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
            if over || !line.is_empty() {
                let _ = tx.blocking_send(Ok(frame(std::mem::take(&mut line), over, cap)));
            }
            return;
        }
        let (chunk, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        if !over {
            if line.len() + chunk.len() > cap + 1 {
                over = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + usize::from(ended);
        input.consume(used);
        if ended {
            let f = frame(std::mem::take(&mut line), over, cap);
            over = false;
            if tx.blocking_send(Ok(f)).is_err() {
                return;
            }
        }
    }
}

fn frame(mut line: Vec<u8>, over: bool, cap: usize) -> Frame {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if over || line.len() > cap {
        return Frame::TooLong;
    }
    String::from_utf8(line).map_or(Frame::NotUtf8, Frame::Line)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn frames(input: &[u8], cap: usize) -> Vec<Frame> {
        let (tx, mut rx) = mpsc::channel(64);
        // A tiny buffer, so lines cross reads.
        read_frames(BufReader::with_capacity(3, input), cap, &tx);
        drop(tx);
        let mut got = Vec::new();
        while let Ok(f) = rx.try_recv() {
            got.push(f.unwrap());
        }
        got
    }

    fn line(s: &str) -> Frame {
        Frame::Line(s.to_owned())
    }

    #[test]
    fn lines_are_cut_at_newlines_and_crlf() {
        assert_eq!(
            frames(b"a\r\nbc\n\nlast", 8),
            vec![line("a"), line("bc"), line(""), line("last")]
        );
    }

    #[test]
    fn invalid_utf8_is_one_bad_frame_then_reading_goes_on() {
        assert_eq!(
            frames(b"x\xff\xfey\nok\n", 8),
            vec![Frame::NotUtf8, line("ok")]
        );
    }

    #[test]
    fn the_cap_is_inclusive_and_one_more_byte_is_too_long() {
        assert_eq!(
            frames(b"12345678\n123456789\r\n12345678\r\nnext\n123456789", 8),
            vec![
                line("12345678"),
                Frame::TooLong,
                line("12345678"),
                line("next"),
                Frame::TooLong
            ]
        );
        assert_eq!(
            frames(&[b'x'; 100], 8),
            vec![Frame::TooLong],
            "a long line without a newline is still one frame"
        );
    }

    #[test]
    fn the_error_answer_is_a_parse_error_with_a_null_id() {
        let v: serde_json::Value =
            serde_json::from_str(&parse_error(&Frame::TooLong, MAX_FRAME_BYTES)).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], serde_json::Value::Null);
        assert_eq!(v["error"]["code"], PARSE_ERROR);
    }
}
