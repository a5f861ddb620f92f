//! The Agent Client Protocol server behind `stockade acp`: an editor (Zed,
//! JetBrains IDEs, Neovim plugins) starts it and gets a coding agent whose
//! bash and file tools run under the sandbox `stockade.toml` composes, with
//! escalations asked of the user in the editor.
//!
//! Protocol v1 over stdio, through the `agent-client-protocol` SDK:
//! `initialize`, `session/new` (its `cwd` is the session's workspace root),
//! `session/load` (the conversation replayed from the session log as
//! `session/update` notifications), `session/prompt` (streaming message
//! chunks, thoughts, and tool calls `pending` -> `in_progress` ->
//! `completed`/`failed` with their output), `session/cancel` (the prompt
//! answers `cancelled`), and, when presets are composed, the presets as
//! session modes with `session/set_mode`. An escalation is asked through
//! `session/request_permission` with the options `allow_once` and
//! `reject_once`. With an `[approval]` section, a host not on the list is
//! asked about while the command's connection waits (Linux, both
//! backends): a `session/request_permission` on the running bash call with
//! `allow_once`, `allow_always` (the session's list), `reject_once` and
//! `reject_always`, the call showing that it waits; questions and answers
//! are session-log events, and session-wide answers are restored on
//! `session/load` (see the `hosts` module). Under supervised Landlock and
//! `workspace-write`, a write outside every writable root is asked about
//! the same way while the call waits (`allow_path`, `allow_directory`,
//! `reject_once`; `fs/path-asked` and `fs/path-answered` in the log; a
//! grant lasts for that command only: see the `paths` module).
//! `[approval] timeout_ms` bounds the wait (default 60 s).
//!
//! For the editor: tool calls carry absolute locations, `write` and `edit`
//! a diff, a running command its output so far; embedded context in a
//! prompt reaches the model as text (images and audio are refused, never
//! dropped); the configured default is a mode of its own; a missing model
//! key is ACP authentication ([`auth`]); and with a client that offers
//! `fs/read_text_file`, the read tool reads its buffers once the deny-read
//! fence allowed the path.
//!
//! The stdio MCP servers a `session/new` or `session/load` names run for the
//! session through bash's executor, confined like a command under the
//! session's policy; their tools are the agent's as `<server>__<tool>`, and
//! they stop with the connection (see the `mcp` module).
//!
//! Stdout carries protocol frames only; this crate logs to stderr, and a
//! closed or broken stderr is ignored, never fatal. A line of stdin that is
//! not UTF-8, longer than [`MAX_FRAME_BYTES`] or not JSON is answered with a
//! JSON-RPC parse error (`-32700`), one that is JSON but no JSON-RPC message
//! with an invalid request (`-32600`), each carrying the request's id
//! whenever it can be read (from the line's start when it cannot be parsed
//! whole), and the next line is served.
//!
//! A call the session log holds no result for (the agent was killed while
//! it ran) is replayed on `session/load` ending `failed`, saying the agent
//! stopped before it finished.
//!
//! Environment: `$STOCKADE_CONFIG` and `$STOCKADE_MODE` as for every
//! composition (see `stockade_config`), and `$STOCKADE_STATE_DIR`:
//! session logs go to `$STOCKADE_STATE_DIR/sessions`, else to
//! `SessionStore::default_dir()` (`$XDG_STATE_HOME/stockade/sessions`, ...).
//!
//! The config and the session logs decide every later run's confinement,
//! so neither may lie where a confined run can write: the server refuses to
//! start when one lies beneath `/tmp` or `$TMPDIR` (or the configured
//! fallback workspace) or inside an extra writable root (`[policy]
//! writable_roots`, each held once at startup), and refuses a session (new
//! or resumed) whose cwd would make one writable.
//!
//! `[policy]`'s file lists (extra writable roots, deny-read, read-only) ride
//! every call's policy, so bash and the file tools get the same ones, and
//! the policy-context message states them.
#![forbid(unsafe_code)]

mod answerer;
pub mod auth;
pub mod compose;
mod control;
mod editor;
mod error;
mod frames;
#[cfg(unix)]
mod hosts;
mod live;
mod mcp;
#[cfg(target_os = "linux")]
mod paths;
mod prompt;
mod server;
mod updates;

use std::sync::Arc;

pub use answerer::{ALLOW_ONCE, REJECT_ONCE};
pub use compose::{Composition, EditorHooks, Environment, compose};
pub use error::ServeError;
pub use frames::MAX_FRAME_BYTES;
#[cfg(unix)]
pub use hosts::{ALLOW_ALWAYS, REJECT_ALWAYS};
#[cfg(target_os = "linux")]
pub use paths::{ALLOW_DIRECTORY, ALLOW_PATH};
pub use server::AcpServer;
use stockade_config::LoadedConfig;
use stockade_roots::RootPins;
use stockade_session::SessionStore;

/// The session store, in [`stockade_config::session_dir`] (the one rule
/// `stockade exec` also uses to keep the logs out of a command's reach).
pub fn store_from_env() -> Result<SessionStore, ServeError> {
    Ok(SessionStore::new(stockade_config::session_dir()?))
}

/// What `stockade acp` does: compose `loaded` and serve one editor on stdio
/// until it disconnects.
///
/// This process becomes the child subreaper of everything it starts, and
/// when the connection ends (stdin at end of input, or broken) every
/// process still below it (a running or background command, what either
/// left behind with `setsid` or a double fork, an MCP server) is killed and
/// reaped before this returns: no process of a session outlives it.
pub async fn serve(loaded: &LoadedConfig) -> Result<(), ServeError> {
    stockade_shell::tree::adopt_orphans();
    let served = serve_until_closed(loaded).await;
    stockade_shell::tree::kill_descendants();
    served
}

async fn serve_until_closed(loaded: &LoadedConfig) -> Result<(), ServeError> {
    // Held once, before anything runs: every session of this process gets
    // these temp roots, whatever is moved into their place later.
    let pins = Arc::new(RootPins::from_env());
    if let Some(note) = pins.tmpdir_note() {
        log(format_args!("$TMPDIR {note}"));
    }
    let env = Environment {
        config_dir: loaded.dir.clone(),
        verdict_cache_dirs: stockade_local::LocalSettings::default_verdict_cache_dirs(),
        config_file: Some(loaded.path.clone()),
        pins,
    };
    let server = AcpServer::new(&loaded.config, &env, store_from_env()?)?;
    let comp = server.composition();
    // One line saying what this process mounts, for whoever reads the
    // editor's agent log.
    log(format_args!(
        "serving ACP on stdio; config {}; sessions in {}; bash {}, default mode {}, default network {} ({}), {} allowed host(s), approval {}, {} preset(s); {} extra writable root(s), {} deny-read path(s), {} read-only path(s)",
        loaded.path.display(),
        server.store().dir().display(),
        if comp.confines {
            "sandboxed"
        } else {
            "NOT sandboxed"
        },
        comp.policy.default_mode(),
        comp.policy.default_network(comp.policy.default_mode()),
        if comp.policy.configured_network().is_some() {
            "configured"
        } else {
            "the mode's default"
        },
        comp.policy.allowed_hosts().len(),
        comp.approval.as_ref().map_or_else(
            || "none (escalations fail closed)".to_owned(),
            |a| a.default_policy().to_string()
        ),
        comp.presets.as_ref().map_or(0, |p| p.presets().len()),
        comp.policy.files().writable_roots.len(),
        comp.policy.files().deny_read.len(),
        comp.policy.files().read_only.len(),
    ));
    server.serve_stdio().await
}

/// Stderr, never stdout: stdout is the protocol's. A closed or broken
/// stderr loses the line; it never ends the server.
pub(crate) fn log(message: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "stockade acp: {message}");
}
