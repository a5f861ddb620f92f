//! The launcher's one error path: a single `landlock-run: ...` line, exit
//! 125, and the same record on the status channel (`--status-fd`).

use std::fmt::Display;
use std::os::fd::OwnedFd;
use std::process::exit;
use std::sync::{Mutex, PoisonError};

use rustix::io::Errno;
use stockade_core::status::RunnerStatus;

use crate::args::USAGE;

pub(crate) const FAILURE: i32 = 125;
/// The status channel (`--status-fd`), once taken. Every failure and the
/// start are reported on it; it is close-on-exec, so the command never
/// holds it, and a supervisor lets go of its copy once the command runs.
pub(crate) static STATUS: Mutex<Option<OwnedFd>> = Mutex::new(None);

pub(crate) fn release_status() {
    STATUS.lock().unwrap_or_else(PoisonError::into_inner).take();
}

/// Every launcher failure is exactly one line and 125; callers tell it from
/// a child's own 125 by that line, so a message must never span lines. The
/// same message goes to the status channel, where a caller need not guess.
pub(crate) fn fail_args(msg: std::fmt::Arguments<'_>) -> ! {
    fail(msg)
}

pub(crate) fn fail(msg: impl Display) -> ! {
    let line = msg.to_string().replace(['\n', '\r'], " ");
    eprintln!("landlock-run: {line}");
    report(&RunnerStatus::failure_record(&line));
    exit(FAILURE)
}

pub(crate) fn usage(why: impl Display) -> ! {
    fail(format_args!("{USAGE} ({why})"))
}

/// Best effort by nature: a caller that closed its end just gets nothing
/// (EPIPE; std ignores SIGPIPE in this process). Records are far below
/// PIPE_BUF, so a record is never interleaved.
pub(crate) fn report(record: &str) {
    let status = STATUS.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(fd) = status.as_ref() else { return };
    let mut rest = record.as_bytes();
    while !rest.is_empty() {
        match rustix::io::write(fd, rest) {
            Ok(0) => return,
            Ok(n) => rest = rest.get(n..).unwrap_or_default(),
            Err(Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

/// `result.or_fail(what)`: the launcher's only error path, `what: error`.
pub(crate) trait OrFail<T> {
    fn or_fail(self, what: impl Display) -> T;
}
impl<T, E: Display> OrFail<T> for Result<T, E> {
    fn or_fail(self, what: impl Display) -> T {
        self.unwrap_or_else(|e| fail(format_args!("{what}: {e}")))
    }
}
