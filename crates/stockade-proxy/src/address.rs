//! Which addresses the proxy connects to without being told: public ones
//! only. An allowed NAME may still resolve to loopback, a private network or
//! the cloud metadata service (by a record the name's owner controls, or a
//! rebinding answer), so every resolved address is judged here, and only
//! those that pass (or that `allowed_hosts` lists as an address or range)
//! are connected to.
//!
//! The table follows the IANA special-purpose registries (RFC 6890 and
//! successors); IPv6 forms that carry an IPv4 address (mapped, compatible,
//! SIIT, NAT64, 6to4) are judged by the address they carry.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Special {
    /// The registry range, as written there.
    pub(crate) range: &'static str,
    pub(crate) what: &'static str,
    /// The IPv4 address an IPv6 form carried, when that is what was judged.
    pub(crate) carried: Option<Ipv4Addr>,
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v4) = self.carried {
            write!(f, "carries {v4}, ")?;
        }
        write!(f, "{} ({})", self.what, self.range)
    }
}

/// (first address, prefix length, range as written, what it is).
const V4: &[(u32, u8, &str, &str)] = &[
    (0x0000_0000, 8, "0.0.0.0/8", "this network / unspecified"),
    (0x0a00_0000, 8, "10.0.0.0/8", "private"),
    (
        0x6440_0000,
        10,
        "100.64.0.0/10",
        "shared address space (CGNAT)",
    ),
    (0x7f00_0000, 8, "127.0.0.0/8", "loopback"),
    (
        0xa9fe_0000,
        16,
        "169.254.0.0/16",
        "link-local (cloud metadata services live here)",
    ),
    (0xac10_0000, 12, "172.16.0.0/12", "private"),
    (0xc000_0000, 24, "192.0.0.0/24", "IETF protocol assignments"),
    (0xc000_0200, 24, "192.0.2.0/24", "documentation"),
    (0xc058_6300, 24, "192.88.99.0/24", "6to4 relay anycast"),
    (0xc0a8_0000, 16, "192.168.0.0/16", "private"),
    (0xc612_0000, 15, "198.18.0.0/15", "benchmarking"),
    (0xc633_6400, 24, "198.51.100.0/24", "documentation"),
    (0xcb00_7100, 24, "203.0.113.0/24", "documentation"),
    (0xe000_0000, 4, "224.0.0.0/4", "multicast"),
    (
        0xf000_0000,
        4,
        "240.0.0.0/4",
        "reserved, with the broadcast address",
    ),
];

const V6: &[(u128, u8, &str, &str)] = &[
    (0, 128, "::/128", "unspecified"),
    (1, 128, "::1/128", "loopback"),
    (
        0x0064_ff9b_0001_u128 << 80,
        48,
        "64:ff9b:1::/48",
        "local-use NAT64",
    ),
    (0x0100_u128 << 112, 64, "100::/64", "discard-only"),
    (0x2001_u128 << 112, 32, "2001::/32", "Teredo tunnel"),
    (0x2001_0002_u128 << 96, 48, "2001:2::/48", "benchmarking"),
    (0x2001_0db8_u128 << 96, 32, "2001:db8::/32", "documentation"),
    (0x3fff_u128 << 112, 20, "3fff::/20", "documentation"),
    (0xfc00_u128 << 112, 7, "fc00::/7", "unique-local"),
    (0xfe80_u128 << 112, 10, "fe80::/10", "link-local"),
    (
        0xfec0_u128 << 112,
        10,
        "fec0::/10",
        "site-local (deprecated)",
    ),
    (0xff00_u128 << 112, 8, "ff00::/8", "multicast"),
];

/// IPv6 ranges that carry an IPv4 address: (first address, prefix, range,
/// what, where the IPv4 address sits as a right shift of the 128 bits).
const CARRIERS: &[(u128, u8, &str, &str, u32)] = &[
    (0xffff_u128 << 32, 96, "::ffff:0:0/96", "IPv4-mapped", 0),
    (
        0xffff_u128 << 48,
        96,
        "::ffff:0:0:0/96",
        "IPv4-translated (SIIT)",
        0,
    ),
    (0x0064_ff9b_u128 << 96, 96, "64:ff9b::/96", "NAT64", 0),
    (0x2002_u128 << 112, 16, "2002::/16", "6to4", 80),
    // Last: the deprecated IPv4-compatible form covers ::/96, which also
    // holds :: and ::1, judged above as themselves.
    (0, 96, "::/96", "IPv4-compatible (deprecated)", 0),
];

fn v4_special(a: Ipv4Addr) -> Option<Special> {
    let bits = u32::from(a);
    V4.iter()
        .find(|(net, len, ..)| bits & mask32(*len) == *net)
        .map(|&(_, _, range, what)| Special {
            range,
            what,
            carried: None,
        })
}

fn mask32(len: u8) -> u32 {
    !u32::MAX.checked_shr(u32::from(len)).unwrap_or(0)
}

fn mask128(len: u8) -> u128 {
    !u128::MAX.checked_shr(u32::from(len)).unwrap_or(0)
}

fn v6_special(a: Ipv6Addr) -> Option<Special> {
    let bits = u128::from(a);
    if let Some(&(_, _, range, what)) = V6
        .iter()
        .find(|(net, len, ..)| bits & mask128(*len) == *net)
    {
        return Some(Special {
            range,
            what,
            carried: None,
        });
    }
    for &(net, len, _, _, shift) in CARRIERS {
        if bits & mask128(len) == net {
            // Truncation keeps exactly the 32 bits the form carries.
            let v4 = Ipv4Addr::from((bits >> shift) as u32);
            return v4_special(v4).map(|s| Special {
                carried: Some(v4),
                ..s
            });
        }
    }
    None
}

/// `None` for a public address; else what it is.
pub(crate) fn special(addr: IpAddr) -> Option<Special> {
    match addr {
        IpAddr::V4(a) => v4_special(a),
        IpAddr::V6(a) => v6_special(a),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn what(s: &str) -> Option<&'static str> {
        special(s.parse().unwrap()).map(|s| s.range)
    }

    #[test]
    fn every_non_public_range_is_named() {
        for (addr, range) in [
            ("0.0.0.0", "0.0.0.0/8"),
            ("10.1.2.3", "10.0.0.0/8"),
            ("100.64.0.1", "100.64.0.0/10"),
            ("100.127.255.255", "100.64.0.0/10"),
            ("127.0.0.1", "127.0.0.0/8"),
            ("127.255.255.254", "127.0.0.0/8"),
            ("169.254.169.254", "169.254.0.0/16"),
            ("172.16.0.1", "172.16.0.0/12"),
            ("172.31.255.255", "172.16.0.0/12"),
            ("192.0.0.170", "192.0.0.0/24"),
            ("192.0.2.1", "192.0.2.0/24"),
            ("192.168.1.1", "192.168.0.0/16"),
            ("198.19.0.1", "198.18.0.0/15"),
            ("198.51.100.7", "198.51.100.0/24"),
            ("203.0.113.9", "203.0.113.0/24"),
            ("224.0.0.1", "224.0.0.0/4"),
            ("239.255.255.250", "224.0.0.0/4"),
            ("255.255.255.255", "240.0.0.0/4"),
            ("::", "::/128"),
            ("::1", "::1/128"),
            ("fe80::1", "fe80::/10"),
            ("febf::1", "fe80::/10"),
            ("fd00:ec2::254", "fc00::/7"),
            ("fc00::1", "fc00::/7"),
            ("ff02::1", "ff00::/8"),
            ("2001:db8::1", "2001:db8::/32"),
            ("2001:0:4136:e378::1", "2001::/32"),
            ("64:ff9b:1::1", "64:ff9b:1::/48"),
            ("100::1", "100::/64"),
            ("fec0::1", "fec0::/10"),
            ("3fff::1", "3fff::/20"),
            // IPv6 forms judged by the IPv4 address they carry.
            ("::ffff:127.0.0.1", "127.0.0.0/8"),
            ("::ffff:169.254.169.254", "169.254.0.0/16"),
            ("::ffff:0:10.0.0.1", "10.0.0.0/8"),
            ("::127.0.0.1", "127.0.0.0/8"),
            ("64:ff9b::7f00:1", "127.0.0.0/8"),
            ("64:ff9b::a9fe:a9fe", "169.254.0.0/16"),
            ("2002:7f00:1::", "127.0.0.0/8"),
            ("2002:c0a8:0101::1", "192.168.0.0/16"),
        ] {
            assert_eq!(what(addr), Some(range), "{addr}");
        }
        let s = special("::ffff:127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(s.carried, Some(Ipv4Addr::LOCALHOST));
        assert_eq!(s.to_string(), "carries 127.0.0.1, loopback (127.0.0.0/8)");
    }

    #[test]
    fn public_addresses_pass() {
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.169.0.0",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(what(addr), None, "{addr}");
        }
    }
}
