//! Reading the server's answer: the SSE framing, the streamed deltas (tool
//! calls assembled by index), the plain JSON completion, and error bodies.
//! No I/O here, so every split of the byte stream can be unit-tested.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{Delta, ModelToolCall, ModelTurn};

/// What went wrong while reading, before the endpoint is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    Malformed(String),
    Api(String),
}

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseEvent {
    Data(String),
    /// An `error:` field: llama.cpp reports mid-stream failures this way.
    Error(String),
}

/// Splits a byte stream into SSE events. Lines are decoded only once
/// complete, so a UTF-8 character split across network chunks is fine.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    data: Option<String>,
    error: Option<String>,
    line_no: usize,
    pub(crate) saw_data: bool,
}

impl SseParser {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, Fault> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&line, &mut out)?;
        }
        Ok(out)
    }

    /// The end of the body: an unterminated last line and a pending event
    /// still count (some servers close without the final blank line).
    pub(crate) fn finish(&mut self) -> Result<Vec<SseEvent>, Fault> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        if !rest.is_empty() {
            self.line(&rest, &mut out)?;
        }
        self.dispatch(&mut out);
        Ok(out)
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if let Some(d) = self.data.take() {
            out.push(SseEvent::Data(d));
        }
        if let Some(e) = self.error.take() {
            out.push(SseEvent::Error(e));
        }
    }

    fn line(&mut self, raw: &[u8], out: &mut Vec<SseEvent>) -> Result<(), Fault> {
        self.line_no += 1;
        let line = std::str::from_utf8(raw).map_err(|e| {
            Fault::Malformed(format!("SSE line {} is not UTF-8: {e}", self.line_no))
        })?;
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.saw_data = true;
                append(&mut self.data, value);
            }
            "error" => append(&mut self.error, value),
            "event" | "id" | "retry" => {}
            // The spec would ignore it; an OpenAI-compatible server never
            // sends one, so it is far likelier a broken body (an HTML error
            // page, a proxy's banner) than an extension: say so.
            _ => {
                return Err(Fault::Malformed(format!(
                    "SSE line {} is not a data line: {}",
                    self.line_no,
                    excerpt(line)
                )));
            }
        }
        Ok(())
    }
}

fn append(slot: &mut Option<String>, value: &str) {
    match slot {
        Some(s) => {
            s.push('\n');
            s.push_str(value);
        }
        None => *slot = Some(value.to_owned()),
    }
}

/// At most 200 characters of `s`, for error messages.
pub(crate) fn shorten(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// [`shorten`], quoted and escaped: for snippets of a broken body.
pub(crate) fn excerpt(s: &str) -> String {
    format!("{:?}", shorten(s))
}

#[derive(Deserialize)]
struct ChunkWire {
    #[serde(default)]
    choices: Vec<ChoiceDeltaWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChoiceDeltaWire {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<DeltaWire>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct DeltaWire {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// Ollama's and OpenRouter's name for the same thing.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDeltaWire>>,
}

#[derive(Deserialize)]
struct ToolCallDeltaWire {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDeltaWire>,
}

#[derive(Deserialize)]
struct FunctionDeltaWire {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The most tool calls one turn may hold, so the highest index a server may
/// give one is `MAX_TOOL_CALLS - 1`. Indices come from the server: a huge one
/// (`u32::MAX`, `usize::MAX`) is a broken or hostile stream, refused as a
/// stream error rather than used in arithmetic or as a size.
pub(crate) const MAX_TOOL_CALLS: usize = 1024;

fn index_out_of_range(index: impl std::fmt::Display) -> Fault {
    Fault::Malformed(format!(
        "tool call index {index} is out of range: a turn holds at most {MAX_TOOL_CALLS} calls, indexed from 0"
    ))
}

/// Whether the stream said it is over.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    Done,
}

/// Builds a [`ModelTurn`] from streamed chunks.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    content: String,
    reasoning: Option<String>,
    calls: BTreeMap<usize, PartialCall>,
    last_index: Option<usize>,
    finish_reason: Option<String>,
}

impl Assembler {
    pub(crate) fn event(
        &mut self,
        event: SseEvent,
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<Flow, Fault> {
        let data = match event {
            SseEvent::Error(e) => return Err(Fault::Api(error_text(&e))),
            SseEvent::Data(d) => d,
        };
        if data.trim() == "[DONE]" {
            return Ok(Flow::Done);
        }
        let chunk: ChunkWire = serde_json::from_str(&data).map_err(|e| {
            Fault::Malformed(format!(
                "SSE data is not a completion chunk ({e}): {}",
                excerpt(&data)
            ))
        })?;
        if let Some(err) = chunk.error {
            return Err(Fault::Api(error_value_message(&err)));
        }
        // n = 1 is all we ask for; a second choice would be a server bug.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(d) = choice.delta {
                self.delta(d, on_delta)?;
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(Flow::More)
    }

    fn delta(
        &mut self,
        d: DeltaWire,
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<(), Fault> {
        if let Some(r) = d
            .reasoning_content
            .or(d.reasoning)
            .filter(|r| !r.is_empty())
        {
            self.reasoning.get_or_insert_with(String::new).push_str(&r);
            on_delta(Delta::Reasoning(r));
        }
        if let Some(c) = d.content.filter(|c| !c.is_empty()) {
            self.content.push_str(&c);
            on_delta(Delta::Content(c));
        }
        for tc in d.tool_calls.unwrap_or_default() {
            let index = match tc.index {
                Some(i) => i,
                // No index (some local servers with one call per chunk): a
                // new id opens the next call, anything else continues the
                // last one.
                None => match (&tc.id, self.last_index) {
                    (Some(id), Some(last))
                        if !id.is_empty() && self.calls.get(&last).is_some_and(|c| c.id != *id) =>
                    {
                        // `last` passed the bound below, so this cannot
                        // wrap; saturating keeps that true if it changes.
                        last.saturating_add(1)
                    }
                    (_, Some(last)) => last,
                    (_, None) => 0,
                },
            };
            if index >= MAX_TOOL_CALLS {
                return Err(index_out_of_range(index));
            }
            self.last_index = Some(index);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = tc.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            if let Some(f) = tc.function {
                if let Some(name) = f.name.filter(|n| !n.is_empty()) {
                    // Servers that repeat the whole name on every chunk are
                    // told apart from ones that split it.
                    if call.name != name {
                        call.name.push_str(&name);
                    }
                }
                if let Some(a) = f.arguments {
                    call.arguments.push_str(&a);
                }
            }
        }
        Ok(())
    }

    /// The turn, after `[DONE]` or the end of the body.
    pub(crate) fn finish(self, saw_done: bool) -> Result<ModelTurn, Fault> {
        if !saw_done && self.finish_reason.is_none() {
            return Err(Fault::Malformed(
                "the stream ended before [DONE] or a finish_reason (truncated response)".into(),
            ));
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, c) in self.calls {
            tool_calls.push(finish_call(index, c.id, c.name, c.arguments)?);
        }
        Ok(ModelTurn {
            content: self.content,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason: self.finish_reason,
        })
    }
}

fn finish_call(
    index: usize,
    id: String,
    name: String,
    arguments: String,
) -> Result<ModelToolCall, Fault> {
    if name.is_empty() {
        return Err(Fault::Malformed(format!(
            "tool call #{index} has no function name"
        )));
    }
    Ok(ModelToolCall {
        // The id only pairs a result with its call; a server that omits it
        // still gets a stable, unique one.
        id: if id.is_empty() {
            format!("call_{index}")
        } else {
            id
        },
        name,
        arguments: if arguments.trim().is_empty() {
            "{}".into()
        } else {
            arguments
        },
    })
}

#[derive(Deserialize)]
struct CompletionWire {
    #[serde(default)]
    choices: Vec<ChoiceWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChoiceWire {
    #[serde(default)]
    index: u32,
    message: MessageWire,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct MessageWire {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallWire>>,
}

#[derive(Deserialize)]
struct ToolCallWire {
    #[serde(default)]
    id: Option<String>,
    function: FunctionWire,
}

#[derive(Deserialize)]
struct FunctionWire {
    #[serde(default)]
    name: String,
    /// A JSON text per the spec; some local servers send the object itself.
    #[serde(default)]
    arguments: Value,
}

/// A whole (non-streamed) completion.
pub(crate) fn parse_completion(
    body: &[u8],
    on_delta: &(dyn Fn(Delta) + Send + Sync),
) -> Result<ModelTurn, Fault> {
    let text = String::from_utf8_lossy(body);
    let wire: CompletionWire = serde_json::from_slice(body).map_err(|e| {
        Fault::Malformed(format!(
            "the body is not a chat completion ({e}): {}",
            excerpt(&text)
        ))
    })?;
    if let Some(err) = wire.error {
        return Err(Fault::Api(error_value_message(&err)));
    }
    let Some(choice) = wire.choices.into_iter().find(|c| c.index == 0) else {
        return Err(Fault::Malformed(format!(
            "the completion has no choice 0: {}",
            excerpt(&text)
        )));
    };
    let m = choice.message;
    let reasoning = m
        .reasoning_content
        .or(m.reasoning)
        .filter(|r| !r.is_empty());
    let content = m.content.unwrap_or_default();
    // The UI sees the text once, whole, as if it had streamed in one piece.
    if let Some(r) = &reasoning {
        on_delta(Delta::Reasoning(r.clone()));
    }
    if !content.is_empty() {
        on_delta(Delta::Content(content.clone()));
    }
    let calls = m.tool_calls.unwrap_or_default();
    if calls.len() > MAX_TOOL_CALLS {
        return Err(index_out_of_range(calls.len() - 1));
    }
    let mut tool_calls = Vec::with_capacity(calls.len());
    for (index, c) in calls.into_iter().enumerate() {
        let arguments = match c.function.arguments {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        tool_calls.push(finish_call(
            index,
            c.id.unwrap_or_default(),
            c.function.name,
            arguments,
        )?);
    }
    Ok(ModelTurn {
        content,
        reasoning,
        tool_calls,
        finish_reason: choice.finish_reason,
    })
}

/// The human message of an error body: `{"error":{"message":..}}` (OpenAI,
/// DeepSeek), `{"error":".."}` (llama.cpp, Ollama), `{"message":..}`,
/// `{"detail":..}`; else the body itself, shortened.
pub(crate) fn error_text(body: &str) -> String {
    let trimmed = body.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        if let Some(err) = v.get("error") {
            return error_value_message(err);
        }
        for key in ["message", "detail"] {
            if let Some(s) = v.get(key).and_then(Value::as_str) {
                return s.to_owned();
            }
        }
    }
    shorten(trimmed)
}

fn error_value_message(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("message").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => err.to_string(),
        },
        other => other.to_string(),
    }
}
