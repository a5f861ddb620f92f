//! Fixed model-facing texts. Each is defined once, here, and pinned by
//! snapshot tests where it is rendered.

use std::path::{Path, PathBuf};

use crate::files::ListKind;
use crate::mode::SandboxMode;

/// The runner failure of a direct `allow-listed` bwrap run whose proxy
/// listener could not be made in its network namespace (the command was
/// never let start).
pub fn relay_listener_failed(why: &str) -> String {
    format!("cannot let the proxy into the sandbox's network namespace: {why}")
}

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

/// Each path a denied line named, as the report lists it.
pub fn denied_path(path: &Path) -> String {
    format!("denied: {}", path.display())
}

/// What was writable, after a refused file effect.
pub fn writable_set(mode: SandboxMode, roots: &[PathBuf]) -> String {
    let roots: Vec<String> = roots.iter().map(|p| p.display().to_string()).collect();
    format!("writable under {mode}: {}", roots.join(", "))
}

/// A write refused outside the writable set: the directory to add.
pub fn writable_hint(dir: &Path) -> String {
    let flag = ListKind::WritableRoots.flag();
    let key = ListKind::WritableRoots.key();
    let dir = dir.display();
    format!(
        "{dir} is outside the writable set: allow it with `{flag} {dir}` (`[policy] {key} = [\"{dir}\"]` for `stockade acp`)"
    )
}

/// A write refused outside the writable set in a directory whose own
/// permissions refuse the user too, so no root would help.
pub fn not_writable_by_you(dir: &Path) -> String {
    format!(
        "{} is outside the writable set, and its own permissions do not let this user write there either: `{}` would not help",
        dir.display(),
        ListKind::WritableRoots.flag()
    )
}

/// A write refused under read-only mode, where no extra root applies.
pub const READ_ONLY_MODE_HINT: &str = "nothing is writable under read-only mode: allow writes with `--mode workspace-write` (the workspace and temp directories; `--writable DIR` adds another), `[policy] mode` for `stockade acp`";

/// A write refused where the nearest existing directory is `/`, which no
/// flag makes writable.
pub fn root_not_writable(path: &Path) -> String {
    format!(
        "the nearest existing directory of {} is the filesystem root, which cannot be made writable: write beneath a directory that exists (and allow that one)",
        path.display()
    )
}

/// Why a path inside the writable set stays read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Inside a repository's git directory: configuration, hooks and what
    /// they name.
    Git,
    /// On the deployment's read-only or protect list (`.envrc`,
    /// `.vscode/`, ...: files the host or an editor runs without asking).
    Listed,
    /// Elsewhere: what git's configuration names (a hooks directory, a
    /// program, an included file).
    GitNamed,
}

/// A refused write to a protected path inside the writable set: why it is
/// protected, and no flag to lift it.
pub fn protected_hint(path: &Path, why: Protection) -> String {
    let path = path.display();
    let reason = match why {
        Protection::Git => {
            "git reads or runs it outside the sandbox later (its configuration and hooks decide what git executes)"
        }
        Protection::Listed => {
            "it is on the read-only or protect list (`--read-only`, `[policy] read_only` or `protect`): the host or an editor reads or runs it without asking"
        }
        Protection::GitNamed => {
            "git's configuration names it (a hooks directory, a program or an included file), so git runs or reads it outside the sandbox later"
        }
    };
    format!(
        "{path} is protected: {reason}; it stays read-only in every confined run, whatever else is made writable"
    )
}

/// A refused read of a secret: which list denied it.
pub fn deny_read_hint(entry: &Path) -> String {
    format!(
        "{} is on the deny-read list (`{}`, `[policy] {}`): nothing confined may read it",
        entry.display(),
        ListKind::DenyRead.flag(),
        ListKind::DenyRead.key()
    )
}

/// A refused host: how to allow it, for `stockade exec` and `stockade acp`.
pub fn allow_host_hint(host: &str, mode: crate::NetworkMode) -> String {
    match mode {
        crate::NetworkMode::Deny => format!(
            "allow {host} with `--network allow-listed --allow-host {host}` (`[policy] network = \"allow-listed\"` and `allowed_hosts` for `stockade acp`)"
        ),
        _ => format!(
            "allow {host} with `--allow-host {host}` (`[policy] allowed_hosts` for `stockade acp`)"
        ),
    }
}

/// A host a client looked up itself (Node's `fetch` and `http`) instead of
/// going through the proxy.
pub fn unproxied_hint(host: &str) -> String {
    format!(
        "{host} was looked up directly, not through stockade's proxy: Node's fetch ignores HTTPS_PROXY/HTTP_PROXY unless NODE_USE_ENV_PROXY=1 (Node >= 24) or `node --use-env-proxy`; the network here is confined, so only the proxy reaches the allowed hosts"
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

/// A failure of the network proxy itself (it prints nothing while a command
/// runs, so its lines never land inside the command's output).
pub fn proxy_problem(what: &str) -> String {
    format!("stockade: the network proxy: {what}")
}

/// `sandbox_permissions` sent to a tool whose executor does not confine.
pub const ESCALATION_NOT_OFFERED: &str = "sandbox_permissions and justification are not parameters of this tool (commands are not sandboxed here): nothing was run.";

/// How a run keeps a deny-read path beneath a writable root unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReadBeneath<'a> {
    /// bwrap: an empty mode-0000 stand-in mounted over it after the roots.
    Mounts,
    /// Landlock: the root granted without read_file, each read beneath it
    /// decided by the supervisor.
    Supervisor,
    /// Not at all: the backend, and why.
    NotEnforced { backend: &'a str, why: &'a str },
}

/// The one line a run prints when deny-read paths (`(path, root)`) lie
/// beneath a writable root, with whether the run enforces them.
pub fn deny_read_beneath_line(
    entries: &[(std::path::PathBuf, std::path::PathBuf)],
    how: DenyReadBeneath<'_>,
) -> String {
    let listed: Vec<String> = entries
        .iter()
        .map(|(p, r)| format!("{} (in {})", p.display(), r.display()))
        .collect();
    let verdict = match how {
        DenyReadBeneath::Mounts => {
            "enforced: bwrap mounts an empty mode-0000 stand-in over each".to_owned()
        }
        DenyReadBeneath::Supervisor => "enforced: landlock's supervisor refuses each read of them (a program the run creates in a new entry of a directory holding one reads but cannot be executed)".to_owned(),
        DenyReadBeneath::NotEnforced { backend, why } => {
            format!("NOT enforced under {backend}: {why}")
        }
    };
    format!(
        "stockade: deny-read beneath a writable root: {}: {verdict}",
        listed.join(", ")
    )
}

/// The `deny-read` gap's detail under Landlock without its supervisor.
pub fn deny_read_unsupervised_gap(in_roots: &[String]) -> String {
    format!(
        "Landlock cannot take read back beneath a writable root it grants, and this host cannot run the supervisor that refuses those reads: {} stay readable",
        in_roots.join(", ")
    )
}

/// `stockade probe`'s deny-read protection under Landlock.
pub fn deny_read_landlock_protection(supervised: bool) -> &'static str {
    if supervised {
        "read granted beside each denied path and its other names (other mounts of its subtree, hard links in the workspace), never beneath them: files unreadable, names listable (gap deny-read-names); beneath a writable root the root is granted without read_file and the supervisor decides every read-only open by identity (refused for a denied object through any symlink, `..`, descriptor or hard link it knows, listing included; a file created beside it during the run is read through the supervisor but cannot be executed); a link in a writable root to a file outside refuses the run, as does a link elsewhere; names made after the start are not seen (gap deny-read-aliases)"
    } else {
        "read granted beside each denied path and its other names (other mounts of its subtree, hard links in the workspace), never beneath them: files unreadable, names listable (gap deny-read-names); one beneath a writable root stays readable without the supervisor (gap deny-read), a link there to a file outside refuses the run, as does a link elsewhere; names made after the start are not seen (gap deny-read-aliases)"
    }
}

/// `stockade probe`: a default deny-read entry beneath the current
/// directory (the workspace of an `exec` run here), and what each backend
/// makes of it.
pub fn deny_read_probe_line(
    path: &std::path::Path,
    root: &std::path::Path,
    backends: &[(&str, String)],
) -> String {
    let each: Vec<String> = backends
        .iter()
        .map(|(b, how)| format!("{b}: {how}"))
        .collect();
    format!(
        "deny-read beneath the workspace {}: {}: {}",
        root.display(),
        path.display(),
        each.join("; ")
    )
}

/// The model-facing texts of a request that names the network, each
/// defined once. A request for the file mode alone reads as their twins
/// beside this module say.
pub mod network {
    use std::fmt;

    use crate::{NetworkMode, SandboxMode};

    /// What a request naming the network asks for, as the texts name it:
    /// `network "allow"`, or `"workspace-write" with network "allow"`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Widening {
        pub mode: Option<SandboxMode>,
        pub network: NetworkMode,
    }

    impl fmt::Display for Widening {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.mode {
                Some(m) => write!(f, "\"{m}\" with network \"{}\"", self.network),
                None => write!(f, "network \"{}\"", self.network),
            }
        }
    }

    /// A network target that does not widen the call's effective network.
    pub fn not_wider(target: NetworkMode, effective: NetworkMode) -> String {
        format!(
            "network \"{target}\" is not wider than this call's effective network \"{effective}\": nothing was run and no one was asked. Omit network to run under \"{effective}\"."
        )
    }

    /// A network escalation without a reason to show the user.
    pub const MISSING_JUSTIFICATION: &str = "network needs a non-empty `justification` (one sentence the user will read): nothing was run and no one was asked.";

    /// The exact rejection text (followed by
    /// [`super::REJECTED_NO_REASK`]).
    pub fn rejected(w: Widening) -> String {
        format!("the user rejected widening this command to {w}")
    }

    pub fn cancelled(w: Widening) -> String {
        format!(
            "the request to widen this command to {w} was cancelled before the user answered: nothing was run"
        )
    }

    pub fn unavailable(w: Widening) -> String {
        format!(
            "widening this command to {w} is unavailable: this session's approval policy is \"never\" (or no one could answer): nothing was run"
        )
    }

    pub fn no_approval_service(w: Widening) -> String {
        format!(
            "widening this command to {w} is not possible: no approval service is configured: nothing was run"
        )
    }

    pub fn no_session(w: Widening) -> String {
        format!(
            "widening this command to {w} is not possible: the call has no session to ask the user through: nothing was run"
        )
    }

    /// `network` sent to a tool whose executor does not confine.
    pub const NOT_OFFERED: &str = "network is not a parameter of this tool (commands are not sandboxed here, the network included): nothing was run.";

    /// Shown after a network denial where the escalation fields exist: how
    /// to ask for the one wider retry. `None` under `allow`, which nothing
    /// widens.
    pub fn escalation_hint(denied_under: NetworkMode) -> Option<String> {
        let targets = match denied_under {
            NetworkMode::Deny => {
                "the narrowest sufficient mode: `allow-listed` (only the allowed hosts) before `allow` (any host)"
            }
            NetworkMode::AllowListed => "`allow` (any host)",
            NetworkMode::Allow => return None,
        };
        Some(format!(
            "If the task needs this connection, retry the same command once with a one-sentence `justification` and `network` set to {targets}; the user will be asked to approve that one retry."
        ))
    }
}

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
