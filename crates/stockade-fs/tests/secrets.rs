//! The file tools' deny-read fence by identity across mounts: a secret
//! stays refused through another mount of its directory, of a directory
//! inside it, or of a file inside it. The mounts are real bind mounts, made
//! in a private mount namespace (`unshare -m`) that this test binary is
//! run again inside, so the host's mount table is untouched; the fence
//! then runs in that process as root and, when we are root, as `nobody`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use stockade_core::{ExecutionPolicy, FilePolicy, SandboxMode};
use stockade_fs::{FileSystem, SandboxedFs};
use stockade_testkit::users::users;

/// Set in the re-run: the scratch directory, whose mounts are made.
const CHILD: &str = "STOCKADE_FS_SECRETS_SCRATCH";
const TEST: &str = "a_secret_is_refused_through_another_mount_of_what_holds_it";

#[test]
fn a_secret_is_refused_through_another_mount_of_what_holds_it() {
    if let Some(dir) = std::env::var_os(CHILD) {
        return inside(Path::new(&dir));
    }
    let root = rustix::process::geteuid().is_root();
    assert!(root || !stockade_testkit::in_ci(), "CI runs as root");
    if !root {
        eprintln!("skipping: making a bind mount needs root");
        return;
    }
    for who in users() {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let t = tempfile::Builder::new()
            .prefix("fs-secrets-")
            .tempdir_in(base)
            .unwrap();
        let d = fs::canonicalize(t.path()).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        for sub in ["home/.ssh/sub", "ws", "home2", "keys", "subkeys"] {
            fs::create_dir_all(d.join(sub)).unwrap();
        }
        fs::write(d.join("home/.ssh/id"), "TOPSECRET\n").unwrap();
        fs::write(d.join("home/.ssh/sub/k2"), "TOPSECRET\n").unwrap();
        fs::write(d.join("home/notes.txt"), "plain\n").unwrap();
        fs::write(d.join("keyfile"), "").unwrap();
        who.own(&d);
        let mut inner = who.command(std::env::current_exe().unwrap());
        inner.args(["--exact", TEST, "--nocapture", "--test-threads=1"]);
        let script = "mount --bind \"$1/home\" \"$1/home2\" && \
                      mount --bind \"$1/home/.ssh\" \"$1/keys\" && \
                      mount --bind \"$1/home/.ssh/sub\" \"$1/subkeys\" && \
                      mount --bind \"$1/home/.ssh/id\" \"$1/keyfile\" && \
                      shift && exec \"$@\"";
        let out = Command::new("unshare")
            .args(["-m", "--", "/bin/sh", "-c", script, "sh"])
            .arg(&d)
            .arg(inner.get_program())
            .args(inner.get_args())
            .env(CHILD, &d)
            .output()
            .unwrap();
        let said = format!(
            "{who:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        // The re-run really ran this test (a filter that matched nothing
        // would pass too).
        assert!(said.contains("1 passed"), "{said}");
    }
}

/// In the namespace: every other name of the secret is refused as the
/// secret, the plain file beside it reads through the same mount.
fn inside(d: &Path) {
    let ssh: PathBuf = d.join("home/.ssh");
    let fence = SandboxedFs::with_temp_roots(vec![]);
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let policy = ExecutionPolicy::new(mode, d.join("ws")).with_files(FilePolicy {
            deny_read: vec![ssh.clone()],
            ..FilePolicy::default()
        });
        assert_eq!(
            fence
                .read_under(&d.join("home2/notes.txt"), &policy)
                .unwrap(),
            b"plain\n"
        );
        for name in [
            "home2/.ssh/id",
            "keys/id",
            "keyfile",
            "subkeys/k2",
            "home2/.ssh/sub/k2",
        ] {
            let err = fence.read_under(&d.join(name), &policy).unwrap_err();
            assert_eq!(err.deny_read_path(), Some(ssh.as_path()), "{name}: {err}");
        }
        for dir in ["keys", "subkeys", "home2/.ssh"] {
            let err = fence.list_under(&d.join(dir), &policy).unwrap_err();
            assert_eq!(err.deny_read_path(), Some(ssh.as_path()), "{dir}: {err}");
        }
    }
}
