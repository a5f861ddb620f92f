//! Path resolution that refuses planted symlinks.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::{RootError, RootKind};

/// The kernel's own limit on symlinks followed in one resolution.
const MAX_HOPS: usize = 40;

/// Resolve `given` (absolute) component by component, like `realpath`, but
/// refuse any symlink whose directory lies beneath one of `guards` (resolved
/// paths of writable roots): a confined run could have put it there.
pub fn resolve_guarded(
    what: RootKind,
    given: &Path,
    guards: &[PathBuf],
) -> Result<PathBuf, RootError> {
    let open_err = |source: io::Error| RootError::Open {
        what,
        path: given.to_path_buf(),
        source,
    };
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, given, false);
    let mut out = PathBuf::from("/");
    let mut hops = 0;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        let meta = std::fs::symlink_metadata(&next).map_err(open_err)?;
        if !meta.file_type().is_symlink() {
            out = next;
            continue;
        }
        if let Some(root) = guards.iter().find(|g| out.starts_with(g)) {
            return Err(RootError::PlantedSymlink {
                what,
                path: given.to_path_buf(),
                link: next,
                root: root.clone(),
            });
        }
        hops += 1;
        if hops > MAX_HOPS {
            return Err(open_err(io::Error::other(
                "too many levels of symbolic links",
            )));
        }
        let target = std::fs::read_link(&next).map_err(open_err)?;
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        push_components(&mut pending, &target, true);
    }
    Ok(out)
}

/// Queue the normal and `..` components of `p` (front when `front`).
fn push_components(q: &mut VecDeque<OsString>, p: &Path, front: bool) {
    let parts: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    if front {
        for part in parts.into_iter().rev() {
            q.push_front(part);
        }
    } else {
        q.extend(parts);
    }
}

/// The first of `roots` (resolved paths) that `path` lies beneath, judged
/// by where `path` really is: its nearest existing ancestor resolved, the
/// rest appended. `None` when it lies beneath none of them.
pub fn beneath(path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    // A relative path is judged where it is now, from the current
    // directory; walking it up would end at "" and resolve nothing.
    let absolute;
    let path = if path.is_absolute() {
        path
    } else {
        absolute = std::env::current_dir().ok()?.join(path);
        &absolute
    };
    let real = real_location(path);
    roots.iter().find(|r| real.starts_with(r)).cloned()
}

fn real_location(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&cur) {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                cur = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}
