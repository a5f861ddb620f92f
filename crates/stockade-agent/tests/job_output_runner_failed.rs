//! A background job whose sandbox runner fails, seen through the tools: the
//! bash tool starts it with `run_in_background`, `job_output` reads it until
//! it settles. The settled job is a runner failure (`SANDBOX_UNAVAILABLE`),
//! never a sandbox denial: no denial marker, no instruction, no escalation
//! hint. A runner that cannot even be started never becomes a job: the
//! start itself is the runner failure.
//!
//! Fault injection only: the operator `runner_command` hook of the real
//! local provider, pointed at a script that fails like a broken runner (or
//! at a runner that does not exist). Everything else is the product's own
//! path: the real provider, the sandboxed executor, the real job registry.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::world;
use serde_json::json;
use stockade_agent::{BashTool, EscalationGate, JobOutputTool, PolicyService, Tool, ToolContext};
use stockade_core::{NetworkMode, SandboxMode, texts};
use stockade_local::{LocalProvider, LocalSettings, RunnerCommand};
use stockade_session::Session;
use stockade_shell::{SandboxedExecutor, ShellExecutor};

/// The operator's signature for its runner's fatal reports.
const SIGNATURE: &str = "fake-runner: fatal:";
/// What the broken runner reports before it gives up.
const FATAL_LINE: &str = "fake-runner: fatal: cannot create the mount namespace";
/// A line that reads as a bwrap denial (`Read-only file system`): without
/// the runner rule outranking it, the job would be reported as denied.
const DENIAL_LOOKALIKE: &str = "touch: cannot touch '/w/x': Read-only file system";
/// The start of every denial marker, whatever the mode.
const ANY_DENIAL_MARKER: &str = "[sandbox: file access denied";

/// The bash tool and its `job_output` over the real local provider whose
/// runner is `runner` (the operator `runner_command` hook).
fn compose(ws: &Path, runner: &Path) -> (BashTool, JobOutputTool) {
    let rc = RunnerCommand::new(vec![runner.into()], vec![SIGNATURE.into()]).unwrap();
    let settings = LocalSettings {
        runner_command: Some(rc),
        ..Default::default()
    };
    let provider = Arc::new(LocalProvider::new(settings).unwrap());
    // An operator runner cannot relay the allow-listed proxy: the network
    // is denied, so workspace-write confines with it.
    let policy = Arc::new(
        PolicyService::new(SandboxMode::WorkspaceWrite, ws)
            .with_default_network(Some(NetworkMode::Deny)),
    );
    let exec: Arc<dyn ShellExecutor> =
        Arc::new(SandboxedExecutor::new(provider, policy.resolve(None, None)));
    let bash = BashTool::new(exec, policy, EscalationGate::new(None));
    let jobs = bash.job_output();
    (bash, jobs)
}

fn ctx(session: &Session, call: &str) -> ToolContext {
    ToolContext {
        session: Some(session.clone()),
        call_id: call.into(),
    }
}

fn background(command: &str) -> serde_json::Value {
    json!({ "command": command, "description": "run in the background", "run_in_background": true })
}

/// The job id in bash's "started background job N; ..." answer.
fn job_id(started: &str) -> u64 {
    started
        .strip_prefix("started background job ")
        .and_then(|rest| rest.split(';').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("not a started job: {started}"))
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// An executable `/bin/sh` script at `path`.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// What a model reads for a denial, for any mode: none of it may appear.
fn assert_no_denial(content: &str) {
    assert!(!content.contains(ANY_DENIAL_MARKER), "{content}");
    assert!(!content.contains(texts::DENIAL_INSTRUCTION), "{content}");
    assert!(!content.contains(texts::ESCALATION_HINT), "{content}");
}

#[tokio::test]
async fn a_background_job_whose_runner_fails_settles_as_a_runner_failure_not_a_denial() {
    let w = world();
    let base = w.ws.parent().unwrap().to_path_buf();
    // The runner is held at a FIFO until the test lets it fail, so the job
    // is read once while it is certainly still running.
    let go = base.join("go");
    mkfifo(&go);
    let runner = base.join("broken-runner");
    script(
        &runner,
        &format!(
            "echo \"{DENIAL_LOOKALIKE}\" >&2\necho '{FATAL_LINE}' >&2\nread _ < '{}'\nexit 1\n",
            go.display()
        ),
    );
    let (bash, jobs) = compose(&w.ws, &runner);
    let s = w.store.create(&w.ws).unwrap();
    let marker = w.ws.join("ran");
    let started = bash
        .call(
            &ctx(&s, "start"),
            background(&format!("touch '{}'", marker.display())),
        )
        .await;
    assert!(!started.is_error, "{}", started.content);
    let id = job_id(&started.content);

    // Still running: nothing is concluded yet, whatever stderr shows so far.
    let running = jobs.call(&ctx(&s, "poll"), json!({ "job_id": id })).await;
    assert!(!running.is_error, "{}", running.content);
    assert!(
        running
            .content
            .starts_with(&format!("job {id} is still running\n")),
        "{}",
        running.content
    );
    assert!(
        !running.content.contains("SANDBOX_UNAVAILABLE"),
        "{}",
        running.content
    );
    assert_no_denial(&running.content);

    // Let the runner fail. The writer is not awaited: the job settling is
    // the proof the runner read the line (a runner that died earlier settles
    // too, and the assertions below then fail instead of hanging here).
    {
        let go = go.clone();
        std::thread::spawn(move || std::fs::write(go, b"go\n"));
    }
    let settled = jobs
        .call(&ctx(&s, "wait"), json!({ "job_id": id, "wait": true }))
        .await;
    let content = &settled.content;
    assert!(
        settled.is_error,
        "a runner failure is a failed job: {content}"
    );
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(
        lines[..3],
        [
            format!("job {id} finished").as_str(),
            texts::runner_failed(FATAL_LINE).as_str(),
            "exit code: 1",
        ],
        "{content}"
    );
    assert!(
        lines.contains(&"sandbox: workspace-write (runner-command, full enforcement)"),
        "{content}"
    );
    // The denial-looking line is shown as the output it is, and decides
    // nothing: a runner failure is never also a denial.
    assert!(content.contains(DENIAL_LOOKALIKE), "{content}");
    assert_no_denial(content);
    assert!(!marker.exists(), "the command must not have run");

    // Settled is settled: polling again reads the same stamped result.
    let again = jobs.call(&ctx(&s, "again"), json!({ "job_id": id })).await;
    assert_eq!(again, settled);
    // And the job is this session's alone.
    let other = w.store.create(&w.ws).unwrap();
    let foreign = jobs
        .call(
            &ctx(&other, "foreign"),
            json!({ "job_id": id, "wait": true }),
        )
        .await;
    assert!(foreign.is_error);
    assert_eq!(
        foreign.content,
        format!("no background job {id} in this session")
    );
}

#[tokio::test]
async fn a_runner_that_cannot_be_started_fails_the_background_start_and_makes_no_job() {
    let w = world();
    let base = w.ws.parent().unwrap().to_path_buf();
    let not_executable = base.join("not-executable-runner");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    // What the OS says when it cannot exec the runner: ENOENT, EACCES.
    let cases: [(&str, PathBuf, &str); 2] = [
        (
            "missing",
            base.join("no-such-runner"),
            "No such file or directory (os error 2)",
        ),
        (
            "not executable",
            not_executable,
            "Permission denied (os error 13)",
        ),
    ];
    for (what, runner, why) in cases {
        let (bash, _jobs) = compose(&w.ws, &runner);
        let s = w.store.create(&w.ws).unwrap();
        let marker = w.ws.join("ran");
        let command = format!("touch '{}'", marker.display());
        let out = bash.call(&ctx(&s, "start"), background(&command)).await;
        assert!(out.is_error, "{what}: {}", out.content);
        assert_eq!(
            out.content,
            format!(
                "SANDBOX_UNAVAILABLE: sandbox unavailable: runner-command: cannot start runner {}: {why}",
                runner.display()
            ),
            "{what}"
        );
        assert!(
            !out.content.contains("background job"),
            "{what}: {}",
            out.content
        );
        assert_no_denial(&out.content);
        assert!(
            bash.jobs().lock().unwrap().is_empty(),
            "{what}: no job may be registered for a runner that never started"
        );
        // The same classification as in the foreground.
        let fg = bash
            .call(
                &ctx(&s, "fg"),
                json!({ "command": command, "description": "run in the foreground" }),
            )
            .await;
        assert_eq!(fg, out, "{what}");
        assert!(!marker.exists(), "{what}: nothing may have run");
    }
}
