//! After a denied run `stockade exec` says how to allow what was refused (or
//! why it cannot be), on the real kernel, both backends, as root and (when
//! we are root, as in CI) as `nobody`. Each hint is checked by its facts
//! (the path, the flag), and where a flag is offered the run is repeated
//! with it: the hint must be the one that works. When `CI=true` a missing
//! runner or tool fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{backends, base, exec_command, ok, owned_dir, text};
use stockade_testkit::users::{Who, users};

/// `sh -c script` under workspace-write in `ws`, with `$HOME` at `home`,
/// `extra` flags and `env` added.
fn run(
    who: Who,
    home: &Path,
    backend: &str,
    ws: &Path,
    extra: &[&str],
    env: &[(&str, &OsStr)],
    script: &str,
) -> Output {
    let mut c = exec_command(who, home, None, backend, ws, extra, script);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(125),
        "{who:?} {backend}: the run never started: {}",
        text(&out.stderr)
    );
    out
}

/// stockade's own report lines (after the `stockade: ` prefix).
fn hints(out: &Output) -> Vec<String> {
    text(&out.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("stockade: "))
        .map(str::to_owned)
        .collect()
}

fn has_tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    stockade_testkit::require(name, found)
}

/// The result facts of a `--json` run.
fn facts(out: &Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    v["result"].clone()
}

#[test]
fn a_write_outside_names_the_directory_to_add() {
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let out_dir = owned_dir(&base, "out-", who);
            let file = out_dir.path().join("f");
            let made = out_dir.path().join("new").join("deeper");
            let script = format!(
                "echo x > '{}'; mkdir -p '{}'",
                file.display(),
                made.display()
            );
            let denied = run(who, home.path(), backend, ws.path(), &[], &[], &script);
            let lines = hints(&denied);
            let flag = format!("`--writable {}`", out_dir.path().display());
            let offered: Vec<&String> = lines.iter().filter(|l| l.contains("--writable")).collect();
            // Both refusals lie in the one directory: one hint, naming it.
            assert_eq!(offered.len(), 1, "{who:?} {backend}: {lines:?}");
            assert!(offered[0].contains(&flag), "{who:?} {backend}: {lines:?}");
            assert!(
                lines.contains(&format!("denied: {}", file.display())),
                "{who:?} {backend}: {lines:?}"
            );
            // A directory only root may write: for anyone else no root
            // would help, and the report says so instead of offering one.
            let roots_dir = owned_dir(&base, "roots-", Who::Me);
            let theirs = run(
                who,
                home.path(),
                backend,
                ws.path(),
                &[],
                &[],
                &format!("echo x > '{}/f'", roots_dir.path().display()),
            );
            let lines = hints(&theirs);
            let offer = format!("`--writable {}`", roots_dir.path().display());
            let offered = lines.iter().any(|l| l.contains(&offer));
            let declined = lines.iter().any(|l| {
                l.starts_with(&roots_dir.path().display().to_string())
                    && l.contains("would not help")
            });
            assert_eq!(
                (offered, declined),
                (who == Who::Me, who == Who::Nobody),
                "{who:?} {backend}: {lines:?}"
            );
            // The hint is the one that works.
            let dir = out_dir.path().as_os_str().to_str().unwrap();
            let allowed = run(
                who,
                home.path(),
                backend,
                ws.path(),
                &["--writable", dir],
                &[],
                &script,
            );
            ok(&allowed);
            assert!(hints(&allowed).is_empty(), "{who:?} {backend}: {allowed:?}");
            assert!(file.is_file() && made.is_dir(), "{who:?} {backend}");
        }
    }
}

#[test]
fn a_write_into_a_toolchain_cache_names_its_group_and_a_clean_path() {
    let npm = has_tool("npm");
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let cargo_home = home.path().join("cargo");
            let index = cargo_home.join("registry").join("index");
            fs::create_dir_all(&index).unwrap();
            who.own(home.path());
            let env = [("CARGO_HOME", cargo_home.as_os_str())];
            let cached = index.join("itoa");
            let out = run(
                who,
                home.path(),
                backend,
                ws.path(),
                &[],
                &env,
                "echo x > \"$CARGO_HOME/registry/index/itoa\"",
            );
            let lines = hints(&out);
            assert!(
                lines.contains(&format!("denied: {}", cached.display())),
                "{who:?} {backend}: {lines:?}"
            );
            assert!(
                lines.iter().any(|l| l.contains("`--writable @cargo`")),
                "{who:?} {backend}: {lines:?}"
            );
            if !npm {
                continue;
            }
            // npm's own cache, with npm's own words for the refusal (ENOENT
            // under bwrap, EACCES and "sudo chown" under Landlock).
            let pkg = ws.path().join("package");
            fs::create_dir(&pkg).unwrap();
            fs::write(
                pkg.join("package.json"),
                r#"{"name":"hint-pkg","version":"1.0.0"}"#,
            )
            .unwrap();
            let tar = Command::new("tar")
                .args(["czf", "pkg.tgz", "package"])
                .current_dir(ws.path())
                .status()
                .unwrap();
            assert!(tar.success());
            who.own(ws.path());
            let flags = ["--network", "deny"];
            let script = "npm cache add ./pkg.tgz";
            let out = run(who, home.path(), backend, ws.path(), &flags, &[], script);
            assert!(!out.status.success(), "{who:?} {backend}: {out:?}");
            let lines = hints(&out);
            let npm_cache = home.path().join(".npm");
            let named: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("denied: "))
                .collect();
            assert!(
                !named.is_empty()
                    && named
                        .iter()
                        .all(|p| Path::new(p).starts_with(&npm_cache) && !p.contains([',', '\''])),
                "{who:?} {backend}: {lines:?}"
            );
            assert!(
                lines.iter().any(|l| l.contains("`--writable @npm`")),
                "{who:?} {backend}: {lines:?}"
            );
            let flags = ["--network", "deny", "--writable", "@npm"];
            let allowed = run(who, home.path(), backend, ws.path(), &flags, &[], script);
            ok(&allowed);
            assert!(hints(&allowed).is_empty(), "{who:?} {backend}: {allowed:?}");
        }
    }
}

#[test]
fn a_protected_git_path_says_it_is_protected_and_offers_no_flag() {
    if !has_tool("git") {
        return;
    }
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = common::repo(&base, who, home.path());
            let config = ws.path().join(".git").join("config");
            // A name on the default protect list, there before the run.
            let envrc = ws.path().join(".envrc");
            fs::write(&envrc, "").unwrap();
            who.own(&envrc);
            // bwrap refuses the rename over its bind with EBUSY, Landlock
            // with EACCES; a new hook is refused by both.
            let out = run(
                who,
                home.path(),
                backend,
                ws.path(),
                &[],
                &[],
                "git config user.name x; echo x > .git/hooks/pre-commit; echo x >> .envrc",
            );
            let lines = hints(&out);
            let protected = |p: &Path, why: &str| {
                lines.iter().any(|l| {
                    l.starts_with(&format!("{} is protected", p.display())) && l.contains(why)
                })
            };
            assert!(protected(&config, "git"), "{who:?} {backend}: {lines:?}");
            assert!(
                protected(&ws.path().join(".git/hooks/pre-commit"), "git"),
                "{who:?} {backend}: {lines:?}"
            );
            assert!(
                protected(&envrc, "protect list"),
                "{who:?} {backend}: {lines:?}"
            );
            assert!(
                lines.iter().all(|l| !l.contains("--writable")),
                "{who:?} {backend}: {lines:?}"
            );
        }
    }
}

#[test]
fn a_refused_host_names_allow_host() {
    if !has_tool("curl") {
        return;
    }
    let srv = stockade_testkit::http::ok_server();
    let resolve = format!("blocked.test=127.0.0.1:{}", srv.port);
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let env = [("STOCKADE_PROXY_RESOLVE", OsStr::new(&resolve))];
            let mut flags = vec![
                "--network",
                "allow-listed",
                "--no-default-hosts",
                "--allow-host",
                "127.0.0.1",
            ];
            let script = "curl -sS -m 10 http://blocked.test/";
            let out = run(who, home.path(), backend, ws.path(), &flags, &env, script);
            let lines = hints(&out);
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains("`--allow-host blocked.test`")
                        && l.contains("allowed_hosts")),
                "{who:?} {backend}: {lines:?}"
            );
            flags.extend(["--allow-host", "blocked.test"]);
            let allowed = run(who, home.path(), backend, ws.path(), &flags, &env, script);
            ok(&allowed);
            assert_eq!(text(&allowed.stdout), "ok", "{who:?} {backend}");
            assert!(hints(&allowed).is_empty(), "{who:?} {backend}: {allowed:?}");
        }
    }
}

#[test]
fn a_secret_read_names_the_deny_read_list() {
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let ssh = home.path().join(".ssh");
            fs::create_dir(&ssh).unwrap();
            fs::write(ssh.join("id_rsa"), "KEY").unwrap();
            who.own(home.path());
            let out = run(
                who,
                home.path(),
                backend,
                ws.path(),
                &[],
                &[],
                "cat \"$HOME/.ssh/id_rsa\"",
            );
            assert!(!text(&out.stdout).contains("KEY"), "{who:?} {backend}");
            let lines = hints(&out);
            assert!(
                lines.iter().any(|l| l.starts_with(&ssh.display().to_string())
                    && l.contains("--deny-read")),
                "{who:?} {backend}: {lines:?}"
            );
            assert!(
                lines.iter().all(|l| !l.contains("--writable")),
                "{who:?} {backend}: {lines:?}"
            );
        }
    }
}

/// A file the caller's own permissions refuse is the command's own error:
/// no marker, no hint, `denied` false. As root the file is no obstacle
/// (root passes permission checks), so the `nobody` leg is the one that
/// meets the error; both must stay quiet.
#[test]
fn a_permission_error_inside_the_workspace_is_the_commands_own() {
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let locked = ws.path().join("locked");
            fs::write(&locked, "x").unwrap();
            who.own(ws.path());
            fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
            let script = "cat locked; echo y > locked";
            let out = run(who, home.path(), backend, ws.path(), &[], &[], script);
            let err = text(&out.stderr);
            if who == Who::Nobody {
                assert!(
                    err.contains("Permission denied"),
                    "{who:?} {backend}: {err}"
                );
            }
            assert!(hints(&out).is_empty(), "{who:?} {backend}: {err}");
            assert!(!err.contains("[sandbox:"), "{who:?} {backend}: {err}");
            let json = run(
                who,
                home.path(),
                backend,
                ws.path(),
                &["--json"],
                &[],
                script,
            );
            let r = facts(&json);
            assert_eq!(r["sandbox"]["denied"], false, "{who:?} {backend}: {r}");
            assert_eq!(
                r["sandbox"]["denied_paths"],
                serde_json::json!([]),
                "{who:?} {backend}: {r}"
            );
        }
    }
}

/// Node's built-in `fetch` resolves names itself (Node < 24 ignores the
/// proxy variables; 24 honours them with NODE_USE_ENV_PROXY=1): in the
/// confined network the lookup fails even for an allowed host, and the
/// report says why instead of offering a host flag that would not help.
#[test]
fn a_node_fetch_failure_says_it_bypassed_the_proxy() {
    if !has_tool("node") {
        return;
    }
    let version = Command::new("node").arg("--version").output().unwrap();
    let major: u32 = text(&version.stdout)
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap();
    let srv = stockade_testkit::http::ok_server();
    let resolve = format!("fetch.test=127.0.0.1:{}", srv.port);
    for who in users() {
        for backend in backends() {
            let base = base();
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let env = [("STOCKADE_PROXY_RESOLVE", OsStr::new(&resolve))];
            let flags = [
                "--network",
                "allow-listed",
                "--no-default-hosts",
                "--allow-host",
                "fetch.test",
                "--allow-host",
                "127.0.0.1",
            ];
            let script = "node -e 'fetch(\"http://fetch.test/\").then(r => r.text()).then(t => console.log(t), e => { console.error(e); process.exit(1) })'";
            let out = run(who, home.path(), backend, ws.path(), &flags, &env, script);
            if major >= 24 && out.status.success() {
                // The proxy variables were honoured: nothing to explain.
                assert!(hints(&out).is_empty(), "{who:?} {backend}: {out:?}");
                continue;
            }
            assert!(!out.status.success(), "{who:?} {backend}: {out:?}");
            let lines = hints(&out);
            assert!(
                lines.iter().any(|l| l.starts_with("fetch.test ")
                    && l.contains("NODE_USE_ENV_PROXY=1")
                    && l.contains("--use-env-proxy")),
                "{who:?} {backend}: {lines:?}"
            );
            // The host is allowed already: no flag for it.
            assert!(
                lines.iter().all(|l| !l.contains("--allow-host")),
                "{who:?} {backend}: {lines:?}"
            );
        }
    }
}
