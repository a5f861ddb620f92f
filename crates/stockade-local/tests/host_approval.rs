//! A host not on the list, asked about while the confined command's
//! connection is held, through the real bwrap and Landlock backends, as
//! root and (when we are root) as `nobody`.
//!
//! The proxy runs in the process that confines, and resolves `.test` names
//! through the test resolver ([`stockade_local::ENV_TEST_RESOLVE`]), read
//! from the environment when it starts; so each leg re-runs this test
//! binary (as the leg's user) with that variable set, and the child does
//! the confining. Only loopback is used: the server is this test's own.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_core::status::RunnerStatus;
use stockade_core::{ConfiningMode, NetworkMode, NetworkPolicy, SandboxPolicy, SandboxProvider};
use stockade_local::{
    BackendPreference, HostAnswer, HostApproval, HostGrants, HostQuestion, HostReply,
    LocalProvider, LocalSettings,
};
use stockade_testkit::users::{Who, users};

/// Set in the child: the backend to confine with, and the server's port.
const INNER_BACKEND: &str = "STOCKADE_TEST_APPROVAL_BACKEND";
const INNER_PORT: &str = "STOCKADE_TEST_APPROVAL_PORT";
const INNER_WS: &str = "STOCKADE_TEST_APPROVAL_WS";
const INNER_LAUNCHER: &str = "STOCKADE_TEST_APPROVAL_LAUNCHER";

const SESSION: &str = "s1";

#[test]
fn a_held_connection_to_an_unlisted_host_goes_through_once_approved() {
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
        backends.insert(0, "bwrap");
    }
    let server = stockade_testkit::http::ok_server();
    let exe = std::env::current_exe().unwrap();
    for who in users() {
        for backend in &backends {
            let scratch = Scratch::new(who);
            let out = who
                .command(&exe)
                .args([
                    "--exact",
                    "a_held_connection_to_an_unlisted_host_goes_through_once_approved",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(INNER_BACKEND, backend)
                .env(INNER_PORT, server.port.to_string())
                .env(INNER_WS, &scratch.ws)
                .env(INNER_LAUNCHER, launcher.as_ref().unwrap())
                .env(
                    stockade_local::ENV_TEST_RESOLVE,
                    format!(
                        "unlisted.test=127.0.0.1:{p},refused.test=127.0.0.1:{p}",
                        p = server.port
                    ),
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
            // The child ran the test, not an empty filter.
            assert!(text.contains("1 passed"), "{backend} as {who:?}:\n{text}");
        }
    }
}

struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
}

impl Scratch {
    fn new(who: Who) -> Scratch {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        stockade_testkit::open_to_all(&base);
        let dir = tempfile::Builder::new()
            .prefix("host-approval-")
            .tempdir_in(base)
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let ws = dir.path().join("ws");
        let state = dir.path().join("state");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(&state).unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
        who.own(dir.path());
        Scratch {
            _dir: dir,
            ws,
            state,
        }
    }
}

/// The child's half: confine `curl` under allow-listed with an approver
/// that allows `unlisted.test` once, after a wait, and refuses
/// `refused.test`.
fn inner() {
    let var = |k: &str| std::env::var_os(k).unwrap();
    let backend: BackendPreference = var(INNER_BACKEND).to_str().unwrap().parse().unwrap();
    let port: u16 = var(INNER_PORT).to_str().unwrap().parse().unwrap();
    let ws = PathBuf::from(var(INNER_WS));
    let provider = LocalProvider::new(LocalSettings {
        backend,
        launcher_path: Some(PathBuf::from(var(INNER_LAUNCHER))),
        ..Default::default()
    })
    .unwrap();
    let asked: Arc<Mutex<Vec<HostQuestion>>> = Arc::default();
    let record = Arc::clone(&asked);
    let approver = move |q: HostQuestion, r: HostReply| {
        record.lock().unwrap().push(q.clone());
        // Answered from elsewhere, later: the connection is held meanwhile.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let a = match q.host.as_str() {
                "unlisted.test" => HostAnswer::AllowOnce,
                _ => HostAnswer::Refuse,
            };
            r.answer(a);
        });
    };
    let grants = Arc::new(HostGrants::new());
    provider.set_host_approval(
        Some(SESSION),
        Some(HostApproval::new(Arc::new(approver), Arc::clone(&grants))),
    );
    // 127.0.0.1 is listed so that the approved names, which the test
    // resolver maps to the loopback server, pass the address check.
    let network = NetworkPolicy::new(NetworkMode::AllowListed, vec!["127.0.0.1".into()]);
    let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws).with_network(network);
    // Through a CONNECT tunnel (-p) and as a plain request, then a host
    // the user refuses: one question each.
    let script = format!(
        "curl -sS --max-time 30 -p http://unlisted.test:{port}/; echo; \
         curl -sS --max-time 30 http://unlisted.test:{port}/; echo; \
         curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}' http://refused.test:{port}/"
    );
    let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), script.clone().into()];
    let session = policy.clone().with_session(Some(SESSION.to_owned()));
    let c = provider.confine(&argv, &session).unwrap();
    let out = stockade_testkit::run_confined(&c, &ws);
    let stdout = String::from_utf8_lossy(&out.output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.output.stderr).into_owned();
    assert_eq!(out.status, RunnerStatus::Started, "{stderr}");
    assert_eq!(stdout, "ok\nok\n403", "{stderr}");
    let questions: Vec<(String, u16)> = asked
        .lock()
        .unwrap()
        .iter()
        .map(|q| (q.host.clone(), q.port))
        .collect();
    assert_eq!(
        questions,
        [
            ("unlisted.test".to_owned(), port),
            ("refused.test".to_owned(), port)
        ]
    );
    let log = c.network_log.clone().unwrap();
    assert_eq!(log.0.refused(), ["refused.test"]);
    assert_eq!(grants.refused(), ["refused.test"]);
    drop(c);

    // The next command of the session: asked again about the host allowed
    // once, not about the refused one; a run of another session, or of no
    // session, is refused at once as today.
    let c = provider.confine(&argv, &session).unwrap();
    let out = stockade_testkit::run_confined(&c, &ws);
    assert_eq!(
        String::from_utf8_lossy(&out.output.stdout),
        "ok\nok\n403",
        "{}",
        String::from_utf8_lossy(&out.output.stderr)
    );
    assert_eq!(asked.lock().unwrap().len(), 3);
    for other in [Some("s2".to_owned()), None] {
        let c = provider
            .confine(&argv, &policy.clone().with_session(other))
            .unwrap();
        let out = stockade_testkit::run_confined(&c, &ws);
        let stdout = String::from_utf8_lossy(&out.output.stdout);
        assert!(stdout.ends_with("403"), "{stdout}");
        assert!(!stdout.contains("ok"), "{stdout}");
        assert_eq!(asked.lock().unwrap().len(), 3);
    }
}
