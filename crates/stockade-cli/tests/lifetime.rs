//! SIGINT, SIGTERM and SIGHUP to `stockade exec` end the command's whole
//! process tree in every mode, danger-full-access included (where nothing
//! but stockade wraps the command), with real processes, as root and (when
//! we are root, as in CI) as `nobody`. When `CI=true` a missing runner
//! fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use stockade_testkit::users::users;

/// A sleep no other test runs: its argument marks it.
fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "4{}.{}",
        std::process::id() % 10_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn running(marker: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("sleep {marker}")])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Wait for `done`, failing after `limit`: the processes are SIGKILLed, so
/// this bounds how long the kernel may take to tear them down, not how fast
/// stockade is.
fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_signal_to_stockade_exec_ends_the_whole_tree_in_every_mode() {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let mut cases = vec![
        ("danger-full-access", "auto"),
        ("workspace-write", "landlock"),
    ];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        cases.push(("read-only", "bwrap"));
    }
    for who in users() {
        let dir = tempfile::Builder::new()
            .prefix("lifetime-")
            .tempdir_in(&base)
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        who.own(dir.path());
        for (mode, backend) in &cases {
            for (signal, status) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
                let m = marker();
                let mut child = who
                    .command(env!("CARGO_BIN_EXE_stockade"))
                    .env("HOME", dir.path())
                    .env("XDG_RUNTIME_DIR", dir.path())
                    .env_remove("STOCKADE_CONFIG")
                    .env_remove("STOCKADE_MODE")
                    .current_dir(dir.path())
                    .args([
                        "exec",
                        "--no-default-deny-read",
                        "--mode",
                        mode,
                        "--backend",
                        backend,
                    ])
                    .args(["--", "sh", "-c"])
                    // A background grandchild, then a foreground one.
                    .arg(format!("sleep {m} & echo ready; sleep {m}"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let mut line = String::new();
                BufReader::new(child.stdout.take().unwrap())
                    .read_line(&mut line)
                    .unwrap();
                assert_eq!(line.trim(), "ready", "{who:?} {mode}");
                assert!(running(&m), "{who:?} {mode}: the tree is up");
                let st = Command::new("kill")
                    .arg(format!("-{signal}"))
                    .arg(child.id().to_string())
                    .status()
                    .unwrap();
                assert!(st.success());
                // setpriv execs stockade, so the pid is stockade's.
                let exit = child.wait().unwrap();
                assert_eq!(exit.code(), Some(status), "{who:?} {mode} {signal}");
                eventually(
                    Duration::from_secs(10),
                    &format!("{who:?} {mode} {signal}: a sleep outlived stockade exec"),
                    || !running(&m),
                );
            }
        }
    }
}
