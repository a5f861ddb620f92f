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

use std::path::Path;

use crate::Backend;

#[cfg(any(target_os = "linux", test))]
const FILE: &str = "auto-verdict";
#[cfg(any(target_os = "linux", test))]
const MAGIC: &str = "stockade-verdict-v1";

#[cfg(any(target_os = "linux", test))]
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The cache directory, opened without following a symlink, and only when
/// it is a directory owned by us that nobody else can write: a confined run
/// that replaced it with a symlink must not make stockade read, create or
/// delete files elsewhere, and a file another user wrote decides nothing.
#[cfg(target_os = "linux")]
mod sys {
    use std::ffi::OsString;
    use std::io::{Read, Write};
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, Mode, OFlags, fstat, openat, renameat, unlinkat};
    use rustix::process::geteuid;

    const DIR_FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);

    /// The descriptor's status when it is trusted, so a caller needs no
    /// second `fstat`.
    fn trusted(fd: &OwnedFd, dir: bool) -> Option<rustix::fs::Stat> {
        let st = fstat(fd).ok()?;
        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        let want = if dir {
            rustix::fs::FileType::Directory
        } else {
            rustix::fs::FileType::RegularFile
        };
        (kind == want && st.st_uid == geteuid().as_raw() && st.st_mode & 0o022 == 0).then_some(st)
    }

    pub(super) fn open_dir(dir: &Path, create: bool) -> Option<OwnedFd> {
        if create {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
        let fd = rustix::fs::open(dir, DIR_FLAGS, Mode::empty()).ok()?;
        trusted(&fd, true).map(|_| fd)
    }

    /// A verdict is a few hundred bytes; anything longer is not one.
    const MAX_LEN: u64 = 4096;

    pub(super) fn read(dir: &OwnedFd, name: &str) -> Option<String> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = openat(dir, name, flags, Mode::empty()).ok()?;
        let st = trusted(&fd, false)?;
        // Sized from the file, so the whole of it arrives in one read (and
        // a second that sees the end) instead of std's doubling probes
        // from 32 bytes: seven reads for a 700-byte verdict.
        let len = u64::try_from(st.st_size).ok()?;
        let mut text = String::with_capacity(usize::try_from(len.min(MAX_LEN)).ok()? + 1);
        std::fs::File::from(fd)
            .take(MAX_LEN)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    }

    pub(super) fn write(dir: &OwnedFd, name: &str, body: &str) -> std::io::Result<()> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = OsString::from(format!(".{name}.{}.{nanos}", std::process::id()));
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = openat(dir, &tmp, flags, Mode::from_raw_mode(0o600))?;
        let mut f = std::fs::File::from(fd);
        let written = f.write_all(body.as_bytes()).and_then(|_| f.sync_all());
        let renamed = written.and_then(|_| Ok(renameat(dir, &tmp, dir, name)?));
        if renamed.is_err() {
            let _ = unlinkat(dir, &tmp, AtFlags::empty());
        }
        renamed
    }

    pub(super) fn remove(dir: &OwnedFd, name: &str) {
        let _ = unlinkat(dir, name, AtFlags::empty());
    }
}

#[cfg(target_os = "linux")]
pub(crate) fn load(dir: &Path, key: &[u8]) -> Option<Backend> {
    let fd = sys::open_dir(dir, false)?;
    let text = sys::read(&fd, FILE)?;
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

#[cfg(target_os = "linux")]
pub(crate) fn store(dir: &Path, key: &[u8], backend: Backend) {
    if let Some(fd) = sys::open_dir(dir, true) {
        let body = format!("{MAGIC}\n{}\n{}\n", hex(key), backend.as_str());
        let _ = sys::write(&fd, FILE, &body);
    }
}

#[cfg(target_os = "linux")]
pub(crate) fn forget(dir: &Path) {
    if let Some(fd) = sys::open_dir(dir, false) {
        sys::remove(&fd, FILE);
    }
}

/// Only the Linux chain probes, so only it keeps a verdict.
#[cfg(not(target_os = "linux"))]
pub(crate) fn load(_: &Path, _: &[u8]) -> Option<Backend> {
    None
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn store(_: &Path, _: &[u8], _: Backend) {}

#[cfg(not(target_os = "linux"))]
pub(crate) fn forget(_: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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

    /// A real key is a few hundred bytes (its hex twice that): read whole.
    /// A body past the cap is no verdict, even when it starts like one.
    #[test]
    fn long_keys_round_trip_and_an_oversized_file_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let key = vec![b'k'; 1500];
        store(d.path(), &key, Backend::Bwrap);
        assert_eq!(load(d.path(), &key), Some(Backend::Bwrap));
        let key = vec![b'k'; 2100];
        store(d.path(), &key, Backend::Bwrap);
        assert_eq!(load(d.path(), &key), None);
    }

    #[test]
    fn a_cache_dir_that_is_a_symlink_is_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let elsewhere = d.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::write(elsewhere.join(FILE), "victim").unwrap();
        let link = d.path().join("cache");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        store(&link, b"k", Backend::Bwrap);
        forget(&link);
        assert_eq!(load(&link, b"k"), None);
        // Nothing was created or deleted through the link.
        assert_eq!(fs::read_to_string(elsewhere.join(FILE)).unwrap(), "victim");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 1);
    }

    #[test]
    fn a_verdict_file_that_is_a_symlink_or_writable_by_others_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        fs::write(&real, format!("{MAGIC}\n{}\nbwrap\n", hex(b"k"))).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join(FILE)).unwrap();
        assert_eq!(load(d.path(), b"k"), None);
        fs::remove_file(d.path().join(FILE)).unwrap();
        fs::copy(&real, d.path().join(FILE)).unwrap();
        assert_eq!(load(d.path(), b"k"), Some(Backend::Bwrap));
        fs::set_permissions(d.path().join(FILE), fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(load(d.path(), b"k"), None);
        fs::set_permissions(d.path().join(FILE), fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(load(d.path(), b"k"), None, "a world-writable cache dir");
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
