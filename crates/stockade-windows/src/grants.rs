//! The grant lifecycle: the standing workspace ACE and the revocable private
//! temp ACE.
//!
//! - The workspace ACE is *standing*: it names the workspace SID derived from
//!   the canonical workspace path, stays after the session, and is the
//!   cross-session reuse cache. Applying it eagerly propagates through the
//!   whole tree (`SetNamedSecurityInfoW` walks every descendant), so an
//!   exact-ACE check skips re-applying it.
//! - Each live session/workspace pair (and, for session-less calls, each
//!   provider/workspace pair) gets a fresh random private temp directory with
//!   its own SID and a *revocable* ACE, revoked and removed when the session
//!   ends (or the provider is dropped). Two sessions on one workspace share
//!   the standing workspace SID but never a temp SID, so neither can write
//!   the other's temp tree. Every allocation draws a new path and SID, so
//!   residue from a crash is inert litter: it can neither block a resumed
//!   session nor hand it a capability.
//!
//! Every precondition is checked before the first ACL mutation, and every
//! failure after the temp directory exists removes it again.

use std::path::{Path, PathBuf};

use crate::acl::{AclEntry, grant_entries};
use crate::api::Win32;
use crate::error::{ERROR_ALREADY_EXISTS, Error, Overlap, Step};
use crate::paths;
use crate::sid::{self, Sid};

/// Private temp directories are `<temp root>\stockade-<32 hex digits>`.
pub const TEMP_PREFIX: &str = "stockade-";
/// Random draws before giving up on `ERROR_ALREADY_EXISTS`. One collision of
/// 128 random bits is already absurd; more than this means something is
/// creating our names on purpose.
pub const NAME_ATTEMPTS: u32 = 4;

/// One live session/workspace (or session-less provider/workspace) pair's
/// capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Canonical workspace root.
    pub workspace: PathBuf,
    pub workspace_sid: Sid,
    /// Canonical private temp directory.
    pub temp_dir: PathBuf,
    pub temp_sid: Sid,
}

/// What [`ensure_standing`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The exact ACE was there: nothing was written or propagated.
    AlreadyExact,
    /// The ACE was (re)applied and propagated.
    Applied,
}

/// Some of the end-of-life cleanup failed. What is left is inert: the temp
/// SID is random and no later token will carry it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cleanup incomplete: {}", .failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct ReleaseError {
    pub failures: Vec<Error>,
}

/// The final, simplified form of an existing path (see [`paths::simplify`]).
pub fn canonical<W: Win32>(sys: &W, path: &Path, step: Step) -> Result<PathBuf, Error> {
    let raw = sys
        .canonicalize(path)
        .map_err(|e| Error::win32(step, Some(path), e))?;
    paths::simplify(&raw)
}

/// A workspace equal to or containing the temp root is refused: its
/// inheritable standing ACE would reach every private temp directory of
/// every session, so temp separation would be void.
pub fn check_temp_root(workspace: &Path, temp_root: &Path) -> Result<(), Error> {
    if paths::same_or_within(temp_root, workspace)? {
        return Err(Error::WorkspaceContainsTempRoot {
            workspace: workspace.to_path_buf(),
            temp_root: temp_root.to_path_buf(),
        });
    }
    Ok(())
}

/// No writable root may be, contain, or lie inside the private temp
/// directory: either way one capability would reach the other's tree.
pub fn check_overlap(writable_roots: &[&Path], temp_dir: &Path) -> Result<(), Error> {
    for root in writable_roots {
        let overlap = if paths::same_or_within(temp_dir, root)? {
            Some(Overlap::RootContainsTemp)
        } else if paths::same_or_within(root, temp_dir)? {
            Some(Overlap::TempContainsRoot)
        } else {
            None
        };
        if let Some(overlap) = overlap {
            return Err(Error::TempOverlap {
                root: root.to_path_buf(),
                temp_dir: temp_dir.to_path_buf(),
                overlap,
            });
        }
    }
    Ok(())
}

/// Make the standing workspace ACE exact, skipping the write (and its eager
/// tree propagation) when it already is.
pub fn ensure_standing<W: Win32>(
    sys: &W,
    workspace: &Path,
    workspace_sid: &Sid,
) -> Result<Standing, Error> {
    let dacl = sys
        .read_dacl(workspace)
        .map_err(|e| Error::win32(Step::ReadWorkspaceDacl, Some(workspace), e))?;
    let want = AclEntry::capability(workspace_sid.clone());
    match grant_entries(&dacl, &want) {
        None => Ok(Standing::AlreadyExact),
        Some(entries) => {
            sys.apply_acl(workspace, &entries)
                .map_err(|e| Error::win32(Step::GrantWorkspaceAce, Some(workspace), e))?;
            Ok(Standing::Applied)
        }
    }
}

fn temp_name(bytes: [u8; 16]) -> String {
    let mut s = String::with_capacity(TEMP_PREFIX.len() + 32);
    s.push_str(TEMP_PREFIX);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Allocate a session/workspace pair: check every precondition, make the
/// standing workspace ACE exact, create a fresh random private temp directory
/// and grant its revocable ACE. `workspace` must already be canonical.
pub fn allocate<W: Win32>(sys: &W, workspace: &Path) -> Result<Allocation, Error> {
    let workspace_sid = sid::workspace_sid(workspace)?;
    let raw_root = sys
        .temp_root()
        .map_err(|e| Error::win32(Step::LocateTempRoot, None, e))?;
    let temp_root = canonical(sys, &raw_root, Step::CanonicalizeTempRoot)?;
    check_temp_root(workspace, &temp_root)?;

    let draw = || -> Result<PathBuf, Error> {
        let bytes = sys
            .random()
            .map_err(|e| Error::win32(Step::DrawTempName, None, e))?;
        let dir = paths::join(&temp_root, &temp_name(bytes));
        check_overlap(&[workspace], &dir)?;
        Ok(dir)
    };
    // Drawn (and checked) before the first ACL mutation.
    let mut dir = draw()?;

    ensure_standing(sys, workspace, &workspace_sid)?;

    let mut attempts = 0;
    loop {
        attempts += 1;
        match sys.create_dir(&dir) {
            Ok(()) => break,
            // Residue (or anything else) at a drawn name is never reused or
            // touched: its ACL is not ours to trust. Draw again.
            Err(e) if e.code == ERROR_ALREADY_EXISTS && attempts < NAME_ATTEMPTS => dir = draw()?,
            Err(e) if e.code == ERROR_ALREADY_EXISTS => {
                return Err(Error::TempNameExhausted {
                    temp_root,
                    attempts,
                });
            }
            Err(e) => return Err(Error::win32(Step::CreateTempDir, Some(&dir), e)),
        }
    }

    // From here on the directory exists and is removed on any failure. The
    // ACE lives only on that directory and no token has carried its SID yet,
    // so removing the directory is the whole cleanup.
    let granted = sid::temp_sid(&dir).and_then(|temp_sid| {
        sys.apply_acl(&dir, &[AclEntry::capability(temp_sid.clone())])
            .map_err(|e| Error::win32(Step::GrantTempAce, Some(&dir), e))?;
        Ok(temp_sid)
    });
    match granted {
        Ok(temp_sid) => Ok(Allocation {
            workspace: workspace.to_path_buf(),
            workspace_sid,
            temp_dir: dir,
            temp_sid,
        }),
        Err(e) => {
            // The grant failure is what the caller must see; a removal
            // failure on top leaves only an inert directory behind.
            let _ = sys.remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// End a pair's life: revoke the temp ACE first (a grandchild that outlived
/// its runner loses write access at once), then remove the directory. Both
/// are attempted whatever the other did. The standing workspace ACE stays.
pub fn release<W: Win32>(sys: &W, alloc: &Allocation) -> Result<(), ReleaseError> {
    let mut failures = Vec::new();
    if let Err(e) = sys.apply_acl(&alloc.temp_dir, &[AclEntry::revoke(alloc.temp_sid.clone())]) {
        failures.push(Error::win32(Step::RevokeTempAce, Some(&alloc.temp_dir), e));
    }
    if let Err(e) = sys.remove_dir_all(&alloc.temp_dir) {
        failures.push(Error::win32(Step::RemoveTempDir, Some(&alloc.temp_dir), e));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(ReleaseError { failures })
    }
}

#[cfg(test)]
mod tests;
