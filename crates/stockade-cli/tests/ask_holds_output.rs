//! While `stockade exec --ask` shows a question at the terminal, nothing
//! the confined command writes reaches that terminal, whatever the command
//! does to its own: a loop in it resumes its output (`tcflow(TCOON)`, which
//! undid the suspension stockade used before) and prints a numbered line
//! over and over. On a real pseudo-terminal (util-linux `script`), both
//! backends, as root and (when we are root, as in CI) as `nobody`: the
//! command holds only its own pty's slave, and stockade's copier of the
//! master stops while the question shows. Its lines are held, not lost:
//! every number up to the loop's last arrives after the answer. Under
//! `--json` (no pty of stockade's: the question is read from `/dev/tty`)
//! the command's stdin is not the terminal, so what it writes there is
//! never shown either. When `CI=true` a missing runner or tool fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stockade_testkit::users::{Who, users};

const QUESTION: &str = "allow network access to other.test:80? [o]nce / [s]ession / [N]o";

/// Resumes the output of the terminal on descriptor ARGV[0] and writes a
/// numbered line there, until `stop` exists; then, on stdout, how many it
/// wrote.
const SPOOF: &str = r#"use POSIX;
my $fd = $ARGV[0];
my $i = 0;
until (-e "stop") {
    POSIX::tcflow($fd, POSIX::TCOON);
    $i++;
    my $line = "SPOOF-$i\n";
    POSIX::write($fd, $line, length $line);
    select(undef, undef, undef, 0.02);
}
$| = 1;
print "SPOOF-END $i\n";
"#;

/// The loop runs beside the connection the question holds, and stops only
/// once the connection is answered. It writes to the command's stdout on
/// its pty, and to the command's stdin under `--json` (a background job's
/// own stdin is `/dev/null`: descriptor 3 is the command's).
fn script(pty: bool) -> String {
    let fd = if pty { 1 } else { 3 };
    format!(
        "exec 3<&0; perl spoof.pl {fd} & curl -sS -m 60 http://other.test/; echo; touch stop; wait; echo done"
    )
}

/// Listed: loopback (what the test's names resolve to), never other.test.
const FLAGS: &str =
    "--mode workspace-write --network allow-listed --no-default-hosts --allow-host 127.0.0.1 --ask";

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
        && stockade_testkit::require("perl", have("perl"))
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
        .prefix("ask-hold-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&state).unwrap();
    fs::write(ws.join("spoof.pl"), SPOOF).unwrap();
    who.own(dir.path());
    Scratch {
        _dir: dir,
        ws,
        state,
        who,
    }
}

/// What the terminal showed: everything, and what it showed from the end
/// of the question until the answer was typed.
struct Shown {
    all: String,
    while_asked: String,
    status: std::process::ExitStatus,
}

/// `stockade exec ARGS -- sh -c SCRIPT` on a pseudo-terminal of its own.
/// Once the question shows, the terminal is watched for `watch` before
/// `answer` is typed (the only question this run asks: nothing is left to
/// an end of input).
fn at_terminal(
    s: &Scratch,
    args: &str,
    script: &str,
    port: u16,
    watch: Duration,
    answer: &str,
) -> Shown {
    let cmd = format!(
        "{} exec {args} -- sh -c '{script}'",
        env!("CARGO_BIN_EXE_stockade")
    );
    let mut child = s
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
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            let _ = tx.send(buf[..n].to_vec());
        }
    });
    let mut all = Vec::new();
    let shown = |all: &[u8]| {
        String::from_utf8_lossy(all)
            .find(QUESTION)
            .map(|at| at + QUESTION.len())
    };
    let mut asked = None;
    while asked.is_none() {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(chunk) => all.extend_from_slice(&chunk),
            Err(_) => break,
        }
        asked = shown(&all);
    }
    // Watched, not measured: whatever the wait, nothing of the command's
    // may show until the answer.
    let until = Instant::now() + watch;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(chunk) => all.extend_from_slice(&chunk),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break,
            Err(_) => break,
        }
    }
    let while_asked = match asked {
        Some(at) => String::from_utf8_lossy(&all)
            .get(at..)
            .unwrap_or("")
            .to_owned(),
        None => String::new(),
    };
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(answer.as_bytes());
    let _ = stdin.flush();
    drop(stdin);
    for chunk in rx {
        all.extend_from_slice(&chunk);
    }
    reader.join().unwrap();
    let status = child.wait().unwrap();
    Shown {
        all: String::from_utf8_lossy(&all).into_owned(),
        while_asked,
        status,
    }
}

/// The numbers of the loop's lines in `text`, in the order shown.
fn numbers(text: &str) -> Vec<u64> {
    text.split("SPOOF-")
        .skip(1)
        .filter_map(leading_number)
        .collect()
}

fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[test]
fn the_command_cannot_print_while_a_question_is_shown() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            for pty in [true, false] {
                let s = scratch(who);
                let srv = stockade_testkit::http::ok_server();
                let (json, answer) = if pty { ("", "y") } else { ("--json", "y\n") };
                let args = format!("--backend {backend} {FLAGS} {json}");
                let watch = Duration::from_secs(1);
                let out = at_terminal(&s, &args, &script(pty), srv.port, watch, answer);
                let tag = format!("{who:?} {backend} pty={pty}");
                let text = &out.all;
                assert!(text.contains(QUESTION), "{tag}: {text}");
                assert!(out.status.success(), "{tag}: {:?}: {text}", out.status);
                assert!(text.contains("ok"), "{tag}: {text}");
                assert!(text.contains("done"), "{tag}: {text}");
                assert_eq!(srv.hits(), 1, "{tag}: {text}");
                // Between the question and the answer: none of the command's.
                assert!(
                    !out.while_asked.contains("SPOOF"),
                    "{tag}: shown while asked: {:?}",
                    out.while_asked
                );
                let end = text
                    .split("SPOOF-END ")
                    .nth(1)
                    .and_then(leading_number)
                    .unwrap_or_else(|| panic!("{tag}: the loop's count is missing: {text}"));
                if !pty {
                    // Its stdin is not the terminal: nothing it wrote there
                    // showed, ever.
                    assert!(end > 0, "{tag}: {text}");
                    assert_eq!(numbers(text), Vec::<u64>::new(), "{tag}: {text}");
                    continue;
                }
                // Held, not lost: the loop went on after the question showed
                // (it stops only once the connection is answered), and every
                // line it wrote arrived once, in order.
                let at = text.find(QUESTION).unwrap();
                let before = numbers(&text[..at]).into_iter().max().unwrap_or(0);
                assert!(end > before, "{tag}: {end} after {before}: {text}");
                assert!(
                    numbers(&text[at..]).first().is_some_and(|&n| n > before),
                    "{tag}: {text}"
                );
                assert_eq!(
                    numbers(text),
                    (1..=end).collect::<Vec<_>>(),
                    "{tag}: {text}"
                );
            }
        }
    }
}

/// Without a pty of stockade's while CMD's output is shown (here stdout
/// to a file, stderr still the terminal), CMD writes to the terminal
/// itself, with nothing to hold it: nothing is asked while it runs (the
/// host is refused as without `--ask`), and the retry is offered after
/// the run, when nothing of the command is left.
#[test]
fn where_the_command_shares_the_terminal_nothing_is_asked_while_it_runs() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = stockade_testkit::http::ok_server();
            let out_file = s.ws.join("out");
            let cmd = format!(
                "{} exec --backend {backend} {FLAGS} -- sh -c 'curl -sS -m 60 http://other.test/; echo done' > {}",
                env!("CARGO_BIN_EXE_stockade"),
                out_file.display()
            );
            let child = s
                .who
                .command("script")
                .args(["-qec", &cmd, "/dev/null"])
                .env("XDG_RUNTIME_DIR", &s.state)
                .env("HOME", &s.state)
                .env(
                    "STOCKADE_PROXY_RESOLVE",
                    format!("other.test=127.0.0.1:{}", srv.port),
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
            let out = stockade_testkit::prompt::answer_in_turn(
                child,
                &[("retry this command once", "n\n")],
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let tag = format!("{who:?} {backend}");
            assert!(!text.contains(QUESTION), "{tag}: {text}");
            assert!(text.contains("retry this command once"), "{tag}: {text}");
            assert_eq!(srv.hits(), 0, "{tag}: {text}");
            let shown = fs::read_to_string(&out_file).unwrap();
            assert!(shown.contains("done"), "{tag}: {shown}");
        }
    }
}

/// The command ends while its question is shown: the question is
/// withdrawn (the run's end waits for that, not for an answer), and what
/// the command wrote meanwhile, held, is shown after it, not lost.
#[test]
fn a_command_that_ends_while_asked_is_shown_after_the_question() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = stockade_testkit::http::ok_server();
            let script = "curl -sS -m 60 http://other.test/ & while [ ! -e asked ]; do sleep 0.05; done; echo LAST-WORDS; exit 3";
            let cmd = format!(
                "{} exec --backend {backend} {FLAGS} -- sh -c '{script}'",
                env!("CARGO_BIN_EXE_stockade"),
            );
            let mut child = s
                .who
                .command("script")
                .args(["-qec", &cmd, "/dev/null"])
                .env("XDG_RUNTIME_DIR", &s.state)
                .env("HOME", &s.state)
                .env(
                    "STOCKADE_PROXY_RESOLVE",
                    format!("other.test=127.0.0.1:{}", srv.port),
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
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdout = child.stdout.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
            let reader = std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stdout.read(&mut buf) {
                    let _ = tx.send(buf[..n].to_vec());
                }
            });
            let mut all = Vec::new();
            let mut stdin = child.stdin.take().unwrap();
            let until = |all: &mut Vec<u8>, what: &str| {
                while !String::from_utf8_lossy(all).contains(what) {
                    match rx.recv_timeout(Duration::from_secs(60)) {
                        Ok(chunk) => all.extend_from_slice(&chunk),
                        Err(_) => break,
                    }
                }
            };
            until(&mut all, QUESTION);
            // Only now does the command write, and end.
            fs::write(s.ws.join("asked"), "").unwrap();
            // Nothing more is asked (the connection died with the command
            // before it was refused); a retry question would be declined.
            until(&mut all, "retry this command once");
            if String::from_utf8_lossy(&all).contains("retry this command once") {
                let _ = stdin.write_all(b"n\n");
                let _ = stdin.flush();
            }
            drop(stdin);
            for chunk in &rx {
                all.extend_from_slice(&chunk);
            }
            reader.join().unwrap();
            let status = child.wait().unwrap();
            let text = String::from_utf8_lossy(&all);
            let tag = format!("{who:?} {backend}");
            let asked = text
                .find(QUESTION)
                .unwrap_or_else(|| panic!("{tag}: {text}"));
            let last = text
                .find("LAST-WORDS")
                .unwrap_or_else(|| panic!("{tag}: the held output is lost: {text}"));
            assert!(last > asked, "{tag}: {text}");
            assert_eq!(srv.hits(), 0, "{tag}: {text}");
            assert_eq!(status.code(), Some(3), "{tag}: {text}");
        }
    }
}
