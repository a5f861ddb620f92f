//! Linked worktrees and submodule checkouts: a commit from one writes the
//! main repository's git directory outside the workspace. `workspace-write`
//! grants it (held like every root) when the workspace's `.git` file is
//! named back from there, with hooks, configuration, `info/` and every
//! other worktree's directory read-only; a `.git` file a run planted grants
//! nothing. Run for real through `stockade exec` on both backends, as root
//! and (when we are root) as `nobody`; the user's own git then runs
//! unconfined with a marker that shows whether anything planted ran.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::path::{Path, PathBuf};

use stockade_testkit::users::{Who, users};

mod common;
use common::*;

/// `git` with an identity, for scripts run inside the sandbox.
const G: &str = "g() { git -c user.name=t -c user.email=t@t \"$@\"; }";

/// `<d>/main` (one commit) with linked worktrees `<d>/wt` and `<d>/other`,
/// all owned by `who`.
struct Layout {
    _dir: tempfile::TempDir,
    main: PathBuf,
    wt: PathBuf,
    other: PathBuf,
}

impl Layout {
    fn new(base: &Path, who: Who, home: &Path) -> Self {
        let dir = owned_dir(base, "wt-", who);
        let main = dir.path().join("main");
        let wt = dir.path().join("wt");
        let other = dir.path().join("other");
        fs::create_dir(&main).unwrap();
        who.own(&main);
        init(who, home, &main);
        for w in [&wt, &other] {
            ok(&user_git(
                who,
                home,
                None,
                &main,
                &["worktree", "add", "-q", w.to_str().unwrap()],
            ));
        }
        Self {
            _dir: dir,
            main,
            wt,
            other,
        }
    }

    fn common(&self) -> PathBuf {
        self.main.join(".git")
    }
}

fn read(p: &Path) -> Option<Vec<u8>> {
    fs::read(p).ok()
}

#[test]
fn from_a_linked_worktree_commit_checkout_stash_and_rebase_work() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let l = Layout::new(&base, who, home.path());
            let script = format!(
                "set -e; {G}; b=$(g rev-parse --abbrev-ref HEAD); \
                 echo a > a; g add a; g commit -qm a; \
                 g checkout -qb feature; echo b > b; g add b; g commit -qm b; \
                 g checkout -q \"$b\"; echo c > c; g add c; g commit -qm c; \
                 echo more >> a; g stash -q; test -z \"$(g status --porcelain -uno)\"; \
                 g stash list | grep -q 'stash@{{0}}'; g stash pop -q; g checkout -q -- a; \
                 g checkout -q feature; g rebase -q \"$b\"; \
                 g log --format=%s | tr '\\n' ' '"
            );
            let out = exec(who, home.path(), None, backend, &l.wt, &[], &script);
            assert!(
                out.status.success(),
                "{who:?} {backend}: git from the linked worktree failed: {}",
                text(&out.stderr)
            );
            assert_eq!(
                text(&out.stdout).trim(),
                "b c a one",
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            // The main repository holds them, as the user's own git sees.
            let log = user_git(
                who,
                home.path(),
                None,
                &l.main,
                &["log", "--format=%s", "feature"],
            );
            ok(&log);
            assert_eq!(
                text(&log.stdout).split_whitespace().collect::<Vec<_>>(),
                ["b", "c", "a", "one"]
            );
            let st = user_git(who, home.path(), None, &l.main, &["fsck", "--no-progress"]);
            ok(&st);
        }
    }
}

#[test]
fn hooks_config_info_and_other_worktrees_stay_read_only() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let l = Layout::new(&base, who, home.path());
            let c = l.common();
            let marker = home.path().join("planted-ran");
            let watched = [
                c.join("hooks/pre-commit"),
                c.join("config"),
                c.join("worktrees/wt/config.worktree"),
                c.join("worktrees/wt/commondir"),
                c.join("worktrees/other/HEAD"),
                c.join("info/attributes"),
            ];
            // What the user's repository held before stockade touched it
            // (`config.worktree` is made empty by the first run).
            let before: Vec<Option<Vec<u8>>> = watched.iter().map(|p| read(p)).collect();
            let hook = format!("#!/bin/sh\\ntouch {}\\n", marker.display());
            let cq = c.display();
            // Each attempt prints its name and status; a commit first shows
            // the grant is there (today it is refused, so this test fails
            // there before any attack).
            let script = format!(
                "{G}; echo x > x && g add x && g commit -qm x && echo committed; \
                 t() {{ n=$1; shift; \"$@\" 2>/dev/null; echo \"$n=$?\"; }}; \
                 t hook sh -c 'printf \"{hook}\" > {cq}/hooks/pre-commit && chmod +x {cq}/hooks/pre-commit'; \
                 t config g config core.fsmonitor {mon}; \
                 t config-file sh -c 'echo \"[core] hooksPath = /tmp\" >> {cq}/config'; \
                 t config-worktree sh -c 'echo \"[core] hooksPath = /tmp\" >> {cq}/worktrees/wt/config.worktree'; \
                 t commondir sh -c 'echo /tmp > {cq}/worktrees/wt/commondir'; \
                 t other-head sh -c 'echo 0000000000000000000000000000000000000000 > {cq}/worktrees/other/HEAD'; \
                 t other-new sh -c 'touch {cq}/worktrees/other/planted'; \
                 t info sh -c 'echo \"* filter=x\" > {cq}/info/attributes'; \
                 t rename-own mv {cq}/worktrees/wt {cq}/worktrees/wt-old; \
                 t rename-worktrees mv {cq}/worktrees {cq}/worktrees-old; \
                 t rename-hooks mv {cq}/hooks {cq}/hooks-old; \
                 true",
                mon = marker.display(),
            );
            let out = exec(who, home.path(), None, backend, &l.wt, &[], &script);
            let stdout = text(&out.stdout);
            assert!(
                stdout.contains("committed"),
                "{who:?} {backend}: the worktree's commit failed: {}",
                text(&out.stderr)
            );
            for name in [
                "hook",
                "config",
                "config-file",
                "config-worktree",
                "commondir",
                "other-head",
                "other-new",
                "info",
                "rename-own",
                "rename-worktrees",
                "rename-hooks",
            ] {
                let line = stdout
                    .lines()
                    .find(|l| l.starts_with(&format!("{name}=")))
                    .unwrap_or_else(|| panic!("{who:?} {backend}: no {name} line: {stdout}"));
                assert_ne!(
                    line,
                    format!("{name}=0"),
                    "{who:?} {backend}: {name} succeeded: {stdout}"
                );
            }
            for (p, was) in watched.iter().zip(&before) {
                let now = read(p);
                if p.ends_with("config.worktree") {
                    assert!(
                        now.as_deref().is_none_or(<[u8]>::is_empty),
                        "{who:?} {backend}: {} was written",
                        p.display()
                    );
                } else {
                    assert_eq!(&now, was, "{who:?} {backend}: {} changed", p.display());
                }
            }
            assert!(!c.join("worktrees/other/planted").exists());
            assert!(c.join("worktrees/wt/gitdir").is_file());
            assert!(c.join("hooks").is_dir());
            // The user's own commit in the worktree, unconfined, runs
            // nothing planted.
            let st = user_git(
                who,
                home.path(),
                None,
                &l.wt,
                &["commit", "-q", "--allow-empty", "-m", "user"],
            );
            ok(&st);
            let st = user_git(who, home.path(), None, &l.other, &["status", "-s"]);
            ok(&st);
            assert!(
                !marker.exists(),
                "{who:?} {backend}: something planted ran at the user's commit"
            );
        }
    }
}

#[test]
fn a_planted_git_file_grants_nothing_and_says_why() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            // Another repository with its own worktree: its directory does
            // not name our workspace back.
            let l = Layout::new(&base, who, home.path());
            let secrets = owned_dir(&base, "secrets-", who);
            fs::write(secrets.path().join("id_rsa"), "key").unwrap();
            who.own(secrets.path());
            let ws = owned_dir(&base, "ws-", who);
            let c = l.common();
            for (target, says) in [
                (c.join("worktrees/other"), "does not name it back"),
                (
                    secrets.path().to_path_buf(),
                    "neither a linked worktree's git directory",
                ),
            ] {
                fs::write(
                    ws.path().join(".git"),
                    format!("gitdir: {}\n", target.display()),
                )
                .unwrap();
                who.own(ws.path());
                let script = format!(
                    "t() {{ n=$1; shift; \"$@\" 2>/dev/null; echo \"$n=$?\"; }}; \
                     t target sh -c 'echo x > {t}/planted'; \
                     t objects sh -c 'echo x > {c}/objects/planted'; \
                     t refs sh -c 'echo x > {c}/refs/heads/planted'; true",
                    t = target.display(),
                    c = c.display(),
                );
                let out = exec(who, home.path(), None, backend, ws.path(), &[], &script);
                let stdout = text(&out.stdout);
                let stderr = text(&out.stderr);
                for name in ["target", "objects", "refs"] {
                    assert!(
                        stdout.lines().any(|l| l.starts_with(&format!("{name}="))
                            && l != format!("{name}=0")),
                        "{who:?} {backend} {}: {name} was written: {stdout}",
                        target.display()
                    );
                }
                assert!(!target.join("planted").exists());
                assert!(!c.join("objects/planted").exists());
                assert!(!c.join("refs/heads/planted").exists());
                let line = stderr
                    .lines()
                    .find(|l| l.starts_with("stockade: ") && l.contains(".git: names"))
                    .unwrap_or_else(|| panic!("{who:?} {backend}: no line says why: {stderr}"));
                assert!(line.contains(says), "{who:?} {backend}: {line}");
                assert!(line.contains("nothing outside the workspace"), "{line}");
            }
        }
    }
}

#[test]
fn a_submodule_checkout_commits_and_its_hooks_and_config_stay_read_only() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let lib = repo(&base, who, home.path());
            let sup = repo(&base, who, home.path());
            ok(&user_git(
                who,
                home.path(),
                None,
                sup.path(),
                &[
                    "-c",
                    "protocol.file.allow=always",
                    "submodule",
                    "add",
                    "-q",
                    lib.path().to_str().unwrap(),
                    "lib",
                ],
            ));
            let module = sup.path().join(".git/modules/lib");
            assert!(module.join("config").is_file());
            let ws = sup.path().join("lib");
            let marker = home.path().join("planted-ran");
            let watched = [module.join("hooks/pre-commit"), module.join("config")];
            let before: Vec<Option<Vec<u8>>> = watched.iter().map(|p| read(p)).collect();
            let m = module.display();
            let script = format!(
                "{G}; echo x > x && g add x && g commit -qm x && echo committed; \
                 t() {{ n=$1; shift; \"$@\" 2>/dev/null; echo \"$n=$?\"; }}; \
                 t hook sh -c 'printf \"#!/bin/sh\\ntouch {mk}\\n\" > {m}/hooks/pre-commit && chmod +x {m}/hooks/pre-commit'; \
                 t config g config core.fsmonitor {mk}; \
                 t super sh -c 'echo x > {s}/.git/objects/planted'; true",
                mk = marker.display(),
                s = sup.path().display(),
            );
            let out = exec(who, home.path(), None, backend, &ws, &[], &script);
            let stdout = text(&out.stdout);
            assert!(
                stdout.contains("committed"),
                "{who:?} {backend}: the submodule's commit failed: {}",
                text(&out.stderr)
            );
            for name in ["hook", "config", "super"] {
                assert!(
                    stdout
                        .lines()
                        .any(|l| l.starts_with(&format!("{name}=")) && l != format!("{name}=0")),
                    "{who:?} {backend}: {name} succeeded: {stdout}"
                );
            }
            for (p, was) in watched.iter().zip(&before) {
                assert_eq!(&read(p), was, "{who:?} {backend}: {} changed", p.display());
            }
            assert!(!sup.path().join(".git/objects/planted").exists());
            let log = user_git(who, home.path(), None, &ws, &["log", "-1", "--format=%s"]);
            ok(&log);
            assert_eq!(text(&log.stdout).trim(), "x");
            let st = user_git(
                who,
                home.path(),
                None,
                &ws,
                &["commit", "-q", "--allow-empty", "-m", "user"],
            );
            ok(&st);
            assert!(!marker.exists(), "{who:?} {backend}: a planted hook ran");
        }
    }
}

/// From the main checkout, a linked worktree's directory (or `worktrees`
/// as a whole) cannot be renamed away and replaced by one whose
/// `commondir` names a planted repository: bwrap let a directory holding
/// read-only binds be renamed, so both are pinned now.
#[test]
fn from_the_main_checkout_a_worktree_dir_cannot_be_swapped() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let l = Layout::new(&base, who, home.path());
            let commondir = l.common().join("worktrees/wt/commondir");
            let before = read(&commondir);
            let script = "t() { n=$1; shift; \"$@\" 2>/dev/null; echo \"$n=$?\"; }; \
                 t own mv .git/worktrees/wt .git/worktrees/wt-old; \
                 t all mv .git/worktrees .git/worktrees-old; \
                 mkdir -p .git/worktrees/new && echo made; true";
            let out = exec(who, home.path(), None, backend, &l.main, &[], script);
            let stdout = text(&out.stdout);
            for name in ["own", "all"] {
                assert!(
                    stdout
                        .lines()
                        .any(|l| l.starts_with(&format!("{name}=")) && l != format!("{name}=0")),
                    "{who:?} {backend}: the {name} rename succeeded: {stdout}"
                );
            }
            // `git worktree add` still can make a new one.
            assert!(stdout.contains("made"), "{who:?} {backend}: {stdout}");
            assert_eq!(read(&commondir), before, "{who:?} {backend}");
            ok(&user_git(who, home.path(), None, &l.wt, &["status", "-s"]));
        }
    }
}

/// The same swap one level up, for any protected path: with
/// `core.hooksPath = tools/hooks`, `mv tools tools-old` carried the
/// read-only hooks directory away under bwrap and a new `tools/hooks` with
/// a planted hook took its place. Every directory between a protected path
/// and its root is pinned now (the supervisor already refused this).
#[test]
fn a_directory_holding_a_protected_path_cannot_be_renamed_away() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let hooks = ws.path().join("tools/hooks");
            fs::create_dir_all(&hooks).unwrap();
            who.own(ws.path());
            ok(&user_git(
                who,
                home.path(),
                None,
                ws.path(),
                &["config", "core.hooksPath", "tools/hooks"],
            ));
            let marker = home.path().join("planted-ran");
            let script = format!(
                "mv tools tools-old; echo \"mv=$?\"; mkdir -p tools/hooks && \
                 printf '#!/bin/sh\\ntouch {}\\n' > tools/hooks/pre-commit && \
                 chmod +x tools/hooks/pre-commit; true",
                marker.display()
            );
            let out = exec(who, home.path(), None, backend, ws.path(), &[], &script);
            let stdout = text(&out.stdout);
            assert!(
                stdout.contains("mv=") && !stdout.contains("mv=0"),
                "{who:?} {backend}: tools was renamed: {stdout}"
            );
            assert!(!ws.path().join("tools-old").exists());
            assert!(!hooks.join("pre-commit").exists(), "{who:?} {backend}");
            ok(&user_git(
                who,
                home.path(),
                None,
                ws.path(),
                &["commit", "-q", "--allow-empty", "-m", "user"],
            ));
            assert!(!marker.exists(), "{who:?} {backend}: the planted hook ran");
        }
    }
}

/// git writes `SQUASH_MSG`, `COMMIT_EDITMSG` and the reflogs through a
/// symlink in their place, and those names stay writable: a run that left
/// `SQUASH_MSG -> ~/.bashrc` and a branch whose message is a command had
/// the user's next `git merge --squash` write that command into it. Every
/// new symlink in a git directory the run could write (the main
/// repository's, granted to a linked worktree; a workspace's own `.git`) is
/// set aside once the run ends, so the user's git writes its own files.
#[test]
fn a_symlink_left_where_git_writes_is_set_aside() {
    let base = base();
    for who in users() {
        for backend in backends() {
            for from_linked in [true, false] {
                let home = owned_dir(&base, "home-", who);
                let l = Layout::new(&base, who, home.path());
                let c = l.common();
                let (ws, own) = if from_linked {
                    (&l.wt, c.join("worktrees/wt"))
                } else {
                    (&l.main, c.clone())
                };
                let victim = home.path().join("victim-rc");
                fs::write(&victim, "# the user's rc\n").unwrap();
                who.own(&victim);
                let marker = home.path().join("planted-ran");
                let planted = [
                    c.join("SQUASH_MSG"),
                    c.join("logs/HEAD"),
                    own.join("COMMIT_EDITMSG"),
                    own.join("logs/HEAD"),
                ];
                let links: Vec<String> = planted
                    .iter()
                    .map(|p| {
                        format!(
                            "rm -f {p} && ln -s {v} {p}",
                            p = p.display(),
                            v = victim.display()
                        )
                    })
                    .collect();
                let script = format!(
                    "set -e; {G}; b=$(g rev-parse --abbrev-ref HEAD); \
                     g checkout -qb side; g commit -q --allow-empty -m 'touch {m}'; \
                     g checkout -q \"$b\"; {links}; echo planted",
                    m = marker.display(),
                    links = links.join("; "),
                );
                let out = exec(who, home.path(), None, backend, ws, &[], &script);
                assert!(
                    text(&out.stdout).contains("planted"),
                    "{who:?} {backend} linked={from_linked}: {}",
                    text(&out.stderr)
                );
                for p in &planted {
                    assert!(
                        !fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()),
                        "{who:?} {backend} linked={from_linked}: {} is still a link",
                        p.display()
                    );
                }
                // The user's own git, unconfined, in both checkouts.
                ok(&user_git(
                    who,
                    home.path(),
                    None,
                    &l.main,
                    &["merge", "-q", "--squash", "side"],
                ));
                for dir in [&l.main, &l.wt] {
                    ok(&user_git(
                        who,
                        home.path(),
                        None,
                        dir,
                        &["commit", "-q", "--allow-empty", "-m", "echo user"],
                    ));
                }
                assert_eq!(
                    fs::read_to_string(&victim).unwrap(),
                    "# the user's rc\n",
                    "{who:?} {backend} linked={from_linked}: git wrote through a planted link"
                );
                assert!(!marker.exists());
            }
        }
    }
}
