//! A deny-read path beneath a writable root (`stockade exec` run in
//! `$HOME`, so the workspace is `$HOME` and `~/.ssh` lies inside it), on the
//! real kernel, both backends, as root and (when we are root, as in CI) as
//! `nobody`:
//!
//! - the key is unreadable by its name, through a symlink made during the
//!   run, through `..`, through a hard link made before the run, from
//!   python's `open()`, and through `/proc/self/fd/N` of an `O_PATH`
//!   descriptor of its directory; bwrap hides it with a mount, Landlock
//!   refuses it through its supervisor;
//! - what lies beside it still reads, and so does what the run creates
//!   there (under Landlock the supervisor serves those reads);
//! - each run says so on stderr exactly once, naming the path, the root and
//!   how it is enforced, and `--json` carries the same fact.
//!
//! `landlock-run` itself is tried too: without `--no-supervise` a run with a
//! `--deny-read` path beneath a `--rw` root refuses every way in that a
//! command has (including moving or linking the key out during the run),
//! while `--no-supervise` cannot (the caller names that gap).
//! When `CI=true` a missing runner or python3 is a failure.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use stockade_testkit::users::{Who, users};

const SECRET: &str = "TOPSECRET-KEY";
/// The system python3 (not a per-user shim that `nobody` could not reach).
const PY: &str = "/usr/bin/python3";
const LAUNCHER: &str = env!("CARGO_BIN_EXE_landlock-run");
const LINE: &str = "stockade: deny-read beneath a writable root: ";

fn backends() -> Vec<&'static str> {
    let mut b = vec!["landlock"];
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        b.insert(0, "bwrap");
    }
    b
}

fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A `$HOME` (also the workspace) with `.ssh/id_rsa` (the secret), a hard
/// link to it made before the run (`keylink`) and a plain `notes.txt`.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    state: PathBuf,
}

impl Home {
    fn new(who: Who) -> Home {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        stockade_testkit::open_to_all(&base);
        let dir = tempfile::Builder::new()
            .prefix("deny-beneath-")
            .tempdir_in(&base)
            .unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        // Canonical: the facts name held (resolved) paths.
        let root = fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let state = root.join("state");
        fs::create_dir_all(home.join(".ssh")).unwrap();
        fs::create_dir_all(&state).unwrap();
        fs::write(home.join(".ssh/id_rsa"), format!("{SECRET}\n")).unwrap();
        fs::hard_link(home.join(".ssh/id_rsa"), home.join("keylink")).unwrap();
        fs::write(home.join("notes.txt"), "plain\n").unwrap();
        who.own(dir.path());
        Home {
            _dir: dir,
            home,
            state,
        }
    }

    fn key(&self) -> PathBuf {
        self.home.join(".ssh/id_rsa")
    }

    /// `stockade exec --backend B --network deny [flags] -- sh -c SCRIPT`
    /// as `who`, in `$HOME`.
    fn exec(&self, who: Who, backend: &str, flags: &[&str], script: &str) -> Output {
        let mut c = who.command(env!("CARGO_BIN_EXE_stockade"));
        c.args(["exec", "--backend", backend, "--network", "deny"])
            .args(flags)
            .args(["--", "/bin/sh", "-c", script])
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", &self.state)
            .env_remove("TMPDIR")
            .env_remove("CARGO_HOME")
            .env_remove("npm_config_cache")
            .current_dir(&self.home)
            .stdin(Stdio::null());
        c.output().unwrap()
    }
}

/// Every way in a command has, each followed by a marker printed only when
/// it was refused; then what must still read (beside the key, and what the
/// run creates there).
const ATTEMPTS: &str = r#"
cat .ssh/id_rsa || echo REFUSED-name
ln -s .ssh/id_rsa sym && { cat sym || echo REFUSED-symlink; }
ln -s .ssh dirsym && { cat dirsym/id_rsa || echo REFUSED-dirsymlink; }
mkdir -p sub && { cat sub/../.ssh/id_rsa || echo REFUSED-dotdot; }
cat keylink || echo REFUSED-hardlink
/usr/bin/python3 -c 'print(open(".ssh/id_rsa").read())' || echo REFUSED-python
/usr/bin/python3 -c '
import os
fd = os.open(".ssh", os.O_PATH)
print(open("/proc/self/fd/%d/id_rsa" % fd).read())' || echo REFUSED-procfd
/usr/bin/python3 -c '
import os
fd = os.open(".ssh", os.O_PATH | os.O_DIRECTORY)
print(os.read(os.open("id_rsa", os.O_RDONLY, dir_fd=fd), 100))' || echo REFUSED-dirfd
cat notes.txt
echo fresh > fresh.txt && cat fresh.txt
mkdir -p newdir && echo deep > newdir/f && cat newdir/f
"#;

const REFUSALS: [&str; 8] = [
    "REFUSED-name",
    "REFUSED-symlink",
    "REFUSED-dirsymlink",
    "REFUSED-dotdot",
    "REFUSED-hardlink",
    "REFUSED-python",
    "REFUSED-procfd",
    "REFUSED-dirfd",
];

#[test]
fn a_key_beneath_the_home_workspace_is_unreadable_by_every_name() {
    if !python() {
        return;
    }
    for who in users() {
        for backend in backends() {
            let h = Home::new(who);
            let out = h.exec(who, backend, &[], ATTEMPTS);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            let ctx = format!("{who:?} {backend}:\n{stdout}\n{stderr}");
            assert!(
                !stdout.contains(SECRET) && !stderr.contains(SECRET),
                "{ctx}"
            );
            for marker in REFUSALS {
                assert!(stdout.contains(marker), "{marker}: {ctx}");
            }
            // The command ran, and reads beside the key are untouched.
            for plain in ["plain\n", "fresh\n", "deep\n"] {
                assert!(stdout.contains(plain), "{plain}: {ctx}");
            }
            // The key itself is intact (the refusals changed nothing).
            assert_eq!(fs::read_to_string(h.key()).unwrap(), format!("{SECRET}\n"));
        }
    }
}

#[test]
fn each_run_says_once_how_the_key_beneath_the_root_is_enforced_and_json_carries_it() {
    for who in users() {
        for backend in backends() {
            let h = Home::new(who);
            let ssh = h.home.join(".ssh").display().to_string();
            let named = format!("{ssh} (in {})", h.home.display());
            let by = if backend == "bwrap" {
                "enforced: bwrap mounts"
            } else {
                "enforced: landlock's supervisor"
            };
            // Streaming: one line, whatever the command printed.
            let out = h.exec(who, backend, &[], "echo ran");
            let stderr = text(&out.stderr);
            let ctx = format!("{who:?} {backend}: {stderr}");
            assert_eq!(text(&out.stdout), "ran\n", "{ctx}");
            let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with(LINE)).collect();
            assert_eq!(lines.len(), 1, "{ctx}");
            assert!(lines[0].contains(&named) && lines[0].contains(by), "{ctx}");
            // --json: the same line once on stderr, and the fact.
            let out = h.exec(who, backend, &["--json"], "true");
            let stderr = text(&out.stderr);
            let ctx = format!("{who:?} {backend}: {stderr}");
            assert_eq!(stderr.matches(LINE).count(), 1, "{ctx}");
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{ctx}: {e}: {}", text(&out.stdout)));
            let facts = v["result"]["sandbox"]["deny_read_beneath"]
                .as_array()
                .unwrap_or_else(|| panic!("{ctx}: {v}"))
                .clone();
            let fact = facts
                .iter()
                .find(|f| f["path"] == ssh.as_str())
                .unwrap_or_else(|| panic!("{ctx}: {facts:?}"));
            assert_eq!(fact["root"], h.home.display().to_string().as_str());
            assert_eq!(fact["enforced"], true, "{fact}");
            let by = if backend == "bwrap" {
                "bwrap mounts"
            } else {
                "landlock supervisor"
            };
            assert_eq!(fact["by"], by, "{fact}");
            let gaps: Vec<&str> = v["result"]["sandbox"]["gaps"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|g| g["name"].as_str())
                .collect();
            assert!(!gaps.contains(&"deny-read"), "{ctx}: {gaps:?}");
            // Without the default list nothing lies beneath: no line.
            let out = h.exec(who, backend, &["--no-default-deny-read"], "true");
            assert!(!text(&out.stderr).contains(LINE), "{ctx}");
        }
    }
}

/// `stockade probe` in a directory holding a default deny-read entry says
/// so, with what each backend makes of it.
#[test]
fn probe_names_the_default_entries_beneath_the_current_directory() {
    let h = Home::new(Who::Me);
    let out = Command::new(env!("CARGO_BIN_EXE_stockade"))
        .arg("probe")
        .env("HOME", &h.home)
        .env("XDG_RUNTIME_DIR", &h.state)
        .current_dir(&h.home)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("deny-read beneath the workspace "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains(&h.home.join(".ssh").display().to_string()),
        "{line}"
    );
    assert!(
        line.contains("landlock: enforced by the supervisor"),
        "{line}"
    );
    if stockade_testkit::have_bwrap() {
        assert!(
            line.contains("bwrap: enforced (hidden by a mount)"),
            "{line}"
        );
    }
    // Elsewhere (a directory holding no entry) nothing is said.
    let out = Command::new(env!("CARGO_BIN_EXE_stockade"))
        .arg("probe")
        .env("HOME", &h.home)
        .env("XDG_RUNTIME_DIR", &h.state)
        .current_dir(&h.state)
        .output()
        .unwrap();
    assert!(!text(&out.stdout).contains("deny-read beneath the workspace"));
}

/// A name swapped between a file outside the root (whose open the
/// supervisor hands back to the kernel) and the key while it is read in a
/// loop, through `stockade exec` under Landlock: the key never reads, while
/// the outside file does (so the loop really raced).
#[test]
fn a_symlink_swapped_while_it_is_read_never_reaches_the_key() {
    if !python() {
        return;
    }
    let race = r#"
import os, threading
os.symlink("/etc/hostname", "a")
os.symlink(".ssh/id_rsa", "b")
stop = False
def swap():
    while not stop:
        for src in ("a", "b"):
            os.symlink(os.readlink(src), "tmp")
            os.rename("tmp", "l")
t = threading.Thread(target=swap)
t.start()
seen = set()
for _ in range(3000):
    try:
        with open("l") as f:
            seen.add(f.read().strip()[:40])
    except OSError as e:
        seen.add(type(e).__name__)
stop = True
t.join()
print(sorted(seen))
"#;
    let hostname = fs::read_to_string("/etc/hostname").unwrap_or_default();
    for who in users() {
        let h = Home::new(who);
        fs::write(h.home.join("race.py"), race).unwrap();
        who.own(&h.home.join("race.py"));
        let out = h.exec(who, "landlock", &[], "/usr/bin/python3 race.py");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let ctx = format!("{who:?}: {stdout}\n{stderr}");
        assert!(out.status.success(), "{ctx}");
        assert!(!stdout.contains(SECRET), "{ctx}");
        let name = hostname.trim();
        if !name.is_empty() {
            assert!(stdout.contains(&name[..name.len().min(40)]), "{ctx}");
        }
        assert!(stdout.contains("PermissionError"), "{ctx}");
    }
}

/// `landlock-run --ro / --rw HOME --deny-read HOME/.ssh [--no-supervise]
/// -- sh -c SCRIPT` as `who`, in HOME.
fn launcher(h: &Home, who: Who, supervise: bool, script: &str) -> Output {
    let mut c = who.command(LAUNCHER);
    c.args(["--ro", "/", "--rw"])
        .arg(&h.home)
        .arg("--deny-read")
        .arg(h.home.join(".ssh"))
        .arg("--deny-read")
        .arg(h.home.join("keylink"));
    if !supervise {
        c.arg("--no-supervise");
    }
    c.args(["--", "/bin/sh", "-c", script])
        .current_dir(&h.home)
        .stdin(Stdio::null());
    c.output().unwrap()
}

/// The launcher alone: every way in refused, including moving the key out
/// of its directory or linking it elsewhere during the run, and listing
/// the directory; what the run creates beside it reads. The same run under
/// `--no-supervise` reads the key.
#[test]
fn the_supervisor_refuses_reading_a_denied_path_beneath_a_writable_root() {
    if !python() {
        return;
    }
    let more = r#"
mv .ssh/id_rsa moved || echo REFUSED-move
ln .ssh/id_rsa linked || echo REFUSED-link
mv .ssh renamed && { cat renamed/id_rsa || echo REFUSED-renamed; mv renamed .ssh; }
ls .ssh || echo REFUSED-list
cp .ssh/id_rsa copy || echo REFUSED-copy
/usr/bin/python3 -c 'import os; os.open(".ssh/id_rsa", os.O_RDWR)' || echo REFUSED-rdwr
"#;
    for who in users() {
        let h = Home::new(who);
        // Without the supervisor Landlock cannot take read back beneath
        // the root it grants (stockade names that gap on every run): the
        // key reads, so what is refused below is the supervisor's doing.
        let out = launcher(&h, who, false, "cat .ssh/id_rsa");
        assert_eq!(
            text(&out.stdout),
            format!("{SECRET}\n"),
            "{who:?}: {}",
            text(&out.stderr)
        );
        let out = launcher(&h, who, true, &format!("{ATTEMPTS}{more}"));
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let ctx = format!("{who:?}:\n{stdout}\n{stderr}");
        assert!(
            !stdout.contains(SECRET) && !stderr.contains(SECRET),
            "{ctx}"
        );
        for marker in REFUSALS.iter().chain(&[
            "REFUSED-move",
            "REFUSED-link",
            "REFUSED-renamed",
            "REFUSED-list",
            "REFUSED-copy",
            "REFUSED-rdwr",
        ]) {
            assert!(stdout.contains(marker), "{marker}: {ctx}");
        }
        for plain in ["plain\n", "fresh\n", "deep\n"] {
            assert!(stdout.contains(plain), "{plain}: {ctx}");
        }
        assert!(h.key().is_file() && !h.home.join("moved").exists(), "{ctx}");
    }
}
