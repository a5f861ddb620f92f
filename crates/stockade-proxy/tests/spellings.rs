//! The proxy judges addresses, not spellings: a differential suite of target
//! spellings (names that resolve to loopback, IP literals in every odd
//! form, IPv6 forms carrying 127.0.0.1, encodings, control bytes, user
//! names, zone ids) sent by real clients (curl, Python's urllib,
//! http.client and raw sockets, node's http, raw sockets from Rust), as
//! ourselves and as `nobody`. A loopback listener counts every connection it
//! accepts: none may arrive unless `allowed_hosts` lists the address, and
//! the controls show each client does arrive when it is listed.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stockade_proxy::{Proxy, ProxyConfig};
use stockade_testkit::users::{Who, users};

const PY: &str = "/usr/bin/python3";
const NODE: &str = "node";

/// Loopback listeners on one port (127.0.0.1, and ::1 when the host has
/// it) that answer HTTP and record every peer they accept.
struct Listener {
    port: u16,
    v6: bool,
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    /// The sync connections of [`Listener::settle`], held open so their
    /// source ports are never reused by a connection that counts.
    markers: Mutex<Vec<TcpStream>>,
    marker_addrs: Mutex<HashSet<SocketAddr>>,
}

impl Listener {
    fn start() -> Listener {
        let v4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = v4.local_addr().unwrap().port();
        let peers = Arc::new(Mutex::new(Vec::new()));
        let v6 = TcpListener::bind((Ipv6Addr::LOCALHOST, port)).ok();
        let has_v6 = v6.is_some();
        for l in std::iter::once(v4).chain(v6) {
            let peers = Arc::clone(&peers);
            std::thread::spawn(move || {
                for stream in l.incoming() {
                    let Ok(stream) = stream else { continue };
                    if let Ok(peer) = stream.peer_addr() {
                        peers.lock().unwrap().push(peer);
                    }
                    std::thread::spawn(move || serve(stream));
                }
            });
        }
        if !has_v6 {
            eprintln!("no ::1 here: IPv6 spellings are judged by status only");
        }
        Listener {
            port,
            v6: has_v6,
            peers,
            markers: Mutex::new(Vec::new()),
            marker_addrs: Mutex::new(HashSet::new()),
        }
    }

    /// The peers that are not sync markers, once every connection made
    /// before this call has been accepted: a marker connected now is
    /// accepted after them (the accept queue is first in, first out), so
    /// seeing it accepted means they were counted. The deadline only bounds
    /// a hung listener; it decides nothing.
    fn settle(&self) -> Vec<SocketAddr> {
        let mut targets = vec![IpAddr::from([127, 0, 0, 1])];
        if self.v6 {
            targets.push(IpAddr::V6(Ipv6Addr::LOCALHOST));
        }
        for ip in targets {
            let m = TcpStream::connect((ip, self.port)).unwrap();
            let me = m.local_addr().unwrap();
            self.marker_addrs.lock().unwrap().insert(me);
            self.markers.lock().unwrap().push(m);
            let deadline = Instant::now() + Duration::from_secs(60);
            while !self.peers.lock().unwrap().contains(&me) {
                assert!(Instant::now() < deadline, "the listener stopped accepting");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let markers = self.marker_addrs.lock().unwrap();
        self.peers
            .lock()
            .unwrap()
            .iter()
            .filter(|p| !markers.contains(p))
            .copied()
            .collect()
    }
}

/// One HTTP answer per connection; a tunnel's client speaks through it.
fn serve(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
}

/// The names the proxy resolves without DNS, each to a non-public address
/// on the listener's port (or, for the metadata address, on no listener).
fn names(port: u16) -> HashMap<String, Vec<SocketAddr>> {
    [
        ("allowed.test", "127.0.0.1"),
        ("a.wild.test", "127.0.0.1"),
        ("deep.a.wild.test", "127.0.0.1"),
        ("mapped.test", "::ffff:127.0.0.1"),
        ("v6.test", "::1"),
        ("zero.test", "0.0.0.0"),
        ("compat.test", "::127.0.0.1"),
        ("nat64.test", "64:ff9b::7f00:1"),
        ("sixto4.test", "2002:7f00:1::"),
        ("meta.test", "169.254.169.254"),
        ("private.test", "10.0.0.1"),
    ]
    .into_iter()
    .map(|(n, a)| {
        let ip: IpAddr = a.parse().unwrap();
        (n.to_owned(), vec![SocketAddr::new(ip, port)])
    })
    .collect()
}

/// The allow list the refused spellings run against: every name the
/// spellings use, no address.
const NAMES_ONLY: &[&str] = &[
    "allowed.test",
    "*.wild.test",
    "mapped.test",
    "v6.test",
    "zero.test",
    "compat.test",
    "nat64.test",
    "sixto4.test",
    "meta.test",
    "private.test",
    "localhost",
];

/// Target authorities (`{P}` = the listener's port), byte strings so a
/// NUL or a stray byte is sent as it is.
fn spellings() -> Vec<Vec<u8>> {
    let text: &[&str] = &[
        // Allowed names that resolve to non-public addresses.
        "allowed.test:{P}",
        "ALLOWED.TEST:{P}",
        "allowed.test.:{P}",
        "AlLoWeD.tEsT.:{P}",
        "a.wild.test:{P}",
        "deep.a.wild.test:{P}",
        "mapped.test:{P}",
        "v6.test:{P}",
        "zero.test:{P}",
        "compat.test:{P}",
        "nat64.test:{P}",
        "sixto4.test:{P}",
        "meta.test:{P}",
        "private.test:{P}",
        // Resolved by the system resolver (/etc/hosts).
        "localhost:{P}",
        "localhost.:{P}",
        "LOCALHOST:{P}",
        // Loopback literals, plain and odd.
        "127.0.0.1:{P}",
        "127.0.0.1.:{P}",
        "127.1:{P}",
        "127.0.1:{P}",
        "2130706433:{P}",
        "2130706433.:{P}",
        "0x7f000001:{P}",
        "0x7f.1:{P}",
        "0x7F.0.0.1:{P}",
        "0177.0.0.1:{P}",
        "0177.1:{P}",
        "017700000001:{P}",
        "127.000.000.001:{P}",
        "127.0.0.0x1:{P}",
        "0:{P}",
        "0.0.0.0:{P}",
        "169.254.169.254:{P}",
        "[::1]:{P}",
        "[0:0:0:0:0:0:0:1]:{P}",
        "[0000::1]:{P}",
        "[::ffff:127.0.0.1]:{P}",
        "[::ffff:7f00:1]:{P}",
        "[::127.0.0.1]:{P}",
        "[::]:{P}",
        "[64:ff9b::7f00:1]:{P}",
        "[::1%25lo]:{P}",
        "[fe80::1%25lo]:{P}",
        "[::1%lo]:{P}",
        // Encodings, control bytes, user names, ports.
        "allowed%2etest:{P}",
        "%31%32%37.0.0.1:{P}",
        "allowed.test%00.x:{P}",
        "allowed.test..:{P}",
        ".allowed.test:{P}",
        "allowed.test :{P}",
        "allowed\t.test:{P}",
        "\u{ff41}llowed.test:{P}",
        "allowed.test@127.0.0.1:{P}",
        "127.0.0.1@allowed.test:{P}",
        "::1:{P}",
        "allowed.test:{P}:{P}",
        "allowed.test:+{P}",
    ];
    let mut out: Vec<Vec<u8>> = text.iter().map(|s| s.as_bytes().to_vec()).collect();
    out.push(b"allowed.test\0:{P}".to_vec());
    out.push(b"127.0.0.1\0.allowed.test:{P}".to_vec());
    out.push(b"allowed.test\r\nX-A: b:{P}".to_vec());
    out.push(b"allowed.\xfftest:{P}".to_vec());
    out
}

fn with_port(spelling: &[u8], port: u16) -> Vec<u8> {
    let s = String::from_utf8_lossy(spelling);
    if std::str::from_utf8(spelling).is_ok() {
        return s.replace("{P}", &port.to_string()).into_bytes();
    }
    // Not UTF-8: splice the port in by bytes.
    let mut out = Vec::new();
    let mut rest = spelling;
    while let Some(i) = rest.windows(3).position(|w| w == b"{P}") {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(port.to_string().as_bytes());
        rest = &rest[i + 3..];
    }
    out.extend_from_slice(rest);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn shown(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

/// What one client made of one request: `Some(status)` when the proxy
/// answered, `None` when the client or the proxy ended it without a status.
fn statuses(line: &str) -> Vec<(String, Option<u16>)> {
    line.trim()
        .split(" | ")
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let status = value.parse::<u16>().ok().or_else(|| {
                // http.client reports a refused tunnel as an error.
                let rest = value.split("Tunnel connection failed: ").nth(1)?;
                rest.get(..3)?.parse().ok()
            });
            (name.to_owned(), status)
        })
        .collect()
}

struct Clients {
    _dir: tempfile::TempDir,
    py: PathBuf,
    js: PathBuf,
    curl: bool,
    python: bool,
    node: bool,
}

fn clients() -> Clients {
    let dir = tempfile::Builder::new()
        .prefix("proxy-spellings-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let py = dir.path().join("spell.py");
    let js = dir.path().join("spell.js");
    std::fs::write(&py, include_str!("clients/spell.py")).unwrap();
    std::fs::write(&js, include_str!("clients/spell.js")).unwrap();
    for f in [&py, &js] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let runs = |program: &str, arg: &str| {
        Command::new(program)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    Clients {
        curl: stockade_testkit::require("curl", runs("curl", "--version")),
        python: stockade_testkit::require(PY, runs(PY, "--version")),
        node: stockade_testkit::require("node", runs(NODE, "--version")),
        py,
        js,
        _dir: dir,
    }
}

/// A client process with no proxy settings of its own: only what it is
/// told reaches it.
fn client(who: Who, program: &str) -> Command {
    let mut c = who.command(program);
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        c.env_remove(v);
    }
    c.stdin(Stdio::null());
    c
}

fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{out:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every client's outcomes for one authority, as (client, status).
fn run_all(cl: &Clients, who: Who, proxy: &Proxy, authority: &[u8]) -> Vec<(String, Option<u16>)> {
    let mut out = raw_rust(proxy.port(), authority);
    let port = proxy.port().to_string();
    if cl.python {
        let o = client(who, PY)
            .arg(&cl.py)
            .args([&port, &hex(authority)])
            .output()
            .unwrap();
        out.extend(statuses(&text(&o)));
    }
    if cl.node {
        let o = client(who, NODE)
            .arg(&cl.js)
            .args([&port, &hex(authority)])
            .output()
            .unwrap();
        out.extend(statuses(&text(&o)));
    }
    // argv carries no NUL, and curl reads only text URLs.
    if cl.curl
        && let Ok(a) = std::str::from_utf8(authority)
        && !a.contains('\0')
    {
        let proxy_url = format!("http://127.0.0.1:{}", proxy.port());
        let url = format!("http://{a}/");
        for (name, tunnel) in [("curl", false), ("curl-tunnel", true)] {
            let mut c = client(who, "curl");
            c.args(["-q", "-g", "-sS", "-o", "/dev/null", "--max-time", "20"])
                .args(["-w", "%{http_code}/%{http_connect}", "-x", &proxy_url]);
            if tunnel {
                c.arg("-p");
            }
            let o = c.arg(&url).output().unwrap();
            let w = String::from_utf8_lossy(&o.stdout).into_owned();
            let (code, connect) = w.split_once('/').unwrap_or(("000", "000"));
            let code = if tunnel && connect != "200" {
                connect
            } else {
                code
            };
            out.push((name.to_owned(), code.parse().ok().filter(|c| *c != 0)));
        }
    }
    out
}

/// The request in both forms, from a raw socket in this process.
fn raw_rust(port: u16, authority: &[u8]) -> Vec<(String, Option<u16>)> {
    let mut forms = Vec::new();
    for (name, start) in [
        ("rust-socket", &b"GET http://"[..]),
        ("rust-socket-connect", &b"CONNECT "[..]),
    ] {
        let mut req = start.to_vec();
        req.extend_from_slice(authority);
        if name == "rust-socket" {
            req.extend_from_slice(b"/");
        }
        req.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        req.extend_from_slice(authority);
        req.extend_from_slice(b"\r\n\r\n");
        forms.push((name, req));
    }
    forms
        .into_iter()
        .map(|(name, req)| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(&req).unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n") {
                match s.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let status = std::str::from_utf8(&head)
                .ok()
                .and_then(|h| h.strip_prefix("HTTP/1.1 "))
                .and_then(|h| h.get(..3))
                .and_then(|c| c.parse().ok());
            (name.to_owned(), status)
        })
        .collect()
}

fn proxy(allowed: &[&str], port: u16) -> Proxy {
    Proxy::start(ProxyConfig {
        allowed_hosts: stockade_core::net::parse_hosts(allowed).unwrap(),
        resolve: names(port),
        relay: false,
    })
    .unwrap()
}

#[test]
fn no_spelling_reaches_a_loopback_listener_unless_its_address_is_listed() {
    let cl = clients();
    let lis = Listener::start();
    let refusing = proxy(NAMES_ONLY, lis.port);
    let cases = spellings();
    assert!(cases.len() >= 40, "{} spellings", cases.len());
    let mut seen_clients = HashSet::new();
    for who in users() {
        for spelling in &cases {
            let authority = with_port(spelling, lis.port);
            let outcomes = run_all(&cl, who, &refusing, &authority);
            let reached = lis.settle();
            assert!(
                reached.is_empty(),
                "{who:?} {}: the listener accepted {reached:?}; outcomes {outcomes:?}",
                shown(&authority)
            );
            for (name, status) in &outcomes {
                seen_clients.insert(name.clone());
                // 200 is a way through; 502 means the proxy tried to
                // connect. A refusal is a 4xx or a client that would not
                // send it.
                assert!(
                    !matches!(status, Some(200 | 502)) && status.is_none_or(|s| s < 500),
                    "{who:?} {} via {name}: {status:?} (all: {outcomes:?})",
                    shown(&authority)
                );
            }
        }
    }
    // Every client was exercised (the ones installed; CI installs all).
    let mut expected = vec!["rust-socket", "rust-socket-connect"];
    if cl.python {
        expected.extend([
            "urllib",
            "http.client",
            "http.client-tunnel",
            "socket",
            "socket-connect",
        ]);
    }
    if cl.node {
        expected.extend(["node-http", "node-connect"]);
    }
    if cl.curl {
        expected.extend(["curl", "curl-tunnel"]);
    }
    for c in expected {
        assert!(seen_clients.contains(c), "{c} never ran: {seen_clients:?}");
    }
}

/// The controls: the same clients do reach the listener once its address
/// (or range) is listed, by an allowed name and by the literal; odd
/// spellings stay refused even then, and an absolute-form request whose
/// Host names another host is refused.
#[test]
fn a_listed_address_or_range_is_reached_by_every_client() {
    let cl = clients();
    let lis = Listener::start();
    for listed in [
        &["allowed.test", "localhost", "127.0.0.1", "::1"][..],
        &["allowed.test", "127.0.0.0/8"][..],
    ] {
        let allowing = proxy(listed, lis.port);
        for who in users() {
            for target in ["allowed.test:{P}", "127.0.0.1:{P}", "localhost:{P}"] {
                if target.starts_with("localhost") && !listed.contains(&"localhost") {
                    continue;
                }
                let authority = with_port(target.as_bytes(), lis.port);
                let before = lis.settle().len();
                let outcomes = run_all(&cl, who, &allowing, &authority);
                let after = lis.settle().len();
                for (name, status) in &outcomes {
                    assert_eq!(
                        *status,
                        Some(200),
                        "{who:?} {listed:?} {target} via {name}: {outcomes:?}"
                    );
                }
                // One connection per request that got through.
                assert_eq!(after - before, outcomes.len(), "{outcomes:?}");
            }
            // Listing 127.0.0.1 does not make its odd spellings names.
            for odd in ["2130706433", "127.1", "0x7f.1", "0177.0.0.1"] {
                let authority = format!("{odd}:{}", lis.port);
                let before = lis.settle().len();
                for (name, status) in raw_rust(allowing.port(), authority.as_bytes()) {
                    assert_eq!(status, Some(403), "{odd} via {name}");
                }
                assert_eq!(lis.settle().len(), before, "{odd}");
            }
        }
    }
    // The Host of an absolute-form request must be its target.
    let allowing = proxy(&["allowed.test", "127.0.0.1"], lis.port);
    let p = lis.port;
    let before = lis.settle().len();
    for (host, want) in [
        (format!("other.test:{p}"), 400),
        (format!("127.0.0.1:{p}"), 400),
        (format!("allowed.test:{}", p.wrapping_add(1)), 400),
        ("allowed.test".to_owned(), 400),
        (format!("ALLOWED.test.:{p}"), 200),
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", allowing.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "GET http://allowed.test:{p}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut line = [0u8; 12];
        s.read_exact(&mut line).unwrap();
        assert_eq!(line, format!("HTTP/1.1 {want}").as_bytes(), "Host: {host}");
    }
    assert_eq!(
        lis.settle().len(),
        before + 1,
        "only the matching Host got through"
    );
}
