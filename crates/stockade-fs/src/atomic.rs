//! Replacing a file atomically: a temp file created new beside it (in the
//! same directory handle), written, synced, then renamed over it.
//!
//! A crash or an error at any point leaves either the old file or the new
//! one, never a half-written one, and the temp file is removed on every error
//! path. The rename replaces the *directory entry*: a target that was a hard
//! link to a file elsewhere gets a new inode here, and the other name keeps
//! the old contents untouched.

use std::ffi::OsString;
use std::io::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::{Dir, File, OpenOptions};

use crate::locate::Target;

/// Prefix of every temp file, so a leftover one (after a crash) is
/// recognizable as ours.
pub const TEMP_PREFIX: &str = ".stockade-tmp-";

/// How many names to try before giving up on creating a temp file.
const TEMP_ATTEMPTS: u32 = 64;

#[cfg(test)]
thread_local! {
    /// Makes the next replace on this thread fail after the temp file is
    /// written and synced, just before the rename: the worst moment.
    pub(crate) static FAIL_BEFORE_RENAME: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

/// Replace `target` with `contents`.
pub(crate) fn replace(target: &Target, contents: &[u8]) -> io::Result<()> {
    let (temp_name, file) = create_temp(&target.parent, target.existing.is_some())?;
    let result = fill_and_rename(target, &temp_name, file, contents);
    if result.is_err() {
        // Best effort: the error that matters is the one being returned, and
        // a temp file that cannot be removed is named so it is recognizable.
        let _ = target.parent.remove_file(&temp_name);
    } else {
        sync_dir(&target.parent);
    }
    result
}

fn fill_and_rename(
    target: &Target,
    temp_name: &OsString,
    mut file: File,
    contents: &[u8],
) -> io::Result<()> {
    file.write_all(contents)?;
    if let Some(existing) = &target.existing {
        file.set_permissions(kept_permissions(existing))?;
    }
    file.sync_all()?;
    drop(file);
    #[cfg(test)]
    if FAIL_BEFORE_RENAME.with(|f| f.replace(false)) {
        return Err(io::Error::other("injected failure before rename"));
    }
    // Both names are single components of the same handle: nothing about
    // the path the caller gave is resolved again here.
    target
        .parent
        .rename(temp_name, &target.parent, &target.name)
}

/// Create a fresh temp file in `dir`. Create-new semantics: an existing entry
/// of that name (a planted symlink included) makes the attempt fail rather
/// than be opened.
fn create_temp(dir: &Dir, replacing: bool) -> io::Result<(OsString, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    let mut last_error = None;
    for _ in 0..TEMP_ATTEMPTS {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = OsString::from(format!("{TEMP_PREFIX}{pid}-{n}-{nanos:08x}"));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        restrict_until_filled(&mut options, replacing);
        match dir.open_with(&name, &options) {
            Ok(file) => return Ok((name, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no temp file name was free")))
}

/// When replacing a file, the temp file starts owner-only and receives the
/// old file's permissions once written, so the new contents are never
/// readable more widely than the old ones were, even for a moment. A new
/// file gets the process's default (0666 less the umask) from the start.
#[cfg(unix)]
fn restrict_until_filled(options: &mut OpenOptions, replacing: bool) {
    use cap_std::fs::OpenOptionsExt as _;
    if replacing {
        options.mode(0o600);
    }
}

#[cfg(not(unix))]
fn restrict_until_filled(_: &mut OpenOptions, _: bool) {}

/// The replaced file's permission bits, without setuid/setgid/sticky: the
/// new inode is owned by this process, and new contents must not inherit a
/// privilege granted to the old ones.
#[cfg(unix)]
fn kept_permissions(existing: &cap_std::fs::Metadata) -> cap_std::fs::Permissions {
    use cap_std::fs::PermissionsExt as _;
    cap_std::fs::Permissions::from_mode(existing.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn kept_permissions(existing: &cap_std::fs::Metadata) -> cap_std::fs::Permissions {
    existing.permissions()
}

/// Make the rename durable. Best effort: some filesystems refuse to sync a
/// directory, and by now the replacement has already happened.
#[cfg(unix)]
fn sync_dir(dir: &Dir) {
    // The handle itself may be path-only (`O_PATH`), which cannot be synced;
    // `.` opened for reading can.
    if let Ok(d) = dir.open(".") {
        let _ = d.sync_all();
    }
}

#[cfg(not(unix))]
fn sync_dir(_: &Dir) {}
