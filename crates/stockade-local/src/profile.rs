//! The exact argv each backend runs, and how to read its output. Pure: the
//! host facts (runner paths, `$TMPDIR`) come in as arguments.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use stockade_core::{ConfiningMode, FatalLine, RunnerFailureRule, SandboxPolicy};

/// The exact informational line `landlock-run` prints before exec on an ABI
/// below 3. It is never fatal evidence, whatever the child's exit code.
pub const LANDLOCK_PARTIAL_NOTICE: &str = "landlock-run: partial enforcement (older Landlock ABI)";
/// `landlock-run` reserves this exit code for its own failures.
pub const LANDLOCK_FAILURE_EXIT: i32 = 125;

pub const BWRAP_DENIAL: &str = "Read-only file system";
pub const LANDLOCK_DENIAL: &str = "Permission denied";

/// The directories a workspace-write run may write besides `/dev/null`: the
/// workspace root, `/tmp`, and `$TMPDIR` when it is set and a directory.
/// Returned least specific first, so a nested root is mounted last and wins.
pub fn writable_roots(policy: &SandboxPolicy, tmpdir: Option<&Path>) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if policy.mode != ConfiningMode::WorkspaceWrite {
        return roots;
    }
    roots.push(PathBuf::from("/tmp"));
    if let Some(t) = tmpdir {
        // A `$TMPDIR` of `/` would silently turn workspace-write into full
        // access; the ambient environment must not widen the promise.
        if t != Path::new("/") && !roots.iter().any(|r| r == t) {
            roots.push(t.to_path_buf());
        }
    }
    if !roots.iter().any(|r| r == policy.workspace_root()) {
        roots.push(policy.workspace_root().to_path_buf());
    }
    roots
}

/// Everything a wrap lets the command write: `/dev/null` and, in
/// workspace-write, the writable roots.
pub fn granted(policy: &SandboxPolicy, tmpdir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/dev/null")];
    out.extend(writable_roots(policy, tmpdir));
    out
}

fn push_pair(out: &mut Vec<OsString>, flag: &str, a: &Path, b: Option<&Path>) {
    out.push(flag.into());
    out.push(a.as_os_str().to_owned());
    if let Some(b) = b {
        out.push(b.as_os_str().to_owned());
    }
}

/// The bubblewrap arguments (without the runner itself) that confine `argv`.
///
/// `--unshare-pid` is there for FILE safety, not process hiding (which no mode
/// claims): in the host pid namespace `/proc/<pid>/root` of any same-uid
/// process outside is a writable view of the host filesystem, so a confined
/// child could write anywhere through it. `--cap-drop ALL` matters when the
/// caller is root: bwrap otherwise leaves root its capabilities (remount,
/// mknod, module loading). `--new-session` stops TIOCSTI into the caller's
/// terminal; `--dev /dev` exposes no host block devices.
///
/// `fd_closer` is `landlock-run`, run as `--close-fds -- ARGV` inside the
/// sandbox: bwrap passes inherited descriptors through, and a write through
/// an fd opened outside (say, on a log file the agent's parent left without
/// O_CLOEXEC) is not stopped by any mount.
pub fn bwrap_args(
    policy: &SandboxPolicy,
    tmpdir: Option<&Path>,
    fd_closer: Option<&Path>,
    argv: &[OsString],
) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::with_capacity(16 + argv.len());
    for a in ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"] {
        out.push(a.into());
    }
    for root in writable_roots(policy, tmpdir) {
        push_pair(&mut out, "--bind", &root, Some(&root));
    }
    for a in [
        "--unshare-pid",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--",
    ] {
        out.push(a.into());
    }
    if let Some(closer) = fd_closer {
        out.push(closer.as_os_str().to_owned());
        out.push("--close-fds".into());
        out.push("--".into());
    }
    out.extend(argv.iter().cloned());
    out
}

/// The `landlock-run` arguments (without the launcher itself).
pub fn landlock_args(
    policy: &SandboxPolicy,
    tmpdir: Option<&Path>,
    argv: &[OsString],
) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::with_capacity(8 + argv.len());
    push_pair(&mut out, "--ro", Path::new("/"), None);
    push_pair(&mut out, "--rw", Path::new("/dev/null"), None);
    for root in writable_roots(policy, tmpdir) {
        push_pair(&mut out, "--rw", &root, None);
    }
    out.push("--".into());
    out.extend(argv.iter().cloned());
    out
}

pub fn with_runner(runner: &OsStr, args: Vec<OsString>) -> Vec<OsString> {
    let mut argv = Vec::with_capacity(args.len() + 1);
    argv.push(runner.to_owned());
    argv.extend(args);
    argv
}

/// bwrap reserves no exit status for its own failures, so its rule is
/// signature-only.
pub fn bwrap_rules() -> Vec<RunnerFailureRule> {
    vec![RunnerFailureRule {
        exit_codes: None,
        fatal_lines: vec![FatalLine::Prefix("bwrap: ".into())],
        informational_lines: vec![],
    }]
}

/// A started child may itself exit 125, so the status alone is not launcher
/// evidence: it takes 125 AND a `landlock-run: ` line that is not the notice.
pub fn landlock_rules() -> Vec<RunnerFailureRule> {
    vec![RunnerFailureRule {
        exit_codes: Some(vec![LANDLOCK_FAILURE_EXIT]),
        fatal_lines: vec![FatalLine::Prefix("landlock-run: ".into())],
        informational_lines: vec![LANDLOCK_PARTIAL_NOTICE.into()],
    }]
}

pub fn signature_rules(signatures: &[String]) -> Vec<RunnerFailureRule> {
    if signatures.is_empty() {
        return vec![];
    }
    vec![RunnerFailureRule {
        exit_codes: None,
        fatal_lines: signatures
            .iter()
            .cloned()
            .map(FatalLine::Signature)
            .collect(),
        informational_lines: vec![],
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn strs(v: &[OsString]) -> Vec<&str> {
        v.iter().map(|s| s.to_str().unwrap()).collect()
    }

    fn cmd() -> Vec<OsString> {
        vec!["bash".into(), "-c".into(), "echo hi".into()]
    }

    #[test]
    fn bwrap_read_only_profile() {
        let p = SandboxPolicy::new(ConfiningMode::ReadOnly, "/work/ws");
        assert_eq!(
            strs(&bwrap_args(
                &p,
                Some(Path::new("/var/tmp/me")),
                None,
                &cmd()
            )),
            [
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-pid",
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn bwrap_workspace_write_profile() {
        let p = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/work/ws");
        assert_eq!(
            strs(&bwrap_args(
                &p,
                Some(Path::new("/var/tmp/me")),
                None,
                &cmd()
            )),
            [
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--bind",
                "/tmp",
                "/tmp",
                "--bind",
                "/var/tmp/me",
                "/var/tmp/me",
                "--bind",
                "/work/ws",
                "/work/ws",
                "--unshare-pid",
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
        // No $TMPDIR, or one equal to /tmp: bound once.
        let args = bwrap_args(&p, None, None, &cmd());
        assert_eq!(args.iter().filter(|a| *a == "/tmp").count(), 2);
        let args = bwrap_args(&p, Some(Path::new("/tmp")), None, &cmd());
        assert_eq!(args.iter().filter(|a| *a == "/tmp").count(), 2);
    }

    #[test]
    fn landlock_profiles() {
        let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, "/work/ws");
        assert_eq!(
            strs(&landlock_args(&ro, Some(Path::new("/var/tmp/me")), &cmd())),
            [
                "--ro",
                "/",
                "--rw",
                "/dev/null",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/work/ws");
        assert_eq!(
            strs(&landlock_args(&ww, Some(Path::new("/var/tmp/me")), &cmd())),
            [
                "--ro",
                "/",
                "--rw",
                "/dev/null",
                "--rw",
                "/tmp",
                "--rw",
                "/var/tmp/me",
                "--rw",
                "/work/ws",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn a_root_tmpdir_never_widens_workspace_write() {
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/work/ws");
        let roots = writable_roots(&ww, Some(Path::new("/")));
        assert_eq!(roots, [PathBuf::from("/tmp"), PathBuf::from("/work/ws")]);
    }

    #[test]
    fn non_utf8_paths_and_args_pass_through_byte_for_byte() {
        let ws = OsStr::from_bytes(b"/work/a b\xff");
        let p = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws);
        let argv = vec![OsString::from(OsStr::from_bytes(b"\xfe\x01"))];
        for args in [
            bwrap_args(&p, None, None, &argv),
            landlock_args(&p, None, &argv),
        ] {
            assert!(args.iter().any(|a| a.as_bytes() == ws.as_bytes()));
            assert_eq!(args.last().unwrap().as_bytes(), b"\xfe\x01");
        }
    }

    #[test]
    fn rules_read_runner_failures_not_denials() {
        let bw = bwrap_rules();
        assert!(
            RunnerFailureRule::first_fatal_line(
                &bw,
                Some(1),
                b"bwrap: Can't find source path /x: No such file or directory\n"
            )
            .is_some()
        );
        assert_eq!(
            RunnerFailureRule::first_fatal_line(
                &bw,
                Some(1),
                b"bash: /etc/x: Read-only file system\n"
            ),
            None
        );
        let ll = landlock_rules();
        assert!(
            RunnerFailureRule::first_fatal_line(&ll, Some(125), b"landlock-run: bad\n").is_some()
        );
        assert_eq!(
            RunnerFailureRule::first_fatal_line(&ll, Some(1), b"landlock-run: bad\n"),
            None
        );
        for code in [1, 2, 125] {
            let notice = format!("{LANDLOCK_PARTIAL_NOTICE}\n");
            assert_eq!(
                RunnerFailureRule::first_fatal_line(&ll, Some(code), notice.as_bytes()),
                None
            );
        }
        assert!(signature_rules(&[]).is_empty());
        let sig = signature_rules(&["fake-runner: fatal".into()]);
        assert!(
            RunnerFailureRule::first_fatal_line(&sig, Some(0), b"x fake-runner: fatal y").is_some()
        );
    }
}
