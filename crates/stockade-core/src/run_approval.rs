//! Questions a confinement asks while the command waits, answered by the
//! caller of one request (the SDK's callback on an executor request).
//!
//! A provider that can hold a refused operation (the local provider: a
//! host through its proxy on both Linux backends, a path outside the
//! writable roots under supervised Landlock) asks the request's
//! [`RunApproval`] instead of refusing at once. A provider that cannot
//! ignores it: the run's facts say what can be asked at run time, and
//! nothing is widened. What the user may never be offered (stockade's
//! control state, names the user's tools execute later) is refused by the
//! provider before any question, whatever an answerer would say.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a refused file operation was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathOp {
    /// An open for writing, creating or truncating.
    Write,
    Mkdir,
    Mknod,
    Symlink,
    /// unlink or rmdir.
    Remove,
    Rename,
    Link,
    Truncate,
    Chmod,
    Chown,
    Utimes,
    SetXattr,
    RemoveXattr,
    /// A code this build does not know.
    Other(u8),
}

impl fmt::Display for PathOp {
    /// The name a question and the session log give the operation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            PathOp::Write => "write",
            PathOp::Mkdir => "mkdir",
            PathOp::Mknod => "mknod",
            PathOp::Symlink => "symlink",
            PathOp::Remove => "remove",
            PathOp::Rename => "rename",
            PathOp::Link => "link",
            PathOp::Truncate => "truncate",
            PathOp::Chmod => "chmod",
            PathOp::Chown => "chown",
            PathOp::Utimes => "utimes",
            PathOp::SetXattr => "setxattr",
            PathOp::RemoveXattr => "removexattr",
            PathOp::Other(code) => return write!(f, "operation {code}"),
        };
        f.write_str(name)
    }
}

/// `bytes` (a path or a host a command chose) as a question may show them:
/// printable ASCII as is, a backslash doubled, every other byte `\xNN`. A
/// name may hold any byte but `/` and NUL: shown raw, an escape sequence
/// could redraw or disguise the question, and bytes that are no UTF-8
/// would be lost.
pub fn escaped(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

/// One question, while the command waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunQuestion {
    /// A host not on the run's list (a valid DNS-style name, lower case,
    /// never an address or free text) and the port asked for.
    Host { host: String, port: u16 },
    /// A place outside every writable root: the operation and the absolute
    /// path the supervisor refused (any bytes a path may hold; show it
    /// escaped).
    Path { op: PathOp, path: PathBuf },
}

/// The answer to one [`RunQuestion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAnswer {
    /// That host, or that one path, for the rest of this command.
    Allow,
    /// A path's directory and everything beneath it, for the rest of this
    /// command (for a host: the same as [`RunAnswer::Allow`]).
    AllowDirectory,
    /// Today's refusal; not asked again this command.
    Refuse,
}

/// What a provider does with an answer (implemented by providers).
pub trait ReplyTo: Send {
    fn answer(self: Box<Self>, answer: RunAnswer);
    /// False once the command stopped waiting (timed out, ended).
    fn is_pending(&self) -> bool;
}

/// Where the answer to one question goes: answer from any thread, at any
/// time; an answer after the command stopped waiting is ignored. Dropping
/// it unanswered refuses at once.
pub struct RunReply(Box<dyn ReplyTo>);

impl fmt::Debug for RunReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunReply")
            .field("pending", &self.is_pending())
            .finish()
    }
}

impl RunReply {
    pub fn new(to: impl ReplyTo + 'static) -> Self {
        Self(Box::new(to))
    }

    pub fn answer(self, answer: RunAnswer) {
        self.0.answer(answer);
    }

    pub fn is_pending(&self) -> bool {
        self.0.is_pending()
    }
}

/// Asked on a provider's thread; must not block it for long (answer
/// through `reply` from wherever the user is asked).
pub trait RunApprover: Send + Sync {
    fn ask(&self, question: RunQuestion, reply: RunReply);
}

/// A request's approver and its bounds. Compared by identity: two
/// approvals are equal only when they are the same one.
#[derive(Clone)]
pub struct RunApproval {
    approver: Arc<dyn RunApprover>,
    timeout: Option<Duration>,
    max_questions: Option<u32>,
}

impl fmt::Debug for RunApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunApproval")
            .field("timeout", &self.timeout)
            .field("max_questions", &self.max_questions)
            .finish_non_exhaustive()
    }
}

impl PartialEq for RunApproval {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.approver, &other.approver)
            && self.timeout == other.timeout
            && self.max_questions == other.max_questions
    }
}

impl Eq for RunApproval {}

impl RunApproval {
    /// The provider's default bounds unless set.
    pub fn new(approver: Arc<dyn RunApprover>) -> Self {
        Self {
            approver,
            timeout: None,
            max_questions: None,
        }
    }

    /// No answer within `timeout` refuses.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// At most `n` questions per command; past it, refusals as without an
    /// approver.
    pub fn with_max_questions(mut self, n: u32) -> Self {
        self.max_questions = Some(n);
        self
    }

    pub fn approver(&self) -> &Arc<dyn RunApprover> {
        &self.approver
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub fn max_questions(&self) -> Option<u32> {
        self.max_questions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Refuses;
    impl RunApprover for Refuses {
        fn ask(&self, _: RunQuestion, reply: RunReply) {
            reply.answer(RunAnswer::Refuse);
        }
    }

    struct Seen(Arc<Mutex<Vec<RunAnswer>>>);
    impl ReplyTo for Seen {
        fn answer(self: Box<Self>, answer: RunAnswer) {
            self.0.lock().unwrap().push(answer);
        }
        fn is_pending(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_name_is_shown_without_raw_control_bytes() {
        assert_eq!(
            escaped(b"/srv/a\x1b[2Jb\\c\n\xff"),
            "/srv/a\\x1b[2Jb\\\\c\\x0a\\xff"
        );
        assert_eq!(PathOp::SetXattr.to_string(), "setxattr");
        assert_eq!(PathOp::Other(42).to_string(), "operation 42");
    }

    #[test]
    fn approvals_are_equal_only_when_they_are_the_same_one() {
        let a = RunApproval::new(Arc::new(Refuses));
        let b = RunApproval::new(Arc::new(Refuses));
        assert_eq!(a, a.clone());
        assert_ne!(a, b);
        assert_ne!(a, a.clone().with_max_questions(1));
    }

    #[test]
    fn a_reply_reaches_its_provider() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let a = RunApproval::new(Arc::new(Refuses));
        a.approver().ask(
            RunQuestion::Host {
                host: "example.com".into(),
                port: 443,
            },
            RunReply::new(Seen(seen.clone())),
        );
        assert_eq!(*seen.lock().unwrap(), [RunAnswer::Refuse]);
    }
}
