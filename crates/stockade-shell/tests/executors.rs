//! The executors end to end: fault injection through `runner_command` and
//! fake runners, then both real backends, foreground and background.
//!
//! When `CI=true` a missing runner is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stockade_core::{
    Confined, ConfiningMode, Enforcement, ExecutionPolicy, SandboxMode, SandboxPolicy,
    SandboxProvider, SandboxUnavailable,
};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings, RunnerCommand, profile};
use stockade_shell::{
    SandboxedExecutor, ShellError, ShellExecutor, ShellRequest, ShellResult, UnconfinedExecutor,
};

/// A scratch area outside /tmp and $TMPDIR with `ws/` and `outside/`.
struct Scratch {
    dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn scratch() -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("shell-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&outside).unwrap();
    Scratch { dir, ws, outside }
}

/// Written by a child process: a write fd held here while another test's
/// spawn forks would make exec fail with ETXTBSY.
fn script(dir: &Path, name: &str, body: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    let status = std::process::Command::new("/bin/sh")
        .args(["-c", "printf '%s' \"$1\" > \"$2\"", "sh", body])
        .arg(&p)
        .status()
        .unwrap();
    assert!(status.success());
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    p
}

fn runner_command(argv: Vec<OsString>, sigs: &[&str]) -> Arc<dyn SandboxProvider> {
    let rc = RunnerCommand::new(argv, sigs.iter().map(|s| s.to_string()).collect()).unwrap();
    let settings = LocalSettings {
        runner_command: Some(rc),
        ..Default::default()
    };
    Arc::new(LocalProvider::new(settings).unwrap())
}

fn sandboxed(
    provider: Arc<dyn SandboxProvider>,
    s: &Scratch,
    mode: SandboxMode,
) -> SandboxedExecutor {
    SandboxedExecutor::new(provider, ExecutionPolicy::new(mode, &s.ws))
}

/// The same request in the foreground and in the background.
async fn both(
    exec: &dyn ShellExecutor,
    request: ShellRequest,
) -> (
    Result<ShellResult, ShellError>,
    Result<Arc<ShellResult>, ShellError>,
) {
    let fg = exec.run(exec.resolve(request.clone())).await;
    let bg = match exec.start(exec.resolve(request)) {
        Ok(job) => Ok(job.wait().await),
        Err(e) => Err(e),
    };
    (fg, bg)
}

fn unavailable_detail(r: &Result<impl std::fmt::Debug, ShellError>) -> String {
    match r {
        Err(ShellError::SandboxUnavailable(SandboxUnavailable { attempts })) => {
            assert_eq!(attempts.len(), 1);
            attempts[0].detail.clone()
        }
        other => panic!("expected SANDBOX_UNAVAILABLE, got {other:?}"),
    }
}

// ---- before start -------------------------------------------------------

#[tokio::test]
async fn missing_non_executable_and_broken_script_runners_are_runner_failures() {
    let s = scratch();
    let missing = s.dir.path().join("no-such-runner");
    let not_exec = script(s.dir.path(), "not-exec", "#!/bin/sh\nexec \"$@\"\n", 0o644);
    let no_interp = script(
        s.dir.path(),
        "no-interp",
        "#!/nonexistent/interpreter\n",
        0o755,
    );
    for runner in [missing, not_exec, no_interp] {
        let exec = sandboxed(
            runner_command(vec![runner.clone().into()], &[]),
            &s,
            SandboxMode::WorkspaceWrite,
        );
        let req = ShellRequest::new("touch marker", &s.ws);
        let (fg, bg) = both(&exec, req).await;
        let detail = unavailable_detail(&fg);
        assert!(
            detail.starts_with(&format!("cannot start runner {}", runner.display())),
            "{detail}"
        );
        assert_eq!(fg.unwrap_err().code(), Some("SANDBOX_UNAVAILABLE"));
        assert_eq!(unavailable_detail(&bg), detail, "background must agree");
        assert!(!s.ws.join("marker").exists());
    }
}

#[tokio::test]
async fn an_unusable_workdir_keeps_ordinary_start_semantics() {
    let s = scratch();
    let gone = s.dir.path().join("gone");
    // Even with a runner that is itself missing: the workdir is not usable,
    // so nothing can be attributed to the runner.
    for runner in [
        PathBuf::from("/bin/sh"),
        s.dir.path().join("no-such-runner"),
    ] {
        let exec = sandboxed(
            runner_command(vec![runner.into()], &[]),
            &s,
            SandboxMode::WorkspaceWrite,
        );
        let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &gone)).await;
        for r in [fg.map(|_| ()), bg.map(|_| ())] {
            match r {
                Err(ShellError::Start { workdir, .. }) => assert_eq!(workdir, gone),
                other => panic!("expected an ordinary start error, got {other:?}"),
            }
        }
    }
    let (fg, _) = both(
        &UnconfinedExecutor::default(),
        ShellRequest::new("true", &gone),
    )
    .await;
    assert!(matches!(fg, Err(ShellError::Start { .. })));
}

#[tokio::test]
async fn provider_errors_propagate_unchanged() {
    struct Closed;
    impl SandboxProvider for Closed {
        fn confine(
            &self,
            _: &[OsString],
            _: &SandboxPolicy,
        ) -> Result<Confined, SandboxUnavailable> {
            Err(SandboxUnavailable::single("bwrap", "probe failed: nope"))
        }
    }
    let s = scratch();
    let exec = sandboxed(Arc::new(Closed), &s, SandboxMode::ReadOnly);
    let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
    assert_eq!(unavailable_detail(&fg), "probe failed: nope");
    assert_eq!(unavailable_detail(&bg), "probe failed: nope");
    assert!(!s.ws.join("marker").exists());
    // danger-full-access never asks the provider.
    let exec = sandboxed(Arc::new(Closed), &s, SandboxMode::DangerFullAccess);
    let r = exec
        .run(exec.resolve(ShellRequest::new("touch marker", &s.ws)))
        .await
        .unwrap();
    assert!(r.exit.success());
    assert_eq!(
        r.sandbox.as_ref().unwrap().mode,
        SandboxMode::DangerFullAccess
    );
    assert_eq!(r.sandbox.unwrap().backend, None);
    assert!(s.ws.join("marker").exists());
}

// ---- after start --------------------------------------------------------

#[tokio::test]
async fn a_runner_fatal_line_outranks_everything() {
    let s = scratch();
    let runner = script(
        s.dir.path(),
        "fatal-runner",
        "#!/bin/sh\necho 'sh: 1: cannot create x: Read-only file system' >&2\necho 'fake-runner: fatal: no namespaces' >&2\nexit 125\n",
        0o755,
    );
    let exec = sandboxed(
        runner_command(vec![runner.into()], &["fake-runner: fatal"]),
        &s,
        SandboxMode::WorkspaceWrite,
    );
    let (fg, bg) = both(&exec, ShellRequest::new("touch marker", &s.ws)).await;
    assert_eq!(unavailable_detail(&fg), "fake-runner: fatal: no namespaces");
    let bg = bg.unwrap();
    let facts = bg.sandbox.as_ref().unwrap();
    assert!(facts.runner_failed);
    assert!(!facts.denied, "a runner failure is never also a denial");
    assert_eq!(
        facts.runner_failure.as_deref(),
        Some("fake-runner: fatal: no namespaces")
    );
    assert!(!s.ws.join("marker").exists());
}

/// Prints the exact partial notice and runs the command, with the
/// launcher's own rules: like landlock-run on an old kernel.
struct OldLandlock;
impl SandboxProvider for OldLandlock {
    fn confine(
        &self,
        argv: &[OsString],
        _: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let mut out: Vec<OsString> = vec![
            "/bin/sh".into(),
            "-c".into(),
            format!(
                "echo '{}' >&2; exec \"$@\"",
                profile::LANDLOCK_PARTIAL_NOTICE
            )
            .into(),
            "fake-launcher".into(),
        ];
        out.extend(argv.iter().cloned());
        Ok(Confined {
            argv: out,
            backend: "landlock",
            enforcement: Enforcement::Partial,
            denial_signatures: vec![profile::LANDLOCK_DENIAL.into()],
            runner_failure_rules: profile::landlock_rules(),
            writable_roots: vec![],
            pass_fds: vec![],
            status: None,
            gaps: vec![],
            runner_env_remove: vec![],
            deny_read: vec![],
            read_only: vec![],
            network_log: None,
            after_run: None,
            direct: None,
        })
    }
}

#[tokio::test]
async fn the_partial_notice_with_child_exits_1_2_125_is_an_ordinary_result() {
    let s = scratch();
    let exec = sandboxed(Arc::new(OldLandlock), &s, SandboxMode::ReadOnly);
    for code in [1, 2, 125] {
        let (fg, bg) = both(&exec, ShellRequest::new(format!("exit {code}"), &s.ws)).await;
        for r in [fg.unwrap(), (*bg.unwrap()).clone()] {
            assert_eq!(r.exit.code, Some(code));
            let f = r.sandbox.unwrap();
            assert!(!f.runner_failed && !f.denied);
            assert_eq!(f.enforcement, Some(Enforcement::Partial));
        }
    }
    // But a real launcher line with 125 is a runner failure, fg and bg.
    let (fg, bg) = both(
        &exec,
        ShellRequest::new("echo 'landlock-run: cannot restrict' >&2; exit 125", &s.ws),
    )
    .await;
    assert_eq!(unavailable_detail(&fg), "landlock-run: cannot restrict");
    assert!(bg.unwrap().sandbox.as_ref().unwrap().runner_failed);
}

#[tokio::test]
async fn a_started_child_exiting_126_or_127_is_an_ordinary_result() {
    let s = scratch();
    let exec = sandboxed(Arc::new(OldLandlock), &s, SandboxMode::ReadOnly);
    for (cmd, code) in [
        ("exit 126", 126),
        ("exit 127", 127),
        ("no-such-command-xyz", 127),
    ] {
        let (fg, bg) = both(&exec, ShellRequest::new(cmd, &s.ws)).await;
        for r in [fg.unwrap(), (*bg.unwrap()).clone()] {
            assert_eq!(r.exit.code, Some(code), "{cmd}");
            assert!(!r.sandbox.unwrap().runner_failed);
        }
    }
}

// ---- real runners -------------------------------------------------------

fn real_providers() -> Vec<(&'static str, Arc<dyn SandboxProvider>)> {
    let mut out: Vec<(&'static str, Arc<dyn SandboxProvider>)> = Vec::new();
    let have_bwrap = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok();
    let launcher = stockade_testkit::built_launcher();
    assert!(
        !stockade_testkit::in_ci() || (have_bwrap && launcher.is_some()),
        "real runners must exist in CI"
    );
    if have_bwrap {
        let s = LocalSettings {
            backend: BackendPreference::Bwrap,
            launcher_path: launcher.clone(),
            ..Default::default()
        };
        out.push(("bwrap", Arc::new(LocalProvider::new(s).unwrap())));
    }
    if launcher.is_some() {
        let s = LocalSettings {
            backend: BackendPreference::Landlock,
            launcher_path: launcher,
            ..Default::default()
        };
        out.push(("landlock", Arc::new(LocalProvider::new(s).unwrap())));
    }
    out
}

#[tokio::test]
async fn real_runners_report_denials_exactly() {
    for (backend, provider) in real_providers() {
        let s = scratch();
        let ro = sandboxed(provider.clone(), &s, SandboxMode::ReadOnly);
        let ww = sandboxed(provider.clone(), &s, SandboxMode::WorkspaceWrite);
        let outside = s.outside.join("f");

        let (fg, bg) = both(
            &ww,
            ShellRequest::new(format!("echo x > '{}'", outside.display()), &s.ws),
        )
        .await;
        for r in [fg.unwrap(), (*bg.unwrap()).clone()] {
            assert!(r.denied(), "{backend}: {r:?}");
            assert!(!r.exit.success());
            let f = r.sandbox.unwrap();
            assert_eq!(f.backend, Some(backend));
            assert_eq!(f.enforcement, Some(Enforcement::Full));
            assert_eq!(f.denied_paths, std::slice::from_ref(&outside), "{backend}");
            assert!(
                f.writable_roots.contains(&s.ws),
                "{backend}: {:?}",
                f.writable_roots
            );
        }
        assert!(!outside.exists());

        let (fg, bg) = both(&ww, ShellRequest::new("echo x > inside", &s.ws)).await;
        for r in [fg.unwrap(), (*bg.unwrap()).clone()] {
            assert!(r.exit.success() && !r.denied(), "{backend}: {r:?}");
        }
        assert!(s.ws.join("inside").exists());

        for cmd in ["exit 3", "false"] {
            let (fg, bg) = both(&ro, ShellRequest::new(cmd, &s.ws)).await;
            for r in [fg.unwrap(), (*bg.unwrap()).clone()] {
                assert!(!r.exit.success() && !r.denied(), "{backend} {cmd}: {r:?}");
            }
        }
    }
}

#[tokio::test]
async fn bash_env_runs_inside_the_confinement() {
    for (backend, provider) in real_providers() {
        let s = scratch();
        let rc = script(
            s.dir.path(),
            "bash_env.sh",
            &format!("echo pwned > '{}'\n", s.outside.join("bash-env").display()),
            0o644,
        );
        let exec = sandboxed(provider, &s, SandboxMode::WorkspaceWrite);
        let req = ShellRequest::new("echo ran > ran", &s.ws).with_env("BASH_ENV", &rc);
        let r = exec.run(exec.resolve(req)).await.unwrap();
        assert!(
            s.ws.join("ran").exists(),
            "{backend}: the command itself ran"
        );
        assert!(
            !s.outside.join("bash-env").exists(),
            "{backend}: BASH_ENV escaped"
        );
        assert!(r.denied(), "{backend}: {r:?}");
    }
}

#[tokio::test]
async fn overlapping_jobs_keep_their_own_facts() {
    for (backend, provider) in real_providers() {
        let s = scratch();
        let exec = sandboxed(provider, &s, SandboxMode::WorkspaceWrite);
        let req = |mode| {
            ShellRequest::new("sleep 0.3; echo x > \"f-$$\"", &s.ws)
                .with_policy(ExecutionPolicy::new(mode, &s.ws))
        };
        let a = exec
            .start(exec.resolve(req(SandboxMode::ReadOnly)))
            .unwrap();
        let b = exec
            .start(exec.resolve(req(SandboxMode::WorkspaceWrite)))
            .unwrap();
        assert_ne!(a.id(), b.id());
        let (a, b) = (a.wait().await, b.wait().await);
        let (fa, fb) = (a.sandbox.as_ref().unwrap(), b.sandbox.as_ref().unwrap());
        assert_eq!(fa.mode, SandboxMode::ReadOnly, "{backend}");
        assert!(fa.denied, "{backend}: {a:?}");
        assert_eq!(fb.mode, SandboxMode::WorkspaceWrite, "{backend}");
        assert!(!fb.denied && b.exit.success(), "{backend}: {b:?}");
    }
}

fn alive(pid: i32) -> bool {
    // Signal 0 probes existence; a zombie would still answer, so also read
    // its state.
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}

async fn assert_grandchild_killed(exec: &dyn ShellExecutor, s: &Scratch, label: &str) {
    let pidfile = s.ws.join(format!("pid-{label}"));
    let cmd = format!(
        "(sleep 5; touch late) & echo $! > '{}'; sleep 30",
        pidfile.display()
    );
    let req = ShellRequest::new(cmd, &s.ws).with_timeout(Duration::from_millis(500));
    let r = exec.run(exec.resolve(req)).await.unwrap();
    assert!(r.timed_out, "{label}: {r:?}");
    assert!(
        r.duration < Duration::from_secs(5),
        "{label}: {:?}",
        r.duration
    );
    let pid: i32 = fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild's pid is in the sandbox's namespace under bwrap; the
    // marker it would create is the proof either way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    if label == "unconfined" || label == "landlock" {
        assert!(!alive(pid), "{label}: grandchild {pid} survived");
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !s.ws.join("late").exists(),
        "{label}: the grandchild ran on"
    );
}

#[tokio::test]
async fn timeouts_kill_the_whole_process_group() {
    let s = scratch();
    assert_grandchild_killed(&UnconfinedExecutor::default(), &s, "unconfined").await;
    for (backend, provider) in real_providers() {
        let exec = sandboxed(provider, &s, SandboxMode::WorkspaceWrite);
        assert_grandchild_killed(&exec, &s, backend).await;
    }
}

#[tokio::test]
async fn killing_a_background_job_kills_its_group() {
    for (backend, provider) in real_providers() {
        let s = scratch();
        let exec = sandboxed(provider, &s, SandboxMode::WorkspaceWrite);
        let job = exec
            .start(exec.resolve(ShellRequest::new(
                "echo started; (sleep 2; touch late) & sleep 30",
                &s.ws,
            )))
            .unwrap();
        for _ in 0..100 {
            if job.output_so_far().0.text().contains("started") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(job.output_so_far().0.text(), "started\n", "{backend}");
        assert!(job.result().is_none());
        job.kill();
        let r = job.wait().await;
        assert!(r.cancelled, "{backend}: {r:?}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            !s.ws.join("late").exists(),
            "{backend}: the job's grandchild ran on"
        );
    }
}

#[tokio::test]
async fn dropping_a_foreground_run_kills_its_group() {
    let s = scratch();
    let exec = UnconfinedExecutor::default();
    let fut = exec.run(exec.resolve(ShellRequest::new("(sleep 2; touch late) & sleep 30", &s.ws)));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), fut)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!s.ws.join("late").exists());
}

#[tokio::test]
async fn output_is_bounded_and_fds_are_not_leaked() {
    let s = scratch();
    let exec = UnconfinedExecutor::default();
    let r = exec
        .run(exec.resolve(ShellRequest::new(
            "head -c 50000000 /dev/zero | tr '\\0' y; echo done >&2",
            &s.ws,
        )))
        .await
        .unwrap();
    assert_eq!(r.stdout.total_bytes, 50_000_000);
    assert!(r.stdout.bytes.len() < 200_000, "{}", r.stdout.bytes.len());
    assert!(r.stdout.text().contains("bytes of output truncated"));
    assert_eq!(r.stderr.text(), "done\n");

    // An fd this executor's process holds open must not reach the child.
    let held = fs::File::open("/etc/hostname").unwrap();
    let held_fd = std::os::fd::AsRawFd::as_raw_fd(&held).to_string();
    let r = exec
        .run(exec.resolve(ShellRequest::new("ls /proc/self/fd", &s.ws)))
        .await
        .unwrap();
    drop(held);
    let fds: Vec<String> = r.stdout.text().lines().map(str::to_owned).collect();
    assert!(fds.len() >= 3, "{fds:?}");
    assert!(!fds.contains(&held_fd), "fd {held_fd} leaked: {fds:?}");
}

#[tokio::test]
async fn the_unconfined_executor_says_so() {
    let s = scratch();
    let exec = UnconfinedExecutor::default();
    assert!(!exec.confines());
    let spec = exec.resolve(ShellRequest::new("echo x > ../outside/f", &s.ws));
    assert_eq!(spec.policy.sandbox_policy(), None);
    let r = exec.run(spec).await.unwrap();
    assert!(r.exit.success() && r.sandbox.is_none());
    assert!(s.outside.join("f").exists());
    let exec = sandboxed(
        runner_command(vec!["/bin/true".into()], &[]),
        &s,
        SandboxMode::ReadOnly,
    );
    assert!(exec.confines());
    let spec = exec.resolve(ShellRequest::new("true", &s.ws));
    assert_eq!(
        spec.policy,
        ExecutionPolicy::new(SandboxMode::ReadOnly, &s.ws)
    );
    let _ = ConfiningMode::ReadOnly;
}
