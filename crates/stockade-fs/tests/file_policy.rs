//! The deployment's file policy in the file tools: extra writable roots
//! (held like the workspace, granted only under workspace-write), read-only
//! paths inside the writable roots and deny-read paths, both refused by
//! identity however the path is spelled.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{OUTSIDE_CONTENTS, Scene, snapshot};
use stockade_core::{ExecutionPolicy, FilePolicy, SandboxMode, texts};
use stockade_fs::{
    Access, EntryKind, FileSystem, FsError, LocalFs, ProtectedBy, RootError, SandboxedFs,
};

const RO: SandboxMode = SandboxMode::ReadOnly;
const WW: SandboxMode = SandboxMode::WorkspaceWrite;
const DFA: SandboxMode = SandboxMode::DangerFullAccess;

fn fenced(scene: &Scene) -> SandboxedFs {
    SandboxedFs::with_temp_roots(vec![scene.faketmp.clone()])
}

fn policy(scene: &Scene, mode: SandboxMode, files: FilePolicy) -> ExecutionPolicy {
    ExecutionPolicy::new(mode, &scene.ws).with_files(files)
}

fn writable(roots: &[&Path]) -> FilePolicy {
    FilePolicy {
        writable_roots: roots.iter().map(|p| p.to_path_buf()).collect(),
        ..FilePolicy::default()
    }
}

/// `err` refuses `access` to `asked` (absolute) because it reached the
/// deny-read path `denied`, with the bash marker first.
#[track_caller]
fn assert_deny_read(err: &FsError, mode: SandboxMode, access: Access, asked: &Path, denied: &Path) {
    match err {
        FsError::DenyRead {
            path,
            mode: m,
            access: a,
            denied: d,
        } => {
            assert_eq!((path.as_path(), *m, *a), (asked, mode, access), "{err}");
            assert_eq!(d, denied, "{err}");
        }
        other => panic!("not a deny-read refusal of {asked:?}: {other:?} ({other})"),
    }
    assert!(err.is_denied());
    assert_eq!(err.denied_mode(), Some(mode));
    assert_eq!(err.deny_read_path(), Some(denied));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{} ", texts::denial_marker(mode))),
        "{text}"
    );
    assert!(text.contains(&asked.display().to_string()), "{text}");
    assert!(text.contains(&denied.display().to_string()), "{text}");
    assert!(text.contains("deny-read list"), "{text}");
}

#[test]
fn an_extra_root_is_writable_and_its_siblings_are_not() {
    let scene = Scene::new();
    let cache = scene.scratch.join("cache");
    let sibling = scene.scratch.join("cache2");
    fs::create_dir(&cache).unwrap();
    fs::create_dir(&sibling).unwrap();
    symlink(&scene.outside, cache.join("out")).unwrap();
    let fs_ = fenced(&scene);
    let p = policy(&scene, WW, writable(&[&cache]));

    let w = fs_.write(&cache.join("a/b.txt"), b"old\n", &p).unwrap();
    assert_eq!(w.path, cache.join("a/b.txt"));
    assert!(w.created);
    fs_.edit(&cache.join("a/b.txt"), "old", "new", false, &p)
        .unwrap();
    assert_eq!(fs::read_to_string(cache.join("a/b.txt")).unwrap(), "new\n");
    // The workspace and the temp root stay writable beside it.
    fs_.write(Path::new("in-ws"), b"x", &p).unwrap();
    fs_.write(&scene.faketmp.join("t"), b"x", &p).unwrap();

    let roots = fs_.writable_roots(&p).unwrap();
    assert!(roots.contains(&cache), "{roots:?}");
    assert!(roots.contains(&scene.ws), "{roots:?}");
    let before = scene.outside_state();
    for refused in [
        sibling.join("x"),
        scene.scratch.join("x"),
        cache.join("out/x"),
        cache.join("../cache2/y"),
    ] {
        let err = fs_.write(&refused, b"no", &p).unwrap_err();
        assert!(
            matches!(err, FsError::Denied { .. }),
            "{refused:?}: {err:?}"
        );
        // The denial names the extra root among what is writable.
        assert!(
            err.writable_roots().unwrap().contains(&cache),
            "{refused:?}: {err}"
        );
        assert!(
            err.to_string().contains(&cache.display().to_string()),
            "{err}"
        );
    }
    let mut after = scene.outside_state();
    // The extra root is inside the scratch dir: only its own files changed.
    after.retain(|p, _| !p.starts_with(&cache));
    let mut before = before;
    before.retain(|p, _| !p.starts_with(&cache));
    assert_eq!(after, before);
    assert_eq!(fs::read_dir(&sibling).unwrap().count(), 0);
}

#[test]
fn a_missing_extra_root_is_granted_once_it_exists() {
    let scene = Scene::new();
    let later = scene.scratch.join("later");
    let fs_ = fenced(&scene);
    let p = policy(&scene, WW, writable(&[&later]));
    let err = fs_.write(&later.join("x"), b"x", &p).unwrap_err();
    assert!(err.is_denied(), "{err}");
    assert!(!fs_.writable_roots(&p).unwrap().contains(&later));
    assert!(!later.exists(), "a denied write created its root");
    fs::create_dir(&later).unwrap();
    fs_.write(&later.join("x"), b"x", &p).unwrap();
    assert!(fs_.writable_roots(&p).unwrap().contains(&later));
}

#[test]
fn read_only_grants_no_extra_root() {
    let scene = Scene::new();
    let cache = scene.scratch.join("cache");
    fs::create_dir(&cache).unwrap();
    fs::write(cache.join("f"), "old\n").unwrap();
    let fs_ = fenced(&scene);
    let p = policy(&scene, RO, writable(&[&cache]));
    assert_eq!(fs_.writable_roots(&p), Some(vec![]));
    for err in [
        fs_.write(&cache.join("f"), b"new\n", &p).unwrap_err(),
        fs_.edit(&cache.join("f"), "old", "new", false, &p)
            .unwrap_err(),
        fs_.write(&cache.join("g"), b"new\n", &p).unwrap_err(),
    ] {
        assert_eq!(err.writable_roots(), Some(&[][..]), "{err}");
        assert!(
            err.to_string().contains("only /dev/null is writable"),
            "{err}"
        );
    }
    assert_eq!(fs::read_to_string(cache.join("f")).unwrap(), "old\n");
    assert!(!cache.join("g").exists());
    // Danger-full-access needs no grant.
    fs_.write(
        &cache.join("g"),
        b"x",
        &policy(&scene, DFA, writable(&[&cache])),
    )
    .unwrap();
}

#[test]
fn an_extra_root_moved_after_first_use_fails_closed() {
    let scene = Scene::new();
    let cache = scene.scratch.join("cache");
    fs::create_dir(&cache).unwrap();
    let fs_ = fenced(&scene);
    let p = policy(&scene, WW, writable(&[&cache]));
    fs_.write(&cache.join("first"), b"1", &p).unwrap();
    fs::rename(&cache, scene.scratch.join("away")).unwrap();
    symlink(&scene.outside, &cache).unwrap();
    let before = snapshot(&scene.outside, &[]);
    let err = fs_.write(&cache.join("f"), b"pwned", &p).unwrap_err();
    assert!(
        matches!(
            err,
            FsError::Root {
                op: "write",
                source: RootError::Moved { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.is_denied());
    assert!(
        err.to_string().contains(&cache.display().to_string()),
        "{err}"
    );
    // Every write fails closed, not only those beneath the moved root.
    assert!(matches!(
        fs_.write(Path::new("in-ws"), b"x", &p),
        Err(FsError::Root { .. })
    ));
    assert_eq!(snapshot(&scene.outside, &[]), before);
    assert_eq!(
        fs::read_to_string(scene.outside.join("f")).unwrap(),
        OUTSIDE_CONTENTS
    );
}

#[test]
fn read_only_paths_refuse_write_and_edit_however_spelled() {
    let scene = Scene::new();
    let ws = &scene.ws;
    let vendor = ws.join("vendor");
    let locked = ws.join("locked.txt");
    fs::create_dir_all(vendor.join("lib")).unwrap();
    fs::create_dir(ws.join("sub")).unwrap();
    fs::write(vendor.join("lib/a.rs"), "old\n").unwrap();
    fs::write(&locked, "old\n").unwrap();
    symlink("vendor", ws.join("v")).unwrap();
    symlink("locked.txt", ws.join("lf")).unwrap();
    fs::hard_link(&locked, ws.join("hl")).unwrap();
    // One inside an extra root too.
    let cache = scene.scratch.join("cache");
    let pinned = cache.join("pinned");
    fs::create_dir_all(&pinned).unwrap();
    let files = FilePolicy {
        writable_roots: vec![cache.clone()],
        read_only: vec![vendor.clone(), locked.clone(), pinned.clone()],
        ..FilePolicy::default()
    };
    let fs_ = fenced(&scene);
    let p = policy(&scene, WW, files);
    let before = snapshot(&scene.scratch, &[]);
    for (asked, protected) in [
        (vendor.join("lib/a.rs"), &vendor),
        (vendor.join("new.rs"), &vendor),
        (vendor.join("deep/new.rs"), &vendor),
        (ws.join("v/lib/a.rs"), &vendor),
        (ws.join("sub/../vendor/lib/a.rs"), &vendor),
        (locked.clone(), &locked),
        (ws.join("lf"), &locked),
        (ws.join("hl"), &locked),
        (ws.join("sub/../locked.txt"), &locked),
        (pinned.join("x"), &pinned),
    ] {
        for err in [
            fs_.write(&asked, b"pwned\n", &p).unwrap_err(),
            fs_.edit(&asked, "old", "pwned", false, &p).unwrap_err(),
        ] {
            if matches!(err, FsError::NotFound { .. }) {
                // An edit creates no missing directory to judge.
                continue;
            }
            assert!(err.is_denied(), "{asked:?}: {err}");
            assert_eq!(err.protected_path(), Some(protected.as_path()), "{err}");
            assert_eq!(err.protected_by(), Some(ProtectedBy::Policy), "{err}");
            let text = err.to_string();
            assert!(text.starts_with(&texts::denial_marker(WW)), "{text}");
            assert!(text.contains("read_only list"), "{text}");
            assert!(!text.contains("git"), "{text}");
        }
    }
    assert_eq!(snapshot(&scene.scratch, &[]), before, "something changed");
    // Beside them everything stays writable.
    fs_.write(&ws.join("free.txt"), b"x", &p).unwrap();
    fs_.write(&cache.join("free.txt"), b"x", &p).unwrap();
    // A read-only path that is a symlink cannot be kept read-only: the call
    // fails closed, as a bash run does.
    let files = FilePolicy {
        read_only: vec![ws.join("lf")],
        ..FilePolicy::default()
    };
    let err = fs_
        .write(&ws.join("free.txt"), b"y", &policy(&scene, WW, files))
        .unwrap_err();
    assert!(
        matches!(
            err,
            FsError::Root {
                source: RootError::ProtectedSymlink { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(fs::read_to_string(ws.join("free.txt")).unwrap(), "x");
}

/// `ws/{secrets/{key, sub/k2}, .env, sub/}` with `secrets` and `.env`
/// denied, plus `home/.ssh/id` outside the workspace (denied too), and the
/// aliases a call might use.
struct Secrets {
    scene: Scene,
    secrets: PathBuf,
    env: PathBuf,
    ssh: PathBuf,
    files: FilePolicy,
}

fn secrets() -> Secrets {
    let scene = Scene::new();
    let ws = scene.ws.clone();
    let secrets = ws.join("secrets");
    let env = ws.join(".env");
    let ssh = scene.scratch.join("home/.ssh");
    fs::create_dir_all(secrets.join("sub")).unwrap();
    fs::create_dir_all(&ssh).unwrap();
    fs::create_dir(ws.join("sub")).unwrap();
    fs::write(secrets.join("key"), "old secret\n").unwrap();
    fs::write(secrets.join("sub/k2"), "old secret\n").unwrap();
    fs::write(&env, "old TOKEN=1\n").unwrap();
    fs::write(ssh.join("id"), "old private\n").unwrap();
    fs::write(ws.join("plain.txt"), "old plain\n").unwrap();
    symlink("secrets", ws.join("sl")).unwrap();
    symlink("secrets/key", ws.join("kl")).unwrap();
    symlink(ssh.join("id"), ws.join("idl")).unwrap();
    symlink(".env", ws.join("envl")).unwrap();
    fs::hard_link(&env, ws.join("env-hl")).unwrap();
    fs::hard_link(ssh.join("id"), ws.join("id-hl")).unwrap();
    let files = FilePolicy {
        deny_read: vec![secrets.clone(), env.clone(), ssh.clone()],
        ..FilePolicy::default()
    };
    Secrets {
        scene,
        secrets,
        env,
        ssh,
        files,
    }
}

#[test]
fn denied_dirs_and_files_refuse_read_list_edit_and_write_however_spelled() {
    let s = secrets();
    let ws = &s.scene.ws;
    let fs_ = fenced(&s.scene);
    let files: Vec<(PathBuf, &PathBuf)> = vec![
        (s.secrets.join("key"), &s.secrets),
        (s.secrets.join("sub/k2"), &s.secrets),
        (ws.join("sl/key"), &s.secrets),
        (ws.join("kl"), &s.secrets),
        (ws.join("sub/../secrets/key"), &s.secrets),
        (s.env.clone(), &s.env),
        (ws.join("envl"), &s.env),
        (ws.join("env-hl"), &s.env),
        (s.ssh.join("id"), &s.ssh),
        (ws.join("idl"), &s.ssh),
        (ws.join("sub/../../home/.ssh/id"), &s.ssh),
    ];
    for mode in [RO, WW] {
        let p = policy(&s.scene, mode, s.files.clone());
        let before = snapshot(&s.scene.scratch, &[]);
        for (asked, denied) in &files {
            let asked_abs = stockade_abs(asked);
            let err = fs_.read_under(asked, &p).unwrap_err();
            assert_deny_read(&err, mode, Access::Read, &asked_abs, denied);
            let err = fs_.write(asked, b"pwned\n", &p).unwrap_err();
            assert_deny_read(&err, mode, Access::Write, &asked_abs, denied);
            let err = fs_.edit(asked, "old", "pwned", false, &p).unwrap_err();
            assert_deny_read(&err, mode, Access::Write, &asked_abs, denied);
        }
        // A hard link to a file *inside* a denied directory is that file:
        // a file with several names is looked for in the denied directories.
        let asked = ws.join("id-hl");
        let err = fs_.read_under(&asked, &p).unwrap_err();
        assert_deny_read(&err, mode, Access::Read, &asked, &s.ssh);
        // Creating beneath a denied directory, and asking whether a name
        // exists there, are refused too.
        for asked in [s.secrets.join("new"), ws.join("sl/new")] {
            let err = fs_.write(&asked, b"x", &p).unwrap_err();
            assert_deny_read(&err, mode, Access::Write, &asked, &s.secrets);
            let err = fs_.read_under(&asked, &p).unwrap_err();
            assert_deny_read(&err, mode, Access::Read, &asked, &s.secrets);
        }
        for (dir, denied) in [
            (s.secrets.clone(), &s.secrets),
            (s.secrets.join("sub"), &s.secrets),
            (ws.join("sl"), &s.secrets),
            (ws.join("sl/sub/.."), &s.secrets),
            (s.ssh.clone(), &s.ssh),
        ] {
            let err = fs_.list_under(&dir, &p).unwrap_err();
            let asked = stockade_abs(&dir);
            assert_deny_read(&err, mode, Access::List, &asked, denied);
        }
        assert_eq!(snapshot(&s.scene.scratch, &[]), before, "{mode}");
        // The directories that hold them list, names and all.
        let names: Vec<_> = fs_
            .list_under(Path::new("."), &p)
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert!(
            names.contains(&("secrets".into(), EntryKind::Dir)),
            "{names:?}"
        );
        assert!(
            names.contains(&(".env".into(), EntryKind::File)),
            "{names:?}"
        );
        assert!(
            names.contains(&("sl".into(), EntryKind::Symlink)),
            "{names:?}"
        );
        let home = fs_.list_under(&s.scene.scratch.join("home"), &p).unwrap();
        assert_eq!(home.len(), 1);
        // And what is not denied reads as before.
        assert_eq!(
            fs_.read_under(Path::new("plain.txt"), &p).unwrap(),
            b"old plain\n"
        );
    }
    // Only workspace-write writes beside them.
    let p = policy(&s.scene, WW, s.files.clone());
    fs_.edit(&ws.join("plain.txt"), "old", "new", false, &p)
        .unwrap();
    // Danger-full-access enforces none of it.
    let p = policy(&s.scene, DFA, s.files.clone());
    assert_eq!(fs_.read_under(&ws.join("kl"), &p).unwrap(), b"old secret\n");
    assert_eq!(fs_.list_under(&s.secrets, &p).unwrap().len(), 2);
    fs_.edit(&s.env, "old", "new", false, &p).unwrap();
    assert_eq!(fs::read_to_string(&s.env).unwrap(), "new TOKEN=1\n");
    // The unfenced provider takes the policy and judges nothing by it.
    let p = policy(&s.scene, RO, s.files.clone());
    assert_eq!(
        LocalFs.read_under(&ws.join("kl"), &p).unwrap(),
        b"old secret\n"
    );
    assert_eq!(LocalFs.list_under(&s.secrets, &p).unwrap().len(), 2);
}

/// `path` as the fence names it: absolute, `.`/`..` applied lexically.
fn stockade_abs(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn a_denied_path_created_after_the_first_call_is_enforced_once_it_exists() {
    let scene = Scene::new();
    let ws = &scene.ws;
    let later = ws.join("later");
    let files = FilePolicy {
        deny_read: vec![later.clone()],
        ..FilePolicy::default()
    };
    let fs_ = fenced(&scene);
    let p = policy(&scene, WW, files);
    fs::write(ws.join("a"), "a\n").unwrap();
    // Missing: nothing to read, so nothing is enforced.
    assert_eq!(fs_.read_under(Path::new("a"), &p).unwrap(), b"a\n");
    assert!(matches!(
        fs_.read_under(&later, &p),
        Err(FsError::NotFound { .. })
    ));
    fs::create_dir(&later).unwrap();
    fs::write(later.join("k"), "k\n").unwrap();
    let err = fs_.read_under(&later.join("k"), &p).unwrap_err();
    assert_deny_read(&err, WW, Access::Read, &later.join("k"), &later);
    let err = fs_.list_under(&later, &p).unwrap_err();
    assert_deny_read(&err, WW, Access::List, &later, &later);
}

#[test]
fn a_denied_directory_moved_inside_a_writable_root_fails_closed() {
    let s = secrets();
    let ws = &s.scene.ws;
    let fs_ = fenced(&s.scene);
    let p = policy(&s.scene, WW, s.files.clone());
    // Held (workspace and secret alike) by a first call.
    fs_.write(Path::new("plain.txt"), b"x", &p).unwrap();
    fs::rename(&s.secrets, ws.join("moved")).unwrap();
    for err in [
        fs_.read_under(&ws.join("moved/key"), &p).unwrap_err(),
        fs_.list_under(&ws.join("moved"), &p).unwrap_err(),
        fs_.write(&ws.join("plain.txt"), b"y", &p).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                FsError::Root {
                    source: RootError::Moved { .. },
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let err = fs_.read_under(&ws.join("moved/key"), &p).unwrap_err();
    assert!(err.to_string().starts_with("cannot read "), "{err}");
    assert_eq!(fs::read_to_string(ws.join("plain.txt")).unwrap(), "x");
}
