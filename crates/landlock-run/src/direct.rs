//! bwrap running the command itself, without the launcher inside as its
//! closer: what the closer attaches (`--close-fds --net-private`) handed
//! to bwrap's `--add-seccomp-fd` instead, built by the same code
//! (`isolate::programs`), so the two cannot drift apart.
//!
//! Where this stands in for the closer: a private network namespace (so
//! abstract sockets are the sandbox's own) and bwrap's pid namespace (so
//! no process outside can be signalled) leave Landlock's scopes nothing to
//! add, and the spawn already closes every descriptor it does not place.
//! Where it cannot: Landlock ABI 9 confines pathname sockets by path
//! (`resolve_unix`), keeping stream socketpairs and `--allow-socket`
//! grants usable, which a seccomp filter (all or nothing) cannot.

use landlock::ABI;

use crate::args::Net;

/// The closer's seccomp programs for a bwrap run with a private network,
/// on a kernel with this Landlock ABI (0: none), each as bwrap reads an
/// `--add-seccomp-fd` (`struct sock_filter` entries in the host's byte
/// order). `Ok(None)`: the closer does more here than seccomp can carry.
pub fn private_net_filters(
    landlock_abi: u8,
    allow_sockets: bool,
) -> Result<Option<Vec<Vec<u8>>>, String> {
    let abi = ABI::from(i32::from(landlock_abi));
    let mut plan = crate::plan::sockets_plan(abi, allow_sockets)?;
    if plan.resolve_unix {
        return Ok(None);
    }
    plan.net = Net::Private;
    let programs = crate::isolate::programs(&plan)?;
    Ok(Some(
        programs
            .iter()
            .map(|(_, program)| to_bytes(program))
            .collect(),
    ))
}

fn to_bytes(program: &[seccompiler::sock_filter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_program_is_whole_instructions_and_ends_in_a_return() {
        let Some(programs) = private_net_filters(7, false).unwrap() else {
            panic!("ABI 7 has no resolve_unix: seccomp carries the closer's work");
        };
        // The syscall table, the Unix filter, the families.
        assert_eq!(programs.len(), 3);
        for p in &programs {
            assert!(!p.is_empty() && p.len() % 8 == 0);
            // BPF_RET | BPF_K as the last instruction's code.
            let last = &p[p.len() - 8..];
            assert_eq!(u16::from_ne_bytes([last[0], last[1]]) & 0x07, 0x06);
        }
    }

    #[test]
    fn an_allowed_socket_drops_only_the_unix_filter() {
        let with = private_net_filters(7, false).unwrap().unwrap();
        let without = private_net_filters(7, true).unwrap().unwrap();
        assert_eq!(without.len(), 2);
        assert_eq!(without[0], with[0]);
        assert_eq!(without[1], with[2]);
    }

    #[test]
    fn resolve_unix_keeps_the_closer() {
        assert_eq!(private_net_filters(9, false).unwrap(), None);
        assert_eq!(private_net_filters(10, true).unwrap(), None);
    }

    #[test]
    fn the_bytes_are_the_instructions() {
        let p = [seccompiler::sock_filter {
            code: 0x15,
            jt: 1,
            jf: 2,
            k: 0x0102_0304,
        }];
        let b = to_bytes(&p);
        assert_eq!(b.len(), 8);
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), 0x15);
        assert_eq!((b[2], b[3]), (1, 2));
        assert_eq!(u32::from_ne_bytes([b[4], b[5], b[6], b[7]]), 0x0102_0304);
    }
}
