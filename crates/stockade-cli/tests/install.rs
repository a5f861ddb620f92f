//! The installed copy: `cargo install --path crates/stockade-cli` ships both
//! binaries, the launcher byte-identical to the one built, and the installed
//! `stockade` confines with the launcher beside it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn cargo_install_ships_a_working_launcher() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // A target dir of its own (cargo test holds the main one's lock); kept
    // under the target tmpdir so a reused target dir makes this fast.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("install-target");
    // Installed outside every writable root: a launcher under /tmp is one a
    // confined command could replace, and stockade refuses it.
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let root = tempfile::Builder::new()
        .prefix("install-root-")
        .tempdir_in(&base)
        .unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&repo)
        .args([
            "install",
            "--path",
            "crates/stockade-cli",
            "--debug",
            "--locked",
            "--offline",
            "--quiet",
        ])
        .arg("--root")
        .arg(root.path())
        .arg("--target-dir")
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bin = root.path().join("bin");
    let installed = bin.join("landlock-run");
    assert!(bin.join("stockade").is_file());
    assert_eq!(
        fs::read(&installed).unwrap(),
        fs::read(target.join("debug/landlock-run")).unwrap(),
        "the installed launcher differs from the one built"
    );

    // PATH without the build tree: the launcher must be found beside the
    // installed executable.
    // Outside every writable root: not under /tmp or $TMPDIR (a target dir
    // may well live under /tmp).
    let ws = tempfile::Builder::new().tempdir_in(base).unwrap();
    let stockade = || {
        let mut c = Command::new(bin.join("stockade"));
        c.env("PATH", "/usr/bin:/bin")
            .env("XDG_RUNTIME_DIR", ws.path())
            .current_dir(ws.path());
        c
    };
    let out = stockade().args(["probe", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["backends"][1]["backend"], "landlock");
    assert_eq!(
        report["backends"][1]["runner"],
        installed.display().to_string(),
        "{report}"
    );
    assert_eq!(report["backends"][1]["usable"], true, "{report}");

    let outside = ws
        .path()
        .parent()
        .unwrap()
        .join(format!("install-outside-{}", std::process::id()));
    let out = stockade()
        .args([
            "exec",
            "--backend",
            "landlock",
            "--",
            "/bin/sh",
            "-c",
            "echo in > inside; echo out > \"$1\"",
            "sh",
        ])
        .arg(&outside)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    assert_eq!(fs::read(ws.path().join("inside")).unwrap(), b"in\n");
    assert!(!outside.exists(), "the installed copy let a write escape");
}
