//! `stockade exec` reads the same `stockade.toml` as `stockade acp` for what
//! applies to a command ([policy] mode, network and lists, [sandbox]),
//! honours `$STOCKADE_MODE`, and lets its flags go over both; a config a
//! run could rewrite is refused. Real kernel, as root and (when we are
//! root, as in CI) as `nobody`. When `CI=true` a missing runner fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stockade_testkit::users::{Who, users};

/// A scratch tree outside every writable root: `home`, `ws`, `state`, and
/// `etc` (where a config may live), owned by `who`.
struct Scratch {
    dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    etc: PathBuf,
    who: Who,
}

impl Scratch {
    fn new(who: Who) -> Self {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        stockade_testkit::open_to_all(&base);
        let dir = tempfile::Builder::new()
            .prefix("exec-config-")
            .tempdir_in(base)
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let s = Self {
            home: dir.path().join("home"),
            ws: dir.path().join("ws"),
            etc: dir.path().join("etc"),
            dir,
            who,
        };
        for d in [&s.home, &s.ws, &s.etc, &s.dir.path().join("state")] {
            fs::create_dir(d).unwrap();
        }
        s
    }

    fn config(&self, at: &Path, text: &str) -> PathBuf {
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        // The default deny list would name this host's home; left out here.
        // An acp config always has a [sandbox] (its bash confines).
        let sandbox = if text.contains("[sandbox]") {
            ""
        } else {
            "[sandbox]\n"
        };
        fs::write(at, format!("{sandbox}[policy]\ndeny_read = []\n{text}")).unwrap();
        at.to_path_buf()
    }

    /// `stockade exec` as `who`, in the workspace, with no config or mode
    /// from the environment.
    fn stockade(&self) -> Command {
        self.who.own(self.dir.path());
        let mut c = self.who.command(env!("CARGO_BIN_EXE_stockade"));
        c.env("XDG_RUNTIME_DIR", self.dir.path().join("state"))
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("STOCKADE_CONFIG")
            .env_remove("STOCKADE_MODE")
            .env_remove("TMPDIR")
            .current_dir(&self.ws)
            .arg("exec");
        c
    }

    /// `stockade exec ARGS -- touch NAME`: whether NAME was created.
    fn touches(&self, cmd: &mut Command, name: &str) -> (bool, Output) {
        let out = cmd.args(["--json", "--", "touch", name]).output().unwrap();
        (self.ws.join(name).exists(), out)
    }
}

fn facts(out: &Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["result"]["sandbox"].clone()
}

#[test]
fn the_configs_mode_applies_and_flags_and_the_environment_go_over_it() {
    for who in users() {
        let s = Scratch::new(who);
        let cfg = s.config(
            &s.etc.join("stockade.toml"),
            "mode = \"read-only\"\n[sandbox]\nbackend = \"landlock\"\n",
        );
        // The config alone: read-only, under its backend.
        let (made, out) = s.touches(s.stockade().arg("--config").arg(&cfg), "a");
        assert!(!made, "{who:?}: {}", String::from_utf8_lossy(&out.stderr));
        let f = facts(&out);
        assert_eq!(f["mode"], "read-only", "{who:?}");
        assert_eq!(f["backend"], "landlock", "{who:?}");
        assert_eq!(f["denied"], true, "{who:?}");
        // A flag goes over it.
        let (made, out) = s.touches(
            s.stockade().arg("--config").arg(&cfg).args([
                "--mode",
                "workspace-write",
                "--backend",
                "landlock",
            ]),
            "b",
        );
        assert!(made, "{who:?}: {}", String::from_utf8_lossy(&out.stderr));
        // $STOCKADE_MODE goes over the config, and a flag over it.
        let cfg_ww = s.config(&s.etc.join("ww.toml"), "mode = \"workspace-write\"\n");
        let (made, _) = s.touches(
            s.stockade()
                .arg("--config")
                .arg(&cfg_ww)
                .env("STOCKADE_MODE", "read-only"),
            "c",
        );
        assert!(!made, "{who:?}: STOCKADE_MODE over the config");
        let (made, _) = s.touches(
            s.stockade()
                .arg("--config")
                .arg(&cfg_ww)
                .env("STOCKADE_MODE", "read-only")
                .args(["--mode", "workspace-write"]),
            "d",
        );
        assert!(made, "{who:?}: --mode over STOCKADE_MODE");
        // Without any config, $STOCKADE_MODE alone.
        let (made, out) = s.touches(s.stockade().env("STOCKADE_MODE", "read-only"), "e");
        assert!(!made, "{who:?}");
        assert_eq!(facts(&out)["mode"], "read-only");
        let out = s
            .stockade()
            .env("STOCKADE_MODE", "full")
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{who:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("STOCKADE_MODE"));
    }
}

#[test]
fn only_a_named_config_is_read_and_no_extra_root_may_hold_the_agents_state() {
    for who in users() {
        let s = Scratch::new(who);
        // A file at the default path (where an earlier run with a wide
        // enough root could have planted it) is not read unnamed.
        let default = s.config(
            &s.home.join(".config/stockade/stockade.toml"),
            "mode = \"read-only\"\n",
        );
        let (made, out) = s.touches(&mut s.stockade(), "a");
        assert!(made, "{who:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(facts(&out)["mode"], "workspace-write");
        // Named by $STOCKADE_CONFIG, it is read.
        let (made, out) = s.touches(s.stockade().env("STOCKADE_CONFIG", &default), "b");
        assert!(!made, "{who:?}");
        assert_eq!(facts(&out)["mode"], "read-only");
        // A named file must exist.
        let out = s
            .stockade()
            .env("STOCKADE_CONFIG", s.etc.join("missing.toml"))
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{who:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
        // No extra root may contain what decides `stockade acp`'s later
        // runs: its default config (existing or not) and its session logs.
        fs::remove_file(&default).unwrap();
        let state = s.dir.path().join("agent-state");
        for (env, root, names) in [
            (None, s.home.join(".config"), "stockade.toml"),
            (Some(&state), state.clone(), "sessions"),
        ] {
            fs::create_dir_all(&root).unwrap();
            let mut cmd = s.stockade();
            if let Some(dir) = env {
                cmd.env("STOCKADE_STATE_DIR", dir);
            }
            let out = cmd
                .arg("--writable")
                .arg(&root)
                .args(["--", "true"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{who:?} {root:?}: {err}");
            assert!(err.contains(names), "{who:?}: {err}");
        }
    }
}

#[test]
fn the_configs_lists_and_network_apply_beside_the_flags() {
    let s = Scratch::new(Who::Me);
    let extra = s.dir.path().join("extra");
    let more = s.dir.path().join("more");
    fs::create_dir(&extra).unwrap();
    fs::create_dir(&more).unwrap();
    let cfg = s.config(
        &s.etc.join("stockade.toml"),
        &format!(
            "writable_roots = [{:?}]\nnetwork = \"deny\"\nallowed_hosts = [\"example.test\"]\n",
            extra.display().to_string()
        ),
    );
    let out = s
        .stockade()
        .arg("--config")
        .arg(&cfg)
        .arg("--writable")
        .arg(&more)
        .args(["--json", "--", "sh", "-c"])
        .arg(format!(
            "touch '{}/x' '{}/y'",
            extra.display(),
            more.display()
        ))
        .output()
        .unwrap();
    assert!(
        extra.join("x").exists() && more.join("y").exists(),
        "{out:?}"
    );
    let f = facts(&out);
    assert_eq!(f["network"], "deny");
    let roots: Vec<String> = f["writable_roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert!(roots.iter().any(|r| Path::new(r) == extra), "{roots:?}");
    assert!(roots.iter().any(|r| Path::new(r) == more), "{roots:?}");
}

#[test]
fn a_config_a_run_could_rewrite_is_refused() {
    for who in users() {
        let s = Scratch::new(who);
        // In the workspace, and in an extra root.
        let inside = s.config(&s.ws.join(".stockade/stockade.toml"), "");
        let out = s
            .stockade()
            .arg("--config")
            .arg(&inside)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{who:?}: {err}");
        assert!(
            err.contains("config") && err.contains("stockade.toml"),
            "{err}"
        );
        let outside = s.config(&s.etc.join("stockade.toml"), "");
        let out = s
            .stockade()
            .arg("--config")
            .arg(&outside)
            .arg("--writable")
            .arg(&s.etc)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{who:?}: {err}");
        // A bad key names the file and the key.
        let bad = s.config(&s.etc.join("bad.toml"), "mode = \"sideways\"\n");
        let out = s
            .stockade()
            .arg("--config")
            .arg(&bad)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{who:?}: {err}");
        assert!(err.contains("bad.toml"), "{err}");
    }
}
