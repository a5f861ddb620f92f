//! `stockade exec` holds its workspace before anything runs: nothing a
//! confined command leaves behind (a symlink planted in /tmp, its workspace
//! moved away and replaced) widens the next invocation's grant.
//!
//! The real binary against real files and the real Landlock launcher; when
//! `CI=true` a missing launcher is a failure, never a skip.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// A scratch area outside /tmp and $TMPDIR: `outside/` is where a
/// redirected workspace would point, so a write there shows up.
struct Scratch {
    dir: tempfile::TempDir,
    outside: PathBuf,
}

fn scratch() -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("control-")
        .tempdir_in(base)
        .unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    Scratch { dir, outside }
}

/// A directory under the real `/tmp` (a writable root of every
/// workspace-write run), whatever `$TMPDIR` says.
fn in_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-control-")
        .tempdir_in("/tmp")
        .unwrap()
}

fn stockade(s: &Scratch) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stockade"));
    // Each test keeps its own auto verdict; the current directory is one no
    // test expects a write in.
    c.env("XDG_RUNTIME_DIR", s.dir.path())
        .current_dir(s.dir.path());
    c
}

fn launcher() -> bool {
    stockade_testkit::require(
        "the built landlock-run",
        stockade_testkit::built_launcher().is_some(),
    )
}

fn empty(dir: &Path) -> bool {
    fs::read_dir(dir).unwrap().next().is_none()
}

/// Exit 2, `stockade: ...` on stderr holding every one of `needles`.
fn refused(out: &std::process::Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(err.starts_with("stockade: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
}

#[test]
fn the_filesystem_root_is_never_a_workspace() {
    let s = scratch();
    let out = stockade(&s)
        .args([
            "exec",
            "--workspace",
            "/",
            "--",
            "touch",
            "stockade-control-x",
        ])
        .output()
        .unwrap();
    refused(&out, &["workspace /:", "filesystem root"]);
    assert!(!Path::new("/stockade-control-x").exists());
}

#[test]
fn a_workspace_through_a_symlink_in_tmp_is_refused() {
    let s = scratch();
    let tmp = in_tmp();
    let link = tmp.path().join("ws");
    symlink(&s.outside, &link).unwrap();
    let out = stockade(&s)
        .arg("exec")
        .arg("--workspace")
        .arg(&link)
        .args(["--", "touch", "x"])
        .output()
        .unwrap();
    refused(&out, &[&link.display().to_string(), "symlink", "planted"]);
    assert!(empty(&s.outside), "nothing ran");
}

/// What a previous confined run could have done: its workspace lay in /tmp,
/// which it may write, so it moved the workspace away and left a symlink
/// in its place. The next invocation naming the old path must not follow it.
#[test]
fn a_workspace_replaced_by_a_symlink_after_a_run_is_refused() {
    if !launcher() {
        return;
    }
    let s = scratch();
    let tmp = in_tmp();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let first = stockade(&s)
        .arg("exec")
        .args(["--backend", "landlock", "--workspace"])
        .arg(&ws)
        // The command starts in the workspace (-C), as a user in it would.
        .arg("-C")
        .arg(&ws)
        .args(["--", "touch", "x"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    assert!(ws.join("x").is_file());

    fs::rename(&ws, tmp.path().join("ws.old")).unwrap();
    symlink(&s.outside, &ws).unwrap();
    let second = stockade(&s)
        .arg("exec")
        .args(["--backend", "landlock", "--workspace"])
        .arg(&ws)
        // The command starts in the workspace (-C), as a user in it would.
        .arg("-C")
        .arg(&ws)
        .args(["--", "touch", "x"])
        .output()
        .unwrap();
    refused(&second, &[&ws.display().to_string(), "symlink"]);
    assert!(empty(&s.outside), "nothing was written through the symlink");

    // The same with `/` as the target: refused, and nothing lands at `/x`.
    fs::remove_file(&ws).unwrap();
    symlink("/", &ws).unwrap();
    let third = stockade(&s)
        .arg("exec")
        .args(["--backend", "landlock", "--workspace"])
        .arg(&ws)
        // The command starts in the workspace (-C), as a user in it would.
        .arg("-C")
        .arg(&ws)
        .args(["--", "touch", "stockade-control-root"])
        .output()
        .unwrap();
    refused(&third, &[&ws.display().to_string()]);
    assert!(!Path::new("/stockade-control-root").exists());
}

/// The same, tried by the confined command itself: the workspace is a
/// writable root inside another (/tmp), and the launcher's supervisor pins
/// every root, so the move is refused and the next run finds its workspace.
/// (Were it moved anyway, the refusal above is what the next run does.)
#[test]
fn a_confined_run_cannot_redirect_the_next_runs_workspace() {
    if !launcher() {
        return;
    }
    let s = scratch();
    let tmp = in_tmp();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let attack = format!(
        "cd / && mv '{ws}' '{ws}.old' && ln -s '{outside}' '{ws}'",
        ws = ws.display(),
        outside = s.outside.display()
    );
    let first = stockade(&s)
        .arg("exec")
        .args(["--backend", "landlock", "--workspace"])
        .arg(&ws)
        // The command starts in the workspace (-C), as a user in it would.
        .arg("-C")
        .arg(&ws)
        .args(["--", "/bin/sh", "-c", &attack])
        .output()
        .unwrap();
    assert!(!first.status.success(), "{first:?}");
    assert!(fs::symlink_metadata(&ws).unwrap().is_dir());
    assert!(!tmp.path().join("ws.old").exists());

    let second = stockade(&s)
        .arg("exec")
        .args(["--backend", "landlock", "--workspace"])
        .arg(&ws)
        // The command starts in the workspace (-C), as a user in it would.
        .arg("-C")
        .arg(&ws)
        .args(["--", "touch", "x"])
        .output()
        .unwrap();
    assert!(second.status.success(), "{second:?}");
    assert!(ws.join("x").is_file());
    assert!(empty(&s.outside));
}

#[test]
fn a_relative_workspace_is_made_absolute_once() {
    if !launcher() {
        return;
    }
    let s = scratch();
    fs::create_dir(s.dir.path().join("ws")).unwrap();
    let out = stockade(&s)
        .args([
            "exec",
            "--backend",
            "landlock",
            "--workspace",
            "ws",
            "-C",
            "ws",
        ])
        .args(["--", "touch", "x"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(s.dir.path().join("ws/x").is_file());

    let out = stockade(&s)
        .args(["exec", "--workspace", "missing-ws", "--", "touch", "x"])
        .output()
        .unwrap();
    refused(
        &out,
        &[&s.dir.path().join("missing-ws").display().to_string()],
    );
}

#[test]
fn allow_socket_takes_absolute_paths_only() {
    let s = scratch();
    let out = stockade(&s)
        .args(["exec", "--allow-socket", "agent.sock", "--", "touch", "x"])
        .output()
        .unwrap();
    refused(&out, &["--allow-socket agent.sock", "absolute"]);
    assert!(!s.dir.path().join("x").exists());

    if !launcher() {
        return;
    }
    // Real sockets, absolute: the flag repeats and the command runs.
    let a = s.dir.path().join("a.sock");
    let b = s.dir.path().join("b.sock");
    let _listeners = [&a, &b].map(|p| std::os::unix::net::UnixListener::bind(p).unwrap());
    let out = stockade(&s)
        .args(["exec", "--backend", "landlock", "--allow-socket"])
        .arg(&a)
        .arg("--allow-socket")
        .arg(&b)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
