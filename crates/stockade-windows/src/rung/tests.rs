//! The rung against the recording mock: argv, facts, lifetime of grants.

use std::sync::Arc;

use stockade_core::SandboxProvider;
use stockade_local::{LocalProvider, LocalSettings};

use super::*;
use crate::acl::Dacl;
use crate::mock::{Call, Mock, OTHER_WORKSPACE, Op, RUNNER, TEMP_ROOT, WORKSPACE};
use crate::sid::{self, Sid};

fn rung(mock: &Mock) -> WindowsRung<Mock> {
    WindowsRung::new(mock.clone(), Ok(PathBuf::from(RUNNER)))
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn ww(root: &str) -> SandboxPolicy {
    SandboxPolicy::new(ConfiningMode::WorkspaceWrite, root)
}

fn ro(root: &str) -> SandboxPolicy {
    SandboxPolicy::new(ConfiningMode::ReadOnly, root)
}

fn cmd() -> Vec<OsString> {
    os(&["bash", "-c", "echo hi > out.txt"])
}

fn ws_sid() -> Sid {
    sid::workspace_sid(Path::new(WORKSPACE)).unwrap()
}

#[test]
fn it_is_the_windows_restricted_token_rung() {
    let mock = Mock::new();
    let r = rung(&mock);
    assert_eq!(r.platform(), Platform::Windows);
    assert_eq!(r.backend(), "restricted-token");
}

#[test]
fn workspace_write_wraps_the_argv_in_the_runner_with_paired_sids() {
    let mock = Mock::new();
    let r = rung(&mock);
    let c = r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    let a = &r.live()[0];
    let temp = a.temp_dir.to_str().unwrap().to_owned();
    assert!(
        temp.starts_with(&format!(r"{TEMP_ROOT}\stockade-")),
        "{temp}"
    );
    assert_eq!(
        c.argv,
        os(&[
            RUNNER,
            "--mode",
            "workspace-write",
            "--workspace",
            WORKSPACE,
            "--workspace-sid",
            &ws_sid().to_string(),
            "--temp-dir",
            &temp,
            "--temp-sid",
            &sid::temp_sid(&a.temp_dir).unwrap().to_string(),
            "--",
            "bash",
            "-c",
            "echo hi > out.txt",
        ])
    );
    assert_eq!(c.backend, "restricted-token");
    assert_eq!(c.enforcement, Enforcement::Partial);
    assert_eq!(
        c.denial_signatures,
        ["Access to the path", "Access is denied"]
    );
    assert_eq!(c.runner_failure_rules, [runner::failure_rule()]);
    assert_eq!(
        c.writable_roots,
        [PathBuf::from(WORKSPACE), a.temp_dir.clone()]
    );
    // What the rung emits is exactly what the runner accepts.
    let parsed = RunnerArgs::parse(c.argv[1..].to_vec()).unwrap();
    assert_eq!(parsed, RunnerArgs::from_allocation(a, cmd()));
}

#[test]
fn the_workspace_is_canonicalized_before_derivation() {
    let mock = Mock::new();
    // A junction (or 8.3 name) reaching the workspace.
    mock.state().aliases.insert(
        PathBuf::from(r"C:\Users\DEV~1\proj"),
        PathBuf::from(format!(r"\\?\{WORKSPACE}")),
    );
    let r = rung(&mock);
    let a = r.confine(&cmd(), &ww(r"C:\Users\DEV~1\proj")).unwrap();
    let b = r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    assert_eq!(a.argv, b.argv, "one workspace, one allocation");
    assert_eq!(r.live().len(), 1);
    assert_eq!(r.live()[0].workspace_sid, ws_sid());
}

#[test]
fn read_only_allocates_nothing_and_touches_no_acl() {
    let mock = Mock::new();
    let r = rung(&mock);
    let c = r.confine(&cmd(), &ro(WORKSPACE)).unwrap();
    assert_eq!(
        c.argv,
        os(&[
            RUNNER,
            "--mode",
            "read-only",
            "--",
            "bash",
            "-c",
            "echo hi > out.txt"
        ])
    );
    assert_eq!(c.enforcement, Enforcement::Partial);
    assert_eq!(c.writable_roots, Vec::<PathBuf>::new());
    assert_eq!(mock.calls(), [Call::IsFile(RUNNER.into())]);
    assert!(r.live().is_empty());
}

#[test]
fn a_mode_downgrade_carries_no_capability() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    mock.clear_calls();
    let c = r.confine(&cmd(), &ro(WORKSPACE)).unwrap();
    // The standing ACE is still on the workspace, but no SID in the argv
    // (and so none in the token) can match it.
    assert_eq!(mock.aces_for(&ws_sid()).len(), 1);
    assert!(
        !c.argv
            .iter()
            .any(|a| a.to_str().is_some_and(|s| s.starts_with("S-1-"))),
        "{:?}",
        c.argv
    );
    assert_eq!(mock.mutations(), []);
}

#[test]
fn one_allocation_per_workspace_for_the_rung_lifetime() {
    let mock = Mock::new();
    let r = rung(&mock);
    let a = r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    let b = r.confine(&os(&["other"]), &ww(WORKSPACE)).unwrap();
    assert_eq!(a.argv[..12], b.argv[..12], "same temp dir and SIDs");
    assert_eq!(mock.count(|c| matches!(c, Call::Random)), 1);
    assert_eq!(mock.count(|c| matches!(c, Call::CreateDir(_))), 1);
    // Another workspace gets its own pair.
    let c = r.confine(&cmd(), &ww(OTHER_WORKSPACE)).unwrap();
    assert_ne!(c.argv[6], a.argv[6], "workspace SID");
    assert_ne!(c.argv[8], a.argv[8], "temp dir");
    assert_eq!(r.live().len(), 2);
}

#[test]
fn forks_share_the_workspace_sid_but_never_a_temp_capability() {
    let mock = Mock::new();
    let (a, b) = (rung(&mock), rung(&mock));
    let ca = a.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    let cb = b.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    assert_eq!(
        ca.argv[6], cb.argv[6],
        "the standing workspace SID is shared"
    );
    assert_ne!(ca.argv[8], cb.argv[8], "temp dirs differ");
    assert_ne!(ca.argv[10], cb.argv[10], "temp SIDs differ");
    // The second provider found the exact standing ACE and skipped it.
    assert_eq!(
        mock.count(|c| matches!(c, Call::ApplyAcl(p, _) if p == Path::new(WORKSPACE))),
        1
    );
    drop(a);
    assert_eq!(mock.dirs_under(TEMP_ROOT), [b.live()[0].temp_dir.clone()]);
}

#[test]
fn dropping_the_rung_revokes_and_removes_but_keeps_the_standing_ace() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    r.confine(&cmd(), &ww(OTHER_WORKSPACE)).unwrap();
    let live = r.live();
    mock.clear_calls();
    drop(r);
    let mut expected = Vec::new();
    for a in &live {
        expected.push(Call::ApplyAcl(
            a.temp_dir.clone(),
            vec![crate::acl::AclEntry::revoke(a.temp_sid.clone())],
        ));
        expected.push(Call::RemoveDirAll(a.temp_dir.clone()));
    }
    assert_eq!(mock.calls(), expected);
    assert_eq!(mock.dirs_under(TEMP_ROOT), Vec::<PathBuf>::new());
    for a in &live {
        assert_eq!(mock.aces_for(&a.temp_sid), []);
        assert_eq!(mock.aces_for(&a.workspace_sid).len(), 1, "standing");
    }
}

#[test]
fn release_is_idempotent_and_reports_failures() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    mock.fail(Op::RemoveDirAll, 1, 32);
    let err = r.release().unwrap_err();
    assert_eq!(err.failures.len(), 1);
    assert!(
        err.to_string()
            .contains("RemoveDirectoryW failed with Win32 error 32")
    );
    assert!(r.live().is_empty());
    mock.clear_calls();
    r.release().unwrap();
    drop(r);
    assert_eq!(mock.calls(), [], "nothing left to release twice");
}

#[test]
fn agentless_invocations_create_and_remove_the_same_shape_each_time() {
    let mock = Mock::new();
    let mut temps = Vec::new();
    for _ in 0..3 {
        let r = rung(&mock);
        r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
        temps.push(r.live()[0].temp_dir.clone());
        drop(r);
        assert_eq!(mock.dirs_under(TEMP_ROOT), Vec::<PathBuf>::new());
    }
    temps.dedup();
    assert_eq!(temps.len(), 3, "a fresh path per invocation");
    // The standing ACE was applied by the first invocation only.
    assert_eq!(
        mock.count(|c| matches!(c, Call::ApplyAcl(p, _) if p == Path::new(WORKSPACE))),
        1
    );
}

#[test]
fn crash_residue_is_inert_litter_for_a_resumed_session() {
    let mock = Mock::new();
    let crashed = rung(&mock);
    let before = crashed.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    let residue = crashed.live()[0].clone();
    // A crash: no drop, nothing released.
    std::mem::forget(crashed);
    mock.clear_calls();

    let resumed = rung(&mock);
    let after = resumed.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    assert_eq!(before.argv[6], after.argv[6], "same workspace SID");
    assert_ne!(before.argv[8], after.argv[8], "a new temp dir");
    assert_ne!(before.argv[10], after.argv[10], "a new temp SID");
    // The residue is neither reused nor touched, and still carries only its
    // own dead SID.
    assert!(!mock.calls().iter().any(|c| match c {
        Call::ApplyAcl(p, _) | Call::RemoveDirAll(p) | Call::CreateDir(p) => *p == residue.temp_dir,
        _ => false,
    }));
    drop(resumed);
    assert_eq!(
        mock.dirs_under(TEMP_ROOT),
        std::slice::from_ref(&residue.temp_dir)
    );
    assert_eq!(mock.aces_for(&residue.temp_sid).len(), 1);
}

#[test]
fn a_missing_runner_fails_closed_before_anything() {
    let mock = Mock::new();
    let r = WindowsRung::new(
        mock.clone(),
        Ok(PathBuf::from(r"C:\nope\stockade-winrun.exe")),
    );
    let err = r.confine(&cmd(), &ww(WORKSPACE)).unwrap_err();
    assert_eq!(err.attempts.len(), 1);
    assert_eq!(err.attempts[0].backend, "restricted-token");
    assert!(err.attempts[0].detail.contains("runner not found"), "{err}");
    assert_eq!(
        mock.calls(),
        [Call::IsFile(r"C:\nope\stockade-winrun.exe".into())]
    );
    let report = r.report();
    assert!(!report.usable);
    assert_eq!(report.enforcement, None);

    let r = WindowsRung::new(mock.clone(), Err("no current executable".into()));
    let err = r.confine(&cmd(), &ro(WORKSPACE)).unwrap_err();
    assert!(err.to_string().contains("no current executable"), "{err}");
}

#[test]
fn an_empty_argv_is_refused() {
    let mock = Mock::new();
    let err = rung(&mock).confine(&[], &ww(WORKSPACE)).unwrap_err();
    assert!(err.to_string().contains("no command"), "{err}");
    assert_eq!(mock.calls(), []);
}

#[test]
fn a_workspace_holding_the_temp_root_is_unavailable_and_untouched() {
    let mock = Mock::new();
    let profile = r"C:\Users\dev";
    mock.set_dacl(profile, Dacl::Entries(vec![]));
    let err = rung(&mock).confine(&cmd(), &ww(profile)).unwrap_err();
    assert_eq!(err.attempts[0].backend, "restricted-token");
    assert!(err.attempts[0].detail.contains("temp root"), "{err}");
    assert_eq!(mock.mutations(), []);
}

/// Every Win32 failure during confine is `SANDBOX_UNAVAILABLE` naming the
/// API and code, leaves no temp directory, and is not cached: the next call
/// tries again from scratch.
#[test]
fn every_failure_is_unavailable_with_the_api_and_code() {
    let steps = [
        (Op::Canonicalize, 1),
        (Op::TempRoot, 1),
        (Op::Canonicalize, 2),
        (Op::Random, 1),
        (Op::ReadDacl, 1),
        (Op::ApplyAcl, 1),
        (Op::CreateDir, 1),
        (Op::ApplyAcl, 2),
    ];
    for (op, nth) in steps {
        let mock = Mock::new();
        mock.fail(op, nth, 1450);
        let r = rung(&mock);
        let err = r.confine(&cmd(), &ww(WORKSPACE)).unwrap_err();
        assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
        assert_eq!(err.attempts[0].backend, "restricted-token");
        let detail = &err.attempts[0].detail;
        assert!(
            detail.contains(&format!("{} failed with Win32 error 1450", op.api())),
            "{op:?}: {detail}"
        );
        assert!(r.live().is_empty(), "{op:?}");
        assert_eq!(mock.dirs_under(TEMP_ROOT), Vec::<PathBuf>::new(), "{op:?}");
        r.confine(&cmd(), &ww(WORKSPACE))
            .unwrap_or_else(|e| panic!("{op:?}: retry failed: {e}"));
        assert_eq!(r.live().len(), 1);
    }
}

#[test]
fn the_report_is_a_sole_unprobed_partial_candidate() {
    let mock = Mock::new();
    let report = rung(&mock).report();
    assert_eq!(report.backend, "restricted-token");
    assert_eq!(report.runner, Some(PathBuf::from(RUNNER)));
    assert!(report.usable);
    assert_eq!(report.enforcement, Some(Enforcement::Partial));
    assert!(report.detail.contains("not probed"), "{}", report.detail);
    assert!(report.detail.contains("Everyone"), "{}", report.detail);
    assert!(report.detail.contains("hard link"), "{}", report.detail);
    assert_eq!(mock.mutations(), []);
}

#[test]
fn the_local_provider_delegates_to_the_mounted_rung_on_windows() {
    let mock = Mock::new();
    let provider = LocalProvider::with_host(
        LocalSettings::default(),
        Platform::Windows,
        stockade_local::default_host(),
    )
    .unwrap()
    .with_rung(Arc::new(rung(&mock)));
    let c = provider.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    assert_eq!(c.backend, "restricted-token");
    assert_eq!(c.argv[0], OsString::from(RUNNER));
    let report = provider.report();
    assert_eq!(report.platform, "windows");
    assert_eq!(report.auto_selects, Some("restricted-token"));

    // On another platform the rung is not consulted.
    let linux = LocalProvider::with_host(
        LocalSettings::default(),
        Platform::MacOs,
        stockade_local::default_host(),
    )
    .unwrap()
    .with_rung(Arc::new(rung(&Mock::new())));
    let c = linux.confine(&cmd(), &ww(WORKSPACE));
    assert!(c.map_or(true, |c| c.backend != "restricted-token"));
}

// ---- per-session temp ----------------------------------------------------

fn ww_in(root: &str, session: &str) -> SandboxPolicy {
    ww(root).with_session(Some(session.to_owned()))
}

/// Whether a token confined by `c` passes the restricting check for a write
/// to `dir`, as Windows evaluates it: some allow ACE on the object (its own
/// or inherited) names one of the token's restricting SIDs.
fn restricted_write_allowed(mock: &Mock, c: &Confined, dir: &Path) -> bool {
    let args = RunnerArgs::parse(c.argv[1..].to_vec()).unwrap();
    let logon: Sid = crate::mock::LOGON.parse().unwrap();
    let restricting = crate::token::restricting_sids(&logon, &args.token_mode());
    match mock.state().dirs.get(dir) {
        Some(Dacl::Entries(aces)) => aces.iter().any(|a| {
            a.ace_type == crate::acl::ACCESS_ALLOWED
                && a.sid.as_ref().is_some_and(|s| restricting.contains(s))
        }),
        Some(Dacl::Null) => true,
        None => panic!("no directory {}", dir.display()),
    }
}

fn temp_of(c: &Confined) -> PathBuf {
    RunnerArgs::parse(c.argv[1..].to_vec())
        .unwrap()
        .temp
        .unwrap()
        .0
}

#[test]
fn two_sessions_on_one_workspace_get_distinct_temp_dirs_and_sids() {
    let mock = Mock::new();
    let r = rung(&mock);
    let a = r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    let b = r.confine(&cmd(), &ww_in(WORKSPACE, "session-b")).unwrap();
    assert_eq!(a.argv[6], b.argv[6], "the standing workspace SID is shared");
    assert_ne!(a.argv[8], b.argv[8], "temp dirs differ");
    assert_ne!(a.argv[10], b.argv[10], "temp SIDs differ");
    assert_eq!(r.live_for(Some("session-a")).len(), 1);
    assert_eq!(r.live_for(Some("session-b")).len(), 1);
    assert_eq!(r.live_for(None), []);
    // The standing ACE was applied once; the second session skipped it.
    assert_eq!(
        mock.count(|c| matches!(c, Call::ApplyAcl(p, _) if p == Path::new(WORKSPACE))),
        1
    );
    // A session reuses its own pair on its next call (per workspace).
    let again = r
        .confine(&os(&["other"]), &ww_in(WORKSPACE, "session-a"))
        .unwrap();
    assert_eq!(a.argv[..12], again.argv[..12]);
    assert_eq!(mock.count(|c| matches!(c, Call::CreateDir(_))), 2);
    // ...and gets a pair of its own in another workspace.
    let other = r
        .confine(&cmd(), &ww_in(OTHER_WORKSPACE, "session-a"))
        .unwrap();
    assert_ne!(other.argv[8], a.argv[8]);
    assert_eq!(r.live_for(Some("session-a")).len(), 2);
}

#[test]
fn a_session_cannot_write_its_siblings_temp_tree() {
    let mock = Mock::new();
    let r = rung(&mock);
    let a = r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    let b = r.confine(&cmd(), &ww_in(WORKSPACE, "session-b")).unwrap();
    let (ta, tb) = (temp_of(&a), temp_of(&b));
    // A subdirectory made inside B's temp tree inherits only B's ACE.
    let nested = crate::paths::join(&tb, "nested");
    mock.create_dir(&nested).unwrap();
    assert!(restricted_write_allowed(&mock, &a, &ta));
    assert!(restricted_write_allowed(&mock, &b, &tb));
    assert!(restricted_write_allowed(&mock, &b, &nested));
    assert!(!restricted_write_allowed(&mock, &a, &tb), "A into B's temp");
    assert!(
        !restricted_write_allowed(&mock, &a, &nested),
        "A below B's temp"
    );
    assert!(!restricted_write_allowed(&mock, &b, &ta), "B into A's temp");
    // Both share the standing workspace capability.
    assert!(restricted_write_allowed(&mock, &a, Path::new(WORKSPACE)));
    assert!(restricted_write_allowed(&mock, &b, Path::new(WORKSPACE)));
}

#[test]
fn ending_a_session_revokes_and_removes_only_its_own() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    r.confine(&cmd(), &ww_in(OTHER_WORKSPACE, "session-a"))
        .unwrap();
    let b = r.confine(&cmd(), &ww_in(WORKSPACE, "session-b")).unwrap();
    let plain = r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    let ended = r.live_for(Some("session-a"));
    let kept_b = r.live_for(Some("session-b"));
    let kept_plain = r.live_for(None);
    mock.clear_calls();

    r.end_session("session-a").unwrap();

    // Revoked first (a grandchild that outlived its runner loses write
    // access at once), then removed; nothing else touched.
    let mut expected = Vec::new();
    for a in &ended {
        expected.push(Call::ApplyAcl(
            a.temp_dir.clone(),
            vec![crate::acl::AclEntry::revoke(a.temp_sid.clone())],
        ));
        expected.push(Call::RemoveDirAll(a.temp_dir.clone()));
    }
    assert_eq!(mock.calls(), expected);
    for a in &ended {
        assert_eq!(mock.aces_for(&a.temp_sid), []);
        assert_eq!(mock.aces_for(&a.workspace_sid).len(), 1, "standing");
    }
    assert_eq!(r.live_for(Some("session-a")), []);
    assert_eq!(r.live_for(Some("session-b")), kept_b);
    assert_eq!(r.live_for(None), kept_plain);
    let mut left = mock.dirs_under(TEMP_ROOT);
    left.sort();
    let mut want = vec![kept_b[0].temp_dir.clone(), kept_plain[0].temp_dir.clone()];
    want.sort();
    assert_eq!(left, want);

    // The other session keeps working, with the very same pair.
    mock.clear_calls();
    let b2 = r.confine(&cmd(), &ww_in(WORKSPACE, "session-b")).unwrap();
    assert_eq!(b.argv, b2.argv);
    assert_eq!(mock.mutations(), []);
    assert!(restricted_write_allowed(&mock, &b2, &temp_of(&b2)));
    let p2 = r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    assert_eq!(plain.argv, p2.argv);
}

#[test]
fn ending_a_session_is_idempotent_and_an_unknown_one_is_a_no_op() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    r.end_session("session-a").unwrap();
    mock.clear_calls();
    r.end_session("session-a").unwrap();
    r.end_session("never-seen").unwrap();
    assert_eq!(mock.calls(), [], "nothing left to end twice");
    // Read-only calls of a session allocate nothing, so there is nothing
    // to end either.
    r.confine(&cmd(), &ro(WORKSPACE).with_session(Some("ro".into())))
        .unwrap();
    mock.clear_calls();
    r.end_session("ro").unwrap();
    assert_eq!(mock.calls(), []);
}

#[test]
fn a_session_used_after_its_end_draws_a_fresh_pair() {
    let mock = Mock::new();
    let r = rung(&mock);
    let before = r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    r.end_session("session-a").unwrap();
    let after = r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    assert_ne!(before.argv[8], after.argv[8], "a new temp dir");
    assert_ne!(before.argv[10], after.argv[10], "a new temp SID");
    assert_eq!(r.live_for(Some("session-a")).len(), 1);
}

#[test]
fn ending_a_session_reports_cleanup_failures_and_forgets_it() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    r.confine(&cmd(), &ww_in(WORKSPACE, "session-b")).unwrap();
    let residue = r.live_for(Some("session-a"))[0].clone();
    mock.fail(Op::RemoveDirAll, 1, 32);
    let err = r.end_session("session-a").unwrap_err();
    assert_eq!(err.session, "session-a");
    assert_eq!(err.backend, "restricted-token");
    assert!(
        err.detail
            .contains("RemoveDirectoryW failed with Win32 error 32"),
        "{err}"
    );
    // Revoked even though the directory stayed: the residue is inert.
    assert_eq!(mock.aces_for(&residue.temp_sid), []);
    assert_eq!(r.live_for(Some("session-a")), []);
    assert_eq!(r.live_for(Some("session-b")).len(), 1);
    mock.clear_calls();
    r.end_session("session-a").unwrap();
    assert_eq!(mock.calls(), []);
}

#[test]
fn a_sessions_crash_residue_is_inert_for_its_resumption() {
    let mock = Mock::new();
    let crashed = rung(&mock);
    let before = crashed
        .confine(&cmd(), &ww_in(WORKSPACE, "session-a"))
        .unwrap();
    let residue = crashed.live_for(Some("session-a"))[0].clone();
    // A crash: neither the session's end nor the rung's drop ran.
    std::mem::forget(crashed);
    mock.clear_calls();

    // The same session resumed by a new process.
    let resumed = rung(&mock);
    let after = resumed
        .confine(&cmd(), &ww_in(WORKSPACE, "session-a"))
        .unwrap();
    assert_eq!(before.argv[6], after.argv[6], "same workspace SID");
    assert_ne!(before.argv[8], after.argv[8], "a new temp dir");
    assert_ne!(before.argv[10], after.argv[10], "a new temp SID");
    assert!(!restricted_write_allowed(&mock, &after, &residue.temp_dir));
    resumed.end_session("session-a").unwrap();
    // The residue was neither reused nor touched, and still carries only
    // its own dead SID.
    assert!(!mock.calls().iter().any(|c| match c {
        Call::ApplyAcl(p, _) | Call::RemoveDirAll(p) | Call::CreateDir(p) => *p == residue.temp_dir,
        _ => false,
    }));
    assert_eq!(
        mock.dirs_under(TEMP_ROOT),
        std::slice::from_ref(&residue.temp_dir)
    );
    assert_eq!(mock.aces_for(&residue.temp_sid).len(), 1);
}

#[test]
fn dropping_the_rung_ends_every_session_left() {
    let mock = Mock::new();
    let r = rung(&mock);
    r.confine(&cmd(), &ww_in(WORKSPACE, "session-a")).unwrap();
    r.confine(&cmd(), &ww_in(WORKSPACE, "session-b")).unwrap();
    r.confine(&cmd(), &ww(WORKSPACE)).unwrap();
    let live = r.live();
    assert_eq!(live.len(), 3);
    drop(r);
    assert_eq!(mock.dirs_under(TEMP_ROOT), Vec::<PathBuf>::new());
    for a in &live {
        assert_eq!(mock.aces_for(&a.temp_sid), []);
    }
}

#[test]
fn the_local_provider_ends_a_session_on_the_mounted_rung() {
    let mock = Mock::new();
    let r = Arc::new(rung(&mock));
    let provider = LocalProvider::with_host(
        LocalSettings::default(),
        Platform::Windows,
        stockade_local::default_host(),
    )
    .unwrap()
    .with_rung(r.clone());
    provider
        .confine(&cmd(), &ww_in(WORKSPACE, "session-a"))
        .unwrap();
    provider
        .confine(&cmd(), &ww_in(WORKSPACE, "session-b"))
        .unwrap();
    let dyn_provider: &dyn SandboxProvider = &provider;
    dyn_provider.end_session("session-a").unwrap();
    assert_eq!(r.live_for(Some("session-a")), []);
    assert_eq!(r.live_for(Some("session-b")).len(), 1);
    dyn_provider.end_session("session-a").unwrap();
}
