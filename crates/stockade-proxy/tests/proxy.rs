//! The proxy end to end, on loopback only: the `resolve` hook points test
//! names at servers these tests start on 127.0.0.1, so nothing here ever
//! reaches an outside address.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use stockade_proxy::{Proxy, ProxyConfig, RunToken};

/// A backend on 127.0.0.1 that counts its connections. `http` makes it
/// answer one HTTP request per connection (recording the request head);
/// otherwise it echoes bytes back.
struct Backend {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Backend {
    fn start(http: bool) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (c, h) = (Arc::clone(&connections), Arc::clone(&heads));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let h = Arc::clone(&h);
                std::thread::spawn(move || {
                    if http {
                        serve_http(stream, &h);
                    } else {
                        echo(stream);
                    }
                });
            }
        });
        Backend {
            addr,
            connections,
            heads,
        }
    }

    fn connections(&self) -> usize {
        // Let an accept that raced the check land before it is counted.
        std::thread::sleep(Duration::from_millis(100));
        self.connections.load(Ordering::SeqCst)
    }
}

fn echo(mut stream: TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

fn serve_http(stream: TcpStream, heads: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    heads.lock().unwrap().push(head);
    let body = "hello from the backend\n";
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\nX-Backend: yes\r\n\r\n{body}",
        body.len()
    );
}

/// The explicit allowance that lets an allowed name reach the tests'
/// loopback backends: without it the proxy refuses loopback addresses.
const LO: &str = "127.0.0.1";

fn config(allowed: &[&str], names: &[(&str, SocketAddr)]) -> ProxyConfig {
    ProxyConfig {
        allowed_hosts: stockade_core::net::parse_hosts(allowed).unwrap(),
        resolve: names
            .iter()
            .map(|(n, a)| ((*n).to_owned(), vec![*a]))
            .collect::<HashMap<_, _>>(),
        relay: false,
    }
}

fn auth(token: Option<&RunToken>) -> String {
    token.map_or_else(String::new, |t| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{t}:"));
        format!("Proxy-Authorization: Basic {b64}\r\n")
    })
}

/// Reads one response: its head, and a body of Content-Length bytes.
fn read_response<S: Read>(stream: &mut S) -> (String, String) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let len = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).unwrap();
    (head, String::from_utf8(body).unwrap())
}

fn connect(proxy: &Proxy) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends `CONNECT target` and returns the stream with the response.
fn send_connect(
    proxy: &Proxy,
    target: &str,
    token: Option<&RunToken>,
) -> (TcpStream, String, String) {
    let mut s = connect(proxy);
    write!(
        s,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
        auth(token)
    )
    .unwrap();
    let (head, body) = read_response(&mut s);
    (s, head, body)
}

fn assert_tunnels<S: Read + Write>(s: &mut S) {
    for msg in [&b"ping"[..], &[7u8; 100_000][..]] {
        s.write_all(msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
    }
}

fn assert_denied(head: &str, body: &str, host: &str) {
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("x-stockade-denied: {host}\r\n")),
        "{head}"
    );
    assert_eq!(
        body,
        format!("stockade: network access to {host} denied (not in allowed_hosts)\n")
    );
}

#[test]
fn connect_to_an_allowed_name_tunnels_both_ways() {
    let echo = Backend::start(false);
    let proxy = Proxy::start(config(
        &["allowed.test", LO],
        &[("allowed.test", echo.addr)],
    ))
    .unwrap();
    let token = proxy.run_token();
    let target = format!("allowed.test:{}", echo.addr.port());
    let (mut s, head, _) = send_connect(&proxy, &target, Some(&token));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_tunnels(&mut s);
    assert_eq!(echo.connections(), 1);
    assert_eq!(proxy.allowed(&token), ["allowed.test"]);
    assert!(proxy.refused(&token).is_empty());
}

#[test]
fn connect_to_another_name_is_refused_without_connecting() {
    let echo = Backend::start(false);
    // denied.test resolves to the backend too, so a proxy that connected
    // anyway would show up in its count.
    let proxy = Proxy::start(config(
        &["allowed.test"],
        &[("allowed.test", echo.addr), ("denied.test", echo.addr)],
    ))
    .unwrap();
    let token = proxy.run_token();
    let target = format!("denied.test:{}", echo.addr.port());
    let (_, head, body) = send_connect(&proxy, &target, Some(&token));
    assert_denied(&head, &body, "denied.test");
    // Case and a trailing dot do not get around the list or split the record.
    let target = format!("DENIED.test.:{}", echo.addr.port());
    let (_, head, body) = send_connect(&proxy, &target, Some(&token));
    assert_denied(&head, &body, "denied.test");
    assert_eq!(echo.connections(), 0);
    assert_eq!(proxy.refused(&token), ["denied.test"]);
    assert!(proxy.allowed(&token).is_empty());
}

#[test]
fn an_ip_literal_is_refused_and_the_body_says_why() {
    let echo = Backend::start(false);
    let proxy = Proxy::start(config(&["allowed.test"], &[])).unwrap();
    let (_, head, body) = send_connect(&proxy, &echo.addr.to_string(), None);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        body.contains("network access to 127.0.0.1 denied"),
        "{body}"
    );
    assert!(body.contains("IP address"), "{body}");
    let (_, head, _) = send_connect(&proxy, &format!("[::1]:{}", echo.addr.port()), None);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(echo.connections(), 0);
    assert_eq!(proxy.refused_unattributed(), ["127.0.0.1", "::1"]);
}

#[test]
fn suffix_patterns_match_subdomains_only() {
    let echo = Backend::start(false);
    let proxy = Proxy::start(config(
        &["*.suffix.test", LO],
        &[
            ("a.suffix.test", echo.addr),
            ("b.c.suffix.test", echo.addr),
            ("suffix.test", echo.addr),
            ("evilsuffix.test", echo.addr),
        ],
    ))
    .unwrap();
    let port = echo.addr.port();
    for name in ["a.suffix.test", "b.c.suffix.test"] {
        let (mut s, head, _) = send_connect(&proxy, &format!("{name}:{port}"), None);
        assert!(head.starts_with("HTTP/1.1 200"), "{name}: {head}");
        assert_tunnels(&mut s);
    }
    for name in ["suffix.test", "evilsuffix.test"] {
        let (_, head, body) = send_connect(&proxy, &format!("{name}:{port}"), None);
        assert_denied(&head, &body, name);
    }
    assert_eq!(echo.connections(), 2);
    assert_eq!(
        proxy.allowed_unattributed(),
        ["a.suffix.test", "b.c.suffix.test"]
    );
}

#[test]
fn plain_http_is_forwarded_to_allowed_hosts_only() {
    let web = Backend::start(true);
    let proxy = Proxy::start(config(
        &["allowed.test", LO],
        &[("allowed.test", web.addr), ("denied.test", web.addr)],
    ))
    .unwrap();
    let token = proxy.run_token();
    let port = web.addr.port();
    let mut s = connect(&proxy);
    write!(
        s,
        "GET http://allowed.test:{port}/some/path?q=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\n\
         Proxy-Connection: keep-alive\r\nX-Client: kept\r\n{}\r\n",
        auth(Some(&token))
    )
    .unwrap();
    let (head, body) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("x-backend: yes"), "{head}");
    assert_eq!(body, "hello from the backend\n");

    let seen = web.heads.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let seen = seen[0].to_ascii_lowercase();
    assert!(
        seen.starts_with("get /some/path?q=1 http/1.1\r\n"),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("host: allowed.test:{port}\r\n")),
        "{seen}"
    );
    assert!(seen.contains("x-client: kept\r\n"), "{seen}");
    // The run token and the proxy's own headers stay with the proxy.
    assert!(!seen.contains("proxy-"), "{seen}");

    // The same client connection goes on to a refused host.
    write!(
        s,
        "GET http://denied.test:{port}/ HTTP/1.1\r\nHost: denied.test:{port}\r\n{}\r\n",
        auth(Some(&token))
    )
    .unwrap();
    let (head, body) = read_response(&mut s);
    assert_denied(&head, &body, "denied.test");
    assert_eq!(web.connections(), 1);
    assert_eq!(proxy.allowed(&token), ["allowed.test"]);
    assert_eq!(proxy.refused(&token), ["denied.test"]);
}

#[test]
fn requests_are_attributed_to_their_token() {
    let proxy = Proxy::start(config(&["allowed.test"], &[])).unwrap();
    let a = proxy.run_token();
    let b = proxy.run_token();
    let stranger = unknown_credentials();
    send_connect(&proxy, "one.test:443", Some(&a));
    send_connect(&proxy, "two.test:443", Some(&b));
    send_connect(&proxy, "one.test:443", Some(&a));
    send_connect(&proxy, "three.test:443", Some(&a));
    send_connect(&proxy, "four.test:443", None);
    // A token this proxy never issued is no one's run.
    let mut s = connect(&proxy);
    write!(
        s,
        "CONNECT five.test:443 HTTP/1.1\r\nProxy-Authorization: Basic {stranger}\r\n\r\n"
    )
    .unwrap();
    let (head, _) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");

    assert_eq!(proxy.refused(&a), ["one.test", "three.test"]);
    assert_eq!(proxy.refused(&b), ["two.test"]);
    assert_eq!(proxy.refused_unattributed(), ["four.test", "five.test"]);
}

/// Well-formed credentials for a token no proxy issued.
fn unknown_credentials() -> String {
    base64::engine::general_purpose::STANDARD.encode("0123456789abcdef0123456789abcdef:")
}

#[test]
fn malformed_and_non_proxy_requests_get_400() {
    let proxy = Proxy::start(config(&["allowed.test"], &[])).unwrap();
    for raw in [
        "\x01\x02garbage\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "CONNECT allowed.test HTTP/1.1\r\n\r\n",
        "GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
    ] {
        let mut s = connect(&proxy);
        s.write_all(raw.as_bytes()).unwrap();
        let (head, _) = read_response(&mut s);
        assert!(head.starts_with("HTTP/1.1 400"), "{raw:?}: {head}");
    }
    assert!(proxy.refused_unattributed().is_empty());
    assert!(proxy.allowed_unattributed().is_empty());
}

#[test]
fn an_unreachable_allowed_host_gets_502() {
    // A port that was just free: nothing listens there.
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = Proxy::start(config(&["allowed.test", LO], &[("allowed.test", free)])).unwrap();
    let (_, head, body) = send_connect(&proxy, &format!("allowed.test:{}", free.port()), None);
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    assert!(body.contains("allowed.test"), "{body}");
}

#[test]
fn drop_stops_the_proxy() {
    let echo = Backend::start(false);
    let mut cfg = config(&["allowed.test", LO], &[("allowed.test", echo.addr)]);
    cfg.relay = cfg!(target_os = "linux");
    let proxy = Proxy::start(cfg).unwrap();
    let port = proxy.port();
    #[cfg(target_os = "linux")]
    let relay_end = proxy.relay_end().unwrap().unwrap();
    // An open tunnel does not keep it alive.
    let (mut tunnel, head, _) =
        send_connect(&proxy, &format!("allowed.test:{}", echo.addr.port()), None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(proxy);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    let mut rest = Vec::new();
    assert!(matches!(tunnel.read_to_end(&mut rest), Ok(0) | Err(_)));
    // A relay still holding its end can hand nothing over any more.
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd as _;
        let handed = stockade_proxy::hand_over(relay_end.as_fd());
        assert!(
            handed.is_err(),
            "a stopped proxy took a connection: {handed:?}"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_relayed_connection_is_served_by_the_same_proxy() {
    use std::os::fd::AsFd as _;

    let echo = Backend::start(false);
    let mut cfg = config(
        &["allowed.test", LO],
        &[("allowed.test", echo.addr), ("denied.test", echo.addr)],
    );
    cfg.relay = true;
    let proxy = Proxy::start(cfg).unwrap();
    let end = proxy.relay_end().unwrap().unwrap();
    let token = proxy.run_token();
    let port = echo.addr.port();

    let mut s = stockade_proxy::hand_over(end.as_fd()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "CONNECT allowed.test:{port} HTTP/1.1\r\n{}\r\n",
        auth(Some(&token))
    )
    .unwrap();
    let (head, _) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_tunnels(&mut s);

    let mut s = stockade_proxy::hand_over(end.as_fd()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "CONNECT denied.test:{port} HTTP/1.1\r\n{}\r\n",
        auth(Some(&token))
    )
    .unwrap();
    let (head, body) = read_response(&mut s);
    assert_denied(&head, &body, "denied.test");

    assert_eq!(echo.connections(), 1);
    assert_eq!(proxy.allowed(&token), ["allowed.test"]);
    assert_eq!(proxy.refused(&token), ["denied.test"]);
    drop(proxy);
    assert!(stockade_proxy::hand_over(end.as_fd()).is_err());
}

/// Only a Unix stream socket handed over is served: a datagram that
/// carries nothing, or a file, or a datagram socket, is dropped, and the
/// next connection is served all the same.
#[cfg(target_os = "linux")]
#[test]
fn a_relay_datagram_without_a_stream_socket_is_dropped() {
    use std::io::IoSlice;
    use std::mem::MaybeUninit;
    use std::os::fd::{AsFd as _, BorrowedFd};

    fn send(end: BorrowedFd<'_>, fd: Option<BorrowedFd<'_>>) {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        let fds: Vec<BorrowedFd<'_>> = fd.into_iter().collect();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() {
            assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
        }
        rustix::net::sendmsg(end, &[IoSlice::new(&[0])], &mut control, SendFlags::empty()).unwrap();
    }

    let mut cfg = config(&["allowed.test"], &[]);
    cfg.relay = true;
    let proxy = Proxy::start(cfg).unwrap();
    let end = proxy.relay_end().unwrap().unwrap();
    let file = std::fs::File::open("/etc/hostname").unwrap();
    let (dgram, _other) = std::os::unix::net::UnixDatagram::pair().unwrap();
    send(end.as_fd(), None);
    send(end.as_fd(), Some(file.as_fd()));
    send(end.as_fd(), Some(dgram.as_fd()));
    let mut s = stockade_proxy::hand_over(end.as_fd()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut line = [0u8; 12];
    s.read_exact(&mut line).unwrap();
    assert_eq!(&line, b"HTTP/1.1 400");
    // The file was never written or read as a connection.
    assert!(
        !std::fs::read_to_string("/etc/hostname")
            .unwrap()
            .contains("HTTP/1.1")
    );
}

fn have_curl() -> bool {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn curl_goes_through_for_allowed_hosts_and_is_told_403_otherwise() {
    if !stockade_testkit::require("curl", have_curl()) {
        return;
    }
    let web = Backend::start(true);
    let proxy = Proxy::start(config(
        &["allowed.test", LO],
        &[("allowed.test", web.addr), ("denied.test", web.addr)],
    ))
    .unwrap();
    let token = proxy.run_token();
    let url = proxy.url_for(&token);
    let curl = |target: &str| {
        std::process::Command::new("curl")
            // -q first: no ~/.curlrc; and no environment that could bypass -x.
            .args(["-q", "-sS", "--max-time", "20", "-x", &url, target])
            .env_remove("no_proxy")
            .env_remove("NO_PROXY")
            .output()
            .unwrap()
    };

    let out = curl(&format!("http://allowed.test:{}/", web.addr.port()));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from the backend\n"
    );

    let out = curl("https://denied.test/");
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("CONNECT tunnel failed, response 403"),
        "{stderr}"
    );

    assert_eq!(web.connections(), 1);
    assert_eq!(proxy.allowed(&token), ["allowed.test"]);
    assert_eq!(proxy.refused(&token), ["denied.test"]);
    assert!(proxy.refused_unattributed().is_empty());
}

#[test]
fn an_allowed_name_that_resolves_to_loopback_is_refused_unless_the_address_is_listed() {
    let echo = Backend::start(false);
    let proxy = Proxy::start(config(&["allowed.test"], &[("allowed.test", echo.addr)])).unwrap();
    let token = proxy.run_token();
    let target = format!("allowed.test:{}", echo.addr.port());
    let (_, head, body) = send_connect(&proxy, &target, Some(&token));
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        body.contains(
            "resolves only to addresses that are not public (127.0.0.1: loopback (127.0.0.0/8))"
        ) && body.contains("allowed_hosts must list the address or its range"),
        "{body}"
    );
    assert_eq!(echo.connections(), 0);
    assert_eq!(proxy.refused(&token), ["allowed.test"]);
    assert!(proxy.allowed(&token).is_empty());

    // Listed as a range, the same name goes through.
    let proxy = Proxy::start(config(
        &["allowed.test", "127.0.0.0/8"],
        &[("allowed.test", echo.addr)],
    ))
    .unwrap();
    let (mut s, head, _) = send_connect(&proxy, &target, None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_tunnels(&mut s);
    assert_eq!(echo.connections(), 1);
}

/// A name with several addresses is connected only to the ones that
/// passed: a non-public address that is not listed is skipped even when it
/// comes first and would answer.
#[test]
fn only_judged_addresses_are_connected_to() {
    let Ok(v6) = TcpListener::bind("[::1]:0") else {
        eprintln!("skipping: no ::1 on this host");
        return;
    };
    let v6_addr = v6.local_addr().unwrap();
    let v6_hits = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&v6_hits);
    std::thread::spawn(move || {
        for s in v6.incoming().flatten() {
            hits.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || echo(s));
        }
    });
    let echo_v4 = Backend::start(false);
    let mut cfg = config(&["both.test", LO], &[]);
    cfg.resolve
        .insert("both.test".into(), vec![v6_addr, echo_v4.addr]);
    let proxy = Proxy::start(cfg).unwrap();
    let (mut s, head, _) =
        send_connect(&proxy, &format!("both.test:{}", echo_v4.addr.port()), None);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_tunnels(&mut s);
    assert_eq!(echo_v4.connections(), 1);
    assert_eq!(v6_hits.load(Ordering::SeqCst), 0, "::1 was not listed");
}

/// The run's URL carries its token as a password (`stockade:<token>`),
/// because Python's urllib sends `Proxy-Authorization` only for a user AND
/// a password: with the token as a bare user name its requests, and pip's,
/// were nobody's. Both the forwarded request and the CONNECT tunnel are
/// attributed; a forged token in the same place is no one's run.
#[test]
fn python_urllib_sends_the_run_token_through_the_proxy_url() {
    const PY: &str = "/usr/bin/python3";
    if !stockade_testkit::require(PY, std::path::Path::new(PY).is_file()) {
        return;
    }
    let web = Backend::start(true);
    let proxy = Proxy::start(config(
        &["allowed.test", LO],
        &[("allowed.test", web.addr), ("denied.test", web.addr)],
    ))
    .unwrap();
    let token = proxy.run_token();
    let script = r#"
import sys, urllib.request, urllib.error
proxy = sys.argv[1]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
for url in sys.argv[2:]:
    try:
        print(url, opener.open(url, timeout=20).read().decode().strip())
    except urllib.error.HTTPError as e:
        print(url, e.code)
    except Exception as e:
        print(url, type(e).__name__, e)
"#;
    let run = |url: &str, targets: &[&str]| {
        let out = std::process::Command::new(PY)
            .args(["-c", script, url])
            .args(targets)
            .env_remove("no_proxy")
            .env_remove("NO_PROXY")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let allowed = format!("http://allowed.test:{}/", web.addr.port());
    let url = proxy.url_for(&token);
    assert!(url.starts_with("http://stockade:"), "{url}");
    let out = run(
        &url,
        &[&allowed, "http://denied.test/", "https://denied2.test/"],
    );
    assert!(
        out.contains(&format!("{allowed} hello from the backend")),
        "{out}"
    );
    assert!(out.contains("http://denied.test/ 403"), "{out}");
    // urllib reports a refused tunnel as an error naming the status.
    assert!(
        out.contains("https://denied2.test/ URLError <urlopen error Tunnel connection failed: 403"),
        "{out}"
    );
    assert_eq!(proxy.allowed(&token), ["allowed.test"]);
    assert_eq!(proxy.refused(&token), ["denied.test", "denied2.test"]);
    assert!(proxy.refused_unattributed().is_empty());

    // The same shape with a token this proxy never issued.
    let forged = format!(
        "http://stockade:{}@127.0.0.1:{}",
        "ab".repeat(16),
        proxy.port()
    );
    run(&forged, &["http://forged.test/"]);
    assert_eq!(proxy.refused(&token), ["denied.test", "denied2.test"]);
    assert_eq!(proxy.refused_unattributed(), ["forged.test"]);
}
