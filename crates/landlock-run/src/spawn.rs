//! Starting a launcher without copying the caller's address space: the
//! spawn seam of the SDK and `stockade exec` for a confined command, whose
//! runner finds held descriptors at fixed numbers. std can place only
//! stdin, stdout and stderr without a `pre_exec` hook, and a hook makes it
//! fork; this places every descriptor with posix_spawn's file actions
//! (glibc: `clone(CLONE_VM | CLONE_VFORK)`), so the cost does not grow with
//! the caller's memory (an agent process of a gigabyte forks in
//! milliseconds).
//!
//! The child holds exactly the descriptors placed here, plus whatever the
//! caller's own 0-2 are where none is placed on them: every other number
//! is closed in the child, so one the caller holds without close-on-exec
//! (Rust opens none, but an agent may inherit one from its parent) never
//! reaches the runner.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What to start. `program` is absolute (no `PATH` look-up); `fds` are the
/// caller's descriptors and the numbers the child finds them at (0-2
/// included); a number not placed is inherited as it is (0-2) or closed.
pub struct Spawn<'a> {
    pub program: &'a Path,
    /// argv[1..].
    pub args: &'a [OsString],
    /// The child's whole environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    pub fds: Vec<(OwnedFd, RawFd)>,
    /// In a process group of its own (its pid), as `process_group(0)`.
    pub own_group: bool,
}

fn c(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} holds a NUL byte"),
        )
    })
}

fn os(s: &OsStr, what: &str) -> io::Result<CString> {
    c(s.as_bytes(), what)
}

/// Starts `spec`, returning the child's pid; the caller's copies of the
/// placed descriptors are closed when this returns. A failed exec (no such
/// file, not executable) is the error, as std's spawn reports it.
pub fn spawn(spec: Spawn<'_>) -> io::Result<u32> {
    if !spec.program.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program to spawn must be an absolute path",
        ));
    }
    let program = os(spec.program.as_os_str(), "the program")?;
    let argv = std::iter::once(Ok(program.clone()))
        .chain(spec.args.iter().map(|a| os(a, "an argument")))
        .collect::<io::Result<Vec<_>>>()?;
    let envp = spec
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            c(&kv, "an environment variable")
        })
        .collect::<io::Result<Vec<_>>>()?;
    let cwd = os(spec.cwd.as_os_str(), "the working directory")?;
    // Lifted above every target, so no dup2 overwrites a source that a
    // later one still reads (close-on-exec: the lifted copies end at exec).
    let above = spec.fds.iter().map(|(_, to)| *to).max().unwrap_or(2).max(2) + 1;
    let lifted = spec
        .fds
        .iter()
        .map(|(from, to)| Ok((rustix::io::fcntl_dupfd_cloexec(from, above)?, *to)))
        .collect::<io::Result<Vec<(OwnedFd, RawFd)>>>()?;
    drop(spec.fds);
    let dup2: Vec<_> = lifted.iter().map(|(f, to)| (f.as_fd(), *to)).collect();
    let pid = crate::sys::posix_spawn(&program, &argv, &envp, &cwd, &dup2, spec.own_group)?;
    // A pid is positive.
    Ok(pid.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    /// Runs `program args` with `fds` plus a pipe on stdout; its output.
    fn run(
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
        fds: Vec<(OwnedFd, RawFd)>,
    ) -> String {
        let (mut r, w) = std::io::pipe().unwrap();
        let mut all = vec![(OwnedFd::from(w), 1)];
        all.extend(fds);
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let pid = spawn(Spawn {
            program: Path::new(program),
            args: &args,
            env: env
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            cwd: Path::new("/"),
            fds: all,
            own_group: true,
        })
        .unwrap();
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let status = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
            .unwrap()
            .unwrap()
            .1;
        assert_eq!(status.exit_status(), Some(0), "{out}");
        out
    }

    #[test]
    fn sources_that_are_each_others_targets_land_where_asked() {
        let a: OwnedFd = std::fs::File::open("/etc/hostname").unwrap().into();
        let b: OwnedFd = std::fs::File::open("/etc/passwd").unwrap().into();
        let (na, nb) = (a.as_raw_fd(), b.as_raw_fd());
        // Swapped: a naive dup2 in order would put one file at both.
        let out = run(
            "/bin/sh",
            &[
                "-c",
                &format!("readlink /proc/self/fd/{na} /proc/self/fd/{nb}"),
            ],
            &[("PATH", "/usr/bin:/bin")],
            vec![(a, nb), (b, na)],
        );
        assert_eq!(out, "/etc/passwd\n/etc/hostname\n");
    }

    #[test]
    fn the_child_gets_exactly_its_environment_and_working_directory() {
        assert_eq!(
            run("/usr/bin/env", &[], &[("X", "1"), ("Y", "a=b")], vec![]),
            "X=1\nY=a=b\n"
        );
        assert_eq!(run("/bin/pwd", &[], &[], vec![]), "/\n");
    }

    #[test]
    fn the_child_leads_its_group_with_no_signal_blocked_or_sigpipe_ignored() {
        // The masks are read by the spawned process itself (`exec`): a
        // child reading its shell's status could catch the shell inside a
        // vfork, with every signal blocked until the child has exec'd.
        let out = run(
            "/bin/sh",
            &[
                "-c",
                "echo $$; cut -d' ' -f5 /proc/$$/stat; exec grep -E '^Sig(Blk|Ign)' /proc/self/status",
            ],
            &[],
            vec![],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], lines[1], "{out}");
        let mask = |name: &str| {
            let l = lines.iter().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(l.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{out}");
        // SIGPIPE is 13: bit 12. Rust ignores it in this process.
        assert_eq!(mask("SigIgn:") & (1 << 12), 0, "{out}");
    }

    #[test]
    fn a_failed_exec_is_the_error_and_a_relative_program_is_refused() {
        let spec = |program: &'static str| Spawn {
            program: Path::new(program),
            args: &[],
            env: vec![],
            cwd: Path::new("/"),
            fds: vec![],
            own_group: false,
        };
        let e = spawn(spec("/nonexistent/program")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = spawn(spec("sh")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = spawn(Spawn {
            cwd: Path::new("/nonexistent/dir"),
            ..spec("/bin/true")
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
