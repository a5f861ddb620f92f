//! The syscall table: what every Linux system call gets under every
//! landlock-run profile (run mode, supervised or not, and close-fds mode
//! inside bwrap). It is the one place a call's fate is written; the filters
//! are built from it:
//!
//! - `Refuse`: refused in every mode by `always_program` (the first filter
//!   installed after the ruleset), whatever the network or socket options.
//! - `Governed`: sent to the supervisor in a supervised run
//!   (`supervise/filter.rs` decodes exactly these names; a test checks the
//!   two agree); under `--no-supervise` Landlock alone judges them and the
//!   caller names the metadata gap.
//! - `Undecoded`: calls the supervisor cannot decode, refused with ENOSYS in
//!   a supervised run (callers fall back to governed calls); Landlock judges
//!   them otherwise.
//! - `Socket`: judged on their arguments by the socket and network filters
//!   (`SOCKET_FAMILIES` below and `main.rs`'s `filter`), per profile.
//! - `Allow`: allowed, with the reason it cannot reach past the sandbox.
//!
//! The kernel's lists of calls for x86_64 and aarch64 are embedded
//! (`syscalls/*.txt`, sources named in their headers); a test fails when a
//! call in either list has no verdict here.
#![forbid(unsafe_code)]

/// What a system call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Notified to the supervisor when supervised.
    Governed,
    /// Refused with ENOSYS when supervised; Landlock judges it otherwise.
    Undecoded,
    /// Judged on its arguments by the socket and network filters.
    Socket,
    /// Allowed.
    Allow,
    /// Refused in every mode with this errno.
    Refuse(i32),
}

/// A group of calls with one verdict and one reason.
pub struct Group {
    pub verdict: Verdict,
    pub reason: &'static str,
    pub names: &'static [&'static str],
}

const EPERM: i32 = libc::EPERM;
const ENOSYS: i32 = libc::ENOSYS;

pub const TABLE: &[Group] = &[
    // ---- refused everywhere ----
    Group {
        verdict: Verdict::Refuse(ENOSYS),
        reason: "an io_uring performs opens, xattr changes, renames and socket calls \
                 (IORING_OP_OPENAT, SETXATTR, RENAMEAT, SOCKET) without a system call, so \
                 neither the supervisor nor the socket filters would ever see them; ENOSYS \
                 makes callers fall back to plain calls",
        names: &["io_uring_setup", "io_uring_enter", "io_uring_register"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "a file handle opens an inode with no path: no Landlock rule, no \
                 supervisor check and no protected path on the way",
        names: &["open_by_handle_at"],
    },
    Group {
        verdict: Verdict::Refuse(libc::EOPNOTSUPP),
        reason: "makes the handles open_by_handle_at would use; EOPNOTSUPP is what a \
                 filesystem without handles answers, which callers handle",
        names: &["name_to_handle_at"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "fanotify watches whole mounts and filesystems, past the grants, and its \
                 permission events decide other processes' opens",
        names: &["fanotify_init", "fanotify_mark"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "reads or writes another process's memory (the supervisor reads the \
                 command's arguments from it; a sibling's memory is its decisions); no \
                 tool a coding sandbox runs needs it",
        names: &["process_vm_readv", "process_vm_writev"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "stalls the kernel in the middle of a copy from user memory, which turns \
                 the supervisor's reading of the command's arguments into a race it can \
                 hold open",
        names: &["userfaultfd"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "loads programs into the kernel or observes the kernel and other \
                 processes; not part of building or testing code",
        names: &["bpf", "perf_event_open"],
    },
    Group {
        verdict: Verdict::Refuse(ENOSYS),
        reason: "the kernel keyrings hold the user's session keys (Kerberos, ecryptfs, \
                 fscrypt) outside every file rule; ENOSYS makes libkeyutils' callers fall \
                 back to files",
        names: &["keyctl", "add_key", "request_key"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "the mount family changes what a path means (to Landlock, to bwrap's \
                 binds and to the supervisor resolving the command's names); Landlock \
                 forbids some, this refuses all",
        names: &[
            "mount",
            "umount2",
            "move_mount",
            "open_tree",
            "open_tree_attr",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "mount_setattr",
            "pivot_root",
        ],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "a new root would make the command's absolute paths mean something else \
                 than they mean to the supervisor resolving them",
        names: &["chroot"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "takes a descriptor out of another process (one opened before any \
                 confinement); the supervisor uses it on the command, never the reverse",
        names: &["pidfd_getfd"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "joins another process's namespaces (its mounts, network, users)",
        names: &["setns"],
    },
    Group {
        verdict: Verdict::Refuse(EPERM),
        reason: "administers the machine (kernel images and modules, reboot, swap, \
                 accounting, clocks, quotas, I/O ports, host names, the kernel log, \
                 terminals); the capabilities are dropped, and refusing them here keeps a \
                 file capability or a kernel bug from bringing any back",
        names: &[
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "reboot",
            "swapon",
            "swapoff",
            "acct",
            "settimeofday",
            "clock_settime",
            "clock_adjtime",
            "quotactl",
            "quotactl_fd",
            "iopl",
            "ioperm",
            "sethostname",
            "setdomainname",
            "syslog",
            "vhangup",
            "lsm_set_self_attr",
        ],
    },
    Group {
        verdict: Verdict::Refuse(ENOSYS),
        reason: "not implemented by Linux (removed or reserved numbers); refused so that \
                 a future meaning is decided here, not inherited",
        names: &[
            "uselib",
            "_sysctl",
            "create_module",
            "get_kernel_syms",
            "query_module",
            "nfsservctl",
            "getpmsg",
            "putpmsg",
            "afs_syscall",
            "tuxcall",
            "security",
            "vserver",
            "lookup_dcookie",
            "epoll_ctl_old",
            "epoll_wait_old",
            "set_thread_area",
            "get_thread_area",
        ],
    },
    // ---- the supervisor's ----
    Group {
        verdict: Verdict::Governed,
        reason: "creates, writes, removes, renames, links or changes the metadata of a \
                 file by name or descriptor: the supervisor resolves and performs it \
                 (supervise/filter.rs); opens only with a write mode, O_CREAT, O_TRUNC or \
                 O_TMPFILE, ioctl only for the inode-flag commands",
        names: &[
            "open",
            "openat",
            "creat",
            "mkdir",
            "mkdirat",
            "mknod",
            "mknodat",
            "symlink",
            "symlinkat",
            "unlink",
            "unlinkat",
            "rmdir",
            "rename",
            "renameat",
            "renameat2",
            "link",
            "linkat",
            "truncate",
            "chmod",
            "fchmod",
            "fchmodat",
            "fchmodat2",
            "chown",
            "lchown",
            "fchown",
            "fchownat",
            "utime",
            "utimes",
            "futimesat",
            "utimensat",
            "setxattr",
            "lsetxattr",
            "fsetxattr",
            "removexattr",
            "lremovexattr",
            "fremovexattr",
            "ioctl",
        ],
    },
    Group {
        verdict: Verdict::Undecoded,
        reason: "path calls with argument structs the supervisor does not decode; ENOSYS \
                 makes callers fall back to the governed forms (openat, setxattr, ...)",
        names: &["openat2", "setxattrat", "removexattrat", "file_setattr"],
    },
    // ---- sockets ----
    Group {
        verdict: Verdict::Socket,
        reason: "which families and types may be created, and whether a socket may \
                 listen or accept, depends on the network profile (`families` below and \
                 the network filter): under deny and allow-listed a supervised run sends \
                 listen to the supervisor, which performs it on an AF_UNIX socket, and on \
                 an inet one only when bound to loopback at an --allow-listen port \
                 (accept then stays allowed: only approved listeners exist); unsupervised, \
                 listen and accept are refused. connect and bind of TCP are Landlock's \
                 (ABI 4); below ABI 4 (or with --net-connect-supervised) the supervisor \
                 performs connect itself, only to the proxy's 127.0.0.1 port, and \
                 MSG_FASTOPEN sends are refused",
        names: &[
            "socket",
            "socketpair",
            "connect",
            "bind",
            "listen",
            "accept",
            "accept4",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "act on a socket the command already has: its creation, and where it may \
                 connect, were judged by the socket rules (a TCP socket ignores a send's \
                 address except with MSG_FASTOPEN, which is refused where the supervisor \
                 governs connect)",
        names: &[
            "sendto",
            "recvfrom",
            "sendmsg",
            "recvmsg",
            "sendmmsg",
            "recvmmsg",
            "shutdown",
            "getsockname",
            "getpeername",
            "setsockopt",
            "getsockopt",
        ],
    },
    // ---- allowed ----
    Group {
        verdict: Verdict::Allow,
        reason: "read-only by name: Landlock's read and execute rights (and bwrap's \
                 mounts) judge every lookup and open",
        names: &[
            "stat",
            "lstat",
            "newfstatat",
            "statx",
            "access",
            "faccessat",
            "faccessat2",
            "readlink",
            "readlinkat",
            "getxattr",
            "lgetxattr",
            "getxattrat",
            "listxattr",
            "llistxattr",
            "listxattrat",
            "statfs",
            "ustat",
            "sysfs",
            "chdir",
            "getcwd",
            "getdents",
            "getdents64",
            "statmount",
            "listmount",
            "file_getattr",
            "execve",
            "execveat",
            "inotify_init",
            "inotify_init1",
            "inotify_add_watch",
            "inotify_rm_watch",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "act on a descriptor the command already holds: its open was judged \
                 (Landlock, and the supervisor for any open that may write); descriptors \
                 inherited from outside are close-on-exec",
        names: &[
            "read",
            "write",
            "pread64",
            "pwrite64",
            "readv",
            "writev",
            "preadv",
            "pwritev",
            "preadv2",
            "pwritev2",
            "close",
            "close_range",
            "lseek",
            "fstat",
            "fstatfs",
            "fcntl",
            "flock",
            "fsync",
            "fdatasync",
            "syncfs",
            "sync_file_range",
            "ftruncate",
            "fallocate",
            "fadvise64",
            "readahead",
            "fgetxattr",
            "flistxattr",
            "fchdir",
            "dup",
            "dup2",
            "dup3",
            "sendfile",
            "splice",
            "tee",
            "vmsplice",
            "copy_file_range",
            "cachestat",
            "poll",
            "ppoll",
            "select",
            "pselect6",
            "epoll_create",
            "epoll_create1",
            "epoll_ctl",
            "epoll_wait",
            "epoll_pwait",
            "epoll_pwait2",
            "sync",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "make anonymous objects (pipes, event, timer and signal descriptors, \
                 memory files) that no other process can name",
        names: &[
            "pipe",
            "pipe2",
            "eventfd",
            "eventfd2",
            "timerfd_create",
            "timerfd_settime",
            "timerfd_gettime",
            "signalfd",
            "signalfd4",
            "memfd_create",
            "memfd_secret",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "the process's own memory",
        names: &[
            "brk",
            "mmap",
            "munmap",
            "mremap",
            "mprotect",
            "msync",
            "mincore",
            "madvise",
            "mlock",
            "mlock2",
            "munlock",
            "mlockall",
            "munlockall",
            "remap_file_pages",
            "pkey_mprotect",
            "pkey_alloc",
            "pkey_free",
            "mseal",
            "map_shadow_stack",
            "mbind",
            "set_mempolicy",
            "get_mempolicy",
            "set_mempolicy_home_node",
            "membarrier",
            "modify_ldt",
            "arch_prctl",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "another process's memory placement or reclaim: the kernel asks for \
                 ptrace access, which Landlock refuses for every process outside the \
                 command's domain",
        names: &[
            "migrate_pages",
            "move_pages",
            "process_madvise",
            "process_mrelease",
            "kcmp",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "tracing (strace, gdb): Landlock refuses to trace any process outside the \
                 command's domain (the supervisor, the user's shell), and seccomp judges \
                 a traced call again after a tracer changes it",
        names: &["ptrace"],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "processes and threads: children inherit the ruleset and every filter, \
                 and a new namespace is nested inside the domain (mounts and chroot stay \
                 refused there)",
        names: &[
            "clone",
            "clone3",
            "fork",
            "vfork",
            "exit",
            "exit_group",
            "wait4",
            "waitid",
            "unshare",
            "set_tid_address",
            "set_robust_list",
            "get_robust_list",
            "rseq",
            "restart_syscall",
            "uretprobe",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "signals: Landlock's signal scope (ABI 6) refuses processes outside the \
                 domain; below it the caller names the gap",
        names: &[
            "kill",
            "tkill",
            "tgkill",
            "rt_sigqueueinfo",
            "rt_tgsigqueueinfo",
            "pidfd_open",
            "pidfd_send_signal",
            "rt_sigaction",
            "rt_sigprocmask",
            "rt_sigreturn",
            "rt_sigpending",
            "rt_sigtimedwait",
            "rt_sigsuspend",
            "sigaltstack",
            "pause",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "the process's own identity, limits, scheduling and timers; raising a \
                 privilege needs a capability the run dropped",
        names: &[
            "getpid",
            "getppid",
            "gettid",
            "getuid",
            "geteuid",
            "getgid",
            "getegid",
            "getresuid",
            "getresgid",
            "getgroups",
            "setuid",
            "setgid",
            "setreuid",
            "setregid",
            "setresuid",
            "setresgid",
            "setfsuid",
            "setfsgid",
            "setgroups",
            "getpgid",
            "setpgid",
            "getpgrp",
            "getsid",
            "setsid",
            "capget",
            "capset",
            "prctl",
            "personality",
            "umask",
            "getrlimit",
            "setrlimit",
            "prlimit64",
            "getrusage",
            "times",
            "getpriority",
            "setpriority",
            "ioprio_get",
            "ioprio_set",
            "sched_yield",
            "sched_setparam",
            "sched_getparam",
            "sched_setscheduler",
            "sched_getscheduler",
            "sched_get_priority_max",
            "sched_get_priority_min",
            "sched_rr_get_interval",
            "sched_setaffinity",
            "sched_getaffinity",
            "sched_setattr",
            "sched_getattr",
            "getcpu",
            "nanosleep",
            "clock_nanosleep",
            "clock_gettime",
            "clock_getres",
            "gettimeofday",
            "time",
            "adjtimex",
            "alarm",
            "getitimer",
            "setitimer",
            "timer_create",
            "timer_settime",
            "timer_gettime",
            "timer_getoverrun",
            "timer_delete",
            "uname",
            "sysinfo",
            "getrandom",
            "futex",
            "futex_waitv",
            "futex_wake",
            "futex_wait",
            "futex_requeue",
            "lsm_get_self_attr",
            "lsm_list_modules",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "asynchronous I/O on descriptors the command holds (io_submit performs \
                 reads and writes only, never an open, a rename or a socket call)",
        names: &[
            "io_setup",
            "io_destroy",
            "io_submit",
            "io_cancel",
            "io_getevents",
            "io_pgetevents",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "only ever narrows: another Landlock domain or seccomp filter nests \
                 inside ours, and the kernel refuses a second notify listener (EBUSY)",
        names: &[
            "landlock_create_ruleset",
            "landlock_add_rule",
            "landlock_restrict_self",
            "seccomp",
        ],
    },
    Group {
        verdict: Verdict::Allow,
        reason: "System V and POSIX IPC are judged by the objects' owners and modes, not \
                 by Landlock: the command reaches the IPC objects its user could (the \
                 IPC namespace is the caller's), a known gap with no file, descriptor or \
                 socket of the sandbox's on the way; build and test tools use them",
        names: &[
            "shmget",
            "shmat",
            "shmctl",
            "shmdt",
            "semget",
            "semop",
            "semctl",
            "semtimedop",
            "msgget",
            "msgsnd",
            "msgrcv",
            "msgctl",
            "mq_open",
            "mq_unlink",
            "mq_timedsend",
            "mq_timedreceive",
            "mq_notify",
            "mq_getsetattr",
        ],
    },
];

/// The kernel's calls of the architecture this launcher is built for.
#[cfg(target_arch = "x86_64")]
const HOST_LIST: &str = include_str!("syscalls/x86_64.txt");
#[cfg(target_arch = "aarch64")]
const HOST_LIST: &str = include_str!("syscalls/aarch64.txt");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const HOST_LIST: &str = "";

/// `NUMBER NAME` lines, `#` comments.
fn parse(list: &str) -> impl Iterator<Item = (i64, &str)> {
    list.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let nr = words.next()?.parse().ok()?;
            Some((nr, words.next()?))
        })
}

/// The verdict of a call by name (the reference `HOST_VERDICTS` is
/// checked against).
#[cfg(test)]
fn verdict(name: &str) -> Option<Verdict> {
    TABLE
        .iter()
        .find(|g| g.names.contains(&name))
        .map(|g| g.verdict)
}

/// Whether listen(2) goes to the supervisor: set once, before the
/// supervised child forks, in every supervised run under deny or
/// allow-listed (seccomp cannot see a socket's family, so only the
/// supervisor can let a Unix-socket server listen while refusing an inet
/// one). Read by the notifying filter and the decoder.
static LISTEN_GOVERNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether connect(2) goes to the supervisor: allow-listed (or deny with
/// `--allow-listen`) where Landlock has no TCP rights (below ABI 4), or
/// under `--net-connect-supervised`. Set once before the child forks.
static CONNECT_GOVERNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether read-only opens go to the supervisor: set once, before the
/// supervised child forks, when a deny-read path lies beneath a writable
/// root (Landlock cannot take read back there; see `Fence::read_open`).
/// Read by the notifying filter.
static READS_GOVERNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn govern_reads() {
    READS_GOVERNED.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn reads_governed() -> bool {
    READS_GOVERNED.load(std::sync::atomic::Ordering::SeqCst)
}

pub fn govern_listen() {
    LISTEN_GOVERNED.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn listen_governed() -> bool {
    LISTEN_GOVERNED.load(std::sync::atomic::Ordering::SeqCst)
}

pub fn govern_connect() {
    CONNECT_GOVERNED.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn connect_governed() -> bool {
    CONNECT_GOVERNED.load(std::sync::atomic::Ordering::SeqCst)
}

/// `landlock-run --syscalls`: `NAME VERDICT REASON`, a line per call of the
/// table, in its order; VERDICT is `governed`, `undecoded`, `socket`,
/// `allow` or `refuse:ERRNO`.
pub fn print() {
    use std::io::Write as _;
    // A reader that stops early (`| head`) closes the pipe: the listing
    // just ends, with no panic.
    let mut out = std::io::stdout().lock();
    for group in TABLE {
        let verdict = match group.verdict {
            Verdict::Governed => "governed".to_string(),
            Verdict::Undecoded => "undecoded".to_string(),
            Verdict::Socket => "socket".to_string(),
            Verdict::Allow => "allow".to_string(),
            Verdict::Refuse(e) => format!("refuse:{}", errno_name(e)),
        };
        let reason: Vec<&str> = group.reason.split_whitespace().collect();
        for name in group.names {
            if writeln!(out, "{name} {verdict} {}", reason.join(" ")).is_err() {
                return;
            }
        }
    }
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "errno",
    }
}

/// The host's numbers of every call whose verdict `keep` accepts.
pub fn numbers(keep: impl Fn(Verdict) -> bool) -> Vec<(i64, Verdict)> {
    HOST_VERDICTS
        .iter()
        .filter(|(_, v)| keep(*v))
        .copied()
        .collect()
}

/// Every call of this architecture with its verdict, matched once: a
/// supervised start asks for five subsets, and matching each of the ~390
/// names against the whole table (`verdict`) every time was a twentieth of
/// a launcher start's CPU (perf).
static HOST_VERDICTS: std::sync::LazyLock<Vec<(i64, Verdict)>> = std::sync::LazyLock::new(|| {
    let mut by_name = std::collections::HashMap::new();
    for group in TABLE {
        for name in group.names {
            // The first group naming a call decides, as in `verdict`.
            by_name.entry(*name).or_insert(group.verdict);
        }
    }
    parse(HOST_LIST)
        .filter_map(|(nr, name)| by_name.get(name).map(|v| (nr, *v)))
        .collect()
});

/// seccomp_data.arch of this build (linux/audit.h): a call made through
/// another architecture's entry (`int 0x80`, AArch32) kills the process,
/// since its numbers mean other calls.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// x32 calls report the x86_64 architecture with this bit in the number.
/// Nothing here decodes them, so every one is refused (ENOSYS).
#[cfg(target_arch = "x86_64")]
pub(crate) const X32_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
pub(crate) const X32_BIT: Option<u32> = None;

pub(crate) fn insn(code: u16, jt: u8, jf: u8, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The filter for the `Refuse` verdicts, in every mode: a check of the
/// architecture, then a binary search of the refused numbers. Written as
/// BPF directly because seccompiler has no range test for the x32
/// numbers. Not a chain of comparisons: attaching a filter has the kernel
/// run it once per syscall number (its per-architecture allow cache), so a
/// chain of ~70 refused numbers cost bwrap a quarter of a millisecond to
/// load (measured), and every call not in that cache walked the chain.
pub fn always_program() -> seccompiler::BpfProgram {
    let refused: Vec<(u32, u32)> = numbers(|v| matches!(v, Verdict::Refuse(_)))
        .into_iter()
        .filter_map(|(nr, v)| match (u32::try_from(nr), v) {
            (Ok(nr), Verdict::Refuse(e)) => Some((nr, errno(e))),
            _ => None,
        })
        .collect();
    refusing_program(refused)
}

/// seccomp's return value for refusing a call with `e`.
pub(crate) fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// A program that returns each listed number's action and allows every
/// other: another architecture's entry is killed, and every x32 number
/// (which nothing here decodes) is refused with ENOSYS; then a binary
/// search of `actions`.
pub(crate) fn refusing_program(mut actions: Vec<(u32, u32)>) -> seccompiler::BpfProgram {
    let mut p = arch_check();
    if let Some(bit) = X32_BIT {
        p.push(insn(bpf::JGE_K, 0, 1, bit));
        p.push(insn(bpf::RET_K, 0, 0, errno(libc::ENOSYS)));
    }
    actions.sort_unstable();
    actions.dedup_by_key(|(nr, _)| *nr);
    p.extend(bpf::search(&actions, libc::SECCOMP_RET_ALLOW));
    p
}

/// Every program's start: a call made through another architecture's
/// entry kills the process (its numbers mean other calls); then the
/// call's number is loaded.
pub(crate) fn arch_check() -> Vec<seccompiler::sock_filter> {
    vec![
        insn(bpf::LD_ABS_W, 0, 0, 4),
        insn(bpf::JEQ_K, 1, 0, AUDIT_ARCH),
        insn(bpf::RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        insn(bpf::LD_ABS_W, 0, 0, 0),
    ]
}

/// Classic BPF for seccomp, as far as stockade's hand-written programs
/// need it.
pub(crate) mod bpf {
    // The hand-written programs read an argument's low word (a C int) at
    // the first four bytes of its `seccomp_data.args` slot: little-endian
    // only (x86_64 and aarch64 as Linux runs them).
    const _: () = assert!(
        cfg!(target_endian = "little"),
        "the seccomp programs assume little-endian argument words"
    );

    pub(crate) const LD_ABS_W: u16 = 0x20;
    pub(crate) const JEQ_K: u16 = 0x15;
    pub(crate) const JGE_K: u16 = 0x35;
    pub(crate) const JSET_K: u16 = 0x45;
    pub(crate) const JA: u16 = 0x05;
    pub(crate) const RET_K: u16 = 0x06;

    /// A place in a program being written, bound once.
    #[derive(Clone, Copy)]
    pub(crate) struct Label(usize);

    /// Where a conditional jump goes: the next instruction or a label.
    #[derive(Clone, Copy)]
    pub(crate) enum To {
        Next,
        L(Label),
    }

    /// A piece of program written with forward jumps to labels, resolved at
    /// the end (`finish` refuses a jump backwards, to an unbound label, or
    /// beyond a conditional jump's 8-bit reach), so no offset is counted by
    /// hand. Its jumps stay within it: it can follow any straight prologue.
    #[derive(Default)]
    pub(crate) struct Asm {
        code: Vec<(u16, To, To, u32)>,
        bound: Vec<Option<usize>>,
    }

    impl Asm {
        pub(crate) fn label(&mut self) -> Label {
            self.bound.push(None);
            Label(self.bound.len() - 1)
        }
        pub(crate) fn bind(&mut self, l: Label) {
            self.bound[l.0] = Some(self.code.len());
        }
        pub(crate) fn op(&mut self, code: u16, k: u32) {
            self.code.push((code, To::Next, To::Next, k));
        }
        pub(crate) fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) {
            self.code.push((code, jt, jf, k));
        }
        pub(crate) fn finish(self) -> Result<Vec<seccompiler::sock_filter>, String> {
            let mut out = Vec::with_capacity(self.code.len());
            for (pc, (code, jt, jf, k)) in self.code.iter().enumerate() {
                let off = |t: &To| -> Result<u8, String> {
                    let target = match t {
                        To::Next => return Ok(0),
                        To::L(l) => self.bound[l.0].ok_or("a jump to an unbound label")?,
                    };
                    target
                        .checked_sub(pc + 1)
                        .and_then(|d| u8::try_from(d).ok())
                        .ok_or_else(|| format!("a jump from {pc} to {target} is out of reach"))
                };
                out.push(super::insn(*code, off(jt)?, off(jf)?, *k));
            }
            Ok(out)
        }
    }

    /// Past this many numbers a range is split (a chain of this length
    /// costs no more than the split).
    const LEAF: usize = 4;

    /// Code that returns the action paired with the loaded number in
    /// `sorted` (ascending, distinct), and `otherwise` for every other
    /// number. Every path ends in a return, so pieces are laid one after
    /// another; each jump is forward and within its piece, and one beyond
    /// a conditional jump's 8-bit reach goes through an unconditional one.
    pub(crate) fn search(sorted: &[(u32, u32)], otherwise: u32) -> Vec<seccompiler::sock_filter> {
        if sorted.len() <= LEAF {
            let mut out = Vec::with_capacity(sorted.len() * 2 + 1);
            for (nr, action) in sorted {
                out.push(super::insn(JEQ_K, 0, 1, *nr));
                out.push(super::insn(RET_K, 0, 0, *action));
            }
            out.push(super::insn(RET_K, 0, 0, otherwise));
            return out;
        }
        let (below, from) = sorted.split_at(sorted.len() / 2);
        let low = search(below, otherwise);
        let high = search(from, otherwise);
        let mut out = Vec::with_capacity(low.len() + high.len() + 2);
        match u8::try_from(low.len()) {
            // At or above the pivot: over the lower half.
            Ok(skip) => out.push(super::insn(JGE_K, skip, 0, from[0].0)),
            Err(_) => {
                out.push(super::insn(JGE_K, 0, 1, from[0].0));
                out.push(super::insn(
                    JA,
                    0,
                    0,
                    u32::try_from(low.len()).unwrap_or(u32::MAX),
                ));
            }
        }
        out.extend(low);
        out.extend(high);
        out
    }
}

/// Families a socket may have, per network profile; every other family
/// (AF_VSOCK to the hypervisor host, AF_PACKET, AF_BLUETOOTH, AF_CAN,
/// AF_ALG, AF_XDP, ...) is refused wherever the network is not the host's.
/// AF_UNIX has its own rules (Landlock resolve_unix, or the Unix filter).
pub mod families {
    /// `deny`: Unix sockets and the two netlink protocols below.
    pub const DENY: &[i32] = &[libc::AF_UNIX, libc::AF_NETLINK];
    /// `allow-listed` under Landlock: plus TCP (Landlock governs its ports).
    pub const TCP: &[i32] = &[
        libc::AF_UNIX,
        libc::AF_NETLINK,
        libc::AF_INET,
        libc::AF_INET6,
    ];
    /// Inside bwrap's private network namespace (`deny` and `allow-listed`):
    /// the IP families reach only the namespace's own loopback, so every
    /// type stays; the rest is refused as above.
    pub const PRIVATE: &[i32] = &[
        libc::AF_UNIX,
        libc::AF_NETLINK,
        libc::AF_INET,
        libc::AF_INET6,
    ];
    /// The netlink protocols kept: NETLINK_ROUTE (0: `ip addr`, getaddrinfo's
    /// AI_ADDRCONFIG, interface lookups) and NETLINK_SOCK_DIAG (4: `ss`).
    /// Every change they could request needs CAP_NET_ADMIN, which the run
    /// has dropped, so what is left is reading. Audit, uevents, netfilter,
    /// generic netlink (nl80211, ...) and the rest are refused.
    pub const NETLINK_PROTOCOLS: &[u64] = &[0, 4];
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// This build's `seccomp_data.arch`, for other modules' emulated runs.
    pub(crate) const AUDIT_ARCH_FOR_TESTS: u32 = AUDIT_ARCH;

    const LISTS: [(&str, &str); 2] = [
        ("x86_64", include_str!("syscalls/x86_64.txt")),
        ("aarch64", include_str!("syscalls/aarch64.txt")),
    ];

    #[test]
    fn every_syscall_of_both_architectures_has_a_verdict() {
        let mut missing = Vec::new();
        for (arch, list) in LISTS {
            let calls: Vec<_> = parse(list).collect();
            assert!(
                calls.len() > 300,
                "{arch}: only {} calls parsed",
                calls.len()
            );
            for (nr, name) in calls {
                if verdict(name).is_none() {
                    missing.push(format!("{arch} {nr} {name}"));
                }
            }
        }
        assert!(missing.is_empty(), "no verdict for: {missing:?}");
    }

    #[test]
    fn every_name_is_a_syscall_listed_once_with_a_reason() {
        let known: Vec<&str> = LISTS
            .iter()
            .flat_map(|(_, l)| parse(l))
            .map(|c| c.1)
            .collect();
        let mut seen = Vec::new();
        for group in TABLE {
            assert!(group.reason.len() > 20, "{:?}", group.names);
            for name in group.names {
                assert!(known.contains(name), "{name} is in no syscall list");
                assert!(!seen.contains(name), "{name} has two verdicts");
                seen.push(*name);
            }
        }
    }

    #[test]
    fn the_host_numbers_are_what_the_table_says_of_each_name() {
        let by_lookup: Vec<(i64, Verdict)> = parse(HOST_LIST)
            .filter_map(|(nr, name)| verdict(name).map(|v| (nr, v)))
            .collect();
        assert!(by_lookup.len() > 300);
        assert_eq!(numbers(|_| true), by_lookup);
        let governed = numbers(|v| v == Verdict::Governed);
        assert!(!governed.is_empty());
        assert!(governed.iter().all(|(_, v)| *v == Verdict::Governed));
    }

    #[test]
    fn the_refusing_program_names_every_refused_number() {
        let p = always_program();
        let refused = numbers(|v| matches!(v, Verdict::Refuse(_)));
        assert!(refused.len() > 50);
        for (nr, _) in &refused {
            assert!(
                p.iter().any(|i| i.code == 0x15 && i64::from(i.k) == *nr),
                "{nr}"
            );
        }
        assert!(p.len() < 4096);
    }

    /// Runs `p` as the kernel would on one call: its return value.
    pub(crate) fn run(p: &[seccompiler::sock_filter], arch: u32, nr: u32) -> u32 {
        run_with(p, arch, nr, [0; 6])
    }

    /// `run` with the call's arguments (little-endian `seccomp_data`):
    /// the instructions stockade's programs and seccompiler's use.
    pub(crate) fn run_with(
        p: &[seccompiler::sock_filter],
        arch: u32,
        nr: u32,
        args: [u64; 6],
    ) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                0 => nr,
                4 => arch,
                o if (16..64).contains(&o) && o % 4 == 0 => {
                    let a = args[((o - 16) / 8) as usize];
                    if o % 8 == 0 {
                        a as u32
                    } else {
                        (a >> 32) as u32
                    }
                }
                o => panic!("unexpected load at {o}"),
            }
        };
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = &p[pc];
            pc += 1;
            let jump = |c: bool| usize::from(if c { i.jt } else { i.jf });
            match i.code {
                bpf::LD_ABS_W => acc = word(i.k),
                bpf::JEQ_K => pc += jump(acc == i.k),
                bpf::JGE_K => pc += jump(acc >= i.k),
                0x25 => pc += jump(acc > i.k),
                bpf::JSET_K => pc += jump(acc & i.k != 0),
                0x54 => acc &= i.k,
                bpf::JA => pc += i.k as usize,
                bpf::RET_K => return i.k,
                c => panic!("unexpected instruction {c:#x}"),
            }
        }
    }

    #[test]
    fn the_refusing_program_answers_every_number_as_the_table_says() {
        let p = always_program();
        let table: std::collections::HashMap<u32, Verdict> = numbers(|_| true)
            .into_iter()
            .map(|(nr, v)| (u32::try_from(nr).unwrap(), v))
            .collect();
        let mut refused = 0;
        for nr in 0..2048u32 {
            let want = match table.get(&nr) {
                Some(Verdict::Refuse(e)) => {
                    refused += 1;
                    errno(*e)
                }
                _ => libc::SECCOMP_RET_ALLOW,
            };
            assert_eq!(run(&p, AUDIT_ARCH, nr), want, "{nr}");
            if let Some(bit) = X32_BIT {
                assert_eq!(
                    run(&p, AUDIT_ARCH, nr | bit),
                    errno(libc::ENOSYS),
                    "x32 {nr}"
                );
            }
            // Another architecture's entry dies whatever the number.
            assert_eq!(
                run(&p, AUDIT_ARCH ^ 1, nr),
                libc::SECCOMP_RET_KILL_PROCESS,
                "{nr}"
            );
        }
        assert!(refused > 50);
        assert_eq!(run(&p, AUDIT_ARCH, u32::MAX >> 2), libc::SECCOMP_RET_ALLOW);
    }

    #[test]
    fn the_search_finds_each_number_of_any_table_shape() {
        // Long enough for jumps beyond a conditional's 8-bit reach.
        for len in [0usize, 1, 4, 5, 9, 64, 300, 700] {
            let sorted: Vec<(u32, u32)> = (0..len as u32).map(|i| (i * 3 + 1, 1000 + i)).collect();
            let mut p = vec![insn(bpf::LD_ABS_W, 0, 0, 0)];
            p.extend(bpf::search(&sorted, 7));
            for nr in 0..(len as u32 * 3 + 5) {
                let want = if nr % 3 == 1 && nr / 3 < len as u32 {
                    1000 + nr / 3
                } else {
                    7
                };
                assert_eq!(run(&p, 0, nr), want, "len {len} nr {nr}");
            }
            assert!(p.len() < 4096);
        }
    }

    #[test]
    fn io_uring_is_refused_everywhere() {
        for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert_eq!(verdict(name), Some(Verdict::Refuse(libc::ENOSYS)));
        }
    }
}
