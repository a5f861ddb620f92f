//! The MCP servers of one session: each stdio server is started as a
//! subprocess through the session's shell executor, so its file effects are
//! confined by the session's policy exactly as a bash command's are (the
//! provider's wrap, held descriptors, the runner's status channel, a process
//! group of its own); spoken to with the official Rust SDK (`rmcp`, client
//! side, over the child's stdout and stdin); and its tools are offered to
//! the agent as [`Tool`](stockade_agent::Tool)s named `<server>__<tool>`.
//!
//! The crate sits between `stockade-agent` (whose `Tool` trait it
//! implements) and a front end (`stockade-acp`), so the dependency runs one
//! way: the agent knows nothing of MCP.
//!
//! Lifetime: [`McpServers`] owns its servers. [`McpServers::shutdown`]
//! closes each server's stdin, gives it a moment to exit, then kills its
//! process group; dropping the set kills the groups at once. A killed
//! front end takes confined servers with it through the runner
//! (bwrap `--die-with-parent`, `landlock-run --die-with-parent`); an
//! unconfined server (`[bash] executor = "local"`) is then only told by
//! the end of its stdin.
#![forbid(unsafe_code)]

mod launcher;
mod names;
mod render;
mod server;
mod set;
mod tool;

pub use launcher::Launcher;
pub use names::{MAX_NAME, tool_name};
pub use render::{MAX_RESULT_BYTES, render};
pub use server::{McpServer, START_TIMEOUT, ServerSpec, StartError, StderrSink};
pub use set::McpServers;
pub use tool::McpTool;
