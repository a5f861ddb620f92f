//! Reading a small file a confined run may have planted or replaced (a
//! git configuration, an included file, a gitfile, `commondir`), before
//! or after a run. A run can leave a FIFO there (opening it would block
//! every later run for good) or a huge file (reading it whole would exhaust
//! memory), so every such read goes through here: non-blocking open, a
//! regular file only, at most `max` bytes. A symlink is followed (git
//! follows it too; reading is harmless).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// At most this many bytes of a configuration file, gitfile or
/// `commondir` are read.
pub(crate) const MAX_CONFIG: u64 = 1 << 20;

/// Read the regular file `name` in `dir`, at most `max` bytes.
pub(crate) fn read_at(dir: impl AsFd, name: &OsStr, max: u64) -> io::Result<Vec<u8>> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let f = File::from(fd);
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

/// [`read_at`] by path (relative to the current directory).
pub(crate) fn read_path(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_at(rustix::fs::CWD, path.as_os_str(), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_or_a_directory_is_refused_without_blocking_and_a_file_is_bounded() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let fifo = d.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(read_path(&fifo, 10).is_err());
        assert!(read_path(d.path(), 10).is_err());
        let file = d.path().join("f");
        std::fs::write(&file, b"0123456789").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_path(&file, 4).unwrap_or_default(), b"0123");
        assert!(read_path(&d.path().join("missing"), 4).is_err());
    }
}
