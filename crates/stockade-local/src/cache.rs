//! The `auto` verdict, kept between processes so a CLI does not re-probe on
//! every invocation.
//!
//! Why a stale or tampered verdict still fails closed: the file can only name
//! one of the confining backends (`bwrap` or `landlock`), never a runner path
//! and never "none"; anything else is ignored and the chain is probed again.
//! Runner paths are located afresh on every start, and the named backend still
//! runs its full profile, whose exec-time refusal (bwrap's `bwrap: ` lines,
//! the launcher's exit 125) is a runner failure, never an unconfined run. The
//! key (boot id, euid, user-namespace sysctls, the identity of every runner
//! file) makes any host change re-probe.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::Backend;

const FILE: &str = "auto-verdict";
const MAGIC: &str = "stockade-verdict-v1";

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

pub(crate) fn load(dir: &Path, key: &[u8]) -> Option<Backend> {
    let text = fs::read_to_string(dir.join(FILE)).ok()?;
    let mut lines = text.lines();
    if lines.next()? != MAGIC || lines.next()? != hex(key) {
        return None;
    }
    let backend = match lines.next()? {
        "bwrap" => Backend::Bwrap,
        "landlock" => Backend::Landlock,
        _ => return None,
    };
    lines.next().is_none().then_some(backend)
}

/// Best effort: a verdict that cannot be stored is simply probed again.
pub(crate) fn store(dir: &Path, key: &[u8], backend: Backend) {
    let _ = (|| -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        writeln!(tmp, "{MAGIC}\n{}\n{}", hex(key), backend.as_str())?;
        tmp.persist(dir.join(FILE)).map_err(|e| e.error)?;
        Ok(())
    })();
}

pub(crate) fn forget(dir: &Path) {
    let _ = fs::remove_file(dir.join(FILE));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_key_mismatch() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path(), b"k"), None);
        store(d.path(), b"k\n1", Backend::Landlock);
        assert_eq!(load(d.path(), b"k\n1"), Some(Backend::Landlock));
        assert_eq!(load(d.path(), b"k\n2"), None);
        forget(d.path());
        assert_eq!(load(d.path(), b"k\n1"), None);
    }

    #[test]
    fn tampered_verdicts_are_ignored() {
        let d = tempfile::tempdir().unwrap();
        let key = hex(b"k");
        for body in [
            format!("{MAGIC}\n{key}\nnone\n"),
            format!("{MAGIC}\n{key}\n/usr/bin/true\n"),
            format!("{MAGIC}\n{key}\nbwrap\nextra\n"),
            format!("other\n{key}\nbwrap\n"),
            String::new(),
        ] {
            fs::write(d.path().join(FILE), body).unwrap();
            assert_eq!(load(d.path(), b"k"), None);
        }
        fs::write(d.path().join(FILE), format!("{MAGIC}\n{key}\nbwrap\n")).unwrap();
        assert_eq!(load(d.path(), b"k"), Some(Backend::Bwrap));
    }
}
