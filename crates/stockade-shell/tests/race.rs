//! A confined background job swaps path components of the workspace in a
//! tight loop while foreground calls of the same executor confine and
//! write: no write may ever land outside the directory the session was
//! given, on either backend. Prints how many attempts ran.
//!
//! When `CI=true` a missing runner is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_core::{ExecutionPolicy, SandboxMode};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_shell::{SandboxedExecutor, ShellError, ShellExecutor, ShellRequest};

fn backends() -> Vec<BackendPreference> {
    let mut b = vec![BackendPreference::Landlock];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, BackendPreference::Bwrap);
    }
    b
}

fn files_under(dir: &Path) -> usize {
    fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_the_workspace_during_runs_never_redirects_a_write() {
    let launcher = stockade_testkit::built_launcher();
    assert!(
        launcher.is_some() || !stockade_testkit::in_ci(),
        "landlock-run is not built"
    );
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    for backend in backends() {
        // The workspace lies beneath /tmp, a writable root of its own runs:
        // the common case of a scratch project, and the one a confined
        // command can rearrange.
        let tmp = tempfile::Builder::new()
            .prefix("stockade-race-")
            .tempdir_in("/tmp")
            .unwrap();
        let parent = tmp.path().join("p");
        let ws = parent.join("ws");
        fs::create_dir_all(&ws).unwrap();
        // Where a planted symlink points: a look-alike tree outside every
        // writable root, so a redirected write would have a place to land.
        let decoy = tempfile::Builder::new()
            .prefix("decoy-")
            .tempdir_in(&base)
            .unwrap();
        fs::create_dir_all(decoy.path().join("ws")).unwrap();
        let settings = LocalSettings {
            backend,
            launcher_path: launcher.clone(),
            ..Default::default()
        };
        let provider = Arc::new(LocalProvider::new(settings).unwrap());
        let exec = SandboxedExecutor::new(
            provider,
            ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws),
        );
        // The attacker: swap the workspace, then its parent, for symlinks
        // to the decoy and back, as fast as it can, for the whole test.
        let swapper = r#"p="$1"; w="$1/ws"; d="$2"; end=$(( $(date +%s) + 8 ))
while [ "$(date +%s)" -lt "$end" ]; do
  mv "$w" "$w.away" 2>/dev/null && ln -s "$d/ws" "$w" && rm -f "$w" && mv "$w.away" "$w"
  mv "$p" "$p.away" 2>/dev/null && ln -s "$d" "$p" && rm -f "$p" && mv "$p.away" "$p"
done"#;
        let request = ShellRequest::argv(
            vec![
                "/bin/sh".into(),
                "-c".into(),
                swapper.into(),
                "sh".into(),
                parent.clone().into_os_string(),
                decoy.path().as_os_str().to_owned(),
            ],
            tmp.path(),
        );
        let job = exec.start(exec.resolve(request)).unwrap();
        let (mut ran, mut refused, mut denied) = (0usize, 0usize, 0usize);
        let deadline = Instant::now() + Duration::from_secs(6);
        while Instant::now() < deadline {
            let request = ShellRequest::argv(
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "echo x > rel; echo y > \"$1/abs\"".into(),
                    "sh".into(),
                    ws.clone().into_os_string(),
                ],
                &ws,
            );
            match exec.run(exec.resolve(request)).await {
                Ok(r) if r.denied() || !r.exit.success() => denied += 1,
                Ok(_) => ran += 1,
                // Failing closed (a moved root, a workdir that vanished) is
                // the point: nothing ran.
                Err(e @ (ShellError::SandboxUnavailable(_) | ShellError::Start { .. })) => {
                    if refused == 0 {
                        eprintln!("{backend}: failed closed: {e}");
                    }
                    refused += 1;
                    // Let the swapper move on, so runs also meet the
                    // moments in between.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Err(e) => panic!("{backend}: unexpected error: {e}"),
            }
            assert_eq!(
                files_under(&decoy.path().join("ws")) + files_under(decoy.path()) - 1,
                0,
                "{backend}: a write landed outside the held workspace"
            );
        }
        job.kill();
        let _ = job.wait().await;
        eprintln!(
            "{backend}: {} attempts while swapping: {ran} wrote, {refused} failed closed, {denied} denied",
            ran + refused + denied
        );
        assert!(ran + refused + denied > 10, "{backend}: too few attempts");
        // Every write that ran landed in the held directory.
        assert_eq!(files_under(&decoy.path().join("ws")), 0);
        assert_eq!(files_under(decoy.path()), 1);
    }
}
