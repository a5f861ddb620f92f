//! The run modes: run (Landlock, optionally supervised), close-fds (inside
//! bwrap) and `--isolation`; each ends in the exec of ARGV.

use std::ffi::OsString;
use std::fmt::Display;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};

use landlock::{ABI, AccessFs, PathBeneath};
use stockade_core::status::{RunnerStatus, STARTED};

use crate::args::{Grant, Net, Opts};
use crate::bridge;
use crate::fds::{
    close_inherited_fds, open_path, open_sockets, refuse_inherited_listeners, take_inherited_fd,
};
use crate::isolate::{confine, drop_capabilities, isolate, take_terminal};
use crate::lifetime::die_with_parent;
use crate::plan::{Plan, abi_number, kernel_abi, plan};
use crate::ruleset::{DeniedBeneath, grant_access, grant_rule, read_except, restrict};
use crate::status::{OrFail, fail, fail_args, release_status, report, usage};

pub(crate) const PARTIAL: &str = "landlock-run: partial enforcement (older Landlock ABI)";
pub(crate) fn run(opts: &Opts, argv: &[OsString]) -> ! {
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
    if opts.ask_fd.is_none() && (opts.ask_timeout.is_some() || opts.ask_max.is_some()) {
        usage("--ask-timeout and --ask-max need --ask-fd");
    }
    let ask = opts.ask_fd.map(take_ask_fd);
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
        if ask.is_some() {
            usage(
                "--ask-fd needs the supervisor (only what it performs can be asked about); it cannot be combined with --no-supervise",
            );
        }
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
    let asker = ask.map(|channel| {
        fence.ask();
        crate::supervise::Asker::new(
            channel,
            opts.ask_max.unwrap_or(ASK_MAX),
            std::time::Duration::from_secs(opts.ask_timeout.unwrap_or(ASK_TIMEOUT_SECS)),
        )
    });
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
        asker,
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

/// Questions per run when `--ask-max` is not given.
const ASK_MAX: u32 = 8;
/// Seconds a question waits when `--ask-timeout` is not given.
const ASK_TIMEOUT_SECS: u64 = 60;

/// The approval channel: a connected Unix stream socket the caller keeps
/// the other end of (it never reaches the command: close-on-exec here,
/// and held only by the supervisor).
fn take_ask_fd(n: std::os::fd::RawFd) -> std::os::unix::net::UnixStream {
    let fd = take_inherited_fd("--ask-fd", n).unwrap_or_else(|why| usage(why));
    let stream = rustix::net::sockopt::socket_type(&fd) == Ok(rustix::net::SocketType::STREAM)
        && rustix::net::sockopt::socket_domain(&fd) == Ok(rustix::net::AddressFamily::UNIX);
    if !stream {
        usage(format_args!(
            "--ask-fd {n}: descriptor {n} is not a Unix stream socket"
        ));
    }
    std::os::unix::net::UnixStream::from(fd)
}

/// The network half of a run's plan: who governs listen and connect.
/// Under deny and allow-listed a supervised run sends every listen to
/// the supervisor (seccomp cannot see a socket's family, so only it can
/// let a Unix-socket server listen and refuse an inet one), and where
/// TCP sockets exist but Landlock cannot judge their connects (below
/// ABI 4, or `--net-connect-supervised`) every connect too; without the
/// supervisor that run is refused, never run with TCP open.
pub(crate) fn net_plan(plan: &mut Plan, opts: &Opts) {
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

pub(crate) fn run_plain(
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

/// Inside bwrap: no filesystem rules (bwrap's mounts are the filesystem
/// policy), but the same socket and signal isolation. Below ABI 6 there is
/// nothing Landlock could add, so no ruleset at all.
pub(crate) fn close_fds(opts: &Opts, argv: &[OsString]) -> ! {
    if let Some((port, n)) = opts.bridge {
        let relay = take_inherited_fd("--net-bridge", n).unwrap_or_else(|why| usage(why));
        bridge::start(port, relay);
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

pub(crate) fn isolation(sockets: &[PathBuf]) -> ! {
    let plan = plan(kernel_abi(), !sockets.is_empty()).unwrap_or_else(|why| fail(why));
    for line in plan.facts() {
        println!("{line}");
    }
    exit(0)
}

pub(crate) fn exec(argv: &[OsString], env: &[(OsString, OsString)]) -> ! {
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
