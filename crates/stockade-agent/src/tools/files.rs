//! read, write and edit: in-process, where an argv wrapper means nothing.
//! All three go through the mounted file system under the very policy bash
//! would get (reads obey its deny-read list, writes and edits its writable
//! set too), with the same escalation gate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stockade_core::{SandboxMode, texts};
use stockade_fs::{FileSystem, FsError};
use stockade_shell::BoxFuture;

use crate::escalation::{self, EscalationArgs, EscalationGate, EscalationTarget};
use crate::policy::PolicyService;
use crate::tool::{EditorFiles, FileDiff, Tool, ToolContext, ToolOutput, resolve_path};

/// What read returns at most; the rest is cut with a notice.
const READ_LIMIT: usize = 256 * 1024;

/// A file larger than this (before or after) gets no diff: an editor
/// cannot show it usefully, and holding it twice costs memory.
pub const DIFF_LIMIT: u64 = 1024 * 1024;

/// A file's text as it was before a write, for the diff.
enum Before {
    Missing,
    Text(String),
    /// Binary, too large, or unreadable: no diff is shown.
    Unshowable,
}

/// Shared by the three tools.
#[derive(Clone)]
struct Files {
    fs: Arc<dyn FileSystem>,
    policy: Arc<PolicyService>,
    gate: EscalationGate,
}

impl Files {
    fn absolute(&self, ctx: &ToolContext, path: &Path) -> PathBuf {
        resolve_path(&self.policy.workspace_root(ctx.session.as_ref()), path)
    }

    /// The text at `path` for a diff, read under the call's own policy, so
    /// the deny-read fence decides here as it does for the read tool.
    fn text_for_diff(&self, path: &Path, policy: &stockade_core::ExecutionPolicy) -> Before {
        // Cheap refusal of a huge file before it is read whole; the fenced
        // read below still decides what may be read.
        if std::fs::metadata(path).is_ok_and(|m| m.len() > DIFF_LIMIT) {
            return Before::Unshowable;
        }
        match self.fs.read_under(path, policy) {
            Ok(bytes) if bytes.len() as u64 <= DIFF_LIMIT => {
                String::from_utf8(bytes).map_or(Before::Unshowable, Before::Text)
            }
            Ok(_) => Before::Unshowable,
            Err(FsError::NotFound { .. }) => Before::Missing,
            Err(_) => Before::Unshowable,
        }
    }

    /// The gate, then the resolved policy for this one call.
    async fn policy_for(
        &self,
        ctx: &ToolContext,
        tool: &str,
        path: &Path,
        sandbox_permissions: Option<EscalationTarget>,
        justification: Option<String>,
    ) -> Result<(stockade_core::ExecutionPolicy, Option<SandboxMode>), ToolOutput> {
        if !self.fs.fences() && (sandbox_permissions.is_some() || justification.is_some()) {
            return Err(ToolOutput::error(texts::ESCALATION_NOT_OFFERED));
        }
        let session = ctx.session.as_ref();
        let effective = self.policy.effective_mode(session);
        let args = EscalationArgs {
            sandbox_permissions,
            justification,
        };
        let subject = format!("{tool} {}", path.display());
        // write and edit change the same file: one effect, one answer.
        let effect = if tool == "read" {
            crate::effect::file_read(path)
        } else {
            crate::effect::file_write(path)
        };
        let granted = self
            .gate
            .decide(ctx, tool, &subject, &effect, &args, effective)
            .await?;
        Ok((self.policy.resolve(session, granted), granted))
    }

    /// A refusal reads like bash's: marker first, then the instruction and,
    /// where escalation exists and the one retry was not already granted,
    /// the hint.
    fn failure(&self, e: &FsError, granted: Option<SandboxMode>) -> ToolOutput {
        let mut text = e.to_string();
        if e.is_denied() {
            text.push('\n');
            text.push_str(texts::DENIAL_INSTRUCTION);
            if self.fs.fences()
                && granted.is_none()
                && e.denied_mode()
                    .is_some_and(|m| m < SandboxMode::DangerFullAccess)
            {
                text.push('\n');
                text.push_str(texts::ESCALATION_HINT);
            }
        }
        ToolOutput::error(text)
    }

    /// Every file tool can be refused, so each offers the escalation
    /// fields exactly when the file system fences.
    fn schema(&self, props: serde_json::Value, required: &[&str]) -> serde_json::Value {
        escalation::object_schema(props, required, self.fs.fences())
    }
}

fn granted_note(granted: Option<SandboxMode>) -> String {
    granted.map_or_else(String::new, |m| {
        format!(" (under {m}, granted by the user for this call only)")
    })
}

/// The diff of one write: `created` is what the file system saw, which
/// outranks what was read before (the file may have changed in between).
fn diff(path: PathBuf, before: Before, created: bool, new_text: String) -> Option<FileDiff> {
    if new_text.len() as u64 > DIFF_LIMIT {
        return None;
    }
    let old_text = match (before, created) {
        (_, true) => None,
        (Before::Text(t), false) => Some(t),
        (Before::Missing | Before::Unshowable, false) => return None,
    };
    Some(FileDiff {
        path,
        old_text,
        new_text,
    })
}

/// What the model is shown of a file's bytes: at most [`READ_LIMIT`], then
/// a notice of how much more there was.
fn shown(bytes: &[u8]) -> String {
    let cut = bytes.len().saturating_sub(READ_LIMIT);
    let mut text = String::from_utf8_lossy(&bytes[..bytes.len() - cut]).into_owned();
    if cut > 0 {
        text.push_str(&format!("\n[stockade: {cut} more bytes not shown]"));
    }
    text
}

macro_rules! parse {
    ($tool:literal, $args:expr) => {
        match serde_json::from_value($args) {
            Ok(a) => a,
            Err(e) => {
                return ToolOutput::error(format!(
                    concat!("invalid arguments for ", $tool, ": {}"),
                    e
                ))
            }
        }
    };
}

pub struct ReadTool(Files, Option<Arc<dyn EditorFiles>>);
pub struct WriteTool(Files);
pub struct EditTool(Files);

/// The three file tools over one file system, policy and gate.
pub fn file_tools(
    fs: Arc<dyn FileSystem>,
    policy: Arc<PolicyService>,
    gate: EscalationGate,
) -> (ReadTool, WriteTool, EditTool) {
    let f = Files { fs, policy, gate };
    (ReadTool(f.clone(), None), WriteTool(f.clone()), EditTool(f))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: PathBuf,
    sandbox_permissions: Option<EscalationTarget>,
    justification: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: PathBuf,
    content: String,
    sandbox_permissions: Option<EscalationTarget>,
    justification: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: PathBuf,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
    sandbox_permissions: Option<EscalationTarget>,
    justification: Option<String>,
}

impl ReadTool {
    /// Read through `editor` (its buffers, unsaved changes included) where
    /// it serves reads. The file system's fence still decides first: a path
    /// it refuses is never asked of the editor.
    pub fn with_editor(mut self, editor: Arc<dyn EditorFiles>) -> Self {
        self.1 = Some(editor);
        self
    }

    /// The editor's text of `path`, when it serves this call, the fence
    /// allows the path, and it answers. Checked again after it answered: a
    /// path swapped for a link to a denied file meanwhile is refused.
    async fn through_editor(
        &self,
        ctx: &ToolContext,
        path: &Path,
        policy: &stockade_core::ExecutionPolicy,
    ) -> Option<Result<String, FsError>> {
        let editor = self.1.as_ref()?;
        let text = editor.read_text(ctx, path).await?.ok()?;
        Some(match self.0.fs.read_under(path, policy) {
            Ok(_) | Err(FsError::NotFound { .. }) => Ok(text),
            Err(e) => Err(e),
        })
    }

    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let a: ReadArgs = parse!("read", args);
        let path = self.0.absolute(ctx, &a.path);
        // A grant is not noted in the result: it is the file's text, and
        // the user saw the ask.
        let (policy, granted) = match self
            .0
            .policy_for(ctx, "read", &path, a.sandbox_permissions, a.justification)
            .await
        {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        let disk = self.0.fs.read_under(&path, &policy);
        // A missing file may still be an unsaved buffer; anything else the
        // file system refused or failed is never asked of the editor.
        if matches!(disk, Ok(_) | Err(FsError::NotFound { .. })) {
            match self.through_editor(ctx, &path, &policy).await {
                Some(Ok(text)) => return ToolOutput::ok(shown(text.as_bytes())),
                Some(Err(e)) => return self.0.failure(&e, granted),
                // Not served, or the editor failed: the disk answers.
                None => {}
            }
        }
        match disk {
            Ok(bytes) => ToolOutput::ok(shown(&bytes)),
            Err(e) => self.0.failure(&e, granted),
        }
    }
}

impl WriteTool {
    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let a: WriteArgs = parse!("write", args);
        let path = self.0.absolute(ctx, &a.path);
        let (policy, granted) = match self
            .0
            .policy_for(ctx, "write", &path, a.sandbox_permissions, a.justification)
            .await
        {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        let before = self.0.text_for_diff(&path, &policy);
        match self.0.fs.write(&path, a.content.as_bytes(), &policy) {
            Ok(w) => ToolOutput::ok(format!(
                "{} {} ({} bytes){}",
                if w.created { "created" } else { "replaced" },
                w.path.display(),
                w.bytes,
                granted_note(granted)
            ))
            .with_diff(diff(w.path, before, w.created, a.content)),
            Err(e) => self.0.failure(&e, granted),
        }
    }
}

impl EditTool {
    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let a: EditArgs = parse!("edit", args);
        let path = self.0.absolute(ctx, &a.path);
        let (policy, granted) = match self
            .0
            .policy_for(ctx, "edit", &path, a.sandbox_permissions, a.justification)
            .await
        {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        let before = self.0.text_for_diff(&path, &policy);
        match self
            .0
            .fs
            .edit(&path, &a.old_string, &a.new_string, a.replace_all, &policy)
        {
            Ok(e) => {
                // The text as written, read back under the same policy.
                let after = match self.0.text_for_diff(&path, &policy) {
                    Before::Text(t) => Some(t),
                    Before::Missing | Before::Unshowable => None,
                };
                ToolOutput::ok(format!(
                    "edited {} ({} replacement{}){}",
                    e.path.display(),
                    e.replacements,
                    if e.replacements == 1 { "" } else { "s" },
                    granted_note(granted)
                ))
                .with_diff(after.and_then(|t| diff(e.path, before, false, t)))
            }
            Err(e) => self.0.failure(&e, granted),
        }
    }
}

const PATH_DESC: &str = "Absolute, or relative to the workspace.";

impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        "read"
    }
    fn description(&self) -> String {
        format!(
            "Read a text file.{}",
            fenced_note(self.0.fs.as_ref(), "Reads", "read")
        )
    }
    fn schema(&self) -> serde_json::Value {
        self.0.schema(
            serde_json::json!({ "path": { "type": "string", "description": PATH_DESC } }),
            &["path"],
        )
    }
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.run(ctx, args))
    }
}

/// `what` is `Writes` or `Reads`, `one` the call (`write`, `read`).
fn fenced_note(fs: &dyn FileSystem, what: &str, one: &str) -> String {
    if fs.fences() {
        format!(
            " {what} obey the same file sandbox as bash: a refused {one} starts with \"[sandbox: file access denied under <mode> mode]\"; never work around it. If the {one} is needed, retry once with `sandbox_permissions` and a `justification` for the user to approve."
        )
    } else {
        String::new()
    }
}

impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "write"
    }
    fn description(&self) -> String {
        format!(
            "Create or replace a file with the given content (atomically).{}",
            fenced_note(self.0.fs.as_ref(), "Writes", "write")
        )
    }
    fn schema(&self) -> serde_json::Value {
        self.0.schema(
            serde_json::json!({
                "path": { "type": "string", "description": PATH_DESC },
                "content": { "type": "string", "description": "The whole new content." }
            }),
            &["path", "content"],
        )
    }
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.run(ctx, args))
    }
}

impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "edit"
    }
    fn description(&self) -> String {
        format!(
            "Replace exact text in a file: old_string must occur exactly once unless replace_all is set.{}",
            fenced_note(self.0.fs.as_ref(), "Writes", "write")
        )
    }
    fn schema(&self) -> serde_json::Value {
        self.0.schema(
            serde_json::json!({
                "path": { "type": "string", "description": PATH_DESC },
                "old_string": { "type": "string", "description": "The exact text to replace." },
                "new_string": { "type": "string", "description": "The replacement." },
                "replace_all": { "type": "boolean", "description": "Replace every occurrence (default false)." }
            }),
            &["path", "old_string", "new_string"],
        )
    }
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.run(ctx, args))
    }
}
