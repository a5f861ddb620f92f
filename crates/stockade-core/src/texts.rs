//! Fixed model-facing texts. Each is defined once, here, and pinned by
//! snapshot tests where it is rendered.

use crate::mode::SandboxMode;

/// `[sandbox: file access denied under <mode> mode]`
pub fn denial_marker(mode: SandboxMode) -> String {
    format!("[sandbox: file access denied under {mode} mode]")
}

/// A denied path beneath a toolchain group's caches: how to allow it.
pub fn group_hint(group: &str) -> String {
    format!(
        "it lies under the {group} caches: allow it with `--writable {group}` or `[policy] writable_roots = [\"{group}\"]`"
    )
}

/// The line a refused read prints on every backend (`EACCES`).
pub const READ_DENIED_SIGNATURE: &str = "Permission denied";

/// `[sandbox: network access to <host> denied under <mode> network]`, or
/// without a host when none could be read.
pub fn network_denial_marker(host: Option<&str>, mode: crate::NetworkMode) -> String {
    match host {
        Some(h) => format!("[sandbox: network access to {h} denied under {mode} network]"),
        None => format!("[sandbox: network access denied under {mode} network]"),
    }
}

/// Follows the network denial marker wherever it is shown.
pub const NETWORK_DENIAL_INSTRUCTION: &str = "The sandbox refused a network connection of this command. Do not try to work around the denial (no other hosts, proxies, ports, tools or encodings to reach the same effect).";

/// Follows the denial marker wherever it is shown.
pub const DENIAL_INSTRUCTION: &str = "The sandbox refused a file effect of this command. Do not try to work around the denial (no other paths, tools, interpreters or encodings to reach the same effect).";

/// Shown with a denial only where the escalation fields exist.
pub const ESCALATION_HINT: &str = "If the task needs this access, retry the same command once with `sandbox_permissions` set to the narrowest sufficient mode (`workspace-write` before `danger-full-access`) and a one-sentence `justification`; the user will be asked to approve that one retry.";

/// A target that does not widen the call's effective mode.
pub fn not_wider(target: SandboxMode, effective: SandboxMode) -> String {
    format!(
        "sandbox_permissions \"{target}\" is not wider than this call's effective mode \"{effective}\": nothing was run and no one was asked. Omit sandbox_permissions to run under \"{effective}\"."
    )
}

/// An escalation without a reason to show the user.
pub const MISSING_JUSTIFICATION: &str = "sandbox_permissions needs a non-empty `justification` (one sentence the user will read): nothing was run and no one was asked.";

/// The exact rejection text.
pub fn rejected(target: SandboxMode) -> String {
    format!("the user rejected escalating this command to \"{target}\"")
}

/// Follows [`rejected`].
pub const REJECTED_NO_REASK: &str =
    "Do not ask again for this command; continue without it or ask the user what to do.";

pub fn cancelled(target: SandboxMode) -> String {
    format!(
        "the request to escalate this command to \"{target}\" was cancelled before the user answered: nothing was run"
    )
}

pub fn unavailable(target: SandboxMode) -> String {
    format!(
        "escalating this command to \"{target}\" is unavailable: this session's approval policy is \"never\" (or no one could answer): nothing was run"
    )
}

pub fn no_approval_service(target: SandboxMode) -> String {
    format!(
        "escalating this command to \"{target}\" is not possible: no approval service is configured: nothing was run"
    )
}

pub fn no_session(target: SandboxMode) -> String {
    format!(
        "escalating this command to \"{target}\" is not possible: the call has no session to ask the user through: nothing was run"
    )
}

/// A settled background job whose runner failed (foreground runs return the
/// structured error instead).
pub fn runner_failed(line: &str) -> String {
    format!(
        "SANDBOX_UNAVAILABLE: the sandbox runner failed, so the command did not run as asked: {line}"
    )
}

/// What the audit after a run could not look at or set aside.
pub fn after_run_unchecked(what: &str) -> String {
    format!("stockade: after the run: not checked: {what}")
}

/// `sandbox_permissions` sent to a tool whose executor does not confine.
pub const ESCALATION_NOT_OFFERED: &str = "sandbox_permissions and justification are not parameters of this tool (commands are not sandboxed here): nothing was run.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_the_mode() {
        assert_eq!(
            denial_marker(SandboxMode::ReadOnly),
            "[sandbox: file access denied under read-only mode]"
        );
        assert_eq!(
            denial_marker(SandboxMode::WorkspaceWrite),
            "[sandbox: file access denied under workspace-write mode]"
        );
    }

    #[test]
    fn the_rejection_text_is_exact() {
        assert_eq!(
            rejected(SandboxMode::DangerFullAccess),
            "the user rejected escalating this command to \"danger-full-access\""
        );
    }

    #[test]
    fn every_non_grant_outcome_has_its_own_text() {
        let m = SandboxMode::WorkspaceWrite;
        let texts = [
            not_wider(m, m),
            MISSING_JUSTIFICATION.to_owned(),
            rejected(m),
            cancelled(m),
            unavailable(m),
            no_approval_service(m),
            no_session(m),
            ESCALATION_NOT_OFFERED.to_owned(),
        ];
        for (i, a) in texts.iter().enumerate() {
            for b in &texts[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
