//! The agent layer: the approval seam, per-session policy resolution (file
//! mode and network), the bash tool with one approved wider retry, the
//! policy-context message and permission presets.
#![forbid(unsafe_code)]

pub mod agent;
pub mod approval;
pub mod context;
pub mod effect;
pub mod escalation;
pub mod hooks;
pub mod narrower;
pub mod policy;
pub mod presets;
pub mod tool;
pub mod tools;

pub use approval::{Answerer, ApprovalRequest, ApprovalService, Fixed, RejectMatching};
pub use context::PolicyContext;
pub use escalation::{EscalationGate, Grant, NetworkTarget};
pub use narrower::narrower_root;
pub use policy::{ModeRule, NetworkSource, PolicyService};
pub use presets::{Preset, PresetError, PresetService};
pub use tool::{EditorFiles, FileDiff, Tool, ToolContext, ToolOutput, ToolProgress, resolve_path};
pub use tools::bash::BashTool;
pub use tools::files::{EditTool, ReadTool, WriteTool};
pub use tools::job_output::JobOutputTool;
pub use tools::task::{ChildMount, ChildStart, Delegation, Delegations, TaskTool};
