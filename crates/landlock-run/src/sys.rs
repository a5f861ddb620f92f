//! Every `unsafe` of the crate: the calls no safe wrapper offers, for the
//! launcher (F_GETFD, taking an inherited descriptor, fork, close_range,
//! TIOCNOTTY) and for the supervisor (the seccomp listener and its ioctls,
//! reading the child's memory, signals and waits, the inode-flag ioctl).
//! Each function states what its callers must uphold where the proof is not
//! local; each block has its SAFETY note. Everything else is safe code.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use rustix::io::Errno;

/// Whether descriptor `n` is open in this process.
pub(crate) fn fd_is_open(n: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags; it touches no
    // memory and merely fails with EBADF for a number that is not open.
    unsafe { libc::fcntl(n, libc::F_GETFD) >= 0 }
}

/// Takes ownership of inherited descriptor `n`. Only for `fds::take_inherited_fd`,
/// which has just checked that `n` is open.
pub(crate) fn own_inherited_fd(n: RawFd) -> OwnedFd {
    // SAFETY: `n` is open (checked by the caller just before; this process
    // is single threaded) and is an inherited descriptor nothing else owns:
    // std owns only 0-2 and `n` >= 3 (fd_number), and every take happens
    // before this process opens anything itself (main, then the start of
    // run), so `n` cannot be one of ours. parse() rejects a number given
    // twice, so this OwnedFd is its only owner and the only one to close it.
    unsafe { OwnedFd::from_raw_fd(n) }
}

/// `f` on std's descriptor `n` (0-2), if it is open.
pub(crate) fn with_std_fd<R>(n: RawFd, f: impl FnOnce(BorrowedFd<'_>) -> R) -> Option<R> {
    if !(0..3).contains(&n) || !fd_is_open(n) {
        return None;
    }
    // SAFETY: `n` (0-2, std's) is open (just checked; this process is
    // single threaded, so nothing closes it meanwhile), and the borrow
    // lives only for `f`, which gets a BorrowedFd and so can neither close
    // nor move it.
    let fd = unsafe { BorrowedFd::borrow_raw(n) };
    Some(f(fd))
}

/// fork(2): -1, 0 in the child, the child's pid in the parent. Only while
/// this process is single threaded, so that the child may run any code:
/// `bridge::start` (close-fds mode starts no thread before it) and
/// `supervise::run` (the launcher starts no thread before supervision).
pub(crate) fn fork() -> libc::pid_t {
    // SAFETY: this process is single threaded here (both callers, above),
    // so the child may run any code after fork.
    unsafe { libc::fork() }
}

/// Closes every descriptor from 3 up but `keep`: the proxy bridge's child,
/// which then holds its listener only (not the status channel, not a
/// grant). Nothing this process still uses may be among the others.
pub(crate) fn close_all_from_3_but(keep: &[BorrowedFd<'_>]) {
    let mut keep: Vec<RawFd> = keep.iter().map(AsRawFd::as_raw_fd).collect();
    keep.sort_unstable();
    let close = |first: RawFd, last: libc::c_uint| {
        // SAFETY: close_range closes descriptors only; the ones this
        // process still needs (`keep`) are outside every range closed, and
        // no other thread exists that could be using the others (the
        // bridge's child, forked from a single-threaded process, before it
        // starts any).
        unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first as libc::c_uint,
                last,
                0 as libc::c_uint,
            );
        }
    };
    let mut from: RawFd = 3;
    for k in keep.into_iter().filter(|k| *k >= 3) {
        if k > from {
            close(from, (k - 1) as libc::c_uint);
        }
        from = from.max(k + 1);
    }
    close(from, libc::c_uint::MAX);
}

/// Flags every descriptor from 3 up close-on-exec (close_range with
/// CLOSE_RANGE_CLOEXEC); false where the kernel lacks it (before 5.11).
pub(crate) fn cloexec_from_3() -> bool {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing and
    // touches no memory; it only flags fds >= 3 close-on-exec, and this
    // process holds no fd it still needs across the exec that follows.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        )
    };
    rc == 0
}

/// Flags descriptor `fd` close-on-exec, by number; one that closed in the
/// meantime is ignored.
pub(crate) fn set_cloexec(fd: RawFd) {
    // SAFETY: F_SETFD only changes the fd's close-on-exec flag; an fd
    // that closed since the caller listed it (the read_dir handle) yields
    // EBADF, which is harmless and ignored.
    let _ = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}

/// Whether this process leads its session. Not rustix's `getsid`: in a
/// pid namespace whose session leader lies outside it (a container entered
/// with `exec`, CI's case) the kernel answers 0, which rustix takes for a
/// pid that cannot be 0 (a debug assertion, a bad `Pid` in release).
pub(crate) fn leads_session() -> bool {
    // SAFETY: getsid(0) asks about this process; it reads no memory of
    // ours and only returns a number (or -1).
    let sid = unsafe { libc::getsid(0) };
    sid > 0 && sid == std::process::id() as libc::pid_t
}

/// TIOCNOTTY on `tty`: this process gives up its controlling terminal.
pub(crate) fn tiocnotty(tty: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: TIOCNOTTY takes no argument and only changes this process's
    // controlling-terminal association; `tty` is an open fd we own for the
    // whole call.
    let rc = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCNOTTY) };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Installs `program` with SECCOMP_FILTER_FLAG_NEW_LISTENER: the new
/// user-notification listener. no_new_privs must be set (Landlock's).
pub(crate) fn seccomp_new_listener(program: &seccompiler::BpfProgram) -> io::Result<OwnedFd> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(io::Error::other)?,
        filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    // SAFETY: `fprog` points to `program`, a live vector of sock_filter
    // (seccompiler's type is #[repr(C)] with libc's layout) that outlives the
    // call; the kernel copies the program. no_new_privs is set (Landlock).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(rc).map_err(io::Error::other)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor of ours,
    // owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// ioctl(fd, request, arg) where the request's argument type is T: private,
/// so that every request it is called with is one of the notification
/// ioctls below, each with its own type.
fn ioctl_ptr<T>(fd: BorrowedFd<'_>, request: libc::Ioctl, arg: *mut T) -> io::Result<i32> {
    // SAFETY: every caller passes a request whose argument type is T (the
    // seccomp notification ioctls, per linux/seccomp.h), and `arg` points to
    // a live, properly aligned T for the duration of the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// SECCOMP_IOCTL_NOTIF_RECV: blocks for the next notification.
pub(crate) fn notif_recv(listener: &OwnedFd) -> io::Result<libc::seccomp_notif> {
    // SAFETY: seccomp_notif is plain old data; the kernel requires it
    // zeroed on entry.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    ioctl_ptr(listener.as_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n)?;
    Ok(n)
}

/// SECCOMP_IOCTL_NOTIF_ID_VALID: the thread still waits in call `id`.
pub(crate) fn notif_id_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    ioctl_ptr(
        listener.as_fd(),
        libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
        &mut id,
    )
    .is_ok()
}

/// SECCOMP_IOCTL_NOTIF_SET_FLAGS with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
/// (Linux 6.6): the notifying thread and the worker that answers hand the
/// CPU to each other, as in a synchronous call, instead of a wake-up on
/// another CPU. Fails (EINVAL) on older kernels, which is harmless.
pub(crate) fn notif_sync_wake_up(listener: &OwnedFd) -> io::Result<()> {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;
    // SAFETY: SET_FLAGS takes its flags by value, not through a pointer:
    // the kernel reads no memory of ours and changes only how this
    // listener wakes its waiters.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SECCOMP_IOCTL_NOTIF_ADDFD.
pub(crate) fn notif_addfd(
    listener: &OwnedFd,
    add: &mut libc::seccomp_notif_addfd,
) -> io::Result<i32> {
    ioctl_ptr(listener.as_fd(), libc::SECCOMP_IOCTL_NOTIF_ADDFD, add)
}

/// SECCOMP_IOCTL_NOTIF_SEND.
pub(crate) fn notif_send(
    listener: &OwnedFd,
    resp: &mut libc::seccomp_notif_resp,
) -> io::Result<i32> {
    ioctl_ptr(listener.as_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, resp)
}

/// poll(2) of `fd` for `events` with a zero timeout: (rc, revents).
pub(crate) fn poll_now(fd: &OwnedFd, events: libc::c_short) -> (libc::c_int, libc::c_short) {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call; a zero timeout never blocks.
    let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
    (rc, pfd.revents)
}

/// process_vm_readv of `buf.len()` bytes at `addr` in thread `tid`: the
/// number of bytes read, or -1 (errno set).
pub(crate) fn process_vm_read(tid: u32, addr: u64, buf: &mut [u8]) -> isize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, which we own mutably for the call;
    // `remote` is only read by the kernel in the other process's address
    // space, where a bad address is an error (EFAULT), never our memory.
    unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) }
}

/// A governed inode-flag ioctl on `file` with our copy of the argument;
/// ENOTTY unless `cmd` is one of them and `arg` exactly its size.
pub(crate) fn ioctl_set(file: &OwnedFd, cmd: u32, arg: &mut [u8]) -> Result<i32, Errno> {
    if crate::supervise::ioctl_arg_len(cmd) != Some(arg.len()) {
        return Err(Errno::NOTTY);
    }
    // SAFETY: `cmd` is one of the set-only inode ioctls whose argument is
    // exactly `arg.len()` bytes (checked above against the same table); the
    // kernel only reads that buffer, which we own for the call.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            cmd as libc::Ioctl,
            arg.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        Err(Errno::from_io_error(&e).unwrap_or(Errno::IO))
    } else {
        Ok(rc)
    }
}

/// A signal set of `signals`.
pub(crate) fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it and
    // sigaddset only sets bits for valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in signals {
            libc::sigaddset(&mut set, *sig);
        }
        set
    }
}

/// Blocks `set` in this thread (and the threads it starts).
pub(crate) fn block_signals(set: &libc::sigset_t) {
    // SAFETY: `set` is initialised; the old mask is not wanted (null).
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
}

/// sigwaitinfo(2) on `set`: the signal and its si_code, None on error.
pub(crate) fn sigwaitinfo(set: &libc::sigset_t) -> Option<(i32, i32)> {
    // SAFETY: siginfo_t is plain data filled by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` and `info` are valid for the call.
    let sig = unsafe { libc::sigwaitinfo(set, &mut info) };
    (sig >= 0).then_some((sig, info.si_code))
}

/// kill(2).
pub(crate) fn kill(pid: libc::pid_t, sig: i32) {
    // SAFETY: kill takes a pid and a signal number; no memory.
    unsafe { libc::kill(pid, sig) };
}

/// raise(3).
pub(crate) fn raise(sig: i32) {
    // SAFETY: raise only sends a signal to this process.
    unsafe { libc::raise(sig) };
}

/// waitpid(2): its return value and the wait status.
pub(crate) fn waitpid(pid: libc::pid_t, options: i32) -> (libc::pid_t, i32) {
    let mut status = 0;
    // SAFETY: waitpid writes the status into our local.
    let rc = unsafe { libc::waitpid(pid, &mut status, options) };
    (rc, status)
}

/// Dies of `sig` as the command did: no core (the command's own was
/// already written), the default action, the signal unblocked and raised.
/// Returns only if the signal does not end the process.
pub(crate) fn die_of(sig: i32) {
    let limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on this process; `limit` and the
    // emptied set are valid for each call. No core of the supervisor is
    // wanted, the command's own was already written.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &limit);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Every descriptor above stderr that is not placed is closed in the
/// child: the caller may hold one without close-on-exec (an agent started
/// with a stray descriptor by its own parent), and the runner must not get
/// it (bwrap hands what it holds to the command). glibc runs the actions
/// in order, so this follows the dup2s; closing a number that is not open
/// is no error there.
#[cfg(target_env = "gnu")]
fn close_the_rest(
    actions: &mut libc::posix_spawn_file_actions_t,
    dup2: &[(BorrowedFd<'_>, RawFd)],
) -> io::Result<()> {
    let check = |r: libc::c_int| match r {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    };
    let top = dup2.iter().map(|(_, to)| *to).max().unwrap_or(2).max(2);
    for n in (3..top).filter(|n| !dup2.iter().any(|(_, to)| to == n)) {
        // SAFETY: `actions` is initialised; `n` is a number, nothing borrowed.
        check(unsafe { libc::posix_spawn_file_actions_addclose(actions, n) })?;
    }
    // SAFETY: as above; the child closes every number from `top + 1` up.
    check(unsafe { libc::posix_spawn_file_actions_addclosefrom_np(actions, top + 1) })
}

/// posix_spawn(3) for `crate::spawn`: glibc starts the child with
/// `clone(CLONE_VM | CLONE_VFORK)`, so the caller's address space is never
/// copied, and reports a failed exec as the return value. The file actions
/// run in order in the child: each `dup2` (which clears close-on-exec on
/// its target), the closes of every other number above stderr, then the
/// `chdir`. The caller upholds that no `dup2`
/// source is also an earlier action's target (`crate::spawn` lifts every
/// source above every target first).
#[cfg(target_env = "gnu")]
pub(crate) fn posix_spawn(
    program: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    envp: &[std::ffi::CString],
    cwd: &std::ffi::CStr,
    dup2: &[(BorrowedFd<'_>, RawFd)],
    own_group: bool,
) -> io::Result<libc::pid_t> {
    use std::ptr;

    fn check(r: libc::c_int) -> io::Result<()> {
        match r {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }

    /// Destroys what `init` made on every way out.
    struct Actions(libc::posix_spawn_file_actions_t);
    impl Drop for Actions {
        fn drop(&mut self) {
            // SAFETY: initialised by posix_spawn_file_actions_init (the only
            // way one is built below) and destroyed once, here.
            unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
        }
    }
    struct Attr(libc::posix_spawnattr_t);
    impl Drop for Attr {
        fn drop(&mut self) {
            // SAFETY: initialised by posix_spawnattr_init, destroyed once.
            unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
        }
    }

    let ptrs = |v: &[std::ffi::CString]| -> Vec<*mut libc::c_char> {
        v.iter()
            .map(|s| s.as_ptr().cast_mut())
            .chain(std::iter::once(ptr::null_mut()))
            .collect()
    };
    let (argv, envp) = (ptrs(argv), ptrs(envp));

    // SAFETY: a zeroed posix_spawn_file_actions_t is only storage; init
    // makes it valid before any other use, and the Drop guard exists only
    // once init succeeded.
    let mut actions = unsafe {
        let mut raw: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        check(libc::posix_spawn_file_actions_init(&mut raw))?;
        Actions(raw)
    };
    for (from, to) in dup2 {
        // SAFETY: `actions` is initialised; the descriptors are numbers the
        // child will dup2 (the borrow keeps `from` open until the spawn).
        check(unsafe {
            libc::posix_spawn_file_actions_adddup2(&mut actions.0, from.as_raw_fd(), *to)
        })?;
    }
    close_the_rest(&mut actions.0, dup2)?;
    // SAFETY: `actions` is initialised; glibc copies the path.
    check(unsafe { libc::posix_spawn_file_actions_addchdir_np(&mut actions.0, cwd.as_ptr()) })?;

    // SAFETY: as for the actions above: storage, made valid by init.
    let mut attr = unsafe {
        let mut raw: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawnattr_init(&mut raw))?;
        Attr(raw)
    };
    // The child starts as std's spawn leaves it: no signal blocked, SIGPIPE
    // (which Rust ignores) back to its default; handlers are reset by exec.
    let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
    if own_group {
        flags |= libc::POSIX_SPAWN_SETPGROUP;
    }
    // SAFETY: `attr` is initialised; the sigsets are local values that
    // sigemptyset makes valid before use, and glibc copies them.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        check(libc::posix_spawnattr_setsigmask(&mut attr.0, &none))?;
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &pipe))?;
        check(libc::posix_spawnattr_setpgroup(&mut attr.0, 0))?;
        // The flags fit a short: the largest glibc defines is 0x100.
        check(libc::posix_spawnattr_setflags(
            &mut attr.0,
            flags as libc::c_short,
        ))?;
    }
    let mut pid: libc::pid_t = 0;
    // SAFETY: `program`, every argv and envp entry are NUL-terminated C
    // strings that outlive the call (borrowed from the caller), and both
    // arrays end with a null pointer; the actions and attributes are
    // initialised. posix_spawn does not keep any of them.
    check(unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attr.0,
            argv.as_ptr(),
            envp.as_ptr(),
        )
    })?;
    Ok(pid)
}

/// Runs `f` in a child process that shares this one's memory and
/// descriptor table while the calling thread waits for it
/// (`clone(CLONE_VM | CLONE_VFORK | CLONE_FILES)`, the way glibc's
/// posix_spawn starts its child): a process of its own, so it may change
/// its namespaces and credentials (`setns` into a user namespace refuses
/// a process of more than one thread), without copying the address
/// space. A descriptor `f` opens is this process's too.
///
/// `f` must make system calls only: no allocation, no lock, no panic.
/// The other threads of this process run on beside the child, in the same
/// memory, and may hold the allocator's locks. Every signal is blocked in
/// the child, so no handler of ours runs on its stack.
pub(crate) fn in_vfork_child<F: FnMut()>(f: &mut F) -> io::Result<()> {
    extern "C" fn trampoline<F: FnMut()>(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `&mut F` passed to clone below, alive and
        // not otherwise used while the parent's thread is suspended
        // (CLONE_VFORK) until this child exits.
        let f = unsafe { &mut *arg.cast::<F>() };
        f();
        0
    }
    const STACK: usize = 64 * 1024;
    let mut stack = vec![0u8; STACK];
    // The stack grows down on every architecture Linux runs this on; its
    // top, aligned to 16 as every ABI here asks.
    let top = (stack.as_mut_ptr() as usize + STACK) & !15;
    // SAFETY: sigset_t is plain data; sigfillset initialises it fully.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is a valid sigset_t to fill.
    unsafe { libc::sigfillset(&mut all) };
    // SAFETY: both sets are valid; this changes only this thread's mask,
    // restored below on every path.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) };
    // SAFETY: the child runs `trampoline` on `stack`, which outlives it
    // (this thread is suspended until the child exits: CLONE_VFORK), with
    // `f` borrowed for that time only. No exit signal: it is waited for
    // below with __WALL and raises no SIGCHLD another waiter could take.
    let pid = unsafe {
        libc::clone(
            trampoline::<F>,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES,
            (f as *mut F).cast::<libc::c_void>(),
        )
    };
    let cloned = io::Error::last_os_error();
    // SAFETY: `old` was filled by the call above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid == -1 {
        return Err(cloned);
    }
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child, writing its status to a local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if r == pid {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The user namespace that owns the namespace `ns` (`NS_GET_USERNS`).
pub(crate) fn namespace_owner(ns: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // _IO(NSIO = 0xb7, 1)
    namespace_ioctl(ns, 0xb701)
}

/// The network namespace of the process `pidfd` refers to
/// (`PIDFD_GET_NET_NAMESPACE`, Linux 6.11): `ENOTTY` on a kernel without
/// it.
pub(crate) fn pidfd_net_namespace(pidfd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // _IO(PIDFS_IOCTL_MAGIC = 0xff, 4)
    namespace_ioctl(pidfd, 0xff04)
}

/// An `_IO` ioctl of nsfs or pidfs that answers with a new descriptor of a
/// namespace (close-on-exec).
fn namespace_ioctl(fd: BorrowedFd<'_>, request: libc::c_ulong) -> io::Result<OwnedFd> {
    // SAFETY: both requests take no argument (it is passed, as 0: pidfs
    // refuses any other with EINVAL, and a variadic call without it would
    // pass whatever the register held) and return a new descriptor or -1;
    // no memory of ours is read or written.
    let n = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor the kernel just gave us, owned by no one.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}
