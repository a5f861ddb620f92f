//! The command's whole tree ends with it: when the command exits, whatever
//! it started (a background subshell, a double fork, `setsid`, `nohup`, a
//! process that ignores SIGTERM) is killed and reaped before `stockade
//! exec` reports the status, on every backend, as root and (when we are
//! root, as in CI) as `nobody`. Real process trees: each leftover appends
//! to a file once a second; after `stockade exec` returned, the file must
//! not grow and no process carrying the run's marker (in its argv or its
//! environment) may remain. When `CI=true` a missing runner fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use stockade_testkit::users::users;

/// The environment variable carrying a run's marker to every process of its
/// tree.
const MARK_VAR: &str = "STOCKADE_TREE_MARK";

fn marker() -> String {
    stockade_testkit::procs::marker("tree")
}

use stockade_testkit::procs::marked;

/// A failure detector only: a run that has not ended after this long hangs.
const HANG: Duration = Duration::from_secs(60);

fn wait_or_fail(child: &mut std::process::Child, mark: &str, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            for pid in marked(mark) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            panic!("{what}: stockade exec did not return within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each leftover appends to `f` once a second, forever; the foreground
/// waits until `f` has a line, so the leftover is surely running when the
/// command exits.
const LOOP: &str = "while :; do date >> f; sleep 1; done";

fn scenarios() -> Vec<(&'static str, String)> {
    let ready = "while [ ! -s f ]; do sleep 0.05; done";
    vec![
        (
            "re-parented subshell",
            format!("( sh -c '{LOOP}'; true ) & {ready}"),
        ),
        (
            "double fork",
            format!("sh -c \"sh -c '{LOOP}' &\"; {ready}"),
        ),
        ("setsid", format!("setsid -f sh -c '{LOOP}'; {ready}")),
        (
            "setsid pair",
            format!("setsid sh -c \"sh -c '{LOOP}' & wait\" & {ready}"),
        ),
        (
            "nohup",
            format!("nohup sh -c '{LOOP}' >/dev/null 2>&1 & {ready}"),
        ),
        (
            // Forks all the time (bounded, so a slow kill cannot fill the
            // process table): a process forking while it is killed must not
            // leave a child behind.
            "forks while killed",
            format!(
                "sh -c 'while :; do sh -c \"date >> f; sleep 3\" & sleep 0.01; done' & {ready}"
            ),
        ),
        (
            // Hops: each generation starts the next in the background and
            // exits, so the running one is always freshly re-parented.
            "hops",
            format!("printf 'date >> f; sleep 0.3; sh ./hop &\\n' > hop; sh ./hop; {ready}"),
        ),
        (
            "ignores SIGTERM",
            format!("sh -c 'trap \"\" TERM HUP INT; {LOOP}' & {ready}"),
        ),
    ]
}

/// Every scenario under `mode`/`backend`, as each user.
fn every_scenario(mode: &str, backend: &str) {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let mut failures = Vec::new();
    for who in users() {
        for (name, script) in scenarios() {
            let what = format!("{who:?} {mode}/{backend} {name}");
            let home = tempfile::Builder::new()
                .prefix("tree-ends-")
                .tempdir_in(&base)
                .unwrap();
            // The workspace beside the runtime dir, which must not lie
            // in a writable root (the proxy's socket is made there).
            let ws = home.path().join("ws");
            std::fs::create_dir(&ws).unwrap();
            for d in [home.path(), &ws] {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            who.own(home.path());
            let mark = marker();
            let mut child = who
                .command(env!("CARGO_BIN_EXE_stockade"))
                .env("HOME", home.path())
                .env("XDG_RUNTIME_DIR", home.path())
                .env(MARK_VAR, &mark)
                .env_remove("STOCKADE_CONFIG")
                .env_remove("STOCKADE_MODE")
                .current_dir(&ws)
                .args([
                    "exec",
                    "--no-default-deny-read",
                    "--mode",
                    mode,
                    "--backend",
                    backend,
                ])
                .args(["--", "sh", "-c"])
                // The marker in argv as well: a process that clears its
                // environment still carries it.
                .arg(format!(": {mark}; {script}"))
                .stdin(Stdio::null())
                // The leftovers inherit these: a pipe they hold open must
                // not keep stockade waiting either.
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stderr = child.stderr.take().unwrap();
            let errs = std::thread::spawn(move || {
                let mut s = String::new();
                let _ = stderr.read_to_string(&mut s);
                s
            });
            let status = wait_or_fail(&mut child, &mark, &what);
            let f = ws.join("f");
            let before = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            std::thread::sleep(Duration::from_millis(2500));
            let after = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            let left = marked(&mark);
            for pid in &left {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            if !status.success() {
                // stderr is read only when the run failed: a leftover
                // holding it would keep this read waiting.
                failures.push(format!(
                    "{what}: exit {status}, stderr: {}",
                    errs.join().unwrap()
                ));
                continue;
            }
            if before == 0 {
                failures.push(format!(
                    "{what}: the leftover never wrote (the test is void)"
                ));
            }
            if after != before {
                failures.push(format!(
                    "{what}: f grew from {before} to {after} bytes after the status"
                ));
            }
            if !left.is_empty() {
                failures.push(format!("{what}: processes remain: {left:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn under_supervised_landlock_nothing_a_command_started_outlives_it() {
    every_scenario("workspace-write", "landlock");
}

#[test]
fn under_bwrap_nothing_a_command_started_outlives_it() {
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        every_scenario("workspace-write", "bwrap");
    }
}

/// Nothing wraps the command: `stockade exec`, its subreaper, ends the tree.
#[test]
fn under_danger_full_access_nothing_a_command_started_outlives_it() {
    every_scenario("danger-full-access", "auto");
}
