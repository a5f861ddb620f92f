//! Confining the launcher's own process before the exec: capabilities, the
//! controlling terminal, then the ruleset and the seccomp filters.

use std::fs;
use std::os::fd::OwnedFd;

use landlock::{ABI, PathBeneath};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::process::{geteuid, getuid, setsid};
use rustix::thread::{
    CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
    clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
};

use crate::plan::Plan;
use crate::ruleset::restrict;
use crate::status::{OrFail, fail};
use crate::sys;

/// The socket and signal isolation that follows the ruleset (or stands
/// alone in close-fds mode below ABI 6), after the calls the syscall
/// table refuses in every mode (io_uring, the mount family, ...).
pub(crate) fn isolate(plan: &Plan) {
    let programs = programs(plan).unwrap_or_else(|why| fail(why));
    for (what, program) in &programs {
        // Sets no_new_privs itself (already set by the ruleset).
        seccompiler::apply_filter(program)
            .or_fail(format_args!("cannot install the seccomp {what} filter"));
    }
}

/// The seccomp programs `isolate` attaches for `plan`, in order, each
/// with what it is: the same list bwrap loads when it runs the command
/// itself (`crate::direct`), so the two cannot drift apart.
pub(crate) fn programs(
    plan: &Plan,
) -> Result<Vec<(&'static str, seccompiler::BpfProgram)>, String> {
    let mut out = vec![("syscall", crate::syscalls::always_program())];
    if plan.seccomp {
        out.push(("socket", crate::socket_filter::unix_program()?));
    }
    if let Some(net) = crate::socket_filter::net_program(plan)? {
        out.push(("network", net));
    }
    Ok(out)
}

/// Root must not be able to undo the confinement: with its capabilities it
/// could load a module (CAP_SYS_MODULE), mknod a block device in a writable
/// grant and write the raw disk (CAP_MKNOD), or TIOCSTI any terminal
/// (CAP_SYS_ADMIN). Landlock itself already forbids mount/pivot_root and
/// ptrace of processes outside the domain (hence /proc/PID/root escapes).
/// Capabilities are per thread; we never start another thread.
pub(crate) fn drop_capabilities() {
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

pub(crate) fn every_cap() -> Vec<CapabilitySet> {
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
pub(crate) fn detach_terminal(keep_group: bool, ctty: bool) {
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
    if sys::leads_session() {
        fail("cannot detach from the controlling terminal: already a session leader");
    }
    if let Err(e) = sys::tiocnotty(&tty) {
        fail(format_args!(
            "cannot detach from the controlling terminal: TIOCNOTTY: {e}"
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
pub(crate) fn take_terminal() {
    if !sys::leads_session() {
        setsid().or_fail("--ctty: setsid");
    }
    let stdin = std::io::stdin();
    if !rustix::termios::isatty(&stdin) {
        fail("--ctty: stdin is not a terminal");
    }
    rustix::process::ioctl_tiocsctty(&stdin)
        .or_fail("--ctty: cannot make stdin the controlling terminal (it is another session's)");
}

/// Privileges and terminal first (so /dev/tty is still openable), then the
/// ruleset, then the seccomp filter (no_new_privs is set by then); returns
/// the effective ABI.
pub(crate) fn confine(
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
