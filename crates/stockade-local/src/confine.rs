//! How the Linux chain turns a policy into a runner profile: the held roots,
//! the protected paths, the procfs covers, the status channel, and the gaps
//! each backend has on this host.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stockade_core::{
    AfterRunHandle, ConfiningMode, Gap, PassFd, SandboxPolicy, SandboxUnavailable, StatusChannel,
    gaps,
};
use stockade_roots::{HeldDir, RootPins, beneath};

use crate::profile::{self, DenyMask, Grant, LinuxProfile, ProtectedBind};
use crate::{Backend, Selected};

/// The child descriptor that carries the runner status channel.
pub(crate) const STATUS_FD: i32 = 3;
/// Held objects are handed to the child from this number on.
const FIRST_PASSED_FD: i32 = 4;

/// The label of a refusal that is about the roots, not a backend.
pub(crate) const ROOTS: &str = "writable-roots";
/// The label of a refusal about a deny-read path's other names.
pub(crate) const DENY_READ_LABEL: &str = "deny-read";

/// A profile plus the descriptors it names.
pub(crate) struct Prepared {
    pub profile: LinuxProfile,
    pub pass_fds: Vec<PassFd>,
    /// What the command may write, for result facts.
    pub writable: Vec<PathBuf>,
    /// What it may not read, and what stays read-only, for result facts.
    pub deny_read: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    /// What this profile cannot enforce of the policy's file lists.
    pub gaps: Vec<Gap>,
    /// The look after the run at what it left that the host would run.
    pub after_run: Option<AfterRunHandle>,
}

fn refused(e: impl std::fmt::Display) -> SandboxUnavailable {
    SandboxUnavailable::single(ROOTS, e.to_string())
}

/// What a provider knows of the host that shapes every profile.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostFacts {
    pub proc_read_only: Vec<PathBuf>,
    pub proc_masked: Vec<(PathBuf, bool)>,
    pub landlock_abi: Option<u8>,
    /// The Landlock launcher's supervisor can run on this kernel.
    pub supervised: bool,
}

impl HostFacts {
    /// Only entries present here: bwrap cannot create a mount point inside
    /// procfs, so binding over a missing one would fail every run.
    pub fn gather(
        exists: impl Fn(&Path) -> bool,
        landlock_abi: Option<u8>,
        supervised: bool,
    ) -> Self {
        Self {
            proc_read_only: profile::PROC_READ_ONLY
                .iter()
                .map(PathBuf::from)
                .filter(|p| exists(p))
                .collect(),
            proc_masked: profile::PROC_MASKED
                .iter()
                .map(|(p, d)| (PathBuf::from(p), *d))
                .filter(|(p, _)| exists(p))
                .collect(),
            landlock_abi,
            supervised,
        }
    }
}

/// Numbers descriptors for the child in the order they are added.
struct Fds {
    next: i32,
    list: Vec<PassFd>,
}

impl Fds {
    fn add(&mut self, file: &Arc<std::fs::File>) -> i32 {
        let fd = self.next;
        self.next += 1;
        self.list.push(PassFd {
            child_fd: fd,
            file: file.clone(),
        });
        fd
    }
}

/// Hands `fd` to the child at the number after every descriptor already
/// passed; that number.
pub(crate) fn pass_next(pass: &mut Vec<PassFd>, fd: std::os::fd::OwnedFd) -> i32 {
    let n = pass
        .iter()
        .map(|p| p.child_fd + 1)
        .max()
        .unwrap_or(FIRST_PASSED_FD)
        .max(FIRST_PASSED_FD);
    pass.push(PassFd {
        child_fd: n,
        file: Arc::new(std::fs::File::from(fd)),
    });
    n
}

/// Build the profile for `policy` on `backend` (`None`: an operator
/// `runner_command`, which gets bwrap's arguments without the closer).
pub(crate) fn prepare(
    pins: &RootPins,
    facts: &HostFacts,
    policy: &SandboxPolicy,
    backend: Option<Backend>,
    fd_closer: Option<&Path>,
    allow_sockets: &[PathBuf],
) -> Result<Prepared, SandboxUnavailable> {
    let mut fds = Fds {
        next: FIRST_PASSED_FD,
        list: Vec::new(),
    };
    let mut profile = LinuxProfile {
        allow_sockets: allow_sockets.to_vec(),
        ..Default::default()
    };
    let bwrap_like = backend != Some(Backend::Landlock);
    if bwrap_like {
        profile.proc_read_only = facts.proc_read_only.clone();
        profile.proc_masked = facts.proc_masked.clone();
    } else {
        profile.unsupervised = !facts.supervised;
    }
    if backend.is_some() {
        profile.status_fd = Some(STATUS_FD);
        profile.fd_closer = fd_closer.map(Path::to_path_buf);
    }
    let mut writable = vec![PathBuf::from("/dev/null")];
    let mut read_only = Vec::new();
    let mut after_run = None;
    let mut linked_gap = None;
    if policy.mode == ConfiningMode::WorkspaceWrite {
        // Verifies the temp roots too; read-only grants none of them.
        let ws = pins.workspace(policy.workspace_root()).map_err(refused)?;
        let mut roots: Vec<Arc<HeldDir>> = pins.temp_roots().to_vec();
        if !roots.iter().any(|r| r.path() == ws.path()) {
            roots.push(ws.clone());
        }
        // The deployment's extra roots, held like the workspace; one that
        // does not exist (yet) is not granted.
        for given in policy.extra_roots() {
            if let Some(extra) = pins.extra_root(given).map_err(refused)?
                && !roots.iter().any(|r| r.path() == extra.path())
            {
                roots.push(extra);
            }
        }
        // A linked worktree (or submodule checkout) commits into a git
        // directory outside the workspace: granted when its `.git` file
        // validates, with what git obeys there read-only (bound below with
        // the other protected paths). A refused one grants nothing and
        // says why, once on stderr and as a gap.
        // Only where what git obeys there can be kept read-only: Landlock
        // without the supervisor cannot carve hooks out of a root, so the
        // main repository stays outside every root (commits fail) and the
        // run says so.
        let mut linked_protected = Vec::new();
        let linked = if bwrap_like || facts.supervised {
            pins.linked_git(&ws)
        } else {
            match stockade_roots::worktree::find(&ws, &pins.writable_paths(Some(&ws))) {
                Ok(Some(found)) => Err(stockade_roots::worktree::LinkedError::Unsupervised {
                    dotgit: found.dotgit,
                    grant: found.grant,
                }),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        };
        match linked {
            Ok(Some(grant)) => {
                if !roots.iter().any(|r| r.path() == grant.held.path()) {
                    roots.push(grant.held);
                }
                linked_protected = grant.protected;
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("stockade: {e}");
                linked_gap = Some(Gap::new(stockade_roots::worktree::GAP, e.to_string()));
            }
        }
        // Least specific first, so a nested root is bound last and wins.
        roots.sort_by_key(|r| r.path().components().count());
        for root in &roots {
            let fd = fds.add(root.file());
            profile.roots.push(Grant {
                path: root.path().to_path_buf(),
                fd: Some(fd),
            });
            writable.push(root.path().to_path_buf());
        }
        // bwrap binds them read-only; under Landlock the supervisor keeps
        // them (without it the result names the protected-paths gap).
        if bwrap_like || facts.supervised {
            read_only = protect(
                pins,
                &ws,
                &policy.files.read_only,
                linked_protected,
                &mut fds,
                &mut profile,
            )?;
        }
        // After what stockade itself made above (missing git names), so
        // only what the run makes counts as new.
        after_run = audit::take(&roots, &policy.files.read_only, ws.path());
    }
    let mut gaps = deny_reads(pins, policy, bwrap_like, &writable, &mut fds, &mut profile)?;
    if after_run.is_some() {
        gaps.push(after_run_gap());
    }
    gaps.extend(linked_gap);
    Ok(Prepared {
        deny_read: profile.deny_read.iter().map(|m| m.path.clone()).collect(),
        profile,
        pass_fds: fds.list,
        writable,
        read_only,
        gaps,
        after_run,
    })
}

/// What the audit after a workspace-write run leaves open (for the run's
/// gaps and `probe`).
pub(crate) fn after_run_gap() -> Gap {
    Gap::new(gaps::AFTER_RUN, audit::GAP)
}

/// The post-run audit (`stockade_roots::audit`) as the provider's
/// [`AfterRun`] hook: a run's protect-list names and the workspace's
/// gitlinks, looked at before it and again once its tree has ended.
mod audit {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use stockade_core::AfterRunHandle;
    use stockade_roots::HeldDir;

    /// The window the audit leaves, for the run's gaps.
    pub(crate) const GAP: &str = "a protect-list name (.envrc, ~/.gitconfig, .vscode/, ...) or a nested repository staged as a gitlink that the run creates is set aside only after the command's whole tree has ended; while it still runs, the host (an editor's direnv, the user's git status) may run it first";

    #[cfg(unix)]
    pub(crate) fn take(
        roots: &[Arc<HeldDir>],
        named: &[PathBuf],
        workspace: &Path,
    ) -> Option<AfterRunHandle> {
        let snap = stockade_roots::audit::Snapshot::take(roots, named, workspace);
        Some(AfterRunHandle(Arc::new(Audit {
            snap: std::sync::Mutex::new(Some(snap)),
        })))
    }

    #[cfg(not(unix))]
    pub(crate) fn take(_: &[Arc<HeldDir>], _: &[PathBuf], _: &Path) -> Option<AfterRunHandle> {
        None
    }

    #[cfg(unix)]
    #[derive(Debug)]
    struct Audit {
        /// Taken by the one call the spawner makes.
        snap: std::sync::Mutex<Option<stockade_roots::audit::Snapshot>>,
    }

    #[cfg(unix)]
    impl stockade_core::AfterRun for Audit {
        fn after_run(&self) -> stockade_core::AfterRunReport {
            use stockade_core::{AfterRunReport, QuarantineReason, Quarantined};
            use stockade_roots::audit::ActionKind;
            let snap = self
                .snap
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            let Some(snap) = snap else {
                return AfterRunReport::default();
            };
            let (report, before) = snap.audit();
            AfterRunReport {
                quarantined: report
                    .actions
                    .into_iter()
                    .map(|a| Quarantined {
                        path: a.path,
                        moved_to: a.moved_to,
                        reason: match a.kind {
                            ActionKind::ProtectedName => QuarantineReason::ProtectedName,
                            ActionKind::NestedRepository => QuarantineReason::NestedRepository,
                            // A name git writes, which the run turned into
                            // a link: the closest of the result's reasons.
                            ActionKind::GitDirSymlink => QuarantineReason::ProtectedName,
                        },
                    })
                    .collect(),
                unchecked: before
                    .into_iter()
                    .chain(report.unchecked.iter().map(ToString::to_string))
                    .collect(),
            }
        }
    }
}

/// The deny-read paths that exist, held by identity, as masks, with every
/// other name of theirs found before the run (see `other_names`); and
/// what the backend cannot enforce of them.
fn deny_reads(
    pins: &RootPins,
    policy: &SandboxPolicy,
    bwrap_like: bool,
    writable: &[PathBuf],
    fds: &mut Fds,
    profile: &mut LinuxProfile,
) -> Result<Vec<Gap>, SandboxUnavailable> {
    let mut objects: Vec<(PathBuf, bool)> = Vec::new();
    for given in &policy.files.deny_read {
        if let Some(held) = pins.denied(given).map_err(refused)? {
            objects.push((held.path().to_path_buf(), held.is_dir()));
        }
    }
    let mut gaps = Vec::new();
    if !objects.is_empty() {
        let found = other_names(policy, &objects, writable, bwrap_like)?;
        objects.extend(found.names);
        gaps.push(Gap::new(gaps::DENY_READ_ALIASES, found.gap));
    }
    let mut empty: Option<Arc<std::fs::File>> = None;
    let mut in_roots = Vec::new();
    let mut any_dir = false;
    for (path, is_dir) in objects {
        let in_root = beneath(&path, writable).is_some();
        let empty_fd = if bwrap_like && !is_dir {
            let file = match &empty {
                Some(f) => f.clone(),
                None => {
                    let f = Arc::new(std::fs::File::open("/dev/null").map_err(refused)?);
                    empty = Some(f.clone());
                    f
                }
            };
            Some(fds.add(&file))
        } else {
            None
        };
        if in_root {
            in_roots.push(path.display().to_string());
        }
        any_dir |= is_dir;
        profile.deny_read.push(DenyMask {
            path,
            is_dir,
            empty_fd,
            in_root,
        });
    }
    // Supervised, landlock-run grants those roots without read_file and
    // its supervisor refuses reading (and listing) a denied object by
    // identity; without it nothing can take read back there.
    if !bwrap_like && profile.unsupervised && !in_roots.is_empty() {
        gaps.push(Gap::new(
            gaps::DENY_READ,
            stockade_core::texts::deny_read_unsupervised_gap(&in_roots),
        ));
    }
    if !bwrap_like && any_dir && (profile.unsupervised || in_roots.is_empty()) {
        gaps.push(Gap::new(
            gaps::DENY_READ_NAMES,
            "Landlock refuses reading the files of a denied directory but not listing their names",
        ));
    }
    Ok(gaps)
}

/// Names of the denied objects found before the run, and what stays
/// uncovered (the `deny-read-aliases` gap's detail).
struct OtherNames {
    names: Vec<(PathBuf, bool)>,
    gap: String,
}

/// Every other name of the denied `objects` a confined command could read
/// them by, to be denied too (a runner hides a path, not an object):
///
/// - hard links: the files with more than one name in the denied objects,
///   and their names in the workspace and the writable roots (where a
///   planted link would be). Walking every filesystem on every run is not
///   affordable, and a link elsewhere cannot be found, so a file whose link
///   count the names found do not make up refuses the run (naming it and
///   its count) rather than leave its secret readable. A name found inside
///   a writable root is covered by bwrap's mask; Landlock cannot take read
///   back there, so it refuses the run too.
/// - other mounts of a denied object's filesystem subtree, from the mount
///   table (the names beneath another denied directory are hidden with it).
///
/// What no look before the run sees is the gap's detail.
#[cfg(unix)]
fn other_names(
    policy: &SandboxPolicy,
    objects: &[(PathBuf, bool)],
    writable: &[PathBuf],
    bwrap_like: bool,
) -> Result<OtherNames, SandboxUnavailable> {
    use stockade_roots::aliases::{self, AliasError};
    let fail = |e: AliasError| SandboxUnavailable::single(DENY_READ_LABEL, e.to_string());
    let denied: Vec<PathBuf> = objects.iter().map(|(p, _)| p.clone()).collect();
    let roots: Vec<PathBuf> = writable
        .iter()
        .filter(|r| r.as_path() != Path::new("/dev/null"))
        .cloned()
        .collect();
    let mut scanned = roots.clone();
    let ws = policy.workspace_root();
    let ws = stockade_roots::canonical(ws).unwrap_or_else(|_| ws.to_path_buf());
    if !scanned.iter().any(|r| ws.starts_with(r)) {
        scanned.push(ws);
    }
    let links = aliases::hard_links(&denied, &roots, &scanned).map_err(fail)?;
    links.uncovered(&scanned).map_err(fail)?;
    let mut names: Vec<(PathBuf, bool)> = Vec::new();
    for link in links.other_names(&denied, &roots) {
        if !bwrap_like && let Some(root) = beneath(&link, &roots) {
            let of = links
                .linked
                .iter()
                .find(|l| l.names.contains(&link))
                .and_then(|l| l.names.first().cloned())
                .unwrap_or_default();
            // A file that is itself in a writable root is readable under
            // Landlock already (the deny-read gap names it, and the link
            // with it); refusing for its link would protect nothing.
            if beneath(&of, &roots).is_none() {
                return Err(fail(AliasError::LinkInWritableRoot {
                    path: of,
                    link,
                    root,
                }));
            }
        }
        names.push((link, false));
    }
    // Without a mount table (no /proc) the other mounts cannot be looked
    // for; the run says so rather than refuse every run on such a host.
    let (mounts, unread) = match aliases::read_mounts() {
        Ok(m) => (m, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let mut all: Vec<(PathBuf, bool)> = objects.to_vec();
    all.extend(names.iter().cloned());
    for (path, _) in &all {
        for alias in aliases::mount_aliases(&mounts, path) {
            // Not followed: a name that is now a symlink or gone leads
            // nowhere the mount table said.
            let Ok(m) = std::fs::symlink_metadata(&alias) else {
                continue;
            };
            if m.file_type().is_symlink() {
                continue;
            }
            // As for a link: Landlock cannot hide a name inside a writable
            // root, so a mount there showing a secret kept outside one
            // refuses the run rather than leave it readable.
            if !bwrap_like
                && beneath(path, &roots).is_none()
                && let Some(root) = beneath(&alias, &roots)
            {
                return Err(fail(AliasError::MountInWritableRoot {
                    path: path.clone(),
                    alias,
                    root,
                }));
            }
            names.push((alias, m.is_dir()));
        }
    }
    // A name already hidden by a denied directory above it (and not in a
    // root carved out of it) needs no mask of its own; bwrap could not
    // mount one inside another's empty stand-in anyway.
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    for (path, is_dir) in names {
        let hidden = objects.iter().chain(out.iter()).any(|(d, d_is_dir)| {
            *d_is_dir
                && path.starts_with(d)
                && beneath(&path, &roots).is_none_or(|r| !r.starts_with(d))
        });
        if !hidden && !objects.iter().any(|(d, _)| *d == path) {
            out.push((path, is_dir));
        }
    }
    let mut gap = "names made after the run starts are not covered: a mount of a denied path's filesystem, or a hard link to a denied file, made outside the sandbox while it runs".to_owned();
    if !links.unwalked.is_empty() {
        let list: Vec<String> = links
            .unwalked
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        gap.push_str(&format!(
            "; {} hold more than {} entries, so hard links to their files were not looked for",
            list.join(", "),
            aliases::WALK_LIMIT
        ));
    }
    if let Some(e) = unread {
        gap.push_str(&format!("; other mounts were not looked for: {e}"));
    }
    Ok(OtherNames { names: out, gap })
}

/// Off Unix there are no hard links or mount tables to look in.
#[cfg(not(unix))]
fn other_names(
    _: &SandboxPolicy,
    _: &[(PathBuf, bool)],
    _: &[PathBuf],
    _: bool,
) -> Result<OtherNames, SandboxUnavailable> {
    Ok(OtherNames {
        names: Vec::new(),
        gap: "other names of a denied object (mounts, hard links) are not looked for on this platform".to_owned(),
    })
}

/// The git paths and the deployment's read-only paths inside the writable
/// roots; returns the latter, for result facts.
#[cfg(unix)]
fn protect(
    pins: &RootPins,
    ws: &HeldDir,
    named: &[PathBuf],
    linked: Vec<stockade_roots::Protected>,
    fds: &mut Fds,
    profile: &mut LinuxProfile,
) -> Result<Vec<PathBuf>, SandboxUnavailable> {
    let writable = pins.writable_paths(Some(ws));
    let mut protected = stockade_roots::git_protected(ws, &writable).map_err(refused)?;
    // The linked git directory's own list, found from the validated grant
    // (git_protected reads the `.git` file again, which a run may change);
    // an object both name is bound once.
    for p in linked {
        if !protected
            .iter()
            .any(|q| q.dev == p.dev && q.ino == p.ino && q.path == p.path)
        {
            protected.push(p);
        }
    }
    let named = stockade_roots::named_protected(named, &writable).map_err(refused)?;
    let named_paths = named.iter().map(|p| p.path.clone()).collect();
    protected.extend(named);
    // A directory holding a bind could be renamed away with it (bwrap).
    stockade_roots::pin_ancestors(&mut protected, &writable).map_err(refused)?;
    // The pinned `.git` directory first, then what is read-only inside it.
    protected.sort_by_key(|p| (p.read_only, p.path.components().count()));
    for p in protected {
        let fd = fds.add(&p.file);
        profile.protected.push(ProtectedBind {
            path: p.path,
            fd,
            read_only: p.read_only,
        });
    }
    Ok(named_paths)
}

#[cfg(not(unix))]
fn protect(
    _: &RootPins,
    _: &HeldDir,
    _: &[PathBuf],
    _: Vec<stockade_roots::Protected>,
    _: &mut Fds,
    _: &mut LinuxProfile,
) -> Result<Vec<PathBuf>, SandboxUnavailable> {
    Ok(Vec::new())
}

/// The writable roots a runner must not lie beneath: those of a
/// workspace-write run in this workspace, whatever this call's mode (a
/// session can widen to it, and a run then could replace the runner that a
/// later read-only run trusts).
pub(crate) fn runner_guards(pins: &RootPins, workspace: &Path) -> Vec<PathBuf> {
    let mut out = pins.all_writable_paths();
    let ws = stockade_roots::canonical(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    if ws.parent().is_some() && !out.contains(&ws) {
        out.push(ws);
    }
    out
}

/// A file's identity and content stamp: replacing or rewriting it changes it.
pub(crate) fn stamp(path: &Path) -> Option<String> {
    std::fs::metadata(path).ok().map(|m| stamp_of(&m))
}

/// The stamp of metadata already read (following symlinks, as a spawn by
/// path does).
pub(crate) fn stamp_of(m: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        format!(
            "{}:{}:{}:{}.{}:{:o}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.mode()
        )
    }
    #[cfg(not(unix))]
    {
        format!("{}:{:?}", m.len(), m.modified().ok())
    }
}

/// Refuse a runner that lies beneath a writable root (a confined run could
/// overwrite it and the next run, even read-only, would be unconfined), or
/// that changed since it was selected.
pub(crate) fn check_runners(sel: &Selected, guards: &[PathBuf]) -> Result<(), SandboxUnavailable> {
    for (path, was) in &sel.stamps {
        let backend = sel.backend.as_str();
        if let Some(root) = beneath(path, guards) {
            return Err(SandboxUnavailable::single(
                backend,
                format!(
                    "runner {} lies beneath the writable root {}, where a confined command could replace it",
                    path.display(),
                    root.display()
                ),
            ));
        }
        if stamp(path) != *was {
            return Err(SandboxUnavailable::single(
                backend,
                format!(
                    "runner {} changed since it was selected; refusing to run it",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// What `backend` does not govern on this host in `mode`, by name.
pub(crate) fn gaps_for(
    backend: Backend,
    mode: ConfiningMode,
    abi: Option<u8>,
    supervised: bool,
    allow_sockets: &[PathBuf],
) -> Vec<Gap> {
    let abi_n = abi.unwrap_or(0);
    let mut out = Vec::new();
    if backend == Backend::Landlock {
        out.extend(crate::landlock::gaps(mode, abi_n, supervised));
    }
    // Sockets: the closer (bwrap) and the launcher (Landlock) both scope
    // them; only an allowlist on a kernel without Landlock's pathname-socket
    // right leaves them open (seccomp cannot allow some paths only).
    if !allow_sockets.is_empty() && abi_n < 9 {
        out.push(Gap::new(
            gaps::UNIX_SOCKETS,
            format!(
                "allow_sockets is set and this kernel (Landlock ABI {abi_n} < 9) cannot allow only those paths: every pathname Unix socket{} is reachable",
                if abi_n < 6 { " and abstract socket" } else { "" }
            ),
        ));
    }
    out
}

/// What `probe` says a backend cannot govern of the network: what an
/// `allow-listed` run would carry (runs name their own, per mode).
pub(crate) fn network_gaps_for(backend: Backend, abi: Option<u8>) -> Vec<Gap> {
    match backend {
        Backend::Bwrap => Vec::new(),
        Backend::Landlock => crate::landlock::network_gaps(abi.unwrap_or(0)),
    }
}

/// The status channel every Linux backend reports on.
pub(crate) fn status_channel() -> StatusChannel {
    StatusChannel {
        child_fd: STATUS_FD,
    }
}

/// One protection a backend gives on this host, for `probe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Protection {
    pub name: &'static str,
    pub state: String,
}

pub(crate) fn p(name: &'static str, state: impl Into<String>) -> Protection {
    Protection {
        name,
        state: state.into(),
    }
}

pub(crate) fn list(paths: impl Iterator<Item = PathBuf>) -> String {
    let v: Vec<String> = paths.map(|p| p.display().to_string()).collect();
    if v.is_empty() {
        "none present".into()
    } else {
        v.join(", ")
    }
}

/// What `backend` enforces here beyond the file-write modes.
pub(crate) fn protections_for(
    backend: Backend,
    facts: &HostFacts,
    allow_sockets: &[PathBuf],
) -> Vec<Protection> {
    let abi = facts.landlock_abi.unwrap_or(0);
    let mut out = vec![p(
        "writable-roots",
        "resolved once, held open and granted by descriptor; a moved root fails closed",
    )];
    out.extend(match backend {
        Backend::Bwrap => crate::bwrap::protections(facts),
        Backend::Landlock => crate::landlock::protections(facts, abi),
    });
    let allowed = if allow_sockets.is_empty() {
        String::new()
    } else {
        format!("; allowed: {}", list(allow_sockets.iter().cloned()))
    };
    let sockets = if abi >= 9 {
        format!("Landlock: only allow_sockets paths can be connected{allowed}")
    } else if allow_sockets.is_empty() {
        "seccomp refuses socket(AF_UNIX) and datagram socketpairs (stream socketpairs still work): no Unix socket outside can be reached; open named ones with allow_sockets / --allow-socket".to_owned()
    } else {
        format!(
            "open: allow_sockets is set and this kernel (Landlock ABI {abi} < 9) cannot allow only those{allowed}"
        )
    };
    out.push(p("unix-sockets", sockets));
    let abstract_ = if abi >= 6 {
        "Landlock scope: abstract sockets created outside cannot be reached"
    } else if allow_sockets.is_empty() {
        "seccomp refuses socket(AF_UNIX)"
    } else {
        "open"
    };
    out.push(p("abstract-sockets", abstract_));
    out
}

#[cfg(test)]
mod linked_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

    use std::path::Path;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A linked worktree's common directory is a root only where its hooks
    /// and config can be kept read-only: bwrap, and Landlock with the
    /// supervisor; unsupervised Landlock grants nothing and says why.
    #[test]
    fn the_common_dir_is_granted_only_where_hooks_stay_read_only() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let main = root.join("main");
        std::fs::create_dir(&main).unwrap();
        git(&main, &["init", "-q"]);
        git(&main, &["commit", "-q", "--allow-empty", "-m", "x"]);
        let wt = root.join("wt");
        git(&main, &["worktree", "add", "-q", wt.to_str().unwrap()]);
        let common = main.join(".git");
        let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &wt);
        for (backend, supervised) in [
            (Backend::Bwrap, false),
            (Backend::Landlock, true),
            (Backend::Landlock, false),
        ] {
            let pins = RootPins::without_temp_roots();
            let facts = HostFacts {
                supervised,
                landlock_abi: Some(6),
                ..Default::default()
            };
            let p = prepare(&pins, &facts, &policy, Some(backend), None, &[]).unwrap();
            let granted = p.writable.contains(&common);
            let gap = p
                .gaps
                .iter()
                .find(|g| g.name == stockade_roots::worktree::GAP);
            let hooks_ro = p
                .profile
                .protected
                .iter()
                .any(|b| b.read_only && b.path == common.join("hooks"));
            if backend == Backend::Bwrap || supervised {
                assert!(granted, "{backend:?}: {:?}", p.writable);
                assert!(gap.is_none(), "{gap:?}");
                assert!(hooks_ro, "{backend:?}: {:?}", p.profile.protected);
            } else {
                assert!(!granted, "unsupervised Landlock granted {:?}", p.writable);
                let gap = gap.expect("the refusal is a gap");
                assert!(gap.detail.contains("supervisor"), "{}", gap.detail);
            }
        }
    }
}
