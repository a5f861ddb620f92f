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

fn ioctl_rules(cmds: &[u32]) -> Result<Vec<SeccompRule>, String> {
    cmds.iter()
        .map(|c| SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, u64::from(*c))?]).map_err(err))
        .collect()
}

/// The notifying program: each governed call (with its register
/// conditions) goes to the supervisor; everything else is allowed.
pub fn notify_program() -> Result<BpfProgram, String> {
    let mut rules = BTreeMap::new();
    for (nr, sys) in GOVERNED {
        let reads = crate::syscalls::reads_governed();
        let chain = match sys {
            Sys::Open if reads => read_open_rules(1)?,
            Sys::Openat if reads => read_open_rules(2)?,
            Sys::Open => open_rules(1)?,
            Sys::Openat => open_rules(2)?,
            Sys::Ioctl => ioctl_rules(&[FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR])?,
            _ => vec![],
        };
        rules.insert(*nr, chain);
    }
    for nr in governed_sockets() {
        rules.insert(nr, vec![]);
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
    .map_err(err)?;
    let mut program = BpfProgram::try_from(filter).map_err(err)?;
    let marked = libc::SECCOMP_RET_TRACE | MARK;
    let mut rewritten = 0;
    for insn in &mut program {
        // BPF_RET | BPF_K
        if insn.code == 0x06 && insn.k == marked {
            insn.k = libc::SECCOMP_RET_USER_NOTIF;
            rewritten += 1;
        }
    }
    if rewritten == 0 {
        return Err("the notifying filter has no notify action".into());
    }
    Ok(program)
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

    #[test]
    fn programs_build_and_notify() {
        let p = notify_program().unwrap();
        assert!(p.iter().any(|i| i.k == libc::SECCOMP_RET_USER_NOTIF));
        assert_eq!(refusing_programs().unwrap().len(), 2);
    }
}
