//! Descriptors: the ones the caller passes in (grants, the status
//! channel), the paths opened for rules, and what the command inherits.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, fcntl_getfl};
use rustix::io::{Errno, FdFlags, fcntl_setfd};

use crate::args::fd_number;
use crate::status::{OrFail, fail, usage};
use crate::sys;

/// Takes ownership of descriptor `n`, passed in by the caller, and flags
/// it close-on-exec at once so the command can never inherit it.
pub(crate) fn take_inherited_fd(option: &str, n: RawFd) -> Result<OwnedFd, String> {
    if !sys::fd_is_open(n) {
        return Err(format!("{option} {n}: descriptor {n} is not open"));
    }
    let fd = sys::own_inherited_fd(n);
    fcntl_setfd(&fd, FdFlags::CLOEXEC)
        .map_err(|e| format!("{option} {n}: cannot set close-on-exec: {e}"))?;
    Ok(fd)
}

/// The status channel: the caller's write end of a pipe.
pub(crate) fn take_status_fd(value: &OsString) -> OwnedFd {
    let option = "--status-fd";
    let n = fd_number(&option, value).unwrap_or_else(|why| usage(why));
    let fd = take_inherited_fd(option, n).unwrap_or_else(|why| usage(why));
    let writable = fcntl_getfl(&fd).is_ok_and(|flags| {
        let mode = flags & OFlags::ACCMODE;
        !flags.contains(OFlags::PATH) && (mode == OFlags::WRONLY || mode == OFlags::RDWR)
    });
    if !writable {
        usage(format_args!(
            "{option} {n}: descriptor {n} is not open for writing"
        ));
    }
    fd
}

/// Opened (O_PATH) before any privilege is dropped, and the rule is keyed
/// to this fd, so what is granted is what we stat'ed, not whatever the path
/// names later.
pub(crate) fn open_path(path: &Path, what: &str) -> OwnedFd {
    let shown = path.display();
    match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR) => fail(format_args!("{what} does not exist: {shown}")),
        Err(e) => fail(format_args!(
            "cannot open {what} {shown}: {}",
            io::Error::from(e)
        )),
    }
}

/// A descriptor inherited without O_CLOEXEC (our caller's parent's
/// jobserver, a log file, a directory) would reach the child, and a write
/// through an fd opened before the ruleset is never checked by Landlock:
/// an open fd to a file outside is a way out. Only 0, 1 and 2 go through.
pub(crate) fn close_inherited_fds() {
    if sys::cloexec_from_3() {
        return;
    }
    // Kernels before 5.11: flag each open fd by hand.
    let fds: Vec<i32> = fs::read_dir("/proc/self/fd")
        .or_fail("cannot list /proc/self/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        sys::set_cloexec(fd);
    }
}

/// Under deny and allow-listed only an approved listener may accept
/// (accept stays allowed in a supervised run because every listen is
/// judged): a listening inet socket handed in on stdin, stdout or
/// stderr (the only descriptors the command inherits) was judged by
/// nobody, so such a run is refused. An AF_UNIX one is the caller's
/// own grant, as with any descriptor it passes.
pub(crate) fn refuse_inherited_listeners() {
    for n in 0..3 {
        // Not open: nothing inherited there.
        let refused = sys::with_std_fd(n, |fd| {
            let listening = rustix::net::sockopt::socket_acceptconn(fd).unwrap_or(false);
            listening
                && !matches!(
                    rustix::net::sockopt::socket_domain(fd),
                    Ok(rustix::net::AddressFamily::UNIX)
                )
        });
        if refused == Some(true) {
            fail(format_args!(
                "descriptor {n} is a listening network socket: under --net-deny and --net-port no listener may be inherited (a peer anywhere could connect to it)"
            ));
        }
    }
}

/// Checked to exist in every mode, so a typo fails the same on every
/// kernel; they are rules only where resolve_unix is handled.
pub(crate) fn open_sockets(paths: &[PathBuf]) -> Vec<OwnedFd> {
    paths.iter().map(|p| open_path(p, "socket path")).collect()
}
