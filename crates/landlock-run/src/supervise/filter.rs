//! Which system calls the supervisor governs, and the seccomp programs that
//! send them to it. One table (`GOVERNED`) feeds both the filter and the
//! decoder, so a call is never notified without being understood.
//!
//! Only decisions on registers are made in BPF (an open's flags, an ioctl's
//! command): registers are copied when the call is made, while memory a
//! pointer names could change under a check.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use crate::syscalls::Verdict;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// One governed system call, by meaning; the numbering is per architecture.
// arm64 lacks the legacy forms, so some meanings have no number there.
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sys {
    Open,
    Openat,
    Creat,
    Mkdir,
    Mkdirat,
    Mknod,
    Mknodat,
    Symlink,
    Symlinkat,
    Unlink,
    Unlinkat,
    Rmdir,
    Rename,
    Renameat,
    Renameat2,
    Link,
    Linkat,
    Truncate,
    Chmod,
    Fchmod,
    Fchmodat,
    Fchmodat2,
    Chown,
    Lchown,
    Fchown,
    Fchownat,
    Utime,
    Utimes,
    Futimesat,
    Utimensat,
    Setxattr,
    Lsetxattr,
    Fsetxattr,
    Removexattr,
    Lremovexattr,
    Fremovexattr,
    Ioctl,
    /// Only in supervised runs under deny or allow-listed (see
    /// `crate::syscalls::listen_governed`): not in `GOVERNED`.
    Listen,
    /// Only where the supervisor governs TCP connections (see
    /// `crate::syscalls::connect_governed`): not in `GOVERNED`.
    Connect,
    /// Observed, not governed (`OBSERVED`): always performed by the kernel.
    Umask,
    Execve,
    Execveat,
}

/// Calls the table allows that are notified only so that the supervisor
/// sees them, then performed by the kernel unchanged
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): they change what the supervisor
/// keeps per thread (the umask it applies to creates; the task a tid names,
/// when a non-leader thread execs). See `fence::cache`.
pub const OBSERVED: &[(i64, Sys)] = &[
    (libc::SYS_umask, Sys::Umask),
    (libc::SYS_execve, Sys::Execve),
    (libc::SYS_execveat, Sys::Execveat),
];

/// fchmodat2 (Linux 6.6); not every libc names it.
const SYS_FCHMODAT2: i64 = 452;

#[cfg(target_arch = "x86_64")]
pub const GOVERNED: &[(i64, Sys)] = &[
    (libc::SYS_open, Sys::Open),
    (libc::SYS_openat, Sys::Openat),
    (libc::SYS_creat, Sys::Creat),
    (libc::SYS_mkdir, Sys::Mkdir),
    (libc::SYS_mkdirat, Sys::Mkdirat),
    (libc::SYS_mknod, Sys::Mknod),
    (libc::SYS_mknodat, Sys::Mknodat),
    (libc::SYS_symlink, Sys::Symlink),
    (libc::SYS_symlinkat, Sys::Symlinkat),
    (libc::SYS_unlink, Sys::Unlink),
    (libc::SYS_unlinkat, Sys::Unlinkat),
    (libc::SYS_rmdir, Sys::Rmdir),
    (libc::SYS_rename, Sys::Rename),
    (libc::SYS_renameat, Sys::Renameat),
    (libc::SYS_renameat2, Sys::Renameat2),
    (libc::SYS_link, Sys::Link),
    (libc::SYS_linkat, Sys::Linkat),
    (libc::SYS_truncate, Sys::Truncate),
    (libc::SYS_chmod, Sys::Chmod),
    (libc::SYS_fchmod, Sys::Fchmod),
    (libc::SYS_fchmodat, Sys::Fchmodat),
    (SYS_FCHMODAT2, Sys::Fchmodat2),
    (libc::SYS_chown, Sys::Chown),
    (libc::SYS_lchown, Sys::Lchown),
    (libc::SYS_fchown, Sys::Fchown),
    (libc::SYS_fchownat, Sys::Fchownat),
    (libc::SYS_utime, Sys::Utime),
    (libc::SYS_utimes, Sys::Utimes),
    (libc::SYS_futimesat, Sys::Futimesat),
    (libc::SYS_utimensat, Sys::Utimensat),
    (libc::SYS_setxattr, Sys::Setxattr),
    (libc::SYS_lsetxattr, Sys::Lsetxattr),
    (libc::SYS_fsetxattr, Sys::Fsetxattr),
    (libc::SYS_removexattr, Sys::Removexattr),
    (libc::SYS_lremovexattr, Sys::Lremovexattr),
    (libc::SYS_fremovexattr, Sys::Fremovexattr),
    (libc::SYS_ioctl, Sys::Ioctl),
];

/// renameat on arm64: the kernel builds it there (`__ARCH_WANT_RENAMEAT`;
/// arm64's syscall ABIs include `renameat`), but the libc crate does not
/// name it. Found by the syscall table's test, which checks the governed
/// names against the kernel's list of the architecture.
#[cfg(target_arch = "aarch64")]
const SYS_RENAMEAT_AARCH64: i64 = 38;

/// arm64 has only the `*at` forms (and renameat2 beside renameat).
#[cfg(target_arch = "aarch64")]
pub const GOVERNED: &[(i64, Sys)] = &[
    (libc::SYS_openat, Sys::Openat),
    (libc::SYS_mkdirat, Sys::Mkdirat),
    (libc::SYS_mknodat, Sys::Mknodat),
    (libc::SYS_symlinkat, Sys::Symlinkat),
    (libc::SYS_unlinkat, Sys::Unlinkat),
    (SYS_RENAMEAT_AARCH64, Sys::Renameat),
    (libc::SYS_renameat2, Sys::Renameat2),
    (libc::SYS_linkat, Sys::Linkat),
    (libc::SYS_truncate, Sys::Truncate),
    (libc::SYS_fchmod, Sys::Fchmod),
    (libc::SYS_fchmodat, Sys::Fchmodat),
    (SYS_FCHMODAT2, Sys::Fchmodat2),
    (libc::SYS_fchown, Sys::Fchown),
    (libc::SYS_fchownat, Sys::Fchownat),
    (libc::SYS_utimensat, Sys::Utimensat),
    (libc::SYS_setxattr, Sys::Setxattr),
    (libc::SYS_lsetxattr, Sys::Lsetxattr),
    (libc::SYS_fsetxattr, Sys::Fsetxattr),
    (libc::SYS_removexattr, Sys::Removexattr),
    (libc::SYS_lremovexattr, Sys::Lremovexattr),
    (libc::SYS_fremovexattr, Sys::Fremovexattr),
    (libc::SYS_ioctl, Sys::Ioctl),
];

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

pub fn lookup(nr: i64) -> Option<Sys> {
    if nr == libc::SYS_listen && crate::syscalls::listen_governed() {
        return Some(Sys::Listen);
    }
    if nr == libc::SYS_connect && crate::syscalls::connect_governed() {
        return Some(Sys::Connect);
    }
    GOVERNED
        .iter()
        .chain(OBSERVED)
        .find(|(n, _)| *n == nr)
        .map(|(_, s)| *s)
}

/// The socket calls governed in this run, beside `GOVERNED`.
fn governed_sockets() -> Vec<i64> {
    let mut out = Vec::new();
    if crate::syscalls::listen_governed() {
        out.push(libc::SYS_listen);
    }
    if crate::syscalls::connect_governed() {
        out.push(libc::SYS_connect);
    }
    out
}

/// The inode-flag ioctls the supervisor performs on the child's behalf.
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
pub const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// Size of the argument each governed ioctl reads from the child.
pub fn ioctl_arg_len(cmd: u32) -> Option<usize> {
    match cmd {
        // Both read an int, whatever the command's encoded size says.
        FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => Some(4),
        // struct fsxattr
        FS_IOC_FSSETXATTR => Some(28),
        _ => None,
    }
}
/// Inode changes nobody in a coding sandbox needs: refused outright.
const IOCTLS_REFUSED: [u32; 4] = [
    0x4008_7602, // FS_IOC_SETVERSION
    0x4004_7602, // FS_IOC32_SETVERSION
    0x800c_6613, // FS_IOC_SET_ENCRYPTION_POLICY
    0x4080_6685, // FS_IOC_ENABLE_VERITY
];

const O_WRONLY: u64 = 0o1;
const O_RDWR: u64 = 0o2;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_PATH: u64 = 0o10_000_000;
const O_TMPFILE_BIT: u64 = 0o20_000_000;

/// seccompiler has no user-notification action: rules are built with this
/// `Trace` value and its return instructions rewritten (see `program`).
const MARK: u32 = 0x5a17;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    // Dword: flags and commands are C ints; the kernel ignores the upper half.
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(err)
}

fn ioctl_rules(cmds: &[u32]) -> Result<Vec<SeccompRule>, String> {
    cmds.iter()
        .map(|c| SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, u64::from(*c))?]).map_err(err))
        .collect()
}

/// The notifying program: each governed call (with its register
/// conditions) goes to the supervisor; everything else is allowed. A
/// binary search of the numbers (see `syscalls::always_program` for why
/// not a chain), whose leaves for an open or an ioctl jump to the test of
/// its flags or command.
pub fn notify_program() -> Result<BpfProgram, String> {
    Ok(notify_program_for(
        crate::syscalls::reads_governed(),
        &governed_sockets(),
    ))
}

/// What an open or ioctl leaf tests before notifying.
#[derive(Clone, Copy)]
enum Test {
    /// `open_rules` on this argument.
    Writes(u32),
    /// `read_open_rules` on this argument.
    Reads(u32),
    Ioctl,
}

fn notify_program_for(reads: bool, sockets: &[i64]) -> BpfProgram {
    use crate::syscalls::bpf::{JA, JEQ_K, JSET_K, LD_ABS_W, RET_K};
    use crate::syscalls::insn;
    const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    // Leaves that test first are marked with these returns, then made
    // jumps to their tests (which follow the search).
    const MARKS: u32 = libc::SECCOMP_RET_TRACE | MARK;
    let mut tests: Vec<Test> = Vec::new();
    let mut mark = |t: Test| {
        tests.push(t);
        MARKS + u32::try_from(tests.len() - 1).unwrap_or(0)
    };
    let mut leaves = Vec::new();
    for (nr, sys) in GOVERNED {
        let action = match sys {
            Sys::Open if reads => mark(Test::Reads(1)),
            Sys::Openat if reads => mark(Test::Reads(2)),
            Sys::Open => mark(Test::Writes(1)),
            Sys::Openat => mark(Test::Writes(2)),
            Sys::Ioctl => mark(Test::Ioctl),
            _ => NOTIFY,
        };
        leaves.push((*nr, action));
    }
    leaves.extend(sockets.iter().map(|nr| (*nr, NOTIFY)));
    leaves.extend(OBSERVED.iter().map(|(nr, _)| (*nr, NOTIFY)));
    let mut sorted: Vec<(u32, u32)> = leaves
        .into_iter()
        .filter_map(|(nr, a)| u32::try_from(nr).ok().map(|nr| (nr, a)))
        .collect();
    sorted.sort_unstable();
    sorted.dedup_by_key(|(nr, _)| *nr);
    let mut p = crate::syscalls::arch_check();
    p.extend(crate::syscalls::bpf::search(&sorted, ALLOW));
    // The low word of argument `n` (Dword: flags and commands are C ints,
    // whose upper half the kernel ignores).
    let arg = |n: u32| 16 + 8 * n;
    let mut starts = Vec::with_capacity(tests.len());
    for t in &tests {
        starts.push(p.len());
        match *t {
            // open_rules: O_TMPFILE always; otherwise, unless O_PATH, any
            // write access mode, O_CREAT or O_TRUNC.
            Test::Writes(n) => p.extend([
                insn(LD_ABS_W, 0, 0, arg(n)),
                insn(JSET_K, 3, 0, O_TMPFILE_BIT as u32),
                insn(JSET_K, 1, 0, O_PATH as u32),
                insn(JSET_K, 1, 0, (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) as u32),
                insn(RET_K, 0, 0, ALLOW),
                insn(RET_K, 0, 0, NOTIFY),
            ]),
            // read_open_rules: O_TMPFILE always; otherwise all but O_PATH.
            Test::Reads(n) => p.extend([
                insn(LD_ABS_W, 0, 0, arg(n)),
                insn(JSET_K, 2, 0, O_TMPFILE_BIT as u32),
                insn(JSET_K, 0, 1, O_PATH as u32),
                insn(RET_K, 0, 0, ALLOW),
                insn(RET_K, 0, 0, NOTIFY),
            ]),
            Test::Ioctl => {
                let cmds = [FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR];
                p.push(insn(LD_ABS_W, 0, 0, arg(1)));
                for (i, c) in cmds.iter().enumerate() {
                    // To the notify return after the rest and the allow.
                    let skip = u8::try_from(cmds.len() - i).unwrap_or(0);
                    p.push(insn(JEQ_K, skip, 0, *c));
                }
                p.push(insn(RET_K, 0, 0, ALLOW));
                p.push(insn(RET_K, 0, 0, NOTIFY));
            }
        }
    }
    for (pc, i) in p.iter_mut().enumerate() {
        let test = i.k.checked_sub(MARKS).map(|t| t as usize);
        if let (RET_K, Some(&to)) = (i.code, test.and_then(|t| starts.get(t))) {
            // Forward: the tests follow the whole search.
            *i = insn(JA, 0, 0, u32::try_from(to - pc - 1).unwrap_or(u32::MAX));
        }
    }
    p
}

/// The refusing programs (one action each): calls the supervisor does not
/// decode but that could change what it governs. Which calls is the
/// syscall table's (`Verdict::Undecoded`); what every mode refuses
/// (chroot, io_uring, the mount family, ...) is installed before these by
/// `isolate`.
pub fn refusing_programs() -> Result<Vec<BpfProgram>, String> {
    // The undecoded calls, and every x32 number (the x32 numbers of the
    // governed, observed and socket calls would pass the notifying filter
    // un-notified): one search, not a chain, which the kernel would walk
    // once per syscall number when it is attached (see
    // `syscalls::always_program`).
    let undecoded: Vec<(u32, u32)> = crate::syscalls::numbers(|v| v == Verdict::Undecoded)
        .into_iter()
        .filter_map(|(nr, _)| u32::try_from(nr).ok())
        .map(|nr| (nr, crate::syscalls::errno(libc::ENOSYS)))
        .collect();
    let mut eperm = BTreeMap::new();
    eperm.insert(libc::SYS_ioctl, ioctl_rules(&IOCTLS_REFUSED)?);
    let action = SeccompAction::Errno(libc::EPERM as u32);
    let filter = SeccompFilter::new(eperm, SeccompAction::Allow, action, ARCH).map_err(err)?;
    Ok(vec![
        crate::syscalls::refusing_program(undecoded),
        BpfProgram::try_from(filter).map_err(err)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_governed_number_is_unique_and_decodable() {
        for (i, (nr, sys)) in GOVERNED.iter().enumerate() {
            assert_eq!(lookup(*nr), Some(*sys));
            assert!(GOVERNED[i + 1..].iter().all(|(n, _)| n != nr));
        }
        for (nr, sys) in OBSERVED {
            assert_eq!(lookup(*nr), Some(*sys));
            assert!(GOVERNED.iter().all(|(n, _)| n != nr));
        }
    }

    /// An observed call is one the syscall table allows: observing it
    /// changes nothing the command can see.
    #[test]
    fn observed_calls_are_allowed_by_the_table() {
        let allowed: Vec<i64> = crate::syscalls::numbers(|v| v == Verdict::Allow)
            .into_iter()
            .map(|n| n.0)
            .collect();
        for (nr, _) in OBSERVED {
            assert!(allowed.contains(nr), "{nr}");
        }
    }

    // libc's Ioctl type differs between C libraries; the casts are not
    // redundant everywhere.
    #[allow(clippy::unnecessary_cast)]
    #[test]
    fn ioctl_numbers_match_libc() {
        assert_eq!(u64::from(FS_IOC_SETFLAGS), libc::FS_IOC_SETFLAGS as u64);
        assert_eq!(u64::from(FS_IOC32_SETFLAGS), libc::FS_IOC32_SETFLAGS as u64);
        assert_eq!(u64::from(IOCTLS_REFUSED[0]), libc::FS_IOC_SETVERSION as u64);
        assert_eq!(
            u64::from(IOCTLS_REFUSED[1]),
            libc::FS_IOC32_SETVERSION as u64
        );
    }

    /// The syscall table's governed names are exactly the calls decoded
    /// here, and the undecoded ones are refused.
    #[test]
    fn governed_is_the_syscall_tables() {
        let mut table: Vec<i64> = crate::syscalls::numbers(|v| v == Verdict::Governed)
            .into_iter()
            .map(|n| n.0)
            .collect();
        let mut decoded: Vec<i64> = GOVERNED.iter().map(|g| g.0).collect();
        table.sort_unstable();
        decoded.sort_unstable();
        assert_eq!(table, decoded);
        let undecoded = crate::syscalls::numbers(|v| v == Verdict::Undecoded);
        assert!(undecoded.iter().any(|n| n.0 == libc::SYS_openat2));
        assert_eq!(undecoded.len(), 4);
    }

    /// Every undecoded call and every x32 number (the governed ones'
    /// included, which the notifying filter would not see) is refused;
    /// every other call passes this program.
    #[test]
    fn the_refusing_program_covers_the_undecoded_and_every_x32_number() {
        let p = &refusing_programs().unwrap()[0];
        let undecoded: Vec<u32> = crate::syscalls::numbers(|v| v == Verdict::Undecoded)
            .into_iter()
            .map(|(nr, _)| u32::try_from(nr).unwrap())
            .collect();
        let enosys = crate::syscalls::errno(libc::ENOSYS);
        let arch = crate::syscalls::tests::AUDIT_ARCH_FOR_TESTS;
        for nr in 0..2048u32 {
            let want = if undecoded.contains(&nr) {
                enosys
            } else {
                libc::SECCOMP_RET_ALLOW
            };
            assert_eq!(crate::syscalls::tests::run(p, arch, nr), want, "{nr}");
            // x32 calls pass the architecture check with their own
            // numbering (ioctl is 514 there): nothing decodes them.
            if let Some(bit) = crate::syscalls::X32_BIT {
                let x32 = bit | nr;
                assert_eq!(
                    crate::syscalls::tests::run(p, arch, x32),
                    enosys,
                    "x32 {nr}"
                );
            }
        }
        for (nr, _) in GOVERNED {
            let nr = u32::try_from(*nr).unwrap();
            assert_eq!(
                crate::syscalls::tests::run(p, arch, nr),
                libc::SECCOMP_RET_ALLOW,
                "{nr} is the notifying filter's"
            );
        }
    }

    /// Opens that may write, create or truncate: anything with a write access
    /// mode, O_CREAT or O_TRUNC, unless O_PATH makes the kernel ignore them; and
    /// every O_TMPFILE (which the kernel honours even with O_PATH).
    fn open_rules(flags_arg: u8) -> Result<Vec<SeccompRule>, String> {
        let masked = |bit: u64| cond(flags_arg, SeccompCmpOp::MaskedEq(bit), bit);
        let no_path = || cond(flags_arg, SeccompCmpOp::MaskedEq(O_PATH), 0);
        let mut rules = Vec::new();
        for bit in [O_WRONLY, O_RDWR, O_CREAT, O_TRUNC] {
            rules.push(SeccompRule::new(vec![no_path()?, masked(bit)?]).map_err(err)?);
        }
        rules.push(SeccompRule::new(vec![masked(O_TMPFILE_BIT)?]).map_err(err)?);
        Ok(rules)
    }

    /// Every open that can read (when reads are governed, see
    /// `crate::syscalls::reads_governed`): all but O_PATH (which reads nothing;
    /// reopening such a descriptor through /proc is an open of its own), and
    /// every O_TMPFILE as above.
    fn read_open_rules(flags_arg: u8) -> Result<Vec<SeccompRule>, String> {
        let no_path = cond(flags_arg, SeccompCmpOp::MaskedEq(O_PATH), 0)?;
        let tmpfile = cond(
            flags_arg,
            SeccompCmpOp::MaskedEq(O_TMPFILE_BIT),
            O_TMPFILE_BIT,
        )?;
        Ok(vec![
            SeccompRule::new(vec![no_path]).map_err(err)?,
            SeccompRule::new(vec![tmpfile]).map_err(err)?,
        ])
    }

    /// The notifying program as seccompiler built it before the search:
    /// the oracle the search is checked against.
    fn notify_by_seccompiler(reads: bool, sockets: &[i64]) -> BpfProgram {
        let mut rules = BTreeMap::new();
        for (nr, sys) in GOVERNED {
            let chain = match sys {
                Sys::Open if reads => read_open_rules(1).unwrap(),
                Sys::Openat if reads => read_open_rules(2).unwrap(),
                Sys::Open => open_rules(1).unwrap(),
                Sys::Openat => open_rules(2).unwrap(),
                Sys::Ioctl => {
                    ioctl_rules(&[FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR]).unwrap()
                }
                _ => vec![],
            };
            rules.insert(*nr, chain);
        }
        for nr in sockets {
            rules.insert(*nr, vec![]);
        }
        for (nr, _) in OBSERVED {
            rules.insert(*nr, vec![]);
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Trace(MARK),
            ARCH,
        )
        .unwrap();
        let mut program = BpfProgram::try_from(filter).unwrap();
        for insn in &mut program {
            if insn.code == 0x06 && insn.k == libc::SECCOMP_RET_TRACE | MARK {
                insn.k = libc::SECCOMP_RET_USER_NOTIF;
            }
        }
        program
    }

    /// Every number, and for opens and ioctls every combination of the
    /// flags and commands that decide, gets what seccompiler's program
    /// gave: the search changes where the answer is found, not what it is.
    #[test]
    fn the_notifying_search_answers_as_seccompilers_chain() {
        use crate::syscalls::tests::{AUDIT_ARCH_FOR_TESTS as ARCH_NR, run_with};
        let bits = [
            O_WRONLY,
            O_RDWR,
            O_CREAT,
            O_TRUNC,
            O_PATH,
            O_TMPFILE_BIT,
            0o2000,    // O_APPEND
            0o200_000, // O_DIRECTORY
            1 << 32,   // above the int: ignored by the kernel
            O_PATH << 32,
        ];
        let flag_sets: Vec<u64> = (0..1u32 << bits.len())
            .map(|m| {
                bits.iter()
                    .enumerate()
                    .filter(|(i, _)| m & (1 << i) != 0)
                    .fold(0, |a, (_, b)| a | b)
            })
            .collect();
        let mut cmds: Vec<u64> = [FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR]
            .into_iter()
            .chain(IOCTLS_REFUSED)
            .map(u64::from)
            .collect();
        cmds.extend([0, 0x5401, u64::from(FS_IOC_SETFLAGS) | (1 << 32)]);
        let sockets = [libc::SYS_listen, libc::SYS_connect];
        for (reads, sockets) in [
            (false, &[][..]),
            (true, &[][..]),
            (false, &sockets[..]),
            (true, &sockets[..]),
        ] {
            let ours = notify_program_for(reads, sockets);
            let oracle = notify_by_seccompiler(reads, sockets);
            assert!(
                ours.len() < oracle.len(),
                "{} >= {}",
                ours.len(),
                oracle.len()
            );
            for nr in 0..1024u32 {
                let args_list: Vec<[u64; 6]> = match lookup_in(nr, sockets) {
                    Some(Sys::Open | Sys::Openat) => flag_sets
                        .iter()
                        .flat_map(|f| {
                            [
                                [0, *f, *f, 0, 0, 0],
                                [0, *f, 0, 0, 0, 0],
                                [0, 0, *f, 0, 0, 0],
                            ]
                        })
                        .collect(),
                    Some(Sys::Ioctl) => cmds.iter().map(|c| [3, *c, 0, 0, 0, 0]).collect(),
                    _ => vec![[0; 6], [u64::MAX; 6]],
                };
                for args in args_list {
                    assert_eq!(
                        run_with(&ours, ARCH_NR, nr, args),
                        run_with(&oracle, ARCH_NR, nr, args),
                        "reads {reads} sockets {sockets:?} nr {nr} args {args:x?}"
                    );
                }
            }
            for nr in [0u32, 2, 257] {
                assert_eq!(
                    run_with(&ours, ARCH_NR ^ 1, nr, [0; 6]),
                    libc::SECCOMP_RET_KILL_PROCESS
                );
            }
        }
    }

    fn lookup_in(nr: u32, sockets: &[i64]) -> Option<Sys> {
        let nr = i64::from(nr);
        GOVERNED
            .iter()
            .chain(OBSERVED)
            .find(|(n, _)| *n == nr)
            .map(|(_, s)| *s)
            .or_else(|| sockets.contains(&nr).then_some(Sys::Listen))
    }

    #[test]
    fn programs_build_and_notify() {
        let p = notify_program().unwrap();
        assert!(p.iter().any(|i| i.k == libc::SECCOMP_RET_USER_NOTIF));
        assert_eq!(refusing_programs().unwrap().len(), 2);
    }
}
