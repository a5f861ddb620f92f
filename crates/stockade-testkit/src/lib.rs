//! What every real-runner suite needs and must get right the same way.
#![forbid(unsafe_code)]
#![allow(clippy::expect_used)] // test support: fail loudly

use std::path::{Path, PathBuf};

pub mod http;
#[cfg(target_os = "linux")]
pub mod netns;
#[cfg(target_os = "linux")]
pub mod procs;
pub mod prompt;
pub mod scripted;
#[cfg(unix)]
pub mod users;

/// CI runs the real-runner suites strictly: a missing runner is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `true` when `available`; otherwise a failure under CI and a reported
/// skip elsewhere.
pub fn require(what: &str, available: bool) -> bool {
    assert!(
        available || !in_ci(),
        "{what} is missing: real-runner tests must run in CI"
    );
    if !available {
        eprintln!("skipping: {what} is missing");
    }
    available
}

fn is_under(p: &Path, root: &Path) -> bool {
    let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    p.starts_with(root)
}

/// Let every user traverse and list `dir` (the unprivileged legs run as
/// another user) by adding bits, never by setting a mode: the scratch base
/// can be `/var/tmp`, whose sticky, world-writable mode other users rely on.
#[cfg(unix)]
pub fn open_to_all(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(m) = std::fs::metadata(dir) {
        let mode = m.permissions().mode() | 0o755;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    }
}

/// A directory for scratch workspaces that lies outside every writable root
/// of workspace-write (`/tmp`, `$TMPDIR`), so a write that lands outside the
/// workspace proves a broken sandbox, not a lucky grant. `target_tmp` is the
/// suite's `CARGO_TARGET_TMPDIR`, used unless a target dir under /tmp puts it
/// inside a temp root; then `/var/tmp`.
pub fn scratch_base(target_tmp: &Path) -> PathBuf {
    let tmpdir = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|t| t.is_absolute());
    [target_tmp.to_path_buf(), PathBuf::from("/var/tmp")]
        .into_iter()
        .find(|b| {
            b.is_dir()
                && !is_under(b, Path::new("/tmp"))
                && !tmpdir.as_ref().is_some_and(|t| is_under(b, t))
        })
        .unwrap_or_else(|| {
            panic!(
                "no scratch base outside the temp roots ({} and /var/tmp are under one)",
                target_tmp.display()
            )
        })
}

/// The `landlock-run` this workspace built, next to the test binary's
/// `deps/` directory.
pub fn built_launcher() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("landlock-run");
    p.is_file().then_some(p)
}

/// Whether bwrap can be started at all (its probe decides whether it works).
pub fn have_bwrap() -> bool {
    std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok()
}

/// What a confined run did, as the runner's status channel tells it.
#[cfg(unix)]
pub struct ConfinedOutput {
    pub output: std::process::Output,
    pub status: stockade_core::status::RunnerStatus,
}

/// Spawn exactly `c.argv` in `cwd` the way an executor must: each held
/// descriptor at its number, the status channel's write end at its number
/// (and nowhere else), and read what the runner reported once it is done.
#[cfg(unix)]
pub fn run_confined(c: &stockade_core::Confined, cwd: &Path) -> ConfinedOutput {
    use command_fds::{CommandFdExt, FdMapping};
    use std::io::Read;
    use std::os::fd::OwnedFd;

    let mut cmd = std::process::Command::new(&c.argv[0]);
    cmd.args(&c.argv[1..]).current_dir(cwd);
    let mut maps: Vec<FdMapping> = c
        .pass_fds
        .iter()
        .map(|p| FdMapping {
            parent_fd: OwnedFd::from(p.file.try_clone().expect("dup a held descriptor")),
            child_fd: p.child_fd,
        })
        .collect();
    let mut reader = None;
    if let Some(s) = c.status {
        let (r, w) = std::io::pipe().expect("a status pipe");
        maps.push(FdMapping {
            parent_fd: OwnedFd::from(w),
            child_fd: s.child_fd,
        });
        reader = Some(r);
    }
    cmd.fd_mappings(maps).expect("no descriptor collisions");
    let output = cmd.output().expect("spawn the runner");
    // The mapping holds our copy of the write end until the command goes.
    drop(cmd);
    let mut bytes = Vec::new();
    if let Some(mut r) = reader {
        r.read_to_end(&mut bytes).expect("read the status channel");
    }
    ConfinedOutput {
        output,
        status: stockade_core::status::RunnerStatus::parse(&bytes),
    }
}
