//! The bwrap rung: the first of the Linux chain. bwrap builds the mount and
//! pid namespaces; the Landlock launcher, run inside as the fd closer,
//! closes inherited descriptors before the command starts. Under `deny` and
//! `allow-listed` bwrap can run the command itself instead
//! (`Confined::direct`), with the launcher's filters, and (allow-listed)
//! the proxy's listener made in its namespace by the spawner.

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
        let direct = self.direct(&run.prepared, argv);
        let args = profile::bwrap_args(&run.prepared.profile, argv);
        Ok(self
            .0
            .finish(Backend::Bwrap, policy, run, args, profile::BWRAP_DENIAL)
            .with_direct(direct))
    }
}

impl Bwrap<'_> {
    /// The run with bwrap starting the command itself, where that confines
    /// as much: under `deny` or `allow-listed` (a private network
    /// namespace, so abstract sockets are the sandbox's own, and its pid
    /// namespace keeps every signal inside: Landlock's scopes add nothing),
    /// without `--allow-socket`, on a kernel whose Unix-socket rules the
    /// launcher keeps in seccomp (below Landlock ABI 9), with a bwrap that
    /// loads filters from descriptors. The closer's three seccomp programs
    /// go to bwrap instead, built by the launcher's own code. Under
    /// `allow-listed` the closer's relay is replaced by a listener the
    /// spawner makes in bwrap's namespace before the command starts
    /// ([`stockade_core::DirectRelay`]); the relay end stays outside.
    /// `None` keeps the closer; a filter that cannot be built or handed
    /// over does too (the closer then says why).
    #[cfg(target_os = "linux")]
    fn direct(
        &self,
        prepared: &crate::confine::Prepared,
        argv: &[OsString],
    ) -> Option<stockade_core::Direct> {
        let chain = self.0;
        // `--allow-socket` keeps the closer: it opens each granted socket
        // (a missing one fails the run, as under Landlock), which bwrap
        // would not.
        if !chain.selected.bwrap_direct
            || prepared.profile.fd_closer.is_none()
            || !prepared.profile.allow_sockets.is_empty()
        {
            return None;
        }
        let (port, relay_fd) = match prepared.profile.net {
            profile::ProfileNet::Deny => (None, None),
            profile::ProfileNet::Proxy {
                port,
                relay_fd: Some(fd),
            } => (Some(port), Some(fd)),
            _ => return None,
        };
        let abi = chain.provider.host_facts().landlock_abi.unwrap_or(0);
        let programs = landlock_run::direct::private_net_filters(abi, false).ok()??;
        // Every held descriptor but the relay end, which is the spawner's
        // to hold: bwrap would leave it open for the command.
        let (relay, mut pass_fds): (Vec<_>, Vec<_>) = prepared
            .pass_fds
            .iter()
            .cloned()
            .partition(|p| Some(p.child_fd) == relay_fd);
        let first = pass_fds
            .iter()
            .map(|p| p.child_fd + 1)
            .max()
            .unwrap_or(0)
            .max(crate::confine::STATUS_FD + 1);
        let filters = (first..)
            .zip(programs)
            .map(|(child_fd, program)| {
                Some(stockade_core::PassFd {
                    child_fd,
                    file: std::sync::Arc::new(filter_file(&program).ok()?),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let numbers: Vec<i32> = filters.iter().map(|p| p.child_fd).collect();
        let block_fd = numbers.last().map_or(first, |n| n + 1);
        pass_fds.extend(filters);
        let relay = match (port, relay.into_iter().next()) {
            (Some(port), Some(end)) => Some(stockade_core::DirectRelay {
                port,
                block_fd,
                relay_end: end.file,
            }),
            (None, _) => None,
            (Some(_), None) => return None,
        };
        let mut profile = prepared.profile.clone();
        profile.direct_filters = Some(numbers);
        profile.direct_block_fd = relay.as_ref().map(|r| r.block_fd);
        Some(stockade_core::Direct {
            argv: profile::with_runner(
                chain.selected.runner.as_os_str(),
                profile::bwrap_args(&profile, argv),
            ),
            pass_fds,
            relay,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn direct(
        &self,
        _: &crate::confine::Prepared,
        _: &[OsString],
    ) -> Option<stockade_core::Direct> {
        None
    }
}

/// A sealed in-memory file holding `bytes`, at offset 0 for bwrap's read:
/// nothing on disk a run could swap, and nothing can change it once made.
#[cfg(target_os = "linux")]
fn filter_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use rustix::fs::{MemfdFlags, SealFlags};
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create(
        "stockade-seccomp",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.rewind()?;
    rustix::fs::fcntl_add_seals(
        &file,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )?;
    Ok(file)
}

/// Who starts the command inside bwrap on this host, for `probe`: the
/// same decision as `Bwrap::direct` makes per run.
pub(crate) fn command_runner(direct: bool, landlock_abi: Option<u8>) -> Protection {
    let state = if !direct {
        "the launcher inside, as its closer, in every mode: this bwrap does not list --add-seccomp-fd and --json-status-fd (bwrap 0.6)"
    } else if landlock_abi.unwrap_or(0) >= 9 {
        "the launcher inside, as its closer, in every mode: Landlock confines pathname sockets by path here, which seccomp cannot"
    } else {
        "under deny and allow-listed bwrap itself, loading the launcher's seccomp filters (allow-listed: the proxy's listener made in its network namespace by stockade before the command starts); the launcher inside, as its closer, under allow, with a terminal of the command's own, for an MCP server and with allow_sockets"
    };
    p("command-runner", state)
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
