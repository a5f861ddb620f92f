//! A scratch layout for the containment tests, and a way to prove nothing
//! outside the workspace changed.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use stockade_core::{ExecutionPolicy, SandboxMode};

/// `scratch/{ws, outside/{f, sub/}, faketmp}`, all real directories on a
/// real filesystem under the target dir (never `/tmp`, so the host's temp
/// root can never be what lets a write through). `ws` is the workspace,
/// `faketmp` the one temp root the fenced provider is given, `outside`
/// holds the files that must never change.
pub struct Scene {
    _dir: tempfile::TempDir,
    pub scratch: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub faketmp: PathBuf,
}

pub const OUTSIDE_CONTENTS: &str = "outside, untouched\n";

impl Scene {
    /// On the disk the target dir is on.
    pub fn new() -> Scene {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        Scene::in_dir(&base)
    }

    /// On a tmpfs (`/dev/shm`) when there is one. The race and property
    /// tests need thousands of metadata operations in seconds, and on the
    /// CI machine's disk each costs about a millisecond; `/dev/shm` is no
    /// writable root of the provider, so it proves as much as the disk.
    pub fn fast() -> Scene {
        let shm = Path::new("/dev/shm");
        let writable = shm.is_dir()
            && tempfile::Builder::new()
                .prefix("stockade-fs-probe-")
                .tempfile_in(shm)
                .is_ok();
        if writable {
            Scene::in_dir(shm)
        } else {
            Scene::new()
        }
    }

    fn in_dir(base: &Path) -> Scene {
        let dir = tempfile::Builder::new()
            .prefix("stockade-fs-")
            .tempdir_in(base)
            .unwrap();
        // Canonical, so symlink targets and expected paths are unambiguous.
        let scratch = fs::canonicalize(dir.path()).unwrap();
        let ws = scratch.join("ws");
        let outside = scratch.join("outside");
        let faketmp = scratch.join("faketmp");
        for d in [&ws, &outside, &outside.join("sub"), &faketmp] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(outside.join("f"), OUTSIDE_CONTENTS).unwrap();
        fs::write(outside.join("sub/g"), OUTSIDE_CONTENTS).unwrap();
        Scene {
            _dir: dir,
            scratch,
            ws,
            outside,
            faketmp,
        }
    }

    pub fn policy(&self, mode: SandboxMode) -> ExecutionPolicy {
        ExecutionPolicy::new(mode, &self.ws)
    }

    /// Everything in the scratch dir except the workspace and the temp root:
    /// what no fenced write may change.
    pub fn outside_state(&self) -> BTreeMap<PathBuf, Node> {
        snapshot(&self.scratch, &[&self.ws, &self.faketmp])
    }

    /// Everything in the scratch dir, the workspace included.
    pub fn whole_state(&self) -> BTreeMap<PathBuf, Node> {
        snapshot(&self.scratch, &[])
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    /// Contents and link count (a hard link changing shows here).
    File(Vec<u8>, u64),
    Link(PathBuf),
    Other,
}

/// Every entry beneath `root` (symlinks not followed), except the subtrees
/// in `skip`.
pub fn snapshot(root: &Path, skip: &[&Path]) -> BTreeMap<PathBuf, Node> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if skip.contains(&path.as_path()) {
                continue;
            }
            let m = fs::symlink_metadata(&path).unwrap();
            let node = if m.file_type().is_symlink() {
                Node::Link(fs::read_link(&path).unwrap())
            } else if m.is_dir() {
                todo.push(path.clone());
                Node::Dir
            } else if m.is_file() {
                Node::File(fs::read(&path).unwrap(), m.nlink())
            } else {
                Node::Other
            };
            out.insert(path, node);
        }
    }
    out
}

/// Whether any temp file of ours is left beneath `root`.
pub fn leftover_temp_files(root: &Path) -> Vec<PathBuf> {
    snapshot(root, &[])
        .into_keys()
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                n.as_encoded_bytes()
                    .starts_with(stockade_fs::TEMP_PREFIX.as_bytes())
            })
        })
        .collect()
}
