//! `stockade exec --ask` at a terminal asks about a write outside the
//! writable roots while the command waits, under supervised Landlock (the
//! one backend with a channel), beside the host question: on a real
//! pseudo-terminal (util-linux `script`), as root and (when we are root, as
//! in CI) as `nobody`. Under bwrap no path is asked about; the refused
//! directory is offered for a rerun after the run, as before. When
//! `CI=true` a missing runner or tool fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use stockade_testkit::prompt::answer_in_turn;
use stockade_testkit::users::{Who, users};

const HOST_QUESTION: &str = "allow network access to other.test:80? [o]nce / [s]ession / [N]o";
/// Declined too, never left to what the terminal makes of an end of input.
const WIDER: &str = "retry this command once under danger-full-access? [y/N]";
const HOST_MARKER: &str =
    "[sandbox: network access to other.test denied under allow-listed network]";

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
    out: PathBuf,
    state: PathBuf,
    who: Who,
}

impl Scratch {
    /// The question about writing `out/f`.
    fn path_question(&self) -> String {
        format!(
            "stockade: allow writing {}/f (write)? [o]nce this path / [d]irectory / [N]o",
            self.out.display()
        )
    }
}

fn scratch(who: Who) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let dir = tempfile::Builder::new()
        .prefix("ask-paths-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // The supervisor names the directory by its present, resolved name.
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

/// `stockade exec ARGS -- sh -c SCRIPT` on a pseudo-terminal of its own.
fn at_terminal(s: &Scratch, args: &str, port: u16, script: &str) -> Child {
    let cmd = format!(
        "{} exec {args} -- sh -c '{script}'",
        env!("CARGO_BIN_EXE_stockade")
    );
    s.who
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
        .unwrap()
}

/// Listed: loopback (what the test's names resolve to), never other.test.
const FLAGS: &str =
    "--mode workspace-write --network allow-listed --no-default-hosts --allow-host 127.0.0.1 --ask";

/// The counter first (a rerun would write it twice), then a host not on
/// the list, then a file outside the workspace.
fn script(s: &Scratch) -> String {
    format!(
        "echo x >> count; curl -sS -m 60 http://other.test/; echo; echo hi > {}/f && echo wrote || echo refused; echo done",
        s.out.display()
    )
}

/// The case: yes to the host and to the path, and the one run
/// completes: the counter at 1, the outside file written, nothing retried.
#[test]
fn yes_to_a_host_and_a_path_completes_the_one_run() {
    if !tools() {
        return;
    }
    for who in users() {
        for (pty, answer) in [(true, "y"), (false, "y\n")] {
            let s = scratch(who);
            let srv = stockade_testkit::http::ok_server();
            // --json: no pty session of stockade's own; the questions are
            // read from /dev/tty a line at a time.
            let json = if pty { "" } else { "--json" };
            let args = format!("--backend landlock {FLAGS} {json}");
            let child = at_terminal(&s, &args, srv.port, &script(&s));
            let pq = s.path_question();
            let out = answer_in_turn(child, &[(HOST_QUESTION, answer), (&pq, answer)]);
            let text = String::from_utf8_lossy(&out.stdout);
            let tag = format!("{who:?} pty={pty}");
            assert!(text.contains(HOST_QUESTION), "{tag}: {text}");
            assert!(text.contains(&pq), "{tag}: {text}");
            assert!(!text.contains(HOST_MARKER), "{tag}: {text}");
            assert!(!text.contains("file access denied"), "{tag}: {text}");
            assert!(!text.contains("retry this command"), "{tag}: {text}");
            assert!(text.contains("wrote"), "{tag}: {text}");
            assert!(text.contains("done"), "{tag}: {text}");
            assert_eq!(srv.hits(), 1, "{tag}: {text}");
            assert_eq!(
                fs::read_to_string(s.ws.join("count")).unwrap(),
                "x\n",
                "{tag}: {text}"
            );
            assert_eq!(
                fs::read_to_string(s.out.join("f")).unwrap(),
                "hi\n",
                "{tag}: {text}"
            );
            // `script -e`: stockade's status, the command's own.
            assert_eq!(out.status.code(), Some(0), "{tag}: {text}");
        }
    }
}

/// No to both: today's refusals and markers, nothing written outside, and
/// neither the host nor the refused directory offered again after the run.
#[test]
fn no_to_a_host_and_a_path_is_todays_refusal() {
    if !tools() {
        return;
    }
    for who in users() {
        let s = scratch(who);
        let srv = stockade_testkit::http::ok_server();
        let args = format!("--backend landlock {FLAGS}");
        let child = at_terminal(&s, &args, srv.port, &script(&s));
        let pq = s.path_question();
        let out = answer_in_turn(child, &[(HOST_QUESTION, "n"), (&pq, "n")]);
        let text = String::from_utf8_lossy(&out.stdout);
        let tag = format!("{who:?}");
        assert!(text.contains(HOST_QUESTION), "{tag}: {text}");
        assert!(text.contains(&pq), "{tag}: {text}");
        assert!(text.contains(HOST_MARKER), "{tag}: {text}");
        assert!(
            text.contains("[sandbox: file access denied under workspace-write mode]"),
            "{tag}: {text}"
        );
        assert!(text.contains("refused"), "{tag}: {text}");
        assert!(!text.contains("writable too?"), "{tag}: {text}");
        assert!(!s.out.join("f").exists(), "{tag}: {text}");
        assert_eq!(srv.hits(), 0, "{tag}: {text}");
        assert_eq!(
            fs::read_to_string(s.ws.join("count")).unwrap(),
            "x\n",
            "{tag}: {text}"
        );
    }
}

/// No answer within --ask-timeout refuses the write as today; the
/// directory is then offered for a rerun (the user never said no to it).
#[test]
fn no_answer_in_time_refuses_the_path() {
    if !tools() {
        return;
    }
    let s = scratch(Who::Me);
    let args = "--backend landlock --mode workspace-write --ask --ask-timeout 1";
    let script = format!(
        "echo hi > {}/f && echo wrote || echo refused; echo done",
        s.out.display()
    );
    let child = at_terminal(&s, args, 9, &script);
    // Unanswered is not a no: the directory is still offered for a rerun.
    let narrower = format!(
        "retry this command once with {} writable too? [y/N]",
        s.out.display()
    );
    let out = answer_in_turn(child, &[(&narrower, "n\n"), (WIDER, "n\n")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&s.path_question()), "{text}");
    assert!(text.contains("refused"), "{text}");
    assert!(text.contains(&narrower), "{text}");
    assert!(!s.out.join("f").exists(), "{text}");
}

/// bwrap has no channel: no path question while it runs; the refused
/// directory is offered for one rerun after it, as before.
#[test]
fn under_bwrap_no_path_is_asked_and_the_rerun_is_offered() {
    if !tools() || !stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        return;
    }
    for who in users() {
        let s = scratch(who);
        let script = format!(
            "echo x >> count; echo hi > {}/f && echo wrote || echo refused; echo done",
            s.out.display()
        );
        let child = at_terminal(
            &s,
            "--backend bwrap --mode workspace-write --ask",
            9,
            &script,
        );
        let narrower = format!(
            "retry this command once with {} writable too? [y/N]",
            s.out.display()
        );
        let out = answer_in_turn(child, &[(&narrower, "n\n"), (WIDER, "n\n")]);
        let text = String::from_utf8_lossy(&out.stdout);
        let tag = format!("{who:?}");
        assert!(!text.contains("allow writing"), "{tag}: {text}");
        assert!(text.contains("refused"), "{tag}: {text}");
        assert!(text.contains(&narrower), "{tag}: {text}");
        assert!(!s.out.join("f").exists(), "{tag}: {text}");
    }
}
