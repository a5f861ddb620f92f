use std::os::unix::fs::symlink;

use super::*;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-roots-")
        .tempdir()
        .unwrap()
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn a_workspace_is_held_once_and_verified_after() {
    let d = tmp();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let pins = RootPins::without_temp_roots();
    let a = pins.workspace(&ws).unwrap();
    let b = pins.workspace(&ws).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.path(), real(&ws));
    assert_eq!(a.given(), ws);
}

#[test]
fn a_workspace_moved_away_and_replaced_fails_closed() {
    for replacement in ["symlink-to-root", "symlink-elsewhere", "new-directory"] {
        let d = tmp();
        let ws = d.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let pins = RootPins::without_temp_roots();
        let held = pins.workspace(&ws).unwrap();
        std::fs::rename(&ws, d.path().join("moved")).unwrap();
        match replacement {
            "symlink-to-root" => symlink("/", &ws).unwrap(),
            "symlink-elsewhere" => symlink(&other, &ws).unwrap(),
            _ => std::fs::create_dir(&ws).unwrap(),
        }
        let err = pins.workspace(&ws).unwrap_err();
        assert!(
            matches!(err, RootError::Moved { .. }),
            "{replacement}: {err}"
        );
        assert_eq!(err.path(), ws);
        assert!(err.to_string().contains(&ws.display().to_string()), "{err}");
        // The held handle still names the original directory.
        assert_eq!(
            held.file().metadata().unwrap().ino(),
            std::fs::metadata(d.path().join("moved")).unwrap().ino()
        );
    }
}

use std::os::unix::fs::MetadataExt;

#[test]
fn a_symlink_inside_a_writable_root_is_refused() {
    let d = tmp();
    let guard = real(d.path());
    let target = tmp();
    let link = guard.join("link");
    symlink(target.path(), &link).unwrap();
    let err = HeldDir::hold(RootKind::Workspace, &link, std::slice::from_ref(&guard)).unwrap_err();
    assert!(matches!(err, RootError::PlantedSymlink { .. }), "{err}");
    // Deeper: an ancestor swapped for a symlink.
    std::fs::create_dir_all(target.path().join("a/ws")).unwrap();
    let err = HeldDir::hold(RootKind::Workspace, &link.join("a/ws"), &[guard]).unwrap_err();
    assert!(matches!(err, RootError::PlantedSymlink { .. }), "{err}");
}

#[test]
fn a_symlink_outside_every_writable_root_is_followed() {
    let d = tmp();
    let target = d.path().join("t");
    std::fs::create_dir(&target).unwrap();
    let link = d.path().join("link");
    symlink(&target, &link).unwrap();
    let h = HeldDir::hold(RootKind::Workspace, &link, &[]).unwrap();
    assert_eq!(h.path(), real(&target));
    // Relative symlinks and `..` resolve like realpath.
    let rel = d.path().join("rel");
    symlink("t/../t", &rel).unwrap();
    let h = HeldDir::hold(RootKind::Workspace, &rel, &[]).unwrap();
    assert_eq!(h.path(), real(&target));
}

#[test]
fn relative_root_and_non_directories_are_refused() {
    let d = tmp();
    let f = d.path().join("file");
    std::fs::write(&f, b"x").unwrap();
    let pins = RootPins::without_temp_roots();
    for (p, want) in [
        (PathBuf::from("."), "Relative"),
        (PathBuf::from("ws"), "Relative"),
        (PathBuf::from("/"), "FilesystemRoot"),
        (PathBuf::from("/tmp/.."), "FilesystemRoot"),
        (f.clone(), "NotADirectory"),
        (d.path().join("missing"), "Open"),
    ] {
        let err = pins.workspace(&p).unwrap_err();
        let got = format!("{err:?}");
        assert!(got.starts_with(want), "{}: {got}", p.display());
    }
    let link_to_root = d.path().join("root");
    symlink("/", &link_to_root).unwrap();
    assert!(matches!(
        pins.workspace(&link_to_root).unwrap_err(),
        RootError::FilesystemRoot { .. }
    ));
}

#[test]
fn tmpdir_is_granted_only_when_absolute_and_not_planted() {
    let d = tmp();
    let t = real(d.path());
    let sub = t.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let pins = RootPins::new(Some(&t), Some(sub.clone().into_os_string()));
    assert_eq!(pins.temp_roots().len(), 2);
    assert!(pins.tmpdir_note().is_none());
    for bad in [".", "./", "..", "name", "/"] {
        let pins = RootPins::new(Some(&t), Some(bad.into()));
        assert_eq!(pins.temp_roots().len(), 1, "{bad}");
        assert!(pins.tmpdir_note().unwrap().contains("not granted"), "{bad}");
    }
    let elsewhere = tmp();
    let planted = t.join("planted");
    symlink(elsewhere.path(), &planted).unwrap();
    let pins = RootPins::new(Some(&t), Some(planted.into_os_string()));
    assert_eq!(pins.temp_roots().len(), 1);
    assert!(pins.tmpdir_note().unwrap().contains("symlink"));
    // The same directory as /tmp is granted once.
    let pins = RootPins::new(Some(&t), Some(t.clone().into_os_string()));
    assert_eq!(pins.temp_roots().len(), 1);
    assert!(pins.tmpdir_note().is_none());
}

#[test]
fn a_moved_tmpdir_fails_verification() {
    let d = tmp();
    let t = real(d.path());
    let other = tmp();
    let td = real(other.path()).join("td");
    std::fs::create_dir(&td).unwrap();
    let pins = RootPins::new(Some(&t), Some(td.clone().into_os_string()));
    pins.verify_temp().unwrap();
    std::fs::rename(&td, real(other.path()).join("gone")).unwrap();
    symlink("/", &td).unwrap();
    assert!(pins.verify_temp().is_err());
}

#[test]
fn beneath_judges_where_a_path_really_is() {
    let d = tmp();
    let root = real(d.path()).join("root");
    std::fs::create_dir(&root).unwrap();
    let roots = vec![root.clone()];
    assert_eq!(
        beneath(&root.join("missing/x.toml"), &roots),
        Some(root.clone())
    );
    assert_eq!(beneath(&root, &roots), Some(root.clone()));
    let outside = real(d.path()).join("outside");
    std::fs::create_dir(&outside).unwrap();
    assert_eq!(beneath(&outside.join("c.toml"), &roots), None);
    // A symlink from outside into the root is judged by its target.
    let link = outside.join("link");
    symlink(&root, &link).unwrap();
    assert_eq!(beneath(&link.join("c.toml"), &roots), Some(root.clone()));
    let pins = RootPins::without_temp_roots();
    let ws = pins.workspace(&root).unwrap();
    let err = pins
        .refuse_beneath("config", &root.join("stockade.toml"), Some(&ws))
        .unwrap_err();
    assert!(err.to_string().contains("config"), "{err}");
    pins.refuse_beneath("config", &outside.join("c.toml"), Some(&ws))
        .unwrap();
}

fn git_init(dir: &Path) {
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn git_hooks_and_config_are_protected_when_writable() {
    let d = tmp();
    let ws = real(d.path()).join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    let writable = vec![ws.clone()];
    let p = git_protected(&held, &writable).unwrap();
    let names: Vec<_> = p
        .iter()
        .filter(|p| p.read_only)
        .map(|p| p.path.clone())
        .collect();
    assert!(p.iter().any(|p| !p.read_only && p.path == ws.join(".git")));
    assert!(names.contains(&ws.join(".git/hooks")), "{names:?}");
    assert!(names.contains(&ws.join(".git/config")), "{names:?}");
    assert!(
        ws.join(".git/hooks").is_dir(),
        "a missing hooks dir is created"
    );
    // Not writable: nothing to protect.
    assert!(git_protected(&held, &[]).unwrap().is_empty());
    // From a subdirectory of the repository.
    std::fs::create_dir(ws.join("sub")).unwrap();
    let sub = pins.workspace(&ws.join("sub")).unwrap();
    assert_eq!(git_protected(&sub, &writable).unwrap().len(), 5);
}

#[test]
fn a_worktree_protects_its_git_file_and_both_git_dirs() {
    let d = tmp();
    let root = real(d.path());
    let main = root.join("main");
    std::fs::create_dir(&main).unwrap();
    git_init(&main);
    let git = |args: &[&str]| {
        assert!(
            std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .arg("-C")
                .arg(&main)
                .args(args)
                .status()
                .unwrap()
                .success()
        )
    };
    git(&["commit", "-q", "--allow-empty", "-m", "x"]);
    let wt = root.join("wt");
    git(&["worktree", "add", "-q", wt.to_str().unwrap()]);
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&wt).unwrap();
    let p = git_protected(&held, std::slice::from_ref(&root)).unwrap();
    let names: Vec<_> = p.iter().map(|p| p.path.clone()).collect();
    assert!(names.contains(&wt.join(".git")), "{names:?}");
    assert!(names.contains(&main.join(".git/hooks")), "{names:?}");
    assert!(names.contains(&main.join(".git/config")), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("commondir")), "{names:?}");
}

#[test]
fn a_symlinked_hooks_dir_is_refused() {
    let d = tmp();
    let ws = real(d.path()).join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
    symlink(d.path(), ws.join(".git/hooks")).unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    let err = git_protected(&held, std::slice::from_ref(&ws)).unwrap_err();
    assert!(matches!(err, RootError::ProtectedSymlink { .. }), "{err}");
}

#[test]
fn a_dot_git_of_another_owner_above_the_workspace_is_not_this_repository() {
    if !running_as_root() {
        return;
    }
    let d = tmp();
    let root = real(d.path());
    let ws = root.join("ws");
    std::fs::create_dir(&ws).unwrap();
    // Planted by someone else: a symlink that would otherwise be refused.
    symlink("/etc", root.join(".git")).unwrap();
    std::os::unix::fs::lchown(root.join(".git"), Some(65534), Some(65534)).unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    assert!(git_protected(&held, &[root]).unwrap().is_empty());
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

#[test]
fn a_tmpdir_planted_inside_the_workspace_fails_closed() {
    let d = tmp();
    let root = real(d.path());
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("tmp")).unwrap();
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    // A previous run replaced the project-local tmp with a symlink.
    std::fs::remove_dir(ws.join("tmp")).unwrap();
    symlink(&elsewhere, ws.join("tmp")).unwrap();
    let pins = RootPins::new(None, Some(ws.join("tmp").into_os_string()));
    let err = pins.workspace(&ws).unwrap_err();
    assert!(matches!(err, RootError::PlantedSymlink { .. }), "{err}");
    // A real directory there is fine.
    std::fs::remove_file(ws.join("tmp")).unwrap();
    std::fs::create_dir(ws.join("tmp")).unwrap();
    let pins = RootPins::new(None, Some(ws.join("tmp").into_os_string()));
    pins.workspace(&ws).unwrap();
}

#[test]
fn absent_redirecting_names_are_created_harmless_and_protected() {
    let d = tmp();
    let ws = real(d.path()).join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    let p = git_protected(&held, std::slice::from_ref(&ws)).unwrap();
    let names: Vec<_> = p.iter().map(|p| p.path.clone()).collect();
    for n in ["commondir", "config.worktree"] {
        assert!(names.contains(&ws.join(".git").join(n)), "{n}: {names:?}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/commondir")).unwrap(),
        ".\n"
    );
    // git still works with them.
    let st = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
        .arg(&ws)
        .args(["commit", "-q", "--allow-empty", "-m", "x"])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn submodule_and_worktree_git_dirs_are_protected_too() {
    let d = tmp();
    let root = real(d.path());
    let ws = root.join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    // A submodule's git dir and a linked worktree's, as git lays them out.
    let module = ws.join(".git/modules/sub");
    std::fs::create_dir_all(module.join("hooks")).unwrap();
    std::fs::write(module.join("HEAD"), "ref: refs/heads/master\n").unwrap();
    std::fs::write(module.join("config"), "").unwrap();
    let wt = ws.join(".git/worktrees/wt2");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("HEAD"), "ref: refs/heads/x\n").unwrap();
    std::fs::write(wt.join("commondir"), "../..\n").unwrap();
    std::fs::write(wt.join("gitdir"), "/elsewhere/.git\n").unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    let p = git_protected(&held, std::slice::from_ref(&ws)).unwrap();
    let names: Vec<_> = p.iter().map(|p| p.path.clone()).collect();
    for want in [
        module.join("hooks"),
        module.join("config"),
        module.join("commondir"),
        wt.join("commondir"),
        wt.join("config.worktree"),
        wt.join("gitdir"),
    ] {
        assert!(names.contains(&want), "{}: {names:?}", want.display());
    }
}

#[test]
fn a_dot_git_of_another_owner_inside_the_workspace_is_still_protected() {
    if !running_as_root() {
        return;
    }
    let d = tmp();
    let ws = real(d.path()).join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    std::os::unix::fs::chown(&ws, Some(65534), Some(65534)).unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    assert!(
        !git_protected(&held, std::slice::from_ref(&ws))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn hooks_path_and_includes_inside_a_root_are_protected_or_refused() {
    let d = tmp();
    let ws = real(d.path()).join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    std::fs::create_dir_all(ws.join(".husky/_")).unwrap();
    std::fs::write(
        ws.join("extra.gitconfig"),
        "[core]\n\tfsmonitor = ./fsm.sh\n",
    )
    .unwrap();
    std::fs::write(ws.join("fsm.sh"), "#!/bin/sh\n").unwrap();
    let mut cfg = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    cfg.push_str("[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../extra.gitconfig\n");
    std::fs::write(ws.join(".git/config"), cfg.clone()).unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    let p = git_protected(&held, std::slice::from_ref(&ws)).unwrap();
    let names: Vec<_> = p.iter().map(|p| p.path.clone()).collect();
    for want in [ws.join(".husky/_"), ws.join("extra.gitconfig")] {
        assert!(
            names
                .iter()
                .any(|n| std::fs::canonicalize(n).unwrap() == want),
            "{}: {names:?}",
            want.display()
        );
    }
    // fsmonitor named in the included file, relative to the working tree.
    assert!(names.iter().any(|n| n.ends_with("fsm.sh")), "{names:?}");
    // A hooksPath that does not exist yet inside the root: refused.
    std::fs::remove_dir_all(ws.join(".husky")).unwrap();
    let err = git_protected(&held, std::slice::from_ref(&ws)).unwrap_err();
    assert!(
        err.to_string().contains("missing inside a writable root"),
        "{err}"
    );
}
