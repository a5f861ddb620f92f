//! The smallest widening after a refused write outside the writable roots,
//! where it cannot be approved while the command runs (bwrap, unsupervised
//! Landlock, Seatbelt): that one directory as an extra writable root for
//! one retry, offered before a wider mode.

use std::path::{Path, PathBuf};

use stockade_core::SandboxMode;
use stockade_shell::SandboxFacts;

/// The directory a `workspace-write` run's refused writes lie in, to
/// offer as an extra writable root for one retry; `None` when there is no
/// such single directory worth offering:
///
/// - every refused path (as the denial lines name them, absolute) must
///   have the same nearest existing parent, resolved (symlinks followed);
/// - never `/`, never a directory inside a writable root of the run (the
///   refusal there had another reason: a protected or read-only path),
///   never one that is, lies beneath, or holds a read-only or deny-read
///   path of the run.
///
/// Control state (the config, session logs, stockade itself) is refused
/// where the root is held (`RootPins::extra_root`), before anything runs.
/// The paths come from what the command printed, so the directory is only
/// ever offered to the user, never granted on its own.
pub fn narrower_root(f: &SandboxFacts) -> Option<PathBuf> {
    if f.mode != SandboxMode::WorkspaceWrite || !f.file_denied || f.denied_paths.is_empty() {
        return None;
    }
    let mut dir: Option<PathBuf> = None;
    for p in &f.denied_paths {
        if !p.is_absolute() {
            return None;
        }
        let d = nearest_existing_dir(p)?;
        match &dir {
            None => dir = Some(d),
            Some(x) if *x == d => {}
            Some(_) => return None,
        }
    }
    let dir = dir?;
    // `/` has no parent, and is never offered.
    dir.parent()?;
    let resolved = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if f.writable_roots
        .iter()
        .any(|r| dir.starts_with(resolved(r)))
    {
        return None;
    }
    let clashes = f
        .read_only
        .iter()
        .chain(&f.deny_read)
        .map(|p| resolved(p))
        .any(|p| dir.starts_with(&p) || p.starts_with(&dir));
    (!clashes).then_some(dir)
}

/// The nearest existing directory above `p` (its parent, or further up),
/// resolved.
fn nearest_existing_dir(p: &Path) -> Option<PathBuf> {
    let mut at = p.parent()?;
    loop {
        if at.is_dir() {
            return std::fs::canonicalize(at).ok();
        }
        at = at.parent()?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use stockade_core::NetworkMode;

    fn facts(denied: Vec<PathBuf>, writable: Vec<PathBuf>) -> SandboxFacts {
        SandboxFacts {
            mode: SandboxMode::WorkspaceWrite,
            backend: Some("bwrap"),
            enforcement: None,
            denied: true,
            runner_failed: false,
            runner_failure: None,
            denied_paths: denied,
            writable_roots: writable,
            deny_read: vec![],
            read_only: vec![],
            network: NetworkMode::Deny,
            file_denied: true,
            network_denied: false,
            network_denied_hosts: vec![],
            unproxied_hosts: vec![],
            proxy_problems: vec![],
            gaps: vec![],
            after_run: Default::default(),
        }
    }

    #[test]
    fn one_directory_outside_the_roots_is_offered_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let ws = root.join("ws");
        let out = root.join("out");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(out.join("sub")).unwrap();
        // A file in it, and one in a directory not made yet beneath it.
        let f = facts(
            vec![out.join("f"), out.join("new/deeper/g")],
            vec![ws.clone()],
        );
        assert_eq!(narrower_root(&f), Some(out.clone()));
        // Two directories: no single one to offer.
        let f = facts(vec![out.join("f"), out.join("sub/g")], vec![ws.clone()]);
        assert_eq!(narrower_root(&f), None);
        // Inside a writable root: refused for another reason.
        let f = facts(vec![ws.join("f")], vec![ws.clone()]);
        assert_eq!(narrower_root(&f), None);
        // `/` never.
        let f = facts(vec![PathBuf::from("/f")], vec![ws.clone()]);
        assert_eq!(narrower_root(&f), None);
        // Relative (unresolved) or none at all.
        let f = facts(vec![PathBuf::from("f")], vec![ws.clone()]);
        assert_eq!(narrower_root(&f), None);
        assert_eq!(narrower_root(&facts(vec![], vec![ws.clone()])), None);
        // Holding, or beneath, a deny-read or read-only path.
        let mut f = facts(vec![out.join("f")], vec![ws.clone()]);
        f.deny_read = vec![out.join("sub")];
        assert_eq!(narrower_root(&f), None);
        let mut f = facts(vec![out.join("sub/f")], vec![ws.clone()]);
        f.read_only = vec![out.clone()];
        assert_eq!(narrower_root(&f), None);
        // Only under workspace-write.
        let mut f = facts(vec![out.join("f")], vec![ws]);
        f.mode = SandboxMode::ReadOnly;
        assert_eq!(narrower_root(&f), None);
    }
}
