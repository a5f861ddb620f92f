//! `job_output`: what a background job printed, and how it ended.

use stockade_shell::BoxFuture;

use crate::tool::{Tool, ToolContext, ToolOutput};
use crate::tools::jobs::{Jobs, lock_jobs};
use crate::tools::render;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    job_id: u64,
    #[serde(default)]
    wait: bool,
}

pub struct JobOutputTool {
    jobs: Jobs,
    escalation_offered: bool,
}

impl JobOutputTool {
    pub(crate) fn new(jobs: Jobs, escalation_offered: bool) -> Self {
        Self {
            jobs,
            escalation_offered,
        }
    }

    async fn run(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(format!("invalid arguments for job_output: {e}")),
        };
        let found = {
            let jobs = lock_jobs(&self.jobs);
            jobs.get(&args.job_id)
                // Sessions never see each other's jobs.
                .filter(|j| j.session.as_ref() == ctx.session.as_ref().map(|s| s.id()))
                .map(|j| (j.handle.clone(), j.granted))
        };
        let Some((handle, granted)) = found else {
            return ToolOutput::error(format!("no background job {} in this session", args.job_id));
        };
        let settled = if args.wait {
            Some(handle.wait().await)
        } else {
            handle.result()
        };
        match settled {
            Some(r) => {
                let failed =
                    !r.exit.success() || r.sandbox.as_ref().is_some_and(|f| f.runner_failed);
                let content = format!(
                    "job {} finished\n{}",
                    args.job_id,
                    render(&r, self.escalation_offered, granted)
                );
                if failed {
                    ToolOutput::error(content)
                } else {
                    ToolOutput::ok(content)
                }
            }
            None => {
                let (out, err) = handle.output_so_far();
                ToolOutput::ok(format!(
                    "job {} is still running\nstdout so far:\n{}\nstderr so far:\n{}",
                    args.job_id,
                    out.text(),
                    err.text()
                ))
            }
        }
    }
}

impl Tool for JobOutputTool {
    fn name(&self) -> &'static str {
        "job_output"
    }

    fn description(&self) -> String {
        "Read the output of a background job started by bash, and how it ended (set wait to block until it ends).".into()
    }

    fn schema(&self) -> serde_json::Value {
        crate::escalation::object_schema(
            serde_json::json!({
                "job_id": { "type": "integer", "minimum": 1, "description": "The id bash returned." },
                "wait": { "type": "boolean", "description": "Wait for the job to end (default false)." }
            }),
            &["job_id"],
            false,
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
