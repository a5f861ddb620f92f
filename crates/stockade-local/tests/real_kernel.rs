//! The local provider against the real kernel, for both backends.
//!
//! When `CI=true` a missing runner is a failure, never a skip.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stockade_core::status::RunnerStatus;
use stockade_core::{ConfiningMode, Enforcement, SandboxPolicy, SandboxProvider};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};

/// A provider pinned to `backend`, or `None` (a skip outside CI).
fn provider(backend: BackendPreference) -> Option<LocalProvider> {
    let launcher_path = stockade_testkit::built_launcher();
    let missing = match backend {
        BackendPreference::Landlock if launcher_path.is_none() => Some("landlock-run is not built"),
        BackendPreference::Bwrap if Command::new("bwrap").arg("--version").output().is_err() => {
            Some("bwrap is not installed")
        }
        _ => None,
    };
    if let Some(why) = missing {
        assert!(
            !stockade_testkit::in_ci(),
            "{why}: real-runner tests must run in CI"
        );
        eprintln!("skipping: {why}");
        return None;
    }
    let settings = LocalSettings {
        backend,
        launcher_path,
        ..Default::default()
    };
    Some(LocalProvider::new(settings).unwrap())
}

const BACKENDS: [BackendPreference; 2] = [BackendPreference::Bwrap, BackendPreference::Landlock];

/// A scratch area outside every writable root (not under /tmp or $TMPDIR),
/// holding `ws/` (the workspace) and `outside/` (a sibling).
struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn scratch_named(ws_name: &OsStr) -> Scratch {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("real-kernel-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join(ws_name);
    let outside = dir.path().join("outside");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&outside).unwrap();
    Scratch {
        _dir: dir,
        ws,
        outside,
    }
}

fn scratch() -> Scratch {
    scratch_named(OsStr::new("ws"))
}

/// Run `sh -c script sh ARGS...` confined and return its output.
fn run(p: &LocalProvider, mode: ConfiningMode, ws: &Path, script: &str, args: &[&OsStr]) -> Output {
    let mut argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), script.into(), "sh".into()];
    argv.extend(args.iter().map(|a| a.to_os_string()));
    let c = p.confine(&argv, &SandboxPolicy::new(mode, ws)).unwrap();
    assert!(c.argv.len() > argv.len(), "the argv came back unconfined");
    let out = stockade_testkit::run_confined(&c, ws);
    assert_eq!(
        out.status,
        RunnerStatus::Started,
        "the runner did not start the command: {}",
        String::from_utf8_lossy(&out.output.stderr)
    );
    out.output
}

fn write(p: &LocalProvider, mode: ConfiningMode, ws: &Path, target: &Path) -> Output {
    run(p, mode, ws, "echo data > \"$1\"", &[target.as_os_str()])
}

fn denied(out: &Output, backend: BackendPreference) -> bool {
    let sig = match backend {
        BackendPreference::Bwrap => "Read-only file system",
        _ => "Permission denied",
    };
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(sig)
}

fn unique(name: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/stockade-test-{}-{name}", std::process::id()))
}

#[test]
fn read_only_refuses_workspace_tmp_and_sibling_but_not_dev_null() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        let tmp_target = unique(&format!("ro-{backend}"));
        for target in [s.ws.join("f"), tmp_target.clone(), s.outside.join("f")] {
            let out = write(&p, ConfiningMode::ReadOnly, &s.ws, &target);
            assert!(
                denied(&out, backend),
                "{backend}: {} was not denied: {out:?}",
                target.display()
            );
            assert!(!target.exists(), "{backend}: {} exists", target.display());
        }
        let out = write(&p, ConfiningMode::ReadOnly, &s.ws, Path::new("/dev/null"));
        assert!(out.status.success(), "{backend}: /dev/null: {out:?}");
    }
}

#[test]
fn workspace_write_allows_workspace_and_tmp_only() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        let tmp_target = unique(&format!("ww-{backend}"));
        for target in [s.ws.join("f"), tmp_target.clone()] {
            let out = write(&p, ConfiningMode::WorkspaceWrite, &s.ws, &target);
            assert!(
                out.status.success(),
                "{backend}: {}: {out:?}",
                target.display()
            );
            assert_eq!(fs::read(&target).unwrap(), b"data\n");
        }
        fs::remove_file(&tmp_target).unwrap();
        let target = s.outside.join("f");
        let out = write(&p, ConfiningMode::WorkspaceWrite, &s.ws, &target);
        assert!(
            denied(&out, backend),
            "{backend}: sibling not denied: {out:?}"
        );
        assert!(!target.exists());
    }
}

#[test]
fn symlinks_inside_the_workspace_do_not_let_writes_escape() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        fs::write(s.outside.join("victim"), b"original").unwrap();
        symlink(&s.outside, s.ws.join("dirlink")).unwrap();
        symlink(s.outside.join("victim"), s.ws.join("filelink")).unwrap();
        let out = write(
            &p,
            ConfiningMode::WorkspaceWrite,
            &s.ws,
            &s.ws.join("dirlink/new"),
        );
        assert!(denied(&out, backend), "{backend}: {out:?}");
        assert!(!s.outside.join("new").exists());
        let out = write(
            &p,
            ConfiningMode::WorkspaceWrite,
            &s.ws,
            &s.ws.join("filelink"),
        );
        assert!(denied(&out, backend), "{backend}: {out:?}");
        assert_eq!(fs::read(s.outside.join("victim")).unwrap(), b"original");
    }
}

#[test]
fn renaming_an_outside_file_into_the_workspace_is_refused() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        let src = s.outside.join("precious");
        fs::write(&src, b"keep").unwrap();
        let dst = s.ws.join("stolen");
        // rename(2) itself, not mv (which falls back to copy + unlink).
        let out = run(
            &p,
            ConfiningMode::WorkspaceWrite,
            &s.ws,
            "exec perl -e 'rename($ARGV[0], $ARGV[1]) or die \"rename: $!\\n\"' \"$1\" \"$2\"",
            &[src.as_os_str(), dst.as_os_str()],
        );
        assert!(!out.status.success(), "{backend}: {out:?}");
        assert_eq!(fs::read(&src).unwrap(), b"keep");
        assert!(!dst.exists());
    }
}

#[test]
fn a_workspace_with_spaces_and_non_utf8_bytes_works() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch_named(OsStr::from_bytes(b"my work \xff\xfe (1)"));
        let target = s.ws.join(OsStr::from_bytes(b"out \xfd"));
        let out = write(&p, ConfiningMode::WorkspaceWrite, &s.ws, &target);
        assert!(out.status.success(), "{backend}: {out:?}");
        assert_eq!(fs::read(&target).unwrap(), b"data\n");
        let out = write(
            &p,
            ConfiningMode::WorkspaceWrite,
            &s.ws,
            &s.outside.join("x"),
        );
        assert!(denied(&out, backend), "{backend}: {out:?}");
    }
}

#[test]
fn enforcement_and_dialect_are_reported() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        let c = p
            .confine(
                &["true".into()],
                &SandboxPolicy::new(ConfiningMode::ReadOnly, &s.ws),
            )
            .unwrap();
        assert_eq!(c.backend, backend.as_str());
        // This kernel is far past Landlock ABI 3, so neither backend may
        // claim less (or, on an older kernel, more) than it achieves.
        assert_eq!(c.enforcement, Enforcement::Full);
        assert_eq!(
            p.selected().unwrap().landlock_abi.is_some(),
            backend == BackendPreference::Landlock
        );
    }
}

/// Root is first-class: the child's inherited privileges must not undo the
/// confinement on either backend.
#[test]
fn root_cannot_undo_the_confinement() {
    if !rustix::process::geteuid().is_root() {
        assert!(
            !stockade_testkit::in_ci(),
            "CI runs as root; these checks must run there"
        );
        eprintln!("skipping: not root");
        return;
    }
    let me = std::process::id().to_string();
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        // No capability now, and none to gain: with no_new_privs set an exec
        // (even of a setuid-root binary) cannot raise the permitted set, so a
        // bounding set bwrap leaves full is not a way back.
        let out = run(
            &p,
            ConfiningMode::WorkspaceWrite,
            &s.ws,
            "grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs)' /proc/self/status",
            &[],
        );
        let status = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(status.lines().count(), 5, "{backend}: {status}");
        for line in status.lines() {
            if line.starts_with("NoNewPrivs") {
                assert!(line.ends_with("\t1"), "{backend}: {line}");
            } else {
                assert!(
                    line.ends_with("0000000000000000"),
                    "{backend}: capability kept: {line}"
                );
            }
        }
        // Through a host process's root the write would land on the host. A
        // process with the child's own uid and (no) capabilities passes the
        // kernel's ptrace check, so that is the one to aim at.
        let mut sleeper = Command::new("setpriv")
            .args([
                "--inh-caps=-all",
                "--ambient-caps=-all",
                "--bounding-set=-all",
                "sleep",
                "30",
            ])
            .spawn()
            .expect("setpriv (util-linux)");
        for pid in [me.clone(), sleeper.id().to_string()] {
            let via_proc = PathBuf::from(format!("/proc/{pid}/root"))
                .join(s.outside.strip_prefix("/").unwrap())
                .join("f");
            let out = write(&p, ConfiningMode::WorkspaceWrite, &s.ws, &via_proc);
            assert!(
                !out.status.success(),
                "{backend}: /proc/{pid}/root escape: {out:?}"
            );
            assert!(
                !s.outside.join("f").exists(),
                "{backend}: escaped through /proc/{pid}/root"
            );
        }
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        // No device nodes, no remounts, no module loading.
        for script in [
            "mknod \"$1/blk\" b 7 0",
            "mount -o remount,rw /",
            "mount -t tmpfs none \"$1\"",
        ] {
            let out = run(
                &p,
                ConfiningMode::WorkspaceWrite,
                &s.ws,
                script,
                &[s.ws.as_os_str()],
            );
            assert!(!out.status.success(), "{backend}: `{script}` succeeded");
        }
        assert!(!s.ws.join("blk").exists());
        // No controlling terminal to push input into (TIOCSTI).
        let out = run(
            &p,
            ConfiningMode::WorkspaceWrite,
            &s.ws,
            "exec 3</dev/tty",
            &[],
        );
        assert!(!out.status.success(), "{backend}: /dev/tty opened");
    }
}

#[test]
fn descriptors_inherited_without_cloexec_cannot_be_written_through() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        let outside = s.outside.join("through-fd");
        fs::write(&outside, b"").unwrap();
        let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), "echo escaped >&7".into()];
        let c = p
            .confine(
                &argv,
                &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &s.ws),
            )
            .unwrap();
        // A shell opens fd 7 without O_CLOEXEC and execs the confined argv,
        // as an agent started with a stray descriptor would.
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg("exec 7>>\"$0\"; exec \"$@\"")
            .arg(&outside)
            .args(&c.argv)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{backend}: {out:?}");
        assert_eq!(
            fs::read(&outside).unwrap(),
            b"",
            "{backend}: wrote through an inherited fd"
        );
    }
}

/// The grant is the held directory, not its path: a workspace swapped for a
/// symlink to a sibling AFTER confine and BEFORE the runner starts still
/// has the command write into the directory that was held (now at its new
/// name), never into what the path names; the next confine fails closed.
#[test]
fn a_swap_between_confine_and_spawn_never_redirects_the_grant() {
    for backend in BACKENDS {
        let Some(p) = provider(backend) else { continue };
        let s = scratch();
        let argv: Vec<OsString> = vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo x > \"$1/f\"".into(),
            "sh".into(),
            s.ws.clone().into_os_string(),
        ];
        let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &s.ws);
        let c = p.confine(&argv, &policy).unwrap();
        let moved = s.ws.with_file_name("ws-moved");
        fs::rename(&s.ws, &moved).unwrap();
        symlink(&s.outside, &s.ws).unwrap();
        let out = stockade_testkit::run_confined(&c, Path::new("/"));
        assert!(
            fs::read_dir(&s.outside).unwrap().next().is_none(),
            "{backend}: the write followed the swapped path"
        );
        let e = p.confine(&argv, &policy).unwrap_err();
        assert!(e.to_string().contains("no longer names"), "{backend}: {e}");
        // bwrap cannot mount the held directory over a symlink into a
        // read-only place: the runner fails and nothing runs. Landlock
        // grants it by descriptor, so the path (now the symlink) is simply
        // not writable and the command's write is denied.
        match backend {
            BackendPreference::Bwrap => {
                assert_ne!(out.status, RunnerStatus::Started, "{:?}", out.output);
            }
            _ => {
                assert_eq!(out.status, RunnerStatus::Started, "{:?}", out.output);
                assert!(!out.output.status.success());
            }
        }
        assert!(!moved.join("f").exists(), "{backend}: {:?}", out.output);
    }
}

/// bwrap binds the workspace repository's hooks and config read-only.
#[test]
fn bwrap_keeps_git_hooks_and_config_read_only() {
    let Some(p) = provider(BackendPreference::Bwrap) else {
        return;
    };
    let s = scratch();
    let st = Command::new("git")
        .arg("init")
        .arg("-q")
        .arg(&s.ws)
        .status()
        .unwrap();
    assert!(st.success());
    for target in [".git/hooks/post-commit", ".git/config"] {
        let out = write(&p, ConfiningMode::WorkspaceWrite, &s.ws, &s.ws.join(target));
        assert!(denied(&out, BackendPreference::Bwrap), "{target}: {out:?}");
    }
    assert!(!s.ws.join(".git/hooks/post-commit").exists());
    let out = write(
        &p,
        ConfiningMode::WorkspaceWrite,
        &s.ws,
        &s.ws.join(".git/COMMIT_EDITMSG"),
    );
    assert!(out.status.success(), "{out:?}");
}
