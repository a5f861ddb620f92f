//! Issue 22, items 1 and 3 on the real kernel, as root and (when we are
//! root, as in CI) as `nobody`:
//!
//! - one syscall gate: a real io_uring program (Python through ctypes: raw
//!   io_uring_setup/io_uring_enter, mmap'd rings, IORING_OP_OPENAT then
//!   IORING_OP_WRITE) never runs under any landlock-run profile, so it
//!   cannot write a protected `.git/hooks/post-commit` around the
//!   supervisor; the same program unconfined is the control that it works;
//! - no door inward: under `deny` and `allow-listed` a listener of the
//!   command's is not reachable from a peer on another address (a network
//!   namespace and veth pair the test makes), and sockets of families that
//!   leave the sandbox (AF_VSOCK, AF_PACKET, netlink beyond route and
//!   sock_diag) cannot be created, on both backends.
//!
//! When `CI=true` a missing runner or tool fails instead of skipping.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use stockade_testkit::users::{Who, users};

const PY: &str = "/usr/bin/python3";
const LAUNCHER: &str = env!("CARGO_BIN_EXE_landlock-run");

/// A real io_uring program: the ring, one IORING_OP_OPENAT of argv[1] with
/// O_WRONLY|O_CREAT|O_TRUNC, one IORING_OP_WRITE. Prints `setup-refused
/// ERRNO` (exit 3) when the ring cannot be made, `wrote N` when it wrote.
const URING: &str = r##"
import ctypes, mmap, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
# 425 is io_uring_setup on x86_64 and aarch64 alike; 426 io_uring_enter.
fd = libc.syscall(425, ctypes.c_uint(8), params)
if fd < 0:
    print("setup-refused", ctypes.get_errno()); sys.exit(3)
sq_entries, cq_entries = struct.unpack_from("II", params, 0)
sq_off = struct.unpack_from("8I", params, 40)
cq_off = struct.unpack_from("8I", params, 80)
sq = mmap.mmap(fd, sq_off[6] + sq_entries * 4, offset=0)
cq = mmap.mmap(fd, cq_off[5] + cq_entries * 16, offset=0x8000000)
sqes = mmap.mmap(fd, sq_entries * 64, offset=0x10000000)
def submit(opcode, fd_, addr, length, off, op_flags):
    tail = struct.unpack_from("I", sq, sq_off[1])[0]
    idx = tail & struct.unpack_from("I", sq, sq_off[2])[0]
    sqe = bytearray(64)
    struct.pack_into("BBHiQQIIQ", sqe, 0, opcode, 0, 0, fd_, off, addr, length, op_flags, 7)
    sqes[idx * 64:(idx + 1) * 64] = bytes(sqe)
    struct.pack_into("I", sq, sq_off[6] + idx * 4, idx)
    struct.pack_into("I", sq, sq_off[1], tail + 1)
    if libc.syscall(426, fd, 1, 1, 1, None, 0) < 0:
        print("enter-refused", ctypes.get_errno()); sys.exit(4)
    head = struct.unpack_from("I", cq, cq_off[0])[0]
    mask = struct.unpack_from("I", cq, cq_off[2])[0]
    res = struct.unpack_from("i", cq, cq_off[5] + (head & mask) * 16 + 8)[0]
    struct.pack_into("I", cq, cq_off[0], head + 1)
    return res
path = ctypes.create_string_buffer(sys.argv[1].encode())
# IORING_OP_OPENAT (18) at AT_FDCWD, then IORING_OP_WRITE (23).
target = submit(18, -100, ctypes.addressof(path), 0o755, 0, 0o1 | 0o100 | 0o1000)
if target < 0:
    print("openat-failed", -target); sys.exit(5)
data = ctypes.create_string_buffer(b"#!/bin/sh\necho pwned\n")
print("wrote", submit(23, target, ctypes.addressof(data), len(data.value), 0, 0))
"##;

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

/// Scratch outside every writable root (not /tmp, not $TMPDIR).
fn base() -> PathBuf {
    let b = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let _ = fs::set_permissions(&b, fs::Permissions::from_mode(0o755));
    b
}

/// A directory owned by `who` (reachable by everyone), under `base`.
fn owned_dir(base: &Path, prefix: &str, who: Who) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    who.own(d.path());
    d
}

/// The scripts, readable by everyone, outside every workspace.
fn scripts(base: &Path) -> tempfile::TempDir {
    let d = owned_dir(base, "scripts-", Who::Me);
    for (name, text) in [
        ("uring.py", URING),
        ("listen.py", LISTEN),
        ("net.py", FAMILIES),
        ("serve.py", SERVE),
    ] {
        let p = d.path().join(name);
        fs::write(&p, text).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    }
    d
}

fn git(ws: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c"])
        .arg("safe.directory=*")
        .arg("-C")
        .arg(ws)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn stockade(who: Who, state: &Path) -> Command {
    let mut c = who.command(env!("CARGO_BIN_EXE_stockade"));
    c.env("XDG_RUNTIME_DIR", state)
        .env("HOME", state)
        .env_remove("TMPDIR")
        .stdin(Stdio::null());
    c
}

/// `stockade exec` of `argv` in workspace-write with `network`.
fn exec_cmd(who: Who, state: &Path, backend: &str, network: &str, ws: &Path) -> Command {
    let mut c = stockade(who, state);
    c.args(["exec", "--backend", backend, "--mode", "workspace-write"])
        .args(["--network", network, "--workspace"])
        .arg(ws)
        .current_dir(ws);
    c
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// The control: unconfined, as `who`, the program really writes through a
/// ring on this kernel. Without it a refusal would prove nothing.
fn uring_works_unconfined(who: Who, scripts: &Path, dir: &Path) {
    let target = dir.join("control-hook");
    let out = who
        .command(PY)
        .arg(scripts.join("uring.py"))
        .arg(&target)
        .output()
        .unwrap();
    assert!(text(&out.stdout).starts_with("wrote 21"), "{}", show(&out));
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "#!/bin/sh\necho pwned\n"
    );
    fs::remove_file(&target).unwrap();
}

fn assert_ring_refused(out: &Output, hook: &Path, what: &str) {
    assert_eq!(
        text(&out.stdout).trim(),
        format!("setup-refused {}", libc::ENOSYS),
        "{what}: {}",
        show(out)
    );
    assert_eq!(out.status.code(), Some(3), "{what}: {}", show(out));
    assert!(!hook.exists(), "{what}: the ring wrote {}", hook.display());
}

/// Every landlock-run profile: the socket grant that used to leave the ring
/// open (`--allow-socket`), the host network, allow-listed, deny, and plain
/// Landlock; each with the hook protected by the supervisor where it runs.
#[test]
fn io_uring_is_refused_under_every_landlock_run_profile() {
    if !python() {
        return;
    }
    let base = base();
    let scripts = scripts(&base);
    for who in users() {
        let ws = owned_dir(&base, "uring-ws-", who);
        let sockets = owned_dir(&base, "uring-sock-", who);
        uring_works_unconfined(who, scripts.path(), ws.path());
        let hooks = ws.path().join(".git/hooks");
        fs::create_dir_all(&hooks).unwrap();
        who.own(ws.path());
        let hook = hooks.join("post-commit");
        let socket = sockets.path().as_os_str();
        let profiles: [(&str, Vec<&OsStr>); 5] = [
            ("--allow-socket", vec![OsStr::new("--allow-socket"), socket]),
            ("network allow", vec![]),
            (
                "allow-listed",
                vec![OsStr::new("--net-port"), OsStr::new("9")],
            ),
            ("deny", vec![OsStr::new("--net-deny")]),
            (
                "--no-supervise --allow-socket",
                vec![
                    OsStr::new("--no-supervise"),
                    OsStr::new("--allow-socket"),
                    socket,
                ],
            ),
        ];
        for (name, flags) in profiles {
            let mut c = who.command(LAUNCHER);
            c.args(["--ro", "/", "--rw"]).arg(ws.path());
            if !flags.contains(&OsStr::new("--no-supervise")) {
                c.arg("--protect").arg(&hooks);
            }
            c.args(&flags)
                .arg("--")
                .arg(PY)
                .arg(scripts.path().join("uring.py"))
                .arg(&hook)
                .stdin(Stdio::null());
            let out = c.output().unwrap();
            assert_ring_refused(&out, &hook, &format!("{who:?} {name}"));
        }
        // Close-fds mode, as bwrap runs it, refuses it too.
        let mut c = who.command(LAUNCHER);
        c.args(["--close-fds", "--", PY])
            .arg(scripts.path().join("uring.py"))
            .arg(&hook)
            .stdin(Stdio::null());
        let out = c.output().unwrap();
        assert_ring_refused(&out, &hook, &format!("{who:?} --close-fds"));
    }
}

/// The exploit of the report, through `stockade exec`: a git workspace, a
/// socket grant, each network mode, both backends.
#[test]
fn io_uring_cannot_write_git_hooks_through_stockade_exec() {
    if !python() {
        return;
    }
    let base = base();
    let scripts = scripts(&base);
    for who in users() {
        let state = owned_dir(&base, "uring-state-", who);
        let sockets = owned_dir(&base, "uring-sock-", who);
        let ws = owned_dir(&base, "uring-repo-", who);
        git(ws.path(), &["init", "-q"]);
        who.own(ws.path());
        let hook = ws.path().join(".git/hooks/post-commit");
        for backend in backends() {
            for network in ["allow", "allow-listed", "deny"] {
                let out = exec_cmd(who, state.path(), backend, network, ws.path())
                    .arg("--allow-socket")
                    .arg(sockets.path())
                    .arg("--")
                    .arg(PY)
                    .arg(scripts.path().join("uring.py"))
                    .arg(".git/hooks/post-commit")
                    .output()
                    .unwrap();
                assert_ring_refused(&out, &hook, &format!("{who:?} {backend} {network}"));
            }
        }
    }
}

/// Calls the syscall table refuses in every mode, each with arguments an
/// unconfined call rejects with another errno: `NAME=ERRNO` (or `ok`) per
/// call. argv: the numbers of io_uring_setup, name_to_handle_at, setns,
/// pidfd_getfd and chroot.
const TABLE_CALLS: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
n = [int(a) for a in sys.argv[1:]]
root = ctypes.c_char_p(b"/")
calls = [
    ("io_uring_setup", n[0], [L(0), L(0)]),
    ("name_to_handle_at", n[1], [L(-100), root, L(0), L(0), L(0)]),
    ("setns", n[2], [L(-1), L(0)]),
    ("pidfd_getfd", n[3], [L(-1), L(0), L(0)]),
    ("chroot", n[4], [L(0)]),
]
out = []
for name, nr, args in calls:
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *args)
    out.append("%s=%s" % (name, ctypes.get_errno() if r == -1 else "ok"))
print(" ".join(out))
"#;

/// The refusals the binary-search table makes (and bwrap loads itself
/// under deny and allow-listed) hold in the kernel on every path: both
/// backends, bwrap without its closer (deny, allow-listed) and with it
/// (allow), as root and as an unprivileged user. Each probe is first shown to answer differently
/// unconfined, so a refusal is the table's.
#[test]
fn the_syscall_table_refuses_on_every_path() {
    if !python() {
        return;
    }
    let listing = Command::new(LAUNCHER).arg("--syscalls").output().unwrap();
    let listing = text(&listing.stdout);
    let errno_of = |name: &str| -> i32 {
        let line = listing
            .lines()
            .find(|l| l.starts_with(&format!("{name} refuse:")))
            .unwrap_or_else(|| panic!("{name} is not refused by the table"));
        match line.split(' ').nth(1).unwrap() {
            "refuse:EPERM" => libc::EPERM,
            "refuse:ENOSYS" => libc::ENOSYS,
            "refuse:EOPNOTSUPP" => libc::EOPNOTSUPP,
            other => panic!("{name}: {other}"),
        }
    };
    let names = [
        "io_uring_setup",
        "name_to_handle_at",
        "setns",
        "pidfd_getfd",
        "chroot",
    ];
    let numbers = [
        libc::SYS_io_uring_setup,
        libc::SYS_name_to_handle_at,
        libc::SYS_setns,
        libc::SYS_pidfd_getfd,
        libc::SYS_chroot,
    ]
    .map(|n| n.to_string());
    let want: Vec<String> = names
        .iter()
        .map(|n| format!("{n}={}", errno_of(n)))
        .collect();
    let base = base();
    let answers = |mut c: Command| {
        let out = c.args(["-c", TABLE_CALLS]).args(&numbers).output().unwrap();
        let seen: Vec<String> = text(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        (seen, out)
    };
    for who in users() {
        let (seen, unconfined) = answers(who.command(PY));
        assert_eq!(seen.len(), names.len(), "{who:?}: {}", show(&unconfined));
        for (s, w) in seen.iter().zip(&want) {
            assert_ne!(s, w, "{who:?}: the probe cannot tell a refusal unconfined");
        }
        for backend in backends() {
            for network in ["deny", "allow-listed", "allow"] {
                let state = owned_dir(&base, "table-state-", who);
                let ws = owned_dir(&base, "table-ws-", who);
                let mut c = exec_cmd(who, state.path(), backend, network, ws.path());
                c.args(["--", PY]);
                let (seen, out) = answers(c);
                assert_eq!(seen, want, "{who:?} {backend} {network}: {}", show(&out));
            }
        }
    }
}

/// One word per socket the command tries: a listener on loopback (bound,
/// then listening), and sockets of the families that leave the sandbox.
const FAMILIES: &str = r#"
import socket
def attempt(f):
    try:
        f(); return "ok"
    except OSError:
        return "refused"
def loopback_listen():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
def listen_unbound():
    s = socket.socket(); s.listen(1)
probes = [
    loopback_listen,
    listen_unbound,
    lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM),
    lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM),
    lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9),   # audit
    lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 15),  # uevents
    lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0),   # route
]
print(" ".join(attempt(p) for p in probes))
"#;

/// Under deny and allow-listed, on both backends: AF_VSOCK (the hypervisor
/// host), AF_PACKET and netlink beyond route are refused; route netlink
/// stays (`ip addr`). Listening is refused under Landlock, where the
/// network is the host's; bwrap's namespace is private, so a listener
/// there is reachable from nowhere and stays allowed.
#[test]
fn families_that_leave_the_sandbox_are_refused() {
    if !python() {
        return;
    }
    let base = base();
    let scripts = scripts(&base);
    for who in users() {
        let state = owned_dir(&base, "fam-state-", who);
        let ws = owned_dir(&base, "fam-ws-", who);
        for backend in backends() {
            for network in ["deny", "allow-listed"] {
                let out = exec_cmd(who, state.path(), backend, network, ws.path())
                    .args(["--", PY])
                    .arg(scripts.path().join("net.py"))
                    .output()
                    .unwrap();
                let listen = if backend == "bwrap" {
                    "ok ok"
                } else {
                    "refused refused"
                };
                assert_eq!(
                    text(&out.stdout).trim(),
                    format!("{listen} refused refused refused refused ok"),
                    "{who:?} {backend} {network}: {}",
                    show(&out)
                );
            }
        }
    }
}

/// The command's listener: listen() without bind() (which picks a port on
/// every address), the result written to argv[1] for the test to read,
/// then one accept() that serves a secret. At most 5 s (an upper bound
/// only: the peer ends it at once).
const LISTEN: &str = r#"
import os, socket, sys
out = sys.argv[1]
def report(line):
    with open(out + ".tmp", "w") as f:
        f.write(line)
    os.rename(out + ".tmp", out)
try:
    s = socket.socket()
    s.listen(1)
except OSError as e:
    report("refused %d" % e.errno); sys.exit(0)
report("port %d" % s.getsockname()[1])
s.settimeout(5)
try:
    c, _ = s.accept(); c.sendall(b"secret"); c.close()
except OSError:
    pass
"#;

/// A peer on another address: a network namespace on a veth pair
/// (10.213.N.0/30), removed when dropped.
struct Peer {
    net: stockade_testkit::netns::Netns,
}

impl Peer {
    fn new() -> Option<Peer> {
        stockade_testkit::netns::Netns::new("sg", 213).map(|net| Peer { net })
    }

    /// What a client in the namespace reads from the host side at `port`.
    fn fetch(&self, port: u16) -> String {
        let client = format!(
            "import socket\ntry:\n s = socket.create_connection(('{}', {port}), timeout=5)\n print(s.recv(100).decode() or 'empty')\nexcept OSError as e:\n print('failed', e.errno)",
            self.net.host_addr
        );
        let out = self.net.command(PY).args(["-c", &client]).output().unwrap();
        text(&out.stdout).trim().to_string()
    }
}

/// Runs `cmd` (which runs LISTEN with `report` as its argument), waits for
/// the report, lets the peer try the port it names, and returns the report
/// and what the peer read.
fn listen_and_knock(cmd: Command, report: &Path, peer: &Peer) -> (String, Option<String>) {
    let (child, line) = spawn_until_report(cmd, report);
    let read = line
        .strip_prefix("port ")
        .map(|p| peer.fetch(p.split(' ').next().unwrap().parse().unwrap()));
    finish(child, report);
    (line, read)
}

fn finish(child: std::process::Child, report: &Path) {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    fs::remove_file(report).unwrap();
}

/// Starts `cmd` and waits for the line it writes to `report`.
fn spawn_until_report(mut cmd: Command, report: &Path) -> (std::process::Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let line = loop {
        if let Ok(line) = fs::read_to_string(report) {
            break line;
        }
        if let Some(st) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("no report, {st:?}: {}", show(&out));
        }
        // An upper bound for a hung run, not a timing assertion.
        assert!(start.elapsed() < Duration::from_secs(60), "no report");
        std::thread::sleep(Duration::from_millis(50));
    };
    (child, line)
}

/// The door the red team walked through: under allow-listed (and deny) a
/// listener of the command's must not be reachable from a peer on another
/// address. The controls: the same listener unconfined, and under network
/// allow (the host's network, where a listener is the user's choice), is
/// reached by the same peer, so the harness can see a door.
#[test]
fn no_door_inward_from_a_peer_on_another_address() {
    if !python() || !rustix::process::geteuid().is_root() {
        assert!(!stockade_testkit::in_ci(), "CI runs as root");
        return;
    }
    let Some(peer) = Peer::new() else { return };
    let base = base();
    let scripts = scripts(&base);
    let listen = scripts.path().join("listen.py");
    for who in users() {
        let state = owned_dir(&base, "door-state-", who);
        let ws = owned_dir(&base, "door-ws-", who);
        let report = ws.path().join("report");
        let mut control = who.command(PY);
        control.arg(&listen).arg(&report);
        let (line, read) = listen_and_knock(control, &report, &peer);
        assert_eq!(read.as_deref(), Some("secret"), "{who:?} control: {line}");
        let mut allow = exec_cmd(who, state.path(), "landlock", "allow", ws.path());
        allow.args(["--", PY]).arg(&listen).arg(&report);
        let (line, read) = listen_and_knock(allow, &report, &peer);
        assert_eq!(read.as_deref(), Some("secret"), "{who:?} allow: {line}");
        for backend in backends() {
            for network in ["deny", "allow-listed"] {
                let mut c = exec_cmd(who, state.path(), backend, network, ws.path());
                c.args(["--", PY]).arg(&listen).arg(&report);
                let (line, read) = listen_and_knock(c, &report, &peer);
                let what = format!("{who:?} {backend} {network}: {line}");
                match backend {
                    // The host's network: listening itself is refused (and
                    // under deny the TCP socket already).
                    "landlock" => assert_eq!(line, format!("refused {}", libc::EACCES), "{what}"),
                    // A private namespace: the listener exists, nobody
                    // outside reaches it.
                    _ => assert!(
                        read.as_deref().is_some_and(|r| r.starts_with("failed")),
                        "{what}: the peer read {read:?}"
                    ),
                }
            }
        }
    }
}

/// A dev server under `--allow-listen PORT`: it tries listen() unbound and
/// on 0.0.0.0:PORT, then serves one connection on 127.0.0.1:PORT; the
/// report says which worked.
const SERVE: &str = r#"
import os, socket, sys
out, port = sys.argv[1], int(sys.argv[2])
def report(line):
    with open(out + ".tmp", "w") as f:
        f.write(line)
    os.rename(out + ".tmp", out)
def attempt(f):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        f(s); return "ok"
    except OSError:
        return "refused"
    finally:
        s.close()
def unbound(s):
    s.listen(1)
def every_address(s):
    s.bind(("0.0.0.0", port)); s.listen(1)
tried = [attempt(unbound), attempt(every_address)]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(4)
report("port %d %s" % (port, " ".join(tried)))
s.settimeout(5)
try:
    c, _ = s.accept(); c.sendall(b"hello"); c.close()
except OSError:
    pass
"#;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `--allow-listen PORT` under Landlock: a server listens on loopback at
/// PORT and the host's loopback reaches it; listening unbound or on every
/// address is refused, and the peer on another address never connects.
/// Under bwrap the listener is in the private namespace: the run names the
/// `listen` gap.
#[test]
fn allow_listen_serves_loopback_only() {
    if !python() || !rustix::process::geteuid().is_root() {
        assert!(!stockade_testkit::in_ci(), "CI runs as root");
        return;
    }
    let Some(peer) = Peer::new() else { return };
    let base = base();
    let scripts = scripts(&base);
    let serve = scripts.path().join("serve.py");
    for who in users() {
        let state = owned_dir(&base, "serve-state-", who);
        let ws = owned_dir(&base, "serve-ws-", who);
        let report = ws.path().join("report");
        for network in ["deny", "allow-listed"] {
            let port = free_port();
            let mut c = exec_cmd(who, state.path(), "landlock", network, ws.path());
            c.args(["--allow-listen", &port.to_string(), "--", PY])
                .arg(&serve)
                .arg(&report)
                .arg(port.to_string());
            let (child, line) = spawn_until_report(c, &report);
            let what = format!("{who:?} {network}");
            assert_eq!(line, format!("port {port} refused refused"), "{what}");
            let knocked = peer.fetch(port);
            assert!(
                knocked.starts_with("failed"),
                "{what}: the peer read {knocked}"
            );
            let mut local = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let mut got = String::new();
            std::io::Read::read_to_string(&mut local, &mut got).unwrap();
            assert_eq!(got, "hello", "{what}");
            finish(child, &report);
        }
        if backends().contains(&"bwrap") {
            let out = exec_cmd(who, state.path(), "bwrap", "deny", ws.path())
                .args(["--json", "--allow-listen", "8080", "--", "true"])
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let gaps = &v["result"]["sandbox"]["gaps"];
            assert!(
                gaps.as_array()
                    .is_some_and(|g| g.iter().any(|g| g["name"] == "listen")),
                "{who:?} bwrap: {gaps}"
            );
        }
    }
}

/// A Unix-socket server and its client in one run (tmux, ssh-agent, a
/// language server), then the inet listens that must stay refused: one
/// without bind() and one bound to 0.0.0.0. One word each.
const UNIX_SERVER: &str = r#"
import os, socket, sys, threading
path = sys.argv[1]
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    try:
        s.listen(1)
    except OSError as e:
        return "unix-refused-%d" % e.errno
    def serve():
        c, _ = s.accept(); c.sendall(b"served"); c.close()
    t = threading.Thread(target=serve); t.start()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5)
    c.connect(path)
    got = c.recv(100).decode()
    t.join()
    return got
def inet(bind):
    try:
        s = socket.socket()
    except OSError as e:
        return "socket-refused-%d" % e.errno
    try:
        if bind:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", int(sys.argv[2])))
        s.listen(1)
        return "listening"
    except OSError as e:
        return "refused-%d" % e.errno
print(unix(), inet(False), inet(True))
"#;

/// Issue 22 item 3's regression: seccomp cannot see a socket's family on
/// listen(), so refusing listen refused every Unix-socket server. Now the
/// supervisor judges each listen by the socket's family: under Landlock
/// deny and allow-listed (through `stockade exec`, root and nobody) a
/// Unix-socket server serves its client in the same run, while an inet
/// listen unbound or on 0.0.0.0 is still refused with EACCES (under deny
/// the inet socket itself is refused). The control: plain Landlock
/// (`--no-supervise`) still refuses the Unix listen outright, so the test
/// sees the gate.
#[test]
fn unix_socket_servers_listen_under_deny_and_allow_listed() {
    if !python() {
        return;
    }
    let base = base();
    let scripts = scripts(&base);
    let server = scripts.path().join("unix_server.py");
    fs::write(&server, UNIX_SERVER).unwrap();
    fs::set_permissions(&server, fs::Permissions::from_mode(0o644)).unwrap();
    let eacces = libc::EACCES;
    for who in users() {
        let state = owned_dir(&base, "unix-state-", who);
        let ws = owned_dir(&base, "unix-ws-", who);
        for network in ["deny", "allow-listed"] {
            let sock = ws.path().join(format!("{network}.sock"));
            let port = free_port();
            // Below Landlock ABI 9 AF_UNIX sockets exist only where a
            // socket path is granted; the workspace is.
            let out = exec_cmd(who, state.path(), "landlock", network, ws.path())
                .arg("--allow-socket")
                .arg(ws.path())
                .args(["--", PY])
                .arg(&server)
                .arg(&sock)
                .arg(port.to_string())
                .output()
                .unwrap();
            let inet = match network {
                "deny" => format!("socket-refused-{eacces} socket-refused-{eacces}"),
                _ => format!("refused-{eacces} refused-{eacces}"),
            };
            assert_eq!(
                text(&out.stdout).trim(),
                format!("served {inet}"),
                "{who:?} {network}: {}",
                show(&out)
            );
        }
        let sock = ws.path().join("plain.sock");
        let out = who
            .command(LAUNCHER)
            .args(["--ro", "/", "--rw"])
            .arg(ws.path())
            .arg("--allow-socket")
            .arg(ws.path())
            .args(["--net-deny", "--no-supervise", "--", PY])
            .arg(&server)
            .arg(&sock)
            .arg(free_port().to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout).trim(),
            format!("unix-refused-{eacces} socket-refused-{eacces} socket-refused-{eacces}"),
            "{who:?} --no-supervise: {}",
            show(&out)
        );
    }
}

/// A listening inet socket handed in on stdin was judged by nobody: under
/// deny and allow-listed the launcher refuses the run (125) instead of
/// letting the command accept on it; under the host's network it runs.
#[test]
fn an_inherited_inet_listener_on_stdio_refuses_the_run() {
    for who in users() {
        for (net, refused) in [
            (vec!["--net-deny"], true),
            (vec!["--net-port", "9"], true),
            (vec![], false),
        ] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let stdin: std::os::fd::OwnedFd = listener.into();
            let out = who
                .command(LAUNCHER)
                .args(["--ro", "/"])
                .args(&net)
                .args(["--", "true"])
                .stdin(Stdio::from(stdin))
                .output()
                .unwrap();
            let what = format!("{who:?} {net:?}: {}", show(&out));
            if refused {
                assert_eq!(out.status.code(), Some(125), "{what}");
                assert!(
                    text(&out.stderr).contains("descriptor 0 is a listening network socket"),
                    "{what}"
                );
            } else {
                assert!(out.status.success(), "{what}");
            }
        }
    }
}

/// `landlock-run --syscalls` lists every call of the table once, with a
/// verdict the table knows, and a reader that stops early (`| head`) ends
/// the listing quietly instead of making the launcher panic.
#[test]
fn the_syscall_listing_is_whole_and_ends_quietly_on_a_closed_pipe() {
    let out = Command::new(LAUNCHER).arg("--syscalls").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut names = std::collections::HashSet::new();
    for line in text.lines() {
        let mut words = line.split(' ');
        let (name, verdict) = (words.next().unwrap(), words.next().unwrap());
        assert!(names.insert(name.to_owned()), "{name} listed twice");
        assert!(
            ["governed", "undecoded", "socket", "allow"].contains(&verdict)
                || verdict.starts_with("refuse:"),
            "{line}"
        );
        assert!(words.next().is_some(), "{name} has no reason");
    }
    for must in [
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "open_by_handle_at",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{must} refuse:"))),
            "{must} is not refused"
        );
    }
    // The reader closes the pipe after one line.
    let mut child = Command::new(LAUNCHER)
        .arg("--syscalls")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
