//! The Windows real-runner suite: the rung and `stockade-winrun` against a
//! real kernel. It exists only on Windows (the CI Windows lane); elsewhere it
//! is compiled for the Windows target and never run.
//!
//! The confined child is this test binary itself, re-run in `helper` mode:
//! its write goes through `std::fs` with no shell quoting in the way, and its
//! error text is the OS's (`Access is denied. (os error 5)`).
#![cfg(windows)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use stockade_core::{Confined, ConfiningMode, Enforcement, SandboxPolicy};
use stockade_local::PlatformRung;
use stockade_windows::acl::{AclEntry, AclMode, Dacl, MODIFY, SUBTREE};
use stockade_windows::runner::{RunnerArgs, failure_rule};
use stockade_windows::{RUNNER_FAILURE_EXIT, Sid, System, Win32};

/// What the helper does: `write` (to TARGET), `write-temp:NAME`, `exit:N`,
/// `env:NAME`.
const ACTION: &str = "STOCKADE_WINRUN_TEST_ACTION";
/// The path `write` writes, passed as an OS string (no lossy conversion).
const TARGET: &str = "STOCKADE_WINRUN_TEST_TARGET";
/// The helper's exit code for a failed write.
const WRITE_FAILED: i32 = 3;

/// Not a test: the confined child. A no-op unless ACTION is set.
#[test]
fn helper() {
    let Ok(action) = std::env::var(ACTION) else {
        return;
    };
    let code = match action.split_once(':') {
        None if action == "write" => {
            let target = std::env::var_os(TARGET).unwrap_or_default();
            match std::fs::write(target, b"confined") {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("{e}");
                    WRITE_FAILED
                }
            }
        }
        Some(("write-temp", name)) => match std::fs::write(std::env::temp_dir().join(name), b"t") {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{e}");
                WRITE_FAILED
            }
        },
        Some(("env", name)) => {
            println!("[{}]", std::env::var(name).unwrap_or_default());
            0
        }
        Some(("exit", code)) => code.parse().unwrap_or(99),
        _ => 99,
    };
    std::process::exit(code);
}

fn runner() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_stockade-winrun"))
}

fn rung() -> Arc<dyn PlatformRung> {
    stockade_windows::rung(Some(runner()))
}

fn helper_argv() -> Vec<OsString> {
    let exe = std::env::current_exe().unwrap();
    ["--exact", "helper", "--nocapture", "--test-threads=1"]
        .into_iter()
        .map(OsString::from)
        .fold(vec![exe.into_os_string()], |mut v, a| {
            v.push(a);
            v
        })
}

/// A fresh directory outside the host temp root (so the workspace is not a
/// sibling of the private temp directories, as in real use).
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-win-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn confine(rung: &dyn PlatformRung, mode: ConfiningMode, ws: &Path) -> Confined {
    rung.confine(&helper_argv(), &SandboxPolicy::new(mode, ws))
        .unwrap()
}

fn run(c: &Confined, action: &str) -> Output {
    Command::new(&c.argv[0])
        .args(&c.argv[1..])
        .env(ACTION, action)
        .output()
        .unwrap()
}

fn write(c: &Confined, path: &Path) -> Output {
    Command::new(&c.argv[0])
        .args(&c.argv[1..])
        .env(ACTION, "write")
        .env(TARGET, path)
        .output()
        .unwrap()
}

#[track_caller]
fn assert_written(out: &Output, path: &Path) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(path.is_file(), "{}", path.display());
}

#[track_caller]
fn assert_denied(c: &Confined, out: &Output, path: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(WRITE_FAILED),
        "{}: {stderr}",
        path.display()
    );
    assert!(
        c.denial_signatures
            .iter()
            .any(|s| stderr.contains(s.as_str())),
        "{}: {stderr}",
        path.display()
    );
    assert!(!path.exists(), "{}", path.display());
}

fn temp_dir_of(c: &Confined) -> PathBuf {
    let args = RunnerArgs::parse(c.argv[1..].to_vec()).unwrap();
    args.temp.unwrap().0
}

#[test]
fn workspace_write_confines_writes_to_the_workspace_and_private_temp() {
    let (ws, outside) = (scratch(), scratch());
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    assert_eq!(c.enforcement, Enforcement::Partial);
    let inside = ws.path().join("inside.txt");
    assert_written(&write(&c, &inside), &inside);
    let nested = ws.path().join("sub");
    std::fs::create_dir(&nested).unwrap();
    assert_written(&write(&c, &nested.join("n.txt")), &nested.join("n.txt"));
    let out_file = outside.path().join("outside.txt");
    assert_denied(&c, &write(&c, &out_file), &out_file);
    let out = run(&c, "write-temp:t.txt");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(temp_dir_of(&c).join("t.txt").is_file());
}

#[test]
fn tmp_and_temp_point_at_the_private_directory() {
    let ws = scratch();
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    let temp = temp_dir_of(&c);
    for var in ["TMP", "TEMP"] {
        let out = run(&c, &format!("env:{var}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("[{}]", temp.display())),
            "{var}: {stdout}"
        );
    }
    // The ambient temp root itself is no grant.
    let ambient = std::env::temp_dir().join(format!("stockade-ambient-{}", std::process::id()));
    assert_denied(&c, &write(&c, &ambient), &ambient);
}

#[test]
fn a_sibling_session_cannot_write_its_siblings_temp_under_a_shared_workspace_sid() {
    let ws = scratch();
    let (a, b) = (rung(), rung());
    let ca = confine(&*a, ConfiningMode::WorkspaceWrite, ws.path());
    let cb = confine(&*b, ConfiningMode::WorkspaceWrite, ws.path());
    let (ta, tb) = (temp_dir_of(&ca), temp_dir_of(&cb));
    assert_ne!(ta, tb);
    // Both share the standing workspace capability...
    let shared = ws.path().join("shared.txt");
    assert_written(&write(&ca, &shared), &shared);
    let shared_b = ws.path().join("shared-b.txt");
    assert_written(&write(&cb, &shared_b), &shared_b);
    // ...but not each other's temp.
    let into_b = tb.join("from-a.txt");
    assert_denied(&ca, &write(&ca, &into_b), &into_b);
    let into_a = ta.join("from-b.txt");
    assert_denied(&cb, &write(&cb, &into_a), &into_a);
}

fn confine_in(rung: &dyn PlatformRung, ws: &Path, session: &str) -> Confined {
    let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws)
        .with_session(Some(session.to_owned()));
    rung.confine(&helper_argv(), &policy).unwrap()
}

/// One provider (as `stockade acp` has), two sessions on one workspace:
/// each has its own temp capability, and ending one leaves the other's.
#[test]
fn a_run_in_one_session_cannot_write_a_sibling_sessions_temp() {
    let ws = scratch();
    let r = rung();
    let ca = confine_in(&*r, ws.path(), "session-a");
    let cb = confine_in(&*r, ws.path(), "session-b");
    let (ta, tb) = (temp_dir_of(&ca), temp_dir_of(&cb));
    assert_ne!(ta, tb);
    let own = run(&ca, "write-temp:own.txt");
    assert_eq!(
        own.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    assert!(ta.join("own.txt").is_file());
    let into_b = tb.join("from-a.txt");
    assert_denied(&ca, &write(&ca, &into_b), &into_b);
    let into_a = ta.join("from-b.txt");
    assert_denied(&cb, &write(&cb, &into_a), &into_a);
    let shared = ws.path().join("shared-by-sessions.txt");
    assert_written(&write(&cb, &shared), &shared);

    // Ending A revokes and removes A's temp only; B keeps working.
    r.end_session("session-a").unwrap();
    assert!(!ta.exists(), "{}", ta.display());
    assert!(tb.is_dir(), "{}", tb.display());
    let still = run(&cb, "write-temp:still.txt");
    assert_eq!(
        still.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&still.stderr)
    );
    assert!(tb.join("still.txt").is_file());
    // Idempotent.
    r.end_session("session-a").unwrap();
}

#[test]
fn a_mode_downgrade_leaves_the_standing_ace_inert() {
    let ws = scratch();
    let r = rung();
    let ww = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    let first = ws.path().join("first.txt");
    assert_written(&write(&ww, &first), &first);
    // The standing ACE is there...
    let canonical = RunnerArgs::parse(ww.argv[1..].to_vec())
        .unwrap()
        .workspace
        .unwrap();
    let Dacl::Entries(aces) = System.read_dacl(&canonical.0).unwrap() else {
        panic!("null DACL")
    };
    assert!(
        aces.iter()
            .any(|a| AclEntry::capability(canonical.1.clone()).is_exactly(a))
    );
    // ...and read-only carries no SID that could match it.
    let ro = confine(&*r, ConfiningMode::ReadOnly, ws.path());
    let second = ws.path().join("second.txt");
    assert_denied(&ro, &write(&ro, &second), &second);
    let ambient = std::env::temp_dir().join(format!("stockade-ro-{}", std::process::id()));
    assert_denied(&ro, &write(&ro, &ambient), &ambient);
}

#[test]
fn the_public_profile_tree_is_denied() {
    let ws = scratch();
    let public = std::env::var_os("PUBLIC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(r"C:\Users\Public"));
    let target = public
        .join("Documents")
        .join(format!("stockade-public-{}.txt", std::process::id()));
    // Unconfined, the caller can write there (INTERACTIVE has write), so the
    // denial below is the token's doing.
    std::fs::write(&target, b"probe").unwrap();
    std::fs::remove_file(&target).unwrap();
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    assert_denied(&c, &write(&c, &target), &target);
}

/// Pinned gap: an object granting Everyone write clears both checks, because
/// Everyone must stay a restricting SID. This is why enforcement is partial.
#[test]
fn partial_an_everyone_writable_directory_stays_writable() {
    let (ws, open) = (scratch(), scratch());
    System
        .apply_acl(
            open.path(),
            &[AclEntry {
                mode: AclMode::Set,
                sid: Sid::everyone(),
                mask: MODIFY,
                inheritance: SUBTREE,
            }],
        )
        .unwrap();
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    assert_eq!(c.enforcement, Enforcement::Partial);
    let target = open.path().join("everyone.txt");
    assert_written(&write(&c, &target), &target);
}

/// Pinned gap: NTFS ACLs belong to file objects, so the standing ACE that
/// propagates through a hard link in the workspace also grants the file's
/// alias outside it.
#[test]
fn partial_a_hard_link_in_the_workspace_grants_its_outside_alias() {
    let (ws, outside) = (scratch(), scratch());
    let target = outside.path().join("aliased.txt");
    std::fs::write(&target, b"original").unwrap();
    std::fs::hard_link(&target, ws.path().join("link.txt")).unwrap();
    // A fresh workspace: this confine applies (and propagates) the ACE.
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    let out = write(&c, &target);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"confined");
    // A file outside with no link stays denied.
    let plain = outside.path().join("plain.txt");
    assert_denied(&c, &write(&c, &plain), &plain);
}

#[test]
fn the_runner_mirrors_the_childs_exit_code() {
    let ws = scratch();
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    for code in [0, 1, 42, 255, 9009, -1_073_741_510] {
        let out = run(&c, &format!("exit:{code}"));
        assert_eq!(out.status.code(), Some(code));
        assert!(
            failure_rule()
                .fatal_line(out.status.code(), &out.stderr)
                .is_none()
        );
    }
}

#[test]
fn runner_failures_print_one_line_and_exit_reserved() {
    let out = Command::new(runner())
        .args(["--mode", "read-only"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(RUNNER_FAILURE_EXIT));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("stockade-winrun: "), "{stderr}");
    assert!(
        failure_rule()
            .fatal_line(out.status.code(), &out.stderr)
            .is_some()
    );
    // A mismatched SID pair is refused before any token exists.
    let ws = scratch();
    let mut args: Vec<OsString> = ["--mode", "workspace-write", "--workspace"]
        .map(OsString::from)
        .into();
    args.push(ws.path().as_os_str().to_owned());
    args.extend(["--workspace-sid", "S-1-4-1-2-3-4", "--", "cmd.exe"].map(OsString::from));
    let out = Command::new(runner()).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(RUNNER_FAILURE_EXIT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match"));
}

#[test]
fn dropping_the_rung_revokes_and_removes_the_private_temp() {
    let ws = scratch();
    let r = rung();
    let c = confine(&*r, ConfiningMode::WorkspaceWrite, ws.path());
    let temp = temp_dir_of(&c);
    let out = run(&c, "write-temp:left-behind.txt");
    assert_eq!(out.status.code(), Some(0));
    assert!(temp.is_dir());
    drop(r);
    assert!(!temp.exists(), "{}", temp.display());
}

#[test]
fn a_workspace_containing_the_temp_root_is_refused_untouched() {
    let temp_root = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    let holder = temp_root.parent().unwrap().to_path_buf();
    let before = System.read_dacl(&holder).unwrap();
    let r = rung();
    let err = r
        .confine(
            &helper_argv(),
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &holder),
        )
        .unwrap_err();
    assert_eq!(err.attempts[0].backend, "restricted-token");
    assert!(err.attempts[0].detail.contains("temp root"), "{err}");
    assert_eq!(System.read_dacl(&holder).unwrap(), before);
}
