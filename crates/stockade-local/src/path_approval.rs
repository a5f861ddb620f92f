//! Asking about a path outside the writable roots while the command waits
//! (supervised Landlock only).
//!
//! A session may carry a [`PathApproval`] (see
//! [`LocalProvider::set_path_approval`](crate::LocalProvider::set_path_approval)).
//! When its run is confined by the Landlock rung with the supervisor, the
//! rung makes a Unix socket pair, passes one end to `landlock-run` as
//! `--ask-fd N` (with `--ask-timeout` and `--ask-max`) and starts a thread
//! on the other end. A call the supervisor refused only because its place
//! lies outside every writable root (never a protected or deny-read path)
//! reaches [`PathApprover::ask`] as a [`PathQuestion`] while the calling
//! thread of the command waits; the answer ([`PathAnswer`]) goes back
//! through the [`PathReply`]. What can be asked about is what the
//! supervisor performs (opens for writing, mkdir, mknod, symlink, unlink,
//! rename, link, truncate and metadata calls by name; `landlock-run`'s
//! README, *Asking about a path*); everything else, and every run under
//! bwrap, unsupervised Landlock or Seatbelt, still needs a rerun with a
//! wider grant (there is no channel: the run's facts say `path-approval`
//! is not available).
//!
//! Never offered, whatever an answerer would say: stockade's control state,
//! any path through a name the user's tools execute later (`.git`, hook
//! managers, `.envrc`, editor and agent settings, rc files, `~/.config`,
//! `~/.local`: `RUNS_LATER`), and anything beneath a `$PATH` directory;
//! such a question is refused without asking. "Allow its directory" becomes
//! "allow this path" for the home directory, any directory above it or
//! above a `$PATH` entry, and a directory that already holds such a name.
//! Beneath a directory grant, `landlock-run` itself refuses every
//! dot-name (made, written or reached through), so a grant cannot be used
//! to plant such a name there later either.
//!
//! Bounded by `landlock-run`: at most [`PathApproval::with_max_questions`]
//! questions per command, one at a time, a place refused or timed out not
//! asked again, and no answer within [`PathApproval::with_timeout`]
//! refuses. A question is withdrawn ([`PathReply::is_pending`] turns
//! false) when its time is up; the thread ends with the channel (the
//! command is over and its confinement let go).
#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a command waits for an answer unless the caller says.
pub const DEFAULT_PATH_TIMEOUT: Duration = Duration::from_secs(60);

/// How many questions one command may cause unless the caller says.
pub const DEFAULT_MAX_PATH_QUESTIONS: u32 = 8;

pub use stockade_core::PathOp;

/// `landlock-run`'s kind codes.
fn op_from_code(code: u8) -> PathOp {
    match code {
        1 => PathOp::Write,
        2 => PathOp::Mkdir,
        3 => PathOp::Mknod,
        4 => PathOp::Symlink,
        5 => PathOp::Remove,
        6 => PathOp::Rename,
        7 => PathOp::Link,
        8 => PathOp::Truncate,
        9 => PathOp::Chmod,
        10 => PathOp::Chown,
        11 => PathOp::Utimes,
        12 => PathOp::SetXattr,
        13 => PathOp::RemoveXattr,
        other => PathOp::Other(other),
    }
}

/// What the user is asked about: the operation and the absolute path the
/// supervisor refused (the kernel's present name of the directory it
/// holds, then the name; any bytes a path may hold, so show it escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathQuestion {
    pub op: PathOp,
    pub path: PathBuf,
}

/// What the user said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathAnswer {
    /// This one path, for the rest of the command.
    AllowPath,
    /// The directory holding it and everything beneath it, for the rest
    /// of the command.
    AllowDirectory,
    /// Refused (today's refusal; not asked again this command).
    Refuse,
}

/// Where the answer to one question goes. Answer from any thread; an
/// answer after the command stopped waiting is ignored. Dropping it
/// unanswered refuses at once.
pub struct PathReply {
    tx: SyncSender<PathAnswer>,
    pending: Arc<Mutex<bool>>,
}

impl fmt::Debug for PathReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathReply")
            .field("pending", &self.is_pending())
            .finish()
    }
}

impl PathReply {
    pub fn answer(self, answer: PathAnswer) {
        // The command may have stopped waiting; then nothing is left to tell.
        let _ = self.tx.send(answer);
    }

    /// Whether the command still waits for this answer: false once it
    /// timed out or the channel ended, so a front end can withdraw it.
    pub fn is_pending(&self) -> bool {
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Who is asked. Called on the channel's own thread: hand the question on
/// and answer through `reply`, from there or any other thread.
pub trait PathApprover: Send + Sync {
    fn ask(&self, question: PathQuestion, reply: PathReply);
}

impl<F> PathApprover for F
where
    F: Fn(PathQuestion, PathReply) + Send + Sync,
{
    fn ask(&self, question: PathQuestion, reply: PathReply) {
        self(question, reply);
    }
}

/// An approver and the bounds of its questions, per session.
#[derive(Clone)]
pub struct PathApproval {
    approver: Arc<dyn PathApprover>,
    timeout: Duration,
    max_questions: u32,
}

impl fmt::Debug for PathApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathApproval")
            .field("timeout", &self.timeout)
            .field("max_questions", &self.max_questions)
            .finish()
    }
}

impl PathApproval {
    pub fn new(approver: Arc<dyn PathApprover>) -> PathApproval {
        PathApproval {
            approver,
            timeout: DEFAULT_PATH_TIMEOUT,
            max_questions: DEFAULT_MAX_PATH_QUESTIONS,
        }
    }

    /// Whole seconds, at least one (the launcher's unit).
    pub fn with_timeout(mut self, timeout: Duration) -> PathApproval {
        self.timeout = Duration::from_secs(timeout.as_secs().max(1));
        self
    }

    /// At least one.
    pub fn with_max_questions(mut self, max: u32) -> PathApproval {
        self.max_questions = max.max(1);
        self
    }
}

/// The approvals of one provider, per session (`None`: the runs of no
/// session).
#[derive(Default)]
pub(crate) struct PathApprovals(Mutex<HashMap<Option<String>, PathApproval>>);

impl PathApprovals {
    pub(crate) fn set(&self, session: Option<&str>, approval: Option<PathApproval>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = session.map(str::to_owned);
        match approval {
            Some(a) => {
                map.insert(key, a);
            }
            None => {
                map.remove(&key);
            }
        }
    }

    pub(crate) fn get(&self, session: Option<&str>) -> Option<PathApproval> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(&session.map(str::to_owned)).cloned()
    }
}

/// A mounted channel: the launcher's end (to pass at `child_fd`) and its
/// options, which go before any other option of the launcher.
pub(crate) struct Mounted {
    pub launcher_end: std::fs::File,
    pub args: Vec<OsString>,
}

/// Makes the socket pair and starts the thread that answers on our end.
/// `control`: the paths that decide later runs (config, session state, the
/// verdict cache, the runners): never granted, whatever the answer.
pub(crate) fn mount(
    approval: &PathApproval,
    child_fd: i32,
    control: Vec<PathBuf>,
) -> io::Result<Mounted> {
    let (ours, theirs) = UnixStream::pair()?;
    let (approver, timeout) = (approval.approver.clone(), approval.timeout);
    let guard = Guard::new(
        control,
        std::env::var_os("HOME").map(PathBuf::from),
        std::env::var_os("PATH"),
    );
    std::thread::Builder::new()
        .name("path-approval".into())
        .spawn(move || serve(ours, approver.as_ref(), timeout, &guard))?;
    let args = vec![
        "--ask-fd".into(),
        child_fd.to_string().into(),
        "--ask-timeout".into(),
        approval.timeout.as_secs().max(1).to_string().into(),
        "--ask-max".into(),
        approval.max_questions.to_string().into(),
    ];
    Ok(Mounted {
        launcher_end: std::fs::File::from(std::os::fd::OwnedFd::from(theirs)),
        args,
    })
}

/// Questions until the channel ends: each handed to the approver, its
/// answer (or a refusal once `timeout` passed) written back.
fn serve(mut channel: UnixStream, approver: &dyn PathApprover, timeout: Duration, guard: &Guard) {
    loop {
        let mut head = [0u8; 13];
        if channel.read_exact(&mut head).is_err() {
            return;
        }
        let len = u32::from_le_bytes([head[9], head[10], head[11], head[12]]);
        let mut path = vec![0u8; len as usize];
        if channel.read_exact(&mut path).is_err() {
            return;
        }
        let question = PathQuestion {
            op: op_from_code(head[8]),
            path: PathBuf::from(OsStr::from_bytes(&path)),
        };
        let answer = if guard.never_offered(&question.path) {
            // Refused without asking: nothing to weigh for the user.
            Some(PathAnswer::Refuse)
        } else {
            let dir = question.path.parent().map(PathBuf::from);
            let (tx, rx) = mpsc::sync_channel(1);
            let pending = Arc::new(Mutex::new(true));
            approver.ask(
                question,
                PathReply {
                    tx,
                    pending: pending.clone(),
                },
            );
            let answer = wait(&rx, timeout);
            *pending.lock().unwrap_or_else(PoisonError::into_inner) = false;
            match (answer, dir) {
                (Some(PathAnswer::AllowDirectory), Some(dir)) if guard.narrows(&dir) => {
                    Some(PathAnswer::AllowPath)
                }
                (a, _) => a,
            }
        };
        let code = match answer {
            Some(PathAnswer::AllowPath) => 1,
            Some(PathAnswer::AllowDirectory) => 2,
            Some(PathAnswer::Refuse) => 0,
            // The launcher gave up first: nothing to say.
            None => continue,
        };
        let mut reply = head[..8].to_vec();
        reply.push(code);
        if channel.write_all(&reply).is_err() {
            return;
        }
    }
}

/// Names whose contents a tool the user runs later executes, or is told
/// by to execute something, without asking: git's and hook managers'
/// state, direnv, editors' and agents' workspace settings, shell and
/// login rc files, the per-user config, bin and key directories, package
/// managers' rc files (a script shell, a rustc wrapper).
const RUNS_LATER: &[&str] = &[
    ".git",
    ".githooks",
    ".gitmodules",
    ".gitconfig",
    ".husky",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".lefthook.yml",
    ".envrc",
    ".direnv",
    ".vscode",
    ".idea",
    ".mcp.json",
    ".claude",
    ".codex",
    ".cursor",
    ".config",
    ".local",
    ".ssh",
    ".gnupg",
    ".cargo",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".profile",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    ".xprofile",
    ".xinitrc",
    ".xsessionrc",
    ".pam_environment",
    ".inputrc",
    ".vimrc",
    ".exrc",
    ".nvimrc",
    ".tmux.conf",
];

/// What a question may never win, decided from what the user's own
/// environment names (read once per run, by us: nothing the command
/// wrote), never from the command.
struct Guard {
    /// Control state (config, session state, verdict cache, runners).
    control: Vec<PathBuf>,
    home: Option<PathBuf>,
    /// The directories on our `$PATH`: a program planted there runs the
    /// next time the user types its name.
    path_dirs: Vec<PathBuf>,
}

impl Guard {
    fn new(control: Vec<PathBuf>, home: Option<PathBuf>, path: Option<OsString>) -> Self {
        let path_dirs = path
            .map(|p| {
                std::env::split_paths(&p)
                    .filter(|d| d.is_absolute())
                    .flat_map(|d| {
                        // A $PATH entry by its given name and its real one.
                        let real = std::fs::canonicalize(&d).ok();
                        std::iter::once(d).chain(real)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            control,
            home: home.filter(|h| h.is_absolute()),
            path_dirs,
        }
    }

    /// Refused without asking: control state (at, beneath or holding it), a
    /// path through a name in [`RUNS_LATER`], or a place beneath `$PATH`.
    fn never_offered(&self, path: &Path) -> bool {
        self.control
            .iter()
            .any(|c| path.starts_with(c) || c.starts_with(path))
            || path
                .components()
                .any(|c| RUNS_LATER.iter().any(|n| c.as_os_str() == OsStr::new(n)))
            || self.path_dirs.iter().any(|d| path.starts_with(d))
    }

    /// Whether "allow its directory" becomes "allow this path": a directory
    /// holding control state, the home directory or one above it, one on or
    /// above `$PATH`, or one that already holds a name in [`RUNS_LATER`].
    fn narrows(&self, dir: &Path) -> bool {
        self.control.iter().any(|c| c.starts_with(dir))
            || self.home.as_ref().is_some_and(|h| h.starts_with(dir))
            || self.path_dirs.iter().any(|d| d.starts_with(dir))
            || RUNS_LATER
                .iter()
                .any(|n| dir.join(n).symlink_metadata().is_ok())
    }
}

/// The answer, or `None` when the time is up (the launcher, which waits
/// as long, has refused by then).
fn wait(rx: &mpsc::Receiver<PathAnswer>, timeout: Duration) -> Option<PathAnswer> {
    match rx.recv_timeout(timeout) {
        Ok(a) => Some(a),
        Err(RecvTimeoutError::Disconnected) => Some(PathAnswer::Refuse),
        Err(RecvTimeoutError::Timeout) => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::fd::OwnedFd;

    fn ask(end: &mut UnixStream, id: u64, path: &[u8]) -> u8 {
        let mut q = id.to_le_bytes().to_vec();
        q.push(1);
        q.extend_from_slice(&u32::try_from(path.len()).unwrap().to_le_bytes());
        q.extend_from_slice(path);
        end.write_all(&q).unwrap();
        let mut a = [0u8; 9];
        end.read_exact(&mut a).unwrap();
        assert_eq!(u64::from_le_bytes(a[..8].try_into().unwrap()), id);
        a[8]
    }

    /// Control state is refused without asking; a directory that holds it
    /// is narrowed to the path asked; any other answer goes back as given,
    /// with the path's bytes as they came.
    #[test]
    fn control_state_is_never_granted() {
        let asked: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
        let record = asked.clone();
        let approval = PathApproval::new(Arc::new(move |q: PathQuestion, r: PathReply| {
            record.lock().unwrap().push(q.path);
            r.answer(PathAnswer::AllowDirectory);
        }));
        let control = vec![PathBuf::from("/srv/out/ctl")];
        let mounted = mount(&approval, 9, control).unwrap();
        assert_eq!(
            mounted.args[..2],
            ["--ask-fd".into(), "9".into()] as [OsString; 2]
        );
        let mut end = UnixStream::from(OwnedFd::from(mounted.launcher_end));
        assert_eq!(ask(&mut end, 1, b"/srv/out/ctl/config"), 0);
        assert_eq!(ask(&mut end, 2, b"/srv/out"), 0);
        assert_eq!(ask(&mut end, 3, b"/srv/out/y"), 1);
        assert_eq!(ask(&mut end, 4, b"/srv/else/\xff\nz"), 2);
        let asked = asked.lock().unwrap().clone();
        assert_eq!(
            asked,
            [
                PathBuf::from("/srv/out/y"),
                PathBuf::from(OsStr::from_bytes(b"/srv/else/\xff\nz"))
            ]
        );
    }
    /// What the user's tools run later is never offered, whatever the
    /// answerer would say: git and hook-manager state, direnv, editor and
    /// agent settings, rc files, anything beneath a `$PATH` directory; and
    /// "allow its directory" shrinks to the path for the home directory,
    /// what lies above it or above `$PATH`, and a directory that already
    /// holds such a name.
    #[test]
    fn what_runs_later_is_never_offered_and_directories_that_hold_it_shrink() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let bin = home.join("bin");
        let repo = home.join("repo");
        let plain = home.join("plain");
        for d in [&bin, &repo.join(".git"), &plain] {
            std::fs::create_dir_all(d).unwrap();
        }
        let guard = Guard::new(
            vec![home.join("state")],
            Some(home.clone()),
            Some(std::env::join_paths([&bin, Path::new("/usr/bin")]).unwrap()),
        );
        for never in [
            repo.join(".git/hooks/post-commit"),
            repo.join("sub/.envrc"),
            repo.join(".vscode/tasks.json"),
            home.join(".bashrc"),
            home.join(".config/git/config"),
            home.join(".local/bin/git"),
            bin.join("ls"),
            PathBuf::from("/usr/bin/x"),
            home.join("state/log"),
            home.clone(),
        ] {
            assert!(guard.never_offered(&never), "{}", never.display());
        }
        for asked in [
            plain.join("out.txt"),
            repo.join("build/out.o"),
            PathBuf::from("/srv/x"),
        ] {
            assert!(!guard.never_offered(&asked), "{}", asked.display());
        }
        for narrowed in [&home, tmp.path(), &repo, Path::new("/"), Path::new("/usr")] {
            assert!(guard.narrows(narrowed), "{}", narrowed.display());
        }
        assert!(!guard.narrows(&plain));
        assert!(!guard.narrows(&repo.join("build")));
    }
}
