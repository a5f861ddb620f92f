//! The restricted token's shape per mode, in pure code.
//!
//! A WRITE_RESTRICTED token makes Windows run the access check twice for
//! write-class rights: once against the caller's normal SIDs, once against the
//! restricting SIDs below. Reads pass on the normal check alone, so reads keep
//! the caller's ambient access while a write must also match an ACE for one of
//! these SIDs.

use crate::acl::AclEntry;
use crate::sid::Sid;

/// `WRITE_RESTRICTED`: restricting SIDs apply to write access only.
pub const WRITE_RESTRICTED: u32 = 0x8;
/// `DISABLE_MAX_PRIVILEGE`: every privilege but SeChangeNotify is removed.
pub const DISABLE_MAX_PRIVILEGE: u32 = 0x1;
/// `LUA_TOKEN`: the limited-user (UAC-filtered) form even for an elevated
/// caller, so an administrator derives the same filtered token.
pub const LUA_TOKEN: u32 = 0x4;
/// The `CreateRestrictedToken` flags, always all three.
pub const RESTRICTED_TOKEN_FLAGS: u32 = WRITE_RESTRICTED | DISABLE_MAX_PRIVILEGE | LUA_TOKEN;

/// Which capabilities a confined child's token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenMode {
    /// No capability SID: no standing workspace ACE can authorize a write,
    /// which keeps a mode downgrade honest.
    ReadOnly,
    WorkspaceWrite {
        workspace: Sid,
        /// The private temp capability. Optional in the token shape (the
        /// default DACL then names the workspace SID); the rung always sets it.
        temp: Option<Sid>,
    },
}

/// The restricting SIDs.
///
/// The logon SID and Everyone are keep-alive invariants: without them early
/// DLL initialization dies with STATUS_DLL_INIT_FAILED (0xC0000142) on the
/// window station and desktop, and CNG crashes .NET hosts. Authenticated
/// Users is absent (its write grants include tree creation under `C:\` and
/// CIM), and so are INTERACTIVE and LOCAL (the Public profile tree grants
/// them write).
pub fn restricting_sids(logon: &Sid, mode: &TokenMode) -> Vec<Sid> {
    let mut sids = vec![logon.clone(), Sid::everyone()];
    if let TokenMode::WorkspaceWrite { workspace, temp } = mode {
        sids.push(workspace.clone());
        sids.extend(temp.iter().cloned());
    }
    sids
}

/// The SID new non-file objects (anonymous pipes, events, sections, the
/// child's own process and thread) are granted to besides the user and
/// SYSTEM. Under workspace-write it is the private temp SID, so objects a
/// session creates never carry the workspace capability a sibling session
/// shares; without a temp SID, the workspace SID; under read-only, Everyone
/// (the only restricting SID that can clear the second check there).
pub fn default_dacl_capability(mode: &TokenMode) -> Sid {
    match mode {
        TokenMode::ReadOnly => Sid::everyone(),
        TokenMode::WorkspaceWrite {
            temp: Some(temp), ..
        } => temp.clone(),
        TokenMode::WorkspaceWrite {
            workspace,
            temp: None,
        } => workspace.clone(),
    }
}

/// The token default DACL: the user passes the normal check, the capability
/// passes the restricting check, SYSTEM keeps the service side working.
pub fn default_dacl(user: &Sid, mode: &TokenMode) -> Vec<AclEntry> {
    vec![
        AclEntry::default_dacl(user.clone()),
        AclEntry::default_dacl(Sid::local_system()),
        AclEntry::default_dacl(default_dacl_capability(mode)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{AclMode, GENERIC_ALL};

    fn logon() -> Sid {
        "S-1-5-5-0-123456".parse().unwrap()
    }
    fn user() -> Sid {
        "S-1-5-21-1-2-3-1001".parse().unwrap()
    }
    fn ws() -> Sid {
        "S-1-4-1-2-3-4".parse().unwrap()
    }
    fn tmp() -> Sid {
        "S-1-4-5-6-7-8".parse().unwrap()
    }

    #[test]
    fn flags_are_write_restricted_max_privilege_lua() {
        assert_eq!(RESTRICTED_TOKEN_FLAGS, 0x8 | 0x1 | 0x4);
    }

    #[test]
    fn restricting_lists_per_mode() {
        assert_eq!(
            restricting_sids(&logon(), &TokenMode::ReadOnly),
            [logon(), Sid::everyone()]
        );
        let ww = TokenMode::WorkspaceWrite {
            workspace: ws(),
            temp: Some(tmp()),
        };
        assert_eq!(
            restricting_sids(&logon(), &ww),
            [logon(), Sid::everyone(), ws(), tmp()]
        );
        let no_temp = TokenMode::WorkspaceWrite {
            workspace: ws(),
            temp: None,
        };
        assert_eq!(
            restricting_sids(&logon(), &no_temp),
            [logon(), Sid::everyone(), ws()]
        );
        for mode in [TokenMode::ReadOnly, ww, no_temp] {
            let sids = restricting_sids(&logon(), &mode);
            for never in [Sid::authenticated_users(), Sid::interactive(), Sid::local()] {
                assert!(!sids.contains(&never), "{never} in {mode:?}");
            }
        }
    }

    #[test]
    fn default_dacl_names_temp_then_workspace_then_everyone() {
        let with_temp = TokenMode::WorkspaceWrite {
            workspace: ws(),
            temp: Some(tmp()),
        };
        let without = TokenMode::WorkspaceWrite {
            workspace: ws(),
            temp: None,
        };
        assert_eq!(default_dacl_capability(&with_temp), tmp());
        assert_eq!(default_dacl_capability(&without), ws());
        assert_eq!(
            default_dacl_capability(&TokenMode::ReadOnly),
            Sid::everyone()
        );

        let dacl = default_dacl(&user(), &with_temp);
        let sids: Vec<Sid> = dacl.iter().map(|e| e.sid.clone()).collect();
        assert_eq!(sids, [user(), Sid::local_system(), tmp()]);
        // The shared workspace capability never reaches new objects when a
        // temp SID exists.
        assert!(!sids.contains(&ws()));
        for e in &dacl {
            assert_eq!(
                (e.mode, e.mask, e.inheritance),
                (AclMode::Set, GENERIC_ALL, 0)
            );
        }
    }
}
