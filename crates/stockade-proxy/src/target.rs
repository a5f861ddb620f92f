//! A request's target (`host:port`), read strictly: one spelling per host,
//! so the name the policy judges is the name that is resolved, and nothing
//! a URL parser or `inet_aton` would read differently gets through.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use stockade_core::net::ends_in_number;

/// The longest host name DNS can carry (RFC 1035 §2.3.4).
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    /// Lower case, without a trailing dot.
    Name(String),
    /// A literal address, in its one strict spelling (dotted quad, or IPv6
    /// in brackets).
    Addr(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Addr(a) => write!(f, "{a}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) host: Host,
    pub(crate) port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetError {
    /// Not a host and port at all; the reason names what is wrong.
    Malformed(&'static str),
    /// A name that clients and resolvers read as an IPv4 address
    /// (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`): refused rather than
    /// guessed at, with the address it would have meant when there is one.
    OddAddress {
        spelled: String,
        means: Option<Ipv4Addr>,
    },
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::Malformed(why) => f.write_str(why),
            TargetError::OddAddress {
                spelled,
                means: Some(a),
            } => write!(
                f,
                "{spelled} is the address {a} in an unusual spelling; only the four-decimal form is read"
            ),
            TargetError::OddAddress {
                spelled,
                means: None,
            } => write!(
                f,
                "{spelled} ends in a number but is no IPv4 address; only the four-decimal form is read"
            ),
        }
    }
}

/// Parses `host[:port]` (`[v6]:port` for IPv6). `default_port` is the
/// scheme's port when the authority may omit it (`None`: a port is
/// required, as in CONNECT).
pub(crate) fn parse_authority(
    authority: &str,
    default_port: Option<u16>,
) -> Result<Target, TargetError> {
    use TargetError::Malformed;
    if authority.is_empty() {
        return Err(Malformed("names no host"));
    }
    if authority.contains('@') {
        return Err(Malformed(
            "carries a user name (user@host); name the host only",
        ));
    }
    if authority.contains('%') {
        return Err(Malformed(
            "contains `%` (percent-encoding or an IPv6 zone id); name the host as it is",
        ));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Err(Malformed("opens `[` without closing it"));
        };
        let Ok(addr) = inside.parse::<Ipv6Addr>() else {
            return Err(Malformed(
                "has brackets around something that is not an IPv6 address",
            ));
        };
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(Malformed(
                "has something other than `:port` after the brackets",
            ))?),
        };
        (Host::Addr(IpAddr::V6(addr)), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if host.contains(':') {
            return Err(Malformed("an IPv6 address must be written in brackets"));
        }
        (parse_host(host)?, port)
    };
    let port = match port {
        Some(p) => parse_port(p)?,
        None => default_port.ok_or(Malformed("names no port (host:port)"))?,
    };
    Ok(Target { host, port })
}

fn parse_port(p: &str) -> Result<u16, TargetError> {
    // Digits only: `u16::from_str` would also take a leading `+`.
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::Malformed("has a port that is not a number"));
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(TargetError::Malformed("has a port outside 1-65535")),
        Ok(n) => Ok(n),
    }
}

/// A host name or a dotted-quad address, nothing else.
fn parse_host(host: &str) -> Result<Host, TargetError> {
    use TargetError::Malformed;
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
    {
        return Err(Malformed(
            "has a byte no host name has (a control character, space, non-ASCII or punctuation)",
        ));
    }
    // One trailing dot is the same name written absolute; every other
    // empty label (`a..b`, `.a`, `a..`) is no name.
    let bare = host.strip_suffix('.').unwrap_or(host);
    if bare.is_empty() || bare.split('.').any(str::is_empty) {
        return Err(Malformed("has an empty label"));
    }
    if ends_in_number(bare) {
        return match bare.parse::<Ipv4Addr>() {
            Ok(a) if a.to_string() == bare => Ok(Host::Addr(IpAddr::V4(a))),
            _ => Err(TargetError::OddAddress {
                spelled: host.to_ascii_lowercase(),
                means: inet_aton(bare),
            }),
        };
    }
    if bare.len() > MAX_NAME
        || bare
            .split('.')
            .any(|l| l.len() > MAX_LABEL || l.starts_with('-') || l.ends_with('-'))
    {
        return Err(Malformed(
            "is not a host name (labels of 1-63 letters, digits, `-`)",
        ));
    }
    Ok(Host::Name(bare.to_ascii_lowercase()))
}

/// What the WHATWG URL parser and `inet_aton` make of a numeric name: one
/// to four parts, each decimal, octal (leading `0`) or hex (`0x`), the last
/// filling the remaining bytes. Used only to say, in a refusal, which
/// address an odd spelling meant.
fn inet_aton(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            if h.is_empty() {
                0
            } else {
                u64::from_str_radix(h, 16).ok()?
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()?
        } else {
            p.parse::<u64>().ok()?
        };
        values.push(v);
    }
    let (last, head) = values.split_last()?;
    if head.iter().any(|&v| v > 255) {
        return None;
    }
    let room = 8 * (5 - u32::try_from(values.len()).ok()?);
    if *last >= 1u64 << room {
        return None;
    }
    let mut out = *last;
    for (i, v) in head.iter().enumerate() {
        out |= v << (24 - 8 * u32::try_from(i).ok()?);
    }
    Some(Ipv4Addr::from(u32::try_from(out).ok()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn name(s: &str) -> Host {
        Host::Name(s.to_owned())
    }

    #[test]
    fn names_and_addresses_have_one_spelling() {
        let ok = |a: &str, d: Option<u16>| parse_authority(a, d).unwrap();
        assert_eq!(ok("Allowed.TEST.:443", None).host, name("allowed.test"));
        assert_eq!(ok("allowed.test", Some(80)).port, 80);
        assert_eq!(ok("a_b.test:1", None).host, name("a_b.test"));
        assert_eq!(
            ok("127.0.0.1:80", None).host,
            Host::Addr("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            ok("[::ffff:127.0.0.1]:80", None).host,
            Host::Addr("::ffff:127.0.0.1".parse().unwrap())
        );
        assert_eq!(ok("[::1]", Some(80)).port, 80);
    }

    #[test]
    fn odd_spellings_are_refused_and_say_what_they_meant() {
        let lo = Some(Ipv4Addr::LOCALHOST);
        for (s, means) in [
            ("2130706433", lo),
            ("0177.0.0.1", lo),
            ("0x7f.1", lo),
            ("0x7f000001", lo),
            ("127.1", lo),
            ("127.0.1", lo),
            ("127.000.000.001", lo),
            ("0", Some(Ipv4Addr::UNSPECIFIED)),
            ("1.2.3.256", None),
            ("a.b.0x10", None),
        ] {
            match parse_authority(&format!("{s}:80"), None) {
                Err(TargetError::OddAddress { means: m, .. }) => assert_eq!(m, means, "{s}"),
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn malformed_targets_are_refused() {
        for s in [
            "",
            "allowed.test",
            "allowed.test:",
            "allowed.test:0",
            "allowed.test:65536",
            "allowed.test:+443",
            "allowed.test:44 3",
            "allowed.test..:443",
            ".allowed.test:443",
            "a..test:443",
            "allowed.test\0.evil:443",
            "allowed.test\t:443",
            "allowed .test:443",
            "allowed%2etest:443",
            "[fe80::1%25eth0]:443",
            "[fe80::1%eth0]:443",
            "user@allowed.test:443",
            "::1:443",
            "[::1:443",
            "[127.0.0.1]:443",
            "[::1]x:443",
            "allowed.test:443:443",
            "-bad.test:443",
            "bücher.test:443",
        ] {
            assert!(
                matches!(parse_authority(s, None), Err(TargetError::Malformed(_))),
                "{s:?}: {:?}",
                parse_authority(s, None)
            );
        }
    }
}
