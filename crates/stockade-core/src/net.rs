//! The network policy beside the mode: which [`NetworkMode`] a call runs
//! under and, for `allow-listed`, which hosts its proxy lets through.
//!
//! Hosts are names, never addresses: the proxy is asked `CONNECT host:port`
//! and judges the name, so a pattern is an exact name (`crates.io`) or a
//! suffix (`*.github.com`, which matches `api.github.com` and
//! `a.b.github.com` but not `github.com` itself). Patterns are validated
//! once, where they are read.

use crate::mode::NetworkMode;

/// The network half of a call's policy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    pub mode: NetworkMode,
    /// Validated host patterns (see [`HostPattern`]); only `allow-listed`
    /// reads them.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

impl Default for NetworkPolicy {
    /// Today's behaviour: the host's network. Deployments choose narrower
    /// defaults per mode ([`NetworkMode::default_for`]).
    fn default() -> Self {
        Self {
            mode: NetworkMode::Allow,
            allowed_hosts: Vec::new(),
        }
    }
}

impl NetworkPolicy {
    pub fn new(mode: NetworkMode, allowed_hosts: Vec<String>) -> Self {
        Self {
            mode,
            allowed_hosts,
        }
    }

    /// Whether `host` may be reached under this policy.
    pub fn allows(&self, host: &str) -> bool {
        match self.mode {
            NetworkMode::Allow => true,
            NetworkMode::Deny => false,
            NetworkMode::AllowListed => self
                .allowed_hosts
                .iter()
                .filter_map(|p| HostPattern::parse(p).ok())
                .any(|p| p.matches(host)),
        }
    }
}

/// The hosts a coding agent needs by default: the public package registries
/// and code hosts. Replaceable by the deployment (`allowed_hosts`).
pub const DEFAULT_ALLOWED_HOSTS: &[&str] = &[
    // Rust
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    // JavaScript
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    // Python
    "pypi.org",
    "files.pythonhosted.org",
    // Go
    "proxy.golang.org",
    "sum.golang.org",
    // JVM
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    "services.gradle.org",
    // Code hosts
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
];

/// A host pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct HostPatternError {
    pub value: String,
    pub reason: &'static str,
}

/// One validated pattern: an exact name or `*.` and a suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower case, without the `*.` of a suffix pattern.
    name: String,
    suffix: bool,
}

impl HostPattern {
    pub fn parse(value: &str) -> Result<Self, HostPatternError> {
        let err = |reason| HostPatternError {
            value: value.to_owned(),
            reason,
        };
        let (suffix, name) = match value.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, value),
        };
        if name.is_empty() {
            return Err(err("is empty"));
        }
        if name.contains("://") || name.contains('/') {
            return Err(err("is a URL; name the host only (example.com)"));
        }
        if name.contains(':') {
            return Err(err("names a port or an IPv6 address; name the host only"));
        }
        if name.contains('*') {
            return Err(err(
                "may only start with `*.` (a suffix), never contain `*` elsewhere",
            ));
        }
        let name = name.to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if name.len() > 253 || !name.split('.').all(label_ok) {
            return Err(err(
                "is not a host name (letters, digits, `-` in dot-separated labels)",
            ));
        }
        if suffix && !name.contains('.') {
            return Err(err(
                "a suffix must have at least two labels (`*.example.com`, not `*.com`)",
            ));
        }
        Ok(Self { name, suffix })
    }

    /// Whether `host` (as a CONNECT request names it, any case, a trailing
    /// dot allowed) matches.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        if self.suffix {
            host.len() > self.name.len() + 1
                && host.ends_with(&self.name)
                && host.as_bytes()[host.len() - self.name.len() - 1] == b'.'
        } else {
            host == self.name
        }
    }
}

/// Validate a whole list, naming the index of the first bad entry.
pub fn parse_hosts<S: AsRef<str>>(values: &[S]) -> Result<Vec<String>, (usize, HostPatternError)> {
    let mut out: Vec<String> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let p = HostPattern::parse(v.as_ref()).map_err(|e| (i, e))?;
        let shown = if p.suffix {
            format!("*.{}", p.name)
        } else {
            p.name
        };
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    Ok(out)
}

/// The gap of a backend that enforces no network mode in this build.
pub fn unenforced(policy: &NetworkPolicy, backend: &str) -> Vec<crate::Gap> {
    if policy.mode == NetworkMode::Allow {
        return Vec::new();
    }
    vec![crate::Gap::new(
        crate::gaps::NETWORK,
        format!(
            "{backend} does not enforce the network mode {} in this build: the host's network is reachable",
            policy.mode
        ),
    )]
}

/// [`DEFAULT_ALLOWED_HOSTS`] as a list.
pub fn default_allowed_hosts() -> Vec<String> {
    DEFAULT_ALLOWED_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_suffix_patterns_match_what_they_say() {
        let exact = HostPattern::parse("Crates.IO").unwrap();
        assert!(exact.matches("crates.io") && exact.matches("CRATES.io."));
        assert!(!exact.matches("index.crates.io") && !exact.matches("xcrates.io"));
        let suffix = HostPattern::parse("*.github.com").unwrap();
        assert!(suffix.matches("api.github.com") && suffix.matches("a.b.github.com"));
        assert!(!suffix.matches("github.com") && !suffix.matches("evilgithub.com"));
        assert!(!suffix.matches("github.com.evil.org"));
    }

    #[test]
    fn bad_patterns_are_refused_with_a_reason() {
        for bad in [
            "",
            "*.",
            "https://example.com",
            "example.com/path",
            "example.com:443",
            "::1",
            "*.com",
            "a*.example.com",
            "exa mple.com",
            "-bad.example.com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} accepted");
        }
        let (i, e) = parse_hosts(&["ok.example", "https://x"]).unwrap_err();
        assert_eq!(i, 1);
        assert!(e.to_string().contains("URL"), "{e}");
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
