//! The stream parser against every split of its input, the configuration's
//! and messages' shapes. (The client against the scripted server is in
//! tests/client.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use serde_json::{Value, json};

use super::stream::{Assembler, Fault, Flow, SseEvent, SseParser, error_text};
use super::*;

#[test]
fn model_config_defaults_and_unknown_fields() {
    let c: ModelConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(c, ModelConfig::default());
    assert_eq!(c.base_url, "https://api.deepseek.com");
    assert_eq!(c.model, "deepseek-chat");
    assert_eq!(c.api_key_env, "DEEPSEEK_API_KEY");
    let c: ModelConfig =
        serde_json::from_value(json!({ "timeout": 2.5, "max_retries": 0, "model": "gpt-4o" }))
            .unwrap();
    assert_eq!(c.timeout, Duration::from_millis(2500));
    assert_eq!(c.max_retries, 0);
    let c: ModelConfig = serde_json::from_value(json!({ "timeout": 30 })).unwrap();
    assert_eq!(c.timeout, Duration::from_secs(30));
    let e = serde_json::from_value::<ModelConfig>(json!({ "modle": "x" })).unwrap_err();
    assert!(e.to_string().contains("unknown field `modle`"), "{e}");
    let e = serde_json::from_value::<ModelConfig>(json!({ "timeout": 0 })).unwrap_err();
    assert!(e.to_string().contains("positive number of seconds"), "{e}");
}

#[test]
fn model_session_tool_calls_convert_both_ways() {
    let s = stockade_session::ToolCall {
        id: "c".into(),
        name: "bash".into(),
        arguments: "{}".into(),
    };
    let m: ModelToolCall = s.clone().into();
    assert_eq!(m, ModelToolCall::new("c", "bash", "{}"));
    assert_eq!(stockade_session::ToolCall::from(m), s);
}

/// The full stream of the scripted server, fed in every two-piece split
/// and byte by byte, always gives the same turn.
#[test]
fn model_sse_parser_is_split_independent() {
    let body = concat!(
        ": keep-alive\r\n\r\n",
        "event: message\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"héllo\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"x\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    )
    .as_bytes();
    let run = |pieces: Vec<&[u8]>| -> ModelTurn {
        let mut p = SseParser::default();
        let mut a = Assembler::default();
        let mut done = false;
        let mut events = Vec::new();
        for piece in pieces {
            events.extend(p.push(piece).unwrap());
        }
        events.extend(p.finish().unwrap());
        for e in events {
            if a.event(e, &|_| {}).unwrap() == Flow::Done {
                done = true;
            }
        }
        a.finish(done).unwrap()
    };
    let want = ModelTurn {
        content: "héllo".into(),
        reasoning: Some("hm".into()),
        tool_calls: vec![ModelToolCall::new("x", "bash", "{\"a\":1}")],
        finish_reason: Some("tool_calls".into()),
    };
    assert_eq!(run(vec![body]), want);
    for cut in 0..body.len() {
        assert_eq!(run(vec![&body[..cut], &body[cut..]]), want, "cut at {cut}");
    }
    assert_eq!(run(body.chunks(1).collect()), want);
}

#[test]
fn model_sse_multiline_data_and_unterminated_tail() {
    let mut p = SseParser::default();
    let ev = p.push(b"data: a\ndata: b\n\ndata: tail").unwrap();
    assert_eq!(ev, vec![SseEvent::Data("a\nb".into())]);
    assert_eq!(p.finish().unwrap(), vec![SseEvent::Data("tail".into())]);
    let mut p = SseParser::default();
    assert!(matches!(p.push(b"\xff\xfe\n"), Err(Fault::Malformed(w)) if w.contains("UTF-8")));
}

#[test]
fn model_tool_call_without_index_or_id_or_arguments() {
    let mut a = Assembler::default();
    let data = |tc: Value| {
        SseEvent::Data(json!({ "choices": [{ "delta": { "tool_calls": [tc] } }] }).to_string())
    };
    a.event(
        data(json!({ "id": "a", "function": { "name": "ls" } })),
        &|_| {},
    )
    .unwrap();
    a.event(
        data(json!({ "id": "b", "function": { "name": "pwd", "arguments": "{}" } })),
        &|_| {},
    )
    .unwrap();
    a.event(data(json!({ "function": { "arguments": "" } })), &|_| {})
        .unwrap();
    let t = a.finish(true).unwrap();
    assert_eq!(
        t.tool_calls,
        vec![
            ModelToolCall::new("a", "ls", "{}"),
            ModelToolCall::new("b", "pwd", "{}")
        ]
    );
    let mut a = Assembler::default();
    a.event(
        data(json!({ "index": 0, "function": { "arguments": "{}" } })),
        &|_| {},
    )
    .unwrap();
    assert!(matches!(a.finish(true), Err(Fault::Malformed(w)) if w.contains("no function name")));
}

#[test]
fn model_error_bodies_yield_their_message() {
    assert_eq!(
        error_text(r#"{"error":{"message":"bad key","type":"auth"}}"#),
        "bad key"
    );
    assert_eq!(
        error_text(r#"{"error":"model not found"}"#),
        "model not found"
    );
    assert_eq!(error_text(r#"{"detail":"nope"}"#), "nope");
    assert_eq!(error_text("  plain text  "), "plain text");
    assert_eq!(error_text(""), "");
    let long = "x".repeat(1000);
    assert!(error_text(&long).len() < 300);
}

#[test]
fn model_debug_redacts_the_key() {
    let c =
        OpenAiCompatible::with_api_key(ModelConfig::default(), Some("sk-secret".into())).unwrap();
    let d = format!("{c:?}");
    assert!(!d.contains("sk-secret") && d.contains("redacted"), "{d}");
    assert_eq!(c.endpoint(), "https://api.deepseek.com/chat/completions");
}

#[test]
fn an_image_is_a_user_message_of_one_image_part() {
    let m = ChatMessage::UserImage {
        mime_type: "image/png".into(),
        data: "AAAA".into(),
    };
    assert_eq!(
        m.to_wire(),
        serde_json::json!({
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
        })
    );
}

mod tool_call_index {
    use proptest::prelude::*;

    use super::super::stream::{MAX_TOOL_CALLS, parse_completion};
    use super::*;

    fn chunk(tool_call: &str) -> SseEvent {
        SseEvent::Data(format!(
            r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{tool_call}]}}}}]}}"#
        ))
    }

    /// An index as the server wrote it: in range, at the bound, `u32::MAX`,
    /// `usize::MAX`, past `u64`, negative, fractional.
    fn index_text() -> impl Strategy<Value = String> {
        prop_oneof![
            (0..MAX_TOOL_CALLS as u64 + 4).prop_map(|i| i.to_string()),
            any::<u64>().prop_map(|i| i.to_string()),
            any::<i128>().prop_map(|i| i.to_string()),
            Just(u32::MAX.to_string()),
            Just(u64::MAX.to_string()),
            Just((u64::MAX - 1).to_string()),
            Just("18446744073709551616".to_owned()),
            Just("1e3".to_owned()),
            Just("-0".to_owned()),
        ]
    }

    proptest! {
        /// Whatever index the server sends, then a call without one (which
        /// takes the next index): the turn is assembled when both lie below
        /// the bound, and is otherwise a stream error. Never a panic, an
        /// overflow or an allocation sized by the index.
        #[test]
        fn any_index_is_a_call_or_a_stream_error(text in index_text()) {
            let mut a = Assembler::default();
            let first = a.event(
                chunk(&format!(r#"{{"index":{text},"id":"a","function":{{"name":"ls","arguments":"{{}}"}}}}"#)),
                &|_| {},
            );
            let wanted = text.parse::<u64>().ok().filter(|&i| i < MAX_TOOL_CALLS as u64);
            let Some(i) = wanted else {
                prop_assert!(matches!(first, Err(Fault::Malformed(_))), "{text}: {first:?}");
                return Ok(());
            };
            prop_assert_eq!(first, Ok(Flow::More));
            let second = a.event(
                chunk(r#"{"id":"b","function":{"name":"pwd","arguments":"{}"}}"#),
                &|_| {},
            );
            if i + 1 == MAX_TOOL_CALLS as u64 {
                prop_assert!(
                    matches!(&second, Err(Fault::Malformed(w)) if w.contains("out of range")),
                    "{second:?}"
                );
                return Ok(());
            }
            prop_assert_eq!(second, Ok(Flow::More));
            let turn = a.finish(true).unwrap();
            prop_assert_eq!(
                turn.tool_calls,
                vec![ModelToolCall::new("a", "ls", "{}"), ModelToolCall::new("b", "pwd", "{}")]
            );
        }
    }

    #[test]
    fn the_bound_is_named_in_the_error() {
        let mut a = Assembler::default();
        let e = a
            .event(
                chunk(&format!(
                    r#"{{"index":{},"function":{{"name":"ls"}}}}"#,
                    u32::MAX
                )),
                &|_| {},
            )
            .unwrap_err();
        assert_eq!(
            e,
            Fault::Malformed(format!(
                "tool call index {} is out of range: a turn holds at most {MAX_TOOL_CALLS} calls, indexed from 0",
                u32::MAX
            ))
        );
    }

    /// A whole completion holds at most as many calls as a stream may.
    #[test]
    fn a_completion_with_too_many_calls_is_refused() {
        let body = |n: usize| {
            let calls: Vec<Value> = (0..n)
                .map(|i| json!({ "id": format!("c{i}"), "function": { "name": "ls", "arguments": "{}" } }))
                .collect();
            json!({ "choices": [{ "index": 0, "message": { "tool_calls": calls } }] }).to_string()
        };
        let t = parse_completion(body(MAX_TOOL_CALLS).as_bytes(), &|_| {}).unwrap();
        assert_eq!(t.tool_calls.len(), MAX_TOOL_CALLS);
        let e = parse_completion(body(MAX_TOOL_CALLS + 1).as_bytes(), &|_| {}).unwrap_err();
        assert!(
            matches!(&e, Fault::Malformed(w) if w.contains("out of range")),
            "{e:?}"
        );
    }
}
