//! Permission presets: one product-facing choice over every policy knob
//! (file mode, network, approval).

use std::sync::Arc;

use stockade_core::{ApprovalPolicy, SandboxMode};
use stockade_session::{KnobSource, Session};

use crate::approval::ApprovalService;
use crate::policy::PolicyService;

mod table;

pub use table::{CONFIGURED, CUSTOM, Preset, PresetError, check_table};

pub struct PresetService {
    presets: Vec<Preset>,
    policy: Arc<PolicyService>,
    approval: Arc<ApprovalService>,
}

impl PresetService {
    /// Narrowest first: `read-only` = read-only + network deny + ask,
    /// `workspace-write` = workspace-write + allow-listed + ask,
    /// `danger-full-access` = danger-full-access + allow + never.
    pub fn default_table() -> Vec<Preset> {
        vec![
            Preset::new("read-only", SandboxMode::ReadOnly, ApprovalPolicy::Ask),
            Preset::new(
                "workspace-write",
                SandboxMode::WorkspaceWrite,
                ApprovalPolicy::Ask,
            ),
            Preset::new(
                "danger-full-access",
                SandboxMode::DangerFullAccess,
                ApprovalPolicy::Never,
            ),
        ]
    }

    /// A partial composition fails loud here rather than offering a switch
    /// that cannot mean what it says.
    pub fn new(
        presets: Vec<Preset>,
        policy: Arc<PolicyService>,
        approval: Option<Arc<ApprovalService>>,
        executor_confines: bool,
    ) -> Result<Self, PresetError> {
        let approval = approval.ok_or(PresetError::NoApprovalService)?;
        if !executor_confines {
            return Err(PresetError::NotConfining);
        }
        check_table(&presets).map_err(|(_, e)| e)?;
        Ok(Self {
            presets,
            policy,
            approval,
        })
    }

    pub fn presets(&self) -> &[Preset] {
        &self.presets
    }

    /// The configured default combination, named [`CONFIGURED`].
    pub fn configured(&self) -> Preset {
        let mode = self.policy.default_mode();
        Preset::new(CONFIGURED, mode, self.approval.default_policy())
            .with_network(self.policy.default_network(mode))
    }

    /// Whether [`CONFIGURED`] is offered as a choice of its own: no preset
    /// of the table is the configured default (when one is, that preset is
    /// the way back to it).
    pub fn offers_configured(&self) -> bool {
        let c = self.configured();
        !self.presets.iter().any(|p| same_knobs(p, &c))
    }

    /// What [`Self::select`] takes in `session` now, in the order to offer
    /// them: the table, [`CONFIGURED`] when offered, [`CUSTOM`] while it is
    /// the current state.
    pub fn choices(&self, session: &Session) -> Vec<String> {
        let mut out: Vec<String> = self.presets.iter().map(|p| p.name.clone()).collect();
        if self.offers_configured() {
            out.push(CONFIGURED.to_owned());
        }
        if self.current(session) == CUSTOM {
            out.push(CUSTOM.to_owned());
        }
        out
    }

    /// Select a preset by name, or [`CONFIGURED`] (every knob back to the
    /// configured default; taken even when a preset equals it), or
    /// [`CUSTOM`] while it is the current state (nothing changes). Records
    /// only the knobs whose effective value changes, each through its own
    /// setter; a no-op selection records nothing. Returns how many events
    /// were appended.
    pub fn select(&self, session: &Session, name: &str) -> Result<usize, PresetError> {
        if name == CONFIGURED {
            return self.apply(session, &self.configured(), || KnobSource::Config);
        }
        if name == CUSTOM && self.current(session) == CUSTOM {
            return Ok(0);
        }
        let preset = self
            .presets
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| PresetError::Unknown {
                name: name.to_owned(),
                valid: self.choices(session),
            })?;
        self.apply(session, preset, || KnobSource::Preset {
            name: preset.name.clone(),
        })
    }

    fn apply(
        &self,
        session: &Session,
        preset: &Preset,
        source: impl Fn() -> KnobSource,
    ) -> Result<usize, PresetError> {
        let mut appended = 0;
        if self.policy.effective_mode(Some(session)) != preset.mode {
            session.set_sandbox_mode(preset.mode, source())?;
            appended += 1;
        }
        // Compared after the mode moved: the network default follows the
        // mode, so a preset whose network is its mode's default needs no
        // event of its own.
        if self.policy.effective_network(Some(session)) != preset.network {
            session.set_network_mode(preset.network, source())?;
            appended += 1;
        }
        if self.approval.policy(session) != preset.approval {
            session.set_approval_policy(preset.approval, source())?;
            appended += 1;
        }
        Ok(appended)
    }

    /// The preset the current combination is, else [`CONFIGURED`] when it
    /// is the configured default, else [`CUSTOM`].
    pub fn current(&self, session: &Session) -> &str {
        let mode = self.policy.effective_mode(Some(session));
        let now = Preset::new(CUSTOM, mode, self.approval.policy(session))
            .with_network(self.policy.effective_network(Some(session)));
        match self.presets.iter().find(|p| same_knobs(p, &now)) {
            Some(p) => p.name.as_str(),
            None if same_knobs(&self.configured(), &now) => CONFIGURED,
            None => CUSTOM,
        }
    }
}

/// Whether two presets set every knob alike, whatever their names.
fn same_knobs(a: &Preset, b: &Preset) -> bool {
    a.mode == b.mode && a.network == b.network && a.approval == b.approval
}
