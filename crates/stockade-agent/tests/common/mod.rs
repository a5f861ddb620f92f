//! The scratch world the agent suites share: a workspace and a sibling
//! outside it (both outside every temp root), and a session store.
#![allow(dead_code)] // each suite uses what it needs

use std::path::PathBuf;

use stockade_session::SessionStore;

pub struct World {
    pub _dir: tempfile::TempDir,
    pub store: SessionStore,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

pub fn world() -> World {
    let base = stockade_testkit::scratch_base(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("agent-")
        .tempdir_in(base)
        .unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let store = SessionStore::new(dir.path().join("state"));
    World {
        _dir: dir,
        store,
        ws,
        outside,
    }
}
