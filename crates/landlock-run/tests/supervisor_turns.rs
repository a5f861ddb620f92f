//! The supervisor's per-call shortcuts (issue 26) against the real kernel:
//!
//! - One worker receives at a time (`supervise/turns.rs`): a governed call
//!   that blocks in the supervisor (a FIFO opened for writing, waiting for
//!   its reader) must not hold up the command's other governed calls. Three
//!   such opens hold all the workers that receive; the readers are opened
//!   only after a mkdir and a create have been answered, so with nobody
//!   left to receive the run would never end.
//! - Files judged through a descriptor are kept (`supervise/fence/cache.rs`)
//!   only under the kernel's name of that descriptor: a file moved after a
//!   first `fchmod` through its descriptor is judged again where it lies
//!   now. Moved outside every writable root or into a protected directory
//!   (by someone outside the run, here the test), the second `fchmod` is
//!   refused; moved within the root, it works.
//! - A create (mkdir, mknod, symlink, link) whose name exists is answered
//!   EEXIST from one look-up in the held parent, whatever the name is: a
//!   dangling symlink named with a trailing slash is not followed (the
//!   supervisor used to make the directory it pointed to), as the kernel
//!   answers under `--no-supervise`.
//!
//! Every scenario runs as ourselves and, when we are root (as in CI), as
//! `nobody`. When `CI=true` a missing python3 fails.
#![cfg(target_os = "linux")]
// A failed unwrap is a failed test; the workspace-wide deny is for the binaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use stockade_testkit::users::{Who, WsAndOutside, users};

const BIN: &str = env!("CARGO_BIN_EXE_landlock-run");
const PY: &str = "/usr/bin/python3";
/// How long a scenario may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(30);

fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

/// `BASE/llr-turns-*/{ws,outside}`, `ws/{a,b,p}` made, handed to `who`.
fn scratch(who: Who) -> WsAndOutside {
    WsAndOutside::new(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "llr-turns-",
        who,
        |ws, _| {
            for d in ["a", "b", "p"] {
                fs::create_dir(ws.join(d)).unwrap();
            }
        },
    )
}

/// `landlock-run --ro / --rw /dev/null --rw WS [--protect WS/p] -- python3 -c SCRIPT ARGS`
/// as `who`, in WS, stdin and stdout piped.
fn spawn(who: Who, ws: &Path, script: &str, args: &[&str]) -> Child {
    let mut c = who.command(BIN);
    c.args(["--ro", "/", "--rw", "/dev/null", "--rw"])
        .arg(ws)
        .arg("--protect")
        .arg(ws.join("p"))
        .args(["--", PY, "-c", script])
        .args(args)
        .current_dir(ws)
        .env_remove("TMPDIR")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Lines of the child's stdout, as they come.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next line, or a failed test (with the child killed and its stderr).
fn next_line(rx: &mpsc::Receiver<String>, child: &mut Child, what: &str) -> String {
    match rx.recv_timeout(LIMIT) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("{what}: no line within {LIMIT:?} (hung or failed); stderr: {err}");
        }
    }
}

fn finish(child: &mut Child, what: &str) {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            assert!(status.success(), "{what}: {status:?}, stderr: {err}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: did not end within {LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Each writer's open of its FIFO is governed and blocks in the
/// supervisor until a reader comes. Three writers, so that all the workers
/// that receive at a time (`turns::RECEIVERS`) are held; the script waits
/// until every writer is inside that open (`/proc/PID/syscall` names `openat`),
/// then makes a directory and a file (both governed), and only then opens
/// the readers.
const BLOCKED: &str = r#"
import os, sys, time
OPENAT = int(sys.argv[1])
writers = []
for name in ["fifo0", "fifo1", "fifo2"]:
    os.mkfifo(name)
    pid = os.fork()
    if pid == 0:
        fd = os.open(name, os.O_WRONLY)
        os.write(fd, b"x")
        os._exit(0)
    writers.append((name, pid))
for _, pid in writers:
    while True:
        with open(f"/proc/{pid}/syscall") as f:
            if f.read().split()[0] == str(OPENAT):
                break
        time.sleep(0.001)
os.mkdir("d")
os.close(os.open("d/f", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
print("created", flush=True)
for name, pid in writers:
    r = os.open(name, os.O_RDONLY)
    print("read", os.read(r, 1).decode(), flush=True)
    _, status = os.waitpid(pid, 0)
    print("writer", status, flush=True)
"#;

#[test]
fn a_call_blocked_in_the_supervisor_does_not_hold_up_the_others() {
    if !python() {
        return;
    }
    let openat = if cfg!(target_arch = "aarch64") {
        "56"
    } else {
        "257"
    };
    for who in users() {
        let s = scratch(who);
        let what = format!("blocked FIFO open as {who:?}");
        let mut child = spawn(who, &s.ws, BLOCKED, &[openat]);
        let rx = lines(&mut child);
        assert_eq!(next_line(&rx, &mut child, &what), "created", "{what}");
        for _ in 0..3 {
            assert_eq!(next_line(&rx, &mut child, &what), "read x", "{what}");
            assert_eq!(next_line(&rx, &mut child, &what), "writer 0", "{what}");
        }
        finish(&mut child, &what);
        assert!(s.ws.join("d/f").is_file(), "{what}");
    }
}

/// Opens a/f, fchmods it through the descriptor (0o600), says "ready",
/// waits for a line on stdin (the test moves the file meanwhile), fchmods
/// again (0o640) and prints 0 or the errno.
const MOVED: &str = r#"
import os, sys
fd = os.open("a/f", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
os.fchmod(fd, 0o600)
print("ready", flush=True)
sys.stdin.readline()
try:
    os.fchmod(fd, 0o640)
    print("fchmod 0", flush=True)
except OSError as e:
    print("fchmod", e.errno, flush=True)
"#;

/// A name, where the file goes, the second fchmod's line, the mode after.
type Leg = (
    &'static str,
    fn(&WsAndOutside) -> PathBuf,
    &'static str,
    u32,
);

#[test]
fn a_file_moved_after_a_descriptor_call_is_judged_where_it_is() {
    if !python() {
        return;
    }
    for who in users() {
        // Where the test moves the file to, and what the second fchmod gives.
        let legs: [Leg; 3] = [
            ("outside", |s| s.out.join("f"), "fchmod 13", 0o600),
            ("protected", |s| s.ws.join("p/f"), "fchmod 13", 0o600),
            ("within", |s| s.ws.join("b/f"), "fchmod 0", 0o640),
        ];
        for (leg, to, expect, mode) in legs {
            let s = scratch(who);
            let what = format!("file moved {leg} as {who:?}");
            let mut child = spawn(who, &s.ws, MOVED, &[]);
            let rx = lines(&mut child);
            assert_eq!(next_line(&rx, &mut child, &what), "ready", "{what}");
            let dest = to(&s);
            fs::rename(s.ws.join("a/f"), &dest).unwrap();
            child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
            assert_eq!(next_line(&rx, &mut child, &what), expect, "{what}");
            finish(&mut child, &what);
            let now = fs::metadata(&dest).unwrap().permissions().mode() & 0o7777;
            assert_eq!(now, mode, "{what}: mode {now:o}");
        }
    }
}

/// Every create of a name that exists, each printed with its errno (or
/// "made"), then whether the dangling symlink's target came to exist.
const EXISTING: &str = r#"
import os
os.symlink("tgt", "dl")
os.mkdir("d")
os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644))
def attempt(label, fn):
    try:
        fn()
        print(label, "made")
    except OSError as e:
        print(label, e.errno)
for name in ["dl/", "dl", "d", "d/", "f", "f/"]:
    attempt("mkdir " + name, lambda: os.mkdir(name))
    attempt("mkfifo " + name, lambda: os.mkfifo(name))
    attempt("symlink " + name, lambda: os.symlink("x", name))
    attempt("link " + name, lambda: os.link("f", name))
print("tgt", os.path.lexists("tgt"))
"#;

#[test]
fn a_create_of_an_existing_name_is_eexist_as_the_kernel_says() {
    if !python() {
        return;
    }
    for who in users() {
        let mut outputs = Vec::new();
        for supervised in [true, false] {
            let s = scratch(who);
            let what = format!("existing names as {who:?}, supervised {supervised}");
            let mut c = who.command(BIN);
            c.args(["--ro", "/", "--rw", "/dev/null", "--rw"])
                .arg(&s.ws);
            if !supervised {
                c.arg("--no-supervise");
            }
            let out = c
                .args(["--", PY, "-c", EXISTING])
                .current_dir(&s.ws)
                .env_remove("TMPDIR")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{what}: {:?} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).unwrap();
            for line in text.lines().filter(|l| !l.starts_with("tgt")) {
                assert!(line.ends_with(" 17"), "{what}: {line}");
            }
            assert!(text.contains("tgt False"), "{what}: {text}");
            outputs.push(text);
        }
        assert_eq!(outputs[0], outputs[1], "as {who:?}");
    }
}
