//! Security identifiers: the few well-known ones this rung names, and the two
//! derived capability SIDs (workspace and private temp).
//!
//! Parsing and encoding are done here, in pure code, so the FFI only copies
//! bytes and every rule about a SID's shape is tested on any host.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::paths;

/// `SID_MAX_SUB_AUTHORITIES`.
const MAX_SUB_AUTHORITIES: usize = 15;
/// The identifier authority is 48 bits wide.
const MAX_AUTHORITY: u64 = (1 << 48) - 1;
/// `SECURITY_NON_UNIQUE_AUTHORITY` (`S-1-4`): no Windows component issues SIDs
/// under it, so a derived SID cannot collide with an account or group.
const NON_UNIQUE_AUTHORITY: u64 = 4;
/// How many 32-bit sub-authorities a derived SID carries (128 hash bits).
const DERIVED_SUB_AUTHORITIES: usize = 4;

/// Domain tags: the workspace and the temp SIDs hash the same kind of input (a
/// canonical directory path), so without separation a private temp directory
/// would share its SID with a workspace opened at the same path, and the
/// standing workspace ACE would then authorize that session's temp tree.
const WORKSPACE_DOMAIN: &[u8] = b"stockade/windows/workspace-write-sid/v1\0";
const TEMP_DOMAIN: &[u8] = b"stockade/windows/temp-write-sid/v1\0";

/// A SID: revision 1, a 48-bit identifier authority, 1..=15 sub-authorities.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sid {
    authority: u64,
    sub_authorities: Vec<u32>,
}

/// A string or byte form that is not a valid SID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SID {input:?}: {why}")]
pub struct ParseSidError {
    pub input: String,
    pub why: &'static str,
}

impl Sid {
    pub fn new(authority: u64, sub_authorities: &[u32]) -> Option<Self> {
        let ok = authority <= MAX_AUTHORITY
            && !sub_authorities.is_empty()
            && sub_authorities.len() <= MAX_SUB_AUTHORITIES;
        ok.then(|| Self {
            authority,
            sub_authorities: sub_authorities.to_vec(),
        })
    }

    fn known(authority: u64, sub_authorities: &[u32]) -> Self {
        Self {
            authority,
            sub_authorities: sub_authorities.to_vec(),
        }
    }

    /// `S-1-1-0`, Everyone (World).
    pub fn everyone() -> Self {
        Self::known(1, &[0])
    }
    /// `S-1-5-18`, LocalSystem.
    pub fn local_system() -> Self {
        Self::known(5, &[18])
    }
    /// `S-1-5-11`, Authenticated Users. Never a restricting SID here.
    pub fn authenticated_users() -> Self {
        Self::known(5, &[11])
    }
    /// `S-1-5-4`, INTERACTIVE. Never a restricting SID here.
    pub fn interactive() -> Self {
        Self::known(5, &[4])
    }
    /// `S-1-2-0`, LOCAL. Never a restricting SID here.
    pub fn local() -> Self {
        Self::known(2, &[0])
    }

    pub fn authority(&self) -> u64 {
        self.authority
    }

    pub fn sub_authorities(&self) -> &[u32] {
        &self.sub_authorities
    }

    /// The binary form Win32 reads through a `PSID`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 4 * self.sub_authorities.len());
        out.push(1);
        // Bounded by MAX_SUB_AUTHORITIES (15) at construction.
        out.push(self.sub_authorities.len() as u8);
        out.extend_from_slice(&self.authority.to_be_bytes()[2..]);
        for s in &self.sub_authorities {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Parse exactly one binary SID (no trailing bytes).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ParseSidError> {
        let err = |why| ParseSidError {
            input: format!("{bytes:02x?}"),
            why,
        };
        let (head, rest) = bytes
            .split_at_checked(8)
            .ok_or_else(|| err("shorter than 8 bytes"))?;
        if head[0] != 1 {
            return Err(err("revision is not 1"));
        }
        let count = usize::from(head[1]);
        if count == 0 || count > MAX_SUB_AUTHORITIES {
            return Err(err("sub-authority count outside 1..=15"));
        }
        if rest.len() != 4 * count {
            return Err(err("length does not match the sub-authority count"));
        }
        let mut auth = [0u8; 8];
        auth[2..].copy_from_slice(&head[2..8]);
        let sub_authorities = rest
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Self {
            authority: u64::from_be_bytes(auth),
            sub_authorities,
        })
    }

    /// The length a binary SID starting `bytes` declares, if its header is
    /// readable (used to split an ACE's trailing SID from padding).
    pub fn declared_len(bytes: &[u8]) -> Option<usize> {
        bytes.get(1).map(|n| 8 + 4 * usize::from(*n))
    }
}

/// `S-1-<authority>-<sub>...`, as `ConvertSidToStringSidW` writes it: the
/// authority in decimal below 2^32, else as 12 hex digits.
impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.authority < (1 << 32) {
            write!(f, "S-1-{}", self.authority)?;
        } else {
            write!(f, "S-1-0x{:012X}", self.authority)?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

/// Strict: exactly the form [`Display`](fmt::Display) writes (decimal without
/// signs or leading zeros), so one SID has exactly one accepted spelling and
/// a runner argument cannot alias another.
impl FromStr for Sid {
    type Err = ParseSidError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why| ParseSidError {
            input: s.to_owned(),
            why,
        };
        let rest = s
            .strip_prefix("S-1-")
            .ok_or_else(|| err("does not start with S-1-"))?;
        let mut parts = rest.split('-');
        let auth_text = parts.next().ok_or_else(|| err("no identifier authority"))?;
        let authority = match auth_text.strip_prefix("0x") {
            Some(hex) if hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                let v = u64::from_str_radix(hex, 16).map_err(|_| err("bad hex authority"))?;
                if v < (1 << 32) {
                    return Err(err("hex authority below 2^32 must be decimal"));
                }
                v
            }
            Some(_) => return Err(err("bad hex authority")),
            None => decimal(auth_text)
                .filter(|v| *v < (1 << 32))
                .ok_or_else(|| err("bad decimal authority"))?,
        };
        let mut sub_authorities = Vec::new();
        for p in parts {
            let v = decimal(p)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| err("bad sub-authority"))?;
            sub_authorities.push(v);
        }
        Sid::new(authority, &sub_authorities)
            .ok_or_else(|| err("sub-authority count outside 1..=15"))
    }
}

fn decimal(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

fn derive(domain: &[u8], path: &Path) -> Result<Sid, Error> {
    // The path is hashed as the UTF-16LE Windows itself stores, so every
    // Windows path (unpaired surrogates included) has one SID and no lossy
    // conversion can make two paths share one.
    let wide = paths::wide(path.as_os_str()).ok_or_else(|| Error::PathEncoding {
        path: path.to_path_buf(),
    })?;
    let mut h = Sha256::new();
    h.update(domain);
    for unit in wide {
        h.update(unit.to_le_bytes());
    }
    let digest = h.finalize();
    let mut subs = [0u32; DERIVED_SUB_AUTHORITIES];
    for (i, s) in subs.iter_mut().enumerate() {
        let b = &digest[4 * i..4 * i + 4];
        *s = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    }
    Ok(Sid::known(NON_UNIQUE_AUTHORITY, &subs))
}

/// The standing capability SID of a workspace, from its canonical path. The
/// same workspace gets the same SID on every run, which is what lets its
/// standing ACE act as the cross-session reuse cache.
pub fn workspace_sid(canonical_workspace: &Path) -> Result<Sid, Error> {
    derive(WORKSPACE_DOMAIN, canonical_workspace)
}

/// The revocable capability SID of one private temp directory, from its
/// (random) canonical path, domain-separated from [`workspace_sid`].
pub fn temp_sid(private_temp_dir: &Path) -> Result<Sid, Error> {
    derive(TEMP_DOMAIN, private_temp_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_sids_have_their_windows_spelling() {
        assert_eq!(Sid::everyone().to_string(), "S-1-1-0");
        assert_eq!(Sid::local_system().to_string(), "S-1-5-18");
        assert_eq!(Sid::authenticated_users().to_string(), "S-1-5-11");
        assert_eq!(Sid::interactive().to_string(), "S-1-5-4");
        assert_eq!(Sid::local().to_string(), "S-1-2-0");
    }

    #[test]
    fn string_and_byte_forms_round_trip() {
        for s in [
            "S-1-1-0",
            "S-1-5-21-1004336348-1177238915-682003330-512",
            "S-1-4-1-2-3-4",
            "S-1-0x123456789ABC-7",
            "S-1-5-4294967295",
        ] {
            let sid: Sid = s.parse().unwrap();
            assert_eq!(sid.to_string(), s);
            assert_eq!(Sid::from_bytes(&sid.to_bytes()).unwrap(), sid);
        }
        // The binary layout Win32 reads: revision, count, BE authority, LE subs.
        assert_eq!(
            Sid::everyone().to_bytes(),
            [1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        assert_eq!(
            Sid::local_system().to_bytes(),
            [1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]
        );
    }

    #[test]
    fn every_non_canonical_spelling_is_rejected() {
        for bad in [
            "",
            "S-1",
            "S-1-",
            "S-1-5",
            "s-1-5-18",
            "S-2-5-18",
            "S-1-5-018",
            "S-1-5-+18",
            "S-1-5--18",
            "S-1-5-18-",
            "S-1-5-4294967296",
            "S-1-4294967296-1",
            "S-1-0x000000000005-1",
            "S-1-0x1234-1",
            "S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15-16",
            "S-1-5-18 ",
        ] {
            assert!(bad.parse::<Sid>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn malformed_bytes_are_rejected() {
        assert!(Sid::from_bytes(&[1, 1, 0, 0, 0, 0, 0, 1]).is_err());
        assert!(Sid::from_bytes(&[2, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]).is_err());
        assert!(Sid::from_bytes(&[1, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert!(Sid::from_bytes(&[1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]).is_err());
        assert_eq!(
            Sid::declared_len(&[1, 2, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0]),
            Some(16)
        );
    }

    #[test]
    fn workspace_sids_are_deterministic_non_unique_authority_sids() {
        let a = workspace_sid(Path::new(r"C:\Users\dev\proj")).unwrap();
        assert_eq!(a, workspace_sid(Path::new(r"C:\Users\dev\proj")).unwrap());
        assert_eq!(a.authority(), 4);
        assert_eq!(a.sub_authorities().len(), 4);
        assert!(a.to_string().starts_with("S-1-4-"));
        // Pinned: changing the derivation orphans every standing ACE on every
        // machine, so it must be a deliberate, versioned change.
        assert_eq!(a.to_string(), PINNED_WORKSPACE);
        assert_ne!(a, workspace_sid(Path::new(r"C:\Users\dev\proj2")).unwrap());
        // Hashing is of the exact canonical string: another spelling is
        // another SID (canonicalization happens before derivation).
        assert_ne!(a, workspace_sid(Path::new(r"C:\Users\dev\Proj")).unwrap());
    }

    #[test]
    fn temp_sids_are_domain_separated_from_workspace_sids() {
        let p =
            Path::new(r"C:\Users\dev\AppData\Local\Temp\stockade-00112233445566778899aabbccddeeff");
        let t = temp_sid(p).unwrap();
        assert_eq!(t, temp_sid(p).unwrap());
        assert_ne!(t, workspace_sid(p).unwrap());
        assert_eq!(t.authority(), 4);
        assert_eq!(t.to_string(), PINNED_TEMP);
    }

    // Computed outside this crate: sha256(domain tag || UTF-16LE(path)), the
    // first 16 bytes read as four big-endian u32 sub-authorities.
    const PINNED_WORKSPACE: &str = "S-1-4-215154581-849064013-1679562909-2360693659";
    const PINNED_TEMP: &str = "S-1-4-4056551945-1281178128-2206727918-811933429";
}
