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
        Box::pin(async move {
            Some(if ask(mode, request.network) {
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
pub(crate) fn ask_narrower(dir: &Path) -> bool {
    yes(&format!(
        "stockade: retry this command once with {} writable too? [y/N] ",
        dir.display()
    ))
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

/// `--ask` while the command runs (Linux: bwrap and Landlock): a host not
/// on the list is asked about
/// on the caller's terminal while its connection waits (see
/// `stockade_local::HostApproval`).
#[cfg(target_os = "linux")]
pub(crate) mod hosts {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::sync::mpsc::Sender;
    use std::sync::{Arc, Mutex, PoisonError};

    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use stockade_local::{HostAnswer, HostApprover, HostQuestion, HostReply};

    use crate::terminal::Prompt;

    /// Where a question is shown: the run's pty session while there is
    /// one (set by the run), else `/dev/tty` read a line at a time.
    #[derive(Clone, Default)]
    pub(crate) struct Desk(Arc<Mutex<Option<Prompt>>>);

    impl Desk {
        pub(crate) fn set(&self, prompt: Option<Prompt>) {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) = prompt;
        }

        fn prompt(&self) -> Option<Prompt> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    /// The approver the proxy calls: it hands each question to one thread
    /// that asks them in turn (the proxy's thread must not wait).
    pub(crate) struct Asker {
        questions: Sender<(HostQuestion, HostReply)>,
    }

    impl Asker {
        /// `None` when the asking thread cannot be started (then nothing
        /// is asked: refusals as without `--ask`).
        pub(crate) fn start(desk: Desk) -> Option<Self> {
            let (tx, rx) = std::sync::mpsc::channel::<(HostQuestion, HostReply)>();
            std::thread::Builder::new()
                .name("host-questions".into())
                .spawn(move || {
                    for (question, reply) in rx {
                        // Withdrawn while an earlier one was asked.
                        if !reply.is_pending() {
                            continue;
                        }
                        let answer = ask(&desk, &question, &reply);
                        reply.answer(answer);
                    }
                })
                .ok()?;
            Some(Self { questions: tx })
        }
    }

    impl HostApprover for Asker {
        fn ask(&self, question: HostQuestion, reply: HostReply) {
            // The thread gone: the reply is dropped, which refuses.
            let _ = self.questions.send((question, reply));
        }
    }

    /// The question as the user reads it.
    pub(crate) fn text(q: &HostQuestion) -> String {
        format!(
            "stockade: allow network access to {}:{}? [o]nce / [s]ession / [N]o",
            q.host, q.port
        )
    }

    /// A key (or the first letter of a line) as an answer: `y` or `o` is
    /// once, `s` the rest of this invocation, anything else no.
    pub(crate) fn read_answer(key: u8) -> HostAnswer {
        match key.to_ascii_lowercase() {
            b'y' | b'o' => HostAnswer::AllowOnce,
            b's' => HostAnswer::AllowForSession,
            _ => HostAnswer::Refuse,
        }
    }

    fn ask(desk: &Desk, q: &HostQuestion, reply: &HostReply) -> HostAnswer {
        let wanted = || reply.is_pending();
        let key = match desk.prompt() {
            Some(p) => p.ask(&text(q), &wanted),
            None => ask_tty(&text(q), &wanted),
        };
        match key {
            Some(k) => read_answer(k),
            // No one waits any more; what is sent is ignored.
            None => HostAnswer::Refuse,
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
        buf[..n].iter().copied().find(|b| !b.is_ascii_whitespace())
    }
}
