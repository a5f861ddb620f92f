//! The supervisor's caches (umask, working directory, directory classes;
//! `supervise/fence/cache.rs`) against the real kernel: after every call
//! that changes what is kept, a create lands where and with the mode the
//! kernel itself gives it. Each scenario runs supervised and under
//! `--no-supervise` (plain Landlock: the kernel performs every create), and
//! both the expected tree and the equality of the two trees are asserted.
//! Every scenario creates before and after the change, so the second create
//! meets a kept entry.
//!
//! Every scenario runs as ourselves and, when we are root (as in CI), as
//! `nobody`. When `CI=true` a missing python3 fails.
#![cfg(target_os = "linux")]
// A failed unwrap is a failed test; the workspace-wide deny is for the binaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use stockade_testkit::users::{Who, users};

const BIN: &str = env!("CARGO_BIN_EXE_landlock-run");
const PY: &str = "/usr/bin/python3";

fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

/// The scenarios, one per argv[1]. `mk` creates a file with mode 0o666;
/// ordering between threads is by events, never by sleeping.
const SCRIPT: &str = r#"
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
CLONE_FS = 0x200
PY = os.environ["PY"]

def mk(name, mode=0o666):
    os.close(os.open(name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, mode))

def unshare_fs():
    if libc.unshare(CLONE_FS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_FS)")

def in_thread(fn):
    err = []
    def run():
        try:
            fn()
        except BaseException as e:
            err.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if err:
        raise err[0]

which = sys.argv[1]
os.umask(0o022)
if which == "umask":
    mk("u1")                 # 644
    os.umask(0o077)
    mk("u2")                 # 600
    os.mkdir("u3", 0o777)    # 700
    os.umask(0o002)
    os.mkfifo("u4", 0o666)   # 664
    os.umask(0o027)
    os.mkdir("u5", 0o777)    # 750
    # A thread shares the umask (CLONE_FS): its change is everyone's.
    in_thread(lambda: os.umask(0o070))
    mk("u6")                 # 606
    os.symlink("u6", "u7")
    mk("u8", 0o777)          # 707
elif which == "chdir":
    os.mkdir("a")
    os.mkdir("b")
    mk("c0")                 # ws/c0
    # A thread shares the cwd (CLONE_FS): its chdir is everyone's.
    in_thread(lambda: os.chdir("a"))
    mk("c1")                 # ws/a/c1
    os.mkdir("sub", 0o777)   # ws/a/sub
    fd = os.open("../b", os.O_RDONLY | os.O_DIRECTORY)
    os.fchdir(fd)
    mk("c2")                 # ws/b/c2
    os.chdir("..")
    mk("c3")                 # ws/c3
    in_thread(lambda: os.fchdir(fd))
    mk("c4")                 # ws/b/c4
elif which == "unshared":
    os.mkdir("a")
    os.mkdir("b")
    mk("m0")                 # ws/m0 644: the main thread's cwd and umask kept
    ready, done = threading.Event(), threading.Event()
    def own_fs():
        unshare_fs()
        os.chdir("a")
        os.umask(0o077)
        mk("t1")             # ws/a/t1 600
        ready.set()
        done.wait()
        mk("t2")             # ws/a/t2 600
    t = threading.Thread(target=own_fs)
    t.start()
    ready.wait()
    mk("m1")                 # ws/m1 644: not the thread's
    done.set()
    t.join()
    mk("m2")                 # ws/m2 644
    # A process of its own (fork: a copy of the fs_struct).
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir("b")
            os.umask(0o007)
            mk("f1")         # ws/b/f1 660
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    mk("m3")                 # ws/m3 644
elif which == "rename":
    os.makedirs("r/q")
    mk("r/q/r0")             # ws/r/q/r0, ws/r/q's class kept
    os.chdir("r/q")
    mk("r1")                 # ws/r/q/r1
    os.rename("../../r", "../../s")
    mk("r2")                 # ws/s/q/r2: the cwd moved with its directory
    os.chdir("../..")
    mk("s/q/r3")             # ws/s/q/r3
    os.rename("s/q", "s/q2")
    mk("s/q2/r4")            # ws/s/q2/r4
    os.mkdir("s/q2/d", 0o777)
    os.rename("s/q2", "q3")
    mk("q3/d/r5")            # ws/q3/d/r5
elif which == "exec":
    os.mkdir("e")
    os.chdir("e")
    mk("e0")                 # ws/e/e0 644
    os.umask(0o077)
    os.execv(PY, [PY, "-I", "-c",
        "import os; os.close(os.open('e1', os.O_CREAT | os.O_WRONLY, 0o666)); os.mkdir('e2', 0o777)"])
elif which == "thread-exec":
    # A thread with a fs_struct of its own execs: the new program runs under
    # the leader's tid, with the thread's cwd and umask.
    os.mkdir("n")
    mk("n0")                 # ws/n0 644, kept for the leader's tid
    ready, go = threading.Event(), threading.Event()
    def own_fs_exec():
        unshare_fs()
        os.chdir("n")
        os.umask(0o077)
        mk("nt")             # ws/n/nt 600, kept for the thread's tid
        ready.set()
        go.wait()
        os.execv(PY, [PY, "-I", "-c",
            "import os; os.close(os.open('n1', os.O_CREAT | os.O_WRONLY, 0o666)); os.mkdir('n2', 0o777)"])
    threading.Thread(target=own_fs_exec).start()
    ready.wait()
    mk("n00")                # ws/n00 644: the leader's umask kept again
    go.set()
    threading.Event().wait()
else:
    sys.exit("unknown scenario " + which)
"#;

struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
}

fn scratch(who: Who) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let dir = tempfile::Builder::new()
        .prefix("llr-cache-")
        .tempdir_in(&base)
        .unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    who.own(dir.path());
    Scratch { _dir: dir, ws }
}

fn output(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = thread::spawn(move || {
        let mut v = Vec::new();
        so.read_to_end(&mut v).map(|_| v)
    });
    let err = thread::spawn(move || {
        let mut v = Vec::new();
        se.read_to_end(&mut v).map(|_| v)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
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
        stdout: out.join().unwrap().unwrap(),
        stderr: err.join().unwrap().unwrap(),
    }
}

/// Path (relative to WS) to kind and permission bits, of everything in WS.
fn tree(ws: &Path) -> BTreeMap<PathBuf, (char, u32)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (char, u32)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let kind = if t.is_dir() {
                'd'
            } else if t.is_symlink() {
                'l'
            } else if t.is_fifo() {
                'p'
            } else {
                'f'
            };
            let mode = if t.is_symlink() { 0 } else { m.mode() & 0o7777 };
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), (kind, mode));
            if t.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(ws, ws, &mut out);
    out
}

/// Runs `scenario` as `who`, supervised or not; the tree it left.
fn run(who: Who, scenario: &str, supervised: bool) -> BTreeMap<PathBuf, (char, u32)> {
    let s = scratch(who);
    let mut cmd = who.command(BIN);
    cmd.env_remove("TMPDIR")
        .env("PY", PY)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["--ro", "/", "--rw", "/dev/null", "--rw"])
        .arg(&s.ws);
    if !supervised {
        cmd.arg("--no-supervise");
    }
    cmd.args(["--", PY, "-I", "-c", SCRIPT, scenario])
        .current_dir(&s.ws);
    let out = output(&mut cmd);
    assert!(
        out.status.success(),
        "{who:?} {scenario} (supervised: {supervised}): {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    tree(&s.ws)
}

/// `expected`: entries that must exist with that kind and mode (others, the
/// directories the script made along the way, are compared with the
/// kernel's tree only).
fn scenario(name: &str, expected: &[(&str, char, u32)]) {
    if !python() {
        return;
    }
    for who in users() {
        let supervised = run(who, name, true);
        let kernel = run(who, name, false);
        for (path, kind, mode) in expected {
            assert_eq!(
                kernel.get(Path::new(path)),
                Some(&(*kind, *mode)),
                "{who:?} {name}: the kernel's own {path} (the expectation is wrong)"
            );
            assert_eq!(
                supervised.get(Path::new(path)),
                Some(&(*kind, *mode)),
                "{who:?} {name}: {path} supervised; tree {supervised:#?}"
            );
        }
        assert_eq!(supervised, kernel, "{who:?} {name}: supervised vs kernel");
    }
}

/// umask, mkdir, mkfifo and a thread's umask(2) between creates: each
/// create after a change takes the new mask.
#[test]
fn a_umask_change_between_creates_applies_to_the_next_create() {
    scenario(
        "umask",
        &[
            ("u1", 'f', 0o644),
            ("u2", 'f', 0o600),
            ("u3", 'd', 0o700),
            ("u4", 'p', 0o664),
            ("u5", 'd', 0o750),
            ("u6", 'f', 0o606),
            ("u7", 'l', 0),
            ("u8", 'f', 0o707),
        ],
    );
}

/// chdir and fchdir, by the creating thread and by another thread sharing
/// its working directory: relative creates follow at once.
#[test]
fn chdir_and_fchdir_in_any_thread_move_the_next_relative_create() {
    scenario(
        "chdir",
        &[
            ("c0", 'f', 0o644),
            ("a/c1", 'f', 0o644),
            ("a/sub", 'd', 0o755),
            ("b/c2", 'f', 0o644),
            ("c3", 'f', 0o644),
            ("b/c4", 'f', 0o644),
        ],
    );
}

/// A thread that unshared its fs_struct (and a forked child) has a cwd and
/// umask of its own: neither leaks into the main thread's creates nor the
/// main thread's into its own, interleaved.
#[test]
fn threads_and_processes_without_a_shared_fs_keep_their_own_cwd_and_umask() {
    scenario(
        "unshared",
        &[
            ("m0", 'f', 0o644),
            ("a/t1", 'f', 0o600),
            ("m1", 'f', 0o644),
            ("a/t2", 'f', 0o600),
            ("m2", 'f', 0o644),
            ("b/f1", 'f', 0o660),
            ("m3", 'f', 0o644),
        ],
    );
}

/// A directory renamed between two creates (the cwd's own and an ancestor
/// of a created path): the creates land under the new names, and no class
/// kept for the old place is used.
#[test]
fn a_directory_renamed_between_two_creates_is_followed() {
    scenario(
        "rename",
        &[
            ("s", 'd', 0o755),
            ("q3/r0", 'f', 0o644),
            ("q3/r1", 'f', 0o644),
            ("q3/r2", 'f', 0o644),
            ("q3/r3", 'f', 0o644),
            ("q3/r4", 'f', 0o644),
            ("q3/d/r5", 'f', 0o644),
        ],
    );
}

/// exec of a new program keeps the cwd and the umask the old one set.
#[test]
fn a_new_program_after_exec_creates_with_its_cwd_and_umask() {
    scenario(
        "exec",
        &[
            ("e/e0", 'f', 0o644),
            ("e/e1", 'f', 0o600),
            ("e/e2", 'd', 0o700),
        ],
    );
}

/// A non-leader thread with a fs_struct of its own execs: the new program
/// takes the leader's tid, for which the leader's cwd and umask were kept;
/// its creates follow its own.
#[test]
fn a_thread_that_execs_under_the_leaders_tid_uses_its_own_cwd_and_umask() {
    scenario(
        "thread-exec",
        &[
            ("n0", 'f', 0o644),
            ("n/nt", 'f', 0o600),
            ("n00", 'f', 0o644),
            ("n/n1", 'f', 0o600),
            ("n/n2", 'd', 0o700),
        ],
    );
}
