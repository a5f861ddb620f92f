//! The model client: OpenAI-compatible chat completions with tool calling and
//! streaming.
//!
//! One protocol covers DeepSeek (the default), OpenAI, and local servers such
//! as llama.cpp and Ollama. The base URL is the part before
//! `/chat/completions`: `https://api.deepseek.com`, `https://api.openai.com/v1`,
//! `http://127.0.0.1:11434/v1` (Ollama), `http://127.0.0.1:8080` (llama.cpp).
//!
//! What the client guarantees:
//! - every failure is a [`ModelError`] (HTTP status with the server's own
//!   message, timeout, malformed response, connection failure, missing key),
//!   never a panic;
//! - 429 and 5xx are retried with exponential backoff (the server's
//!   `Retry-After` seconds win when present, capped) up to
//!   [`ModelConfig::max_retries`] times; no other 4xx is retried;
//! - in thinking mode the `reasoning_content` of an assistant turn that made
//!   tool calls is sent back on later requests (DeepSeek rejects the request
//!   otherwise), and dropped from turns without tool calls (older DeepSeek
//!   reasoners reject it there).
//!
//! The tests drive the client against `stockade_testkit::scripted`, a
//! loopback server that replays a script; it is never part of a product
//! build.
#![forbid(unsafe_code)]

mod openai;
mod stream;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use openai::OpenAiCompatible;

/// A boxed, sendable future: the same type as `stockade_shell::BoxFuture`
/// (an alias, not a new type), so one `ModelClient` impl serves both
/// without this crate depending on the shell.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// DeepSeek's API, the default provider.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
pub const DEFAULT_MODEL: &str = "deepseek-chat";
pub const DEFAULT_API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// Long enough for a reasoning model's silence before its first token.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// Where the model is and how patient to be with it.
///
/// Deserializes from a table such as
/// `{ base_url = "...", model = "...", api_key_env = "...", timeout = 30, max_retries = 2 }`;
/// every field is optional and unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Everything before `/chat/completions` (a URL that already ends with
    /// it is used as is).
    pub base_url: String,
    pub model: String,
    /// The name of the environment variable holding the API key. Empty means
    /// "send no key" (local servers).
    pub api_key_env: String,
    /// The longest silence tolerated: until the response headers, and then
    /// between two chunks of a streamed body (a whole non-streamed body).
    /// A total deadline would cut off long but healthy generations. In
    /// configuration: a number of seconds (fractions allowed).
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    /// Retries after the first attempt, on 429 and 5xx only.
    pub max_retries: u32,
    /// Ask for a streamed (SSE) response. Off for servers whose streamed
    /// tool calls are broken; the client reads either answer regardless.
    pub stream: bool,
    /// The model takes images: prompts may attach them (sent as image
    /// content parts). Off by default; an image is then refused.
    pub images: bool,
}

impl ModelConfig {
    /// What the client would refuse, without building one or reading the
    /// key: the endpoint, the model name, the timeout. Only
    /// [`ModelError::Config`] comes back.
    pub fn check(&self) -> Result<(), ModelError> {
        openai::endpoint(&self.base_url)?;
        if self.model.trim().is_empty() {
            return Err(ModelError::Config {
                field: "model",
                reason: "is empty".into(),
            });
        }
        if self.timeout.is_zero() {
            return Err(ModelError::Config {
                field: "timeout",
                reason: "must be positive".into(),
            });
        }
        Ok(())
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.into(),
            model: DEFAULT_MODEL.into(),
            api_key_env: DEFAULT_API_KEY_ENV.into(),
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            stream: true,
            images: false,
        }
    }
}

mod duration_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        if !secs.is_finite() || secs <= 0.0 {
            return Err(D::Error::custom(format!(
                "timeout must be a positive number of seconds, got {secs}"
            )));
        }
        Duration::try_from_secs_f64(secs)
            .map_err(|e| D::Error::custom(format!("timeout {secs} seconds: {e}")))
    }
}

/// A tool the model may call: an agent tool's name, description and
/// argument schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON schema of the arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// The OpenAI `tools` entry.
    pub fn to_wire(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as a JSON text, verbatim (an empty text becomes `{}`).
    pub arguments: String,
}

impl ModelToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn to_wire(&self) -> Value {
        json!({
            "id": self.id,
            "type": "function",
            "function": { "name": self.name, "arguments": self.arguments },
        })
    }
}

impl From<stockade_session::ToolCall> for ModelToolCall {
    fn from(c: stockade_session::ToolCall) -> Self {
        Self {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        }
    }
}

impl From<ModelToolCall> for stockade_session::ToolCall {
    fn from(c: ModelToolCall) -> Self {
        Self {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        }
    }
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: String,
        /// Sent back as `reasoning_content` only when `tool_calls` is not
        /// empty (see the module docs).
        reasoning: Option<String>,
        tool_calls: Vec<ModelToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
    /// An image the user attached, sent as a user message of its own.
    UserImage {
        mime_type: String,
        data: String,
    },
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: content.into(),
            reasoning: None,
            tool_calls: Vec::new(),
        }
    }

    pub fn assistant_tool_calls(
        content: impl Into<String>,
        reasoning: Option<String>,
        tool_calls: Vec<ModelToolCall>,
    ) -> Self {
        Self::Assistant {
            content: content.into(),
            reasoning,
            tool_calls,
        }
    }

    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    pub fn role(&self) -> &'static str {
        match self {
            Self::System { .. } => "system",
            Self::User { .. } => "user",
            Self::Assistant { .. } => "assistant",
            Self::Tool { .. } => "tool",
            Self::UserImage { .. } => "user",
        }
    }

    /// The OpenAI wire form.
    pub fn to_wire(&self) -> Value {
        match self {
            Self::System { content } | Self::User { content } => {
                json!({ "role": self.role(), "content": content })
            }
            Self::Assistant {
                content,
                reasoning,
                tool_calls,
            } => {
                if tool_calls.is_empty() {
                    return json!({ "role": "assistant", "content": content });
                }
                // `null`, not "", beside tool calls: what OpenAI itself sends
                // and what strict local servers expect.
                let content = if content.is_empty() {
                    Value::Null
                } else {
                    Value::String(content.clone())
                };
                let mut m = json!({
                    "role": "assistant",
                    "content": content,
                    "tool_calls": tool_calls.iter().map(ModelToolCall::to_wire).collect::<Vec<_>>(),
                });
                if let (Some(r), Some(obj)) = (reasoning, m.as_object_mut()) {
                    obj.insert("reasoning_content".into(), Value::String(r.clone()));
                }
                m
            }
            Self::Tool {
                tool_call_id,
                content,
            } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
            // OpenAI's content-part form, which vision models take.
            Self::UserImage { mime_type, data } => json!({
                "role": "user",
                "content": [{
                    "type": "image_url",
                    "image_url": { "url": format!("data:{mime_type};base64,{data}") }
                }]
            }),
        }
    }
}

/// One complete model step.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelTurn {
    pub content: String,
    /// The thinking text, when the model produced any.
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ModelToolCall>,
    /// As the server said it (`stop`, `tool_calls`, `length`, ...).
    pub finish_reason: Option<String>,
}

impl ModelTurn {
    /// The assistant message that replays this turn on the next request.
    pub fn to_message(&self) -> ChatMessage {
        ChatMessage::Assistant {
            content: self.content.clone(),
            reasoning: self.reasoning.clone(),
            tool_calls: self.tool_calls.clone(),
        }
    }
}

impl From<ModelTurn> for ChatMessage {
    fn from(t: ModelTurn) -> Self {
        ChatMessage::Assistant {
            content: t.content,
            reasoning: t.reasoning,
            tool_calls: t.tool_calls,
        }
    }
}

/// Text as it streams, for the UI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Content(String),
    Reasoning(String),
}

/// Why a model step failed. Every variant names the endpoint it was talking
/// to, so the message is actionable on its own in a session log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("the model API key environment variable {var} is not set or is empty")]
    MissingApiKey { var: String },
    #[error("model configuration: {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("model server {url} answered HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        url: String,
        status: u16,
        /// The server's own error message when its body had one, else the
        /// body (shortened), else the status's reason phrase.
        message: String,
        attempts: u32,
    },
    #[error("model server {url} sent nothing for {after:?} while waiting for {waiting_for}")]
    Timeout {
        url: String,
        after: Duration,
        waiting_for: &'static str,
    },
    #[error("model server {url}: connection failed: {reason}")]
    Connection { url: String, reason: String },
    #[error("model server {url} sent a malformed response: {what}")]
    Malformed { url: String, what: String },
    /// An error object inside a successful (200) response, e.g. mid-stream.
    #[error("model server {url} reported an error: {message}")]
    Api { url: String, message: String },
}

/// A chat-completions backend.
pub trait ModelClient: Send + Sync {
    /// One model step. `on_delta` receives text as it streams (for the UI); the
    /// returned turn is complete. Dropping the future cancels the request.
    fn complete<'a>(
        &'a self,
        messages: &'a [ChatMessage],
        tools: &'a [ToolSpec],
        on_delta: &'a (dyn Fn(Delta) + Send + Sync),
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>>;
}
