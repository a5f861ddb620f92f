//! The local sandbox provider: one per-platform chain of same-world backends.
//!
//! | platform | chain | selection |
//! |---|---|---|
//! | Linux | bwrap, then the Landlock launcher | functional probes in order, verdict cached |
//! | macOS | Seatbelt (the pinned `/usr/bin/sandbox-exec`) | sole candidate, selected without a probe |
//! | Windows | restricted-token runner | declared; fails closed until its rung lands |
//! | other | none | fails closed |
//!
//! Every backend is a [`Rung`] in a file of its own (`bwrap.rs`,
//! `landlock.rs`, `seatbelt.rs`, `runner_command.rs`; Windows in
//! `stockade-windows`): the provider holds the roots, selects one and
//! delegates the call to it.
#![forbid(unsafe_code)]

#[cfg(unix)]
mod bwrap;
mod cache;
#[cfg(unix)]
mod confine;
#[cfg(unix)]
pub use confine::Protection;

/// Off Unix there is no Linux chain to report protections for.
#[cfg(not(unix))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Protection {
    pub name: &'static str,
    pub state: String,
}
mod host;
#[cfg(unix)]
mod network;
#[cfg(unix)]
pub use network::ENV_TEST_RESOLVE;
/// The approval seam of the allow-listed proxy, for
/// [`LocalProvider::set_host_approval`].
#[cfg(unix)]
pub use stockade_proxy::{
    GrantError, HostAnswer, HostApproval, HostApprover, HostGrants, HostQuestion, HostReply,
};
#[cfg(unix)]
mod landlock;
#[cfg(target_os = "linux")]
mod path_approval;
/// The approval seam for paths under supervised Landlock, for
/// [`LocalProvider::set_path_approval`].
#[cfg(target_os = "linux")]
pub use path_approval::{
    DEFAULT_MAX_PATH_QUESTIONS, DEFAULT_PATH_TIMEOUT, PathAnswer, PathApproval, PathApprover,
    PathOp, PathQuestion, PathReply,
};
#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
mod linux_chain;
pub mod profile;
#[cfg(unix)]
mod run_approval;
mod rung;
#[cfg(unix)]
mod runner_command;
pub mod seatbelt;
mod settings;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use stockade_core::{
    BackendAttempt, Confined, Enforcement, SandboxPolicy, SandboxProvider, SandboxUnavailable,
};
use stockade_roots::RootPins;

pub use host::{Host, Located, default_host};
pub use rung::{PlatformRung, Rung};
pub use settings::{
    BackendPreference, LocalSettings, RunnerCommand, SettingsError, create_group_caches,
};

/// A backend of the Linux chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Bwrap,
    Landlock,
}

impl Backend {
    pub const LINUX_CHAIN: [Backend; 2] = [Backend::Bwrap, Backend::Landlock];

    pub const fn as_str(self) -> &'static str {
        match self {
            Backend::Bwrap => "bwrap",
            Backend::Landlock => "landlock",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend a provider can settle on: one of the Linux chain, or Seatbelt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelectedBackend {
    Linux(Backend),
    /// macOS: `/usr/bin/sandbox-exec`, the chain's sole candidate.
    Seatbelt,
}

impl SelectedBackend {
    pub const fn as_str(self) -> &'static str {
        match self {
            SelectedBackend::Linux(b) => b.as_str(),
            SelectedBackend::Seatbelt => seatbelt::BACKEND,
        }
    }
}

impl fmt::Display for SelectedBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The platform whose chain applies. Injectable so every chain is testable here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Linux,
    MacOs,
    Windows,
    Other(&'static str),
}

impl Platform {
    pub fn current() -> Self {
        match std::env::consts::OS {
            "linux" => Platform::Linux,
            "macos" => Platform::MacOs,
            "windows" => Platform::Windows,
            other => Platform::Other(other),
        }
    }

    /// Why this platform has no usable chain yet, or `None` for Linux and
    /// macOS.
    fn closed_chain(self) -> Option<SandboxUnavailable> {
        match self {
            Platform::Linux | Platform::MacOs => None,
            Platform::Windows => Some(SandboxUnavailable::single(
                "restricted-token",
                "the Windows restricted-token backend is not available in this build",
            )),
            Platform::Other(os) => Some(SandboxUnavailable::single(
                "none",
                format!("no sandbox backend exists for platform {os:?}"),
            )),
        }
    }
}

/// The backend a provider settled on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub backend: SelectedBackend,
    pub runner: PathBuf,
    pub enforcement: Enforcement,
    pub landlock_abi: Option<u8>,
    /// bwrap only: the launcher that closes inherited descriptors inside.
    pub fd_closer: Option<PathBuf>,
    /// bwrap only: it can run the command itself, with the launcher's
    /// filters loaded from descriptors ([`Host::bwrap_runs_direct`]).
    pub bwrap_direct: bool,
    /// Every runner file this selection executes, with its stamp when it was
    /// selected: a runner that changes afterwards is refused, not run.
    pub stamps: Vec<(PathBuf, Option<String>)>,
}

/// One backend's line in `stockade probe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BackendReport {
    pub backend: String,
    #[serde(serialize_with = "display_path")]
    pub runner: Option<PathBuf>,
    pub usable: bool,
    pub detail: String,
    pub enforcement: Option<Enforcement>,
    pub landlock_abi: Option<u8>,
    /// What this backend enforces beyond file writes (usable backends).
    pub protections: Vec<Protection>,
    /// What it does not govern here under workspace-write, by name.
    pub gaps: Vec<stockade_core::Gap>,
}

/// Reports are for people and scripts to read; a non-UTF-8 runner path is
/// shown lossily there and never used from the report.
fn display_path<S: serde::Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_some(&p.display().to_string()),
        None => s.serialize_none(),
    }
}

/// What every backend of this platform's chain can do right now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeReport {
    pub platform: String,
    pub backends: Vec<BackendReport>,
    /// The backend `auto` selects, if any is usable.
    pub auto_selects: Option<&'static str>,
    /// Why `$TMPDIR` is not a writable root, when it is set but refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmpdir: Option<String>,
}

/// The local provider. Select once, confine many times under per-call policy.
pub struct LocalProvider {
    settings: LocalSettings,
    platform: Platform,
    host: Arc<dyn Host>,
    rung: Option<Arc<dyn PlatformRung>>,
    selection: OnceLock<Result<Selected, SandboxUnavailable>>,
    /// The writable roots, held: shared with the file fence of the same
    /// composition so both grant the same directories.
    pins: Arc<RootPins>,
    #[cfg(unix)]
    host_facts: OnceLock<confine::HostFacts>,
    /// The allow-listed proxies of this provider's runs.
    #[cfg(unix)]
    proxies: network::Proxies,
    /// Who is asked about paths outside the roots, per session.
    #[cfg(target_os = "linux")]
    path_approvals: path_approval::PathApprovals,
}

impl fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalProvider")
            .field("settings", &self.settings)
            .field("platform", &self.platform)
            .field("selection", &self.selection.get())
            .finish()
    }
}

impl LocalProvider {
    pub fn new(settings: LocalSettings) -> Result<Self, SettingsError> {
        Self::with_host(settings, Platform::current(), default_host())
    }

    pub fn with_host(
        settings: LocalSettings,
        platform: Platform,
        host: Arc<dyn Host>,
    ) -> Result<Self, SettingsError> {
        settings.validate()?;
        let _composing = stockade_roots::composing();
        let pins = Arc::new(RootPins::from_env());
        register_control(&pins, &settings);
        Ok(Self {
            settings,
            platform,
            host,
            rung: None,
            selection: OnceLock::new(),
            pins,
            #[cfg(unix)]
            host_facts: OnceLock::new(),
            #[cfg(unix)]
            proxies: network::Proxies::default(),
            #[cfg(target_os = "linux")]
            path_approvals: path_approval::PathApprovals::default(),
        })
    }

    /// Share held roots with others of the same composition (the file
    /// fence), so a workspace is held once for all of them.
    pub fn with_pins(mut self, pins: Arc<RootPins>) -> Self {
        let _composing = stockade_roots::composing();
        register_control(&pins, &self.settings);
        self.pins = pins;
        self
    }

    /// The held writable roots this provider grants.
    pub fn pins(&self) -> &Arc<RootPins> {
        &self.pins
    }

    /// Mount a rung built outside this crate (e.g. the Windows restricted
    /// token runner). It serves only the platform it names.
    pub fn with_rung(mut self, rung: Arc<dyn PlatformRung>) -> Self {
        self.rung = Some(rung);
        self
    }

    fn platform_rung(&self) -> Option<&dyn PlatformRung> {
        self.rung
            .as_deref()
            .filter(|r| r.platform() == self.platform)
    }

    pub fn settings(&self) -> &LocalSettings {
        &self.settings
    }

    /// Under `allow-listed`, the later runs of `session` (the policy's
    /// `session`; `None` for runs of no session) ask `approval` about a
    /// host not on the list while its connection is held, instead of
    /// refusing it at once; `None` goes back to refusing. A run keeps the
    /// approval it started with, and its questions are withdrawn when the
    /// run's network log is let go (the command is over). Both backends
    /// of the Linux chain: every connection passes the proxy.
    #[cfg(unix)]
    pub fn set_host_approval(&self, session: Option<&str>, approval: Option<HostApproval>) {
        self.proxies.set_approval(session, approval);
    }

    /// The later runs of `session` confined by supervised Landlock ask
    /// `approval` about a place outside every writable root their
    /// supervisor refused, while the command waits; `None` goes back to
    /// refusing. Only supervised Landlock can ask (bwrap, unsupervised
    /// Landlock and Seatbelt have no channel: a rerun with a wider grant).
    #[cfg(target_os = "linux")]
    pub fn set_path_approval(&self, session: Option<&str>, approval: Option<PathApproval>) {
        self.path_approvals.set(session, approval);
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn path_approval(&self, session: Option<&str>) -> Option<PathApproval> {
        self.path_approvals.get(session)
    }

    /// The backend this provider confines with, selecting it on first use.
    /// Concurrent first callers wait for one selection.
    pub fn selected(&self) -> Result<&Selected, SandboxUnavailable> {
        self.selected_guarding(&self.pins.all_writable_paths())
    }

    /// Select, keeping away from a verdict cache that lies beneath one of
    /// `writable` (a confined run could have written it).
    fn selected_guarding(&self, writable: &[PathBuf]) -> Result<&Selected, SandboxUnavailable> {
        self.selection
            .get_or_init(|| self.select(writable))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The first verdict cache dir that lies beneath no writable root; one
    /// beneath a root is ignored (never read, written or removed). With none
    /// left the chain is probed.
    fn cache_dir(&self, writable: &[PathBuf]) -> Option<&Path> {
        self.settings
            .verdict_cache_dirs
            .iter()
            .map(PathBuf::as_path)
            .find(|d| stockade_roots::beneath(d, writable).is_none())
    }

    /// Drop the verdict kept between processes (e.g. after its runner failed),
    /// so the next process probes again.
    pub fn forget_verdict(&self) {
        if let Some(dir) = self.cache_dir(&self.pins.all_writable_paths()) {
            cache::forget(dir);
        }
    }

    fn select(&self, writable: &[PathBuf]) -> Result<Selected, SandboxUnavailable> {
        if let Some(closed) = self.platform.closed_chain() {
            return Err(closed);
        }
        if self.platform == Platform::MacOs {
            return self.seatbelt();
        }
        match self.settings.backend {
            BackendPreference::Bwrap => self.sole(Backend::Bwrap),
            BackendPreference::Landlock => self.sole(Backend::Landlock),
            BackendPreference::Auto => self.auto(writable),
        }
    }

    /// An explicitly chosen backend is a sole candidate and is not probed: its
    /// own exec-time refusal and failure rules keep it fail-closed.
    fn sole(&self, backend: Backend) -> Result<Selected, SandboxUnavailable> {
        let runner = self
            .host
            .locate_stamped(backend, &self.settings)
            .map_err(|d| SandboxUnavailable::single(backend.as_str(), d))?;
        self.facts(backend, runner, None)
            .map_err(|d| SandboxUnavailable::single(backend.as_str(), d))
    }

    /// macOS has one candidate, so there is nothing to choose between and
    /// no probe: the pinned runner is selected even when it is missing,
    /// which then surfaces as a spawn failure attributable to it. A Linux
    /// backend asked for by name is not in this chain and fails closed.
    fn seatbelt(&self) -> Result<Selected, SandboxUnavailable> {
        match self.settings.backend {
            BackendPreference::Auto => Ok(Selected {
                backend: SelectedBackend::Seatbelt,
                runner: PathBuf::from(seatbelt::SANDBOX_EXEC),
                enforcement: Enforcement::Full,
                landlock_abi: None,
                fd_closer: None,
                bwrap_direct: false,
                stamps: Vec::new(),
            }),
            linux @ (BackendPreference::Bwrap | BackendPreference::Landlock) => {
                Err(SandboxUnavailable::single(
                    linux.as_str(),
                    format!(
                        "{linux} is a Linux backend; the macOS chain is {} alone (use auto)",
                        seatbelt::BACKEND
                    ),
                ))
            }
        }
    }

    /// The selection of `backend` run by `runner`; bwrap's closer is the
    /// launcher as already `located` (looked for now when `None`). The
    /// stamps kept are those each file was found with: the run checks them
    /// once more, right before it starts the runner.
    fn facts(
        &self,
        backend: Backend,
        runner: Located,
        located: Option<&Result<Located, String>>,
    ) -> Result<Selected, String> {
        let mut fd_closer = None;
        let bwrap_direct = backend == Backend::Bwrap && self.host.bwrap_runs_direct(&runner);
        let (enforcement, landlock_abi) = match backend {
            Backend::Bwrap => {
                // Without it bwrap would hand inherited fds to the command;
                // refuse rather than confine less than we say.
                let closer = match located {
                    Some(found) => found.clone(),
                    None => self.host.locate_stamped(Backend::Landlock, &self.settings),
                }
                .map_err(|d| {
                    format!("{d} (bwrap runs it inside the sandbox to close inherited descriptors)")
                })?;
                fd_closer = Some(closer);
                (Enforcement::Full, None)
            }
            Backend::Landlock => match self.host.landlock_abi() {
                None => {
                    return Err("the kernel does not support Landlock (or it is disabled)".into());
                }
                Some(abi) if abi >= 3 => (Enforcement::Full, Some(abi)),
                Some(abi) => (Enforcement::Partial, Some(abi)),
            },
        };
        let stamps = std::iter::once(&runner)
            .chain(fd_closer.as_ref())
            .map(|l| (l.path.clone(), l.stamp.clone()))
            .collect();
        Ok(Selected {
            backend: SelectedBackend::Linux(backend),
            runner: runner.path,
            enforcement,
            landlock_abi,
            fd_closer: fd_closer.map(|l| l.path),
            bwrap_direct,
            stamps,
        })
    }

    fn located(&self) -> Vec<(Backend, Result<Located, String>)> {
        Backend::LINUX_CHAIN
            .iter()
            .map(|b| (*b, self.host.locate_stamped(*b, &self.settings)))
            .collect()
    }

    /// The launcher as `located`: bwrap's closer.
    fn closer(located: &[(Backend, Result<Located, String>)]) -> Option<&Result<Located, String>> {
        located
            .iter()
            .find(|(b, _)| *b == Backend::Landlock)
            .map(|(_, r)| r)
    }

    fn verdict_key(&self, located: &[(Backend, Result<Located, String>)]) -> Option<Vec<u8>> {
        let runners: Vec<(Backend, Option<&Located>)> =
            located.iter().map(|(b, r)| (*b, r.as_ref().ok())).collect();
        self.host.verdict_key(&runners)
    }

    fn auto(&self, writable: &[PathBuf]) -> Result<Selected, SandboxUnavailable> {
        let located = self.located();
        let cache = self
            .cache_dir(writable)
            .and_then(|dir| Some((dir, self.verdict_key(&located)?)));
        if let Some((dir, key)) = &cache
            && let Some(backend) = cache::load(dir, key)
        {
            let runner = located.iter().find(|(b, _)| *b == backend);
            if let Some((_, Ok(runner))) = runner
                && let Ok(sel) = self.facts(backend, runner.clone(), Self::closer(&located))
            {
                return Ok(sel);
            }
        }
        let mut attempts = Vec::new();
        for (backend, runner) in &located {
            let backend = *backend;
            match self.probe_one(backend, runner.clone(), Self::closer(&located)) {
                Ok(sel) => {
                    if let Some((dir, key)) = &cache {
                        cache::store(dir, key, backend);
                    }
                    return Ok(sel);
                }
                Err(detail) => attempts.push(BackendAttempt {
                    backend: backend.as_str().into(),
                    detail,
                }),
            }
        }
        Err(SandboxUnavailable::new(attempts))
    }

    fn probe_one(
        &self,
        backend: Backend,
        runner: Result<Located, String>,
        closer: Option<&Result<Located, String>>,
    ) -> Result<Selected, String> {
        let runner = runner?;
        let sel = self.facts(backend, runner, closer)?;
        self.host
            .probe(
                backend,
                &sel.runner,
                sel.fd_closer.as_deref(),
                self.settings.probe_timeout,
            )
            .map_err(|d| format!("probe failed: {d}"))?;
        Ok(sel)
    }

    /// Probe every backend of this platform's chain afresh.
    pub fn report(&self) -> ProbeReport {
        let platform = match self.platform {
            Platform::Linux => "linux".to_owned(),
            Platform::MacOs => "macos".to_owned(),
            Platform::Windows => "windows".to_owned(),
            Platform::Other(os) => os.to_owned(),
        };
        if let Some(rung) = self.platform_rung() {
            let line = rung.report();
            return ProbeReport {
                platform,
                auto_selects: line.usable.then_some(rung.backend()),
                backends: vec![line],

                tmpdir: None,
            };
        }
        if let Some(closed) = self.platform.closed_chain() {
            let backends = closed
                .attempts
                .into_iter()
                .map(|a| BackendReport {
                    backend: a.backend,
                    runner: None,
                    usable: false,
                    detail: a.detail,
                    enforcement: None,
                    landlock_abi: None,
                    protections: Vec::new(),
                    gaps: Vec::new(),
                })
                .collect();
            return ProbeReport {
                platform,
                backends,
                auto_selects: None,

                tmpdir: None,
            };
        }
        if self.platform == Platform::MacOs {
            let line = seatbelt::report(self.host.as_ref());
            return ProbeReport {
                platform,
                auto_selects: line.usable.then_some(seatbelt::BACKEND),
                backends: vec![line],

                tmpdir: None,
            };
        }
        let located = self.located();
        let key = self.verdict_key(&located);
        let mut backends = Vec::new();
        let mut auto_selects = None;
        for (backend, runner) in &located {
            let backend = *backend;
            let path = runner.as_ref().ok().map(|l| l.path.clone());
            let abi = match backend {
                Backend::Landlock => self.host.landlock_abi(),
                Backend::Bwrap => None,
            };
            let line = match self.probe_one(backend, runner.clone(), Self::closer(&located)) {
                Ok(sel) => {
                    if auto_selects.is_none() {
                        auto_selects = Some(backend.as_str());
                        let writable = self.pins.all_writable_paths();
                        if let (Some(dir), Some(key)) = (self.cache_dir(&writable), &key) {
                            cache::store(dir, key, backend);
                        }
                    }
                    BackendReport {
                        backend: backend.as_str().into(),
                        runner: path,
                        usable: true,
                        detail:
                            "probe passed: a write outside was denied and a write inside succeeded"
                                .into(),
                        enforcement: Some(sel.enforcement),
                        landlock_abi: sel.landlock_abi,
                        protections: {
                            #[allow(unused_mut)]
                            let mut p = self.protections(backend);
                            #[cfg(unix)]
                            if backend == Backend::Bwrap {
                                p.push(bwrap::command_runner(
                                    sel.bwrap_direct,
                                    self.host.landlock_abi(),
                                ));
                            }
                            p
                        },
                        gaps: self.gaps(backend),
                    }
                }
                Err(detail) => BackendReport {
                    backend: backend.as_str().into(),
                    runner: path,
                    usable: false,
                    detail,
                    enforcement: None,
                    landlock_abi: abi,
                    protections: Vec::new(),
                    gaps: Vec::new(),
                },
            };
            backends.push(line);
        }
        ProbeReport {
            platform,
            backends,
            auto_selects,
            tmpdir: self.pins.tmpdir_note().map(str::to_owned),
        }
    }
}

#[cfg(unix)]
pub(crate) fn runner_stamp(p: &Path) -> Option<String> {
    confine::stamp(p)
}

/// What decides later runs and so may lie in no extra writable root: every
/// place the verdict may be kept (a later run whose earlier places lie in
/// its workspace reads the next one), the configured runners, and stockade
/// itself (the runners actually selected are added when they are).
fn register_control(pins: &RootPins, settings: &LocalSettings) {
    for dir in &settings.verdict_cache_dirs {
        pins.add_control_path("verdict cache", dir);
    }
    for runner in [&settings.bwrap_path, &settings.launcher_path]
        .into_iter()
        .flatten()
    {
        pins.add_control_path("runner", runner);
    }
    if let Ok(exe) = std::env::current_exe() {
        pins.add_control_path("stockade executable", &exe);
    }
}

#[cfg(not(unix))]
pub(crate) fn runner_stamp(_: &Path) -> Option<String> {
    None
}

impl SandboxProvider for LocalProvider {
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        if self.settings.runner_command.is_none()
            && let Some(rung) = self.platform_rung()
        {
            return rung.confine(argv, policy);
        }
        #[cfg(unix)]
        {
            self.confine_unix(argv, policy)
        }
        #[cfg(not(unix))]
        {
            let _ = (argv, policy);
            Err(SandboxUnavailable::single(
                "none",
                "no sandbox backend exists for this platform in this build",
            ))
        }
    }

    /// Only a mounted rung allocates per session (the Windows private
    /// temp); the Unix backends grant the shared temp roots and hold nothing
    /// per session. Forwarded even under `runner_command`, which never
    /// reaches the rung: ending a session the rung never saw is a no-op.
    fn end_session(&self, session: &str) -> Result<(), stockade_core::SessionEndError> {
        #[cfg(unix)]
        self.proxies.set_approval(Some(session), None);
        #[cfg(target_os = "linux")]
        self.path_approvals.set(Some(session), None);
        match self.platform_rung() {
            Some(rung) => rung.end_session(session),
            None => Ok(()),
        }
    }
}

impl LocalProvider {
    #[cfg(unix)]
    fn protections(&self, backend: Backend) -> Vec<Protection> {
        confine::protections_for(backend, self.host_facts(), &self.settings.allow_sockets)
    }

    #[cfg(unix)]
    fn gaps(&self, backend: Backend) -> Vec<stockade_core::Gap> {
        let mut out = confine::gaps_for(
            backend,
            stockade_core::ConfiningMode::WorkspaceWrite,
            self.host_facts().landlock_abi,
            self.host_facts().supervised,
            &self.settings.allow_sockets,
        );
        out.extend(confine::network_gaps_for(
            backend,
            self.host_facts().landlock_abi,
        ));
        out.push(confine::after_run_gap());
        out
    }

    #[cfg(not(unix))]
    fn protections(&self, _: Backend) -> Vec<Protection> {
        Vec::new()
    }

    #[cfg(not(unix))]
    fn gaps(&self, _: Backend) -> Vec<stockade_core::Gap> {
        Vec::new()
    }
}

#[cfg(unix)]
impl LocalProvider {
    fn host_facts(&self) -> &confine::HostFacts {
        self.host_facts.get_or_init(|| {
            let (abi, supervised) = match self.platform {
                Platform::Linux => (
                    self.host.landlock_abi(),
                    self.host.landlock_supervision().is_ok(),
                ),
                _ => (None, false),
            };
            confine::HostFacts::gather(|p| p.exists(), abi, supervised)
        })
    }

    fn confine_unix(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        // The run's composition: nothing it confines starts before this
        // returns (a probe, when `auto` selects here, runs only stockade's
        // own fixed command in a directory of its own), so a path is
        // resolved once within it (`stockade_roots::Composing`); the scope
        // ends here, before the spawn and the after-run audit.
        let _composing = stockade_roots::composing();
        // Extra roots are held before the runners are checked, so a runner
        // beneath one is refused like a runner beneath the workspace.
        for given in policy.extra_roots() {
            self.pins
                .extra_root(given)
                .map_err(|e| SandboxUnavailable::single(confine::ROOTS, e.to_string()))?;
        }
        let guards = confine::runner_guards(&self.pins, policy.workspace_root());
        if let Some(command) = &self.settings.runner_command {
            return runner_command::OperatorRunner {
                provider: self,
                command,
                guards: &guards,
            }
            .confine(argv, policy);
        }
        let selected = self.selected_guarding(&guards)?;
        let chain = linux_chain::Chain {
            provider: self,
            selected,
            guards: &guards,
        };
        match selected.backend {
            SelectedBackend::Seatbelt => seatbelt::Seatbelt {
                runner: &selected.runner,
                host: self.host.as_ref(),
            }
            .confine(argv, policy),
            SelectedBackend::Linux(Backend::Bwrap) => bwrap::Bwrap(chain).confine(argv, policy),
            SelectedBackend::Linux(Backend::Landlock) => {
                landlock::Landlock(chain).confine(argv, policy)
            }
        }
    }
}

#[cfg(test)]
mod tests;
