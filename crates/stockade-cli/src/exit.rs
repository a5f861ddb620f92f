//! What `stockade` exits with, and how it says why.

use std::io::Write;
use std::process::ExitCode;

use stockade_shell::ExitFacts;

/// Exit status when no confinement could be had (nothing ran).
pub(crate) const EXIT_UNAVAILABLE: u8 = 125;
/// Exit status for bad input (nothing ran).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit status when the command could not be started for an ordinary
/// reason, as shells report it.
pub(crate) const EXIT_CANNOT_START: u8 = 126;
pub(crate) const EXIT_NOT_FOUND: u8 = 127;

pub(crate) fn exit_code(exit: &ExitFacts) -> ExitCode {
    match (exit.code, exit.signal) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        (None, None) => ExitCode::from(EXIT_UNAVAILABLE),
    }
}

pub(crate) fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    // A closed or broken stderr loses the message, never the exit status.
    let _ = writeln!(std::io::stderr(), "stockade: {message}");
    ExitCode::from(code)
}
