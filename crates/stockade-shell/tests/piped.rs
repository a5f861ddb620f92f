//! `spawn_piped`: a long-running child started through the provider's wrap,
//! with the runner's status channel read before it is handed back. A fake
//! provider wraps the argv in a shell that plays the runner, so every record
//! (and silence) is exercised without a real backend; the real backends are
//! exercised by stockade-mcp's and stockade-acp's suites.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use stockade_core::{
    Confined, Enforcement, ExecutionPolicy, NetworkMode, SandboxMode, SandboxPolicy,
    SandboxProvider, SandboxUnavailable, StatusChannel,
};
use stockade_shell::{SandboxedExecutor, ShellError, ShellRequest, UnconfinedExecutor};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Plays a runner: `sh -c RUNNER runner ARGV...`, with the status channel
/// at fd 3.
struct FakeRunner(&'static str);

impl SandboxProvider for FakeRunner {
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let mut wrapped: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), self.0.into()];
        wrapped.push("runner".into());
        wrapped.extend(argv.iter().cloned());
        Ok(Confined {
            argv: wrapped,
            backend: "fake",
            enforcement: Enforcement::Full,
            denial_signatures: vec![],
            runner_failure_rules: vec![],
            writable_roots: vec![policy.workspace_root.clone()],
            pass_fds: vec![],
            status: Some(StatusChannel { child_fd: 3 }),
            gaps: vec![],
            runner_env_remove: vec!["LD_PRELOAD".into()],
            deny_read: vec![],
            read_only: vec![],
            network_log: None,
            after_run: None,
            direct: None,
        })
    }
}

fn workdir() -> PathBuf {
    std::env::current_dir().unwrap()
}

fn executor(runner: &'static str) -> SandboxedExecutor {
    let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, workdir());
    SandboxedExecutor::new(Arc::new(FakeRunner(runner)), policy)
}

fn cat() -> ShellRequest {
    ShellRequest::argv(vec!["cat".into()], workdir())
}

/// Says `ok`, lets go of the channel, runs the command.
const STARTS: &str = r#"echo ok >&3; exec 3>&-; exec "$@""#;

#[tokio::test]
async fn a_started_child_is_handed_back_with_its_pipes() {
    let mut child = executor(STARTS).spawn_piped(cat()).await.unwrap();
    let facts = child.facts().cloned().unwrap();
    assert_eq!(facts.backend, Some("fake"));
    assert_eq!(facts.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(facts.network, NetworkMode::Allow, "the policy's, as given");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(b"hello\n").await.unwrap();
    assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("hello"));
    // The end of its stdin ends cat; wait reports how.
    drop(stdin);
    let exit = child.wait().await;
    assert_eq!(exit.code, Some(0));
    assert!(child.try_wait().is_some());
}

#[tokio::test]
async fn kill_ends_the_whole_group() {
    // The command leaves a background child in its group, then waits.
    let request = ShellRequest::argv(
        vec![
            "/bin/sh".into(),
            "-c".into(),
            "sleep 60 & echo $!; wait".into(),
        ],
        workdir(),
    );
    let mut child = executor(STARTS).spawn_piped(request).await.unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let grandchild: u32 = lines.next_line().await.unwrap().unwrap().parse().unwrap();
    let proc = PathBuf::from(format!("/proc/{grandchild}"));
    assert!(proc.exists());
    child.kill();
    let exit = child.wait().await;
    assert_eq!(exit.signal, Some(9));
    // A zombie is dead: it stays listed until whoever inherited it (pid 1
    // of this namespace) reaps it, which a container's init may never do.
    let alive = || {
        fs::read_to_string(proc.join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
        })
    };
    let gone = async {
        while alive() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), gone)
        .await
        .expect("the group's other member outlived the kill");
}

#[tokio::test]
async fn a_runner_failure_record_is_sandbox_unavailable() {
    let e = executor("echo 'fail no sandbox here' >&3; exit 125")
        .spawn_piped(cat())
        .await
        .unwrap_err();
    let ShellError::SandboxUnavailable(u) = e else {
        panic!("{e}")
    };
    assert_eq!(u.to_string(), "sandbox unavailable: fake: no sandbox here");
}

#[tokio::test]
async fn a_silent_runner_is_sandbox_unavailable_with_its_line() {
    let e = executor("echo 'fake: cannot set up' >&2; exit 1")
        .spawn_piped(cat())
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "SANDBOX_UNAVAILABLE: sandbox unavailable: fake: cannot set up"
    );
    let e = executor("exit 7").spawn_piped(cat()).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "SANDBOX_UNAVAILABLE: sandbox unavailable: fake: the runner exited before starting the command (exit status 7)"
    );
}

#[tokio::test]
async fn a_command_that_cannot_be_executed_is_a_start_failure() {
    let e = executor("echo ok >&3; echo 'noexec 127 nope: command not found' >&3; exit 127")
        .spawn_piped(ShellRequest::argv(vec!["nope".into()], workdir()))
        .await
        .unwrap_err();
    let ShellError::Start {
        program, source, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(program, &PathBuf::from("nope"));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(source.to_string(), "nope: command not found");
}

#[tokio::test]
async fn a_loader_variable_is_refused_not_dropped() {
    let e = executor(STARTS)
        .spawn_piped(cat().with_env("LD_PRELOAD", "/x.so"))
        .await
        .unwrap_err();
    assert!(matches!(e, ShellError::LoaderEnv { .. }), "{e}");
}

#[tokio::test]
async fn an_unconfined_child_has_no_facts() {
    let mut child = UnconfinedExecutor::default()
        .spawn_piped(cat())
        .await
        .unwrap();
    assert!(child.facts().is_none());
    drop(child.stdin.take());
    assert_eq!(child.wait().await.code, Some(0));
    let e = UnconfinedExecutor::default()
        .spawn_piped(ShellRequest::argv(
            vec!["/nonexistent/server".into()],
            workdir(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, ShellError::Start { .. }), "{e}");
}
