//! A terminal the command owns, and one pipe for two streams that name one
//! file.
//!
//! At a terminal (`stockade exec` typed into a shell) the command gets a
//! pseudo-terminal of its own: its slave is the command's stdin, stdout,
//! stderr and controlling terminal, so `bash` shows a prompt with job
//! control, `less` pages and `/dev/tty` is that terminal, never the
//! caller's. The caller keeps the master: it copies keystrokes in and the
//! window size over (`stockade-cli`), and the executor reads everything the
//! command shows from it, feeding the denial scanner as it feeds stderr.
//!
//! Without a terminal, a caller whose stdout and stderr are one file
//! (`2>&1 | tee log`) gets one pipe for both, so their order is kept.

use std::ffi::OsString;
use std::sync::Arc;

/// A pseudo-terminal for a command's runs (see the module docs). Clones
/// share it; requests compare equal when they name the same terminal.
#[derive(Clone)]
pub struct Terminal(Arc<imp::Pty>);

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Terminal")
    }
}

impl PartialEq for Terminal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Terminal {}

impl Terminal {
    /// A new pseudo-terminal (Linux; `Unsupported` elsewhere). Its master
    /// is non-blocking.
    pub fn open() -> std::io::Result<Self> {
        imp::Pty::open().map(|p| Self(Arc::new(p)))
    }
}

#[cfg(target_os = "linux")]
pub use imp::Winsize;

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

    use rustix::pty::OpenptFlags;

    pub use rustix::termios::Winsize;

    pub(crate) struct Pty {
        pub(crate) master: OwnedFd,
    }

    impl Pty {
        pub(super) fn open() -> io::Result<Self> {
            // NOCTTY: allocating it must not make it *our* controlling
            // terminal (a caller without one would otherwise acquire it).
            let master = rustix::pty::openpt(
                OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
            )?;
            rustix::pty::grantpt(&master)?;
            rustix::pty::unlockpt(&master)?;
            // Read through the runtime; the caller's keystroke writer waits
            // for room itself.
            rustix::io::ioctl_fionbio(&master, true)?;
            Ok(Self { master })
        }
    }

    impl super::Terminal {
        /// The master: write keystrokes to it, set the window size on it.
        pub fn master(&self) -> BorrowedFd<'_> {
            self.0.master.as_fd()
        }

        /// Give the command's terminal this size (the kernel signals
        /// SIGWINCH to its foreground job when it changes).
        pub fn set_size(&self, size: Winsize) -> io::Result<()> {
            Ok(rustix::termios::tcsetwinsize(&self.0.master, size)?)
        }

        /// A fresh slave for one run, opened through the master (never by
        /// a path that could name another terminal). The parent's copies are
        /// dropped after spawn, so the master reads EIO (the end) once the
        /// command and whatever it left behind close theirs.
        pub(crate) fn slave(&self) -> io::Result<OwnedFd> {
            Ok(rustix::pty::ioctl_tiocgptpeer(
                &self.0.master,
                OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
            )?)
        }

        /// What the command shows, readable through the runtime.
        pub(crate) fn reader(&self) -> io::Result<tokio::net::unix::pipe::Receiver> {
            let fd = self.0.master.try_clone()?;
            // A pty master polls like a pipe's read end and is non-blocking
            // (`open`); its EIO after the last slave closes ends the read
            // loop as an end of file does.
            tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd)
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(crate) enum Pty {}

    impl Pty {
        pub(super) fn open() -> std::io::Result<Self> {
            Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "pseudo-terminals are not supported on this platform",
            ))
        }
    }
}

/// The argv that makes the slave (the command's stdin) its controlling
/// terminal, around `argv` as its runner built it; `None` when this runner
/// cannot be asked to (the command then still reads and writes the
/// terminal, without job control or `/dev/tty`).
///
/// - Landlock: `landlock-run --ctty ...` (argv[0] is the launcher).
/// - bwrap: the closer inside, `landlock-run --close-fds --ctty ...`,
///   after bwrap's `--new-session` made it a session leader.
/// - danger-full-access (no runner): util-linux `setsid --ctty`. Safe code
///   here cannot run setsid(2) and TIOCSCTTY between fork and exec, and no
///   runner is asked for an unconfined run; `setsid` does exactly those two
///   calls and execs the command in place (stockade starts it outside any
///   group of its own, so `setsid` need not fork). Where it is missing,
///   the command runs without a controlling terminal; so does a command
///   that cannot be started, so that its failure is reported as a shell
///   reports it (the executor's start error), not in `setsid`'s words.
pub(crate) fn ctty_argv(
    backend: Option<&str>,
    argv: &[OsString],
    workdir: &std::path::Path,
) -> Option<Vec<OsString>> {
    let mut argv = argv.to_vec();
    match backend {
        Some("landlock") if argv.len() > 1 => argv.insert(1, "--ctty".into()),
        Some("bwrap") => {
            let at = argv.iter().position(|a| a == "--close-fds")?;
            argv.insert(at + 1, "--ctty".into());
        }
        None => {
            let program = std::path::Path::new(argv.first()?);
            let found = match program.components().count() {
                1 if !program.is_absolute() => on_path(program.as_os_str()).is_some(),
                _ => executable(&workdir.join(program)),
            };
            if !found {
                return None;
            }
            // Only where the system installs it, never from PATH: a PATH
            // directory an earlier confined run could write (a toolchain's
            // bin under --writable @cargo) must not gain a program stockade
            // itself runs unconfined.
            let setsid = ["/usr/bin/setsid", "/bin/setsid"]
                .into_iter()
                .map(std::path::PathBuf::from)
                .find(|p| executable(p))?;
            let mut wrapped = vec![setsid.into_os_string(), "--ctty".into(), "--".into()];
            wrapped.append(&mut argv);
            argv = wrapped;
        }
        Some(_) => return None,
    }
    Some(argv)
}

fn on_path(name: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

#[cfg(unix)]
fn executable(p: &std::path::Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
        && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok()
}

#[cfg(not(unix))]
fn executable(_: &std::path::Path) -> bool {
    false
}

/// The command's stdio when it is not the default: the terminal's slave
/// for all three, or one pipe for stdout and stderr (`shared_output`, under
/// passthrough). What the command writes is then read from the returned
/// end, as stderr is. The parent's copies live in `cmd` and close when it
/// is dropped after spawn.
#[cfg(unix)]
pub(crate) fn wire(
    cmd: &mut tokio::process::Command,
    terminal: Option<&Terminal>,
    passthrough: bool,
) -> std::io::Result<Option<tokio::net::unix::pipe::Receiver>> {
    use std::process::Stdio;
    #[cfg(target_os = "linux")]
    if let Some(t) = terminal {
        let slave = t.slave()?;
        cmd.stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave));
        return t.reader().map(Some);
    }
    #[cfg(not(target_os = "linux"))]
    if let Some(Terminal(pty)) = terminal {
        match **pty {}
    }
    if !passthrough || !shared_output() {
        return Ok(None);
    }
    let (rx, tx) = std::io::pipe()?;
    cmd.stdout(Stdio::from(tx.try_clone()?))
        .stderr(Stdio::from(tx));
    tokio::net::unix::pipe::Receiver::from_owned_fd(rx.into()).map(Some)
}

/// No terminal can be opened here, and stdout and stderr stay apart.
#[cfg(not(unix))]
pub(crate) fn wire(
    _: &mut tokio::process::Command,
    _: Option<&Terminal>,
    _: bool,
) -> std::io::Result<Option<tokio::io::Empty>> {
    Ok(None)
}

/// Whether this process's stdout and stderr are one file that is not a
/// terminal (`2>&1 | tee`, `>log 2>&1`): then one pipe for both keeps the
/// order in which the command wrote them. A terminal stays the command's
/// own stdout (passthrough), so it is never merged here.
#[cfg(unix)]
pub(crate) fn shared_output() -> bool {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    if rustix::termios::isatty(&out) {
        return false;
    }
    match (rustix::fs::fstat(&out), rustix::fs::fstat(&err)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn each_runner_is_asked_where_it_reads_its_options() {
        let w = std::path::Path::new("/");
        assert_eq!(
            ctty_argv(
                Some("landlock"),
                &os(&["/l/landlock-run", "--ro", "/", "--", "sh"]),
                w
            ),
            Some(os(&["/l/landlock-run", "--ctty", "--ro", "/", "--", "sh"]))
        );
        assert_eq!(
            ctty_argv(
                Some("bwrap"),
                &os(&[
                    "bwrap",
                    "--dev",
                    "/dev",
                    "--",
                    "/l/lr",
                    "--close-fds",
                    "--",
                    "sh"
                ]),
                w
            ),
            Some(os(&[
                "bwrap",
                "--dev",
                "/dev",
                "--",
                "/l/lr",
                "--close-fds",
                "--ctty",
                "--",
                "sh"
            ]))
        );
        assert_eq!(
            ctty_argv(Some("bwrap"), &os(&["bwrap", "--", "sh"]), w),
            None
        );
        assert_eq!(
            ctty_argv(Some("runner-command"), &os(&["r", "sh"]), w),
            None
        );
        // Unconfined: a command that cannot start is never handed to setsid.
        assert_eq!(ctty_argv(None, &os(&["/no/such/command"]), w), None);
        assert_eq!(ctty_argv(None, &os(&["no-such-command-here"]), w), None);
        // The setsid that runs an unconfined command is the system's, by
        // absolute path, whatever PATH holds.
        let wrapped = ctty_argv(None, &os(&["/bin/sh"]), w);
        assert!(
            wrapped.is_some() || !stockade_testkit::in_ci(),
            "util-linux setsid is missing"
        );
        if let Some(wrapped) = wrapped {
            assert!(
                ["/usr/bin/setsid", "/bin/setsid"].contains(&wrapped[0].to_str().unwrap_or("")),
                "{wrapped:?}"
            );
            assert_eq!(&wrapped[1..], os(&["--ctty", "--", "/bin/sh"]));
        }
    }
}
