//! The proxy's listener inside a direct bwrap run's network namespace.
//!
//! Under `allow-listed` the command's proxy variables name its sandbox's
//! `127.0.0.1:PORT`, in a network namespace with only its own loopback.
//! When bwrap runs the command itself there is no relay inside to listen
//! there, so the spawner makes the listener from outside: a socket lives
//! in the namespace it was made in, whoever holds it later. bwrap names
//! its child and that child's network namespace first on its status
//! channel and waits (`--block-fd`) before the command's exec; the
//! namespace is taken from a pidfd of that child (through `/proc` only
//! before Linux 6.11, and only a `/proc` of our own pid namespace) and
//! accepted only if it is the one bwrap named (its inode; held open from
//! then on, so a pid reused in the meantime cannot substitute another).
//! bwrap reads its own report from `/proc`, so where `/proc` is another
//! pid namespace's the report names another process and is refused here.
//! A child sharing our memory then
//! enters it (and the user namespace that owns it, when bwrap made one:
//! `setns` into a network namespace asks for `CAP_SYS_ADMIN` over both)
//! and listens. Nothing of the command has run yet.

use std::fs::File;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{SocketAddrV4, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use rustix::io::Errno;
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use rustix::thread::LinkNameSpaceType;
use stockade_core::status::BwrapChild;

use crate::sys;

/// Why the listener could not be made; the run must not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bwrap named no network namespace for its child {pid}")]
    Unnamed { pid: i32 },
    #[error("bwrap's child {pid} cannot be found: {source}")]
    Gone { pid: i32, source: io::Error },
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error(
        "/proc is not this pid namespace's, so it cannot name bwrap's child {pid} (mount a /proc of its own, or use Linux 6.11 or later)"
    )]
    ForeignProc { pid: i32 },
    #[error(
        "the network namespace of process {pid} is {found}, not {named} as bwrap named it (the process is gone or another)"
    )]
    Mismatch { pid: i32, named: u64, found: u64 },
    #[error(
        "cannot {step} for the proxy's listener in process {pid}'s network namespace: {source}"
    )]
    Step {
        pid: i32,
        step: Step,
        source: io::Error,
    },
}

/// One step of making the listener, for [`ListenError::Step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    FindOwner,
    StartHelper,
    EnterUserNamespace,
    EnterNetworkNamespace,
    Socket,
    Bind,
    Listen,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::FindOwner => "find the namespace's owning user namespace",
            Step::StartHelper => "start the helper that enters the namespace",
            Step::EnterUserNamespace => "enter the namespace's user namespace",
            Step::EnterNetworkNamespace => "enter the network namespace",
            Step::Socket => "make a socket",
            Step::Bind => "bind 127.0.0.1",
            Step::Listen => "listen",
        })
    }
}

/// bwrap's child, found as bwrap named it: a pidfd for it and its network
/// namespace, held open. Both were opened before the namespace was checked
/// and the process was still alive after, so they are that child's, even
/// were its pid reused in between.
#[derive(Debug)]
pub struct NamedChild {
    pid: i32,
    pidfd: OwnedFd,
    net: File,
}

impl NamedChild {
    /// The process bwrap's `child` document names, or why it is not there.
    pub fn find(child: BwrapChild) -> Result<NamedChild, ListenError> {
        let pid = child.pid;
        let named = child.net_namespace.ok_or(ListenError::Unnamed { pid })?;
        let gone = |source: io::Error| ListenError::Gone { pid, source };
        let raw = rustix::process::Pid::from_raw(pid).ok_or_else(|| gone(Errno::SRCH.into()))?;
        let pidfd = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
            .map_err(|e| gone(e.into()))?;
        // From the pidfd itself where the kernel answers (6.11 and later):
        // no /proc, which may be another pid namespace's than ours.
        let net = match sys::pidfd_net_namespace(pidfd.as_fd()) {
            Ok(fd) => File::from(fd),
            Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => {
                // Only a /proc of our own pid namespace numbers processes
                // as bwrap and pidfd_open do: in another's, PID is another
                // process, and bwrap, reading the same /proc, named that
                // process's namespace, so the inode check below would pass.
                let ours = rustix::process::getpid().as_raw_nonzero().get();
                if std::fs::read_link("/proc/self").ok() != Some(PathBuf::from(ours.to_string())) {
                    return Err(ListenError::ForeignProc { pid });
                }
                let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
                File::open(&path).map_err(|source| ListenError::Open { path, source })?
            }
            Err(e) => return Err(gone(e)),
        };
        let found = net
            .metadata()
            .map_err(|source| ListenError::Open {
                path: PathBuf::from(format!("/proc/{pid}/ns/net")),
                source,
            })?
            .ino();
        if found != named {
            return Err(ListenError::Mismatch { pid, named, found });
        }
        // A pidfd polls readable once its process has exited: the
        // namespace opened through /proc was then another process's.
        let mut poll = [rustix::event::PollFd::new(
            &pidfd,
            rustix::event::PollFlags::IN,
        )];
        let exited = rustix::event::poll(&mut poll, Some(&rustix::event::Timespec::default()))
            .map_err(|e| gone(e.into()))?;
        if exited != 0 {
            return Err(gone(Errno::SRCH.into()));
        }
        Ok(NamedChild { pid, pidfd, net })
    }

    /// Kills it (it has not run the command while it waits on its block
    /// descriptor; bwrap's own death would not end it then, as it sets
    /// its parent-death signal only later).
    pub fn kill(&self) -> io::Result<()> {
        rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL)?;
        Ok(())
    }

    /// A listener on `127.0.0.1:port` in its network namespace,
    /// non-blocking and close-on-exec. It is bound with `IP_FREEBIND`:
    /// bwrap's child may not have brought its loopback up yet (it does so
    /// right after it is let run, and before it reads its block
    /// descriptor); connections reach the listener once it is up.
    pub fn listen(&self, port: u16) -> Result<TcpListener, ListenError> {
        let pid = self.pid;
        let step = |step: Step| move |source: io::Error| ListenError::Step { pid, step, source };
        let owner = sys::namespace_owner(self.net.as_fd()).map_err(step(Step::FindOwner))?;
        let ours = File::open("/proc/self/ns/user").map_err(|source| ListenError::Open {
            path: PathBuf::from("/proc/self/ns/user"),
            source,
        })?;
        let same = match (ours.metadata(), rustix::fs::fstat(&owner)) {
            (Ok(a), Ok(b)) => a.dev() == b.st_dev && a.ino() == b.st_ino,
            _ => false,
        };
        // Entering our own user namespace is refused (EINVAL), and needless.
        let user = (!same).then_some(owner);
        let mut made: Result<OwnedFd, (Step, Errno)> = Err((Step::StartHelper, Errno::AGAIN));
        let mut helper = || {
            made = make(user.as_ref(), &self.net, port);
        };
        sys::in_vfork_child(&mut helper).map_err(step(Step::StartHelper))?;
        let fd = made.map_err(|(s, e)| step(s)(e.into()))?;
        Ok(TcpListener::from(fd))
    }
}

/// [`NamedChild::find`] and [`NamedChild::listen`] in one.
pub fn listen_in(child: BwrapChild, port: u16) -> Result<TcpListener, ListenError> {
    NamedChild::find(child)?.listen(port)
}

/// The helper child's work: system calls only (see `sys::in_vfork_child`).
/// The socket it makes is in the descriptor table it shares with us.
fn make(user: Option<&OwnedFd>, net: &File, port: u16) -> Result<OwnedFd, (Step, Errno)> {
    if let Some(user) = user {
        rustix::thread::move_into_link_name_space(user.as_fd(), Some(LinkNameSpaceType::User))
            .map_err(|e| (Step::EnterUserNamespace, e))?;
    }
    rustix::thread::move_into_link_name_space(net.as_fd(), Some(LinkNameSpaceType::Network))
        .map_err(|e| (Step::EnterNetworkNamespace, e))?;
    let socket = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| (Step::Socket, e))?;
    rustix::net::sockopt::set_ip_freebind(&socket, true).map_err(|e| (Step::Bind, e))?;
    rustix::net::bind(&socket, &SocketAddrV4::new([127, 0, 0, 1].into(), port))
        .map_err(|e| (Step::Bind, e))?;
    rustix::net::listen(&socket, 128).map_err(|e| (Step::Listen, e))?;
    Ok(socket)
}

/// Hands `connection` (a stream socket: a connection accepted on a
/// listener [`listen_in`] made, or one end of a pair the launcher's relay
/// copies to and from) to the proxy over `relay_end`, one byte carrying it
/// as `SCM_RIGHTS`: the protocol `stockade_proxy`'s relay reads (its
/// `hand_over_connection` is the same for callers that link the proxy).
/// Never waits: a proxy whose queue is full gets `WouldBlock`, and the
/// caller drops the connection.
pub fn hand_over(relay_end: BorrowedFd<'_>, connection: BorrowedFd<'_>) -> io::Result<()> {
    send(relay_end, connection, SendFlags::DONTWAIT)
}

/// One connection over `relay_end`, with `flags` (the launcher's bridge
/// waits; see `bridge`).
pub(crate) fn send(
    relay_end: BorrowedFd<'_>,
    connection: BorrowedFd<'_>,
    flags: SendFlags,
) -> io::Result<()> {
    let fds = [connection];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for a descriptor in the message"));
    }
    rustix::net::sendmsg(relay_end, &[IoSlice::new(&[0])], &mut control, flags)?;
    Ok(())
}
