//! Who asked for which host: the per-run record the caller reads back after
//! a run to tell the model which hosts were refused.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

#[derive(Debug, Default, Clone)]
pub(crate) struct RunLog {
    pub(crate) allowed: Vec<String>,
    pub(crate) refused: Vec<String>,
}

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<String, RunLog>,
    unattributed: RunLog,
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
        let (log, who) = match token.and_then(|t| inner.runs.get_mut(t).map(|l| (l, t))) {
            Some((log, t)) => (log, format!("run {}", short(t))),
            None => (&mut inner.unattributed, "unattributed".to_owned()),
        };
        let (list, verb) = if allowed {
            (&mut log.allowed, "allowed")
        } else {
            (&mut log.refused, "refused")
        };
        if !list.iter().any(|h| h == host) {
            list.push(host.to_owned());
            eprintln!("stockade-proxy: {verb} {host} ({who})");
        }
    }

    pub(crate) fn run(&self, token: &str) -> RunLog {
        self.lock().runs.get(token).cloned().unwrap_or_default()
    }

    pub(crate) fn unattributed(&self) -> RunLog {
        self.lock().unattributed.clone()
    }
}

/// Enough of a token to tell runs apart in a log line.
pub(crate) fn short(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}
