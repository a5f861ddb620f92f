//! `stockade exec --ask` at a terminal asks about a host not on the list
//! while the command waits: on a real pseudo-terminal (util-linux
//! `script`), both backends, as root and (when we are root, as in CI) as
//! `nobody`. The listener is the test's own on 127.0.0.1, outside the
//! sandbox; `other.test` is mapped to it in the proxy's resolver. When
//! `CI=true` a missing runner or tool fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

const QUESTION: &str = "allow network access to other.test:80? [o]nce / [s]ession / [N]o";
const MARKER: &str = "[sandbox: network access to other.test denied under allow-listed network]";

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn tools() -> bool {
    let have = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    stockade_testkit::require("curl", have("curl"))
        && stockade_testkit::require("script", have("script"))
}

struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
    who: Who,
}

fn scratch(who: Who) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let dir = tempfile::Builder::new()
        .prefix("ask-running-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&state).unwrap();
    who.own(dir.path());
    Scratch {
        _dir: dir,
        ws,
        state,
        who,
    }
}

/// `stockade exec ARGS -- sh -c SCRIPT` on a pseudo-terminal of its own,
/// `answer` typed once `question` shows.
fn at_terminal(
    s: &Scratch,
    args: &str,
    port: u16,
    script: &str,
    question: &str,
    answer: &str,
) -> Output {
    let cmd = format!(
        "{} exec {args} -- sh -c '{script}'",
        env!("CARGO_BIN_EXE_stockade")
    );
    let child = s
        .who
        .command("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_RUNTIME_DIR", &s.state)
        .env("HOME", &s.state)
        .env(
            "STOCKADE_PROXY_RESOLVE",
            format!("other.test=127.0.0.1:{port}"),
        )
        .env_remove("TMPDIR")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .current_dir(&s.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    stockade_testkit::prompt::answer_when_asked(child, question, answer)
}

/// Listed: loopback (what the test's names resolve to), never other.test.
const FLAGS: &str =
    "--mode workspace-write --network allow-listed --no-default-hosts --allow-host 127.0.0.1 --ask";

/// The counter is written before the connection: a rerun would write it
/// twice.
const SCRIPT: &str = "echo x >> count; curl -sS -m 60 http://other.test/; echo; echo done";

#[test]
fn yes_lets_the_held_connection_through_without_a_rerun() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            for (pty, answer) in [(true, "y"), (false, "y\n")] {
                let s = scratch(who);
                let srv = stockade_testkit::http::ok_server();
                // --json: no pty session of stockade's own; the question is
                // read from /dev/tty a line at a time.
                let json = if pty { "" } else { "--json" };
                let args = format!("--backend {backend} {FLAGS} {json}");
                let out = at_terminal(&s, &args, srv.port, SCRIPT, QUESTION, answer);
                let text = String::from_utf8_lossy(&out.stdout);
                let tag = format!("{who:?} {backend} pty={pty}");
                assert!(text.contains(QUESTION), "{tag}: {text}");
                assert!(!text.contains(MARKER), "{tag}: {text}");
                assert!(!text.contains("retry this command"), "{tag}: {text}");
                assert_eq!(srv.hits(), 1, "{tag}: {text}");
                assert_eq!(
                    fs::read_to_string(s.ws.join("count")).unwrap(),
                    "x\n",
                    "{tag}: {text}"
                );
                assert!(text.contains("ok"), "{tag}: {text}");
                assert!(text.contains("done"), "{tag}: {text}");
            }
        }
    }
}

#[test]
fn no_is_todays_refusal_and_is_not_offered_again() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = stockade_testkit::http::ok_server();
            let args = format!("--backend {backend} {FLAGS}");
            let out = at_terminal(&s, &args, srv.port, SCRIPT, QUESTION, "n");
            let text = String::from_utf8_lossy(&out.stdout);
            let tag = format!("{who:?} {backend}");
            assert!(text.contains(QUESTION), "{tag}: {text}");
            assert!(text.contains(MARKER), "{tag}: {text}");
            assert!(text.contains("done"), "{tag}: {text}");
            // The user already said no to that host: no wider retry offered.
            assert!(!text.contains("retry this command"), "{tag}: {text}");
            assert_eq!(srv.hits(), 0, "{tag}: {text}");
            assert_eq!(
                fs::read_to_string(s.ws.join("count")).unwrap(),
                "x\n",
                "{tag}: {text}"
            );
        }
    }
}

/// No answer within --ask-timeout refuses as today (the answer typed after
/// the command finished reaches no question).
#[test]
fn no_answer_in_time_refuses() {
    if !tools() {
        return;
    }
    let s = scratch(Who::Me);
    let srv = stockade_testkit::http::ok_server();
    let args = format!("--backend landlock {FLAGS} --ask-timeout 1");
    // Typed only once the command has printed its last line.
    let out = at_terminal(&s, &args, srv.port, SCRIPT, "done", "n\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(QUESTION), "{text}");
    assert!(text.contains(MARKER), "{text}");
    assert_eq!(srv.hits(), 0, "{text}");
}

/// `[approval] max_questions` bounds the questions of one command: past it
/// an unlisted host is refused as today, unasked.
#[test]
fn the_config_bounds_the_questions_of_one_command() {
    if !tools() {
        return;
    }
    for backend in backends() {
        let s = scratch(Who::Me);
        let srv = stockade_testkit::http::ok_server();
        let config = s.ws.parent().unwrap().join("stockade.toml");
        fs::write(&config, "[sandbox]\n[approval]\nmax_questions = 1\n").unwrap();
        let args = format!(
            "--backend {backend} {FLAGS} --config {} --ask-timeout 2",
            config.display()
        );
        // other.test asked and allowed; third.test over the bound.
        let script = "curl -sS -m 60 http://other.test/; echo; curl -sS -m 60 http://third.test/; echo; echo done";
        let cmd = format!(
            "{} exec {args} -- sh -c '{script}'",
            env!("CARGO_BIN_EXE_stockade")
        );
        let child = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("XDG_RUNTIME_DIR", &s.state)
            .env("HOME", &s.state)
            .env(
                "STOCKADE_PROXY_RESOLVE",
                format!(
                    "other.test=127.0.0.1:{0},third.test=127.0.0.1:{0}",
                    srv.port
                ),
            )
            .env_remove("TMPDIR")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .current_dir(&s.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // third.test's refusal ends the run with the wider retry offered:
        // declined, never left to what the terminal makes of an end of file.
        let out = stockade_testkit::prompt::answer_in_turn(
            child,
            &[(QUESTION, "y"), ("retry this command once", "n\n")],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(QUESTION), "{backend}: {text}");
        assert!(
            !text.contains("allow network access to third.test"),
            "{backend}: {text}"
        );
        assert!(
            text.contains(
                "[sandbox: network access to third.test denied under allow-listed network]"
            ),
            "{backend}: {text}"
        );
        assert_eq!(srv.hits(), 1, "{backend}: {text}");
    }
}
