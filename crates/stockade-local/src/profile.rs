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

/// How a runner is told about one directory or file: by the descriptor the
/// spawner places at `fd` in the child (the held object, which a confined
/// run cannot move), or by path (probes of a private, freshly made
/// directory; tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Where the command sees it.
    pub path: PathBuf,
    pub fd: Option<i32>,
}

/// A path inside a writable root that bwrap binds read-only (or, for a
/// directory that is only pinned, onto itself writable so it cannot be
/// renamed away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedBind {
    pub path: PathBuf,
    pub fd: i32,
    pub read_only: bool,
}

/// A deny-read path as a runner hides it: bwrap mounts an empty,
/// mode-0000 stand-in over it (a tmpfs for a directory, an empty file read
/// from `empty_fd` for a file); `landlock-run` grants read everywhere but
/// there (`--deny-read`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyMask {
    pub path: PathBuf,
    pub is_dir: bool,
    /// bwrap, files only: a descriptor that reads as empty.
    pub empty_fd: Option<i32>,
    /// It lies beneath a writable root, so bwrap mounts it after the roots
    /// (and Landlock cannot take read back there: a named gap).
    pub in_root: bool,
}

/// What the command may reach over the network, as a runner is told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProfileNet {
    /// The host's network (`allow`).
    #[default]
    Host,
    /// Nothing (`deny`): bwrap gives a private network namespace with only
    /// its own loopback; landlock-run refuses every network socket.
    Deny,
    /// Only the proxy (`allow-listed`): bwrap's private namespace plus a
    /// relay from its loopback `port` to the proxy, handed each connection
    /// over the relay end the child finds at descriptor `relay_fd`;
    /// landlock-run allows TCP connections to `port` alone.
    Proxy { port: u16, relay_fd: Option<i32> },
}

/// Everything a Linux runner profile needs besides the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxProfile {
    /// The writable roots, least specific first (empty under read-only).
    pub roots: Vec<Grant>,
    /// bwrap only; Landlock cannot carve these out (a named gap there).
    pub protected: Vec<ProtectedBind>,
    /// `/proc` entries (present on this host) bound read-only over the
    /// sandbox's own procfs: bwrap leaves `/proc/sys` writable to root.
    pub proc_read_only: Vec<PathBuf>,
    /// `/proc` entries hidden behind `/dev/null` (files) or an empty
    /// read-only tmpfs (directories), as container runtimes mask them.
    pub proc_masked: Vec<(PathBuf, bool)>,
    /// The runner status descriptor (see `stockade_core::status`).
    pub status_fd: Option<i32>,
    /// Unix sockets the command may still connect to.
    pub allow_sockets: Vec<PathBuf>,
    /// bwrap: the launcher run inside to close inherited descriptors and
    /// scope sockets and signals.
    pub fd_closer: Option<PathBuf>,
    /// Variables the launcher sets for the command only (`--setenv`): the
    /// loader's, which the runners themselves start without.
    pub command_env: Vec<(OsString, OsString)>,
    /// Landlock only: this host cannot run the launcher's supervisor, so it
    /// is asked for plain Landlock (`--no-supervise`) and the result names
    /// the metadata and protected-paths gaps.
    pub unsupervised: bool,
    /// Deny-read paths that exist, in the policy's order.
    pub deny_read: Vec<DenyMask>,
    pub net: ProfileNet,
    /// bwrap running the command itself (`Confined::direct`): the
    /// launcher's seccomp programs at these descriptors
    /// (`--add-seccomp-fd`), bwrap's own status on `status_fd`
    /// (`--json-status-fd`), and no closer.
    pub direct_filters: Option<Vec<i32>>,
    /// bwrap running the command itself under `allow-listed`: it names its
    /// child on the status channel and waits for a byte on this descriptor
    /// (`--block-fd`) before the command's exec, while the spawner makes
    /// the proxy's listener in the child's network namespace
    /// (`stockade_core::DirectRelay`).
    pub direct_block_fd: Option<i32>,
    /// `--allow-listen` ports under `deny` and `allow-listed`: landlock-run
    /// lets a listener use them on loopback only; bwrap's namespace is
    /// private, so they mean nothing there (the caller names the gap).
    pub allow_listen: Vec<u16>,
}

/// The `/proc` entries bwrap must cover read-only in a confining mode.
pub const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
    // Pressure-stall triggers are global state a write creates.
    "/proc/pressure",
];

/// The `/proc` entries container runtimes mask; `true` for directories.
pub const PROC_MASKED: &[(&str, bool)] = &[
    ("/proc/kcore", false),
    ("/proc/keys", false),
    ("/proc/key-users", false),
    ("/proc/timer_list", false),
    ("/proc/timer_stats", false),
    ("/proc/sched_debug", false),
    ("/proc/latency_stats", false),
    ("/proc/kallsyms", false),
    ("/proc/acpi", true),
    ("/proc/scsi", true),
];

fn push_all(out: &mut Vec<OsString>, items: &[&str]) {
    out.extend(items.iter().map(OsString::from));
}

fn push_fd(out: &mut Vec<OsString>, flag: &str, fd: i32, dest: &Path) {
    out.push(flag.into());
    out.push(fd.to_string().into());
    out.push(dest.as_os_str().to_owned());
}

fn push_path(out: &mut Vec<OsString>, flag: &str, src: &Path, dest: Option<&Path>) {
    out.push(flag.into());
    out.push(src.as_os_str().to_owned());
    if let Some(d) = dest {
        out.push(d.as_os_str().to_owned());
    }
}

/// The bubblewrap arguments (without the runner itself) that confine `argv`.
///
/// `--unshare-pid` is there for FILE safety, not process hiding: in the
/// host pid namespace `/proc/<pid>/root` of any same-uid process outside is
/// a writable view of the host filesystem; it also keeps every process
/// outside out of reach of `kill`. `--cap-drop ALL` matters when the caller
/// is root: bwrap otherwise leaves root its capabilities (remount, mknod,
/// module loading). `--new-session` stops TIOCSTI into the caller's
/// terminal; `--dev /dev` exposes no host block devices.
///
/// Writable roots are bound from held descriptors (`--bind-fd`), so what is
/// writable is the directory the session was given even if its path was
/// swapped since. A bind makes each root (and the pinned `.git`) a mount
/// point, which cannot be renamed or removed from inside.
///
/// `fd_closer` is `landlock-run`, run as `--close-fds -- ARGV` inside the
/// sandbox: bwrap passes inherited descriptors through, and a write through
/// an fd opened outside is not stopped by any mount. It also scopes Unix
/// sockets, and reports on the status descriptor right before it execs the
/// command, which is how a bwrap setup failure is told from the command's
/// own output.
pub fn bwrap_args(p: &LinuxProfile, argv: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::with_capacity(32 + argv.len());
    push_all(
        &mut out,
        &["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"],
    );
    for entry in &p.proc_read_only {
        push_path(&mut out, "--ro-bind", entry, Some(entry));
    }
    for (entry, is_dir) in &p.proc_masked {
        if *is_dir {
            push_path(&mut out, "--tmpfs", entry, None);
            push_path(&mut out, "--remount-ro", entry, None);
        } else {
            push_path(&mut out, "--ro-bind", Path::new("/dev/null"), Some(entry));
        }
    }
    // Masks outside the roots first, so a root inside a denied directory
    // (a workspace under a denied home) is bound over its mask.
    for mask in p.deny_read.iter().filter(|m| !m.in_root) {
        push_mask(&mut out, mask);
    }
    for root in &p.roots {
        match root.fd {
            Some(fd) => push_fd(&mut out, "--bind-fd", fd, &root.path),
            None => push_path(&mut out, "--bind", &root.path, Some(&root.path)),
        }
    }
    // After the roots, so a protected path inside one is bound last and wins.
    for prot in &p.protected {
        let flag = if prot.read_only {
            "--ro-bind-fd"
        } else {
            "--bind-fd"
        };
        push_fd(&mut out, flag, prot.fd, &prot.path);
    }
    for mask in p.deny_read.iter().filter(|m| m.in_root) {
        push_mask(&mut out, mask);
    }
    if p.net != ProfileNet::Host {
        out.push("--unshare-net".into());
    }
    push_all(
        &mut out,
        &[
            "--unshare-pid",
            // SysV IPC objects outside (shared memory another process
            // maps) are not files: a private namespace keeps them out.
            "--unshare-ipc",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
        ],
    );
    if let Some(filters) = &p.direct_filters {
        // What the closer would attach, attached by bwrap right before its
        // execvp; the command's own variables set by bwrap too.
        for fd in filters {
            out.push("--add-seccomp-fd".into());
            out.push(fd.to_string().into());
        }
        if let Some(fd) = p.status_fd {
            out.push("--json-status-fd".into());
            out.push(fd.to_string().into());
        }
        if let Some(fd) = p.direct_block_fd {
            out.push("--block-fd".into());
            out.push(fd.to_string().into());
        }
        for (name, value) in &p.command_env {
            out.push("--setenv".into());
            out.push(name.clone());
            out.push(value.clone());
        }
        out.push("--".into());
        out.extend(argv.iter().cloned());
        return out;
    }
    out.push("--".into());
    if let Some(closer) = &p.fd_closer {
        out.push(closer.as_os_str().to_owned());
        out.push("--close-fds".into());
        push_launcher_common(&mut out, p);
        // The namespace is private: the closer refuses the families that
        // are not namespaced (AF_VSOCK reaches the hypervisor host) and
        // netlink beyond route and sock_diag.
        if p.net != ProfileNet::Host {
            out.push("--net-private".into());
        }
        if let ProfileNet::Proxy {
            port,
            relay_fd: Some(fd),
        } = &p.net
        {
            out.push("--net-bridge".into());
            out.push(format!("{port}:{fd}").into());
        }
        out.push("--".into());
    }
    out.extend(argv.iter().cloned());
    out
}

/// An empty stand-in nobody can read, owned by the sandbox's user: the
/// command (whose capabilities are dropped) gets `EACCES`, which tools
/// print as `Permission denied`.
fn push_mask(out: &mut Vec<OsString>, mask: &DenyMask) {
    push_all(out, &["--perms", "0000"]);
    match (mask.is_dir, mask.empty_fd) {
        (false, Some(fd)) => push_fd(out, "--ro-bind-data", fd, &mask.path),
        // A file without a descriptor cannot happen (prepare gives every
        // file one); an empty tmpfs hides it all the same.
        _ => push_path(out, "--tmpfs", &mask.path, None),
    }
}

fn push_launcher_common(out: &mut Vec<OsString>, p: &LinuxProfile) {
    if let Some(fd) = p.status_fd {
        out.push("--status-fd".into());
        out.push(fd.to_string().into());
    }
    for s in &p.allow_sockets {
        push_path(out, "--allow-socket", s, None);
    }
    for (name, value) in &p.command_env {
        let mut pair = name.clone();
        pair.push("=");
        pair.push(value);
        out.push("--setenv".into());
        out.push(pair);
    }
}

/// The dynamic loader's variables: a runner must never start with them (a
/// confined run may have written the library they name).
pub fn is_loader_var(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b"LD_")
}

/// What the runner starts without: the loader's usual names and every
/// `LD_*` in `env`; and the values of `env` the command gets back.
pub fn loader_env(
    env: impl Iterator<Item = (OsString, OsString)>,
) -> (Vec<OsString>, Vec<(OsString, OsString)>) {
    let mut remove: Vec<OsString> = ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"]
        .iter()
        .map(OsString::from)
        .collect();
    let mut keep = Vec::new();
    for (k, v) in env.filter(|(k, _)| is_loader_var(k)) {
        if !remove.contains(&k) {
            remove.push(k.clone());
        }
        keep.push((k, v));
    }
    (remove, keep)
}

/// The `landlock-run` arguments (without the launcher itself).
pub fn landlock_args(p: &LinuxProfile, argv: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::with_capacity(12 + argv.len());
    push_path(&mut out, "--ro", Path::new("/"), None);
    push_path(&mut out, "--rw", Path::new("/dev/null"), None);
    for root in &p.roots {
        match root.fd {
            Some(fd) => {
                out.push("--rw-fd".into());
                out.push(fd.to_string().into());
            }
            None => push_path(&mut out, "--rw", &root.path, None),
        }
    }
    // Read-only inside the roots, by the supervisor; a pinned directory is
    // pinned there as an ancestor of what it protects.
    for prot in p.protected.iter().filter(|p| p.read_only) {
        out.push("--protect-fd".into());
        out.push(prot.fd.to_string().into());
    }
    for mask in &p.deny_read {
        push_path(&mut out, "--deny-read", &mask.path, None);
    }
    match &p.net {
        ProfileNet::Host => {}
        ProfileNet::Deny => out.push("--net-deny".into()),
        ProfileNet::Proxy { port, .. } => {
            out.push("--net-port".into());
            out.push(port.to_string().into());
        }
    }
    if p.net != ProfileNet::Host {
        for port in &p.allow_listen {
            out.push("--allow-listen".into());
            out.push(port.to_string().into());
        }
    }
    if p.unsupervised {
        out.push("--no-supervise".into());
    }
    // bwrap's --die-with-parent's twin: a caller killed outright (kill -9 of
    // `stockade acp`, say) leaves no launcher, and so no command, running.
    out.push("--die-with-parent".into());
    push_launcher_common(&mut out, p);
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

    fn ww_profile() -> LinuxProfile {
        LinuxProfile {
            roots: vec![
                Grant {
                    path: "/tmp".into(),
                    fd: Some(4),
                },
                Grant {
                    path: "/work/ws".into(),
                    fd: Some(5),
                },
            ],
            protected: vec![
                ProtectedBind {
                    path: "/work/ws/.git".into(),
                    fd: 6,
                    read_only: false,
                },
                ProtectedBind {
                    path: "/work/ws/.git/hooks".into(),
                    fd: 7,
                    read_only: true,
                },
            ],
            proc_read_only: vec!["/proc/sys".into()],
            proc_masked: vec![("/proc/kcore".into(), false), ("/proc/acpi".into(), true)],
            status_fd: Some(3),
            allow_sockets: vec!["/run/a.sock".into()],
            fd_closer: Some("/opt/landlock-run".into()),
            command_env: vec![("LD_LIBRARY_PATH".into(), "/work/ws/lib".into())],
            unsupervised: false,
            deny_read: vec![],
            net: ProfileNet::Host,
            allow_listen: Vec::new(),
            direct_filters: None,
            direct_block_fd: None,
        }
    }

    #[test]
    fn the_loader_variables_are_named_and_kept_for_the_command() {
        let env = vec![
            (OsString::from("PATH"), OsString::from("/bin")),
            (OsString::from("LD_LIBRARY_PATH"), OsString::from("/w/lib")),
            (OsString::from("LD_DEBUG"), OsString::from("all")),
        ];
        let (remove, keep) = loader_env(env.into_iter());
        for name in ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_DEBUG"] {
            assert!(remove.iter().any(|r| r == name), "{name}");
        }
        assert!(!remove.iter().any(|r| r == "PATH"));
        assert_eq!(keep.len(), 2);
    }

    #[test]
    fn bwrap_read_only_profile() {
        let p = LinuxProfile {
            status_fd: Some(3),
            fd_closer: Some("/opt/landlock-run".into()),
            ..Default::default()
        };
        assert_eq!(
            strs(&bwrap_args(&p, &cmd())),
            [
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-pid",
                "--unshare-ipc",
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--",
                "/opt/landlock-run",
                "--close-fds",
                "--status-fd",
                "3",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn bwrap_workspace_write_profile_binds_held_descriptors() {
        assert_eq!(
            strs(&bwrap_args(&ww_profile(), &cmd())),
            [
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--ro-bind",
                "/proc/sys",
                "/proc/sys",
                "--ro-bind",
                "/dev/null",
                "/proc/kcore",
                "--tmpfs",
                "/proc/acpi",
                "--remount-ro",
                "/proc/acpi",
                "--bind-fd",
                "4",
                "/tmp",
                "--bind-fd",
                "5",
                "/work/ws",
                "--bind-fd",
                "6",
                "/work/ws/.git",
                "--ro-bind-fd",
                "7",
                "/work/ws/.git/hooks",
                "--unshare-pid",
                "--unshare-ipc",
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--",
                "/opt/landlock-run",
                "--close-fds",
                "--status-fd",
                "3",
                "--allow-socket",
                "/run/a.sock",
                "--setenv",
                "LD_LIBRARY_PATH=/work/ws/lib",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn landlock_profiles() {
        let ro = LinuxProfile {
            status_fd: Some(3),
            ..Default::default()
        };
        assert_eq!(
            strs(&landlock_args(&ro, &cmd())),
            [
                "--ro",
                "/",
                "--rw",
                "/dev/null",
                "--die-with-parent",
                "--status-fd",
                "3",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
        assert_eq!(
            strs(&landlock_args(&ww_profile(), &cmd())),
            [
                "--ro",
                "/",
                "--rw",
                "/dev/null",
                "--rw-fd",
                "4",
                "--rw-fd",
                "5",
                "--protect-fd",
                "7",
                "--die-with-parent",
                "--status-fd",
                "3",
                "--allow-socket",
                "/run/a.sock",
                "--setenv",
                "LD_LIBRARY_PATH=/work/ws/lib",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
        // A host without the supervisor asks for plain Landlock, explicitly.
        let plain = LinuxProfile {
            unsupervised: true,
            ..ww_profile()
        };
        assert!(strs(&landlock_args(&plain, &cmd())).contains(&"--no-supervise"));
        assert!(!strs(&landlock_args(&ww_profile(), &cmd())).contains(&"--no-supervise"));
        // By path (probes of a private directory).
        let by_path = LinuxProfile {
            roots: vec![Grant {
                path: "/p/ws".into(),
                fd: None,
            }],
            ..Default::default()
        };
        assert!(
            strs(&landlock_args(&by_path, &cmd()))
                .windows(2)
                .any(|w| w == ["--rw", "/p/ws"])
        );
        assert!(
            strs(&bwrap_args(&by_path, &cmd()))
                .windows(3)
                .any(|w| w == ["--bind", "/p/ws", "/p/ws"])
        );
    }

    #[test]
    fn deny_read_masks_come_before_the_roots_outside_them_and_after_inside() {
        let p = LinuxProfile {
            deny_read: vec![
                DenyMask {
                    path: "/home/u".into(),
                    is_dir: true,
                    empty_fd: None,
                    in_root: false,
                },
                DenyMask {
                    path: "/work/ws/.env".into(),
                    is_dir: false,
                    empty_fd: Some(9),
                    in_root: true,
                },
            ],
            ..ww_profile()
        };
        let args = bwrap_args(&p, &cmd());
        let a = strs(&args);
        let at = |w: &[&str]| a.windows(w.len()).position(|x| x == w).unwrap();
        let home = at(&["--perms", "0000", "--tmpfs", "/home/u"]);
        let env = at(&["--perms", "0000", "--ro-bind-data", "9", "/work/ws/.env"]);
        let ws = at(&["--bind-fd", "5", "/work/ws"]);
        let hooks = at(&["--ro-bind-fd", "7", "/work/ws/.git/hooks"]);
        // A workspace inside a denied home is bound over the home's mask; a
        // secret inside the workspace is masked over the workspace's bind.
        assert!(home < ws && ws < env && hooks < env, "{a:?}");
        let l = landlock_args(&p, &cmd());
        let l = strs(&l);
        assert!(l.windows(2).any(|w| w == ["--deny-read", "/home/u"]));
        assert!(l.windows(2).any(|w| w == ["--deny-read", "/work/ws/.env"]));
        // The landlock grant of `/` stays; the launcher splits it.
        assert_eq!(&l[..2], ["--ro", "/"]);
    }

    #[test]
    fn network_modes_reach_both_runners() {
        let deny = LinuxProfile {
            net: ProfileNet::Deny,
            ..ww_profile()
        };
        let b = bwrap_args(&deny, &cmd());
        assert!(strs(&b).contains(&"--unshare-net"));
        assert!(strs(&b).contains(&"--net-private"));
        assert!(!strs(&b).contains(&"--net-bridge"));
        let l = landlock_args(&deny, &cmd());
        assert!(strs(&l).contains(&"--net-deny"));
        let listening = LinuxProfile {
            allow_listen: vec![8080],
            ..deny.clone()
        };
        let l = landlock_args(&listening, &cmd());
        assert!(strs(&l).windows(2).any(|w| w == ["--allow-listen", "8080"]));
        let l = landlock_args(
            &LinuxProfile {
                net: ProfileNet::Host,
                ..listening
            },
            &cmd(),
        );
        assert!(!strs(&l).contains(&"--allow-listen"));
        let proxy = LinuxProfile {
            net: ProfileNet::Proxy {
                port: 4321,
                relay_fd: Some(7),
            },
            ..ww_profile()
        };
        let b = bwrap_args(&proxy, &cmd());
        let b = strs(&b);
        assert!(b.contains(&"--unshare-net"));
        // The bridge is the closer's, before the command's `--`.
        let at = b.iter().position(|a| *a == "--net-bridge").unwrap();
        assert_eq!(b[at + 1], "4321:7");
        assert!(at < b.iter().rposition(|a| *a == "--").unwrap());
        let l = landlock_args(&proxy, &cmd());
        assert!(strs(&l).windows(2).any(|w| w == ["--net-port", "4321"]));
        assert!(b.contains(&"--net-private"));
        let host = ww_profile();
        assert!(!strs(&bwrap_args(&host, &cmd())).contains(&"--unshare-net"));
        assert!(!strs(&bwrap_args(&host, &cmd())).contains(&"--net-private"));
        let l = landlock_args(&host, &cmd());
        assert!(!strs(&l).iter().any(|a| a.starts_with("--net")));
    }

    #[test]
    fn bwrap_running_the_command_itself_loads_the_filters_and_reports_in_json() {
        let direct = LinuxProfile {
            net: ProfileNet::Deny,
            direct_filters: Some(vec![8, 9, 10]),
            ..ww_profile()
        };
        let b = bwrap_args(&direct, &cmd());
        let b = strs(&b);
        // No launcher inside: the command follows bwrap's `--`.
        assert!(!b.contains(&"/opt/landlock-run") && !b.contains(&"--close-fds"));
        let sep = b.iter().position(|a| *a == "--").unwrap();
        assert_eq!(&b[sep + 1..], ["bash", "-c", "echo hi"]);
        assert_eq!(b.iter().filter(|a| **a == "--").count(), 1);
        let options = &b[..sep];
        let loaded: Vec<&str> = options
            .windows(2)
            .filter(|w| w[0] == "--add-seccomp-fd")
            .map(|w| w[1])
            .collect();
        assert_eq!(loaded, ["8", "9", "10"]);
        assert!(options.windows(2).any(|w| w == ["--json-status-fd", "3"]));
        assert!(!options.contains(&"--status-fd"));
        // The loader's variables reach the command through bwrap.
        assert!(
            options
                .windows(3)
                .any(|w| w == ["--setenv", "LD_LIBRARY_PATH", "/work/ws/lib"])
        );
        // The mounts, namespaces and capabilities are the closer's run's.
        let closer = bwrap_args(
            &LinuxProfile {
                direct_filters: None,
                ..direct.clone()
            },
            &cmd(),
        );
        let closer = strs(&closer);
        let closer_sep = closer.iter().position(|a| *a == "--").unwrap();
        let bwrap_part = |args: &[&str]| -> Vec<String> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < args.len() {
                match args[i] {
                    "--add-seccomp-fd" | "--json-status-fd" => i += 2,
                    "--setenv" => i += 3,
                    a => {
                        out.push(a.to_string());
                        i += 1;
                    }
                }
            }
            out
        };
        assert_eq!(bwrap_part(options), bwrap_part(&closer[..closer_sep]));
        assert!(options.contains(&"--unshare-net") && options.contains(&"--unshare-pid"));
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
        let p = LinuxProfile {
            roots: vec![Grant {
                path: PathBuf::from(ws),
                fd: None,
            }],
            ..Default::default()
        };
        let argv = vec![OsString::from(OsStr::from_bytes(b"\xfe\x01"))];
        for args in [bwrap_args(&p, &argv), landlock_args(&p, &argv)] {
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
