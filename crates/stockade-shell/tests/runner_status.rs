//! The runner status channel and descriptor passing, end to end, with tiny
//! real runners: `/bin/sh` scripts that speak the status protocol on their
//! channel the way bwrap's closer and landlock-run do, then exec the command.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_core::{
    Confined, Enforcement, ExecutionPolicy, Gap, PassFd, RunnerFailureRule, SandboxMode,
    SandboxPolicy, SandboxProvider, SandboxUnavailable, StatusChannel, gaps,
};
use stockade_local::profile;
use stockade_shell::{
    FdConflict, SandboxedExecutor, ShellError, ShellExecutor, ShellRequest, ShellResult,
    UnconfinedExecutor,
};

/// The status descriptor every fake runner here is handed.
const STATUS_FD: i32 = 5;

/// What a well-behaved runner does: report, close its copy (real runners
/// hold it close-on-exec), exec the command.
const REPORTS_OK: &str = "echo ok >&5; exec 5>&-; exec \"$@\"";

/// A scratch area outside /tmp and $TMPDIR with `ws/` and `outside/`.
struct Scratch {
    dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn scratch() -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("status-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&outside).unwrap();
    Scratch { dir, ws, outside }
}

/// A runner written in shell, standing in for one backend: its argv is
/// `/bin/sh -c SCRIPT fake-runner CMD...`, with that backend's denial
/// signatures and runner rules.
#[derive(Clone)]
struct ScriptRunner {
    backend: &'static str,
    script: String,
    status: Option<StatusChannel>,
    pass_fds: Vec<PassFd>,
    gaps: Vec<Gap>,
    /// Hand the backend's stderr rules too. A provider with a channel hands
    /// none (stderr decides nothing); with them, a test also shows they are
    /// not consulted.
    with_rules: bool,
    /// A real runner the script runs inside (bwrap, standing in for its
    /// closer's host), or nothing.
    outer: Vec<OsString>,
    /// What the runner must start without.
    env_remove: Vec<OsString>,
}

impl ScriptRunner {
    fn new(backend: &'static str, script: &str) -> Self {
        Self {
            backend,
            script: script.into(),
            status: Some(StatusChannel {
                child_fd: STATUS_FD,
            }),
            pass_fds: vec![],
            gaps: vec![],
            with_rules: true,
            outer: vec![],
            env_remove: vec![],
        }
    }

    fn inside(mut self, outer: Vec<OsString>) -> Self {
        self.outer = outer;
        self
    }

    /// Like the real provider: a channel and no stderr rules.
    fn without_rules(mut self) -> Self {
        self.with_rules = false;
        self
    }

    fn rules(&self) -> (Vec<String>, Vec<RunnerFailureRule>) {
        match self.backend {
            "bwrap" => (vec![profile::BWRAP_DENIAL.into()], profile::bwrap_rules()),
            _ => (
                vec![profile::LANDLOCK_DENIAL.into()],
                profile::landlock_rules(),
            ),
        }
    }

    fn executor(self, s: &Scratch) -> SandboxedExecutor {
        SandboxedExecutor::new(
            Arc::new(self),
            ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws),
        )
    }
}

impl SandboxProvider for ScriptRunner {
    fn confine(
        &self,
        argv: &[OsString],
        _: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let mut out = self.outer.clone();
        out.extend::<[OsString; 4]>([
            "/bin/sh".into(),
            "-c".into(),
            self.script.clone().into(),
            "fake-runner".into(),
        ]);
        out.extend(argv.iter().cloned());
        let (denial_signatures, mut runner_failure_rules) = self.rules();
        if !self.with_rules {
            runner_failure_rules.clear();
        }
        Ok(Confined {
            argv: out,
            backend: self.backend,
            enforcement: Enforcement::Full,
            denial_signatures,
            runner_failure_rules,
            writable_roots: vec![],
            pass_fds: self.pass_fds.clone(),
            status: self.status,
            gaps: self.gaps.clone(),
            runner_env_remove: self.env_remove.clone(),
            deny_read: vec![],
            read_only: vec![],
            network_log: None,
            after_run: None,
            direct: None,
        })
    }
}

/// The same request in the foreground and in the background.
async fn both(
    exec: &dyn ShellExecutor,
    request: ShellRequest,
) -> (
    Result<ShellResult, ShellError>,
    Result<ShellResult, ShellError>,
) {
    let fg = exec.run(exec.resolve(request.clone())).await;
    let bg = match exec.start(exec.resolve(request)) {
        Ok(job) => Ok((*job.wait().await).clone()),
        Err(e) => Err(e),
    };
    (fg, bg)
}

fn unavailable(r: &Result<ShellResult, ShellError>) -> (String, String) {
    match r {
        Err(ShellError::SandboxUnavailable(SandboxUnavailable { attempts })) => {
            assert_eq!(attempts.len(), 1);
            (attempts[0].backend.clone(), attempts[0].detail.clone())
        }
        other => panic!("expected SANDBOX_UNAVAILABLE, got {other:?}"),
    }
}

/// A background job whose runner failed: stamped, never also a denial.
fn runner_failed(r: &Result<ShellResult, ShellError>) -> String {
    let r = r.as_ref().unwrap();
    let f = r.sandbox.as_ref().unwrap();
    assert!(f.runner_failed, "{r:?}");
    assert!(!f.denied, "a runner failure is never also a denial: {r:?}");
    f.runner_failure.clone().unwrap()
}

fn ran(r: &Result<ShellResult, ShellError>) -> &ShellResult {
    let r = r.as_ref().unwrap();
    let f = r.sandbox.as_ref().unwrap();
    assert!(!f.runner_failed && f.runner_failure.is_none(), "{r:?}");
    r
}

// ---- (a) after `ok`, everything is the command's -------------------------

#[tokio::test]
async fn after_ok_a_forged_runner_line_and_exit_125_are_the_commands_own() {
    let s = scratch();
    for (backend, line) in [("bwrap", "bwrap: fake"), ("landlock", "landlock-run: fake")] {
        // Even with the stderr rules that would convict it on their own.
        let exec = ScriptRunner::new(backend, REPORTS_OK).executor(&s);
        let req = ShellRequest::new(format!("echo '{line}' >&2; exit 125"), &s.ws);
        let (fg, bg) = both(&exec, req).await;
        for r in [&fg, &bg] {
            let r = ran(r);
            assert_eq!(r.exit.code, Some(125), "{backend}");
            assert_eq!(r.stderr.text(), format!("{line}\n"));
            assert!(!r.denied());
            assert_eq!(r.sandbox.as_ref().unwrap().backend, Some(backend));
        }
    }
    // A denial is still read from stderr: it is a fact about the command.
    let exec = ScriptRunner::new("bwrap", REPORTS_OK).executor(&s);
    let req = ShellRequest::new(
        "echo 'sh: 1: cannot create /x: Read-only file system' >&2; echo 'bwrap: fake' >&2; exit 125",
        &s.ws,
    );
    let (fg, bg) = both(&exec, req).await;
    for r in [&fg, &bg] {
        let r = ran(r);
        assert!(r.denied(), "{r:?}");
        assert_eq!(
            r.sandbox.as_ref().unwrap().denied_paths,
            [PathBuf::from("/x")]
        );
    }
}

/// The runner starts without the loader's variables, and a request that
/// sets one itself is refused before anything runs (never silently dropped).
#[tokio::test]
async fn the_runner_starts_without_the_loaders_variables() {
    let s = scratch();
    let mut runner = ScriptRunner::new(
        "landlock",
        "echo ok >&5; exec 5>&-; printf 'runner:%s:' \"${LD_LIBRARY_PATH-unset}\"; exec \"$@\"",
    );
    runner.env_remove = vec!["LD_LIBRARY_PATH".into()];
    let exec = runner.executor(&s);
    // cargo runs tests with LD_LIBRARY_PATH set, so there is one to strip.
    assert!(std::env::var_os("LD_LIBRARY_PATH").is_some());
    let req = ShellRequest::new("echo done", &s.ws);
    let r = exec.run(exec.resolve(req)).await.unwrap();
    assert_eq!(r.stdout.text(), "runner:unset:done\n");
    let req = ShellRequest::new("echo done", &s.ws).with_env("LD_PRELOAD", "/x.so");
    let marker = s.ws.join("ran");
    let req2 = ShellRequest::new(format!("touch {}", marker.display()), &s.ws)
        .with_env("LD_LIBRARY_PATH", "/x");
    for req in [req, req2] {
        match exec.run(exec.resolve(req)).await {
            Err(ShellError::LoaderEnv { name }) => {
                assert!(name.as_encoded_bytes().starts_with(b"LD_"), "{name:?}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(!marker.exists());
}

// ---- (b) a `fail` record ------------------------------------------------

#[tokio::test]
async fn a_fail_record_is_a_runner_failure_with_its_reason() {
    let s = scratch();
    // Whatever the exit code, and whatever stderr says.
    for exit in [125, 0] {
        let exec = ScriptRunner::new(
            "landlock",
            &format!(
                "echo 'fail cannot restrict: kernel said no' >&5; echo 'something else' >&2; exit {exit}"
            ),
        )
        .executor(&s);
        let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
        assert_eq!(
            unavailable(&fg),
            ("landlock".into(), "cannot restrict: kernel said no".into())
        );
        assert_eq!(fg.unwrap_err().code(), Some("SANDBOX_UNAVAILABLE"));
        assert_eq!(runner_failed(&bg), "cannot restrict: kernel said no");
        assert!(!s.ws.join("marker").exists());
    }
}

// ---- (c) silence --------------------------------------------------------

#[tokio::test]
async fn silence_is_a_runner_failure_named_by_the_runners_own_line() {
    let s = scratch();
    // bwrap's own setup error, and its closer's (landlock-run runs inside
    // bwrap before the command): with or without the provider's rules.
    for (script, want) in [
        (
            "echo 'note: not a runner line' >&2; echo 'bwrap: setting up uid map: Permission denied' >&2; echo 'bwrap: second' >&2; exit 1",
            "bwrap: setting up uid map: Permission denied",
        ),
        (
            "echo 'landlock-run: --rw-fd 7: not a directory' >&2; exit 125",
            "landlock-run: --rw-fd 7: not a directory",
        ),
    ] {
        for runner in [
            ScriptRunner::new("bwrap", script),
            ScriptRunner::new("bwrap", script).without_rules(),
        ] {
            let exec = runner.executor(&s);
            let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
            assert_eq!(unavailable(&fg), ("bwrap".into(), want.into()));
            assert_eq!(runner_failed(&bg), want);
        }
    }

    // No runner line (the partial notice is informational): a fixed reason.
    // Even an exit status of 0 without a record is no start.
    for exit in [1, 0] {
        let exec = ScriptRunner::new(
            "landlock",
            &format!(
                "echo '{}' >&2; echo 'bwrap: not this runner' >&2; exit {exit}",
                profile::LANDLOCK_PARTIAL_NOTICE
            ),
        )
        .without_rules()
        .executor(&s);
        let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
        let want = format!("the runner exited before starting the command (exit status {exit})");
        assert_eq!(unavailable(&fg), ("landlock".into(), want.clone()));
        assert_eq!(runner_failed(&bg), want);
    }
    assert!(!s.ws.join("marker").exists());
}

#[tokio::test]
async fn a_missing_runner_with_a_channel_is_still_attributed_at_spawn() {
    let s = scratch();
    let mut runner = ScriptRunner::new("bwrap", REPORTS_OK);
    runner.pass_fds = vec![held(s.dir.path(), 7)];
    struct Missing(ScriptRunner);
    impl SandboxProvider for Missing {
        fn confine(
            &self,
            argv: &[OsString],
            policy: &SandboxPolicy,
        ) -> Result<Confined, SandboxUnavailable> {
            let mut c = self.0.confine(argv, policy)?;
            c.argv[0] = "/nonexistent/runner".into();
            Ok(c)
        }
    }
    let exec = SandboxedExecutor::new(
        Arc::new(Missing(runner)),
        ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &s.ws),
    );
    let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
    for r in [&fg, &bg] {
        let (backend, detail) = unavailable(r);
        assert_eq!(backend, "bwrap");
        assert!(
            detail.starts_with("cannot start runner /nonexistent/runner"),
            "{detail}"
        );
    }
}

// ---- (d) the command cannot write the channel ---------------------------

#[tokio::test]
async fn the_command_cannot_forge_a_record_after_exec() {
    let s = scratch();
    let exec = ScriptRunner::new("landlock", REPORTS_OK).executor(&s);
    let cmd = "if test -e /proc/self/fd/5; then echo open; else echo closed; fi; \
               echo 'fail forged' >&5; echo 'landlock-run: forged' >&2; exit 125";
    let (fg, bg) = both(&exec, ShellRequest::new(cmd, &s.ws)).await;
    for r in [&fg, &bg] {
        let r = ran(r);
        assert_eq!(r.stdout.text(), "closed\n", "{r:?}");
        assert_eq!(r.exit.code, Some(125));
    }
}

fn open_fds(r: &ShellResult) -> BTreeSet<String> {
    r.stdout.text().lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parents_copies_never_reach_an_unrelated_command() {
    let s = scratch();
    // The runner keeps its channel (and the held directory) open for a
    // while, so unrelated commands are spawned while confined ones run.
    let mut runner = ScriptRunner::new("bwrap", "echo ok >&5; sleep 0.3; exec 5>&-; exec \"$@\"");
    runner.pass_fds = vec![held(s.dir.path(), 7)];
    let confined = runner.executor(&s);
    let unconfined = UnconfinedExecutor::default();
    let ls = ShellRequest::argv(vec!["ls".into(), "/proc/self/fd".into()], &s.ws);
    // What an unrelated command sees with nothing confined running: 0-2,
    // ls's own directory descriptor (the lowest free number, so a leak
    // would show or move it), and whatever this test process inherited
    // without close-on-exec from whoever started it.
    let baseline = open_fds(
        &unconfined
            .run(unconfined.resolve(ls.clone()))
            .await
            .unwrap(),
    );
    let spawner = {
        let confined = confined.clone();
        let req = ShellRequest::new("true", &s.ws);
        tokio::spawn(async move {
            let mut jobs = Vec::new();
            for _ in 0..10 {
                jobs.push(confined.start(confined.resolve(req.clone())).unwrap());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            jobs
        })
    };
    for _ in 0..20 {
        let r = unconfined
            .run(unconfined.resolve(ls.clone()))
            .await
            .unwrap();
        assert_eq!(open_fds(&r), baseline, "leaked into an unrelated command");
    }
    for job in spawner.await.unwrap() {
        let r = job.wait().await;
        assert!(
            r.exit.success() && !r.sandbox.as_ref().unwrap().runner_failed,
            "{r:?}"
        );
    }
    // And the command itself sees only what its runner passed on: stdio,
    // the held directory at 7 and ls's own descriptor (the lowest free
    // number); not the closed channel at 5, a parent copy, nor what this
    // test process inherited without close-on-exec (the spawn closes
    // every number it does not place).
    let r = confined.run(confined.resolve(ls.clone())).await.unwrap();
    let fds = open_fds(&r);
    let want: BTreeSet<String> = ["0", "1", "2", "3", "7"].map(String::from).into();
    assert_eq!(fds, want, "baseline of an unrelated command: {baseline:?}");
}

// ---- (e) held descriptors -----------------------------------------------

/// An open directory (a held writable root) to pass at `child_fd`.
fn held(dir: &Path, child_fd: i32) -> PassFd {
    let d = dir.join(format!("held-{child_fd}"));
    fs::create_dir_all(&d).unwrap();
    PassFd {
        child_fd,
        file: Arc::new(fs::File::open(&d).unwrap()),
    }
}

#[tokio::test]
async fn a_held_directory_is_written_even_after_its_path_was_swapped() {
    let s = scratch();
    let dir = s.dir.path().join("root");
    fs::create_dir(&dir).unwrap();
    let file = Arc::new(fs::File::open(&dir).unwrap());
    // A previous run moved the root away and left a symlink to elsewhere.
    let moved = s.dir.path().join("root-moved");
    fs::rename(&dir, &moved).unwrap();
    std::os::unix::fs::symlink(&s.outside, &dir).unwrap();

    let mut runner = ScriptRunner::new("landlock", REPORTS_OK);
    runner.pass_fds = vec![PassFd { child_fd: 7, file }];
    let exec = runner.executor(&s);
    let (fg, bg) = both(
        &exec,
        ShellRequest::new("echo hi >> /proc/self/fd/7/x", &s.ws),
    )
    .await;
    for r in [&fg, &bg] {
        assert!(ran(r).exit.success(), "{r:?}");
    }
    assert_eq!(fs::read_to_string(moved.join("x")).unwrap(), "hi\nhi\n");
    assert!(!s.outside.join("x").exists());
    // The held directory, not its old path: the grant did not follow.
    assert!(fs::symlink_metadata(&dir).unwrap().is_symlink());
}

#[tokio::test]
async fn a_descriptor_that_cannot_be_placed_starts_nothing() {
    let s = scratch();
    let marker = s.ws.join("marker");
    let cases = [
        (
            vec![held(s.dir.path(), 1)],
            STATUS_FD,
            1,
            FdConflict::Reserved,
        ),
        (
            vec![held(s.dir.path(), 0)],
            STATUS_FD,
            0,
            FdConflict::Reserved,
        ),
        (
            vec![held(s.dir.path(), -1)],
            STATUS_FD,
            -1,
            FdConflict::Reserved,
        ),
        (vec![held(s.dir.path(), 7)], 2, 2, FdConflict::Reserved),
        (vec![held(s.dir.path(), 7)], 7, 7, FdConflict::Duplicate),
        (
            vec![held(s.dir.path(), 8), held(s.dir.path(), 8)],
            STATUS_FD,
            8,
            FdConflict::Duplicate,
        ),
    ];
    for (pass_fds, status_fd, want_fd, want) in cases {
        let mut runner = ScriptRunner::new("bwrap", REPORTS_OK);
        runner.pass_fds = pass_fds;
        runner.status = Some(StatusChannel {
            child_fd: status_fd,
        });
        let exec = runner.executor(&s);
        let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
        for r in [fg, bg] {
            match r {
                Err(ShellError::FdPlacement { child_fd, conflict }) => {
                    assert_eq!((child_fd, conflict), (want_fd, want));
                }
                other => panic!("expected an fd placement error, got {other:?}"),
            }
        }
        assert!(!marker.exists());
    }
    let e = ShellError::FdPlacement {
        child_fd: 1,
        conflict: FdConflict::Reserved,
    };
    assert!(
        e.to_string()
            .starts_with("cannot place a descriptor at fd 1")
    );
    assert_eq!(e.code(), None);
}

// ---- (f) timeouts and cancellation --------------------------------------

#[tokio::test]
async fn a_timeout_or_cancellation_is_reported_as_such_when_the_runner_is_silent() {
    let s = scratch();
    // Silent and still running (it never reports, and keeps the channel).
    for script in ["exec \"$@\"", "echo 'fail late' >&5; exec \"$@\""] {
        let exec = ScriptRunner::new("bwrap", script).executor(&s);
        let req = ShellRequest::new("echo 'bwrap: noise' >&2; sleep 30", &s.ws)
            .with_timeout(Duration::from_millis(300));
        let r = exec.run(exec.resolve(req)).await.unwrap();
        assert!(r.timed_out, "{r:?}");
        let f = r.sandbox.as_ref().unwrap();
        assert!(!f.runner_failed && !f.denied, "{r:?}");

        let job = exec
            .start(exec.resolve(ShellRequest::new("sleep 30", &s.ws)))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        job.kill();
        let r = job.wait().await;
        assert!(r.cancelled, "{r:?}");
        assert!(!r.sandbox.as_ref().unwrap().runner_failed, "{r:?}");
    }
}

#[tokio::test]
async fn a_runner_that_keeps_its_channel_open_cannot_hang_settle() {
    let s = scratch();
    // A stray helper outside the process group holds the write end; what
    // was read before the grace ran out still counts.
    let exec = ScriptRunner::new(
        "landlock",
        "echo ok >&5; setsid sleep 3 >/dev/null 2>&1 </dev/null & exec 5>&-; exec \"$@\"",
    )
    .executor(&s);
    let started = Instant::now();
    let r = exec
        .run(exec.resolve(ShellRequest::new("exit 3", &s.ws)))
        .await;
    assert_eq!(ran(&r).exit.code, Some(3));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

// ---- (g) gaps in the result facts ---------------------------------------

#[tokio::test]
async fn gaps_travel_with_every_result() {
    let s = scratch();
    let mut runner = ScriptRunner::new("landlock", REPORTS_OK);
    runner.gaps = vec![
        Gap::new(gaps::METADATA, "Landlock has no metadata rights"),
        Gap::new(gaps::SIGNALS, "ABI below 6"),
    ];
    let exec = runner.executor(&s);
    let (fg, bg) = both(&exec, ShellRequest::new("true", &s.ws)).await;
    for r in [&fg, &bg] {
        let v = serde_json::to_value(ran(r)).unwrap();
        assert_eq!(
            v["sandbox"]["gaps"],
            serde_json::json!([
                {"name": "metadata", "detail": "Landlock has no metadata rights"},
                {"name": "signals", "detail": "ABI below 6"},
            ])
        );
    }
    // danger-full-access governs nothing, and claims no gaps either.
    let r = exec
        .run(
            exec.resolve(
                ShellRequest::new("true", &s.ws)
                    .with_policy(ExecutionPolicy::new(SandboxMode::DangerFullAccess, &s.ws)),
            ),
        )
        .await
        .unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["sandbox"]["gaps"], serde_json::json!([]));
    assert_eq!(v["sandbox"]["backend"], serde_json::Value::Null);
}

// ---- real bwrap ---------------------------------------------------------

fn bwrap(extra: &[&Path]) -> Vec<OsString> {
    let mut out: Vec<OsString> = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--die-with-parent",
        "--new-session",
    ]
    .map(OsString::from)
    .into();
    out.extend(extra.iter().map(|p| p.as_os_str().to_owned()));
    out
}

/// bwrap itself, with the shell reporter as its "closer": bwrap hands the
/// channel and the held root through, reports nothing itself, and names its
/// own setup failure on stderr.
#[tokio::test]
async fn real_bwrap_carries_the_channel_and_the_held_root() {
    let have = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !stockade_testkit::require("bwrap", have) {
        return;
    }
    let s = scratch();
    // The held root is bound over the workspace by descriptor, after its
    // path was swapped for a symlink to elsewhere.
    let root = s.dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let file = Arc::new(fs::File::open(&root).unwrap());
    let moved = s.dir.path().join("root-moved");
    fs::rename(&root, &moved).unwrap();
    std::os::unix::fs::symlink(&s.outside, &root).unwrap();
    let bind = ["--bind-fd".as_ref(), "7".as_ref(), s.ws.as_path()];
    let mut runner = ScriptRunner::new("bwrap", REPORTS_OK)
        .without_rules()
        .inside(bwrap(&bind));
    runner.pass_fds = vec![PassFd { child_fd: 7, file }];
    let exec = runner.executor(&s);
    let cmd = "echo x > inside; echo 'bwrap: fake' >&2; exit 125";
    let (fg, bg) = both(&exec, ShellRequest::new(cmd, &s.ws)).await;
    for r in [&fg, &bg] {
        let r = ran(r);
        assert_eq!(r.exit.code, Some(125), "{r:?}");
        assert_eq!(r.stderr.text(), "bwrap: fake\n");
    }
    assert!(moved.join("inside").exists());
    assert!(!s.ws.join("inside").exists() && !s.outside.join("inside").exists());

    // bwrap's own setup failure: silent channel, its line is the reason.
    let missing = s.dir.path().join("missing");
    let bad = ["--ro-bind".as_ref(), missing.as_path(), s.ws.as_path()];
    let exec = ScriptRunner::new("bwrap", REPORTS_OK)
        .without_rules()
        .inside(bwrap(&bad))
        .executor(&s);
    let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
    let (backend, detail) = unavailable(&fg);
    assert_eq!(backend, "bwrap");
    assert!(
        detail.starts_with("bwrap: ") && detail.contains(missing.to_str().unwrap()),
        "{detail}"
    );
    assert_eq!(runner_failed(&bg), detail);
    assert!(!s.ws.join("marker").exists());
}
