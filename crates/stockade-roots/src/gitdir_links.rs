//! Symlinks a run leaves inside a git directory it may write.
//!
//! The names git writes while working (`COMMIT_EDITMSG`, `SQUASH_MSG`,
//! `MERGE_MSG`, `FETCH_HEAD`, the reflogs under `logs/`, ...) stay writable
//! in the sandbox, so a run can put a symlink in place of one. git opens
//! several of them with a plain `open(O_CREAT|O_TRUNC)` or an append, which
//! follows the link: a run that leaves `.git/SQUASH_MSG -> ~/.bashrc` and a
//! branch whose commit message is a shell command has the user's next
//! `git merge --squash` write that command into `~/.bashrc` (tried for
//! real: `COMMIT_EDITMSG` takes the user's next message, `logs/HEAD` gets
//! the next reflog line). A directory there replaced by a link (`refs/heads
//! -> ~/bin`) sends git's lock-and-rename writes elsewhere.
//!
//! git itself makes no symlinks there, so after the run every symlink that
//! was not there before (by name and identity) in such a git directory (its
//! top level; everything below `logs/`, `refs/`, `rr-cache/`,
//! `rebase-merge/`, `rebase-apply/` and `sequencer/`; the entries of
//! `objects/`) is renamed aside like a protect-list name. The walk holds
//! each directory open and never follows a link.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// Walked to any depth (bounded).
const DEEP: &[&str] = &[
    "logs",
    "refs",
    "rr-cache",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
];
/// Only their own entries are looked at (object files are never rewritten
/// in place; a fan-out directory replaced by a link is what counts).
const SHALLOW: &[&str] = &["objects"];
/// At most this many entries are looked at in one git directory.
const MAX_ENTRIES: usize = 200_000;
const MAX_DEPTH: usize = 32;

/// A symlink inside the watched directory: its path below it, and what
/// it is (device, inode and target: an inode number is reused at once
/// when a link is removed and another made).
type Link = (Vec<OsString>, (u64, u64, Vec<u8>));

/// One git directory, held open, with the symlinks it had before the run.
#[derive(Debug)]
pub(crate) struct Watch {
    fd: OwnedFd,
    path: PathBuf,
    before: Vec<Link>,
}

/// What the look after the run found: paths renamed aside (with their new
/// names) and what could not be looked at.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub moved: Vec<(PathBuf, PathBuf)>,
    pub errors: Vec<(PathBuf, io::Error)>,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl Watch {
    /// Hold `dir` (resolved) and note its symlinks now.
    pub(crate) fn take(dir: &Path) -> io::Result<Self> {
        let fd = OwnedFd::from(crate::open_dir(dir)?);
        let mut before = Vec::new();
        let mut count = 0;
        walk(&fd, &mut Vec::new(), 0, &mut before, &mut count)?;
        Ok(Self {
            fd,
            path: dir.to_path_buf(),
            before,
        })
    }

    /// Rename aside every symlink that is new since [`Watch::take`].
    pub(crate) fn audit(
        &self,
        quarantine: impl Fn(&OwnedFd, &OsStr) -> io::Result<OsString>,
    ) -> Found {
        let mut out = Found::default();
        let mut now = Vec::new();
        let mut count = 0;
        if let Err(e) = walk(&self.fd, &mut Vec::new(), 0, &mut now, &mut count) {
            out.errors.push((self.path.clone(), e));
        }
        for (parts, id) in now {
            if self.before.iter().any(|(p, i)| *p == parts && *i == id) {
                continue;
            }
            let Some((name, dirs)) = parts.split_last() else {
                continue;
            };
            let mut path = self.path.clone();
            path.extend(dirs);
            let parent = match open_below(&self.fd, dirs) {
                Ok(p) => p,
                Err(e) => {
                    out.errors.push((path, e));
                    continue;
                }
            };
            let dir = parent.as_ref().unwrap_or(&self.fd);
            match quarantine(dir, name) {
                Ok(aside) => out.moved.push((path.join(name), path.join(aside))),
                Err(e) => out.errors.push((path.join(name), e)),
            }
        }
        out
    }
}

/// The directory `dirs` below `top`, each opened without following a link;
/// `None` for `top` itself.
fn open_below(top: &OwnedFd, dirs: &[OsString]) -> io::Result<Option<OwnedFd>> {
    let mut cur: Option<OwnedFd> = None;
    for d in dirs {
        let next = match &cur {
            Some(c) => rustix::fs::openat(c, d, DIR_FLAGS, Mode::empty())?,
            None => rustix::fs::openat(top, d, DIR_FLAGS, Mode::empty())?,
        };
        cur = Some(next);
    }
    Ok(cur)
}

/// Every symlink below `dir` (at `parts`) that the walk covers.
fn walk(
    dir: &OwnedFd,
    parts: &mut Vec<OsString>,
    depth: usize,
    out: &mut Vec<Link>,
    count: &mut usize,
) -> io::Result<()> {
    let mut entries = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        *count += 1;
        if *count > MAX_ENTRIES {
            return Err(io::Error::other(format!(
                "more than {MAX_ENTRIES} entries; the rest were not looked at"
            )));
        }
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let kind = FileType::from_raw_mode(st.st_mode);
        // The types differ by platform; only equality is used.
        #[allow(clippy::unnecessary_cast)]
        let id = (st.st_dev as u64, st.st_ino as u64);
        if kind == FileType::Symlink {
            let target = rustix::fs::readlinkat(dir, name, Vec::new())
                .map(|t| t.into_bytes())
                .unwrap_or_default();
            let id = (id.0, id.1, target);
            let mut p = parts.clone();
            p.push(name.to_os_string());
            out.push((p, id));
            continue;
        }
        if kind != FileType::Directory || depth >= MAX_DEPTH {
            continue;
        }
        let descend = if depth == 0 {
            DEEP.iter().chain(SHALLOW).any(|n| OsStr::new(n) == name)
        } else {
            // Below a shallow one nothing is walked.
            parts
                .first()
                .is_some_and(|top| DEEP.iter().any(|n| OsStr::new(n) == top))
        };
        if !descend {
            continue;
        }
        let sub = match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
            Ok(s) => s,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        parts.push(name.to_os_string());
        let r = walk(&sub, parts, depth + 1, out, count);
        parts.pop();
        r?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn only_new_symlinks_are_set_aside_wherever_git_writes() {
        let d = tempfile::tempdir().unwrap();
        let g = std::fs::canonicalize(d.path()).unwrap();
        for dir in ["logs/refs/heads", "refs/heads", "objects/ab", "hooks"] {
            std::fs::create_dir_all(g.join(dir)).unwrap();
        }
        // The user's own link, there before: kept.
        symlink("/nowhere", g.join("old-link")).unwrap();
        let w = Watch::take(&g).unwrap();
        symlink("/home/u/.bashrc", g.join("SQUASH_MSG")).unwrap();
        symlink("/home/u/.bashrc", g.join("logs/refs/heads/main")).unwrap();
        symlink("/home/u/bin", g.join("refs/tags")).unwrap();
        symlink("/x", g.join("objects/cd")).unwrap();
        // Not walked: below a fan-out directory, and outside the lists.
        symlink("/x", g.join("objects/ab/file")).unwrap();
        std::fs::remove_file(g.join("old-link")).unwrap();
        symlink("/elsewhere", g.join("old-link")).unwrap();
        let found = w.audit(|dir, name| {
            let mut aside = name.to_os_string();
            aside.push(".aside");
            rustix::fs::renameat(dir, name, dir, &aside)?;
            Ok(aside)
        });
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        let mut moved: Vec<_> = found
            .moved
            .iter()
            .map(|(p, _)| p.strip_prefix(&g).unwrap().to_path_buf())
            .collect();
        moved.sort();
        assert_eq!(
            moved,
            [
                "SQUASH_MSG",
                "logs/refs/heads/main",
                "objects/cd",
                "old-link",
                "refs/tags"
            ]
            .map(PathBuf::from)
        );
        assert!(
            std::fs::symlink_metadata(g.join("logs/refs/heads/main.aside"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(std::fs::symlink_metadata(g.join("objects/ab/file")).is_ok());
    }
}
