use std::path::{Path, PathBuf};

use stockade_session::Session;
use stockade_shell::BoxFuture;

/// Who is calling a tool.
#[derive(Clone)]
pub struct ToolContext {
    /// `None` for an agentless caller: escalations then fail closed.
    pub session: Option<Session>,
    pub call_id: String,
}

/// What a tool hands back to the model, and what only the user is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// The change a file tool made, for an editor to show as a diff. Never
    /// sent to the model (it has `content`) and not logged.
    pub diff: Option<FileDiff>,
    /// What only the user is shown before the result (a task's child
    /// calls). Never sent to the model and not logged.
    pub shown: Option<String>,
    /// The user cancelled inside this call (a `task` child's question was
    /// answered `cancelled`): the turn ends here, as for the call's own
    /// question.
    pub ends_turn: bool,
}

/// One file's change: its text before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// Absolute.
    pub path: PathBuf,
    /// `None` when the file did not exist before.
    pub old_text: Option<String>,
    pub new_text: String,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            diff: None,
            shown: None,
            ends_turn: false,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            diff: None,
            shown: None,
            ends_turn: false,
        }
    }

    pub fn with_diff(mut self, diff: Option<FileDiff>) -> Self {
        self.diff = diff;
        self
    }

    pub fn with_shown(mut self, shown: String) -> Self {
        self.shown = Some(shown);
        self
    }
}

/// A model-callable tool.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> String;
    /// The JSON schema of the arguments object.
    fn schema(&self) -> serde_json::Value;
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput>;
}

/// What the model is told about a tool. Here rather than in the model
/// crate, which knows no agent tools.
impl From<&dyn Tool> for stockade_model::ToolSpec {
    fn from(tool: &dyn Tool) -> Self {
        Self {
            name: tool.name().into(),
            description: tool.description(),
            parameters: tool.schema(),
        }
    }
}

/// Where a running tool's output goes while it runs (an editor's live
/// view), installed on the tool by the front end. The tool coalesces: at
/// most one call per [`crate::tools::bash::PROGRESS_INTERVAL`].
pub trait ToolProgress: Send + Sync {
    /// `text` is the output so far as it should be shown (its last part,
    /// bounded); it replaces what the previous call showed.
    fn progress(&self, ctx: &ToolContext, text: &str);
}

/// The editor's view of files, unsaved buffers included, installed on the
/// read tool by the front end. Consulted only after the file system's
/// deny-read fence allowed the path.
pub trait EditorFiles: Send + Sync {
    /// The text of `path` (absolute) as the calling session's editor holds
    /// it. `None`: that editor serves no reads, so the disk is read;
    /// `Some(Err(why))`: it was asked and failed.
    fn read_text<'a>(
        &'a self,
        ctx: &'a ToolContext,
        path: &'a Path,
    ) -> BoxFuture<'a, Option<Result<String, String>>>;
}

/// `path` made absolute against `base` (when relative) with `.` and `..`
/// applied lexically, as the fenced file system resolves it: what an
/// editor is shown, and what the file tools act on. `..` never climbs
/// above the root.
pub fn resolve_path(base: &Path, path: &Path) -> PathBuf {
    use std::path::Component;
    let joined = base.join(path);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                // At the root, `pop` is a no-op: `/..` is `/`.
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_lexically_against_the_base() {
        let base = Path::new("/w/proj");
        for (given, want) in [
            ("src/main.rs", "/w/proj/src/main.rs"),
            ("./a/./b", "/w/proj/a/b"),
            ("../other/x", "/w/other/x"),
            ("a/../../..", "/"),
            ("/abs/../etc/x", "/etc/x"),
            ("/../..", "/"),
            ("", "/w/proj"),
        ] {
            assert_eq!(
                resolve_path(base, Path::new(given)),
                Path::new(want),
                "{given}"
            );
        }
    }
}
