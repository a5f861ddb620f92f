//! DACL facts in pure code: parsing the bytes Win32 hands back, the exact
//! capability ACE this rung writes, and which entries a grant or a revoke
//! applies. The FFI only copies bytes in and hands entries to
//! `SetEntriesInAclW`.

use crate::sid::Sid;

/// `ACCESS_ALLOWED_ACE_TYPE`.
pub const ACCESS_ALLOWED: u8 = 0;
/// `ACCESS_DENIED_ACE_TYPE`.
pub const ACCESS_DENIED: u8 = 1;
/// `OBJECT_INHERIT_ACE`.
pub const OBJECT_INHERIT: u8 = 0x01;
/// `CONTAINER_INHERIT_ACE`.
pub const CONTAINER_INHERIT: u8 = 0x02;
/// `INHERITED_ACE`: the ACE came from a parent, not from this object.
pub const INHERITED: u8 = 0x10;
/// What a capability ACE is inherited by: every file and directory below.
pub const SUBTREE: u8 = OBJECT_INHERIT | CONTAINER_INHERIT;

/// "Modify": `FILE_GENERIC_READ | FILE_GENERIC_WRITE | FILE_GENERIC_EXECUTE |
/// DELETE`. The restricting check of a WRITE_RESTRICTED token looks only at
/// write-class rights, but the ACE grants the whole modify set so that an
/// open asking for read+write in one call clears the restricting pass too.
/// No `WRITE_DAC`/`WRITE_OWNER`: a confined child must not be able to widen
/// the ACLs of what it may write.
pub const MODIFY: u32 = 0x0013_01BF;
/// `FILE_ALL_ACCESS`.
pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
/// `GENERIC_ALL`, for the token default DACL.
pub const GENERIC_ALL: u32 = 0x1000_0000;

/// One ACE as read back from a DACL. `sid` is `None` for ACE types whose SID
/// is not at the standard offset (object and callback ACEs); they are never
/// the rung's own ACE and are left to `SetEntriesInAclW` untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ace {
    pub ace_type: u8,
    pub flags: u8,
    pub mask: u32,
    pub sid: Option<Sid>,
}

/// A file object's discretionary ACL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dacl {
    /// No DACL at all: every access is granted to everyone.
    Null,
    Entries(Vec<Ace>),
}

/// Bytes that are not a well-formed ACL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed ACL: {why}")]
pub struct ParseAclError {
    pub why: &'static str,
}

impl Dacl {
    /// Parse an `ACL` (header and ACEs) exactly as it sits in memory.
    pub fn parse(bytes: &[u8]) -> Result<Vec<Ace>, ParseAclError> {
        let err = |why| ParseAclError { why };
        let header = bytes
            .get(..8)
            .ok_or_else(|| err("shorter than its header"))?;
        let size = usize::from(u16::from_le_bytes([header[2], header[3]]));
        let count = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let body = bytes
            .get(8..size.max(8))
            .ok_or_else(|| err("AclSize exceeds the buffer"))?;
        let mut aces = Vec::with_capacity(count);
        let mut at = 0usize;
        for _ in 0..count {
            let h = body
                .get(at..at + 4)
                .ok_or_else(|| err("ACE header past AclSize"))?;
            let ace_size = usize::from(u16::from_le_bytes([h[2], h[3]]));
            if ace_size < 4 {
                return Err(err("ACE smaller than its header"));
            }
            let ace = body
                .get(at..at + ace_size)
                .ok_or_else(|| err("ACE past AclSize"))?;
            let (ace_type, flags) = (h[0], h[1]);
            let (mask, sid) = match ace_type {
                ACCESS_ALLOWED | ACCESS_DENIED => {
                    let m = ace.get(4..8).ok_or_else(|| err("ACE without a mask"))?;
                    let sid_bytes = &ace[8.min(ace.len())..];
                    let len = Sid::declared_len(sid_bytes)
                        .filter(|l| *l <= sid_bytes.len())
                        .ok_or_else(|| err("ACE SID past AceSize"))?;
                    let sid =
                        Sid::from_bytes(&sid_bytes[..len]).map_err(|_| err("ACE SID malformed"))?;
                    (u32::from_le_bytes([m[0], m[1], m[2], m[3]]), Some(sid))
                }
                _ => {
                    let mask = ace
                        .get(4..8)
                        .map_or(0, |m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
                    (mask, None)
                }
            };
            aces.push(Ace {
                ace_type,
                flags,
                mask,
                sid,
            });
            at += ace_size;
        }
        Ok(aces)
    }
}

/// What an [`AclEntry`] does, mirroring `SetEntriesInAclW`'s access modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclMode {
    /// `SET_ACCESS`: replace every explicit ACE of the trustee with this one,
    /// so the result is exact whatever was there before.
    Set,
    /// `REVOKE_ACCESS`: remove every explicit ACE of the trustee.
    Revoke,
}

/// One explicit entry for `SetEntriesInAclW` (and for the token default DACL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclEntry {
    pub mode: AclMode,
    pub sid: Sid,
    pub mask: u32,
    /// `OBJECT_INHERIT | CONTAINER_INHERIT` or 0.
    pub inheritance: u8,
}

impl AclEntry {
    /// The capability ACE: Modify, inherited by the whole subtree.
    pub fn capability(sid: Sid) -> Self {
        Self {
            mode: AclMode::Set,
            sid,
            mask: MODIFY,
            inheritance: SUBTREE,
        }
    }

    pub fn revoke(sid: Sid) -> Self {
        Self {
            mode: AclMode::Revoke,
            sid,
            mask: 0,
            inheritance: 0,
        }
    }

    /// An entry of a token default DACL (never inherited: it is applied to
    /// objects without inheritable ACEs, like pipes and events).
    pub fn default_dacl(sid: Sid) -> Self {
        Self {
            mode: AclMode::Set,
            sid,
            mask: GENERIC_ALL,
            inheritance: 0,
        }
    }

    /// Whether `ace` is exactly what applying this `Set` entry leaves: an
    /// explicit (not inherited) allow ACE for the SID with the same mask and
    /// inheritance flags and nothing else.
    pub fn is_exactly(&self, ace: &Ace) -> bool {
        self.mode == AclMode::Set
            && ace.ace_type == ACCESS_ALLOWED
            && ace.flags == self.inheritance
            && ace.mask == self.mask
            && ace.sid.as_ref() == Some(&self.sid)
    }
}

/// The entries that make `want` hold on an object whose DACL is `current`, or
/// `None` when it already holds exactly (the exact-ACE skip: re-applying would
/// eagerly re-propagate through the whole tree for nothing).
///
/// The ACE is exact only when it is the trustee's sole explicit ACE: a second
/// one (an old mask, a deny) means the object is not in the state a `Set`
/// leaves, so it is re-applied.
///
/// A NULL DACL grants everything to everyone; adding one ACE to it would
/// silently make the object inaccessible to everybody else, so the grant also
/// writes an explicit Everyone full-access ACE on the object itself (not
/// inherited, so no descendant is widened). This is not identity-preserving
/// across a grant/revoke round trip: the NULL DACL becomes an explicit one.
pub fn grant_entries(current: &Dacl, want: &AclEntry) -> Option<Vec<AclEntry>> {
    match current {
        Dacl::Null => Some(vec![
            AclEntry {
                mode: AclMode::Set,
                sid: Sid::everyone(),
                mask: FILE_ALL_ACCESS,
                inheritance: 0,
            },
            want.clone(),
        ]),
        Dacl::Entries(aces) => {
            let explicit: Vec<&Ace> = aces
                .iter()
                .filter(|a| a.flags & INHERITED == 0 && a.sid.as_ref() == Some(&want.sid))
                .collect();
            let exact = matches!(explicit.as_slice(), [only] if want.is_exactly(only));
            (!exact).then(|| vec![want.clone()])
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An ACL laid out as Win32 stores it.
    pub(crate) fn acl_bytes(aces: &[(u8, u8, u32, &Sid)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (t, f, m, sid) in aces {
            let sid = sid.to_bytes();
            let size = (8 + sid.len()) as u16;
            body.extend_from_slice(&[*t, *f]);
            body.extend_from_slice(&size.to_le_bytes());
            body.extend_from_slice(&m.to_le_bytes());
            body.extend_from_slice(&sid);
        }
        let mut out = vec![2, 0];
        out.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        out.extend_from_slice(&(aces.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend(body);
        out
    }

    fn ws() -> Sid {
        "S-1-4-1-2-3-4".parse().unwrap()
    }

    #[test]
    fn acl_bytes_parse_into_aces() {
        let user: Sid = "S-1-5-21-1-2-3-1001".parse().unwrap();
        let mut bytes = acl_bytes(&[
            (ACCESS_ALLOWED, SUBTREE | INHERITED, FILE_ALL_ACCESS, &user),
            (ACCESS_DENIED, 0, 0x2, &Sid::everyone()),
            (ACCESS_ALLOWED, SUBTREE, MODIFY, &ws()),
        ]);
        // Slack after AclSize (AclBytesFree) is ignored.
        bytes.extend_from_slice(&[0xAA; 12]);
        let aces = Dacl::parse(&bytes).unwrap();
        assert_eq!(aces.len(), 3);
        assert_eq!(aces[0].sid.as_ref(), Some(&user));
        assert_eq!(aces[0].flags, SUBTREE | INHERITED);
        assert_eq!(aces[1].ace_type, ACCESS_DENIED);
        assert_eq!(aces[2].mask, MODIFY);
        assert!(AclEntry::capability(ws()).is_exactly(&aces[2]));
    }

    #[test]
    fn unknown_ace_types_are_kept_without_a_sid() {
        let mut bytes = acl_bytes(&[(ACCESS_ALLOWED, 0, 1, &Sid::everyone())]);
        // An object ACE (type 5): header, mask, flags, GUID... (opaque here).
        let object_ace = [5u8, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&object_ace);
        let size = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&size.to_le_bytes());
        bytes[4] = 2;
        let aces = Dacl::parse(&bytes).unwrap();
        assert_eq!(aces[1].ace_type, 5);
        assert_eq!(aces[1].sid, None);
    }

    #[test]
    fn malformed_acls_are_rejected() {
        assert!(Dacl::parse(&[2, 0, 8]).is_err());
        let good = acl_bytes(&[(ACCESS_ALLOWED, 0, 1, &Sid::everyone())]);
        // AclSize beyond the buffer.
        let mut b = good.clone();
        b[2] = 200;
        assert!(Dacl::parse(&b).is_err());
        // More ACEs declared than present.
        let mut b = good.clone();
        b[4] = 2;
        assert!(Dacl::parse(&b).is_err());
        // An ACE whose SID runs past its AceSize.
        let mut b = good.clone();
        b[8 + 2] = 10;
        assert!(Dacl::parse(&b).is_err());
        // An ACE of size 0 would loop forever.
        let mut b = good;
        b[8 + 2] = 0;
        assert!(Dacl::parse(&b).is_err());
    }

    #[test]
    fn the_exact_ace_skips_the_grant() {
        let want = AclEntry::capability(ws());
        let exact = Ace {
            ace_type: ACCESS_ALLOWED,
            flags: SUBTREE,
            mask: MODIFY,
            sid: Some(ws()),
        };
        let user = Ace {
            ace_type: ACCESS_ALLOWED,
            flags: SUBTREE | INHERITED,
            mask: FILE_ALL_ACCESS,
            sid: Some("S-1-5-21-1-2-3-1001".parse().unwrap()),
        };
        assert_eq!(
            grant_entries(&Dacl::Entries(vec![user.clone(), exact.clone()]), &want),
            None
        );
        // Missing, or present in any other shape: (re)applied.
        let near_misses = [
            Ace {
                mask: FILE_ALL_ACCESS,
                ..exact.clone()
            },
            Ace {
                flags: CONTAINER_INHERIT,
                ..exact.clone()
            },
            Ace {
                flags: SUBTREE | INHERITED,
                ..exact.clone()
            },
            Ace {
                ace_type: ACCESS_DENIED,
                ..exact.clone()
            },
            Ace {
                sid: Some("S-1-4-1-2-3-5".parse().unwrap()),
                ..exact.clone()
            },
        ];
        for ace in near_misses {
            assert_eq!(
                grant_entries(&Dacl::Entries(vec![user.clone(), ace.clone()]), &want),
                Some(vec![want.clone()]),
                "{ace:?}"
            );
        }
        // The exact ACE plus a second explicit one for the same SID.
        let deny = Ace {
            ace_type: ACCESS_DENIED,
            flags: 0,
            mask: 2,
            ..exact.clone()
        };
        assert_eq!(
            grant_entries(&Dacl::Entries(vec![exact, deny]), &want),
            Some(vec![want.clone()])
        );
        assert_eq!(
            grant_entries(&Dacl::Entries(vec![]), &want),
            Some(vec![want])
        );
    }

    #[test]
    fn a_null_dacl_keeps_everyone_on_the_object_only() {
        let want = AclEntry::capability(ws());
        let entries = grant_entries(&Dacl::Null, &want).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].sid, Sid::everyone());
        assert_eq!(entries[0].mask, FILE_ALL_ACCESS);
        assert_eq!(entries[0].inheritance, 0, "must not widen descendants");
        assert_eq!(entries[1], want);
    }

    #[test]
    fn the_capability_mask_is_modify_without_dac_rights() {
        const WRITE_DAC: u32 = 0x0004_0000;
        const WRITE_OWNER: u32 = 0x0008_0000;
        assert_eq!(MODIFY & (WRITE_DAC | WRITE_OWNER), 0);
        // FILE_GENERIC_READ | FILE_GENERIC_WRITE | FILE_GENERIC_EXECUTE | DELETE
        assert_eq!(
            MODIFY,
            0x0012_0089 | 0x0012_0116 | 0x0012_00A0 | 0x0001_0000
        );
    }
}
