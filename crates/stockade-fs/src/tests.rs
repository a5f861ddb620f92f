//! Unit tests that need the crate's internals (the injected failure, the
//! temp-root derivation). The containment cases are in `tests/`.

use std::fs;

use super::*;

/// A scratch directory off `/tmp`, so the host's temp root is never what
/// makes a write allowed.
fn scratch() -> tempfile::TempDir {
    let base = if cfg!(unix) {
        PathBuf::from("/var/tmp")
    } else {
        std::env::temp_dir()
    };
    tempfile::Builder::new()
        .prefix("stockade-fs-unit-")
        .tempdir_in(base)
        .unwrap()
}

fn policy(mode: SandboxMode, ws: &Path) -> ExecutionPolicy {
    ExecutionPolicy::new(mode, ws)
}

fn temp_files(dir: &Path) -> Vec<OsString> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes()))
        .collect()
}

fn providers() -> Vec<(&'static str, Box<dyn FileSystem>)> {
    vec![
        ("local", Box::new(LocalFs)),
        ("sandboxed", Box::new(SandboxedFs::with_temp_roots(vec![]))),
    ]
}

#[test]
fn replacement_counts_occurrences_without_overlap() {
    assert_eq!(
        replace_text("a b a", "b", "c", false),
        Ok(("a c a".into(), 1))
    );
    assert_eq!(replace_text("a b a", "a", "x", false), Err(2));
    assert_eq!(
        replace_text("a b a", "a", "x", true),
        Ok(("x b x".into(), 2))
    );
    assert_eq!(replace_text("a b a", "z", "x", true), Err(0));
    assert_eq!(replace_text("aaa", "aa", "b", false), Ok(("ba".into(), 1)));
}

#[test]
fn a_failure_before_the_rename_keeps_the_old_contents_and_no_temp_file() {
    let dir = scratch();
    let ws = dir.path();
    for (name, fs_) in providers() {
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::DangerFullAccess] {
            let p = policy(mode, ws);
            let file = ws.join("kept.txt");
            fs::write(&file, "old contents\n").unwrap();

            atomic::FAIL_BEFORE_RENAME.with(|f| f.set(true));
            let err = fs_.write(Path::new("kept.txt"), b"new", &p).unwrap_err();
            assert!(
                matches!(&err, FsError::Io { op: "write", path, .. } if *path == file),
                "{name} {mode}: {err}"
            );
            assert_eq!(fs::read_to_string(&file).unwrap(), "old contents\n");
            assert_eq!(temp_files(ws), Vec::<OsString>::new(), "{name} {mode}");

            atomic::FAIL_BEFORE_RENAME.with(|f| f.set(true));
            let err = fs_
                .edit(Path::new("kept.txt"), "old", "new", false, &p)
                .unwrap_err();
            assert!(matches!(err, FsError::Io { .. }), "{name} {mode}: {err}");
            assert_eq!(fs::read_to_string(&file).unwrap(), "old contents\n");
            assert_eq!(temp_files(ws), Vec::<OsString>::new(), "{name} {mode}");
        }
    }
}

#[test]
fn a_successful_write_leaves_no_temp_file_and_reports_creation() {
    let dir = scratch();
    let ws = dir.path();
    for (name, fs_) in providers() {
        let p = policy(SandboxMode::WorkspaceWrite, ws);
        let rel = PathBuf::from(format!("{name}.txt"));
        let first = fs_.write(&rel, b"one", &p).unwrap();
        assert_eq!(
            first,
            WriteOutcome {
                path: ws.join(&rel),
                created: true,
                bytes: 3
            }
        );
        let second = fs_.write(&rel, b"second", &p).unwrap();
        assert!(!second.created);
        assert_eq!(fs::read(ws.join(&rel)).unwrap(), b"second");
        let edited = fs_.edit(&rel, "sec", "2", false, &p).unwrap();
        assert_eq!(edited.replacements, 1);
        assert_eq!(fs::read(ws.join(&rel)).unwrap(), b"2ond");
        assert_eq!(temp_files(ws), Vec::<OsString>::new());
    }
}

#[cfg(unix)]
#[test]
fn a_replacement_keeps_the_mode_bits_but_never_setuid() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = scratch();
    let ws = dir.path();
    let script = ws.join("run.sh");
    fs::write(&script, "echo hi\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o4750)).unwrap();
    let p = policy(SandboxMode::WorkspaceWrite, ws);
    SandboxedFs::with_temp_roots(vec![])
        .edit(&script, "hi", "there", false, &p)
        .unwrap();
    let mode = fs::metadata(&script).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o750);
    assert_eq!(fs::read_to_string(&script).unwrap(), "echo there\n");
}

#[test]
fn edit_requires_an_existing_file_and_creates_nothing() {
    let dir = scratch();
    let ws = dir.path();
    for (name, fs_) in providers() {
        let p = policy(SandboxMode::WorkspaceWrite, ws);
        let missing = Path::new("no/such/dir/file.txt");
        let err = fs_.edit(missing, "a", "b", false, &p).unwrap_err();
        assert!(
            matches!(&err, FsError::NotFound { path } if *path == ws.join(missing)),
            "{name}: {err}"
        );
        assert!(!ws.join("no").exists(), "{name}: edit created a directory");
        let err = fs_
            .edit(Path::new("absent.txt"), "a", "b", false, &p)
            .unwrap_err();
        assert!(matches!(err, FsError::NotFound { .. }), "{name}: {err}");
        assert_eq!(
            err.to_string(),
            format!("{} does not exist", ws.join("absent.txt").display())
        );
    }
}

#[test]
fn edit_refuses_empty_old_text_and_non_utf8_contents() {
    let dir = scratch();
    let ws = dir.path();
    fs::write(ws.join("bin"), [0xff, 0xfe, b'a']).unwrap();
    fs::write(ws.join("text"), "abc").unwrap();
    for (name, fs_) in providers() {
        let p = policy(SandboxMode::WorkspaceWrite, ws);
        let err = fs_.edit(Path::new("bin"), "a", "b", false, &p).unwrap_err();
        assert!(matches!(err, FsError::InvalidUtf8 { .. }), "{name}: {err}");
        assert!(err.to_string().contains("is not valid UTF-8"));
        let err = fs_.edit(Path::new("text"), "", "b", true, &p).unwrap_err();
        assert!(matches!(err, FsError::EmptyOldText { .. }), "{name}: {err}");
        assert_eq!(fs::read(ws.join("bin")).unwrap(), [0xff, 0xfe, b'a']);
        assert_eq!(fs::read(ws.join("text")).unwrap(), b"abc");
    }
}

#[test]
fn directories_and_the_root_itself_are_not_files() {
    let dir = scratch();
    let ws = dir.path();
    fs::create_dir(ws.join("sub")).unwrap();
    for (name, fs_) in providers() {
        let p = policy(SandboxMode::WorkspaceWrite, ws);
        for target in [Path::new("sub"), Path::new("."), Path::new("sub/..")] {
            let err = fs_.write(target, b"x", &p).unwrap_err();
            assert!(
                matches!(err, FsError::NotAFile { .. }),
                "{name} {target:?}: {err}"
            );
        }
        let err = fs_.read(&ws.join("sub")).unwrap_err();
        assert!(matches!(err, FsError::NotAFile { .. }), "{name}: {err}");
    }
    assert!(ws.join("sub").is_dir());
}

#[test]
fn a_write_creates_missing_parents_beneath_the_root() {
    let dir = scratch();
    let ws = dir.path();
    let p = policy(SandboxMode::WorkspaceWrite, ws);
    let out = SandboxedFs::with_temp_roots(vec![])
        .write(Path::new("a/b/c.txt"), b"deep", &p)
        .unwrap();
    assert_eq!(out.path, ws.join("a/b/c.txt"));
    assert_eq!(fs::read(ws.join("a/b/c.txt")).unwrap(), b"deep");
}

#[test]
fn read_and_list_report_kinds_sorted_by_name() {
    let dir = scratch();
    let d = dir.path();
    fs::write(d.join("b.txt"), "bee").unwrap();
    fs::create_dir(d.join("a")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("b.txt", d.join("c")).unwrap();
    for (_, fs_) in providers() {
        assert_eq!(fs_.read(&d.join("b.txt")).unwrap(), b"bee");
        let err = fs_.read(&d.join("nope")).unwrap_err();
        assert!(matches!(err, FsError::NotFound { .. }));
        let listed = fs_.list(d).unwrap();
        let want = [
            DirEntryInfo {
                name: "a".into(),
                kind: EntryKind::Dir,
            },
            DirEntryInfo {
                name: "b.txt".into(),
                kind: EntryKind::File,
            },
            #[cfg(unix)]
            DirEntryInfo {
                name: "c".into(),
                kind: EntryKind::Symlink,
            },
        ];
        assert_eq!(listed, want);
        let err = fs_.list(&d.join("b.txt")).unwrap_err();
        assert!(matches!(err, FsError::NotADirectory { .. }));
    }
}

#[test]
fn only_the_sandboxed_provider_fences() {
    assert!(!LocalFs.fences());
    assert!(SandboxedFs::with_temp_roots(vec![]).fences());
}

#[cfg(unix)]
#[test]
fn writable_roots_follow_the_mode() {
    let dir = scratch();
    let t1 = fs::canonicalize(dir.path()).unwrap().join("t1");
    fs::create_dir(&t1).unwrap();
    // `/` is never a temp root, nor is a path that does not exist.
    let fs_ = SandboxedFs::with_temp_roots(vec![t1.clone(), "/".into()]);
    assert_eq!(fs_.temp_roots(), std::slice::from_ref(&t1));
    let fs_ = SandboxedFs::with_temp_roots(vec!["/".into(), "/w/nowhere".into()]);
    assert_eq!(fs_.temp_roots(), Vec::<PathBuf>::new());
    let fs_ = SandboxedFs::with_temp_roots(vec![t1.clone()]);
    let ws = Path::new("/w/ws");
    assert_eq!(
        fs_.writable_roots(&policy(SandboxMode::ReadOnly, ws)),
        Some(vec![])
    );
    assert_eq!(
        fs_.writable_roots(&policy(SandboxMode::WorkspaceWrite, Path::new("/w/./ws/"))),
        Some(vec![PathBuf::from("/w/ws"), t1])
    );
    assert_eq!(
        fs_.writable_roots(&policy(SandboxMode::DangerFullAccess, ws)),
        None
    );
}

/// A `$TMPDIR` reached through a symlink is held once and recognized by
/// both spellings; one that is `/` is not granted.
#[cfg(unix)]
#[test]
fn temp_roots_are_held_and_known_by_both_spellings() {
    let dir = scratch();
    let base = fs::canonicalize(dir.path()).unwrap();
    let (tmp, real, link, ws) = (
        base.join("tmp"),
        base.join("real"),
        base.join("link"),
        base.join("ws"),
    );
    for d in [&tmp, &real, &ws] {
        fs::create_dir(d).unwrap();
    }
    std::os::unix::fs::symlink(&real, &link).unwrap();

    let pins = RootPins::new(Some(&tmp), Some(link.clone().into_os_string()));
    let fs_ = SandboxedFs::with_pins(Arc::new(pins));
    assert_eq!(fs_.temp_roots(), [tmp.clone(), link.clone(), real.clone()]);
    let p = policy(SandboxMode::WorkspaceWrite, &ws);
    let out = fs_.write(&link.join("a"), b"via link", &p).unwrap();
    assert_eq!(out.path, link.join("a"));
    let out = fs_.write(&real.join("b"), b"as resolved", &p).unwrap();
    // Reported by the spelling the root was given.
    assert_eq!(out.path, link.join("b"));
    assert_eq!(fs::read(real.join("a")).unwrap(), b"via link");
    assert_eq!(fs::read(real.join("b")).unwrap(), b"as resolved");

    let pins = RootPins::new(Some(&tmp), Some("/".into()));
    assert!(pins.tmpdir_note().is_some());
    let fs_ = SandboxedFs::with_pins(Arc::new(pins));
    assert_eq!(fs_.temp_roots(), [tmp]);
    let err = fs_.write(&base.join("elsewhere"), b"x", &p).unwrap_err();
    assert!(err.is_denied(), "{err}");
}
