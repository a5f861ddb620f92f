//! Below Landlock ABI 9 the only way to keep the command from pathname
//! sockets outside (and, below ABI 6, abstract ones) is to let it create
//! no AF_UNIX socket at all. seccomp sees numbers, not paths, hence all or
//! nothing.

use seccompiler::BpfProgram;

pub(crate) const SUPPORTED: bool = true;

// Both programs start with `syscalls::arch_check`: it compares
// seccomp_data.arch with this build's architecture and KILLs the process
// on a mismatch. That is what stops the 32-bit entry points, whose numbers
// differ and which have socketcall(2): `int 0x80` from an x86_64 process
// reports AUDIT_ARCH_I386, and an AArch32 task on arm64 AUDIT_ARCH_ARM;
// both die on their first syscall instead of reaching a socket. (Tested:
// the socketcall case in crates/landlock-run/tests/landlock_run.rs.) x32
// syscalls pass that check (they report AUDIT_ARCH_X86_64) but carry
// __X32_SYSCALL_BIT in the number: every one is refused with ENOSYS.

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

/// What the network program refuses under `plan`: the families kept,
/// whether IP sockets must be TCP streams, whether listen and accept are
/// refused outright; `None` under the host's network (no program).
fn shape(plan: &crate::plan::Plan) -> Option<(&'static [i32], bool, bool)> {
    use crate::syscalls::families;
    // With `--allow-listen` a TCP socket is needed under deny too
    // (Landlock, or the supervisor below ABI 4, refuses every
    // connect there). A supervised run sends listen to the
    // supervisor, so only an unsupervised one refuses listen and
    // accept here.
    let listen = !plan.listen.is_empty();
    let no_listen = !plan.listen_supervised;
    Some(match plan.net {
        crate::args::Net::Host => return None,
        crate::args::Net::Deny if listen => (families::TCP, true, no_listen),
        crate::args::Net::Deny => (families::DENY, false, no_listen),
        crate::args::Net::Port(_) => (families::TCP, true, no_listen),
        crate::args::Net::Private => (families::PRIVATE, false, false),
    })
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
    use crate::syscalls::bpf::{Asm, JEQ_K, JSET_K, LD_ABS_W, RET_K, To};
    use crate::syscalls::families;
    let Some((kept, tcp_only, no_listen)) = shape(plan) else {
        return Ok(None);
    };
    // Written out rather than built by seccompiler, whose rule per
    // refused type made hundreds of instructions of the TCP-only case.
    // Only the low word of each argument is read (they are C ints).
    const AND_K: u16 = 0x54;
    let arg = |n: u32| 16 + 8 * n;
    let nr = |n: i64| u32::try_from(n).map_err(err);
    let word = |v: i32| u32::try_from(v).map_err(err);
    let mut a = Asm::default();
    let (allow, deny) = (a.label(), a.label());
    let (socket, netlink, inet, protocol) = (a.label(), a.label(), a.label(), a.label());
    let fastopen = [a.label(), a.label()];
    a.jump(JEQ_K, nr(libc::SYS_socket)?, To::L(socket), To::Next);
    if no_listen {
        for n in [libc::SYS_listen, libc::SYS_accept, libc::SYS_accept4] {
            a.jump(JEQ_K, nr(n)?, To::L(deny), To::Next);
        }
    }
    if plan.connect_supervised {
        // TCP fast open connects from a send (the address in sendto's or
        // sendmsg's arguments), around the supervised connect. Without
        // MSG_FASTOPEN a TCP socket ignores a send's address. The flags
        // are a register: argument 3 of sendto and sendmmsg, 2 of sendmsg.
        a.jump(JEQ_K, nr(libc::SYS_sendto)?, To::L(fastopen[1]), To::Next);
        a.jump(JEQ_K, nr(libc::SYS_sendmmsg)?, To::L(fastopen[1]), To::Next);
        a.jump(JEQ_K, nr(libc::SYS_sendmsg)?, To::L(fastopen[0]), To::Next);
    }
    a.op(RET_K, libc::SECCOMP_RET_ALLOW);
    // socket(family, type, protocol)
    a.bind(socket);
    a.op(LD_ABS_W, arg(0));
    if kept.contains(&libc::AF_NETLINK) {
        a.jump(JEQ_K, word(libc::AF_NETLINK)?, To::L(netlink), To::Next);
    }
    if tcp_only {
        for f in [libc::AF_INET, libc::AF_INET6] {
            a.jump(JEQ_K, word(f)?, To::L(inet), To::Next);
        }
    }
    for f in kept {
        a.jump(JEQ_K, word(*f)?, To::L(allow), To::Next);
    }
    a.op(RET_K, crate::syscalls::errno(libc::EACCES));
    // Netlink speaks only the kept protocols.
    a.bind(netlink);
    a.op(LD_ABS_W, arg(2));
    for p in families::NETLINK_PROTOCOLS {
        a.jump(
            JEQ_K,
            u32::try_from(*p).map_err(err)?,
            To::L(allow),
            To::Next,
        );
    }
    a.op(RET_K, crate::syscalls::errno(libc::EACCES));
    // TCP only: a stream socket (no UDP, raw, ...) of the default or TCP
    // protocol (SCTP or MPTCP would escape Landlock's TCP rules).
    a.bind(inet);
    a.op(LD_ABS_W, arg(1));
    a.op(AND_K, SOCK_TYPE_MASK as u32);
    a.jump(
        JEQ_K,
        libc::SOCK_STREAM as u32,
        To::L(protocol),
        To::L(deny),
    );
    a.bind(protocol);
    a.op(LD_ABS_W, arg(2));
    a.jump(JEQ_K, 0, To::L(allow), To::Next);
    a.jump(JEQ_K, libc::IPPROTO_TCP as u32, To::L(allow), To::L(deny));
    for (label, n) in fastopen.into_iter().zip([2, 3]) {
        a.bind(label);
        a.op(LD_ABS_W, arg(n));
        a.jump(JSET_K, MSG_FASTOPEN as u32, To::L(deny), To::L(allow));
    }
    a.bind(allow);
    a.op(RET_K, libc::SECCOMP_RET_ALLOW);
    a.bind(deny);
    a.op(RET_K, crate::syscalls::errno(libc::EACCES));
    let mut p = crate::syscalls::arch_check();
    // x32 numbers (the same calls under another numbering) are refused
    // outright, as the syscall table does.
    if let Some(bit) = crate::syscalls::X32_BIT {
        p.push(crate::syscalls::insn(
            crate::syscalls::bpf::JGE_K,
            0,
            1,
            bit,
        ));
        p.push(crate::syscalls::insn(
            RET_K,
            0,
            0,
            crate::syscalls::errno(libc::ENOSYS),
        ));
    }
    p.extend(a.finish()?);
    Ok(Some(p))
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
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;

    #[cfg(target_arch = "x86_64")]
    const ARCH: TargetArch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    const ARCH: TargetArch = TargetArch::aarch64;
    // The oracles repeated each rule for the x32 numbering.
    #[cfg(target_arch = "x86_64")]
    const NUMBERINGS: &[i64] = &[0, 0x4000_0000];
    #[cfg(target_arch = "aarch64")]
    const NUMBERINGS: &[i64] = &[0];

    /// The network program as seccompiler built it: the oracle.
    fn net_by_seccompiler(plan: &crate::plan::Plan) -> Result<Option<BpfProgram>, String> {
        use crate::syscalls::families;
        let arg = |index, op, value| {
            SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(err)
        };
        let Some((kept, tcp_only, no_listen)) = shape(plan) else {
            return Ok(None);
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

    /// Every profile, every number, and for each call it decides every
    /// combination of the arguments that decide, as seccompiler's program.
    #[test]
    fn the_written_network_filter_answers_as_seccompilers() {
        use crate::args::Net;
        let families: Vec<u64> = (0..48u64).chain([1 << 32 | 2, u64::MAX]).collect();
        let types: Vec<u64> = (0..=SOCK_TYPE_MASK + 1)
            .flat_map(|t| [t, t | 0o2_000_000, t | 0o4_000, t | (1 << 33)])
            .collect();
        let protocols: Vec<u64> = vec![0, 1, 4, 6, 17, 132, 262, 1 << 32 | 6, u64::MAX];
        let flags: Vec<u64> = vec![
            0,
            MSG_FASTOPEN,
            MSG_FASTOPEN | 0x40,
            0x40,
            MSG_FASTOPEN << 32,
        ];
        let mut plans = Vec::new();
        for net in [Net::Host, Net::Deny, Net::Port(3128), Net::Private] {
            for listen in [vec![], vec![8080u16]] {
                for listen_supervised in [false, true] {
                    for connect_supervised in [false, true] {
                        let mut plan = crate::plan::sockets_plan(landlock::ABI::V7, false).unwrap();
                        plan.net = net;
                        plan.listen = listen.clone();
                        plan.listen_supervised = listen_supervised;
                        plan.connect_supervised = connect_supervised;
                        plans.push(plan);
                    }
                }
            }
        }
        for plan in plans {
            let what = format!(
                "{:?} listen {:?} sup {} connect {}",
                plan.net, plan.listen, plan.listen_supervised, plan.connect_supervised
            );
            let (ours, oracle) = match (
                net_program(&plan).unwrap(),
                net_by_seccompiler(&plan).unwrap(),
            ) {
                (None, None) => continue,
                (Some(a), Some(b)) => (a, b),
                _ => panic!("{what}: one program and not the other"),
            };
            assert!(
                ours.len() <= oracle.len(),
                "{what}: {} > {}",
                ours.len(),
                oracle.len()
            );
            for nr in 0..1024u32 {
                let mut argss = vec![[0u64; 6], [u64::MAX; 6]];
                let n = i64::from(nr);
                if n == libc::SYS_socket {
                    for f in &families {
                        for t in &types {
                            for p in &protocols {
                                argss.push([*f, *t, *p, 0, 0, 0]);
                            }
                        }
                    }
                } else if [libc::SYS_sendto, libc::SYS_sendmsg, libc::SYS_sendmmsg].contains(&n) {
                    for f in &flags {
                        argss.push([3, 0, *f, *f, 0, 0]);
                        argss.push([3, 0, 0, *f, 0, 0]);
                        argss.push([3, 0, *f, 0, 0, 0]);
                    }
                }
                for args in argss {
                    assert_eq!(
                        run_with(&ours, ARCH_NR, nr, args),
                        run_with(&oracle, ARCH_NR, nr, args),
                        "{what}: nr {nr} args {args:x?}"
                    );
                }
            }
        }
    }

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
