//! Background jobs: the same spawn and the same classifier as the
//! foreground; the settled result is stamped instead of raised.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Notify, watch};

use crate::error::ShellError;
use crate::output::CapturedOutput;
use crate::process::{self, Launch, Shared};
use crate::spec::ShellResult;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A running (or settled) background command. Its facts (mode, backend,
/// dialect) travel with it, so overlapping jobs under different policies
/// never mix them.
#[derive(Clone)]
pub struct JobHandle {
    id: u64,
    shared: Shared,
    done: watch::Receiver<Option<Arc<ShellResult>>>,
    kill: Arc<Notify>,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("id", &self.id)
            .field("settled", &self.done.borrow().is_some())
            .finish()
    }
}

impl JobHandle {
    pub(crate) fn start(launch: Launch) -> Result<Self, ShellError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| ShellError::NoRuntime(e.to_string()))?;
        let _enter = runtime.enter();
        let running = process::spawn(launch)?;
        let shared = running.shared.clone();
        let kill = Arc::new(Notify::new());
        let (tx, done) = watch::channel(None);
        let on_kill = kill.clone();
        runtime.spawn(async move {
            let settled = running.settle(on_kill.notified()).await;
            // Nobody may be listening any more; the result is then dropped.
            let _ = tx.send(Some(Arc::new(settled.result)));
        });
        Ok(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shared,
            done,
            kill,
        })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Stdout and stderr captured so far (bounded like a foreground run).
    pub fn output_so_far(&self) -> (CapturedOutput, CapturedOutput) {
        let s = process::lock(&self.shared);
        (s.stdout.snapshot(), s.stderr.snapshot())
    }

    /// The settled result, if the job has finished.
    pub fn result(&self) -> Option<Arc<ShellResult>> {
        self.done.borrow().clone()
    }

    /// Wait for the job to settle.
    pub async fn wait(&self) -> Arc<ShellResult> {
        let mut rx = self.done.clone();
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The supervisor is gone without a result: only possible if
                // the runtime shut down under it.
                return Arc::new(ShellResult::lost());
            }
        }
    }

    /// Kill the job's whole process group; `wait` then reports `cancelled`.
    pub fn kill(&self) {
        self.kill.notify_one();
    }
}
