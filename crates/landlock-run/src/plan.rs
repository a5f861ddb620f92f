//! What this kernel lets the launcher enforce, decided once and shared by
//! the run modes and `--isolation`, so what is reported is what is done.

use landlock::{ABI, RestrictSelf};

use crate::args::Net;
use crate::status::OrFail;

/// How the command is kept from host daemons (Unix sockets) and from other
/// processes (signals) on this kernel. One decision shared by the run
/// modes and `--isolation`, so what is reported is what is done.
#[derive(Clone)]
pub(crate) struct Plan {
    pub(crate) abi: ABI,
    /// Landlock scopes (ABI 6): abstract sockets and signals stay inside.
    pub(crate) scoped: bool,
    /// Landlock resolve_unix (ABI 9): pathname sockets only where
    /// `--allow-socket` grants them.
    pub(crate) resolve_unix: bool,
    /// The seccomp filter: no AF_UNIX socket can be created at all.
    pub(crate) seccomp: bool,
    /// The metadata and protected-path supervisor can run here.
    pub(crate) supervised: bool,
    /// What the command may reach over the network (run mode).
    pub(crate) net: Net,
    /// `--allow-listen` ports (only with `net` Deny or Port).
    pub(crate) listen: Vec<u16>,
    /// listen(2) goes to the supervisor (a supervised run under Deny
    /// or Port), so listen and accept need not be refused outright.
    pub(crate) listen_supervised: bool,
    /// connect(2) goes to the supervisor, and Landlock gets no TCP
    /// rights (see `Opts::connect_supervised`).
    pub(crate) connect_supervised: bool,
}

/// The Landlock ABI the crate uses on this kernel (Unsupported without
/// Landlock). A `RestrictSelf` with no flags and without no_new_privs only
/// reads the version: apply() skips every other syscall.
pub(crate) fn kernel_abi() -> ABI {
    let status = RestrictSelf::default()
        .no_new_privs(false)
        .apply()
        .or_fail("cannot query the Landlock ABI");
    status.landlock.into()
}

pub(crate) fn plan(abi: ABI, allow_sockets: bool) -> Result<Plan, String> {
    let mut plan = sockets_plan(abi, allow_sockets)?;
    plan.supervised = crate::supervise::available().is_ok();
    Ok(plan)
}

/// [`plan`] without asking whether the supervisor could run (a file read):
/// close-fds mode and bwrap's own filters never supervise.
pub(crate) fn sockets_plan(abi: ABI, allow_sockets: bool) -> Result<Plan, String> {
    let resolve_unix = abi >= ABI::V9;
    // Without resolve_unix the filter cannot tell one path from another,
    // so any --allow-socket leaves every pathname socket open (the caller
    // reports that gap from --isolation).
    let seccomp = !resolve_unix && !allow_sockets;
    if seccomp && !crate::socket_filter::SUPPORTED {
        return Err(format!(
            "cannot confine Unix sockets: Landlock ABI {} has no resolve_unix and there is no seccomp filter for {}",
            abi_number(abi),
            std::env::consts::ARCH
        ));
    }
    Ok(Plan {
        abi,
        scoped: abi >= ABI::V6,
        resolve_unix,
        seccomp,
        supervised: false,
        net: Net::Host,
        listen: Vec::new(),
        listen_supervised: false,
        connect_supervised: false,
    })
}

pub(crate) fn abi_number(abi: ABI) -> u32 {
    abi as u32
}

impl Plan {
    /// The `--isolation` lines, exactly.
    pub(crate) fn facts(&self) -> [String; 7] {
        let pick =
            |cases: &[(bool, &'static str)]| cases.iter().find(|c| c.0).map_or("open", |c| c.1);
        [
            format!("abi {}", abi_number(self.abi)),
            format!("signals {}", pick(&[(self.scoped, "scoped")])),
            format!(
                "abstract-sockets {}",
                pick(&[(self.scoped, "scoped"), (self.seccomp, "seccomp")])
            ),
            format!(
                "pathname-sockets {}",
                pick(&[(self.resolve_unix, "landlock"), (self.seccomp, "seccomp")])
            ),
            format!("metadata {}", pick(&[(self.supervised, "supervised")])),
            format!(
                "protected-paths {}",
                pick(&[(self.supervised, "supervised")])
            ),
            // `--ask-fd`: only what the supervisor performs can be asked
            // about while the command runs (README, *Asking*).
            format!(
                "path-approval {}",
                if self.supervised {
                    "supervised"
                } else {
                    "none"
                }
            ),
        ]
    }
}
