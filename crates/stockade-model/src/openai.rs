//! The OpenAI-compatible HTTP client.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};

use super::stream::{self, Assembler, Fault, Flow, SseParser};
use super::{
    BoxFuture, ChatMessage, Delta, ModelClient, ModelConfig, ModelError, ModelTurn, ToolSpec,
};

/// The first retry waits this long, each later one twice the previous.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A server asking for longer is still retried after this: a session that
/// waits minutes without a word looks hung.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// An error body is for a message; more than this is not read.
const ERROR_BODY_CAP: usize = 64 * 1024;
/// A whole (non-streamed) completion larger than this is refused.
const BODY_CAP: usize = 32 * 1024 * 1024;

/// A chat-completions client for DeepSeek, OpenAI, llama.cpp, Ollama and
/// anything else that speaks that protocol.
pub struct OpenAiCompatible {
    http: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    max_retries: u32,
    stream: bool,
    backoff_base: Duration,
}

impl std::fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key: Debug output ends up in logs.
        f.debug_struct("OpenAiCompatible")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("stream", &self.stream)
            .finish()
    }
}

impl OpenAiCompatible {
    /// Reads the key from the environment variable the config names, now, so
    /// a missing key fails at composition rather than mid-conversation. An
    /// empty `api_key_env` sends no key.
    pub fn new(cfg: ModelConfig) -> Result<Self, ModelError> {
        // A bad endpoint is named even when the key is missing too.
        cfg.check()?;
        let key = if cfg.api_key_env.is_empty() {
            None
        } else {
            match std::env::var(&cfg.api_key_env) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_owned()),
                _ => {
                    return Err(ModelError::MissingApiKey {
                        var: cfg.api_key_env,
                    });
                }
            }
        };
        Self::with_api_key(cfg, key)
    }

    /// Like [`Self::new`] with the key given (or none), the environment
    /// untouched.
    pub fn with_api_key(cfg: ModelConfig, api_key: Option<String>) -> Result<Self, ModelError> {
        cfg.check()?;
        let (url, loopback) = endpoint(&cfg.base_url)?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(cfg.timeout)
            .user_agent(concat!("stockade/", env!("CARGO_PKG_VERSION")));
        if loopback {
            // A proxy from HTTP(S)_PROXY cannot reach this machine's own
            // llama.cpp or Ollama (nor a test's scripted server), and
            // reqwest does not exempt loopback by itself.
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(|e| ModelError::Config {
            field: "base_url",
            reason: format!("cannot build the HTTP client: {}", chain(&e)),
        })?;
        Ok(Self {
            http,
            url,
            model: cfg.model,
            api_key,
            timeout: cfg.timeout,
            max_retries: cfg.max_retries,
            stream: cfg.stream,
            backoff_base: BACKOFF_BASE,
        })
    }

    /// The wait before the first retry (doubled for each later one). For
    /// tests, which cannot afford real backoff.
    pub fn with_backoff_base(mut self, base: Duration) -> Self {
        self.backoff_base = base;
        self
    }

    /// The full chat-completions URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.url
    }

    fn request_body(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": messages.iter().map(ChatMessage::to_wire).collect::<Vec<_>>(),
            "stream": self.stream,
        });
        // OpenAI rejects `"tools": []`; absent means the same thing.
        if let (false, Some(obj)) = (tools.is_empty(), body.as_object_mut()) {
            obj.insert(
                "tools".into(),
                Value::Array(tools.iter().map(ToolSpec::to_wire).collect()),
            );
        }
        body
    }

    async fn run(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<ModelTurn, ModelError> {
        let body = self.request_body(messages, tools).to_string();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let resp = self.send(body.clone()).await?;
            let status = resp.status();
            if status.is_success() {
                return self.read_turn(resp, on_delta).await;
            }
            let retry_after = retry_after(resp.headers());
            let message = self.error_message(resp, status).await;
            let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
            if retryable && attempts <= self.max_retries {
                let wait = retry_after.unwrap_or_else(|| backoff(self.backoff_base, attempts));
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(ModelError::Http {
                url: self.url.clone(),
                status: status.as_u16(),
                message,
                attempts,
            });
        }
    }

    async fn send(&self, body: String) -> Result<reqwest::Response, ModelError> {
        let accept = if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut req = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        match tokio::time::timeout(self.timeout, req.send()).await {
            Err(_) => Err(self.timed_out("the response headers")),
            Ok(Err(e)) => Err(self.transport(&e, "the response headers")),
            Ok(Ok(r)) => Ok(r),
        }
    }

    async fn read_turn(
        &self,
        mut resp: reqwest::Response,
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<ModelTurn, ModelError> {
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        // Decided by what came, not what was asked: some servers ignore
        // `stream`, and a JSON answer to a streamed request is still valid.
        if content_type.starts_with("application/json") {
            let body = self.read_body(resp, BODY_CAP).await?;
            return stream::parse_completion(&body, on_delta).map_err(|f| self.fault(f));
        }
        let mut parser = SseParser::default();
        let mut turn = Assembler::default();
        loop {
            let chunk = match tokio::time::timeout(self.timeout, resp.chunk()).await {
                Err(_) => return Err(self.timed_out("the next stream chunk")),
                Ok(Err(e)) => return Err(self.transport(&e, "the next stream chunk")),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(c))) => c,
            };
            for event in parser.push(&chunk).map_err(|f| self.fault(f))? {
                if turn.event(event, on_delta).map_err(|f| self.fault(f))? == Flow::Done {
                    // Not waiting for the close: a server may keep the
                    // connection open after [DONE].
                    return turn.finish(true).map_err(|f| self.fault(f));
                }
            }
        }
        for event in parser.finish().map_err(|f| self.fault(f))? {
            if turn.event(event, on_delta).map_err(|f| self.fault(f))? == Flow::Done {
                return turn.finish(true).map_err(|f| self.fault(f));
            }
        }
        if !parser.saw_data {
            return Err(self.fault(Fault::Malformed(format!(
                "a 200 response with no SSE data lines (content-type {content_type:?})"
            ))));
        }
        turn.finish(false).map_err(|f| self.fault(f))
    }

    /// The whole body, each chunk under the idle timeout, at most `cap` bytes.
    async fn read_body(
        &self,
        mut resp: reqwest::Response,
        cap: usize,
    ) -> Result<Vec<u8>, ModelError> {
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout(self.timeout, resp.chunk()).await {
                Err(_) => return Err(self.timed_out("the response body")),
                Ok(Err(e)) => return Err(self.transport(&e, "the response body")),
                Ok(Ok(None)) => return Ok(body),
                Ok(Ok(Some(c))) => {
                    if body.len() + c.len() > cap {
                        return Err(self.fault(Fault::Malformed(format!(
                            "the response body exceeds {cap} bytes"
                        ))));
                    }
                    body.extend_from_slice(&c);
                }
            }
        }
    }

    /// The server's message for a failed status. A body that cannot be read
    /// still leaves the status, which is the essential part.
    async fn error_message(&self, resp: reqwest::Response, status: StatusCode) -> String {
        let body = match self.read_body(resp, ERROR_BODY_CAP).await {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => return format!("(the error body could not be read: {e})"),
        };
        let text = stream::error_text(&body);
        if text.is_empty() {
            status.canonical_reason().unwrap_or("no message").to_owned()
        } else {
            text
        }
    }

    fn timed_out(&self, waiting_for: &'static str) -> ModelError {
        ModelError::Timeout {
            url: self.url.clone(),
            after: self.timeout,
            waiting_for,
        }
    }

    fn transport(&self, e: &reqwest::Error, waiting_for: &'static str) -> ModelError {
        if e.is_timeout() {
            return self.timed_out(waiting_for);
        }
        ModelError::Connection {
            url: self.url.clone(),
            reason: chain(e),
        }
    }

    fn fault(&self, f: Fault) -> ModelError {
        match f {
            Fault::Malformed(what) => ModelError::Malformed {
                url: self.url.clone(),
                what,
            },
            Fault::Api(message) => ModelError::Api {
                url: self.url.clone(),
                message,
            },
        }
    }
}

impl ModelClient for OpenAiCompatible {
    fn complete<'a>(
        &'a self,
        messages: &'a [ChatMessage],
        tools: &'a [ToolSpec],
        on_delta: &'a (dyn Fn(Delta) + Send + Sync),
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        Box::pin(self.run(messages, tools, on_delta))
    }
}

/// `base_url` + `/chat/completions`, unless it already ends so, and whether
/// it points at this machine.
pub(crate) fn endpoint(base_url: &str) -> Result<(String, bool), ModelError> {
    let base = base_url.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(base).map_err(|e| ModelError::Config {
        field: "base_url",
        reason: format!("{base_url:?} is not a URL: {e}"),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ModelError::Config {
            field: "base_url",
            reason: format!("{base_url:?}: the scheme must be http or https"),
        });
    }
    let host = parsed.host_str().unwrap_or("");
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let url = if base.ends_with("/chat/completions") {
        base.to_owned()
    } else {
        format!("{base}/chat/completions")
    };
    Ok((url, loopback))
}

/// `Retry-After` in seconds (the HTTP-date form falls back to backoff),
/// capped.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let secs: f64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).ok()?.min(RETRY_AFTER_CAP))
}

/// `base * 2^(attempt-1)`, capped, plus up to 25% jitter so that sessions
/// throttled together do not retry together.
fn backoff(base: Duration, attempt: u32) -> Duration {
    let exp = base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
        .min(BACKOFF_CAP);
    // Clock nanoseconds are random enough for spreading retries; a CSPRNG
    // would be a dependency for nothing.
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    exp + exp.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

/// The error and its sources: reqwest's own text ("error sending request")
/// hides the cause (refused, DNS, TLS).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn endpoint_joins_and_validates() {
        assert_eq!(
            endpoint("https://api.deepseek.com").unwrap(),
            ("https://api.deepseek.com/chat/completions".into(), false)
        );
        assert_eq!(
            endpoint("http://127.0.0.1:11434/v1/").unwrap(),
            ("http://127.0.0.1:11434/v1/chat/completions".into(), true)
        );
        assert_eq!(
            endpoint("http://h/v1/chat/completions").unwrap(),
            ("http://h/v1/chat/completions".into(), false)
        );
        assert!(endpoint("http://localhost:8080").unwrap().1);
        assert!(endpoint("http://[::1]:8080").unwrap().1);
        assert!(!endpoint("http://10.0.0.1:8080").unwrap().1);
        assert!(matches!(
            endpoint("api.deepseek.com"),
            Err(ModelError::Config {
                field: "base_url",
                ..
            })
        ));
        assert!(matches!(
            endpoint("ftp://h"),
            Err(ModelError::Config {
                field: "base_url",
                ..
            })
        ));
    }

    #[test]
    fn retry_after_is_seconds_and_capped() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(RETRY_AFTER, "0.25".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert(RETRY_AFTER, "86400".parse().unwrap());
        assert_eq!(retry_after(&h), Some(RETRY_AFTER_CAP));
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn backoff_doubles_with_bounded_jitter() {
        let base = Duration::from_millis(100);
        for attempt in 1..=4u32 {
            let d = backoff(base, attempt);
            let exp = base * (1 << (attempt - 1));
            assert!(d >= exp && d <= exp + exp / 4, "{attempt}: {d:?}");
        }
        assert!(backoff(base, 40) <= BACKOFF_CAP + BACKOFF_CAP / 4);
    }
}
