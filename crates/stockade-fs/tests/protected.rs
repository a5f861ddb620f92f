//! What git runs or obeys outside the sandbox (`.git/hooks`, `.git/config`,
//! `config.worktree`, `commondir`, a worktree's `.git` file) stays
//! read-only under workspace-write, however the path is spelled: a hook
//! written by a confined call would run unconfined at the user's next
//! `git commit`.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Scene, leftover_temp_files, snapshot};
use stockade_core::{ExecutionPolicy, SandboxMode, texts};
use stockade_fs::{FileSystem, FsError, SandboxedFs};

const WW: SandboxMode = SandboxMode::WorkspaceWrite;

/// `git` with no system or user configuration, so the host's cannot change
/// what a repository looks like.
fn git<S: AsRef<OsStr>>(dir: &Path, args: &[S]) {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {:?}: {}",
        args.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
        out.stderr.escape_ascii()
    );
}

fn fenced(scene: &Scene) -> SandboxedFs {
    SandboxedFs::with_temp_roots(vec![scene.faketmp.clone()])
}

/// A write and an edit of `path` under `policy` are both refused as
/// protected, naming `path` (absolute) and `protected`, and change nothing.
fn assert_protected(
    fs_: &SandboxedFs,
    policy: &ExecutionPolicy,
    path: &Path,
    protected: &Path,
    watch: &Path,
) {
    // A first fenced call creates the harmless placeholders a repository
    // may lack (`commondir` naming itself, an empty `config.worktree`) so
    // they can be protected; the comparison starts after it.
    let _ = fs_.write(path, b"", policy);
    let before = snapshot(watch, &[]);
    let err = fs_
        .write(path, b"#!/bin/sh\necho pwned\n", policy)
        .unwrap_err();
    assert!(err.is_denied(), "write {path:?}: {err}");
    assert_eq!(
        err.protected_path(),
        Some(protected),
        "write {path:?}: {err}"
    );
    // Named as asked (absolute, normalized), not as resolved.
    let named = err.path().to_path_buf();
    assert!(named.is_absolute(), "{named:?}");
    assert!(
        path.is_absolute() || named.starts_with(&policy.workspace_root),
        "{named:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{} writing {}",
            texts::denial_marker(WW),
            named.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("the protected path {}", protected.display())),
        "{text}"
    );
    assert_eq!(err.denied_mode(), Some(WW));
    let err = fs_
        .edit(path, "[core]", "[core]\n\thooksPath = /x", false, policy)
        .unwrap_err();
    // An edit is located, and judged, before anything is read, so a missing
    // file is refused as protected all the same; only a missing *directory*
    // on the way ends it earlier, as not found (an edit creates nothing).
    if !matches!(err, FsError::NotFound { .. }) {
        assert!(err.is_denied(), "edit {path:?}: {err}");
        assert_eq!(
            err.protected_path(),
            Some(protected),
            "edit {path:?}: {err}"
        );
    }
    assert_eq!(snapshot(watch, &[]), before, "{path:?} changed something");
}

#[test]
fn hooks_and_config_are_refused_however_spelled() {
    let scene = Scene::new();
    git(&scene.ws, &["init", "-q"]);
    let dotgit = scene.ws.join(".git");
    let hooks = dotgit.join("hooks");
    let config = dotgit.join("config");
    fs::write(hooks.join("existing"), "#!/bin/sh\n").unwrap();
    fs::create_dir_all(scene.ws.join("sub")).unwrap();
    symlink(".git/hooks", scene.ws.join("h")).unwrap();
    symlink(&hooks, scene.ws.join("h-abs")).unwrap();
    symlink(".git/config", scene.ws.join("cfg")).unwrap();
    symlink(".git/hooks/pre-commit", scene.ws.join("pc")).unwrap();
    symlink("../.git", scene.ws.join("sub/g")).unwrap();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);

    for (path, protected) in [
        (PathBuf::from(".git/hooks/pre-commit"), &hooks),
        (PathBuf::from(".git/hooks/existing"), &hooks),
        (PathBuf::from(".git/hooks/new/deeper/hook"), &hooks),
        (scene.ws.join(".git/hooks/post-commit"), &hooks),
        (PathBuf::from("./sub/../.git/hooks/pre-push"), &hooks),
        // Aliases inside the workspace.
        (PathBuf::from("h/pre-commit"), &hooks),
        (PathBuf::from("h/existing"), &hooks),
        (PathBuf::from("h/new-dir/hook"), &hooks),
        (PathBuf::from("sub/g/hooks/pre-commit"), &hooks),
        (PathBuf::from("pc"), &hooks),
        (PathBuf::from(".git/config"), &config),
        (PathBuf::from("./sub/../.git/config"), &config),
        (scene.ws.join(".git/config"), &config),
        (PathBuf::from("cfg"), &config),
        (PathBuf::from("sub/g/config"), &config),
    ] {
        assert_protected(&fs_, &policy, &path, protected, &scene.ws);
    }
    // An absolute symlink in a directory is no way in either: resolution
    // beneath the root refuses it as it refuses every absolute symlink.
    let err = fs_
        .write(Path::new("h-abs/pre-commit"), b"x", &policy)
        .unwrap_err();
    assert!(err.is_denied(), "{err}");
    // Names git would obey if they appeared: they exist now as harmless
    // placeholders (`commondir` naming the git directory itself, an empty
    // `config.worktree`) and are protected like the rest.
    for (name, placeholder) in [("commondir", ".\n"), ("config.worktree", "")] {
        assert_protected(
            &fs_,
            &policy,
            &Path::new(".git").join(name),
            &dotgit.join(name),
            &scene.ws,
        );
        assert_eq!(fs::read_to_string(dotgit.join(name)).unwrap(), placeholder);
    }
    assert!(!hooks.join("new").exists());
    assert!(!hooks.join("new-dir").exists());
    assert!(!hooks.join("pre-commit").exists());

    // `info/` and the other entries git does not write while working are
    // read-only too (stockade-roots keeps an allowlist inside `.git`).
    for (path, protected) in [
        (".git/info/exclude", dotgit.join("info")),
        (".git/description", dotgit.join("description")),
    ] {
        assert_protected(&fs_, &policy, Path::new(path), &protected, &scene.ws);
    }
    // The rest of `.git` and the workspace are written as ever.
    let written = [
        ".git/COMMIT_EDITMSG",
        ".git/hooks-not/x",
        "src/main.rs",
        "sub/config",
        "hooks/pre-commit",
    ];
    for path in written {
        fs_.write(Path::new(path), b"ok\n", &policy).unwrap();
        assert_eq!(fs::read(scene.ws.join(path)).unwrap(), b"ok\n", "{path}");
    }
    fs_.edit(
        Path::new(".git/COMMIT_EDITMSG"),
        "ok",
        "edited",
        false,
        &policy,
    )
    .unwrap();
    assert_eq!(leftover_temp_files(&scene.scratch), Vec::<PathBuf>::new());

    // Danger-full-access fences nothing, hooks included.
    let danger = scene.policy(SandboxMode::DangerFullAccess);
    fs_.write(Path::new(".git/hooks/pre-commit"), b"#!/bin/sh\n", &danger)
        .unwrap();
    assert_eq!(fs::read(hooks.join("pre-commit")).unwrap(), b"#!/bin/sh\n");
    // And read-only refuses them as it refuses everything.
    let err = fs_
        .write(
            Path::new(".git/hooks/pre-commit"),
            b"x",
            &scene.policy(SandboxMode::ReadOnly),
        )
        .unwrap_err();
    assert!(err.is_denied(), "{err}");
}

/// A repository that appears after the first call (a run did `git init`)
/// is protected from the next call on.
#[test]
fn a_repository_created_later_is_protected_from_then_on() {
    let scene = Scene::new();
    let fs_ = fenced(&scene);
    let policy = scene.policy(WW);
    fs_.write(Path::new("before.txt"), b"x", &policy).unwrap();
    git(&scene.ws, &["init", "-q"]);
    assert_protected(
        &fs_,
        &policy,
        Path::new(".git/hooks/pre-commit"),
        &scene.ws.join(".git/hooks"),
        &scene.ws,
    );
}

/// A worktree: its `.git` file points git at a git directory, so rewriting
/// it would send git to planted hooks. When the main repository lies in a
/// writable root (here the temp root), its hooks, config and the worktree's
/// `commondir` are protected there too.
#[test]
fn a_worktree_git_file_and_its_repository_are_refused() {
    let scene = Scene::new();
    let main = scene.faketmp.join("main");
    fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let wt = scene.scratch.join("wt");
    git(
        &main,
        &[
            OsStr::new("worktree"),
            OsStr::new("add"),
            OsStr::new("-q"),
            wt.as_os_str(),
        ],
    );
    let gitdir = fs::canonicalize(main.join(".git/worktrees/wt")).unwrap();
    let fs_ = fenced(&scene);
    let policy = ExecutionPolicy::new(WW, &wt);

    assert_protected(&fs_, &policy, Path::new(".git"), &wt.join(".git"), &wt);
    assert_protected(&fs_, &policy, &wt.join(".git"), &wt.join(".git"), &wt);
    let dotgit = main.join(".git");
    for (path, protected) in [
        (gitdir.join("commondir"), gitdir.join("commondir")),
        (
            gitdir.join("config.worktree"),
            gitdir.join("config.worktree"),
        ),
        (dotgit.join("hooks/post-commit"), dotgit.join("hooks")),
        (dotgit.join("config"), dotgit.join("config")),
    ] {
        assert_protected(&fs_, &policy, &path, &protected, &main);
    }
    fs_.write(Path::new("file.txt"), b"ok", &policy).unwrap();
    assert_eq!(fs::read(wt.join("file.txt")).unwrap(), b"ok");
    assert!(
        fs::read_to_string(wt.join(".git"))
            .unwrap()
            .starts_with("gitdir:")
    );
}
