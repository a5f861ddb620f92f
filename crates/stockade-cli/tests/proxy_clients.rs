//! Every client through the allow-listed proxy, for real: curl, Python's
//! urllib and pip, git over http(s), cargo, npm and Node's built-in `fetch`,
//! each run by `stockade exec --network allow-listed` on both backends, as
//! root and (when we are root, as in CI) as `nobody`. An allowed name
//! reaches the test's own listener on 127.0.0.1 and the client gets its
//! answer; a refused name is never connected to and is named in the run's
//! `network_denied_hosts`, which comes from the proxy's record of the run's
//! token (so a client that sends no credentials would leave it empty).
//!
//! Also here: where the proxy's socket lives under bwrap (never beneath a
//! writable root, `$HOME` as the workspace works, a long `$XDG_RUNTIME_DIR`
//! works, nothing is left behind, stale directories are swept), and that
//! nothing stockade prints lands in the middle of a line of the command's
//! stderr. Names are `.test` names mapped to the listener by the proxy's
//! test resolver (`STOCKADE_PROXY_RESOLVE`). When `CI=true` a missing client
//! fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::http::{OkServer, ok_server};
use stockade_testkit::users::{Who, users};

const PY: &str = "/usr/bin/python3";

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The flags of every run: only `allowed.test`, and the loopback address
/// the test names resolve to (the proxy refuses a non-public address that
/// is not listed).
const FLAGS: &[&str] = &[
    "--network",
    "allow-listed",
    "--no-default-hosts",
    "--allow-host",
    "allowed.test",
    "--allow-host",
    "127.0.0.1",
];

struct Scratch {
    dir: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
    who: Who,
}

fn scratch(who: Who) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    // Searchable by nobody, keeping the other bits: the base may be
    // /var/tmp, whose sticky 1777 the proxy's socket fallback relies on.
    if let Ok(m) = fs::metadata(&base) {
        let mode = m.permissions().mode() & 0o7777;
        let _ = fs::set_permissions(&base, fs::Permissions::from_mode(mode | 0o755));
    }
    let dir = tempfile::Builder::new()
        .prefix("proxy-clients-")
        .tempdir_in(base)
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    who.own(dir.path());
    Scratch {
        dir,
        ws,
        state,
        who,
    }
}

fn resolve(srv: &OkServer) -> String {
    format!(
        "allowed.test=127.0.0.1:{0},denied.test=127.0.0.1:{0}",
        srv.port
    )
}

/// `stockade` as the scratch's user with a clean proxy environment and the
/// clients' caches, retries and prompts tamed; `HOME` and the runtime dir
/// are the private state directory unless a test says otherwise.
fn stockade(s: &Scratch, resolve: &str) -> Command {
    let mut c = s.who.command(env!("CARGO_BIN_EXE_stockade"));
    c.env("XDG_RUNTIME_DIR", &s.state)
        .env("HOME", &s.state)
        .env_remove("XDG_CACHE_HOME")
        .env("STOCKADE_PROXY_RESOLVE", resolve)
        .env_remove("TMPDIR")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("CARGO_NET_RETRY", "0")
        .env("npm_config_update_notifier", "false")
        .env("npm_config_fetch_retries", "0")
        .env("npm_config_audit", "false")
        .env("npm_config_fund", "false")
        .env("PIP_NO_CACHE_DIR", "1")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .current_dir(&s.ws)
        .stdin(Stdio::null());
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "NODE_USE_ENV_PROXY",
        "CARGO_HTTP_PROXY",
        "PIP_PROXY",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "npm_config_proxy",
        "npm_config_https_proxy",
    ] {
        c.env_remove(name).env_remove(name.to_ascii_lowercase());
    }
    c
}

fn exec_json(s: &Scratch, backend: &str, resolve: &str, script: &str) -> serde_json::Value {
    let out = stockade(s, resolve)
        .args(["exec", "--json", "--backend", backend])
        .args(FLAGS)
        .args(["--", "/bin/sh", "-c", script])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{:?} {backend}: {e}: exit {:?}\n{}\n{}",
            s.who,
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["result"].clone()
}

fn text(r: &serde_json::Value, stream: &str) -> String {
    r[stream]["text"]
        .as_str()
        .or_else(|| r[stream]["bytes"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn denied_hosts(r: &serde_json::Value) -> Vec<String> {
    r["sandbox"]["network_denied_hosts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|h| h.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// One client: `allowed` is its script against `allowed.test` (plain
/// http, forwarded), `refused` against `denied.test` (https, a CONNECT
/// tunnel); `got_answer` tells from the allowed run's stdout and stderr
/// that the client received the listener's response.
struct Client {
    name: &'static str,
    allowed: String,
    refused: String,
    got_answer: fn(&str, &str) -> bool,
}

/// Runs `client` on every backend as every user: the allowed run reaches
/// the listener and gets its answer; the refused run never connects and
/// the refused host is named by the proxy's record.
fn check(client: impl Fn(&Scratch) -> Client) {
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let c = client(&s);
            let srv = ok_server();
            let resolve = resolve(&srv);
            let ok = exec_json(&s, backend, &resolve, &c.allowed);
            let (out, err) = (text(&ok, "stdout"), text(&ok, "stderr"));
            assert!(
                srv.hits() > 0 && (c.got_answer)(&out, &err),
                "{} {who:?} {backend}: the allowed host was not reached ({} connections)\n{ok}",
                c.name,
                srv.hits()
            );
            assert!(
                denied_hosts(&ok).is_empty(),
                "{} {who:?} {backend}: {ok}",
                c.name
            );
            let hits = srv.hits();
            // The client's own words are silenced: only the proxy's record
            // of the run's token can name the host.
            let quiet = format!("{} >/dev/null 2>&1", c.refused);
            let no = exec_json(&s, backend, &resolve, &quiet);
            assert_eq!(
                denied_hosts(&no),
                ["denied.test"],
                "{} {who:?} {backend}: the proxy's record does not name the refused host\n{no}",
                c.name
            );
            assert_eq!(no["sandbox"]["network_denied"], true, "{no}");
            assert_eq!(
                srv.hits(),
                hits,
                "{} {who:?} {backend}: the refused host was reached",
                c.name
            );
        }
    }
}

#[test]
fn curl_through_the_proxy() {
    if !stockade_testkit::require("curl", runs("curl", &["--version"])) {
        return;
    }
    check(|_| Client {
        name: "curl",
        allowed: "curl -sS -m 20 http://allowed.test/".into(),
        refused: "curl -sS -m 20 https://denied.test/".into(),
        got_answer: |out, _| out == "ok",
    });
}

/// urllib sends `Proxy-Authorization` only for a proxy URL with a user AND
/// a password; before the token became the password its refusals were
/// nobody's and `network_denied_hosts` stayed empty.
#[test]
fn python_urllib_through_the_proxy() {
    if !stockade_testkit::require(PY, Path::new(PY).is_file()) {
        return;
    }
    let get = |url: &str| {
        format!(
            "{PY} -c 'import urllib.request as u; print(u.urlopen(\"{url}\", timeout=20).read().decode())'"
        )
    };
    check(|_| Client {
        name: "urllib",
        allowed: get("http://allowed.test/"),
        refused: get("https://denied.test/"),
        got_answer: |out, _| out.trim() == "ok",
    });
}

/// pip reports a refused index as "no matching distribution" and nothing
/// else: only the proxy's record of its token can say what was refused.
#[test]
fn pip_through_the_proxy() {
    let have = Path::new(PY).is_file() && runs(PY, &["-m", "pip", "--version"]);
    if !stockade_testkit::require("pip (python3 -m pip)", have) {
        return;
    }
    check(|s| {
        let pip = |index: &str| {
            format!(
                "{PY} -m pip download --no-deps --retries 0 --timeout 20 -d {} --index-url {index} --trusted-host allowed.test nothing-here",
                s.ws.join("dl").display()
            )
        };
        Client {
            name: "pip",
            allowed: pip("http://allowed.test/simple/"),
            refused: pip("https://denied.test/simple/"),
            // The listener's `ok` is no index page: pip read it and says so.
            got_answer: |out, err| {
                (out.to_owned() + err).contains("Skipping page http://allowed.test/simple/")
            },
        }
    });
}

/// git's libcurl prompted for the proxy password when the URL had a user
/// and none (and failed without a terminal); with one, it still sent it
/// only after a `407` challenge, which the proxy does not make, unless told
/// to use basic authentication from the start.
#[test]
fn git_through_the_proxy() {
    if !stockade_testkit::require("git", runs("git", &["--version"])) {
        return;
    }
    check(|_| Client {
        name: "git",
        // The listener's `ok` reads as a dumb-http ref list with no refs.
        allowed: "git ls-remote http://allowed.test/repo.git && echo listed".into(),
        refused: "git ls-remote https://denied.test/repo.git".into(),
        got_answer: |out, _| out.trim() == "listed",
    });
}

/// cargo's own copy (the toolchain under /root is out of `nobody`'s reach),
/// against a sparse registry index on each name.
#[test]
fn cargo_through_the_proxy() {
    let real = std::env::var_os("CARGO").map(PathBuf::from);
    let have = real.as_ref().is_some_and(|c| c.is_file());
    if !stockade_testkit::require("cargo ($CARGO)", have) {
        return;
    }
    let real = real.unwrap();
    check(|s| {
        let cargo = s.dir.path().join("cargo");
        fs::copy(&real, &cargo).unwrap();
        fs::set_permissions(&cargo, fs::Permissions::from_mode(0o755)).unwrap();
        let search = |index: &str| {
            format!(
                "CARGO_HOME={} {} search --index sparse+{index} nothing-here",
                s.ws.join("cargo-home").display(),
                cargo.display()
            )
        };
        Client {
            name: "cargo",
            allowed: search("http://allowed.test/index/"),
            refused: search("https://denied.test/index/"),
            // `ok` is not the index's config.json: cargo read it.
            got_answer: |_, err| err.contains("expected value at line 1 column 1"),
        }
    });
}

#[test]
fn npm_through_the_proxy() {
    if !stockade_testkit::require("npm", runs("npm", &["--version"])) {
        return;
    }
    check(|s| {
        let view = |registry: &str| {
            format!(
                "npm view nothing-here --registry {registry} --cache {}",
                s.ws.join("npm-cache").display()
            )
        };
        Client {
            name: "npm",
            allowed: view("http://allowed.test/"),
            refused: view("https://denied.test/"),
            // `ok` is not a packument: npm read it and says so.
            got_answer: |_, err| {
                err.contains("invalid json response body at http://allowed.test/nothing-here")
            },
        }
    });
}

/// Node's version: (major, minor).
fn node_version() -> Option<(u32, u32)> {
    let out = Command::new("node").arg("--version").output().ok()?;
    let v = String::from_utf8(out.stdout).ok()?;
    let mut parts = v.trim().trim_start_matches('v').split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Node's built-in `fetch` ignores the proxy variables unless
/// `NODE_USE_ENV_PROXY=1`, which Node 24 and 22.21 read; stockade always
/// sets it. On an older Node `fetch` cannot resolve anything in the sandbox
/// and so cannot get around the proxy: it fails, and nothing is reached.
#[test]
fn node_fetch_through_the_proxy() {
    let Some((major, minor)) = node_version() else {
        stockade_testkit::require("node", false);
        return;
    };
    let honours = major >= 24 || (major == 22 && minor >= 21);
    let fetch = |url: &str| {
        format!(
            "node -e 'console.log(process.env.NODE_USE_ENV_PROXY); fetch(\"{url}\").then(r => r.text()).then(t => console.log(\"body\", t), e => console.log(\"failed\", e.cause && e.cause.code))'"
        )
    };
    if honours {
        check(|_| Client {
            name: "node fetch",
            allowed: fetch("http://allowed.test/"),
            refused: fetch("https://denied.test/"),
            got_answer: |out, _| out == "1\nbody ok\n",
        });
        return;
    }
    eprintln!("node {major}.{minor}: fetch does not read the proxy variables");
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = ok_server();
            let r = exec_json(&s, backend, &resolve(&srv), &fetch("http://allowed.test/"));
            let out = text(&r, "stdout");
            assert!(
                out.starts_with("1\nfailed "),
                "{who:?} {backend}: NODE_USE_ENV_PROXY is set and fetch fails\n{r}"
            );
            assert_eq!(
                srv.hits(),
                0,
                "{who:?} {backend}: fetch got around the proxy"
            );
        }
    }
}

/// Directories named like the proxy's socket directories of process `pid`.
fn socket_dirs_of(dir: &Path, pid: u32) -> Vec<PathBuf> {
    let prefix = format!("proxy-{pid}-");
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    e.file_name()
                        .as_encoded_bytes()
                        .starts_with(prefix.as_bytes())
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// `script` under allow-listed, as `s.who`, returning stockade's pid (the
/// name an older version's socket directory had), its stdout and its exit
/// code.
fn exec_text(c: &mut Command, backend: &str, script: &str) -> (u32, Output) {
    let child = c
        .args(["exec", "--backend", backend])
        .args(FLAGS)
        .args(["--", "/bin/sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // setpriv execs stockade: the pid is stockade's.
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

/// `$HOME` as the workspace with no `$XDG_RUNTIME_DIR`: the proxy's socket
/// directory would once have been `~/.cache/stockade`, beneath the
/// workspace, and every allow-listed run exited 125. bwrap's relay is now
/// handed the proxy by descriptor: the run works on both backends, and no
/// directory is made anywhere, while it runs or after.
#[test]
fn exec_in_home_works_and_makes_no_proxy_directory() {
    if !stockade_testkit::require("curl", runs("curl", &["--version"])) {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = ok_server();
            let home = &s.ws;
            let mut c = stockade(&s, &resolve(&srv));
            c.env("HOME", home).env_remove("XDG_RUNTIME_DIR");
            let script = "curl -sS -m 20 http://allowed.test/; echo; curl -sS -m 20 https://denied.test/; ls /var/tmp \"/var/tmp/stockade-$(id -u)\" \"$HOME/.cache/stockade\"";
            let (pid, out) = exec_text(&mut c, backend, script);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(125), "{who:?} {backend}: {stderr}");
            assert!(
                stdout.starts_with("ok\n"),
                "{who:?} {backend}: {stdout}{stderr}"
            );
            assert!(
                stderr.contains("network access to denied.test denied"),
                "{who:?} {backend}: {stderr}"
            );
            // Not while the run lasted...
            assert!(
                !stdout.contains(&format!("proxy-{pid}-")),
                "{who:?} {backend}: a socket directory was made: {stdout}"
            );
            // ...and not once it ended.
            let uid = std::os::unix::fs::MetadataExt::uid(&fs::metadata(home).unwrap());
            let own = PathBuf::from(format!("/var/tmp/stockade-{uid}"));
            for place in [Path::new("/var/tmp"), &own, &home.join(".cache/stockade")] {
                let left = socket_dirs_of(place, pid);
                assert!(left.is_empty(), "{who:?} {backend}: left {left:?}");
            }
        }
    }
}

/// A `$XDG_RUNTIME_DIR` too long for a socket address (`sun_path` is 108
/// bytes) once made every bwrap allow-listed run exit 125; no path names
/// the proxy now, so it plays no part.
#[test]
fn a_long_runtime_dir_works() {
    if !stockade_testkit::require("curl", runs("curl", &["--version"])) {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = ok_server();
            let mut long = s.state.clone();
            while long.as_os_str().len() < 110 {
                long.push("a-rather-long-runtime-directory-name");
            }
            fs::create_dir_all(&long).unwrap();
            fs::set_permissions(&long, fs::Permissions::from_mode(0o700)).unwrap();
            s.who.own(&s.state);
            let mut c = stockade(&s, &resolve(&srv));
            c.env("XDG_RUNTIME_DIR", &long);
            let (pid, out) = exec_text(&mut c, backend, "curl -sS -m 20 http://allowed.test/");
            assert_eq!(
                out.status.code(),
                Some(0),
                "{who:?} {backend}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");
            assert!(socket_dirs_of(Path::new("/var/tmp"), pid).is_empty());
            assert!(socket_dirs_of(&long.join("stockade"), pid).is_empty());
        }
    }
}

/// bwrap's relay reaches the proxy by a descriptor only it holds: the
/// command holds no socket at all (its descriptors are its stdio), and an
/// older version's socket directories in the runtime dir are neither used
/// nor touched.
#[test]
fn the_relay_end_never_reaches_the_command() {
    if !stockade_testkit::require("bwrap", stockade_testkit::have_bwrap())
        || !stockade_testkit::require("curl", runs("curl", &["--version"]))
    {
        return;
    }
    for who in users() {
        let s = scratch(who);
        let srv = ok_server();
        let place = s.state.join("stockade");
        let old = place.join("proxy-1-1-0badc0de");
        fs::create_dir_all(&old).unwrap();
        who.own(&s.state);
        let mut c = stockade(&s, &resolve(&srv));
        let script = "curl -sS -m 20 http://allowed.test/; echo; for f in /proc/self/fd/*; do readlink \"$f\"; done";
        let (pid, out) = exec_text(&mut c, "bwrap", script);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("ok\n"),
            "{who:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let held: Vec<&str> = stdout.lines().skip(1).collect();
        assert!(
            !held.is_empty() && held.iter().all(|t| !t.starts_with("socket:")),
            "{who:?}: the command holds a socket: {held:?}"
        );
        assert!(old.is_dir(), "{who:?}: an old socket directory was touched");
        assert!(socket_dirs_of(&place, pid).is_empty(), "{who:?}");
    }
}

/// A command writes half a line to stderr, then is refused a host: what
/// stockade prints about it starts at a line start, prefixed, and nothing
/// of the proxy's lands inside the command's line (it printed
/// `stockade-proxy: refused ...` from its own thread, mid-line).
#[test]
fn stockade_lines_never_land_inside_the_commands_stderr_line() {
    if !stockade_testkit::require("curl", runs("curl", &["--version"])) {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = scratch(who);
            let srv = ok_server();
            let mut c = stockade(&s, &resolve(&srv));
            let script = "printf 'half a line' >&2; curl -s -m 20 https://denied.test/; printf ', the rest' >&2";
            let (_, out) = exec_text(&mut c, backend, script);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !stderr.contains("stockade-proxy"),
                "{who:?} {backend}: {stderr}"
            );
            assert!(
                stderr.starts_with("half a line, the rest\n"),
                "{who:?} {backend}: {stderr:?}"
            );
            let about: Vec<&str> = stderr
                .lines()
                .filter(|l| l.contains("denied.test"))
                .collect();
            assert!(!about.is_empty(), "{who:?} {backend}: {stderr}");
            for line in about {
                assert!(
                    line.starts_with("stockade: ") || line.starts_with("[sandbox: "),
                    "{who:?} {backend}: {line:?} in {stderr:?}"
                );
            }
        }
    }
}
