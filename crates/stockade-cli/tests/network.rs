//! The network knob through `stockade exec` on the real kernel, both
//! backends, as root and (when we are root, as in CI) as `nobody`. Only
//! loopback is ever used: the listeners are the test's own, on 127.0.0.1,
//! outside the sandbox; test host names (`*.test`) are mapped to them in
//! the proxy's resolver. When `CI=true` a missing runner or tool fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

const PY: &str = "/usr/bin/python3";

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn tools() -> bool {
    let curl = Command::new("sh")
        .args(["-c", "command -v curl"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    stockade_testkit::require("curl", curl)
        && stockade_testkit::require(PY, Path::new(PY).is_file())
}

fn server() -> stockade_testkit::http::OkServer {
    stockade_testkit::http::ok_server()
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
        .prefix("network-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&state).unwrap();
    who.own(dir.path());
    Scratch {
        _dir: dir,
        ws,
        state,
        who,
    }
}

impl Scratch {
    fn exec(&self, backend: &str, flags: &[&str], resolve: &str, script: &str) -> Output {
        let mut c = self.who.command(env!("CARGO_BIN_EXE_stockade"));
        c.env("XDG_RUNTIME_DIR", &self.state)
            .env("HOME", &self.state)
            .env("STOCKADE_PROXY_RESOLVE", resolve)
            .env_remove("TMPDIR")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .current_dir(&self.ws)
            .stdin(Stdio::null())
            .args(["exec", "--json", "--backend", backend])
            .args(flags)
            .args(["--", "/bin/sh", "-c", script]);
        c.output().unwrap()
    }
}

fn facts(out: &Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["result"].clone()
}

fn stdout_text(r: &serde_json::Value) -> String {
    r["stdout"]["text"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| r["stdout"]["bytes"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// One word per probe: TCP to the outside listener, UDP, raw, and a
/// listener of the command's own on loopback (bound and connected inside).
const PROBES: &str = r#"
import socket, sys
def attempt(f):
    try:
        f(); return "ok"
    except OSError:
        return "refused"
port, uport = int(sys.argv[1]), int(sys.argv[2])
def tcp():
    s = socket.create_connection(("127.0.0.1", port), timeout=3); s.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", uport))
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def inside():
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    c = socket.create_connection(l.getsockname(), timeout=3); c.close(); l.close()
print(" ".join(attempt(f) for f in (tcp, udp, raw, inside)))
"#;

#[test]
fn deny_refuses_every_way_out_and_allow_is_the_control() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = server();
            let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            udp.set_nonblocking(true).unwrap();
            let uport = udp.local_addr().unwrap().port();
            let arrived = |udp: &std::net::UdpSocket| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let mut n = 0;
                let mut buf = [0u8; 16];
                while udp.recv(&mut buf).is_ok() {
                    n += 1;
                }
                n
            };
            let script = format!("{PY} -c '{PROBES}' {} {uport}", srv.port);
            let allow = facts(&s.exec(backend, &["--network", "allow"], "", &script));
            let words = stdout_text(&allow);
            // Raw sockets need privileges nobody has: only TCP, UDP and the
            // inside listener are the control.
            assert!(words.starts_with("ok ok "), "{who:?} {backend}: {allow}");
            assert_eq!(arrived(&udp), 1, "{who:?} {backend}: the control datagram");
            let hits_before = srv.hits();
            let deny = facts(&s.exec(backend, &["--network", "deny"], "", &script));
            let words: Vec<String> = stdout_text(&deny)
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            // TCP and raw are refused; a datagram may be sent inside bwrap's
            // namespace (to its own loopback) but never arrives outside.
            assert_eq!(words[0], "refused", "{who:?} {backend}: {deny}");
            assert_eq!(words[2], "refused", "{who:?} {backend}: {deny}");
            if backend == "landlock" {
                assert_eq!(words[1], "refused", "{who:?} {backend}: {deny}");
            }
            assert_eq!(arrived(&udp), 0, "{who:?} {backend}: a datagram got out");
            // bwrap's private namespace has its own loopback; Landlock has
            // none to give (README: the network table).
            let inside = if backend == "bwrap" { "ok" } else { "refused" };
            assert_eq!(words[3], inside, "{who:?} {backend}: {deny}");
            assert_eq!(
                srv.hits(),
                hits_before,
                "{who:?} {backend}: a connection got out"
            );
            assert_eq!(deny["sandbox"]["network"], "deny");
        }
    }
}

#[test]
fn allow_listed_reaches_listed_hosts_through_the_proxy_only() {
    if !tools() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = server();
            let resolve = format!(
                "allowed.test=127.0.0.1:{0},other.test=127.0.0.1:{0}",
                srv.port
            );
            let flags = [
                "--network",
                "allow-listed",
                "--no-default-hosts",
                "--allow-host",
                "allowed.test",
                // The test's names resolve to loopback, which the proxy
                // reaches only when the address is listed.
                "--allow-host",
                "127.0.0.1",
            ];
            // Through the proxy to the listed name.
            let ok = facts(&s.exec(
                backend,
                &flags,
                &resolve,
                "curl -sS -m 10 http://allowed.test/",
            ));
            assert_eq!(stdout_text(&ok), "ok", "{who:?} {backend}: {ok}");
            assert_eq!(ok["sandbox"]["denied"], false, "{ok}");
            assert_eq!(ok["sandbox"]["network"], "allow-listed");
            // Another name: refused by the proxy, never connected, and a
            // network denial naming the host.
            let hits = srv.hits();
            for url in ["http://other.test/", "https://other.test/"] {
                let out = s.exec(backend, &flags, &resolve, &format!("curl -sS -m 10 {url}"));
                let r = facts(&out);
                assert_eq!(
                    r["sandbox"]["network_denied"], true,
                    "{who:?} {backend} {url}: {r}"
                );
                assert_eq!(r["sandbox"]["network_denied_hosts"][0], "other.test", "{r}");
                assert_eq!(r["sandbox"]["denied"], true);
            }
            assert_eq!(
                srv.hits(),
                hits,
                "{who:?} {backend}: refused host was reached"
            );
            // Around the proxy, straight at the listener: no way.
            let script = format!("curl --noproxy '*' -sS -m 5 http://127.0.0.1:{}/", srv.port);
            let direct = facts(&s.exec(backend, &flags, &resolve, &script));
            assert_ne!(stdout_text(&direct), "ok", "{who:?} {backend}: {direct}");
            assert_eq!(srv.hits(), hits, "{who:?} {backend}: direct egress");
            // The text report carries the marker naming the host.
            let mut c = s.who.command(env!("CARGO_BIN_EXE_stockade"));
            let out = c
                .env("XDG_RUNTIME_DIR", &s.state)
                .env("HOME", &s.state)
                .env("STOCKADE_PROXY_RESOLVE", &resolve)
                .env_remove("TMPDIR")
                .current_dir(&s.ws)
                .stdin(Stdio::null())
                .args(["exec", "--backend", backend])
                .args(flags)
                .args(["--", "curl", "-sS", "-m", "10", "http://other.test/"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(
                    "[sandbox: network access to other.test denied under allow-listed network]"
                ),
                "{who:?} {backend}: {err}"
            );
        }
    }
}

#[test]
fn the_network_defaults_follow_the_mode_and_bad_values_exit_2() {
    let s = scratch(Who::Me);
    for (mode, want) in [("read-only", "deny"), ("workspace-write", "allow-listed")] {
        let r = facts(&s.exec("landlock", &["--mode", mode], "", "true"));
        assert_eq!(r["sandbox"]["network"], want, "{mode}: {r}");
    }
    for bad in [
        &["--network", "none"][..],
        &["--allow-host", "https://example.com"],
        &["--allow-host", "*.com"],
    ] {
        let out = s.exec("landlock", bad, "", "echo ran");
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"));
    }
}

/// `--ask` after a refused connection offers network `allow` for one retry
/// on the terminal (util-linux `script` gives it one); no means nothing.
#[test]
fn ask_offers_one_retry_with_the_network_allowed() {
    if !tools() {
        return;
    }
    for backend in backends() {
        for (answer, want_hits) in [("y\n", 1), ("n\n", 0)] {
            let s = scratch(Who::Me);
            let srv = server();
            let cmd = format!(
                "{} exec --backend {backend} --mode workspace-write --network deny --ask -- curl -sS -m 5 http://127.0.0.1:{}/",
                env!("CARGO_BIN_EXE_stockade"),
                srv.port
            );
            let child = Command::new("script")
                .args(["-qec", &cmd, "/dev/null"])
                .env("XDG_RUNTIME_DIR", &s.state)
                .current_dir(&s.ws)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let out = stockade_testkit::prompt::answer_when_asked(child, "[y/N]", answer);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains("[sandbox: network access to 127.0.0.1 denied under deny network]"),
                "{backend}: {text}"
            );
            assert!(
                text.contains("retry this command once with network allow? [y/N]"),
                "{backend}: {text}"
            );
            assert_eq!(srv.hits(), want_hits, "{backend} {answer:?}: {text}");
        }
    }
}
