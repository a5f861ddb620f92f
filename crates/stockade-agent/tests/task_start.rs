//! The `task` tool's child-start hook, which a front end uses to mount
//! what a child's commands ask through: it runs once per child, after the
//! child is registered (so its origin is found), and what it returns is
//! dropped when the task call ends, however it ends (a dropped call too).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_agent::agent::Agent;
use stockade_agent::tool::ToolContext;
use stockade_agent::{Delegation, Delegations, PolicyContext, PolicyService, TaskTool, Tool};
use stockade_core::SandboxMode;
use stockade_model::{ModelConfig, OpenAiCompatible};
use stockade_session::SessionId;
use stockade_testkit::scripted::{ScriptedReply, ScriptedServer};

/// Sets its flag when dropped: the mount the hook returned is gone.
struct Mounted(Arc<Mutex<bool>>);

impl Drop for Mounted {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = true;
    }
}

/// (child, what `origin` said of it while the hook ran)
type Started = Arc<Mutex<Vec<(SessionId, Option<Delegation>)>>>;

fn task_tool(server: &ScriptedServer, w: &common::World) -> (TaskTool, Started, Arc<Mutex<bool>>) {
    let model = OpenAiCompatible::with_api_key(
        ModelConfig {
            base_url: server.base_url(),
            api_key_env: String::new(),
            timeout: Duration::from_secs(10),
            max_retries: 0,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &w.ws));
    let child = Agent::new(
        Arc::new(model),
        Vec::new(),
        PolicyContext::new(policy, None, false),
    );
    let delegations = Arc::new(Delegations::default());
    let started: Started = Arc::default();
    let dropped = Arc::new(Mutex::new(false));
    let (reg, log, flag) = (
        Arc::downgrade(&delegations),
        started.clone(),
        dropped.clone(),
    );
    delegations.on_child_start(Arc::new(move |child, _| {
        let origin = reg.upgrade().unwrap().origin(child.id());
        log.lock().unwrap().push((child.id().clone(), origin));
        Some(Box::new(Mounted(flag.clone())))
    }));
    let tool = TaskTool::new(Arc::new(child), w.store.clone(), delegations);
    (tool, started, dropped)
}

fn args() -> serde_json::Value {
    serde_json::json!({ "description": "sub work", "prompt": "do it" })
}

#[tokio::test]
async fn the_hook_sees_the_registered_child_and_its_mount_ends_with_the_task() {
    let w = common::world();
    let server = ScriptedServer::start(vec![ScriptedReply::text("child done")]).unwrap();
    let (tool, started, dropped) = task_tool(&server, &w);
    let parent = w.store.create(&w.ws).unwrap();
    let ctx = ToolContext {
        session: Some(parent.clone()),
        call_id: "call-1".into(),
    };
    let out = tool.call(&ctx, args()).await;
    assert!(!out.is_error, "{out:?}");
    let started = started.lock().unwrap().clone();
    assert_eq!(started.len(), 1, "{started:?}");
    let (child, origin) = &started[0];
    assert_ne!(child, parent.id());
    assert_eq!(
        origin.as_ref(),
        Some(&Delegation {
            parent: parent.id().clone(),
            call_id: "call-1".into()
        })
    );
    assert!(*dropped.lock().unwrap(), "the mount outlived its task");
}

#[tokio::test]
async fn a_dropped_task_call_drops_the_mount() {
    let w = common::world();
    // The model never answers: the call is dropped while the child waits
    // for it.
    let server = ScriptedServer::start(vec![ScriptedReply::Hang]).unwrap();
    let (tool, started, dropped) = task_tool(&server, &w);
    let parent = w.store.create(&w.ws).unwrap();
    let ctx = ToolContext {
        session: Some(parent),
        call_id: "call-1".into(),
    };
    {
        let mut call = tool.call(&ctx, args());
        // Polled until the hook ran, then dropped unfinished.
        while started.lock().unwrap().is_empty() {
            tokio::select! {
                out = &mut call => panic!("the task ended on its own: {out:?}"),
                () = tokio::task::yield_now() => {}
            }
        }
        assert!(!*dropped.lock().unwrap());
    }
    assert!(
        *dropped.lock().unwrap(),
        "the mount outlived its dropped task"
    );
}
