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
    let from_sub: Vec<_> = git_protected(&sub, &writable)
        .unwrap()
        .into_iter()
        .map(|p| p.path)
        .collect();
    let from_top: Vec<_> = p.into_iter().map(|p| p.path).collect();
    assert_eq!(from_sub, from_top);
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
fn a_symlinked_hooks_dir_makes_the_git_dir_read_only_not_the_run_fail() {
    let d = tmp();
    let ws = real(d.path()).join("repo");
    std::fs::create_dir(&ws).unwrap();
    git_init(&ws);
    std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
    symlink(d.path(), ws.join(".git/hooks")).unwrap();
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&ws).unwrap();
    // The link cannot be bound, so the directory holding it is read-only
    // as a whole for the run; the run itself goes on.
    let p = git_protected(&held, std::slice::from_ref(&ws)).unwrap();
    assert!(
        p.iter()
            .any(|p| p.read_only && p.is_dir && p.path == ws.join(".git")),
        "{p:?}"
    );
    // The same inside a submodule's git dir: `modules` is read-only whole.
    std::fs::remove_file(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join(".git/modules/x")).unwrap();
    std::fs::write(ws.join(".git/modules/x/HEAD"), "ref: refs/heads/m\n").unwrap();
    symlink("/", ws.join(".git/modules/x/hooks")).unwrap();
    let p = git_protected(&held, std::slice::from_ref(&ws)).unwrap();
    assert!(
        p.iter().any(|p| !p.read_only && p.path == ws.join(".git")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|p| p.read_only && p.path == ws.join(".git/modules")),
        "{p:?}"
    );
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
    // `modules` is read-only as a whole: no submodule git dir can change
    // or be made.
    assert!(
        p.iter()
            .any(|p| p.read_only && p.is_dir && p.path == ws.join(".git/modules")),
        "{names:?}"
    );
    assert!(!names.contains(&module.join("config")), "{names:?}");
    for want in [
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
    // Husky's generated hooks source `.husky/*`: the whole `.husky/`.
    for want in [ws.join(".husky"), ws.join("extra.gitconfig")] {
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
    // A hooksPath that does not exist yet inside the root is created, so
    // that it exists to be protected (as `hooks` itself is).
    std::fs::remove_dir_all(ws.join(".husky")).unwrap();
    let p = git_protected(&held, std::slice::from_ref(&ws)).unwrap();
    assert!(ws.join(".husky/_").is_dir());
    assert!(p.iter().any(|p| p.path == ws.join(".husky")), "{p:?}");
}

/// `git` with a fixed identity in `dir`, asserting success.
fn git_in(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The set as `[ro|pin] path` lines relative to `base`, printed for the
/// record (`cargo test -p stockade-roots three_real -- --nocapture`).
fn show(label: &str, base: &Path, p: &[Protected]) -> Vec<String> {
    let lines: Vec<String> = p
        .iter()
        .map(|p| {
            format!(
                "{} {}{}",
                if p.read_only { "ro " } else { "pin" },
                p.path.strip_prefix(base).unwrap_or(&p.path).display(),
                if p.is_dir { "/" } else { "" }
            )
        })
        .collect();
    eprintln!("protected git set, {label}:\n  {}", lines.join("\n  "));
    lines
}

#[test]
fn three_real_repositories_plain_submodule_worktree_and_husky() {
    let d = tmp();
    let root = real(d.path());
    // Plain: `git init` and one commit.
    let plain = root.join("plain");
    std::fs::create_dir(&plain).unwrap();
    git_in(&plain, &["init", "-q"]);
    git_in(&plain, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let pins = RootPins::without_temp_roots();
    let held = pins.workspace(&plain).unwrap();
    let set = show(
        "plain",
        &plain,
        &git_protected(&held, std::slice::from_ref(&plain)).unwrap(),
    );
    for want in [
        "pin .git/",
        "ro  .git/config",
        "ro  .git/hooks/",
        "ro  .git/info/",
        "ro  .git/modules/",
        "ro  .git/description",
        "ro  .git/commondir",
        "ro  .git/config.worktree",
    ] {
        assert!(set.iter().any(|l| l == want), "{want}: {set:?}");
    }
    for writable in ["objects", "refs", "logs", "HEAD", "index", "COMMIT_EDITMSG"] {
        assert!(
            !set.iter().any(|l| l.ends_with(&format!(".git/{writable}"))
                || l.ends_with(&format!(".git/{writable}/"))),
            "{writable} must stay writable: {set:?}"
        );
    }

    // With a submodule, added by git from another local repository.
    let lib = root.join("lib");
    std::fs::create_dir(&lib).unwrap();
    git_in(&lib, &["init", "-q"]);
    git_in(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    let sup = root.join("super");
    std::fs::create_dir(&sup).unwrap();
    git_in(&sup, &["init", "-q"]);
    git_in(
        &sup,
        &["submodule", "add", "-q", lib.to_str().unwrap(), "lib"],
    );
    git_in(&sup, &["commit", "-q", "-m", "sub"]);
    assert!(sup.join(".git/modules/lib/config").is_file());
    let held = pins.workspace(&sup).unwrap();
    let set = show(
        "with a submodule",
        &sup,
        &git_protected(&held, std::slice::from_ref(&sup)).unwrap(),
    );
    assert!(set.iter().any(|l| l == "ro  .git/modules/"), "{set:?}");
    // Inside the submodule's checkout its `.git` file and (through it)
    // the same read-only `modules`.
    let held = pins.workspace(&sup.join("lib")).unwrap();
    let inner = show(
        "inside the submodule's checkout",
        &sup,
        &git_protected(&held, std::slice::from_ref(&sup)).unwrap(),
    );
    assert!(inner.iter().any(|l| l == "ro  lib/.git"), "{inner:?}");
    assert!(inner.iter().any(|l| l == "ro  .git/modules/"), "{inner:?}");

    // A linked worktree, and Husky's hooks (`core.hooksPath = .husky/_`).
    let main = root.join("main");
    std::fs::create_dir(&main).unwrap();
    git_in(&main, &["init", "-q"]);
    std::fs::create_dir_all(main.join(".husky/_")).unwrap();
    std::fs::write(main.join(".husky/pre-commit"), "npm test\n").unwrap();
    std::fs::write(
        main.join(".husky/_/pre-commit"),
        "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n",
    )
    .unwrap();
    git_in(&main, &["config", "core.hooksPath", ".husky/_"]);
    git_in(&main, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let wt = root.join("wt");
    git_in(&main, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let held = pins.workspace(&main).unwrap();
    let set = show(
        "with a linked worktree and husky (from the main checkout)",
        &root,
        &git_protected(&held, std::slice::from_ref(&root)).unwrap(),
    );
    for want in [
        "ro  main/.husky/",
        "ro  main/.git/worktrees/wt/commondir",
        "ro  main/.git/worktrees/wt/gitdir",
        "ro  main/.git/worktrees/wt/config.worktree",
    ] {
        assert!(set.iter().any(|l| l == want), "{want}: {set:?}");
    }
    let held = pins.workspace(&wt).unwrap();
    let set = show(
        "with a linked worktree and husky (from the linked worktree)",
        &root,
        &git_protected(&held, std::slice::from_ref(&root)).unwrap(),
    );
    for want in [
        "ro  wt/.git",
        "ro  main/.git/config",
        "ro  main/.git/hooks/",
        "ro  main/.git/worktrees/wt/commondir",
    ] {
        assert!(set.iter().any(|l| l == want), "{want}: {set:?}");
    }
    // git still works in all of them with the names created.
    git_in(&wt, &["commit", "-q", "--allow-empty", "-m", "y"]);
    git_in(&sup, &["status", "-s"]);
}

#[test]
fn every_directory_between_a_protected_path_and_its_root_is_pinned() {
    let d = tmp();
    let ws = real(d.path());
    std::fs::create_dir_all(ws.join("a/b/c")).unwrap();
    let f = ws.join("a/b/c/f");
    std::fs::write(&f, "x").unwrap();
    let mut list =
        named_protected(&[f.clone(), ws.join(".envrc")], std::slice::from_ref(&ws)).unwrap();
    pin_ancestors(&mut list, std::slice::from_ref(&ws)).unwrap();
    let pins: Vec<_> = list
        .iter()
        .filter(|p| !p.read_only)
        .map(|p| p.path.clone())
        .collect();
    assert_eq!(pins, [ws.join("a/b/c"), ws.join("a/b"), ws.join("a")]);
    assert!(list.iter().any(|p| p.read_only && p.path == f));
}
