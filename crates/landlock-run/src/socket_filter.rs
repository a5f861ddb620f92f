//! Below Landlock ABI 9 the only way to keep the command from pathname
//! sockets outside (and, below ABI 6, abstract ones) is to let it create
//! no AF_UNIX socket at all. seccomp sees numbers, not paths, hence all or
//! nothing.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

pub(crate) const SUPPORTED: bool = true;

// The filter's first instructions compare seccomp_data.arch with this
// architecture and KILL the process on a mismatch (seccompiler's
// build_arch_validation_sequence). That is what stops the 32-bit
// entry points, whose numbers differ and which have socketcall(2):
// `int 0x80` from an x86_64 process reports AUDIT_ARCH_I386, and an
// AArch32 task on arm64 AUDIT_ARCH_ARM; both die on their first
// syscall instead of reaching a socket. (Tested: the socketcall case
// in crates/landlock-run/tests/landlock_run.rs.)
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
pub(crate) fn net_program(plan: &crate::plan::Plan) -> Result<Option<BpfProgram>, String> {
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
        crate::args::Net::Host => return Ok(None),
        crate::args::Net::Deny if listen => (families::TCP, true, no_listen),
        crate::args::Net::Deny => (families::DENY, false, no_listen),
        crate::args::Net::Port(_) => (families::TCP, true, no_listen),
        crate::args::Net::Private => (families::PRIVATE, false, false),
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
                for kind in (0..=SOCK_TYPE_MASK).filter(|t| *t != libc::SOCK_STREAM as u64) {
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
    let filter =
        SeccompFilter::new(socket_rules, SeccompAction::Allow, eacces, ARCH).map_err(err)?;
    BpfProgram::try_from(filter).map(Some).map_err(err)
}

pub(crate) fn unix_program() -> Result<BpfProgram, String> {
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
    let filter = SeccompFilter::new(sockets, SeccompAction::Allow, eacces, ARCH).map_err(err)?;
    BpfProgram::try_from(filter).map_err(err)
}
