//! The deployment's default tables: what nothing confined may read and
//! which hosts `allow-listed` lets through, when `stockade.toml` (or
//! `exec`'s flags) says nothing. Core keeps the vocabulary these are
//! written in; the choice of entries is deployment policy, so it lives
//! with the configuration (the host table is defined by the agent's
//! policy service, its default when composed without one).

use std::ffi::OsString;
use std::path::PathBuf;

use stockade_core::files::{EntryError, ListKind, expand_all};

/// The default deny-read list in confining modes (`~` is `$HOME`).
pub const DEFAULT_DENY_READ: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.config/gh/hosts.yml",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
];

/// The default deny-read list for this environment.
pub fn default_deny_read(
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<PathBuf>, (usize, EntryError)> {
    expand_all(DEFAULT_DENY_READ, ListKind::DenyRead, env)
}

// The host table is the agent's: its policy service lets these through
// when no composition root gave it a list. Named here too, beside the
// deny-read table, where both front ends read their defaults.
pub use stockade_agent::policy::{DEFAULT_ALLOWED_HOSTS, default_allowed_hosts};

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_core::net::parse_hosts;
    use stockade_core::{NetworkMode, NetworkPolicy};

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_default_deny_read_list_expands_beneath_home() {
        let e = env(&[("HOME", "/h")]);
        let d = default_deny_read(&e).unwrap();
        assert_eq!(d.len(), DEFAULT_DENY_READ.len());
        assert!(d.contains(&PathBuf::from("/h/.ssh")));
        assert!(d.iter().all(|p| p.starts_with("/h")));
    }

    #[test]
    fn the_default_list_is_valid_and_policies_judge_by_mode() {
        let hosts = parse_hosts(DEFAULT_ALLOWED_HOSTS).unwrap();
        assert_eq!(hosts.len(), DEFAULT_ALLOWED_HOSTS.len());
        let listed = NetworkPolicy::new(NetworkMode::AllowListed, hosts);
        assert!(listed.allows("index.crates.io") && listed.allows("raw.githubusercontent.com"));
        assert!(!listed.allows("example.com"));
        assert!(
            !NetworkPolicy::new(NetworkMode::Deny, default_allowed_hosts()).allows("crates.io")
        );
        assert!(NetworkPolicy::default().allows("example.com"));
        assert_eq!(
            parse_hosts(&["A.example", "a.example"]).unwrap(),
            ["a.example"]
        );
    }
}
