//! `landlock-run`: exec ARGV confined by a Landlock filesystem ruleset.
//! Grammar, exit codes and the exact lines printed: README.md next to this file.
// `unsafe` is denied everywhere but the one TIOCNOTTY ioctl below, which no
// safe wrapper offers.
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
mod linux {
    use std::ffi::OsString;
    use std::fmt::Display;
    use std::fs::{self, DirBuilder, OpenOptions};
    use std::io::{self, Read};
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio, exit};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use landlock::{
        ABI, Access, AccessFs, LandlockStatus, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus,
    };
    use rustix::fs::{FileType, Mode, OFlags, fstat};
    use rustix::io::Errno;
    use rustix::process::{geteuid, getpid, getsid, getuid, setsid};
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    };

    const FAILURE: i32 = 125;
    const USAGE: &str = "usage: landlock-run [--ro PATH]... [--rw PATH]... -- ARGV...";
    const PARTIAL: &str = "landlock-run: partial enforcement (older Landlock ABI)";
    /// The newest set of rights we have vetted. V9's ResolveUnix is left out on
    /// purpose: it would make connect() to pathname sockets under `--ro` paths
    /// fail, which is not a file-write promise. Best-effort compatibility (the
    /// crate default) lets an older kernel handle the subset it knows.
    const ABI_REQ: ABI = ABI::V5;

    /// Every launcher failure is exactly one line and 125; callers tell it from
    /// a child's own 125 by that line, so a message must never span lines.
    fn fail(msg: impl Display) -> ! {
        let line = msg.to_string().replace(['\n', '\r'], " ");
        eprintln!("landlock-run: {line}");
        exit(FAILURE)
    }

    enum Cmd {
        Run(Vec<(PathBuf, bool)>, Vec<OsString>),
        /// `--close-fds -- ARGV`: descriptor hygiene only, for a runner that
        /// confines by other means (bwrap passes inherited fds through).
        CloseFds(Vec<OsString>),
        Probe,
        ProbeChild(PathBuf),
    }

    /// Arguments stay `OsString` end to end: a lossy conversion would silently
    /// grant or run something other than what the caller named.
    fn parse(args: &[OsString]) -> Result<Cmd, String> {
        match args.first().map(|a| a.as_bytes()) {
            Some(b"--probe") if args.len() == 1 => return Ok(Cmd::Probe),
            Some(b"--close-fds") => {
                return match args.get(1).map(|a| a.as_bytes()) {
                    Some(b"--") if args.len() > 2 => Ok(Cmd::CloseFds(args[2..].to_vec())),
                    Some(b"--") => Err("empty ARGV after --".into()),
                    _ => Err("--close-fds takes only -- ARGV".into()),
                };
            }
            Some(b"--probe-child") if args.len() == 2 => {
                return Ok(Cmd::ProbeChild(PathBuf::from(&args[1])));
            }
            _ => {}
        }
        let mut grants = Vec::new();
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let write = match arg.as_bytes() {
                b"--" if i + 1 < args.len() => return Ok(Cmd::Run(grants, args[i + 1..].to_vec())),
                b"--" => return Err("empty ARGV after --".into()),
                b"--ro" => false,
                b"--rw" => true,
                b"--probe" | b"--probe-child" => {
                    return Err("--probe takes no other arguments".into());
                }
                a if a.starts_with(b"-") => {
                    return Err(format!("unknown option {arg:?}"));
                }
                _ => return Err("missing -- before ARGV".into()),
            };
            // `--ro --` is a forgotten PATH, not a grant on a directory named "--".
            match args.get(i + 1) {
                Some(p) if p.as_bytes() != b"--" => grants.push((PathBuf::from(p), write)),
                _ => return Err(format!("{} needs a PATH", Path::new(arg).display())),
            }
            i += 2;
        }
        Err("missing -- before ARGV".into())
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

    /// Opened before any privilege is dropped, and the rule is keyed to this fd,
    /// so what is granted is what we stat'ed, not whatever the path names later.
    fn open_grant(path: &Path, write: bool) -> PathBeneath<PathFd> {
        let shown = path.display();
        let fd = PathFd::new(path).unwrap_or_else(|e| {
            let src = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>());
            match src.map(io::Error::kind) {
                Some(io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
                    fail(format_args!("grant path does not exist: {shown}"))
                }
                _ => fail(format_args!("cannot open grant path {shown}: {e}")),
            }
        });
        let stat = fstat(&fd).or_fail(format_args!("cannot stat grant path {shown}"));
        let mut access = match write {
            true => AccessFs::from_all(ABI_REQ),
            false => AccessFs::from_read(ABI_REQ),
        };
        // The kernel rejects directory-only rights on a file rule with EINVAL.
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            access &= AccessFs::from_file(ABI_REQ);
        }
        PathBeneath::new(fd, access)
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
    fn detach_terminal() {
        match setsid() {
            Ok(_) => return,
            Err(Errno::PERM) => {}
            Err(e) => fail(format_args!("setsid: {e}")),
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
        // group (SIGHUP), so that rare shape fails closed instead.
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

    /// Privileges and terminal first (so /dev/tty is still openable), then the
    /// ruleset; returns the effective ABI.
    fn confine(rules: Vec<PathBeneath<PathFd>>) -> ABI {
        drop_capabilities();
        detach_terminal();
        let mut ruleset = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI_REQ))
            .and_then(Ruleset::create)
            .or_fail("cannot create the Landlock ruleset");
        for rule in rules {
            ruleset = ruleset.add_rule(rule).or_fail("cannot add a Landlock rule");
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

    fn run(grants: &[(PathBuf, bool)], argv: &[OsString]) -> ! {
        let rules = grants.iter().map(|(p, w)| open_grant(p, *w)).collect();
        // Below ABI 3 truncate(2) is not handled: files outside the grants can
        // still be truncated. Informational only; the caller decides.
        if confine(rules) < ABI::V3 {
            eprintln!("{PARTIAL}");
        }
        exec(argv)
    }

    fn exec(argv: &[OsString]) -> ! {
        close_inherited_fds();
        let err = Command::new(&argv[0]).args(&argv[1..]).exec();
        fail(format_args!("cannot execute {:?}: {err}", argv[0]))
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
        let abi = confine(rules);
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
        let args: Vec<OsString> = std::env::args_os().skip(1).collect();
        match parse(&args) {
            Ok(Cmd::Run(grants, argv)) => run(&grants, &argv),
            Ok(Cmd::Probe) => probe(),
            Ok(Cmd::ProbeChild(dir)) => probe_child(&dir),
            Ok(Cmd::CloseFds(argv)) => exec(&argv),
            Err(why) => fail(format_args!("{USAGE} ({why})")),
        }
    }
}
