//! Chain selection, caching and fail-closed behaviour with injected verdicts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use stockade_core::{ConfiningMode, Enforcement, SandboxPolicy, SandboxProvider, StatusChannel};

use super::*;

#[derive(Default)]
struct FakeHost {
    runners: HashMap<Backend, PathBuf>,
    probe_ok: HashMap<Backend, bool>,
    abi: Option<u8>,
    probes: AtomicUsize,
    locates: AtomicUsize,
    probe_delay: Duration,
    key: Mutex<Vec<u8>>,
    /// `$TMPDIR` as set, and canonical (the existing `tmpdir()`).
    tmpdir_as_set: Option<PathBuf>,
    tmpdir: Option<PathBuf>,
    /// What `canonicalize` resolves; anything else does not resolve.
    canonical: HashMap<PathBuf, PathBuf>,
    files: Vec<PathBuf>,
    /// The Landlock launcher's supervisor can run.
    supervised: bool,
    /// bwrap loads filters from descriptors and reports in JSON.
    bwrap_direct: bool,
}

impl FakeHost {
    fn linux(bwrap_ok: bool, landlock_ok: bool, abi: Option<u8>) -> Self {
        let mut h = FakeHost {
            abi,
            key: Mutex::new(b"boot-1".to_vec()),
            ..Default::default()
        };
        h.runners.insert(Backend::Bwrap, "/usr/bin/bwrap".into());
        h.runners
            .insert(Backend::Landlock, "/opt/stockade/landlock-run".into());
        h.probe_ok.insert(Backend::Bwrap, bwrap_ok);
        h.probe_ok.insert(Backend::Landlock, landlock_ok);
        h
    }

    /// A macOS host: `/tmp` and `$TMPDIR` are symlinked under `/private`,
    /// `/usr/bin/sandbox-exec` exists, and no Linux runner can be found.
    fn macos() -> Self {
        let mut h = FakeHost {
            tmpdir_as_set: Some("/var/folders/xy/abc/T/".into()),
            tmpdir: Some("/private/var/folders/xy/abc/T".into()),
            files: vec!["/usr/bin/sandbox-exec".into()],
            ..Default::default()
        };
        h.canonical.insert("/tmp".into(), "/private/tmp".into());
        h.canonical.insert(
            "/var/folders/xy/abc/T/".into(),
            "/private/var/folders/xy/abc/T".into(),
        );
        h.canonical
            .insert("/Users/me/ws-link".into(), "/Users/me/ws".into());
        h
    }
}

impl Host for FakeHost {
    fn locate(&self, backend: Backend, _: &LocalSettings) -> Result<PathBuf, String> {
        self.locates.fetch_add(1, Ordering::SeqCst);
        self.runners
            .get(&backend)
            .cloned()
            .ok_or_else(|| format!("{backend} not found on PATH"))
    }
    fn landlock_abi(&self) -> Option<u8> {
        self.abi
    }
    fn bwrap_runs_direct(&self, _: &Located) -> bool {
        self.bwrap_direct
    }
    fn landlock_supervision(&self) -> Result<(), String> {
        if self.supervised {
            Ok(())
        } else {
            Err("no seccomp user notification".into())
        }
    }
    fn probe(
        &self,
        backend: Backend,
        _: &Path,
        _: Option<&Path>,
        _: Duration,
    ) -> Result<(), String> {
        self.probes.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.probe_delay);
        if self.probe_ok.get(&backend).copied().unwrap_or(false) {
            Ok(())
        } else {
            Err("a write outside the writable set was not denied".into())
        }
    }
    fn tmpdir(&self) -> Option<PathBuf> {
        self.tmpdir.clone()
    }
    fn verdict_key(&self, _: &[(Backend, Option<&Located>)]) -> Option<Vec<u8>> {
        Some(self.key.lock().unwrap().clone())
    }
    fn tmpdir_as_set(&self) -> Option<PathBuf> {
        self.tmpdir_as_set.clone()
    }
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        self.canonical.get(path).cloned()
    }
    fn is_file(&self, path: &Path) -> bool {
        self.files.iter().any(|f| f == path)
    }
}

fn provider(
    host: FakeHost,
    settings: LocalSettings,
    platform: Platform,
) -> (LocalProvider, Arc<FakeHost>) {
    let host = Arc::new(host);
    // The host's /tmp is not a root here: these tests keep their verdict
    // caches and fake runners in temp dirs.
    let p = LocalProvider::with_host(settings, platform, host.clone())
        .unwrap()
        .with_pins(Arc::new(stockade_roots::RootPins::without_temp_roots()));
    (p, host)
}

fn ro() -> SandboxPolicy {
    SandboxPolicy::new(ConfiningMode::ReadOnly, "/nonexistent-ws")
}

fn argv() -> Vec<OsString> {
    vec!["bash".into(), "-c".into(), "true".into()]
}

#[test]
fn auto_takes_bwrap_when_its_probe_passes() {
    let (p, h) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let c = p.confine(&argv(), &ro()).unwrap();
    assert_eq!(c.backend, "bwrap");
    assert_eq!(c.argv[0], "/usr/bin/bwrap");
    assert_eq!(c.enforcement, Enforcement::Full);
    assert_eq!(c.denial_signatures, ["Read-only file system"]);
    assert_eq!(&c.argv[c.argv.len() - 3..], argv().as_slice());
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);
}

#[test]
fn auto_falls_to_landlock_and_reports_partial_below_abi_3() {
    for (abi, enforcement) in [
        (Some(2), Enforcement::Partial),
        (Some(3), Enforcement::Full),
        (Some(7), Enforcement::Full),
    ] {
        let (p, _) = provider(
            FakeHost::linux(false, true, abi),
            LocalSettings::default(),
            Platform::Linux,
        );
        let c = p.confine(&argv(), &ro()).unwrap();
        assert_eq!(c.backend, "landlock");
        assert_eq!(c.argv[0], "/opt/stockade/landlock-run");
        assert_eq!(c.enforcement, enforcement, "abi {abi:?}");
        assert_eq!(c.denial_signatures, ["Permission denied"]);
    }
}

#[test]
fn no_usable_backend_fails_closed_with_every_attempt() {
    let (p, _) = provider(
        FakeHost::linux(false, true, None),
        LocalSettings::default(),
        Platform::Linux,
    );
    let e = p.confine(&argv(), &ro()).unwrap_err();
    assert_eq!(e.code(), "SANDBOX_UNAVAILABLE");
    assert_eq!(
        e.to_string(),
        "sandbox unavailable: bwrap: probe failed: a write outside the writable set was not denied; \
         landlock: the kernel does not support Landlock (or it is disabled)"
    );
    let mut h = FakeHost::linux(false, false, Some(7));
    h.runners.remove(&Backend::Bwrap);
    let (p, _) = provider(h, LocalSettings::default(), Platform::Linux);
    let e = p.confine(&argv(), &ro()).unwrap_err();
    assert_eq!(e.attempts.len(), 2);
    assert_eq!(e.attempts[0].detail, "bwrap not found on PATH");
    assert!(e.attempts[1].detail.starts_with("probe failed"));
}

#[test]
fn the_verdict_is_cached_for_the_providers_lifetime() {
    let (p, h) = provider(
        FakeHost::linux(false, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    for _ in 0..5 {
        p.confine(&argv(), &ro()).unwrap();
    }
    // bwrap's probe failed once, landlock's passed once; never again.
    assert_eq!(h.probes.load(Ordering::SeqCst), 2);
    // A failed selection is cached too: it stays closed, it does not flap.
    let (p, h) = provider(
        FakeHost::linux(false, false, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    assert!(p.confine(&argv(), &ro()).is_err());
    assert!(p.confine(&argv(), &ro()).is_err());
    assert_eq!(h.probes.load(Ordering::SeqCst), 2);
}

#[test]
fn concurrent_first_calls_probe_once() {
    let mut host = FakeHost::linux(true, true, Some(7));
    host.probe_delay = Duration::from_millis(50);
    let (p, h) = provider(host, LocalSettings::default(), Platform::Linux);
    let p = Arc::new(p);
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (p, b) = (p.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                p.confine(&argv(), &ro()).unwrap().backend
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), "bwrap");
    }
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);
}

#[test]
fn explicit_backends_are_sole_candidates_and_not_probed() {
    let s = LocalSettings {
        backend: BackendPreference::Landlock,
        ..Default::default()
    };
    let (p, h) = provider(FakeHost::linux(true, false, Some(4)), s, Platform::Linux);
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "landlock");
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);

    let s = LocalSettings {
        backend: BackendPreference::Bwrap,
        ..Default::default()
    };
    let mut host = FakeHost::linux(false, true, Some(7));
    host.runners.remove(&Backend::Bwrap);
    let (p, h) = provider(host, s, Platform::Linux);
    let e = p.confine(&argv(), &ro()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "sandbox unavailable: bwrap: bwrap not found on PATH"
    );
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);

    // An explicit landlock on a kernel without Landlock fails closed up front.
    let s = LocalSettings {
        backend: BackendPreference::Landlock,
        ..Default::default()
    };
    let (p, _) = provider(FakeHost::linux(true, true, None), s, Platform::Linux);
    assert!(p.confine(&argv(), &ro()).is_err());
}

#[test]
fn other_platform_chains_fail_closed() {
    for (platform, backend) in [
        (Platform::Windows, "restricted-token"),
        (Platform::Other("freebsd"), "none"),
    ] {
        for pref in [
            BackendPreference::Auto,
            BackendPreference::Bwrap,
            BackendPreference::Landlock,
        ] {
            let s = LocalSettings {
                backend: pref,
                ..Default::default()
            };
            let (p, h) = provider(FakeHost::linux(true, true, Some(7)), s, platform);
            let e = p.confine(&argv(), &ro()).unwrap_err();
            assert_eq!(e.code(), "SANDBOX_UNAVAILABLE");
            assert_eq!(e.attempts[0].backend, backend);
            assert_eq!(h.probes.load(Ordering::SeqCst), 0);
            let r = p.report();
            assert_eq!(r.auto_selects, None);
            assert!(r.backends.iter().all(|b| !b.usable));
        }
    }
}

#[test]
fn runner_command_skips_chain_and_probes() {
    let rc = RunnerCommand::new(
        vec!["/opt/fake-runner".into(), "--flag".into()],
        vec!["fake: fatal".into()],
    )
    .unwrap();
    let s = LocalSettings {
        runner_command: Some(rc),
        ..Default::default()
    };
    let (p, h) = provider(FakeHost::linux(false, false, None), s, Platform::Linux);
    let ws = tempfile::tempdir().unwrap();
    let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws.path());
    let c = p.confine(&argv(), &policy).unwrap();
    assert_eq!(c.backend, "runner-command");
    assert_eq!(c.argv[0], "/opt/fake-runner");
    assert_eq!(c.argv[1], "--flag");
    // bwrap's arguments, the workspace bound from a held descriptor.
    assert_eq!(c.argv[2], "--ro-bind");
    assert!(c.argv.iter().any(|a| a == "--bind-fd"));
    assert!(!c.pass_fds.is_empty());
    assert_eq!(c.status, None);
    assert_eq!(&c.argv[c.argv.len() - 4..], {
        let mut t: Vec<OsString> = vec!["--".into()];
        t.extend(argv());
        t
    });
    assert_eq!(
        c.runner_failure_rules,
        profile::signature_rules(&["fake: fatal".into()])
    );
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);
}

#[test]
fn policy_rides_each_call() {
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let a = p.confine(&argv(), &ro()).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let b = p
        .confine(
            &argv(),
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws.path()),
        )
        .unwrap();
    assert!(!a.argv.iter().any(|x| x == "--bind-fd"));
    assert!(a.pass_fds.is_empty());
    assert!(b.argv.iter().any(|x| x == "--bind-fd"));
}

#[test]
fn auto_verdict_is_kept_between_providers_and_rekeyed() {
    let dir = tempfile::tempdir().unwrap();
    let settings = LocalSettings {
        verdict_cache_dirs: vec![dir.path().to_path_buf()],
        ..Default::default()
    };
    let (p, h) = provider(
        FakeHost::linux(false, true, Some(7)),
        settings.clone(),
        Platform::Linux,
    );
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "landlock");
    assert_eq!(h.probes.load(Ordering::SeqCst), 2);

    // A second process with the same key does not probe at all.
    let (p, h) = provider(
        FakeHost::linux(false, true, Some(7)),
        settings.clone(),
        Platform::Linux,
    );
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "landlock");
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);

    // A new boot (or runner, or user) re-probes.
    let host = FakeHost::linux(true, true, Some(7));
    *host.key.lock().unwrap() = b"boot-2".to_vec();
    let (p, h) = provider(host, settings.clone(), Platform::Linux);
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "bwrap");
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);

    // A cached backend whose runner vanished is not trusted: probe again.
    let mut host = FakeHost::linux(false, true, Some(7));
    host.runners.remove(&Backend::Bwrap);
    *host.key.lock().unwrap() = b"boot-2".to_vec();
    let (p, h) = provider(host, settings.clone(), Platform::Linux);
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "landlock");
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);

    // forget_verdict makes the next process probe.
    p.forget_verdict();
    let mut host = FakeHost::linux(false, true, Some(7));
    host.runners.remove(&Backend::Bwrap);
    *host.key.lock().unwrap() = b"boot-2".to_vec();
    let (p, h) = provider(host, settings, Platform::Linux);
    p.confine(&argv(), &ro()).unwrap();
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);
}

#[test]
fn report_lists_every_backend_and_the_auto_choice() {
    let (p, _) = provider(
        FakeHost::linux(false, true, Some(2)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let r = p.report();
    assert_eq!(r.platform, "linux");
    assert_eq!(r.auto_selects, Some("landlock"));
    assert_eq!(r.backends.len(), 2);
    assert!(!r.backends[0].usable);
    assert!(r.backends[1].usable);
    assert_eq!(r.backends[1].enforcement, Some(Enforcement::Partial));
    assert_eq!(r.backends[1].landlock_abi, Some(2));
}

/// `probe` says who starts the command inside bwrap, as the runs decide.
#[test]
fn probe_says_who_starts_the_command_inside_bwrap() {
    let runner = |direct: bool, abi: Option<u8>| {
        let mut h = FakeHost::linux(true, true, abi);
        h.bwrap_direct = direct;
        let (p, _) = provider(h, LocalSettings::default(), Platform::Linux);
        let r = p.report();
        let bwrap = r.backends.iter().find(|b| b.backend == "bwrap").unwrap();
        let landlock = r.backends.iter().find(|b| b.backend == "landlock").unwrap();
        assert!(
            !landlock
                .protections
                .iter()
                .any(|p| p.name == "command-runner")
        );
        bwrap
            .protections
            .iter()
            .find(|p| p.name == "command-runner")
            .unwrap()
            .state
            .clone()
    };
    assert!(runner(true, Some(7)).starts_with("under deny and allow-listed bwrap itself"));
    assert!(runner(false, Some(7)).contains("bwrap 0.6"));
    assert!(runner(true, Some(9)).contains("by path"));
}

struct FakeRung;

impl Rung for FakeRung {
    fn backend(&self) -> &'static str {
        "restricted-token"
    }
    fn confine(
        &self,
        argv: &[OsString],
        _: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let mut out: Vec<OsString> = vec!["winrun".into()];
        out.extend(argv.iter().cloned());
        Ok(Confined::new(out, "restricted-token", Enforcement::Partial))
    }
}

impl PlatformRung for FakeRung {
    fn platform(&self) -> Platform {
        Platform::Windows
    }
    fn report(&self) -> BackendReport {
        BackendReport {
            backend: "restricted-token".into(),
            runner: None,
            usable: true,
            detail: "fake".into(),
            enforcement: Some(Enforcement::Partial),
            landlock_abi: None,
            protections: vec![],
            gaps: vec![],
        }
    }
}

#[test]
fn a_mounted_rung_serves_only_its_platform() {
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Windows,
    );
    let p = p.with_rung(Arc::new(FakeRung));
    let c = p.confine(&argv(), &ro()).unwrap();
    assert_eq!(c.argv[0], "winrun");
    assert_eq!(c.enforcement, Enforcement::Partial);
    assert_eq!(p.report().auto_selects, Some("restricted-token"));

    // The same rung mounted on Linux changes nothing there.
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let p = p.with_rung(Arc::new(FakeRung));
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "bwrap");
}

/// Records the sessions it is told are over; confines as [`FakeRung`].
#[derive(Default)]
struct EndingRung(Mutex<Vec<String>>);

impl Rung for EndingRung {
    fn backend(&self) -> &'static str {
        "restricted-token"
    }
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        FakeRung.confine(argv, policy)
    }
}

impl PlatformRung for EndingRung {
    fn platform(&self) -> Platform {
        Platform::Windows
    }
    fn report(&self) -> BackendReport {
        FakeRung.report()
    }
    fn end_session(&self, session: &str) -> Result<(), stockade_core::SessionEndError> {
        self.0.lock().unwrap().push(session.to_owned());
        Ok(())
    }
}

#[test]
fn ending_a_session_reaches_the_mounted_rung_of_this_platform_only() {
    let rung = Arc::new(EndingRung::default());
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Windows,
    );
    let p = p.with_rung(rung.clone());
    p.end_session("s-1").unwrap();
    p.end_session("s-1").unwrap();
    assert_eq!(*rung.0.lock().unwrap(), ["s-1", "s-1"]);

    // Elsewhere the rung is not consulted, and the Unix backends hold
    // nothing per session: ending one is a no-op.
    let idle = Arc::new(EndingRung::default());
    let (p, h) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let p = p.with_rung(idle.clone());
    p.end_session("s-1").unwrap();
    assert!(idle.0.lock().unwrap().is_empty());
    assert_eq!(h.probes.load(Ordering::SeqCst), 0, "nothing was selected");
}

fn ww(root: &str) -> SandboxPolicy {
    SandboxPolicy::new(ConfiningMode::WorkspaceWrite, root)
}

fn strs(v: &[OsString]) -> Vec<&str> {
    v.iter().map(|s| s.to_str().unwrap()).collect()
}

#[test]
fn macos_runs_the_pinned_sandbox_exec_without_a_probe() {
    let (p, h) = provider(FakeHost::macos(), LocalSettings::default(), Platform::MacOs);
    let c = p.confine(&argv(), &ro()).unwrap();
    assert_eq!(c.backend, "seatbelt");
    assert_eq!(c.enforcement, Enforcement::Full);
    assert_eq!(c.denial_signatures, ["Operation not permitted"]);
    assert_eq!(c.runner_failure_rules, seatbelt::seatbelt_rules());
    assert_eq!(
        strs(&c.argv),
        [
            "/usr/bin/sandbox-exec",
            "-p",
            seatbelt::READ_ONLY_PROFILE,
            "--",
            "bash",
            "-c",
            "true"
        ]
    );
    let c = p.confine(&argv(), &ww("/Users/me/ws-link")).unwrap();
    assert_eq!(
        strs(&c.argv),
        [
            "/usr/bin/sandbox-exec",
            "-p",
            seatbelt::WORKSPACE_WRITE_PROFILE,
            "-D",
            "WORKSPACE_ROOT=/Users/me/ws-link",
            "-D",
            "WORKSPACE_ROOT_CANONICAL=/Users/me/ws",
            "-D",
            "TMP=/tmp",
            "-D",
            "TMP_CANONICAL=/private/tmp",
            "-D",
            "TMPDIR=/var/folders/xy/abc/T",
            "-D",
            "TMPDIR_CANONICAL=/private/var/folders/xy/abc/T",
            "--",
            "bash",
            "-c",
            "true"
        ]
    );
    let sel = p.selected().unwrap();
    assert_eq!(sel.backend, SelectedBackend::Seatbelt);
    assert_eq!(sel.runner, Path::new("/usr/bin/sandbox-exec"));
    assert_eq!(sel.enforcement, Enforcement::Full);
    assert_eq!(sel.landlock_abi, None);
    // Nothing was probed, and nothing was looked up (on PATH or elsewhere).
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);
    assert_eq!(h.locates.load(Ordering::SeqCst), 0);
}

#[test]
fn macos_selects_seatbelt_even_when_the_runner_is_missing() {
    // No probe means no existence check either: a missing sandbox-exec is a
    // spawn failure attributable to argv[0], never an unconfined run.
    let mut host = FakeHost::macos();
    host.files.clear();
    // Even a Linux runner that happens to be found and would pass its probe
    // is not consulted.
    host.runners.insert(Backend::Bwrap, "/usr/bin/bwrap".into());
    host.probe_ok.insert(Backend::Bwrap, true);
    let (p, h) = provider(host, LocalSettings::default(), Platform::MacOs);
    let c = p.confine(&argv(), &ro()).unwrap();
    assert_eq!(c.argv[0], "/usr/bin/sandbox-exec");
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);
    assert_eq!(h.locates.load(Ordering::SeqCst), 0);
}

#[test]
fn macos_refuses_linux_backends_by_name() {
    for (pref, name) in [
        (BackendPreference::Bwrap, "bwrap"),
        (BackendPreference::Landlock, "landlock"),
    ] {
        let s = LocalSettings {
            backend: pref,
            ..Default::default()
        };
        let (p, h) = provider(FakeHost::macos(), s, Platform::MacOs);
        let e = p.confine(&argv(), &ro()).unwrap_err();
        assert_eq!(e.code(), "SANDBOX_UNAVAILABLE");
        assert_eq!(
            e.to_string(),
            format!(
                "sandbox unavailable: {name}: {name} is a Linux backend; the macOS chain is seatbelt alone (use auto)"
            )
        );
        assert_eq!(h.probes.load(Ordering::SeqCst), 0);
        assert_eq!(h.locates.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn macos_tmpdir_of_root_does_not_widen_workspace_write() {
    let mut host = FakeHost::macos();
    host.tmpdir_as_set = Some("/".into());
    host.tmpdir = Some("/".into());
    let (p, _) = provider(host, LocalSettings::default(), Platform::MacOs);
    let c = p.confine(&argv(), &ww("/Users/me/ws")).unwrap();
    let d: Vec<&str> = strs(&c.argv)
        .windows(2)
        .filter(|w| w[0] == "-D")
        .map(|w| w[1])
        .collect();
    assert_eq!(
        d,
        [
            "WORKSPACE_ROOT=/Users/me/ws",
            "WORKSPACE_ROOT_CANONICAL=/Users/me/ws",
            "TMP=/tmp",
            "TMP_CANONICAL=/private/tmp",
            "TMPDIR=/tmp",
            "TMPDIR_CANONICAL=/private/tmp",
        ]
    );
}

#[test]
fn macos_workspace_without_an_absolute_spelling_fails_closed() {
    let (p, _) = provider(FakeHost::macos(), LocalSettings::default(), Platform::MacOs);
    let e = p.confine(&argv(), &ww("")).unwrap_err();
    assert_eq!(e.attempts[0].backend, "seatbelt");
    assert!(e.attempts[0].detail.contains("not an absolute path"), "{e}");
}

#[test]
fn macos_runner_command_still_overrides() {
    let rc =
        RunnerCommand::new(vec!["/opt/fake-runner".into()], vec!["fake: fatal".into()]).unwrap();
    let s = LocalSettings {
        runner_command: Some(rc),
        ..Default::default()
    };
    let (p, h) = provider(FakeHost::macos(), s, Platform::MacOs);
    let c = p.confine(&argv(), &ro()).unwrap();
    assert_eq!(c.backend, "runner-command");
    assert_eq!(c.argv[0], "/opt/fake-runner");
    assert_eq!(c.argv[1], "--ro-bind");
    assert!(!c.argv.iter().any(|a| a == "--bind-fd"));
    assert!(c.argv.ends_with(&argv()));
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);
}

#[test]
fn macos_report_has_one_seatbelt_line() {
    let (p, h) = provider(FakeHost::macos(), LocalSettings::default(), Platform::MacOs);
    let r = p.report();
    assert_eq!(r.platform, "macos");
    assert_eq!(r.auto_selects, Some("seatbelt"));
    assert_eq!(
        r.backends,
        [BackendReport {
            backend: "seatbelt".into(),
            runner: Some("/usr/bin/sandbox-exec".into()),
            usable: true,
            detail: "selected without a probe (the macOS chain's sole candidate); \
                     /usr/bin/sandbox-exec is present"
                .into(),
            enforcement: Some(Enforcement::Full),
            landlock_abi: None,
            protections: vec![],
            gaps: vec![],
        }]
    );
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);

    let mut host = FakeHost::macos();
    host.files.clear();
    let (p, h) = provider(host, LocalSettings::default(), Platform::MacOs);
    let r = p.report();
    assert_eq!(r.auto_selects, None);
    assert_eq!(r.backends.len(), 1);
    assert!(!r.backends[0].usable);
    assert_eq!(r.backends[0].enforcement, None);
    assert!(
        r.backends[0].detail.contains("missing"),
        "{}",
        r.backends[0].detail
    );
    assert_eq!(h.probes.load(Ordering::SeqCst), 0);
}

#[test]
fn a_windows_rung_does_not_serve_macos() {
    let (p, _) = provider(FakeHost::macos(), LocalSettings::default(), Platform::MacOs);
    let p = p.with_rung(Arc::new(FakeRung));
    assert_eq!(p.confine(&argv(), &ro()).unwrap().backend, "seatbelt");
    assert_eq!(p.report().auto_selects, Some("seatbelt"));
}

#[test]
fn bwrap_runs_the_fd_closer_inside_and_needs_it() {
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let c = p.confine(&argv(), &ro()).unwrap();
    // The loader's variables (cargo sets LD_LIBRARY_PATH) ride --setenv.
    let mut args: Vec<&str> = Vec::new();
    let mut it = c.argv.iter().map(|a| a.to_str().unwrap());
    while let Some(a) = it.next() {
        if a == "--setenv" {
            assert!(it.next().unwrap().starts_with("LD_"));
        } else {
            args.push(a);
        }
    }
    let tail = &args[args.len() - 9..];
    assert_eq!(
        tail,
        [
            "--",
            "/opt/stockade/landlock-run",
            "--close-fds",
            "--status-fd",
            "3",
            "--",
            "bash",
            "-c",
            "true"
        ]
    );
    assert_eq!(c.writable_roots, [PathBuf::from("/dev/null")]);

    // No launcher: bwrap would leak inherited descriptors, so it is refused.
    let mut host = FakeHost::linux(true, true, Some(7));
    host.runners.remove(&Backend::Landlock);
    let s = LocalSettings {
        backend: BackendPreference::Bwrap,
        ..Default::default()
    };
    let (p, _) = provider(host, s, Platform::Linux);
    let e = p.confine(&argv(), &ro()).unwrap_err();
    assert!(
        e.attempts[0].detail.contains("close inherited descriptors"),
        "{e}"
    );
}

/// bwrap runs the command itself only where that confines as much as its
/// closer: under deny (and allow-listed, below), without `--allow-socket`, below Landlock ABI 9, with
/// a bwrap that loads filters; the closer's argv stays beside it for
/// terminal and piped runs.
#[cfg(target_os = "linux")]
#[test]
fn bwrap_runs_the_command_itself_only_where_it_confines_as_much() {
    use std::io::Read as _;
    use stockade_core::{NetworkMode, NetworkPolicy};
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    let deny = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws)
        .with_network(NetworkPolicy::new(NetworkMode::Deny, vec![]));
    let host = |direct: bool, abi: Option<u8>| {
        let mut h = FakeHost::linux(true, true, abi);
        h.bwrap_direct = direct;
        h
    };
    let (p, _) = provider(
        host(true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let c = p.confine(&argv(), &deny).unwrap();
    assert_eq!(c.backend, "bwrap");
    let direct = c
        .direct
        .clone()
        .expect("bwrap runs the command itself under deny");
    let args: Vec<&str> = direct.argv.iter().map(|a| a.to_str().unwrap()).collect();
    assert_eq!(args[0], "/usr/bin/bwrap");
    assert!(!args.contains(&"/opt/stockade/landlock-run"), "{args:?}");
    assert_eq!(&args[args.len() - 4..], ["--", "bash", "-c", "true"]);
    // The closer's argv is still the run's for whoever needs it.
    assert!(c.argv.iter().any(|a| a == "--close-fds"));
    // Each filter is at a number of its own, above the status channel and
    // every held root, and holds the launcher's own program.
    let loaded: Vec<i32> = args
        .windows(2)
        .filter(|w| w[0] == "--add-seccomp-fd")
        .map(|w| w[1].parse().unwrap())
        .collect();
    // Placed in place of the closer's: every held root (there is no relay
    // under deny), then the filters.
    let (held, filters): (Vec<_>, Vec<_>) =
        direct.pass_fds.iter().partition(|p| c.pass_fds.contains(p));
    assert_eq!(held.len(), c.pass_fds.len());
    let placed: Vec<i32> = filters.iter().map(|f| f.child_fd).collect();
    assert_eq!(loaded, placed);
    let held_max = c.pass_fds.iter().map(|f| f.child_fd).max().unwrap();
    assert!(placed.iter().all(|n| *n > held_max && *n > 3), "{placed:?}");
    assert!(direct.relay.is_none());
    let programs = landlock_run::direct::private_net_filters(7, false)
        .unwrap()
        .unwrap();
    assert_eq!(programs.len(), filters.len());
    for (f, want) in filters.iter().zip(&programs) {
        let mut got = Vec::new();
        (&*f.file).read_to_end(&mut got).unwrap();
        assert_eq!(&got, want);
        // Sealed: nothing can change what bwrap will read.
        let seals = rustix::fs::fcntl_get_seals(&*f.file).unwrap();
        assert!(seals.contains(rustix::fs::SealFlags::WRITE | rustix::fs::SealFlags::SEAL));
    }

    // Every other case keeps the closer.
    let ro_deny = ro().with_network(NetworkPolicy::new(NetworkMode::Deny, vec![]));
    let (p, _) = provider(
        host(false, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    assert_eq!(
        p.confine(&argv(), &deny).unwrap().direct,
        None,
        "an old bwrap"
    );
    let (p, _) = provider(
        host(true, Some(9)),
        LocalSettings::default(),
        Platform::Linux,
    );
    assert_eq!(p.confine(&argv(), &deny).unwrap().direct, None, "ABI 9");
    let (p, _) = provider(
        host(true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    assert_eq!(
        p.confine(&argv(), &ro()).unwrap().direct,
        None,
        "the host network"
    );
    assert!(
        p.confine(&argv(), &ro_deny).unwrap().direct.is_some(),
        "read-only"
    );
    let sockets = LocalSettings {
        allow_sockets: vec!["/run/a.sock".into()],
        ..Default::default()
    };
    let (p, _) = provider(host(true, Some(7)), sockets, Platform::Linux);
    assert_eq!(
        p.confine(&argv(), &deny).unwrap().direct,
        None,
        "--allow-socket"
    );
    let (p, _) = provider(
        host(true, Some(7)),
        LocalSettings {
            backend: BackendPreference::Landlock,
            ..Default::default()
        },
        Platform::Linux,
    );
    assert_eq!(p.confine(&argv(), &deny).unwrap().direct, None, "landlock");
}

/// Under `allow-listed` bwrap runs the command itself too: the closer's
/// relay is replaced by the spawner's listener (`DirectRelay`), the relay
/// end stays with the spawner (never placed in bwrap, which would leave it
/// open for the command), and bwrap waits on a block descriptor of its own
/// number before the exec.
#[cfg(target_os = "linux")]
#[test]
fn bwrap_runs_the_command_itself_under_allow_listed_with_the_relay_outside() {
    use stockade_core::{NetworkMode, NetworkPolicy};
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    let listed = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws).with_network(
        NetworkPolicy::new(NetworkMode::AllowListed, vec!["crates.io".into()]),
    );
    let mut host = FakeHost::linux(true, true, Some(7));
    host.bwrap_direct = true;
    let (p, _) = provider(host, LocalSettings::default(), Platform::Linux);
    let c = p.confine(&argv(), &listed).unwrap();
    let closer = strs(&c.argv);
    let bridge = closer.iter().position(|a| *a == "--net-bridge").unwrap();
    let (port, relay_fd) = closer[bridge + 1].split_once(':').unwrap();
    let relay_fd: i32 = relay_fd.parse().unwrap();
    let relay_end = &c
        .pass_fds
        .iter()
        .find(|p| p.child_fd == relay_fd)
        .unwrap()
        .file;
    let direct = c.direct.clone().expect("direct under allow-listed");
    let relay = direct.relay.clone().expect("a relay for the spawner");
    assert_eq!(relay.port.to_string(), port);
    assert!(std::sync::Arc::ptr_eq(&relay.relay_end, relay_end));
    let args = strs(&direct.argv);
    assert!(
        !args.contains(&"--net-bridge") && !args.contains(&"--close-fds"),
        "{args:?}"
    );
    assert!(args.contains(&"--unshare-net"), "{args:?}");
    let block = args.windows(2).find(|w| w[0] == "--block-fd").unwrap()[1];
    assert_eq!(block, relay.block_fd.to_string());
    // The proxy's variables reach the command through bwrap.
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--setenv" && w[1] == "HTTPS_PROXY"),
        "{args:?}"
    );
    // Placed: every held root, the filters; not the relay end. The block
    // descriptor's number is free.
    let placed: Vec<i32> = direct.pass_fds.iter().map(|p| p.child_fd).collect();
    assert!(
        !placed.contains(&relay_fd)
            || direct
                .pass_fds
                .iter()
                .all(|p| !std::sync::Arc::ptr_eq(&p.file, relay_end))
    );
    assert!(
        direct
            .pass_fds
            .iter()
            .all(|p| !std::sync::Arc::ptr_eq(&p.file, relay_end))
    );
    assert!(!placed.contains(&relay.block_fd), "{placed:?}");
    assert!(relay.block_fd > 3);
    for held in c.pass_fds.iter().filter(|p| p.child_fd != relay_fd) {
        assert!(direct.pass_fds.contains(held), "{held:?}");
    }
    let loaded = args.iter().filter(|a| **a == "--add-seccomp-fd").count();
    assert_eq!(loaded, 3);
}

#[test]
fn every_linux_backend_reports_on_the_status_channel_not_stderr() {
    for (bwrap_ok, backend) in [(true, "bwrap"), (false, "landlock")] {
        let (p, _) = provider(
            FakeHost::linux(bwrap_ok, true, Some(7)),
            LocalSettings::default(),
            Platform::Linux,
        );
        let c = p.confine(&argv(), &ro()).unwrap();
        assert_eq!(c.backend, backend);
        assert_eq!(c.status, Some(StatusChannel { child_fd: 3 }));
        assert!(c.runner_failure_rules.is_empty(), "{backend}");
        let i = c.argv.iter().position(|a| a == "--status-fd").unwrap();
        assert_eq!(c.argv[i + 1], "3");
    }
}

#[test]
fn workspace_write_grants_held_descriptors_and_names_them() {
    for bwrap_ok in [true, false] {
        let (p, _) = provider(
            FakeHost::linux(bwrap_ok, true, Some(7)),
            LocalSettings::default(),
            Platform::Linux,
        );
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let c = p
            .confine(
                &argv(),
                &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws),
            )
            .unwrap();
        let flag = if bwrap_ok { "--bind-fd" } else { "--rw-fd" };
        let fds: Vec<i32> = c
            .argv
            .iter()
            .enumerate()
            .filter(|(_, a)| *a == flag)
            .map(|(i, _)| c.argv[i + 1].to_str().unwrap().parse().unwrap())
            .collect();
        let passed: Vec<i32> = c.pass_fds.iter().map(|f| f.child_fd).collect();
        assert!(!fds.is_empty());
        for fd in &fds {
            assert!(passed.contains(fd), "{fd} not passed: {passed:?}");
            assert!(*fd > 3);
        }
        assert!(c.writable_roots.contains(&ws));
        assert!(!c.argv.iter().any(|a| a == ws.as_os_str() && !bwrap_ok));
    }
}

#[test]
fn a_workspace_moved_after_it_was_held_fails_closed() {
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws);
    p.confine(&argv(), &policy).unwrap();
    std::fs::rename(&ws, d.path().join("away")).unwrap();
    std::os::unix::fs::symlink("/", &ws).unwrap();
    let e = p.confine(&argv(), &policy).unwrap_err();
    assert!(e.to_string().contains(&ws.display().to_string()), "{e}");
    // A workspace of / is refused outright.
    let e = p
        .confine(
            &argv(),
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/"),
        )
        .unwrap_err();
    assert!(e.to_string().contains("filesystem root"), "{e}");
}

#[test]
fn a_runner_beneath_a_writable_root_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let mut host = FakeHost::linux(true, true, Some(7));
        // The runner sits in the workspace (a .venv/bin, a target/release).
        host.runners
            .insert(backend, ws.join("bin").join(backend.as_str()));
        let (p, _) = provider(host, LocalSettings::default(), Platform::Linux);
        for mode in [ConfiningMode::ReadOnly, ConfiningMode::WorkspaceWrite] {
            let e = p
                .confine(&argv(), &SandboxPolicy::new(mode, &ws))
                .unwrap_err();
            let text = e.to_string();
            assert!(text.contains("lies beneath the writable root"), "{text}");
            assert!(text.contains(&ws.display().to_string()), "{text}");
        }
    }
    // An operator runner in the workspace, too.
    let rc = RunnerCommand::new(vec![ws.join("runner").into()], vec![]).unwrap();
    let s = LocalSettings {
        runner_command: Some(rc),
        ..Default::default()
    };
    let (p, _) = provider(FakeHost::linux(true, true, Some(7)), s, Platform::Linux);
    let e = p
        .confine(&argv(), &SandboxPolicy::new(ConfiningMode::ReadOnly, &ws))
        .unwrap_err();
    assert!(e.to_string().contains("runner-command"), "{e}");
}

#[test]
fn a_runner_that_changes_after_selection_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let runner = d.path().join("bwrap");
    std::fs::write(&runner, b"one").unwrap();
    let mut host = FakeHost::linux(true, true, Some(7));
    host.runners.insert(Backend::Bwrap, runner.clone());
    let (p, _) = provider(host, LocalSettings::default(), Platform::Linux);
    let ws = tempfile::tempdir().unwrap();
    let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, ws.path());
    p.confine(&argv(), &ro).unwrap();
    std::fs::write(&runner, b"two, longer").unwrap();
    let e = p.confine(&argv(), &ro).unwrap_err();
    assert!(
        e.to_string().contains("changed since it was selected"),
        "{e}"
    );
}

#[test]
fn landlock_results_name_their_gaps() {
    let (p, _) = provider(
        FakeHost::linux(false, true, Some(2)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let ws = tempfile::tempdir().unwrap();
    let c = p
        .confine(
            &argv(),
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws.path()),
        )
        .unwrap();
    let names: Vec<&str> = c.gaps.iter().map(|g| g.name).collect();
    for want in [
        stockade_core::gaps::METADATA,
        stockade_core::gaps::PROTECTED_PATHS,
        stockade_core::gaps::TRUNCATE,
        stockade_core::gaps::SIGNALS,
        stockade_core::gaps::PROC_MASKS,
        stockade_core::gaps::IPC,
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let c = p.confine(&argv(), &ro()).unwrap();
    assert!(
        !c.gaps
            .iter()
            .any(|g| g.name == stockade_core::gaps::PROTECTED_PATHS)
    );
    // With the supervisor, metadata and protected paths are governed, and
    // the launcher is handed the protected paths instead of --no-supervise.
    let mut host = FakeHost::linux(false, true, Some(7));
    host.supervised = true;
    let (p, _) = provider(host, LocalSettings::default(), Platform::Linux);
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    std::fs::write(ws.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let c = p
        .confine(
            &argv(),
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws.path()),
        )
        .unwrap();
    let names: Vec<&str> = c.gaps.iter().map(|g| g.name).collect();
    assert!(
        !names.contains(&stockade_core::gaps::METADATA)
            && !names.contains(&stockade_core::gaps::PROTECTED_PATHS),
        "{names:?}"
    );
    assert!(
        !c.argv.iter().any(|a| a == "--no-supervise"),
        "{:?}",
        c.argv
    );
    assert!(c.argv.iter().any(|a| a == "--protect-fd"), "{:?}", c.argv);
    // Without it, plain Landlock is asked for by name, never assumed.
    let (p, _) = provider(
        FakeHost::linux(false, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let c = p
        .confine(
            &argv(),
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws.path()),
        )
        .unwrap();
    assert!(c.argv.iter().any(|a| a == "--no-supervise"), "{:?}", c.argv);
    assert!(!c.argv.iter().any(|a| a == "--protect-fd"), "{:?}", c.argv);
    // bwrap governs all of these; an allowlist on a pre-ABI-9 kernel opens sockets.
    let s = LocalSettings {
        allow_sockets: vec!["/run/x.sock".into()],
        ..Default::default()
    };
    let (p, _) = provider(FakeHost::linux(true, true, Some(7)), s, Platform::Linux);
    let c = p.confine(&argv(), &ro()).unwrap();
    let names: Vec<&str> = c.gaps.iter().map(|g| g.name).collect();
    assert_eq!(names, [stockade_core::gaps::UNIX_SOCKETS]);
    assert!(
        c.argv
            .windows(2)
            .any(|w| w[0] == "--allow-socket" && w[1] == "/run/x.sock")
    );
}

#[test]
fn a_verdict_cache_beneath_a_writable_root_is_ignored() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    let cache = ws.join("cache");
    let settings = LocalSettings {
        verdict_cache_dirs: vec![cache.clone()],
        ..Default::default()
    };
    let (p, h) = provider(
        FakeHost::linux(true, true, Some(7)),
        settings,
        Platform::Linux,
    );
    let p = p.with_pins(Arc::new(stockade_roots::RootPins::without_temp_roots()));
    p.confine(
        &argv(),
        &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws),
    )
    .unwrap();
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);
    assert!(
        !cache.exists(),
        "nothing is written beneath a writable root"
    );
}

/// A place beneath the run's workspace is skipped, never read or written,
/// and the verdict goes to the next place, where the next process finds it
/// and does not probe; a run whose workspace holds every place probes each
/// time and leaves nothing behind.
#[test]
fn a_verdict_place_beneath_the_workspace_yields_to_the_next() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(d.path()).unwrap();
    let ws = base.join("home");
    let (inside, outside) = (ws.join(".cache/stockade"), base.join("var/stockade-0"));
    std::fs::create_dir_all(&inside).unwrap();
    // A forged verdict in the skipped place decides nothing.
    std::fs::write(inside.join("auto-verdict"), "forged").unwrap();
    let settings = LocalSettings {
        verdict_cache_dirs: vec![inside.clone(), outside.clone()],
        ..Default::default()
    };
    let policy = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, &ws);
    for probes in [1, 0, 0] {
        let (p, h) = provider(
            FakeHost::linux(true, true, Some(7)),
            settings.clone(),
            Platform::Linux,
        );
        assert_eq!(p.confine(&argv(), &policy).unwrap().backend, "bwrap");
        assert_eq!(h.probes.load(Ordering::SeqCst), probes);
    }
    assert!(outside.join("auto-verdict").is_file());
    assert_eq!(
        std::fs::read_to_string(inside.join("auto-verdict")).unwrap(),
        "forged"
    );
    // Outside the workspace the first place serves again (and the forged
    // file there is not a verdict: it probes once and replaces it).
    let (p, h) = provider(
        FakeHost::linux(true, true, Some(7)),
        settings.clone(),
        Platform::Linux,
    );
    p.confine(&argv(), &ro()).unwrap();
    assert_eq!(h.probes.load(Ordering::SeqCst), 1);
    assert!(
        std::fs::read_to_string(inside.join("auto-verdict"))
            .unwrap()
            .starts_with("stockade-verdict-v1")
    );

    let only_inside = LocalSettings {
        verdict_cache_dirs: vec![ws.join("a"), ws.join("b")],
        ..Default::default()
    };
    for _ in 0..2 {
        let (p, h) = provider(
            FakeHost::linux(true, true, Some(7)),
            only_inside.clone(),
            Platform::Linux,
        );
        p.confine(&argv(), &policy).unwrap();
        assert_eq!(h.probes.load(Ordering::SeqCst), 1);
    }
    assert!(!ws.join("a").exists() && !ws.join("b").exists());
}

/// Every place the verdict may be kept is control state, the first and any
/// later one (a later run whose earlier places lie in its workspace reads
/// the next): an extra root holding one is refused, naming both.
#[test]
fn an_extra_root_holding_any_verdict_place_is_refused() {
    for (holding, place) in [("state", "state/cache"), ("later", "later/stockade")] {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        for dir in ["ws", "state/cache", "later/stockade"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let settings = LocalSettings {
            verdict_cache_dirs: vec![base.join("state/cache"), base.join("later/stockade")],
            ..Default::default()
        };
        let (p, _) = provider(
            FakeHost::linux(true, true, Some(7)),
            settings,
            Platform::Linux,
        );
        let policy = ww(base.join("ws").to_str().unwrap()).with_files(stockade_core::FilePolicy {
            writable_roots: vec![base.join(holding)],
            ..Default::default()
        });
        let e = p.confine(&argv(), &policy).unwrap_err().to_string();
        assert!(
            e.contains("verdict cache")
                && e.contains(&base.join(holding).display().to_string())
                && e.contains(&base.join(place).display().to_string()),
            "{place}: {e}"
        );
    }
}

/// The deployment's file lists reach the runner: extra roots by held
/// descriptor (not under read-only), read-only paths as protected binds,
/// deny-read masks on bwrap and `--deny-read` on Landlock with the gaps
/// Landlock has; a missing extra root or secret is simply not there.
#[test]
fn the_file_policy_reaches_both_backends_with_landlocks_gaps_named() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(d.path()).unwrap();
    let (ws, extra, secret, env) = (
        base.join("ws"),
        base.join("cache"),
        base.join("home/.ssh"),
        base.join("ws/.env"),
    );
    for dir in [&ws, &extra, &secret] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&env, "K=V").unwrap();
    std::fs::write(ws.join("key.pem"), "k").unwrap();
    let files = stockade_core::FilePolicy {
        writable_roots: vec![extra.clone(), base.join("missing-root")],
        deny_read: vec![secret.clone(), ws.join("key.pem"), base.join("missing")],
        read_only: vec![env.clone()],
    };
    for (bwrap_ok, supervised) in [(true, true), (false, true), (false, false)] {
        let mut host = FakeHost::linux(bwrap_ok, true, Some(7));
        host.supervised = supervised;
        let (p, _) = provider(host, LocalSettings::default(), Platform::Linux);
        let policy = ww(ws.to_str().unwrap()).with_files(files.clone());
        let c = p.confine(&argv(), &policy).unwrap();
        let a = strs(&c.argv);
        assert!(c.writable_roots.contains(&extra), "{:?}", c.writable_roots);
        assert!(!c.writable_roots.contains(&base.join("missing-root")));
        assert_eq!(c.deny_read, [secret.clone(), ws.join("key.pem")]);
        // Read-only paths are kept by bwrap or the supervisor only.
        if supervised {
            assert_eq!(c.read_only, std::slice::from_ref(&env));
        }
        let names: Vec<&str> = c.gaps.iter().map(|g| g.name).collect();
        let has = |w: &[&str]| a.windows(w.len()).any(|x| x == w);
        if bwrap_ok {
            assert!(
                has(&["--perms", "0000", "--tmpfs", secret.to_str().unwrap()]),
                "{a:?}"
            );
            assert!(has(&["--perms", "0000", "--ro-bind-data"]), "{a:?}");
            assert!(a.iter().any(|x| *x == env.to_str().unwrap()), "{a:?}");
            assert!(
                !names.contains(&stockade_core::gaps::DENY_READ),
                "{names:?}"
            );
        } else if supervised {
            assert!(has(&["--deny-read", secret.to_str().unwrap()]), "{a:?}");
            assert!(
                a.iter().filter(|x| **x == "--protect-fd").count() >= 1,
                "{a:?}"
            );
            // The key inside the workspace is refused by the supervisor
            // (landlock-run grants the root without read_file): no gap,
            // and its listing is refused too.
            assert!(
                !names.contains(&stockade_core::gaps::DENY_READ),
                "{names:?}"
            );
            assert!(
                !names.contains(&stockade_core::gaps::DENY_READ_NAMES),
                "{names:?}"
            );
        } else {
            assert!(has(&["--deny-read", secret.to_str().unwrap()]), "{a:?}");
            assert!(has(&["--no-supervise"]), "{a:?}");
            assert!(c.read_only.is_empty(), "{:?}", c.read_only);
            // Without the supervisor the key inside the workspace stays
            // readable under Landlock, and the names inside ~/.ssh
            // listable: both said.
            let gap = c
                .gaps
                .iter()
                .find(|g| g.name == stockade_core::gaps::DENY_READ)
                .unwrap();
            assert!(gap.detail.contains("key.pem"), "{}", gap.detail);
            assert!(gap.detail.contains("supervisor"), "{}", gap.detail);
            assert!(
                names.contains(&stockade_core::gaps::DENY_READ_NAMES),
                "{names:?}"
            );
        }
        // read-only: no extra root, the secrets still masked.
        let ro_policy = SandboxPolicy::new(ConfiningMode::ReadOnly, &ws).with_files(files.clone());
        let c = p.confine(&argv(), &ro_policy).unwrap();
        assert!(!c.writable_roots.contains(&extra));
        assert_eq!(c.deny_read.len(), 2);
    }
}

/// The network mode reaches the runner with the proxy's environment, and
/// Landlock's limits are named per run: by port above ABI 4; below it the
/// supervisor governs connect (no gap); bwrap's namespace has neither gap.
#[test]
fn the_network_mode_reaches_the_runner_with_landlocks_gaps_named() {
    use stockade_core::{NetworkMode, NetworkPolicy};
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let state = std::fs::canonicalize(d.path()).unwrap().join("state");
    for (bwrap_ok, abi) in [(true, 7), (false, 7), (false, 3)] {
        // A state directory per host: the verdict is cached there.
        let settings = LocalSettings {
            verdict_cache_dirs: vec![state.join(format!("{bwrap_ok}-{abi}"))],
            ..Default::default()
        };
        let mut host = FakeHost::linux(bwrap_ok, true, Some(abi));
        host.supervised = true;
        let (p, _) = provider(host, settings, Platform::Linux);
        let listed = NetworkPolicy::new(NetworkMode::AllowListed, vec!["crates.io".into()]);
        let policy = ww(ws.to_str().unwrap()).with_network(listed);
        let c = match p.confine(&argv(), &policy) {
            // Below ABI 4 nothing restricts TCP: refused, never weakened.
            Err(e) if !bwrap_ok && abi < 4 => {
                assert!(e.to_string().contains("--network deny"), "{e}");
                continue;
            }
            c => c.unwrap(),
        };
        let a = strs(&c.argv);
        let names: Vec<&str> = c.gaps.iter().map(|g| g.name).collect();
        let proxy_env = a
            .iter()
            .any(|x| x.starts_with("HTTPS_PROXY=http://") && x.contains("@127.0.0.1:"));
        assert!(proxy_env, "{a:?}");
        assert!(c.network_log.is_some());
        match (bwrap_ok, abi) {
            (true, _) => {
                assert!(
                    a.contains(&"--unshare-net") && a.contains(&"--net-bridge"),
                    "{a:?}"
                );
                assert!(!names.iter().any(|n| n.starts_with("network")), "{names:?}");
            }
            (false, 7) => {
                assert!(a.contains(&"--net-port"), "{a:?}");
                assert!(
                    names.contains(&stockade_core::gaps::NETWORK_PORT),
                    "{names:?}"
                );
            }
            // Below ABI 4 with the supervisor: landlock-run governs every
            // connect itself (only to the proxy's 127.0.0.1 port), so
            // neither network gap applies.
            _ => {
                assert!(a.contains(&"--net-port"), "{a:?}");
                assert!(!names.iter().any(|n| n.starts_with("network")), "{names:?}");
            }
        }
        let deny =
            ww(ws.to_str().unwrap()).with_network(NetworkPolicy::new(NetworkMode::Deny, vec![]));
        let c = p.confine(&argv(), &deny).unwrap();
        let a = strs(&c.argv);
        assert!(
            a.contains(&"--unshare-net") || a.contains(&"--net-deny"),
            "{a:?}"
        );
        assert!(!a.iter().any(|x| x.contains("_PROXY=")), "{a:?}");
        assert!(c.network_log.is_none());
        assert!(!c.gaps.iter().any(|g| g.name.starts_with("network")));
    }
    // An operator runner cannot host the proxy: refused, never unenforced.
    let settings = LocalSettings {
        runner_command: Some(RunnerCommand::new(vec!["/bin/fake-runner".into()], vec![]).unwrap()),
        ..Default::default()
    };
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        settings,
        Platform::Linux,
    );
    let listed = NetworkPolicy::new(NetworkMode::AllowListed, vec![]);
    let e = p
        .confine(&argv(), &ww(ws.to_str().unwrap()).with_network(listed))
        .unwrap_err();
    assert!(e.to_string().contains("allow-listed"), "{e}");
}

/// A runner swapped by a rename after selection (another file, same size,
/// put in its place) is refused: the stamp the selection keeps is the one
/// the runner was found with, checked once more before the run.
#[test]
fn a_runner_swapped_by_rename_after_selection_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let runner = d.path().join("landlock-run");
    std::fs::write(&runner, b"same").unwrap();
    let mut host = FakeHost::linux(false, true, Some(7));
    host.runners.insert(Backend::Landlock, runner.clone());
    let s = LocalSettings {
        backend: BackendPreference::Landlock,
        ..Default::default()
    };
    let (p, _) = provider(host, s, Platform::Linux);
    let ws = tempfile::tempdir().unwrap();
    let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, ws.path());
    p.confine(&argv(), &ro).unwrap();
    assert_eq!(
        p.selected().unwrap().stamps,
        vec![(runner.clone(), confine::stamp(&runner))]
    );
    let other = d.path().join("other");
    std::fs::write(&other, b"same").unwrap();
    std::fs::rename(&other, &runner).unwrap();
    let e = p.confine(&argv(), &ro).unwrap_err();
    assert!(
        e.to_string().contains("changed since it was selected"),
        "{e}"
    );
}

/// The real host stamps a runner from the look that found it: the stamp
/// is the file's, the verdict key carries it, and a rewritten runner
/// found again keys differently (its cached verdict no longer applies).
#[cfg(target_os = "linux")]
#[test]
fn the_host_keys_a_runner_by_the_stamp_it_was_found_with() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let bwrap = d.path().join("bwrap");
    std::fs::write(&bwrap, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = LocalSettings {
        bwrap_path: Some(bwrap.clone()),
        ..Default::default()
    };
    let host = crate::linux::LinuxHost;
    let found = host.locate_stamped(Backend::Bwrap, &s).unwrap();
    assert_eq!(found.path, bwrap);
    assert_eq!(found.stamp, confine::stamp(&bwrap));
    assert!(found.stamp.is_some());
    let key = host.verdict_key(&[(Backend::Bwrap, Some(&found))]).unwrap();
    std::fs::write(&bwrap, b"#!/bin/sh\nexit 0\n").unwrap();
    let again = host.locate_stamped(Backend::Bwrap, &s).unwrap();
    assert_ne!(again.stamp, found.stamp);
    let rekeyed = host.verdict_key(&[(Backend::Bwrap, Some(&again))]).unwrap();
    assert_ne!(key, rekeyed);
    // A runner found without a stamp makes no key (nothing is cached).
    let unstamped = Located {
        path: bwrap.clone(),
        stamp: None,
    };
    assert!(
        host.verdict_key(&[(Backend::Bwrap, Some(&unstamped))])
            .is_none()
    );
    // Not executable: not found, whatever its stamp would be.
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(host.locate_stamped(Backend::Bwrap, &s).is_err());
}

/// The ABI stockade reports is the kernel's own answer to
/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`,
/// asked here apart from the crate (python's ctypes; the syscall is 444
/// on x86_64 and arm64 alike), not a guess from which filesystem rights
/// a ruleset accepts (that read this ABI 7 kernel as 8).
#[cfg(target_os = "linux")]
#[test]
fn the_reported_landlock_abi_is_the_kernels_own() {
    let out = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.syscall(444, None, 0, 1))",
        ])
        .output();
    let Ok(out) = out else {
        assert!(!stockade_testkit::in_ci(), "CI installs /usr/bin/python3");
        return;
    };
    assert!(out.status.success(), "{out:?}");
    let kernel: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let newest_known = ::landlock::ABI::V10 as i64;
    let want = (kernel > 0).then(|| kernel.min(newest_known) as u8);
    assert_eq!(
        crate::linux::kernel_landlock_abi(),
        want,
        "kernel says {kernel}"
    );
}

/// What one composition resolved is not what the next one sees: a
/// deny-read name that is a symlink, pointed elsewhere between two runs of
/// one provider (as a user, or a run of another session, could), denies
/// the new target in the second run. The memo of the first composition
/// ended with it.
#[test]
fn each_composition_resolves_afresh() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(d.path()).unwrap();
    let (ws, a, b, link) = (
        base.join("ws"),
        base.join("a"),
        base.join("b"),
        base.join("secret"),
    );
    for dir in [&ws, &a, &b] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let files = stockade_core::FilePolicy {
        deny_read: vec![link.clone()],
        ..Default::default()
    };
    let (p, _) = provider(
        FakeHost::linux(true, true, Some(7)),
        LocalSettings::default(),
        Platform::Linux,
    );
    let policy = ww(ws.to_str().unwrap()).with_files(files);
    let first = p.confine(&argv(), &policy).unwrap();
    assert_eq!(first.deny_read, std::slice::from_ref(&a));
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&b, &link).unwrap();
    let second = p.confine(&argv(), &policy).unwrap();
    assert_eq!(second.deny_read, std::slice::from_ref(&b));
}
