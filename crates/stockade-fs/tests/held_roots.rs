//! The writable roots are held: a confined command that renames the
//! workspace (or a temp root) away and puts a symlink, or another directory,
//! at its path between two calls makes the next call fail closed, and
//! nothing lands where the path now points.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{OUTSIDE_CONTENTS, Scene, leftover_temp_files};
use stockade_core::{ExecutionPolicy, SandboxMode};
use stockade_fs::{FileSystem, FsError, RootError, RootPins, SandboxedFs};

const WW: SandboxMode = SandboxMode::WorkspaceWrite;

/// What is put at a root's path once the root is renamed away.
#[derive(Debug, Clone, Copy)]
enum Replacement {
    AbsoluteSymlink,
    RelativeSymlink,
    NewDirectory,
}

const REPLACEMENTS: [Replacement; 3] = [
    Replacement::AbsoluteSymlink,
    Replacement::RelativeSymlink,
    Replacement::NewDirectory,
];

/// Rename `root` to `away` and put `with` at `root` (a symlink to
/// `outside`, or a fresh directory).
fn swap(root: &Path, away: &Path, outside: &Path, with: Replacement) {
    fs::rename(root, away).unwrap();
    match with {
        Replacement::AbsoluteSymlink => symlink(outside, root).unwrap(),
        Replacement::RelativeSymlink => {
            // Both lie in the scratch dir.
            symlink(outside.file_name().unwrap(), root).unwrap();
        }
        Replacement::NewDirectory => fs::create_dir(root).unwrap(),
    }
}

/// `err` is the fail-closed error about `root`: not a denial (no mode
/// would make the moved root right), naming the root.
fn assert_closed(err: &FsError, root: &Path, what: &str) {
    assert!(
        matches!(
            err,
            FsError::Root {
                source: RootError::Moved { .. },
                ..
            }
        ),
        "{what}: {err}"
    );
    assert!(!err.is_denied(), "{what}: {err}");
    let text = err.to_string();
    assert!(text.contains(&root.display().to_string()), "{what}: {text}");
    assert!(
        text.contains("no longer names the directory held for it"),
        "{text}"
    );
}

#[test]
fn a_workspace_swapped_between_calls_fails_closed() {
    for with in REPLACEMENTS {
        let scene = Scene::new();
        let fs_ = SandboxedFs::with_temp_roots(vec![scene.faketmp.clone()]);
        let policy = scene.policy(WW);
        fs_.write(Path::new("first.txt"), b"first\n", &policy)
            .unwrap();

        let away = scene.scratch.join("ws-away");
        swap(&scene.ws, &away, &scene.outside, with);
        let before = scene.whole_state();
        for path in [
            PathBuf::from("second.txt"),
            PathBuf::from("f"),
            PathBuf::from("sub/new.txt"),
            scene.ws.join("third.txt"),
        ] {
            let err = fs_.write(&path, b"ESCAPED\n", &policy).unwrap_err();
            assert_closed(&err, &scene.ws, &format!("{with:?} write {path:?}"));
        }
        for path in ["first.txt", "f"] {
            let err = fs_
                .edit(Path::new(path), "untouched", "ESCAPED", true, &policy)
                .unwrap_err();
            assert_closed(&err, &scene.ws, &format!("{with:?} edit {path}"));
        }
        // A temp root write fails too: the session's roots were tampered
        // with, so nothing is written until a new session holds them again.
        let err = fs_
            .write(&scene.faketmp.join("t"), b"x", &policy)
            .unwrap_err();
        assert_closed(&err, &scene.ws, &format!("{with:?} temp write"));

        assert_eq!(scene.whole_state(), before, "{with:?}: something changed");
        assert_eq!(
            fs::read_to_string(scene.outside.join("f")).unwrap(),
            OUTSIDE_CONTENTS
        );
        assert_eq!(fs::read(away.join("first.txt")).unwrap(), b"first\n");
        assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
    }
}

/// `/tmp` and `$TMPDIR` (private stand-ins for both) are held when the
/// pins are built; either swapped fails the next call closed.
#[test]
fn a_temp_root_swapped_between_calls_fails_closed() {
    for with in REPLACEMENTS {
        for which in ["tmp", "tmpdir"] {
            let scene = Scene::new();
            let tmp = scene.faketmp.clone();
            let tmpdir = scene.scratch.join("faketmpdir");
            fs::create_dir(&tmpdir).unwrap();
            let pins = Arc::new(RootPins::new(
                Some(&tmp),
                Some(tmpdir.clone().into_os_string()),
            ));
            assert_eq!(pins.temp_roots().len(), 2, "{:?}", pins.tmpdir_note());
            let fs_ = SandboxedFs::with_pins(pins);
            let policy = scene.policy(WW);
            fs_.write(&tmp.join("a"), b"a", &policy).unwrap();
            fs_.write(&tmpdir.join("a"), b"a", &policy).unwrap();

            let root = if which == "tmp" { &tmp } else { &tmpdir };
            let away = scene.scratch.join(format!("{which}-away"));
            swap(root, &away, &scene.outside, with);
            let before = scene.whole_state();
            let what = format!("{with:?} {which}");
            let err = fs_
                .write(&root.join("b"), b"ESCAPED\n", &policy)
                .unwrap_err();
            assert_closed(&err, root, &what);
            let err = fs_
                .write(&root.join("f"), b"ESCAPED\n", &policy)
                .unwrap_err();
            assert_closed(&err, root, &what);
            let err = fs_
                .edit(&root.join("a"), "a", "ESCAPED", false, &policy)
                .unwrap_err();
            assert_closed(&err, root, &what);
            let err = fs_
                .write(Path::new("in-ws.txt"), b"x", &policy)
                .unwrap_err();
            assert_closed(&err, root, &what);

            assert_eq!(scene.whole_state(), before, "{what}: something changed");
            assert_eq!(fs::read(away.join("a")).unwrap(), b"a");
        }
    }
}

/// A thread swaps the workspace's path (renamed away, a symlink to outside
/// put there, removed, renamed back) in a tight loop while this thread
/// writes. Each write either fails closed or lands in the held directory:
/// never outside, whatever the interleaving.
#[test]
fn a_workspace_swapped_in_a_tight_loop_never_leaks() {
    const WRITES: usize = 2000;
    let scene = Scene::fast();
    let fs_ = SandboxedFs::with_temp_roots(vec![scene.faketmp.clone()]);
    let policy = scene.policy(WW);
    // Held before the race starts, as a session's first call would.
    fs_.write(Path::new("held.txt"), b"held\n", &policy)
        .unwrap();
    let before = scene.outside_state();
    let ws = scene.ws.clone();
    let away = scene.scratch.join("ws-away");
    let outside = scene.outside.clone();
    let stop = AtomicBool::new(false);

    let (swaps, written, refused, other) = std::thread::scope(|s| {
        let swapper = s.spawn(|| {
            let mut swaps = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Always a whole cycle, so the workspace is back at the end.
                fs::rename(&ws, &away).unwrap();
                if swaps.is_multiple_of(2) {
                    symlink(&outside, &ws).unwrap();
                } else {
                    symlink("outside", &ws).unwrap();
                }
                fs::remove_file(&ws).unwrap();
                fs::rename(&away, &ws).unwrap();
                swaps += 1;
                // Leave the real workspace in place a moment now and then,
                // so some writes get through.
                if swaps.is_multiple_of(4) {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            swaps
        });
        let (mut written, mut refused, mut other) = (Vec::new(), 0usize, Vec::new());
        for i in 0..WRITES {
            let name = format!("f{i}");
            let path = if i.is_multiple_of(2) {
                PathBuf::from(&name)
            } else {
                ws.join(&name)
            };
            match fs_.write(&path, name.as_bytes(), &policy) {
                Ok(out) => {
                    assert_eq!(out.path, ws.join(&name));
                    written.push(name);
                }
                Err(FsError::Root { .. }) => refused += 1,
                // e.g. a denial, should the lexical choice ever see the
                // symlink (it must not), or an I/O error.
                Err(e) => other.push(e.to_string()),
            }
        }
        stop.store(true, Ordering::Relaxed);
        (swapper.join().unwrap(), written, refused, other)
    });

    eprintln!(
        "attempts={WRITES} written={} refused={refused} other={} {:?} swaps={swaps}",
        written.len(),
        other.len(),
        other.first()
    );
    assert_eq!(scene.outside_state(), before, "a write landed outside");
    assert_eq!(
        fs::read_to_string(scene.outside.join("f")).unwrap(),
        OUTSIDE_CONTENTS
    );
    // Every write reported done is in the workspace, which was the held
    // directory all along.
    for name in &written {
        assert_eq!(fs::read(scene.ws.join(name)).unwrap(), name.as_bytes());
    }
    assert!(other.is_empty(), "{other:?}");
    assert!(swaps >= 100, "only {swaps} swaps");
    assert!(!written.is_empty(), "no write ever got through");
    assert!(refused > 0, "no write ever met a swapped workspace");
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
}

/// A workspace of `/` would make workspace-write mean everything.
#[test]
fn a_workspace_of_slash_is_refused() {
    let fs_ = SandboxedFs::with_temp_roots(vec![]);
    let policy = ExecutionPolicy::new(WW, "/");
    let name = format!("stockade-fs-slash-{}", std::process::id());
    let target = Path::new("/").join(&name);
    for path in [PathBuf::from(&name), target.clone()] {
        let err = fs_.write(&path, b"x", &policy).unwrap_err();
        assert!(
            matches!(
                err,
                FsError::Root {
                    source: RootError::FilesystemRoot { .. },
                    ..
                }
            ),
            "{path:?}: {err}"
        );
        assert!(err.to_string().contains("filesystem root"), "{err}");
    }
    let err = fs_
        .edit(Path::new("etc/hostname"), "a", "b", false, &policy)
        .unwrap_err();
    assert!(matches!(err, FsError::Root { .. }), "{err}");
    assert!(!target.exists());
}
