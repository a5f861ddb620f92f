pub mod bash;
pub mod files;
pub mod job_output;
pub mod jobs;
pub mod task;

use std::fmt::Write as _;

use stockade_core::{SandboxMode, texts};
use stockade_shell::ShellResult;

use stockade_core::texts::network as network_texts;

use crate::escalation::Grant;

/// How a finished command reads to the model. One renderer for foreground
/// results and settled background jobs.
pub(crate) fn render(r: &ShellResult, escalation_offered: bool, granted: Grant) -> String {
    let mut out = String::new();
    if let Some(f) = &r.sandbox {
        if f.runner_failed {
            let line = f.runner_failure.as_deref().unwrap_or("");
            let _ = writeln!(out, "{}", texts::runner_failed(line));
        } else if f.denied {
            for marker in f.markers() {
                let _ = writeln!(out, "{marker}");
            }
            if f.file_denied {
                let _ = writeln!(out, "{}", texts::DENIAL_INSTRUCTION);
                for line in f.file_details() {
                    let _ = writeln!(out, "{line}");
                }
                // A granted retry was the one retry: still denied, it is
                // not offered again.
                if escalation_offered && !granted.any() && f.mode < SandboxMode::DangerFullAccess {
                    let _ = writeln!(out, "{}", texts::ESCALATION_HINT);
                }
            }
            if f.network_denied {
                let _ = writeln!(out, "{}", texts::NETWORK_DENIAL_INSTRUCTION);
                if escalation_offered
                    && !granted.any()
                    && let Some(hint) = network_texts::escalation_hint(f.network)
                {
                    let _ = writeln!(out, "{hint}");
                }
                for line in f.network_details() {
                    let _ = writeln!(out, "{line}");
                }
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
        let grant = match (granted.mode, granted.network) {
            (None, None) => String::new(),
            (Some(_), None) => ", granted by the user for this call only".to_owned(),
            (None, Some(n)) => format!(", network {n} granted by the user for this call only"),
            (Some(_), Some(n)) => {
                format!(", with network {n}, granted by the user for this call only")
            }
        };
        let _ = writeln!(out, "sandbox: {}{how}{grant}", f.mode);
        for line in f.after_run_lines() {
            let _ = writeln!(out, "{line}");
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stockade_core::{Enforcement, NetworkMode};
    use stockade_shell::{CapturedOutput, ExitFacts, SandboxFacts};

    use super::*;

    fn result(file: bool, network: Option<(NetworkMode, &[&str])>) -> ShellResult {
        let (mode, hosts) = network.unwrap_or((NetworkMode::AllowListed, &[]));
        ShellResult {
            exit: ExitFacts {
                code: Some(1),
                signal: None,
            },
            stdout: CapturedOutput::default(),
            stderr: CapturedOutput::default(),
            duration: Duration::ZERO,
            timed_out: false,
            cancelled: false,
            sandbox: Some(SandboxFacts {
                mode: SandboxMode::WorkspaceWrite,
                backend: Some("bwrap"),
                enforcement: Some(Enforcement::Full),
                denied: file || network.is_some(),
                runner_failed: false,
                runner_failure: None,
                denied_paths: vec![],
                writable_roots: vec![],
                deny_read: vec![],
                read_only: vec![],
                network: mode,
                file_denied: file,
                network_denied: network.is_some(),
                network_denied_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
                unproxied_hosts: vec![],
                proxy_problems: vec![],
                gaps: vec![],
                after_run: Default::default(),
            }),
        }
    }

    #[test]
    fn what_the_audit_after_the_run_set_aside_reads_to_the_model() {
        let mut r = result(false, None);
        let q = stockade_core::Quarantined {
            path: "/w/.envrc".into(),
            moved_to: "/w/.envrc.stockade-quarantine-1".into(),
            reason: stockade_core::QuarantineReason::ProtectedName,
        };
        let line = q.to_string();
        if let Some(f) = r.sandbox.as_mut() {
            f.after_run.quarantined.push(q);
        }
        let out = render(&r, false, Grant::default());
        assert!(out.lines().any(|l| l == line), "{out}");
        assert!(line.contains("/w/.envrc was moved aside to /w/.envrc.stockade-quarantine-1"));
    }

    #[test]
    fn a_network_denial_reads_marker_instruction_then_the_network_hint() {
        let r = result(false, Some((NetworkMode::Deny, &["example.com"])));
        let out = render(&r, true, Grant::default());
        let hint = network_texts::escalation_hint(NetworkMode::Deny).unwrap_or_default();
        let lines: Vec<&str> = out.lines().take(3).collect();
        assert_eq!(
            lines,
            [
                texts::network_denial_marker(Some("example.com"), NetworkMode::Deny).as_str(),
                texts::NETWORK_DENIAL_INSTRUCTION,
                hint.as_str(),
            ]
        );
        assert!(!out.contains(texts::DENIAL_INSTRUCTION), "{out}");
        assert!(!out.contains(texts::ESCALATION_HINT), "{out}");
        // No escalation fields, no hint naming them.
        let out = render(&r, false, Grant::default());
        assert!(!out.contains("`network`"), "{out}");
        assert!(out.contains(texts::NETWORK_DENIAL_INSTRUCTION));
    }

    #[test]
    fn a_file_and_a_network_denial_each_say_their_own() {
        let r = result(
            true,
            Some((NetworkMode::AllowListed, &["a.example", "b.example"])),
        );
        let out = render(&r, true, Grant::default());
        let lines: Vec<&str> = out.lines().take(4).collect();
        assert_eq!(
            lines,
            [
                texts::denial_marker(SandboxMode::WorkspaceWrite).as_str(),
                texts::network_denial_marker(Some("a.example"), NetworkMode::AllowListed).as_str(),
                texts::network_denial_marker(Some("b.example"), NetworkMode::AllowListed).as_str(),
                texts::DENIAL_INSTRUCTION,
            ]
        );
        for text in [
            texts::ESCALATION_HINT.to_owned(),
            texts::NETWORK_DENIAL_INSTRUCTION.to_owned(),
            network_texts::escalation_hint(NetworkMode::AllowListed).unwrap_or_default(),
        ] {
            assert!(out.contains(&text), "{out}");
        }
        // A file denial alone says nothing of the network.
        let out = render(&result(true, None), true, Grant::default());
        assert!(!out.contains(texts::NETWORK_DENIAL_INSTRUCTION), "{out}");
    }

    #[test]
    fn the_grant_line_names_what_was_granted() {
        let r = result(false, None);
        let line = |g: Grant| {
            render(&r, true, g)
                .lines()
                .find(|l| l.starts_with("sandbox: "))
                .unwrap_or_default()
                .to_owned()
        };
        let mode = Some(SandboxMode::WorkspaceWrite);
        let network = Some(NetworkMode::Allow);
        assert_eq!(
            line(Grant::default()),
            "sandbox: workspace-write (bwrap, full enforcement)"
        );
        assert_eq!(
            line(Grant {
                mode,
                network: None
            }),
            "sandbox: workspace-write (bwrap, full enforcement), granted by the user for this call only"
        );
        assert_eq!(
            line(Grant {
                mode: None,
                network
            }),
            "sandbox: workspace-write (bwrap, full enforcement), network allow granted by the user for this call only"
        );
        assert_eq!(
            line(Grant { mode, network }),
            "sandbox: workspace-write (bwrap, full enforcement), with network allow, granted by the user for this call only"
        );
    }
}
