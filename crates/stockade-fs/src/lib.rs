//! The file-system seam of the in-process file tools (read, write, edit).
//!
//! Those tools run inside the agent's process, where an argv wrapper means
//! nothing, so they obey the call's [`ExecutionPolicy`] here instead:
//!
//! - [`LocalFs`] is unfenced ([`FileSystem::fences`] is `false`); its writes
//!   are still atomic.
//! - [`SandboxedFs`] fences `write` and `edit` by the call's policy, with the
//!   same writable set as the bash sandbox: nothing under `read-only`; under
//!   `workspace-write` the workspace root, `/tmp`, `$TMPDIR` and the
//!   deployment's extra writable roots ([`FilePolicy::writable_roots`])
//!   except the paths git runs or obeys outside the sandbox (`.git/hooks`,
//!   `.git/config`, ...) and the deployment's read-only paths
//!   ([`FilePolicy::read_only`]); everything under `danger-full-access`. A
//!   refusal is [`FsError::Denied`], whose text starts with the bash denial
//!   marker.
//!
//! Reads and listings are fenced by the deny-read list alone
//! ([`FilePolicy::deny_read`], through [`FileSystem::read_under`] and
//! [`FileSystem::list_under`]), in both confining modes, as bash's are: a
//! read, a listing, a write or an edit of a denied path, or of anything
//! beneath a denied directory, is [`FsError::DenyRead`], with the same
//! marker. Listing a directory that merely *contains* a denied entry works.
//! A denied path that does not exist is not enforced (there is nothing to
//! read); once it exists, the next call holds and enforces it.
//!
//! [`FilePolicy::writable_roots`]: stockade_core::FilePolicy::writable_roots
//! [`FilePolicy::read_only`]: stockade_core::FilePolicy::read_only
//! [`FilePolicy::deny_read`]: stockade_core::FilePolicy::deny_read
//!
//! # How a fenced write is resolved
//!
//! The writable roots are held ([`RootPins`]): each is opened once, the
//! first time it is used (the temp roots when the pins are built), and
//! every later call first checks that its path still names the held
//! directory, failing closed ([`FsError::Root`]) otherwise. A confined
//! command that renames the workspace away and puts a symlink to `/` at its
//! path therefore stops the file tools instead of aiming them.
//!
//! The path is made absolute (a relative one against the workspace root) and
//! `.`/`..` are applied lexically. A path that then lies under no writable
//! root (by the root's spelling as given or as resolved when held) is
//! refused without opening anything beneath the roots. Otherwise resolution
//! starts from that root's held directory handle, never its path, and every
//! remaining component is resolved by the kernel beneath it (cap-std:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` on Linux, a
//! per-component `O_NOFOLLOW` walk on macOS, the equivalent on Windows), so
//! a symlink leading out, an absolute symlink or a `/proc` magic link fails
//! the resolution whenever it appears.
//! The temp file is created (create-new) in the resulting parent handle and
//! renamed over the final name within that handle. A final-component symlink
//! is followed by starting over from its target, fenced the same way.
//!
//! Missing parent directories are created by `write` (beneath the root when
//! fenced, with the same resolution), never by `edit`.
//!
//! Under workspace-write the workspace repository's protected paths (found
//! per call by [`stockade_roots::git_protected`], Unix only), the
//! deployment's read-only paths and the deny-read paths are refused by
//! identity: the directory the file lands in and every directory above it
//! are compared (device, inode) with the protected directories, and the file
//! replaced with the protected files, so no alias of `.git/hooks` gets past.
//!
//! # How a fenced read is judged
//!
//! The deny-read paths are held by identity ([`RootPins::denied`]) when
//! first seen. A read resolves its path to a directory handle and one name
//! (a final symlink followed by hand, as for a write), opens that name in
//! the handle without following a symlink swapped onto it, and refuses when
//! the opened file is a denied file, or the handle or any directory above it
//! (walked up by `..`) is a denied directory. A listing opens the directory
//! and judges the handle the same way. Nothing compares path text, so a
//! symlink, a hard link to a denied file or a `..` alias meets the same
//! refusal. Off Unix there is no identity to compare: the path is resolved
//! and compared with where each denied path resolved, so a hard link is not
//! caught there.
//!
//! Not defended: a process that can already write outside the root moving a
//! directory out of it while a write holds that directory's handle. Inside
//! the sandbox nothing can (bash under `workspace-write` cannot write there).
#![forbid(unsafe_code)]

mod atomic;
mod error;
mod lexical;
mod locate;
mod protect;

use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use stockade_core::{ExecutionPolicy, SandboxMode};
use stockade_roots::{HeldDenied, HeldDir};

pub use atomic::TEMP_PREFIX;
pub use error::{Access, FsError, ProtectedBy, SymlinkHop};
pub use stockade_roots::{RootError, RootPins};

use crate::lexical::{absolutize, normalize, root_form};
use crate::locate::{Beneath, Fence, Root, Target, locate, refusal};
use crate::protect::{Hit, Protection};

/// What the in-process file tools do to files.
pub trait FileSystem: Send + Sync {
    /// Whether writes are fenced by the call's policy. The tools advertise
    /// the escalation fields only then.
    fn fences(&self) -> bool;

    /// The contents of the regular file at `path`, with no policy at all
    /// (use [`FileSystem::read_under`] for a call that has one). A relative
    /// `path` is relative to the process's working directory: callers with a
    /// workspace join it first.
    fn read(&self, path: &Path) -> Result<Vec<u8>, FsError> {
        read_file(path)
    }

    /// The entries of the directory `dir`, sorted by name; symlinks are
    /// reported as symlinks, not followed. With no policy at all (see
    /// [`FileSystem::list_under`]).
    fn list(&self, dir: &Path) -> Result<Vec<DirEntryInfo>, FsError> {
        list_dir(dir)
    }

    /// [`FileSystem::read`] under `policy`: a fencing provider refuses a
    /// path on (or beneath) the deny-read list in a confining mode
    /// ([`FsError::DenyRead`]). A relative `path` resolves against
    /// `policy.workspace_root`. Unfenced by default.
    fn read_under(&self, path: &Path, policy: &ExecutionPolicy) -> Result<Vec<u8>, FsError> {
        self.read(&requested_path(path, policy)?)
    }

    /// [`FileSystem::list`] under `policy`, fenced like
    /// [`FileSystem::read_under`]: a denied directory (or one beneath it)
    /// is refused, a directory that merely contains a denied entry is
    /// listed. Unfenced by default.
    fn list_under(
        &self,
        dir: &Path,
        policy: &ExecutionPolicy,
    ) -> Result<Vec<DirEntryInfo>, FsError> {
        self.list(&requested_path(dir, policy)?)
    }

    /// Create or replace `path` with `contents`, atomically (a temp file in
    /// the same directory, synced, then renamed over it), under `policy`. A
    /// relative `path` resolves against `policy.workspace_root`; missing
    /// parent directories are created; a final symlink is written through.
    fn write(
        &self,
        path: &Path,
        contents: &[u8],
        policy: &ExecutionPolicy,
    ) -> Result<WriteOutcome, FsError>;

    /// Replace the exact text `old` with `new` in the UTF-8 file at `path`,
    /// written back atomically under `policy`. `old` must occur exactly once
    /// ([`FsError::OldTextNotFound`], [`FsError::NotUnique`] otherwise)
    /// unless `replace_all`, which replaces every occurrence (at least one).
    fn edit(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        replace_all: bool,
        policy: &ExecutionPolicy,
    ) -> Result<EditOutcome, FsError>;
}

/// One entry of [`FileSystem::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    /// The entry's name, exactly as the OS has it (not necessarily UTF-8).
    pub name: OsString,
    pub kind: EntryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A device, FIFO, socket, ...
    Other,
}

/// A successful [`FileSystem::write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The file written: absolute, and past a final symlink when there was
    /// one.
    pub path: PathBuf,
    /// Whether the file did not exist before.
    pub created: bool,
    pub bytes: usize,
}

/// A successful [`FileSystem::edit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOutcome {
    /// The file edited (as for [`WriteOutcome::path`]).
    pub path: PathBuf,
    /// How many occurrences were replaced (1 unless `replace_all`).
    pub replacements: usize,
}

/// The unfenced provider: writes go wherever the process may write. Still
/// atomic.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFs;

impl FileSystem for LocalFs {
    fn fences(&self) -> bool {
        false
    }

    fn write(
        &self,
        path: &Path,
        contents: &[u8],
        policy: &ExecutionPolicy,
    ) -> Result<WriteOutcome, FsError> {
        let requested = requested_path(path, policy)?;
        write_to(locate(&Fence::Unfenced, &requested, true)?, contents)
    }

    fn edit(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        replace_all: bool,
        policy: &ExecutionPolicy,
    ) -> Result<EditOutcome, FsError> {
        let requested = requested_path(path, policy)?;
        edit_at(
            locate(&Fence::Unfenced, &requested, false)?,
            old,
            new,
            replace_all,
        )
    }
}

/// The fenced provider: `write` and `edit` obey the call's mode and file
/// policy, `read_under` and `list_under` its deny-read list (see the crate
/// docs for how).
#[derive(Debug, Clone)]
pub struct SandboxedFs {
    /// The writable roots, held. Shared with the session's runner, so the
    /// file tools and bash grant the same directories and a root moved by
    /// one confined run fails both.
    pins: Arc<RootPins>,
}

impl Default for SandboxedFs {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxedFs {
    /// The host's temp roots as the bash sandbox grants them (`/tmp` and a
    /// usable `$TMPDIR`), held now, in pins of its own.
    pub fn new() -> Self {
        Self::with_pins(Arc::new(RootPins::from_env()))
    }

    /// The writable roots held in `pins` (the session's, shared with its
    /// runner); each workspace is held there on its first use.
    pub fn with_pins(pins: Arc<RootPins>) -> Self {
        Self { pins }
    }

    /// Exactly these temp roots, held now (tests use private ones so the
    /// host's `/tmp` is not part of the fence). At most two: the first is
    /// held as `/tmp`, the second as `$TMPDIR`, and any further one is not
    /// granted. One that is missing, not a directory or the filesystem root
    /// is not granted either: it would make workspace-write mean
    /// everything, or nothing stable.
    pub fn with_temp_roots(roots: Vec<PathBuf>) -> Self {
        let mut roots = roots.into_iter();
        let tmp = roots.next();
        let tmpdir = roots.next();
        let pins = match (tmp, tmpdir) {
            (None, _) => RootPins::without_temp_roots(),
            (Some(tmp), tmpdir) => RootPins::new(Some(&tmp), tmpdir.map(PathBuf::into_os_string)),
        };
        Self::with_pins(Arc::new(pins))
    }

    /// The pins this provider fences by.
    pub fn pins(&self) -> &Arc<RootPins> {
        &self.pins
    }

    /// The temp roots writable under workspace-write, each as given and,
    /// when it differs, as resolved when held.
    pub fn temp_roots(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for held in self.pins.temp_roots() {
            for s in spellings(held) {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// What `policy` lets the file tools write: `None` when unfenced
    /// (danger-full-access), empty under read-only (only `/dev/null` is
    /// writable, and the tools write no device), else the workspace root (as
    /// given, normalized) followed by the temp roots and the policy's extra
    /// writable roots that exist (each as given and, when it differs, as
    /// resolved when held). Protected paths inside them are refused all the
    /// same.
    pub fn writable_roots(&self, policy: &ExecutionPolicy) -> Option<Vec<PathBuf>> {
        match policy.mode {
            SandboxMode::ReadOnly => Some(Vec::new()),
            SandboxMode::WorkspaceWrite => {
                // For the list only: one that cannot be held fails the call
                // that would use it, with its own error.
                let extras: Vec<Arc<HeldDir>> = policy
                    .files
                    .writable_roots
                    .iter()
                    .filter_map(|p| self.pins.extra_root(p).ok().flatten())
                    .collect();
                Some(self.writable_list(policy, &extras))
            }
            SandboxMode::DangerFullAccess => None,
        }
    }

    /// The workspace-write list of [`SandboxedFs::writable_roots`], with
    /// `extras` already held.
    fn writable_list(&self, policy: &ExecutionPolicy, extras: &[Arc<HeldDir>]) -> Vec<PathBuf> {
        let workspace =
            root_form(&policy.workspace_root).unwrap_or_else(|_| policy.workspace_root.clone());
        let mut roots = vec![workspace];
        let extra = extras.iter().flat_map(|h| spellings(h));
        for t in self.temp_roots().into_iter().chain(extra) {
            if !roots.contains(&t) {
                roots.push(t);
            }
        }
        roots
    }

    /// The policy's extra writable roots that exist, held (on first use) or
    /// verified. Only workspace-write grants them.
    fn extra_roots(&self, policy: &ExecutionPolicy) -> Result<Vec<Arc<HeldDir>>, RootError> {
        let mut out = Vec::new();
        for given in &policy.files.writable_roots {
            if let Some(held) = self.pins.extra_root(given)? {
                out.push(held);
            }
        }
        Ok(out)
    }

    /// The policy's deny-read paths that exist, held by identity (on first
    /// sight) or re-checked.
    fn held_denied(&self, policy: &ExecutionPolicy) -> Result<Vec<Arc<HeldDenied>>, RootError> {
        let mut out = Vec::new();
        for given in &policy.files.deny_read {
            if let Some(held) = self.pins.denied(given)? {
                out.push(held);
            }
        }
        Ok(out)
    }

    /// What a read or listing of `requested` under `policy` must not reach:
    /// `None` when nothing is denied (danger-full-access, or no denied path
    /// exists). `op` names the call in a fail-closed error.
    fn deny_read(
        &self,
        requested: &Path,
        policy: &ExecutionPolicy,
        op: &'static str,
    ) -> Result<Option<Protection>, FsError> {
        if policy.mode == SandboxMode::DangerFullAccess || policy.files.deny_read.is_empty() {
            return Ok(None);
        }
        let held = self.held_denied(policy).map_err(|source| FsError::Root {
            op,
            path: requested.to_path_buf(),
            source,
        })?;
        if held.is_empty() {
            return Ok(None);
        }
        let mut deny = Protection::default();
        let unjudged = |source| FsError::Io {
            op: "identify the deny-read paths for",
            path: requested.to_path_buf(),
            source,
        };
        deny.add_denied(&held).map_err(unjudged)?;
        #[cfg(unix)]
        deny.add_mounts(&held).map_err(unjudged)?;
        Ok(Some(deny))
    }

    /// The deny-read path a write of `requested` would reach, judged
    /// without changing anything. `None` too when it cannot be judged: the
    /// callers refuse the write anyway, or judge it again by identity on
    /// the way.
    fn deny_write_hit(&self, requested: &Path, policy: &ExecutionPolicy) -> Option<Hit> {
        let deny = self.deny_read(requested, policy, "write").ok()??;
        #[cfg(unix)]
        {
            let target = locate(&Fence::Unfenced, requested, false).ok()?;
            deny.target_hit(&target.parent, &target.name, target.existing.as_ref())
                .ok()?
        }
        #[cfg(not(unix))]
        {
            deny.path_hit(requested)
        }
    }

    /// Where a write or edit of `path` under `policy` goes, or its refusal.
    fn locate(
        &self,
        path: &Path,
        policy: &ExecutionPolicy,
        create_parents: bool,
    ) -> Result<Target, FsError> {
        let located = match policy.mode {
            SandboxMode::DangerFullAccess => {
                return locate(
                    &Fence::Unfenced,
                    &requested_path(path, policy)?,
                    create_parents,
                );
            }
            SandboxMode::ReadOnly => Err(FsError::Denied {
                // Refused whatever the path; if even the workspace root is
                // unusable, name the path as given.
                path: requested_path(path, policy).unwrap_or_else(|_| path.to_path_buf()),
                mode: policy.mode,
                writable: Vec::new(),
                symlink: None,
                protected: None,
                protected_by: None,
            }),
            SandboxMode::WorkspaceWrite => {
                // Off Unix the fence has no identities to refuse deny-read
                // paths by on the way: judged here, by where the path
                // resolves.
                #[cfg(not(unix))]
                if let Ok(requested) = requested_path(path, policy)
                    && let Some(hit) = self.deny_write_hit(&requested, policy)
                {
                    return Err(refusal(&requested, policy.mode, Access::Write, hit));
                }
                self.locate_beneath(path, policy, create_parents)
            }
        };
        located.map_err(|e| self.naming_the_secret(e, policy))
    }

    /// A write refused as outside what is writable that would also reach a
    /// deny-read path is refused as that instead: it tells the model that
    /// no confining mode would let it through. Judged only once refused, so
    /// an allowed write pays nothing for it.
    fn naming_the_secret(&self, e: FsError, policy: &ExecutionPolicy) -> FsError {
        if let FsError::Denied {
            path,
            mode,
            protected: None,
            ..
        } = &e
            && let Some(hit) = self.deny_write_hit(path, policy)
        {
            return refusal(path, *mode, Access::Write, hit);
        }
        e
    }

    /// A workspace-write call: beneath the held roots, never into a
    /// protected path.
    fn locate_beneath(
        &self,
        path: &Path,
        policy: &ExecutionPolicy,
        create_parents: bool,
    ) -> Result<Target, FsError> {
        let requested = requested_path(path, policy)?;
        let closed = |source: RootError| FsError::Root {
            op: "write",
            path: requested.clone(),
            source,
        };
        let given = std::path::absolute(&policy.workspace_root).map_err(|source| FsError::Io {
            op: "resolve against the workspace root",
            path: path.to_path_buf(),
            source,
        })?;
        // Held on first use, verified (with the temp roots) on every later
        // one: a workspace or temp root moved since fails the call here,
        // before anything is opened.
        let workspace = self.pins.workspace(&given).map_err(closed)?;
        // Held before the protected paths are found, so a read-only path
        // inside an extra root is among them.
        let extras = self.extra_roots(policy).map_err(closed)?;
        let protection = self
            .protection(&workspace, &extras, policy)
            .map_err(|e| match e {
                Protect::Root(source) => closed(source),
                Protect::Io(source) => FsError::Io {
                    op: "identify the protected paths for",
                    path: requested.clone(),
                    source,
                },
            })?;
        let mut roots = vec![Root {
            spellings: spellings(&workspace),
            held: workspace,
        }];
        for held in self.pins.temp_roots().iter().chain(&extras) {
            roots.push(Root {
                spellings: spellings(held),
                held: held.clone(),
            });
        }
        let writable = self.writable_list(policy, &extras);
        locate(
            &Fence::Beneath(Beneath {
                mode: policy.mode,
                roots: &roots,
                writable: &writable,
                protection: &protection,
            }),
            &requested,
            create_parents,
        )
    }

    /// The deny-read paths, the workspace repository's protected paths,
    /// found afresh (a run may have made the workspace a repository since
    /// the last call; the lookup re-verifies the workspace once the list is
    /// built), and the policy's read-only paths inside the writable roots.
    #[cfg(unix)]
    fn protection(
        &self,
        workspace: &HeldDir,
        extras: &[Arc<HeldDir>],
        policy: &ExecutionPolicy,
    ) -> Result<Protection, Protect> {
        use crate::protect::Why;
        let writable = self.pins.writable_paths(Some(workspace));
        let git = stockade_roots::git_protected(workspace, &writable).map_err(Protect::Root)?;
        let named = stockade_roots::named_protected(&policy.files.read_only, &writable)
            .map_err(Protect::Root)?;
        let denied = self.held_denied(policy).map_err(Protect::Root)?;
        let mut out = Protection::default();
        // Deny-read first: a path on both lists is refused as the secret,
        // the stronger statement (no mode short of danger-full-access
        // reaches it).
        out.add_denied(&denied).map_err(Protect::Io)?;
        out.add(&git, Why::Git).map_err(Protect::Io)?;
        out.add(&named, Why::ReadOnly).map_err(Protect::Io)?;
        // A protect-list name that does not exist has no identity to be
        // refused by: its creation is refused by name (a command run in
        // the sandbox is audited after it instead; see the README).
        let mut roots: Vec<&HeldDir> = vec![workspace];
        roots.extend(self.pins.temp_roots().iter().map(|r| &**r));
        roots.extend(extras.iter().map(|r| &**r));
        out.add_absent(&stockade_roots::audit::absent_names(
            &roots,
            &policy.files.read_only,
        ));
        Ok(out)
    }

    /// Off Unix nothing is protected beyond the roots; the deny-read paths
    /// are judged before resolution (see `locate`).
    #[cfg(not(unix))]
    fn protection(
        &self,
        _: &HeldDir,
        _: &[Arc<HeldDir>],
        _: &ExecutionPolicy,
    ) -> Result<Protection, Protect> {
        Ok(Protection::default())
    }
}

/// Why the protected paths could not be found (off Unix nothing is looked
/// for, so nothing fails).
#[cfg_attr(not(unix), allow(dead_code))]
enum Protect {
    Root(RootError),
    Io(std::io::Error),
}

/// The spellings of a held root: as given (normalized), then as resolved
/// when held, when that differs.
fn spellings(held: &HeldDir) -> Vec<PathBuf> {
    let given = normalize(held.given());
    let resolved = normalize(held.path());
    if given == resolved {
        vec![given]
    } else {
        vec![given, resolved]
    }
}

impl FileSystem for SandboxedFs {
    fn fences(&self) -> bool {
        true
    }

    fn write(
        &self,
        path: &Path,
        contents: &[u8],
        policy: &ExecutionPolicy,
    ) -> Result<WriteOutcome, FsError> {
        write_to(self.locate(path, policy, true)?, contents)
    }

    fn edit(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        replace_all: bool,
        policy: &ExecutionPolicy,
    ) -> Result<EditOutcome, FsError> {
        // Located (and so fenced) before anything is read: a refused edit is
        // refused whether or not the file exists or the text matches.
        edit_at(self.locate(path, policy, false)?, old, new, replace_all)
    }

    fn read_under(&self, path: &Path, policy: &ExecutionPolicy) -> Result<Vec<u8>, FsError> {
        let requested = requested_path(path, policy)?;
        match self.deny_read(&requested, policy, "read")? {
            None => read_file(&requested),
            Some(deny) => read_fenced(&requested, policy.mode, &deny),
        }
    }

    fn list_under(
        &self,
        dir: &Path,
        policy: &ExecutionPolicy,
    ) -> Result<Vec<DirEntryInfo>, FsError> {
        let requested = requested_path(dir, policy)?;
        match self.deny_read(&requested, policy, "list")? {
            None => list_dir(&requested),
            Some(deny) => list_fenced(&requested, policy.mode, &deny),
        }
    }
}

/// Read `requested` unless it is, or lies beneath, a path `deny` holds.
#[cfg(unix)]
fn read_fenced(requested: &Path, mode: SandboxMode, deny: &Protection) -> Result<Vec<u8>, FsError> {
    use std::os::unix::fs::MetadataExt as _;
    let refused = |hit| refusal(requested, mode, Access::Read, hit);
    let unjudged = |source| FsError::Io {
        op: "check the deny-read paths for",
        path: requested.to_path_buf(),
        source,
    };
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound {
            path: requested.to_path_buf(),
        },
        _ => FsError::Io {
            op: "read",
            path: requested.to_path_buf(),
            source,
        },
    };
    // A directory handle and one name, a final symlink followed to where it
    // leads, as for a write; creating nothing.
    let target = locate(&Fence::Unfenced, requested, false)?;
    if target.existing.is_none() {
        // Whether a name exists beneath a denied directory is its secret
        // too.
        if let Some(hit) = deny.dir_hit(&target.parent).map_err(unjudged)? {
            return Err(refused(hit));
        }
        return Err(FsError::NotFound {
            path: requested.to_path_buf(),
        });
    }
    let mut file = open_entry(&target.parent, &target.name).map_err(io)?;
    // Judged after the open, on what was opened: the file by its identity
    // (a hard link to a denied file is that file), the directory it was
    // opened in by walking up from the handle.
    let m = file.metadata().map_err(io)?;
    if let Some(hit) = deny.file_hit(m.dev(), m.ino()) {
        return Err(refused(hit));
    }
    if let Some(hit) = deny.dir_hit(&target.parent).map_err(unjudged)? {
        return Err(refused(hit));
    }
    if !m.is_dir()
        && m.nlink() > 1
        && let Some(hit) = deny.linked_hit(m.dev(), m.ino()).map_err(unjudged)?
    {
        return Err(refused(hit));
    }
    if !m.is_file() {
        return Err(FsError::NotAFile {
            path: requested.to_path_buf(),
        });
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// `name` in `parent`, opened for reading. Never through a symlink: one
/// swapped onto the name since it was inspected could lead into a denied
/// directory beneath `parent`, which the walk up from `parent` would not
/// see. Non-blocking, so a FIFO swapped in does not hang the open.
#[cfg(unix)]
fn open_entry(parent: &Dir, name: &std::ffi::OsStr) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags, openat};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    Ok(std::fs::File::from(openat(
        parent,
        name,
        flags,
        Mode::empty(),
    )?))
}

#[cfg(not(unix))]
fn read_fenced(requested: &Path, mode: SandboxMode, deny: &Protection) -> Result<Vec<u8>, FsError> {
    if let Some(hit) = deny.path_hit(requested) {
        return Err(refusal(requested, mode, Access::Read, hit));
    }
    read_file(requested)
}

/// List `requested` unless it is, or lies beneath, a directory `deny`
/// holds. What is listed is the handle that was judged.
fn list_fenced(
    requested: &Path,
    mode: SandboxMode,
    deny: &Protection,
) -> Result<Vec<DirEntryInfo>, FsError> {
    #[cfg(not(unix))]
    if let Some(hit) = deny.path_hit(requested) {
        return Err(refusal(requested, mode, Access::List, hit));
    }
    let dir = open_listed(requested)?;
    let hit = deny.dir_hit(&dir).map_err(|source| FsError::Io {
        op: "check the deny-read paths for",
        path: requested.to_path_buf(),
        source,
    })?;
    if let Some(hit) = hit {
        return Err(refusal(requested, mode, Access::List, hit));
    }
    list_handle(&dir, requested)
}

/// `path` made absolute against the call's workspace root, `.`/`..` applied.
fn requested_path(path: &Path, policy: &ExecutionPolicy) -> Result<PathBuf, FsError> {
    let base = root_form(&policy.workspace_root).map_err(|source| FsError::Io {
        op: "resolve against the workspace root",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(absolutize(&base, path))
}

fn write_to(target: Target, contents: &[u8]) -> Result<WriteOutcome, FsError> {
    atomic::replace(&target, contents).map_err(|source| FsError::Io {
        op: "write",
        path: target.path.clone(),
        source,
    })?;
    Ok(WriteOutcome {
        created: target.existing.is_none(),
        bytes: contents.len(),
        path: target.path,
    })
}

fn edit_at(
    target: Target,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<EditOutcome, FsError> {
    let path = target.path.clone();
    if target.existing.is_none() {
        return Err(FsError::NotFound { path });
    }
    if old.is_empty() {
        return Err(FsError::EmptyOldText { path });
    }
    // Read through the same handle the result is written to, so the text
    // edited is the text replaced.
    let mut bytes = Vec::new();
    target
        .parent
        .open(&target.name)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| FsError::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
    let text = String::from_utf8(bytes).map_err(|_| FsError::InvalidUtf8 { path: path.clone() })?;
    let (edited, replacements) =
        replace_text(&text, old, new, replace_all).map_err(|count| match count {
            0 => FsError::OldTextNotFound { path: path.clone() },
            count => FsError::NotUnique {
                path: path.clone(),
                count,
            },
        })?;
    write_to(target, edited.as_bytes())?;
    Ok(EditOutcome { path, replacements })
}

/// `text` with `old` replaced, and how many times; `Err(count)` when `old`
/// does not occur (0) or occurs more than once without `replace_all`.
/// Occurrences are counted without overlap, as they are replaced.
fn replace_text(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), usize> {
    let count = text.matches(old).count();
    match count {
        0 => Err(0),
        1 => Ok((text.replacen(old, new, 1), 1)),
        n if replace_all => Ok((text.replace(old, new), n)),
        n => Err(n),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, FsError> {
    let io = |op: &'static str| {
        move |source: std::io::Error| match source.kind() {
            std::io::ErrorKind::NotFound => FsError::NotFound {
                path: path.to_path_buf(),
            },
            _ => FsError::Io {
                op,
                path: path.to_path_buf(),
                source,
            },
        }
    };
    // Only regular files: reading a FIFO or a device could block or never
    // end.
    if !std::fs::metadata(path).map_err(io("read"))?.is_file() {
        return Err(FsError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    std::fs::read(path).map_err(io("read"))
}

fn list_dir(dir: &Path) -> Result<Vec<DirEntryInfo>, FsError> {
    list_handle(&open_listed(dir)?, dir)
}

/// The directory `dir` (symlinks followed, as `ls dir/` does).
fn open_listed(dir: &Path) -> Result<Dir, FsError> {
    Dir::open_ambient_dir(dir, ambient_authority()).map_err(|source| list_error(dir, source))
}

fn list_handle(handle: &Dir, dir: &Path) -> Result<Vec<DirEntryInfo>, FsError> {
    let mut entries = Vec::new();
    for entry in handle.entries().map_err(|e| list_error(dir, e))? {
        let entry = entry.map_err(|e| list_error(dir, e))?;
        let kind = match entry.file_type() {
            Ok(t) if t.is_symlink() => EntryKind::Symlink,
            Ok(t) if t.is_dir() => EntryKind::Dir,
            Ok(t) if t.is_file() => EntryKind::File,
            _ => EntryKind::Other,
        };
        entries.push(DirEntryInfo {
            name: entry.file_name(),
            kind,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

fn list_error(dir: &Path, source: std::io::Error) -> FsError {
    match source.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound {
            path: dir.to_path_buf(),
        },
        std::io::ErrorKind::NotADirectory => FsError::NotADirectory {
            path: dir.to_path_buf(),
        },
        _ => FsError::Io {
            op: "list",
            path: dir.to_path_buf(),
            source,
        },
    }
}

#[cfg(test)]
mod tests;
