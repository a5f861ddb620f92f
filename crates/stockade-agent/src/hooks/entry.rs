//! One `[[hooks]]` entry of `stockade.toml` as written, and its check at
//! load (the schema in stockade-config deserializes straight into it).

use std::fmt;
use std::time::Duration;

/// A hook's timeout when `timeout_ms` is left out.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `timeout_ms` a hook may have.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// A session was created or loaded (or a `task` started a child).
    SessionStart,
    /// Before a tool call runs; exit status 2 (the agent's `VETO_STATUS`)
    /// stops it.
    PreTool,
    /// After a tool call produced its result.
    PostTool,
    /// The model ended its turn (or hit the step limit); not after a
    /// cancellation, when the user asked for nothing more to run.
    Stop,
}

impl HookEvent {
    pub const fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::PreTool => "pre_tool",
            HookEvent::PostTool => "post_tool",
            HookEvent::Stop => "stop",
        }
    }

    /// Whether the event is about one tool call (a matcher means something).
    pub const fn is_per_tool(self) -> bool {
        matches!(self, HookEvent::PreTool | HookEvent::PostTool)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[hooks]]` entry as written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    pub event: HookEvent,
    /// Which tools a `pre_tool`/`post_tool` hook runs for: names separated
    /// by `|`, each exact or ending in `*` (a prefix). Left out: every tool.
    pub matcher: Option<String>,
    /// Run by the shell tool's interpreter (`bash -c`), in the session's
    /// workspace, with the event as JSON on stdin.
    pub command: String,
    pub timeout_ms: Option<u64>,
}

/// Why a `[[hooks]]` entry cannot be used: the key (`hooks[i].field`) and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct HookConfigError {
    pub key: String,
    pub message: String,
}

impl HookConfig {
    /// Checked at load; `index` is the entry's place in the list.
    pub fn validate(&self, index: usize) -> Result<(), HookConfigError> {
        let invalid = |field: &str, message: String| HookConfigError {
            key: format!("hooks[{index}].{field}"),
            message,
        };
        if self.command.trim().is_empty() {
            return Err(invalid("command", "must not be empty".into()));
        }
        if self.command.contains('\0') {
            return Err(invalid("command", "must not contain a NUL byte".into()));
        }
        match self.timeout_ms {
            Some(0) => return Err(invalid("timeout_ms", "must be greater than zero".into())),
            Some(ms) if u128::from(ms) > MAX_TIMEOUT.as_millis() => {
                return Err(invalid(
                    "timeout_ms",
                    format!(
                        "{ms} is more than the most a hook may run, {} ms",
                        MAX_TIMEOUT.as_millis()
                    ),
                ));
            }
            _ => {}
        }
        if let Some(m) = &self.matcher {
            if !self.event.is_per_tool() {
                return Err(invalid(
                    "matcher",
                    format!(
                        "only pre_tool and post_tool hooks run per tool; a {} hook has no tool to match",
                        self.event
                    ),
                ));
            }
            for name in m.split('|') {
                let stem = name.strip_suffix('*').unwrap_or(name);
                if stem.trim().is_empty() && name != "*" {
                    return Err(invalid(
                        "matcher",
                        format!("{m:?}: an empty tool name (names are separated by `|`)"),
                    ));
                }
                if stem.contains('*') || stem != stem.trim() {
                    return Err(invalid(
                        "matcher",
                        format!(
                            "{m:?}: {name:?} is not a tool name (exact, or a prefix ending in `*`)"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether this hook runs for `event` on `tool`.
    pub fn applies(&self, event: HookEvent, tool: Option<&str>) -> bool {
        if self.event != event {
            return false;
        }
        let (Some(m), Some(tool)) = (&self.matcher, tool) else {
            return true;
        };
        m.split('|').any(|name| match name.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => tool == name,
        })
    }

    /// How long the hook may run.
    pub fn timeout(&self) -> Duration {
        self.timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
    }
}
