//! Deny-read paths beneath a writable root (a workspace that is `$HOME`,
//! say): the line every run prints, the fact `--json` carries and what
//! `stockade probe` says of the default list. A backend that only grants
//! (Landlock) cannot take read back beneath a root it grants, so whether
//! such a path is enforced depends on the backend and the host; the run
//! says which, never silently.

use std::path::{Path, PathBuf};

use stockade_core::texts::{self, DenyReadBeneath};
use stockade_core::{Gap, gaps};
use stockade_local::ProbeReport;
use stockade_shell::SandboxFacts;

/// The deny-read paths of a run that lie beneath one of its writable
/// roots, each with the most specific such root.
fn beneath(facts: &SandboxFacts) -> Vec<(PathBuf, PathBuf)> {
    beneath_of(&facts.deny_read, &facts.writable_roots)
}

fn beneath_of(deny_read: &[PathBuf], roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    deny_read
        .iter()
        .filter_map(|p| root_of(p, roots).map(|r| (p.clone(), r)))
        .collect()
}

/// The deepest directory root `path` lies beneath (or is).
fn root_of(path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    roots
        .iter()
        .filter(|r| r.as_path() != Path::new("/dev/null") && path.starts_with(r))
        .max_by_key(|r| r.components().count())
        .cloned()
}

/// How the run enforced them: bwrap (and an operator's runner command,
/// which gets bwrap's arguments) mounts over them; Landlock refuses them
/// through its supervisor unless the run names the `deny-read` gap;
/// another backend (none applies a deny-read list today) is not assumed
/// to enforce them.
fn how(facts: &SandboxFacts) -> DenyReadBeneath<'_> {
    how_of(facts.backend, &facts.gaps)
}

fn how_of<'a>(backend: Option<&'a str>, gaps: &'a [Gap]) -> DenyReadBeneath<'a> {
    let backend = backend.unwrap_or("the runner");
    match backend {
        "bwrap" | "runner-command" => return DenyReadBeneath::Mounts,
        "landlock" => {}
        other => {
            return DenyReadBeneath::NotEnforced {
                backend: other,
                why: "this backend does not hide deny-read paths",
            };
        }
    }
    match gaps.iter().find(|g| g.name == gaps::DENY_READ) {
        Some(gap) => DenyReadBeneath::NotEnforced {
            backend,
            why: &gap.detail,
        },
        None => DenyReadBeneath::Supervisor,
    }
}

/// The run's one line, when a deny-read path lies beneath a writable root.
pub fn line(facts: &SandboxFacts) -> Option<String> {
    let entries = beneath(facts);
    if entries.is_empty() {
        return None;
    }
    Some(texts::deny_read_beneath_line(&entries, how(facts)))
}

/// The same as a fact of `--json`'s result (`sandbox.deny_read_beneath`).
pub fn json(facts: &SandboxFacts) -> serde_json::Value {
    let how = how(facts);
    let (enforced, by, why) = match how {
        DenyReadBeneath::Mounts => (true, Some("bwrap mounts"), None),
        DenyReadBeneath::Supervisor => (true, Some("landlock supervisor"), None),
        DenyReadBeneath::NotEnforced { why, .. } => (false, None, Some(why)),
    };
    beneath(facts)
        .iter()
        .map(|(p, r)| {
            serde_json::json!({
                "path": p.display().to_string(),
                "root": r.display().to_string(),
                "enforced": enforced,
                "by": by,
                "why": why,
            })
        })
        .collect()
}

/// `--json`: the fact added to each result's sandbox facts.
pub fn add_to_json(result: &mut serde_json::Value, facts: Option<&SandboxFacts>) {
    if let (Some(f), Some(sandbox)) = (facts, result.get_mut("sandbox"))
        && let Some(obj) = sandbox.as_object_mut()
    {
        obj.insert("deny_read_beneath".into(), json(f));
    }
}

/// `stockade probe`: the default deny-read entries that lie beneath the
/// current directory (the workspace of `stockade exec` run here) and what
/// each backend makes of them; one line per entry.
pub fn probe_lines(report: &ProbeReport, deny_read: &[PathBuf], cwd: &Path) -> Vec<String> {
    let per_backend: Vec<(&str, String)> = report
        .backends
        .iter()
        .map(|b| {
            let how = if !b.usable {
                "unusable here".to_owned()
            } else if b.backend == "landlock" {
                if b.gaps.iter().any(|g| g.name == gaps::METADATA) {
                    "NOT enforced (this kernel cannot run the supervisor; it stays readable)"
                        .to_owned()
                } else {
                    "enforced by the supervisor".to_owned()
                }
            } else if b.backend == "bwrap" {
                "enforced (hidden by a mount)".to_owned()
            } else {
                "NOT enforced (this backend does not hide deny-read paths)".to_owned()
            };
            (b.backend.as_str(), how)
        })
        .collect();
    deny_read
        .iter()
        .filter(|p| p.starts_with(cwd) && std::fs::symlink_metadata(p).is_ok())
        .map(|p| texts::deny_read_probe_line(p, cwd, &per_backend))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<PathBuf> {
        p.iter().map(PathBuf::from).collect()
    }

    /// Only paths beneath a directory root count, each with its deepest
    /// root; `/dev/null` is never a root.
    #[test]
    fn a_denied_path_is_placed_beneath_its_deepest_root() {
        let roots = paths(&["/dev/null", "/tmp", "/h", "/h/proj"]);
        let deny = paths(&["/h/.ssh", "/h/proj/key.pem", "/etc/secret", "/dev/null"]);
        assert_eq!(
            beneath_of(&deny, &roots),
            vec![
                (PathBuf::from("/h/.ssh"), PathBuf::from("/h")),
                (PathBuf::from("/h/proj/key.pem"), PathBuf::from("/h/proj")),
            ]
        );
    }

    /// Landlock without its supervisor names the gap, and the line says
    /// NOT enforced with the gap's reason; supervised, the supervisor;
    /// bwrap, its mounts.
    #[test]
    fn the_line_says_whether_and_how_it_is_enforced() {
        let entries = vec![(PathBuf::from("/h/.ssh"), PathBuf::from("/h"))];
        let gap = vec![Gap::new(
            gaps::DENY_READ,
            texts::deny_read_unsupervised_gap(&["/h/.ssh".to_owned()]),
        )];
        let unsupervised = texts::deny_read_beneath_line(&entries, how_of(Some("landlock"), &gap));
        assert!(
            unsupervised.starts_with(
                "stockade: deny-read beneath a writable root: /h/.ssh (in /h): NOT enforced under landlock: "
            ),
            "{unsupervised}"
        );
        assert!(unsupervised.contains("supervisor"), "{unsupervised}");
        let supervised = texts::deny_read_beneath_line(&entries, how_of(Some("landlock"), &[]));
        assert!(
            supervised.contains("enforced: landlock's supervisor"),
            "{supervised}"
        );
        let bwrap = texts::deny_read_beneath_line(&entries, how_of(Some("bwrap"), &[]));
        assert!(bwrap.contains("enforced: bwrap mounts"), "{bwrap}");
        let other = texts::deny_read_beneath_line(&entries, how_of(Some("seatbelt"), &[]));
        assert!(other.contains("NOT enforced under seatbelt"), "{other}");
    }
}
