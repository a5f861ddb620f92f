//! Integration tests of the `landlock-run` launcher against the real kernel.
//! Every workspace lives outside /tmp (which these tests never grant), so a
//! write that lands proves the ruleset, not a lucky grant.
#![cfg(target_os = "linux")]
// A failed unwrap is a failed test; the workspace-wide deny is for the binaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_landlock-run");
const PARTIAL: &str = "landlock-run: partial enforcement (older Landlock ABI)";

/// `BASE/ws` is the workspace (granted rw), `BASE/outside` its sibling (not
/// granted), with `outside/victim` a file the child must not touch.
struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
}

fn scratch() -> Scratch {
    let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target_tmp.starts_with("/tmp") {
        Path::new("/var/tmp")
    } else {
        target_tmp
    };
    let dir = tempfile::Builder::new()
        .prefix("landlock-run-test-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    let out = dir.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("victim"), "original\n").unwrap();
    Scratch { _dir: dir, ws, out }
}

/// Runs `cmd` to completion with a 30 s bound, stdin closed.
fn output(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).map(|_| v)
        })
    };
    let so = drain(Box::new(child.stdout.take().unwrap()));
    let se = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out: {cmd:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: so.join().unwrap().unwrap(),
        stderr: se.join().unwrap().unwrap(),
    }
}

/// `landlock-run --ro / --rw /dev/null --rw WS -- sh -c SCRIPT sh ARGS...`
fn confined_sh(ws: &Path, script: &str, args: &[&OsStr]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--rw", "/dev/null", "--rw"]).arg(ws);
    cmd.args(["--", "sh", "-c", script, "sh"]).args(args);
    output(&mut cmd)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit 125 and exactly one stderr line, starting `landlock-run: ` and not
/// the informational notice.
fn assert_launcher_failure(out: &Output) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "stderr: {err}");
    assert_eq!(
        err.matches('\n').count(),
        1,
        "not exactly one line: {err:?}"
    );
    assert!(
        err.ends_with('\n') && err.starts_with("landlock-run: "),
        "{err:?}"
    );
    assert_ne!(err.trim_end(), PARTIAL);
}

fn assert_absent(p: &Path) {
    assert!(p.symlink_metadata().is_err(), "{} exists", p.display());
}

/// Root-only tests must not silently pass in CI when not run as root.
fn running_as_root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "this test must run as root in CI"
    );
    eprintln!("skipping: not root");
    false
}

#[test]
fn probe_proves_enforcement() {
    let out = output(Command::new(BIN).arg("--probe"));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let rest = stdout
        .trim_end()
        .strip_prefix("landlock-run: probe ok: abi ")
        .unwrap();
    let (abi, level) = rest.split_once(", ").unwrap();
    let abi: u32 = abi.parse().unwrap();
    assert!(abi >= 1);
    let expected = if abi >= 3 {
        "full enforcement"
    } else {
        "partial enforcement"
    };
    assert_eq!(level, expected, "{stdout:?}");
}

#[test]
fn writes_land_only_inside_the_workspace() {
    let s = scratch();
    let ws = s.ws.as_os_str();
    let out = confined_sh(&s.ws, r#"echo inside > "$1/in""#, &[ws]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(s.ws.join("in")).unwrap(),
        "inside\n"
    );

    let out = confined_sh(&s.ws, r#"echo outside > "$1/f""#, &[s.out.as_os_str()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert_absent(&s.out.join("f"));

    // /tmp is not granted here either.
    let tmp = PathBuf::from(format!(
        "/tmp/landlock-run-test-{}-{}",
        std::process::id(),
        line!()
    ));
    let out = confined_sh(&s.ws, r#"echo x > "$1""#, &[tmp.as_os_str()]);
    assert!(!out.status.success());
    assert_absent(&tmp);

    // --ro / still reads outside, and the file grant on /dev/null writes.
    let out = confined_sh(
        &s.ws,
        r#"cat "$1/victim" && echo x > /dev/null"#,
        &[s.out.as_os_str()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "original\n");
}

#[test]
fn renames_and_links_across_the_boundary_are_refused() {
    let s = scratch();
    std::fs::write(s.ws.join("mine"), "mine\n").unwrap();
    let rename = r#"perl -e 'rename($ARGV[0], $ARGV[1]) or die "rename: $!\n"' "$1" "$2""#;
    let (victim, into) = (s.out.join("victim"), s.ws.join("victim"));
    let out = confined_sh(&s.ws, rename, &[victim.as_os_str(), into.as_os_str()]);
    assert!(!out.status.success(), "rename into the workspace succeeded");
    assert!(
        text(&out.stderr).contains("rename: "),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
    assert_absent(&into);

    let (mine, away) = (s.ws.join("mine"), s.out.join("mine"));
    let out = confined_sh(&s.ws, rename, &[mine.as_os_str(), away.as_os_str()]);
    assert!(
        !out.status.success(),
        "rename out of the workspace succeeded"
    );
    assert!(mine.exists());
    assert_absent(&away);

    let link = s.ws.join("hardlink");
    let out = confined_sh(
        &s.ws,
        r#"ln "$1" "$2""#,
        &[victim.as_os_str(), link.as_os_str()],
    );
    assert!(
        !out.status.success(),
        "hard link into the workspace succeeded"
    );
    assert_absent(&link);
}

#[test]
fn symlinks_in_the_workspace_do_not_escape() {
    let s = scratch();
    let (ws, outside) = (s.ws.as_os_str(), s.out.as_os_str());
    let out = confined_sh(
        &s.ws,
        r#"ln -s "$2" "$1/dirlink" && ln -s "$2/victim" "$1/filelink""#,
        &[ws, outside],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        s.ws.join("dirlink")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );

    let out = confined_sh(&s.ws, r#"echo x > "$1/dirlink/f""#, &[ws]);
    assert!(!out.status.success());
    assert_absent(&s.out.join("f"));

    let out = confined_sh(&s.ws, r#"echo x > "$1/filelink""#, &[ws]);
    assert!(!out.status.success());
    assert_eq!(
        std::fs::read_to_string(s.out.join("victim")).unwrap(),
        "original\n"
    );
}

#[test]
fn root_child_has_no_capabilities() {
    if !running_as_root() {
        return;
    }
    let s = scratch();
    let out = output(Command::new(BIN).args(["--ro", "/", "--", "cat", "/proc/self/status"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status = text(&out.stdout);
    for field in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = status
            .lines()
            .find(|l| l.starts_with(&format!("{field}:")))
            .unwrap();
        let value = line.split_whitespace().nth(1).unwrap();
        assert!(value.bytes().all(|b| b == b'0'), "{line}");
    }

    // MakeChar/MakeBlock are granted in WS: only the dropped CAP_MKNOD stops these.
    for (name, kind, dev) in [("nul", "c", ["1", "3"]), ("blk", "b", ["7", "0"])] {
        let node = s.ws.join(name);
        let out = confined_sh(
            &s.ws,
            r#"mknod "$1" "$2" "$3" "$4""#,
            &[
                node.as_os_str(),
                OsStr::new(kind),
                OsStr::new(dev[0]),
                OsStr::new(dev[1]),
            ],
        );
        assert!(!out.status.success(), "mknod {kind} succeeded");
        assert_absent(&node);
    }
}

#[test]
fn root_child_cannot_write_through_proc_root() {
    if !running_as_root() {
        return;
    }
    let s = scratch();
    let mut via = OsString::from(format!("/proc/{}/root", std::process::id()));
    via.push(s.out.join("f").as_os_str());
    let out = confined_sh(&s.ws, r#"echo x > "$1""#, &[&via]);
    assert!(
        !out.status.success(),
        "write through /proc/PID/root succeeded"
    );
    assert_absent(&s.out.join("f"));
}

#[test]
fn child_has_no_controlling_terminal() {
    let s = scratch();
    let out = confined_sh(&s.ws, "exec 3</dev/tty", &[]);
    assert!(!out.status.success());
    // ENXIO: no controlling terminal (a Landlock denial would be EACCES).
    let err = text(&out.stderr);
    assert!(err.contains("No such device or address"), "{err}");
}

/// `script` runs its command in a new session on a fresh pty, so the launcher
/// starts WITH a controlling terminal; the child must still not have one.
fn under_pty(command: &str, marker: &Path) -> Output {
    let mut cmd = Command::new("/usr/bin/script");
    cmd.args(["-qec", command, "/dev/null"])
        .env("SHELL", "/bin/sh");
    cmd.env("LLR", BIN).env("MARK", marker);
    output(&mut cmd)
}

const TTY_CHECK: &str = "if (exec 3</dev/tty); then echo TTY-OPENED; else echo NO-TTY; fi";

#[test]
fn child_has_no_controlling_terminal_under_a_pty() {
    let s = scratch();
    let marker = s.ws.join("marker");
    // Control: the pty really is a controlling terminal.
    let out = under_pty(&format!("sh -c '{TTY_CHECK}'"), &marker);
    assert!(
        text(&out.stdout).contains("TTY-OPENED"),
        "{}",
        text(&out.stdout)
    );

    // The launcher is forked by the shell, so setsid() detaches it.
    let cmd = format!(
        r#""$LLR" --ro / --rw /dev/tty --rw "${{MARK%/*}}" -- sh -c '{TTY_CHECK}; touch "$MARK"'; exit $?"#
    );
    let out = under_pty(&cmd, &marker);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("NO-TTY") && !stdout.contains("TTY-OPENED"),
        "{stdout}"
    );
    // ENXIO, i.e. no controlling terminal, not a Landlock EACCES.
    assert!(stdout.contains("No such device or address"), "{stdout}");
    assert!(marker.exists(), "the child did not run: {stdout}");
}

#[test]
fn process_group_leader_on_a_terminal_gives_the_terminal_up() {
    let s = scratch();
    let marker = s.ws.join("marker");
    // How an executor spawns it (a fresh process group, so a timeout can kill
    // the whole group): setsid() gets EPERM and TIOCNOTTY must detach it.
    let cmd = format!(
        r#"perl -e 'setpgrp(0, 0) or die; exec @ARGV or die' "$LLR" --ro / --rw /dev/tty --rw "${{MARK%/*}}" -- sh -c '{TTY_CHECK}; touch "$MARK"'; exit $?"#
    );
    let out = under_pty(&cmd, &marker);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("NO-TTY") && !stdout.contains("TTY-OPENED"),
        "{stdout}"
    );
    assert!(marker.exists(), "{stdout}");
}

#[test]
fn session_leader_with_a_terminal_fails_closed() {
    let s = scratch();
    let marker = s.ws.join("marker");
    // exec: the launcher is the pty's session leader; setsid() gets EPERM and
    // TIOCNOTTY would hang up its own group, so it must refuse to run.
    let cmd = r#"exec "$LLR" --ro / --rw "${MARK%/*}" -- sh -c 'touch "$MARK"'"#;
    let out = under_pty(cmd, &marker);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(125), "{stdout}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stdout:?}");
    assert!(lines[0].starts_with("landlock-run: "), "{stdout:?}");
    assert_absent(&marker);
}

/// ARGV that would create MARKER if the child ran.
const TOUCH: [&str; 5] = ["sh", "-c", r#"touch "$1""#, "sh", "MARKER"];

/// Runs the launcher with `args`, where `WS` stands for the workspace and
/// `MARKER` for a file in it, and expects a launcher failure with no marker.
fn failure_case(args: &[&str]) -> Output {
    let s = scratch();
    let marker = s.ws.join("marker");
    let mut cmd = Command::new(BIN);
    for arg in args {
        match *arg {
            "WS" => cmd.arg(&s.ws),
            "MARKER" => cmd.arg(&marker),
            a => cmd.arg(a),
        };
    }
    let out = output(&mut cmd);
    assert_launcher_failure(&out);
    assert_absent(&marker);
    out
}

fn with_touch(args: &[&'static str]) -> Vec<&'static str> {
    [args, &TOUCH[..]].concat()
}

#[test]
fn grammar_failures_exit_125_with_one_line() {
    // A control: the same ARGV with the grammar right does create the marker.
    let s = scratch();
    let marker = s.ws.join("marker");
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--rw"])
        .arg(&s.ws)
        .arg("--")
        .args(&TOUCH[..4])
        .arg(&marker);
    assert!(output(&mut cmd).status.success());
    assert!(marker.exists());

    failure_case(&with_touch(&["--ro", "/", "--rw", "WS"])); // no --
    failure_case(&["--ro", "/", "--rw", "WS", "--"]); // empty ARGV
    failure_case(&with_touch(&["--ro", "/", "--bogus", "--rw", "WS", "--"]));
    failure_case(&with_touch(&["--ro=/", "--rw", "WS", "--"]));
    failure_case(&["--rw", "WS", "--ro"]); // --ro without a value
    failure_case(&with_touch(&["--rw", "WS", "--ro", "--"])); // the value is the separator
    failure_case(&with_touch(&["--probe", "--"]));
    failure_case(&with_touch(&["--ro", "/", "--rw", "WS", "--probe", "--"]));
    failure_case(&["--probe", "extra"]);
    let out = failure_case(&[]);
    let usage = "landlock-run: usage: landlock-run [--ro PATH]... [--rw PATH]... -- ARGV...";
    assert!(
        text(&out.stderr).starts_with(usage),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn missing_grant_path_fails() {
    let out = failure_case(&with_touch(&[
        "--ro",
        "/",
        "--rw",
        "WS",
        "--rw",
        "/nope-llr",
        "--",
    ]));
    assert_eq!(
        text(&out.stderr),
        "landlock-run: grant path does not exist: /nope-llr\n"
    );
    // Even a name with a newline in it yields a single line.
    failure_case(&with_touch(&[
        "--ro",
        "/",
        "--rw",
        "WS",
        "--ro",
        "/no\nsuch",
        "--",
    ]));
    failure_case(&with_touch(&[
        "--ro",
        "/",
        "--rw",
        "WS",
        "--ro",
        "/etc/passwd/x",
        "--",
    ]));
}

#[test]
fn exec_failure_fails() {
    for prog in [
        "/nonexistent/landlock-run-prog",
        "no-such-program-landlock-run",
    ] {
        let out = output(Command::new(BIN).args(["--ro", "/", "--", prog]));
        assert_launcher_failure(&out);
        let expected = format!("landlock-run: cannot execute \"{prog}\": ");
        assert!(
            text(&out.stderr).starts_with(&expected),
            "{}",
            text(&out.stderr)
        );
    }
    // Not under any grant: the ruleset itself denies the exec.
    let out = output(Command::new(BIN).args(["--", "/bin/true"]));
    assert_launcher_failure(&out);
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn non_utf8_paths_and_arguments_pass_through() {
    let s = scratch();
    let dir = s.ws.join(OsStr::from_bytes(b"ws \xff dir"));
    std::fs::create_dir(&dir).unwrap();
    let arg = OsString::from_vec(b"arg \xfe\x80 end".to_vec());
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--rw"]).arg(&dir).args([
        "--",
        "sh",
        "-c",
        r#"printf %s "$1" > "$2/out""#,
    ]);
    cmd.arg("sh").arg(&arg).arg(&dir);
    let out = output(&mut cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(dir.join("out")).unwrap(), arg.as_bytes());
}

#[test]
fn child_exit_status_passes_through() {
    let s = scratch();
    for code in [0, 7, 125] {
        let out = confined_sh(&s.ws, &format!("exit {code}"), &[]);
        assert_eq!(out.status.code(), Some(code));
        // A child's own 125 comes with no launcher line (the notice aside).
        assert!(
            text(&out.stderr).lines().all(|l| l == PARTIAL),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn descriptors_inherited_without_cloexec_do_not_reach_the_child() {
    let s = scratch();
    let outside = s.out.join("through-fd");
    std::fs::write(&outside, b"").unwrap();
    // The shell opens fd 7 on a file outside every grant, without O_CLOEXEC,
    // then execs the launcher: a write through that fd would never be checked
    // by Landlock.
    let mut cmd = Command::new("/bin/sh");
    cmd.args([
        "-c",
        r#"exec 7>>"$OUT"; exec "$LLR" --ro / --rw /dev/null -- /bin/sh -c 'echo escaped >&7'"#,
    ])
    .env("OUT", &outside)
    .env("LLR", BIN);
    let out = output(&mut cmd);
    assert!(!out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Bad file descriptor"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        b"",
        "a write escaped through an inherited fd"
    );
}
