//! The network policy beside the mode: which [`NetworkMode`] a call runs
//! under and, for `allow-listed`, which hosts its proxy lets through.
//!
//! Hosts are names: the proxy is asked `CONNECT host:port` and judges the
//! name, so a pattern is an exact name (`crates.io`) or a suffix
//! (`*.github.com`, which matches `api.github.com` and `a.b.github.com` but
//! not `github.com` itself). An entry may also be an address (`10.1.2.3`,
//! `::1`, `[::1]`) or a CIDR range (`10.0.0.0/8`, `fd00::/8`): that is the
//! only way to reach a loopback, private, link-local or otherwise
//! non-public address, whether a client names the address or an allowed
//! name resolves to it. Patterns are validated once, where they are read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
    /// `--allow-listen PORT`: under `deny` and `allow-listed` nothing may
    /// listen (a listener on the host's network could be reached from
    /// outside) except on these TCP ports, bound to loopback. Landlock
    /// enforces it (bind by port, the supervisor checks the address of each
    /// listen); under bwrap the listener is in the sandbox's private
    /// namespace, which the host cannot reach (named as a gap). Under
    /// `allow` it changes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_listen: Vec<u16>,
}

impl Default for NetworkPolicy {
    /// Today's behaviour: the host's network. Deployments choose narrower
    /// defaults per mode ([`NetworkMode::default_for`]).
    fn default() -> Self {
        Self {
            mode: NetworkMode::Allow,
            allowed_hosts: Vec::new(),
            allow_listen: Vec::new(),
        }
    }
}

impl NetworkPolicy {
    pub fn new(mode: NetworkMode, allowed_hosts: Vec<String>) -> Self {
        Self {
            mode,
            allowed_hosts,
            allow_listen: Vec::new(),
        }
    }

    /// The same policy with `ports` granted for listening on loopback.
    pub fn with_listen(mut self, ports: Vec<u16>) -> Self {
        self.allow_listen = ports;
        self
    }

    /// The loopback ports a listener may use under this policy: none is
    /// needed under `allow` (the host's network, unchanged).
    pub fn listen_ports(&self) -> &[u16] {
        match self.mode {
            NetworkMode::Allow => &[],
            NetworkMode::Deny | NetworkMode::AllowListed => &self.allow_listen,
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

/// A host pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct HostPatternError {
    pub value: String,
    pub reason: &'static str,
}

/// One validated pattern: an exact name, `*.` and a suffix, or an address
/// range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower case, without the `*.` of a suffix pattern; the range's
    /// canonical spelling for an address entry.
    name: String,
    suffix: bool,
    /// Set for an address or CIDR entry, which matches addresses only.
    range: Option<IpRange>,
}

/// An address range: `addr/prefix`, host bits zero. A single address is a
/// full-length prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    addr: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// `addr`, `[v6addr]` or `addr/prefix`, in the strict spellings only
    /// (four decimal parts for IPv4, no zone id): `Err` says why not;
    /// `Ok(None)` = not an address at all (a name, a URL...).
    fn parse(value: &str) -> Result<Option<Self>, &'static str> {
        let (addr, prefix) = match value.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (value, None),
        };
        let addr = addr
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(addr);
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return Ok(None);
        };
        let max: u8 = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => {
                    return Err(
                        "has a CIDR prefix length out of range (0-32 for IPv4, 0-128 for IPv6)",
                    );
                }
            },
        };
        let range = Self { addr, prefix };
        if range.network() != addr {
            return Err(
                "has bits set after its CIDR prefix; write the range's first address (10.0.0.0/8)",
            );
        }
        Ok(Some(range))
    }

    fn bits(addr: IpAddr) -> u128 {
        match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        }
    }

    fn mask(&self) -> u128 {
        let width: u32 = if self.addr.is_ipv4() { 32 } else { 128 };
        let all = if width == 32 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        };
        // A full-length prefix shifts by the whole width: nothing is left.
        all & !all.checked_shr(u32::from(self.prefix)).unwrap_or(0)
    }

    fn network(&self) -> IpAddr {
        let bits = Self::bits(self.addr) & self.mask();
        match self.addr {
            // The mask keeps an IPv4 value within 32 bits.
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
        }
    }

    /// Whether `addr` lies in this range; an IPv4-mapped IPv6 address is
    /// judged as the IPv4 address it carries.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        addr.is_ipv4() == self.addr.is_ipv4()
            && Self::bits(addr) & self.mask() == Self::bits(self.addr)
    }
}

impl std::fmt::Display for IpRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == max {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

/// Whether a name's last label reads as a number (decimal, or `0x` hex),
/// which makes URL parsers and `inet_aton` treat the whole name as an IPv4
/// address (`2130706433`, `0x7f.1`, `127.1`): never a host name.
pub fn ends_in_number(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    let last = name.rsplit('.').next().unwrap_or(name);
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
}

impl HostPattern {
    pub fn parse(value: &str) -> Result<Self, HostPatternError> {
        let err = |reason| HostPatternError {
            value: value.to_owned(),
            reason,
        };
        match IpRange::parse(value) {
            Ok(Some(range)) => {
                return Ok(Self {
                    name: range.to_string(),
                    suffix: false,
                    range: Some(range),
                });
            }
            Ok(None) => {}
            Err(reason) => return Err(err(reason)),
        }
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
        if ends_in_number(&name) {
            return Err(err(
                "reads as an IPv4 address in an unusual spelling; write an address as four decimal numbers (127.0.0.1)",
            ));
        }
        Ok(Self {
            name,
            suffix,
            range: None,
        })
    }

    /// The address range of an address or CIDR entry.
    pub fn range(&self) -> Option<&IpRange> {
        self.range.as_ref()
    }

    /// Whether `host` (as a CONNECT request names it, any case, a trailing
    /// dot allowed) matches.
    pub fn matches(&self, host: &str) -> bool {
        if let Some(range) = &self.range {
            let bare = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            return bare.parse::<IpAddr>().is_ok_and(|a| range.contains(a));
        }
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
    fn address_and_cidr_entries_match_addresses_only() {
        let one = HostPattern::parse("127.0.0.1").unwrap();
        assert!(one.matches("127.0.0.1") && one.matches("[::ffff:127.0.0.1]"));
        assert!(!one.matches("127.0.0.2") && !one.matches("localhost"));
        let net = HostPattern::parse("10.0.0.0/8").unwrap();
        assert!(net.matches("10.255.0.1") && !net.matches("11.0.0.1"));
        let v6 = HostPattern::parse("[fd00::]/8").unwrap();
        assert!(v6.matches("[fd12::1]") && v6.matches("fdff::") && !v6.matches("fe80::1"));
        let all = HostPattern::parse("0.0.0.0/0").unwrap();
        assert!(all.matches("8.8.8.8") && !all.matches("::1"));
        // A name spelled like an address is never a name pattern's match.
        assert!(!HostPattern::parse("example.com").unwrap().matches("[::1]"));
        assert_eq!(
            parse_hosts(&["::1", "[::1]", "10.0.0.0/8", "fd00::/8", "1.2.3.4/32"]).unwrap(),
            ["::1", "10.0.0.0/8", "fd00::/8", "1.2.3.4"]
        );
        assert!(ends_in_number("2130706433") && ends_in_number("a.0x7f"));
        assert!(ends_in_number("127.1.") && !ends_in_number("1.example"));
    }

    #[test]
    fn bad_patterns_are_refused_with_a_reason() {
        for bad in [
            "",
            "*.",
            "https://example.com",
            "example.com/path",
            "example.com:443",
            "::1%eth0",
            "[fe80::1%25eth0]",
            "10.0.0.0/33",
            "10.0.0.1/8",
            "10.0.0.0/-1",
            "127.1",
            "2130706433",
            "0x7f.1",
            "0177.0.0.1",
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
}
