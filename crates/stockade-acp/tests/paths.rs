//! A place outside every writable root, asked about through `stockade acp`
//! while the command that writes it waits: the real binary, the real
//! Landlock launcher with its supervisor, a scripted model, as root and
//! (when we are root) as `nobody`. The place is a directory beside the
//! workspace, outside the temp roots (the world lies outside them).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{StopReason, ToolCallStatus};
use common::{Answer, Seen, Setup, World, call, say};
use serde_json::{Value, json};
use stockade_testkit::users::users;

const WRITE_ASK: Setup = Setup {
    mode: "workspace-write",
    approval: Some("ask"),
    presets: false,
};

/// The directory outside every writable root, by the kernel's name for it
/// (what the supervisor reports).
fn outside(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap().join("outside")
}

/// The script: one bash call that counts its runs in the workspace, then
/// writes `outside/a`.
fn world() -> Option<(World, PathBuf)> {
    let w = World::new_with(|dir| {
        let target = outside(dir).join("a");
        let command = format!(
            "echo 1 >> count; echo hi > '{}' && echo wrote-a",
            target.display()
        );
        vec![
            call(
                "call-1",
                "bash",
                json!({ "command": command, "description": "write outside" }),
            ),
            say("done"),
        ]
    })?;
    let out = outside(w.dir.path());
    std::fs::create_dir(&out).unwrap();
    Some((w, out.join("a")))
}

fn path_events(w: &World) -> Vec<Value> {
    let mut logs = common::session_logs(&w.state);
    assert_eq!(logs.len(), 1);
    logs.remove(0)
        .1
        .into_iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("fs/path-"))
        })
        .collect()
}

/// Where in the frames sent to the client the first one matching `pred`
/// lies.
fn frame_at(seen: &Seen, pred: &dyn Fn(&Value) -> bool) -> usize {
    let frames: Vec<String> = seen
        .frames
        .lock()
        .unwrap()
        .iter()
        .filter(|(d, _)| *d == common::Dir::ToClient)
        .map(|(_, l)| l.clone())
        .collect();
    frames
        .iter()
        .position(|l| pred(&serde_json::from_str::<Value>(l).unwrap()))
        .unwrap_or_else(|| panic!("no such frame in {frames:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_path_writes_it_while_the_command_waits_without_a_rerun() {
    for who in users() {
        let Some((w, target)) = world() else { return };
        let server = w.server(&WRITE_ASK).run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop =
            common::one_prompt(&w, server, Answer::Pick("allow_path"), seen.clone(), "go").await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        // One question, on the running call, naming the path, with the
        // three options.
        let asks = seen.asks();
        assert_eq!(asks.len(), 1, "{who:?}: {asks:?}");
        assert_eq!(&*asks[0].tool_call.tool_call_id.0, "call-1");
        let options: Vec<&str> = asks[0].options.iter().map(|o| &*o.option_id.0).collect();
        assert_eq!(options, ["allow_path", "allow_directory", "reject_once"]);
        let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
        assert!(
            title.contains(&format!("writing {} (write)", target.display())),
            "{who:?}: {title}"
        );
        // The call was running when it was asked, showed that it waited,
        // then ran on to completion.
        assert_eq!(
            seen.statuses("call-1"),
            [
                ToolCallStatus::Pending,
                ToolCallStatus::InProgress,
                ToolCallStatus::Pending,
                ToolCallStatus::InProgress,
                ToolCallStatus::Completed
            ],
            "{who:?}"
        );
        let waiting = frame_at(&seen, &|v| {
            v["params"]["update"]["toolCallId"] == "call-1"
                && v["params"]["update"]["status"] == "pending"
                && v["params"]["update"]["title"]
                    .as_str()
                    .is_some_and(|t| t.contains("waiting for approval of writing"))
        });
        let asked = frame_at(&seen, &|v| v["method"] == "session/request_permission");
        let done = frame_at(&seen, &|v| {
            v["params"]["update"]["toolCallId"] == "call-1"
                && v["params"]["update"]["status"] == "completed"
        });
        assert!(waiting < asked && asked < done, "{who:?}");
        // Written by the command that asked, which ran once.
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n", "{who:?}");
        assert_eq!(
            std::fs::read_to_string(w.ws.join("count")).unwrap(),
            "1\n",
            "{who:?}"
        );
        let messages = w.model_messages();
        let result = common::last_content(messages.last().unwrap());
        assert!(result.contains("wrote-a"), "{who:?}: {result}");
        let events = path_events(&w);
        assert_eq!(events.len(), 2, "{who:?}: {events:?}");
        assert_eq!(events[0]["type"], "fs/path-asked");
        assert_eq!(events[0]["op"], "write");
        assert_eq!(events[0]["path"], target.to_str().unwrap());
        assert_eq!(events[0]["call_id"], "call-1");
        assert_eq!(events[1]["type"], "fs/path-answered");
        assert_eq!(events[1]["path"], target.to_str().unwrap());
        assert_eq!(events[1]["answer"], "allow-path");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reject_once_is_todays_refusal_and_is_logged() {
    for who in users() {
        let Some((w, target)) = world() else { return };
        let server = w.server(&WRITE_ASK).run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop =
            common::one_prompt(&w, server, Answer::Pick("reject_once"), seen.clone(), "go").await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        // Asked about the path while the command ran; refused, the write
        // failed as without a question, and the retry with its directory
        // writable is not offered after that no.
        let asks = seen.asks();
        assert_eq!(asks.len(), 1, "{who:?}: {asks:?}");
        let options: Vec<&str> = asks[0].options.iter().map(|o| &*o.option_id.0).collect();
        assert_eq!(options, ["allow_path", "allow_directory", "reject_once"]);
        assert!(!target.exists(), "{who:?}");
        assert_eq!(
            std::fs::read_to_string(w.ws.join("count")).unwrap(),
            "1\n",
            "{who:?}"
        );
        let messages = w.model_messages();
        let result = common::last_content(messages.last().unwrap());
        assert!(
            !result.contains("wrote-a")
                && result.contains("Permission denied")
                && result.contains(stockade_core::texts::ESCALATION_HINT),
            "{who:?}: {result}"
        );
        let events = path_events(&w);
        assert_eq!(events.len(), 2, "{who:?}: {events:?}");
        assert_eq!(events[0]["type"], "fs/path-asked");
        assert_eq!(events[1]["type"], "fs/path-answered");
        assert_eq!(events[1]["answer"], "refused");
    }
}

/// `allow_directory`: the place's directory for the rest of the command,
/// so its next write there is not asked about.
#[tokio::test(flavor = "multi_thread")]
async fn allow_directory_covers_the_next_write_there_unasked() {
    for who in users() {
        let Some(w) = World::new_with(|dir| {
            let out = outside(dir);
            let command = format!(
                "echo 1 >> count; echo a > '{a}' && echo b > '{b}' && echo wrote-both",
                a = out.join("a").display(),
                b = out.join("b").display()
            );
            vec![
                call(
                    "call-1",
                    "bash",
                    json!({ "command": command, "description": "write outside" }),
                ),
                say("done"),
            ]
        }) else {
            return;
        };
        let out = outside(w.dir.path());
        std::fs::create_dir(&out).unwrap();
        let server = w.server(&WRITE_ASK).run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop = common::one_prompt(
            &w,
            server,
            Answer::Pick("allow_directory"),
            seen.clone(),
            "go",
        )
        .await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        assert_eq!(seen.asks().len(), 1, "{who:?}: {:?}", seen.asks());
        assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "a\n");
        assert_eq!(std::fs::read_to_string(out.join("b")).unwrap(), "b\n");
        assert_eq!(std::fs::read_to_string(w.ws.join("count")).unwrap(), "1\n");
        let events = path_events(&w);
        assert_eq!(events.len(), 2, "{who:?}: {events:?}");
        assert_eq!(events[1]["answer"], "allow-directory");
    }
}

/// Under approval policy `never` nobody is asked: today's refusal, and no
/// question in the log.
#[tokio::test(flavor = "multi_thread")]
async fn under_approval_never_nothing_is_asked() {
    const WRITE_NEVER: Setup = Setup {
        mode: "workspace-write",
        approval: Some("never"),
        presets: false,
    };
    for who in users() {
        let Some((w, target)) = world() else { return };
        let server = w.server(&WRITE_NEVER).run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop = common::one_prompt(&w, server, Answer::Allow, seen.clone(), "go").await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        assert!(seen.asks().is_empty(), "{who:?}: {:?}", seen.asks());
        assert!(!target.exists(), "{who:?}");
        let messages = w.model_messages();
        let result = common::last_content(messages.last().unwrap());
        assert!(result.contains("Permission denied"), "{who:?}: {result}");
        assert!(path_events(&w).is_empty(), "{who:?}");
    }
}

/// No answer within `[approval] timeout_ms`: the question is withdrawn,
/// the write refused and the answer logged `timed-out`; that is no "no",
/// so the retry with its directory writable is still offered (declined
/// here). Who::Me; the users' legs are above.
#[tokio::test(flavor = "multi_thread")]
async fn an_unanswered_question_times_out_and_is_logged() {
    use agent_client_protocol::v1::schema::{
        PermissionOptionId, RequestPermissionOutcome, RequestPermissionResponse,
        SelectedPermissionOutcome,
    };
    let Some((w, target)) = world() else { return };
    let server = w.server_at(&WRITE_ASK, &w.config_path(), &w.state, |t| {
        t.replace(
            "[approval]\npolicy = \"ask\"\n",
            "[approval]\npolicy = \"ask\"\ntimeout_ms = 1000\n",
        )
    });
    let seen = Arc::new(Seen::default());
    let held = seen.clone();
    let ws = w.ws.clone();
    let stop = common::run(server, Answer::Hold, seen.clone(), async move |cx| {
        let id = common::open_session(&cx, &ws).await?;
        let prompt = cx.send_request(common::prompt(&id, "go")).block_task();
        // The path question is held past its time; the retry offered
        // after it is declined.
        let decline_retry = async {
            let retry = loop {
                let second = {
                    let mut h = held.held.lock().unwrap();
                    (h.len() == 2).then(|| h.remove(1))
                };
                if let Some(r) = second {
                    break r;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            };
            retry
                .respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        PermissionOptionId::new("reject_once"),
                    )),
                ))
                .unwrap();
        };
        let (stop, ()) = futures::join!(prompt, decline_retry);
        Ok(stop?.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let asks = seen.asks();
    assert_eq!(asks.len(), 2, "{asks:?}");
    let options: Vec<&str> = asks[0].options.iter().map(|o| &*o.option_id.0).collect();
    assert_eq!(options, ["allow_path", "allow_directory", "reject_once"]);
    let retry = asks[1].tool_call.fields.title.clone().unwrap_or_default();
    assert!(retry.contains("writable"), "{retry}");
    assert!(!target.exists());
    assert_eq!(std::fs::read_to_string(w.ws.join("count")).unwrap(), "1\n");
    let events = path_events(&w);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["answer"], "timed-out");
}
