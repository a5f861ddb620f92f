//! The harness the git suites share (`git_protection`, `git_after_run`):
//! scratch dirs owned by the test user, `stockade exec` and the user's own
//! git run as that user with a private `$HOME` and no system or global git
//! configuration but the one a test names.
#![allow(dead_code)] // each suite uses what it needs

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::Who;

pub fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

/// Scratch outside every writable root (not /tmp, not $TMPDIR).
pub fn base() -> PathBuf {
    let b = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let _ = fs::set_permissions(&b, fs::Permissions::from_mode(0o755));
    b
}

pub fn owned_dir(base: &Path, prefix: &str, who: Who) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .unwrap();
    who.own(d.path());
    d
}

/// `program` as `who` with `home` as `$HOME` and runtime dir, and no global
/// git configuration but `global` (when given).
pub fn as_user(who: Who, program: &OsStr, home: &Path, global: Option<&Path>) -> Command {
    let mut c = who.command(program);
    c.env("XDG_RUNTIME_DIR", home)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("TMPDIR")
        .stdin(Stdio::null());
    match global {
        Some(g) => c.env("GIT_CONFIG_GLOBAL", g),
        None => c.env("GIT_CONFIG_GLOBAL", "/dev/null"),
    };
    c
}

/// `sh -c script` confined by `stockade exec` under workspace-write, with
/// `extra` flags, ready to run.
pub fn exec_command(
    who: Who,
    home: &Path,
    global: Option<&Path>,
    backend: &str,
    ws: &Path,
    extra: &[&str],
    script: &str,
) -> Command {
    let mut c = as_user(
        who,
        OsStr::new(env!("CARGO_BIN_EXE_stockade")),
        home,
        global,
    );
    c.args(["exec", "--backend", backend, "--mode", "workspace-write"])
        .args(extra)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "/bin/sh", "-c", script])
        .current_dir(ws);
    c
}

/// [`exec_command`], run. The run must have started: one refused before it
/// started (125) would make every "the attack failed" pass without trying.
pub fn exec(
    who: Who,
    home: &Path,
    global: Option<&Path>,
    backend: &str,
    ws: &Path,
    extra: &[&str],
    script: &str,
) -> Output {
    let out = exec_command(who, home, global, backend, ws, extra, script)
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(125),
        "{who:?} {backend}: the run never started: {}",
        text(&out.stderr)
    );
    out
}

/// The user's own git, unconfined, as `who`.
pub fn user_git(who: Who, home: &Path, global: Option<&Path>, ws: &Path, args: &[&str]) -> Output {
    let mut c = as_user(who, OsStr::new("git"), home, global);
    c.args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
        .arg(ws)
        .args(args);
    c.output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn ok(out: &Output) {
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A repository with one commit, owned by `who`, at `dir`.
pub fn init(who: Who, home: &Path, dir: &Path) {
    ok(&user_git(who, home, None, dir, &["init", "-q"]));
    ok(&user_git(
        who,
        home,
        None,
        dir,
        &["commit", "-q", "--allow-empty", "-m", "one"],
    ));
}

/// A fresh repository with one commit, owned by `who`.
pub fn repo(base: &Path, who: Who, home: &Path) -> tempfile::TempDir {
    let ws = owned_dir(base, "repo-", who);
    init(who, home, ws.path());
    ws
}

/// A script in the run's directory that leaves `marker` when anything runs
/// it.
pub fn marker_script(marker: &Path) -> String {
    format!(
        "printf '#!/bin/sh\\ntouch {}\\n' > mon.sh && chmod +x mon.sh",
        marker.display()
    )
}
