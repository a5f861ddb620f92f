//! `landlock-run --die-with-parent`: when the launcher's caller is killed
//! outright (SIGKILL, no chance to clean up), the launcher and its command go
//! with it, supervised or not; without the flag the command lives on. When
//! `CI=true` a missing launcher is a failure, never a skip.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LOOP: &str = "while :; do sleep 1; done";

fn launcher() -> Option<PathBuf> {
    let built = stockade_testkit::built_launcher();
    stockade_testkit::require("the built landlock-run", built.is_some());
    built
}

/// The pids of commands (`/bin/sh -c LOOP MARKER`) carrying `marker`.
fn commands(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if argv.len() >= 4
            && argv[0] == b"/bin/sh"
            && argv[2] == LOOP.as_bytes()
            && argv[3] == marker.as_bytes()
        {
            out.push(pid);
        }
    }
    out
}

fn wait_for(deadline: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    done()
}

#[test]
fn a_killed_caller_takes_the_launcher_and_its_command_with_it() {
    let Some(launcher) = launcher() else {
        return;
    };
    for (flags, dies) in [
        (&["--die-with-parent"][..], true),
        (&["--die-with-parent", "--no-supervise"][..], true),
        (&[][..], false),
    ] {
        let marker = format!(
            "die-with-parent-{}-{}-{}",
            std::process::id(),
            flags.len(),
            dies
        );
        // The caller: a shell that starts the launcher in the background and
        // waits, until it is killed with SIGKILL.
        let mut caller = Command::new("/bin/sh")
            .args(["-c", "\"$@\" & wait", "sh"])
            .arg(&launcher)
            .args(flags)
            .args([
                "--ro",
                "/",
                "--rw",
                "/dev/null",
                "--",
                "/bin/sh",
                "-c",
                LOOP,
            ])
            .arg(&marker)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_for(Duration::from_secs(10), || !commands(&marker).is_empty()),
            "{flags:?}: the command never started"
        );
        caller.kill().unwrap();
        caller.wait().unwrap();
        if dies {
            assert!(
                wait_for(Duration::from_secs(10), || commands(&marker).is_empty()),
                "{flags:?}: the command outlived its killed caller"
            );
        } else {
            std::thread::sleep(Duration::from_millis(500));
            let left = commands(&marker);
            assert!(!left.is_empty(), "without the flag the command lives on");
            for pid in left {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

#[test]
fn die_with_parent_is_a_run_mode_flag() {
    let Some(launcher) = launcher() else {
        return;
    };
    let out = Command::new(&launcher)
        .args(["--close-fds", "--die-with-parent", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown option \"--die-with-parent\""),
        "{err}"
    );
}
