//! Connections a relay hands over, instead of ones accepted from a
//! listener.
//!
//! bwrap's private network namespace has only its own loopback, so the
//! command's proxy variables point at a relay inside it (`landlock-run
//! --net-bridge`), which has to reach this proxy outside. A Unix socket
//! path would be a name to guard (where it lives, who could replace the
//! socket, what a killed run leaves behind); a descriptor is not. The relay
//! holds one end of a datagram socket pair ([`crate::Proxy::relay_end`]);
//! for each connection it makes a stream socket pair, keeps one end, and
//! sends the other here on a one-byte datagram as `SCM_RIGHTS`
//! ([`hand_over`]). Only a holder of the relay end can hand a connection
//! over, and nothing is left on disk.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixDatagram, UnixStream};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketType,
};

/// The proxy's end of the pair: non-blocking, served with the listeners.
pub(crate) type RelaySocket = UnixDatagram;

/// The proxy's end and the relay's end.
pub(crate) fn pair() -> io::Result<(RelaySocket, OwnedFd)> {
    let (ours, theirs) = UnixDatagram::pair()?;
    ours.set_nonblocking(true)?;
    Ok((ours, theirs.into()))
}

/// The connection the next queued datagram carries: `Ok(None)` for one that
/// carries no Unix stream socket (it is dropped), `WouldBlock` when none is
/// queued.
pub(crate) fn take(socket: BorrowedFd<'_>) -> io::Result<Option<UnixStream>> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    )?;
    let mut handed = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            // One a datagram; any other is closed as it drops here.
            for fd in fds {
                if handed.is_none() {
                    handed = Some(fd);
                }
            }
        }
    }
    let Some(fd) = handed.filter(is_unix_stream) else {
        return Ok(None);
    };
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    Ok(Some(stream))
}

fn is_unix_stream(fd: &OwnedFd) -> bool {
    rustix::net::sockopt::socket_type(fd) == Ok(SocketType::STREAM)
        && rustix::net::sockopt::socket_domain(fd) == Ok(AddressFamily::UNIX)
}

/// The next connection handed over on `socket`, waiting on the runtime.
pub(crate) async fn next(socket: &tokio::net::UnixDatagram) -> io::Result<UnixStream> {
    loop {
        socket.readable().await?;
        match socket.try_io(tokio::io::Interest::READABLE, || take(socket.as_fd())) {
            Ok(Some(stream)) => return Ok(stream),
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// What a relay does for one connection, given its end of the pair: the
/// client's end of a fresh stream pair, whose other end the proxy now
/// serves as it serves an accepted client. (`landlock-run --net-bridge`
/// does the same in the launcher, which does not link this crate.)
pub fn hand_over(relay_end: BorrowedFd<'_>) -> io::Result<UnixStream> {
    let (client, served) = UnixStream::pair()?;
    let fds = [served.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for a descriptor in the message"));
    }
    rustix::net::sendmsg(
        relay_end,
        &[IoSlice::new(&[0])],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(client)
}
