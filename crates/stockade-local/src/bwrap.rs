//! The bwrap rung: the first of the Linux chain. bwrap builds the mount and
//! pid namespaces; the Landlock launcher, run inside as the fd closer,
//! closes inherited descriptors before the command starts.

use std::ffi::OsString;

use stockade_core::{Confined, SandboxPolicy, SandboxUnavailable};

use crate::confine::{HostFacts, list, p};
use crate::linux_chain::Chain;
use crate::{Backend, Protection, Rung, profile};

pub(crate) struct Bwrap<'a>(pub Chain<'a>);

impl Rung for Bwrap<'_> {
    fn backend(&self) -> &'static str {
        Backend::Bwrap.as_str()
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let mut run = self.0.prepare(Backend::Bwrap, policy)?;
        if !run.prepared.profile.allow_listen.is_empty() {
            run.prepared.gaps.push(stockade_core::Gap::new(
                stockade_core::gaps::LISTEN,
                "--allow-listen: the listener is on the sandbox's private loopback, which nothing on the host can reach (use the landlock backend for a dev server)",
            ));
        }
        let args = profile::bwrap_args(&run.prepared.profile, argv);
        Ok(self
            .0
            .finish(Backend::Bwrap, policy, run, args, profile::BWRAP_DENIAL))
    }
}

/// What bwrap enforces here beyond the file-write modes (the chain adds
/// the held roots and the sockets, which both backends share).
pub(crate) fn protections(facts: &HostFacts) -> Vec<Protection> {
    let mut out = Vec::new();
    out.push(p(
        "procfs",
        format!(
            "read-only: {}; masked: {}",
            list(facts.proc_read_only.iter().cloned()),
            list(facts.proc_masked.iter().map(|(p, _)| p.clone()))
        ),
    ));
    out.push(p("sysfs", "read-only"));
    out.push(p(
        "signals",
        "own pid namespace: no process outside is visible",
    ));
    out.push(p(
        "git",
        ".git/hooks, .git/config, config.worktree, commondir and a worktree's .git file bound read-only; .git pinned in place",
    ));
    out.push(p(
        "deny-read",
        "an empty mode-0000 stand-in mounted over each denied path (a tmpfs for a directory) and over its other names: other mounts of its filesystem subtree (mount table) and hard links in the workspace and writable roots; a file with a link elsewhere refuses the run; names made after the start are not seen (gap deny-read-aliases)",
    ));
    out.push(p(
        "network",
        "deny: a private network namespace with its own loopback only; allow-listed: the same, with the proxy relayed in as the only way out; both: AF_VSOCK, AF_PACKET and netlink beyond route and sock_diag refused (seccomp), io_uring refused; listening only on the private loopback, so --allow-listen cannot serve the host (gap listen)",
    ));
    out.push(p(
        "path-approval",
        "none: a path outside the writable roots cannot be approved while the command runs under bwrap (its mounts are fixed at the start); a rerun with a wider grant",
    ));
    out
}
