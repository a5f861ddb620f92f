//! Bounded capture and streaming classification of a process's output.
//!
//! A command may print gigabytes; we keep a head and a tail and count the
//! rest. Classification cannot look only at what was kept (a denial in the
//! dropped middle still happened), so stderr is scanned line by line as it
//! streams.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use stockade_core::{FatalLine, RunnerFailureRule, texts};

/// How much output is kept per stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub head_bytes: usize,
    pub tail_bytes: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            head_bytes: 64 * 1024,
            tail_bytes: 64 * 1024,
        }
    }
}

/// What was kept of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CapturedOutput {
    /// Head, then (when something was dropped) a truncation notice, then tail.
    /// Serialized as text (invalid UTF-8 replaced), plus `bytes_base64`
    /// with the exact bytes whenever they are not UTF-8, so no output a
    /// command wrote is lost to a JSON reader.
    #[serde(flatten, serialize_with = "text_and_exact")]
    pub bytes: Vec<u8>,
    /// Every byte the stream produced.
    pub total_bytes: u64,
    /// Bytes dropped from the middle.
    pub truncated_bytes: u64,
}

fn text_and_exact<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine as _;
    use serde::ser::SerializeMap as _;
    let exact = std::str::from_utf8(b).is_err();
    let mut map = s.serialize_map(Some(1 + usize::from(exact)))?;
    map.serialize_entry("bytes", &String::from_utf8_lossy(b))?;
    if exact {
        map.serialize_entry(
            "bytes_base64",
            &base64::engine::general_purpose::STANDARD.encode(b),
        )?;
    }
    map.end()
}

impl CapturedOutput {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

pub(crate) struct Bounded {
    limits: OutputLimits,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Bounded {
    pub(crate) fn new(limits: OutputLimits) -> Self {
        Self {
            limits,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.limits.head_bytes.saturating_sub(self.head.len());
        let take = room.min(chunk.len());
        self.head.extend_from_slice(&chunk[..take]);
        chunk = &chunk[take..];
        if self.limits.tail_bytes == 0 {
            return;
        }
        if chunk.len() >= self.limits.tail_bytes {
            chunk = &chunk[chunk.len() - self.limits.tail_bytes..];
            self.tail.clear();
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.limits.tail_bytes);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    pub(crate) fn snapshot(&self) -> CapturedOutput {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let truncated = self.total - kept;
        let mut bytes = self.head.clone();
        if truncated > 0 {
            bytes.extend_from_slice(
                format!("\n[stockade: {truncated} bytes of output truncated]\n").as_bytes(),
            );
        }
        bytes.extend(self.tail.iter());
        CapturedOutput {
            bytes,
            total_bytes: self.total,
            truncated_bytes: truncated,
        }
    }
}

/// Longest line kept whole for classification; a longer one is classified in
/// pieces so an endless line cannot grow memory.
const MAX_LINE: usize = 64 * 1024;

/// The one classifier, fed stderr as it streams, for foreground and
/// background alike.
pub(crate) struct Scanner {
    carry: Vec<u8>,
    denial_signatures: Vec<String>,
    rules: Vec<RunnerFailureRule>,
    denied: bool,
    denied_paths: Vec<PathBuf>,
    /// The first fatal candidate per rule; its exit-code gate is applied at
    /// the end, when the status is known.
    fatal: Vec<Option<String>>,
    /// Recognise the runner's own lines (by prefix, informational lines
    /// excluded) without deciding anything: a runner that went silent on
    /// its status channel never started the command, so its stderr is the
    /// runner's and its first such line is the best reason there is.
    runner_lines: Vec<RunnerFailureRule>,
    first_runner_line: Option<String>,
    /// Paths the wrap makes unreadable: a `Permission denied` line naming a
    /// path beneath one is a denial whatever the backend's signatures.
    read_denied: Vec<PathBuf>,
    /// Where the command runs: a relative path on a denied line is its.
    cwd: PathBuf,
    /// The run's network was narrowed (deny, allow-listed): a failed name
    /// lookup or an unreachable network reads as the sandbox's refusal.
    network_narrowed: bool,
    network_refused: bool,
    network_hosts: Vec<String>,
    /// The writable set (the roots, temp roots included) and what the wrap
    /// keeps read-only inside it: a refusal is the sandbox's only outside
    /// the set or on a protected path (see [`Scanner::sandbox_refused`]).
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    /// npm's error block so far (`npm error code EACCES`, `npm error
    /// syscall mkdir`): its `path` line names what was refused.
    npm_code: Option<String>,
    npm_syscall: Option<String>,
    /// Hosts a client looked up itself instead of asking the proxy (Node's
    /// `getaddrinfo EAI_AGAIN host`): the lookup fails in the confined
    /// network whether or not the host is allowed.
    unproxied_hosts: Vec<String>,
}

/// What bwrap's read-only binds answer to replacing or removing the bound
/// object (git writes `config.lock`, then renames it over `config`): a
/// refusal only where it names a protected path inside the writable set.
const BUSY: &str = "Device or resource busy";

/// Node's spelling of a failed lookup; the host follows.
const NODE_LOOKUP: &[&str] = &["getaddrinfo EAI_AGAIN ", "getaddrinfo ENOTFOUND "];

/// What tools print when the network they were given is not there: under
/// `deny` or `allow-listed` that is the sandbox's doing (no resolver, no
/// route, no socket), so these lines are network denials there and nowhere
/// else.
const NETWORK_SIGNATURES: &[&str] = &[
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Network is unreachable",
    "Failed to connect to",
    "CONNECT tunnel failed, response 403",
    "Could not resolve proxy",
    "getaddrinfo EAI_AGAIN",
    "getaddrinfo ENOTFOUND",
];

/// The host a network failure line names, where the tool prints one
/// (`Could not resolve host: example.com`, `Failed to connect to h port 80`).
fn network_host(line: &str) -> Option<String> {
    let word = |rest: &str| {
        rest.split(|c: char| c.is_whitespace() || c == ':' || c == '\'' || c == '"')
            .find(|w| !w.is_empty())
            .map(str::to_owned)
    };
    if let Some(at) = line.find("Could not resolve host: ") {
        return word(&line[at + "Could not resolve host: ".len()..]);
    }
    if let Some(at) = line.find("Failed to connect to ") {
        return word(&line[at + "Failed to connect to ".len()..]);
    }
    NODE_LOOKUP
        .iter()
        .find_map(|p| line.find(p).and_then(|at| word(&line[at + p.len()..])))
}

/// What stderr said about the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The runner itself failed; this is its fatal line.
    RunnerFailed(String),
    /// The command ran; `denied` when the kernel refused a file effect, with
    /// the paths the denied lines name.
    Ran { denied: bool, paths: Vec<PathBuf> },
}

/// Denied paths kept per process: enough to report, bounded.
const MAX_DENIED_PATHS: usize = 8;

/// The path a denied line names, as tools print it:
/// `bash: /p: Read-only file system`, `sh: 1: cannot create /p: Permission
/// denied`, `touch: cannot touch '/p': Permission denied`,
/// `PermissionError: [Errno 13] Permission denied: '/p'`.
pub fn denied_path(line: &str, signature: &str) -> Option<PathBuf> {
    let at = line.find(signature)?;
    let quoted = |s: &str| -> Option<String> {
        // `'/p',` and `` `/p`. ``: punctuation after the quote is prose.
        let s = s.trim().trim_end_matches([',', '.', ';']);
        let close = s.chars().last()?;
        let open = match close {
            '\'' | '"' | '`' => close,
            '\u{2019}' => '\u{2018}',
            _ => return None,
        };
        let body = &s[..s.len() - close.len_utf8()];
        let start = body.rfind(open)? + open.len_utf8();
        // `/p''`: an empty pair is punctuation, not a quoted name.
        Some(body[start..].to_owned()).filter(|b| !b.is_empty())
    };
    let before = line[..at].trim_end().trim_end_matches(':').trim_end();
    let after = line[at + signature.len()..].trim_start_matches(':').trim();
    let path = quoted(before)
        .or_else(|| quoted(after))
        .or_else(|| {
            let segment = before.rsplit(": ").next()?;
            let bare = [
                "cannot create ",
                "cannot touch ",
                "cannot open ",
                "can't create ",
            ]
            .iter()
            .find_map(|verb| segment.strip_prefix(verb));
            match bare {
                Some(p) => inner_quoted(p).or_else(|| Some(unquoted_path(p))),
                // `bash: f: ...` names the path alone; prose has spaces.
                None if !segment.contains(' ') && segment != before => Some(unquoted_path(segment)),
                // `cp: cannot open '/p' for reading`: a quoted path mid-prose.
                None => inner_quoted(segment)
                    .or_else(|| segment.find('/').map(|i| unquoted_path(&segment[i..]))),
            }
        })
        // `tar: /p: Cannot open: Permission denied`: the path is an earlier field.
        .or_else(|| {
            before
                .split(": ")
                .find(|s| s.starts_with('/'))
                .map(unquoted_path)
        })?;
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// An unquoted path without the prose a tool printed after it: cargo's
/// `/p, error`, `/p (os error 13)`, and punctuation (`/p)`, `/p:`, `/p'`,
/// `/p.`) that closes a sentence rather than belonging to the name. A name
/// that really ends in a bracket (`a(1)`) keeps it: a bracket is cut only
/// when unbalanced; dots only after a name (never `.` or `..` themselves).
fn unquoted_path(s: &str) -> String {
    let mut p = s.trim();
    for cut in [", ", " ("] {
        if let Some(at) = p.find(cut) {
            p = &p[..at];
        }
    }
    p = p.trim_start_matches(['\'', '"', '`', '\u{2018}']);
    loop {
        let before = p;
        p = p.trim_end();
        if let Some(last) = p.chars().last() {
            let rest = &p[..p.len() - last.len_utf8()];
            let cut = match last {
                ',' | ';' | ':' | '\'' | '"' | '`' | '\u{2019}' => true,
                ')' => rest.matches('(').count() < rest.matches(')').count() + 1,
                ']' => rest.matches('[').count() < rest.matches(']').count() + 1,
                // `a...` is a sentence's end; `.` and `..` are names.
                '.' => {
                    let name = p.trim_end_matches('.');
                    !name.is_empty() && !name.ends_with('/')
                }
                _ => false,
            };
            if cut {
                p = rest;
            }
        }
        if p == before {
            break;
        }
    }
    p.to_owned()
}

/// Node's recursive mkdir (npm's cache) reports a read-only directory as
/// `ENOENT: no such file or directory, mkdir '/p'`: a refusal where `/p`
/// lies outside the writable set, a missing parent anywhere else.
const ENOENT_MKDIR: &str = "ENOENT: no such file or directory, mkdir ";

/// Whether the command's own permissions let it use `p`: read and write
/// an existing path (and search a directory), or create in the deepest
/// ancestor that exists. Judged by the mode bits for this process's
/// identity (the command's), as the kernel does for a process without
/// the capability to override them: a confined root has none (Landlock's
/// runner drops them), so root meets a mode-000 file like anyone.
#[cfg(unix)]
pub(crate) fn caller_may_use(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let groups = rustix::process::getgroups().unwrap_or_default();
    let grants = |m: &std::fs::Metadata, want: u32| {
        let shift = if m.uid() == uid {
            6
        } else if m.gid() == gid || groups.iter().any(|g| g.as_raw() == m.gid()) {
            3
        } else {
            0
        };
        (m.mode() >> shift) & want == want
    };
    let mut at = p;
    loop {
        match std::fs::metadata(at) {
            Ok(m) => {
                let want = match (at == p, m.is_dir()) {
                    (true, false) => 0o6,
                    (true, true) => 0o7,
                    (false, _) => 0o3,
                };
                return grants(&m, want);
            }
            Err(_) => match at.parent() {
                Some(up) => at = up,
                None => return true,
            },
        }
    }
}

/// Elsewhere the sandbox's own refusals cannot be told from the caller's.
#[cfg(not(unix))]
pub(crate) fn caller_may_use(_: &Path) -> bool {
    true
}

/// The first `'...'` (or `"..."`, `` `...` ``) span of `s` that holds a path.
fn inner_quoted(s: &str) -> Option<String> {
    let (open, q) = s
        .char_indices()
        .find(|(_, c)| matches!(c, '\'' | '"' | '`'))?;
    let rest = &s[open + 1..];
    let close = rest.find(q)?;
    let body = &rest[..close];
    body.contains('/').then(|| body.to_owned())
}

/// `EACCES: permission denied, open '/p'` (Node's errno dialect) as
/// `open '/p': Permission denied`, the shape `denied_path` reads.
fn node_dialect(line: &str) -> Option<String> {
    const CODES: [(&str, &str); 4] = [
        ("EACCES: permission denied, ", "Permission denied"),
        ("EROFS: read-only file system, ", "Read-only file system"),
        (
            "EPERM: operation not permitted, ",
            "Operation not permitted",
        ),
        ("EBUSY: resource busy or locked, ", BUSY),
    ];
    CODES.iter().find_map(|(code, text)| {
        let at = line.find(code)?;
        let rest = line[at + code.len()..].trim_end();
        Some(format!("{rest}: {text}"))
    })
}

/// landlock-run's prefix: the Landlock backend's runner, and bwrap's closer
/// (which runs inside bwrap, before the command).
const LANDLOCK_RUN: &str = "landlock-run: ";
/// landlock-run's notice on an older kernel, which it prints and then goes
/// on (stockade-local's `profile::LANDLOCK_PARTIAL_NOTICE`): not a reason.
const LANDLOCK_PARTIAL_NOTICE: &str = "landlock-run: partial enforcement (older Landlock ABI)";

/// The lines a backend's own runners print, by prefix, for naming a runner
/// that went silent on its status channel. A provider with a channel hands
/// no stderr rules (stderr decides nothing), so the prefixes live here.
fn runner_line_rule(backend: &str) -> Option<RunnerFailureRule> {
    let prefixes: &[&str] = match backend {
        "bwrap" => &["bwrap: ", LANDLOCK_RUN],
        "landlock" => &[LANDLOCK_RUN],
        _ => return None,
    };
    Some(RunnerFailureRule {
        exit_codes: None,
        fatal_lines: prefixes
            .iter()
            .map(|p| FatalLine::Prefix((*p).to_owned()))
            .collect(),
        informational_lines: vec![LANDLOCK_PARTIAL_NOTICE.into()],
    })
}

impl Scanner {
    pub(crate) fn new(denial_signatures: Vec<String>, rules: Vec<RunnerFailureRule>) -> Self {
        let fatal = vec![None; rules.len()];
        Self {
            carry: Vec::new(),
            denial_signatures,
            rules,
            denied: false,
            denied_paths: Vec::new(),
            fatal,
            runner_lines: Vec::new(),
            first_runner_line: None,
            read_denied: Vec::new(),
            cwd: PathBuf::new(),
            network_narrowed: false,
            network_refused: false,
            network_hosts: Vec::new(),
            writable: Vec::new(),
            read_only: Vec::new(),
            npm_code: None,
            npm_syscall: None,
            unproxied_hosts: Vec::new(),
        }
    }

    /// The run's writable set and what stays read-only inside it. Without
    /// it every refusal a signature matches counts, wherever it lies.
    pub(crate) fn with_writable(mut self, roots: &[PathBuf], read_only: &[PathBuf]) -> Self {
        self.writable = roots.to_vec();
        self.read_only = read_only.to_vec();
        self
    }

    /// Hosts a client resolved itself instead of asking the proxy.
    pub(crate) fn unproxied_hosts(&self) -> &[String] {
        &self.unproxied_hosts
    }

    fn inside_writable(&self, p: &Path) -> bool {
        self.writable.iter().any(|r| p.starts_with(r))
    }

    /// Whether a refusal naming `p` is the sandbox's. Outside the writable
    /// set it is (nothing there may be written). Inside it only a path the
    /// wrap keeps read-only is refused by the sandbox, and those are paths
    /// the caller itself may use: the sandbox binds or fences them, it
    /// does not change their modes. A path the caller's own permissions
    /// refuse (a mode-000 file, a read-only directory) is the command's
    /// own error, on every backend.
    fn sandbox_refused(&self, p: &Path) -> bool {
        if self.writable.is_empty() || !self.inside_writable(p) {
            return true;
        }
        self.read_only.iter().any(|r| p.starts_with(r)) || caller_may_use(p)
    }

    fn record(&mut self, p: PathBuf) {
        self.denied = true;
        if self.denied_paths.len() < MAX_DENIED_PATHS && !self.denied_paths.contains(&p) {
            self.denied_paths.push(p);
        }
    }

    /// A path a denied line names, where the command sees it: a relative
    /// one is the command's working directory's.
    fn place(&self, p: PathBuf) -> PathBuf {
        self.cwd.join(p)
    }

    /// npm reports a failed file operation as a block (`code`, `syscall`,
    /// `path`, one per line, `npm error ` or `npm ERR! ` before each), and
    /// under a sandbox often without any strerror text: `EACCES` on its
    /// cache ("run sudo chown"), or `ENOENT` where libuv's recursive mkdir
    /// met a read-only directory.
    fn npm_line(&mut self, line: &str) {
        let Some(rest) = ["npm error ", "npm ERR! "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        else {
            return;
        };
        if let Some(code) = rest.strip_prefix("code ") {
            self.npm_code = Some(code.trim().to_owned());
            self.npm_syscall = None;
        } else if let Some(call) = rest.strip_prefix("syscall ") {
            self.npm_syscall = Some(call.trim().to_owned());
        } else if let Some(path) = rest.strip_prefix("path ")
            && let Some(code) = self.npm_code.take()
        {
            let p = self.place(PathBuf::from(path.trim()));
            let counts = match code.as_str() {
                "EACCES" | "EPERM" | "EROFS" => self.sandbox_refused(&p),
                "EBUSY" => self.inside_writable(&p) && self.sandbox_refused(&p),
                "ENOENT" => self.npm_syscall.as_deref() == Some("mkdir") && self.outside(&p),
                _ => false,
            };
            if counts {
                self.record(p);
            }
        }
    }

    /// Known to lie outside the writable set (never when the set is not
    /// known: a missing file is not a refusal).
    fn outside(&self, p: &Path) -> bool {
        !self.writable.is_empty() && !self.inside_writable(p)
    }

    /// Also count a refused read of a path beneath one of `paths` (the
    /// deny-read paths the wrap masks) as a denial. Scoped to those paths:
    /// any other `Permission denied` stays the command's own business
    /// unless a backend signature says otherwise.
    /// Read network failures as denials: the run's network was narrowed.
    pub(crate) fn with_network_narrowed(mut self, narrowed: bool) -> Self {
        self.network_narrowed = narrowed;
        self
    }

    /// Whether a network failure line was seen, and the hosts they named.
    pub(crate) fn network(&self) -> (bool, &[String]) {
        (self.network_refused, &self.network_hosts)
    }

    pub(crate) fn with_read_denials(mut self, paths: &[PathBuf], cwd: &std::path::Path) -> Self {
        self.read_denied = paths.to_vec();
        self.cwd = cwd.to_path_buf();
        self
    }

    /// Also remember the first line that starts with a prefix `backend`'s
    /// runners print (see [`runner_line_rule`]) or one of the prefixes in
    /// `rules` (their exit-code gates and signatures play no part: this is
    /// a reason, not evidence).
    pub(crate) fn with_runner_lines(
        mut self,
        backend: Option<&str>,
        rules: &[RunnerFailureRule],
    ) -> Self {
        let own = rules.iter().filter_map(|rule| {
            let prefixes: Vec<FatalLine> = rule
                .fatal_lines
                .iter()
                .filter(|f| matches!(f, FatalLine::Prefix(_)))
                .cloned()
                .collect();
            (!prefixes.is_empty()).then(|| RunnerFailureRule {
                exit_codes: None,
                fatal_lines: prefixes,
                informational_lines: rule.informational_lines.clone(),
            })
        });
        self.runner_lines = backend
            .and_then(runner_line_rule)
            .into_iter()
            .chain(own)
            .collect();
        self
    }

    /// The first runner-prefixed line seen (see [`Self::with_runner_lines`]);
    /// complete once [`Self::verdict`] has flushed the last partial line.
    pub(crate) fn first_runner_line(&self) -> Option<&str> {
        self.first_runner_line.as_deref()
    }

    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if self.denial_signatures.is_empty()
            && self.rules.is_empty()
            && self.runner_lines.is_empty()
            && self.read_denied.is_empty()
            && self.writable.is_empty()
            && !self.network_narrowed
        {
            return;
        }
        self.carry.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(pos) = self.carry[start..].iter().position(|b| *b == b'\n') {
            let end = start + pos;
            let line = self.carry[start..end].to_vec();
            self.line(&line);
            start = end + 1;
        }
        self.carry.drain(..start);
        if self.carry.len() > MAX_LINE {
            let piece = std::mem::take(&mut self.carry);
            self.line(&piece);
        }
    }

    fn line(&mut self, raw: &[u8]) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = String::from_utf8_lossy(raw);
        self.npm_line(&line);
        // Node and npm spell errors their own way: `EACCES: permission
        // denied, open '/p'`. Read as the strerror text it stands for.
        let line = match node_dialect(&line) {
            Some(canonical) => std::borrow::Cow::Owned(canonical),
            None => line,
        };
        if let Some(sig) = self
            .denial_signatures
            .iter()
            .find(|s| line.contains(s.as_str()))
        {
            match denied_path(&line, sig).map(|p| self.place(p)) {
                // No path to judge: the signature alone says denied.
                None => self.denied = true,
                Some(p) if self.sandbox_refused(&p) => self.record(p),
                Some(_) => {}
            }
        } else if line.contains(BUSY)
            && let Some(p) = denied_path(&line, BUSY).map(|p| self.place(p))
            && self.inside_writable(&p)
            && self.sandbox_refused(&p)
        {
            self.record(p);
        } else if let Some(at) = line.find(ENOENT_MKDIR)
            && let Some(p) = inner_quoted(&line[at..]).map(|p| self.place(PathBuf::from(p)))
            && self.outside(&p)
        {
            self.record(p);
        }
        if !self.read_denied.is_empty()
            && let Some(p) = denied_path(&line, texts::READ_DENIED_SIGNATURE)
            && let p = self.cwd.join(p)
            && self.read_denied.iter().any(|d| p.starts_with(d))
        {
            self.denied = true;
            if self.denied_paths.len() < MAX_DENIED_PATHS && !self.denied_paths.contains(&p) {
                self.denied_paths.push(p);
            }
        }
        if self.network_narrowed && NETWORK_SIGNATURES.iter().any(|s| line.contains(s)) {
            self.network_refused = true;
            if let Some(h) = network_host(&line)
                && self.network_hosts.len() < MAX_DENIED_PATHS
                && !self.network_hosts.contains(&h)
            {
                if NODE_LOOKUP.iter().any(|p| line.contains(p)) {
                    self.unproxied_hosts.push(h.clone());
                }
                self.network_hosts.push(h);
            }
        }
        for (rule, found) in self.rules.iter().zip(self.fatal.iter_mut()) {
            if found.is_none() && rule.is_fatal_line(&line) {
                *found = Some(line.clone().into_owned());
            }
        }
        if self.first_runner_line.is_none()
            && self.runner_lines.iter().any(|r| r.is_fatal_line(&line))
        {
            self.first_runner_line = Some(line.into_owned());
        }
    }

    /// A runner failure outranks a denial.
    pub(crate) fn verdict(&mut self, exit_code: Option<i32>) -> Verdict {
        if !self.carry.is_empty() {
            let rest = std::mem::take(&mut self.carry);
            self.line(&rest);
        }
        let failed = self
            .rules
            .iter()
            .zip(&self.fatal)
            .find_map(|(rule, line)| line.as_ref().filter(|_| rule.admits_exit(exit_code)));
        match failed {
            Some(line) => Verdict::RunnerFailed(line.clone()),
            None => Verdict::Ran {
                denied: self.denied,
                paths: self.denied_paths.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(h: usize, t: usize) -> OutputLimits {
        OutputLimits {
            head_bytes: h,
            tail_bytes: t,
        }
    }

    #[test]
    fn json_keeps_bytes_that_are_not_utf8_exact() {
        use base64::Engine as _;
        proptest::proptest!(|(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64))| {
            let out = CapturedOutput { bytes: bytes.clone(), total_bytes: 0, truncated_bytes: 0 };
            let v = serde_json::to_value(&out).expect("serializes");
            let text = v["bytes"].as_str().expect("bytes is text");
            match std::str::from_utf8(&bytes) {
                Ok(s) => {
                    proptest::prop_assert_eq!(text, s);
                    proptest::prop_assert!(v.get("bytes_base64").is_none());
                }
                Err(_) => {
                    let b64 = v["bytes_base64"].as_str().expect("bytes_base64 present");
                    let back = base64::engine::general_purpose::STANDARD.decode(b64).expect("base64");
                    proptest::prop_assert_eq!(back, bytes);
                }
            }
        });
    }

    #[test]
    fn keeps_head_and_tail_and_counts_the_rest() {
        let mut b = Bounded::new(limits(4, 3));
        for chunk in [&b"ab"[..], b"cdef", b"ghij", b"k"] {
            b.push(chunk);
        }
        let s = b.snapshot();
        assert_eq!(s.total_bytes, 11);
        assert_eq!(s.truncated_bytes, 4);
        assert_eq!(
            s.text(),
            "abcd\n[stockade: 4 bytes of output truncated]\nijk"
        );
        let mut small = Bounded::new(limits(4, 3));
        small.push(b"abcdefg");
        assert_eq!(small.snapshot().bytes, b"abcdefg");
        assert_eq!(small.snapshot().truncated_bytes, 0);
        let mut big = Bounded::new(limits(2, 2));
        big.push(&vec![b'x'; 1_000_000]);
        assert_eq!(big.snapshot().truncated_bytes, 999_996);
    }

    fn landlock() -> RunnerFailureRule {
        RunnerFailureRule {
            exit_codes: Some(vec![125]),
            fatal_lines: vec![FatalLine::Prefix("landlock-run: ".into())],
            informational_lines: vec![
                "landlock-run: partial enforcement (older Landlock ABI)".into(),
            ],
        }
    }

    #[test]
    fn lines_split_across_chunks_are_classified_whole() {
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![landlock()]);
        s.feed(b"touch: x: Permission de");
        s.feed(b"nied\nlandlock-ru");
        s.feed(b"n: cannot execute \"y\"\r\n");
        assert_eq!(
            s.verdict(Some(125)),
            Verdict::RunnerFailed("landlock-run: cannot execute \"y\"".into())
        );
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![landlock()]);
        s.feed(b"touch: x: Permission de");
        s.feed(b"nied");
        assert_eq!(
            s.verdict(Some(1)),
            Verdict::Ran {
                denied: true,
                paths: vec![PathBuf::from("x")]
            }
        );
    }

    #[test]
    fn notice_with_ordinary_exits_is_an_ordinary_result() {
        for code in [1, 2, 125] {
            let mut s = Scanner::new(vec!["Permission denied".into()], vec![landlock()]);
            s.feed(b"landlock-run: partial enforcement (older Landlock ABI)\n");
            assert_eq!(
                s.verdict(Some(code)),
                Verdict::Ran {
                    denied: false,
                    paths: vec![]
                }
            );
        }
    }

    #[test]
    fn runner_failure_outranks_denial_and_needs_its_gate() {
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![landlock()]);
        s.feed(b"sh: 1: cannot create /x: Permission denied\nlandlock-run: oops\n");
        assert_eq!(
            s.verdict(Some(125)),
            Verdict::RunnerFailed("landlock-run: oops".into())
        );
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![landlock()]);
        s.feed(b"sh: 1: cannot create /x: Permission denied\nlandlock-run: oops\n");
        assert_eq!(
            s.verdict(Some(3)),
            Verdict::Ran {
                denied: true,
                paths: vec![PathBuf::from("/x")]
            }
        );
    }

    #[test]
    fn network_failures_are_denials_only_where_the_network_was_narrowed() {
        let lines = b"curl: (6) Could not resolve host: example.com\ncurl: (7) Failed to connect to 10.0.0.1 port 80 after 0 ms: Network is unreachable\n";
        let mut s = Scanner::new(vec![], vec![]).with_network_narrowed(true);
        s.feed(lines);
        let _ = s.verdict(Some(6));
        let (refused, hosts) = s.network();
        assert!(refused);
        assert_eq!(hosts, ["example.com", "10.0.0.1"]);
        let mut s = Scanner::new(vec![], vec![]);
        s.feed(lines);
        let _ = s.verdict(Some(6));
        assert!(!s.network().0);
    }

    #[test]
    fn denied_paths_are_read_from_common_shapes() {
        let cases = [
            (
                "bash: /var/tmp/x y/f: Read-only file system",
                "Read-only file system",
                "/var/tmp/x y/f",
            ),
            (
                "sh: 1: cannot create /etc/f: Permission denied",
                "Permission denied",
                "/etc/f",
            ),
            (
                "touch: cannot touch '/etc/a b': Permission denied",
                "Permission denied",
                "/etc/a b",
            ),
            (
                "cp: cannot open '/h/.ssh/id' for reading: Permission denied",
                "Permission denied",
                "/h/.ssh/id",
            ),
            (
                "tar: /h/.ssh: Cannot open: Permission denied",
                "Permission denied",
                "/h/.ssh",
            ),
            (
                "mkdir: cannot create directory \u{2018}/x\u{2019}: Read-only file system",
                "Read-only file system",
                "/x",
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/etc/p'",
                "Permission denied",
                "/etc/p",
            ),
            (
                "bash: ./rel: Operation not permitted",
                "Operation not permitted",
                "./rel",
            ),
            (
                "sh: 1: cannot create f: Read-only file system",
                "Read-only file system",
                "f",
            ),
            (
                "bash: line 1: out.txt: Permission denied",
                "Permission denied",
                "out.txt",
            ),
            (
                "cp: cannot create regular file '/o/x': Permission denied",
                "Permission denied",
                "/o/x",
            ),
        ];
        for (line, sig, want) in cases {
            assert_eq!(denied_path(line, sig), Some(PathBuf::from(want)), "{line}");
        }
        // Trailing punctuation and backticks (cargo), and Node's dialect.
        assert_eq!(
            denied_path(
                "error: failed to create directory `/x/target`, Permission denied",
                "Permission denied"
            ),
            Some(PathBuf::from("/x/target"))
        );
        assert_eq!(
            denied_path(
                "cannot write '/x/f',: Permission denied",
                "Permission denied"
            ),
            Some(PathBuf::from("/x/f"))
        );
        for (line, sig, want) in [
            (
                "Error: EACCES: permission denied, open '/etc/x'",
                "Permission denied",
                "/etc/x",
            ),
            (
                "npm ERR! EROFS: read-only file system, mkdir '/usr/lib/node_modules/y'",
                "Read-only file system",
                "/usr/lib/node_modules/y",
            ),
        ] {
            let mut s = Scanner::new(vec![sig.into()], vec![]);
            s.feed(format!("{line}\n").as_bytes());
            assert_eq!(
                s.verdict(Some(1)),
                Verdict::Ran {
                    denied: true,
                    paths: vec![PathBuf::from(want)]
                },
                "{line}"
            );
        }
        assert_eq!(denied_path("Permission denied", "Permission denied"), None);
        assert_eq!(
            denied_path("ssh: Permission denied (publickey)", "Permission denied"),
            None
        );
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![]);
        s.feed(b"sh: 1: cannot create /a: Permission denied\nsh: 1: cannot create /a: Permission denied\n");
        assert_eq!(
            s.verdict(Some(2)),
            Verdict::Ran {
                denied: true,
                paths: vec![PathBuf::from("/a")]
            }
        );
    }

    /// The path a denied line names comes out clean whatever prose or
    /// punctuation the tool printed after it (cargo's `path: /p, error:
    /// ...`, a closing `)`, `:` or quote), in every shape tools print.
    #[test]
    fn a_denied_path_comes_out_without_the_text_after_it() {
        use proptest::prelude::*;
        let segment = "[A-Za-z0-9_-][A-Za-z0-9_.-]{0,6}[A-Za-z0-9_-]|[A-Za-z0-9_]";
        let path = proptest::collection::vec(segment, 1..5)
            .prop_map(|segs| format!("/{}", segs.join("/")));
        let trail = proptest::collection::vec(
            prop_oneof![
                Just(", error"),
                Just("'"),
                Just(")"),
                Just(":"),
                Just(","),
                Just("."),
                Just(";"),
                Just("\""),
                Just("`"),
                Just("]"),
                Just(" (os error 13)"),
                Just(", error: failed"),
            ],
            0..3,
        )
        .prop_map(|t| t.concat());
        let sig = prop_oneof![
            Just("Permission denied"),
            Just("Read-only file system"),
            Just("Operation not permitted"),
            Just(BUSY),
        ];
        proptest!(|(p in path, t in trail, sig in sig, shape in 0usize..5)| {
            // A `: ` starts a field of its own: after `bash: /p, error:
            // word` the last field may be a relative name. Only cargo's
            // shape carries one after the path.
            let t = if shape == 0 { t } else { t.replace(": ", " ") };
            let line = match shape {
                // cargo: `warning: failed to write cache, path: /p, error: ...`
                0 => format!("warning: failed to write cache, path: {p}{t}, error: {sig} (os error 13)"),
                1 => format!("bash: {p}{t}: {sig}"),
                2 => format!("sh: 1: cannot create {p}{t}: {sig}"),
                3 => format!("error: could not write config file {p}{t}: {sig}"),
                _ => format!("tar: {p}{t}: Cannot open: {sig}"),
            };
            prop_assert_eq!(denied_path(&line, sig), Some(PathBuf::from(&p)), "{}", line);
        });
    }

    #[test]
    fn cargos_cache_line_names_the_cache_file() {
        let line = "warning: failed to write cache, path: /h/.cargo/registry/index/index.crates.io-1949cf8c6b5b557f/.cache/it/oa/itoa, error: Read-only file system (os error 30)";
        assert_eq!(
            denied_path(line, "Read-only file system"),
            Some(PathBuf::from(
                "/h/.cargo/registry/index/index.crates.io-1949cf8c6b5b557f/.cache/it/oa/itoa"
            ))
        );
        // A name that really ends in a bracket keeps it.
        assert_eq!(
            denied_path("bash: /x/a(1): Permission denied", "Permission denied"),
            Some(PathBuf::from("/x/a(1)"))
        );
    }

    fn classify(writable: &[PathBuf], cwd: &Path, stderr: &str) -> Verdict {
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![])
            .with_read_denials(&[], cwd)
            .with_writable(writable, &[]);
        s.feed(stderr.as_bytes());
        s.verdict(Some(1))
    }

    #[test]
    fn npm_blocks_and_nodes_mkdir_are_read_as_refusals_outside_the_set() {
        let w = [PathBuf::from("/w"), PathBuf::from("/tmp")];
        // Landlock: EACCES with no strerror text at all.
        let eacces = "npm error code EACCES\nnpm error syscall mkdir\nnpm error path /h/.npm\nnpm error errno -13\nnpm error   sudo chown -R 0:0 \"/h/.npm\"\n";
        // bwrap: libuv's recursive mkdir says ENOENT on a read-only directory.
        let enoent = "npm error code ENOENT\nnpm error syscall mkdir\nnpm error path /h/.npm\nnpm error enoent ENOENT: no such file or directory, mkdir '/h/.npm'\n";
        for text in [eacces, enoent] {
            assert_eq!(
                classify(&w, Path::new("/w"), text),
                Verdict::Ran {
                    denied: true,
                    paths: vec![PathBuf::from("/h/.npm")]
                },
                "{text}"
            );
        }
        // A missing file inside the set, or one npm merely opened, is not.
        let missing = "npm error code ENOENT\nnpm error syscall open\nnpm error path /h/package.json\nnpm error code ENOENT\nnpm error syscall mkdir\nnpm error path /w/x/y\nError: ENOENT: no such file or directory, mkdir '/tmp/a/b'\n";
        assert_eq!(
            classify(&w, Path::new("/w"), missing),
            Verdict::Ran {
                denied: false,
                paths: vec![]
            }
        );
    }

    #[test]
    fn busy_counts_only_inside_the_writable_set() {
        // The test's own directory: its permissions let the test use it.
        let d = tempfile::tempdir().unwrap();
        let w = [d.path().to_path_buf()];
        let config = d.path().join(".git/config");
        let line = format!(
            "error: could not write config file {}: Device or resource busy\n",
            config.display()
        );
        assert_eq!(
            classify(&w, d.path(), &line),
            Verdict::Ran {
                denied: true,
                paths: vec![config]
            }
        );
        let line = "umount: /mnt: Device or resource busy\n";
        assert_eq!(
            classify(&w, d.path(), line),
            Verdict::Ran {
                denied: false,
                paths: vec![]
            }
        );
    }

    #[test]
    fn a_relative_path_is_placed_in_the_working_directory() {
        assert_eq!(
            classify(
                &[],
                Path::new("/etc"),
                "sh: 1: cannot create f: Permission denied\n"
            ),
            Verdict::Ran {
                denied: true,
                paths: vec![PathBuf::from("/etc/f")]
            }
        );
    }

    /// Inside the writable set a refusal is the sandbox's only where the
    /// caller's own permissions allow the use: a mode-000 file, or a new
    /// name in a directory without write permission, is the command's own
    /// error (for root too: a confined root has no override).
    #[cfg(unix)]
    #[test]
    fn inside_the_set_the_callers_own_permissions_decide() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().unwrap();
        let w = [d.path().to_path_buf()];
        let open = d.path().join("open");
        std::fs::write(&open, "x").unwrap();
        let locked = d.path().join("locked");
        std::fs::write(&locked, "x").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let shut = d.path().join("shut");
        std::fs::create_dir(&shut).unwrap();
        std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(0o555)).unwrap();
        let line = |p: &str| format!("touch: cannot touch '{p}': Permission denied\n");
        let protected = classify(&w, d.path(), &line("open"));
        assert_eq!(
            protected,
            Verdict::Ran {
                denied: true,
                paths: vec![open]
            }
        );
        let new = classify(&w, d.path(), &line("new-name"));
        assert!(matches!(new, Verdict::Ran { denied: true, .. }), "{new:?}");
        for own in ["locked", "shut/new-name"] {
            assert_eq!(
                classify(&w, d.path(), &line(own)),
                Verdict::Ran {
                    denied: false,
                    paths: vec![]
                },
                "{own}"
            );
        }
        // On the read-only list the sandbox's, whatever the mode bits.
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![])
            .with_read_denials(&[], d.path())
            .with_writable(&w, std::slice::from_ref(&locked));
        s.feed(line("locked").as_bytes());
        assert!(matches!(
            s.verdict(Some(1)),
            Verdict::Ran { denied: true, .. }
        ));
        std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn node_lookups_name_the_host_as_unproxied() {
        let mut s = Scanner::new(vec![], vec![]).with_network_narrowed(true);
        s.feed(b"TypeError: fetch failed\n  [cause]: Error: getaddrinfo EAI_AGAIN ok.test\n");
        let _ = s.verdict(Some(1));
        assert_eq!(s.network(), (true, &["ok.test".to_owned()][..]));
        assert_eq!(s.unproxied_hosts(), ["ok.test"]);
        let mut s = Scanner::new(vec![], vec![]).with_network_narrowed(true);
        s.feed(b"curl: (6) Could not resolve host: ok.test\n");
        let _ = s.verdict(Some(6));
        assert!(s.unproxied_hosts().is_empty());
    }

    #[test]
    fn runner_lines_are_named_by_prefix_without_deciding_anything() {
        let signature = RunnerFailureRule {
            exit_codes: None,
            fatal_lines: vec![FatalLine::Signature("fatal".into())],
            informational_lines: vec![],
        };
        let mut s = Scanner::new(vec!["Permission denied".into()], vec![])
            .with_runner_lines(None, &[landlock(), signature]);
        s.feed(b"some fatal thing\nlandlock-run: partial enforcement (older Landlock ABI)\n");
        s.feed(b"landlock-run: first\nlandlock-run: second");
        // No rules decide: even exit 125 with a runner line is a plain run.
        assert_eq!(
            s.verdict(Some(125)),
            Verdict::Ran {
                denied: false,
                paths: vec![]
            }
        );
        assert_eq!(s.first_runner_line(), Some("landlock-run: first"));
        // A torn last line still counts once the verdict flushed it.
        let mut s = Scanner::new(vec![], vec![]).with_runner_lines(None, &[landlock()]);
        s.feed(b"landlock-run: torn");
        assert_eq!(s.first_runner_line(), None);
        let _ = s.verdict(None);
        assert_eq!(s.first_runner_line(), Some("landlock-run: torn"));
    }

    #[test]
    fn a_backend_names_its_runners_lines_without_any_rules() {
        let line = |backend, stderr: &[u8]| {
            let mut s = Scanner::new(vec![], vec![]).with_runner_lines(Some(backend), &[]);
            s.feed(stderr);
            let _ = s.verdict(Some(1));
            s.first_runner_line().map(str::to_owned)
        };
        let notice = format!("{LANDLOCK_PARTIAL_NOTICE}\n");
        // bwrap's own setup errors, and its closer's (landlock-run inside).
        assert_eq!(
            line("bwrap", b"x\nbwrap: no uid map\n").as_deref(),
            Some("bwrap: no uid map")
        );
        let closer = format!("{notice}landlock-run: bad fd 7\nbwrap: later\n");
        assert_eq!(
            line("bwrap", closer.as_bytes()).as_deref(),
            Some("landlock-run: bad fd 7")
        );
        assert_eq!(line("landlock", b"bwrap: not mine\n"), None);
        assert_eq!(line("landlock", notice.as_bytes()), None);
        assert_eq!(line("runner-command", b"bwrap: x\n"), None);
    }

    #[test]
    fn an_endless_line_does_not_grow_memory() {
        let mut s = Scanner::new(vec!["Read-only file system".into()], vec![]);
        for _ in 0..100 {
            s.feed(&[b'y'; 10_000]);
            assert!(s.carry.len() <= MAX_LINE + 10_000);
        }
        s.feed(b"Read-only file system\n");
        assert_eq!(
            s.verdict(Some(1)),
            Verdict::Ran {
                denied: true,
                paths: vec![]
            }
        );
    }
}
