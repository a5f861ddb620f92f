//! Issue 22 item 4's second half on the real kernel, as root and (when we
//! are root, as in CI) as `nobody`: below Landlock ABI 4 allow-listed
//! never runs with TCP unrestricted, because landlock-run's supervisor
//! governs connect(), performing it itself only to the proxy's 127.0.0.1
//! port. This kernel has ABI >= 4, so the tests choose that path with
//! `--net-connect-supervised` (which also leaves Landlock without TCP
//! rules, exactly as below ABI 4): every refusal here is the supervisor's.
//!
//! When `CI=true` a missing tool fails instead of skipping.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

const PY: &str = "/usr/bin/python3";
const LAUNCHER: &str = env!("CARGO_BIN_EXE_landlock-run");

/// One attempt, one word: `b` a blocking connect (what it read), `n` a
/// non-blocking one (whether connect said EINPROGRESS, then what it read),
/// `c` a blocking connect alone, `f` a TCP fast open send (sendto with MSG_FASTOPEN and an address), `l`
/// bind to HOST:PORT then listen.
const CLIENT: &str = r#"
import errno, select, socket, sys
def sock(host):
    return socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
def name(e):
    return "refused-%s" % errno.errorcode.get(e, e)
def blocking(host, port):
    s = sock(host); s.settimeout(5)
    try:
        s.connect((host, port)); return s.recv(100).decode() or "empty"
    except OSError as e:
        return name(e.errno)
def nonblocking(host, port):
    s = sock(host); s.setblocking(False)
    r = s.connect_ex((host, port))
    if r not in (0, errno.EINPROGRESS):
        return name(r)
    first = "inprogress" if r == errno.EINPROGRESS else "at-once"
    select.select([], [s], [], 5)
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        return first + "-" + name(err)
    select.select([s], [], [], 5)
    return first + "-" + (s.recv(100).decode() or "empty")
def connect_only(host, port):
    s = sock(host); s.settimeout(5)
    try:
        s.connect((host, port)); return "connected"
    except OSError as e:
        return name(e.errno)
def fastopen(host, port):
    s = sock(host)
    try:
        s.sendto(b"x", socket.MSG_FASTOPEN, (host, port)); return "sent"
    except OSError as e:
        return name(e.errno)
def listen(host, port):
    s = sock(host); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError as e:
        return "bind-" + name(e.errno)
    try:
        s.listen(1); return "listening"
    except OSError as e:
        return name(e.errno)
kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
print({"b": blocking, "c": connect_only, "n": nonblocking, "f": fastopen, "l": listen}[kind](host, port))
"#;

/// A server in the peer's namespace: prints `up` once listening, then
/// greets every connection.
const SERVER: &str = r#"
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8)
print("up", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"peer"); c.close()
"#;

fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// The scripts, readable by everyone, outside every writable root.
fn scripts() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    stockade_testkit::open_to_all(&base);
    let d = tempfile::Builder::new()
        .prefix("supnet-")
        .tempdir_in(&base)
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let client = d.path().join("client.py");
    let server = d.path().join("server.py");
    for (p, t) in [(&client, CLIENT), (&server, SERVER)] {
        fs::write(p, t).unwrap();
        fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
    }
    (d, client, server)
}

/// A loopback listener greeting with `greeting`, served from a thread.
fn greeter(greeting: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let _ = c.write_all(greeting.as_bytes());
        }
    });
    port
}

/// `client.py KIND HOST PORT` under landlock-run allow-listed to
/// `proxy_port`, with the supervised connect chosen; `extra` before `--`.
fn confined(who: Who, client: &Path, proxy_port: u16, extra: &[&str], args: [&str; 3]) -> Output {
    who.command(LAUNCHER)
        .args(["--ro", "/", "--net-port", &proxy_port.to_string()])
        .arg("--net-connect-supervised")
        .args(extra)
        .args(["--", PY])
        .arg(client)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn word(out: &Output) -> String {
    text(&out.stdout).trim().to_string()
}

/// The proxy's port on 127.0.0.1 is reached, blocking and non-blocking
/// (EINPROGRESS passed back as the kernel said it), and from an AF_INET6
/// socket by its v4-mapped address; another loopback port,
/// ::1 at the proxy's port and a TCP fast open send are refused with
/// EACCES, and the other port's listener never sees a connection. The
/// controls: the same client unconfined reaches the other port, and
/// under Landlock's own TCP rule (ABI 4, no supervised connect) the fast
/// open send goes out, so the refusal is the supervisor's seccomp rule.
#[test]
fn supervised_connect_reaches_only_the_proxy_port() {
    if !python() {
        return;
    }
    let (_d, client, _) = scripts();
    let proxy = greeter("proxy");
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let (p, o) = (proxy.to_string(), other_port.to_string());
    for who in users() {
        // Control: unconfined, the other port answers (then drained).
        let out = who
            .command(PY)
            .arg(&client)
            .args(["c", "127.0.0.1", &o])
            .output()
            .unwrap();
        assert!(word(&out) == "connected", "{who:?} control: {}", show(&out));
        other.accept().unwrap();
        let cases = [
            (["b", "127.0.0.1", p.as_str()], "proxy"),
            (["n", "127.0.0.1", p.as_str()], "inprogress-proxy"),
            (["c", "127.0.0.1", o.as_str()], "refused-EACCES"),
            (["n", "127.0.0.1", o.as_str()], "refused-EACCES"),
            (["b", "::ffff:127.0.0.1", p.as_str()], "proxy"),
            (["b", "::1", p.as_str()], "refused-EACCES"),
            (["f", "127.0.0.1", p.as_str()], "refused-EACCES"),
            (["f", "127.0.0.1", o.as_str()], "refused-EACCES"),
        ];
        for (args, want) in cases {
            let out = confined(who, &client, proxy, &[], args);
            assert_eq!(word(&out), want, "{who:?} {args:?}: {}", show(&out));
            assert!(out.status.success(), "{who:?} {args:?}: {}", show(&out));
        }
        // Landlock's own rule lets the fast open send reach the proxy's
        // port: the refusal above is not the kernel's lack of TFO.
        let out = who
            .command(LAUNCHER)
            .args(["--ro", "/", "--net-port", &p, "--", PY])
            .arg(&client)
            .args(["f", "127.0.0.1", &p])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            word(&out),
            "sent",
            "{who:?} fast open control: {}",
            show(&out)
        );
    }
    other.set_nonblocking(true).unwrap();
    match other.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        got => panic!("the other loopback port saw a connection: {got:?}"),
    }
}

/// Without Landlock's bind rule (as below ABI 4) the supervisor alone
/// judges listen: bound to 0.0.0.0 at a granted port it is refused, on
/// 127.0.0.1 at that port it listens, at another port it is refused.
#[test]
fn supervised_listen_judges_the_address_without_landlock_bind_rules() {
    if !python() {
        return;
    }
    let (_d, client, _) = scripts();
    let proxy = greeter("proxy");
    for who in users() {
        let granted = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = granted.local_addr().unwrap().port().to_string();
        drop(granted);
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let other_port = other.local_addr().unwrap().port().to_string();
        drop(other);
        let listen = ["--allow-listen", port.as_str()];
        for (args, want) in [
            (["l", "0.0.0.0", port.as_str()], "refused-EACCES"),
            (["l", "127.0.0.1", port.as_str()], "listening"),
            (["l", "127.0.0.1", other_port.as_str()], "refused-EACCES"),
        ] {
            let out = confined(who, &client, proxy, &listen, args);
            assert_eq!(word(&out), want, "{who:?} {args:?}: {}", show(&out));
        }
    }
}

/// The supervised connect needs the supervisor: asked for together with
/// plain Landlock, the launcher refuses (125, one line) instead of running
/// with TCP open.
#[test]
fn supervised_connect_without_the_supervisor_is_refused() {
    for who in users() {
        let out = who
            .command(LAUNCHER)
            .args(["--ro", "/", "--net-port", "9", "--net-connect-supervised"])
            .args(["--no-supervise", "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{who:?}: {}", show(&out));
        assert!(
            text(&out.stderr).contains("--net-connect-supervised needs the supervisor"),
            "{who:?}: {}",
            show(&out)
        );
    }
}

/// A peer on another address (a network namespace on a veth pair,
/// 10.214.N.0/30) with a greeting server in it; removed when dropped.
struct Peer {
    server: std::process::Child,
    addr: String,
    // Dropped after the server is killed (fields drop in order).
    _net: stockade_testkit::netns::Netns,
}

impl Peer {
    fn new(server: &Path, port: u16) -> Option<Peer> {
        let net = stockade_testkit::netns::Netns::new("sn", 214)?;
        let addr = net.peer_addr.clone();
        let mut child = net
            .command(PY)
            .arg(server)
            .args([&addr, &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "up");
        Some(Peer {
            server: child,
            addr,
            _net: net,
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A peer on another address, even at the proxy's port number: reached
/// unconfined (the control), refused under the supervised connect,
/// blocking and non-blocking.
#[test]
fn supervised_connect_never_reaches_a_peer_on_another_address() {
    if !python() || !rustix::process::geteuid().is_root() {
        assert!(!stockade_testkit::in_ci(), "CI runs as root");
        return;
    }
    let (_d, client, server) = scripts();
    let proxy = greeter("proxy");
    let Some(peer) = Peer::new(&server, proxy) else {
        return;
    };
    let p = proxy.to_string();
    for who in users() {
        let out = who
            .command(PY)
            .arg(&client)
            .args(["b", &peer.addr, &p])
            .output()
            .unwrap();
        assert_eq!(word(&out), "peer", "{who:?} control: {}", show(&out));
        for kind in ["b", "n"] {
            let out = confined(who, &client, proxy, &[], [kind, &peer.addr, &p]);
            assert_eq!(
                word(&out),
                "refused-EACCES",
                "{who:?} {kind}: {}",
                show(&out)
            );
        }
    }
    // Nothing was left half-read on the proxy side either.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy)).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    assert_eq!(got, "proxy");
}

/// Unix-socket connects under the supervised connect: performed by the
/// supervisor only where the command's Landlock domain has no rule for the
/// address (pathname below ABI 9, abstract below ABI 6). A server and its
/// client in one run: a relative path (the child's working directory, not
/// the supervisor's) and an absolute one.
const UNIX_CLIENTS: &str = r#"
import os, socket, sys, threading
def serve(s, n):
    for _ in range(n):
        c, _ = s.accept(); c.sendall(b"served"); c.close()
def attempt(addr):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.settimeout(5)
    try:
        c.connect(addr); return c.recv(100).decode()
    except OSError as e:
        return "refused-%s" % e.errno
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("rel.sock"); s.listen(4)
t = threading.Thread(target=serve, args=(s, 2), daemon=True); t.start()
a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
a.bind("\0stockade-supnet-%d" % os.getpid()); a.listen(1)
threading.Thread(target=serve, args=(a, 1), daemon=True).start()
print(attempt("rel.sock"), attempt(os.path.abspath("rel.sock")),
      attempt("\0stockade-supnet-%d" % os.getpid()))
"#;

/// Pathname sockets are connected (relative and absolute) on this kernel
/// (Landlock ABI < 9 has no rule for them); an abstract one is refused
/// with EPERM where Landlock scopes abstract sockets (ABI >= 6), since the
/// supervisor, outside the domain, cannot tell whose socket it is. Under
/// Landlock's own TCP rules (the control) all three connect.
#[test]
fn supervised_connect_of_unix_sockets_keeps_the_domains_rules() {
    if !python() {
        return;
    }
    let abi = Command::new(LAUNCHER).arg("--isolation").output().unwrap();
    let abi: u32 = text(&abi.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("abi "))
        .unwrap()
        .parse()
        .unwrap();
    if abi >= 9 {
        eprintln!("Landlock ABI {abi}: pathname sockets are Landlock's; not this test's case");
        return;
    }
    let (d, _, _) = scripts();
    let script = d.path().join("unix_clients.py");
    fs::write(&script, UNIX_CLIENTS).unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    let proxy = greeter("proxy").to_string();
    for who in users() {
        let ws = tempfile::Builder::new()
            .prefix("supnet-ws-")
            .tempdir_in(d.path())
            .unwrap();
        fs::set_permissions(ws.path(), fs::Permissions::from_mode(0o755)).unwrap();
        who.own(ws.path());
        let abstract_refused = if abi >= 6 {
            format!("refused-{}", libc::EPERM)
        } else {
            "served".to_owned()
        };
        for (supervised, want_abstract) in [(true, abstract_refused.as_str()), (false, "served")] {
            let _ = fs::remove_file(ws.path().join("rel.sock"));
            let mut c = who.command(LAUNCHER);
            c.args(["--ro", "/", "--rw"])
                .arg(ws.path())
                .arg("--allow-socket")
                .arg(ws.path())
                .args(["--net-port", &proxy]);
            if supervised {
                c.arg("--net-connect-supervised");
            }
            let out = c
                .args(["--", PY])
                .arg(&script)
                .current_dir(ws.path())
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(
                word(&out),
                format!("served served {want_abstract}"),
                "{who:?} supervised {supervised}: {}",
                show(&out)
            );
        }
    }
}
