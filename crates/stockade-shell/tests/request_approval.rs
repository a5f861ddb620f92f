//! The SDK's callback on an executor request (`ShellRequest::with_approval`):
//! asked, while the confined command waits, about a host not on the list
//! (both backends) and a place outside the writable roots (supervised
//! Landlock), in place of the approval the provider keeps for the
//! session; through the real runners, as root and (when we are root) as
//! `nobody`. A request without one falls back to the session's.
//!
//! The proxy resolves `.test` names through the test resolver, read from
//! the environment when it starts, and the callback lives in the process
//! that confines: each leg re-runs this test binary as its user.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_core::{
    ExecutionPolicy, NetworkMode, NetworkPolicy, PathOp, RunAnswer, RunApproval, RunApprover,
    RunQuestion, RunReply, SandboxMode,
};
use stockade_local::{
    BackendPreference, HostAnswer, HostApproval, HostGrants, HostQuestion, HostReply,
    LocalProvider, LocalSettings,
};
use stockade_shell::{SandboxedExecutor, ShellExecutor, ShellRequest};
use stockade_testkit::users::{Who, users};

const INNER_BACKEND: &str = "STOCKADE_TEST_REQUEST_APPROVAL_BACKEND";
const INNER_PORT: &str = "STOCKADE_TEST_REQUEST_APPROVAL_PORT";
const INNER_WS: &str = "STOCKADE_TEST_REQUEST_APPROVAL_WS";
const INNER_OUT: &str = "STOCKADE_TEST_REQUEST_APPROVAL_OUT";
const INNER_LAUNCHER: &str = "STOCKADE_TEST_REQUEST_APPROVAL_LAUNCHER";

const SESSION: &str = "s1";
const NAME: &str = "a_request_s_own_approver_is_asked_while_the_command_waits";

#[test]
fn a_request_s_own_approver_is_asked_while_the_command_waits() {
    if std::env::var_os(INNER_BACKEND).is_some() {
        inner();
        return;
    }
    let curl = Command::new("sh")
        .args(["-c", "command -v curl"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !stockade_testkit::require("curl", curl) {
        return;
    }
    let launcher = stockade_testkit::built_launcher();
    if !stockade_testkit::require("landlock-run", launcher.is_some()) {
        return;
    }
    let mut backends = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        backends.push("bwrap");
    }
    let server = stockade_testkit::http::ok_server();
    let exe = std::env::current_exe().unwrap();
    for who in users() {
        for backend in &backends {
            let scratch = Scratch::new(who);
            let out = who
                .command(&exe)
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(INNER_BACKEND, backend)
                .env(INNER_PORT, server.port.to_string())
                .env(INNER_WS, &scratch.ws)
                .env(INNER_OUT, &scratch.out)
                .env(INNER_LAUNCHER, launcher.as_ref().unwrap())
                .env(
                    stockade_local::ENV_TEST_RESOLVE,
                    format!("unlisted.test=127.0.0.1:{}", server.port),
                )
                .env("XDG_RUNTIME_DIR", &scratch.state)
                .env("HOME", &scratch.state)
                .env_remove("TMPDIR")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let text = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{backend} as {who:?}:\n{text}");
            assert!(text.contains("1 passed"), "{backend} as {who:?}:\n{text}");
            // Once: the command was never run again.
            let counter = fs::read_to_string(scratch.ws.join("counter")).unwrap();
            assert_eq!(counter, "1\n", "{backend} as {who:?}");
            let written = scratch.out.join("a").exists();
            assert_eq!(written, *backend == "landlock", "{backend} as {who:?}");
            assert!(!scratch.out.join("b").exists(), "{backend} as {who:?}");
        }
    }
}

struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
    state: PathBuf,
}

impl Scratch {
    fn new(who: Who) -> Scratch {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        stockade_testkit::open_to_all(&base);
        let dir = tempfile::Builder::new()
            .prefix("request-approval-")
            .tempdir_in(base)
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let ws = dir.path().join("ws");
        let out = dir.path().join("outside");
        let state = dir.path().join("state");
        for d in [&ws, &out, &state] {
            fs::create_dir(d).unwrap();
        }
        fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
        who.own(dir.path());
        Scratch {
            _dir: dir,
            ws,
            out,
            state,
        }
    }
}

/// Answers from another thread, later (the command is held meanwhile):
/// the host and `OUT/a` allowed, everything else refused.
struct Callback(Arc<Mutex<Vec<RunQuestion>>>);

impl RunApprover for Callback {
    fn ask(&self, q: RunQuestion, reply: RunReply) {
        self.0.lock().unwrap().push(q.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            assert!(reply.is_pending());
            let allow = match &q {
                RunQuestion::Host { host, .. } => host == "unlisted.test",
                RunQuestion::Path { path, .. } => path.ends_with("a"),
                _ => false,
            };
            reply.answer(if allow {
                RunAnswer::Allow
            } else {
                RunAnswer::Refuse
            });
        });
    }
}

fn inner() {
    let var = |k: &str| std::env::var_os(k).unwrap();
    let name = var(INNER_BACKEND).into_string().unwrap();
    let backend: BackendPreference = name.parse().unwrap();
    let landlock = name == "landlock";
    let port: u16 = var(INNER_PORT).to_str().unwrap().parse().unwrap();
    let (ws, out) = (PathBuf::from(var(INNER_WS)), PathBuf::from(var(INNER_OUT)));
    let provider = Arc::new(
        LocalProvider::new(LocalSettings {
            backend,
            launcher_path: Some(PathBuf::from(var(INNER_LAUNCHER))),
            ..Default::default()
        })
        .unwrap(),
    );
    // The session's own approval refuses everything and records it: a
    // request with a callback never reaches it.
    let by_session: Arc<Mutex<Vec<HostQuestion>>> = Arc::default();
    let record = Arc::clone(&by_session);
    let session_approver = move |q: HostQuestion, r: HostReply| {
        record.lock().unwrap().push(q);
        r.answer(HostAnswer::Refuse);
    };
    provider.set_host_approval(
        Some(SESSION),
        Some(HostApproval::new(
            Arc::new(session_approver),
            Arc::new(HostGrants::new()),
        )),
    );
    let mut policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    // 127.0.0.1 is listed so that the approved name, which the test
    // resolver maps to the loopback server, passes the address check.
    policy.network = NetworkPolicy::new(NetworkMode::AllowListed, vec!["127.0.0.1".into()]);
    policy.session = Some(SESSION.to_owned());
    let exec = SandboxedExecutor::new(provider, policy);

    let asked: Arc<Mutex<Vec<RunQuestion>>> = Arc::default();
    let approval = RunApproval::new(Arc::new(Callback(Arc::clone(&asked))))
        .with_timeout(Duration::from_secs(20));
    let (a, b) = (out.join("a"), out.join("b"));
    let script = format!(
        "echo 1 >> counter; curl -sS --max-time 30 http://unlisted.test:{port}/; echo; \
         echo hi > '{}' && echo wrote-a; echo hi > '{}' || echo refused-b",
        a.display(),
        b.display()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = rt
        .block_on(exec.run(
            exec.resolve(ShellRequest::new(script.clone(), &ws).with_approval(approval.clone())),
        ))
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout.bytes).into_owned();
    let stderr = String::from_utf8_lossy(&result.stderr.bytes).into_owned();
    let mut want = vec![RunQuestion::Host {
        host: "unlisted.test".into(),
        port,
    }];
    if landlock {
        assert_eq!(stdout, "ok\nwrote-a\nrefused-b\n", "{stderr}");
        want.push(RunQuestion::Path {
            op: PathOp::Write,
            path: a,
        });
        want.push(RunQuestion::Path {
            op: PathOp::Write,
            path: b,
        });
    } else {
        // No channel under bwrap: refused as today, never asked.
        assert_eq!(stdout, "ok\nrefused-b\n", "{stderr}");
    }
    assert_eq!(*asked.lock().unwrap(), want);
    assert!(by_session.lock().unwrap().is_empty());

    // The next request of the session, without a callback: the session's
    // approval is asked (and refuses), the request's is not.
    let curl = format!(
        "curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}' http://unlisted.test:{port}/"
    );
    let result = rt
        .block_on(exec.run(exec.resolve(ShellRequest::new(curl, &ws))))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&result.stdout.bytes),
        "403",
        "{}",
        String::from_utf8_lossy(&result.stderr.bytes)
    );
    assert_eq!(by_session.lock().unwrap().len(), 1);
    assert_eq!(asked.lock().unwrap().len(), want.len());
}
