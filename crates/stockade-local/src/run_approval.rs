//! A request's own approver ([`stockade_core::RunApproval`], the SDK's
//! callback on an executor request) in the shapes the proxy and the
//! supervisor's channel ask: it takes the place of the session's approval
//! for that one run. A host allowed through it is allowed for the run
//! only (a fresh [`HostGrants`]): what a session remembers is the
//! caller's to keep.

use std::sync::Arc;

use stockade_core::{ReplyTo, RunAnswer, RunApproval, RunQuestion, RunReply};
use stockade_proxy::{HostAnswer, HostApproval, HostApprover, HostGrants, HostQuestion, HostReply};

struct Asks(Arc<dyn stockade_core::RunApprover>);

struct ToHost(HostReply);

impl ReplyTo for ToHost {
    fn answer(self: Box<Self>, answer: RunAnswer) {
        self.0.answer(match answer {
            RunAnswer::Allow | RunAnswer::AllowDirectory => HostAnswer::AllowOnce,
            RunAnswer::Refuse => HostAnswer::Refuse,
        });
    }

    fn is_pending(&self) -> bool {
        self.0.is_pending()
    }
}

impl HostApprover for Asks {
    fn ask(&self, q: HostQuestion, reply: HostReply) {
        self.0.ask(
            RunQuestion::Host {
                host: q.host,
                port: q.port,
            },
            RunReply::new(ToHost(reply)),
        );
    }
}

/// The proxy's approval for one run asking `approval`.
pub(crate) fn hosts(approval: &RunApproval) -> HostApproval {
    let mut out = HostApproval::new(
        Arc::new(Asks(approval.approver().clone())),
        Arc::new(HostGrants::new()),
    );
    if let Some(t) = approval.timeout() {
        out = out.with_timeout(t);
    }
    if let Some(n) = approval.max_questions() {
        out = out.with_max_questions(usize::try_from(n).unwrap_or(usize::MAX));
    }
    out
}

#[cfg(target_os = "linux")]
mod paths {
    use super::Asks;
    use crate::path_approval::{PathAnswer, PathApproval, PathApprover, PathQuestion, PathReply};
    use std::sync::Arc;
    use stockade_core::{ReplyTo, RunAnswer, RunApproval, RunQuestion, RunReply};

    struct ToPath(PathReply);

    impl ReplyTo for ToPath {
        fn answer(self: Box<Self>, answer: RunAnswer) {
            self.0.answer(match answer {
                RunAnswer::Allow => PathAnswer::AllowPath,
                RunAnswer::AllowDirectory => PathAnswer::AllowDirectory,
                RunAnswer::Refuse => PathAnswer::Refuse,
            });
        }

        fn is_pending(&self) -> bool {
            self.0.is_pending()
        }
    }

    impl PathApprover for Asks {
        fn ask(&self, q: PathQuestion, reply: PathReply) {
            self.0.ask(
                RunQuestion::Path {
                    op: q.op,
                    path: q.path,
                },
                RunReply::new(ToPath(reply)),
            );
        }
    }

    /// The supervisor channel's approval for one run asking `approval`.
    pub(crate) fn paths(approval: &RunApproval) -> PathApproval {
        let mut out = PathApproval::new(Arc::new(Asks(approval.approver().clone())));
        if let Some(t) = approval.timeout() {
            out = out.with_timeout(t);
        }
        if let Some(n) = approval.max_questions() {
            out = out.with_max_questions(n);
        }
        out
    }
}

#[cfg(target_os = "linux")]
pub(crate) use paths::paths;
