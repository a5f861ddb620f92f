//! The session log: one append-only JSON Lines file per session, and the
//! session's state folded from it.
//!
//! The log IS the store. A session's sandbox mode, network mode and approval
//! policy are not kept anywhere else: each knob is the last `sandbox/mode`
//! (resp. `sandbox/network`, `approval/policy`) event, else the default the
//! caller passes at the time of the question ([`Session::sandbox_mode`]).
//! So a resumed session keeps its
//! overrides with no catch-up state, and a default changed while the process
//! was down takes effect on resume. A switch is its event
//! ([`Session::set_sandbox_mode`]); nothing else changes policy.
//!
//! File format (`<dir>/<id>.jsonl`): line 1 is the header
//! (`{"type":"header","format":1,"id":..,"cwd":..,"created_unix_ms":..,"parent":..}`),
//! then one [`Record`] per line with a 1-based, gap-free `seq`. Replay rebuilds
//! the session exactly; a torn last line (a crash mid-append) is reported,
//! dropped and cut off the file; any other damage is an error naming the file
//! and the line, because silently skipping a middle line would lose an event.
//!
//! One process owns a session at a time. Within a process, every `open` of a
//! live session returns that session (one in-memory state per file). Across
//! processes (on unix) an open session holds an exclusive advisory lock
//! (`flock`) on its log for as long as any handle to it lives, so a second
//! process's `create`/`open` is refused ([`SessionError::Locked`]) before it
//! reads or writes anything. A writer that ignores the lock is still detected
//! at the next append ([`SessionError::ConcurrentWriter`]).
//!
//! A tool call the log holds no result for (the process died while it ran)
//! is answered, on every rebuild of the conversation, with
//! [`INTERRUPTED_TOOL_RESULT`] ([`conversation()`]).
#![forbid(unsafe_code)]

pub mod conversation;
mod error;
mod event;
mod header;
mod id;
pub mod knobs;
mod replay;
mod store;

pub use conversation::{INTERRUPTED_TOOL_RESULT, conversation, unanswered_tool_calls};
pub use error::SessionError;
pub use event::{Event, HookRun, HostAnswer, KnobSource, PathAnswer, Record, Role, ToolCall};
pub use header::SessionHeader;
pub use id::{ParseSessionIdError, SessionId};
pub use replay::{ReplayReport, TornTail};
pub use store::{Session, SessionStore};
