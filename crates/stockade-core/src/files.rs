//! The file policy beyond the mode: extra writable roots, secrets that may
//! not be read, and paths inside writable roots that stay read-only.
//!
//! It belongs to the deployment, not to a mode: `read-only` grants none of
//! the extra roots, `danger-full-access` enforces none of it, and
//! `workspace-write` adds the extra roots to the workspace and temp roots.
//! Deny-read and read-only apply in both confining modes.
//!
//! Entries are written absolute or `~/`-relative; a writable-roots entry may
//! also name a toolchain group (`@cargo`, ...), which expands to the caches
//! and registries that tool writes. Everything is expanded once, here, into
//! absolute paths; nothing later interprets `~` or a group again.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

/// The three lists, expanded to absolute paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePolicy {
    /// Directories writable under `workspace-write` besides the workspace,
    /// `/tmp` and `$TMPDIR`.
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// Files and directories nothing confined may read.
    #[serde(default)]
    pub deny_read: Vec<PathBuf>,
    /// Paths inside writable roots that stay read-only.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
}

impl FilePolicy {
    pub fn is_empty(&self) -> bool {
        self.writable_roots.is_empty() && self.deny_read.is_empty() && self.read_only.is_empty()
    }
}

/// Which list an entry belongs to, for messages and for what it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    WritableRoots,
    DenyRead,
    ReadOnly,
}

impl ListKind {
    /// The key in `[policy]`.
    pub const fn key(self) -> &'static str {
        match self {
            ListKind::WritableRoots => "writable_roots",
            ListKind::DenyRead => "deny_read",
            ListKind::ReadOnly => "read_only",
        }
    }

    /// The `stockade exec` flag.
    pub const fn flag(self) -> &'static str {
        match self {
            ListKind::WritableRoots => "--writable",
            ListKind::DenyRead => "--deny-read",
            ListKind::ReadOnly => "--read-only",
        }
    }
}

/// An entry that cannot be expanded; the caller names the key or flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("{entry:?}: must be an absolute path or start with ~/")]
    Relative { entry: OsString },
    #[error("{entry:?}: names ~ but $HOME is not set to an absolute path")]
    NoHome { entry: OsString },
    #[error("{entry:?}: must not contain `..` (say the path it means)")]
    DotDot { entry: OsString },
    #[error("{entry:?}: is the filesystem root{}", .why)]
    FilesystemRoot { entry: OsString, why: &'static str },
    #[error("{entry:?}: unknown group; the groups are {}", GROUP_NAMES.join(", "))]
    UnknownGroup { entry: OsString },
    #[error("{entry:?}: groups name writable caches; they only mean something in writable_roots")]
    GroupElsewhere { entry: OsString },
}

/// The named toolchain groups, in the order the README lists them.
pub const GROUP_NAMES: &[&str] = &["@cargo", "@npm", "@pip", "@go", "@gradle"];

/// What a group expands to: the caches and registries the tool writes,
/// following the tool's own variables. Never a directory of executables
/// (`~/.cargo/bin`, `~/go/bin`): a confined run could plant a program the
/// user runs next, unconfined.
fn group_paths(name: &str, env: &dyn Fn(&str) -> Option<OsString>) -> Option<Vec<PathBuf>> {
    let abs = |var: &str| {
        env(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let home = abs("HOME");
    let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));
    let cache_home = abs("XDG_CACHE_HOME").or_else(|| under_home(".cache"));
    let paths: Vec<Option<PathBuf>> = match name {
        "@cargo" => {
            let cargo = abs("CARGO_HOME").or_else(|| under_home(".cargo"));
            vec![
                cargo.as_ref().map(|c| c.join("registry")),
                cargo.as_ref().map(|c| c.join("git")),
            ]
        }
        "@npm" => vec![abs("npm_config_cache").or_else(|| under_home(".npm"))],
        "@pip" => vec![abs("PIP_CACHE_DIR").or_else(|| cache_home.as_ref().map(|c| c.join("pip")))],
        "@go" => {
            let gopath = abs("GOPATH").or_else(|| under_home("go"));
            vec![
                abs("GOMODCACHE").or_else(|| gopath.map(|g| g.join("pkg").join("mod"))),
                abs("GOCACHE").or_else(|| cache_home.as_ref().map(|c| c.join("go-build"))),
            ]
        }
        "@gradle" => {
            let gradle = abs("GRADLE_USER_HOME").or_else(|| under_home(".gradle"));
            vec![
                gradle.as_ref().map(|g| g.join("caches")),
                gradle.as_ref().map(|g| g.join("wrapper")),
                gradle.as_ref().map(|g| g.join("daemon")),
            ]
        }
        _ => return None,
    };
    Some(paths.into_iter().flatten().collect())
}

/// Expand one entry of `kind`. `env` reads an environment variable (`HOME`,
/// and a group's own variables).
pub fn expand(
    entry: &OsStr,
    kind: ListKind,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<PathBuf>, EntryError> {
    let owned = || entry.to_owned();
    let bytes = entry.as_encoded_bytes();
    if bytes.first() == Some(&b'@') {
        if kind != ListKind::WritableRoots {
            return Err(EntryError::GroupElsewhere { entry: owned() });
        }
        let name = entry.to_str().unwrap_or_default();
        let paths =
            group_paths(name, env).ok_or_else(|| EntryError::UnknownGroup { entry: owned() })?;
        if paths.is_empty() {
            return Err(EntryError::NoHome { entry: owned() });
        }
        return Ok(paths);
    }
    let path = if bytes == b"~" || bytes.starts_with(b"~/") {
        let home = env("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or_else(|| EntryError::NoHome { entry: owned() })?;
        let rest = Path::new(entry)
            .strip_prefix("~")
            .map(Path::to_path_buf)
            .unwrap_or_default();
        home.join(rest)
    } else {
        PathBuf::from(entry)
    };
    if !path.is_absolute() {
        return Err(EntryError::Relative { entry: owned() });
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(EntryError::DotDot { entry: owned() });
    }
    // `.` components and doubled slashes are dropped by the rebuild.
    let path: PathBuf = path.components().collect();
    if path.parent().is_none() {
        let why = match kind {
            ListKind::WritableRoots => "; granting it would make every file writable",
            ListKind::DenyRead => "; denying it would leave nothing to run",
            ListKind::ReadOnly => "; it is read-only already",
        };
        return Err(EntryError::FilesystemRoot {
            entry: owned(),
            why,
        });
    }
    Ok(vec![path])
}

/// Expand a whole list, in order, without duplicates. The error carries
/// the index of the entry that failed.
pub fn expand_all<S: AsRef<OsStr>>(
    entries: &[S],
    kind: ListKind,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<PathBuf>, (usize, EntryError)> {
    let mut out: Vec<PathBuf> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        for p in expand(e.as_ref(), kind, env).map_err(|err| (i, err))? {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The group whose expansion `path` lies beneath, for the hint in a denial
/// report.
pub fn group_of(path: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> Option<&'static str> {
    GROUP_NAMES.iter().copied().find(|g| {
        group_paths(g, env)
            .unwrap_or_default()
            .iter()
            .any(|p| path.starts_with(p))
    })
}

/// The gaps of a backend that enforces none of the lists (yet): every
/// deny-read path stays readable, every read-only path writable. Extra
/// roots it does not grant are narrower, not a gap.
pub fn unenforced(files: &FilePolicy, backend: &str) -> Vec<crate::Gap> {
    let mut out = Vec::new();
    if !files.deny_read.is_empty() {
        out.push(crate::Gap::new(
            crate::gaps::DENY_READ,
            format!(
                "{backend} does not enforce deny_read in this build: those paths stay readable"
            ),
        ));
    }
    if !files.read_only.is_empty() {
        out.push(crate::Gap::new(
            crate::gaps::PROTECTED_PATHS,
            format!(
                "{backend} does not enforce read_only in this build: those paths stay writable"
            ),
        ));
    }
    out
}

/// The process environment, for [`expand`].
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn one(e: &str, kind: ListKind) -> Result<Vec<PathBuf>, EntryError> {
        expand(OsStr::new(e), kind, &env(&[("HOME", "/home/u")]))
    }

    #[test]
    fn entries_are_absolute_or_home_relative() {
        use ListKind::*;
        assert_eq!(
            one("~/.npm", WritableRoots).unwrap(),
            [PathBuf::from("/home/u/.npm")]
        );
        assert_eq!(one("~", DenyRead).unwrap(), [PathBuf::from("/home/u")]);
        assert_eq!(
            one("/a//b/./c", ReadOnly).unwrap(),
            [PathBuf::from("/a/b/c")]
        );
        assert!(matches!(
            one("rel/x", WritableRoots),
            Err(EntryError::Relative { .. })
        ));
        assert!(matches!(
            one("~user/x", WritableRoots),
            Err(EntryError::Relative { .. })
        ));
        assert!(matches!(
            one("", DenyRead),
            Err(EntryError::Relative { .. })
        ));
        assert!(matches!(
            one("/a/../b", WritableRoots),
            Err(EntryError::DotDot { .. })
        ));
        for k in [WritableRoots, DenyRead, ReadOnly] {
            assert!(matches!(
                one("/", k),
                Err(EntryError::FilesystemRoot { .. })
            ));
            assert!(matches!(
                one("/./", k),
                Err(EntryError::FilesystemRoot { .. })
            ));
        }
        let no_home = expand(OsStr::new("~/.ssh"), DenyRead, &env(&[]));
        assert!(matches!(no_home, Err(EntryError::NoHome { .. })));
        let rel_home = expand(OsStr::new("~/.ssh"), DenyRead, &env(&[("HOME", "h")]));
        assert!(matches!(rel_home, Err(EntryError::NoHome { .. })));
    }

    #[test]
    fn groups_follow_the_tools_variables_and_never_grant_bin() {
        let e = env(&[
            ("HOME", "/h"),
            ("CARGO_HOME", "/opt/cargo"),
            ("GOPATH", "rel"),
        ]);
        let g = |n: &str| expand(OsStr::new(n), ListKind::WritableRoots, &e).unwrap();
        assert_eq!(
            g("@cargo"),
            [
                PathBuf::from("/opt/cargo/registry"),
                PathBuf::from("/opt/cargo/git")
            ]
        );
        assert_eq!(g("@npm"), [PathBuf::from("/h/.npm")]);
        assert_eq!(g("@pip"), [PathBuf::from("/h/.cache/pip")]);
        // A relative GOPATH is not the tool's either: the default stands.
        assert_eq!(
            g("@go"),
            [
                PathBuf::from("/h/go/pkg/mod"),
                PathBuf::from("/h/.cache/go-build")
            ]
        );
        assert_eq!(g("@gradle").len(), 3);
        for name in GROUP_NAMES {
            for p in g(name) {
                assert!(!p.ends_with("bin"), "{name}: {}", p.display());
            }
        }
        assert!(matches!(
            expand(OsStr::new("@maven"), ListKind::WritableRoots, &e),
            Err(EntryError::UnknownGroup { .. })
        ));
        assert!(matches!(
            expand(OsStr::new("@npm"), ListKind::DenyRead, &e),
            Err(EntryError::GroupElsewhere { .. })
        ));
        assert_eq!(group_of(Path::new("/h/.npm/_cacache/x"), &e), Some("@npm"));
        assert_eq!(
            group_of(Path::new("/opt/cargo/registry"), &e),
            Some("@cargo")
        );
        assert_eq!(group_of(Path::new("/opt/cargo/bin/cargo"), &e), None);
        // Without a home a group cannot be placed.
        assert!(matches!(
            expand(OsStr::new("@npm"), ListKind::WritableRoots, &env(&[])),
            Err(EntryError::NoHome { .. })
        ));
    }

    #[test]
    fn lists_expand_in_order_without_duplicates_naming_the_bad_index() {
        let e = env(&[("HOME", "/h")]);
        let v = expand_all(&["~/.npm", "@npm", "/x"], ListKind::WritableRoots, &e).unwrap();
        assert_eq!(v, [PathBuf::from("/h/.npm"), PathBuf::from("/x")]);
        let (i, _) = expand_all(&["/ok", "bad"], ListKind::ReadOnly, &e).unwrap_err();
        assert_eq!(i, 1);
    }

    #[test]
    fn a_backend_that_enforces_no_list_names_each_gap() {
        let mut p = FilePolicy::default();
        assert!(unenforced(&p, "seatbelt").is_empty());
        p.writable_roots.push("/x".into());
        assert!(unenforced(&p, "seatbelt").is_empty());
        p.deny_read.push("/h/.ssh".into());
        p.read_only.push("/w/.env".into());
        let names: Vec<&str> = unenforced(&p, "seatbelt").iter().map(|g| g.name).collect();
        assert_eq!(
            names,
            [crate::gaps::DENY_READ, crate::gaps::PROTECTED_PATHS]
        );
    }

    #[test]
    fn the_policy_serializes_with_every_list_and_reads_back() {
        let p = FilePolicy {
            writable_roots: vec!["/h/.npm".into()],
            deny_read: vec!["/h/.ssh".into()],
            read_only: vec![],
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<FilePolicy>(&text).unwrap(), p);
        assert!(FilePolicy::default().is_empty());
    }
}
