//! The fence against a real filesystem: every escape is refused AND nothing
//! outside the writable roots changes.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{OUTSIDE_CONTENTS, Scene, leftover_temp_files};
use stockade_core::{ExecutionPolicy, SandboxMode, texts};
use stockade_fs::{FileSystem, FsError, LocalFs, SandboxedFs};

const WW: SandboxMode = SandboxMode::WorkspaceWrite;

fn fenced(scene: &Scene) -> SandboxedFs {
    SandboxedFs::with_temp_roots(vec![scene.faketmp.clone()])
}

/// `path` written and edited under workspace-write: both refused with the
/// workspace-write marker, and nothing outside changed.
fn assert_refused(scene: &Scene, path: &Path) -> FsError {
    let fs_ = fenced(scene);
    let policy = scene.policy(WW);
    let before = scene.outside_state();
    let err = fs_.write(path, b"ESCAPED\n", &policy).unwrap_err();
    assert!(err.is_denied(), "write {path:?}: {err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&texts::denial_marker(WW)),
        "write {path:?}: {text}"
    );
    assert!(text.contains(&scene.ws.display().to_string()), "{text}");
    assert!(
        text.contains(&scene.faketmp.display().to_string()),
        "{text}"
    );
    assert_eq!(
        err.writable_roots(),
        Some(&[scene.ws.clone(), scene.faketmp.clone()][..])
    );
    let edit = fs_
        .edit(path, "untouched", "ESCAPED", true, &policy)
        .unwrap_err();
    assert!(edit.is_denied(), "edit {path:?}: {edit}");
    assert_eq!(
        scene.outside_state(),
        before,
        "{path:?} changed something outside"
    );
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
    err
}

#[test]
fn dot_dot_escapes_are_refused() {
    let scene = Scene::new();
    fs::create_dir(scene.ws.join("a")).unwrap();
    for path in [
        PathBuf::from("../outside/f"),
        PathBuf::from("../outside/new"),
        PathBuf::from("a/../../outside/f"),
        PathBuf::from("./a/./../../outside/sub/g"),
        PathBuf::from("../../../../../../../../new-at-slash"),
        // A sibling whose name starts with the workspace's name.
        PathBuf::from("../ws2/x"),
        PathBuf::from("../ws-x"),
        scene.ws.join("../outside/f"),
        scene.ws.join("a/../../outside/new"),
    ] {
        let err = assert_refused(&scene, &path);
        // The refused path is named absolute and normalized.
        let named = err.path().to_path_buf();
        assert!(!named.starts_with(&scene.ws), "{named:?}");
        assert!(
            err.to_string().contains(&named.display().to_string()),
            "{err}"
        );
    }
    assert!(!scene.scratch.join("ws2").exists());
    assert!(!scene.scratch.join("ws-x").exists());
}

#[test]
fn absolute_paths_outside_are_refused() {
    let scene = Scene::new();
    for path in [
        scene.outside.join("f"),
        scene.outside.join("new"),
        scene.outside.join("sub/deeper/new"),
        scene.scratch.join("next-to-ws"),
        scene.scratch.clone(),
    ] {
        let err = assert_refused(&scene, &path);
        assert_eq!(err.path(), path);
    }
    assert!(!scene.outside.join("sub/deeper").exists());
}

#[test]
fn a_symlink_to_an_outside_file_is_refused_and_left_alone() {
    let scene = Scene::new();
    let f = scene.outside.join("f");
    symlink(&f, scene.ws.join("abs")).unwrap();
    symlink("../outside/f", scene.ws.join("rel")).unwrap();
    symlink(scene.outside.join("dangling"), scene.ws.join("dangling")).unwrap();
    fs::create_dir(scene.ws.join("sub")).unwrap();
    symlink("../../outside/sub/g", scene.ws.join("sub/deep")).unwrap();
    // A chain: inside, inside, then out.
    symlink("hop2", scene.ws.join("hop1")).unwrap();
    symlink("sub/../rel", scene.ws.join("hop2")).unwrap();
    for name in ["abs", "rel", "dangling", "sub/deep", "hop1"] {
        let err = assert_refused(&scene, Path::new(name));
        assert!(
            err.to_string().contains(" is a symlink to "),
            "{name}: {err}"
        );
        assert!(
            fs::symlink_metadata(scene.ws.join(name))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{name} is no longer a symlink"
        );
    }
    assert!(!scene.outside.join("dangling").exists());
    let err = assert_refused(&scene, Path::new("abs"));
    assert_eq!(
        err.to_string(),
        format!(
            "{} writing {} is outside the writable roots ({} is a symlink to {}): {}, {}",
            texts::denial_marker(WW),
            scene.ws.join("abs").display(),
            scene.ws.join("abs").display(),
            f.display(),
            scene.ws.display(),
            scene.faketmp.display()
        )
    );
}

#[test]
fn a_symlink_to_an_outside_directory_is_refused() {
    let scene = Scene::new();
    symlink(&scene.outside, scene.ws.join("abs")).unwrap();
    symlink("../outside", scene.ws.join("rel")).unwrap();
    symlink("/", scene.ws.join("slash")).unwrap();
    fs::create_dir(scene.ws.join("a")).unwrap();
    symlink("../rel/sub", scene.ws.join("a/via")).unwrap();
    let outside_rel = scene.outside.strip_prefix("/").unwrap();
    for path in [
        PathBuf::from("abs/f"),
        PathBuf::from("abs/new"),
        PathBuf::from("abs/sub/g"),
        PathBuf::from("abs/sub/deeper/new"),
        PathBuf::from("rel/f"),
        PathBuf::from("rel/new"),
        PathBuf::from("a/via/g"),
        PathBuf::from("a/via/new"),
        Path::new("slash").join(outside_rel).join("f"),
        Path::new("slash").join(outside_rel).join("new"),
    ] {
        let err = assert_refused(&scene, &path);
        assert!(
            err.to_string().contains(" is a symlink to "),
            "{path:?}: {err}"
        );
    }
    assert!(!scene.outside.join("sub/deeper").exists());
}

#[test]
fn symlinks_that_stay_inside_are_followed() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    fs::create_dir_all(scene.ws.join("real/inner")).unwrap();
    fs::write(scene.ws.join("real/target.txt"), "old").unwrap();
    symlink("real", scene.ws.join("dir")).unwrap();
    symlink("real/target.txt", scene.ws.join("file")).unwrap();
    symlink("../target.txt", scene.ws.join("real/inner/up")).unwrap();
    symlink(scene.faketmp.join("t.txt"), scene.ws.join("to-tmp")).unwrap();
    let before = scene.outside_state();

    let out = fs_
        .write(Path::new("dir/inner/new"), b"n", &policy)
        .unwrap();
    assert_eq!(out.path, scene.ws.join("dir/inner/new"));
    assert_eq!(fs::read(scene.ws.join("real/inner/new")).unwrap(), b"n");

    // A final symlink is written through, and stays a symlink.
    let out = fs_.write(Path::new("file"), b"via link", &policy).unwrap();
    assert_eq!(out.path, scene.ws.join("real/target.txt"));
    assert!(!out.created);
    assert_eq!(
        fs::read(scene.ws.join("real/target.txt")).unwrap(),
        b"via link"
    );
    assert!(
        fs::symlink_metadata(scene.ws.join("file"))
            .unwrap()
            .is_symlink()
    );
    let out = fs_
        .edit(Path::new("real/inner/up"), "via", "through", false, &policy)
        .unwrap();
    assert_eq!(out.path, scene.ws.join("real/target.txt"));
    assert_eq!(
        fs::read(scene.ws.join("real/target.txt")).unwrap(),
        b"through link"
    );

    // Into another writable root.
    fs_.write(Path::new("to-tmp"), b"t", &policy).unwrap();
    assert_eq!(fs::read(scene.faketmp.join("t.txt")).unwrap(), b"t");
    assert_eq!(scene.outside_state(), before);
}

/// A thread flips `ws/d` between a real directory and a symlink to outside
/// (absolute and relative, alternately) while this thread writes `ws/d/f` in
/// a loop. Whatever interleaving the scheduler picks, nothing may ever land
/// outside.
#[test]
fn a_directory_swapped_for_a_symlink_mid_write_never_leaks() {
    let scene = Scene::fast();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    let before = scene.outside_state();
    let ws = scene.ws.clone();
    let outside = scene.outside.clone();
    let stash = ws.join("stash");
    fs::create_dir(&stash).unwrap();
    fs::create_dir(ws.join("d")).unwrap();
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_millis(2500);
    const MAX_FLIPS: usize = 20_000;

    let (flips, (ok, denied, other)) = std::thread::scope(|s| {
        let flipper = s.spawn(|| {
            let d = ws.join("d");
            let mut flips = 0;
            while !stop.load(Ordering::Relaxed) && flips < MAX_FLIPS {
                // Move whatever is at `d` (the real dir, or one the writer
                // just created) aside, inside the workspace.
                let _ = fs::rename(&d, stash.join(flips.to_string()));
                let target: &Path = if flips % 2 == 0 {
                    &outside
                } else {
                    Path::new("../outside")
                };
                let _ = symlink(target, &d);
                if fs::symlink_metadata(&d).is_ok_and(|m| m.is_symlink()) {
                    let _ = fs::remove_file(&d);
                }
                let _ = fs::create_dir(&d);
                flips += 1;
            }
            flips
        });
        let (mut ok, mut denied, mut other) = (0usize, 0usize, Vec::new());
        let mut i = 0;
        while Instant::now() < deadline && !flipper.is_finished() {
            match fs_.write(Path::new("d/f"), format!("write {i}\n").as_bytes(), &policy) {
                Ok(out) => {
                    assert!(out.path.starts_with(&ws), "{:?}", out.path);
                    ok += 1;
                }
                Err(e) if e.is_denied() => denied += 1,
                // e.g. `d` renamed away between opening and creating.
                Err(e) => other.push(e.to_string()),
            }
            i += 1;
        }
        stop.store(true, Ordering::Relaxed);
        (flipper.join().unwrap(), (ok, denied, other))
    });

    eprintln!(
        "flips={flips} ok={ok} denied={denied} other={} {:?}",
        other.len(),
        other.first()
    );
    assert_eq!(scene.outside_state(), before, "a write landed outside");
    assert_eq!(
        fs::read_to_string(scene.outside.join("f")).unwrap(),
        OUTSIDE_CONTENTS
    );
    assert!(flips >= 1000, "only {flips} flips");
    assert!(ok > 0, "no write ever got through ({denied} denied)");
    assert!(denied > 0, "no write ever met the symlink ({ok} ok)");
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
}

/// The same race on the final component: `ws/g` flips between a regular
/// file and a symlink to an outside file. An entry swapped in after it was
/// inspected is replaced by the rename, never followed.
#[test]
fn a_file_swapped_for_a_symlink_mid_write_never_leaks() {
    let scene = Scene::fast();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    let before = scene.outside_state();
    let g = scene.ws.join("g");
    let outside_f = scene.outside.join("f");
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_millis(1500);

    let (flips, ok, denied) = std::thread::scope(|s| {
        let flipper = s.spawn(|| {
            let mut flips = 0usize;
            while !stop.load(Ordering::Relaxed) && flips < 20_000 {
                let _ = fs::remove_file(&g);
                let _ = symlink(&outside_f, &g);
                let _ = fs::remove_file(&g);
                let _ = fs::write(&g, "inside\n");
                flips += 1;
            }
            flips
        });
        let (mut ok, mut denied) = (0usize, 0usize);
        while Instant::now() < deadline && !flipper.is_finished() {
            match fs_.write(Path::new("g"), b"written\n", &policy) {
                Ok(_) => ok += 1,
                Err(e) if e.is_denied() => denied += 1,
                Err(_) => {}
            }
        }
        stop.store(true, Ordering::Relaxed);
        (flipper.join().unwrap(), ok, denied)
    });
    eprintln!("flips={flips} ok={ok} denied={denied}");
    assert!(flips >= 1000, "only {flips} flips");
    assert_eq!(scene.outside_state(), before, "a write landed outside");
    assert!(ok > 0 && denied > 0, "ok={ok} denied={denied}");
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
}

#[cfg(target_os = "linux")]
#[test]
fn paths_through_proc_magic_links_are_refused() {
    use std::os::fd::AsRawFd as _;
    let scene = Scene::new();
    let outside_rel = scene.outside.strip_prefix("/").unwrap().to_path_buf();
    let ws_rel = scene.ws.strip_prefix("/").unwrap().to_path_buf();
    let proc_root = Path::new("/proc/self/root");
    symlink(proc_root, scene.ws.join("root")).unwrap();
    let ups = "../".repeat(scene.ws.components().count());
    symlink(format!("{ups}proc/self/root"), scene.ws.join("relroot")).unwrap();
    symlink(proc_root.join(&outside_rel).join("f"), scene.ws.join("pf")).unwrap();
    // An open directory handle of this process, reachable as a magic link.
    let held = fs::File::open(&scene.outside).unwrap();
    let fd_link = format!("/proc/self/fd/{}", held.as_raw_fd());
    symlink(&fd_link, scene.ws.join("fd")).unwrap();
    symlink("/proc/self/cwd", scene.ws.join("cwd")).unwrap();

    for path in [
        proc_root.join(&outside_rel).join("f"),
        proc_root.join(&outside_rel).join("new"),
        // Even one that names the workspace: `/proc` is under no root.
        proc_root.join(&ws_rel).join("x"),
        PathBuf::from(&fd_link).join("new"),
        Path::new("root").join(&outside_rel).join("f"),
        Path::new("root").join(&outside_rel).join("new"),
        Path::new("relroot").join(&outside_rel).join("new"),
        PathBuf::from("pf"),
        PathBuf::from("fd/new"),
        PathBuf::from("fd/f"),
        PathBuf::from("cwd/new"),
    ] {
        assert_refused(&scene, &path);
    }
    assert!(!scene.ws.join("x").exists());
    drop(held);
}

#[test]
fn a_hard_link_to_an_outside_file_is_replaced_not_written_through() {
    use std::os::unix::fs::MetadataExt as _;
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    let f = scene.outside.join("f");
    fs::hard_link(&f, scene.ws.join("h")).unwrap();
    fs::hard_link(&f, scene.ws.join("h2")).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().nlink(), 3);

    // Either outcome is safe; this implementation replaces the workspace's
    // directory entry.
    let out = fs_.write(Path::new("h"), b"new inside\n", &policy).unwrap();
    assert!(!out.created);
    assert_eq!(fs::read(scene.ws.join("h")).unwrap(), b"new inside\n");
    let out = fs_
        .edit(Path::new("h2"), "untouched", "edited", false, &policy)
        .unwrap();
    assert_eq!(out.replacements, 1);
    assert_eq!(
        fs::read_to_string(scene.ws.join("h2")).unwrap(),
        "outside, edited\n"
    );

    assert_eq!(fs::read_to_string(&f).unwrap(), OUTSIDE_CONTENTS);
    assert_eq!(fs::metadata(&f).unwrap().nlink(), 1);
    assert_ne!(
        fs::metadata(&f).unwrap().ino(),
        fs::metadata(scene.ws.join("h")).unwrap().ino()
    );
}

#[test]
fn non_utf8_names_are_written_and_fenced() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    let name = OsStr::from_bytes(b"caf\xe9-\xff.txt");
    let dir = OsStr::from_bytes(b"d\xfe\xfd");

    let out = fs_
        .write(&Path::new(dir).join(name), b"latin-1", &policy)
        .unwrap();
    assert_eq!(out.path, scene.ws.join(dir).join(name));
    assert_eq!(fs::read(scene.ws.join(dir).join(name)).unwrap(), b"latin-1");
    let listed = fs_.list(&scene.ws.join(dir)).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, name);
    assert_eq!(
        fs_.read(&scene.ws.join(dir).join(name)).unwrap(),
        b"latin-1"
    );
    fs_.edit(&Path::new(dir).join(name), "latin", "iso", false, &policy)
        .unwrap();
    assert_eq!(fs::read(scene.ws.join(dir).join(name)).unwrap(), b"iso-1");

    // Escapes spelled with non-UTF-8 names are refused like any other.
    symlink(
        &scene.outside,
        scene.ws.join(OsStr::from_bytes(b"\xff-out")),
    )
    .unwrap();
    assert_refused(
        &scene,
        &Path::new(OsStr::from_bytes(b"\xff-out")).join("new"),
    );
    assert_refused(&scene, &Path::new(dir).join("../../outside").join(name));
    let err = assert_refused(&scene, &scene.outside.join(name));
    assert_eq!(err.path(), scene.outside.join(name));
    assert!(!scene.outside.join(name).exists());
}

#[test]
fn read_only_refuses_every_write_and_edit_with_the_exact_marker() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(SandboxMode::ReadOnly);
    fs::write(scene.ws.join("existing.txt"), "keep me\n").unwrap();
    let before = scene.whole_state();
    for path in [
        PathBuf::from("existing.txt"),
        PathBuf::from("new.txt"),
        PathBuf::from("new/dir/file.txt"),
        scene.faketmp.join("t"),
        scene.outside.join("f"),
        PathBuf::from("/dev/null"),
    ] {
        let err = fs_.write(&path, b"no", &policy).unwrap_err();
        let want_path = if path.is_absolute() {
            path.clone()
        } else {
            scene.ws.join(&path)
        };
        assert_eq!(
            err.to_string(),
            format!(
                "[sandbox: file access denied under read-only mode] writing {} is refused: only /dev/null is writable",
                want_path.display()
            )
        );
        assert_eq!(err.writable_roots(), Some(&[][..]));
        assert_eq!(err.denied_mode(), Some(SandboxMode::ReadOnly));
        let err = fs_.edit(&path, "keep", "lose", false, &policy).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("[sandbox: file access denied under read-only mode] writing "),
            "{err}"
        );
    }
    assert_eq!(scene.whole_state(), before);
}

#[test]
fn workspace_write_allows_the_workspace_and_the_temp_roots() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    fs_.write(Path::new("inside.txt"), b"1", &policy).unwrap();
    fs_.write(&scene.ws.join("abs.txt"), b"2", &policy).unwrap();
    fs_.write(&scene.faketmp.join("t1"), b"3", &policy).unwrap();
    // Lexically leaves the workspace, but lands in a temp root.
    fs_.write(Path::new("../faketmp/t2"), b"4", &policy)
        .unwrap();
    assert_eq!(fs::read(scene.ws.join("inside.txt")).unwrap(), b"1");
    assert_eq!(fs::read(scene.ws.join("abs.txt")).unwrap(), b"2");
    assert_eq!(fs::read(scene.faketmp.join("t1")).unwrap(), b"3");
    assert_eq!(fs::read(scene.faketmp.join("t2")).unwrap(), b"4");
    // A spelling of the workspace through a symlink to it is recognized by
    // its canonical form.
    symlink(&scene.ws, scene.scratch.join("ws-alias")).unwrap();
    let aliased = ExecutionPolicy::new(WW, scene.scratch.join("ws-alias"));
    fs_.write(&scene.ws.join("canonical.txt"), b"5", &aliased)
        .unwrap();
    assert_eq!(fs::read(scene.ws.join("canonical.txt")).unwrap(), b"5");
}

/// The host's own temp roots, as `SandboxedFs::new()` finds them.
#[test]
fn the_host_tmp_is_a_writable_root() {
    let scene = Scene::new();
    let fs_ = SandboxedFs::new();
    assert_eq!(fs_.temp_roots().first(), Some(&PathBuf::from("/tmp")));
    let name = format!("stockade-fs-test-{}", std::process::id());
    let target = Path::new("/tmp").join(&name);
    let out = fs_.write(&target, b"tmp", &scene.policy(WW)).unwrap();
    assert_eq!(out.path, target);
    assert_eq!(fs::read(&target).unwrap(), b"tmp");
    fs::remove_file(&target).unwrap();
    // And the scratch dir, which is not a temp root, is refused.
    let err = fs_
        .write(&scene.outside.join("new"), b"x", &scene.policy(WW))
        .unwrap_err();
    assert!(err.is_denied(), "{err}");
}

#[test]
fn danger_full_access_and_the_local_provider_write_outside() {
    let scene = Scene::new();
    let danger = scene.policy(SandboxMode::DangerFullAccess);
    let fenced = fenced(&scene);
    fenced
        .write(&scene.outside.join("new"), b"full access", &danger)
        .unwrap();
    fenced
        .edit(
            Path::new("../outside/f"),
            "untouched",
            "edited",
            false,
            &danger,
        )
        .unwrap();
    assert_eq!(fs::read(scene.outside.join("new")).unwrap(), b"full access");
    assert_eq!(
        fs::read_to_string(scene.outside.join("f")).unwrap(),
        "outside, edited\n"
    );
    // The local provider ignores the mode entirely.
    for mode in SandboxMode::ALL {
        LocalFs
            .write(
                Path::new("../outside/local"),
                mode.as_str().as_bytes(),
                &scene.policy(*mode),
            )
            .unwrap();
        assert_eq!(
            fs::read(scene.outside.join("local")).unwrap(),
            mode.as_str().as_bytes()
        );
    }
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
}

#[test]
fn edit_errors_are_clear_and_change_nothing() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    let file = scene.ws.join("code.rs");
    let original = "let x = 1;\nlet y = 1;\nlet z = 1;\n";
    fs::write(&file, original).unwrap();

    let err = fs_
        .edit(Path::new("code.rs"), "let w", "let v", false, &policy)
        .unwrap_err();
    assert!(
        matches!(&err, FsError::OldTextNotFound { path } if *path == file),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the text to replace does not occur in {} (it must match exactly, including whitespace and indentation)",
            file.display()
        )
    );
    let err = fs_
        .edit(Path::new("code.rs"), "= 1;", "= 2;", false, &policy)
        .unwrap_err();
    assert!(matches!(err, FsError::NotUnique { count: 3, .. }), "{err}");
    assert!(err.to_string().contains("occurs 3 times in"), "{err}");
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), original);

    let out = fs_
        .edit(Path::new("code.rs"), "= 1;", "= 2;", true, &policy)
        .unwrap();
    assert_eq!(out.replacements, 3);
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "let x = 2;\nlet y = 2;\nlet z = 2;\n"
    );
    let out = fs_
        .edit(
            Path::new("code.rs"),
            "let y = 2;",
            "let y = 3;",
            false,
            &policy,
        )
        .unwrap();
    assert_eq!(out.replacements, 1);
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "let x = 2;\nlet y = 3;\nlet z = 2;\n"
    );
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
}

#[test]
fn a_failed_write_leaves_no_temp_file_behind() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    fs::write(scene.ws.join("plain"), "a file").unwrap();
    // A parent that is a file: the write fails before anything is created.
    let err = fs_
        .write(Path::new("plain/child"), b"x", &policy)
        .unwrap_err();
    assert!(matches!(err, FsError::Io { .. }), "{err}");
    assert!(err.to_string().contains("plain/child"), "{err}");
    assert_eq!(
        fs::read_to_string(scene.ws.join("plain")).unwrap(),
        "a file"
    );
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());
}

#[test]
fn a_symlink_loop_is_an_error_not_a_write() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    symlink("loop-b", scene.ws.join("loop-a")).unwrap();
    symlink("loop-a", scene.ws.join("loop-b")).unwrap();
    let before = scene.whole_state();
    let err = fs_
        .write(Path::new("loop-a"), b"x", &scene.policy(WW))
        .unwrap_err();
    assert!(matches!(err, FsError::TooManySymlinks { .. }), "{err}");
    assert!(err.to_string().contains("loop-a"), "{err}");
    assert_eq!(scene.whole_state(), before);
}

/// The policy rides each call: one provider serves two workspaces at once,
/// and each call may write its own root only.
#[test]
fn two_policies_on_one_provider_fence_independently() {
    let scene = Scene::new();
    let fs_ = SandboxedFs::with_temp_roots(vec![]);
    let (one, two) = (scene.ws.join("one"), scene.ws.join("two"));
    fs::create_dir(&one).unwrap();
    fs::create_dir(&two).unwrap();
    std::thread::scope(|s| {
        for (mine, theirs) in [(&one, &two), (&two, &one)] {
            let fs_ = &fs_;
            s.spawn(move || {
                let policy = ExecutionPolicy::new(WW, mine);
                for i in 0..50 {
                    fs_.write(Path::new(&format!("f{i}")), b"mine", &policy)
                        .unwrap();
                    let err = fs_
                        .write(&theirs.join(format!("g{i}")), b"theirs", &policy)
                        .unwrap_err();
                    assert!(err.is_denied(), "{err}");
                    assert_eq!(err.writable_roots(), Some(&[mine.clone()][..]));
                }
            });
        }
    });
    for dir in [&one, &two] {
        let names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 50);
        assert!(names.iter().all(|n| n.as_encoded_bytes().starts_with(b"f")));
    }
}
