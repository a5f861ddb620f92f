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
use crate::tool::{Tool, ToolContext, ToolOutput};

/// What read returns at most; the rest is cut with a notice.
const READ_LIMIT: usize = 256 * 1024;

/// Shared by the three tools.
#[derive(Clone)]
struct Files {
    fs: Arc<dyn FileSystem>,
    policy: Arc<PolicyService>,
    gate: EscalationGate,
}

impl Files {
    fn absolute(&self, ctx: &ToolContext, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.policy.workspace_root(ctx.session.as_ref()).join(path)
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
        let granted = self
            .gate
            .decide(ctx, tool, &subject, &args, effective)
            .await?;
        Ok((self.policy.resolve(session, granted), granted))
    }

    /// A refusal reads like bash's: marker first, then the instruction and,
    /// where escalation exists, the hint.
    fn failure(&self, e: &FsError) -> ToolOutput {
        let mut text = e.to_string();
        if e.is_denied() {
            text.push('\n');
            text.push_str(texts::DENIAL_INSTRUCTION);
            if self.fs.fences()
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

pub struct ReadTool(Files);
pub struct WriteTool(Files);
pub struct EditTool(Files);

/// The three file tools over one file system, policy and gate.
pub fn file_tools(
    fs: Arc<dyn FileSystem>,
    policy: Arc<PolicyService>,
    gate: EscalationGate,
) -> (ReadTool, WriteTool, EditTool) {
    let f = Files { fs, policy, gate };
    (ReadTool(f.clone()), WriteTool(f.clone()), EditTool(f))
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
    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let a: ReadArgs = parse!("read", args);
        let path = self.0.absolute(ctx, &a.path);
        // A grant is not noted in the result: it is the file's text, and
        // the user saw the ask.
        let (policy, _) = match self
            .0
            .policy_for(ctx, "read", &path, a.sandbox_permissions, a.justification)
            .await
        {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        match self.0.fs.read_under(&path, &policy) {
            Ok(bytes) => {
                let cut = bytes.len().saturating_sub(READ_LIMIT);
                let mut text = String::from_utf8_lossy(&bytes[..bytes.len() - cut]).into_owned();
                if cut > 0 {
                    text.push_str(&format!("\n[stockade: {cut} more bytes not shown]"));
                }
                ToolOutput::ok(text)
            }
            Err(e) => self.0.failure(&e),
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
        match self.0.fs.write(&path, a.content.as_bytes(), &policy) {
            Ok(w) => ToolOutput::ok(format!(
                "{} {} ({} bytes){}",
                if w.created { "created" } else { "replaced" },
                w.path.display(),
                w.bytes,
                granted_note(granted)
            )),
            Err(e) => self.0.failure(&e),
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
        match self
            .0
            .fs
            .edit(&path, &a.old_string, &a.new_string, a.replace_all, &policy)
        {
            Ok(e) => ToolOutput::ok(format!(
                "edited {} ({} replacement{}){}",
                e.path.display(),
                e.replacements,
                if e.replacements == 1 { "" } else { "s" },
                granted_note(granted)
            )),
            Err(e) => self.0.failure(&e),
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
