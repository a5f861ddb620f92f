use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use stockade_core::{ApprovalPolicy, NetworkMode, SandboxMode};

use crate::header::HeaderLine;
use crate::replay::{ReplayError, replay};
use crate::{
    Event, KnobSource, Record, ReplayReport, SessionError, SessionHeader, SessionId, knobs,
};

/// The directory holding one log file per session.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SessionStore { dir: dir.into() }
    }

    /// `$XDG_STATE_HOME/stockade/sessions`, else
    /// `$HOME/.local/state/stockade/sessions`, else (Windows only)
    /// `%LOCALAPPDATA%\stockade\sessions`. A relative or empty variable is
    /// ignored, as the XDG spec says: it would resolve against whatever the
    /// current directory happens to be, scattering one user's sessions.
    pub fn default_dir() -> Option<PathBuf> {
        default_dir_from(|name| std::env::var_os(name))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the log of session `id` lives (whether or not it exists).
    pub fn path_of(&self, id: &SessionId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// A new session working in `cwd`. A relative `cwd` is made absolute
    /// against the current directory now, because on resume the process may
    /// run somewhere else. A non-UTF-8 `cwd` is accepted and stored exactly
    /// (as raw bytes on unix, UTF-16 units on Windows).
    pub fn create(&self, cwd: impl Into<PathBuf>) -> Result<Session, SessionError> {
        self.create_with(cwd.into(), None, Vec::new())
    }

    /// A child session seeded with the parent's explicit overrides (the last
    /// `sandbox/mode`, `sandbox/network` and `approval/policy` events, if
    /// any), appended as events
    /// with [`KnobSource::Delegated`], so delegation never falls back to a
    /// wider default. A knob the parent never set is not seeded: the child
    /// folds to the same default the parent does. The header and the seeded
    /// events are one write, so the child never exists without its seeds.
    pub fn create_child(
        &self,
        parent: &Session,
        cwd: impl Into<PathBuf>,
    ) -> Result<Session, SessionError> {
        let source = KnobSource::Delegated {
            parent: parent.id().clone(),
        };
        let seeds = parent.with_records(|records| {
            let mut seeds = Vec::new();
            if let Some(mode) = knobs::sandbox_override(records) {
                seeds.push(Event::SandboxMode {
                    mode,
                    source: source.clone(),
                });
            }
            if let Some(mode) = knobs::network_override(records) {
                seeds.push(Event::SandboxNetwork {
                    mode,
                    source: source.clone(),
                });
            }
            if let Some(policy) = knobs::approval_override(records) {
                seeds.push(Event::ApprovalPolicy {
                    policy,
                    source: source.clone(),
                });
            }
            seeds
        });
        self.create_with(cwd.into(), Some(parent.id().clone()), seeds)
    }

    fn create_with(
        &self,
        cwd: PathBuf,
        parent: Option<SessionId>,
        seeds: Vec<Event>,
    ) -> Result<Session, SessionError> {
        let cwd = std::path::absolute(&cwd).map_err(|source| SessionError::Cwd { cwd, source })?;
        create_private_dir(&self.dir).map_err(|source| SessionError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let header = SessionHeader {
            id: SessionId::generate()?,
            cwd,
            created_unix_ms: now_unix_ms(),
            parent,
        };
        let path = self.path_of(&header.id);
        let encode = |source| SessionError::Encode {
            path: path.clone(),
            source,
        };
        let mut bytes = serde_json::to_vec(&HeaderLine::new(header.clone())).map_err(encode)?;
        bytes.push(b'\n');
        let at_unix_ms = now_unix_ms();
        let records: Vec<Record> = seeds
            .into_iter()
            .zip(1..)
            .map(|(event, seq)| Record {
                seq,
                at_unix_ms,
                event,
            })
            .collect();
        for record in &records {
            bytes.extend(serde_json::to_vec(record).map_err(encode)?);
            bytes.push(b'\n');
        }

        let io = |source| SessionError::Io {
            path: path.clone(),
            source,
        };
        // `create_new`: two sessions never share a file, even if an id ever
        // repeated.
        let mut file = append_options().create_new(true).open(&path).map_err(io)?;
        // Locked before the header is written, so no other process can open
        // the session between its first line and our first append.
        if let Err(e) = lock_exclusive(&file, &header.id, &path, false) {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        if let Err(e) = file.write_all(&bytes) {
            // A half-written new log would read as a bad header forever;
            // nothing refers to it yet, so it goes.
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(io(e));
        }
        let key = fs::canonicalize(&path).map_err(io)?;
        let inner = Arc::new(Inner {
            header,
            path,
            report: ReplayReport::default(),
            state: Mutex::new(State {
                file,
                records: Arc::new(records),
                len: bytes.len() as u64,
                broken: false,
            }),
        });
        register(&mut open_sessions(), key, &inner);
        Ok(Session { inner })
    }

    /// The header of session `id`, read without opening (and so without
    /// repairing) its log: what a caller checks before it agrees to resume
    /// the session at all.
    pub fn header(&self, id: &SessionId) -> Result<SessionHeader, SessionError> {
        let path = self.path_of(id);
        if !path.exists() {
            return Err(SessionError::NotFound {
                id: id.clone(),
                dir: self.dir.clone(),
            });
        }
        read_header(&path, id)?.ok_or_else(|| SessionError::BadHeader {
            path,
            reason: "the header line is incomplete".into(),
        })
    }

    /// Resume session `id`: replay its log. A torn last line is dropped, cut
    /// off the file and reported in [`Session::replay_report`]; a kept last
    /// line missing its newline gets one. Opening a session that is already
    /// open in this process returns the same session (one in-memory state per
    /// file), never a second writer that would repeat `seq` numbers. A
    /// session open in another process is [`SessionError::Locked`], and its
    /// log is neither repaired nor appended to.
    pub fn open(&self, id: &SessionId) -> Result<Session, SessionError> {
        let path = self.path_of(id);
        let io = |source| SessionError::Io {
            path: path.clone(),
            source,
        };
        // Held for the whole open: two opens of one file racing would both
        // repair it, and the second cut could remove the first's appends.
        let mut open = open_sessions();
        let key = match fs::canonicalize(&path) {
            Ok(key) => key,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(SessionError::NotFound {
                    id: id.clone(),
                    dir: self.dir.clone(),
                });
            }
            Err(e) => return Err(io(e)),
        };
        let live = open.get(&key).map(Weak::upgrade);
        let mut file = match live {
            Some(Some(inner)) => {
                let state = inner.lock();
                // A broken session is replayed afresh: that is its repair.
                if !state.broken {
                    drop(state);
                    return Ok(Session { inner });
                }
                // Its handle holds the lock, and a duplicate shares it (a
                // flock belongs to the open file description), so this
                // replay stays the only writer.
                state.file.try_clone().map_err(io)?
            }
            live => {
                let file = append_options().open(&path).map_err(io)?;
                // A dead entry: this process had the session open, and the
                // last handle's drop may still be closing the file (and so
                // releasing its lock) on another thread.
                lock_exclusive(&file, id, &path, matches!(live, Some(None)))?;
                file
            }
        };

        // Read only under the lock: another process's appends or repair
        // would otherwise race this replay.
        let bytes = fs::read(&path).map_err(io)?;
        let replayed = replay(&bytes).map_err(|e| match e {
            ReplayError::BadHeader(reason) => SessionError::BadHeader {
                path: path.clone(),
                reason,
            },
            ReplayError::Corrupt { line, reason } => SessionError::Corrupt {
                path: path.clone(),
                line,
                reason,
            },
        })?;
        if replayed.header.id != *id {
            return Err(SessionError::BadHeader {
                path,
                reason: format!("the header names session {}", replayed.header.id),
            });
        }
        let mut len = replayed.keep as u64;
        if replayed.report.torn_tail.is_some() {
            // Cut the partial line off so the next append starts a line of
            // its own. A separate plain-write handle, because a handle opened
            // for append may not truncate on every platform.
            OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(len))
                .map_err(io)?;
        }
        if replayed.missing_newline {
            file.write_all(b"\n").map_err(io)?;
            len += 1;
        }
        let inner = Arc::new(Inner {
            header: replayed.header,
            path,
            report: replayed.report,
            state: Mutex::new(State {
                file,
                records: Arc::new(replayed.records),
                len,
                broken: false,
            }),
        });
        register(&mut open, key, &inner);
        Ok(Session { inner })
    }

    /// The headers of every session in the store, oldest first. Files whose
    /// names are not `<id>.jsonl` are not sessions and are ignored; a session
    /// file with a bad header is an error, not silently missing. A missing
    /// directory is an empty store.
    ///
    /// A log whose header line is not complete yet (empty, or no newline and
    /// not parseable) is skipped: it is a session another thread or process
    /// is creating right now, or whose creation crashed before it held
    /// anything. `open` of such a file is still [`SessionError::BadHeader`].
    pub fn list(&self) -> Result<Vec<SessionHeader>, SessionError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SessionError::Io { path, source }
        };
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        let mut headers = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io(&self.dir))?;
            let Some(id) = session_file_id(&entry.file_name()) else {
                continue;
            };
            if let Some(header) = read_header(&entry.path(), &id)? {
                headers.push(header);
            }
        }
        headers.sort_by(|a, b| (a.created_unix_ms, &a.id).cmp(&(b.created_unix_ms, &b.id)));
        Ok(headers)
    }
}

/// One session: its header and its records, shared by every clone. Appends
/// from any clone or thread are serialized, and each lands as one complete
/// line.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    header: SessionHeader,
    path: PathBuf,
    report: ReplayReport,
    state: Mutex<State>,
}

struct State {
    /// Opened with O_APPEND: every write lands at the current end of file.
    /// It also holds the session's cross-process lock (see
    /// [`lock_exclusive`]), released when it is closed.
    file: File,
    /// Shared with readers in flight (copy-on-write on append), so
    /// `with_records` runs its closure without holding the lock and may
    /// itself append.
    records: Arc<Vec<Record>>,
    /// The file's length as this session left it; a different length at the
    /// next append means someone else wrote to the file.
    len: u64,
    /// A failed append left a partial line that could not be cut off.
    broken: bool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only changed after the write it reflects succeeded, so
        // a panic elsewhere while holding the lock leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.inner.header.id)
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub fn id(&self) -> &SessionId {
        &self.inner.header.id
    }

    pub fn header(&self) -> &SessionHeader {
        &self.inner.header
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What replay found when this session was opened (nothing, for a session
    /// created in this process).
    pub fn replay_report(&self) -> &ReplayReport {
        &self.inner.report
    }

    /// Append one event: one complete line, written with O_APPEND in one
    /// `write_all` (a single write(2) unless the kernel writes short). The
    /// in-memory copy changes only after the write succeeded; a failed write
    /// is cut back off the file, so the log never holds a line this session
    /// does not.
    pub fn append(&self, event: Event) -> Result<Record, SessionError> {
        let path = &self.inner.path;
        let io = |source| SessionError::Io {
            path: path.clone(),
            source,
        };
        let mut state = self.inner.lock();
        if state.broken {
            return Err(SessionError::Broken { path: path.clone() });
        }
        let record = Record {
            seq: state.records.last().map_or(1, |r| r.seq + 1),
            at_unix_ms: now_unix_ms(),
            event,
        };
        let mut line = serde_json::to_vec(&record).map_err(|source| SessionError::Encode {
            path: path.clone(),
            source,
        })?;
        line.push(b'\n');

        let found = state.file.metadata().map_err(io)?.len();
        if found != state.len {
            return Err(SessionError::ConcurrentWriter {
                path: path.clone(),
                expected: state.len,
                found,
            });
        }
        if let Err(e) = state
            .file
            .write_all(&line)
            .and_then(|()| state.file.flush())
        {
            let cut = OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(state.len));
            if cut.is_err() {
                state.broken = true;
            }
            return Err(io(e));
        }
        state.len += line.len() as u64;
        Arc::make_mut(&mut state.records).push(record.clone());
        Ok(record)
    }

    /// Make every appended record durable (fsync). Appends are not synced one
    /// by one: a process crash loses nothing `append` returned, and only an
    /// OS crash or power loss can, which a caller may guard against here at
    /// the points that matter to it.
    pub fn sync(&self) -> Result<(), SessionError> {
        // Held so no append is half-way while syncing. A fresh write handle,
        // because Windows refuses to flush through an append-only one; a sync
        // through any handle covers every write to the file.
        let _state = self.inner.lock();
        OpenOptions::new()
            .write(true)
            .open(&self.inner.path)
            .and_then(|f| f.sync_data())
            .map_err(|source| SessionError::Io {
                path: self.inner.path.clone(),
                source,
            })
    }

    /// A copy of every record, in order.
    pub fn records(&self) -> Vec<Record> {
        self.with_records(<[Record]>::to_vec)
    }

    /// Look at the records without copying them. `f` sees a consistent
    /// snapshot and runs without the session's lock held, so it may append
    /// (its appends are not in the snapshot).
    pub fn with_records<R>(&self, f: impl FnOnce(&[Record]) -> R) -> R {
        let snapshot = Arc::clone(&self.inner.lock().records);
        f(&snapshot)
    }

    /// The last `sandbox/mode` event's value, if any.
    pub fn sandbox_override(&self) -> Option<SandboxMode> {
        self.with_records(knobs::sandbox_override)
    }

    /// The session's sandbox mode: its override, else `default`. The default
    /// is taken at call time, never stored, so a changed default applies to
    /// every session without an override, resumed ones included.
    pub fn sandbox_mode(&self, default: SandboxMode) -> SandboxMode {
        self.sandbox_override().unwrap_or(default)
    }

    /// THE way to change the sandbox mode: the switch is its event.
    pub fn set_sandbox_mode(
        &self,
        mode: SandboxMode,
        source: KnobSource,
    ) -> Result<Record, SessionError> {
        self.append(Event::SandboxMode { mode, source })
    }

    /// The last `sandbox/network` event's value, if any. There is no
    /// `network_mode(default)` here: the default depends on the file mode
    /// (and `danger-full-access` overrides everything), which only the
    /// policy layer knows.
    pub fn network_override(&self) -> Option<NetworkMode> {
        self.with_records(knobs::network_override)
    }

    /// See [`knobs::rejected_before`].
    pub fn rejected_before(
        &self,
        tool: &str,
        subject: &str,
        effect: &str,
        target: SandboxMode,
        network: Option<NetworkMode>,
    ) -> bool {
        self.with_records(|r| knobs::rejected_before(r, tool, subject, effect, target, network))
    }

    /// The hosts allowed and refused for the session (see
    /// [`knobs::host_answers`]).
    pub fn host_answers(&self) -> (Vec<String>, Vec<String>) {
        self.with_records(knobs::host_answers)
    }

    /// THE way to change the network mode: the switch is its event.
    pub fn set_network_mode(
        &self,
        mode: NetworkMode,
        source: KnobSource,
    ) -> Result<Record, SessionError> {
        self.append(Event::SandboxNetwork { mode, source })
    }

    /// The last `approval/policy` event's value, if any.
    pub fn approval_override(&self) -> Option<ApprovalPolicy> {
        self.with_records(knobs::approval_override)
    }

    /// The session's approval policy: its override, else `default` (taken at
    /// call time, as for [`Session::sandbox_mode`]).
    pub fn approval_policy(&self, default: ApprovalPolicy) -> ApprovalPolicy {
        self.approval_override().unwrap_or(default)
    }

    /// THE way to change the approval policy: the switch is its event.
    pub fn set_approval_policy(
        &self,
        policy: ApprovalPolicy,
        source: KnobSource,
    ) -> Result<Record, SessionError> {
        self.append(Event::ApprovalPolicy { policy, source })
    }
}

/// Every session open in this process, by canonical log path, so a second
/// `open` of the same file shares the first's state instead of becoming a
/// second writer. Weak: a session nobody holds is closed.
fn open_sessions() -> MutexGuard<'static, HashMap<PathBuf, Weak<Inner>>> {
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<Inner>>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

fn register(open: &mut HashMap<PathBuf, Weak<Inner>>, key: PathBuf, inner: &Arc<Inner>) {
    open.retain(|_, weak| weak.strong_count() > 0);
    open.insert(key, Arc::downgrade(inner));
}

/// Take the session's cross-process lock on `file`, the session's own log
/// handle, so the lock lives exactly as long as the session does: it goes
/// with the handle when the last clone of the session is dropped, or when
/// the process dies however it dies. Advisory (`flock`): it binds every
/// opener going through this crate, and costs readers nothing.
///
/// `just_closed`: this process itself held the lock until a moment ago, so
/// contention is retried briefly instead of being reported at once.
#[cfg(unix)]
fn lock_exclusive(
    file: &File,
    id: &SessionId,
    path: &Path,
    just_closed: bool,
) -> Result<(), SessionError> {
    use rustix::fs::{FlockOperation, flock};
    use rustix::io::Errno;
    let mut retries = if just_closed { 100 } else { 0 };
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(Errno::INTR) => {}
            Err(Errno::WOULDBLOCK) if retries > 0 => {
                retries -= 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(Errno::WOULDBLOCK) => {
                return Err(SessionError::Locked {
                    id: id.clone(),
                    path: path.to_path_buf(),
                });
            }
            Err(e) => {
                return Err(SessionError::Io {
                    path: path.to_path_buf(),
                    source: e.into(),
                });
            }
        }
    }
}

/// No lock where there is no `flock`: a second process is then only caught
/// at its append ([`SessionError::ConcurrentWriter`]).
#[cfg(not(unix))]
fn lock_exclusive(
    _file: &File,
    _id: &SessionId,
    _path: &Path,
    _just_closed: bool,
) -> Result<(), SessionError> {
    Ok(())
}

/// Append-only, and private to the user on unix: the log holds the whole
/// conversation. Readable too, because on Windows an append-only handle
/// lacks the right to read its own metadata, which `append` checks.
fn append_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Create `dir` (and missing parents) user-only on unix. An existing
/// directory is left as it is: its permissions are its owner's choice.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The id a store file name carries, or `None` if it is not `<id>.jsonl`.
fn session_file_id(name: &std::ffi::OsStr) -> Option<SessionId> {
    name.to_str()?.strip_suffix(".jsonl")?.parse().ok()
}

/// Read only the header line of a log; `None` when there is no complete
/// header (see [`SessionStore::list`]) or the file is gone. Capped, so a file
/// that is not a session log (no newline for gigabytes) cannot make `list`
/// read it all.
fn read_header(path: &Path, id: &SessionId) -> Result<Option<SessionHeader>, SessionError> {
    const MAX_HEADER: u64 = 1 << 20;
    let io = |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bad = |reason: String| SessionError::BadHeader {
        path: path.to_path_buf(),
        reason,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        // Removed since the directory was read: no longer a session.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut line = Vec::new();
    BufReader::new(file.take(MAX_HEADER))
        .read_until(b'\n', &mut line)
        .map_err(io)?;
    let complete = line.last() == Some(&b'\n');
    let header = match serde_json::from_slice::<HeaderLine>(&line) {
        Ok(line) => line.into_header().map_err(bad)?,
        Err(_) if !complete => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    if header.id != *id {
        return Err(bad(format!("the header names session {}", header.id)));
    }
    Ok(Some(header))
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn default_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |name: &str| var(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(state) = absolute("XDG_STATE_HOME") {
        return Some(state.join("stockade").join("sessions"));
    }
    if let Some(home) = absolute("HOME") {
        return Some(
            home.join(".local")
                .join("state")
                .join("stockade")
                .join("sessions"),
        );
    }
    if cfg!(windows)
        && let Some(local) = absolute("LOCALAPPDATA")
    {
        return Some(local.join("stockade").join("sessions"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_default_dir_follows_xdg_then_home() {
        assert_eq!(
            default_dir_from(vars(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            Some(PathBuf::from("/s/stockade/sessions"))
        );
        assert_eq!(
            default_dir_from(vars(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/stockade/sessions"))
        );
        // Relative and empty values are ignored, per the XDG spec.
        assert_eq!(
            default_dir_from(vars(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/stockade/sessions"))
        );
        assert_eq!(
            default_dir_from(vars(&[("XDG_STATE_HOME", ""), ("HOME", "")])),
            None
        );
        assert_eq!(default_dir_from(vars(&[])), None);
    }

    #[test]
    fn only_id_named_jsonl_files_are_sessions() {
        let id = "00112233445566778899aabbccddeeff";
        assert_eq!(
            session_file_id(format!("{id}.jsonl").as_ref()).map(String::from),
            Some(id.to_owned())
        );
        for name in [
            format!("{id}.json"),
            format!("{id}.jsonl.tmp"),
            format!("{id}.jsonl~"),
            ".jsonl".to_owned(),
            "notes.jsonl".to_owned(),
            format!("{}.jsonl", id.to_uppercase()),
        ] {
            assert_eq!(session_file_id(name.as_ref()), None, "{name}");
        }
    }
}
