//! Hook commands: `[[hooks]]` in `stockade.toml`, run at a session's start,
//! before and after each tool call, and when the model ends its turn.
//!
//! A hook is a command like any the model runs: it goes through the
//! session's shell executor under the session's own effective policy, so it
//! is confined exactly as bash is. It never runs under a call's one-time
//! grant (the user approved that call, not the hooks around it), and its
//! denial is recorded as a fact, never turned into an escalation prompt.

use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};
use stockade_session::{Event, HookRun, Session, SessionError};
use stockade_shell::{ShellError, ShellExecutor, ShellRequest, ShellResult};

use crate::policy::PolicyService;

/// How much of a hook's stdout and stderr the session log keeps.
const LOGGED_OUTPUT: usize = 16 * 1024;
/// How much of a veto's stderr the model is given.
const VETO_REASON: usize = 4 * 1024;

mod entry;

pub use entry::{DEFAULT_TIMEOUT, HookConfig, HookConfigError, HookEvent, MAX_TIMEOUT};

/// The exit status with which a `pre_tool` hook stops the call (the value
/// other agents' hooks use). Its stderr is the reason the model is given.
pub const VETO_STATUS: i32 = 2;
/// What a tool call's hooks decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Proceed,
    /// A `pre_tool` hook stopped the call; the model is told this.
    Veto(String),
}

/// The text the model reads for a vetoed call. Defined once.
pub fn veto_text(index: usize, reason: &str) -> String {
    let reason = reason.trim();
    let reason = if reason.is_empty() {
        "(the hook gave no reason)"
    } else {
        reason
    };
    format!(
        "not run: a pre_tool hook (hooks[{index}]) stopped this call. Its reason: {reason}\nDo not retry the same call unchanged; address the reason or ask the user."
    )
}

/// The configured hooks, and what they run through.
pub struct Hooks {
    hooks: Vec<HookConfig>,
    executor: Arc<dyn ShellExecutor>,
    policy: Arc<PolicyService>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

/// Where a hook is running for, beyond its session.
#[derive(Debug, Clone, Default)]
pub struct HookScope<'a> {
    pub tool: Option<&'a str>,
    pub call_id: Option<&'a str>,
}

fn bounded(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[... {} more bytes]", &text[..end], text.len() - end)
}

impl Hooks {
    /// `hooks` must each have passed [`HookConfig::validate`] (the config
    /// loader does that). `executor` is the shell tool's.
    pub fn new(
        hooks: Vec<HookConfig>,
        executor: Arc<dyn ShellExecutor>,
        policy: Arc<PolicyService>,
    ) -> Self {
        Self {
            hooks,
            executor,
            policy,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Whether any hook runs for `event` on `tool`.
    pub fn any(&self, event: HookEvent, tool: Option<&str>) -> bool {
        self.hooks.iter().any(|h| h.applies(event, tool))
    }

    /// Run every hook for `event` in the configured order, each logged as a
    /// `hook/ran` event. `payload` is the event's own fields; the common
    /// ones (`event`, `session_id`, `cwd`) are added. A `pre_tool` veto
    /// stops the rest and is returned; every other outcome lets the call
    /// proceed.
    pub async fn run(
        &self,
        session: &Session,
        event: HookEvent,
        scope: HookScope<'_>,
        payload: serde_json::Map<String, Value>,
    ) -> Result<Verdict, SessionError> {
        self.run_reporting(session, event, scope, payload, &|_, _| {})
            .await
    }

    /// [`Self::run`], handing `report` each run that did not simply succeed
    /// (see [`HookRun::failed`]) with its log sequence number, so a front
    /// end can show it.
    pub async fn run_reporting(
        &self,
        session: &Session,
        event: HookEvent,
        scope: HookScope<'_>,
        mut payload: serde_json::Map<String, Value>,
        report: &(dyn Fn(u64, &HookRun) + Sync),
    ) -> Result<Verdict, SessionError> {
        if !self.any(event, scope.tool) {
            return Ok(Verdict::Proceed);
        }
        payload.insert("event".into(), json!(event.as_str()));
        payload.insert("session_id".into(), json!(session.id().as_str()));
        // Shown when it is text; the hook runs in the workspace, so `$PWD`
        // names it exactly either way.
        if let Some(cwd) = session.header().cwd.to_str() {
            payload.insert("cwd".into(), json!(cwd));
        }
        let stdin: Arc<[u8]> = serde_json::to_vec(&Value::Object(payload))
            .unwrap_or_default()
            .into();
        // The session's own policy, once for this event's hooks: never a
        // call's grant.
        let policy = self.policy.resolve(Some(session), None);
        let mode = self.executor.confines().then_some(policy.mode);
        for (index, hook) in self.hooks.iter().enumerate() {
            if !hook.applies(event, scope.tool) {
                continue;
            }
            let request = ShellRequest::new(hook.command.clone(), policy.workspace_root.clone())
                .with_policy(policy.clone())
                .with_timeout(hook.timeout())
                .with_env("STOCKADE_HOOK_EVENT", event.as_str())
                .with_stdin_bytes(stdin.clone());
            let outcome = self.executor.run(self.executor.resolve(request)).await;
            let mut run = HookRun {
                event: event.as_str().to_owned(),
                index,
                command: hook.command.clone(),
                call_id: scope.call_id.map(str::to_owned),
                mode,
                backend: None,
                exit_code: None,
                signal: None,
                timed_out: false,
                denied: false,
                runner_failed: false,
                error: None,
                vetoed: false,
                stdout: String::new(),
                stderr: String::new(),
            };
            match &outcome {
                Ok(r) => fill(&mut run, r),
                Err(e) => {
                    // Nothing ran: the runner could not start it, or the
                    // request was refused before it started.
                    run.runner_failed = matches!(e, ShellError::SandboxUnavailable(_));
                    run.error = Some(e.to_string());
                }
            }
            // Only a hook that ran to its own exit 2 vetoes: a runner that
            // failed or a hook that timed out said nothing about the call.
            run.vetoed = event == HookEvent::PreTool
                && run.exit_code == Some(VETO_STATUS)
                && !run.runner_failed
                && !run.timed_out;
            let veto = run
                .vetoed
                .then(|| veto_text(index, &bounded(run.stderr.clone(), VETO_REASON)));
            let failed = run.failed();
            let shown = failed.then(|| run.clone());
            let record = session.append(Event::HookRan(run))?;
            if let Some(run) = shown {
                report(record.seq, &run);
            }
            if let Some(reason) = veto {
                return Ok(Verdict::Veto(reason));
            }
        }
        Ok(Verdict::Proceed)
    }
}

fn fill(run: &mut HookRun, r: &ShellResult) {
    run.exit_code = r.exit.code;
    run.signal = r.exit.signal;
    run.timed_out = r.timed_out;
    if let Some(f) = &r.sandbox {
        run.mode = Some(f.mode);
        run.backend = f.backend.map(str::to_owned);
        run.denied = f.denied;
        run.runner_failed = f.runner_failed;
        if f.runner_failed {
            run.error = f.runner_failure.clone();
        }
    }
    run.stdout = bounded(r.stdout.text(), LOGGED_OUTPUT);
    run.stderr = bounded(r.stderr.text(), LOGGED_OUTPUT);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(event: HookEvent, matcher: Option<&str>) -> HookConfig {
        HookConfig {
            event,
            matcher: matcher.map(str::to_owned),
            command: "true".into(),
            timeout_ms: None,
        }
    }

    #[test]
    fn matchers_name_tools_exactly_or_by_prefix() {
        let h = hook(HookEvent::PreTool, Some("bash|mcp__git__*"));
        assert!(h.applies(HookEvent::PreTool, Some("bash")));
        assert!(h.applies(HookEvent::PreTool, Some("mcp__git__status")));
        assert!(!h.applies(HookEvent::PreTool, Some("bash2")));
        assert!(!h.applies(HookEvent::PreTool, Some("write")));
        assert!(!h.applies(HookEvent::PostTool, Some("bash")));
        let all = hook(HookEvent::PostTool, None);
        assert!(all.applies(HookEvent::PostTool, Some("anything")));
        let star = hook(HookEvent::PostTool, Some("*"));
        assert!(star.applies(HookEvent::PostTool, Some("write")));
        assert!(hook(HookEvent::Stop, None).applies(HookEvent::Stop, None));
    }

    #[test]
    fn bad_entries_name_their_key() {
        let cases = [
            (
                HookConfig {
                    command: "  ".into(),
                    ..hook(HookEvent::Stop, None)
                },
                "hooks[3].command",
            ),
            (
                HookConfig {
                    timeout_ms: Some(0),
                    ..hook(HookEvent::Stop, None)
                },
                "hooks[3].timeout_ms",
            ),
            (
                HookConfig {
                    timeout_ms: Some(600_001),
                    ..hook(HookEvent::Stop, None)
                },
                "hooks[3].timeout_ms",
            ),
            (hook(HookEvent::Stop, Some("bash")), "hooks[3].matcher"),
            (
                hook(HookEvent::SessionStart, Some("bash")),
                "hooks[3].matcher",
            ),
            (
                hook(HookEvent::PreTool, Some("bash||write")),
                "hooks[3].matcher",
            ),
            (hook(HookEvent::PreTool, Some("ba*sh")), "hooks[3].matcher"),
            (hook(HookEvent::PreTool, Some(" bash")), "hooks[3].matcher"),
        ];
        for (h, key) in cases {
            let e = h.validate(3).unwrap_err();
            assert_eq!(e.key, key, "{h:?}");
        }
        assert!(
            hook(HookEvent::PreTool, Some("bash|write|mcp__*"))
                .validate(0)
                .is_ok()
        );
    }

    #[test]
    fn a_veto_reads_its_reason_or_says_there_was_none() {
        assert!(veto_text(1, "  no rm -rf here\n").contains("Its reason: no rm -rf here\n"));
        assert!(veto_text(0, "").contains("(the hook gave no reason)"));
        assert!(veto_text(4, "x").contains("hooks[4]"));
    }

    #[test]
    fn logged_output_is_bounded_at_a_character_boundary() {
        let s = "é".repeat(10);
        let b = bounded(s, 5);
        assert!(b.starts_with("éé\n[... 16 more bytes]"), "{b}");
    }
}
