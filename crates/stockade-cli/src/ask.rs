//! `--ask`'s answerer: the one approved wider retry is asked through the
//! agent's approval seam (`ApprovalService`), and this is its last link,
//! the user at the terminal.

use std::io::{BufRead, IsTerminal, Write};

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
    let what = match (mode, network) {
        (Some(m), Some(n)) => format!("under {m} with network {n}"),
        (Some(m), None) => format!("under {m}"),
        (None, Some(n)) => format!("with network {n}"),
        (None, None) => return false,
    };
    if write!(out, "stockade: retry this command once {what}? [y/N] ").is_err() {
        return false;
    }
    let _ = out.flush();
    let mut line = String::new();
    if std::io::BufReader::new(&tty).read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
