//! The background jobs of one agent: started by the bash tool, read by
//! job_output, and ended by the task tool when a child session ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use stockade_session::SessionId;
use stockade_shell::JobHandle;

use crate::escalation::Grant;

/// A background job, visible only to the session that started it.
pub struct Job {
    pub(crate) session: Option<SessionId>,
    pub(crate) handle: JobHandle,
    pub(crate) granted: Grant,
}

pub type Jobs = Arc<Mutex<HashMap<u64, Job>>>;

pub(crate) fn lock_jobs(jobs: &Jobs) -> std::sync::MutexGuard<'_, HashMap<u64, Job>> {
    // A panic elsewhere never leaves the map half-written (inserts are single
    // calls), so its contents stay valid.
    jobs.lock().unwrap_or_else(PoisonError::into_inner)
}
