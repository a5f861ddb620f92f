//! The approval channel (`--ask-fd N`): a question about one refused
//! place, asked while the calling thread waits, and the answer.
//!
//! Wire format (native to neither side's language; all integers
//! little-endian), one question at a time, each answered or abandoned
//! before the next is written:
//!
//! - question: `u64 id`, `u8 kind` (`Kind`), `u32 len`, `len` bytes of the
//!   absolute path (any bytes, never interpreted: the length, not a
//!   terminator, ends it).
//! - answer: `u64 id`, `u8 answer`: 1 allow this path, 2 allow its
//!   directory (beneath it), anything else refuse. An answer whose id is
//!   not the pending question's (one that came too late) is skipped.
//!
//! Bounded: at most `max` questions per run; a place refused (or not
//! answered in time) is not asked about again; a question about a place a
//! grant made meanwhile covers is not asked; end of file or an error on
//! the channel refuses that question and every later one without asking.
//! The command cannot reach the channel: it is the supervisor's descriptor,
//! close-on-exec, never the child's.
#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::fence::{Answer, Call, Fence, Outside};

/// What the refused call was doing, as sent.
pub fn kind(call: &Call) -> u8 {
    match call {
        Call::Open { .. } => 1,
        Call::Mkdir { .. } => 2,
        Call::Mknod { .. } => 3,
        Call::Symlink { .. } => 4,
        Call::Unlink { .. } => 5,
        Call::Rename { .. } => 6,
        Call::Link { .. } => 7,
        Call::Truncate { .. } => 8,
        Call::Chmod { .. } => 9,
        Call::Chown { .. } => 10,
        Call::Utimes { .. } => 11,
        Call::SetXattr { .. } => 12,
        Call::RemoveXattr { .. } => 13,
        // Never about a path: never recorded as outside.
        Call::Listen { .. } | Call::Connect { .. } => 0,
    }
}

type Key = ((u64, u64), CString);

struct State {
    asked: u32,
    refused: HashSet<Key>,
    next_id: u64,
    /// The channel ended or failed: nothing more is asked.
    closed: bool,
    channel: UnixStream,
}

pub struct Asker {
    /// Held while a question is out: one at a time, so a later question
    /// is judged after the grants of the earlier ones.
    state: Mutex<State>,
    max: u32,
    timeout: Duration,
}

impl Asker {
    pub fn new(channel: UnixStream, max: u32, timeout: Duration) -> Asker {
        Asker {
            state: Mutex::new(State {
                asked: 0,
                refused: HashSet::new(),
                next_id: 1,
                closed: false,
                channel,
            }),
            max,
            timeout,
        }
    }

    /// Questions per run, at most.
    pub fn max(&self) -> usize {
        usize::try_from(self.max).unwrap_or(usize::MAX)
    }

    /// Asks about `q` unless the bounds say refuse; true when the fence
    /// now covers it (the caller performs the call again).
    pub fn ask(&self, fence: &Fence, kind: u8, q: Outside) -> bool {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // An answer given while this one waited may cover it.
        if fence.covers(&q) {
            return true;
        }
        let key = q.key();
        if st.closed || st.asked >= self.max || st.refused.contains(&key) {
            return false;
        }
        st.asked += 1;
        if st.asked >= self.max {
            // This is the last question: later refusals skip the record.
            fence.stop_asking();
        }
        let id = st.next_id;
        st.next_id += 1;
        let answer = match exchange(&mut st.channel, id, kind, &q.path(), self.timeout) {
            Ok(a) => a,
            Err(e) => {
                if e.kind() != io::ErrorKind::TimedOut {
                    st.closed = true;
                    fence.stop_asking();
                }
                Answer::Refuse
            }
        };
        if answer == Answer::Refuse {
            st.refused.insert(key);
            return false;
        }
        fence.grant(q, answer);
        true
    }
}

fn exchange(
    channel: &mut UnixStream,
    id: u64,
    kind: u8,
    path: &[u8],
    timeout: Duration,
) -> io::Result<Answer> {
    let len = u32::try_from(path.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut record = Vec::with_capacity(13 + path.len());
    record.extend_from_slice(&id.to_le_bytes());
    record.push(kind);
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(path);
    channel.set_write_timeout(Some(timeout))?;
    channel.write_all(&record)?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        channel.set_read_timeout(Some(left))?;
        let mut answer = [0u8; 9];
        match channel.read_exact(&mut answer) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock) => {
                return Err(io::ErrorKind::TimedOut.into());
            }
            Err(e) => return Err(e),
        }
        let mut got = [0u8; 8];
        got.copy_from_slice(&answer[..8]);
        if u64::from_le_bytes(got) != id {
            continue;
        }
        return Ok(match answer[8] {
            1 => Answer::Path,
            2 => Answer::Directory,
            _ => Answer::Refuse,
        });
    }
}
