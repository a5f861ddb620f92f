//! Every `unsafe` of the launcher outside the supervisor: the few calls no
//! safe wrapper offers (F_GETFD, taking an inherited descriptor, fork,
//! close_range, TIOCNOTTY). Each function states what its callers must
//! uphold where the proof is not local; each block has its SAFETY note.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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
/// this process is single threaded (`bridge::start`, in close-fds mode,
/// before any thread), so that the child may run any code.
pub(crate) fn fork() -> libc::pid_t {
    // SAFETY: this process is single threaded (close-fds mode starts no
    // thread before this point, the one caller), so the child may run any
    // code.
    unsafe { libc::fork() }
}

/// Closes every descriptor from 3 up but `keep`: the proxy bridge's child,
/// which then holds its listener only (not the status channel, not a
/// grant). Nothing this process still uses may be among the others.
pub(crate) fn close_all_from_3_but(keep: &impl AsRawFd) {
    let keep = keep.as_raw_fd();
    // SAFETY: close_range closes descriptors only; the one this process
    // still needs (`keep`) is outside both ranges, and no other thread
    // exists that could be using the others (the bridge's child, forked
    // from a single-threaded process, before it starts any).
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            (keep - 1) as libc::c_uint,
            0 as libc::c_uint,
        );
        libc::syscall(
            libc::SYS_close_range,
            (keep + 1) as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
    }
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
