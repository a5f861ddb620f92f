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
    // The launcher the install built: under the host's tuple, as this
    // suite's own (whose target tmp dir sits in `<target>/<tuple>/tmp`),
    // since .cargo/config.toml names the target.
    let tuple = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .and_then(Path::file_name)
        .unwrap();
    let built = target.join(tuple).join("debug/landlock-run");
    assert_eq!(
        fs::read(&installed).unwrap(),
        fs::read(&built).unwrap(),
        "the installed launcher differs from the one built"
    );
    // The README's install command builds both static: no loader, so no
    // start-up relocation, and no `LD_*` variable can reach into them.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    for name in ["stockade", "landlock-run"] {
        let elf = fs::read(bin.join(name)).unwrap();
        assert!(
            !has_interpreter(&elf),
            "the installed {name} is dynamically linked"
        );
    }

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

/// Whether a 64-bit little-endian ELF file names a program interpreter
/// (`PT_INTERP`): a dynamically linked executable does, a static one not.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    let u16_at = |o: usize| usize::from(u16::from_le_bytes([elf[o], elf[o + 1]]));
    let phoff = usize::try_from(u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap())).unwrap();
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == PT_INTERP
    })
}
