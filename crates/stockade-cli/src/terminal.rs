//! The caller's terminal while the command runs on a terminal of its own.
//!
//! When stdin, stdout and stderr are terminals and we are the terminal's
//! foreground job, the command gets a pseudo-terminal (`stockade_shell::
//! Terminal`) of the caller's size: the caller's terminal goes raw, so every
//! keystroke (Ctrl-C and Ctrl-Z included, as bytes) reaches the command's
//! terminal, whose line discipline signals the command's own foreground job;
//! a resize is copied over on SIGWINCH. The executor copies what the
//! command shows to stdout and scans it for denials.
//!
//! The caller's settings come back when the [`Session`] is dropped, which
//! every way out of a run does: the command's exit, whatever killed it, a
//! start failure, and SIGTERM or SIGHUP to us (the run is dropped and so is
//! the session; see `interrupted`). Only a SIGKILL of stockade itself
//! leaves the terminal raw (`stty sane` or `reset` restores it).
//!
//! A question asked while the command runs (`--ask`: a host not on the
//! list, its connection held; a path outside the writable roots under
//! supervised Landlock) goes through a [`Prompt`] of the session. What the
//! command wrote before it is copied out first (bounded), then the
//! executor's copier of the command's terminal stops reading
//! (`stockade_shell::OutputHold`): from the moment the question shows until
//! it is answered or withdrawn nothing the command writes reaches our
//! terminal. Its output waits in its own pty (once that is full the command
//! blocks in its next write: nothing is lost, nothing piles up in us). The
//! hold is in our copier, which the command cannot reach: whatever it does
//! to its own terminal (`tcflow(TCOON)`, a new slave), it cannot print
//! beside the question or imitate a question or an answer. The next
//! keystroke is ours, not the command's; then both flow again. The hold is
//! let go on every way out of the question (answered, timed out,
//! withdrawn, the command ended: the run waits for the release, and the
//! question is withdrawn when the run's command is gone).

#[cfg(target_os = "linux")]
pub(crate) use imp::{Prompt, Session};

#[cfg(not(target_os = "linux"))]
pub(crate) use other::Session;

#[cfg(target_os = "linux")]
mod imp {
    use std::io::{PipeReader, PipeWriter, Write};
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::Duration;

    use rustix::event::{PollFd, PollFlags, poll};
    use rustix::io::Errno;
    use rustix::termios::{OptionalActions, Termios, tcgetattr, tcsetattr};
    use stockade_shell::{OutputHold, Terminal};

    pub(crate) struct Session {
        terminal: Terminal,
        /// The caller's settings, put back on drop.
        saved: Termios,
        /// Dropped to stop the keystroke copier (its poll sees the hangup).
        stop: Option<PipeWriter>,
        keys: Option<std::thread::JoinHandle<()>>,
        resize: Option<tokio::task::JoinHandle<()>>,
        /// Where keystrokes go instead of the command while a question waits.
        divert: Divert,
    }

    type Divert = Arc<Mutex<Option<Sender<Vec<u8>>>>>;

    /// Asks one question at a time on the caller's terminal while the
    /// command runs on its own (see the module docs).
    #[derive(Clone)]
    pub(crate) struct Prompt {
        hold: OutputHold,
        divert: Divert,
    }

    /// How often a waiting question checks whether it is still wanted.
    const RECHECK: Duration = Duration::from_millis(200);

    impl Prompt {
        /// Shows `question` (one line, no newline) and returns the first
        /// key typed, or `None` once `wanted` says no one waits any more
        /// (the question timed out or was withdrawn), the run's command
        /// ended, or the keystroke copier is gone. Blocks: call it off the
        /// runtime's threads (the copier it waits for runs there).
        pub(crate) fn ask(&self, question: &str, wanted: &dyn Fn() -> bool) -> Option<u8> {
            // What the command wrote so far is shown; nothing after it
            // until `held` is dropped, on every way out of here.
            let held = self.hold.hold();
            let (tx, rx) = std::sync::mpsc::channel();
            *self.divert.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
            // Raw mode: a line ends with CR LF, and ours starts on its own.
            // Not held while waiting: nothing else of ours waits on it.
            let say = |text: &str| {
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(text.as_bytes());
                let _ = err.flush();
            };
            say(&format!("\r\n{question} "));
            // The run waits for this hold once its command is gone: a
            // question about it is no longer wanted.
            let key = first_key(&rx, &|| wanted() && !held.run_ending());
            *self.divert.lock().unwrap_or_else(PoisonError::into_inner) = None;
            say("\r\n");
            drop(held);
            key
        }
    }

    fn first_key(rx: &Receiver<Vec<u8>>, wanted: &dyn Fn() -> bool) -> Option<u8> {
        loop {
            match rx.recv_timeout(RECHECK) {
                Ok(bytes) => {
                    if let Some(&b) = bytes.first() {
                        return Some(b);
                    }
                }
                Err(RecvTimeoutError::Timeout) if wanted() => {}
                Err(_) => return None,
            }
        }
    }

    /// Whether our process group is `tty`'s foreground group. Our group
    /// comes from `/proc/self/stat`, not `getpgrp`: in a pid namespace whose
    /// group leader lies outside it (a container entered with `exec`) the
    /// kernel answers 0 there, which rustix's `Pid` cannot hold. Unknown
    /// (no /proc, an invisible group) counts as not in the foreground: the
    /// command then inherits our terminal, as without a pty.
    fn in_foreground(tty: &impl AsFd) -> bool {
        let Ok(foreground) = rustix::termios::tcgetpgrp(tty) else {
            return false;
        };
        let Ok(stat) = std::fs::read("/proc/self/stat") else {
            return false;
        };
        own_group(&stat).is_some_and(|group| group == foreground.as_raw_nonzero().get())
    }

    /// The process group field of a `/proc/<pid>/stat` line: the third field
    /// after the command name, which ends at the last `)` (a name may hold
    /// spaces and parentheses). 0 (a group outside our namespace) is none.
    fn own_group(stat: &[u8]) -> Option<i32> {
        let end = stat.iter().rposition(|&b| b == b')')?;
        let rest = std::str::from_utf8(&stat[end + 1..]).ok()?;
        let group: i32 = rest.split_ascii_whitespace().nth(2)?.parse().ok()?;
        (group > 0).then_some(group)
    }

    impl Session {
        /// A terminal for the command, or `None` when this is no
        /// interactive terminal of ours (a pipe, a file, a background job)
        /// or one cannot be had (the command then inherits ours as before).
        /// Must be called within the runtime (the resize watcher).
        pub(crate) fn start() -> Option<Self> {
            let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
            let all = rustix::termios::isatty(&stdin)
                && rustix::termios::isatty(&stdout)
                && rustix::termios::isatty(std::io::stderr());
            // A background job must not take the terminal's settings (and
            // would be stopped by SIGTTOU for trying).
            if !all || !in_foreground(&stdin) {
                return None;
            }
            let saved = tcgetattr(&stdin).ok()?;
            let terminal = Terminal::open().ok()?;
            copy_size(&terminal);
            let (stop_rx, stop) = std::io::pipe().ok()?;
            let master = terminal.master().try_clone_to_owned().ok()?;
            let divert: Divert = Arc::default();
            let mut raw = saved.clone();
            raw.make_raw();
            tcsetattr(&stdin, OptionalActions::Now, &raw).ok()?;
            // From here on `drop` restores the settings.
            let mut session = Self {
                terminal,
                saved,
                stop: Some(stop),
                keys: None,
                resize: None,
                divert: Arc::clone(&divert),
            };
            session.keys = std::thread::Builder::new()
                .name("keystrokes".into())
                .spawn(move || copy_keys(&master, &stop_rx, &divert))
                .ok();
            session.keys.as_ref()?;
            let watched = session.terminal.clone();
            if let Ok(mut winch) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            {
                session.resize = Some(tokio::spawn(async move {
                    while winch.recv().await.is_some() {
                        copy_size(&watched);
                    }
                }));
            }
            Some(session)
        }

        pub(crate) fn terminal(&self) -> &Terminal {
            &self.terminal
        }

        /// Asks on this session's terminal (see [`Prompt`]).
        pub(crate) fn prompt(&self) -> Option<Prompt> {
            Some(Prompt {
                hold: self.terminal.hold(),
                divert: Arc::clone(&self.divert),
            })
        }
    }

    impl Drop for Session {
        fn drop(&mut self) {
            if let Some(r) = self.resize.take() {
                r.abort();
            }
            drop(self.stop.take());
            if let Some(k) = self.keys.take() {
                let _ = k.join();
            }
            // Nothing is left to say if this fails: the terminal is gone.
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
        }
    }

    /// The caller's window size onto the command's terminal.
    fn copy_size(terminal: &Terminal) {
        if let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout()) {
            let _ = terminal.set_size(size);
        }
    }

    /// Copies what the caller types to the command's terminal until `stop`
    /// hangs up, stdin ends, or either side fails. Polls rather than
    /// blocking in read, so the copier ends with the run instead of holding
    /// the next keystroke (and the runtime's shutdown) hostage. While a
    /// question waits, what is typed goes to it instead (`divert`).
    fn copy_keys(master: &OwnedFd, stop: &PipeReader, divert: &Divert) {
        let stdin = std::io::stdin();
        let mut buf = [0u8; 4096];
        loop {
            let mut fds = [
                PollFd::new(&stdin, PollFlags::IN),
                PollFd::new(stop, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => return,
            }
            if !fds[1].revents().is_empty() {
                return;
            }
            if fds[0].revents().is_empty() {
                continue;
            }
            match rustix::io::read(&stdin, &mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    let asking = divert
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    if let Some(to) = asking {
                        let _ = to.send(buf[..n].to_vec());
                        continue;
                    }
                    if !write_all(master.as_fd(), &buf[..n], stop) {
                        return;
                    }
                }
                Err(Errno::INTR | Errno::AGAIN) => {}
                Err(_) => return,
            }
        }
    }

    /// The master is non-blocking (the executor reads it through the
    /// runtime): wait for room, or for `stop`.
    fn write_all(master: BorrowedFd<'_>, mut bytes: &[u8], stop: &PipeReader) -> bool {
        while !bytes.is_empty() {
            match rustix::io::write(master, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    let mut fds = [
                        PollFd::new(&master, PollFlags::OUT),
                        PollFd::new(stop, PollFlags::IN),
                    ];
                    match poll(&mut fds, None) {
                        Ok(_) | Err(Errno::INTR) => {}
                        Err(_) => return false,
                    }
                    if !fds[1].revents().is_empty() {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    }

    #[cfg(test)]
    mod tests {
        use super::own_group;

        #[test]
        fn the_group_is_read_after_the_last_parenthesis_and_zero_is_none() {
            assert_eq!(own_group(b"42 (sh) S 1 42 42 34816 42 4194304"), Some(42));
            assert_eq!(own_group(b"7 (a) b (c) R 1 9 7 0 -1 0"), Some(9));
            assert_eq!(own_group(b"7 (in a ns) S 0 0 0 0 -1 0"), None);
            assert_eq!(own_group(b"7 (cut) S 1"), None);
            assert_eq!(own_group(b"no parenthesis"), None);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod other {
    /// Elsewhere the command inherits the caller's terminal as before.
    pub(crate) enum Session {}

    impl Session {
        pub(crate) fn start() -> Option<Self> {
            None
        }

        pub(crate) fn terminal(&self) -> &stockade_shell::Terminal {
            match *self {}
        }
    }
}
