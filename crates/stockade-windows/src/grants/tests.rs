//! The grant lifecycle against the recording mock.

use super::*;
use crate::acl::{ACCESS_ALLOWED, Ace, Dacl, FILE_ALL_ACCESS, INHERITED, MODIFY, SUBTREE};
use crate::error::WinError;
use crate::mock::{Call, ERROR_ACCESS_DENIED, Mock, Op, TEMP_ROOT, WORKSPACE};

fn ws() -> &'static Path {
    Path::new(WORKSPACE)
}

fn ws_sid() -> Sid {
    sid::workspace_sid(ws()).unwrap()
}

fn exact_ws_ace() -> Ace {
    Ace {
        ace_type: ACCESS_ALLOWED,
        flags: SUBTREE,
        mask: MODIFY,
        sid: Some(ws_sid()),
    }
}

#[test]
fn a_workspace_that_is_or_contains_the_temp_root_touches_nothing() {
    for workspace in [
        TEMP_ROOT,
        r"C:\Users\dev\AppData\Local",
        r"C:\Users\dev",
        r"C:\",
        r"c:\users\DEV\appdata\local\temp",
    ] {
        let mock = Mock::new();
        mock.set_dacl(workspace, Dacl::Entries(vec![]));
        let err = allocate(&mock, Path::new(workspace)).unwrap_err();
        assert!(
            matches!(err, Error::WorkspaceContainsTempRoot { .. }),
            "{workspace}: {err}"
        );
        assert_eq!(mock.mutations(), [], "{workspace}");
        assert!(
            !mock
                .calls()
                .iter()
                .any(|c| matches!(c, Call::ReadDacl(_) | Call::Random)),
            "{workspace}: {:?}",
            mock.calls()
        );
    }
}

#[test]
fn a_workspace_inside_the_temp_root_beside_the_private_dirs_is_allowed() {
    let mock = Mock::new();
    let inside = format!(r"{TEMP_ROOT}\my-checkout");
    mock.set_dacl(&inside, Dacl::Entries(vec![]));
    let a = allocate(&mock, Path::new(&inside)).unwrap();
    assert!(!paths::same_or_within(&a.temp_dir, &a.workspace).unwrap());
    assert!(!paths::same_or_within(&a.workspace, &a.temp_dir).unwrap());
}

#[test]
fn overlap_with_the_private_temp_dir_is_refused_both_ways() {
    let temp = Path::new(r"C:\T\stockade-0011");
    let err = check_overlap(&[Path::new(r"C:\T")], temp).unwrap_err();
    assert!(matches!(
        err,
        Error::TempOverlap {
            overlap: Overlap::RootContainsTemp,
            ..
        }
    ));
    let err = check_overlap(&[temp], temp).unwrap_err();
    assert!(matches!(
        err,
        Error::TempOverlap {
            overlap: Overlap::RootContainsTemp,
            ..
        }
    ));
    let err = check_overlap(&[Path::new(r"c:\t\STOCKADE-0011\ws")], temp).unwrap_err();
    assert!(matches!(
        err,
        Error::TempOverlap {
            overlap: Overlap::TempContainsRoot,
            ..
        }
    ));
    check_overlap(&[Path::new(r"C:\T\stockade-00112")], temp).unwrap();
    check_overlap(
        &[Path::new(r"C:\w"), Path::new(r"D:\T\stockade-0011")],
        temp,
    )
    .unwrap();
}

#[test]
fn allocation_grants_standing_then_revocable_in_order() {
    let mock = Mock::new();
    let a = allocate(&mock, ws()).unwrap();
    assert_eq!(a.workspace, ws());
    assert_eq!(a.workspace_sid, ws_sid());
    // The temp root is reported in 8.3 form and canonicalized first.
    let name = format!("{TEMP_PREFIX}{}", "01".repeat(16));
    assert_eq!(a.temp_dir, PathBuf::from(format!(r"{TEMP_ROOT}\{name}")));
    assert_eq!(a.temp_sid, sid::temp_sid(&a.temp_dir).unwrap());
    assert_eq!(
        mock.calls(),
        [
            Call::TempRoot,
            Call::Canonicalize(PathBuf::from(crate::mock::RAW_TEMP_ROOT)),
            Call::Random,
            Call::ReadDacl(ws().into()),
            Call::ApplyAcl(ws().into(), vec![AclEntry::capability(ws_sid())]),
            Call::CreateDir(a.temp_dir.clone()),
            Call::ApplyAcl(
                a.temp_dir.clone(),
                vec![AclEntry::capability(a.temp_sid.clone())]
            ),
        ]
    );
    // The temp dir carries its own capability, never the workspace's.
    let temp_dacl = mock.dacl(a.temp_dir.to_str().unwrap()).unwrap();
    let Dacl::Entries(aces) = temp_dacl else {
        panic!("null dacl")
    };
    assert!(
        aces.iter()
            .any(|x| x.sid.as_ref() == Some(&a.temp_sid) && x.flags == SUBTREE)
    );
    assert!(!aces.iter().any(|x| x.sid.as_ref() == Some(&ws_sid())));
}

#[test]
fn the_exact_standing_ace_skips_re_propagation() {
    let mock = Mock::new();
    let user = Ace {
        ace_type: ACCESS_ALLOWED,
        flags: SUBTREE | INHERITED,
        mask: FILE_ALL_ACCESS,
        sid: Some(crate::mock::USER.parse().unwrap()),
    };
    mock.set_dacl(WORKSPACE, Dacl::Entries(vec![exact_ws_ace(), user]));
    assert_eq!(
        ensure_standing(&mock, ws(), &ws_sid()).unwrap(),
        Standing::AlreadyExact
    );
    assert_eq!(mock.mutations(), []);
    let a = allocate(&mock, ws()).unwrap();
    assert_eq!(
        mock.count(|c| matches!(c, Call::ApplyAcl(p, _) if p == ws())),
        0,
        "the standing ACE was re-applied"
    );
    release(&mock, &a).unwrap();
}

#[test]
fn a_standing_ace_of_another_shape_is_made_exact() {
    let mock = Mock::new();
    let stale = Ace {
        mask: FILE_ALL_ACCESS,
        ..exact_ws_ace()
    };
    mock.set_dacl(WORKSPACE, Dacl::Entries(vec![stale]));
    assert_eq!(
        ensure_standing(&mock, ws(), &ws_sid()).unwrap(),
        Standing::Applied
    );
    assert_eq!(
        mock.dacl(WORKSPACE),
        Some(Dacl::Entries(vec![exact_ws_ace()]))
    );
    // Now exact: a second provider skips.
    mock.clear_calls();
    assert_eq!(
        ensure_standing(&mock, ws(), &ws_sid()).unwrap(),
        Standing::AlreadyExact
    );
    assert_eq!(mock.mutations(), []);
}

#[test]
fn a_null_dacl_workspace_keeps_everyone_on_the_root() {
    let mock = Mock::new();
    mock.set_dacl(WORKSPACE, Dacl::Null);
    ensure_standing(&mock, ws(), &ws_sid()).unwrap();
    let Some(Dacl::Entries(aces)) = mock.dacl(WORKSPACE) else {
        panic!("still null")
    };
    assert!(aces.contains(&exact_ws_ace()));
    assert!(
        aces.iter()
            .any(|a| a.sid == Some(Sid::everyone()) && a.flags == 0)
    );
}

#[test]
fn release_revokes_then_removes_and_leaves_the_standing_ace() {
    let mock = Mock::new();
    let a = allocate(&mock, ws()).unwrap();
    mock.clear_calls();
    release(&mock, &a).unwrap();
    assert_eq!(
        mock.calls(),
        [
            Call::ApplyAcl(
                a.temp_dir.clone(),
                vec![AclEntry::revoke(a.temp_sid.clone())]
            ),
            Call::RemoveDirAll(a.temp_dir.clone()),
        ]
    );
    assert_eq!(mock.dirs_under(TEMP_ROOT), Vec::<PathBuf>::new());
    assert_eq!(mock.aces_for(&a.temp_sid), []);
    // Standing: still exactly there.
    assert_eq!(
        mock.aces_for(&ws_sid()),
        [(ws().to_path_buf(), exact_ws_ace())]
    );
}

#[test]
fn release_tries_removal_even_when_the_revoke_fails_and_reports_both() {
    let mock = Mock::new();
    let a = allocate(&mock, ws()).unwrap();
    // The third ApplyAcl is the revoke (workspace grant, temp grant, revoke).
    mock.fail(Op::ApplyAcl, 3, ERROR_ACCESS_DENIED);
    mock.fail(Op::RemoveDirAll, 1, 32);
    let err = release(&mock, &a).unwrap_err();
    assert_eq!(err.failures.len(), 2);
    assert_eq!(
        err.failures[0].win_error(),
        Some(WinError::new("SetNamedSecurityInfoW", 5))
    );
    assert_eq!(
        err.failures[1].win_error(),
        Some(WinError::new("RemoveDirectoryW", 32))
    );
    let text = err.to_string();
    assert!(text.contains("revoking the private temp ACE"), "{text}");
    assert!(
        text.contains("removing the private temp directory"),
        "{text}"
    );
}

/// Fail each step of an allocation in turn: the error names the API and the
/// code, and no private temp directory or temp ACE survives.
#[test]
fn a_failure_at_any_step_fails_closed_and_cleans_up() {
    let steps = [
        (Op::TempRoot, 1, Step::LocateTempRoot),
        (Op::Canonicalize, 1, Step::CanonicalizeTempRoot),
        (Op::Random, 1, Step::DrawTempName),
        (Op::ReadDacl, 1, Step::ReadWorkspaceDacl),
        (Op::ApplyAcl, 1, Step::GrantWorkspaceAce),
        (Op::CreateDir, 1, Step::CreateTempDir),
        (Op::ApplyAcl, 2, Step::GrantTempAce),
    ];
    for (op, nth, step) in steps {
        let mock = Mock::new();
        mock.fail(op, nth, 1234);
        let err = allocate(&mock, ws()).unwrap_err();
        match &err {
            Error::Win32 {
                step: got, source, ..
            } => {
                assert_eq!(*got, step, "{op:?}");
                assert_eq!(*source, WinError::new(op.api(), 1234), "{op:?}");
            }
            other => panic!("{op:?}: {other}"),
        }
        let text = err.to_string();
        assert!(text.contains(op.api()) && text.contains("1234"), "{text}");
        assert_eq!(mock.dirs_under(TEMP_ROOT), Vec::<PathBuf>::new(), "{op:?}");
        // No ACE for any temp SID anywhere: only the user's and (maybe) the
        // standing workspace one exist.
        let stray: Vec<_> = mock
            .state()
            .dirs
            .iter()
            .filter_map(|(d, dacl)| match dacl {
                Dacl::Entries(aces) => Some((d.clone(), aces.clone())),
                Dacl::Null => None,
            })
            .flat_map(|(d, aces)| aces.into_iter().map(move |a| (d.clone(), a)))
            .filter(|(_, a)| {
                a.sid
                    .as_ref()
                    .is_some_and(|s| s.authority() == 4 && *s != ws_sid())
            })
            .collect();
        assert_eq!(stray, [], "{op:?}");
        // Before the workspace grant nothing at all was mutated.
        if matches!(
            op,
            Op::TempRoot | Op::Canonicalize | Op::Random | Op::ReadDacl
        ) || (op == Op::ApplyAcl && nth == 1)
        {
            let mutated: Vec<Call> = mock
                .mutations()
                .into_iter()
                .filter(|c| !matches!(c, Call::ApplyAcl(p, _) if p == ws()))
                .collect();
            assert_eq!(mutated, [], "{op:?}");
        }
        // A temp grant failure removed the directory it had created.
        if op == Op::ApplyAcl && nth == 2 {
            assert_eq!(
                mock.count(|c| matches!(c, Call::RemoveDirAll(_))),
                1,
                "{:?}",
                mock.calls()
            );
        }
    }
}

#[test]
fn residue_at_a_drawn_name_is_skipped_never_reused() {
    let mock = Mock::new();
    // A crashed session's directory, with its (dead) temp ACE.
    let residue = PathBuf::from(format!(r"{TEMP_ROOT}\{TEMP_PREFIX}{}", "aa".repeat(16)));
    let residue_sid = sid::temp_sid(&residue).unwrap();
    mock.set_dacl(
        residue.to_str().unwrap(),
        Dacl::Entries(vec![Ace {
            ace_type: ACCESS_ALLOWED,
            flags: SUBTREE,
            mask: MODIFY,
            sid: Some(residue_sid.clone()),
        }]),
    );
    mock.push_random([0xaa; 16]);
    mock.push_random([0xbb; 16]);
    let a = allocate(&mock, ws()).unwrap();
    assert_ne!(a.temp_dir, residue);
    assert_ne!(a.temp_sid, residue_sid);
    assert!(a.temp_dir.to_str().unwrap().ends_with(&"bb".repeat(16)));
    // The residue was neither granted, revoked nor removed.
    assert!(!mock.calls().iter().any(|c| matches!(
        c,
        Call::ApplyAcl(p, _) | Call::RemoveDirAll(p) if *p == residue
    )));
    assert_eq!(mock.aces_for(&residue_sid).len(), 1);
    release(&mock, &a).unwrap();
    assert_eq!(mock.dirs_under(TEMP_ROOT), [residue]);
}

#[test]
fn endless_collisions_fail_closed_without_a_grant() {
    let mock = Mock::new();
    for _ in 0..NAME_ATTEMPTS {
        mock.push_random([0xcc; 16]);
    }
    let taken = format!(r"{TEMP_ROOT}\{TEMP_PREFIX}{}", "cc".repeat(16));
    mock.set_dacl(&taken, Dacl::Entries(vec![]));
    let err = allocate(&mock, ws()).unwrap_err();
    assert!(
        matches!(err, Error::TempNameExhausted { attempts, .. } if attempts == NAME_ATTEMPTS),
        "{err}"
    );
    assert_eq!(
        mock.count(|c| matches!(c, Call::ApplyAcl(p, _) if *p != ws())),
        0
    );
}

#[test]
fn sibling_allocations_share_the_workspace_sid_but_not_the_temp() {
    let mock = Mock::new();
    let a = allocate(&mock, ws()).unwrap();
    let b = allocate(&mock, ws()).unwrap();
    assert_eq!(a.workspace_sid, b.workspace_sid);
    assert_ne!(a.temp_dir, b.temp_dir);
    assert_ne!(a.temp_sid, b.temp_sid);
    // Neither temp dir carries the other's capability.
    for (x, y) in [(&a, &b), (&b, &a)] {
        let Some(Dacl::Entries(aces)) = mock.dacl(x.temp_dir.to_str().unwrap()) else {
            panic!()
        };
        assert!(!aces.iter().any(|e| e.sid.as_ref() == Some(&y.temp_sid)));
    }
    // Releasing one leaves the other intact.
    release(&mock, &a).unwrap();
    assert_eq!(
        mock.dirs_under(TEMP_ROOT),
        std::slice::from_ref(&b.temp_dir)
    );
    assert_eq!(mock.aces_for(&b.temp_sid).len(), 1);
}
