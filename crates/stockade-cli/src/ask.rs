//! `--ask`'s answerer: the one approved wider retry is asked through the
//! agent's approval seam (`ApprovalService`), and this is its last link,
//! the user at the terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use stockade_agent::{Answerer, ApprovalRequest};
use stockade_core::{ApprovalOutcome, NetworkMode, SandboxMode};
use stockade_shell::BoxFuture;

/// Asks on the terminal; anything but yes (or no terminal at all) is a
/// rejection. `mode` is the invocation's own: a request for it widens only
/// the network.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TerminalAnswerer {
    pub(crate) mode: SandboxMode,
}

impl Answerer for TerminalAnswerer {
    fn answer<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        let mode = (request.target != self.mode).then_some(request.target);
        let network = request.network;
        Box::pin(async move {
            Some(if on_a_thread(move || ask(mode, network)).await {
                ApprovalOutcome::AllowedOnce
            } else {
                ApprovalOutcome::Rejected
            })
        })
    }
}

/// Ask on the terminal; anything but yes (or no terminal at all) is no.
fn ask(mode: Option<SandboxMode>, network: Option<NetworkMode>) -> bool {
    let what = match (mode, network) {
        (Some(m), Some(n)) => format!("under {m} with network {n}"),
        (Some(m), None) => format!("under {m}"),
        (None, Some(n)) => format!("with network {n}"),
        (None, None) => return false,
    };
    yes(&format!("stockade: retry this command once {what}? [y/N] "))
}

/// The narrower retry: `dir` writable besides the run's roots, once.
pub(crate) async fn ask_narrower(dir: &Path) -> bool {
    let question = format!(
        "stockade: retry this command once with {} writable too? [y/N] ",
        dir.display()
    );
    on_a_thread(move || yes(&question)).await
}

/// A question read off the terminal on a thread of its own, so that the
/// caller can give it up on a signal (see `exec::unless_interrupted`): a
/// read of the terminal cannot be cancelled, and the runtime's signal
/// handlers keep the default action from ending us meanwhile.
async fn on_a_thread(question: impl FnOnce() -> bool + Send + 'static) -> bool {
    tokio::task::spawn_blocking(question).await.unwrap_or(false)
}

/// `question` on the terminal; anything but yes (or no terminal at all) is
/// no.
fn yes(question: &str) -> bool {
    if !std::io::stdin().is_terminal() {
        return false;
    }
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return false;
    };
    let mut out = &tty;
    if write!(out, "{question}").is_err() {
        return false;
    }
    let _ = out.flush();
    let mut line = String::new();
    if std::io::BufReader::new(&tty).read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// `--ask` while the command runs (Linux): a host not on the list (bwrap
/// and Landlock; see `stockade_local::HostApproval`) and, under supervised
/// Landlock, a path outside the writable roots (see
/// `stockade_local::PathApproval`) are asked about on the caller's
/// terminal while the command waits, one question at a time.
#[cfg(target_os = "linux")]
pub(crate) mod running {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;
    use std::sync::mpsc::Sender;
    use std::sync::{Arc, Mutex, PoisonError};

    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use stockade_local::{
        HostAnswer, HostApprover, HostQuestion, HostReply, PathAnswer, PathApprover, PathQuestion,
        PathReply,
    };

    use crate::terminal::Prompt;

    /// Where a question is shown (set by the run): see [`Place`].
    #[derive(Clone, Default)]
    pub(crate) struct Desk(Arc<Mutex<Place>>);

    /// Where a question is shown. Never where the command can write beside
    /// it: the command could imitate a question or an answer there.
    #[derive(Clone, Default)]
    enum Place {
        /// `/dev/tty`, read a line at a time: no run, or a run whose output
        /// is not shown (`--json`: captured) and whose stdin is not the
        /// terminal (see `exec`).
        #[default]
        Tty,
        /// The run's pty session: the command's output is held while the
        /// question shows (see `terminal`).
        Prompt(Prompt),
        /// Nowhere: the run shows the command's output on the terminal
        /// with nothing to hold it (no pty session: stdout or stderr not a
        /// terminal, or stockade a background job). Refused unasked, as
        /// without `--ask`; the retry after the run is still offered.
        Shared,
    }

    impl Desk {
        /// No run (or one that is over): `/dev/tty`.
        pub(crate) fn set(&self, prompt: Option<Prompt>) {
            self.set_run(prompt, false);
        }

        /// A run: its pty session's prompt, else `/dev/tty` when its output
        /// is not `shown` on the terminal, else nowhere.
        pub(crate) fn set_run(&self, prompt: Option<Prompt>, shown: bool) {
            let place = match prompt {
                Some(p) => Place::Prompt(p),
                None if shown => Place::Shared,
                None => Place::Tty,
            };
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) = place;
        }

        fn place(&self) -> Place {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    /// One question from either seam, with where its answer goes.
    enum Question {
        Host(HostQuestion, HostReply),
        Path(PathQuestion, PathReply),
    }

    /// The approver the proxy and the path channel call: it hands each
    /// question to one thread that asks them in turn (neither caller's
    /// thread may wait), so a host and a path question never share the
    /// terminal at once.
    pub(crate) struct Asker {
        questions: Sender<Question>,
        /// The paths the user refused while a command waited: not offered
        /// again as a narrower retry.
        refused_paths: Arc<Mutex<Vec<PathBuf>>>,
    }

    impl Asker {
        /// `None` when the asking thread cannot be started (then nothing
        /// is asked: refusals as without `--ask`).
        pub(crate) fn start(desk: Desk) -> Option<Self> {
            let (tx, rx) = std::sync::mpsc::channel::<Question>();
            let refused_paths: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
            let refused = Arc::clone(&refused_paths);
            std::thread::Builder::new()
                .name("run-questions".into())
                .spawn(move || {
                    for question in rx {
                        match question {
                            Question::Host(q, reply) => {
                                // Withdrawn while an earlier one was asked.
                                if !reply.is_pending() {
                                    continue;
                                }
                                let key = ask(&desk, &host_text(&q), &|| reply.is_pending());
                                // No key: withdrawn (timed out, the run's
                                // command gone) or no terminal. Dropped
                                // unanswered, that refuses this command
                                // only; a refusal would be kept as the
                                // user's for the session.
                                if key.is_some() {
                                    reply.answer(host_answer(key));
                                }
                            }
                            Question::Path(q, reply) => {
                                if !reply.is_pending() {
                                    continue;
                                }
                                let key = ask(&desk, &path_text(&q), &|| reply.is_pending());
                                let answer = path_answer(key);
                                if answer == PathAnswer::Refuse && key.is_some() {
                                    refused
                                        .lock()
                                        .unwrap_or_else(PoisonError::into_inner)
                                        .push(q.path);
                                }
                                reply.answer(answer);
                            }
                        }
                    }
                })
                .ok()?;
            Some(Self {
                questions: tx,
                refused_paths,
            })
        }

        /// The paths the user answered no about so far.
        pub(crate) fn refused_paths(&self) -> Vec<PathBuf> {
            self.refused_paths
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    impl HostApprover for Asker {
        fn ask(&self, question: HostQuestion, reply: HostReply) {
            // The thread gone: the reply is dropped, which refuses.
            let _ = self.questions.send(Question::Host(question, reply));
        }
    }

    impl PathApprover for Asker {
        fn ask(&self, question: PathQuestion, reply: PathReply) {
            // The thread gone: the reply is dropped, which refuses.
            let _ = self.questions.send(Question::Path(question, reply));
        }
    }

    pub(crate) use stockade_core::run_approval::escaped as shown;

    /// The host question as the user reads it.
    pub(crate) fn host_text(q: &HostQuestion) -> String {
        format!(
            "stockade: allow network access to {}:{}? [o]nce / [s]ession / [N]o",
            shown(q.host.as_bytes()),
            q.port
        )
    }

    /// The path question as the user reads it.
    pub(crate) fn path_text(q: &PathQuestion) -> String {
        format!(
            "stockade: allow writing {} ({})? [o]nce this path / [d]irectory / [N]o",
            shown(q.path.as_os_str().as_bytes()),
            q.op
        )
    }

    /// A key (or the first letter of a line) as a host answer: `y` or `o`
    /// is once, `s` the rest of this invocation, anything else (or no key:
    /// no one waits any more) no.
    pub(crate) fn host_answer(key: Option<u8>) -> HostAnswer {
        match key.map(|k| k.to_ascii_lowercase()) {
            Some(b'y' | b'o') => HostAnswer::AllowOnce,
            Some(b's') => HostAnswer::AllowForSession,
            _ => HostAnswer::Refuse,
        }
    }

    /// A key as a path answer: `y` or `o` is this path, `d` its directory
    /// (both for the rest of the command), anything else no.
    pub(crate) fn path_answer(key: Option<u8>) -> PathAnswer {
        match key.map(|k| k.to_ascii_lowercase()) {
            Some(b'y' | b'o') => PathAnswer::AllowPath,
            Some(b'd') => PathAnswer::AllowDirectory,
            _ => PathAnswer::Refuse,
        }
    }

    /// `text` where the desk says; the key typed, or `None` once `wanted`
    /// says no one waits any more, or when it cannot be asked.
    fn ask(desk: &Desk, text: &str, wanted: &dyn Fn() -> bool) -> Option<u8> {
        match desk.place() {
            Place::Prompt(p) => p.ask(text, wanted),
            Place::Tty => ask_tty(text, wanted),
            Place::Shared => None,
        }
    }

    /// Without a pty session: the question on `/dev/tty`, its answer the
    /// first letter of the next line typed there.
    fn ask_tty(question: &str, wanted: &dyn Fn() -> bool) -> Option<u8> {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let mut out = &tty;
        write!(out, "{question} ").ok()?;
        let _ = out.flush();
        let recheck = Timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        loop {
            let mut fds = [PollFd::new(&tty, PollFlags::IN)];
            match poll(&mut fds, Some(&recheck)) {
                Ok(0) if wanted() => continue,
                Ok(0) => {
                    let _ = writeln!(out);
                    return None;
                }
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                // Where a terminal cannot be polled, wait for the line.
                Err(_) => break,
            }
        }
        let mut buf = [0u8; 256];
        let n = rustix::io::read(tty.as_fd(), &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        // An empty line is the default, no, as the user's answer.
        Some(
            buf[..n]
                .iter()
                .copied()
                .find(|b| !b.is_ascii_whitespace())
                .unwrap_or(b'\n'),
        )
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_path_is_shown_without_raw_control_bytes() {
            assert_eq!(
                shown(b"/tmp/a\x1b[2Jb\\c\n\xff"),
                "/tmp/a\\x1b[2Jb\\\\c\\x0a\\xff"
            );
        }

        #[test]
        fn keys_answer_paths() {
            assert_eq!(path_answer(Some(b'y')), PathAnswer::AllowPath);
            assert_eq!(path_answer(Some(b'O')), PathAnswer::AllowPath);
            assert_eq!(path_answer(Some(b'd')), PathAnswer::AllowDirectory);
            assert_eq!(path_answer(Some(b'n')), PathAnswer::Refuse);
            assert_eq!(path_answer(Some(b's')), PathAnswer::Refuse);
            assert_eq!(path_answer(None), PathAnswer::Refuse);
        }
    }
}
