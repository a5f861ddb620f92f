//! Secrets by identity: a deny-read object stays unreadable through its
//! other names, through `stockade exec` on the real kernel, both backends,
//! as root and (when we are root, as in CI) as `nobody`: a second mount of
//! its directory (a real bind mount, made in a private mount namespace the
//! test creates so the host's table is untouched), a hard link made before
//! the run, and `/proc/<pid>/root` and `/proc/<pid>/fd` of the processes
//! around it. When `CI=true` a missing runner is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

const SECRET: &str = "TOPSECRET";

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn base() -> PathBuf {
    let b = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let _ = fs::set_permissions(&b, fs::Permissions::from_mode(0o755));
    b
}

/// `home` (the command's `$HOME`, with `~/.ssh/id_ed25519` secret and a
/// plain `notes.txt`), `ws` (the workspace), `state`, and `dir` for
/// anything else; all outside every writable root.
struct Scratch {
    dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    state: PathBuf,
    who: Who,
}

impl Scratch {
    fn new(who: Who) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("secrets-")
            .tempdir_in(base())
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let s = Self {
            home: dir.path().join("home"),
            ws: dir.path().join("ws"),
            state: dir.path().join("state"),
            dir,
            who,
        };
        for d in [&s.home, &s.ws, &s.state, &s.home.join(".ssh")] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(s.key(), format!("{SECRET}\n")).unwrap();
        fs::write(s.home.join("notes.txt"), "plain\n").unwrap();
        s
    }

    fn key(&self) -> PathBuf {
        self.home.join(".ssh/id_ed25519")
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn own(&self) {
        self.who.own(self.dir.path());
    }

    /// `stockade exec --json --backend B [flags] -- sh -c SCRIPT`, as
    /// `who`, after `mounts` (`mount --bind SRC DST` pairs, done as root)
    /// in a private mount namespace of its own.
    fn exec(
        &self,
        backend: &str,
        mounts: &[(PathBuf, PathBuf)],
        flags: &[&str],
        script: &str,
    ) -> Output {
        let mut inner = self.who.command(env!("CARGO_BIN_EXE_stockade"));
        inner
            .args(["exec", "--json", "--backend", backend])
            .args(flags)
            .args(["--", "/bin/sh", "-c", script]);
        let mut c = if mounts.is_empty() {
            inner
        } else {
            // `unshare -m` makes the namespace private (util-linux's
            // default propagation), so nothing reaches the host's table.
            let mut prelude = String::new();
            let mut args: Vec<OsString> = Vec::new();
            for (i, (src, dst)) in mounts.iter().enumerate() {
                prelude.push_str(&format!(
                    "mount --bind \"${}\" \"${}\" || exit 99; ",
                    2 * i + 1,
                    2 * i + 2
                ));
                args.push(src.into());
                args.push(dst.into());
            }
            prelude.push_str(&format!("shift {}; exec \"$@\"", 2 * mounts.len()));
            let mut c = Command::new("unshare");
            c.args(["-m", "--", "/bin/sh", "-c", &prelude, "sh"])
                .args(args)
                .arg(inner.get_program())
                .args(inner.get_args());
            c
        };
        c.env("XDG_RUNTIME_DIR", &self.state)
            .env("HOME", &self.home)
            .env_remove("TMPDIR")
            .env_remove("CARGO_HOME")
            .env_remove("npm_config_cache")
            .current_dir(&self.ws)
            .stdin(Stdio::null());
        let out = c.output().unwrap();
        assert_ne!(
            out.status.code(),
            Some(99),
            "mount failed: {}",
            text(&out.stderr)
        );
        out
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The result's stdout, the effective deny-read list and the gap names.
struct Ran {
    stdout: String,
    deny_read: Vec<String>,
    gaps: Vec<String>,
}

fn ran(out: &Output, ctx: &str) -> Ran {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{ctx}: {e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    let names = |v: &serde_json::Value, key: Option<&str>| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("{ctx}: {v}"))
            .iter()
            .map(|x| match key {
                Some(k) => x[k].as_str().unwrap().to_owned(),
                None => x.as_str().unwrap().to_owned(),
            })
            .collect()
    };
    let sandbox = &v["result"]["sandbox"];
    Ran {
        // The command's stderr too: a secret must not reach either.
        stdout: format!(
            "{}{}",
            v["result"]["stdout"]["bytes"].as_str().unwrap_or_default(),
            v["result"]["stderr"]["bytes"].as_str().unwrap_or_default()
        ),
        deny_read: names(&sandbox["deny_read"], None),
        gaps: names(&sandbox["gaps"], Some("name")),
    }
}

fn root_or_skip() -> bool {
    let root = rustix::process::geteuid().is_root();
    assert!(root || !stockade_testkit::in_ci(), "CI runs as root");
    if !root {
        eprintln!("skipping: making a bind mount needs root");
    }
    root
}

/// A bind mount of `$HOME` elsewhere, one of `~/.ssh` alone and one of
/// the key file alone: the key is unreadable under each name, while the
/// plain file beside it reads through the same mount (so the mount is
/// there and the command ran). And the reverse: the key denied by the
/// name the subtree bind gives it stays unreadable under `$HOME`.
#[test]
fn a_secret_is_unreadable_through_another_mount_of_its_filesystem() {
    if !root_or_skip() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = Scratch::new(who);
            let (home2, keys, file) = (s.at("home2"), s.at("keys"), s.at("key-file"));
            fs::create_dir(&home2).unwrap();
            fs::create_dir(&keys).unwrap();
            fs::write(&file, "").unwrap();
            s.own();
            let mounts = [
                (s.home.clone(), home2.clone()),
                (s.home.join(".ssh"), keys.clone()),
                (s.key(), file.clone()),
            ];
            let script = format!(
                "cat '{h}/notes.txt'; cat '{h}/.ssh/id_ed25519'; cat '{k}/id_ed25519'; cat '{f}'; cat \"$HOME/.ssh/id_ed25519\"; true",
                h = home2.display(),
                k = keys.display(),
                f = file.display()
            );
            let out = s.exec(backend, &mounts, &[], &script);
            let ctx = format!("{who:?} {backend}: {}", text(&out.stderr));
            let r = ran(&out, &ctx);
            assert!(r.stdout.contains("plain"), "{ctx}: {}", r.stdout);
            assert!(!r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
            for alias in [home2.join(".ssh"), keys.clone(), file.clone()] {
                assert!(
                    r.deny_read.contains(&alias.display().to_string()),
                    "{ctx}: {:?}",
                    r.deny_read
                );
            }
            assert!(r.gaps.contains(&"deny-read-aliases".to_owned()), "{ctx}");
            // Denied by the bind's name, read by the original's.
            let denied = keys.display().to_string();
            let out = s.exec(
                backend,
                &mounts,
                &["--no-default-deny-read", "--deny-read", &denied],
                "cat \"$HOME/notes.txt\"; cat \"$HOME/.ssh/id_ed25519\"; true",
            );
            let ctx = format!("{who:?} {backend} reverse: {}", text(&out.stderr));
            let r = ran(&out, &ctx);
            assert!(r.stdout.contains("plain"), "{ctx}: {}", r.stdout);
            assert!(!r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
        }
    }
}

/// A hard link to the key made (by the user, before the run) in the
/// workspace: bwrap hides it too; Landlock cannot take read back inside a
/// writable root, so the run is refused (125) naming the key and the link;
/// read-only, where the workspace is not writable, Landlock hides it. A
/// link outside every scanned tree refuses the run on both, naming the key
/// and its link count.
#[test]
fn a_hard_link_to_a_secret_made_before_the_run_is_hidden_or_refuses_the_run() {
    for who in users() {
        for backend in backends() {
            let s = Scratch::new(who);
            s.own();
            let link = s.ws.join("copy");
            let made = who.command("ln").arg(s.key()).arg(&link).status().unwrap();
            assert!(made.success(), "{who:?}: ln");
            let script = "cat \"$HOME/notes.txt\"; cat copy; true";
            // The key's directory denied (the default list), and the key
            // file alone.
            let key = s.key().display().to_string();
            for deny in [&[][..], &["--no-default-deny-read", "--deny-read", &key]] {
                let out = s.exec(backend, &[], deny, script);
                let ctx = format!("{who:?} {backend} {deny:?}: {}", text(&out.stderr));
                match backend {
                    "bwrap" => {
                        let r = ran(&out, &ctx);
                        assert!(r.stdout.contains("plain"), "{ctx}: {}", r.stdout);
                        assert!(!r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
                        assert!(
                            r.deny_read.contains(&link.display().to_string()),
                            "{ctx}: {:?}",
                            r.deny_read
                        );
                    }
                    _ => {
                        assert_eq!(out.status.code(), Some(125), "{ctx}");
                        let err = text(&out.stderr);
                        assert!(
                            err.contains(&s.key().display().to_string())
                                && err.contains(&link.display().to_string()),
                            "{ctx}"
                        );
                        assert!(!text(&out.stdout).contains(SECRET), "{ctx}");
                    }
                }
                let out = s.exec(
                    backend,
                    &[],
                    &[deny, &["--mode", "read-only"]].concat(),
                    script,
                );
                let ctx = format!(
                    "{who:?} {backend} {deny:?} read-only: {}",
                    text(&out.stderr)
                );
                let r = ran(&out, &ctx);
                assert!(r.stdout.contains("plain"), "{ctx}: {}", r.stdout);
                assert!(!r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
            }

            // A third name, outside the workspace and the writable roots.
            let far = s.home.join("backup-key");
            let made = who.command("ln").arg(s.key()).arg(&far).status().unwrap();
            assert!(made.success(), "{who:?}: ln");
            let out = s.exec(backend, &[], &[], "cat \"$HOME/backup-key\"; echo ran");
            let ctx = format!("{who:?} {backend} far: {}", text(&out.stderr));
            assert_eq!(out.status.code(), Some(125), "{ctx}");
            let err = text(&out.stderr);
            assert!(
                err.contains(&s.key().display().to_string()) && err.contains("has 3 names"),
                "{ctx}"
            );
            assert!(!text(&out.stdout).contains(SECRET), "{ctx}");
            assert!(!text(&out.stdout).contains("ran"), "{ctx}");
        }
    }
}

/// `/proc/<pid>/root/<secret>` and every descriptor of every process the
/// command can see (stockade's own among them, and pid 1) read nothing of
/// the key, while `/proc/self/root` reads the plain file (so the path form
/// works and the command ran).
#[test]
fn a_secret_is_unreadable_through_proc_root_and_fd_of_any_process() {
    for who in users() {
        for backend in backends() {
            let s = Scratch::new(who);
            s.own();
            let script = format!(
                "cat /proc/self/root'{notes}'; echo pid1-$(test -d /proc/1 && echo seen); \
                 for p in /proc/[0-9]*; do cat \"$p/root{key}\" 2>/dev/null; \
                 for f in \"$p\"/fd/*; do [ -f \"$f\" ] && head -c 4096 \"$f\" 2>/dev/null; done; done; \
                 cat /proc/$PPID/root'{key}'; true",
                notes = s.home.join("notes.txt").display(),
                key = s.key().display()
            );
            // The key named too, so stockade itself holds it open (by
            // identity) while the command runs: its descriptor is one more
            // name to try through /proc/<pid>/fd.
            let key = s.key().display().to_string();
            let out = s.exec(backend, &[], &["--deny-read", &key], &script);
            let ctx = format!("{who:?} {backend}: {}", text(&out.stderr));
            let r = ran(&out, &ctx);
            assert!(r.stdout.contains("plain"), "{ctx}: {}", r.stdout);
            assert!(r.stdout.contains("pid1-seen"), "{ctx}: {}", r.stdout);
            assert!(!r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
            // Unconfined, the same script does read it that way: the look
            // is one that would find it.
            let out = s.exec(backend, &[], &["--mode", "danger-full-access"], &script);
            let r = ran(&out, &ctx);
            assert!(r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
        }
    }
}

/// `landlock-run` alone, told of one name only: an entry beside a denied
/// object that *is* that object (a hard link beside a denied file, a bind
/// mount of the denied directory beside it) gets no read rule, since a
/// rule on it would grant read on the object under every name, the denied
/// one included.
#[test]
fn landlock_run_grants_nothing_to_an_entry_that_is_the_denied_object() {
    let bind = rustix::process::geteuid().is_root();
    for who in users() {
        let s = Scratch::new(who);
        let d = s.at("d");
        fs::create_dir_all(d.join("keys")).unwrap();
        fs::write(d.join("keys/k"), format!("{SECRET}\n")).unwrap();
        fs::write(d.join("secret"), format!("{SECRET}\n")).unwrap();
        fs::write(d.join("plain"), "plain\n").unwrap();
        fs::hard_link(d.join("secret"), d.join("link")).unwrap();
        fs::create_dir(d.join("keys2")).unwrap();
        s.own();
        let (secret, keys) = (d.join("secret"), d.join("keys"));
        let script = format!(
            "cat '{d}/plain'; cat '{d}/secret'; cat '{d}/link'; cat '{d}/keys/k'; cat '{d}/keys2/k'; true",
            d = d.display()
        );
        let mut inner = who.command(env!("CARGO_BIN_EXE_landlock-run"));
        inner
            .args(["--ro", "/", "--rw", "/dev/null", "--deny-read"])
            .arg(&secret)
            .arg("--deny-read")
            .arg(&keys)
            .args(["--", "/bin/sh", "-c", &script]);
        let mut c = if bind {
            let mut c = Command::new("unshare");
            c.args([
                "-m",
                "--",
                "/bin/sh",
                "-c",
                "mount --bind \"$1\" \"$2\" || exit 99; shift 2; exec \"$@\"",
                "sh",
            ])
            .arg(&keys)
            .arg(d.join("keys2"))
            .arg(inner.get_program())
            .args(inner.get_args());
            c
        } else {
            inner
        };
        let out = c.stdin(Stdio::null()).output().unwrap();
        let ctx = format!("{who:?}: {}", text(&out.stderr));
        assert_ne!(out.status.code(), Some(99), "{ctx}");
        let stdout = text(&out.stdout);
        assert!(stdout.contains("plain"), "{ctx}: {stdout}");
        assert!(!stdout.contains(SECRET), "{ctx}: {stdout}");
    }
}

/// `~/.ssh` also mounted inside the workspace: bwrap hides it there after
/// binding the workspace; Landlock cannot take read back inside a writable
/// root, so the run is refused (125) naming the secret and the mount.
#[test]
fn a_mount_of_a_secret_inside_the_workspace_is_hidden_or_refuses_the_run() {
    if !root_or_skip() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let s = Scratch::new(who);
            let inside = s.ws.join("keys");
            fs::create_dir(&inside).unwrap();
            fs::write(s.ws.join("mine.txt"), "mine\n").unwrap();
            s.own();
            let mounts = [(s.home.join(".ssh"), inside.clone())];
            let out = s.exec(
                backend,
                &mounts,
                &[],
                "cat mine.txt; cat keys/id_ed25519; echo ran",
            );
            let ctx = format!("{who:?} {backend}: {}", text(&out.stderr));
            match backend {
                "bwrap" => {
                    let r = ran(&out, &ctx);
                    assert!(
                        r.stdout.contains("mine") && r.stdout.contains("ran"),
                        "{ctx}: {}",
                        r.stdout
                    );
                    assert!(!r.stdout.contains(SECRET), "{ctx}: {}", r.stdout);
                }
                _ => {
                    assert_eq!(out.status.code(), Some(125), "{ctx}");
                    let err = text(&out.stderr);
                    assert!(
                        err.contains(&s.home.join(".ssh").display().to_string())
                            && err.contains(&inside.display().to_string()),
                        "{ctx}"
                    );
                    assert!(!text(&out.stdout).contains(SECRET), "{ctx}");
                    assert!(!text(&out.stdout).contains("ran"), "{ctx}");
                }
            }
        }
    }
}
