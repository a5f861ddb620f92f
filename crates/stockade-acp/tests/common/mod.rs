//! The harness: a scripted model on loopback, the real Landlock launcher, and
//! an ACP client connected to the server over newline-delimited JSON (the
//! same framing as stdio), with every frame recorded.
#![allow(dead_code)] // each test file uses its own part of the harness

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOptionId, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, ToolCallStatus,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, Lines};
use futures::channel::mpsc;
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};

use stockade_config::Config;
use stockade_model::ModelToolCall;
use stockade_testkit::scripted::{ScriptedMessage, ScriptedReply, ScriptedServer};

/// `target/debug/landlock-run`, next to the directory of this test binary.
/// Missing: a failure in CI, a reported skip elsewhere.
pub fn launcher() -> Option<PathBuf> {
    let built = stockade_testkit::built_launcher();
    stockade_testkit::require("the built landlock-run", built.is_some());
    built
}

/// How the client answers `session/request_permission`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Allow,
    Reject,
    Cancel,
    /// Never answer (the responder is kept, so no error goes back either).
    Hold,
    /// Select this option id, whatever was asked.
    Pick(&'static str),
}

pub struct World {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub state: PathBuf,
    pub launcher: PathBuf,
    pub model: ScriptedServer,
}

/// Composition knobs a test varies.
pub struct Setup {
    pub mode: &'static str,
    /// The `[approval]` policy; `None` omits the section.
    pub approval: Option<&'static str>,
    pub presets: bool,
}

/// `stockade acp` as an editor starts it.
pub struct Binary {
    config: PathBuf,
    state: PathBuf,
    who: stockade_testkit::users::Who,
    envs: Vec<(String, String)>,
}

impl Binary {
    /// `stockade acp` with this config and state directory; stdio is the
    /// caller's to set.
    pub fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::from(
            self.who.command(stockade().expect("the stockade binary")),
        );
        cmd.args(["acp", "--config"])
            .arg(&self.config)
            .env("STOCKADE_STATE_DIR", &self.state)
            .env_remove("STOCKADE_CONFIG")
            .env_remove("STOCKADE_MODE")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .kill_on_drop(true);
        cmd
    }

    /// The server with `name=value` in its environment.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.envs.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// The real `stockade` binary (a bin of stockade-cli, built next to the
/// test binaries by `cargo test --workspace`).
pub fn stockade() -> Option<PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join(format!("stockade{}", std::env::consts::EXE_SUFFIX));
    stockade_testkit::require(
        "the stockade binary (cargo test --workspace builds it)",
        p.is_file(),
    )
    .then_some(p)
}

impl World {
    pub fn new(script: Vec<ScriptedReply>) -> Option<Self> {
        Self::new_with(|_| script)
    }

    /// A world whose script names paths in its own directory.
    pub fn new_with(script: impl FnOnce(&Path) -> Vec<ScriptedReply>) -> Option<Self> {
        let launcher = launcher()?;
        stockade()?;
        // Outside every temp root: workspace-write grants /tmp, which would
        // blur what a test shows about the workspace.
        let base = stockade_testkit::scratch_base(env!("CARGO_TARGET_TMPDIR").as_ref());
        let dir = tempfile::Builder::new()
            .prefix("acp-")
            .tempdir_in(base)
            .unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let state = dir.path().join("state");
        let model = ScriptedServer::start(script(dir.path())).unwrap();
        Some(Self {
            dir,
            ws,
            state,
            launcher,
            model,
        })
    }

    /// Hand the world's directory (workspace, state, config) to `who`.
    pub fn own(&self, who: stockade_testkit::users::Who) {
        who.own(self.dir.path());
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("stockade.toml")
    }

    pub fn config(&self, s: &Setup) -> Config {
        Config::parse(&self.config_path(), &self.config_text(s)).unwrap()
    }

    /// The config on disk, for a child process.
    pub fn write_config(&self, s: &Setup) -> PathBuf {
        std::fs::write(self.config_path(), self.config_text(s)).unwrap();
        self.config_path()
    }

    /// `deny_read = []`: the default list would name this host's home, so
    /// what a test (or a snapshot) shows would depend on the machine. A test
    /// of the lists replaces that line.
    pub fn config_text(&self, s: &Setup) -> String {
        let approval = s
            .approval
            .map_or(String::new(), |p| format!("[approval]\npolicy = \"{p}\"\n"));
        let presets = if s.presets { "[presets]\n" } else { "" };
        format!(
            r#"
[sandbox]
backend = "landlock"
launcher_path = "{launcher}"
[policy]
mode = "{mode}"
deny_read = []
[bash]
executor = "sandboxed"
[fs]
provider = "sandboxed"
{approval}{presets}
[model]
base_url = "{base_url}"
model = "scripted"
api_key_env = ""
max_retries = 0
"#,
            launcher = self.launcher.display(),
            mode = s.mode,
            base_url = self.model.base_url(),
        )
    }

    /// The real `stockade acp` binary for this setup (its config on disk).
    pub fn server(&self, s: &Setup) -> Binary {
        Binary {
            config: self.write_config(s),
            state: self.state.clone(),
            who: stockade_testkit::users::Who::Me,
            envs: Vec::new(),
        }
    }

    /// The binary with this setup's config written at `config` (text passed
    /// through `edit`) and its session logs under `state`.
    pub fn server_at(
        &self,
        s: &Setup,
        config: &Path,
        state: &Path,
        edit: impl FnOnce(String) -> String,
    ) -> Binary {
        std::fs::write(config, edit(self.config_text(s))).unwrap();
        Binary {
            config: config.to_path_buf(),
            state: state.to_path_buf(),
            who: stockade_testkit::users::Who::Me,
            envs: Vec::new(),
        }
    }

    /// The `messages` of every model request, normalised.
    pub fn model_messages(&self) -> Vec<Value> {
        self.model
            .requests()
            .into_iter()
            .map(|r| r["messages"].clone())
            .collect()
    }

    /// Tmp paths out, so snapshots hold across runs.
    pub fn normalise(&self, text: &str) -> String {
        let base = self.dir.path().display().to_string();
        let mut out = text.replace(&base, "<tmp>");
        out = out.replace(&self.model.base_url(), "<model>");
        // Session ids: 32 lowercase hex digits.
        let mut result = String::new();
        let bytes: Vec<char> = out.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            let run = bytes[i..]
                .iter()
                .take_while(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                .count();
            if run == 32 {
                result.push_str("<session>");
                i += run;
            } else if run > 0 {
                result.extend(&bytes[i..i + run]);
                i += run;
            } else {
                result.push(bytes[i]);
                i += 1;
            }
        }
        result
    }
}

/// One scripted tool call in one model reply, streamed whole (one chunk per
/// text) so recorded frames stay short.
pub fn call(id: &str, name: &str, args: Value) -> ScriptedReply {
    ScriptedReply::Message(ScriptedMessage {
        content: String::new(),
        reasoning: None,
        tool_calls: vec![ModelToolCall::new(id, name, args.to_string())],
        finish_reason: None,
        chunk_chars: 100_000,
    })
}

pub fn say(text: &str) -> ScriptedReply {
    ScriptedReply::Message(ScriptedMessage {
        content: text.into(),
        reasoning: None,
        tool_calls: Vec::new(),
        finish_reason: None,
        chunk_chars: 100_000,
    })
}

pub fn touch(file: &str) -> Value {
    json!({ "command": format!("touch {file}"), "description": "create a marker" })
}

pub fn escalated(mut args: Value, to: &str) -> Value {
    args["sandbox_permissions"] = json!(to);
    args["justification"] = json!("the task needs this file");
    args
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    ToAgent,
    ToClient,
}

/// Everything the client saw and sent.
#[derive(Default)]
pub struct Seen {
    pub frames: Mutex<Vec<(Dir, String)>>,
    pub updates: Mutex<Vec<SessionNotification>>,
    pub asks: Mutex<Vec<RequestPermissionRequest>>,
    pub held: Mutex<Vec<Responder<RequestPermissionResponse>>>,
}

impl Seen {
    pub fn updates(&self) -> Vec<SessionNotification> {
        self.updates.lock().unwrap().clone()
    }

    pub fn asks(&self) -> Vec<RequestPermissionRequest> {
        self.asks.lock().unwrap().clone()
    }

    /// The statuses one tool call went through, in order.
    pub fn statuses(&self, call_id: &str) -> Vec<ToolCallStatus> {
        let mut out = Vec::new();
        for n in self.updates() {
            match n.update {
                SessionUpdate::ToolCall(c) if &*c.tool_call_id.0 == call_id => out.push(c.status),
                SessionUpdate::ToolCallUpdate(u) if &*u.tool_call_id.0 == call_id => {
                    out.extend(u.fields.status);
                }
                _ => {}
            }
        }
        out
    }

    /// The frames of one direction, request ids numbered by first
    /// appearance, tmp paths and session ids replaced. A running command's
    /// live output (a `tool_call_update` with content and no status) is
    /// left out: how much of it there is depends on timing.
    pub fn transcript(&self, world: &World, dir: Dir) -> String {
        let frames = self.frames.lock().unwrap().clone();
        let mut ids: Vec<String> = Vec::new();
        let mut out = String::new();
        for (d, line) in &frames {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if let Some(id) = v.get("id").and_then(Value::as_str).map(str::to_owned) {
                let n = ids.iter().position(|i| *i == id).unwrap_or_else(|| {
                    ids.push(id.clone());
                    ids.len() - 1
                });
                v["id"] = json!(format!("<id-{n}>"));
            }
            if *d == dir && !is_live_output(&v) {
                out.push_str(&world.normalise(&v.to_string()));
                out.push('\n');
            }
        }
        out
    }
}

/// A `session/update` showing a running call's output so far.
pub fn is_live_output(frame: &Value) -> bool {
    let u = &frame["params"]["update"];
    u["sessionUpdate"] == "tool_call_update"
        && u.get("status").is_none()
        && u.get("content").is_some()
}

pub fn pipe(
    seen: Arc<Seen>,
    dir: Dir,
) -> (
    impl futures::Sink<String, Error = io::Error> + Send + Unpin + 'static,
    impl futures::Stream<Item = io::Result<String>> + Send + Unpin + 'static,
) {
    let (tx, rx) = mpsc::unbounded::<String>();
    let sink = tx.sink_map_err(io::Error::other).with(move |line: String| {
        seen.frames.lock().unwrap().push((dir, line.clone()));
        futures::future::ready(Ok::<_, io::Error>(line))
    });
    (Box::pin(sink), rx.map(Ok))
}

impl Binary {
    /// The server run as `who` (the world's directory must be theirs:
    /// [`World::own`]).
    pub fn run_as(mut self, who: stockade_testkit::users::Who) -> Self {
        self.who = who;
        self
    }

    pub fn config(&self) -> &Path {
        &self.config
    }

    /// Run `stockade acp` with no client at all (stdin at end of input): a
    /// server that starts ends at once, one refused at startup says why.
    pub fn start_alone(&self) -> std::process::Output {
        let bin = stockade().expect("the stockade binary");
        std::process::Command::new(bin)
            .args(["acp", "--config"])
            .arg(&self.config)
            .env("STOCKADE_STATE_DIR", &self.state)
            .env_remove("STOCKADE_CONFIG")
            .env_remove("STOCKADE_MODE")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("stockade acp")
    }
}

/// Start the real `stockade acp` for `server`, with its stdin and stdout as
/// an ACP transport whose frames are recorded in `seen`. `stderr` is where
/// the server's log goes.
pub fn spawn(
    server: &Binary,
    seen: &Arc<Seen>,
    stderr: std::process::Stdio,
) -> (tokio::process::Child, impl ConnectTo<Client> + 'static) {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    let mut child = server
        .command()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("stockade acp");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tap_out, tap_in) = (seen.clone(), seen.clone());
    let outgoing = futures::sink::unfold(stdin, move |mut stdin, line: String| {
        tap_out
            .frames
            .lock()
            .unwrap()
            .push((Dir::ToAgent, line.clone()));
        async move {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await?;
            Ok::<_, io::Error>(stdin)
        }
    });
    let incoming = futures::stream::unfold(BufReader::new(stdout).lines(), |mut lines| async {
        match lines.next_line().await {
            Ok(Some(l)) => Some((Ok(l), lines)),
            Ok(None) => None,
            Err(e) => Some((Err(e), lines)),
        }
    })
    .inspect(move |l| {
        if let Ok(l) = l {
            tap_in
                .frames
                .lock()
                .unwrap()
                .push((Dir::ToClient, l.clone()));
        }
    });
    (child, Lines::new(Box::pin(outgoing), Box::pin(incoming)))
}

/// Start the real `stockade acp` and talk to it over its stdio as a client
/// that answers permission requests with `answer`; run `body`, then hang up.
/// Bounded, so a hang fails the test instead of stalling the suite.
pub async fn run<R>(
    server: Binary,
    answer: Answer,
    seen: Arc<Seen>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, Error>,
) -> R {
    let (mut child, transport) = spawn(&server, &seen, std::process::Stdio::null());
    let r = tokio::time::timeout(
        Duration::from_secs(120),
        client(transport, answer, seen, body),
    )
    .await
    .expect("the ACP conversation timed out")
    .expect("the client failed");
    // The transport is gone with the client: stdin is closed, the server ends.
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    r
}

/// The client side alone, on any transport (a child's stdio too).
pub async fn client<R>(
    transport: impl ConnectTo<Client> + 'static,
    answer: Answer,
    seen: Arc<Seen>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, Error>,
) -> Result<R, Error> {
    let (s1, s2) = (seen.clone(), seen);
    Client
        .v1()
        .name("test-client")
        .on_receive_notification(
            async move |n: SessionNotification, _cx: ConnectionTo<Agent>| {
                s1.updates.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: RequestPermissionRequest,
                        responder: Responder<RequestPermissionResponse>,
                        _cx: ConnectionTo<Agent>| {
                s2.asks.lock().unwrap().push(r);
                let outcome = match answer {
                    Answer::Allow => RequestPermissionOutcome::Selected(
                        SelectedPermissionOutcome::new(PermissionOptionId::new("allow_once")),
                    ),
                    Answer::Reject => RequestPermissionOutcome::Selected(
                        SelectedPermissionOutcome::new(PermissionOptionId::new("reject_once")),
                    ),
                    Answer::Cancel => RequestPermissionOutcome::Cancelled,
                    Answer::Pick(id) => RequestPermissionOutcome::Selected(
                        SelectedPermissionOutcome::new(PermissionOptionId::new(id)),
                    ),
                    Answer::Hold => {
                        s2.held.lock().unwrap().push(responder);
                        return Ok(());
                    }
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, body)
        .await
}

/// Initialize, open one session in the workspace, send one prompt `text`:
/// the stop reason.
pub async fn one_prompt(
    w: &World,
    server: Binary,
    answer: Answer,
    seen: Arc<Seen>,
    text: &str,
) -> agent_client_protocol::v1::schema::StopReason {
    use agent_client_protocol::schema::ProtocolVersion;
    use agent_client_protocol::v1::schema::{InitializeRequest, NewSessionRequest};
    let ws = w.ws.clone();
    let text = text.to_owned();
    run(server, answer, seen, async move |cx| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        assert!(init.agent_capabilities.load_session);
        let s = cx
            .send_request(NewSessionRequest::new(&ws))
            .block_task()
            .await?;
        Ok(cx
            .send_request(prompt(&s.session_id, &text))
            .block_task()
            .await?
            .stop_reason)
    })
    .await
}

pub fn prompt(id: &agent_client_protocol::v1::schema::SessionId, text: &str) -> PromptRequest {
    PromptRequest::new(id.clone(), vec![ContentBlock::from(text.to_owned())])
}

/// The text of the last message of a model request (a tool result).
pub fn last_content(messages: &Value) -> String {
    messages
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

pub fn policy_messages(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.starts_with("[sandbox:policy]"))
        .map(str::to_owned)
        .collect()
}

/// Every session log under `state`: (header, events), in no set order.
pub fn session_logs(state: &Path) -> Vec<(Value, Vec<Value>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(state.join("sessions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap());
        let header = lines.next().unwrap();
        out.push((header, lines.map(|r| r["event"].clone()).collect()));
    }
    out
}

/// `initialize`, then `session/new` in `cwd`: the new session's id.
pub async fn open_session(
    cx: &ConnectionTo<Agent>,
    cwd: &Path,
) -> Result<agent_client_protocol::v1::schema::SessionId, Error> {
    use agent_client_protocol::schema::ProtocolVersion;
    use agent_client_protocol::v1::schema::{InitializeRequest, NewSessionRequest};
    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await?;
    Ok(cx
        .send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await?
        .session_id)
}
