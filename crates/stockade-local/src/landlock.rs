//! The Landlock rung: the Linux chain's second candidate, the
//! `landlock-run` launcher (Landlock, seccomp and, where the kernel has it,
//! the user-notification supervisor).

use std::ffi::OsString;

use stockade_core::{Confined, ConfiningMode, Gap, SandboxPolicy, SandboxUnavailable, gaps};

use crate::confine::{HostFacts, p};
use crate::linux_chain::Chain;
use crate::{Backend, Protection, Rung, profile};

pub(crate) struct Landlock<'a>(pub Chain<'a>);

impl Rung for Landlock<'_> {
    fn backend(&self) -> &'static str {
        Backend::Landlock.as_str()
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        #[allow(unused_mut)] // the channel is Linux's
        let mut run = self.0.prepare(Backend::Landlock, policy)?;
        #[allow(unused_mut)]
        let mut args = profile::landlock_args(&run.prepared.profile, argv);
        #[cfg(target_os = "linux")]
        self.mount_path_approval(policy, &mut run, &mut args)?;
        Ok(self.0.finish(
            Backend::Landlock,
            policy,
            run,
            args,
            profile::LANDLOCK_DENIAL,
        ))
    }
}

#[cfg(target_os = "linux")]
impl Landlock<'_> {
    /// The session's path approval, when the supervisor runs (only what it
    /// performs can be asked about): the channel's end passed at the next
    /// free descriptor and `--ask-fd` before every other option.
    fn mount_path_approval(
        &self,
        policy: &SandboxPolicy,
        run: &mut crate::linux_chain::Run,
        args: &mut Vec<OsString>,
    ) -> Result<(), SandboxUnavailable> {
        let p = self.0.provider;
        if !p.host_facts().supervised || run.prepared.profile.unsupervised {
            return Ok(());
        }
        // Read-only forbids every write, the workspace's too: a refusal
        // there is the mode's, never a place outside the roots to ask about.
        if policy.mode != stockade_core::ConfiningMode::WorkspaceWrite {
            return Ok(());
        }
        // A request's own approver takes the place of the session's.
        let asking = policy
            .approval
            .as_ref()
            .map(crate::run_approval::paths)
            .or_else(|| p.path_approval(policy.session.as_deref()));
        let Some(approval) = asking else {
            return Ok(());
        };
        let child_fd = run
            .prepared
            .pass_fds
            .iter()
            .map(|f| f.child_fd)
            .chain(std::iter::once(crate::confine::STATUS_FD))
            .max()
            .unwrap_or(crate::confine::STATUS_FD)
            + 1;
        let mounted = crate::path_approval::mount(&approval, child_fd, p.pins.control_paths())
            .map_err(|e| {
                SandboxUnavailable::single(
                    Backend::Landlock.as_str(),
                    format!("cannot make the path approval channel: {e}"),
                )
            })?;
        run.prepared.pass_fds.push(stockade_core::PassFd {
            child_fd,
            file: std::sync::Arc::new(mounted.launcher_end),
        });
        args.splice(0..0, mounted.args);
        Ok(())
    }
}

/// What Landlock does not govern on this host in `mode`, by name (the
/// socket gap both backends share is added by the chain).
pub(crate) fn gaps(mode: ConfiningMode, abi_n: u8, supervised: bool) -> Vec<Gap> {
    let mut out = Vec::new();
    if !supervised {
        out.push(Gap::new(
            gaps::METADATA,
            "Landlock has no rights for metadata and this kernel cannot run the supervisor (seccomp user notification, Linux 5.14): mode, owner, timestamps, extended attributes and inode flags of files outside the writable roots can still be changed",
        ));
        if mode == ConfiningMode::WorkspaceWrite {
            out.push(Gap::new(
                gaps::PROTECTED_PATHS,
                "Landlock cannot exclude a path from an allowed root and this kernel cannot run the supervisor: .git/hooks and .git/config inside the workspace stay writable",
            ));
        }
    }
    out.push(Gap::new(
        gaps::PROC_MASKS,
        "procfs and sysfs are read-only, but /proc/kcore, /proc/keys, /proc/timer_list and the other entries container runtimes mask stay readable",
    ));
    out.push(Gap::new(
        gaps::IPC,
        "System V shared memory, message queues and semaphores of the user's processes outside the sandbox stay reachable (judged by their owner and mode; the IPC namespace is the caller's)",
    ));
    if abi_n < 3 {
        out.push(Gap::new(
            gaps::TRUNCATE,
            format!("Landlock ABI {abi_n} (< 3) cannot refuse truncating files outside the writable roots"),
        ));
    }
    if abi_n < 6 {
        out.push(Gap::new(
            gaps::SIGNALS,
            format!("Landlock ABI {abi_n} (< 6) has no signal scope: processes of the same user outside the sandbox can be signalled"),
        ));
    }
    out
}

/// What `probe` says Landlock cannot govern of the network: what an
/// `allow-listed` run would carry (runs name their own, per mode).
pub(crate) fn network_gaps(abi: u8) -> Vec<Gap> {
    if abi >= 4 {
        vec![Gap::new(
            gaps::NETWORK_PORT,
            "under allow-listed, Landlock allows TCP by port only: the proxy's port is reachable on every address, not only loopback",
        )]
    } else {
        // Below ABI 4 landlock-run's supervisor performs every connect
        // itself (only to the proxy's 127.0.0.1 port); without the
        // supervisor allow-listed is refused, never run with TCP open.
        Vec::new()
    }
}

/// What Landlock enforces here beyond the file-write modes (the chain adds
/// the held roots and the sockets, which both backends share).
pub(crate) fn protections(facts: &HostFacts, abi: u8) -> Vec<Protection> {
    let mut out = Vec::new();
    out.push(p(
        "procfs",
        "read-only (no Landlock write right outside the writable roots); nothing masked",
    ));
    out.push(p("sysfs", "read-only"));
    out.push(p(
        "deny-read",
        stockade_core::texts::deny_read_landlock_protection(facts.supervised),
    ));
    out.push(p(
        "network",
        match (abi >= 4, facts.supervised) {
            (true, true) => "deny: no network socket at all (seccomp), so no loopback either; allow-listed: TCP to the proxy's port only (Landlock), UDP, raw and other families refused (seccomp); both: the supervisor takes every listen and performs it on an AF_UNIX socket (Unix-socket servers work), refusing every inet one (EACCES) except with --allow-listen PORT: bound to a loopback address at PORT (Landlock grants the bind); accept stays for approved listeners; io_uring refused".to_owned(),
            (true, false) => "deny: no network socket at all (seccomp), so no loopback either; allow-listed: TCP to the proxy's port only (Landlock), UDP, raw and other families refused (seccomp); both: listen and accept refused (no supervisor here, so Unix-socket servers cannot listen either), io_uring refused; --allow-listen needs the supervisor".to_owned(),
            (false, true) => format!("deny: no network socket at all (seccomp); allow-listed: Landlock ABI {abi} (< 4) has no TCP rights, so the supervisor performs every connect itself, only to the proxy's 127.0.0.1 port (EACCES elsewhere), and MSG_FASTOPEN sends are refused; UDP, raw and other families refused (seccomp); both: the supervisor takes every listen (AF_UNIX performed, inet only on loopback at an --allow-listen port); io_uring refused"),
            (false, false) => format!("deny: no network socket at all (seccomp), listen and accept refused; allow-listed: refused (exit 125): Landlock ABI {abi} (< 4) has no TCP rights and there is no supervisor to govern connect; choose --network deny or --network allow"),
        },
    ));
    out.push(p(
        "signals",
        if abi >= 6 {
            "Landlock signal scope: no process outside can be signalled".to_owned()
        } else {
            format!("open (Landlock ABI {abi} < 6)")
        },
    ));
    if facts.supervised {
        out.push(p(
            "metadata",
            "supervised: chmod, chown, utime, xattrs and inode flags outside the writable roots are refused by a seccomp user-notification supervisor",
        ));
        out.push(p(
            "git",
            ".git/hooks, .git/config, config.worktree, commondir and a worktree's .git file read-only and .git pinned, by the supervisor",
        ));
        out.push(p(
            "path-approval",
            "a session's path approval (set_path_approval) is asked, while the command waits, about a place outside the writable roots the supervisor refused (opens for writing, mkdir, mknod, symlink, unlink, rename, link, truncate, metadata by name); anything else outside still needs a rerun",
        ));
    } else {
        out.push(p("metadata", "not governed (gap metadata)"));
        out.push(p(
            "path-approval",
            "none: without the supervisor a path outside the roots cannot be approved while the command runs (a rerun with a wider grant)",
        ));
        out.push(p("git", "not governed (gap protected-paths)"));
    }
    out
}
