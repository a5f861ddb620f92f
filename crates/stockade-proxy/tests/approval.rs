//! Asking about unlisted hosts while the connection waits, end to end on
//! loopback: the `resolve` hook points `.test` names at servers these tests
//! start on 127.0.0.1, which `allowed_hosts` lists as an address so that
//! approved names may reach it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use stockade_proxy::{
    HostAnswer, HostApproval, HostGrants, HostQuestion, HostReply, Proxy, ProxyConfig, RunToken,
};
use stockade_testkit::http::{OkServer, ok_server};

/// Long enough never to be what a test waits on.
const PATIENCE: Duration = Duration::from_secs(30);

fn proxy(names: &[&str], server: &OkServer) -> Proxy {
    let addr = SocketAddr::from(([127, 0, 0, 1], server.port));
    Proxy::start(ProxyConfig {
        allowed_hosts: stockade_core::net::parse_hosts(&["allowed.test", "127.0.0.1"]).unwrap(),
        resolve: names
            .iter()
            .map(|n| ((*n).to_owned(), vec![addr]))
            .collect::<HashMap<_, _>>(),
        relay: false,
    })
    .unwrap()
}

/// An approver that tells the test every question; with `auto` it answers
/// at once, else it hands the test the reply (to answer, hold or drop).
struct Asker {
    questions: Receiver<(HostQuestion, Option<HostReply>)>,
    approval: HostApproval,
}

impl Asker {
    fn new(grants: &Arc<HostGrants>, auto: Option<HostAnswer>) -> Asker {
        let (tx, questions) = channel::<(HostQuestion, Option<HostReply>)>();
        let tx: Mutex<Sender<_>> = Mutex::new(tx);
        let approver = move |q: HostQuestion, r: HostReply| {
            let held = match auto {
                Some(a) => {
                    r.answer(a);
                    None
                }
                None => Some(r),
            };
            tx.lock().unwrap().send((q, held)).ok();
        };
        Asker {
            questions,
            approval: HostApproval::new(Arc::new(approver), Arc::clone(grants)),
        }
    }

    /// The next question, waiting for it.
    fn next(&self) -> (HostQuestion, Option<HostReply>) {
        self.questions.recv_timeout(PATIENCE).expect("a question")
    }

    /// Every question asked so far and not yet taken.
    fn rest(&self) -> Vec<HostQuestion> {
        self.questions.try_iter().map(|(q, _)| q).collect()
    }
}

fn auth(token: &RunToken) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("stockade:{token}"));
    format!("Proxy-Authorization: Basic {b64}\r\n")
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

/// Sends `CONNECT target` with `token`'s credentials and reads the answer.
fn send_connect(proxy: &Proxy, target: &str, token: &RunToken) -> (TcpStream, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    s.set_read_timeout(Some(PATIENCE * 2)).unwrap();
    write!(
        s,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
        auth(token)
    )
    .unwrap();
    let (head, body) = read_response(&mut s);
    (s, head, body)
}

/// CONNECT through to the ok server behind `host` and fetch its `ok`.
fn reaches(proxy: &Proxy, host: &str, port: u16, token: &RunToken) -> bool {
    let (mut s, head, _) = send_connect(proxy, &format!("{host}:{port}"), token);
    if !head.starts_with("HTTP/1.1 200") {
        return false;
    }
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    got.ends_with("\r\n\r\nok")
}

/// Today's refusal of a name not on the list, exactly.
fn assert_refused(proxy: &Proxy, host: &str, port: u16, token: &RunToken) {
    let (_, head, body) = send_connect(proxy, &format!("{host}:{port}"), token);
    assert_todays_refusal(&head, &body, host);
}

fn assert_todays_refusal(head: &str, body: &str, host: &str) {
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
fn allow_once_lets_this_command_through_and_the_next_one_is_asked_again() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowOnce));
    let first = proxy.run_token_asking(asker.approval.clone());
    // The client names the host as it likes; the question names it as the
    // list matches it.
    assert!(reaches(&proxy, "Unlisted.TEST.", server.port, &first));
    let (q, _) = asker.next();
    assert_eq!((q.host.as_str(), q.port), ("unlisted.test", server.port));
    // Again in the same command, on another port too: not asked again.
    assert!(reaches(&proxy, "unlisted.test", server.port, &first));
    let (_, head, _) = send_connect(&proxy, "unlisted.test:1", &first);
    assert!(!head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(asker.rest().is_empty());
    assert_eq!(proxy.allowed(&first), ["unlisted.test"]);
    assert!(proxy.refused(&first).is_empty());
    // Nothing for the session: the next command is asked again.
    assert!(grants.allowed().is_empty() && grants.refused().is_empty());
    let second = proxy.run_token_asking(asker.approval.clone());
    assert!(reaches(&proxy, "unlisted.test", server.port, &second));
    assert_eq!(asker.next().0.host, "unlisted.test");
    assert!(asker.rest().is_empty());
    assert_eq!(server.hits(), 4);
}

#[test]
fn allow_for_the_session_is_not_asked_again_until_forgotten() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowForSession));
    let first = proxy.run_token_asking(asker.approval.clone());
    assert!(reaches(&proxy, "unlisted.test", server.port, &first));
    asker.next();
    assert_eq!(grants.allowed(), ["unlisted.test"]);
    let second = proxy.run_token_asking(asker.approval.clone());
    assert!(reaches(&proxy, "unlisted.test", server.port, &second));
    assert!(asker.rest().is_empty(), "asked again within the session");
    // The user changed something: asked again.
    grants.forget();
    let third = proxy.run_token_asking(asker.approval.clone());
    assert!(reaches(&proxy, "unlisted.test", server.port, &third));
    assert_eq!(asker.next().0.host, "unlisted.test");
}

#[test]
fn a_refusal_is_todays_refusal_and_is_remembered_for_the_session() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::Refuse));
    let first = proxy.run_token_asking(asker.approval.clone());
    assert_refused(&proxy, "unlisted.test", server.port, &first);
    asker.next();
    assert_eq!(proxy.refused(&first), ["unlisted.test"]);
    assert_eq!(grants.refused(), ["unlisted.test"]);
    let second = proxy.run_token_asking(asker.approval.clone());
    assert_refused(&proxy, "unlisted.test", server.port, &second);
    assert!(asker.rest().is_empty(), "a refused host was asked again");
    assert_eq!(proxy.refused(&second), ["unlisted.test"]);
    assert_eq!(server.hits(), 0, "a refused connection arrived");
}

#[test]
fn no_answer_in_time_is_todays_refusal() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, None);
    let approval = asker
        .approval
        .clone()
        .with_timeout(Duration::from_millis(200));
    let token = proxy.run_token_asking(approval);
    assert_refused(&proxy, "unlisted.test", server.port, &token);
    let (_, reply) = asker.next();
    let reply = reply.unwrap();
    assert!(
        !reply.is_pending(),
        "the proxy still waits after its timeout"
    );
    // A late answer changes nothing, and nothing is kept for the session.
    reply.answer(HostAnswer::AllowForSession);
    assert!(grants.allowed().is_empty() && grants.refused().is_empty());
    // The same command is not asked again: the timeout was its answer.
    assert_refused(&proxy, "unlisted.test", server.port, &token);
    assert!(asker.rest().is_empty());
    assert_eq!(server.hits(), 0);
}

#[test]
fn a_dropped_reply_refuses_at_once() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    // Dropped as soon as it is asked: no wait for the default timeout.
    let approver = |_: HostQuestion, r: HostReply| drop(r);
    let token = proxy.run_token_asking(HostApproval::new(Arc::new(approver), grants));
    assert_refused(&proxy, "unlisted.test", server.port, &token);
}

#[test]
fn twenty_concurrent_connections_to_one_host_ask_one_question() {
    let server = ok_server();
    let proxy = Arc::new(proxy(&["unlisted.test"], &server));
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, None);
    let token = proxy.run_token_asking(asker.approval.clone());
    let (sent_tx, sent) = channel();
    let clients: Vec<_> = (0..20)
        .map(|_| {
            let (proxy, token, sent_tx) = (Arc::clone(&proxy), token.clone(), sent_tx.clone());
            let port = server.port;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
                s.set_read_timeout(Some(PATIENCE * 2)).unwrap();
                let target = format!("unlisted.test:{port}");
                write!(
                    s,
                    "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
                    auth(&token)
                )
                .unwrap();
                sent_tx.send(()).unwrap();
                let (head, _) = read_response(&mut s);
                head.starts_with("HTTP/1.1 200")
            })
        })
        .collect();
    for _ in 0..20 {
        sent.recv_timeout(PATIENCE).unwrap();
    }
    let (q, reply) = asker.next();
    assert_eq!(q.host, "unlisted.test");
    // Not a timing assertion: the count below holds however many of the
    // twenty were already waiting; this only makes most of them wait.
    std::thread::sleep(Duration::from_millis(200));
    assert!(reply.as_ref().unwrap().is_pending());
    reply.unwrap().answer(HostAnswer::AllowOnce);
    for c in clients {
        assert!(c.join().unwrap(), "a held client was not let through");
    }
    assert!(asker.rest().is_empty(), "asked more than once");
}

#[test]
fn what_is_not_a_host_name_is_never_asked_about() {
    let server = ok_server();
    let proxy = proxy(&[], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowOnce));
    let token = proxy.run_token_asking(asker.approval.clone());
    for (target, status) in [
        // An address: the list names hosts; refused, not asked.
        ("10.1.2.3:443", "403"),
        ("[::1]:443", "403"),
        // An odd numeric spelling: refused as today.
        ("0x7f.1:443", "403"),
        ("2130706433:443", "403"),
        // No host name at all: rejected as malformed.
        ("evil%0a.test:443", "400"),
        ("a..test:443", "400"),
        ("approve_me_please!.test:443", "400"),
        ("bücher.test:443", "400"),
        ("-x.test:443", "400"),
    ] {
        let (_, head, _) = send_connect(&proxy, target, &token);
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status}")),
            "{target}: {head}"
        );
    }
    // Nor plain HTTP with a user name in the URL.
    let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        s,
        "GET http://me@unlisted.test/ HTTP/1.1\r\nHost: unlisted.test\r\n{}\r\n",
        auth(&token)
    )
    .unwrap();
    let (head, _) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(asker.rest().is_empty(), "asked about a non-name");
    assert_eq!(server.hits(), 0);
}

#[test]
fn questions_per_command_are_capped_and_the_excess_refused_as_today() {
    let server = ok_server();
    let names: Vec<String> = (0..6).map(|i| format!("h{i}.test")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let proxy = proxy(&refs, &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowOnce));
    let token = proxy.run_token_asking(asker.approval.clone().with_max_questions(3));
    for (i, name) in names.iter().enumerate() {
        if i < 3 {
            assert!(reaches(&proxy, name, server.port, &token), "{name}");
        } else {
            assert_refused(&proxy, name, server.port, &token);
        }
    }
    let asked: Vec<String> = asker.rest().into_iter().map(|q| q.host).collect();
    assert_eq!(asked, ["h0.test", "h1.test", "h2.test"]);
    // The hosts asked about keep their answer past the cap.
    assert!(reaches(&proxy, "h0.test", server.port, &token));
    assert!(asker.rest().is_empty());
}

/// A flood of distinct hosts from one command, with the default bounds:
/// the first `DEFAULT_MAX_QUESTIONS` are asked, every one is answered.
#[test]
fn a_flood_of_distinct_hosts_asks_at_most_the_default_number() {
    let server = ok_server();
    let proxy = proxy(&[], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::Refuse));
    let token = proxy.run_token_asking(asker.approval.clone());
    for i in 0..300 {
        assert_refused(&proxy, &format!("flood{i}.test"), 443, &token);
    }
    assert_eq!(asker.rest().len(), stockade_proxy::DEFAULT_MAX_QUESTIONS);
    assert_eq!(proxy.refused(&token).len(), 300);
}

/// Across commands, at most `MAX_OUTSTANDING` questions wait at once; the
/// next is refused as today without being asked.
#[test]
fn questions_outstanding_at_once_are_capped() {
    let server = ok_server();
    let n = stockade_proxy::MAX_OUTSTANDING;
    let names: Vec<String> = (0..=n).map(|i| format!("w{i}.test")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let proxy = proxy(&refs, &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, None);
    let mut held = Vec::new();
    let mut waiting = Vec::new();
    for name in &names[..n] {
        let token = proxy.run_token_asking(asker.approval.clone());
        let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let target = format!("{name}:{}", server.port);
        write!(
            s,
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
            auth(&token)
        )
        .unwrap();
        // Asked before the next one is sent.
        held.push(asker.next().1.unwrap());
        waiting.push(s);
    }
    let last = proxy.run_token_asking(asker.approval.clone());
    assert_refused(&proxy, &names[n], server.port, &last);
    assert!(asker.rest().is_empty());
    // One answered frees a place: the next is asked.
    held.pop().unwrap().answer(HostAnswer::Refuse);
    let (head, _) = read_response(&mut waiting.pop().unwrap());
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let again = proxy.run_token_asking(asker.approval.clone());
    let target = format!("{}:{}", names[n], server.port);
    let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    write!(
        s,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
        auth(&again)
    )
    .unwrap();
    assert_eq!(asker.next().0.host, names[n]);
}

#[test]
fn without_an_approver_an_unlisted_host_is_refused_at_once() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowOnce));
    let _asking = proxy.run_token_asking(asker.approval.clone());
    // A run of the same proxy without an approval, and a client with no
    // token or a forged one: none of them is asked about.
    let plain = proxy.run_token();
    assert_refused(&proxy, "unlisted.test", server.port, &plain);
    let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let target = format!("unlisted.test:{}", server.port);
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").unwrap();
    let (head, body) = read_response(&mut s);
    assert_todays_refusal(&head, &body, "unlisted.test");
    assert!(asker.rest().is_empty());
    assert_eq!(proxy.refused(&plain), ["unlisted.test"]);
    assert_eq!(proxy.refused_unattributed(), ["unlisted.test"]);
    assert_eq!(server.hits(), 0);
}

#[test]
fn an_approved_name_still_has_its_addresses_judged() {
    let server = ok_server();
    // 127.0.0.1 is not listed here: an approved name that resolves to
    // loopback is refused as a listed one would be.
    let proxy = Proxy::start(ProxyConfig {
        allowed_hosts: stockade_core::net::parse_hosts(&["allowed.test"]).unwrap(),
        resolve: HashMap::from([(
            "unlisted.test".to_owned(),
            vec![SocketAddr::from(([127, 0, 0, 1], server.port))],
        )]),
        relay: false,
    })
    .unwrap();
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowOnce));
    let token = proxy.run_token_asking(asker.approval.clone());
    let (_, head, body) = send_connect(&proxy, &format!("unlisted.test:{}", server.port), &token);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(body.contains("loopback"), "{body}");
    assert_eq!(asker.rest().len(), 1);
    assert_eq!(server.hits(), 0);
}

#[test]
fn plain_http_to_an_approved_host_is_forwarded() {
    let server = ok_server();
    let proxy = proxy(&["unlisted.test"], &server);
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, Some(HostAnswer::AllowOnce));
    let token = proxy.run_token_asking(asker.approval.clone());
    let mut s = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let url = format!("http://unlisted.test:{}/", server.port);
    write!(
        s,
        "GET {url} HTTP/1.1\r\nHost: unlisted.test:{}\r\n{}\r\n",
        server.port,
        auth(&token)
    )
    .unwrap();
    let (head, body) = read_response(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ok");
    let (q, _) = asker.next();
    assert_eq!((q.host.as_str(), q.port), ("unlisted.test", server.port));
}

#[test]
fn the_end_of_a_run_withdraws_its_questions() {
    let server = ok_server();
    let proxy = Arc::new(proxy(&["unlisted.test"], &server));
    let grants = Arc::new(HostGrants::new());
    let asker = Asker::new(&grants, None);
    let token = proxy.run_token_asking(asker.approval.clone());
    let client = {
        let (proxy, token) = (Arc::clone(&proxy), token.clone());
        let port = server.port;
        std::thread::spawn(move || send_connect(&proxy, &format!("unlisted.test:{port}"), &token))
    };
    let (_, reply) = asker.next();
    let mut reply = reply.unwrap();
    assert!(reply.is_pending());
    proxy.end_run(&token);
    let (_, head, body) = client.join().unwrap();
    assert_todays_refusal(&head, &body, "unlisted.test");
    // Told, not only polled.
    tokio_test_block_on(reply.withdrawn());
    assert!(!reply.is_pending());
    // Nothing more is asked for the ended run.
    assert_refused(&proxy, "unlisted.test", server.port, &token);
    assert!(asker.rest().is_empty());
}

/// Drives one future to completion on this thread.
fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}
