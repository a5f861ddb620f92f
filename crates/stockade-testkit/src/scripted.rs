//! A scripted OpenAI-compatible model server, **for tests**.
//!
//! It binds `127.0.0.1:0`, answers `POST /chat/completions` (and
//! `/v1/chat/completions`) with the next [`ScriptedReply`] of its script, one
//! per request in order, streamed as SSE when the request says
//! `"stream": true` and as one JSON completion otherwise, and records every
//! request it received. Point a client at [`ScriptedServer::base_url`]: in
//! this process, or in a child process (the ACP end-to-end tests start
//! `stockade acp` with the model's `base_url` set to it).
//!
//! It speaks just enough HTTP/1.1 for that (one request per connection,
//! `Content-Length` bodies) and nothing else: it is not a general server.
//! A request beyond the script is answered 410 with a message saying so, so
//! the test fails with a clear error rather than hanging.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use stockade_model::ModelToolCall;

/// An assistant message to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedMessage {
    pub content: String,
    /// Streamed (and returned) as `reasoning_content`.
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ModelToolCall>,
    /// Default: `tool_calls` when there are calls, else `stop`.
    pub finish_reason: Option<String>,
    /// When streamed, every text (content, reasoning, each call's arguments)
    /// is cut into pieces of this many characters, so clients must assemble.
    pub chunk_chars: usize,
}

/// One answer of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptedReply {
    Message(ScriptedMessage),
    /// An HTTP error: `status` with `body` (JSON content type), and a
    /// `Retry-After` header when given.
    Error {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
    /// Sent exactly as given, whatever the request asked (malformed bodies).
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    /// Reads the request and never answers (timeouts).
    Hang,
}

impl ScriptedReply {
    pub fn text(content: impl Into<String>) -> Self {
        Self::tool_calls(content, Vec::new())
    }

    pub fn tool_calls(content: impl Into<String>, calls: Vec<ModelToolCall>) -> Self {
        Self::Message(ScriptedMessage {
            content: content.into(),
            reasoning: None,
            tool_calls: calls,
            finish_reason: None,
            chunk_chars: 3,
        })
    }

    /// `{"error":{"message":..}}` with `status`, as OpenAI and DeepSeek send.
    pub fn error(status: u16, message: &str) -> Self {
        Self::Error {
            status,
            body: json!({ "error": { "message": message, "type": "scripted" } }).to_string(),
            retry_after: None,
        }
    }

    /// A 200 `text/event-stream` with exactly this body.
    pub fn raw_sse(body: impl Into<String>) -> Self {
        Self::Raw {
            status: 200,
            content_type: "text/event-stream".into(),
            body: body.into(),
        }
    }

    /// Adds reasoning to a message (other replies are returned unchanged).
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        if let Self::Message(m) = &mut self {
            m.reasoning = Some(reasoning.into());
        }
        self
    }

    /// Adds `Retry-After` to an error (other replies are returned unchanged).
    pub fn with_retry_after(mut self, value: impl Into<String>) -> Self {
        if let Self::Error { retry_after, .. } = &mut self {
            *retry_after = Some(value.into());
        }
        self
    }
}

/// One request as received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The parsed JSON body, or the raw text as a string when it was not JSON.
    pub body: Value,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<ScriptedReply>,
    requests: Vec<RecordedRequest>,
}

type Shared = Arc<Mutex<State>>;

fn lock(s: &Shared) -> MutexGuard<'_, State> {
    // A panicking test thread must not hide the requests from the others.
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The server; it stops when dropped.
#[derive(Debug)]
pub struct ScriptedServer {
    addr: SocketAddr,
    state: Shared,
    shutdown: Option<oneshot::Sender<()>>,
}

impl ScriptedServer {
    /// Serves on the current tokio runtime (a spawned task). The runtime must
    /// keep running while clients talk to it: a test that blocks its only
    /// thread (a current-thread runtime waiting on a child synchronously)
    /// wants [`Self::start_on_thread`].
    pub fn start(script: Vec<ScriptedReply>) -> io::Result<Self> {
        let handle = tokio::runtime::Handle::try_current().map_err(|e| {
            io::Error::other(format!(
                "ScriptedServer::start needs a tokio runtime ({e}); use start_on_thread"
            ))
        })?;
        let (std_listener, addr) = bind()?;
        let listener = {
            let _guard = handle.enter();
            TcpListener::from_std(std_listener)?
        };
        let state: Shared = Arc::new(Mutex::new(State {
            script: script.into(),
            requests: Vec::new(),
        }));
        let (tx, rx) = oneshot::channel();
        handle.spawn(serve(listener, state.clone(), rx));
        Ok(Self {
            addr,
            state,
            shutdown: Some(tx),
        })
    }

    /// Serves on a thread of its own with its own runtime: usable from any
    /// test, async or not.
    pub fn start_on_thread(script: Vec<ScriptedReply>) -> io::Result<Self> {
        let (std_listener, addr) = bind()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let state: Shared = Arc::new(Mutex::new(State {
            script: script.into(),
            requests: Vec::new(),
        }));
        let (tx, rx) = oneshot::channel();
        let thread_state = state.clone();
        std::thread::Builder::new()
            .name("scripted-model-server".into())
            .spawn(move || {
                rt.block_on(async move {
                    match TcpListener::from_std(std_listener) {
                        Ok(listener) => serve(listener, thread_state, rx).await,
                        Err(e) => eprintln!("scripted model server: {e}"),
                    }
                });
            })?;
        Ok(Self {
            addr,
            state,
            shutdown: Some(tx),
        })
    }

    /// `http://127.0.0.1:PORT`: a model `base_url` (`/v1` may be appended).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state)
            .requests
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// Every request received so far, with method, path and headers.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// Appends to the script.
    pub fn push(&self, reply: ScriptedReply) {
        lock(&self.state).script.push_back(reply);
    }

    /// Replies not served yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state).script.len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn bind() -> io::Result<(std::net::TcpListener, SocketAddr)> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    l.set_nonblocking(true)?;
    let addr = l.local_addr()?;
    Ok((l, addr))
}

async fn serve(listener: TcpListener, state: Shared, mut shutdown: oneshot::Receiver<()>) {
    // Owning the connections here means stopping aborts them all, hung
    // replies included.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                while conns.try_join_next().is_some() {}
                if let Ok((stream, _)) = accepted {
                    let state = state.clone();
                    conns.spawn(async move {
                        let _ = handle(stream, state).await;
                    });
                }
            }
        }
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request(stream: &mut TcpStream) -> io::Result<Option<Request>> {
    const HEAD_CAP: usize = 64 * 1024;
    const BODY_CAP: usize = 64 * 1024 * 1024;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > HEAD_CAP {
            return Err(io::Error::other("request head too large"));
        }
        let n = stream.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next().unwrap_or("").split_whitespace();
    let method = start.next().unwrap_or("").to_owned();
    let path = start.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    if len > BODY_CAP {
        return Err(io::Error::other("request body too large"));
    }
    let mut body = buf.split_off(head_end + 4);
    while body.len() < len {
        let n = stream.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&tmp[..n]);
    }
    body.truncate(len);
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

async fn handle(mut stream: TcpStream, state: Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let Some(req) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let known = matches!(
        req.path.as_str(),
        "/chat/completions" | "/v1/chat/completions"
    );
    if req.method != "POST" || !known {
        let body = json!({ "error": { "message": format!(
            "scripted model server: no route for {} {}", req.method, req.path) } });
        return respond(&mut stream, 404, "application/json", &[], &body.to_string()).await;
    }
    let body: Value = serde_json::from_slice(&req.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&req.body).into_owned()));
    let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_owned();
    let (n, reply) = {
        let mut s = lock(&state);
        s.requests.push(RecordedRequest {
            method: req.method,
            path: req.path,
            headers: req.headers,
            body,
        });
        (s.requests.len(), s.script.pop_front())
    };
    let id = format!("chatcmpl-scripted-{n}");
    match reply {
        None => {
            let body = json!({ "error": { "message": format!(
                "scripted model server: the script has no reply left for request #{n}") } });
            respond(&mut stream, 410, "application/json", &[], &body.to_string()).await
        }
        Some(ScriptedReply::Hang) => std::future::pending().await,
        Some(ScriptedReply::Error {
            status,
            body,
            retry_after,
        }) => {
            let extra: Vec<(&str, String)> = retry_after
                .into_iter()
                .map(|v| ("Retry-After", v))
                .collect();
            respond(&mut stream, status, "application/json", &extra, &body).await
        }
        Some(ScriptedReply::Raw {
            status,
            content_type,
            body,
        }) => respond(&mut stream, status, &content_type, &[], &body).await,
        Some(ScriptedReply::Message(m)) if streaming => {
            stream_message(&mut stream, &id, &model, &m).await
        }
        Some(ScriptedReply::Message(m)) => {
            let body = completion_json(&id, &model, &m).to_string();
            respond(&mut stream, 200, "application/json", &[], &body).await
        }
    }
}

fn finish_reason(m: &ScriptedMessage) -> String {
    m.finish_reason.clone().unwrap_or_else(|| {
        if m.tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    })
}

fn completion_json(id: &str, model: &str, m: &ScriptedMessage) -> Value {
    let mut message = json!({ "role": "assistant", "content": m.content });
    if let Some(obj) = message.as_object_mut() {
        if let Some(r) = &m.reasoning {
            obj.insert("reasoning_content".into(), json!(r));
        }
        if !m.tool_calls.is_empty() {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({ "id": c.id, "type": "function",
                                 "function": { "name": c.name, "arguments": c.arguments } })
                })
                .collect();
            obj.insert("tool_calls".into(), Value::Array(calls));
        }
    }
    json!({
        "id": id, "object": "chat.completion", "created": 0, "model": model,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason(m) }],
    })
}

fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

async fn stream_message(
    stream: &mut TcpStream,
    id: &str,
    model: &str,
    m: &ScriptedMessage,
) -> io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    let chunk = |delta: Value, finish: Option<String>| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
    for p in pieces(m.reasoning.as_deref().unwrap_or(""), m.chunk_chars) {
        events.push(chunk(json!({ "reasoning_content": p }), None));
    }
    for p in pieces(&m.content, m.chunk_chars) {
        events.push(chunk(json!({ "content": p }), None));
    }
    for (i, c) in m.tool_calls.iter().enumerate() {
        // As OpenAI does: id and name first, then the arguments in pieces.
        events.push(chunk(
            json!({ "tool_calls": [{ "index": i, "id": c.id, "type": "function",
                                     "function": { "name": c.name, "arguments": "" } }] }),
            None,
        ));
        for p in pieces(&c.arguments, m.chunk_chars) {
            events.push(chunk(
                json!({ "tool_calls": [{ "index": i, "function": { "arguments": p } }] }),
                None,
            ));
        }
    }
    events.push(chunk(json!({}), Some(finish_reason(m))));
    for e in events {
        // Each event in two writes, so a client also sees lines cut mid-way.
        let text = format!("data: {e}\n\n");
        // Cut at a byte, not a char: a UTF-8 character may be split too.
        let (a, b) = text.as_bytes().split_at(text.len() / 2);
        stream.write_all(a).await?;
        stream.flush().await?;
        stream.write_all(b).await?;
        stream.flush().await?;
    }
    stream.write_all(b"data: [DONE]\n\n").await?;
    stream.flush().await?;
    stream.shutdown().await
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    extra: &[(&str, String)],
    body: &str,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    for (n, v) in extra {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}
