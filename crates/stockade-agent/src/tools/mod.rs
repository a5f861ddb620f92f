pub mod bash;
pub mod files;
pub mod job_output;

use std::fmt::Write as _;

use stockade_core::{SandboxMode, texts};
use stockade_shell::ShellResult;

/// How a finished command reads to the model. One renderer for foreground
/// results and settled background jobs.
pub(crate) fn render(
    r: &ShellResult,
    escalation_offered: bool,
    granted: Option<SandboxMode>,
) -> String {
    let mut out = String::new();
    if let Some(f) = &r.sandbox {
        if f.runner_failed {
            let line = f.runner_failure.as_deref().unwrap_or("");
            let _ = writeln!(out, "{}", texts::runner_failed(line));
        } else if f.denied {
            let _ = writeln!(out, "{}", texts::denial_marker(f.mode));
            let _ = writeln!(out, "{}", texts::DENIAL_INSTRUCTION);
            for line in f.denial_details() {
                let _ = writeln!(out, "{line}");
            }
            if escalation_offered && f.mode < SandboxMode::DangerFullAccess {
                let _ = writeln!(out, "{}", texts::ESCALATION_HINT);
            }
        }
    }
    match (r.timed_out, r.cancelled, r.exit.code, r.exit.signal) {
        (true, _, _, _) => {
            let _ = writeln!(
                out,
                "timed out after {} ms; the whole process group was killed",
                r.duration.as_millis()
            );
        }
        (_, true, _, _) => {
            let _ = writeln!(out, "cancelled; the whole process group was killed");
        }
        (_, _, Some(code), _) => {
            let _ = writeln!(out, "exit code: {code}");
        }
        (_, _, None, Some(sig)) => {
            let _ = writeln!(out, "killed by signal {sig}");
        }
        (_, _, None, None) => {
            let _ = writeln!(out, "exit status unknown");
        }
    }
    if let Some(f) = &r.sandbox {
        let how = match (f.backend, f.enforcement) {
            (Some(b), Some(e)) => format!(" ({b}, {e} enforcement)"),
            _ => " (unconfined)".to_owned(),
        };
        let grant = if granted.is_some() {
            ", granted by the user for this call only"
        } else {
            ""
        };
        let _ = writeln!(out, "sandbox: {}{how}{grant}", f.mode);
    }
    for (name, stream) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if !stream.bytes.is_empty() {
            let _ = write!(out, "{name}:\n{}", stream.text());
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}
