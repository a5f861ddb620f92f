//! A mode switch committed while a prompt runs: it is honoured by the next
//! call's stamp and by the next policy-context message, never by the call
//! that is already running.
//!
//! Both tests run the real agent loop against the scripted model on
//! loopback, the real bash tool and the real sandboxed executor on a real
//! runner; the switch is a preset selection, the way the ACP server commits
//! `session/set_mode`. The first test observes the executor (a recorder
//! around the real one: it records the policy each run carries, and holds
//! the first run at a channel until the switch is committed); the second
//! holds the running command itself, at a FIFO, and looks at what it wrote.
//!
//! When `CI=true` a missing runner is a failure, never a skip.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::world;
use serde_json::{Value, json};
use stockade_agent::agent::{Agent, Cancel, Silent, StopReason};
use stockade_agent::{
    ApprovalService, BashTool, EscalationGate, Fixed, PolicyContext, PolicyService, PresetService,
    Tool,
};
use stockade_core::{
    ApprovalOutcome, ApprovalPolicy, ExecutionPolicy, NetworkMode, SandboxMode, texts,
};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_model::{ModelConfig, ModelToolCall, OpenAiCompatible};
use stockade_session::{Event, Session};
use stockade_shell::{
    BoxFuture, Command, Interpreter, JobHandle, SandboxedExecutor, ShellError, ShellExecutor,
    ShellRequest, ShellResult, ShellSpec,
};
use stockade_testkit::scripted::{ScriptedReply, ScriptedServer};
use tokio::sync::oneshot;

/// The real local provider on `backend` (bwrap needs the launcher too, to
/// close inherited descriptors inside), or `None` when the host lacks it
/// outside CI.
fn provider(backend: BackendPreference) -> Option<Arc<LocalProvider>> {
    let launcher = stockade_testkit::built_launcher();
    if !stockade_testkit::require("the built landlock-run", launcher.is_some()) {
        return None;
    }
    if backend == BackendPreference::Bwrap
        && !stockade_testkit::require("bwrap", stockade_testkit::have_bwrap())
    {
        return None;
    }
    let s = LocalSettings {
        backend,
        launcher_path: launcher,
        ..Default::default()
    };
    Some(Arc::new(LocalProvider::new(s).unwrap()))
}

/// Configured default workspace-write; the network denied throughout, so
/// the file mode is the only knob the switch moves.
fn policy(ws: &Path) -> Arc<PolicyService> {
    Arc::new(
        PolicyService::new(SandboxMode::WorkspaceWrite, ws)
            .with_default_network(Some(NetworkMode::Deny)),
    )
}

/// The agent with the real bash tool on `exec`, and the presets the ACP
/// server switches modes with.
fn compose(
    server: &ScriptedServer,
    policy: Arc<PolicyService>,
    exec: Arc<dyn ShellExecutor>,
) -> (Agent, PresetService) {
    let approval = Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Fixed(ApprovalOutcome::Rejected))],
    ));
    let confines = exec.confines();
    let bash = BashTool::new(
        exec,
        policy.clone(),
        EscalationGate::new(Some(approval.clone())),
    );
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(bash)];
    let model = OpenAiCompatible::with_api_key(
        ModelConfig {
            base_url: server.base_url(),
            api_key_env: String::new(),
            timeout: Duration::from_secs(30),
            max_retries: 0,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let presets = PresetService::new(
        PresetService::default_table(),
        policy.clone(),
        Some(approval.clone()),
        confines,
    )
    .unwrap();
    let agent = Agent::new(
        Arc::new(model),
        tools,
        PolicyContext::new(policy, Some(approval), confines),
    );
    (agent, presets)
}

fn bash_call(id: &str, command: &str) -> ModelToolCall {
    ModelToolCall::new(
        id,
        "bash",
        json!({ "command": command, "description": "run it" }).to_string(),
    )
}

/// Two model steps of one bash call each, then the end of the turn.
fn script(first: &str, second: &str) -> Vec<ScriptedReply> {
    vec![
        ScriptedReply::tool_calls("", vec![bash_call("call_1", first)]),
        ScriptedReply::tool_calls("", vec![bash_call("call_2", second)]),
        ScriptedReply::text("done"),
    ]
}

/// The policy-context messages of one request the model received, in order.
fn policy_messages(request: &Value) -> Vec<String> {
    messages(request)
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.starts_with("[sandbox:policy]"))
        .map(str::to_owned)
        .collect()
}

fn messages(request: &Value) -> &Vec<Value> {
    request["messages"].as_array().unwrap()
}

/// Where in `request` the message satisfying `which` is.
fn position(request: &Value, which: impl Fn(&Value) -> bool) -> usize {
    messages(request)
        .iter()
        .position(which)
        .unwrap_or_else(|| panic!("no such message in {request}"))
}

fn is_policy_naming(m: &Value, mode: &str) -> bool {
    m["content"].as_str().is_some_and(|c| {
        c.starts_with("[sandbox:policy]") && c.contains(&format!("Sandbox mode: {mode} ("))
    })
}

/// The logged result of `call_id`: its content and whether it failed.
fn result_of(session: &Session, call_id: &str) -> (String, bool) {
    session.with_records(|r| {
        r.iter()
            .find_map(|r| match &r.event {
                Event::ToolResult {
                    call_id: c,
                    content,
                    is_error,
                    ..
                } if c == call_id => Some((content.clone(), *is_error)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no result for {call_id}"))
    })
}

/// The `sandbox: ...` line of a rendered result.
fn sandbox_line(content: &str) -> &str {
    content
        .lines()
        .find(|l| l.starts_with("sandbox: "))
        .unwrap_or_else(|| panic!("no sandbox line in {content}"))
}

/// The switch is committed while `call_1` runs: after the model asked for
/// it and before its result, in the log that is the store.
fn assert_switch_committed_during_the_first_call(session: &Session) {
    let (asked, switched, answered) = session.with_records(|r| {
        let at = |f: &dyn Fn(&Event) -> bool| {
            r.iter()
                .position(|r| f(&r.event))
                .unwrap_or_else(|| panic!("missing event in {r:?}"))
        };
        (
            at(&|e| matches!(e, Event::AssistantToolCalls { calls, .. } if calls[0].id == "call_1")),
            at(&|e| {
                matches!(
                    e,
                    Event::SandboxMode {
                        mode: SandboxMode::ReadOnly,
                        ..
                    }
                )
            }),
            at(&|e| matches!(e, Event::ToolResult { call_id, .. } if call_id == "call_1")),
        )
    });
    assert!(
        asked < switched && switched < answered,
        "call_1 asked at {asked}, switch at {switched}, call_1 answered at {answered}"
    );
}

// ---- the agent layer: stamps and policy-context messages -------------------

/// One run as the executor was handed it and as it came back.
#[derive(Debug)]
struct Run {
    command: String,
    /// The complete policy the bash tool stamped on the call.
    stamped: Option<ExecutionPolicy>,
    /// The mode the run's own result facts name.
    ran_under: Option<SandboxMode>,
}

/// Parks a run until the test lets it go.
struct Hold {
    /// Told (with the run's stamp) once the run reached the executor.
    reached: oneshot::Sender<Option<ExecutionPolicy>>,
    release: oneshot::Receiver<()>,
}

/// The real executor, observed: every run's policy is recorded, and the
/// next run can be held before it starts. It decides nothing.
struct Recording {
    inner: SandboxedExecutor,
    runs: Mutex<Vec<Run>>,
    hold_next: Mutex<Option<Hold>>,
}

impl ShellExecutor for Recording {
    fn confines(&self) -> bool {
        self.inner.confines()
    }

    fn interpreter(&self) -> &Interpreter {
        self.inner.interpreter()
    }

    fn resolve(&self, request: ShellRequest) -> ShellSpec {
        self.inner.resolve(request)
    }

    fn run(&self, spec: ShellSpec) -> BoxFuture<'_, Result<ShellResult, ShellError>> {
        Box::pin(async move {
            let command = match &spec.request.command {
                Command::Shell(c) => c.clone(),
                other => panic!("the bash tool hands over a command string, not {other:?}"),
            };
            let stamped = Some(spec.policy.clone());
            let hold = self.hold_next.lock().unwrap().take();
            if let Some(hold) = hold {
                hold.reached.send(stamped.clone()).unwrap();
                hold.release.await.unwrap();
            }
            let result = self.inner.run(spec).await;
            self.runs.lock().unwrap().push(Run {
                command,
                stamped,
                ran_under: result
                    .as_ref()
                    .ok()
                    .and_then(|r| r.sandbox.as_ref())
                    .map(|f| f.mode),
            });
            result
        })
    }

    fn start(&self, spec: ShellSpec) -> Result<JobHandle, ShellError> {
        self.inner.start(spec)
    }
}

#[tokio::test]
async fn a_switch_during_a_running_call_reaches_the_next_stamp_and_policy_message_only() {
    let Some(provider) = provider(BackendPreference::Landlock) else {
        return;
    };
    let w = world();
    let server = ScriptedServer::start(script("echo first", "echo second")).unwrap();
    let policy = policy(&w.ws);
    let (reached_tx, reached) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    let exec = Arc::new(Recording {
        inner: SandboxedExecutor::new(provider, policy.resolve(None, None)),
        runs: Mutex::default(),
        hold_next: Mutex::new(Some(Hold {
            reached: reached_tx,
            release: release_rx,
        })),
    });
    let (agent, presets) = compose(&server, policy.clone(), exec.clone());
    let session = w.store.create(&w.ws).unwrap();

    let switch = async {
        // A prompt that ends before its first call reaches the executor
        // drops the sender: this fails instead of waiting forever.
        let stamped = reached.await.expect("the first call reached the executor");
        assert_eq!(stamped.map(|p| p.mode), Some(SandboxMode::WorkspaceWrite));
        assert_eq!(presets.select(&session, "read-only").unwrap(), 1);
        assert_eq!(policy.effective_mode(Some(&session)), SandboxMode::ReadOnly);
        release.send(()).unwrap();
    };
    let cancel = Cancel::default();
    let (stop, ()) = tokio::join!(
        agent.prompt(&session, "run two commands", &Silent, &cancel),
        switch
    );
    assert_eq!(stop.unwrap(), StopReason::EndTurn);
    assert_switch_committed_during_the_first_call(&session);

    // The stamps: the running call kept the mode it started with, the next
    // call carries the new one; each ran under its stamp.
    let runs = exec.runs.lock().unwrap();
    let seen: Vec<(&str, Option<SandboxMode>, Option<SandboxMode>)> = runs
        .iter()
        .map(|r| {
            (
                r.command.as_str(),
                r.stamped.as_ref().map(|p| p.mode),
                r.ran_under,
            )
        })
        .collect();
    let ww = Some(SandboxMode::WorkspaceWrite);
    let ro = Some(SandboxMode::ReadOnly);
    assert_eq!(
        seen,
        [("echo first", ww, ww), ("echo second", ro, ro)],
        "{runs:?}"
    );
    drop(runs);
    let (first, failed) = result_of(&session, "call_1");
    assert!(!failed, "{first}");
    assert!(
        sandbox_line(&first).starts_with("sandbox: workspace-write (landlock, "),
        "{first}"
    );
    let (second, failed) = result_of(&session, "call_2");
    assert!(!failed, "{second}");
    assert!(
        sandbox_line(&second).starts_with("sandbox: read-only (landlock, "),
        "{second}"
    );

    // The policy-context messages the model saw.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let before_first = policy_messages(&requests[0]);
    assert_eq!(before_first.len(), 1, "{before_first:?}");
    assert!(
        before_first[0].contains("Sandbox mode: workspace-write (configured default)."),
        "{}",
        before_first[0]
    );
    assert!(
        !before_first[0].contains("read-only"),
        "{}",
        before_first[0]
    );
    // Before the second step: one superseding snapshot naming the new
    // mode, after the running call's result; the old one stays history.
    let before_second = policy_messages(&requests[1]);
    assert_eq!(before_second.len(), 2, "{before_second:?}");
    assert_eq!(before_second[0], before_first[0]);
    assert!(
        before_second[1].contains("Sandbox mode: read-only (set for this session)."),
        "{}",
        before_second[1]
    );
    assert!(
        before_second[1].contains("may write only /dev/null"),
        "{}",
        before_second[1]
    );
    let result_1 = position(&requests[1], |m| {
        m["role"] == "tool" && m["tool_call_id"] == "call_1"
    });
    let new_policy = position(&requests[1], |m| is_policy_naming(m, "read-only"));
    assert!(
        result_1 < new_policy,
        "the new policy must follow the running call's result"
    );
    assert_eq!(new_policy, messages(&requests[1]).len() - 1);
    // Unchanged since: nothing added before the third step.
    assert_eq!(policy_messages(&requests[2]), before_second);
}

// ---- end to end: the running command keeps its confinement -----------------

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Read `fifo` to its end on a thread of its own (opening it blocks until
/// the writer comes). Never joined: if the writer never comes, the test
/// fails elsewhere rather than hang here.
fn read_fifo(fifo: PathBuf) -> oneshot::Receiver<String> {
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read_to_string(fifo).unwrap());
    });
    rx
}

async fn a_running_command_keeps_its_mode_and_the_next_is_denied(backend: BackendPreference) {
    let Some(provider) = provider(backend) else {
        return;
    };
    let w = world();
    let (started, go) = (w.ws.join("started.fifo"), w.ws.join("go.fifo"));
    mkfifo(&started);
    mkfifo(&go);
    let (before, after, second) = (w.ws.join("before"), w.ws.join("after"), w.ws.join("second"));
    let first_cmd = format!(
        "echo before > '{}' && echo started > '{}' && read -r _ < '{}' && echo after > '{}'",
        before.display(),
        started.display(),
        go.display(),
        after.display()
    );
    let second_cmd = format!("echo second > '{}'", second.display());
    let server = ScriptedServer::start(script(&first_cmd, &second_cmd)).unwrap();
    let policy = policy(&w.ws);
    let exec = Arc::new(SandboxedExecutor::new(provider, policy.resolve(None, None)));
    let (agent, presets) = compose(&server, policy.clone(), exec);
    let session = w.store.create(&w.ws).unwrap();

    let cancel = Cancel::default();
    let prompt = agent.prompt(&session, "write three files", &Silent, &cancel);
    tokio::pin!(prompt);
    let signalled = read_fifo(started.clone());
    let said = tokio::select! {
        said = signalled => said.unwrap(),
        stop = &mut prompt => panic!(
            "{backend:?}: the prompt ended before the first command signalled ({stop:?}): {:?}",
            session.records()
        ),
    };
    assert_eq!(said, "started\n");
    // The first command is running, and wrote under workspace-write.
    assert_eq!(std::fs::read_to_string(&before).unwrap(), "before\n");
    assert_eq!(presets.select(&session, "read-only").unwrap(), 1);
    // Let it go on. Not awaited: the command finishing is the proof it read
    // the line (one that died first leaves the writer blocked, harmlessly).
    std::thread::spawn(move || std::fs::write(go, b"go\n"));
    let stop = prompt.await.unwrap();
    assert_eq!(stop, StopReason::EndTurn, "{backend:?}");
    assert_switch_committed_during_the_first_call(&session);

    // The running command kept writing after the switch: it is not the
    // running call's to honour.
    let (first, failed) = result_of(&session, "call_1");
    assert!(!failed, "{backend:?}: {first}");
    assert!(!first.contains("[sandbox:"), "{backend:?}: {first}");
    assert!(
        sandbox_line(&first).starts_with("sandbox: workspace-write ("),
        "{backend:?}: {first}"
    );
    assert_eq!(std::fs::read_to_string(&after).unwrap(), "after\n");
    // The next call runs under read-only, and is denied.
    let (denied, failed) = result_of(&session, "call_2");
    assert!(failed, "{backend:?}: {denied}");
    assert!(
        denied.starts_with(&texts::denial_marker(SandboxMode::ReadOnly)),
        "{backend:?}: {denied}"
    );
    assert!(
        sandbox_line(&denied).starts_with("sandbox: read-only ("),
        "{backend:?}: {denied}"
    );
    assert!(!second.exists(), "{backend:?}: a read-only call wrote");
    // And the model was told before that step.
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{backend:?}");
    assert!(
        policy_messages(&requests[1])
            .last()
            .is_some_and(|m| m.contains("Sandbox mode: read-only (set for this session).")),
        "{backend:?}: {:?}",
        policy_messages(&requests[1])
    );
}

#[tokio::test]
async fn landlock_a_running_command_keeps_writing_after_a_switch_to_read_only() {
    a_running_command_keeps_its_mode_and_the_next_is_denied(BackendPreference::Landlock).await;
}

#[tokio::test]
async fn bwrap_a_running_command_keeps_writing_after_a_switch_to_read_only() {
    a_running_command_keeps_its_mode_and_the_next_is_denied(BackendPreference::Bwrap).await;
}
