//! The client against the scripted server on loopback (no network).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use stockade_model::{
    ChatMessage, Delta, ModelClient, ModelConfig, ModelError, ModelToolCall, ModelTurn,
    OpenAiCompatible, ToolSpec,
};
use stockade_testkit::scripted::{ScriptedReply, ScriptedServer};

const KEY: &str = "sk-test-123";

fn config(server: &ScriptedServer) -> ModelConfig {
    ModelConfig {
        base_url: server.base_url(),
        model: "deepseek-chat".into(),
        api_key_env: String::new(),
        timeout: Duration::from_secs(10),
        max_retries: 2,
        stream: true,
        images: false,
    }
}

fn client(cfg: ModelConfig) -> OpenAiCompatible {
    OpenAiCompatible::with_api_key(cfg, Some(KEY.into()))
        .unwrap()
        .with_backoff_base(Duration::from_millis(5))
}

fn bash_spec() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: "Run a command".into(),
        parameters: json!({
            "type": "object",
            "properties": { "command": { "type": "string" } },
            "required": ["command"],
        }),
    }
}

/// Collects what `on_delta` saw.
#[derive(Default)]
struct Deltas(Mutex<Vec<Delta>>);

impl Deltas {
    fn sink(&self) -> impl Fn(Delta) + Send + Sync + '_ {
        |d| self.0.lock().unwrap().push(d)
    }
    fn content(&self) -> String {
        self.all()
            .into_iter()
            .filter_map(|d| match d {
                Delta::Content(c) => Some(c),
                Delta::Reasoning(_) => None,
            })
            .collect()
    }
    fn reasoning(&self) -> String {
        self.all()
            .into_iter()
            .filter_map(|d| match d {
                Delta::Reasoning(r) => Some(r),
                Delta::Content(_) => None,
            })
            .collect()
    }
    fn all(&self) -> Vec<Delta> {
        self.0.lock().unwrap().clone()
    }
}

async fn ask(c: &OpenAiCompatible, messages: &[ChatMessage]) -> Result<ModelTurn, ModelError> {
    c.complete(messages, &[bash_spec()], &|_| {}).await
}

#[tokio::test]
async fn model_streams_text_in_pieces() {
    let server =
        ScriptedServer::start(vec![ScriptedReply::text("Hello, streaming wörld!")]).unwrap();
    let c = client(config(&server));
    let deltas = Deltas::default();
    let sink = deltas.sink();
    let turn = c
        .complete(&[ChatMessage::user("hi")], &[], &sink)
        .await
        .unwrap();
    assert_eq!(turn.content, "Hello, streaming wörld!");
    assert_eq!(turn.reasoning, None);
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.finish_reason.as_deref(), Some("stop"));
    assert_eq!(deltas.content(), turn.content);
    assert!(
        deltas.all().len() > 3,
        "streamed in pieces: {:?}",
        deltas.all()
    );
    // No tools given: no `tools` key at all (OpenAI rejects an empty list).
    assert!(server.requests()[0].get("tools").is_none());
}

#[tokio::test]
async fn model_streamed_tool_calls_are_assembled_by_index() {
    let calls = vec![
        ModelToolCall::new("call_a", "bash", r#"{"command":"echo one > a.txt"}"#),
        ModelToolCall::new(
            "call_b",
            "write_file",
            r#"{"path":"b.txt","content":"ünïcode"}"#,
        ),
    ];
    let server = ScriptedServer::start(vec![ScriptedReply::tool_calls(
        "Running two.",
        calls.clone(),
    )])
    .unwrap();
    let c = client(config(&server));
    let turn = ask(&c, &[ChatMessage::user("go")]).await.unwrap();
    assert_eq!(turn.tool_calls, calls);
    assert_eq!(turn.content, "Running two.");
    assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn model_interleaved_tool_call_deltas_are_assembled_by_index() {
    // Index 1 opens before index 0's arguments are complete; pieces of both
    // arrive interleaved, and one chunk carries deltas for both.
    let chunk = |tc: Value| {
        format!(
            "data: {}\n\n",
            json!({ "choices": [{ "index": 0, "delta": { "tool_calls": tc }, "finish_reason": null }] })
        )
    };
    let body = [
        chunk(json!([{ "index": 0, "id": "c0", "type": "function", "function": { "name": "bash", "arguments": "" } }])),
        chunk(json!([{ "index": 1, "id": "c1", "type": "function", "function": { "name": "read_file", "arguments": "{\"pa" } }])),
        chunk(json!([{ "index": 0, "function": { "arguments": "{\"command\":" } }])),
        chunk(json!([{ "index": 1, "function": { "arguments": "th\":\"x\"}" } },
                     { "index": 0, "function": { "arguments": "\"ls\"}" } }])),
        format!("data: {}\n\n", json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] })),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server = ScriptedServer::start(vec![ScriptedReply::raw_sse(body)]).unwrap();
    let turn = ask(&client(config(&server)), &[ChatMessage::user("go")])
        .await
        .unwrap();
    assert_eq!(
        turn.tool_calls,
        vec![
            ModelToolCall::new("c0", "bash", r#"{"command":"ls"}"#),
            ModelToolCall::new("c1", "read_file", r#"{"path":"x"}"#),
        ]
    );
}

#[tokio::test]
async fn model_non_streaming_json() {
    let calls = vec![ModelToolCall::new("call_1", "bash", r#"{"command":"pwd"}"#)];
    let server = ScriptedServer::start(vec![
        ScriptedReply::tool_calls("Let me look.", calls.clone()).with_reasoning("think"),
    ])
    .unwrap();
    let c = client(ModelConfig {
        stream: false,
        ..config(&server)
    });
    let deltas = Deltas::default();
    let sink = deltas.sink();
    let turn = c
        .complete(&[ChatMessage::user("where?")], &[bash_spec()], &sink)
        .await
        .unwrap();
    assert_eq!(turn.content, "Let me look.");
    assert_eq!(turn.reasoning.as_deref(), Some("think"));
    assert_eq!(turn.tool_calls, calls);
    assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
    // The UI still gets the text, once.
    assert_eq!(
        deltas.all(),
        vec![
            Delta::Reasoning("think".into()),
            Delta::Content("Let me look.".into())
        ]
    );
    let rec = &server.recorded()[0];
    assert_eq!(rec.body["stream"], json!(false));
    assert_eq!(rec.header("accept"), Some("application/json"));
}

#[tokio::test]
async fn model_reasoning_content_round_trips_on_tool_call_turns() {
    let calls = vec![ModelToolCall::new("call_1", "bash", r#"{"command":"ls"}"#)];
    let server = ScriptedServer::start(vec![
        ScriptedReply::tool_calls("", calls.clone()).with_reasoning("I should list files."),
        ScriptedReply::text("Done.").with_reasoning("The listing is empty."),
        ScriptedReply::text("Bye."),
    ])
    .unwrap();
    let c = client(config(&server));
    let deltas = Deltas::default();
    let sink = deltas.sink();

    let mut messages = vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("list"),
    ];
    let t1 = c.complete(&messages, &[bash_spec()], &sink).await.unwrap();
    assert_eq!(t1.reasoning.as_deref(), Some("I should list files."));
    assert_eq!(deltas.reasoning(), "I should list files.");
    assert_eq!(t1.tool_calls, calls);
    messages.push(t1.to_message());
    messages.push(ChatMessage::tool("call_1", "(empty)"));

    let t2 = c.complete(&messages, &[bash_spec()], &sink).await.unwrap();
    assert_eq!(t2.content, "Done.");
    messages.push(t2.into());
    messages.push(ChatMessage::user("thanks"));
    c.complete(&messages, &[bash_spec()], &sink).await.unwrap();

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    // The tool-call turn goes back with its reasoning, in OpenAI's shape.
    assert_eq!(
        reqs[1]["messages"][2],
        json!({
            "role": "assistant",
            "content": null,
            "reasoning_content": "I should list files.",
            "tool_calls": [{ "id": "call_1", "type": "function",
                             "function": { "name": "bash", "arguments": "{\"command\":\"ls\"}" } }],
        })
    );
    assert_eq!(
        reqs[1]["messages"][3],
        json!({ "role": "tool", "tool_call_id": "call_1", "content": "(empty)" })
    );
    // The turn without tool calls does not carry it; the earlier one still does.
    assert_eq!(
        reqs[2]["messages"][4],
        json!({ "role": "assistant", "content": "Done." })
    );
    assert_eq!(
        reqs[2]["messages"][2]["reasoning_content"],
        json!("I should list files.")
    );
}

#[tokio::test]
async fn model_429_is_retried_after_retry_after() {
    let server = ScriptedServer::start(vec![
        ScriptedReply::error(429, "rate limited").with_retry_after("1"),
        ScriptedReply::text("ok"),
    ])
    .unwrap();
    let c = client(config(&server));
    let started = Instant::now();
    let turn = ask(&c, &[ChatMessage::user("hi")]).await.unwrap();
    assert_eq!(turn.content, "ok");
    assert_eq!(server.requests().len(), 2);
    // Retry-After (1 s) won over the 5 ms backoff.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn model_500_exhausts_retries_after_exactly_max_retries_plus_one() {
    let max_retries = 2;
    let mut script = vec![ScriptedReply::error(500, "upstream exploded"); max_retries + 1];
    script.push(ScriptedReply::text("never reached"));
    let server = ScriptedServer::start(script).unwrap();
    let c = client(ModelConfig {
        max_retries: max_retries as u32,
        ..config(&server)
    });
    let err = ask(&c, &[ChatMessage::user("hi")]).await.unwrap_err();
    match &err {
        ModelError::Http {
            status,
            message,
            attempts,
            ..
        } => {
            assert_eq!(*status, 500);
            assert_eq!(message, "upstream exploded");
            assert_eq!(*attempts, 3);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), max_retries + 1);
    assert_eq!(server.remaining(), 1);
    assert!(err.to_string().contains("HTTP 500"), "{err}");
}

#[tokio::test]
async fn model_400_is_not_retried_and_carries_the_servers_message() {
    let server = ScriptedServer::start(vec![
        ScriptedReply::error(
            400,
            "Missing `reasoning_content` field in the assistant message",
        ),
        ScriptedReply::text("never reached"),
    ])
    .unwrap();
    let c = client(ModelConfig {
        max_retries: 5,
        ..config(&server)
    });
    let err = ask(&c, &[ChatMessage::user("hi")]).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 400, attempts: 1, message, .. }
            if message == "Missing `reasoning_content` field in the assistant message"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("Missing `reasoning_content`"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn model_malformed_sse_is_a_clear_error() {
    let good = json!({ "choices": [{ "index": 0, "delta": { "content": "par" } }] });
    let server = ScriptedServer::start(vec![
        ScriptedReply::raw_sse(format!("data: {good}\n\ndata: {{not json\n\n")),
        ScriptedReply::raw_sse(format!("data: {good}\n\n<html>Bad gateway</html>\n")),
        ScriptedReply::raw_sse(format!("data: {good}\n\n")),
    ])
    .unwrap();
    let c = client(config(&server));
    let e1 = ask(&c, &[ChatMessage::user("1")]).await.unwrap_err();
    assert!(
        matches!(&e1, ModelError::Malformed { what, .. } if what.contains("{not json")),
        "{e1:?}"
    );
    assert!(e1.to_string().contains("malformed response"), "{e1}");
    let e2 = ask(&c, &[ChatMessage::user("2")]).await.unwrap_err();
    assert!(
        matches!(&e2, ModelError::Malformed { what, .. } if what.contains("<html>Bad gateway")),
        "{e2:?}"
    );
    // Cut off: neither a finish_reason nor [DONE].
    let e3 = ask(&c, &[ChatMessage::user("3")]).await.unwrap_err();
    assert!(
        matches!(&e3, ModelError::Malformed { what, .. } if what.contains("truncated")),
        "{e3:?}"
    );
    // Malformed is not retried.
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn model_mid_stream_error_object_is_an_api_error() {
    let server = ScriptedServer::start(vec![
        ScriptedReply::raw_sse("data: {\"error\":{\"message\":\"context too long\"}}\n\n"),
        ScriptedReply::raw_sse("error: {\"code\":500,\"message\":\"slot unavailable\"}\n\n"),
    ])
    .unwrap();
    let c = client(config(&server));
    let e = ask(&c, &[ChatMessage::user("1")]).await.unwrap_err();
    assert!(
        matches!(&e, ModelError::Api { message, .. } if message == "context too long"),
        "{e:?}"
    );
    let e = ask(&c, &[ChatMessage::user("2")]).await.unwrap_err();
    assert!(
        matches!(&e, ModelError::Api { message, .. } if message == "slot unavailable"),
        "{e:?}"
    );
}

#[tokio::test]
async fn model_silent_server_times_out() {
    let server = ScriptedServer::start(vec![ScriptedReply::Hang]).unwrap();
    let c = client(ModelConfig {
        timeout: Duration::from_millis(300),
        ..config(&server)
    });
    let started = Instant::now();
    let err = ask(&c, &[ChatMessage::user("hi")]).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Timeout { after, waiting_for: "the response headers", .. }
            if *after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.requests().len(), 1, "timeouts are not retried");
}

#[tokio::test]
async fn model_refused_connection_is_a_connection_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = client(ModelConfig {
        base_url: format!("http://127.0.0.1:{port}"),
        model: "m".into(),
        ..ModelConfig::default()
    });
    let err = ask(&c, &[ChatMessage::user("hi")]).await.unwrap_err();
    assert!(matches!(err, ModelError::Connection { .. }), "{err:?}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
}

#[test]
fn model_missing_api_key_names_the_variable() {
    let var = "STOCKADE_TEST_SURELY_UNSET_MODEL_KEY_5F1C";
    assert!(std::env::var_os(var).is_none());
    let err = OpenAiCompatible::new(ModelConfig {
        api_key_env: var.into(),
        ..ModelConfig::default()
    })
    .unwrap_err();
    assert!(
        matches!(&err, ModelError::MissingApiKey { var: v } if v == var),
        "{err:?}"
    );
    assert!(err.to_string().contains(var), "{err}");
    // Local servers: no variable, no key, no error.
    OpenAiCompatible::new(ModelConfig {
        api_key_env: String::new(),
        ..ModelConfig::default()
    })
    .unwrap();
}

#[tokio::test]
async fn model_requests_carry_key_model_tools_and_stream() {
    let server =
        ScriptedServer::start(vec![ScriptedReply::text("a"), ScriptedReply::text("b")]).unwrap();
    // The key comes from the environment; cargo sets CARGO_PKG_NAME for the
    // test process, and setting a variable would need `unsafe`.
    let (env, key) = match std::env::var("CARGO_PKG_NAME") {
        Ok(v) if !v.is_empty() => ("CARGO_PKG_NAME".to_owned(), v),
        _ => (String::new(), String::new()),
    };
    let c = OpenAiCompatible::new(ModelConfig {
        api_key_env: env.clone(),
        model: "deepseek-reasoner".into(),
        ..config(&server)
    })
    .unwrap();
    ask(&c, &[ChatMessage::user("hi")]).await.unwrap();
    // Also through a `/v1` base URL (OpenAI, Ollama).
    let c2 = client(ModelConfig {
        base_url: format!("{}/v1/", server.base_url()),
        ..config(&server)
    });
    ask(&c2, &[ChatMessage::user("hi")]).await.unwrap();

    let rec = server.recorded();
    if !env.is_empty() {
        let want = format!("Bearer {key}");
        assert_eq!(rec[0].header("authorization"), Some(want.as_str()));
    }
    assert_eq!(rec[1].header("Authorization"), Some("Bearer sk-test-123"));
    assert_eq!(rec[0].path, "/chat/completions");
    assert_eq!(rec[1].path, "/v1/chat/completions");
    assert_eq!(rec[0].method, "POST");
    assert_eq!(rec[0].header("content-type"), Some("application/json"));
    assert_eq!(rec[0].header("accept"), Some("text/event-stream"));
    let body = &rec[0].body;
    assert_eq!(body["model"], json!("deepseek-reasoner"));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(
        body["messages"],
        json!([{ "role": "user", "content": "hi" }])
    );
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a command",
                "parameters": {
                    "type": "object",
                    "properties": { "command": { "type": "string" } },
                    "required": ["command"],
                },
            },
        }])
    );
}

#[tokio::test]
async fn model_script_exhaustion_and_unknown_routes_are_clear() {
    let server = ScriptedServer::start(vec![]).unwrap();
    let err = ask(&client(config(&server)), &[ChatMessage::user("hi")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 410, message, .. } if message.contains("no reply left for request #1")),
        "{err:?}"
    );
    let err = ask(
        &client(ModelConfig {
            base_url: format!("{}/v2", server.base_url()),
            ..config(&server)
        }),
        &[ChatMessage::user("hi")],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 404, .. }),
        "{err:?}"
    );
}

#[test]
fn model_scripted_server_runs_on_its_own_thread() {
    let server = ScriptedServer::start_on_thread(vec![ScriptedReply::text("threaded")]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let turn = rt
        .block_on(ask(&client(config(&server)), &[ChatMessage::user("hi")]))
        .unwrap();
    assert_eq!(turn.content, "threaded");
    assert_eq!(server.requests().len(), 1);
}
