use std::path::PathBuf;

use crate::SessionId;

/// Why a session could not be created, opened, listed or appended to.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A filesystem operation on `path` (the store directory or a log) failed.
    #[error("session store {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line other than a torn last one does not parse, or breaks the
    /// sequence. Nothing is skipped: skipping it would drop an event.
    #[error("{}:{line}: corrupt session log line: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        /// 1-based; the header is line 1.
        line: usize,
        reason: String,
    },
    /// The first line is missing, is not a header this build reads, or names
    /// another session than the file name does.
    #[error("{}:1: bad session log header: {reason}", path.display())]
    BadHeader { path: PathBuf, reason: String },
    #[error("no session {id} in {}", dir.display())]
    NotFound { id: SessionId, dir: PathBuf },
    /// The requested cwd cannot be made absolute (e.g. it is empty, or the
    /// process's current directory is gone).
    #[error("session cwd {}: {source}", cwd.display())]
    Cwd {
        cwd: PathBuf,
        source: std::io::Error,
    },
    /// The OS random source failed, so no unguessable id can be made.
    #[error("no OS randomness for a session id: {reason}")]
    Entropy { reason: String },
    #[error("{}: cannot encode a record: {source}", path.display())]
    Encode {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The log grew behind this session's back (another process, or another
    /// store handle bypassing this one, appended to it). Appending now would
    /// repeat a `seq`, so nothing is written.
    #[error(
        "{}: another writer appended to this session log (it is {found} bytes, this session wrote {expected}); refusing to append",
        path.display()
    )]
    ConcurrentWriter {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    /// Another process has this session open (it holds the log's lock), so
    /// this one may neither repair nor append to the log: two writers would
    /// each number their next event with the same `seq`, and the log would
    /// never load again. Close the session there, or wait for it to end.
    #[error(
        "session {id} is open in another process (its log {} is locked); refusing to open it here",
        path.display()
    )]
    Locked { id: SessionId, path: PathBuf },
    /// An earlier append failed part-way and its partial line could not be cut
    /// off, so any further line would land after it. Reopening the session
    /// (which repairs a torn tail) is the way back.
    #[error(
        "{}: an earlier append failed and its partial line could not be removed; reopen the session",
        path.display()
    )]
    Broken { path: PathBuf },
}
