//! The relay that gives a command in a private network namespace (bwrap
//! `--unshare-net`, whose only interface is its own loopback) its one
//! way out: the proxy, reached through a Unix socket outside. It listens
//! on the sandbox's 127.0.0.1:PORT, where the command's `HTTP(S)_PROXY`
//! points, and copies each connection to PATH, nothing else.
//!
//! It is forked before any restriction is applied, so the command's
//! Landlock domain (and its socket rules) never binds it, and the
//! command, being in a nested domain, cannot ptrace or signal it. It
//! dies with the command (PDEATHSIG), and bwrap's pid namespace ends it
//! in any case.

use std::io;
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::status::{OrFail, fail};
use crate::sys;

pub(crate) fn start(port: u16, path: &Path) {
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
        0 => serve(listener, path.to_path_buf(), parent),
        _ => drop(listener),
    }
}

fn serve(listener: TcpListener, path: PathBuf, parent: rustix::process::Pid) -> ! {
    let dies =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if dies.is_err() || rustix::process::getppid() != Some(parent) {
        std::process::exit(0);
    }
    // Only the listener: not the status channel, not a grant.
    sys::close_all_from_3_but(&listener);
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let path = path.clone();
        std::thread::spawn(move || relay(conn, &path));
    }
    std::process::exit(0)
}

fn relay(client: TcpStream, path: &Path) {
    let Ok(upstream) = UnixStream::connect(path) else {
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
