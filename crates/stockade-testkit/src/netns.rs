//! A peer on another address: a network namespace joined to this one by a
//! veth pair, so a test can knock from outside the host's loopback (a door
//! inward) or stand up a host a confined command must not reach. Needs
//! root and iproute2's `ip`.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The namespace `name`: this side is `host_addr`, the namespace's side
/// `peer_addr`, on a /30 of its own. Removed (with its veth pair) when
/// dropped.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
    pub host_addr: String,
    pub peer_addr: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Netns {
    /// A namespace named after `tag` (two or three letters: interface
    /// names are short) on 10.`octet`.N.0/30, N distinct per namespace of
    /// this test process (tests run in parallel). `None` when `ip` is
    /// missing outside CI ([`crate::require`]).
    pub fn new(tag: &str, octet: u8) -> Option<Netns> {
        let ip = Command::new("sh")
            .args(["-c", "command -v ip"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !crate::require("ip (iproute2)", ip) {
            return None;
        }
        let n = NEXT.fetch_add(1, Ordering::SeqCst) % 250;
        let id = (std::process::id() % 10_000) * 1000 + n;
        let net = Netns {
            name: format!("{tag}{id}"),
            host_addr: format!("10.{octet}.{n}.1"),
            peer_addr: format!("10.{octet}.{n}.2"),
        };
        let (host, inner) = (format!("{tag}h{id}"), format!("{tag}p{id}"));
        let ns = &net.name;
        for cmd in [
            format!("ip netns add {ns}"),
            format!("ip link add {host} type veth peer name {inner}"),
            format!("ip link set {inner} netns {ns}"),
            format!("ip addr add {}/30 dev {host}", net.host_addr),
            format!("ip link set {host} up"),
            format!("ip -n {ns} addr add {}/30 dev {inner}", net.peer_addr),
            format!("ip -n {ns} link set {inner} up"),
            format!("ip -n {ns} link set lo up"),
        ] {
            let ok = Command::new("sh")
                .args(["-c", &cmd])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{cmd}");
        }
        Some(net)
    }

    /// `program` run inside the namespace (`ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
