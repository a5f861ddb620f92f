//! The grammar: every mode's options, parsed as `OsString`s.

use std::ffi::{OsStr, OsString};
use std::fmt::Display;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub(crate) const USAGE: &str = "usage: landlock-run [--ro PATH | --rw PATH | --ro-fd N | --rw-fd N | --protect PATH | --protect-fd N | --allow-socket PATH | --setenv NAME=VALUE | --deny-read PATH | --net-port P | --allow-listen P]... [--status-fd N] [--ask-fd N [--ask-timeout SECS] [--ask-max N]] [--no-supervise] [--net-deny] [--net-connect-supervised] [--die-with-parent] [--ctty] -- ARGV...";
pub(crate) enum Grant {
    Path(PathBuf),
    /// A directory or file the caller resolved once and passed open: the
    /// rule is keyed to that open file, never to a name looked up again.
    Fd(RawFd),
}

#[derive(Default)]
pub(crate) struct Opts {
    /// (what, writable)
    pub(crate) grants: Vec<(Grant, bool)>,
    pub(crate) sockets: Vec<PathBuf>,
    pub(crate) status_fd: Option<RawFd>,
    /// `--setenv NAME=VALUE`: set for the command only. The caller
    /// starts this launcher without the loader's variables (LD_PRELOAD,
    /// LD_LIBRARY_PATH, ...), which could name a library a confined run
    /// wrote, and hands them back here for the command.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// `--protect`: read-only inside the writable roots (supervised).
    pub(crate) protect: Vec<Grant>,
    /// `--no-supervise`: plain Landlock, metadata and protected paths
    /// ungoverned (benchmarks, and callers that report those gaps).
    pub(crate) no_supervise: bool,
    /// `--die-with-parent` (run mode): see `die_with_parent`.
    pub(crate) die_with_parent: bool,
    /// `--ctty` (run and close-fds modes): the command leads a session
    /// of its own whose controlling terminal is its stdin, a
    /// pseudo-terminal the caller allocated for this run (see
    /// `take_terminal`).
    pub(crate) ctty: bool,
    /// `--deny-read`: absolute paths a `--ro PATH` grant above them
    /// must not reach (see `read_except`).
    pub(crate) deny_read: Vec<PathBuf>,
    /// `--net-deny` / `--net-port P` (run mode).
    pub(crate) net: Net,
    /// `--net-bridge P:N` (close-fds mode): a relay from the sandbox's
    /// own loopback port P to the proxy whose relay end (a datagram
    /// socket) is descriptor N.
    pub(crate) bridge: Option<(u16, RawFd)>,
    /// `--allow-listen P` (run mode): under `--net-deny` / `--net-port`,
    /// the ports a listener may use, on loopback only (supervised).
    pub(crate) listen: Vec<u16>,
    /// `--net-connect-supervised` (run mode): the supervisor performs
    /// every TCP connect itself (only to the proxy's port) even where
    /// Landlock's TCP rights could judge it; chosen automatically below
    /// ABI 4. For tests on newer kernels.
    pub(crate) connect_supervised: bool,
    /// `--ask-fd N` (run mode, supervised): the approval channel, a
    /// connected Unix stream socket (see `supervise::ask`).
    pub(crate) ask_fd: Option<RawFd>,
    /// `--ask-timeout SECS`: how long a question waits for its answer.
    pub(crate) ask_timeout: Option<u64>,
    /// `--ask-max N`: questions per run, at most.
    pub(crate) ask_max: Option<u32>,
}

/// What the command may reach over the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Net {
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

pub(crate) enum Cmd {
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
pub(crate) const RUN_MODE: &str = "--net-bridge is for --close-fds mode only";

/// Every option that takes a value, in every mode.
pub(crate) const VALUED: [&[u8]; 16] = [
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
    b"--ask-fd",
    b"--ask-timeout",
    b"--ask-max",
];

/// Arguments stay `OsString` end to end: a lossy conversion would silently
/// grant or run something other than what the caller named.
pub(crate) fn parse(args: &[OsString]) -> Result<Cmd, String> {
    let first = args.first().map(|a| a.as_bytes());
    match first {
        Some(b"--probe") if args.len() == 1 => Ok(Cmd::Probe),
        Some(b"--syscalls") if args.len() == 1 => Ok(Cmd::Syscalls),
        Some(b"--probe-child") if args.len() == 2 => Ok(Cmd::ProbeChild(PathBuf::from(&args[1]))),
        Some(b"--isolation") => {
            let only = "--isolation takes only --allow-socket PATH";
            match options(&args[1..], &[b"--allow-socket"], only)? {
                (opts, None) => Ok(Cmd::Isolation(opts.sockets)),
                (_, Some(_)) => Err(only.into()),
            }
        }
        Some(b"--close-fds") => {
            let only = "--close-fds takes only --status-fd N, --allow-socket PATH, --setenv NAME=VALUE, --net-bridge P:N, --net-private, --ctty and -- ARGV";
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
pub(crate) fn options(
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
            b"--ask-timeout" | b"--ask-max" => {
                let n = std::str::from_utf8(value.as_bytes())
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u32>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{shown} needs a number from 1, not {value:?}"))?;
                if name == b"--ask-max" {
                    opts.ask_max = Some(n);
                } else {
                    opts.ask_timeout = Some(u64::from(n));
                }
            }
            b"--net-bridge" => {
                let bytes = value.as_bytes();
                let Some(colon) = bytes.iter().position(|b| *b == b':') else {
                    return Err(format!("--net-bridge needs P:N, not {value:?}"));
                };
                if opts.bridge.is_some() {
                    return Err(format!(
                        "--net-bridge is given once, not again as {value:?}"
                    ));
                }
                let port = port_number(OsStr::from_bytes(&bytes[..colon]))?;
                let n = OsStr::from_bytes(&bytes[colon + 1..]).to_os_string();
                let fd = fd_number(&"--net-bridge", &n)?;
                // Each descriptor gets exactly one owner (see take_inherited_fd).
                if fds.contains(&fd) {
                    return Err(format!("descriptor {fd} is given twice"));
                }
                fds.push(fd);
                opts.bridge = Some((port, fd));
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
                    b"--ask-fd" if opts.ask_fd.is_some() => {
                        return Err("--ask-fd is given twice".into());
                    }
                    b"--ask-fd" => opts.ask_fd = Some(n),
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
pub(crate) fn port_number(value: &OsStr) -> Result<u16, String> {
    std::str::from_utf8(value.as_bytes())
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("a port is a number from 1 to 65535, not {value:?}"))
}

/// A plain decimal of 3 or more: 0-2 are stdio, which std owns.
pub(crate) fn fd_number(option: &impl Display, value: &OsString) -> Result<RawFd, String> {
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
pub(crate) fn status_fd_arg(args: &[OsString]) -> Option<&OsString> {
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
