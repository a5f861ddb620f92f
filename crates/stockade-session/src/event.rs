use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use stockade_core::{ApprovalOutcome, ApprovalPolicy, NetworkMode, SandboxMode};

use crate::SessionId;

/// Who a message is from, as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    System,
    /// Harness-supplied context (e.g. the policy-context message).
    Context,
}

/// Who set a knob. Recorded on the knob event so the log alone says why a
/// session runs the way it does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum KnobSource {
    Default,
    User,
    /// A permission preset, by its table name.
    Preset {
        name: String,
    },
    /// Copied from the parent at delegation ([`crate::SessionStore::create_child`]).
    Delegated {
        parent: SessionId,
    },
    Config,
}

/// One tool call the assistant asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them (a JSON text), kept verbatim so
    /// replay shows exactly what was asked.
    pub arguments: String,
}

/// What happened in a session. Each domain owns its variants and its `type`
/// tag; folds match only their own variant, so adding one leaves the others'
/// code alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "message")]
    Message {
        role: Role,
        content: String,
        /// Which component produced it (e.g. `sandbox:policy`), when not the
        /// user or the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    #[serde(rename = "assistant/tool-calls")]
    AssistantToolCalls {
        content: String,
        #[serde(default)]
        reasoning: Option<String>,
        calls: Vec<ToolCall>,
    },
    #[serde(rename = "tool/result")]
    ToolResult {
        call_id: String,
        tool: String,
        content: String,
        is_error: bool,
    },
    #[serde(rename = "approval/asked")]
    ApprovalAsked {
        call_id: String,
        tool: String,
        reason: String,
        target: SandboxMode,
        /// The network the call would run under, when the request widened
        /// it; absent when only the file mode was asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<NetworkMode>,
        /// What the call would do (a command's text, `write PATH`): a
        /// rejection answers every later request for the same subject, so
        /// no one is asked twice. Absent in logs written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        /// What the call would do, as one key (`stockade_agent::effect`):
        /// however the request is spelled and through whichever tool, a
        /// rejection answers every later request with the same effect at
        /// the same width or narrower. Absent in logs written before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effect: Option<String>,
        /// The narrower retry: this directory writable besides the
        /// session's roots, for one retry of the call under `target` (the
        /// session's own mode). Absent for a wider mode or network.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        writable_root: Option<std::path::PathBuf>,
    },
    #[serde(rename = "approval/decided")]
    ApprovalDecided {
        call_id: String,
        tool: String,
        outcome: ApprovalOutcome,
    },
    /// The sandbox knob. The last one is the session's override.
    #[serde(rename = "sandbox/mode")]
    SandboxMode {
        mode: SandboxMode,
        source: KnobSource,
    },
    /// The network knob. The last one is the session's override.
    #[serde(rename = "sandbox/network")]
    SandboxNetwork {
        mode: NetworkMode,
        source: KnobSource,
    },
    /// The approval knob. The last one is the session's override.
    #[serde(rename = "approval/policy")]
    ApprovalPolicy {
        policy: ApprovalPolicy,
        source: KnobSource,
    },
    /// An image the user attached to the user message just before it, as
    /// the model receives it (base64 data of `mime_type`).
    #[serde(rename = "user/image")]
    UserImage { mime_type: String, data: String },
    /// A configured hook command ran (or could not), with the same facts a
    /// command's result carries. For people and audits: the model sees a
    /// hook only through a `pre_tool` veto's reason.
    #[serde(rename = "hook/ran")]
    HookRan(HookRun),
    /// A host not on the session's list, asked about while a command's
    /// connection to it waited (under the running call `call_id`).
    #[serde(rename = "network/host-asked")]
    HostAsked {
        host: String,
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// What became of that question. `allowed-for-session` adds the host
    /// to the session's list and `refused-for-session` keeps it refused,
    /// both until the user changes the session's mode or network (see
    /// [`crate::knobs::host_answers`]).
    #[serde(rename = "network/host-answered")]
    HostAnswered { host: String, answer: HostAnswer },
    /// A place outside every writable root, asked about while the call of
    /// a command confined by supervised Landlock waited (under the running
    /// call `call_id`). `op` is what the call was doing (`write`, `mkdir`,
    /// ...); `path` is stored exactly, whatever bytes it holds (see
    /// `cwd_wire`).
    #[serde(rename = "fs/path-asked")]
    PathAsked {
        op: String,
        #[serde(with = "crate::header::cwd_wire")]
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// What became of that question. Every grant lasts for the rest of the
    /// command only: nothing here outlives it, so nothing is folded.
    #[serde(rename = "fs/path-answered")]
    PathAnswered {
        #[serde(with = "crate::header::cwd_wire")]
        path: PathBuf,
        answer: PathAnswer,
    },
}

/// The user's answer about one host (see [`Event::HostAnswered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostAnswer {
    AllowedOnce,
    AllowedForSession,
    RefusedOnce,
    RefusedForSession,
    /// No answer came while the connection waited (a timeout, the command
    /// ended, the question was withdrawn or could not be asked): refused
    /// for that command only.
    Unanswered,
}

/// The user's answer about one path (see [`Event::PathAnswered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathAnswer {
    /// This path, for the rest of the command.
    AllowPath,
    /// The directory holding it and everything beneath it, for the rest of
    /// the command.
    AllowDirectory,
    /// Refused by the user, or the question could not be asked (cancelled,
    /// failed, an answer this build does not know).
    Refused,
    /// No answer came while the command waited (its time was up, or the
    /// command ended): refused.
    TimedOut,
}

impl HookRun {
    /// Anything but a clean exit 0: a status, a signal, a timeout, a
    /// denial, a runner failure, a start error or a veto.
    pub fn failed(&self) -> bool {
        self.exit_code != Some(0)
            || self.timed_out
            || self.denied
            || self.runner_failed
            || self.error.is_some()
            || self.vetoed
    }
}

/// What one hook run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRun {
    /// `session_start`, `pre_tool`, `post_tool` or `stop`.
    pub event: String,
    /// The hook's place in the configured list (0-based) and its command.
    pub index: usize,
    pub command: String,
    /// The tool call it ran for (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The file mode it ran under (always the session's own, never a
    /// call's grant); absent when it ran unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
    /// The sandbox refused something it tried: a fact, never a prompt.
    #[serde(default)]
    pub denied: bool,
    #[serde(default)]
    pub runner_failed: bool,
    /// Why it did not run, or the runner's failure line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A `pre_tool` hook stopped the call.
    #[serde(default)]
    pub vetoed: bool,
    /// Its output (bounded, as a command's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

impl Event {
    /// The event's `type` tag, as written in the log.
    pub const fn kind(&self) -> &'static str {
        match self {
            Event::Message { .. } => "message",
            Event::AssistantToolCalls { .. } => "assistant/tool-calls",
            Event::ToolResult { .. } => "tool/result",
            Event::ApprovalAsked { .. } => "approval/asked",
            Event::ApprovalDecided { .. } => "approval/decided",
            Event::SandboxMode { .. } => "sandbox/mode",
            Event::SandboxNetwork { .. } => "sandbox/network",
            Event::ApprovalPolicy { .. } => "approval/policy",
            Event::UserImage { .. } => "user/image",
            Event::HookRan(_) => "hook/ran",
            Event::HostAsked { .. } => "network/host-asked",
            Event::HostAnswered { .. } => "network/host-answered",
            Event::PathAsked { .. } => "fs/path-asked",
            Event::PathAnswered { .. } => "fs/path-answered",
        }
    }
}

/// One line of the log after the header: an event, where it sits in the
/// session (`seq`, 1-based and gap-free) and when it was appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub at_unix_ms: u64,
    pub event: Event,
}

/// One of every variant (and of every optional shape), for round-trip tests.
#[cfg(test)]
pub(crate) fn every_event() -> Vec<Event> {
    let parent: SessionId = "00112233445566778899aabbccddeeff".parse().unwrap();
    let mut events = vec![
        Event::Message {
            role: Role::User,
            content: "hello \"quoted\"\nsecond line ✓".into(),
            source: None,
        },
        Event::Message {
            role: Role::Context,
            content: "policy".into(),
            source: Some("sandbox:policy".into()),
        },
        Event::Message {
            role: Role::System,
            content: String::new(),
            source: None,
        },
        Event::AssistantToolCalls {
            content: "running it".into(),
            reasoning: Some("because".into()),
            calls: vec![
                ToolCall {
                    id: "call-1".into(),
                    name: "bash".into(),
                    arguments: r#"{"command":"touch x"}"#.into(),
                },
                ToolCall {
                    id: "call-2".into(),
                    name: "job_output".into(),
                    arguments: "{}".into(),
                },
            ],
        },
        Event::AssistantToolCalls {
            content: String::new(),
            reasoning: None,
            calls: vec![],
        },
        Event::ToolResult {
            call_id: "call-1".into(),
            tool: "bash".into(),
            content: "denied".into(),
            is_error: true,
        },
        Event::Message {
            role: Role::Assistant,
            content: "done".into(),
            source: None,
        },
    ];
    for target in SandboxMode::ALL {
        events.push(Event::ApprovalAsked {
            call_id: "call-3".into(),
            tool: "bash".into(),
            reason: "needs to write".into(),
            target: *target,
            network: None,
            subject: None,
            effect: None,
            writable_root: None,
        });
    }
    for network in NetworkMode::ALL {
        events.push(Event::ApprovalAsked {
            call_id: "call-4".into(),
            tool: "bash".into(),
            reason: "needs a registry".into(),
            target: SandboxMode::WorkspaceWrite,
            network: Some(*network),
            subject: None,
            effect: None,
            writable_root: None,
        });
    }
    for outcome in ApprovalOutcome::ALL {
        events.push(Event::ApprovalDecided {
            call_id: "call-3".into(),
            tool: "bash".into(),
            outcome: *outcome,
        });
    }
    let sources = [
        KnobSource::Default,
        KnobSource::User,
        KnobSource::Preset {
            name: "workspace-write".into(),
        },
        KnobSource::Delegated { parent },
        KnobSource::Config,
    ];
    for (i, source) in sources.iter().enumerate() {
        events.push(Event::SandboxMode {
            mode: SandboxMode::ALL[i % SandboxMode::ALL.len()],
            source: source.clone(),
        });
        events.push(Event::ApprovalPolicy {
            policy: ApprovalPolicy::ALL[i % ApprovalPolicy::ALL.len()],
            source: source.clone(),
        });
        events.push(Event::SandboxNetwork {
            mode: NetworkMode::ALL[i % NetworkMode::ALL.len()],
            source: source.clone(),
        });
    }
    events.push(Event::ApprovalAsked {
        call_id: "c5".into(),
        tool: "bash".into(),
        reason: "write the build dir".into(),
        target: SandboxMode::WorkspaceWrite,
        network: None,
        subject: Some("make".into()),
        effect: Some("run make".into()),
        writable_root: Some("/srv/build out".into()),
    });
    events.push(Event::HostAsked {
        host: "registry.npmjs.org".into(),
        port: 443,
        call_id: Some("c6".into()),
    });
    for answer in [
        HostAnswer::AllowedOnce,
        HostAnswer::AllowedForSession,
        HostAnswer::RefusedOnce,
        HostAnswer::RefusedForSession,
        HostAnswer::Unanswered,
    ] {
        events.push(Event::HostAnswered {
            host: "registry.npmjs.org".into(),
            answer,
        });
    }
    events.push(Event::PathAsked {
        op: "write".into(),
        path: "/srv/out dir/file.txt".into(),
        call_id: Some("c7".into()),
    });
    events.push(Event::PathAsked {
        op: "mkdir".into(),
        path: non_utf8_path(),
        call_id: None,
    });
    for answer in [
        PathAnswer::AllowPath,
        PathAnswer::AllowDirectory,
        PathAnswer::Refused,
        PathAnswer::TimedOut,
    ] {
        events.push(Event::PathAnswered {
            path: non_utf8_path(),
            answer,
        });
    }
    events
}

/// A path no UTF-8 string can hold (a command may choose any name).
#[cfg(all(test, unix))]
fn non_utf8_path() -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b"/srv/caf\xe9/\x1b[2J\n\xff"))
}

#[cfg(all(test, not(unix)))]
fn non_utf8_path() -> PathBuf {
    PathBuf::from("/srv/caf\u{e9}/\u{1b}[2J\n")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn every_variant_round_trips_and_tags_itself_with_kind() {
        for event in every_event() {
            let json = serde_json::to_string(&event).unwrap();
            assert!(!json.contains('\n'), "one event is one line: {json}");
            let back: Event = serde_json::from_str(&json).unwrap();
            assert_eq!(back, event);
            let value: Value = serde_json::from_str(&json).unwrap();
            assert_eq!(value["type"], event.kind());
        }
    }

    #[test]
    fn the_wire_format_is_pinned() {
        let parent: SessionId = "00112233445566778899aabbccddeeff".parse().unwrap();
        let cases = [
            (
                Event::Message {
                    role: Role::User,
                    content: "hi".into(),
                    source: None,
                },
                json!({"type": "message", "role": "user", "content": "hi"}),
            ),
            (
                Event::SandboxMode {
                    mode: SandboxMode::ReadOnly,
                    source: KnobSource::Delegated { parent },
                },
                json!({"type": "sandbox/mode", "mode": "read-only",
                       "source": {"kind": "delegated", "parent": "00112233445566778899aabbccddeeff"}}),
            ),
            (
                Event::ApprovalPolicy {
                    policy: ApprovalPolicy::Never,
                    source: KnobSource::Preset {
                        name: "danger-full-access".into(),
                    },
                },
                json!({"type": "approval/policy", "policy": "never",
                       "source": {"kind": "preset", "name": "danger-full-access"}}),
            ),
            (
                Event::SandboxNetwork {
                    mode: NetworkMode::AllowListed,
                    source: KnobSource::Preset {
                        name: "workspace-write".into(),
                    },
                },
                json!({"type": "sandbox/network", "mode": "allow-listed",
                       "source": {"kind": "preset", "name": "workspace-write"}}),
            ),
            (
                Event::ApprovalAsked {
                    call_id: "c".into(),
                    tool: "bash".into(),
                    reason: "r".into(),
                    target: SandboxMode::ReadOnly,
                    network: None,
                    subject: None,
                    effect: None,
                    writable_root: None,
                },
                json!({"type": "approval/asked", "call_id": "c", "tool": "bash", "reason": "r", "target": "read-only"}),
            ),
            (
                Event::ApprovalAsked {
                    call_id: "c".into(),
                    tool: "bash".into(),
                    reason: "r".into(),
                    target: SandboxMode::ReadOnly,
                    network: Some(NetworkMode::Allow),
                    subject: None,
                    effect: None,
                    writable_root: None,
                },
                json!({"type": "approval/asked", "call_id": "c", "tool": "bash", "reason": "r", "target": "read-only", "network": "allow"}),
            ),
            (
                Event::ApprovalDecided {
                    call_id: "c".into(),
                    tool: "bash".into(),
                    outcome: ApprovalOutcome::AllowedOnce,
                },
                json!({"type": "approval/decided", "call_id": "c", "tool": "bash", "outcome": "allowed-once"}),
            ),
            (
                Event::AssistantToolCalls {
                    content: String::new(),
                    reasoning: None,
                    calls: vec![],
                },
                json!({"type": "assistant/tool-calls", "content": "", "reasoning": null, "calls": []}),
            ),
            (
                Event::PathAsked {
                    op: "write".into(),
                    path: "/srv/out/x".into(),
                    call_id: Some("c".into()),
                },
                json!({"type": "fs/path-asked", "op": "write", "path": "/srv/out/x", "call_id": "c"}),
            ),
            (
                Event::PathAnswered {
                    path: "/srv/out/x".into(),
                    answer: PathAnswer::AllowDirectory,
                },
                json!({"type": "fs/path-answered", "path": "/srv/out/x", "answer": "allow-directory"}),
            ),
            (
                Event::PathAnswered {
                    path: "/srv/out/x".into(),
                    answer: PathAnswer::TimedOut,
                },
                json!({"type": "fs/path-answered", "path": "/srv/out/x", "answer": "timed-out"}),
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(serde_json::to_value(&event).unwrap(), expected);
            assert_eq!(serde_json::from_value::<Event>(expected).unwrap(), event);
        }
        // Optional fields may be absent on input.
        let e: Event = serde_json::from_value(
            json!({"type": "assistant/tool-calls", "content": "x", "calls": []}),
        )
        .unwrap();
        assert_eq!(
            e,
            Event::AssistantToolCalls {
                content: "x".into(),
                reasoning: None,
                calls: vec![]
            }
        );
    }

    /// A path that is no UTF-8 string is stored as its bytes and reads
    /// back identical: never a lossy string that names another place.
    #[cfg(unix)]
    #[test]
    fn a_non_utf8_path_is_stored_as_its_bytes() {
        let event = Event::PathAnswered {
            path: non_utf8_path(),
            answer: PathAnswer::AllowPath,
        };
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(
            value,
            json!({"type": "fs/path-answered", "answer": "allow-path",
                   "path": {"unix": b"/srv/caf\xe9/\x1b[2J\n\xff".to_vec()}})
        );
        assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
    }

    #[test]
    fn values_outside_a_vocabulary_are_rejected_listing_the_valid_ones() {
        let err = serde_json::from_value::<Event>(json!({
            "type": "sandbox/mode", "mode": "yolo", "source": {"kind": "user"}
        }))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("expected one of read-only, workspace-write, danger-full-access"),
            "{err}"
        );
        let err = serde_json::from_value::<Event>(json!({
            "type": "approval/policy", "policy": "always", "source": {"kind": "user"}
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains("expected one of ask, never"),
            "{err}"
        );
        for bad in ["none", "Allow", "allow-list", "full"] {
            let err = serde_json::from_value::<Event>(json!({
                "type": "sandbox/network", "mode": bad, "source": {"kind": "user"}
            }))
            .unwrap_err();
            assert!(
                err.to_string().contains("invalid network mode")
                    && err
                        .to_string()
                        .contains("expected one of deny, allow-listed, allow"),
                "{err}"
            );
        }
        assert!(
            serde_json::from_value::<Event>(json!({"type": "sandbox/network", "mode": "deny"}))
                .is_err(),
            "a knob event without its source is refused"
        );
        assert!(
            serde_json::from_value::<Event>(json!({"type": "sandbox/nope", "mode": "read-only"}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<KnobSource>(json!({"kind": "delegated", "parent": "nope"}))
                .is_err()
        );
    }
}
