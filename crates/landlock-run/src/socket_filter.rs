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
    use crate::syscalls::bpf::{JEQ_K, LD_ABS_W, RET_K};
    use crate::syscalls::insn;
    // Written out rather than built by seccompiler, whose rule per
    // refused socketpair type made 247 instructions of it (a tenth of a
    // millisecond for bwrap to load, measured): socket(AF_UNIX, ...) and
    // socketpair(AF_UNIX, TYPE, ...) with TYPE (the bits under
    // SOCK_TYPE_MASK) neither STREAM nor SEQPACKET are refused. Only the
    // low word of each argument is read: the domain and type are C ints,
    // whose upper half the kernel ignores.
    const AND_K: u16 = 0x54;
    const ARG0: u32 = 16;
    const ARG1: u32 = 24;
    let nr = |n: i64| u32::try_from(n).map_err(err);
    let unix = libc::AF_UNIX as u32;
    let [stream, seqpacket] = PAIR_TYPES_KEPT.map(|t| t as u32);
    let eacces = crate::syscalls::errno(libc::EACCES);
    let mut p = crate::syscalls::arch_check();
    // x32 numbers (the same calls under another numbering) are refused
    // outright, as the syscall table does.
    if let Some(bit) = crate::syscalls::X32_BIT {
        p.push(insn(crate::syscalls::bpf::JGE_K, 0, 1, bit));
        p.push(insn(RET_K, 0, 0, crate::syscalls::errno(libc::ENOSYS)));
    }
    // Jumps are relative to the next instruction; ALLOW is at 10 and
    // EACCES at 11 of this block.
    p.extend([
        /* 0 */ insn(JEQ_K, 3, 0, nr(libc::SYS_socketpair)?),
        /* 1 */ insn(JEQ_K, 0, 8, nr(libc::SYS_socket)?),
        /* 2 */ insn(LD_ABS_W, 0, 0, ARG0),
        /* 3 */ insn(JEQ_K, 7, 6, unix),
        /* 4 */ insn(LD_ABS_W, 0, 0, ARG0),
        /* 5 */ insn(JEQ_K, 0, 4, unix),
        /* 6 */ insn(LD_ABS_W, 0, 0, ARG1),
        /* 7 */ insn(AND_K, 0, 0, SOCK_TYPE_MASK as u32),
        /* 8 */ insn(JEQ_K, 1, 0, stream),
        /* 9 */ insn(JEQ_K, 0, 1, seqpacket),
        /* 10 */ insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        /* 11 */ insn(RET_K, 0, 0, eacces),
    ]);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::tests::{AUDIT_ARCH_FOR_TESTS as ARCH_NR, run_with};

    /// The Unix filter as seccompiler built it: the oracle.
    fn unix_by_seccompiler() -> Result<BpfProgram, String> {
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
        BpfProgram::try_from(filter).map_err(err)
    }

    /// Every number and every combination of the deciding arguments gets
    /// what seccompiler's program gave; x32 numbers are refused.
    #[test]
    fn the_written_unix_filter_answers_as_seccompilers() {
        let ours = unix_program().unwrap();
        let oracle = unix_by_seccompiler().unwrap();
        assert!(ours.len() < 24, "{}", ours.len());
        let domains = [
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            0,
            libc::AF_UNIX as u64 | (1 << 32),
            u64::MAX,
        ];
        let flags = [0u64, 0o2_000_000, 0o4_000, 0o6_000_000, 1 << 40];
        for nr in 0..1024u32 {
            let mut argss = vec![[0u64; 6], [u64::MAX; 6]];
            if [libc::SYS_socket, libc::SYS_socketpair].contains(&i64::from(nr)) {
                for d in domains {
                    for t in 0..=SOCK_TYPE_MASK + 1 {
                        for f in flags {
                            argss.push([d, t | f, 0, 0, 0, 0]);
                        }
                    }
                }
            }
            for args in argss {
                assert_eq!(
                    run_with(&ours, ARCH_NR, nr, args),
                    run_with(&oracle, ARCH_NR, nr, args),
                    "nr {nr} args {args:x?}"
                );
            }
            if let Some(bit) = crate::syscalls::X32_BIT {
                assert_eq!(
                    run_with(
                        &ours,
                        ARCH_NR,
                        bit | nr,
                        [libc::AF_UNIX as u64, 2, 0, 0, 0, 0]
                    ),
                    crate::syscalls::errno(libc::ENOSYS)
                );
            }
        }
        assert_eq!(
            run_with(&ours, ARCH_NR ^ 1, 41, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }
}
