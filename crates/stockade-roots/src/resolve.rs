//! Path resolution that refuses planted symlinks.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
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
    // A path a composition already found free of symlinks (it resolved to
    // itself) has no symlink for any guard to refuse.
    let plain = given.is_absolute()
        && given
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if plain && memo_says_plain(given) {
        return Ok(given.to_path_buf());
    }
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
    if plain && hops == 0 {
        remember(given, &out);
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
        if let Ok(c) = canonical(&cur) {
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

/// Canonicalization memoized while a composition is being built.
///
/// Composing one run (holding its roots, looking up the protect and
/// deny-read candidates, checking its runners) resolves the same few
/// directories again and again: every candidate under `~` or a root walks
/// `realpath` from `/`, so `/root` was read ~35 times a run. Inside a
/// [`Composing`] scope each directory prefix is resolved once and a later
/// path under it costs one `lstat` of its last component.
///
/// Why that is safe: before the run's spawn nothing untrusted runs in this
/// composition, so a path resolved once answers as it would again. A
/// confined command of another run (a concurrent session) could move
/// something meanwhile, but it could just as well do so between a fresh
/// resolution and the spawn: every decision here was already only as
/// fresh as the composition, and the memo keeps them consistent with each
/// other. Only resolutions that succeeded are kept (what stockade itself
/// creates while composing, missing git names, is looked up afresh), the
/// memo is per thread and dropped when the scope ends, so nothing survives
/// into the run or after it: the after-run audits, outside any scope,
/// always re-resolve (the command may have changed everything).
#[derive(Debug)]
#[must_use = "the memo lives only as long as the scope"]
pub struct Composing {
    /// Whether this scope made the memo (a nested one leaves it to it).
    owner: bool,
}

thread_local! {
    static MEMO: RefCell<Option<HashMap<PathBuf, PathBuf>>> = const { RefCell::new(None) };
}

/// Memoize canonicalization on this thread until the returned scope drops.
pub fn composing() -> Composing {
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let owner = m.is_none();
        if owner {
            *m = Some(HashMap::new());
        }
        Composing { owner }
    })
}

impl Drop for Composing {
    fn drop(&mut self) {
        if self.owner {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
}

/// `std::fs::canonicalize`, answered from the memo inside a [`Composing`]
/// scope (and fresh outside one).
pub fn canonical(path: &Path) -> io::Result<PathBuf> {
    MEMO.with(|m| match m.borrow_mut().as_mut() {
        Some(memo) => canonical_in(memo, path),
        None => std::fs::canonicalize(path),
    })
}

/// Whether the composition's memo resolved `path` to itself: no component
/// of a plain absolute path that `realpath` maps to itself is a symlink.
fn memo_says_plain(path: &Path) -> bool {
    MEMO.with(|m| {
        m.borrow()
            .as_ref()
            .and_then(|memo| memo.get(path))
            .is_some_and(|hit| hit == path)
    })
}

/// Keep `path` resolved as `real` while a composition is being built.
fn remember(path: &Path, real: &Path) {
    MEMO.with(|m| {
        if let Some(memo) = m.borrow_mut().as_mut() {
            memo.insert(path.to_path_buf(), real.to_path_buf());
        }
    });
}

/// `realpath` by prefix: the parent from the memo, then the last
/// component looked at itself. Anything not a plain absolute path (`.`,
/// `..`, a trailing slash, which `realpath` requires to be a directory) and
/// every symlink goes to `realpath` itself.
fn canonical_in(memo: &mut HashMap<PathBuf, PathBuf>, path: &Path) -> io::Result<PathBuf> {
    // A relative path is resolved from the current directory, which is
    // not the memo's to assume; a trailing slash asks for a directory,
    // which `Path` equality (by components) would not tell the memo.
    let bytes = path.as_os_str().as_encoded_bytes();
    if !path.is_absolute() || (bytes.len() > 1 && bytes.ends_with(b"/")) {
        return std::fs::canonicalize(path);
    }
    if let Some(hit) = memo.get(path) {
        return Ok(hit.clone());
    }
    let plain = path
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let resolved = match (plain, path.parent(), path.file_name()) {
        (true, Some(parent), Some(name)) => {
            let dir = if parent == Path::new("/") {
                PathBuf::from("/")
            } else {
                canonical_in(memo, parent)?
            };
            let here = dir.join(name);
            if std::fs::symlink_metadata(&here)?.file_type().is_symlink() {
                std::fs::canonicalize(&here)?
            } else {
                here
            }
        }
        _ => std::fs::canonicalize(path)?,
    };
    memo.insert(path.to_path_buf(), resolved.clone());
    Ok(resolved)
}

#[cfg(all(test, unix))]
mod memo_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};

    use super::{canonical, composing};

    /// What `realpath` says, as `canonical` must say it.
    fn real(p: &Path) -> Result<PathBuf, std::io::ErrorKind> {
        std::fs::canonicalize(p).map_err(|e| e.kind())
    }

    fn memo(p: &Path) -> Result<PathBuf, std::io::ErrorKind> {
        canonical(p).map_err(|e| e.kind())
    }

    /// Inside a scope the memo answers exactly as `realpath`: through
    /// symlinked directories and files, for missing names, a file used as
    /// a directory, a trailing slash on a file, `..` and relative paths,
    /// asked twice (the second answer is the memo's).
    #[test]
    fn the_memo_answers_as_realpath() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path();
        std::fs::create_dir_all(base.join("d/e")).unwrap();
        std::fs::write(base.join("d/e/f"), b"x").unwrap();
        symlink(base.join("d"), base.join("dl")).unwrap();
        symlink("e/f", base.join("d/fl")).unwrap();
        symlink("missing", base.join("d/dangling")).unwrap();
        let cases: Vec<PathBuf> = vec![
            base.to_path_buf(),
            base.join("d/e/f"),
            base.join("dl/e/f"),
            base.join("dl/fl"),
            base.join("d/dangling"),
            base.join("d/nothing"),
            base.join("d/nothing/deeper"),
            base.join("d/e/f/under-a-file"),
            PathBuf::from(format!("{}/d/e/f/", base.display())),
            PathBuf::from(format!("{}/d/e/", base.display())),
            base.join("d/e/../e/f"),
            base.join("dl/e/../fl"),
            PathBuf::from("."),
            PathBuf::from("/"),
        ];
        let _scope = composing();
        for round in 0..2 {
            for p in &cases {
                assert_eq!(memo(p), real(p), "round {round}: {}", p.display());
            }
        }
    }

    /// Nothing resolved in a scope is seen once it ends, by a later scope
    /// or outside any: a directory replaced by a symlink afterwards (what
    /// a confined run can do in its roots) resolves to the symlink's
    /// target, as the after-run audit must see it.
    #[test]
    fn a_scope_ends_with_its_memo() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let dir = base.join("dir");
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        {
            let _scope = composing();
            assert_eq!(canonical(&dir.join("x")).ok(), None);
            assert_eq!(canonical(&dir).unwrap(), dir);
            // A nested scope shares the memo and leaves it to the outer.
            drop(composing());
            std::fs::remove_dir(&dir).unwrap();
            symlink(&elsewhere, &dir).unwrap();
            assert_eq!(canonical(&dir).unwrap(), dir, "answered from the memo");
        }
        assert_eq!(canonical(&dir).unwrap(), elsewhere);
        let _again = composing();
        assert_eq!(canonical(&dir).unwrap(), elsewhere);
    }

    /// The guarded resolution still refuses a symlink planted in a root
    /// inside a scope (a path with a symlink never resolves to itself, so
    /// the memo never vouches for it), and once the scope ends a directory
    /// swapped for a symlink after it was resolved is refused too.
    #[test]
    fn the_guarded_resolution_refuses_planted_symlinks_in_and_after_a_scope() {
        use crate::{RootError, RootKind};
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let planted = root.join("planted");
        symlink(elsewhere.path(), &planted).unwrap();
        let swapped = root.join("swapped");
        std::fs::create_dir(&swapped).unwrap();
        let guards = vec![root.clone()];
        let refused = |p: &Path| {
            matches!(
                super::resolve_guarded(RootKind::Extra, p, &guards),
                Err(RootError::PlantedSymlink { .. })
            )
        };
        {
            let _scope = composing();
            assert!(canonical(&planted).is_ok());
            assert!(refused(&planted));
            assert!(refused(&planted.join("x")));
            assert_eq!(
                super::resolve_guarded(RootKind::Extra, &swapped, &guards).unwrap(),
                swapped
            );
        }
        std::fs::remove_dir(&swapped).unwrap();
        symlink(elsewhere.path(), &swapped).unwrap();
        assert!(refused(&swapped));
        let _again = composing();
        assert!(refused(&swapped));
    }

    /// Only what resolved is kept: a name missing when first asked and
    /// made later in the same scope (stockade creating a missing git
    /// name) is found.
    #[test]
    fn a_missing_name_is_asked_again() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let _scope = composing();
        let made = base.join("made");
        assert!(canonical(&made).is_err());
        std::fs::create_dir(&made).unwrap();
        assert_eq!(canonical(&made).unwrap(), made);
    }
}
