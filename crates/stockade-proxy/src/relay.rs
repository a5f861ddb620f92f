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

use crate::Accepted;

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

/// The connection the next queued datagram carries: a Unix stream socket
/// (the launcher's relay, one end of a pair it copies to and from) or a
/// TCP one (a connection the spawner accepted on the listener it made in
/// the sandbox's namespace, handed over whole); `Ok(None)` for a datagram
/// that carries neither (it is dropped), `WouldBlock` when none is queued.
pub(crate) fn take(socket: BorrowedFd<'_>) -> io::Result<Option<Accepted>> {
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
    let Some(fd) = handed else {
        return Ok(None);
    };
    if rustix::net::sockopt::socket_type(&fd) != Ok(SocketType::STREAM) {
        return Ok(None);
    }
    let accepted = match rustix::net::sockopt::socket_domain(&fd) {
        Ok(AddressFamily::UNIX) => {
            let stream = UnixStream::from(fd);
            stream.set_nonblocking(true)?;
            Accepted::Unix(stream)
        }
        Ok(AddressFamily::INET) => {
            let stream = std::net::TcpStream::from(fd);
            stream.set_nonblocking(true)?;
            Accepted::Tcp(stream)
        }
        _ => return Ok(None),
    };
    Ok(Some(accepted))
}

/// The next connection handed over on `socket`, waiting on the runtime.
pub(crate) async fn next(socket: &tokio::net::UnixDatagram) -> io::Result<Accepted> {
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
    send(relay_end, served.as_fd(), SendFlags::empty())?;
    Ok(client)
}

/// Hands `connection` itself (a stream socket: Unix, or TCP as the
/// spawner's listener in a sandbox's namespace accepts it) to the proxy
/// over `relay_end`, which serves it as an accepted client. Never waits:
/// a proxy whose queue is full (`WouldBlock`) leaves the connection to its
/// caller, who drops it.
pub fn hand_over_connection(
    relay_end: BorrowedFd<'_>,
    connection: BorrowedFd<'_>,
) -> io::Result<()> {
    send(relay_end, connection, SendFlags::DONTWAIT)
}

fn send(relay_end: BorrowedFd<'_>, connection: BorrowedFd<'_>, flags: SendFlags) -> io::Result<()> {
    let fds = [connection];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for a descriptor in the message"));
    }
    rustix::net::sendmsg(relay_end, &[IoSlice::new(&[0])], &mut control, flags)?;
    Ok(())
}
