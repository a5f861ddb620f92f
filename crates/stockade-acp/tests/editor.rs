//! `stockade acp` as an editor sees it: absolute locations, the file tools'
//! diffs, a running command's live output, the prompt's context reaching
//! the model, the configured default as a mode, the model key as ACP
//! authentication, and reads through the editor's buffers. The real binary,
//! the real Landlock launcher, a scripted model. When `CI=true` a missing
//! launcher is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, ClientCapabilities, ContentBlock, EmbeddedResource,
    EmbeddedResourceResource, FileSystemCapabilities, ImageContent, InitializeRequest,
    LoadSessionRequest, NewSessionRequest, PromptRequest, ReadTextFileRequest,
    ReadTextFileResponse, ResourceLink, SessionNotification, SessionUpdate, SetSessionModeRequest,
    StopReason, TextResourceContents, ToolCallContent, ToolCallStatus, ToolCallUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error, ErrorCode};
use common::{Answer, Binary, Dir, Seen, Setup, World, call, last_content, prompt, run, say};
use serde_json::json;
use stockade_session::{KnobSource, SessionStore};

const WRITE: Setup = Setup {
    mode: "workspace-write",
    approval: Some("ask"),
    presets: false,
};

/// The texts of one call's `tool_call_update`s, with their status (`None`
/// for live output), in order.
fn call_updates(seen: &Seen, id: &str) -> Vec<(Option<ToolCallStatus>, Vec<ToolCallContent>)> {
    seen.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id,
                fields,
                ..
            }) if &*tool_call_id.0 == id => {
                Some((fields.status, fields.content.unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
}

fn text_of(content: &[ToolCallContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

async fn initialize(cx: &ConnectionTo<Agent>) -> Result<(), Error> {
    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn locations_are_absolute_against_the_session_cwd() {
    let Some(w) = World::new(vec![
        call("c1", "read", json!({ "path": "sub/../notes.txt" })),
        call(
            "c2",
            "write",
            json!({ "path": "./out/../new.txt", "content": "x" }),
        ),
        call(
            "c3",
            "bash",
            json!({ "command": "true", "description": "nothing" }),
        ),
        call(
            "c4",
            "bash",
            json!({ "command": "true", "description": "nothing", "workdir": "sub/./deep/.." }),
        ),
        say("done"),
    ]) else {
        return;
    };
    std::fs::create_dir(w.ws.join("sub")).unwrap();
    std::fs::write(w.ws.join("notes.txt"), "hi\n").unwrap();
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(&w, w.server(&WRITE), Answer::Allow, seen.clone(), "go").await;
    assert_eq!(stop, StopReason::EndTurn);
    let locations: Vec<(String, Vec<PathBuf>)> = seen
        .updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCall(c) => Some((
                c.tool_call_id.0.to_string(),
                c.locations.into_iter().map(|l| l.path).collect(),
            )),
            _ => None,
        })
        .collect();
    let ws = &w.ws;
    assert_eq!(
        locations,
        [
            ("c1".to_owned(), vec![ws.join("notes.txt")]),
            ("c2".to_owned(), vec![ws.join("new.txt")]),
            ("c3".to_owned(), vec![ws.clone()]),
            ("c4".to_owned(), vec![ws.join("sub")]),
        ]
    );
    assert!(locations.iter().all(|(_, l)| l[0].is_absolute()));
    assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "x");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_and_edits_report_their_diff() {
    let Some(w) = World::new(vec![
        call(
            "call-1",
            "write",
            json!({ "path": "notes.txt", "content": "one\ntwo\n" }),
        ),
        call(
            "call-2",
            "edit",
            json!({ "path": "notes.txt", "old_string": "two", "new_string": "three" }),
        ),
        call(
            "call-3",
            "write",
            json!({ "path": "notes.txt", "content": "replaced\n" }),
        ),
        call(
            "call-4",
            "write",
            json!({ "path": "blob.bin", "content": "text now\n" }),
        ),
        say("done"),
    ]) else {
        return;
    };
    // Not UTF-8: no diff can show it.
    std::fs::write(w.ws.join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(&w, w.server(&WRITE), Answer::Allow, seen.clone(), "go").await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(w.ws.join("notes.txt")).unwrap(),
        "replaced\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.ws.join("blob.bin")).unwrap(),
        "text now\n"
    );
    let diff = |id: &str| -> Option<(PathBuf, Option<String>, String)> {
        let (status, content) = call_updates(&seen, id).pop().unwrap();
        assert_eq!(status, Some(ToolCallStatus::Completed), "{id}");
        content.into_iter().find_map(|c| match c {
            ToolCallContent::Diff(d) => Some((d.path, d.old_text, d.new_text)),
            _ => None,
        })
    };
    let notes = w.ws.join("notes.txt");
    assert_eq!(
        diff("call-1"),
        Some((notes.clone(), None, "one\ntwo\n".to_owned()))
    );
    assert_eq!(
        diff("call-2"),
        Some((
            notes.clone(),
            Some("one\ntwo\n".to_owned()),
            "one\nthree\n".to_owned()
        ))
    );
    assert_eq!(
        diff("call-3"),
        Some((
            notes.clone(),
            Some("one\nthree\n".to_owned()),
            "replaced\n".to_owned()
        ))
    );
    assert_eq!(diff("call-4"), None, "a binary file before: no diff");
    // The model reads what it always read, never the diff.
    let requests = w.model_messages();
    assert_eq!(
        last_content(&requests[1]),
        format!("created {} (8 bytes)", notes.display())
    );
    assert_eq!(
        last_content(&requests[2]),
        format!("edited {} (1 replacement)", notes.display())
    );
    // The prompt's updates only: the initialize answer is another test's.
    let transcript = seen.transcript(&w, Dir::ToClient);
    let updates: Vec<&str> = transcript
        .lines()
        .filter(|l| l.contains("\"method\":\"session/update\""))
        .collect();
    insta::assert_snapshot!("diff_frames_to_client", updates.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_command_streams_its_output_while_it_runs() {
    let Some(w) = World::new(vec![
        call(
            "call-1",
            "bash",
            json!({
                "command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 0.3; done",
                "description": "tick for a while"
            }),
        ),
        say("done"),
    ]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(&w, w.server(&WRITE), Answer::Allow, seen.clone(), "go").await;
    assert_eq!(stop, StopReason::EndTurn);
    let updates = call_updates(&seen, "call-1");
    let done = updates
        .iter()
        .position(|(s, _)| *s == Some(ToolCallStatus::Completed))
        .unwrap();
    let live: Vec<String> = updates[..done]
        .iter()
        .filter(|(s, c)| s.is_none() && !c.is_empty())
        .map(|(_, c)| text_of(c))
        .collect();
    assert!(live.len() >= 2, "at least two live updates: {live:?}");
    assert!(
        live[0].starts_with("tick 1\n") && !live[0].contains("tick 10"),
        "the first is partial: {live:?}"
    );
    // Each shows all so far (the tail is far from its bound here).
    for pair in live.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "{live:?}");
    }
    assert!(text_of(&updates[done].1).contains("tick 10"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prompts_context_reaches_the_model_and_an_image_is_refused() {
    let Some(w) = World::new(vec![say("read them")]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let (caps, image_err) = run(w.server(&WRITE), Answer::Allow, seen, async move |cx| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let s = cx
            .send_request(NewSessionRequest::new(&ws))
            .block_task()
            .await?;
        let main = format!("file://{}/src/main.rs", ws.display());
        let lib = format!("file://{}/src/lib.rs", ws.display());
        let blocks = vec![
            ContentBlock::from("explain these".to_owned()),
            ContentBlock::ResourceLink(ResourceLink::new("main.rs", main)),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "pub fn lib() {}\n",
                    lib,
                )),
            )),
        ];
        cx.send_request(PromptRequest::new(s.session_id.clone(), blocks))
            .block_task()
            .await?;
        let image = vec![
            ContentBlock::from("and this".to_owned()),
            ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ];
        let err = cx
            .send_request(PromptRequest::new(s.session_id.clone(), image))
            .block_task()
            .await
            .unwrap_err();
        Ok((init.agent_capabilities.prompt_capabilities, err))
    })
    .await;
    assert!(caps.embedded_context && !caps.image && !caps.audio);
    assert_eq!(image_err.code, ErrorCode::INVALID_PARAMS);
    assert!(
        image_err.message.contains("does not take images"),
        "{image_err:?}"
    );
    let requests = w.model_messages();
    assert_eq!(requests.len(), 1, "the refused prompt reached nobody");
    let user = requests[0]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let ws = w.ws.display();
    assert_eq!(
        user,
        format!(
            "explain these\n[mentioned: {ws}/src/main.rs (main.rs)]\n[attached: {ws}/src/lib.rs]\n```\npub fn lib() {{}}\n```"
        )
    );
}

/// The knob events of a session's log, with who set them.
fn knob_events(state: &Path, id: &str) -> Vec<String> {
    let log = std::fs::read_to_string(state.join("sessions").join(format!("{id}.jsonl"))).unwrap();
    log.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let e = &v["event"];
            let kind = e["type"].as_str()?;
            let value = match kind {
                "sandbox/mode" | "sandbox/network" => e["mode"].as_str()?,
                "approval/policy" => e["policy"].as_str()?,
                _ => return None,
            };
            Some(format!(
                "{kind} {value} by {}",
                e["source"]["kind"].as_str()?
            ))
        })
        .collect()
}

fn mode_ids(modes: &agent_client_protocol::v1::schema::SessionModeState) -> Vec<String> {
    modes
        .available_modes
        .iter()
        .map(|m| m.id.0.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_default_is_a_mode_and_custom_only_follows_a_manual_change() {
    let Some(w) = World::new(vec![]) else {
        return;
    };
    let presets = Setup {
        mode: "read-only",
        approval: Some("ask"),
        presets: true,
    };
    // read-only with the network allowed: no preset of the table is it.
    let with_network =
        |text: String| text.replace("deny_read = []\n", "deny_read = []\nnetwork = \"allow\"\n");
    let config = w.config_path();
    let ws = w.ws.clone();
    let first = Arc::new(Seen::default());
    let (modes, custom_err, id) = run(
        w.server_at(&presets, &config, &w.state, with_network),
        Answer::Allow,
        first.clone(),
        async move |cx| {
            initialize(&cx).await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let id = s.session_id.clone();
            cx.send_request(SetSessionModeRequest::new(id.clone(), "danger-full-access"))
                .block_task()
                .await?;
            // Not the current state, so not offered, so not selectable.
            let custom_err = cx
                .send_request(SetSessionModeRequest::new(id.clone(), "custom"))
                .block_task()
                .await
                .unwrap_err();
            cx.send_request(SetSessionModeRequest::new(id.clone(), "configured"))
                .block_task()
                .await?;
            Ok((s.modes.unwrap(), custom_err, id))
        },
    )
    .await;
    assert_eq!(&*modes.current_mode_id.0, "configured");
    assert_eq!(
        mode_ids(&modes),
        [
            "read-only",
            "workspace-write",
            "danger-full-access",
            "configured"
        ]
    );
    let configured = modes.available_modes.last().unwrap();
    assert_eq!(configured.name, "Configured default");
    assert!(
        custom_err
            .message
            .contains("expected one of read-only, workspace-write, danger-full-access, configured"),
        "{custom_err:?}"
    );
    let current = |seen: &Seen| -> Vec<String> {
        seen.updates()
            .into_iter()
            .filter_map(|n| match n.update {
                SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(current(&first), ["danger-full-access", "configured"]);
    let sid = id.0.to_string();
    assert_eq!(
        knob_events(&w.state, &sid),
        [
            "sandbox/mode danger-full-access by preset",
            "approval/policy never by preset",
            "sandbox/mode read-only by config",
            "approval/policy ask by config",
        ]
    );

    // A knob changed by hand (outside any preset), while no server holds
    // the session.
    {
        let store = SessionStore::new(w.state.join("sessions"));
        let s = store.open(&sid.parse().unwrap()).unwrap();
        s.set_approval_policy(stockade_core::ApprovalPolicy::Never, KnobSource::User)
            .unwrap();
    }
    let second = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let loaded = run(
        w.server_at(&presets, &config, &w.state, with_network),
        Answer::Allow,
        second.clone(),
        async move |cx| {
            initialize(&cx).await?;
            let loaded = cx
                .send_request(LoadSessionRequest::new(id.clone(), &ws))
                .block_task()
                .await?;
            // Offered now, and selecting it changes nothing.
            cx.send_request(SetSessionModeRequest::new(id.clone(), "custom"))
                .block_task()
                .await?;
            cx.send_request(SetSessionModeRequest::new(id.clone(), "configured"))
                .block_task()
                .await?;
            Ok(loaded.modes.unwrap())
        },
    )
    .await;
    assert_eq!(&*loaded.current_mode_id.0, "custom");
    assert_eq!(
        mode_ids(&loaded),
        [
            "read-only",
            "workspace-write",
            "danger-full-access",
            "configured",
            "custom"
        ]
    );
    assert_eq!(current(&second), ["custom", "configured"]);
    let events = knob_events(&w.state, &sid);
    assert_eq!(
        events[4..],
        [
            "approval/policy never by user",
            "approval/policy ask by config"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_key_the_agent_starts_offers_auth_and_prompts_wait_for_it() {
    const VAR: &str = "STOCKADE_ACP_TEST_MISSING_KEY";
    assert!(std::env::var_os(VAR).is_none(), "{VAR} must not be set");
    let Some(w) = World::new(vec![say("authenticated")]) else {
        return;
    };
    let server = w.server_at(&WRITE, &w.config_path(), &w.state, |text| {
        text.replace("api_key_env = \"\"", &format!("api_key_env = \"{VAR}\""))
    });
    let ws = w.ws.clone();
    let seen = Arc::new(Seen::default());
    let (methods, before, no_key, unknown, stop) =
        run(server, Answer::Allow, seen, async move |cx| {
            let init = cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            let before = cx
                .send_request(prompt(&s.session_id, "hello"))
                .block_task()
                .await
                .unwrap_err();
            let no_key = cx
                .send_request(AuthenticateRequest::new("env-key"))
                .block_task()
                .await
                .unwrap_err();
            let unknown = cx
                .send_request(AuthenticateRequest::new("oauth"))
                .block_task()
                .await
                .unwrap_err();
            let meta = json!({ "apiKey": "sk-test-key" });
            cx.send_request(
                AuthenticateRequest::new("env-key").meta(meta.as_object().unwrap().clone()),
            )
            .block_task()
            .await?;
            let stop = cx
                .send_request(prompt(&s.session_id, "hello"))
                .block_task()
                .await?
                .stop_reason;
            Ok((init.auth_methods, before, no_key, unknown, stop))
        })
        .await;
    assert_eq!(methods.len(), 1);
    assert_eq!(&*methods[0].id().0, "env-key");
    assert!(methods[0].name().contains(VAR), "{methods:?}");
    assert!(
        methods[0].description().is_some_and(|d| d.contains(VAR)),
        "{methods:?}"
    );
    assert_eq!(before.code, ErrorCode::AUTH_REQUIRED);
    assert!(before.message.contains(VAR), "{before:?}");
    assert_eq!(no_key.code, ErrorCode::AUTH_REQUIRED);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(stop, StopReason::EndTurn);
    let recorded = w.model.recorded();
    assert_eq!(
        recorded.len(),
        1,
        "nothing reached the model before the key"
    );
    assert_eq!(
        recorded[0].header("authorization"),
        Some("Bearer sk-test-key")
    );
}

/// Run `body` against `server` as an editor that advertises
/// `fs.readTextFile` and holds `buffers` (path, unsaved text); its read
/// requests go to `reads`.
async fn as_editor<R>(
    server: Binary,
    seen: Arc<Seen>,
    buffers: Vec<(PathBuf, String)>,
    reads: Arc<Mutex<Vec<ReadTextFileRequest>>>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, Error>,
) -> R {
    let (mut child, transport) = common::spawn(&server, &seen, std::process::Stdio::null());
    let updates = seen.clone();
    let client = Client
        .v1()
        .name("editor")
        .on_receive_notification(
            async move |n: SessionNotification, _cx: ConnectionTo<Agent>| {
                updates.updates.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: ReadTextFileRequest,
                        responder: Responder<ReadTextFileResponse>,
                        _cx: ConnectionTo<Agent>| {
                reads.lock().unwrap().push(r.clone());
                match buffers.iter().find(|(p, _)| *p == r.path) {
                    Some((_, text)) => responder.respond(ReadTextFileResponse::new(text.clone())),
                    None => responder.respond_with_error(Error::new(
                        ErrorCode::RESOURCE_NOT_FOUND,
                        "no such buffer".to_owned(),
                    )),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, body);
    let r = tokio::time::timeout(Duration::from_secs(120), client)
        .await
        .expect("the ACP conversation timed out")
        .expect("the client failed");
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_go_through_the_editors_buffers_but_never_past_the_fence() {
    let Some(w) = World::new(vec![
        call("call-1", "read", json!({ "path": "notes.txt" })),
        call("call-2", "read", json!({ "path": "secret/key" })),
        call("call-3", "read", json!({ "path": "draft.txt" })),
        call("call-4", "read", json!({ "path": "other.txt" })),
        say("done"),
        // A second editor that does not advertise reads.
        call("call-5", "read", json!({ "path": "notes.txt" })),
        say("done"),
    ]) else {
        return;
    };
    let ws = w.ws.clone();
    std::fs::write(ws.join("notes.txt"), "saved\n").unwrap();
    std::fs::write(ws.join("other.txt"), "on disk only\n").unwrap();
    std::fs::create_dir(ws.join("secret")).unwrap();
    std::fs::write(ws.join("secret/key"), "on disk secret\n").unwrap();
    let deny = format!("deny_read = [\"{}\"]\n", ws.join("secret").display());
    let server = w.server_at(&WRITE, &w.config_path(), &w.state, |text| {
        text.replace("deny_read = []\n", &deny)
    });
    let buffers = vec![
        (ws.join("notes.txt"), "unsaved\n".to_owned()),
        (ws.join("draft.txt"), "a new buffer\n".to_owned()),
        (ws.join("secret/key"), "LEAKED\n".to_owned()),
    ];
    let reads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Seen::default());
    let ws2 = ws.clone();
    let stop = as_editor(
        server,
        seen,
        buffers,
        reads.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let ws = ws2;
            let caps =
                ClientCapabilities::new().fs(FileSystemCapabilities::new().read_text_file(true));
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps))
                .block_task()
                .await?;
            let s = cx
                .send_request(NewSessionRequest::new(&ws))
                .block_task()
                .await?;
            Ok(cx
                .send_request(prompt(&s.session_id, "read them"))
                .block_task()
                .await?
                .stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let requests = w.model_messages();
    assert_eq!(last_content(&requests[1]), "unsaved\n");
    let refused = last_content(&requests[2]);
    assert!(
        refused.starts_with("[sandbox: file access denied") && !refused.contains("LEAKED"),
        "{refused}"
    );
    assert_eq!(last_content(&requests[3]), "a new buffer\n");
    // The editor has no buffer for it: the disk answers.
    assert_eq!(last_content(&requests[4]), "on disk only\n");
    let asked: Vec<PathBuf> = reads
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        asked,
        [
            ws.join("notes.txt"),
            ws.join("draft.txt"),
            ws.join("other.txt")
        ],
        "the deny-read path is never asked of the editor"
    );

    // Without the capability nothing is asked: the disk answers.
    let plain = Arc::new(Seen::default());
    common::one_prompt(&w, w.server(&WRITE), Answer::Allow, plain, "again").await;
    assert_eq!(last_content(&w.model_messages()[6]), "saved\n");
    assert_eq!(reads.lock().unwrap().len(), 3);
}

/// With `[model] images = true` the agent advertises images, and an image
/// in a prompt reaches the model as an image content part (a data URL),
/// also when the session is resumed from its log.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_takes_images_gets_them() {
    let Some(w) = World::new(vec![say("a cat"), say("still a cat")]) else {
        return;
    };
    let seen = Arc::new(Seen::default());
    let ws = w.ws.clone();
    let config = w.dir.path().join("images.toml");
    let server = w.server_at(&WRITE, &config, &w.state, |text: String| {
        text.replace("max_retries = 0\n", "max_retries = 0\nimages = true\n")
    });
    let caps = run(server, Answer::Allow, seen, async move |cx| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let s = cx
            .send_request(NewSessionRequest::new(&ws))
            .block_task()
            .await?;
        let blocks = vec![
            ContentBlock::from("what is this?".to_owned()),
            ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ];
        cx.send_request(PromptRequest::new(s.session_id.clone(), blocks))
            .block_task()
            .await?;
        cx.send_request(prompt(&s.session_id, "and now?"))
            .block_task()
            .await?;
        Ok(init.agent_capabilities.prompt_capabilities)
    })
    .await;
    assert!(caps.image, "{caps:?}");
    let requests = w.model_messages();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        let parts: Vec<&serde_json::Value> = r
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user" && m["content"].is_array())
            .collect();
        assert_eq!(parts.len(), 1, "{r:#}");
        assert_eq!(
            parts[0]["content"][0]["image_url"]["url"],
            "data:image/png;base64,iVBORw0KGgo="
        );
    }
}
