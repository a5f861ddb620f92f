//! Pure path arithmetic: making a path absolute, normalizing `.`/`..`
//! lexically, and choosing the writable root a path lies under.
//!
//! Nothing here decides containment on its own. The chosen root is only where
//! resolution *starts*: every component after it is resolved by the kernel
//! beneath that root's directory handle (see `locate`), so a symlink or a
//! race can make a write fail but never make it land elsewhere.

use std::io;
use std::path::{Component, Path, PathBuf};

/// `path` with `.` dropped and each `..` cancelling the component before it,
/// without touching the disk (like Go's `path.Clean`). A `..` at the
/// filesystem root stays at the root, as the kernel does.
///
/// `..` is applied lexically on purpose: `a/link/../b` means `a/b` whatever
/// `link` points to, so the root a path is checked against is the root the
/// caller can see in the text, and a symlink can never turn `..` into a step
/// out of that root.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component),
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`; a relative path keeps its leading `..`s (only
                // reachable for relative input, which callers make absolute
                // first).
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
            },
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// `path` made absolute against `base` (itself absolute) and normalized.
pub(crate) fn absolutize(base: &Path, path: &Path) -> PathBuf {
    // `join` keeps an absolute `path` as it is.
    normalize(&base.join(path))
}

/// A configured root (the workspace root, a temp root) in the form paths are
/// matched against: absolute (against the process's working directory, the
/// only base a root has) and normalized.
pub(crate) fn root_form(root: &Path) -> io::Result<PathBuf> {
    std::path::absolute(root).map(|p| normalize(&p))
}

/// The root `path` lies under, and the rest of `path` beneath it (only
/// `Normal` components, since both sides are normalized). The most specific
/// root wins, so a workspace inside a temp root resolves beneath the
/// workspace. Component-wise (`Path::starts_with`), never a string prefix:
/// `/ws2` is not under `/ws`.
pub(crate) fn pick_root<'r>(roots: &'r [PathBuf], path: &Path) -> Option<(&'r Path, PathBuf)> {
    roots
        .iter()
        .filter_map(|root| {
            let rest = path.strip_prefix(root).ok()?;
            Some((root.as_path(), rest.to_path_buf()))
        })
        .max_by_key(|(root, _)| root.components().count())
}

// The cases are spelled with Unix paths.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn dots_are_resolved_lexically() {
        for (input, want) in [
            ("/a/b/../c", "/a/c"),
            ("/a/./b/.", "/a/b"),
            ("/..", "/"),
            ("/../../etc", "/etc"),
            ("/a/b/../../..", "/"),
            ("/a//b/", "/a/b"),
            ("a/../../b", "../b"),
            ("", ""),
        ] {
            assert_eq!(normalize(Path::new(input)), Path::new(want), "{input}");
        }
    }

    #[test]
    fn relative_paths_resolve_against_the_base_and_absolute_ones_ignore_it() {
        let ws = Path::new("/w/ws");
        assert_eq!(
            absolutize(ws, Path::new("src/x.rs")),
            Path::new("/w/ws/src/x.rs")
        );
        assert_eq!(absolutize(ws, Path::new("../ws2/x")), Path::new("/w/ws2/x"));
        assert_eq!(
            absolutize(ws, Path::new("/etc/passwd")),
            Path::new("/etc/passwd")
        );
        assert_eq!(absolutize(ws, Path::new(".")), Path::new("/w/ws"));
    }

    #[test]
    fn the_most_specific_root_wins_and_siblings_do_not_match() {
        let roots = vec![PathBuf::from("/tmp"), PathBuf::from("/tmp/ws")];
        let (root, rest) = pick_root(&roots, Path::new("/tmp/ws/a/b")).unwrap();
        assert_eq!(
            (root, rest.as_path()),
            (Path::new("/tmp/ws"), Path::new("a/b"))
        );
        let (root, rest) = pick_root(&roots, Path::new("/tmp/x")).unwrap();
        assert_eq!((root, rest.as_path()), (Path::new("/tmp"), Path::new("x")));
        assert!(pick_root(&roots, Path::new("/tmp2/x")).is_none());
        assert!(pick_root(&[PathBuf::from("/w/ws")], Path::new("/w/ws2/x")).is_none());
        let (_, rest) = pick_root(&roots, Path::new("/tmp")).unwrap();
        assert_eq!(rest, Path::new(""));
    }
}
