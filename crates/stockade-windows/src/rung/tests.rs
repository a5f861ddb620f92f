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
