//! The other names of a deny-read object: every name a confined command
//! could read it by besides the one the policy gives.
//!
//! A runner hides a denied path where it is (bwrap mounts a stand-in over
//! it; Landlock grants read everywhere but there), so the same object under
//! another name stays readable unless that name is denied too:
//!
//! - **Other mounts** of the same filesystem subtree (a bind mount of
//!   `$HOME` elsewhere): found in `/proc/self/mountinfo` by device and the
//!   mount's root within its filesystem, so a denied path maps to every
//!   mount point that shows it ([`mount_aliases`]).
//! - **Hard links** to a denied file (or to a file inside a denied
//!   directory): a file's other names can be anywhere on its filesystem,
//!   and finding them all would mean walking all of it. The trees a
//!   planted link would be in (the writable roots and the workspace) are
//!   walked instead ([`hard_links`]); a file whose link count is not
//!   accounted for by the names found refuses the run
//!   ([`AliasError::UncoveredLinks`]), since a silent pass would read the
//!   secret and a full walk of a disk on every run is not affordable.
//!
//! What no look before the run can see (a mount or a link made by someone
//! outside after it starts) is a named gap (`deny-read-aliases`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// At most this many directory entries are looked at in one walk (of the
/// denied trees, or of the roots a link is looked for in): a runner's start
/// must not take minutes. Past it the walk says it stopped, and the caller
/// decides what that means.
pub const WALK_LIMIT: usize = 200_000;

/// Why the other names of a deny-read object cannot be settled.
#[derive(Debug, thiserror::Error)]
pub enum AliasError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: line {line}: {why}", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        why: &'static str,
    },
    #[error(
        "deny-read file {} has {links} names (hard links) but only {} found ({}) in {}; a confined command could read it by another one, so nothing ran. Add the other name to deny_read too, remove that link, or take the file off deny_read",
        path.display(), found.len(), list(found), if scanned.is_empty() { "no scanned tree".to_owned() } else { format!("the trees scanned ({})", list(scanned)) }
    )]
    UncoveredLinks {
        /// The denied file (or the file inside a denied directory).
        path: PathBuf,
        /// Its link count.
        links: u64,
        /// The names found, this one included.
        found: Vec<PathBuf>,
        /// Where other names were looked for.
        scanned: Vec<PathBuf>,
    },
    #[error(
        "deny-read file {} has another name {} inside the writable root {}, where this backend cannot refuse reading it; nothing ran. Remove the link, take the file off deny_read, or use a backend that can hide it (bwrap)",
        path.display(), link.display(), root.display()
    )]
    LinkInWritableRoot {
        path: PathBuf,
        link: PathBuf,
        root: PathBuf,
    },
    #[error(
        "deny-read path {} is also mounted at {} inside the writable root {}, where this backend cannot refuse reading it; nothing ran. Unmount it there, or use a backend that can hide it (bwrap)",
        path.display(), alias.display(), root.display()
    )]
    MountInWritableRoot {
        path: PathBuf,
        alias: PathBuf,
        root: PathBuf,
    },
}

impl AliasError {
    /// The deny-read path the error is about (the mount table's for a read
    /// or parse failure).
    pub fn path(&self) -> &Path {
        match self {
            AliasError::Read { path, .. }
            | AliasError::Malformed { path, .. }
            | AliasError::UncoveredLinks { path, .. }
            | AliasError::LinkInWritableRoot { path, .. }
            | AliasError::MountInWritableRoot { path, .. } => path,
        }
    }
}

fn list(paths: &[PathBuf]) -> String {
    let mut out = String::new();
    for (i, p) in paths.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}", p.display());
    }
    out
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub id: u64,
    pub parent: u64,
    /// `major:minor` of the filesystem.
    pub dev: (u32, u32),
    /// The directory of the filesystem that is the root of this mount
    /// (`/` for a whole filesystem, the source subtree for a bind).
    pub root: PathBuf,
    /// Where it is mounted, relative to this process's root.
    pub mount_point: PathBuf,
}

/// The kernel escapes space, tab, newline and backslash in paths as `\ooo`.
fn unescape(field: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\'
            && i + 3 < field.len()
            && field[i + 1..i + 4]
                .iter()
                .all(|c| (b'0'..=b'7').contains(c))
        {
            let v = field[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            // Three octal digits can exceed a byte (`\777`); the kernel
            // never writes one, so such a field is kept as it was.
            if let Ok(b) = u8::try_from(v) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(field[i]);
        i += 1;
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Parse mountinfo text (see proc(5)): `ID PARENT MAJ:MIN ROOT MOUNT_POINT
/// OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`. `path` is only for
/// messages.
pub fn parse_mountinfo(text: &[u8], path: &Path) -> Result<Vec<Mount>, AliasError> {
    let mut out = Vec::new();
    for (n, line) in text.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = |why| AliasError::Malformed {
            path: path.to_path_buf(),
            line: n + 1,
            why,
        };
        let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
        if fields.len() < 7 || !fields[6..].contains(&&b"-"[..]) {
            return Err(bad("fewer fields than a mount has"));
        }
        let num = |f: &[u8], why| {
            std::str::from_utf8(f)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| bad(why))
        };
        let id = num(fields[0], "mount id is not a number")?;
        let parent = num(fields[1], "parent id is not a number")?;
        let dev = std::str::from_utf8(fields[2])
            .ok()
            .and_then(|s| s.split_once(':'))
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .ok_or_else(|| bad("device is not major:minor"))?;
        out.push(Mount {
            id,
            parent,
            dev,
            root: unescape(fields[3]),
            mount_point: unescape(fields[4]),
        });
    }
    Ok(out)
}

/// This process's mount table; empty where there is none (not Linux).
pub fn read_mounts() -> Result<Vec<Mount>, AliasError> {
    let path = Path::new("/proc/self/mountinfo");
    match std::fs::read(path) {
        Ok(text) => parse_mountinfo(&text, path),
        Err(e) if e.kind() == io::ErrorKind::NotFound && !cfg!(target_os = "linux") => {
            Ok(Vec::new())
        }
        Err(source) => Err(AliasError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The mount `path` (absolute, resolved) is reached through: the deepest
/// mount point above it, and of a stack of mounts on that point the top
/// one (the one no other mount there is mounted on).
fn host<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let deepest = mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .map(|m| m.mount_point.components().count())
        .max()?;
    let stack: Vec<&Mount> = mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .filter(|m| m.mount_point.components().count() == deepest)
        .collect();
    stack
        .iter()
        .find(|m| !stack.iter().any(|o| o.parent == m.id))
        .or(stack.last())
        .copied()
}

/// Every other name `path` (absolute, resolved) has in the mount table: for
/// the filesystem subtree it is (and each filesystem mounted beneath it),
/// each other mount that shows that subtree, or lies wholly inside it.
/// Names beneath `path` itself are left out (hiding `path` hides them). The
/// caller checks that a name still leads to the object (a mount on top can
/// hide it).
pub fn mount_aliases(mounts: &[Mount], path: &Path) -> Vec<PathBuf> {
    let Some(at) = host(mounts, path) else {
        return Vec::new();
    };
    let Ok(rel) = path.strip_prefix(&at.mount_point) else {
        return Vec::new();
    };
    // (device, directory of that filesystem) that must stay hidden.
    let mut secret: Vec<((u32, u32), PathBuf)> = vec![(at.dev, at.root.join(rel))];
    for m in mounts {
        if m.mount_point != path && m.mount_point.starts_with(path) {
            secret.push((m.dev, m.root.clone()));
        }
    }
    let mut out = BTreeSet::new();
    for m in mounts {
        for (dev, s) in &secret {
            if m.dev != *dev || !m.root.is_absolute() {
                continue;
            }
            let name = if let Ok(inside) = s.strip_prefix(&m.root) {
                if inside.as_os_str().is_empty() {
                    m.mount_point.clone()
                } else {
                    m.mount_point.join(inside)
                }
            } else if m.root.starts_with(s) {
                m.mount_point.clone()
            } else {
                continue;
            };
            if !name.starts_with(path) {
                out.insert(name);
            }
        }
    }
    out.into_iter().collect()
}

/// A file with more than one name, found inside a denied tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linked {
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    /// Every name found so far, first the one inside the denied tree.
    pub names: Vec<PathBuf>,
}

/// What a walk of the denied trees and the scanned roots found.
#[derive(Debug, Default)]
pub struct Links {
    /// Files with more than one name, by (device, inode).
    pub linked: Vec<Linked>,
    /// Denied directories whose walk stopped at [`WALK_LIMIT`]: files in
    /// them were not all looked at.
    pub unwalked: Vec<PathBuf>,
}

impl Links {
    /// Every name found outside the denied trees (or in a tree `carved`
    /// out of one): the names to deny too.
    pub fn other_names(&self, denied: &[PathBuf], carved: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = BTreeSet::new();
        for l in &self.linked {
            for n in &l.names {
                let hidden = denied.iter().any(|d| n.starts_with(d))
                    && !carved.iter().any(|c| n.starts_with(c));
                if !hidden {
                    out.insert(n.clone());
                }
            }
        }
        out.into_iter().collect()
    }

    /// The first file whose names found do not make up its link count.
    pub fn uncovered(&self, scanned: &[PathBuf]) -> Result<(), AliasError> {
        match self
            .linked
            .iter()
            .find(|l| (l.names.len() as u64) < l.nlink)
        {
            None => Ok(()),
            Some(l) => Err(AliasError::UncoveredLinks {
                path: l.names.first().cloned().unwrap_or_default(),
                links: l.nlink,
                found: l.names.clone(),
                scanned: scanned.to_vec(),
            }),
        }
    }
}

/// Walk `top` without following symlinks, skipping `skip` (and what lies
/// beneath them), calling `visit` on every entry that is not a directory.
/// `false` when `budget` ran out first. A directory this user cannot list
/// is passed over: the user (and so a command run as it) cannot find a
/// name in it either.
fn walk(
    top: &Path,
    skip: &[PathBuf],
    budget: &mut usize,
    visit: &mut dyn FnMut(&Path, &std::fs::Metadata),
) -> io::Result<bool> {
    let mut stack = vec![top.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        for entry in entries {
            let Ok(entry) = entry else { continue };
            if *budget == 0 {
                return Ok(false);
            }
            *budget -= 1;
            let path = entry.path();
            // `DirEntry::metadata` does not follow a symlink.
            let Ok(m) = entry.metadata() else { continue };
            if m.is_dir() {
                if !skip.iter().any(|s| path.starts_with(s)) {
                    stack.push(path);
                }
            } else {
                visit(&path, &m);
            }
        }
    }
    Ok(true)
}

/// What a look for one object beneath a directory found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A name of it beneath the directory.
    Found(PathBuf),
    Absent,
    /// The walk stopped at its budget first.
    Stopped,
}

/// Whether the object `(dev, ino)` has a name beneath `dir` (symlinks not
/// followed), looking at no more than `budget` entries.
pub fn find_object(dir: &Path, dev: u64, ino: u64, budget: &mut usize) -> io::Result<Lookup> {
    let mut hit = None;
    let mut look = |path: &Path, m: &std::fs::Metadata| {
        if hit.is_none() && m.dev() == dev && m.ino() == ino {
            hit = Some(path.to_path_buf());
        }
    };
    let complete = walk(dir, &[], budget, &mut look)?;
    Ok(match hit {
        Some(p) => Lookup::Found(p),
        None if complete => Lookup::Absent,
        None => Lookup::Stopped,
    })
}

/// The files with more than one name in the `denied` objects (resolved
/// paths; the trees beneath `carved` are not denied: a writable root inside
/// a denied directory is readable), then their other names found in
/// `roots` (the trees a planted link would be in).
pub fn hard_links(
    denied: &[PathBuf],
    carved: &[PathBuf],
    roots: &[PathBuf],
) -> Result<Links, AliasError> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AliasError::Read { path, source }
    };
    let mut found: BTreeMap<(u64, u64), Linked> = BTreeMap::new();
    let mut unwalked = Vec::new();
    let mut note = |path: &Path, m: &std::fs::Metadata| {
        if m.nlink() > 1 {
            let l = found.entry((m.dev(), m.ino())).or_insert_with(|| Linked {
                dev: m.dev(),
                ino: m.ino(),
                nlink: m.nlink(),
                names: Vec::new(),
            });
            if !l.names.iter().any(|n| n == path) {
                l.names.push(path.to_path_buf());
            }
        }
    };
    for d in denied {
        let m = match std::fs::symlink_metadata(d) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(read(d)(e)),
        };
        if !m.is_dir() {
            note(d, &m);
            continue;
        }
        let mut budget = WALK_LIMIT;
        if !walk(d, carved, &mut budget, &mut note).map_err(read(d))? {
            unwalked.push(d.clone());
        }
    }
    let mut links = Links {
        linked: found.into_values().collect(),
        unwalked,
    };
    let wanted = |l: &Links| l.linked.iter().any(|x| (x.names.len() as u64) < x.nlink);
    let mut budget = WALK_LIMIT;
    for root in roots {
        if !wanted(&links) {
            break;
        }
        // The denied trees were walked already (their names are in).
        let skip: Vec<PathBuf> = denied
            .iter()
            .filter(|d| d.starts_with(root))
            .cloned()
            .collect();
        if denied.iter().any(|d| root.starts_with(d)) && !carved.iter().any(|c| root.starts_with(c))
        {
            continue;
        }
        let mut add = |path: &Path, m: &std::fs::Metadata| {
            if m.nlink() < 2 {
                return;
            }
            if let Some(l) = links
                .linked
                .iter_mut()
                .find(|l| l.dev == m.dev() && l.ino == m.ino())
                && !l.names.iter().any(|n| n == path)
            {
                l.names.push(path.to_path_buf());
            }
        };
        let _complete = walk(root, &skip, &mut budget, &mut add).map_err(read(root))?;
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 254:0 /home/u /mnt/home\\040copy rw,relatime shared:1 master:2 - ext4 /dev/vda rw
41 27 254:0 /home/u/.ssh /srv/keys rw,relatime - ext4 /dev/vda rw
42 27 254:0 /home/u/.ssh/id /opt/id ro - ext4 /dev/vda rw
43 27 254:0 /home /data/homes rw - ext4 /dev/vda rw
50 27 8:1 / /home/u/.ssh/vault rw - xfs /dev/sda1 rw
51 27 8:1 / /backup rw - xfs /dev/sda1 rw
52 27 8:1 /inner /elsewhere rw - xfs /dev/sda1 rw
60 27 254:0 /var /var rw - ext4 /dev/vda rw
61 27 0:50 / /home/u/cache rw - tmpfs tmpfs rw
62 61 0:51 / /home/u/cache rw - tmpfs tmpfs rw
";

    fn mounts() -> Vec<Mount> {
        parse_mountinfo(HOST.as_bytes(), Path::new("mountinfo")).unwrap()
    }

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn mountinfo_fields_and_octal_escapes_are_read() {
        let m = mounts();
        assert_eq!(m.len(), 12);
        assert_eq!(
            m[2],
            Mount {
                id: 40,
                parent: 27,
                dev: (254, 0),
                root: "/home/u".into(),
                mount_point: "/mnt/home copy".into(),
            }
        );
        assert_eq!(unescape(br"a\011b\012c\134d\040"), Path::new("a\tb\nc\\d "));
        // Not an escape: kept as written.
        assert_eq!(unescape(br"x\9y\1"), Path::new(r"x\9y\1"));
        assert_eq!(
            unescape(b"caf\\303\\251"),
            PathBuf::from(OsString::from_vec("café".as_bytes().to_vec()))
        );
        for bad in [
            "27 1 254:0 / /",
            "x 1 254:0 / / rw - ext4 a rw",
            "1 2 254 / / rw - e a r",
        ] {
            let e = parse_mountinfo(bad.as_bytes(), Path::new("mi")).unwrap_err();
            assert!(matches!(e, AliasError::Malformed { line: 1, .. }), "{e}");
        }
    }

    #[test]
    fn a_denied_directory_maps_to_every_mount_that_shows_it() {
        let got = mount_aliases(&mounts(), Path::new("/home/u/.ssh"));
        assert_eq!(
            got,
            paths(&[
                // The vault filesystem mounted inside it, elsewhere whole and
                // in part.
                "/backup",
                // The home's second mount, and the whole /home's.
                "/data/homes/u/.ssh",
                "/elsewhere",
                "/mnt/home copy/.ssh",
                // A file of it bound alone.
                "/opt/id",
                // The directory itself bound elsewhere.
                "/srv/keys",
            ])
        );
    }

    #[test]
    fn a_path_inside_a_subtree_bind_maps_back_through_the_root_field() {
        // Reached through the bind of /home/u/.ssh at /srv/keys: the same
        // file under the original and every other mount.
        let got = mount_aliases(&mounts(), Path::new("/srv/keys/id"));
        assert_eq!(
            got,
            paths(&[
                "/data/homes/u/.ssh/id",
                "/home/u/.ssh/id",
                "/mnt/home copy/.ssh/id",
                "/opt/id",
            ])
        );
        // A file of another filesystem, and one shown once: nothing.
        assert!(mount_aliases(&mounts(), Path::new("/proc/1/environ")).is_empty());
        assert_eq!(
            mount_aliases(&mounts(), Path::new("/etc/shadow")),
            Vec::<PathBuf>::new()
        );
        // A mount of the same device whose root does not cover it: /var's
        // bind says nothing about /etc.
        assert!(
            !mount_aliases(&mounts(), Path::new("/etc"))
                .iter()
                .any(|p| p.starts_with("/var"))
        );
    }

    #[test]
    fn the_top_of_a_mount_stack_is_the_one_reached() {
        let m = mounts();
        assert_eq!(host(&m, Path::new("/home/u/cache/x")).unwrap().id, 62);
        assert_eq!(host(&m, Path::new("/home/u/.ssh/vault/k")).unwrap().id, 50);
        assert_eq!(host(&m, Path::new("/home/u/.ssh/k")).unwrap().id, 27);
    }

    #[test]
    fn hard_links_are_found_in_the_scanned_roots_and_counted() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let (secret, ws, other) = (base.join("secret"), base.join("ws"), base.join("other"));
        for d in [&secret, &ws, &other, &ws.join("deep/er")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(secret.join("key"), "k").unwrap();
        std::fs::write(secret.join("plain"), "p").unwrap();
        std::fs::hard_link(secret.join("key"), ws.join("deep/er/copy")).unwrap();
        std::fs::hard_link(secret.join("key"), secret.join("key.bak")).unwrap();
        let denied = vec![secret.clone()];
        let links = hard_links(&denied, &[], std::slice::from_ref(&ws)).unwrap();
        links.uncovered(std::slice::from_ref(&ws)).unwrap();
        assert_eq!(links.other_names(&denied, &[]), [ws.join("deep/er/copy")]);
        // One more name, outside the scanned tree: refused, naming it.
        std::fs::hard_link(secret.join("key"), other.join("far")).unwrap();
        let links = hard_links(&denied, &[], std::slice::from_ref(&ws)).unwrap();
        let e = links.uncovered(std::slice::from_ref(&ws)).unwrap_err();
        match &e {
            AliasError::UncoveredLinks { links, found, .. } => {
                assert_eq!(*links, 4);
                assert_eq!(found.len(), 3, "{found:?}");
            }
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("has 4 names"), "{e}");
        // Naming the far one on the list too accounts for it.
        let both = vec![secret.clone(), other.join("far")];
        let links = hard_links(&both, &[], std::slice::from_ref(&ws)).unwrap();
        links.uncovered(std::slice::from_ref(&ws)).unwrap();
        assert_eq!(links.other_names(&both, &[]), [ws.join("deep/er/copy")]);
        // A denied file (not directory) counts the same; a carved-out root
        // inside a denied directory is not denied.
        let one = |p: &PathBuf| vec![p.clone()];
        let links = hard_links(&[secret.join("plain")], &[], &one(&ws)).unwrap();
        assert!(links.linked.is_empty());
        let links = hard_links(&one(&base), &one(&ws), &one(&ws)).unwrap();
        assert!(
            links
                .other_names(&one(&base), &one(&ws))
                .contains(&ws.join("deep/er/copy"))
        );
    }
}
