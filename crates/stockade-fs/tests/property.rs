//! Property: over generated relative (and absolute) paths made of `..`, `.`,
//! names and symlinks planted inside a scratch workspace pointing anywhere
//! (outside included), the fenced provider never changes anything outside
//! the workspace, and whatever it reports written really is inside.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{Scene, leftover_temp_files, snapshot};
use proptest::prelude::*;
use stockade_core::SandboxMode;
use stockade_fs::{FileSystem, SandboxedFs};

/// Names a path may be made of (the `l*` ones may be symlinks).
const COMPONENTS: &[&str] = &[".", "..", "a", "b", "l0", "l1", "l2", "f"];
/// Where symlinks may be planted (their parents are created first).
const LINK_SITES: &[&str] = &["l0", "l1", "l2", "a/l0", "a/l1", "a/b/l2", "f"];
/// Directories that may exist before the write.
const DIRS: &[&str] = &["a", "a/b", "b"];

/// A symlink target; `Outside*` and `ProcRoot` are made absolute per scene.
#[derive(Debug, Clone)]
enum LinkTarget {
    Relative(&'static str),
    Outside(&'static str),
    ProcRoot(&'static str),
    Slash,
}

fn link_target() -> impl Strategy<Value = LinkTarget> {
    prop_oneof![
        prop::sample::select(vec![
            ".",
            "..",
            "../..",
            "../../..",
            "a",
            "a/..",
            "a/../..",
            "b",
            "l0",
            "l1",
            "f",
            "a/b",
            "nope",
            "../outside",
            "../outside/f",
            "../outside/sub",
            "../../outside/new",
            "../ws/a",
            "../ws/f",
            "../faketmp",
            "a/b/../../../outside",
        ])
        .prop_map(LinkTarget::Relative),
        prop::sample::select(vec!["", "f", "sub", "new", "sub/g"]).prop_map(LinkTarget::Outside),
        prop::sample::select(vec!["", "f", "sub"]).prop_map(LinkTarget::ProcRoot),
        Just(LinkTarget::Slash),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    dirs: Vec<&'static str>,
    links: Vec<(&'static str, LinkTarget)>,
    path: Vec<&'static str>,
    absolute: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::subsequence(DIRS.to_vec(), 0..=DIRS.len()),
        prop::collection::vec(
            (prop::sample::select(LINK_SITES.to_vec()), link_target()),
            0..5,
        ),
        prop::collection::vec(prop::sample::select(COMPONENTS.to_vec()), 1..7),
        any::<bool>(),
    )
        .prop_map(|(dirs, links, path, absolute)| Case {
            dirs,
            links,
            path,
            absolute,
        })
}

fn plant(scene: &Scene, case: &Case) {
    for d in &case.dirs {
        fs::create_dir_all(scene.ws.join(d)).unwrap();
    }
    for (site, target) in &case.links {
        let at = scene.ws.join(site);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        let target = match target {
            LinkTarget::Relative(t) => PathBuf::from(t),
            LinkTarget::Outside(t) => scene.outside.join(t),
            LinkTarget::ProcRoot(t) => Path::new("/proc/self/root")
                .join(scene.outside.strip_prefix("/").unwrap())
                .join(t),
            LinkTarget::Slash => PathBuf::from("/"),
        };
        // A site already taken (by a directory or an earlier link) keeps
        // what it has.
        let _ = symlink(target, at);
    }
    // Some content for edits to find.
    let _ = fs::write(scene.ws.join("a/f"), "x marks\n");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_fenced_provider_never_writes_outside_the_root(case in case()) {
        let scene = Scene::fast();
        plant(&scene, &case);
        let fs_ = SandboxedFs::with_temp_roots(vec![]);
        let policy = scene.policy(SandboxMode::WorkspaceWrite);
        // Everything but the workspace: `outside`, `faketmp` (not a root
        // here) and the scratch dir itself.
        let before = snapshot(&scene.scratch, &[&scene.ws]);
        let ws_real = fs::canonicalize(&scene.ws).unwrap();

        let rel: PathBuf = case.path.iter().collect();
        let path = if case.absolute { scene.ws.join(&rel) } else { rel };

        let written = fs_.write(&path, b"PROPERTY\n", &policy);
        let edited = fs_.edit(&path, "PROPERTY", "EDITED", false, &policy);

        prop_assert_eq!(&snapshot(&scene.scratch, &[&scene.ws]), &before,
            "something outside changed: write={:?} edit={:?}", written, edited);
        for out_path in written.as_ref().map(|o| o.path.clone()).into_iter()
            .chain(edited.as_ref().map(|o| o.path.clone()))
        {
            prop_assert!(out_path.starts_with(&scene.ws), "reported {:?}", out_path);
            let real = fs::canonicalize(&out_path).unwrap();
            prop_assert!(real.starts_with(&ws_real), "{:?} is really {:?}", out_path, real);
        }
        if let Ok(out) = &written {
            let now = fs::read(&out.path).unwrap();
            prop_assert!(now == b"PROPERTY\n" || now == b"EDITED\n", "{:?}", now);
        }
        prop_assert!(leftover_temp_files(&scene.scratch).is_empty());
    }
}
