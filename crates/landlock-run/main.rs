//! `landlock-run`: exec ARGV confined by a Landlock ruleset (filesystem,
//! Unix sockets, signals) plus, where Landlock cannot confine Unix sockets, a
//! seccomp filter. Grammar, exit codes, the status channel, the isolation
//! facts and the exact lines printed: README.md next to this file.
// `unsafe` is denied everywhere but the few calls below that no safe wrapper
// offers (TIOCNOTTY, close_range, taking an inherited descriptor), each with
// a SAFETY note.
#![deny(unsafe_code)]

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("landlock-run: Landlock is only available on Linux");
    std::process::exit(125);
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main()
}

#[cfg(target_os = "linux")]
mod supervise;

#[cfg(target_os = "linux")]
mod syscalls;

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{OsStr, OsString};
    use std::fmt::Display;
    use std::fs::{self, DirBuilder, OpenOptions};
    use std::io::{self, Read};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio, exit};
    use std::sync::{Mutex, PoisonError};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
        NetPort, PathBeneath, RestrictSelf, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope,
    };
    use rustix::fs::{FileType, Mode, OFlags, fcntl_getfl, fstat};
    use rustix::io::{Errno, FdFlags, fcntl_setfd};
    use rustix::process::{geteuid, getpid, getsid, getuid, setsid};
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    };
    use stockade_core::status::{RunnerStatus, STARTED};

    const FAILURE: i32 = 125;
    const USAGE: &str = "usage: landlock-run [--ro PATH | --rw PATH | --ro-fd N | --rw-fd N | --protect PATH | --protect-fd N | --allow-socket PATH | --setenv NAME=VALUE | --deny-read PATH | --net-port P | --allow-listen P]... [--status-fd N] [--no-supervise] [--net-deny] [--net-connect-supervised] [--die-with-parent] [--ctty] -- ARGV...";
    const PARTIAL: &str = "landlock-run: partial enforcement (older Landlock ABI)";
    /// The newest set of filesystem rights we grant with `--ro`/`--rw`. V9's
    /// ResolveUnix is not among them on purpose: it is handled on its own
    /// (see `restrict`) and granted only by `--allow-socket`, so `--ro /` does
    /// not open every pathname socket again. Best-effort compatibility (the
    /// crate default) lets an older kernel handle the subset it knows.
    const ABI_REQ: ABI = ABI::V5;

    /// The status channel (`--status-fd`), once taken. Every failure and the
    /// start are reported on it; it is close-on-exec, so the command never
    /// holds it, and a supervisor lets go of its copy once the command runs.
    static STATUS: Mutex<Option<OwnedFd>> = Mutex::new(None);

    fn release_status() {
        STATUS.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// Every launcher failure is exactly one line and 125; callers tell it from
    /// a child's own 125 by that line, so a message must never span lines. The
    /// same message goes to the status channel, where a caller need not guess.
    fn fail_args(msg: std::fmt::Arguments<'_>) -> ! {
        fail(msg)
    }

    fn fail(msg: impl Display) -> ! {
        let line = msg.to_string().replace(['\n', '\r'], " ");
        eprintln!("landlock-run: {line}");
        report(&RunnerStatus::failure_record(&line));
        exit(FAILURE)
    }

    fn usage(why: impl Display) -> ! {
        fail(format_args!("{USAGE} ({why})"))
    }

    /// Best effort by nature: a caller that closed its end just gets nothing
    /// (EPIPE; std ignores SIGPIPE in this process). Records are far below
    /// PIPE_BUF, so a record is never interleaved.
    fn report(record: &str) {
        let status = STATUS.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(fd) = status.as_ref() else { return };
        let mut rest = record.as_bytes();
        while !rest.is_empty() {
            match rustix::io::write(fd, rest) {
                Ok(0) => return,
                Ok(n) => rest = rest.get(n..).unwrap_or_default(),
                Err(Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    enum Grant {
        Path(PathBuf),
        /// A directory or file the caller resolved once and passed open: the
        /// rule is keyed to that open file, never to a name looked up again.
        Fd(RawFd),
    }

    #[derive(Default)]
    struct Opts {
        /// (what, writable)
        grants: Vec<(Grant, bool)>,
        sockets: Vec<PathBuf>,
        status_fd: Option<RawFd>,
        /// `--setenv NAME=VALUE`: set for the command only. The caller
        /// starts this launcher without the loader's variables (LD_PRELOAD,
        /// LD_LIBRARY_PATH, ...), which could name a library a confined run
        /// wrote, and hands them back here for the command.
        env: Vec<(OsString, OsString)>,
        /// `--protect`: read-only inside the writable roots (supervised).
        protect: Vec<Grant>,
        /// `--no-supervise`: plain Landlock, metadata and protected paths
        /// ungoverned (benchmarks, and callers that report those gaps).
        no_supervise: bool,
        /// `--die-with-parent` (run mode): see `die_with_parent`.
        die_with_parent: bool,
        /// `--ctty` (run and close-fds modes): the command leads a session
        /// of its own whose controlling terminal is its stdin, a
        /// pseudo-terminal the caller allocated for this run (see
        /// `take_terminal`).
        ctty: bool,
        /// `--deny-read`: absolute paths a `--ro PATH` grant above them
        /// must not reach (see `read_except`).
        deny_read: Vec<PathBuf>,
        /// `--net-deny` / `--net-port P` (run mode).
        net: Net,
        /// `--net-bridge P:PATH` (close-fds mode): a relay from the
        /// sandbox's own loopback port P to the Unix socket PATH.
        bridge: Option<(u16, PathBuf)>,
        /// `--allow-listen P` (run mode): under `--net-deny` / `--net-port`,
        /// the ports a listener may use, on loopback only (supervised).
        listen: Vec<u16>,
        /// `--net-connect-supervised` (run mode): the supervisor performs
        /// every TCP connect itself (only to the proxy's port) even where
        /// Landlock's TCP rights could judge it; chosen automatically below
        /// ABI 4. For tests on newer kernels.
        connect_supervised: bool,
    }

    /// What the command may reach over the network.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    enum Net {
        /// Unchanged.
        #[default]
        Host,
        /// No socket of any network family (AF_UNIX and AF_NETLINK stay).
        Deny,
        /// TCP stream sockets only, connecting only to this port (the
        /// proxy's, on loopback); no UDP, raw or packet sockets, no bind.
        Port(u16),
        /// `--net-private` (close-fds mode): bwrap's private network
        /// namespace, whose only interface is its own loopback. The IP
        /// families stay (nothing outside is reachable through them, and a
        /// listener there is unreachable from outside); every family that is
        /// not namespaced (AF_VSOCK reaches the hypervisor host) is refused.
        Private,
    }

    enum Cmd {
        Run(Opts, Vec<OsString>),
        /// `--close-fds [--status-fd N] [--allow-socket PATH]... -- ARGV`: for
        /// a runner that confines the filesystem by other means (bwrap, which
        /// also passes inherited fds through): descriptor hygiene plus the
        /// socket and signal isolation, no filesystem rules.
        CloseFds(Opts, Vec<OsString>),
        Isolation(Vec<PathBuf>),
        /// `--syscalls`: the syscall table, one call a line.
        Syscalls,
        Probe,
        ProbeChild(PathBuf),
    }

    /// Run mode's reason for refusing an option of the other modes; also how
    /// `options` knows it parses run mode.
    const RUN_MODE: &str = "--net-bridge is for --close-fds mode only";

    /// Every option that takes a value, in every mode.
    const VALUED: [&[u8]; 13] = [
        b"--ro",
        b"--rw",
        b"--ro-fd",
        b"--rw-fd",
        b"--protect",
        b"--protect-fd",
        b"--allow-socket",
        b"--status-fd",
        b"--setenv",
        b"--deny-read",
        b"--net-port",
        b"--net-bridge",
        b"--allow-listen",
    ];

    /// Arguments stay `OsString` end to end: a lossy conversion would silently
    /// grant or run something other than what the caller named.
    fn parse(args: &[OsString]) -> Result<Cmd, String> {
        let first = args.first().map(|a| a.as_bytes());
        match first {
            Some(b"--probe") if args.len() == 1 => Ok(Cmd::Probe),
            Some(b"--syscalls") if args.len() == 1 => Ok(Cmd::Syscalls),
            Some(b"--probe-child") if args.len() == 2 => {
                Ok(Cmd::ProbeChild(PathBuf::from(&args[1])))
            }
            Some(b"--isolation") => {
                let only = "--isolation takes only --allow-socket PATH";
                match options(&args[1..], &[b"--allow-socket"], only)? {
                    (opts, None) => Ok(Cmd::Isolation(opts.sockets)),
                    (_, Some(_)) => Err(only.into()),
                }
            }
            Some(b"--close-fds") => {
                let only = "--close-fds takes only --status-fd N, --allow-socket PATH, --setenv NAME=VALUE, --net-bridge P:PATH, --net-private, --ctty and -- ARGV";
                let allowed: [&[u8]; 4] = [
                    b"--status-fd",
                    b"--allow-socket",
                    b"--setenv",
                    b"--net-bridge",
                ];
                let (opts, argv) = options(&args[1..], &allowed, only)?;
                Ok(Cmd::CloseFds(opts, argv.ok_or("missing -- before ARGV")?))
            }
            _ => {
                let run_mode: Vec<&[u8]> = VALUED
                    .iter()
                    .copied()
                    .filter(|o| *o != b"--net-bridge")
                    .collect();
                let (opts, argv) = options(args, &run_mode, RUN_MODE)?;
                Ok(Cmd::Run(opts, argv.ok_or("missing -- before ARGV")?))
            }
        }
    }

    /// `OPTION VALUE` pairs up to `--`, then a non-empty ARGV (returned when
    /// there was a `--`). `allowed` is what this mode accepts, `only` the
    /// reason given for any other option of ours.
    fn options(
        args: &[OsString],
        allowed: &[&[u8]],
        only: &str,
    ) -> Result<(Opts, Option<Vec<OsString>>), String> {
        let mut opts = Opts::default();
        let mut fds = Vec::new();
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let name = arg.as_bytes();
            match name {
                b"--" if i + 1 < args.len() => return Ok((opts, Some(args[i + 1..].to_vec()))),
                // The flags without a value, in run mode only.
                b"--no-supervise" if only == RUN_MODE => {
                    opts.no_supervise = true;
                    i += 1;
                    continue;
                }
                b"--die-with-parent" if only == RUN_MODE => {
                    opts.die_with_parent = true;
                    i += 1;
                    continue;
                }
                b"--ctty" if only == RUN_MODE || allowed.contains(&&b"--net-bridge"[..]) => {
                    opts.ctty = true;
                    i += 1;
                    continue;
                }
                b"--net-private" if only != RUN_MODE && allowed.contains(&&b"--net-bridge"[..]) => {
                    opts.net = Net::Private;
                    i += 1;
                    continue;
                }
                b"--net-connect-supervised" if only == RUN_MODE => {
                    opts.connect_supervised = true;
                    i += 1;
                    continue;
                }
                b"--net-deny" if only == RUN_MODE => {
                    if opts.net != Net::Host {
                        return Err("give one of --net-deny and --net-port, once".into());
                    }
                    opts.net = Net::Deny;
                    i += 1;
                    continue;
                }
                b"--" => return Err("empty ARGV after --".into()),
                b"--probe" | b"--probe-child" => {
                    return Err("--probe takes no other arguments".into());
                }
                b"--close-fds" | b"--isolation" => {
                    return Err(format!("{} must be the first argument", arg.display()));
                }
                n if VALUED.contains(&n) && !allowed.contains(&n) => return Err(only.into()),
                n if VALUED.contains(&n) => {}
                n if n.starts_with(b"-") => return Err(format!("unknown option {arg:?}")),
                _ => return Err("missing -- before ARGV".into()),
            }
            let shown = arg.display();
            // `--ro --` is a forgotten PATH, not a grant on a directory named "--".
            let value = match args.get(i + 1) {
                Some(v) if v.as_bytes() != b"--" => v,
                _ if name.ends_with(b"-fd") => return Err(format!("{shown} needs a descriptor N")),
                _ => return Err(format!("{shown} needs a PATH")),
            };
            match name {
                b"--ro" | b"--rw" => opts
                    .grants
                    .push((Grant::Path(PathBuf::from(value)), name == b"--rw")),
                b"--protect" => opts.protect.push(Grant::Path(PathBuf::from(value))),
                b"--net-port" => {
                    if opts.net != Net::Host {
                        return Err("give one of --net-deny and --net-port, once".into());
                    }
                    opts.net = Net::Port(port_number(value)?);
                }
                b"--allow-listen" => opts.listen.push(port_number(value)?),
                b"--net-bridge" => {
                    let bytes = value.as_bytes();
                    let colon = bytes.iter().position(|b| *b == b':');
                    let (port, path) = match colon {
                        Some(c) => (
                            &bytes[..c],
                            PathBuf::from(OsStr::from_bytes(&bytes[c + 1..])),
                        ),
                        None => return Err(format!("--net-bridge needs P:PATH, not {value:?}")),
                    };
                    if !path.is_absolute() || opts.bridge.is_some() {
                        return Err(format!(
                            "--net-bridge needs P:PATH with an absolute PATH, once, not {value:?}"
                        ));
                    }
                    opts.bridge = Some((port_number(OsStr::from_bytes(port))?, path));
                }
                b"--deny-read" => {
                    let p = PathBuf::from(value);
                    // Relative, or with `..`, it would be judged against
                    // whatever the name means at the time: say what is meant.
                    if !p.is_absolute()
                        || p.parent().is_none()
                        || p.components().any(|c| c == std::path::Component::ParentDir)
                    {
                        return Err(format!(
                            "--deny-read needs an absolute path below / without `..`, not {value:?}"
                        ));
                    }
                    opts.deny_read.push(p);
                }
                b"--allow-socket" => opts.sockets.push(PathBuf::from(value)),
                b"--setenv" => {
                    let bytes = value.as_bytes();
                    match bytes.iter().position(|b| *b == b'=') {
                        Some(eq) if eq > 0 => opts.env.push((
                            OsString::from(OsStr::from_bytes(&bytes[..eq])),
                            OsString::from(OsStr::from_bytes(&bytes[eq + 1..])),
                        )),
                        _ => return Err(format!("--setenv needs NAME=VALUE, not {value:?}")),
                    }
                }
                _ => {
                    let n = fd_number(&shown, value)?;
                    // Each descriptor gets exactly one owner (see take_inherited_fd).
                    if fds.contains(&n) {
                        return Err(format!("descriptor {n} is given twice"));
                    }
                    fds.push(n);
                    match name {
                        b"--status-fd" if opts.status_fd.is_some() => {
                            return Err("--status-fd is given twice".into());
                        }
                        b"--status-fd" => opts.status_fd = Some(n),
                        b"--protect-fd" => opts.protect.push(Grant::Fd(n)),
                        _ => opts.grants.push((Grant::Fd(n), name == b"--rw-fd")),
                    }
                }
            }
            i += 2;
        }
        Ok((opts, None))
    }

    /// A TCP port: a plain decimal from 1 to 65535.
    fn port_number(value: &OsStr) -> Result<u16, String> {
        std::str::from_utf8(value.as_bytes())
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("a port is a number from 1 to 65535, not {value:?}"))
    }

    /// A plain decimal of 3 or more: 0-2 are stdio, which std owns.
    fn fd_number(option: &impl Display, value: &OsString) -> Result<RawFd, String> {
        let digits = value.as_bytes();
        let n = std::str::from_utf8(digits)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<RawFd>().ok());
        match n {
            Some(n) if n >= 3 => Ok(n),
            _ => Err(format!(
                "{option} needs a descriptor number >= 3, not {value:?}"
            )),
        }
    }

    /// The `--status-fd` value, found before the full parse so that a grammar
    /// error is reported on the channel too. Pairs are skipped the way
    /// `options` reads them, so both agree on what is a value.
    fn status_fd_arg(args: &[OsString]) -> Option<&OsString> {
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_bytes() {
                b"--" => return None,
                b"--status-fd" => return it.next(),
                n if VALUED.contains(&n) || n == b"--probe-child" => {
                    it.next();
                }
                _ => {}
            }
        }
        None
    }

    /// Takes ownership of descriptor `n`, passed in by the caller, and flags
    /// it close-on-exec at once so the command can never inherit it.
    fn take_inherited_fd(option: &str, n: RawFd) -> Result<OwnedFd, String> {
        #[allow(unsafe_code)]
        // SAFETY: F_GETFD only reads the descriptor's flags; it touches no
        // memory and merely fails with EBADF for a number that is not open.
        let open = unsafe { libc::fcntl(n, libc::F_GETFD) } >= 0;
        if !open {
            return Err(format!("{option} {n}: descriptor {n} is not open"));
        }
        #[allow(unsafe_code)]
        // SAFETY: `n` is open (checked just above; this process is single
        // threaded) and is an inherited descriptor nothing else owns: std owns
        // only 0-2 and `n` >= 3 (fd_number), and every take happens before
        // this process opens anything itself (main, then the start of run),
        // so `n` cannot be one of ours. parse() rejects a number given twice,
        // so this OwnedFd is its only owner and the only one to close it.
        let fd = unsafe { OwnedFd::from_raw_fd(n) };
        fcntl_setfd(&fd, FdFlags::CLOEXEC)
            .map_err(|e| format!("{option} {n}: cannot set close-on-exec: {e}"))?;
        Ok(fd)
    }

    /// The status channel: the caller's write end of a pipe.
    fn take_status_fd(value: &OsString) -> OwnedFd {
        let option = "--status-fd";
        let n = fd_number(&option, value).unwrap_or_else(|why| usage(why));
        let fd = take_inherited_fd(option, n).unwrap_or_else(|why| usage(why));
        let writable = fcntl_getfl(&fd).is_ok_and(|flags| {
            let mode = flags & OFlags::ACCMODE;
            !flags.contains(OFlags::PATH) && (mode == OFlags::WRONLY || mode == OFlags::RDWR)
        });
        if !writable {
            usage(format_args!(
                "{option} {n}: descriptor {n} is not open for writing"
            ));
        }
        fd
    }

    /// `result.or_fail(what)`: the launcher's only error path, `what: error`.
    trait OrFail<T> {
        fn or_fail(self, what: impl Display) -> T;
    }
    impl<T, E: Display> OrFail<T> for Result<T, E> {
        fn or_fail(self, what: impl Display) -> T {
            self.unwrap_or_else(|e| fail(format_args!("{what}: {e}")))
        }
    }

    /// Opened (O_PATH) before any privilege is dropped, and the rule is keyed
    /// to this fd, so what is granted is what we stat'ed, not whatever the path
    /// names later.
    fn open_path(path: &Path, what: &str) -> OwnedFd {
        let shown = path.display();
        match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR) => {
                fail(format_args!("{what} does not exist: {shown}"))
            }
            Err(e) => fail(format_args!(
                "cannot open {what} {shown}: {}",
                io::Error::from(e)
            )),
        }
    }

    fn grant_rule(fd: OwnedFd, write: bool, shown: impl Display) -> PathBeneath<OwnedFd> {
        let access = grant_access(&fd, write, shown);
        PathBeneath::new(fd, access)
    }

    fn grant_access(fd: &OwnedFd, write: bool, shown: impl Display) -> BitFlags<AccessFs> {
        let stat = fstat(fd).or_fail(format_args!("cannot stat {shown}"));
        let mut access = match write {
            true => AccessFs::from_all(ABI_REQ),
            false => AccessFs::from_read(ABI_REQ),
        };
        // The kernel rejects directory-only rights on a file rule with EINVAL.
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            access &= AccessFs::from_file(ABI_REQ);
        }
        access
    }

    /// The `--deny-read` objects, held open for the supervisor, and the
    /// directories above them (by identity, names followed as the kernel
    /// would). Landlock only adds rights, so a writable grant above a
    /// denied path grants reading it; a supervised run grants such a
    /// directory everything but read_file and sends every read-only open
    /// to the supervisor, which refuses the denied objects by identity and
    /// performs the rest (`Fence::read_open`). Entries of the directories
    /// on the way down keep read through the `--ro` grant's split
    /// (`read_except`), so only what the run creates there is read through
    /// the supervisor; executing such a new file needs read_file, which
    /// nothing grants it (the caller documents it).
    struct DeniedBeneath {
        objects: Vec<OwnedFd>,
        above: std::collections::HashSet<(u64, u64)>,
    }

    impl DeniedBeneath {
        fn open(paths: &[PathBuf]) -> DeniedBeneath {
            let mut out = DeniedBeneath {
                objects: Vec::new(),
                above: std::collections::HashSet::new(),
            };
            for path in paths {
                let fd = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
                {
                    Ok(fd) => fd,
                    // Nothing there to read; nothing to refuse. A path this
                    // user cannot reach, the command (same user) cannot
                    // reach either.
                    Err(Errno::NOENT | Errno::NOTDIR | Errno::ACCESS) => continue,
                    Err(e) => fail(format_args!(
                        "cannot open deny-read path {}: {}",
                        path.display(),
                        io::Error::from(e)
                    )),
                };
                if let Ok(st) = fstat(&fd) {
                    out.above.insert((st.st_dev, st.st_ino));
                }
                for dir in path.ancestors().skip(1) {
                    if let Ok(st) = rustix::fs::stat(dir) {
                        out.above.insert((st.st_dev, st.st_ino));
                    }
                }
                out.objects.push(fd);
            }
            out
        }

        /// Whether `fd` is a directory a denied object lies beneath (or is
        /// one itself).
        fn above_one(&self, fd: &OwnedFd) -> bool {
            fstat(fd).is_ok_and(|st| {
                FileType::from_raw_mode(st.st_mode) == FileType::Directory
                    && self.above.contains(&(st.st_dev, st.st_ino))
            })
        }
    }

    /// Read beneath `top` except the `denied` paths below it. Landlock only
    /// adds rights, so instead of one rule on `top` every directory on the
    /// way from `top` to a denied path gets listing only (names, so `ls ~`
    /// works, which also leaves the names inside a denied directory
    /// listable: the caller names that gap), and every other entry of those
    /// directories gets read. An entry created beside a denied path after
    /// this runs is covered by no rule, so it is unreadable for this run.
    /// Symlinks get no rule: what they lead to is judged where it is.
    ///
    /// Rules attach to objects, not names: an entry that *is* a denied
    /// object or one of the directories on the way (a hard link to the
    /// denied file beside it, a bind mount of `$HOME` next to it) would
    /// grant read on that object under every name, so it gets no rule.
    /// The caller passes the other names it found (mounts further away,
    /// links elsewhere) as `--deny-read` too; this is the last check.
    fn read_except(top: &Path, denied: &[PathBuf], rules: &mut Vec<PathBeneath<OwnedFd>>) {
        let denied: Vec<&Path> = denied
            .iter()
            .filter(|d| d.starts_with(top))
            .map(PathBuf::as_path)
            .collect();
        // A denied `top` leaves nothing of it to grant.
        if denied.contains(&top) {
            return;
        }
        let mut split: std::collections::BTreeSet<&Path> = std::collections::BTreeSet::new();
        for d in &denied {
            for a in d.ancestors().skip(1) {
                if !a.starts_with(top) {
                    break;
                }
                split.insert(a);
            }
        }
        // What no entry's rule may be: the denied objects that exist and
        // the directories on the way to them.
        let held: Vec<(u64, u64)> = denied
            .iter()
            .copied()
            .chain(split.iter().copied())
            .filter_map(|p| rustix::fs::lstat(p).ok())
            .map(|st| (st.st_dev, st.st_ino))
            .collect();
        for dir in &split {
            let shown = dir.display();
            let fd = open_path(dir, "read grant");
            rules.push(PathBeneath::new(fd, AccessFs::ReadDir));
            let entries = match fs::read_dir(dir) {
                Ok(e) => e,
                // Not listable by this user: nothing beneath it was readable
                // through a listing anyway; its entries get no rule.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => continue,
                Err(e) => fail(format_args!(
                    "cannot list {shown} to grant read beside a denied path: {e}"
                )),
            };
            for entry in entries {
                let entry = entry.or_fail(format_args!("cannot list {shown}"));
                let child = dir.join(entry.file_name());
                if split.contains(child.as_path()) || denied.contains(&child.as_path()) {
                    continue;
                }
                let fd = match rustix::fs::open(
                    &child,
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) => fd,
                    // Gone since the listing: nothing to grant.
                    Err(Errno::NOENT) => continue,
                    Err(e) => fail(format_args!(
                        "cannot open {} to grant read: {}",
                        child.display(),
                        io::Error::from(e)
                    )),
                };
                let stat = fstat(&fd).or_fail(format_args!("cannot stat {}", child.display()));
                if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
                    || held.contains(&(stat.st_dev, stat.st_ino))
                {
                    continue;
                }
                rules.push(grant_rule(fd, false, child.display()));
            }
        }
    }

    fn open_grant(path: &Path, write: bool) -> PathBeneath<OwnedFd> {
        let fd = open_path(path, "grant path");
        grant_rule(fd, write, format_args!("grant path {}", path.display()))
    }

    /// How the command is kept from host daemons (Unix sockets) and from other
    /// processes (signals) on this kernel. One decision shared by the run
    /// modes and `--isolation`, so what is reported is what is done.
    #[derive(Clone)]
    struct Plan {
        abi: ABI,
        /// Landlock scopes (ABI 6): abstract sockets and signals stay inside.
        scoped: bool,
        /// Landlock resolve_unix (ABI 9): pathname sockets only where
        /// `--allow-socket` grants them.
        resolve_unix: bool,
        /// The seccomp filter: no AF_UNIX socket can be created at all.
        seccomp: bool,
        /// The metadata and protected-path supervisor can run here.
        supervised: bool,
        /// What the command may reach over the network (run mode).
        net: Net,
        /// `--allow-listen` ports (only with `net` Deny or Port).
        listen: Vec<u16>,
        /// listen(2) goes to the supervisor (a supervised run under Deny
        /// or Port), so listen and accept need not be refused outright.
        listen_supervised: bool,
        /// connect(2) goes to the supervisor, and Landlock gets no TCP
        /// rights (see `Opts::connect_supervised`).
        connect_supervised: bool,
    }

    /// The Landlock ABI the crate uses on this kernel (Unsupported without
    /// Landlock). A `RestrictSelf` with no flags and without no_new_privs only
    /// reads the version: apply() skips every other syscall.
    fn kernel_abi() -> ABI {
        let status = RestrictSelf::default()
            .no_new_privs(false)
            .apply()
            .or_fail("cannot query the Landlock ABI");
        status.landlock.into()
    }

    fn plan(abi: ABI, allow_sockets: bool) -> Result<Plan, String> {
        let resolve_unix = abi >= ABI::V9;
        // Without resolve_unix the filter cannot tell one path from another,
        // so any --allow-socket leaves every pathname socket open (the caller
        // reports that gap from --isolation).
        let seccomp = !resolve_unix && !allow_sockets;
        if seccomp && !filter::SUPPORTED {
            return Err(format!(
                "cannot confine Unix sockets: Landlock ABI {} has no resolve_unix and there is no seccomp filter for {}",
                abi_number(abi),
                std::env::consts::ARCH
            ));
        }
        Ok(Plan {
            abi,
            scoped: abi >= ABI::V6,
            resolve_unix,
            seccomp,
            supervised: crate::supervise::available().is_ok(),
            net: Net::Host,
            listen: Vec::new(),
            listen_supervised: false,
            connect_supervised: false,
        })
    }

    fn abi_number(abi: ABI) -> u32 {
        abi as u32
    }

    impl Plan {
        /// The `--isolation` lines, exactly.
        fn facts(&self) -> [String; 6] {
            let pick =
                |cases: &[(bool, &'static str)]| cases.iter().find(|c| c.0).map_or("open", |c| c.1);
            [
                format!("abi {}", abi_number(self.abi)),
                format!("signals {}", pick(&[(self.scoped, "scoped")])),
                format!(
                    "abstract-sockets {}",
                    pick(&[(self.scoped, "scoped"), (self.seccomp, "seccomp")])
                ),
                format!(
                    "pathname-sockets {}",
                    pick(&[(self.resolve_unix, "landlock"), (self.seccomp, "seccomp")])
                ),
                format!("metadata {}", pick(&[(self.supervised, "supervised")])),
                format!(
                    "protected-paths {}",
                    pick(&[(self.supervised, "supervised")])
                ),
            ]
        }
    }

    /// Builds and enforces the ruleset: the filesystem rules when `fs_rules`
    /// is given (run mode), none in close-fds mode; in both the socket and
    /// signal isolation of `plan`. Fails unless it is really enforced.
    fn restrict(
        plan: &Plan,
        fs_rules: Option<Vec<PathBeneath<OwnedFd>>>,
        sockets: Vec<OwnedFd>,
    ) -> ABI {
        let what = "cannot create the Landlock ruleset";
        let mut ruleset = Ruleset::default();
        if fs_rules.is_some() {
            ruleset = ruleset
                .handle_access(AccessFs::from_all(ABI_REQ))
                .or_fail(what);
        }
        // What the plan promises (and --isolation reported) must be enforced,
        // never dropped silently by best effort.
        ruleset = ruleset.set_compatibility(CompatLevel::HardRequirement);
        if plan.resolve_unix {
            ruleset = ruleset.handle_access(AccessFs::ResolveUnix).or_fail(what);
        }
        if plan.scoped {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket | Scope::Signal)
                .or_fail(what);
        }
        // TCP by port where Landlock has it (ABI 4); the seccomp filter
        // (`isolate`) refuses every other family and type either way, and
        // below ABI 4 the caller names the gap for `--net-port`.
        let net_rules = matches!(plan.net, Net::Deny | Net::Port(_))
            && plan.abi >= ABI::V4
            && !plan.connect_supervised;
        if net_rules {
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .or_fail(what);
        }
        let mut ruleset = ruleset
            .set_compatibility(CompatLevel::BestEffort)
            .create()
            .or_fail(what);
        for rule in fs_rules.into_iter().flatten() {
            ruleset = ruleset.add_rule(rule).or_fail("cannot add a Landlock rule");
        }
        if let (true, Net::Port(port)) = (net_rules, plan.net) {
            ruleset = ruleset
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .or_fail("cannot add the Landlock proxy-port rule");
        }
        // Bind by port; the supervisor then listens only on a loopback
        // address (Landlock cannot tell addresses apart).
        for port in plan.listen.iter().filter(|_| net_rules) {
            ruleset = ruleset
                .add_rule(NetPort::new(*port, AccessNet::BindTcp))
                .or_fail("cannot add the Landlock listen-port rule");
        }
        // Below ABI 9 the socket paths were only checked to exist: nothing
        // handles resolve_unix, so a rule for it would mean nothing.
        if plan.resolve_unix {
            for fd in sockets {
                let rule = PathBeneath::new(fd, AccessFs::ResolveUnix);
                ruleset = ruleset
                    .add_rule(rule)
                    .or_fail("cannot add a Landlock socket rule");
            }
        }
        let status = ruleset.restrict_self().or_fail("cannot restrict");
        // Best effort silently enforces nothing on a kernel without Landlock;
        // that must be a failure here, never a run with a false promise.
        if status.ruleset == RulesetStatus::NotEnforced {
            fail("Landlock is not enforced (not built into this kernel, or disabled)");
        }
        if !status.no_new_privs {
            fail("no_new_privs is not set");
        }
        match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi,
            _ => fail("Landlock is not available"),
        }
    }

    /// The socket and signal isolation that follows the ruleset (or stands
    /// alone in close-fds mode below ABI 6), after the calls the syscall
    /// table refuses in every mode (io_uring, the mount family, ...).
    fn isolate(plan: &Plan) {
        seccompiler::apply_filter(&crate::syscalls::always_program())
            .or_fail("cannot install the seccomp syscall filter");
        if plan.seccomp {
            filter::install().or_fail("cannot install the seccomp socket filter");
        }
        if plan.net != Net::Host {
            filter::install_net(plan).or_fail("cannot install the seccomp network filter");
        }
    }

    /// Below Landlock ABI 9 the only way to keep the command from pathname
    /// sockets outside (and, below ABI 6, abstract ones) is to let it create
    /// no AF_UNIX socket at all. seccomp sees numbers, not paths, hence all or
    /// nothing.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    mod filter {
        use std::collections::BTreeMap;

        use seccompiler::{
            BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
            SeccompFilter, SeccompRule, TargetArch,
        };

        pub const SUPPORTED: bool = true;

        // The filter's first instructions compare seccomp_data.arch with this
        // architecture and KILL the process on a mismatch (seccompiler's
        // build_arch_validation_sequence). That is what stops the 32-bit
        // entry points, whose numbers differ and which have socketcall(2):
        // `int 0x80` from an x86_64 process reports AUDIT_ARCH_I386, and an
        // AArch32 task on arm64 AUDIT_ARCH_ARM; both die on their first
        // syscall instead of reaching a socket. (Tested: the socketcall case
        // in crates/stockade-cli/tests/landlock_run.rs.)
        #[cfg(target_arch = "x86_64")]
        const ARCH: TargetArch = TargetArch::x86_64;
        #[cfg(target_arch = "aarch64")]
        const ARCH: TargetArch = TargetArch::aarch64;

        // x32 syscalls pass the arch check (they report AUDIT_ARCH_X86_64)
        // but carry __X32_SYSCALL_BIT in the number, so each rule is repeated
        // for that number too.
        #[cfg(target_arch = "x86_64")]
        const NUMBERINGS: &[i64] = &[0, 0x4000_0000];
        #[cfg(target_arch = "aarch64")]
        const NUMBERINGS: &[i64] = &[0];

        /// The only socketpair types that cannot reach outside. A DGRAM pair
        /// (SOCK_RAW is DGRAM for AF_UNIX) can still sendto() or connect() to
        /// any pathname or abstract address, so it is refused like socket();
        /// a STREAM or SEQPACKET pair is connected for good (EISCONN).
        const PAIR_TYPES_KEPT: [u64; 2] = [libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64];
        /// The kernel's SOCK_TYPE_MASK: the type bits below the flags
        /// (SOCK_CLOEXEC, SOCK_NONBLOCK).
        const SOCK_TYPE_MASK: u64 = 0xf;
        /// linux/socket.h's MSG_FASTOPEN.
        const MSG_FASTOPEN: u64 = 0x2000_0000;

        fn err(e: impl std::fmt::Display) -> String {
            e.to_string()
        }

        /// The network families (`syscalls::families`): under `deny` only
        /// AF_UNIX (governed by its own rules) and AF_NETLINK; under
        /// allow-listed TCP stream sockets of AF_INET/AF_INET6 too (Landlock
        /// governs where they connect) and no other type or protocol of
        /// those; in bwrap's private namespace every IP socket. Every other
        /// family is refused (packet, vsock to the hypervisor host,
        /// bluetooth, ...), and netlink only speaks route and sock_diag.
        /// Outside a private namespace nothing may listen or accept: a
        /// listen() without bind() picks a port on every address, which a
        /// peer elsewhere could reach.
        pub fn install_net(plan: &super::Plan) -> Result<(), String> {
            use crate::syscalls::families;
            let arg = |index, op, value| {
                SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(err)
            };
            // With `--allow-listen` a TCP socket is needed under deny too
            // (Landlock, or the supervisor below ABI 4, refuses every
            // connect there). A supervised run sends listen to the
            // supervisor, so only an unsupervised one refuses listen and
            // accept here.
            let listen = !plan.listen.is_empty();
            let no_listen = !plan.listen_supervised;
            let (kept, tcp_only, no_listen) = match plan.net {
                super::Net::Host => return Ok(()),
                super::Net::Deny if listen => (families::TCP, true, no_listen),
                super::Net::Deny => (families::DENY, false, no_listen),
                super::Net::Port(_) => (families::TCP, true, no_listen),
                super::Net::Private => (families::PRIVATE, false, false),
            };
            let mut socket_rules = BTreeMap::new();
            for &base in NUMBERINGS {
                let mut chain = Vec::new();
                // Any family outside `kept`.
                let mut others = Vec::new();
                for family in kept {
                    others.push(arg(0, SeccompCmpOp::Ne, *family as u64)?);
                }
                chain.push(SeccompRule::new(others).map_err(err)?);
                // Netlink of another protocol.
                let mut netlink = vec![arg(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?];
                for protocol in families::NETLINK_PROTOCOLS {
                    netlink.push(arg(2, SeccompCmpOp::Ne, *protocol)?);
                }
                chain.push(SeccompRule::new(netlink).map_err(err)?);
                if tcp_only {
                    for family in [libc::AF_INET, libc::AF_INET6] {
                        // Not a stream socket (UDP, raw, ...).
                        for kind in (0..=SOCK_TYPE_MASK).filter(|t| *t != libc::SOCK_STREAM as u64)
                        {
                            chain.push(
                                SeccompRule::new(vec![
                                    arg(0, SeccompCmpOp::Eq, family as u64)?,
                                    arg(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?,
                                ])
                                .map_err(err)?,
                            );
                        }
                        // A stream socket of another protocol (SCTP, MPTCP)
                        // would escape Landlock's TCP rules.
                        chain.push(
                            SeccompRule::new(vec![
                                arg(0, SeccompCmpOp::Eq, family as u64)?,
                                arg(2, SeccompCmpOp::Ne, 0)?,
                                arg(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
                            ])
                            .map_err(err)?,
                        );
                    }
                }
                socket_rules.insert(base | libc::SYS_socket, chain);
                if no_listen {
                    for nr in [libc::SYS_listen, libc::SYS_accept, libc::SYS_accept4] {
                        socket_rules.insert(base | nr, vec![]);
                    }
                }
                if plan.connect_supervised {
                    // TCP fast open connects from a send (the address in
                    // sendto's or sendmsg's arguments), around the
                    // supervised connect. Without MSG_FASTOPEN a TCP
                    // socket ignores a send's address. The flags are a
                    // register, so this is decided here.
                    let fastopen = |flags_arg| -> Result<Vec<SeccompRule>, String> {
                        Ok(vec![
                            SeccompRule::new(vec![arg(
                                flags_arg,
                                SeccompCmpOp::MaskedEq(MSG_FASTOPEN),
                                MSG_FASTOPEN,
                            )?])
                            .map_err(err)?,
                        ])
                    };
                    socket_rules.insert(base | libc::SYS_sendto, fastopen(3)?);
                    socket_rules.insert(base | libc::SYS_sendmsg, fastopen(2)?);
                    socket_rules.insert(base | libc::SYS_sendmmsg, fastopen(3)?);
                }
            }
            let eacces = SeccompAction::Errno(libc::EACCES as u32);
            let filter = SeccompFilter::new(socket_rules, SeccompAction::Allow, eacces, ARCH)
                .map_err(err)?;
            let program = BpfProgram::try_from(filter).map_err(err)?;
            seccompiler::apply_filter(&program).map_err(err)
        }

        pub fn install() -> Result<(), String> {
            // Dword: the domain and type are C ints; the kernel ignores the
            // upper half of the register, so the filter must too.
            let arg = |index, op, value| {
                SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(err)
            };
            let unix = || arg(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64);
            let mut sockets = BTreeMap::new();
            for &base in NUMBERINGS {
                let socket = vec![SeccompRule::new(vec![unix()?]).map_err(err)?];
                let mut pair = Vec::new();
                for kind in (0..=SOCK_TYPE_MASK).filter(|t| !PAIR_TYPES_KEPT.contains(t)) {
                    let kind = arg(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?;
                    pair.push(SeccompRule::new(vec![unix()?, kind]).map_err(err)?);
                }
                sockets.insert(base | libc::SYS_socket, socket);
                // (An empty chain would match every call, hence no entry.)
                if !pair.is_empty() {
                    sockets.insert(base | libc::SYS_socketpair, pair);
                }
            }
            // io_uring, which could create a socket no filter sees, is
            // refused in every mode by the syscall table.
            let eacces = SeccompAction::Errno(libc::EACCES as u32);
            let filter =
                SeccompFilter::new(sockets, SeccompAction::Allow, eacces, ARCH).map_err(err)?;
            let program = BpfProgram::try_from(filter).map_err(err)?;
            // Sets no_new_privs itself (already set by the ruleset).
            seccompiler::apply_filter(&program).map_err(err)
        }
    }

    /// No filter for other architectures: `plan` fails closed unless
    /// `--allow-socket` (or ABI 9) makes it unnecessary.
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    mod filter {
        pub const SUPPORTED: bool = false;

        pub fn install() -> Result<(), String> {
            Err(format!("no filter for {}", std::env::consts::ARCH))
        }

        pub fn install_net(_: &super::Plan) -> Result<(), String> {
            Err(format!("no filter for {}", std::env::consts::ARCH))
        }
    }

    /// The relay that gives a command in a private network namespace (bwrap
    /// `--unshare-net`, whose only interface is its own loopback) its one
    /// way out: the proxy, reached through a Unix socket outside. It listens
    /// on the sandbox's 127.0.0.1:PORT, where the command's `HTTP(S)_PROXY`
    /// points, and copies each connection to PATH, nothing else.
    ///
    /// It is forked before any restriction is applied, so the command's
    /// Landlock domain (and its socket rules) never binds it, and the
    /// command, being in a nested domain, cannot ptrace or signal it. It
    /// dies with the command (PDEATHSIG), and bwrap's pid namespace ends it
    /// in any case.
    mod bridge {
        use std::io;
        use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        use std::os::unix::net::UnixStream;
        use std::path::{Path, PathBuf};

        use super::{OrFail, fail};

        pub fn start(port: u16, path: &Path) {
            // Listening before the fork: the command can connect at once.
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).or_fail(format_args!(
                "cannot listen on 127.0.0.1:{port} for the proxy bridge"
            ));
            let parent = rustix::process::getpid();
            #[allow(unsafe_code)]
            // SAFETY: this process is single threaded (close-fds mode starts
            // no thread before this point), so the child may run any code.
            let pid = unsafe { libc::fork() };
            match pid {
                -1 => fail(format_args!(
                    "cannot fork the proxy bridge: {}",
                    io::Error::last_os_error()
                )),
                0 => serve(listener, path.to_path_buf(), parent),
                _ => drop(listener),
            }
        }

        fn serve(listener: TcpListener, path: PathBuf, parent: rustix::process::Pid) -> ! {
            let dies = rustix::process::set_parent_process_death_signal(Some(
                rustix::process::Signal::KILL,
            ));
            if dies.is_err() || rustix::process::getppid() != Some(parent) {
                std::process::exit(0);
            }
            // Only the listener: not the status channel, not a grant.
            let keep = listener.as_raw_fd();
            #[allow(unsafe_code)]
            // SAFETY: close_range closes descriptors only; the one this
            // process still needs (`keep`) is outside both ranges, and no
            // other thread exists that could be using the others.
            unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    3 as libc::c_uint,
                    (keep - 1) as libc::c_uint,
                    0 as libc::c_uint,
                );
                libc::syscall(
                    libc::SYS_close_range,
                    (keep + 1) as libc::c_uint,
                    libc::c_uint::MAX,
                    0 as libc::c_uint,
                );
            }
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let path = path.clone();
                std::thread::spawn(move || relay(conn, &path));
            }
            std::process::exit(0)
        }

        fn relay(client: TcpStream, path: &Path) {
            let Ok(upstream) = UnixStream::connect(path) else {
                let _ = client.shutdown(Shutdown::Both);
                return;
            };
            let (Ok(mut c_read), Ok(mut u_write)) = (client.try_clone(), upstream.try_clone())
            else {
                return;
            };
            let up = std::thread::spawn(move || {
                let _ = io::copy(&mut c_read, &mut u_write);
                let _ = u_write.shutdown(Shutdown::Write);
            });
            let (mut u_read, mut c_write) = (upstream, client);
            let _ = io::copy(&mut u_read, &mut c_write);
            let _ = c_write.shutdown(Shutdown::Write);
            let _ = up.join();
        }
    }

    /// Root must not be able to undo the confinement: with its capabilities it
    /// could load a module (CAP_SYS_MODULE), mknod a block device in a writable
    /// grant and write the raw disk (CAP_MKNOD), or TIOCSTI any terminal
    /// (CAP_SYS_ADMIN). Landlock itself already forbids mount/pivot_root and
    /// ptrace of processes outside the domain (hence /proc/PID/root escapes).
    /// Capabilities are per thread; we never start another thread.
    fn drop_capabilities() {
        let caps = capabilities(None).or_fail("capget");
        // A permitted-but-not-effective CAP_SETPCAP still lets us empty the bounding set.
        let raised = CapabilitySets {
            effective: caps.permitted,
            ..caps
        };
        set_capabilities(None, raised).or_fail("capset");
        let root = getuid().is_root() || geteuid().is_root();
        let setpcap = caps.permitted.contains(CapabilitySet::SETPCAP);
        let every_cap = (root || setpcap).then(every_cap).unwrap_or_default();
        for &cap in every_cap.iter().filter(|_| setpcap) {
            let n = cap.bits().trailing_zeros();
            remove_capability_from_bounding_set(cap).or_fail(format_args!(
                "cannot drop capability {n} from the bounding set"
            ));
        }
        clear_ambient_capability_set().or_fail("cannot clear the ambient capabilities");
        let none = CapabilitySet::empty();
        let empty = CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        };
        set_capabilities(None, empty).or_fail("capset");
        if capabilities(None).or_fail("capget") != empty {
            fail("capabilities are still held after capset");
        }
        // exec as uid 0 refills permitted from the bounding set; no_new_privs
        // clamps that today, the empty bounding set makes it not depend on it.
        // (A saved uid 0 alone is left to no_new_privs: rustix has no getresuid.)
        if root
            && every_cap
                .iter()
                .any(|&c| capability_is_in_bounding_set(c).unwrap_or(true))
        {
            fail("running as root but the capability bounding set is not empty (no CAP_SETPCAP)");
        }
    }

    fn every_cap() -> Vec<CapabilitySet> {
        let file = "/proc/sys/kernel/cap_last_cap";
        let text = fs::read_to_string(file).or_fail(format_args!("cannot read {file}"));
        match text.trim().parse::<u32>() {
            Ok(last) if last < 64 => (0..=last)
                .map(|n| CapabilitySet::from_bits_retain(1 << n))
                .collect(),
            _ => fail(format_args!("unexpected {file}: {:?}", text.trim())),
        }
    }

    /// TIOCSTI only works on one's controlling terminal (or with CAP_SYS_ADMIN,
    /// dropped above); a new session has none, so the child cannot push
    /// keystrokes into the caller's shell through an inherited tty fd.
    ///
    /// `keep_group`: stay in the caller's process group (a supervised
    /// command, so that the caller's group kill still reaches it).
    fn detach_terminal(keep_group: bool, ctty: bool) {
        if ctty {
            take_terminal();
            return;
        }
        if !keep_group {
            match setsid() {
                Ok(_) => return,
                Err(Errno::PERM) => {}
                Err(e) => fail(format_args!("setsid: {e}")),
            }
        }
        // EPERM: we lead a process group (callers spawn us in a fresh group so
        // a timeout can kill everything). Give up the terminal instead.
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let tty = match rustix::fs::open("/dev/tty", flags, Mode::empty()) {
            Err(Errno::NXIO) => return,
            Ok(tty) => tty,
            Err(e) => fail(format_args!(
                "cannot tell whether a controlling terminal is attached: /dev/tty: {e}"
            )),
        };
        // A session leader giving up its terminal hangs up its own foreground
        // group (SIGHUP), so that rare shape fails closed instead. (A forked
        // child is never one.)
        if getsid(None).ok() == Some(getpid()) {
            fail("cannot detach from the controlling terminal: already a session leader");
        }
        #[allow(unsafe_code)]
        // SAFETY: TIOCNOTTY takes no argument and only changes this process's
        // controlling-terminal association; `tty` is an open fd we own for the
        // whole call.
        let rc = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCNOTTY) };
        if rc != 0 {
            fail(format_args!(
                "cannot detach from the controlling terminal: TIOCNOTTY: {}",
                io::Error::last_os_error()
            ));
        }
        drop(tty);
        match rustix::fs::open("/dev/tty", flags, Mode::empty()) {
            Err(Errno::NXIO) => {}
            _ => fail("still attached to a controlling terminal after TIOCNOTTY"),
        }
    }

    /// `--ctty`: a session of our own (bwrap's `--new-session` may have made
    /// us its leader already) whose controlling terminal is stdin, which the
    /// caller allocated for this run and copies to its own terminal. Called
    /// once capabilities are dropped, so TIOCSCTTY (argument 0) can never
    /// steal a terminal that is another session's, the caller's included:
    /// the kernel refuses that with EPERM. Job control, `/dev/tty` and
    /// TIOCSTI then reach only this run's own terminal.
    fn take_terminal() {
        let leader = getsid(None).ok() == Some(getpid());
        if !leader {
            setsid().or_fail("--ctty: setsid");
        }
        let stdin = std::io::stdin();
        if !rustix::termios::isatty(&stdin) {
            fail("--ctty: stdin is not a terminal");
        }
        rustix::process::ioctl_tiocsctty(&stdin).or_fail(
            "--ctty: cannot make stdin the controlling terminal (it is another session's)",
        );
    }

    /// Privileges and terminal first (so /dev/tty is still openable), then the
    /// ruleset, then the seccomp filter (no_new_privs is set by then); returns
    /// the effective ABI.
    fn confine(
        plan: &Plan,
        rules: Vec<PathBeneath<OwnedFd>>,
        sockets: Vec<OwnedFd>,
        keep_group: bool,
        ctty: bool,
    ) -> ABI {
        drop_capabilities();
        detach_terminal(keep_group, ctty);
        let abi = restrict(plan, Some(rules), sockets);
        isolate(plan);
        abi
    }

    /// A descriptor inherited without O_CLOEXEC (our caller's parent's
    /// jobserver, a log file, a directory) would reach the child, and a write
    /// through an fd opened before the ruleset is never checked by Landlock:
    /// an open fd to a file outside is a way out. Only 0, 1 and 2 go through.
    fn close_inherited_fds() {
        #[allow(unsafe_code)]
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing and
        // touches no memory; it only flags fds >= 3 close-on-exec, and this
        // process holds no fd it still needs across the exec below.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            )
        };
        if rc == 0 {
            return;
        }
        // Kernels before 5.11: flag each open fd by hand.
        let fds: Vec<i32> = fs::read_dir("/proc/self/fd")
            .or_fail("cannot list /proc/self/fd")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd > 2)
            .collect();
        for fd in fds {
            #[allow(unsafe_code)]
            // SAFETY: F_SETFD only changes the fd's close-on-exec flag; an fd
            // that closed since the listing (the read_dir handle) yields EBADF,
            // which is harmless and ignored.
            let _ = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }

    /// The process that started this launcher, read first thing in `main`.
    static PARENT: std::sync::OnceLock<Option<rustix::process::Pid>> = std::sync::OnceLock::new();

    /// `--die-with-parent`: this launcher gets SIGKILL when the process
    /// that started it dies (bwrap's flag of the same name), so a killed
    /// caller leaves nothing running: a supervised command dies with its
    /// supervisor (the child's own parent-death signal), an unsupervised one
    /// keeps this setting across its exec. The kernel ties the signal to the
    /// caller's thread that spawned this launcher. A caller already gone by
    /// now is a failure, never a run nobody waits for.
    fn die_with_parent() {
        let parent = PARENT.get().copied().flatten();
        let kill = Some(rustix::process::Signal::KILL);
        if rustix::process::set_parent_process_death_signal(kill).is_err() {
            fail("--die-with-parent: cannot set the parent-death signal");
        }
        if parent.is_none() || rustix::process::getppid() != parent {
            fail("--die-with-parent: the caller is already gone");
        }
    }

    fn run(opts: &Opts, argv: &[OsString]) -> ! {
        if opts.die_with_parent {
            die_with_parent();
        }
        // Inherited descriptors first: until this process opens something
        // itself, a number that is open is one the caller passed.
        let mut rules = Vec::new();
        // The writable grants again, for the supervisor: the same open files.
        let mut writable = Vec::new();
        let mut keep = |fd: &OwnedFd, write: bool| {
            if write {
                writable.push(
                    fd.try_clone()
                        .or_fail("cannot duplicate a grant descriptor"),
                );
            }
        };
        let mut fd_grants = Vec::new();
        for (grant, write) in &opts.grants {
            if let Grant::Fd(n) = *grant {
                let option = if *write { "--rw-fd" } else { "--ro-fd" };
                let fd = take_inherited_fd(option, n).unwrap_or_else(|why| usage(why));
                fd_grants.push((fd, *write, n));
            }
        }
        let mut protect = Vec::new();
        for p in &opts.protect {
            if let Grant::Fd(n) = *p {
                protect.push(take_inherited_fd("--protect-fd", n).unwrap_or_else(|why| usage(why)));
            }
        }
        let denied = DeniedBeneath::open(&opts.deny_read);
        // A writable directory above a denied path loses read_file when the
        // supervisor can serve its reads instead (see `DeniedBeneath`).
        let serve_reads = !opts.no_supervise;
        let mut reads_served = false;
        let mut writable_rule = |fd: OwnedFd, write: bool, shown: &dyn Display| {
            let mut rule = grant_access(&fd, write, shown);
            if write && serve_reads && denied.above_one(&fd) {
                rule &= !AccessFs::ReadFile;
                reads_served = true;
            }
            PathBeneath::new(fd, rule)
        };
        for (fd, write, n) in fd_grants {
            keep(&fd, write);
            rules.push(writable_rule(
                fd,
                write,
                &format_args!("grant descriptor {n}"),
            ));
        }
        for (grant, write) in &opts.grants {
            if let Grant::Path(path) = grant {
                if !*write && opts.deny_read.iter().any(|d| d.starts_with(path)) {
                    read_except(path, &opts.deny_read, &mut rules);
                    continue;
                }
                let fd = open_path(path, "grant path");
                keep(&fd, *write);
                rules.push(writable_rule(
                    fd,
                    *write,
                    &format_args!("grant path {}", path.display()),
                ));
            }
        }
        if reads_served {
            crate::syscalls::govern_reads();
        }
        if opts.ctty {
            // The run's own terminal, by the inode stdin holds: reopened by
            // name, written and configured (ioctl) like any terminal; the
            // supervisor, which performs writable opens, reopens exactly
            // this inode. `take_terminal` fails the run unless it is no
            // other session's.
            let stdin = rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3)
                .or_fail("--ctty: cannot duplicate stdin");
            keep(&stdin, true);
            rules.push(grant_rule(stdin, true, "--ctty: stdin"));
            // `/dev/tty` is the opener's controlling terminal: for the
            // command, this same terminal. Landlock's rule only, never a
            // writable grant of the supervisor's, whose own `/dev/tty` is
            // the caller's terminal: it opens the command's terminal for it
            // instead (`Fence::own_terminal`).
            let tty = open_path(Path::new("/dev/tty"), "--ctty: /dev/tty");
            rules.push(grant_rule(tty, true, "--ctty: /dev/tty"));
        }
        for p in &opts.protect {
            if let Grant::Path(path) = p {
                protect.push(open_path(path, "protected path"));
            }
        }
        let sockets = open_sockets(&opts.sockets);
        let mut plan = plan(kernel_abi(), !sockets.is_empty()).unwrap_or_else(|why| fail(why));
        plan.net = opts.net;
        net_plan(&mut plan, opts);
        if opts.no_supervise {
            if !protect.is_empty() {
                usage("--protect needs the supervisor; it cannot be combined with --no-supervise");
            }
            run_plain(plan, rules, sockets, opts, argv);
        }
        if let Err(why) = crate::supervise::available() {
            // Never a silent run without what the caller asked for: callers
            // read `--isolation` and pass --no-supervise (naming the gaps).
            fail(format_args!(
                "cannot supervise metadata and protected paths: {why} (pass --no-supervise to run with plain Landlock)"
            ));
        }
        let mut fence =
            crate::supervise::Fence::new(&writable, &protect).unwrap_or_else(|why| usage(why));
        fence
            .deny_read(&denied.objects)
            .unwrap_or_else(|why| fail(why));
        fence.allow_listen(&plan.listen);
        if opts.ctty {
            fence.own_terminal(
                rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3)
                    .or_fail("--ctty: cannot duplicate stdin"),
            );
        }
        fence.allow_connect(crate::supervise::ConnectRules {
            proxy_port: match plan.net {
                Net::Port(port) => Some(port),
                _ => None,
            },
            // Outside the child's domain the supervisor must not connect
            // what the domain itself would judge.
            unix_pathname: !plan.resolve_unix,
            unix_abstract: !plan.scoped,
        });
        drop(writable);
        drop(protect);
        let (env, argv, ctty) = (opts.env.clone(), argv.to_vec(), opts.ctty);
        crate::supervise::run(
            fence,
            crate::supervise::Launcher {
                confine: Box::new(move || {
                    if confine(&plan, rules, sockets, true, ctty) < ABI::V3 {
                        eprintln!("{PARTIAL}");
                    }
                }),
                exec: Box::new(move || exec(&argv, &env)),
                fail: fail_args,
                drop_capabilities,
                release_status,
            },
        )
    }

    /// The network half of a run's plan: who governs listen and connect.
    /// Under deny and allow-listed a supervised run sends every listen to
    /// the supervisor (seccomp cannot see a socket's family, so only it can
    /// let a Unix-socket server listen and refuse an inet one), and where
    /// TCP sockets exist but Landlock cannot judge their connects (below
    /// ABI 4, or `--net-connect-supervised`) every connect too; without the
    /// supervisor that run is refused, never run with TCP open.
    fn net_plan(plan: &mut Plan, opts: &Opts) {
        if plan.net == Net::Host {
            if opts.connect_supervised {
                usage("--net-connect-supervised needs --net-port or --net-deny");
            }
            return;
        }
        let supervised = !opts.no_supervise && plan.supervised;
        if !opts.listen.is_empty() && !supervised {
            // Landlock binds by port only and cannot see addresses: without
            // the supervisor checking each listen a listener could face
            // every network.
            usage("--allow-listen needs the supervisor; it cannot be combined with --no-supervise");
        }
        refuse_inherited_listeners();
        plan.listen = opts.listen.clone();
        if !supervised {
            if opts.connect_supervised {
                usage(
                    "--net-connect-supervised needs the supervisor; it cannot be combined with --no-supervise",
                );
            }
            if matches!(plan.net, Net::Port(_)) && plan.abi < ABI::V4 {
                fail(format_args!(
                    "--net-port cannot be enforced without the supervisor: Landlock ABI {} has no TCP rights (ABI 4), so only the supervisor can keep connections to the proxy's port",
                    abi_number(plan.abi)
                ));
            }
            // listen and accept are refused outright (`filter::install_net`).
            return;
        }
        plan.listen_supervised = true;
        crate::syscalls::govern_listen();
        // TCP sockets exist under allow-listed, and under deny with
        // --allow-listen.
        let tcp = matches!(plan.net, Net::Port(_)) || !plan.listen.is_empty();
        if tcp && (plan.abi < ABI::V4 || opts.connect_supervised) {
            plan.connect_supervised = true;
            crate::syscalls::govern_connect();
        }
    }

    /// Under deny and allow-listed only an approved listener may accept
    /// (accept stays allowed in a supervised run because every listen is
    /// judged): a listening inet socket handed in on stdin, stdout or
    /// stderr (the only descriptors the command inherits) was judged by
    /// nobody, so such a run is refused. An AF_UNIX one is the caller's
    /// own grant, as with any descriptor it passes.
    fn refuse_inherited_listeners() {
        for n in 0..3 {
            #[allow(unsafe_code)]
            // SAFETY: F_GETFD only reads the descriptor's flags (EBADF when
            // it is not open); no memory is touched.
            if unsafe { libc::fcntl(n, libc::F_GETFD) } < 0 {
                continue;
            }
            #[allow(unsafe_code)]
            // SAFETY: `n` (0-2, std's) is open (just checked; this process
            // is single threaded, so nothing closes it meanwhile), and the
            // borrow lives only for the two getsockopt calls below, which
            // neither close nor move it.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
            let listening = rustix::net::sockopt::socket_acceptconn(fd).unwrap_or(false);
            if !listening {
                continue;
            }
            match rustix::net::sockopt::socket_domain(fd) {
                Ok(rustix::net::AddressFamily::UNIX) => {}
                _ => fail(format_args!(
                    "descriptor {n} is a listening network socket: under --net-deny and --net-port no listener may be inherited (a peer anywhere could connect to it)"
                )),
            }
        }
    }

    fn run_plain(
        plan: Plan,
        rules: Vec<PathBeneath<OwnedFd>>,
        sockets: Vec<OwnedFd>,
        opts: &Opts,
        argv: &[OsString],
    ) -> ! {
        // Below ABI 3 truncate(2) is not handled: files outside the grants can
        // still be truncated. Informational only; the caller decides.
        if confine(&plan, rules, sockets, false, opts.ctty) < ABI::V3 {
            eprintln!("{PARTIAL}");
        }
        exec(argv, &opts.env)
    }

    /// Checked to exist in every mode, so a typo fails the same on every
    /// kernel; they are rules only where resolve_unix is handled.
    fn open_sockets(paths: &[PathBuf]) -> Vec<OwnedFd> {
        paths.iter().map(|p| open_path(p, "socket path")).collect()
    }

    /// Inside bwrap: no filesystem rules (bwrap's mounts are the filesystem
    /// policy), but the same socket and signal isolation. Below ABI 6 there is
    /// nothing Landlock could add, so no ruleset at all.
    fn close_fds(opts: &Opts, argv: &[OsString]) -> ! {
        if let Some((port, path)) = &opts.bridge {
            bridge::start(*port, path);
        }
        let sockets = open_sockets(&opts.sockets);
        let mut plan = plan(kernel_abi(), !sockets.is_empty()).unwrap_or_else(|why| fail(why));
        plan.net = opts.net;
        // bwrap dropped every capability and (`--new-session`) made us the
        // leader of a session without a terminal.
        if opts.ctty {
            take_terminal();
        }
        if plan.scoped || plan.resolve_unix {
            restrict(&plan, None, sockets);
        }
        isolate(&plan);
        exec(argv, &opts.env)
    }

    fn isolation(sockets: &[PathBuf]) -> ! {
        let plan = plan(kernel_abi(), !sockets.is_empty()).unwrap_or_else(|why| fail(why));
        for line in plan.facts() {
            println!("{line}");
        }
        exit(0)
    }

    fn exec(argv: &[OsString], env: &[(OsString, OsString)]) -> ! {
        close_inherited_fds();
        // The last moment before the command: after a successful exec the
        // close-on-exec channel is gone, so nothing the command does can add
        // a record; if the exec fails, fail() appends the failure record.
        report(&format!("{STARTED}\n"));
        let err = Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .exec();
        // The confinement is in place; the command itself cannot run. That
        // is the command's failure (as a shell reports it), not ours.
        let Some(errno) = err.raw_os_error() else {
            fail(format_args!("cannot execute {:?}: {err}", argv[0]))
        };
        // Shown, never used as a path again.
        let program = Path::new(&argv[0]).display().to_string();
        let (code, line) = RunnerStatus::shell_exec_failure(&program, errno);
        eprintln!("{line}");
        report(&RunnerStatus::not_executable_record(code, &line));
        exit(code)
    }

    /// Proves enforcement end to end in a throwaway child: a write the ruleset
    /// allows must land and one it forbids must be refused and absent.
    fn probe() -> ! {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("landlock-run-probe-{}-{nanos}", std::process::id()));
        // 0700 and create-not-reuse: nobody else can plant inside/ or outside/.
        let shown = dir.display();
        DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .or_fail(format_args!("probe failed: cannot create {shown}"));
        let result = probe_in(&dir);
        let _ = fs::remove_dir_all(&dir);
        match result {
            Ok(abi) => {
                let level = if abi >= 3 { "full" } else { "partial" };
                println!("landlock-run: probe ok: abi {abi}, {level} enforcement");
                exit(0)
            }
            Err(why) => fail(format_args!("probe failed: {why}")),
        }
    }

    fn probe_in(dir: &Path) -> Result<u32, String> {
        for sub in ["inside", "outside"] {
            fs::create_dir(dir.join(sub)).map_err(|e| format!("cannot create {sub}/: {e}"))?;
        }
        let mut child = Command::new("/proc/self/exe")
            .arg("--probe-child")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot spawn the probe child: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("probe child did not finish within 5 s".into());
                }
                Err(e) => return Err(format!("cannot wait for the probe child: {e}")),
            }
        };
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(mut s) = child.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        // Checked from outside the domain: a child that lied cannot hide a landed write.
        if dir.join("outside/escape").symlink_metadata().is_ok() {
            return Err("a write outside the ruleset landed".into());
        }
        if !status.success() {
            let why = err
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("landlock-run: ");
            return Err(format!("probe child exited with {status}: {why}"));
        }
        if dir.join("inside/ok").symlink_metadata().is_err() {
            return Err("the allowed write did not land".into());
        }
        out.trim()
            .strip_prefix("abi ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unexpected probe child output {out:?}"))
    }

    fn probe_child(dir: &Path) -> ! {
        let rules = vec![
            open_grant(Path::new("/"), false),
            open_grant(&dir.join("inside"), true),
        ];
        // The whole confinement, socket isolation included: the probe vouches
        // for what a run does.
        let plan = plan(kernel_abi(), false).unwrap_or_else(|why| fail(why));
        let abi = confine(&plan, rules, Vec::new(), false, false);
        let create = |p: PathBuf| OpenOptions::new().write(true).create_new(true).open(p);
        create(dir.join("inside/ok")).or_fail("the allowed write was refused");
        match create(dir.join("outside/escape")) {
            Err(e) if e.raw_os_error() == Some(Errno::ACCESS.raw_os_error()) => {}
            Err(e) => fail(format_args!(
                "the forbidden write failed, but not with EACCES: {e}"
            )),
            Ok(_) => fail("the forbidden write was allowed"),
        }
        println!("abi {abi}");
        exit(0)
    }

    pub fn main() {
        let _ = PARENT.set(rustix::process::getppid());
        let args: Vec<OsString> = std::env::args_os().skip(1).collect();
        // The channel first, before anything else can fail or open a file.
        if let Some(value) = status_fd_arg(&args) {
            let fd = take_status_fd(value);
            *STATUS.lock().unwrap_or_else(PoisonError::into_inner) = Some(fd);
        }
        match parse(&args) {
            Ok(Cmd::Run(opts, argv)) => run(&opts, &argv),
            Ok(Cmd::CloseFds(opts, argv)) => close_fds(&opts, &argv),
            Ok(Cmd::Isolation(sockets)) => isolation(&sockets),
            Ok(Cmd::Syscalls) => {
                crate::syscalls::print();
                exit(0)
            }
            Ok(Cmd::Probe) => probe(),
            Ok(Cmd::ProbeChild(dir)) => probe_child(&dir),
            Err(why) => usage(why),
        }
    }
}
