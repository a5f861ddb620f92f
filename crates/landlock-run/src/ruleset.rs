//! The Landlock ruleset: filesystem grants (and the reads kept from
//! `--deny-read` paths beneath them), socket and network rules.

use std::fmt::Display;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::fs::{FileType, Mode, OFlags, fstat};
use rustix::io::Errno;

use crate::args::Net;
use crate::fds::open_path;
use crate::plan::Plan;
use crate::status::{OrFail, fail};

/// The newest set of filesystem rights we grant with `--ro`/`--rw`. V9's
/// ResolveUnix is not among them on purpose: it is handled on its own
/// (see `restrict`) and granted only by `--allow-socket`, so `--ro /` does
/// not open every pathname socket again. Best-effort compatibility (the
/// crate default) lets an older kernel handle the subset it knows.
pub(crate) const ABI_REQ: ABI = ABI::V5;

pub(crate) fn grant_rule(fd: OwnedFd, write: bool, shown: impl Display) -> PathBeneath<OwnedFd> {
    let access = grant_access(&fd, write, shown);
    PathBeneath::new(fd, access)
}

pub(crate) fn grant_access(fd: &OwnedFd, write: bool, shown: impl Display) -> BitFlags<AccessFs> {
    let stat = fstat(fd).or_fail(format_args!("cannot stat {shown}"));
    let mut access = match write {
        true => AccessFs::from_all(ABI_REQ),
        false => AccessFs::from_read(ABI_REQ),
    };
    // The kernel rejects directory-only rights on a file rule with EINVAL.
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        access &= AccessFs::from_file(ABI_REQ);
    }
    access
}

/// The `--deny-read` objects, held open for the supervisor, and the
/// directories above them (by identity, names followed as the kernel
/// would). Landlock only adds rights, so a writable grant above a
/// denied path grants reading it; a supervised run grants such a
/// directory everything but read_file and sends every read-only open
/// to the supervisor, which refuses the denied objects by identity and
/// performs the rest (`Fence::read_open`). Entries of the directories
/// on the way down keep read through the `--ro` grant's split
/// (`read_except`), so only what the run creates there is read through
/// the supervisor; executing such a new file needs read_file, which
/// nothing grants it (the caller documents it).
pub(crate) struct DeniedBeneath {
    pub(crate) objects: Vec<OwnedFd>,
    pub(crate) above: std::collections::HashSet<(u64, u64)>,
}

impl DeniedBeneath {
    pub(crate) fn open(paths: &[PathBuf]) -> DeniedBeneath {
        let mut out = DeniedBeneath {
            objects: Vec::new(),
            above: std::collections::HashSet::new(),
        };
        for path in paths {
            let fd = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
                Ok(fd) => fd,
                // Nothing there to read; nothing to refuse. A path this
                // user cannot reach, the command (same user) cannot
                // reach either.
                Err(Errno::NOENT | Errno::NOTDIR | Errno::ACCESS) => continue,
                Err(e) => fail(format_args!(
                    "cannot open deny-read path {}: {}",
                    path.display(),
                    io::Error::from(e)
                )),
            };
            if let Ok(st) = fstat(&fd) {
                out.above.insert((st.st_dev, st.st_ino));
            }
            for dir in path.ancestors().skip(1) {
                if let Ok(st) = rustix::fs::stat(dir) {
                    out.above.insert((st.st_dev, st.st_ino));
                }
            }
            out.objects.push(fd);
        }
        out
    }

    /// Whether `fd` is a directory a denied object lies beneath (or is
    /// one itself).
    pub(crate) fn above_one(&self, fd: &OwnedFd) -> bool {
        fstat(fd).is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::Directory
                && self.above.contains(&(st.st_dev, st.st_ino))
        })
    }
}

/// Read beneath `top` except the `denied` paths below it. Landlock only
/// adds rights, so instead of one rule on `top` every directory on the
/// way from `top` to a denied path gets listing only (names, so `ls ~`
/// works, which also leaves the names inside a denied directory
/// listable: the caller names that gap), and every other entry of those
/// directories gets read. An entry created beside a denied path after
/// this runs is covered by no rule, so it is unreadable for this run.
/// Symlinks get no rule: what they lead to is judged where it is.
///
/// Rules attach to objects, not names: an entry that *is* a denied
/// object or one of the directories on the way (a hard link to the
/// denied file beside it, a bind mount of `$HOME` next to it) would
/// grant read on that object under every name, so it gets no rule.
/// The caller passes the other names it found (mounts further away,
/// links elsewhere) as `--deny-read` too; this is the last check.
pub(crate) fn read_except(top: &Path, denied: &[PathBuf], rules: &mut Vec<PathBeneath<OwnedFd>>) {
    let denied: Vec<&Path> = denied
        .iter()
        .filter(|d| d.starts_with(top))
        .map(PathBuf::as_path)
        .collect();
    // A denied `top` leaves nothing of it to grant.
    if denied.contains(&top) {
        return;
    }
    let mut split: std::collections::BTreeSet<&Path> = std::collections::BTreeSet::new();
    for d in &denied {
        for a in d.ancestors().skip(1) {
            if !a.starts_with(top) {
                break;
            }
            split.insert(a);
        }
    }
    // What no entry's rule may be: the denied objects that exist and
    // the directories on the way to them.
    let held: Vec<(u64, u64)> = denied
        .iter()
        .copied()
        .chain(split.iter().copied())
        .filter_map(|p| rustix::fs::lstat(p).ok())
        .map(|st| (st.st_dev, st.st_ino))
        .collect();
    for dir in &split {
        let shown = dir.display();
        let fd = open_path(dir, "read grant");
        rules.push(PathBeneath::new(fd, AccessFs::ReadDir));
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            // Not listable by this user: nothing beneath it was readable
            // through a listing anyway; its entries get no rule.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => continue,
            Err(e) => fail(format_args!(
                "cannot list {shown} to grant read beside a denied path: {e}"
            )),
        };
        for entry in entries {
            let entry = entry.or_fail(format_args!("cannot list {shown}"));
            let child = dir.join(entry.file_name());
            if split.contains(child.as_path()) || denied.contains(&child.as_path()) {
                continue;
            }
            let fd = match rustix::fs::open(
                &child,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                // Gone since the listing: nothing to grant.
                Err(Errno::NOENT) => continue,
                Err(e) => fail(format_args!(
                    "cannot open {} to grant read: {}",
                    child.display(),
                    io::Error::from(e)
                )),
            };
            let stat = fstat(&fd).or_fail(format_args!("cannot stat {}", child.display()));
            if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
                || held.contains(&(stat.st_dev, stat.st_ino))
            {
                continue;
            }
            rules.push(grant_rule(fd, false, child.display()));
        }
    }
}

pub(crate) fn open_grant(path: &Path, write: bool) -> PathBeneath<OwnedFd> {
    let fd = open_path(path, "grant path");
    grant_rule(fd, write, format_args!("grant path {}", path.display()))
}

/// Builds and enforces the ruleset: the filesystem rules when `fs_rules`
/// is given (run mode), none in close-fds mode; in both the socket and
/// signal isolation of `plan`. Fails unless it is really enforced.
pub(crate) fn restrict(
    plan: &Plan,
    fs_rules: Option<Vec<PathBeneath<OwnedFd>>>,
    sockets: Vec<OwnedFd>,
) -> ABI {
    let what = "cannot create the Landlock ruleset";
    let mut ruleset = Ruleset::default();
    if fs_rules.is_some() {
        ruleset = ruleset
            .handle_access(AccessFs::from_all(ABI_REQ))
            .or_fail(what);
    }
    // What the plan promises (and --isolation reported) must be enforced,
    // never dropped silently by best effort.
    ruleset = ruleset.set_compatibility(CompatLevel::HardRequirement);
    if plan.resolve_unix {
        ruleset = ruleset.handle_access(AccessFs::ResolveUnix).or_fail(what);
    }
    if plan.scoped {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .or_fail(what);
    }
    // TCP by port where Landlock has it (ABI 4); the seccomp filter
    // (`isolate`) refuses every other family and type either way, and
    // below ABI 4 the caller names the gap for `--net-port`.
    let net_rules = matches!(plan.net, Net::Deny | Net::Port(_))
        && plan.abi >= ABI::V4
        && !plan.connect_supervised;
    if net_rules {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .or_fail(what);
    }
    let mut ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .create()
        .or_fail(what);
    for rule in fs_rules.into_iter().flatten() {
        ruleset = ruleset.add_rule(rule).or_fail("cannot add a Landlock rule");
    }
    if let (true, Net::Port(port)) = (net_rules, plan.net) {
        ruleset = ruleset
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .or_fail("cannot add the Landlock proxy-port rule");
    }
    // Bind by port; the supervisor then listens only on a loopback
    // address (Landlock cannot tell addresses apart).
    for port in plan.listen.iter().filter(|_| net_rules) {
        ruleset = ruleset
            .add_rule(NetPort::new(*port, AccessNet::BindTcp))
            .or_fail("cannot add the Landlock listen-port rule");
    }
    // Below ABI 9 the socket paths were only checked to exist: nothing
    // handles resolve_unix, so a rule for it would mean nothing.
    if plan.resolve_unix {
        for fd in sockets {
            let rule = PathBeneath::new(fd, AccessFs::ResolveUnix);
            ruleset = ruleset
                .add_rule(rule)
                .or_fail("cannot add a Landlock socket rule");
        }
    }
    let status = ruleset.restrict_self().or_fail("cannot restrict");
    // Best effort silently enforces nothing on a kernel without Landlock;
    // that must be a failure here, never a run with a false promise.
    if status.ruleset == RulesetStatus::NotEnforced {
        fail("Landlock is not enforced (not built into this kernel, or disabled)");
    }
    if !status.no_new_privs {
        fail("no_new_privs is not set");
    }
    match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi,
        _ => fail("Landlock is not available"),
    }
}
