//! The deployment's file policy, held like the workspace: extra writable
//! roots (each resolved once, identified and held open), the control state
//! no writable root may contain, and the deny-read paths (identified, so a
//! secret a confined run moves within a writable root fails closed instead
//! of becoming readable under a new name).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use crate::{HeldDir, RootError, RootKind, RootPins, beneath, identity};

/// One deny-read path as it was when first seen: where it resolved to and
/// what it was.
#[derive(Debug)]
pub struct HeldDenied {
    given: PathBuf,
    path: PathBuf,
    file: Arc<File>,
    is_dir: bool,
    #[cfg_attr(not(unix), allow(dead_code))]
    id: Option<crate::Identity>,
}

impl HeldDenied {
    /// The path as the policy names it.
    pub fn given(&self) -> &Path {
        &self.given
    }

    /// Where it resolved (symlinks followed: `~/.ssh -> dotfiles/ssh` denies
    /// the directory the link names).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The object, opened without following anything further.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    pub fn is_dir(&self) -> bool {
        self.is_dir
    }

    /// Device and inode, where the platform has them.
    #[cfg(unix)]
    pub fn dev_ino(&self) -> Option<(u64, u64)> {
        self.id.map(|i| (i.dev, i.ino))
    }
}

/// Open `path` (resolved) as an object, not following a final symlink.
/// `O_PATH` needs no read permission, so a secret the user cannot read
/// (mode 0400 of another owner's) is still held.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn open_object(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Elsewhere there is no `O_PATH`: opened for reading, which the owner of
/// a secret can do.
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
fn open_object(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(not(unix))]
fn open_object(path: &Path) -> io::Result<File> {
    File::open(path)
}

impl RootPins {
    /// Name a file or directory that decides later runs (a config file, the
    /// verdict cache, a runner, stockade itself): no extra writable root may
    /// contain it. Registered as resolved now; a path that does not exist
    /// yet is registered as given.
    pub fn add_control_path(&self, what: &str, path: &Path) {
        let resolved = crate::canonical(path).unwrap_or_else(|_| path.to_path_buf());
        let mut list = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        if !list.iter().any(|(_, p)| *p == resolved) {
            list.push((what.to_owned(), resolved));
        }
    }

    /// The registered control paths, as resolved when registered.
    pub fn control_paths(&self) -> Vec<PathBuf> {
        let list = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter().map(|(_, p)| p.clone()).collect()
    }

    /// The extra writable root `given` (absolute): held on first use,
    /// verified on every later one. `Ok(None)` when it does not exist and
    /// was never held: it is not granted (a later call holds it once it
    /// exists). Refused when it is `/`, reached through a symlink inside
    /// another root, or contains control state.
    pub fn extra_root(&self, given: &Path) -> Result<Option<Arc<HeldDir>>, RootError> {
        let mut guards = self.all_writable_paths();
        let mut map = self.extras.lock().unwrap_or_else(PoisonError::into_inner);
        guards.retain(|g| map.get(given).is_none_or(|h| h.path() != g));
        let held = match map.get(given) {
            Some(held) => {
                held.verify(&guards)?;
                held.clone()
            }
            None => {
                let held = match HeldDir::hold(RootKind::Extra, given, &guards) {
                    Ok(h) => Arc::new(h),
                    Err(RootError::Open { source, .. })
                        if source.kind() == io::ErrorKind::NotFound =>
                    {
                        return Ok(None);
                    }
                    Err(e) => return Err(e),
                };
                map.insert(given.to_path_buf(), held.clone());
                held
            }
        };
        self.refuse_containing(&held)?;
        Ok(Some(held))
    }

    /// Refuse `root` when a registered control path lies beneath it.
    pub fn refuse_containing(&self, root: &HeldDir) -> Result<(), RootError> {
        let list = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        match list.iter().find(|(_, p)| p.starts_with(root.path())) {
            Some((what, path)) => Err(RootError::ContainsControlState {
                what: root.kind(),
                path: root.given().to_path_buf(),
                control: what.clone(),
                control_path: path.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The deny-read path `given` (absolute), held by identity on first
    /// sight. `Ok(None)` while it does not exist (or this user cannot reach
    /// it, so cannot read it either). A held one that no longer
    /// resolves to the same object fails closed when a confined run could
    /// have moved it (it lies beneath a writable root); elsewhere only the
    /// user could have, and the new object is held in its place.
    pub fn denied(&self, given: &Path) -> Result<Option<Arc<HeldDenied>>, RootError> {
        let writable = self.all_writable_paths();
        let mut map = self.denied.lock().unwrap_or_else(PoisonError::into_inner);
        let now = match crate::canonical(given) {
            Ok(p) => Some(p),
            // Not there, or not reachable by this user (a home under a
            // directory it cannot search): nothing this user could read.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::PermissionDenied
                        | io::ErrorKind::NotADirectory
                ) =>
            {
                None
            }
            Err(source) => {
                return Err(RootError::Open {
                    what: RootKind::DenyRead,
                    path: given.to_path_buf(),
                    source,
                });
            }
        };
        let fresh = match &now {
            Some(p) => Some(hold_denied(given, p)?),
            None => None,
        };
        if let Some(held) = map.get(given) {
            let same = fresh
                .as_ref()
                .is_some_and(|f| f.path == held.path && f.id == held.id);
            if same {
                return Ok(Some(held.clone()));
            }
            if let Some(root) = beneath(&held.path, &writable) {
                return Err(RootError::Moved {
                    what: RootKind::DenyRead,
                    path: given.to_path_buf(),
                    held: held.path.clone(),
                    now: match &now {
                        Some(p) => format!(
                            "{} (another object, in the writable root {})",
                            p.display(),
                            root.display()
                        ),
                        None => format!("nothing (it was in the writable root {})", root.display()),
                    },
                });
            }
        }
        match fresh {
            Some(f) => {
                let f = Arc::new(f);
                map.insert(given.to_path_buf(), f.clone());
                Ok(Some(f))
            }
            None => {
                map.remove(given);
                Ok(None)
            }
        }
    }
}

fn hold_denied(given: &Path, resolved: &Path) -> Result<HeldDenied, RootError> {
    let err = |source: io::Error| RootError::Open {
        what: RootKind::DenyRead,
        path: given.to_path_buf(),
        source,
    };
    let file = open_object(resolved).map_err(err)?;
    let m = file.metadata().map_err(err)?;
    Ok(HeldDenied {
        given: given.to_path_buf(),
        path: resolved.to_path_buf(),
        file: Arc::new(file),
        is_dir: m.is_dir(),
        id: identity(&m),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn pins() -> RootPins {
        RootPins::without_temp_roots()
    }

    #[test]
    fn an_extra_root_is_held_and_a_moved_one_fails_closed() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cache");
        std::fs::create_dir(&root).unwrap();
        let p = pins();
        let held = p.extra_root(&root).unwrap().unwrap();
        assert_eq!(held.kind(), RootKind::Extra);
        assert!(p.all_writable_paths().contains(&held.path().to_path_buf()));
        std::fs::rename(&root, t.path().join("away")).unwrap();
        std::fs::create_dir(&root).unwrap();
        assert!(matches!(p.extra_root(&root), Err(RootError::Moved { .. })));
    }

    #[test]
    fn a_missing_extra_root_is_not_granted_until_it_exists() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("later");
        let p = pins();
        assert!(p.extra_root(&root).unwrap().is_none());
        std::fs::create_dir(&root).unwrap();
        assert!(p.extra_root(&root).unwrap().is_some());
    }

    #[test]
    fn an_extra_root_holding_control_state_is_refused_naming_both() {
        let t = tempfile::tempdir().unwrap();
        let cfg = t.path().join("conf/stockade.toml");
        std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
        std::fs::write(&cfg, "").unwrap();
        let p = pins();
        p.add_control_path("config", &cfg);
        let e = p.extra_root(t.path()).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, RootError::ContainsControlState { .. }), "{e:?}");
        assert!(text.contains(&t.path().display().to_string()), "{text}");
        assert!(
            text.contains("stockade.toml") && text.contains("config"),
            "{text}"
        );
        // A sibling is fine.
        std::fs::create_dir(t.path().join("other")).unwrap();
        assert!(p.extra_root(&t.path().join("other")).unwrap().is_some());
    }

    #[test]
    fn a_planted_symlink_inside_another_root_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink("/", ws.join("up")).unwrap();
        let p = pins();
        p.workspace(&ws).unwrap();
        let e = p.extra_root(&ws.join("up/etc")).unwrap_err();
        assert!(matches!(e, RootError::PlantedSymlink { .. }), "{e:?}");
    }

    #[test]
    fn denied_paths_are_held_by_identity() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let secret = ws.join("secrets");
        std::fs::create_dir_all(&secret).unwrap();
        let outside = t.path().join("dot-ssh");
        std::fs::create_dir(&outside).unwrap();
        let link = t.path().join("ssh-link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let p = pins();
        p.workspace(&ws).unwrap();
        // A symlinked secret denies what it names.
        let held = p.denied(&link).unwrap().unwrap();
        assert_eq!(held.path(), std::fs::canonicalize(&outside).unwrap());
        assert!(held.is_dir());
        assert!(p.denied(&t.path().join("absent")).unwrap().is_none());
        // Inside a writable root: moving it away fails closed.
        p.denied(&secret).unwrap().unwrap();
        std::fs::rename(&secret, ws.join("moved")).unwrap();
        assert!(matches!(p.denied(&secret), Err(RootError::Moved { .. })));
        // Outside every root only the user could have replaced it: held anew.
        std::fs::rename(&outside, t.path().join("old")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        let again = p.denied(&link).unwrap().unwrap();
        assert_ne!(again.dev_ino(), held.dev_ino());
    }
}
