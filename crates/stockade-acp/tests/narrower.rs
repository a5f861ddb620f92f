//! The agent's escalation after a write refused outside the writable roots
//! offers that one directory first, writable for one retry of the call:
//! through the real `stockade acp` with a scripted model, bwrap, as root
//! and (when we are root) as `nobody`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use common::{Answer, Seen, Setup, World, call, say};
use serde_json::json;
use stockade_testkit::users::users;

const WRITE_ASK: Setup = Setup {
    mode: "workspace-write",
    approval: Some("ask"),
    presets: false,
};

/// bwrap only: under supervised Landlock the running command is asked
/// about the place itself, and a refusal there is not asked again as a
/// retry (tests/paths.rs).
fn backends() -> Vec<&'static str> {
    let mut b = Vec::new();
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.push("bwrap");
    }
    b
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_refused_outside_offers_that_directory_first() {
    for who in users() {
        for backend in backends() {
            for answer in [Answer::Allow, Answer::Reject] {
                let tag = format!("{who:?} {backend} {answer:?}");
                let Some(w) = World::new_with(|dir| {
                    let out = std::fs::canonicalize(dir).unwrap().join("out");
                    let command = format!("echo x >> count; echo y > {}/f", out.display());
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
                let out = std::fs::canonicalize(w.dir.path()).unwrap().join("out");
                std::fs::create_dir(&out).unwrap();
                let server = w
                    .server_at(&WRITE_ASK, &w.config_path(), &w.state, |t| {
                        t.replace(
                            "backend = \"landlock\"",
                            &format!("backend = \"{backend}\""),
                        )
                    })
                    .run_as(who);
                w.own(who);
                let seen = Arc::new(Seen::default());
                let stop = common::one_prompt(&w, server, answer, seen.clone(), "write").await;
                assert_eq!(stop, StopReason::EndTurn, "{tag}");
                // Asked once, about that directory, not a wider mode.
                let asks = seen.asks();
                assert_eq!(asks.len(), 1, "{tag}: {asks:?}");
                let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
                assert!(
                    title.contains(&format!(
                        "\"workspace-write\" with {} writable",
                        out.display()
                    )),
                    "{tag}: {title}"
                );
                assert!(!title.contains("danger-full-access"), "{tag}: {title}");
                let messages = w.model_messages();
                let result = common::last_content(messages.last().unwrap());
                let count = std::fs::read_to_string(w.ws.join("count")).unwrap();
                if answer == Answer::Allow {
                    assert_eq!(
                        std::fs::read_to_string(out.join("f")).unwrap(),
                        "y\n",
                        "{tag}"
                    );
                    assert_eq!(count, "x\nx\n", "{tag}: a rerun");
                    assert!(
                        result.contains("the user allowed that directory writable for one retry"),
                        "{tag}: {result}"
                    );
                } else {
                    assert!(!out.join("f").exists(), "{tag}");
                    assert_eq!(count, "x\n", "{tag}");
                    // Declined: the first run's result, and the wider mode
                    // is still the model's to ask for.
                    assert!(
                        result.contains(stockade_core::texts::ESCALATION_HINT),
                        "{tag}: {result}"
                    );
                }
            }
        }
    }
}
