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
//! While the caller asks a question on its own terminal, the terminal's
//! [`OutputHold`] stops that copier: it reads nothing from the master, so
//! what the command writes waits in the pty (the command blocks once its
//! buffer is full) and cannot appear beside the question. The command has
//! only the slave, and nothing it does there reaches the copier.
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

/// Holds what the command shows at its terminal while the caller asks a
/// question there: while held, the executor's copier of the terminal does
/// not read the master at all, so the command's output waits in the
/// pseudo-terminal (once its buffer is full the command blocks in its next
/// write: nothing is lost, nothing is buffered on our side) and cannot
/// interleave with, or imitate, the question. The command holds only the
/// slave: nothing it does there (`tcflow(TCOON)`, a new slave) reaches the
/// copier, which is ours.
///
/// [`OutputHold::hold`] first lets the copier copy out what the command
/// wrote before (bounded), so the question follows it. Clones share one
/// hold; holds nest, and the output flows again when the last [`Held`] is
/// dropped.
#[derive(Clone, Default)]
pub struct OutputHold(Arc<HoldShared>);

impl std::fmt::Debug for OutputHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputHold")
    }
}

struct HoldShared {
    state: tokio::sync::watch::Sender<HoldState>,
    parked: std::sync::Mutex<Parked>,
    parked_changed: std::sync::Condvar,
}

impl Default for HoldShared {
    fn default() -> Self {
        Self {
            state: tokio::sync::watch::Sender::new(HoldState::default()),
            parked: std::sync::Mutex::default(),
            parked_changed: std::sync::Condvar::new(),
        }
    }
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct HoldState {
    /// Live [`Held`]s; the output flows at 0.
    holders: usize,
    /// Bumped by every hold, so each waits for its own acknowledgement.
    epoch: u64,
    /// Runs whose command has ended and whose copier waits for the holder
    /// to let go ([`Held::run_ending`]).
    ending: usize,
}

/// What the copiers have acknowledged.
#[derive(Default)]
struct Parked {
    /// Copiers reading this terminal now.
    copiers: usize,
    /// The latest hold every such copier has stopped reading for.
    epoch: u64,
}

/// How long a copier waits for more of what was written before a hold
/// (the pty hands the slave's writes to the master a moment later).
const HOLD_QUIET: std::time::Duration = std::time::Duration::from_millis(20);

/// How long a copier may go on copying what keeps coming before it stops
/// for a hold (a command that writes without pause).
const HOLD_DRAIN: std::time::Duration = std::time::Duration::from_millis(250);

fn lock_parked(shared: &HoldShared) -> std::sync::MutexGuard<'_, Parked> {
    // Two counters, each written in one statement: a panic elsewhere cannot
    // leave them half-written.
    shared
        .parked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OutputHold {
    /// Stops the copier, once it has copied what was readable (bounded by
    /// [`HOLD_DRAIN`]), and returns when it has: from here until the
    /// returned [`Held`] is dropped nothing the command writes is shown.
    /// Blocks the calling thread (call it off the runtime's threads); at
    /// once when no copier reads this terminal (the next one starts held).
    pub fn hold(&self) -> Held {
        let mut epoch = 0;
        self.0.state.send_modify(|s| {
            s.holders += 1;
            s.epoch += 1;
            epoch = s.epoch;
        });
        let held = Held { hold: self.clone() };
        // Bounded without a clock: a copier acknowledges after at most
        // HOLD_DRAIN of reading plus the write of what it read last, and
        // one that ends (or is aborted) leaves the count.
        let mut parked = lock_parked(&self.0);
        while parked.copiers > 0 && parked.epoch < epoch {
            parked = self
                .0
                .parked_changed
                .wait(parked)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        held
    }

    /// Whether a [`Held`] is live.
    pub fn is_held(&self) -> bool {
        self.0.state.borrow().holders > 0
    }

    /// The run reading this terminal is ending (its command is gone) until
    /// the guard is dropped: holders are told to let go (see
    /// [`Held::run_ending`]).
    pub(crate) fn ending(&self) -> Ending {
        self.0.state.send_modify(|s| s.ending += 1);
        Ending(self.clone())
    }

    /// Resolves once no [`Held`] is live.
    pub(crate) async fn released(&self) {
        let mut rx = self.0.state.subscribe();
        // The sender lives as long as `self`: this cannot fail.
        let _ = rx.wait_for(|s| s.holders == 0).await;
    }

    /// A copier of this terminal's output, counted from now (so a hold
    /// taken before it first reads waits for it). One that starts under a
    /// hold reads nothing until it is let go: the question may be showing.
    pub(crate) fn copier(&self) -> Copier {
        lock_parked(&self.0).copiers += 1;
        let rx = self.0.state.subscribe();
        let parked = rx.borrow().holders > 0;
        Copier {
            rx,
            hold: self.clone(),
            parked,
            drain_until: None,
        }
    }
}

/// A live hold (see [`OutputHold::hold`]); the output flows again when the
/// last one is dropped, on every way out of the holder's code.
#[must_use = "the output flows again as soon as this is dropped"]
pub struct Held {
    hold: OutputHold,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

impl Held {
    /// The command reading this terminal has ended and its run waits for
    /// the rest of its output, which waits for this hold: a question about
    /// it is no longer wanted, let go.
    pub fn run_ending(&self) -> bool {
        self.hold.0.state.borrow().ending > 0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.hold.0.state.send_modify(|s| s.holders -= 1);
    }
}

pub(crate) struct Ending(OutputHold);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.0.state.send_modify(|s| s.ending -= 1);
    }
}

/// The executor's side of an [`OutputHold`]: every read of the terminal's
/// master goes through [`Copier::read`].
pub(crate) struct Copier {
    rx: tokio::sync::watch::Receiver<HoldState>,
    hold: OutputHold,
    /// Stopped for the current hold (and acknowledged it).
    parked: bool,
    /// Until when what keeps coming is still copied for this hold.
    drain_until: Option<tokio::time::Instant>,
}

impl Copier {
    /// The next bytes the command showed, read only while no hold is live
    /// (a hold that starts while this waits stops the wait: nothing is read
    /// after it but what was already on its way, see [`OutputHold::hold`]).
    pub(crate) async fn read<R>(&mut self, from: &mut R, buf: &mut [u8]) -> std::io::Result<usize>
    where
        R: tokio::io::AsyncRead + Unpin,
    {
        use tokio::io::AsyncReadExt;
        loop {
            let state = *self.rx.borrow_and_update();
            if state.holders == 0 {
                self.parked = false;
                self.drain_until = None;
                // Cancel-safe both ways: a read that loses the race has
                // taken nothing.
                tokio::select! {
                    biased;
                    _ = self.rx.changed() => continue,
                    r = from.read(buf) => return r,
                }
            }
            if !self.parked {
                let now = tokio::time::Instant::now();
                let until = *self.drain_until.get_or_insert(now + HOLD_DRAIN);
                let quiet = until.saturating_duration_since(now).min(HOLD_QUIET);
                if !quiet.is_zero()
                    && let Ok(r) = tokio::time::timeout(quiet, from.read(buf)).await
                {
                    // Written before the question: copied out first.
                    return r;
                }
                self.parked = true;
            }
            self.acknowledge(state.epoch);
            // The sender lives as long as `self.hold`: this cannot fail,
            // and if it could, the next loop would read the state again.
            let _ = self.rx.changed().await;
        }
    }

    fn acknowledge(&self, epoch: u64) {
        let mut parked = lock_parked(&self.hold.0);
        parked.epoch = parked.epoch.max(epoch);
        self.hold.0.parked_changed.notify_all();
    }
}

impl Drop for Copier {
    fn drop(&mut self) {
        lock_parked(&self.hold.0).copiers -= 1;
        self.hold.0.parked_changed.notify_all();
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

    use rustix::pty::OpenptFlags;

    pub use rustix::termios::Winsize;

    pub(crate) struct Pty {
        pub(crate) master: OwnedFd,
        pub(crate) hold: super::OutputHold,
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
            Ok(Self {
                master,
                hold: super::OutputHold::default(),
            })
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

        /// Holds what the command shows while the caller asks a question
        /// on this terminal (see [`OutputHold`](super::OutputHold)).
        pub fn hold(&self) -> super::OutputHold {
            self.0.hold.clone()
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

    impl super::Terminal {
        /// None can be opened here.
        pub fn hold(&self) -> super::OutputHold {
            match *self.0 {}
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

    /// A copier of `t`'s master into a shared buffer, as the executor's.
    #[cfg(target_os = "linux")]
    fn copy_out(
        t: &Terminal,
    ) -> (
        std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
        tokio::task::JoinHandle<()>,
    ) {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut copier = t.hold().copier();
        let mut from = t.reader().unwrap();
        let into = seen.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n @ 1..) = copier.read(&mut from, &mut buf).await {
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        (seen, task)
    }

    /// Waits (a minute at most: a hang guard, not a measure) until `seen`
    /// holds `len` bytes.
    #[cfg(target_os = "linux")]
    async fn until_len(seen: &std::sync::Mutex<Vec<u8>>, len: usize) {
        let start = std::time::Instant::now();
        while seen.lock().unwrap().len() < len {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "only {} of {len} bytes were copied",
                seen.lock().unwrap().len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Held, the copier reads nothing: the slave's writes fill the pty
    /// until the writer would block (a copier that kept reading would
    /// keep room free: 64 MiB is far past any pty's buffer). Let go,
    /// every byte arrives, in order.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_output_waits_in_the_pty_and_none_is_lost() {
        let t = Terminal::open().unwrap();
        let slave = t.slave().unwrap();
        rustix::io::ioctl_fionbio(&slave, true).unwrap();
        let (seen, task) = copy_out(&t);
        rustix::io::write(&slave, b"before").unwrap();
        until_len(&seen, 6).await;

        let hold = t.hold();
        let h = hold.clone();
        let held = tokio::task::spawn_blocking(move || h.hold()).await.unwrap();
        assert!(hold.is_held());
        let chunk = [b'x'; 4096];
        let mut written = 0usize;
        loop {
            match rustix::io::write(&slave, &chunk) {
                Ok(n) => written += n,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(e) => panic!("writing the slave: {e}"),
            }
            assert!(
                written < 64 << 20,
                "the pty never filled: the copier read through the hold"
            );
        }
        assert!(written > 0);
        assert_eq!(seen.lock().unwrap().as_slice(), b"before");

        drop(held);
        assert!(!hold.is_held());
        until_len(&seen, 6 + written).await;
        let all = seen.lock().unwrap().clone();
        assert_eq!(&all[..6], b"before");
        assert!(all[6..].iter().all(|&b| b == b'x'));
        assert_eq!(all.len(), 6 + written);
        drop(slave);
        task.await.unwrap();
    }

    /// The command gone while held: nothing is read until the hold is let
    /// go, then the rest is, and the copier ends (the run's end waits for
    /// no one else). A holder is told the run is ending.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_command_that_ends_while_held_is_copied_after_the_hold() {
        let t = Terminal::open().unwrap();
        let slave = t.slave().unwrap();
        let (seen, task) = copy_out(&t);
        let hold = t.hold();
        let h = hold.clone();
        let held = tokio::task::spawn_blocking(move || h.hold()).await.unwrap();
        assert!(!held.run_ending());
        rustix::io::write(&slave, b"last words").unwrap();
        drop(slave);

        let ending = hold.ending();
        assert!(held.run_ending());
        let released = tokio::spawn({
            let hold = hold.clone();
            async move { hold.released().await }
        });
        assert!(!released.is_finished());
        assert!(seen.lock().unwrap().is_empty());
        drop(held);
        released.await.unwrap();
        task.await.unwrap();
        assert_eq!(seen.lock().unwrap().as_slice(), b"last words");
        drop(ending);
    }

    /// No copier reads the terminal: a hold returns at once, and a copier
    /// that starts under it reads nothing until it is let go.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_copier_that_starts_under_a_hold_waits_for_it() {
        let t = Terminal::open().unwrap();
        let slave = t.slave().unwrap();
        let hold = t.hold();
        let h = hold.clone();
        let held = tokio::task::spawn_blocking(move || h.hold()).await.unwrap();
        rustix::io::write(&slave, b"early").unwrap();
        let (seen, task) = copy_out(&t);
        // Held again, now with a copier: acknowledged without a read.
        let h = hold.clone();
        let again = tokio::task::spawn_blocking(move || h.hold()).await.unwrap();
        drop(held);
        assert!(hold.is_held());
        assert!(seen.lock().unwrap().is_empty());
        drop(again);
        until_len(&seen, 5).await;
        assert_eq!(seen.lock().unwrap().as_slice(), b"early");
        drop(slave);
        task.await.unwrap();
    }
}
