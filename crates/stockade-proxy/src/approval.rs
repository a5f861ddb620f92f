//! Asking about a host that is not on the list, while the connection waits.
//!
//! A run may carry a [`HostApproval`] (see
//! [`Proxy::run_token_asking`](crate::Proxy::run_token_asking)). A request
//! of that run (one carrying its token) that names a host NOT in
//! `allowed_hosts` is then held, not refused, while the approver is asked
//! [`HostQuestion`] `{ host, port }`:
//!
//! - only for a host NAME, strictly read and normalised as the allow list
//!   matches it (lower case, no trailing dot). An address, an odd numeric
//!   spelling, or a target that is no host name at all is refused or
//!   rejected as before, never asked about, so a confined command cannot
//!   put control bytes or prose in front of the user;
//! - once per host per command: concurrent and later requests of the same
//!   run to the same host wait for, then reuse, the first answer (whatever
//!   the port: the list, too, names hosts, not ports);
//! - at most [`HostApproval::with_max_questions`] times per command
//!   (default [`DEFAULT_MAX_QUESTIONS`]) and at most
//!   [`MAX_OUTSTANDING`] questions unanswered at once across the proxy;
//!   past either, the host is refused as today;
//! - held at most [`HostApproval::with_timeout`] (default
//!   [`DEFAULT_TIMEOUT`]); no answer by then refuses.
//!
//! [`HostAnswer::AllowOnce`] and [`HostAnswer::AllowForSession`] let the
//! request go on exactly as for a listed host: the name is resolved and
//! every address judged (a name that resolves only to loopback, a private
//! network or the metadata service is still refused unless the list names
//! the address), and the client sees only a slower answer. A refusal, a
//! timeout, a dropped [`HostReply`] or the run's end give the client
//! today's refusal: `403`, `x-stockade-denied: <host>`, and the host in the
//! run's refused list.
//!
//! What a session remembers lives in [`HostGrants`], which the caller keeps
//! across commands: a host allowed for the session or refused is decided
//! from it without asking, until [`HostGrants::forget`] (the user changed
//! something). An `AllowOnce` or a timeout is this command's alone.
//!
//! A request without a token of this run (no credentials, a forged token)
//! is never asked about: it is refused as today.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};
use tokio::task::AbortHandle;

use crate::target::{self, Host};

/// How long a connection is held for an answer unless the caller says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many questions one command may cause unless the caller says.
pub const DEFAULT_MAX_QUESTIONS: usize = 8;

/// Questions unanswered at once across one proxy (every run of it): a
/// command's own cap bounds one command; this bounds many at once.
pub const MAX_OUTSTANDING: usize = 32;

/// What the user said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostAnswer {
    /// This command may reach the host; the next one is asked again.
    AllowOnce,
    /// Every later command of the session too (kept in [`HostGrants`]).
    AllowForSession,
    /// Refused, and not asked again this session (kept in [`HostGrants`]).
    Refuse,
}

/// What the user is asked about: a host name and the port the client
/// asked for. `host` is a valid DNS-style name (letters, digits, `-`, `_`,
/// dots; lower case, no trailing dot), never an address or free text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostQuestion {
    pub host: String,
    pub port: u16,
}

/// Where the answer to one question goes. Answer from any thread, at any
/// time; an answer after the proxy stopped waiting (timeout, the command
/// ended) is ignored. Dropping it unanswered refuses at once.
#[derive(Debug)]
pub struct HostReply {
    tx: oneshot::Sender<HostAnswer>,
}

impl HostReply {
    pub fn answer(self, answer: HostAnswer) {
        // The proxy may have stopped waiting; then nothing is left to tell.
        let _ = self.tx.send(answer);
    }

    /// Whether the proxy still waits for this answer: false once it timed
    /// out, the command's run ended or the proxy stopped, so a front end
    /// can withdraw a question no one waits for any more.
    pub fn is_pending(&self) -> bool {
        !self.tx.is_closed()
    }

    /// Resolves when the proxy no longer waits (see [`Self::is_pending`]).
    pub async fn withdrawn(&mut self) {
        self.tx.closed().await;
    }
}

/// Who is asked. Called on the proxy's own thread: `ask` must return
/// promptly (hand the question to another thread or task and answer
/// through `reply` from there); while it runs, the proxy serves no one.
pub trait HostApprover: Send + Sync {
    fn ask(&self, question: HostQuestion, reply: HostReply);
}

impl<F> HostApprover for F
where
    F: Fn(HostQuestion, HostReply) + Send + Sync,
{
    fn ask(&self, question: HostQuestion, reply: HostReply) {
        self(question, reply);
    }
}

/// A name that cannot be granted: not a host name as the proxy reads one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    #[error("{given:?} is not a host name")]
    NotAHostName { given: String },
}

/// What a session decided about hosts not on its list, shared by its
/// commands (the caller keeps one per session, in an `Arc`).
#[derive(Debug, Default)]
pub struct HostGrants {
    inner: Mutex<Grants>,
}

#[derive(Debug, Default)]
struct Grants {
    allowed: Vec<String>,
    refused: Vec<String>,
}

impl HostGrants {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Grants> {
        // Two lists of names: a panic elsewhere leaves them whole.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hosts allowed for the session, in the order they were allowed.
    pub fn allowed(&self) -> Vec<String> {
        self.lock().allowed.clone()
    }

    /// Hosts refused for the session, in the order they were refused.
    pub fn refused(&self) -> Vec<String> {
        self.lock().refused.clone()
    }

    /// Allow `host` for the session without asking (a resumed session's
    /// earlier answer). Returns the name as it is kept and matched.
    pub fn allow(&self, host: &str) -> Result<String, GrantError> {
        let name = host_name(host)?;
        self.set(&name, true);
        Ok(name)
    }

    /// Refuse `host` for the session without asking.
    pub fn refuse(&self, host: &str) -> Result<String, GrantError> {
        let name = host_name(host)?;
        self.set(&name, false);
        Ok(name)
    }

    /// Forget every answer: each host is asked about again. For when the
    /// user changed something (the policy, the host list).
    pub fn forget(&self) {
        let mut g = self.lock();
        g.allowed.clear();
        g.refused.clear();
    }

    /// `Some(allowed)` when the session already decided `host`.
    pub(crate) fn verdict(&self, host: &str) -> Option<bool> {
        let g = self.lock();
        if g.allowed.iter().any(|h| h == host) {
            Some(true)
        } else if g.refused.iter().any(|h| h == host) {
            Some(false)
        } else {
            None
        }
    }

    fn set(&self, host: &str, allowed: bool) {
        let mut g = self.lock();
        let g = &mut *g;
        let (to, from) = match allowed {
            true => (&mut g.allowed, &mut g.refused),
            false => (&mut g.refused, &mut g.allowed),
        };
        from.retain(|h| h != host);
        if !to.iter().any(|h| h == host) {
            to.push(host.to_owned());
        }
    }
}

/// `given` as the proxy reads and matches a host name, or why not.
fn host_name(given: &str) -> Result<String, GrantError> {
    match target::parse_authority(given, Some(1)) {
        Ok(t) if t.port == 1 && !given.contains(':') => match t.host {
            Host::Name(n) => Ok(n),
            Host::Addr(_) => Err(GrantError::NotAHostName {
                given: given.to_owned(),
            }),
        },
        _ => Err(GrantError::NotAHostName {
            given: given.to_owned(),
        }),
    }
}

/// How a run asks: who, what the session remembers, and the bounds.
#[derive(Clone)]
pub struct HostApproval {
    approver: Arc<dyn HostApprover>,
    grants: Arc<HostGrants>,
    timeout: Duration,
    max_questions: usize,
}

impl fmt::Debug for HostApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostApproval")
            .field("grants", &self.grants)
            .field("timeout", &self.timeout)
            .field("max_questions", &self.max_questions)
            .finish_non_exhaustive()
    }
}

impl HostApproval {
    /// Asks `approver`, remembering session answers in `grants`, with the
    /// default bounds ([`DEFAULT_TIMEOUT`], [`DEFAULT_MAX_QUESTIONS`]).
    pub fn new(approver: Arc<dyn HostApprover>, grants: Arc<HostGrants>) -> Self {
        Self {
            approver,
            grants,
            timeout: DEFAULT_TIMEOUT,
            max_questions: DEFAULT_MAX_QUESTIONS,
        }
    }

    /// How long a connection is held for an answer.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many questions one command may cause; later unlisted hosts are
    /// refused as today.
    pub fn with_max_questions(mut self, n: usize) -> Self {
        self.max_questions = n;
        self
    }

    pub fn grants(&self) -> &Arc<HostGrants> {
        &self.grants
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn max_questions(&self) -> usize {
        self.max_questions
    }
}

/// One command's questions: the run's approval and what it asked so far.
#[derive(Debug)]
pub(crate) struct Scope {
    approval: HostApproval,
    state: Mutex<ScopeState>,
}

#[derive(Debug, Default)]
struct ScopeState {
    /// Each host asked about in this command, and its answer once given
    /// (`Some(allowed)`); waiters subscribe to the first question's.
    hosts: Vec<(String, watch::Receiver<Option<bool>>)>,
    /// The question tasks, cut when the run ends.
    tasks: Vec<AbortHandle>,
    ended: bool,
}

impl Scope {
    pub(crate) fn new(approval: HostApproval) -> Self {
        Self {
            approval,
            state: Mutex::new(ScopeState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ScopeState> {
        // Poisoned only by a panic between two pushes: still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run ended: pending questions are withdrawn (their waiters
    /// refused) and nothing more is asked.
    pub(crate) fn end(&self) {
        let mut st = self.lock();
        st.ended = true;
        for t in st.tasks.drain(..) {
            t.abort();
        }
        st.hosts.clear();
    }

    /// Whether `host` (a name not on the list) may be reached by this
    /// command: from the session's memory, this command's earlier
    /// question, or a new one; `outstanding` bounds questions proxy-wide.
    pub(crate) async fn decide(
        self: &Arc<Self>,
        host: &str,
        port: u16,
        outstanding: &Arc<Semaphore>,
    ) -> bool {
        if let Some(v) = self.approval.grants.verdict(host) {
            return v;
        }
        let mut rx = {
            let mut st = self.lock();
            if st.ended {
                return false;
            }
            match st.hosts.iter().find(|(h, _)| h == host) {
                Some((_, rx)) => rx.clone(),
                None => {
                    if st.hosts.len() >= self.approval.max_questions {
                        return false;
                    }
                    let Ok(permit) = Arc::clone(outstanding).try_acquire_owned() else {
                        return false;
                    };
                    let (tx, rx) = watch::channel(None);
                    st.hosts.push((host.to_owned(), rx.clone()));
                    let question = HostQuestion {
                        host: host.to_owned(),
                        port,
                    };
                    // A task of its own, so the question outlives the
                    // request that caused it: a client that gives up does
                    // not make a second client ask again.
                    let task = tokio::spawn(ask(Arc::clone(self), question, tx, permit));
                    st.tasks.push(task.abort_handle());
                    rx
                }
            }
        };
        // An error is a question task that ended without answering (the
        // run ended, the approver panicked): refused.
        rx.wait_for(Option::is_some)
            .await
            .is_ok_and(|v| *v == Some(true))
    }
}

/// Asks one question and publishes its answer to every waiter.
async fn ask(
    scope: Arc<Scope>,
    question: HostQuestion,
    tx: watch::Sender<Option<bool>>,
    _permit: OwnedSemaphorePermit,
) {
    let host = question.host.clone();
    let (reply, answer) = oneshot::channel();
    scope
        .approval
        .approver
        .ask(question, HostReply { tx: reply });
    let allowed = match tokio::time::timeout(scope.approval.timeout, answer).await {
        Ok(Ok(HostAnswer::AllowOnce)) => true,
        Ok(Ok(HostAnswer::AllowForSession)) => {
            scope.approval.grants.set(&host, true);
            true
        }
        Ok(Ok(HostAnswer::Refuse)) => {
            scope.approval.grants.set(&host, false);
            false
        }
        // Dropped unanswered, or no answer in time: this command only.
        Ok(Err(_)) | Err(_) => false,
    };
    tx.send_replace(Some(allowed));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn grants_take_host_names_only_as_the_list_matches_them() {
        let g = HostGrants::new();
        assert_eq!(g.allow("Example.COM.").unwrap(), "example.com");
        assert_eq!(g.verdict("example.com"), Some(true));
        for bad in [
            "",
            "127.0.0.1",
            "[::1]",
            "a b",
            "x.test:443",
            "evil\n.test",
            "0x7f.1",
            "u@x.test",
            "a..b",
        ] {
            assert!(g.refuse(bad).is_err(), "{bad:?}");
        }
        g.refuse("example.com").unwrap();
        assert_eq!(g.verdict("example.com"), Some(false));
        assert!(g.allowed().is_empty());
        assert_eq!(g.refused(), ["example.com"]);
        g.forget();
        assert_eq!(g.verdict("example.com"), None);
    }
}
