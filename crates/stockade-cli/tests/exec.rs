//! `stockade exec` and `stockade probe` against the real kernel.
//!
//! When `CI=true` a missing runner is a failure, never a skip.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn have_bwrap() -> bool {
    let ok = Command::new("bwrap").arg("--version").output().is_ok();
    assert!(
        ok || !stockade_testkit::in_ci(),
        "bwrap is not installed: real-runner tests must run in CI"
    );
    ok
}

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock", "auto"];
    if have_bwrap() {
        b.insert(0, "bwrap");
    } else {
        eprintln!("skipping bwrap: not installed");
    }
    b
}

/// A scratch area outside /tmp and $TMPDIR holding `ws/` and `outside/`.
struct Scratch {
    dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn scratch_named(name: &OsStr) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("exec-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join(name);
    let outside = dir.path().join("outside");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&outside).unwrap();
    Scratch { dir, ws, outside }
}

fn scratch() -> Scratch {
    scratch_named(OsStr::new("ws"))
}

fn stockade(s: &Scratch) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stockade"));
    // Each test keeps its own auto verdict.
    c.env("XDG_RUNTIME_DIR", s.dir.path()).current_dir(&s.ws);
    c
}

fn exec(s: &Scratch, backend: &str, mode: &str, script: &str, args: &[&OsStr]) -> Output {
    let mut c = stockade(s);
    c.args([
        "exec",
        "--backend",
        backend,
        "--mode",
        mode,
        "--",
        "/bin/sh",
        "-c",
        script,
        "sh",
    ]);
    c.args(args);
    c.output().unwrap()
}

fn write(s: &Scratch, backend: &str, mode: &str, target: &Path) -> Output {
    exec(
        s,
        backend,
        mode,
        "echo data > \"$1\"",
        &[target.as_os_str()],
    )
}

fn tmp_target(name: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/stockade-exec-{}-{name}", std::process::id()))
}

#[test]
fn read_only_refuses_every_write_but_dev_null() {
    for b in backends() {
        let s = scratch();
        let t = tmp_target(&format!("ro-{b}"));
        for target in [s.ws.join("f"), t.clone(), s.outside.join("f")] {
            let out = write(&s, b, "read-only", &target);
            assert!(
                !out.status.success(),
                "{b}: {} written: {out:?}",
                target.display()
            );
            assert!(!target.exists(), "{b}: {} exists", target.display());
        }
        let out = write(&s, b, "read-only", Path::new("/dev/null"));
        assert!(out.status.success(), "{b}: {out:?}");
    }
}

#[test]
fn workspace_write_confines_to_workspace_and_tmp() {
    for b in backends() {
        let s = scratch();
        let t = tmp_target(&format!("ww-{b}"));
        for target in [s.ws.join("f"), t.clone()] {
            let out = write(&s, b, "workspace-write", &target);
            assert!(out.status.success(), "{b}: {out:?}");
            assert_eq!(fs::read(&target).unwrap(), b"data\n");
        }
        fs::remove_file(&t).unwrap();
        let out = write(&s, b, "workspace-write", &s.outside.join("f"));
        assert!(!out.status.success(), "{b}: {out:?}");
        assert!(!s.outside.join("f").exists());
    }
}

#[test]
fn the_default_mode_is_workspace_write_in_the_current_directory() {
    let s = scratch();
    let out = stockade(&s)
        .args([
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "echo hi > here; echo no > ../outside/f",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(fs::read(s.ws.join("here")).unwrap(), b"hi\n");
    assert!(!s.outside.join("f").exists());
}

#[test]
fn symlink_and_rename_escapes_are_refused() {
    for b in backends() {
        let s = scratch();
        fs::write(s.outside.join("victim"), b"original").unwrap();
        symlink(&s.outside, s.ws.join("dirlink")).unwrap();
        symlink(s.outside.join("victim"), s.ws.join("filelink")).unwrap();
        assert!(
            !write(&s, b, "workspace-write", &s.ws.join("dirlink/new"))
                .status
                .success()
        );
        assert!(
            !write(&s, b, "workspace-write", &s.ws.join("filelink"))
                .status
                .success()
        );
        assert!(!s.outside.join("new").exists());
        assert_eq!(fs::read(s.outside.join("victim")).unwrap(), b"original");
        let out = exec(
            &s,
            b,
            "workspace-write",
            "exec perl -e 'rename($ARGV[0], $ARGV[1]) or die \"rename: $!\\n\"' \"$1\" \"$2\"",
            &[
                s.outside.join("victim").as_os_str(),
                s.ws.join("stolen").as_os_str(),
            ],
        );
        assert!(!out.status.success(), "{b}: {out:?}");
        assert!(s.outside.join("victim").exists());
        assert!(!s.ws.join("stolen").exists());
    }
}

#[test]
fn a_workspace_with_spaces_and_non_utf8_bytes_works() {
    for b in backends() {
        let s = scratch_named(OsStr::from_bytes(b"a b\xff\xfe"));
        let mut c = stockade(&s);
        c.args(["exec", "--backend", b, "--workspace"]).arg(&s.ws);
        c.args(["--", "/bin/sh", "-c", "printf %s \"$1\" > \"$2\"", "sh"]);
        c.arg(OsStr::from_bytes(b"arg\xfd"))
            .arg(s.ws.join(OsStr::from_bytes(b"out\xfc")));
        let out = c.output().unwrap();
        assert!(out.status.success(), "{b}: {out:?}");
        assert_eq!(
            fs::read(s.ws.join(OsStr::from_bytes(b"out\xfc"))).unwrap(),
            b"arg\xfd"
        );
    }
}

/// The command runs where `-C` says, else where stockade was started;
/// `--workspace` decides only what may be written, never where CMD starts.
#[test]
fn the_working_directory_is_cd_else_the_current_one() {
    for b in backends() {
        let s = scratch();
        let sub = s.ws.join("sub dir");
        fs::create_dir(&sub).unwrap();
        let pwd = |extra: &[&OsStr], from: &Path| {
            let mut c = stockade(&s);
            c.current_dir(from)
                .args(["exec", "--backend", b, "--workspace"])
                .arg(&s.ws)
                .args(extra)
                .args(["--", "/bin/sh", "-c", "pwd -P; touch made-here"]);
            let out = c.output().unwrap();
            assert!(out.status.code().is_some(), "{b}: {out:?}");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
            )
        };
        let real = |p: &Path| p.canonicalize().unwrap().display().to_string();
        // From outside the workspace, without -C: there, not the workspace;
        // a relative write there is outside the writable set.
        let (code, at) = pwd(&[], &s.outside);
        assert_eq!(at, real(&s.outside), "{b}");
        assert_ne!(code, Some(0), "{b}: wrote outside the workspace");
        assert!(!s.outside.join("made-here").exists(), "{b}");
        // -C relative to where stockade started, written inside the workspace.
        let (code, at) = pwd(&[OsStr::new("-C"), OsStr::new("sub dir")], &s.ws);
        assert_eq!((code, at), (Some(0), real(&sub)), "{b}");
        assert!(sub.join("made-here").exists(), "{b}");
        let (code, at) = pwd(&[OsStr::new("--cd"), s.ws.as_os_str()], &s.outside);
        assert_eq!((code, at), (Some(0), real(&s.ws)), "{b}");
    }
}

/// `--json` output keeps every byte: text where it is UTF-8, and the exact
/// bytes beside it (base64) where it is not, on stdout and stderr alike.
#[test]
fn json_output_that_is_not_utf8_is_recoverable() {
    use base64::Engine as _;
    for b in backends() {
        let s = scratch();
        let out = stockade(&s)
            .args(["exec", "--json", "--backend", b, "--"])
            .args([
                "/bin/sh",
                "-c",
                "printf 'ok\\377\\376x'; printf 'plain' >&2",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{b}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let stdout = &v["result"]["stdout"];
        let exact = base64::engine::general_purpose::STANDARD
            .decode(stdout["bytes_base64"].as_str().expect("bytes_base64"))
            .unwrap();
        assert_eq!(exact, b"ok\xff\xfex", "{b}");
        assert_eq!(v["result"]["stderr"]["bytes"], "plain", "{b}");
        assert!(v["result"]["stderr"].get("bytes_base64").is_none(), "{b}");
    }
}

#[test]
fn exit_status_and_signals_pass_through() {
    for b in backends() {
        let s = scratch();
        assert_eq!(
            exec(&s, b, "read-only", "exit 7", &[]).status.code(),
            Some(7)
        );
        assert_eq!(
            exec(&s, b, "read-only", "exit 125", &[]).status.code(),
            Some(125)
        );
        assert_eq!(
            exec(&s, b, "read-only", "kill -TERM $$", &[]).status.code(),
            Some(128 + 15)
        );
    }
}

#[test]
fn stdin_and_stdout_are_inherited() {
    use std::io::Write;
    use std::process::Stdio;
    let s = scratch();
    let mut child = stockade(&s)
        .args(["exec", "--mode", "read-only", "--", "tr", "a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"confined\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"CONFINED\n");
}

#[test]
fn danger_full_access_runs_unconfined_and_says_nothing() {
    let s = scratch();
    let out = write(&s, "auto", "danger-full-access", &s.outside.join("f"));
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    assert!(s.outside.join("f").exists());
}

#[test]
fn bad_input_exits_2_and_runs_nothing() {
    let s = scratch();
    let marker = s.ws.join("marker");
    let touch = ["--", "/bin/sh", "-c", "touch marker"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--mode", "full"],
            "expected one of read-only, workspace-write, danger-full-access",
        ),
        (
            vec!["--backend", "firejail"],
            "expected one of auto, bwrap, landlock",
        ),
        (
            vec!["--workspace", "/nonexistent/stockade-ws"],
            "workspace /nonexistent/stockade-ws",
        ),
        (
            vec!["-C", "/nonexistent/stockade-cd"],
            "--cd /nonexistent/stockade-cd",
        ),
        (
            vec!["--cd", "/etc/passwd"],
            "--cd /etc/passwd: not a directory",
        ),
    ];
    for (flags, message) in cases {
        let out = stockade(&s)
            .arg("exec")
            .args(&flags)
            .args(touch)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(message),
            "{flags:?}: {out:?}"
        );
        assert!(!marker.exists(), "{flags:?} ran the command");
    }
    let out = stockade(&s).args(["exec", "--"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let file = s.ws.join("file");
    fs::write(&file, "").unwrap();
    let out = stockade(&s)
        .arg("exec")
        .arg("--workspace")
        .arg(&file)
        .args(touch)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
    assert!(!marker.exists());
}

#[test]
fn an_unavailable_sandbox_exits_125_and_runs_nothing() {
    let s = scratch();
    let marker = s.ws.join("marker");
    // No bwrap on PATH: the explicit backend has nothing to fall back to.
    let empty = s.dir.path().join("empty-path");
    fs::create_dir(&empty).unwrap();
    let out = stockade(&s)
        .env("PATH", &empty)
        .args([
            "exec",
            "--backend",
            "bwrap",
            "--",
            "/bin/sh",
            "-c",
            "touch marker",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("stockade: sandbox unavailable: bwrap: bwrap not found on PATH"),
        "{err}"
    );
    // Says what a user without root can do instead.
    assert!(err.contains("landlock"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!marker.exists());
}

#[test]
fn auto_falls_back_to_landlock_when_bwrap_is_unusable() {
    let s = scratch();
    // A `bwrap` on PATH that exists but cannot confine anything.
    let bin = s.dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let fake = bin.join("bwrap");
    // Written by a child: a write fd held here while a parallel test forks
    // would make the exec fail with ETXTBSY.
    let wrote = Command::new("/bin/sh")
        .args(["-c", "printf '#!/bin/sh\\necho \"bwrap: No permissions to create new namespace\" >&2\\nexit 1\\n' > \"$1\"", "sh"])
        .arg(&fake)
        .status()
        .unwrap();
    assert!(wrote.success());
    fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path =
        std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")]).unwrap();
    let out = stockade(&s)
        .env("PATH", &path)
        .args(["probe", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["auto_selects"], "landlock", "{report}");
    assert_eq!(report["backends"][0]["usable"], false);
    assert!(
        report["backends"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("No permissions"),
        "{report}"
    );
    let out = stockade(&s)
        .env("PATH", &path)
        .args([
            "exec",
            "--",
            "/bin/sh",
            "-c",
            "echo ok > in; echo no > ../outside/f",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "landlock's dialect: {out:?}"
    );
    assert!(s.ws.join("in").exists());
    assert!(!s.outside.join("f").exists());
}

/// A fake bwrap that claims the options for running the command itself
/// and behaves as `body` says (`$fd` is its `--json-status-fd`, `$bfd` its
/// `--block-fd` when it has one).
fn fake_direct_bwrap(s: &Scratch, name: &str, body: &str) -> PathBuf {
    let bin = s.dir.path().join(name);
    fs::create_dir(&bin).unwrap();
    let fake = bin.join("bwrap");
    let script = format!(
        "#!/bin/sh\n# --add-seccomp-fd FD  --json-status-fd FD  --block-fd FD\nfd=; bfd=; prev=\nfor a; do [ \"$prev\" = --json-status-fd ] && fd=$a; [ \"$prev\" = --block-fd ] && bfd=$a; prev=$a; done\n[ -n \"$fd\" ] || {{ echo 'not run direct' >&2; exit 99; }}\n{body}\n"
    );
    // Written by a child: a write fd held here while a parallel test forks
    // would make the exec fail with ETXTBSY.
    let wrote = Command::new("/bin/sh")
        .args(["-c", "printf '%s' \"$2\" > \"$1\"", "sh"])
        .arg(&fake)
        .arg(&script)
        .status()
        .unwrap();
    assert!(wrote.success());
    fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

/// bwrap running the command itself is told apart by its status channel
/// alone: setup that failed before the exec is a runner failure (125, the
/// line named, never the command's), an exec that failed is the command's
/// 127 with the shell's words, and a run that reached `exit-code` is the
/// command's whatever it printed. Fault injection: fake runners that print
/// what a real one prints.
#[test]
fn bwrap_running_the_command_itself_is_judged_by_its_status() {
    let s = scratch();
    let marker = s.ws.join("ran");
    let cases = [
        (
            "setup",
            "echo 'bwrap: Can'\\''t mount proc on /newroot/proc: Operation not permitted' >&2; exit 1",
            125,
            "Can't mount proc",
        ),
        (
            "pid-then-setup",
            "eval \"echo '{ \\\"child-pid\\\": 7 }' >&$fd\"; echo 'bwrap: Can'\\''t find source path /x: No such file or directory' >&2; exit 1",
            125,
            "Can't find source path",
        ),
        (
            "execvp",
            "eval \"echo '{ \\\"child-pid\\\": 7 }' >&$fd\"; echo 'bwrap: execvp frob: No such file or directory' >&2; exit 1",
            127,
            "frob: command not found",
        ),
        (
            "ran",
            "eval \"echo '{ \\\"child-pid\\\": 7 }' >&$fd\"; echo 'bwrap: execvp frob: No such file or directory' >&2; eval \"echo '{ \\\"exit-code\\\": 1 }' >&$fd\"; exit 1",
            1,
            "bwrap: execvp frob",
        ),
    ];
    for (name, body, code, says) in cases {
        let bin = fake_direct_bwrap(&s, name, body);
        let path = std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
            .unwrap();
        let out = stockade(&s)
            .env("PATH", &path)
            .args(["exec", "--backend", "bwrap", "--network", "deny"])
            .args(["--", "/bin/sh", "-c", "touch \"$1\"", "sh"])
            .arg(&marker)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert_eq!(
            err.contains("sandbox unavailable"),
            code == 125,
            "{name}: {err}"
        );
        if code != 127 {
            assert!(!err.contains("command not found"), "{name}: {err}");
        }
        assert!(!marker.exists(), "{name}: nothing runs the command");
    }
}

/// Under `allow-listed`, bwrap running the command itself waits on its
/// block descriptor while stockade makes the proxy's listener in the
/// child's network namespace. A first line that names no child, a child
/// that is not as bwrap named it (no namespace named, another namespace)
/// or a listener that cannot be made
/// (here: the port is taken, in a namespace that is not private) is a
/// runner failure, and the command never runs: the runner is killed while
/// it waits, and its block descriptor is never let go (not on a part of
/// the document either, which bwrap writes in pieces). Fault injection:
/// fake runners that print what a real one prints, then run the command if
/// they are let go.
#[test]
fn allow_listed_bwrap_that_cannot_be_relayed_into_never_runs_the_command() {
    let s = scratch();
    let marker = s.ws.join("ran");
    let refused = stockade_core::texts::relay_listener_failed("");
    let after = format!(
        "head -c1 /proc/self/fd/$bfd >/dev/null; touch '{}'; eval \"echo '{{ \\\"exit-code\\\": 0 }}' >&$fd\"",
        marker.display()
    );
    let cases = [
        ("no-child", "eval \"echo '{ \\\"exit-code\\\": 0 }' >&$fd\"".to_owned()),
        ("unnamed", "eval \"echo '{ \\\"child-pid\\\": '$$' }' >&$fd\"".to_owned()),
        // Written in pieces, as bwrap writes it: nothing is let go on a
        // part of the line.
        (
            "another",
            "eval \"printf '{ \\\"child-pid\\\": '$$ >&$fd\"; sleep 0.3; eval \"echo ', \\\"net-namespace\\\": 1 }' >&$fd\"".to_owned(),
        ),
        (
            "taken",
            "ns=$(stat -L -c %i /proc/$$/ns/net); eval \"echo '{ \\\"child-pid\\\": '$$', \\\"net-namespace\\\": '$ns' }' >&$fd\"".to_owned(),
        ),
    ];
    for (name, announce) in cases {
        let bin = fake_direct_bwrap(&s, name, &format!("{announce}; {after}"));
        let path = std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
            .unwrap();
        let started = std::time::Instant::now();
        let out = stockade(&s)
            .env("PATH", &path)
            .args(["exec", "--backend", "bwrap", "--network", "allow-listed"])
            .args(["--", "/bin/sh", "-c", "touch \"$1\"", "sh"])
            .arg(&marker)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{name}: {err}");
        assert!(err.contains(refused.trim_end()), "{name}: {err}");
        assert!(err.contains("sandbox unavailable"), "{name}: {err}");
        assert!(!marker.exists(), "{name}: nothing runs the command");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{name}: the run ended"
        );
    }
}

#[test]
fn probe_reports_both_backends() {
    have_bwrap();
    let s = scratch();
    let out = stockade(&s).arg("probe").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("platform: linux"), "{text}");
    assert!(
        text.contains("landlock   usable enforcement=full landlock-abi="),
        "{text}"
    );
    let out = stockade(&s).args(["probe", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bwrap", "landlock"]);
    assert_eq!(report["auto_selects"], "bwrap");
    // What the front ends can approve while a command waits, per backend.
    for (b, paths) in [("bwrap", false), ("landlock", true)] {
        assert_eq!(
            report["runtime_approval"][b],
            serde_json::json!({ "hosts": true, "paths": paths }),
            "{report}"
        );
    }
    assert_eq!(
        text.matches("approve while it runs (exec --ask at a terminal, acp with [approval]): hosts, held while asked; paths: ").count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("paths: no channel, a refused write reruns"),
        "{text}"
    );
    assert!(
        text.contains("paths: exec --ask under workspace-write when supervised"),
        "{text}"
    );
    assert_eq!(
        report["backends"][1]["runner"],
        Path::new(env!("CARGO_BIN_EXE_landlock-run"))
            .display()
            .to_string()
    );
}

/// Run `stockade ARGS` under a real pseudo-terminal (util-linux `script`),
/// typing `answer` at it.
fn under_pty(s: &Scratch, args: &str, answer: &str) -> Output {
    use std::process::Stdio;
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_stockade"));
    let child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("XDG_RUNTIME_DIR", s.dir.path())
        .current_dir(&s.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    stockade_testkit::prompt::answer_when_asked(child, "[y/N]", answer)
}

#[test]
fn ask_retries_once_under_the_wider_mode_when_the_user_says_yes() {
    for b in backends() {
        let s = scratch();
        let args = format!("exec --backend {b} --mode read-only --ask -- sh -c 'echo ok > f'");
        let out = under_pty(&s, &args, "y\n");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("[sandbox: file access denied under read-only mode]"),
            "{b}: {text}"
        );
        assert!(
            text.contains("retry this command once under workspace-write? [y/N]"),
            "{b}: {text}"
        );
        assert_eq!(fs::read(s.ws.join("f")).unwrap(), b"ok\n", "{b}: {text}");
        assert_eq!(out.status.code(), Some(0), "{b}: {text}");
    }
}

#[test]
fn ask_retries_nothing_on_no_or_without_a_terminal() {
    let s = scratch();
    let out = under_pty(
        &s,
        "exec --mode read-only --ask -- sh -c 'echo ok > f'",
        "n\n",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("[y/N]"));
    assert!(!s.ws.join("f").exists());
    assert_ne!(out.status.code(), Some(0));
    // No terminal: no question at all, nothing retried.
    let out = exec(&s, "auto", "read-only", "echo ok > f", &[]);
    let out2 = stockade(&s)
        .args([
            "exec",
            "--mode",
            "read-only",
            "--ask",
            "--",
            "sh",
            "-c",
            "echo ok > f",
        ])
        .output()
        .unwrap();
    for o in [out, out2] {
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("[y/N]"),
            "{o:?}"
        );
        assert!(!s.ws.join("f").exists());
    }
}

#[test]
fn ask_can_go_straight_to_danger_full_access_and_rejects_narrower_targets() {
    let s = scratch();
    let target = s.outside.join("f");
    let args = format!(
        "exec --mode read-only --ask --escalate-to danger-full-access -- sh -c 'echo ok > {}'",
        target.display()
    );
    let out = under_pty(&s, &args, "yes\n");
    assert!(String::from_utf8_lossy(&out.stdout).contains("once under danger-full-access?"));
    assert!(target.exists());
    let out = stockade(&s)
        .args([
            "exec",
            "--mode",
            "workspace-write",
            "--ask",
            "--escalate-to",
            "read-only",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--escalate-to read-only is not wider than the mode (workspace-write)")
    );
}

#[test]
fn a_denial_is_reported_with_the_path_and_the_writable_roots() {
    for b in backends() {
        let s = scratch();
        let target = s.outside.join("f");
        let out = write(&s, b, "workspace-write", &target);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("[sandbox: file access denied under workspace-write mode]"),
            "{b}: {err}"
        );
        assert!(
            err.contains(&format!("stockade: denied: {}", target.display())),
            "{b}: {err}"
        );
        let ws = fs::canonicalize(&s.ws).unwrap();
        assert!(err.contains(&format!("{}", ws.display())), "{b}: {err}");
        assert!(
            err.contains("stockade: writable under workspace-write: /dev/null, /tmp"),
            "{b}: {err}"
        );
        // An allowed command says nothing extra.
        let out = write(&s, b, "workspace-write", &s.ws.join("ok"));
        assert!(out.stderr.is_empty(), "{b}: {out:?}");
    }
}

#[test]
fn json_prints_the_result_facts() {
    for b in backends() {
        let s = scratch();
        let out = stockade(&s)
            .args([
                "exec",
                "--json",
                "--backend",
                b,
                "--mode",
                "read-only",
                "--",
                "sh",
                "-c",
                "echo hi; echo x > f",
            ])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &v["result"];
        assert_eq!(r["stdout"]["bytes"], "hi\n", "{b}: {v}");
        assert_eq!(r["sandbox"]["denied"], true, "{b}: {v}");
        assert_eq!(r["sandbox"]["mode"], "read-only");
        let want = if b == "auto" { "bwrap" } else { b };
        if have_bwrap() || b != "auto" {
            assert_eq!(r["sandbox"]["backend"], want, "{v}");
        }
        assert_eq!(r["sandbox"]["enforcement"], "full");
        // Placed where the command ran (its working directory).
        assert_eq!(
            r["sandbox"]["denied_paths"][0],
            s.ws.join("f").display().to_string()
        );
        assert!(r["duration_ms"].as_f64().unwrap() > 0.0);
        assert_eq!(v["retry"], serde_json::Value::Null);
        assert_eq!(
            out.status.code(),
            r["exit"]["code"].as_i64().map(|c| c as i32)
        );
    }
}

/// A command that is not there or not executable exits 127 or 126 with the
/// shell's wording, on every backend and without a sandbox; only a real
/// runner failure is 125. None of them makes stockade forget its verdict.
#[test]
fn a_missing_or_unexecutable_command_exits_127_or_126() {
    for backend in backends() {
        let s = scratch();
        fs::write(s.ws.join("not-executable.sh"), "echo hi\n").unwrap();
        let verdict = s.dir.path().join("stockade/auto-verdict");
        if backend == "auto" {
            let out = stockade(&s)
                .args(["exec", "--backend", "auto", "--", "true"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            assert!(verdict.exists(), "no verdict was cached");
        }
        // Under deny bwrap runs the command itself: its exec failure is
        // told by its own line, read as the launcher's record.
        let runs = ["read-only", "workspace-write", "danger-full-access"]
            .into_iter()
            .flat_map(|m| ["allow-listed", "deny"].map(|n| (m, n)));
        for (mode, network) in runs {
            for (prog, code, says) in [
                ("no-such-command-xyz", 127, "command not found"),
                ("./no-such-file", 127, "No such file or directory"),
                ("./not-executable.sh", 126, "Permission denied"),
            ] {
                let out = stockade(&s)
                    .args(["exec", "--backend", backend, "--mode", mode])
                    .args(["--network", network, "--", prog])
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(
                    out.status.code(),
                    Some(code),
                    "{backend} {mode} {network} {prog}: {err}"
                );
                assert!(
                    err.contains(says),
                    "{backend} {mode} {network} {prog}: {err}"
                );
                assert!(
                    !err.contains("sandbox unavailable") && !err.contains("[sandbox:"),
                    "{backend} {mode} {network} {prog}: {err}"
                );
                if backend == "auto" {
                    assert!(verdict.exists(), "{mode} {prog}: the verdict was forgotten");
                }
            }
        }
    }
}

/// Without `--`, nothing runs and stockade says what is missing; the help
/// lists the exit statuses.
#[test]
fn a_missing_separator_is_named_and_help_lists_the_exit_codes() {
    let s = scratch();
    let out = stockade(&s)
        .args(["exec", "touch", "marker"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("put `--` before the command"), "{err}");
    assert!(!s.ws.join("marker").exists());
    // Another usage error says nothing about `--`.
    let out = stockade(&s)
        .args(["exec", "--bogus", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("put `--`"));
    let out = stockade(&s).args(["exec", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for code in ["125", "126", "127"] {
        assert!(help.contains(code), "{help}");
    }
}
