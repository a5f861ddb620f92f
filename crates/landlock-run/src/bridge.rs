//! The relay that gives a command in a private network namespace (bwrap
//! `--unshare-net`, whose only interface is its own loopback) its one
//! way out: the proxy outside. It listens on the sandbox's 127.0.0.1:PORT,
//! where the command's `HTTP(S)_PROXY` points, and hands each connection
//! to the proxy over the relay end it was given (a datagram socket the
//! proxy reads): a fresh stream socket pair per connection, one end sent
//! as `SCM_RIGHTS` on a one-byte datagram, the other copied to and from
//! the client. No path names the proxy, so nothing on disk can be swapped
//! for another listener.
//!
//! It is forked before any restriction is applied, so the command's
//! Landlock domain (and its socket rules) never binds it, and the
//! command, being in a nested domain, cannot ptrace or signal it. It
//! dies with the command (PDEATHSIG), and bwrap's pid namespace ends it
//! in any case.

use std::io;
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use rustix::net::SendFlags;

use crate::status::{OrFail, fail};
use crate::sys;

pub(crate) fn start(port: u16, relay: OwnedFd) {
    // Listening before the fork: the command can connect at once.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).or_fail(format_args!(
        "cannot listen on 127.0.0.1:{port} for the proxy bridge"
    ));
    let parent = rustix::process::getpid();
    let pid = sys::fork();
    match pid {
        -1 => fail(format_args!(
            "cannot fork the proxy bridge: {}",
            io::Error::last_os_error()
        )),
        0 => serve(listener, relay, parent),
        _ => {
            drop(listener);
            drop(relay);
        }
    }
}

fn serve(listener: TcpListener, relay: OwnedFd, parent: rustix::process::Pid) -> ! {
    let dies =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if dies.is_err() || rustix::process::getppid() != Some(parent) {
        std::process::exit(0);
    }
    // Only the listener and the relay end: not the status channel, not a
    // grant.
    sys::close_all_from_3_but(&[listener.as_fd(), relay.as_fd()]);
    let relay = Arc::new(relay);
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let relay = Arc::clone(&relay);
        std::thread::spawn(move || forward(conn, &relay));
    }
    std::process::exit(0)
}

/// One connection: handed to the proxy, then copied both ways.
fn forward(client: TcpStream, relay: &OwnedFd) {
    let Ok(upstream) = hand_over(relay) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(mut c_read), Ok(mut u_write)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut u_write);
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut c_write) = (upstream, client);
    let _ = io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// A fresh stream pair, one end sent to the proxy: the other is this
/// connection's way to it (`stockade_proxy::hand_over`, the same protocol).
fn hand_over(relay: &OwnedFd) -> io::Result<UnixStream> {
    let (ours, theirs) = UnixStream::pair()?;
    crate::netns_listener::send(relay.as_fd(), theirs.as_fd(), SendFlags::empty())?;
    Ok(ours)
}
