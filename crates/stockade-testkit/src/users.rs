//! Who a real-runner test runs as: ourselves, and, when we are root (as in
//! CI), the unprivileged `nobody` through `setpriv`, so every boundary is
//! tried both ways.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// The unprivileged identity of the non-root legs.
pub const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Me,
    Nobody,
}

/// Every identity to test as: ourselves, and `nobody` when we are root. CI
/// runs as root, so there both legs must run.
pub fn users() -> Vec<Who> {
    if rustix::process::geteuid().is_root() {
        vec![Who::Me, Who::Nobody]
    } else {
        assert!(
            !crate::in_ci(),
            "CI runs as root; the root legs must run there"
        );
        eprintln!("not root: only the unprivileged legs run");
        vec![Who::Me]
    }
}

impl Who {
    /// `program`, run as this identity.
    pub fn command(self, program: impl AsRef<OsStr>) -> Command {
        match self {
            Who::Me => Command::new(program),
            Who::Nobody => {
                let mut c = Command::new("setpriv");
                c.args([
                    format!("--reuid={NOBODY}"),
                    format!("--regid={NOBODY}"),
                    "--clear-groups".into(),
                    "--".into(),
                ])
                .arg(program);
                c
            }
        }
    }

    /// Hand `path` (recursively) to this identity.
    pub fn own(self, path: &Path) {
        if self == Who::Nobody {
            let st = Command::new("chown")
                .args(["-R", &format!("{NOBODY}:{NOBODY}")])
                .arg(path)
                .status()
                .expect("chown runs");
            assert!(st.success(), "chown -R {}", path.display());
        }
    }
}

/// A scratch `ws` (the grant) and its sibling `outside` (never granted)
/// under `scratch_base(target_tmp)/PREFIX*`: filled by `fill(ws, outside)`
/// as the test's own user, then handed to `who` whole. Removed on drop.
pub struct WsAndOutside {
    pub ws: std::path::PathBuf,
    pub out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl WsAndOutside {
    pub fn new(
        target_tmp: &Path,
        prefix: &str,
        who: Who,
        fill: impl FnOnce(&Path, &Path),
    ) -> WsAndOutside {
        let base = crate::scratch_base(target_tmp);
        // The unprivileged legs must reach it.
        crate::open_to_all(&base);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&base)
            .expect("scratch dir");
        let ws = dir.path().join("ws");
        let out = dir.path().join("outside");
        std::fs::create_dir(&ws).expect("ws");
        std::fs::create_dir(&out).expect("outside");
        fill(&ws, &out);
        who.own(dir.path());
        WsAndOutside { ws, out, _dir: dir }
    }
}
