//! `landlock_run::spawn` closes every descriptor of the caller it does not
//! place, close-on-exec or not. Its own test binary with one test: the
//! strays are made in this process, and no other test's child may inherit
//! them meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::path::Path;

use landlock_run::spawn::{Spawn, spawn};
use rustix::io::{FdFlags, fcntl_dupfd_cloexec, fcntl_setfd};

/// `/etc/hostname` open at a number at least `from`, without close-on-exec.
fn stray(from: RawFd) -> OwnedFd {
    let file = std::fs::File::open("/etc/hostname").unwrap();
    let fd = fcntl_dupfd_cloexec(&file, from).unwrap();
    fcntl_setfd(&fd, FdFlags::empty()).unwrap();
    fd
}

#[test]
fn a_descriptor_the_caller_holds_without_close_on_exec_never_reaches_the_child() {
    // One stray below the highest placed number (a gap) and one above it.
    let (low, high) = (stray(3), stray(60));
    assert!(low.as_raw_fd() < 30 && high.as_raw_fd() >= 60);
    let (mut out, w) = std::io::pipe().unwrap();
    let placed: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let args: Vec<OsString> = vec![
        "-c".into(),
        "for f in /proc/self/fd/*; do t=$(readlink \"$f\") && echo \"${f##*/} $t\"; done".into(),
    ];
    let pid = spawn(Spawn {
        program: Path::new("/bin/sh"),
        args: &args,
        env: vec![],
        cwd: Path::new("/"),
        fds: vec![(w.into(), 1), (placed, 30)],
        own_group: false,
    })
    .unwrap();
    let mut seen = String::new();
    out.read_to_string(&mut seen).unwrap();
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
    assert!(
        seen.lines().any(|l| l == "30 /dev/null"),
        "the placed descriptor is missing: {seen}"
    );
    assert!(
        !seen.contains("/etc/hostname"),
        "a stray reached the child (strays {} and {}): {seen}",
        low.as_raw_fd(),
        high.as_raw_fd()
    );
}
