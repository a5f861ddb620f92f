//! Integration tests of the `landlock-run` launcher against the real kernel.
//! Every workspace lives outside /tmp (which these tests never grant), so a
//! write that lands proves the ruleset, not a lucky grant.
#![cfg(target_os = "linux")]
// A failed unwrap is a failed test; the workspace-wide deny is for the binaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{ErrorKind, Read};
use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use command_fds::{CommandFdExt, FdMapping};
use stockade_core::status::RunnerStatus;

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
fn session_leader_with_a_terminal_is_detached_by_the_supervised_child() {
    let s = scratch();
    let marker = s.ws.join("marker");
    // exec: the launcher is the pty's session leader. Supervised, the command
    // is a forked child (never a session leader), so TIOCNOTTY detaches it
    // without hanging up anyone.
    let cmd = format!(
        r#"exec "$LLR" --ro / --rw /dev/tty --rw "${{MARK%/*}}" -- sh -c '{TTY_CHECK}; touch "$MARK"'"#
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
fn session_leader_with_a_terminal_fails_closed_unsupervised() {
    let s = scratch();
    let marker = s.ws.join("marker");
    // exec: the launcher is the pty's session leader; setsid() gets EPERM and
    // TIOCNOTTY would hang up its own group, so it must refuse to run.
    let cmd = r#"exec "$LLR" --no-supervise --ro / --rw "${MARK%/*}" -- sh -c 'touch "$MARK"'"#;
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
    // The modes: each option only where it belongs, and a mode flag first.
    failure_case(&["--isolation", "--ro", "/"]);
    failure_case(&["--isolation", "--allow-socket", "/x", "--", "true"]);
    failure_case(&["--isolation", "--ctty"]);
    failure_case(&with_touch(&["--close-fds", "--ro", "/", "--"]));
    failure_case(&with_touch(&["--ro", "/", "--close-fds", "--"]));
    failure_case(&with_touch(&["--ro", "/", "--isolation", "--"]));
    failure_case(&with_touch(&["--ro", "/", "--allow-socket", "--"]));
    failure_case(&with_touch(&["--close-fds"]));
    failure_case(&["--close-fds", "--"]);
    let out = failure_case(&[]);
    let usage = "landlock-run: usage: landlock-run [--ro PATH | --rw PATH | --ro-fd N | --rw-fd N | --protect PATH | --protect-fd N | --allow-socket PATH | --setenv NAME=VALUE | --deny-read PATH | --net-port P | --allow-listen P]... [--status-fd N] [--ask-fd N [--ask-timeout SECS] [--ask-max N]] [--no-supervise] [--net-deny] [--net-connect-supervised] [--die-with-parent] [--ctty] -- ARGV...";
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
fn a_command_that_cannot_be_executed_exits_as_a_shell_says() {
    let s = scratch();
    let script = s.ws.join("not-executable.sh");
    std::fs::write(&script, "echo hi\n").unwrap();
    let script = script.to_str().unwrap().to_owned();
    let cases = [
        (
            "/nonexistent/landlock-run-prog",
            127,
            "/nonexistent/landlock-run-prog: No such file or directory",
        ),
        (
            "no-such-program-landlock-run",
            127,
            "no-such-program-landlock-run: command not found",
        ),
        (
            script.as_str(),
            126,
            &*format!("{script}: Permission denied"),
        ),
    ];
    for no_supervise in [false, true] {
        for (prog, code, line) in &cases {
            let mut c = Command::new(BIN);
            if no_supervise {
                c.arg("--no-supervise");
            }
            let out = output(c.args(["--ro", "/", "--rw"]).arg(&s.ws).args(["--", prog]));
            assert_eq!(out.status.code(), Some(*code), "{}", text(&out.stderr));
            assert_eq!(text(&out.stderr), format!("{line}\n"));
        }
    }
}

#[test]
fn an_exec_the_ruleset_denies_is_not_executable() {
    // Not under any grant: the ruleset itself denies the exec, which a shell
    // reports as it reports any file it may not execute.
    let out = output(Command::new(BIN).args(["--", "/bin/true"]));
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "/bin/true: Permission denied\n");
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

// ---------------------------------------------------------------------------
// Grants on inherited descriptors, the status channel, sockets, signals and
// procfs/sysfs.

/// Where the tests put the status pipe in the launcher.
const STATUS_FD: i32 = 5;

/// A launcher command with `fds` placed at fixed numbers, plus the read end of
/// a status pipe whose write end is at `STATUS_FD`.
fn launcher_with_fds(fds: Vec<(OwnedFd, i32)>) -> (Command, std::io::PipeReader) {
    let (reader, writer) = std::io::pipe().unwrap();
    let mut mappings = vec![FdMapping {
        parent_fd: writer.into(),
        child_fd: STATUS_FD,
    }];
    mappings.extend(fds.into_iter().map(|(parent_fd, child_fd)| FdMapping {
        parent_fd,
        child_fd,
    }));
    let mut cmd = Command::new(BIN);
    cmd.fd_mappings(mappings).unwrap();
    (cmd, reader)
}

/// Runs `cmd`, then drops it (closing this process's copy of the write end)
/// and reads everything the status channel carried.
fn run_reading_status(mut cmd: Command, mut reader: std::io::PipeReader) -> (Output, Vec<u8>) {
    let out = output(&mut cmd);
    drop(cmd);
    let mut status = Vec::new();
    reader.read_to_end(&mut status).unwrap();
    (out, status)
}

/// `landlock-run [--close-fds] --status-fd 5 ARGS...` with the pipe in place
/// (`--close-fds` must stay the first argument).
fn with_status(args: &[&OsStr]) -> (Output, Vec<u8>) {
    let (mut cmd, reader) = launcher_with_fds(vec![]);
    let (mode, rest) = match args.split_first() {
        Some((first, rest)) if *first == "--close-fds" => (Some(*first), rest),
        _ => (None, args),
    };
    cmd.args(mode)
        .arg("--status-fd")
        .arg(STATUS_FD.to_string())
        .args(rest);
    run_reading_status(cmd, reader)
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// A launcher failure whose status record carries the stderr line's message.
fn assert_failure_recorded(out: &Output, status: &[u8]) {
    assert_launcher_failure(out);
    let err = text(&out.stderr);
    let message = err.trim_end().strip_prefix("landlock-run: ").unwrap();
    assert_eq!(
        RunnerStatus::parse(status),
        RunnerStatus::Failed(message.to_owned()),
        "status {:?}",
        text(status)
    );
    assert!(status.ends_with(b"\n"), "{:?}", text(status));
}

#[test]
fn rw_fd_grants_the_held_directory_not_its_old_name() {
    let s = scratch();
    let base = s.ws.parent().unwrap();
    // Not UTF-8 on purpose: nothing here may depend on names being text.
    let held = base.join(OsStr::from_bytes(b"held \xff"));
    let moved = base.join(OsStr::from_bytes(b"moved \xfe"));
    let other = base.join("other");
    std::fs::create_dir(&held).unwrap();
    std::fs::create_dir(&other).unwrap();
    let dir: OwnedFd = std::fs::File::open(&held).unwrap().into();
    // After the caller resolved and opened it, the name is swapped for a
    // symlink to a directory that was never granted.
    std::fs::rename(&held, &moved).unwrap();
    std::os::unix::fs::symlink(&other, &held).unwrap();

    let run = |option: &str, script: &str, target: &Path| {
        let (mut cmd, reader) = launcher_with_fds(vec![(dir.try_clone().unwrap(), 7)]);
        cmd.args(["--status-fd", "5", "--ro", "/", option, "7", "--"]);
        cmd.args(["sh", "-c", script, "sh"]).arg(target);
        run_reading_status(cmd, reader)
    };
    let write = r#"echo x > "$1/f""#;

    // Through the old name: it now leads to `other`, which is not granted.
    let (out, status) = run("--rw-fd", write, &held);
    assert!(!out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(status, b"ok\n");
    assert_absent(&other.join("f"));
    assert_absent(&moved.join("f"));

    // The held directory itself, wherever it now is, is the grant.
    let (out, status) = run("--rw-fd", write, &moved);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status, b"ok\n");
    assert_eq!(std::fs::read(moved.join("f")).unwrap(), b"x\n");
    assert_absent(&other.join("f"));

    // --ro-fd reads there but does not write.
    let (out, _) = run("--ro-fd", r#"cat "$1/f" && echo y > "$1/g""#, &moved);
    assert!(!out.status.success());
    assert_eq!(text(&out.stdout), "x\n");
    assert_absent(&moved.join("g"));

    // A file descriptor gets only file rights (a directory right would be EINVAL).
    let file: OwnedFd = std::fs::OpenOptions::new()
        .append(true)
        .open(s.out.join("victim"))
        .unwrap()
        .into();
    let (mut cmd, reader) = launcher_with_fds(vec![(file, 8)]);
    cmd.args(["--status-fd", "5", "--ro", "/", "--rw-fd", "8", "--"]);
    cmd.args(["sh", "-c", r#"echo more >> "$1""#, "sh"])
        .arg(s.out.join("victim"));
    let (out, status) = run_reading_status(cmd, reader);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status, b"ok\n");
    assert_eq!(
        std::fs::read(s.out.join("victim")).unwrap(),
        b"original\nmore\n"
    );
}

#[test]
fn descriptor_options_are_validated() {
    let s = scratch();
    for (args, named) in [
        (vec!["--ro", "/", "--rw-fd", "77", "--", "true"], "77"),
        (vec!["--ro", "/", "--ro-fd", "x7", "--", "true"], "x7"),
        (vec!["--ro", "/", "--rw-fd", "2", "--", "true"], "2"),
        (vec!["--ro", "/", "--rw-fd", "-1", "--", "true"], "-1"),
        (vec!["--ro", "/", "--rw-fd", "--", "true"], "--rw-fd"),
        (vec!["--status-fd", "99", "--ro", "/", "--", "true"], "99"),
        (
            vec!["--status-fd", "", "--ro", "/", "--", "true"],
            "--status-fd",
        ),
    ] {
        let out = output(Command::new(BIN).args(&args));
        assert_launcher_failure(&out);
        let err = text(&out.stderr);
        assert!(err.starts_with("landlock-run: usage: "), "{err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
    // A descriptor has one use.
    let held: OwnedFd = std::fs::File::open(&s.ws).unwrap().into();
    let (mut cmd, reader) = launcher_with_fds(vec![(held, 7)]);
    cmd.args([
        "--status-fd",
        "5",
        "--rw-fd",
        "7",
        "--ro-fd",
        "7",
        "--ro",
        "/",
        "--",
        "true",
    ]);
    let (out, status) = run_reading_status(cmd, reader);
    assert_failure_recorded(&out, &status);
    assert!(text(&out.stderr).contains("descriptor 7 is given twice"));
    let out = with_status(&[
        os("--rw-fd"),
        os("5"),
        os("--ro"),
        os("/"),
        os("--"),
        os("true"),
    ])
    .0;
    assert_launcher_failure(&out);

    // The status channel must be writable: a read end is refused.
    let (reader, _writer) = std::io::pipe().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.fd_mappings(vec![FdMapping {
        parent_fd: reader.into(),
        child_fd: 6,
    }])
    .unwrap();
    cmd.args(["--status-fd", "6", "--ro", "/", "--", "true"]);
    let out = output(&mut cmd);
    assert_launcher_failure(&out);
    assert!(
        text(&out.stderr).contains("not open for writing"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn status_channel_reports_the_start_and_every_failure() {
    let s = scratch();
    let ws = s.ws.as_os_str();
    let marker = s.ws.join("marker");
    let touch = [
        os("sh"),
        os("-c"),
        os(r#"touch "$1""#),
        os("sh"),
        marker.as_os_str(),
    ];
    let run = |head: &[&OsStr]| with_status(&[head, &touch[..]].concat());

    let (out, status) = run(&[os("--ro"), os("/"), os("--rw"), ws, os("--")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status, b"ok\n");
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();

    // Close-fds mode speaks the same protocol.
    let (out, status) = run(&[os("--close-fds"), os("--")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status, b"ok\n");
    std::fs::remove_file(&marker).unwrap();

    // Failures before the command: a missing grant, bad grammar (even when
    // the bad option comes before --status-fd), a close-fds grammar error.
    let nope = os("/nope-llr");
    for head in [
        vec![
            os("--ro"),
            os("/"),
            os("--rw"),
            ws,
            os("--rw"),
            nope,
            os("--"),
        ],
        vec![os("--ro"), os("/"), os("--bogus"), os("--")],
        vec![os("--ro"), os("/"), os("--rw"), ws],
        vec![os("--close-fds"), os("--ro"), os("/"), os("--")],
        vec![os("--ro"), os("/"), os("--allow-socket"), nope, os("--")],
    ] {
        let (out, status) = run(&head);
        assert_failure_recorded(&out, &status);
        assert_absent(&marker);
    }
    let (out, status) = {
        let (mut cmd, reader) = launcher_with_fds(vec![]);
        cmd.args(["--bogus", "--status-fd", "5", "--ro", "/", "--"])
            .args(touch);
        run_reading_status(cmd, reader)
    };
    assert_failure_recorded(&out, &status);
    assert!(status.starts_with(b"fail usage: "), "{:?}", text(&status));

    // The exec itself fails: `ok` came first, then the command's own
    // not-executable record (not a runner failure).
    for head in [&[os("--ro"), os("/")][..], &[os("--close-fds")][..]] {
        let argv = [os("--"), os("/nonexistent/landlock-run-prog")];
        let (out, status) = with_status(&[head, &argv[..]].concat());
        assert_eq!(out.status.code(), Some(127));
        assert_eq!(
            RunnerStatus::parse(&status),
            RunnerStatus::NotExecutable {
                code: 127,
                message: "/nonexistent/landlock-run-prog: No such file or directory".into()
            },
            "{:?}",
            text(&status)
        );
    }

    // A command that fakes the launcher's failure still started.
    let fake = r#"echo "landlock-run: boom" >&2; exit 125"#;
    let (out, status) = with_status(&[os("--ro"), os("/"), os("--"), os("sh"), os("-c"), os(fake)]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(text(&out.stderr), "landlock-run: boom\n");
    assert_eq!(status, b"ok\n");

    // Nor can it reach the channel to fake a record.
    let forge = r#"echo "fail forged" >&5"#;
    for head in [&[os("--ro"), os("/")][..], &[os("--close-fds")][..]] {
        let argv = [os("--"), os("sh"), os("-c"), os(forge)];
        let (out, status) = with_status(&[head, &argv[..]].concat());
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("Bad file descriptor"),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(status, b"ok\n");
    }
}

/// The `--isolation` facts, checked for their exact shape.
fn isolation(extra: &[&OsStr]) -> BTreeMap<String, String> {
    let out = output(Command::new(BIN).arg("--isolation").args(extra));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<(&str, &str)> = stdout.lines().map(|l| l.split_once(' ').unwrap()).collect();
    let keys: Vec<&str> = lines.iter().map(|l| l.0).collect();
    assert_eq!(
        keys,
        [
            "abi",
            "signals",
            "abstract-sockets",
            "pathname-sockets",
            "metadata",
            "protected-paths",
            "path-approval"
        ],
        "{stdout:?}"
    );
    let facts: BTreeMap<String, String> = lines
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let allowed: [(&str, &[&str]); 3] = [
        ("signals", &["scoped", "open"]),
        ("abstract-sockets", &["scoped", "seccomp", "open"]),
        ("pathname-sockets", &["landlock", "seccomp", "open"]),
    ];
    for (key, values) in allowed {
        assert!(values.contains(&facts[key].as_str()), "{stdout:?}");
    }
    facts["abi"].parse::<u32>().unwrap();
    facts
}

fn abi(facts: &BTreeMap<String, String>) -> u32 {
    facts["abi"].parse().unwrap()
}

/// The real python3 executable (not a shim), or a skip; CI must have it.
fn python3() -> Option<PathBuf> {
    let found = Command::new("python3")
        .args([
            "-c",
            "import os, sys; sys.stdout.buffer.write(os.fsencode(sys.executable))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success() && !o.stdout.is_empty())
        .map(|o| PathBuf::from(OsString::from_vec(o.stdout)));
    // Under CI a missing python3 fails here; elsewhere the test is skipped.
    stockade_testkit::require("python3", found.is_some());
    found
}

/// Tries every way out to a Unix socket and reports each as `LABEL RESULT`,
/// RESULT `connected` or the errno name. argv: pathname, abstract name,
/// datagram pathname.
const SOCKET_SCRIPT: &str = r#"
import ctypes, errno, os, platform, socket, sys

def attempt(label, fn):
    try:
        fn()
        print(label, "connected")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, str(e.errno)))

def stream(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(addr)

def dgram(addr):
    # A datagram pair can address any socket with sendto(), connected or not.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"x", addr)

path, name, dpath = (os.fsencode(a) for a in sys.argv[1:4])
attempt("pathname", lambda: stream(path))
attempt("abstract", lambda: stream(b"\0" + name))
attempt("dgram", lambda: dgram(dpath))
attempt("abstract-dgram", lambda: dgram(b"\0" + name + b"-dgram"))
a, b = socket.socketpair()
a.sendall(b"x")
print("socketpair", "works" if b.recv(1) == b"x" else "broken")
libc = ctypes.CDLL(None, use_errno=True)
def syscall_result(*args):
    r = libc.syscall(*args)
    return "created" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
# 425 is io_uring_setup on x86_64 and aarch64 alike.
print("io_uring", syscall_result(425, 1, ctypes.create_string_buffer(256)))
if platform.machine() == "x86_64":
    # socket(AF_UNIX, SOCK_STREAM, 0) through the x32 numbering.
    print("x32-socket", syscall_result(0x40000000 | 41, 1, 1, 0))
"#;

fn script_results(out: &Output) -> BTreeMap<String, String> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// Listeners outside every grant: a pathname stream socket, an abstract one
/// and a pathname plus an abstract datagram socket, all non-blocking.
struct Daemons {
    path: PathBuf,
    name: String,
    dpath: PathBuf,
    stream: UnixListener,
    abstract_stream: UnixListener,
    dgram: UnixDatagram,
    abstract_dgram: UnixDatagram,
}

impl Daemons {
    fn start(dir: &Path) -> Daemons {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("stockade-llr-test-{}-{nanos}", std::process::id());
        let path = dir.join("daemon.sock");
        let dpath = dir.join("dgram.sock");
        let stream = UnixListener::bind(&path).unwrap();
        let abstract_addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_stream = UnixListener::bind_addr(&abstract_addr).unwrap();
        let dgram = UnixDatagram::bind(&dpath).unwrap();
        let dgram_name = format!("{name}-dgram");
        let abstract_dgram = UnixDatagram::bind_addr(
            &SocketAddr::from_abstract_name(dgram_name.as_bytes()).unwrap(),
        )
        .unwrap();
        for l in [&stream, &abstract_stream] {
            l.set_nonblocking(true).unwrap();
        }
        for d in [&dgram, &abstract_dgram] {
            d.set_nonblocking(true).unwrap();
        }
        Daemons {
            path,
            name,
            dpath,
            stream,
            abstract_stream,
            dgram,
            abstract_dgram,
        }
    }

    fn args(&self) -> [&OsStr; 3] {
        [
            self.path.as_os_str(),
            os(&self.name),
            self.dpath.as_os_str(),
        ]
    }

    /// How many connections or datagrams arrived since the last call.
    fn arrivals(&self) -> usize {
        let mut n = 0;
        for l in [&self.stream, &self.abstract_stream] {
            loop {
                match l.accept() {
                    Ok(_) => n += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("accept: {e}"),
                }
            }
        }
        let mut buf = [0u8; 16];
        for d in [&self.dgram, &self.abstract_dgram] {
            loop {
                match d.recv(&mut buf) {
                    Ok(_) => n += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("recv: {e}"),
                }
            }
        }
        n
    }
}

/// `landlock-run HEAD... -- PYTHON -c SOCKET_SCRIPT ARGS...`
fn socket_attempt(py: &Path, head: &[&OsStr], d: &Daemons) -> BTreeMap<String, String> {
    let mut cmd = Command::new(BIN);
    cmd.args(head)
        .arg("--")
        .arg(py)
        .args(["-c", SOCKET_SCRIPT])
        .args(d.args());
    script_results(&output(&mut cmd))
}

const WAYS_OUT: [&str; 4] = ["pathname", "abstract", "dgram", "abstract-dgram"];

#[test]
fn unix_sockets_outside_cannot_be_reached() {
    let Some(py) = python3() else { return };
    let s = scratch();
    let d = Daemons::start(&s.out);
    let facts = isolation(&[]);

    // Control: unconfined, every way out works, so a refusal below is the sandbox.
    let mut control = Command::new(&py);
    control.args(["-c", SOCKET_SCRIPT]).args(d.args());
    let results = script_results(&output(&mut control));
    for way in WAYS_OUT {
        assert_eq!(results[way], "connected", "{results:?}");
    }
    assert_eq!(d.arrivals(), 4);

    let ws = s.ws.as_os_str();
    let run_mode = [os("--ro"), os("/"), os("--rw"), ws];
    for head in [&run_mode[..], &[os("--close-fds")][..]] {
        let results = socket_attempt(&py, head, &d);
        for way in WAYS_OUT {
            let result = results[way].as_str();
            assert!(
                ["EACCES", "EPERM"].contains(&result),
                "{head:?} {way}: {results:?}"
            );
        }
        assert_eq!(
            d.arrivals(),
            0,
            "{head:?}: a connection got out: {results:?}"
        );
        assert_eq!(results["socketpair"], "works", "{results:?}");
        // The facts say which mechanism refused, and the errno shows it.
        assert_ne!(facts["pathname-sockets"], "open");
        assert_ne!(facts["abstract-sockets"], "open");
        if facts["pathname-sockets"] == "seccomp" {
            // No AF_UNIX socket (nor DGRAM pair) can be made at all.
            for way in WAYS_OUT {
                assert_eq!(results[way], "EACCES", "{way}: {results:?}");
            }
            // io_uring could create sockets behind the filter's back; x32
            // numbers must not slip past it.
            assert_eq!(results["io_uring"], "ENOSYS", "{results:?}");
            // (Refused by the Unix filter, or first by the supervisor's
            // refusing program, which refuses every x32 number.)
            if let Some(x32) = results.get("x32-socket") {
                assert!(["EACCES", "ENOSYS"].contains(&x32.as_str()), "{results:?}");
            }
        } else {
            assert_eq!(results["abstract"], "EPERM", "{results:?}");
        }
    }
}

#[test]
fn allow_socket_opens_only_that_socket() {
    let Some(py) = python3() else { return };
    let s = scratch();
    let d = Daemons::start(&s.out);
    let allow = [os("--allow-socket"), d.path.as_os_str()];
    let facts = isolation(&allow);
    let ws = s.ws.as_os_str();
    let head = [os("--ro"), os("/"), os("--rw"), ws, allow[0], allow[1]];
    let results = socket_attempt(&py, &head, &d);
    if abi(&facts) >= 9 {
        assert_eq!(facts["pathname-sockets"], "landlock");
        assert_eq!(results["pathname"], "connected", "{results:?}");
        // Another pathname socket outside stays closed.
        assert_eq!(results["dgram"], "EACCES", "{results:?}");
        assert_eq!(d.arrivals(), 1);
    } else {
        // Without resolve_unix the filter cannot single one path out, so it
        // is off and the query must say so: the caller reports the gap.
        assert_eq!(facts["pathname-sockets"], "open");
        assert_eq!(results["pathname"], "connected", "{results:?}");
        d.arrivals();
    }
    // Abstract sockets stay closed wherever scopes exist.
    if abi(&facts) >= 6 {
        assert_eq!(facts["abstract-sockets"], "scoped");
        assert_eq!(results["abstract"], "EPERM", "{results:?}");
        assert_eq!(results["abstract-dgram"], "EPERM", "{results:?}");
    } else {
        assert_eq!(facts["abstract-sockets"], "open");
    }
    assert_eq!(results["socketpair"], "works");
    // A socket path that does not exist is a launcher failure, like a grant.
    let missing = s.out.join("missing.sock");
    let out = output(
        Command::new(BIN)
            .args(["--ro", "/", "--allow-socket"])
            .arg(&missing)
            .args(["--", "true"]),
    );
    assert_launcher_failure(&out);
    assert!(
        text(&out.stderr).contains("socket path does not exist"),
        "{}",
        text(&out.stderr)
    );
}

/// A 32-bit syscall from a 64-bit process has other numbers (socketcall);
/// the filter's architecture check must kill it, not let it through.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_32_bit_socketcall_does_not_pass_the_filter() {
    let Some(py) = python3() else { return };
    let script = r#"
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
# PROT_READ|WRITE|EXEC, MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT: int 0x80 takes 32-bit pointers.
page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)
args = page + 64
# push rbx; mov eax, 102 (socketcall); mov ebx, 1 (SYS_SOCKET); mov ecx, args; int 0x80; pop rbx; ret
code = (b"\x53" + b"\xb8" + struct.pack("<I", 102) + b"\xbb" + struct.pack("<I", 1)
        + b"\xb9" + struct.pack("<I", args) + b"\xcd\x80" + b"\x5b\xc3")
ctypes.memmove(page, code, len(code))
ctypes.memmove(args, struct.pack("<III", 1, 1, 0), 12)  # AF_UNIX, SOCK_STREAM, 0
print("socketcall", ctypes.CFUNCTYPE(ctypes.c_int)(page)(), flush=True)
"#;
    let mut control = Command::new(&py);
    control.args(["-c", script]);
    let out = output(&mut control);
    let fd: Option<i32> = text(&out.stdout)
        .trim()
        .strip_prefix("socketcall ")
        .and_then(|n| n.parse().ok());
    if fd.is_none_or(|fd| fd < 0) {
        // No IA-32 emulation in this kernel: no 32-bit way in to test.
        eprintln!("skipping: int 0x80 socketcall does not work here: {out:?}");
        return;
    }
    let facts = isolation(&[]);
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--"]).arg(&py).args(["-c", script]);
    let out = output(&mut cmd);
    assert!(!text(&out.stdout).contains("socketcall"), "{out:?}");
    if facts["pathname-sockets"] == "seccomp" {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGSYS), "{out:?}");
    }
}

#[test]
fn processes_outside_cannot_be_signalled() {
    let s = scratch();
    let facts = isolation(&[]);
    let mut outside = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = outside.id().to_string();
    let script =
        r#"kill -0 "$1" && echo SIGNALLED; sleep 5 & p=$!; kill -0 $p && echo INSIDE-OK; kill $p"#;
    let run_mode = confined_sh(&s.ws, script, &[os(&pid)]);
    let mut cmd = Command::new(BIN);
    cmd.args(["--close-fds", "--", "sh", "-c", script, "sh", &pid]);
    let close_fds_mode = output(&mut cmd);
    let _ = outside.kill();
    let _ = outside.wait();
    for out in [run_mode, close_fds_mode] {
        let stdout = text(&out.stdout);
        // Signals within the sandbox keep working.
        assert!(
            stdout.contains("INSIDE-OK"),
            "{stdout} {}",
            text(&out.stderr)
        );
        if abi(&facts) >= 6 {
            assert_eq!(facts["signals"], "scoped");
            assert!(!stdout.contains("SIGNALLED"), "{stdout}");
            assert!(
                text(&out.stderr).contains("Operation not permitted"),
                "{}",
                text(&out.stderr)
            );
        } else {
            assert_eq!(facts["signals"], "open");
        }
    }
}

/// Walks /proc/sys and /sys (bounded) and, for each regular file with a write
/// bit that it can read, writes back exactly what it read. Reports the counts
/// as `tried N dac-writable N opened N written N`, then any opened path on
/// stderr. access(2) is not checked by Landlock, so `dac-writable` counts the
/// files that only the ruleset kept from being written (not a read-only
/// mount or the mode).
const PROC_WRITE_SCRIPT: &str = r#"
import os, stat, sys, time

# Not walked: debugfs/tracefs (a write to `trace` clears it), securityfs,
# selinuxfs and power (writes there act rather than set). `uevent` is
# skipped for the same reason.
SKIP = {b"/sys/kernel/debug", b"/sys/kernel/tracing", b"/sys/kernel/security",
        b"/sys/fs/selinux", b"/sys/power"}
tried = dac = opened = written = 0
leaks = []

def visit(path):
    global tried, dac, opened, written
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o222:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, 65536)
        finally:
            os.close(fd)
    except OSError:
        return
    tried += 1
    dac += os.access(path, os.W_OK)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    opened += 1
    leaks.append(path)
    try:
        os.write(fd, data)
        written += 1
    except OSError:
        pass
    finally:
        os.close(fd)

for root in (b"/proc/sys", b"/sys"):
    deadline, budget = time.monotonic() + 8, tried + 4000
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if os.path.join(top, d) not in SKIP)
        for name in sorted(files):
            if name != b"uevent":
                visit(os.path.join(top, name))
        if tried >= budget or time.monotonic() > deadline:
            break
print("tried", tried, "dac-writable", dac, "opened", opened, "written", written)
for p in leaks[:20]:
    sys.stderr.buffer.write(p + b"\n")
"#;

#[test]
fn procfs_and_sysfs_cannot_be_written() {
    let Some(py) = python3() else { return };
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--"])
        .arg(&py)
        .args(["-c", PROC_WRITE_SCRIPT]);
    let out = output(&mut cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let counts: Vec<u64> = stdout
        .split_whitespace()
        .skip(1)
        .step_by(2)
        .map(|n| n.parse().unwrap())
        .collect();
    let [tried, dac, opened, written] = counts[..] else {
        panic!("{stdout:?}")
    };
    let who = if rustix::process::geteuid().is_root() {
        "root"
    } else {
        "non-root"
    };
    eprintln!(
        "{who}: tried {tried} files with a write bit under /proc/sys and /sys, \
         {dac} of them writable but for the ruleset"
    );
    assert!(tried > 0, "nothing was tried: {stdout}");
    assert_eq!(
        (opened, written),
        (0, 0),
        "opened for writing: {}",
        text(&out.stderr)
    );
}

/// `--setenv` sets a variable for the command only, in both modes, and a
/// malformed pair is a usage failure.
#[test]
fn setenv_reaches_the_command_only() {
    let bin = env!("CARGO_BIN_EXE_landlock-run");
    for mode in [vec!["--ro", "/", "--rw", "/dev/null"], vec!["--close-fds"]] {
        let out = std::process::Command::new(bin)
            .args(&mode)
            .args([
                "--setenv",
                "LD_LIBRARY_PATH=/a:/b",
                "--setenv",
                "X=y=z",
                "--",
            ])
            .args([
                "/bin/sh",
                "-c",
                "printf '%s %s' \"$LD_LIBRARY_PATH\" \"$X\"",
            ])
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/a:/b y=z", "{out:?}");
    }
    for bad in ["=x", "NOEQUALS"] {
        let out = std::process::Command::new(bin)
            .args(["--ro", "/", "--setenv", bad, "--", "/bin/true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--setenv needs NAME=VALUE"));
    }
}

/// `--deny-read`: the files beneath a denied directory and a denied file are
/// unreadable (directly, through `..` and through a symlink), their
/// siblings and ancestors read and list, and the names inside a denied
/// directory stay listable (the gap the provider names).
#[test]
fn deny_read_refuses_contents_and_keeps_everything_beside_readable() {
    let s = scratch();
    let secret = s.out.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::write(secret.join("key"), "TOPSECRET\n").unwrap();
    std::fs::write(s.out.join("token"), "TOKEN\n").unwrap();
    std::fs::hard_link(s.out.join("token"), s.ws.join("token-link")).unwrap();
    std::os::unix::fs::symlink(&secret, s.ws.join("secret-link")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--rw", "/dev/null", "--rw"])
        .arg(&s.ws)
        .arg("--deny-read")
        .arg(&secret)
        .arg("--deny-read")
        .arg(s.out.join("token"));
    cmd.args([
        "--",
        "sh",
        "-c",
        "cat \"$1/secret/key\"; cat \"$1/secret/../secret/key\"; cat \"$2/secret-link/key\"; cat \"$1/token\"; cat \"$1/victim\"; ls \"$1\"; ls \"$1/secret\"",
        "sh",
    ])
    .arg(&s.out)
    .arg(&s.ws);
    let out = output(&mut cmd);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        !stdout.contains("TOPSECRET") && !stdout.contains("TOKEN"),
        "{stdout}"
    );
    assert_eq!(stderr.matches("Permission denied").count(), 4, "{stderr}");
    assert!(stdout.contains("original"), "{stdout}");
    // `ls outside` names secret, token and victim; `ls secret` names key.
    for name in ["secret\n", "token\n", "victim\n", "key\n"] {
        assert!(stdout.contains(name), "{name}: {stdout}");
    }
    // A hard link made beforehand is another path to the same inode, and
    // Landlock judges paths: readable (README, "Not claimed"). A confined
    // run cannot make one itself (Landlock refuses a link that would gain
    // rights).
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--rw", "/dev/null", "--rw"])
        .arg(&s.ws)
        .arg("--deny-read")
        .arg(s.out.join("token"))
        .args(["--", "cat"])
        .arg(s.ws.join("token-link"));
    assert_eq!(text(&output(&mut cmd).stdout), "TOKEN\n");
}

#[test]
fn deny_read_takes_only_absolute_paths_without_dot_dot() {
    for bad in ["rel", "/", "/a/../b", "--"] {
        let mut cmd = Command::new(BIN);
        cmd.args(["--ro", "/", "--deny-read", bad, "--", "true"]);
        assert_launcher_failure(&output(&mut cmd));
    }
    // Close-fds mode has no filesystem rules to split.
    let mut cmd = Command::new(BIN);
    cmd.args(["--close-fds", "--deny-read", "/x", "--", "true"]);
    assert_launcher_failure(&output(&mut cmd));
}

/// `python3 -c SCRIPT` under `landlock-run --ro / --rw /dev/null NET...`,
/// its stdout. The script prints one word per probe.
fn net_probe(net: &[&str], script: &str) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--rw", "/dev/null"])
        .args(net)
        .args(["--", "/usr/bin/python3", "-c", script]);
    let out = output(&mut cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// Connect to each port, then try a UDP, a raw-ish (SCTP stream) and a
/// packet socket; print ok/refused for each.
const NET_SCRIPT: &str = r#"
import socket, sys
def attempt(f):
    try:
        f(); return "ok"
    except OSError:
        return "refused"
for port in sys.argv[1:]:
    def c(p=int(port)):
        s = socket.create_connection(("127.0.0.1", p), timeout=3); s.close()
    print(attempt(c))
print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)))
print(attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)))
print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)))
print(attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)))
"#;

#[test]
fn net_port_allows_only_that_port_and_net_deny_nothing() {
    if !stockade_testkit::require("/usr/bin/python3", Path::new("/usr/bin/python3").is_file()) {
        return;
    }
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (pa, pb) = (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    );
    let script = format!("import sys; sys.argv[1:] = ['{pa}', '{pb}']\n{NET_SCRIPT}");
    // The control: without a network option everything connects.
    let host = net_probe(&[], &script);
    assert!(host.starts_with("ok\nok\nok\nok\n"), "{host}");
    let port = net_probe(&["--net-port", &pa.to_string()], &script);
    let lines: Vec<&str> = port.lines().collect();
    // Port a, not b; no UDP, no SCTP, no packet sockets.
    assert_eq!(
        lines,
        ["ok", "refused", "refused", "refused", "refused", "refused"],
        "{port}"
    );
    let deny = net_probe(&["--net-deny"], &script);
    let lines: Vec<&str> = deny.lines().collect();
    assert_eq!(
        lines,
        [
            "refused", "refused", "refused", "refused", "refused", "refused"
        ],
        "{deny}"
    );
}

#[test]
fn network_options_are_checked() {
    for bad in [
        &["--net-port", "0"][..],
        &["--net-port", "70000"],
        &["--net-port", "x"],
        &["--net-deny", "--net-port", "1"],
        &["--net-deny", "--net-deny"],
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args(["--ro", "/"]).args(bad).args(["--", "true"]);
        assert_launcher_failure(&output(&mut cmd));
    }
    for bad in [
        &["--net-bridge", "80"][..],
        &["--net-bridge", "80:/path/sock"],
        &["--net-bridge", "80:2"],
        &["--net-bridge", "0:5"],
        // Not open in the launcher.
        &["--net-bridge", "80:57"],
        &["--net-bridge", "80:5", "--net-bridge", "81:6"],
        &["--status-fd", "5", "--net-bridge", "80:5"],
    ] {
        let mut cmd = Command::new(BIN);
        cmd.arg("--close-fds").args(bad).args(["--", "true"]);
        assert_launcher_failure(&output(&mut cmd));
    }
    // --net-bridge is close-fds only; --net-deny is run mode only.
    let mut cmd = Command::new(BIN);
    cmd.args(["--ro", "/", "--net-bridge", "80:5", "--", "true"]);
    assert_launcher_failure(&output(&mut cmd));
    let mut cmd = Command::new(BIN);
    cmd.args(["--close-fds", "--net-deny", "--", "true"]);
    assert_launcher_failure(&output(&mut cmd));
}
