//! Nothing a confined command does can loosen its own or a later run's
//! confinement: every channel tried through `stockade exec` as an attacker
//! would, on both backends, as root and (when we are root, as in CI) as an
//! unprivileged user. When `CI=true` a missing runner is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

/// A directory owned by `who`, under `base`.
fn owned_dir(base: &Path, prefix: &str, who: Who) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .unwrap();
    chown_tree(d.path(), who);
    d
}

fn chown_tree(p: &Path, who: Who) {
    who.own(p);
}

/// Scratch outside every writable root (not /tmp, not $TMPDIR).
fn base() -> PathBuf {
    let b = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    // The unprivileged legs must reach it.
    let _ = fs::set_permissions(&b, fs::Permissions::from_mode(0o755));
    b
}

/// `program args` as `who`, with `state` as its runtime dir (verdict cache).
fn command_as(who: Who, program: &OsStr, state: &Path) -> Command {
    let mut c = who.command(program);
    c.env("XDG_RUNTIME_DIR", state)
        .env("HOME", state)
        .env_remove("TMPDIR")
        .stdin(Stdio::null());
    c
}

fn stockade_as(who: Who, state: &Path) -> Command {
    command_as(who, OsStr::new(env!("CARGO_BIN_EXE_stockade")), state)
}

/// The networks whose runs take different paths under bwrap: its closer
/// inside (allow-listed, for the relay) and bwrap running the command
/// itself (deny).
const NETWORKS: [&str; 2] = ["allow-listed", "deny"];

/// Every backend under every network of [`NETWORKS`].
fn runs() -> Vec<(&'static str, &'static str)> {
    backends()
        .into_iter()
        .flat_map(|b| NETWORKS.map(|n| (b, n)))
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn exec_on(
    network: &str,
    who: Who,
    state: &Path,
    backend: &str,
    mode: &str,
    ws: &Path,
    script: &str,
    args: &[&OsStr],
) -> Output {
    let mut c = stockade_as(who, state);
    c.args(["exec", "--backend", backend, "--mode", mode])
        .args(["--network", network, "--workspace"])
        .arg(ws)
        .args(["--", "/bin/sh", "-c", script, "sh"])
        .args(args)
        .current_dir(ws);
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn entries(dir: &Path) -> Vec<OsString> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

/// Channel 1: a workspace beneath another writable root (/tmp) renamed
/// away and replaced by a symlink: the next run must not write there.
#[test]
fn a_moved_workspace_never_redirects_the_next_run() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let tmp = owned_dir(Path::new("/tmp"), "stockade-moved-", who);
            let outside = owned_dir(&base, "outside-", who);
            let state = owned_dir(&base, "state-", who);
            let ws = tmp.path().join("ws");
            fs::create_dir(&ws).unwrap();
            chown_tree(&ws, who);
            // The attack, from inside: move the workspace away and leave a
            // symlink to `outside` in its place.
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                backend,
                "workspace-write",
                &ws,
                "mv \"$1\" \"$1.moved\" && ln -s \"$2\" \"$1\"",
                &[ws.as_os_str(), outside.path().as_os_str()],
            );
            // bwrap makes the workspace a mount point (rename refused);
            // Landlock lets the rename happen. Either way, do it from here
            // too so the next run always meets a planted symlink.
            if !fs::symlink_metadata(&ws).unwrap().file_type().is_symlink() {
                assert!(!out.status.success() || backend == "landlock", "{out:?}");
                fs::rename(&ws, tmp.path().join("ws.moved2")).unwrap();
                symlink(outside.path(), &ws).unwrap();
            }
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                backend,
                "workspace-write",
                &ws,
                "touch \"$PWD/planted\" planted2",
                &[],
            );
            assert_eq!(
                out.status.code(),
                Some(2),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            assert!(text(&out.stderr).contains(&ws.display().to_string()));
            assert!(
                entries(outside.path()).is_empty(),
                "{who:?} {backend}: wrote through the moved workspace"
            );
        }
    }
}

/// Channel 1: `--workspace /` and a relative `$TMPDIR` are never granted.
#[test]
fn root_workspaces_and_relative_tmpdirs_are_never_granted() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let state = owned_dir(&base, "state-", who);
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                backend,
                "workspace-write",
                Path::new("/"),
                "true",
                &[],
            );
            assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
            let outside = owned_dir(&base, "outside-", who);
            let ws = owned_dir(&base, "ws-", who);
            for rel in [".", "./", "..", "name"] {
                let mut c = stockade_as(who, state.path());
                let target = outside.path().join("x");
                c.args(["exec", "--backend", backend, "--workspace"])
                    .arg(ws.path())
                    .args(["--", "/bin/sh", "-c", "echo x > \"$1\"", "sh"])
                    .arg(&target)
                    .env("TMPDIR", rel)
                    .current_dir(outside.path());
                if rel == "name" {
                    fs::create_dir_all(outside.path().join("name")).unwrap();
                    chown_tree(outside.path(), who);
                }
                let out = c.output().unwrap();
                assert!(!out.status.success(), "{who:?} {backend} TMPDIR={rel}");
                assert!(!target.exists(), "{who:?} {backend} TMPDIR={rel}");
            }
        }
    }
}

/// Channel 2: a runner found inside a writable root is refused, never run.
#[test]
fn runners_inside_a_writable_root_are_refused() {
    let base = base();
    let bwrap = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v bwrap"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for who in users() {
        let state = owned_dir(&base, "state-", who);
        let ws = owned_dir(&base, "ws-", who);
        // An activated .venv/bin holding a "bwrap".
        let bin = ws.path().join(".venv/bin");
        fs::create_dir_all(&bin).unwrap();
        if !bwrap.trim().is_empty() {
            fs::copy(bwrap.trim(), bin.join("bwrap")).unwrap();
        }
        // A stockade built into the workspace, with its launcher beside it.
        let release = ws.path().join("target/release");
        fs::create_dir_all(&release).unwrap();
        let stockade = release.join("stockade");
        fs::copy(env!("CARGO_BIN_EXE_stockade"), &stockade).unwrap();
        fs::copy(
            stockade_testkit::built_launcher().unwrap(),
            release.join("landlock-run"),
        )
        .unwrap();
        chown_tree(ws.path(), who);
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        for mode in ["read-only", "workspace-write"] {
            if !bwrap.trim().is_empty() {
                let mut c = stockade_as(who, state.path());
                c.env("PATH", &path)
                    .args(["exec", "--backend", "bwrap", "--mode", mode, "--workspace"])
                    .arg(ws.path())
                    .args(["--", "true"]);
                let out = c.output().unwrap();
                let err = text(&out.stderr);
                assert_eq!(out.status.code(), Some(125), "{who:?} {mode}: {err}");
                assert!(
                    err.contains(&bin.join("bwrap").display().to_string()),
                    "{err}"
                );
                assert!(err.contains("writable root"), "{err}");
            }
            let mut c = command_as(who, stockade.as_os_str(), state.path());
            c.args([
                "exec",
                "--backend",
                "landlock",
                "--mode",
                mode,
                "--workspace",
            ])
            .arg(ws.path())
            .args(["--", "true"]);
            let out = c.output().unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{who:?} {mode}: {err}");
            assert!(err.contains("landlock-run"), "{err}");
            assert!(err.contains("writable root"), "{err}");
        }
    }
}

/// Channel 4: nothing under /proc/sys or /sys is writable, for anyone. A
/// same-value write is tried on every file whose mode says writable, so a
/// broken sandbox changes nothing.
#[test]
fn proc_and_sys_are_read_only_for_everyone() {
    let base = base();
    let script = r#"
tried=0; wrote=0
for f in $(find /proc/sys /sys -xdev -path /sys/kernel/debug -prune -o -type f -perm -u=w -perm -u=r -print 2>/dev/null); do
  IFS= read -r v < "$f" 2>/dev/null || continue
  tried=$((tried+1))
  if { printf '%s\n' "$v" > "$f"; } 2>/dev/null; then wrote=$((wrote+1)); echo "WROTE $f"; fi
done
echo "tried=$tried wrote=$wrote"
"#;
    for who in users() {
        for backend in backends() {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                backend,
                "read-only",
                ws.path(),
                script,
                &[],
            );
            let so = text(&out.stdout);
            let last = so.lines().last().unwrap_or_default().to_owned();
            eprintln!("{who:?} {backend}: {last}");
            assert!(last.starts_with("tried="), "{so} {}", text(&out.stderr));
            let tried: usize = last["tried=".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(tried > 100, "{who:?} {backend}: walked too little: {last}");
            assert!(last.ends_with(" wrote=0"), "{who:?} {backend}: {so}");
        }
    }
}

/// Channel 4: bwrap masks what container runtimes mask.
#[test]
fn bwrap_masks_kernel_interfaces() {
    if !backends().contains(&"bwrap") {
        return;
    }
    let base = base();
    for who in users() {
        let state = owned_dir(&base, "state-", who);
        let ws = owned_dir(&base, "ws-", who);
        let out = exec_on(
            "allow-listed",
            who,
            state.path(),
            "bwrap",
            "workspace-write",
            ws.path(),
            "for f in /proc/kcore /proc/keys /proc/timer_list; do [ -e $f ] || continue; \
             n=$(head -c 64 $f 2>/dev/null | wc -c); echo \"$f $n\"; done; \
             grep -c ' /proc/sys .*ro[, ]' /proc/self/mountinfo",
            &[],
        );
        let so = text(&out.stdout);
        for line in so.lines().filter(|l| l.starts_with("/proc/")) {
            assert!(line.ends_with(" 0"), "{who:?}: not masked: {line}");
        }
        assert_ne!(
            so.lines().last(),
            Some("0"),
            "{who:?}: /proc/sys not read-only: {so}"
        );
    }
}

/// Channel 5: no Unix socket outside, pathname or abstract, and no process
/// outside can be signalled; socketpair still works.
#[test]
fn host_daemons_and_processes_are_out_of_reach() {
    use std::os::unix::net::UnixListener;
    let python = Path::new("/usr/bin/python3");
    if !stockade_testkit::require("/usr/bin/python3", python.is_file()) {
        return;
    }
    let base = base();
    for who in users() {
        for (backend, network) in runs() {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            let sockdir = owned_dir(&base, "sock-", who);
            let path = sockdir.path().join("daemon.sock");
            let listener = UnixListener::bind(&path).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o777)).unwrap();
            listener.set_nonblocking(true).unwrap();
            let name = format!("stockade-test-{}-{backend}", std::process::id());
            let abs = {
                use std::os::linux::net::SocketAddrExt;
                let addr =
                    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
                let l = UnixListener::bind_addr(&addr).unwrap();
                l.set_nonblocking(true).unwrap();
                l
            };
            let mut sleeper = command_as(who, OsStr::new("sleep"), state.path())
                .arg("30")
                .spawn()
                .unwrap();
            let code = format!(
                r#"
import os, socket, sys
out = []
for addr in [{path:?}, "\0{name}"]:
    s = socket.socket(socket.AF_UNIX) if True else None
    try:
        s.connect(addr); out.append("connected")
    except OSError as e:
        out.append("refused")
try:
    os.kill({pid}, 0); out.append("signalled")
except OSError:
    out.append("nosignal")
a, b = socket.socketpair(); a.send(b"x"); out.append("pair" if b.recv(1) == b"x" else "nopair")
print(" ".join(out))
"#,
                path = path.to_str().unwrap(),
                pid = sleeper.id()
            );
            // socket() itself may be refused (seccomp): that is a refusal.
            let code = code.replace(
                "    s = socket.socket(socket.AF_UNIX) if True else None\n    try:\n        s.connect(addr)",
                "    try:\n        s = socket.socket(socket.AF_UNIX); s.connect(addr)",
            );
            let out = exec_on(
                network,
                who,
                state.path(),
                backend,
                "read-only",
                ws.path(),
                "exec /usr/bin/python3 -c \"$1\"",
                &[OsStr::new(&code)],
            );
            sleeper.kill().unwrap();
            sleeper.wait().unwrap();
            drop(abs);
            assert_eq!(
                text(&out.stdout).trim(),
                "refused refused nosignal pair",
                "{who:?} {backend} {network}: {}",
                text(&out.stderr)
            );
        }
    }
}

fn git(ws: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "safe.directory=*",
            "-C",
        ])
        .arg(ws)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

/// Channel 6: hooks and config stay read-only under bwrap (mounts) and under
/// Landlock (the launcher's supervisor) while commits, branches, stashes and
/// checkouts keep working.
#[test]
fn git_hooks_and_config_are_read_only_but_git_works() {
    let base = base();
    for who in users() {
        let state = owned_dir(&base, "state-", who);
        let ws = owned_dir(&base, "repo-", who);
        git(ws.path(), &["init", "-q"]);
        fs::write(ws.path().join("a.txt"), "a\n").unwrap();
        git(ws.path(), &["add", "a.txt"]);
        git(ws.path(), &["commit", "-q", "-m", "one"]);
        chown_tree(ws.path(), who);
        for backend in backends() {
            for attack in [
                "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-commit",
                "echo '[core] hooksPath = /tmp' >> .git/config",
                "mv .git .git-old",
                "rm -rf .git/hooks",
                // Redirections git honours even while absent.
                "echo ../evil > .git/commondir",
                "echo '[core] hooksPath = /tmp' > .git/config.worktree",
                // Ways around a name: a link, a renamed directory, a symlink.
                "ln -s hooks .git/hk && echo x > .git/hk/pre-commit",
                "ln -s .git/hooks/pre-push p && echo x > p",
                "mv .git/hooks .git/h2",
                "chmod 777 .git/hooks",
            ] {
                let out = exec_on(
                    "allow-listed",
                    who,
                    state.path(),
                    backend,
                    "workspace-write",
                    ws.path(),
                    attack,
                    &[],
                );
                assert!(
                    !out.status.success(),
                    "{who:?} {backend}: `{attack}` succeeded"
                );
            }
            for hook in ["post-commit", "pre-commit", "pre-push"] {
                assert!(!ws.path().join(".git/hooks").join(hook).exists());
            }
            assert!(ws.path().join(".git/HEAD").exists());
            let work = format!(
                "export HOME=$PWD/.home; g() {{ git -c user.name=t -c user.email=t@t -c safe.directory='*' \"$@\"; }}; \
                 echo b >> a.txt && g commit -qam two && g checkout -qb side-{backend} && \
                 echo c >> a.txt && g stash -q && g stash pop -q && g checkout -q - && \
                 g branch -q topic-{backend} && echo ok"
            );
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                backend,
                "workspace-write",
                ws.path(),
                &work,
                &[],
            );
            assert_eq!(
                text(&out.stdout).trim(),
                "ok",
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
        }
        // This kernel runs the supervisor, so Landlock claims no gap here.
        let mut c = stockade_as(who, state.path());
        c.args(["exec", "--json", "--backend", "landlock", "--workspace"])
            .arg(ws.path())
            .args(["--", "true"]);
        let out = c.output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let gaps = v["result"]["sandbox"]["gaps"].as_array().unwrap();
        assert!(
            !gaps
                .iter()
                .any(|g| g["name"] == "protected-paths" || g["name"] == "metadata"),
            "{who:?}: {v}"
        );
    }
}

/// Channel 7: a command's own stderr and exit 125 never read as a runner
/// failure, and never make stockade forget its verdict.
#[test]
fn a_command_cannot_forge_a_runner_failure() {
    let base = base();
    for who in users() {
        for backend in backends().into_iter().chain(["auto"]) {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                backend,
                "read-only",
                ws.path(),
                "echo 'bwrap: Can'\"'\"'t mount proc' >&2; echo 'landlock-run: cannot restrict' >&2; exit 125",
                &[],
            );
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{who:?} {backend}: {err}");
            assert!(
                !err.contains("sandbox unavailable"),
                "{who:?} {backend}: {err}"
            );
            if backend == "auto" {
                assert!(
                    state.path().join("stockade/auto-verdict").exists(),
                    "{who:?}: the verdict was forgotten"
                );
            }
            let mut c = stockade_as(who, state.path());
            c.args([
                "exec",
                "--json",
                "--backend",
                backend,
                "--mode",
                "read-only",
                "--workspace",
            ])
            .arg(ws.path())
            .args(["--", "/bin/sh", "-c", "echo 'bwrap: x' >&2; exit 125"]);
            let out = c.output().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["result"]["sandbox"]["runner_failed"], false, "{v}");
            // bwrap's line for a command it could not execute, printed by
            // a command that ran (bwrap runs it itself under both): its
            // own output and status, not a missing command's.
            for network in NETWORKS {
                let out = exec_on(
                    network,
                    who,
                    state.path(),
                    backend,
                    "read-only",
                    ws.path(),
                    "echo 'bwrap: execvp nope: No such file or directory' >&2; exit 1",
                    &[],
                );
                let err = text(&out.stderr);
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "{who:?} {backend} {network}: {err}"
                );
                assert!(
                    !err.contains("command not found") && !err.contains("sandbox unavailable"),
                    "{who:?} {backend} {network}: {err}"
                );
            }
        }
    }
}

/// Under both private networks bwrap runs the command itself where `probe`
/// says it does on this host: no launcher anywhere in the sandbox's pid
/// namespace, the launcher's three filters on the command all the same,
/// and under `allow-listed` the proxy answering on the sandbox's own
/// loopback (the listener stockade made in its namespace before the
/// command started), as root and as nobody.
#[test]
fn bwrap_runs_the_command_itself_on_both_private_networks() {
    if !stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        return;
    }
    let base = base();
    for who in users() {
        let state = owned_dir(&base, "state-", who);
        let probe = stockade_as(who, state.path())
            .arg("probe")
            .output()
            .unwrap();
        let direct = text(&probe.stdout)
            .lines()
            .any(|l| l.contains("command-runner: under deny and allow-listed bwrap itself"));
        assert!(
            direct || !stockade_testkit::in_ci() || text(&probe.stdout).contains("landlock-abi=9"),
            "{who:?}: {}",
            text(&probe.stdout)
        );
        if !direct {
            eprintln!("{who:?}: this host keeps the closer");
            continue;
        }
        for network in NETWORKS {
            let ws = owned_dir(&base, "ws-", who);
            let mut c = stockade_as(who, state.path());
            c.args(["exec", "--backend", "bwrap", "--network", network, "--workspace"])
                .arg(ws.path())
                .args([
                    "--",
                    "bash",
                    "-c",
                    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done; \
                     grep '^Seccomp_filters:' /proc/self/status; \
                     if [ -n \"$HTTP_PROXY\" ]; then exec 3<>/dev/tcp/127.0.0.1/${HTTP_PROXY##*:} && \
                     printf 'GET http://refused.test/ HTTP/1.1\\r\\nHost: refused.test\\r\\n\\r\\n' >&3 && \
                     head -c 9 <&3; echo; fi",
                ])
                .current_dir(ws.path());
            let out = c.output().unwrap();
            let seen = text(&out.stdout);
            assert!(
                out.status.success(),
                "{who:?} {network}: {seen} {}",
                text(&out.stderr)
            );
            assert!(!seen.contains("landlock-run"), "{who:?} {network}: {seen}");
            assert!(
                seen.lines()
                    .any(|l| l.starts_with("/usr/bin/bwrap") || l.contains("bwrap ")),
                "{who:?} {network}: {seen}"
            );
            assert!(
                seen.contains("Seccomp_filters:\t3"),
                "{who:?} {network}: {seen}"
            );
            assert_eq!(
                seen.lines().any(|l| l == "HTTP/1.1 "),
                network == "allow-listed",
                "{who:?} {network}: the proxy answers inside only under allow-listed: {seen}"
            );
        }
    }
}

/// Channel 7: the closer's own failure inside bwrap (and the launcher's
/// under Landlock) is a runner failure: exit 125, nothing ran, the reason
/// named.
#[test]
fn a_runner_failure_is_still_reported_as_one() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            let marker = ws.path().join("ran");
            let mut c = stockade_as(who, state.path());
            c.args(["exec", "--backend", backend, "--allow-socket"])
                .arg(ws.path().join("no-such.sock"))
                .arg("--workspace")
                .arg(ws.path())
                .args(["--", "/bin/sh", "-c", "touch \"$1\"", "sh"])
                .arg(&marker);
            let out = c.output().unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{who:?} {backend}: {err}");
            assert!(
                err.contains("sandbox unavailable"),
                "{who:?} {backend}: {err}"
            );
            assert!(err.contains("no-such.sock"), "{who:?} {backend}: {err}");
            assert!(!marker.exists(), "{who:?} {backend}: the command ran");
        }
    }
}

/// `probe --json` names the protections, the gaps, and why a relative
/// `$TMPDIR` is not granted.
#[test]
fn probe_names_protections_gaps_and_a_refused_tmpdir() {
    let base = base();
    let state = owned_dir(&base, "state-", Who::Me);
    let mut c = stockade_as(Who::Me, state.path());
    c.args(["probe", "--json"]).env("TMPDIR", ".");
    let out = c.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["tmpdir"].as_str().unwrap().contains("not granted"), "{v}");
    for b in v["backends"].as_array().unwrap() {
        if b["usable"] != true {
            continue;
        }
        let names: Vec<&str> = b["protections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        for want in [
            "writable-roots",
            "procfs",
            "signals",
            "unix-sockets",
            "abstract-sockets",
            "git",
        ] {
            assert!(
                names.contains(&want),
                "{}: {want} missing: {b}",
                b["backend"]
            );
        }
        if b["backend"] == "landlock" {
            // Supervised on this kernel: metadata governed, no such gaps.
            assert!(names.contains(&"metadata"), "{b}");
            let gaps: Vec<&str> = b["gaps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["name"].as_str().unwrap())
                .collect();
            assert!(
                !gaps.contains(&"metadata") && !gaps.contains(&"protected-paths"),
                "{b}"
            );
        }
    }
}

/// Channel 3: the `auto` verdict cache is never kept where a confined run
/// could write it, and a cache directory replaced by a symlink makes
/// stockade create or delete nothing where it points.
#[test]
fn the_verdict_cache_stays_out_of_reach() {
    let base = base();
    for who in users() {
        let ws = owned_dir(&base, "ws-", who);
        // Under /tmp: a writable root of every workspace-write run.
        let state = owned_dir(Path::new("/tmp"), "stockade-state-", who);
        let out = exec_on(
            "allow-listed",
            who,
            state.path(),
            "auto",
            "read-only",
            ws.path(),
            "true",
            &[],
        );
        assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        assert!(
            !state.path().join("stockade").exists(),
            "{who:?}: a verdict was kept under /tmp"
        );
        // Outside every root, but the cache dir is a symlink elsewhere.
        let state = owned_dir(&base, "state-", who);
        let elsewhere = owned_dir(&base, "elsewhere-", who);
        fs::write(elsewhere.path().join("auto-verdict"), "victim").unwrap();
        symlink(elsewhere.path(), state.path().join("stockade")).unwrap();
        for script in ["true", "exit 0"] {
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                "auto",
                "read-only",
                ws.path(),
                script,
                &[],
            );
            assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        }
        assert_eq!(entries(elsewhere.path()), [OsString::from("auto-verdict")]);
        assert_eq!(
            fs::read_to_string(elsewhere.path().join("auto-verdict")).unwrap(),
            "victim"
        );
    }
}

/// `$HOME` as the workspace still keeps its verdict: the places beneath it
/// are skipped (nothing is made there) and the next place serves, so the
/// second run does not probe (the verdict file is not written again).
#[test]
fn a_home_workspace_keeps_its_verdict_in_the_next_place() {
    let base = base();
    for who in users() {
        // Runtime dir and home both inside the workspace.
        let home = owned_dir(&base, "home-", who);
        let cache = owned_dir(&base, "cache-", who);
        let run = || {
            let mut c = stockade_as(who, home.path());
            c.env("XDG_CACHE_HOME", cache.path())
                .args(["exec", "--mode", "workspace-write", "--workspace"])
                .arg(home.path())
                .args(["--", "/bin/sh", "-c", "echo ok > out"])
                .current_dir(home.path());
            let out = c.output().unwrap();
            assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        };
        run();
        let verdict = cache.path().join("stockade/auto-verdict");
        let first = fs::metadata(&verdict)
            .unwrap_or_else(|e| panic!("{who:?}: no verdict kept in the next place: {e}"))
            .modified()
            .unwrap();
        assert!(
            !home.path().join("stockade").exists() && !home.path().join(".cache").exists(),
            "{who:?}: a verdict place was made beneath the workspace"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        run();
        assert_eq!(
            fs::metadata(&verdict).unwrap().modified().unwrap(),
            first,
            "{who:?}: the second run probed again"
        );
    }
}

/// Channel 2: a runner reachable only through a relative `PATH` entry is
/// never run, and the refusal names the entry.
#[test]
fn a_runner_on_a_relative_path_entry_is_refused() {
    if !backends().contains(&"bwrap") {
        return;
    }
    let base = base();
    let state = owned_dir(&base, "state-", Who::Me);
    let ws = owned_dir(&base, "ws-", Who::Me);
    let bin = ws.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v bwrap"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    fs::copy(real.trim(), bin.join("bwrap")).unwrap();
    let mut c = stockade_as(Who::Me, state.path());
    c.env("PATH", "bin")
        .args(["exec", "--backend", "bwrap", "--workspace"])
        .arg(ws.path())
        .args(["--", "/bin/true"])
        .current_dir(ws.path());
    let out = c.output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("relative entry bin"), "{err}");
}

/// Channel 2: the runner is not only its file but what the loader makes it
/// load. A library a confined run planted where `LD_PRELOAD` (or
/// `LD_LIBRARY_PATH`) points must never run unconfined inside the next
/// run's runner; the command still gets the variable.
#[test]
fn a_planted_library_never_loads_into_the_runner() {
    let cc = ["cc", "gcc"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok());
    if !stockade_testkit::require("a C compiler (cc)", cc.is_some()) {
        return;
    }
    let base = base();
    for who in users() {
        for backend in backends() {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            let outside = owned_dir(&base, "outside-", who);
            // What a confined run could have written into its workspace.
            let src = ws.path().join("evil.c");
            fs::write(
                &src,
                r#"#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    const char *dir = getenv("PLANTED_OUT");
    if (!dir) return;
    char comm[64] = "unknown";
    int c = open("/proc/self/comm", O_RDONLY);
    if (c >= 0) {
        ssize_t n = read(c, comm, sizeof comm - 1);
        comm[n > 0 ? n - 1 : 0] = 0;
        close(c);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/pwned-%s-%d", dir, comm, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
"#,
            )
            .unwrap();
            let lib = ws.path().join("evil.so");
            let st = Command::new(cc.unwrap())
                .args(["-shared", "-fPIC", "-o"])
                .arg(&lib)
                .arg(&src)
                .status()
                .unwrap();
            assert!(st.success());
            chown_tree(ws.path(), who);
            // The witness that the library loads at all: a dynamic program
            // started with it outside stockade (stockade and landlock-run
            // are static, so nothing of ours could show it).
            let witness = Command::new("/bin/sh")
                .args(["-c", "true"])
                .env("LD_PRELOAD", &lib)
                .env("PLANTED_OUT", outside.path())
                .status()
                .unwrap();
            assert!(witness.success());
            let mut c = stockade_as(who, state.path());
            c.env("LD_PRELOAD", &lib)
                .env("PLANTED_OUT", outside.path())
                .args(["exec", "--backend", backend, "--workspace"])
                .arg(ws.path())
                .args(["--", "/bin/sh", "-c", "echo \"$LD_PRELOAD\""]);
            let out = c.output().unwrap();
            assert!(
                out.status.success(),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            assert_eq!(text(&out.stdout).trim(), lib.display().to_string());
            // setpriv was started with it too, a test artefact: in real use
            // the library appears after stockade started. No runner may have
            // loaded it.
            let markers: Vec<String> = entries(outside.path())
                .iter()
                // The planted library names them `pwned-<comm>-<pid>`: ASCII.
                .map(|e| e.to_str().unwrap().to_owned())
                .collect();
            assert!(
                markers.iter().any(|m| m.starts_with("pwned-sh-")),
                "{who:?} {backend}: the planted library never loaded at all: {markers:?}"
            );
            assert!(
                !markers
                    .iter()
                    .any(|m| m.contains("bwrap") || m.contains("landlock-run")),
                "{who:?} {backend}: a runner loaded the planted library: {markers:?}"
            );
        }
    }
}

/// Channel 1: a project-local `$TMPDIR` inside the workspace, replaced by
/// a symlink by an earlier run, is never granted where it points.
#[test]
fn a_tmpdir_planted_inside_the_workspace_is_refused() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            let outside = owned_dir(&base, "outside-", who);
            symlink(outside.path(), ws.path().join("tmp")).unwrap();
            let target = outside.path().join("x");
            let mut c = stockade_as(who, state.path());
            c.env("TMPDIR", ws.path().join("tmp"))
                .args(["exec", "--backend", backend, "--workspace"])
                .arg(ws.path())
                .args(["--", "/bin/sh", "-c", "echo x > \"$1\"", "sh"])
                .arg(&target);
            let out = c.output().unwrap();
            assert!(!out.status.success(), "{who:?} {backend}");
            assert!(!target.exists(), "{who:?} {backend}: wrote through $TMPDIR");
            assert!(
                text(&out.stderr).contains("$TMPDIR"),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
        }
    }
}

/// Channel 6: hooks git finds through `core.hooksPath` (husky) and config
/// pulled in by `include.path` stay read-only under bwrap too.
#[test]
fn hooks_path_and_included_config_are_read_only_under_bwrap() {
    if !backends().contains(&"bwrap") {
        return;
    }
    let base = base();
    for who in users() {
        let state = owned_dir(&base, "state-", who);
        let ws = owned_dir(&base, "repo-", who);
        git(ws.path(), &["init", "-q"]);
        git(ws.path(), &["config", "core.hooksPath", ".husky/_"]);
        git(ws.path(), &["config", "include.path", "../team.gitconfig"]);
        fs::create_dir_all(ws.path().join(".husky/_")).unwrap();
        fs::write(ws.path().join("team.gitconfig"), "[user]\n\tname = t\n").unwrap();
        chown_tree(ws.path(), who);
        for attack in [
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .husky/_/post-checkout",
            "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> team.gitconfig",
            "rm -rf .husky/_",
        ] {
            let out = exec_on(
                "allow-listed",
                who,
                state.path(),
                "bwrap",
                "workspace-write",
                ws.path(),
                attack,
                &[],
            );
            assert!(!out.status.success(), "{who:?}: `{attack}` succeeded");
        }
        assert!(!ws.path().join(".husky/_/post-checkout").exists());
        assert_eq!(
            fs::read_to_string(ws.path().join("team.gitconfig")).unwrap(),
            "[user]\n\tname = t\n"
        );
        // A hooks directory the config names but nobody made yet is one a
        // confined run could create: stockade creates it (empty, as git
        // init does `hooks`) and protects it; the run goes on.
        fs::remove_dir_all(ws.path().join(".husky")).unwrap();
        let out = exec_on(
            "allow-listed",
            who,
            state.path(),
            "bwrap",
            "workspace-write",
            ws.path(),
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .husky/_/pre-commit",
            &[],
        );
        let code = out.status.code();
        assert!(
            code != Some(0) && code != Some(125),
            "{who:?}: {code:?} {}",
            text(&out.stderr)
        );
        assert!(ws.path().join(".husky/_").is_dir());
        assert!(!ws.path().join(".husky/_/pre-commit").exists());
    }
}

/// A descriptor the caller of `stockade exec` leaks (open without
/// close-on-exec: an agent's parent left it one) never reaches the
/// command, on either backend, as root and as an unprivileged user: the
/// spawn closes it before the runner starts, the launcher (or bwrap, when
/// it runs the command itself under deny and allow-listed) every
/// descriptor it was handed. `allow` is run too: there the launcher
/// inside bwrap is its closer.
#[test]
fn a_descriptor_the_caller_leaks_never_reaches_the_command() {
    let base = base();
    let closer = backends().into_iter().map(|b| (b, "allow"));
    for who in users() {
        for (backend, network) in runs().into_iter().chain(closer.clone()) {
            let state = owned_dir(&base, "state-", who);
            let ws = owned_dir(&base, "ws-", who);
            // Held roots and protected paths are handed to the runner by
            // descriptor: none of those may reach the command either.
            fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
            chown_tree(ws.path(), who);
            let mut c = command_as(who, OsStr::new("/bin/sh"), state.path());
            c.args([
                "-c",
                "exec 7</etc/hostname 9</etc/hostname; exec \"$@\"",
                "sh",
                env!("CARGO_BIN_EXE_stockade"),
                "exec",
                "--backend",
                backend,
                "--network",
                network,
                "--workspace",
            ])
            .arg(ws.path())
            .args([
                "--",
                "/bin/sh",
                "-c",
                // The last entry is the glob's own directory descriptor,
                // closed by then: its readlink fails.
                "for f in /proc/self/fd/*; do t=$(readlink \"$f\") && echo \"${f##*/} $t\"; done; true",
            ]);
            let out = c.output().unwrap();
            let seen = text(&out.stdout);
            assert!(
                out.status.success(),
                "{who:?} {backend} {network}: {}",
                text(&out.stderr)
            );
            let numbers: Vec<&str> = seen.lines().filter_map(|l| l.split(' ').next()).collect();
            assert_eq!(
                numbers,
                ["0", "1", "2"],
                "{who:?} {backend} {network}: the command holds more than stdio: {seen}"
            );
        }
    }
}
