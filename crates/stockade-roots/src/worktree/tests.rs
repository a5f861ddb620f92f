#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};

use super::*;
use crate::RootPins;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-worktree-")
        .tempdir()
        .unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "protocol.file.allow=always",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `root/main` with one commit and linked worktrees `root/wt` and
/// `root/other`.
fn worktrees(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let main = root.join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let wt = root.join("wt");
    let other = root.join("other");
    git(&main, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    git(&main, &["worktree", "add", "-q", other.to_str().unwrap()]);
    (main, wt, other)
}

fn protected_lines(base: &Path, p: &[Protected]) -> Vec<String> {
    p.iter()
        .map(|p| {
            format!(
                "{} {}{}",
                if p.read_only { "ro " } else { "pin" },
                p.path.strip_prefix(base).unwrap_or(&p.path).display(),
                if p.is_dir { "/" } else { "" }
            )
        })
        .collect()
}

#[test]
fn a_linked_worktree_gets_its_common_dir_with_what_git_obeys_read_only() {
    let d = tmp();
    let root = std::fs::canonicalize(d.path()).unwrap();
    let (main, wt, _) = worktrees(&root);
    let pins = RootPins::without_temp_roots();
    let ws = pins.workspace(&wt).unwrap();
    let found = find(&ws, &[ws.path().to_path_buf()]).unwrap().unwrap();
    assert_eq!(found.kind, LinkedKind::Worktree);
    assert_eq!(found.grant, main.join(".git"));
    assert_eq!(found.gitdir, main.join(".git/worktrees/wt"));
    let LinkedGrant {
        held, protected, ..
    } = pins.linked_git(&ws).unwrap().unwrap();
    assert_eq!(held.path(), main.join(".git"));
    assert!(
        pins.writable_paths(Some(&ws)).contains(&main.join(".git")),
        "the grant is one of the workspace's writable paths"
    );
    let set = protected_lines(&root, &protected);
    eprintln!("{set:#?}");
    for want in [
        "ro  main/.git/config",
        "ro  main/.git/hooks/",
        "ro  main/.git/info/",
        "ro  main/.git/config.worktree",
        "ro  main/.git/commondir",
        "pin main/.git/worktrees/",
        "pin main/.git/worktrees/wt/",
        "ro  main/.git/worktrees/wt/config.worktree",
        "ro  main/.git/worktrees/wt/commondir",
        "ro  main/.git/worktrees/wt/gitdir",
        "ro  main/.git/worktrees/other/",
    ] {
        assert!(set.iter().any(|l| l == want), "{want}: {set:?}");
    }
    for writable in [
        "objects",
        "refs",
        "logs",
        "packed-refs",
        "worktrees/wt/HEAD",
        "worktrees/wt/index",
        "worktrees/wt/logs",
    ] {
        assert!(
            !set.iter().any(|l| l.ends_with(&format!(".git/{writable}"))
                || l.ends_with(&format!(".git/{writable}/"))),
            "{writable} must stay writable: {set:?}"
        );
    }
    // From the main checkout nothing outside is granted (its .git is in it).
    let m = pins.workspace(&main).unwrap();
    assert!(pins.linked_git(&m).unwrap().is_none());
}

#[test]
fn a_planted_git_file_grants_nothing() {
    let d = tmp();
    let root = std::fs::canonicalize(d.path()).unwrap();
    let (main, wt, other) = worktrees(&root);
    let secrets = root.join("ssh");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(secrets.join("id_rsa"), "key").unwrap();
    // A fake worktree dir in a non-repository that points back at wt.
    let fake = root.join("fake");
    std::fs::create_dir_all(fake.join("worktrees/x")).unwrap();
    std::fs::write(fake.join("worktrees/x/commondir"), "../..\n").unwrap();
    std::fs::write(
        fake.join("worktrees/x/gitdir"),
        format!("{}\n", wt.join(".git").display()),
    )
    .unwrap();
    let pins = RootPins::without_temp_roots();
    let ws = pins.workspace(&wt).unwrap();
    // Held first from the genuine file; every refusal below also takes it
    // back.
    assert!(pins.linked_git(&ws).unwrap().is_some());
    let cases: Vec<(PathBuf, &str)> = vec![
        // Another worktree's directory: its gitdir names other/.git.
        (main.join(".git/worktrees/other"), "NotBack"),
        (secrets.clone(), "NotLinked"),
        (fake.join("worktrees/x"), "NotRepository"),
        (root.join("missing"), "Missing"),
    ];
    for (target, want) in cases {
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", target.display())).unwrap();
        let e = pins.linked_git(&ws).unwrap_err();
        let got = format!("{e:?}");
        assert!(got.starts_with(want), "{target:?}: {got}");
        assert!(
            e.to_string().contains("nothing outside the workspace"),
            "{e}"
        );
        assert!(
            !pins
                .writable_paths(Some(&ws))
                .iter()
                .any(|p| p.starts_with(&main) || p.starts_with(&secrets) || p.starts_with(&fake)),
            "{target:?}: a refused .git file left a grant"
        );
    }
    let _ = other;
    // A `.git` file without a gitdir line.
    std::fs::write(wt.join(".git"), "nothing\n").unwrap();
    assert!(matches!(
        pins.linked_git(&ws),
        Err(LinkedError::NoGitdir { .. })
    ));
    // A FIFO in its place neither blocks nor grants.
    std::fs::remove_file(wt.join(".git")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        wt.join(".git"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    // (A FIFO is not a regular file: not a `.git` file at all.)
    assert!(pins.linked_git(&ws).unwrap().is_none());
}

#[test]
fn a_worktree_whose_common_dir_is_already_writable_needs_no_grant() {
    let d = tmp();
    let root = std::fs::canonicalize(d.path()).unwrap();
    let (_, wt, _) = worktrees(&root);
    let pins = RootPins::without_temp_roots();
    let ws = pins.workspace(&wt).unwrap();
    assert!(find(&ws, std::slice::from_ref(&root)).unwrap().is_none());
}

#[test]
fn a_submodule_checkout_gets_its_module_dir() {
    let d = tmp();
    let root = std::fs::canonicalize(d.path()).unwrap();
    let lib = root.join("lib");
    std::fs::create_dir(&lib).unwrap();
    git(&lib, &["init", "-q"]);
    git(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
    let sup = root.join("super");
    std::fs::create_dir(&sup).unwrap();
    git(&sup, &["init", "-q"]);
    git(
        &sup,
        &["submodule", "add", "-q", lib.to_str().unwrap(), "lib"],
    );
    let pins = RootPins::without_temp_roots();
    let ws = pins.workspace(&sup.join("lib")).unwrap();
    let LinkedGrant {
        held, protected, ..
    } = pins.linked_git(&ws).unwrap().unwrap();
    assert_eq!(held.path(), sup.join(".git/modules/lib"));
    let set = protected_lines(&root, &protected);
    for want in [
        "ro  super/.git/modules/lib/config",
        "ro  super/.git/modules/lib/hooks/",
        "ro  super/.git/modules/lib/info/",
        "ro  super/.git/modules/lib/modules/",
    ] {
        assert!(set.iter().any(|l| l == want), "{want}: {set:?}");
    }
    // A module dir whose core.worktree names another checkout is refused.
    let other = root.join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(
        other.join(".git"),
        format!("gitdir: {}\n", sup.join(".git/modules/lib").display()),
    )
    .unwrap();
    let ws = pins.workspace(&other).unwrap();
    assert!(matches!(
        pins.linked_git(&ws),
        Err(LinkedError::NotBack { .. })
    ));
}
