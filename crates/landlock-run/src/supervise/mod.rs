//! Supervised Landlock: what Landlock cannot express, governed by a seccomp
//! user-notification supervisor.
//!
//! Landlock only allows, and has no right for metadata: under it alone a
//! confined process can chmod, chown, utime, setxattr or chattr anything
//! outside its writable roots, and cannot be kept from `.git/hooks` inside
//! them. Here the launcher forks. The child confines itself (capabilities,
//! terminal, Landlock, the socket filter), installs a seccomp filter that
//! sends the governed calls (`filter.rs`) to a listener, hands the listener
//! to the parent and execs the command. The parent is the supervisor: for
//! each notification it resolves the child's names itself, classifies the
//! handles by identity and performs the call on those handles (`fence.rs`),
//! answering with the result or an installed descriptor (`notify.rs`).
//!
//! Lifetime: the command gets SIGKILL when the supervisor dies (parent-death
//! signal); when the command exits, the supervisor (a child subreaper, so no
//! orphan of the tree is re-parented past it) kills and reaps everything
//! below it, walk after walk of `/proc/<pid>/task/*/children` until one
//! finds nothing (`kill_leftovers`), and only then exits with the command's
//! status, or dies of the same signal. Signals sent to the launcher are
//! passed on.
//!
//! With `--ask-fd`, a call refused only because its place lies outside
//! every writable root is asked about while the thread waits (`ask.rs`,
//! `fence/grant.rs`), and performed again once a grant covers it.
//! The system calls that need `unsafe` are in `crate::sys`.
#![forbid(unsafe_code)]

mod ask;
mod fence;
mod filter;
mod notify;
mod turns;

pub use ask::Asker;

use std::fmt::Display;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, Signal};

use fence::{Child, Outcome};
pub use fence::{ConnectRules, Fence};
use notify::{Decoded, Listener};

use crate::sys;

/// For `sys::ioctl_set`, which checks its argument against this table.
pub(crate) use filter::ioctl_arg_len;

/// Worker threads answering notifications: a call that blocks (a FIFO opened
/// for writing waits for a reader) must not stall every other one.
const WORKERS: usize = 4;

/// Extra workers for a run with an approval channel, at most.
const MAX_ASKING_WORKERS: usize = 32;

/// Whether this kernel can supervise; the reason when it cannot.
pub fn available() -> Result<(), String> {
    let uname = rustix::system::uname();
    let release = String::from_utf8_lossy(uname.release().to_bytes());
    let actions = std::fs::read_to_string(stockade_core::supervision::ACTIONS_AVAIL).ok();
    stockade_core::supervision::check(&release, actions.as_deref())
}

/// What the launcher lends the supervisor.
pub struct Launcher {
    /// Capabilities, terminal, Landlock and socket isolation of the child.
    pub confine: Box<dyn FnOnce()>,
    /// Descriptor hygiene, the status record and the exec itself.
    pub exec: Box<dyn FnOnce() -> std::convert::Infallible>,
    /// The launcher's one failure path (125 and one line).
    pub fail: fn(std::fmt::Arguments<'_>) -> !,
    /// Drops the supervisor's capabilities: it then acts with exactly the
    /// child's credentials, never as a more privileged deputy.
    pub drop_capabilities: fn(),
    /// Closes the parent's copy of the status channel once the child runs.
    pub release_status: fn(),
}

/// Whether `/proc/self` names this process, i.e. the /proc mounted here is
/// our pid namespace's.
fn proc_is_ours() -> bool {
    std::fs::read_link("/proc/self").is_ok_and(|link| {
        link.as_os_str().as_encoded_bytes() == std::process::id().to_string().as_bytes()
    })
}

/// Runs the command under supervision; never returns.
pub fn run(fence: Fence, asker: Option<Asker>, launcher: Launcher) -> ! {
    let fail = launcher.fail;
    // Every decision reads the command's threads through /proc/<tid>, with
    // the tid as our namespace numbers it. A /proc of another pid namespace
    // (`unshare --pid` without `--mount-proc`) names other processes by
    // those numbers: their cwd, their descriptors. Refuse rather than act
    // on a stranger's state.
    if !proc_is_ours() {
        fail(format_args!(
            "/proc belongs to another pid namespace (/proc/self is not pid {}); the supervisor would read other processes' state: run where this namespace has its own /proc (e.g. unshare --pid --mount-proc)",
            std::process::id()
        ));
    }
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let (mut from_child, to_parent) =
        std::io::pipe().unwrap_or_else(|e| fail(format_args!("pipe: {e}")));
    let (go_read, mut go_write) =
        std::io::pipe().unwrap_or_else(|e| fail(format_args!("pipe: {e}")));
    let parent = rustix::process::getpid();
    // Single threaded here: the launcher starts no thread before supervision.
    let pid = sys::fork();
    if pid < 0 {
        fail(format_args!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(from_child);
        drop(go_write);
        child(parent, to_parent, go_read, launcher)
    }
    drop(to_parent);
    drop(go_read);
    // Before anything can make the child exit: an unblocked SIGCHLD is
    // discarded, and the wait below would then never end.
    block_signals();
    let Some(child) = Pid::from_raw(pid) else {
        fail(format_args!("fork returned pid {pid}"))
    };
    let mut number = [0u8; 4];
    if from_child.read_exact(&mut number).is_err() {
        // The child failed before its filter was in place and said why.
        exit_like(wait_for(child));
    }
    let listener = take_listener(child, i32::from_ne_bytes(number)).unwrap_or_else(|why| {
        let _ = rustix::process::kill_process(child, Signal::KILL);
        fail(format_args!("cannot take the seccomp listener: {why}"))
    });
    // The child may go on at once: its calls wait in the listener's queue
    // until a worker takes them, and no worker starts before the
    // capabilities are dropped below.
    if go_write.write_all(b"g").is_err() {
        exit_like(wait_for(child));
    }
    drop(go_write);
    (launcher.release_status)();
    (launcher.drop_capabilities)();
    // The fence keeps directories and threads' working directories open
    // between calls, in proportion to the descriptor limit; the soft limit
    // is raised to the hard one for that (the command's own, fixed at the
    // fork, is unchanged). If it cannot be, the caches are smaller.
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: nofile.maximum,
            maximum: nofile.maximum,
        },
    );
    // Modes are masked with the child's own umask, read per call.
    rustix::process::umask(rustix::fs::Mode::empty());
    let fence = Arc::new(fence);
    // A worker waiting for an answer (or behind one, for its own) serves
    // nobody meanwhile: as many more as questions may be asked, so the
    // command's other calls go on while the user thinks.
    let workers = WORKERS
        + asker
            .as_ref()
            .map_or(0, |a| a.max().min(MAX_ASKING_WORKERS));
    let asker = asker.map(Arc::new);
    let listener = Arc::new(Listener::new(listener));
    let turns = Arc::new(turns::Turns::default());
    for _ in 0..workers {
        let (fence, listener, asker, turns) = (
            fence.clone(),
            listener.clone(),
            asker.clone(),
            turns.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("supervisor".into())
            .spawn(move || serve(&fence, asker.as_deref(), &listener, &turns, child));
        if let Err(e) = spawned {
            let _ = rustix::process::kill_process(child, Signal::KILL);
            fail(format_args!("cannot start the supervisor: {e}"));
        }
    }
    let watched = turns.clone();
    let spawned = std::thread::Builder::new()
        .name("supervisor-watch".into())
        .spawn(move || watched.watch());
    if let Err(e) = spawned {
        let _ = rustix::process::kill_process(child, Signal::KILL);
        fail(format_args!("cannot start the supervisor: {e}"));
    }
    supervise(child)
}

fn take_listener(child: Pid, number: i32) -> Result<OwnedFd, String> {
    let pidfd = rustix::process::pidfd_open(child, PidfdFlags::empty())
        .map_err(|e| format!("pidfd_open: {e}"))?;
    rustix::process::pidfd_getfd(&pidfd, number, PidfdGetfdFlags::empty())
        .map_err(|e| format!("pidfd_getfd: {e}"))
}

/// The child: confine, install the filters, hand over the listener, wait for
/// the supervisor, exec.
fn child(
    parent: Pid,
    mut to_parent: std::io::PipeWriter,
    mut go: std::io::PipeReader,
    launcher: Launcher,
) -> ! {
    let fail = launcher.fail;
    // A supervisor that dies takes the command with it; one that died
    // before this line is caught by the parent check.
    if rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).is_err()
        || rustix::process::getppid() != Some(parent)
    {
        fail(format_args!("the supervisor is gone"));
    }
    (launcher.confine)();
    let listener = install().unwrap_or_else(|why| {
        fail(format_args!(
            "cannot install the supervising seccomp filter: {why}"
        ))
    });
    let number = listener.as_raw_fd().to_ne_bytes();
    if to_parent.write_all(&number).is_err() {
        fail(format_args!("the supervisor is gone"));
    }
    drop(to_parent);
    let mut byte = [0u8; 1];
    if go.read_exact(&mut byte).is_err() {
        // The supervisor failed and reported it.
        std::process::exit(125);
    }
    // The command must never hold the listener: it could answer its own calls.
    drop(listener);
    drop(go);
    match (launcher.exec)() {}
}

fn err(e: impl Display) -> String {
    e.to_string()
}

/// The refusing filters, then the notifying one with a new listener.
fn install() -> Result<OwnedFd, String> {
    for program in filter::refusing_programs()? {
        seccompiler::apply_filter(&program).map_err(err)?;
    }
    let program = filter::notify_program()?;
    sys::seccomp_new_listener(&program).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => {
            "another seccomp listener is already installed (nested supervision)".into()
        }
        _ => e.to_string(),
    })
}

/// One worker: wait for its turn to receive (`turns`), receive, decode,
/// check the thread is still waiting, perform, answer. A broken listener
/// fails closed: the command is killed.
fn serve(
    fence: &Fence,
    asker: Option<&Asker>,
    listener: &Listener,
    turns: &turns::Turns,
    child: Pid,
) {
    loop {
        turns.take();
        let received = listener.recv();
        let _call = turns.start_call();
        let req = match received {
            Ok(Some(req)) => req,
            Ok(None) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {
                turns.close();
                return;
            }
            Err(e) => {
                // EBADF/ENOTTY cannot happen with our own listener; anything
                // else leaves calls unanswered, so nothing may run on.
                eprintln!("landlock-run: supervisor: {e}");
                let _ = rustix::process::kill_process(child, Signal::KILL);
                turns.close();
                return;
            }
        };
        let who = Child { tid: req.tid };
        // A thread that makes a call has finished the one before it.
        fence.seen(req.tid);
        let outcome = match notify::decode(&req) {
            Err(e) => Outcome::Err(e),
            Ok(Decoded::Observed { exec }) => fence.observe(req.tid, exec),
            Ok(_) if !listener.valid(req.id) => continue,
            Ok(Decoded::Call(call)) => match asker {
                None => fence.perform(who, &call),
                Some(asker) => perform_asking(fence, asker, who, &call),
            },
            Ok(Decoded::Ioctl { fd, cmd, mut arg }) => match fence.ioctl_file(who, fd) {
                Ok(file) => notify::ioctl_set(&file, cmd, &mut arg),
                Err(e) => Outcome::Err(e),
            },
        };
        listener.respond(req.id, outcome);
    }
}

/// `Fence::perform`, and when it refused only because the place lies
/// outside every writable root, the question (the thread waits), then the
/// same call again once a grant covers it. Without a grant: the first
/// refusal, unchanged.
fn perform_asking(fence: &Fence, asker: &Asker, who: Child, call: &fence::Call) -> Outcome {
    let _ = fence::take_outside();
    let first = fence.perform(who, call);
    let outside = fence::take_outside();
    let (Outcome::Err(rustix::io::Errno::ACCESS), Some(q)) = (&first, outside) else {
        return first;
    };
    if !asker.ask(fence, ask::kind(call), q) {
        return first;
    }
    let again = fence.perform(who, call);
    // Refused again (a name swapped meanwhile): that refusal stands, unasked.
    let _ = fence::take_outside();
    again
}

/// The signals the main thread waits for; blocked in every thread (workers
/// inherit the mask), so none interrupts a worker or kills the supervisor.
fn signal_set() -> libc::sigset_t {
    let signals: Vec<i32> = FORWARDED
        .iter()
        .chain(&STOPS)
        .chain(&[libc::SIGCHLD])
        .copied()
        .collect();
    sys::signal_set(&signals)
}

const FORWARDED: [i32; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
    libc::SIGALRM,
];
const STOPS: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

fn block_signals() {
    sys::block_signals(&signal_set());
}

/// The main thread: pass signals on, reap, and follow the command out.
fn supervise(child: Pid) -> ! {
    let set = signal_set();
    // A child that is already gone left its SIGCHLD pending (blocked since
    // the fork); reaping first costs nothing and never waits.
    if let Some(status) = reap(child) {
        kill_leftovers();
        exit_like(status);
    }
    loop {
        let Some((sig, si_code)) = sys::sigwaitinfo(&set) else {
            continue;
        };
        if sig == libc::SIGCHLD {
            if let Some(status) = reap(child) {
                kill_leftovers();
                exit_like(status);
            }
            continue;
        }
        // The command shares the launcher's process group, so a terminal's
        // signals (sent by the kernel) and a group kill already reached it;
        // what was sent to the launcher alone is passed on.
        let from_kernel = si_code == libc::SI_KERNEL;
        if !from_kernel || STOPS.contains(&sig) {
            sys::kill(child.as_raw_nonzero().get(), sig);
        }
        if STOPS.contains(&sig) {
            // Stop with the job, as the launcher would without supervision.
            sys::raise(libc::SIGSTOP);
        }
    }
}

/// Reaps every exited child; the command's wait status once it is done.
fn reap(child: Pid) -> Option<i32> {
    let mut done = None;
    loop {
        let (pid, status) = sys::waitpid(-1, libc::WNOHANG);
        if pid <= 0 {
            return done;
        }
        if pid == child.as_raw_nonzero().get() {
            done = Some(status);
        }
    }
}

fn wait_for(child: Pid) -> i32 {
    loop {
        let (pid, status) = sys::waitpid(child.as_raw_nonzero().get(), 0);
        if pid >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return status;
        }
    }
}

/// Whatever the command left behind (background jobs, daemons that were
/// reparented here): every descendant is killed and reaped before this
/// returns. As the child subreaper, every orphan of the tree is re-parented
/// to us, never past us, so a walk of our children's trees sees the whole
/// tree; SIGKILL stops a process from forking (a fork in progress fails
/// once the signal is pending), and a child forked before its parent was
/// killed becomes ours when that parent dies, so the next walk finds it.
/// The loop ends when a walk finds no live descendant and no child is left
/// to reap. Only a blocking wait on a child we killed ourselves is ever
/// made: a child re-parented here between two walks is never waited for
/// before it was killed (that wait would never end).
fn kill_leftovers() {
    // Children we may not signal (none should exist: the command runs with
    // our uid and without capabilities); never waited for.
    let mut untouchable: Vec<i32> = Vec::new();
    loop {
        // No child at all: then no descendant either (an orphan comes to
        // us, never past us, so a live descendant has a live chain of
        // parents up to one of our children). Asked before any walk: the
        // walk's reads of /proc/self/task/* make a /proc entry per
        // supervisor thread, which the kernel drops when our parent reaps
        // us, racing our exiting threads' own drops (a reap tail of 1-8 ms).
        if reap_zombies() {
            return;
        }
        let tree = descendants();
        let mut killed_children = Vec::new();
        let mut live = false;
        for (pid, parent) in &tree {
            if untouchable.contains(pid) {
                continue;
            }
            live = true;
            match signal_kill(*pid, *parent) {
                Ok(()) if parent.is_none() => killed_children.push(*pid),
                Ok(()) => {}
                Err(rustix::io::Errno::PERM) => untouchable.push(*pid),
                // Gone, or no longer the process we listed.
                Err(_) => {}
            }
        }
        if live && killed_children.is_empty() {
            // Only deeper ones, dying: their parents reap them, or they
            // become ours. Not a busy loop while they do.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        for pid in killed_children {
            loop {
                // __WALL: a child made by clone with another exit signal is
                // waited for too.
                let (r, _) = sys::waitpid(pid, libc::__WALL);
                if r >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
        }
        if !live {
            if reap_zombies() || no_children_but(&untouchable) {
                return;
            }
            // A child arrived between the walk and the check: look again.
            std::thread::yield_now();
        }
    }
}

/// Reaps every child that has already exited, without waiting; whether
/// no child at all is left.
fn reap_zombies() -> bool {
    loop {
        let (pid, _) = sys::waitpid(-1, libc::WNOHANG | libc::__WALL);
        if pid <= 0 {
            return pid < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
        }
    }
}

/// Whether every child left (zombies were just reaped) is one we may not
/// signal.
fn no_children_but(untouchable: &[i32]) -> bool {
    let (r, _) = sys::waitpid(-1, libc::WNOHANG | libc::__WALL);
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
        return true;
    }
    if r > 0 {
        // One more exited just now (reaped): the caller looks again.
        return false;
    }
    children_of("self").iter().all(|p| untouchable.contains(p))
}

/// Every live process below us, each with its parent (`None`: our own
/// child): our threads' children, then theirs, from
/// `/proc/<pid>/task/*/children`. Zombies are skipped (they can do nothing,
/// and their parent reaps them).
fn descendants() -> Vec<(i32, Option<i32>)> {
    let mut out: Vec<(i32, Option<i32>)> =
        children_of("self").into_iter().map(|p| (p, None)).collect();
    let mut next = 0;
    while next < out.len() {
        let pid = out[next].0;
        next += 1;
        for c in children_of(&pid.to_string()) {
            if !out.iter().any(|(p, _)| *p == c) {
                out.push((c, Some(pid)));
            }
        }
    }
    out.retain(|(pid, _)| !is_zombie(*pid));
    out
}

/// SIGKILL `pid`, listed as a child of `parent` (`None`: ours). Our own
/// child's pid cannot be reused before we reap it; a deeper one could have
/// been reaped by its parent and reused since the walk, so it is signalled
/// through a pidfd taken while it was still `parent`'s child: one opened on
/// a reused pid names a process whose parent is not `parent` (were it, the
/// process is of the tree anyway).
fn signal_kill(pid: i32, parent: Option<i32>) -> Result<(), rustix::io::Errno> {
    let target = Pid::from_raw(pid).ok_or(rustix::io::Errno::SRCH)?;
    let Some(parent) = parent else {
        return rustix::process::kill_process(target, Signal::KILL);
    };
    let pidfd = rustix::process::pidfd_open(target, PidfdFlags::empty())?;
    if parent_of(pid) != Some(parent) {
        return Err(rustix::io::Errno::SRCH);
    }
    rustix::process::pidfd_send_signal(&pidfd, Signal::KILL)
}

/// The parent pid from `/proc/<pid>/stat` (the field after the state).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        // Gone already.
        return true;
    };
    // The state follows the last `)`: a command name may contain both.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_none_or(|s| s == "Z" || s == "X")
}

/// The children of every thread of process `pid` (`self` for us).
fn children_of(pid: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    out
}

/// Exits as the command did: its code, or death by its signal.
fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        sys::die_of(sig);
        std::process::exit(128 + sig);
    }
    std::process::exit(libc::WEXITSTATUS(status))
}
