//! A path outside the writable roots, asked about while the confined
//! command waits, through the real Landlock rung (supervised) and the
//! session's [`PathApprover`], as root and (when we are root) as `nobody`.
//! Under bwrap the same session has no channel: refused as today, never
//! asked.
//!
//! Each leg re-runs this test binary as the leg's user, which does the
//! confining (the approver's thread lives in the confining process).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_core::status::RunnerStatus;
use stockade_core::{ConfiningMode, SandboxPolicy, SandboxProvider};
use stockade_local::{
    BackendPreference, LocalProvider, LocalSettings, PathAnswer, PathApproval, PathOp,
    PathQuestion, PathReply,
};
use stockade_testkit::users::{Who, users};

const INNER_BACKEND: &str = "STOCKADE_TEST_PATH_APPROVAL_BACKEND";
const INNER_WS: &str = "STOCKADE_TEST_PATH_APPROVAL_WS";
const INNER_OUT: &str = "STOCKADE_TEST_PATH_APPROVAL_OUT";
const INNER_LAUNCHER: &str = "STOCKADE_TEST_PATH_APPROVAL_LAUNCHER";

const SESSION: &str = "s1";
const NAME: &str = "a_path_outside_is_written_once_approved_under_supervised_landlock";

#[test]
fn a_path_outside_is_written_once_approved_under_supervised_landlock() {
    if std::env::var_os(INNER_BACKEND).is_some() {
        inner();
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
    let exe = std::env::current_exe().unwrap();
    for who in users() {
        for backend in &backends {
            let scratch = Scratch::new(who);
            let out = who
                .command(&exe)
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(INNER_BACKEND, backend)
                .env(INNER_WS, &scratch.ws)
                .env(INNER_OUT, &scratch.out)
                .env(INNER_LAUNCHER, launcher.as_ref().unwrap())
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
            let counter = fs::read_to_string(scratch.ws.join("counter")).unwrap();
            assert_eq!(counter, "1\n", "{backend} as {who:?}");
            let written = scratch.out.join("a").exists();
            assert_eq!(written, *backend == "landlock", "{backend} as {who:?}");
            assert!(!scratch.out.join("b").exists());
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
            .prefix("path-approval-")
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

/// The child's half: a command that appends to a counter in the
/// workspace, then writes `OUT/a` (allowed, this path, answered later
/// from another thread) and `OUT/b` (refused).
fn inner() {
    let var = |k: &str| PathBuf::from(std::env::var_os(k).unwrap());
    let backend: BackendPreference = std::env::var(INNER_BACKEND).unwrap().parse().unwrap();
    let landlock = std::env::var(INNER_BACKEND).unwrap() == "landlock";
    let (ws, out) = (var(INNER_WS), var(INNER_OUT));
    let provider = LocalProvider::new(LocalSettings {
        backend,
        launcher_path: Some(var(INNER_LAUNCHER)),
        ..Default::default()
    })
    .unwrap();
    let asked: Arc<Mutex<Vec<PathQuestion>>> = Arc::default();
    let record = Arc::clone(&asked);
    let approver = move |q: PathQuestion, r: PathReply| {
        record.lock().unwrap().push(q.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            assert!(r.is_pending());
            let a = if q.path.ends_with("a") {
                PathAnswer::AllowPath
            } else {
                PathAnswer::Refuse
            };
            r.answer(a);
        });
    };
    provider.set_path_approval(
        Some(SESSION),
        Some(PathApproval::new(Arc::new(approver)).with_timeout(Duration::from_secs(20))),
    );
    let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws)
        .with_session(Some(SESSION.to_owned()));
    let (a, b) = (out.join("a"), out.join("b"));
    let script = format!(
        "echo 1 >> counter; echo hi > '{}' && echo wrote-a; echo hi > '{}' || echo refused-b",
        a.display(),
        b.display()
    );
    let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), script.into()];
    let c = provider.confine(&argv, &policy).unwrap();
    assert_eq!(c.backend, if landlock { "landlock" } else { "bwrap" });
    let has_channel = c.argv.iter().any(|a| a == "--ask-fd");
    assert_eq!(has_channel, landlock, "{:?}", c.argv);
    let run = stockade_testkit::run_confined(&c, &ws);
    let stdout = String::from_utf8_lossy(&run.output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.output.stderr).into_owned();
    assert_eq!(run.status, RunnerStatus::Started, "{stderr}");
    let questions: Vec<(PathOp, PathBuf)> = asked
        .lock()
        .unwrap()
        .iter()
        .map(|q| (q.op, q.path.clone()))
        .collect();
    if landlock {
        assert_eq!(stdout, "wrote-a\nrefused-b\n", "{stderr}");
        assert_eq!(questions, [(PathOp::Write, a), (PathOp::Write, b)]);
    } else {
        assert_eq!(stdout, "refused-b\n", "{stderr}");
        assert!(questions.is_empty(), "{questions:?}");
    }
    drop(c);
    // A run of no session has no approver: no channel.
    let c = provider
        .confine(&argv, &policy.clone().with_session(None))
        .unwrap();
    assert!(!c.argv.iter().any(|a| a == "--ask-fd"), "{:?}", c.argv);
    drop(c);
    // Read-only refuses every write, the workspace's too: nothing to ask.
    let read_only =
        SandboxPolicy::new(ConfiningMode::ReadOnly, &ws).with_session(Some(SESSION.to_owned()));
    let c = provider.confine(&argv, &read_only).unwrap();
    assert!(!c.argv.iter().any(|a| a == "--ask-fd"), "{:?}", c.argv);
}
