//! `stockade exec --ask` after a write refused outside the writable roots
//! offers that one directory, writable for one retry, before a wider mode:
//! on a real pseudo-terminal (util-linux `script`), both backends, as root
//! and (when we are root, as in CI) as `nobody`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn have_script() -> bool {
    let ok = Command::new("sh")
        .args(["-c", "command -v script"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    stockade_testkit::require("script", ok)
}

struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
    state: PathBuf,
    who: Who,
}

fn scratch(who: Who) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let dir = tempfile::Builder::new()
        .prefix("narrower-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let (ws, out, state) = (root.join("ws"), root.join("out"), root.join("state"));
    for d in [&ws, &out, &state] {
        fs::create_dir(d).unwrap();
    }
    who.own(dir.path());
    Scratch {
        _dir: dir,
        ws,
        out,
        state,
        who,
    }
}

/// `stockade exec` at a terminal of its own, each answer typed once its
/// question shows.
fn at_terminal(s: &Scratch, backend: &str, turns: &[(&str, &str)]) -> Output {
    let cmd = format!(
        "{} exec --backend {backend} --mode workspace-write --ask --ask-timeout 1 -- sh -c 'echo x >> count; echo y > {}/f'",
        env!("CARGO_BIN_EXE_stockade"),
        s.out.display()
    );
    let child = s
        .who
        .command("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_RUNTIME_DIR", &s.state)
        .env("HOME", &s.state)
        .env_remove("TMPDIR")
        .current_dir(&s.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    stockade_testkit::prompt::answer_in_turn(child, turns)
}

#[test]
fn the_refused_directory_is_offered_before_a_wider_mode() {
    if !have_script() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let tag = format!("{who:?} {backend}");
            let s = scratch(who);
            let narrower = format!(
                "retry this command once with {} writable too? [y/N]",
                s.out.display()
            );
            let out = at_terminal(&s, backend, &[(&narrower, "y\n")]);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains(&narrower), "{tag}: {text}");
            assert!(!text.contains("danger-full-access?"), "{tag}: {text}");
            assert_eq!(fs::read_to_string(s.out.join("f")).unwrap(), "y\n", "{tag}");
            // A rerun: the command ran twice.
            assert_eq!(fs::read_to_string(s.ws.join("count")).unwrap(), "x\nx\n");
            assert_eq!(out.status.code(), Some(0), "{tag}: {text}");

            // Declined: the wider mode is offered next, as before.
            let s = scratch(who);
            let narrower = format!(
                "retry this command once with {} writable too? [y/N]",
                s.out.display()
            );
            let wider = "retry this command once under danger-full-access? [y/N]";
            let out = at_terminal(&s, backend, &[(&narrower, "n\n"), (wider, "n\n")]);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains(&narrower), "{tag}: {text}");
            assert!(text.contains(wider), "{tag}: {text}");
            assert!(!s.out.join("f").exists(), "{tag}: {text}");
            assert_eq!(fs::read_to_string(s.ws.join("count")).unwrap(), "x\n");
        }
    }
}

/// A signal (INT, TERM, HUP, QUIT) while a retry question waits ends the
/// invocation as it would while the command runs (128 + the signal),
/// nothing retried: the question is no place to be stuck (a read of the
/// terminal used to hold the process, the runtime's handlers swallowing
/// SIGTERM and Ctrl-C).
#[test]
fn a_signal_at_the_question_ends_the_invocation() {
    use std::io::Read;
    if !have_script() {
        return;
    }
    let backend = backends()[0];
    for (signal, code) in [("TERM", 143), ("INT", 130), ("HUP", 129), ("QUIT", 131)] {
        let s = scratch(Who::Me);
        let cmd = format!(
            "{} exec --backend {backend} --mode workspace-write --ask --ask-timeout 1 -- sh -c 'echo x >> count; echo y > {}/f'",
            env!("CARGO_BIN_EXE_stockade"),
            s.out.display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("XDG_RUNTIME_DIR", &s.state)
            .env("HOME", &s.state)
            .env_remove("TMPDIR")
            .current_dir(&s.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (mut seen, mut buf) = (Vec::new(), [0u8; 4096]);
        while !String::from_utf8_lossy(&seen).contains("writable too? [y/N]") {
            let n = stdout.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "{signal}: no question: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
        // stockade itself, wherever it sits below `script` (a `$SHELL -c`
        // that does not exec, as dash, is between them in CI).
        let stockade = stockade_testkit::procs::descendant_running(
            child.id(),
            Path::new(env!("CARGO_BIN_EXE_stockade")),
        )
        .expect("stockade below script");
        let st = Command::new("kill")
            .args([format!("-{signal}"), stockade.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        // Bounded, so that a run stuck at the question fails the test.
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = Command::new("pkill")
                    .args(["-KILL", "-P"])
                    .arg(child.id().to_string())
                    .status();
                let _ = child.kill();
                panic!("{signal}: stockade was still at the question a minute later");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(code), "{signal}");
        assert_eq!(
            fs::read_to_string(s.ws.join("count")).unwrap(),
            "x\n",
            "{signal}"
        );
        assert!(!s.out.join("f").exists(), "{signal}");
        drop(child.stdin.take());
    }
}
