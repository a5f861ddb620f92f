//! Who asked for which host: the per-run record the caller reads back after
//! a run to tell the model which hosts were refused.
//!
//! The proxy writes nothing to stderr itself. It runs inside the caller's
//! process, whose stderr is also where a confined command's stderr is
//! passed through, so a line printed from here would land in the middle of
//! the command's own (a partial line, a progress bar). What it decided is
//! kept here instead and told by the caller, which knows where its lines
//! may go (`stockade exec` reports the refused hosts once, after the run).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

#[derive(Debug, Default, Clone)]
pub(crate) struct RunLog {
    pub(crate) allowed: Vec<String>,
    pub(crate) refused: Vec<String>,
}

/// How many distinct problems are kept: they are the proxy's own failures
/// (a listener that could not be served, accept errors), few by nature.
const MAX_PROBLEMS: usize = 32;

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<String, RunLog>,
    unattributed: RunLog,
    problems: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    inner: Mutex<Inner>,
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the lists merely
        // short an entry, never inconsistent, so keep serving.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn register(&self, token: &str) {
        self.lock().runs.entry(token.to_owned()).or_default();
    }

    /// Records `host` under `token` when that token was handed out, else
    /// under the unattributed bucket, so an unknown or forged token can
    /// never create buckets (and memory) at a client's whim.
    pub(crate) fn record(&self, token: Option<&str>, host: &str, allowed: bool) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let log = match token.and_then(|t| inner.runs.get_mut(t)) {
            Some(log) => log,
            None => &mut inner.unattributed,
        };
        let list = if allowed {
            &mut log.allowed
        } else {
            &mut log.refused
        };
        if !list.iter().any(|h| h == host) {
            list.push(host.to_owned());
        }
    }

    /// Keeps one of the proxy's own failures, once.
    pub(crate) fn problem(&self, what: String) {
        let mut inner = self.lock();
        if inner.problems.len() < MAX_PROBLEMS && !inner.problems.contains(&what) {
            inner.problems.push(what);
        }
    }

    pub(crate) fn problems(&self) -> Vec<String> {
        self.lock().problems.clone()
    }

    pub(crate) fn run(&self, token: &str) -> RunLog {
        self.lock().runs.get(token).cloned().unwrap_or_default()
    }

    pub(crate) fn unattributed(&self) -> RunLog {
        self.lock().unattributed.clone()
    }
}
