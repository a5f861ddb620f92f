//! Hook commands end to end through `stockade acp`, with the scripted model
//! and the real Landlock runner: they run at session start, around tool
//! calls and at the end of the turn, confined under the session's own
//! policy (never a call's grant), a `pre_tool` exit 2 vetoes the call with
//! its stderr as the reason, every other failure is a logged fact and the
//! call proceeds, and a misconfigured hook refuses the start.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use common::{Answer, Seen, Setup, World, call, escalated, last_content, say, touch};
use serde_json::Value;

const WRITE: Setup = Setup {
    mode: "workspace-write",
    approval: None,
    presets: false,
};

const READ_ONLY_ASK: Setup = Setup {
    mode: "read-only",
    approval: Some("ask"),
    presets: false,
};

use common::session_logs as logs;

fn hook_runs(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "hook/ran")
        .cloned()
        .collect()
}

/// The failed hooks the editor was shown: (title, text), in order.
fn hook_calls(seen: &Seen) -> Vec<(String, String)> {
    use agent_client_protocol::v1::schema::{
        ContentBlock, SessionUpdate, ToolCallContent, ToolCallStatus,
    };
    seen.updates()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::ToolCall(c) if c.tool_call_id.0.starts_with("hook-") => {
                assert_eq!(c.status, ToolCallStatus::Failed);
                let text = c
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        ToolCallContent::Content(c) => match &c.content {
                            ContentBlock::Text(t) => Some(t.text.clone()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                Some((c.title, text))
            }
            _ => None,
        })
        .collect()
}

/// The one session of a world whose prompt delegated nothing.
fn only_session(w: &World) -> Vec<Value> {
    let mut all = logs(&w.state);
    assert_eq!(all.len(), 1);
    all.remove(0).1
}

/// One prompt on a new session, which the model ends: what the client saw.
async fn one_turn(w: &World, server: common::Binary, answer: Answer, text: &str) -> Arc<Seen> {
    let seen = Arc::new(Seen::default());
    let stop = common::one_prompt(w, server, answer, seen.clone(), text).await;
    assert_eq!(stop, StopReason::EndTurn);
    seen
}

fn with_hooks(w: &World, setup: &Setup, hooks: &str) -> common::Binary {
    w.server_at(setup, &w.config_path(), &w.state, |t| {
        format!("{t}\n{hooks}")
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_see_each_event_as_json_and_a_pre_tool_exit_2_vetoes_the_call() {
    let script = vec![
        call("call-1", "bash", touch("allowed")),
        call("call-2", "bash", touch("forbidden")),
        call(
            "call-3",
            "write",
            serde_json::json!({"path": "notes.txt", "content": "x"}),
        ),
        say("done"),
    ];
    let Some(w) = World::new(script) else { return };
    // Each hook appends the event it was given to a file in the workspace
    // (workspace-write grants it); the pre_tool hook for bash vetoes any
    // command naming `forbidden`.
    let hooks = r#"
[[hooks]]
event = "session_start"
command = 'cat >> events.jsonl; echo >> events.jsonl'
[[hooks]]
event = "pre_tool"
matcher = "bash"
command = 'in=$(cat); printf "%s\n" "$in" >> events.jsonl; case "$in" in *forbidden*) echo "forbidden files are off limits" >&2; exit 2;; esac'
[[hooks]]
event = "post_tool"
command = 'cat >> events.jsonl; echo >> events.jsonl'
[[hooks]]
event = "stop"
command = 'cat >> events.jsonl; echo >> events.jsonl'
"#;
    let seen = one_turn(
        &w,
        with_hooks(&w, &WRITE, hooks),
        Answer::Reject,
        "make the files",
    )
    .await;
    // Of six hook runs the editor is shown the one that did not succeed.
    let shown = hook_calls(&seen);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].1.contains("stopped the call"), "{shown:?}");
    assert!(w.ws.join("allowed").exists());
    assert!(!w.ws.join("forbidden").exists(), "a vetoed call ran");
    assert!(w.ws.join("notes.txt").exists());

    // The veto's reason is what the model reads for that call.
    let requests = w.model_messages();
    let vetoed = last_content(&requests[2]);
    assert!(
        vetoed.contains("pre_tool hook (hooks[1])")
            && vetoed.contains("forbidden files are off limits"),
        "{vetoed}"
    );
    assert!(!last_content(&requests[1]).contains("pre_tool hook"));

    // What each hook was handed, in order.
    let text = std::fs::read_to_string(w.ws.join("events.jsonl")).unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seq: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_owned(),
                e["call_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("session_start", ""),
        ("pre_tool", "call-1"),
        ("post_tool", "call-1"),
        ("pre_tool", "call-2"),
        // call-2 never ran: no post_tool. call-3 is no bash call.
        ("post_tool", "call-3"),
        ("stop", ""),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(seq, want, "{text}");
    let sid = events[0]["session_id"].as_str().unwrap();
    assert!(events.iter().all(|e| e["session_id"] == sid));
    assert_eq!(events[0]["source"], "new");
    assert_eq!(events[0]["cwd"], w.ws.to_str().unwrap());
    assert_eq!(events[1]["tool"], "bash");
    assert_eq!(events[1]["arguments"]["command"], "touch allowed");
    assert_eq!(events[2]["result"]["is_error"], false);
    assert!(
        events[2]["result"]["content"]
            .as_str()
            .unwrap()
            .contains("exit code: 0")
    );
    assert_eq!(events[5]["stop_reason"], "end_turn");

    // The log holds each run with a bash result's facts.
    let runs = hook_runs(&only_session(&w));
    assert_eq!(runs.len(), 6);
    for r in &runs {
        assert_eq!(r["mode"], "workspace-write", "{r}");
        assert_eq!(r["backend"], "landlock", "{r}");
        assert_eq!(r["denied"], false, "{r}");
        assert_eq!(r["runner_failed"], false, "{r}");
    }
    let veto = &runs[3];
    assert_eq!(veto["event"], "pre_tool");
    assert_eq!(veto["vetoed"], true);
    assert_eq!(veto["exit_code"], 2);
    assert_eq!(veto["call_id"], "call-2");
    assert!(runs.iter().filter(|r| r["vetoed"] == true).count() == 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_runs_under_the_sessions_policy_never_the_calls_grant() {
    // Read-only session; the model escalates one call to workspace-write and
    // the user allows it. The hooks around that call try to write the
    // workspace too: refused, because they run under read-only. The denial
    // is a logged fact: nobody is asked about a hook. As root and as an
    // unprivileged user.
    for who in stockade_testkit::users::users() {
        let script = vec![
            call(
                "call-1",
                "bash",
                escalated(touch("granted"), "workspace-write"),
            ),
            say("done"),
        ];
        let Some(w) = World::new(script) else { return };
        let hooks = r#"
[[hooks]]
event = "pre_tool"
command = 'id -u >&2; touch pre-hook'
[[hooks]]
event = "post_tool"
command = 'touch post-hook'
"#;
        let server = with_hooks(&w, &READ_ONLY_ASK, hooks).run_as(who);
        w.own(who);
        let seen = Arc::new(Seen::default());
        let stop =
            common::one_prompt(&w, server, Answer::Allow, seen.clone(), "make the file").await;
        assert_eq!(stop, StopReason::EndTurn, "{who:?}");
        assert!(
            w.ws.join("granted").exists(),
            "{who:?}: the granted call ran"
        );
        assert!(!w.ws.join("pre-hook").exists(), "{who:?}");
        assert!(!w.ws.join("post-hook").exists(), "{who:?}");
        // One question, for the call; none for the hooks' denials.
        assert_eq!(seen.asks().len(), 1, "{who:?}");
        let runs = hook_runs(&only_session(&w));
        assert_eq!(runs.len(), 2, "{who:?}");
        let uid = runs[0]["stderr"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap_or("");
        let want = match who {
            stockade_testkit::users::Who::Me => {
                let out = std::process::Command::new("id").arg("-u").output().unwrap();
                String::from_utf8(out.stdout).unwrap().trim().to_owned()
            }
            stockade_testkit::users::Who::Nobody => stockade_testkit::users::NOBODY.to_string(),
        };
        assert_eq!(uid, want, "{who:?}: the hook ran as someone else");
        for r in &runs {
            assert_eq!(r["mode"], "read-only", "{who:?}: {r}");
            assert_eq!(r["denied"], true, "{who:?}: {r}");
            assert_ne!(r["exit_code"], 0, "{who:?}: {r}");
            assert_eq!(r["vetoed"], false, "{who:?}: {r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_hooks_are_reported_and_the_call_proceeds() {
    let script = vec![call("call-1", "bash", touch("marker")), say("done")];
    let Some(w) = World::new(script) else { return };
    // An ordinary failure, a hook that outlives its timeout, and a hook the
    // sandbox refuses that then exits 1: none of them stops the call.
    let hooks = r#"
[[hooks]]
event = "pre_tool"
command = 'echo "lint failed" >&2; exit 1'
[[hooks]]
event = "pre_tool"
command = 'sleep 30'
timeout_ms = 300
[[hooks]]
event = "pre_tool"
command = 'echo x > /etc/stockade-hook-test || exit 1'
"#;
    let seen = one_turn(
        &w,
        with_hooks(&w, &WRITE, hooks),
        Answer::Reject,
        "make the file",
    )
    .await;
    assert!(w.ws.join("marker").exists(), "the call did not proceed");
    assert!(!Path::new("/etc/stockade-hook-test").exists());
    // The editor is shown each failed hook as a failed call of its own,
    // saying what happened; a session/load shows them again.
    let shown = hook_calls(&seen);
    let expect = |shown: &[(String, String)]| {
        assert_eq!(shown.len(), 3, "{shown:?}");
        for (text, says) in shown.iter().zip(["exit code 1", "timed out", "refused"]) {
            assert!(text.1.contains(says), "{text:?}");
            assert!(text.0.starts_with("hook pre_tool: "), "{text:?}");
        }
        assert!(shown[0].1.contains("lint failed"), "{shown:?}");
    };
    expect(&shown);
    let session = logs(&w.state).remove(0).0["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ws = w.ws.clone();
    let replayed = Arc::new(Seen::default());
    common::run(
        with_hooks(&w, &WRITE, hooks),
        Answer::Reject,
        replayed.clone(),
        async move |cx| {
            use agent_client_protocol::schema::ProtocolVersion;
            use agent_client_protocol::v1::schema::{InitializeRequest, LoadSessionRequest};
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(LoadSessionRequest::new(session, &ws))
                .block_task()
                .await?;
            Ok(())
        },
    )
    .await;
    expect(&hook_calls(&replayed));
    let runs = hook_runs(&only_session(&w));
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(runs[0]["exit_code"], 1);
    assert!(runs[0]["stderr"].as_str().unwrap().contains("lint failed"));
    assert_eq!(runs[1]["timed_out"], true);
    assert_eq!(runs[2]["denied"], true);
    assert_eq!(runs[2]["exit_code"], 1);
    assert!(runs.iter().all(|r| r["vetoed"] == false));
    let requests = w.model_messages();
    let result = last_content(&requests[1]);
    assert!(
        result.contains("exit code: 0") && !result.contains("hook"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_misconfigured_hook_refuses_the_start_naming_the_key() {
    let Some(w) = World::new(vec![]) else { return };
    for (hooks, key) in [
        (
            "[[hooks]]\nevent = \"stop\"\nmatcher = \"bash\"\ncommand = \"true\"\n",
            "hooks[0].matcher",
        ),
        (
            "[[hooks]]\nevent = \"stop\"\ncommand = \"true\"\n[[hooks]]\nevent = \"pre_tool\"\ncommand = \"\"\n",
            "hooks[1].command",
        ),
        (
            "[[hooks]]\nevent = \"pre_tool\"\ncommand = \"true\"\ntimeout_ms = 0\n",
            "hooks[0].timeout_ms",
        ),
        (
            "[[hooks]]\nevent = \"before\"\ncommand = \"true\"\n",
            "before",
        ),
        ("[[hooks]]\nevent = \"stop\"\ncmd = \"true\"\n", "cmd"),
    ] {
        let out = with_hooks(&w, &WRITE, hooks).start_alone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{hooks}: {stderr}");
        assert!(stderr.contains(key), "{hooks}: {stderr}");
        assert!(
            stderr.contains(&w.config_path().display().to_string()),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_while_a_stop_hook_runs_kills_it_and_ends_the_turn_cancelled() {
    use agent_client_protocol::v1::schema::CancelNotification;
    let Some(w) = World::new(vec![say("done")]) else {
        return;
    };
    // Without the cancel it would outlive the harness's bound.
    let hooks = r#"
[[hooks]]
event = "stop"
command = 'touch stop-started; sleep 590; touch stop-finished'
timeout_ms = 600000
"#;
    let server = with_hooks(&w, &WRITE, hooks);
    let ws = w.ws.clone();
    let started = w.ws.join("stop-started");
    let stop = common::run(
        server,
        Answer::Reject,
        Arc::new(Seen::default()),
        async move |cx| {
            let id = common::open_session(&cx, &ws).await?;
            let pending = cx.send_request(common::prompt(&id, "hi"));
            while !started.exists() {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            cx.send_notification(CancelNotification::new(id))?;
            Ok(pending.block_task().await?.stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::Cancelled);
    assert!(!w.ws.join("stop-finished").exists());
    // Killed before it ended: no run was recorded for it.
    assert!(hook_runs(&only_session(&w)).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_whose_runner_fails_is_a_runner_failure_and_the_call_proceeds() {
    // Fault injection: an operator runner that fails every run with a fatal
    // line its signature names. The write tool runs in process (no runner),
    // so the call itself can proceed.
    let script = vec![
        call(
            "call-1",
            "write",
            serde_json::json!({"path": "notes.txt", "content": "x"}),
        ),
        say("done"),
    ];
    let Some(w) = World::new(script) else { return };
    let runner = w.dir.path().join("broken-runner");
    std::fs::write(
        &runner,
        "#!/bin/sh\necho 'broken-runner: fatal: cannot set up the sandbox' >&2\nexit 1\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let hooks = r#"
[[hooks]]
event = "pre_tool"
command = 'echo should-not-run; exit 2'
"#;
    let runner_toml = format!(
        "[sandbox]\nrunner_command = [{:?}]\nrunner_failure_signatures = [\"broken-runner: fatal:\"]\n",
        runner.display().to_string()
    );
    let server = w.server_at(&WRITE, &w.config_path(), &w.state, |t| {
        let start = t.find("[sandbox]").unwrap();
        let end = t.find("[policy]").unwrap();
        let t = format!("{}{runner_toml}{}", &t[..start], &t[end..]);
        // An operator runner cannot host the allow-listed proxy.
        let t = t.replace("[policy]\n", "[policy]\nnetwork = \"deny\"\n");
        format!("{t}\n{hooks}")
    });
    one_turn(&w, server, Answer::Reject, "write the notes").await;
    // The hook never ran (its exit 2 was never reached): no veto.
    assert_eq!(
        std::fs::read_to_string(w.ws.join("notes.txt")).unwrap(),
        "x"
    );
    let runs = hook_runs(&only_session(&w));
    assert_eq!(runs.len(), 1, "{runs:?}");
    let r = &runs[0];
    assert_eq!(r["runner_failed"], true, "{r}");
    assert_eq!(r["denied"], false, "{r}");
    assert_eq!(r["vetoed"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("broken-runner: fatal: cannot set up the sandbox"),
        "{r}"
    );
    assert!(
        !r["stdout"]
            .as_str()
            .unwrap_or("")
            .contains("should-not-run")
    );
}
