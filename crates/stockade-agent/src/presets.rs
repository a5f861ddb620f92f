//! Permission presets: one product-facing choice over every policy knob
//! (file mode, network, approval).

use std::sync::Arc;

use stockade_core::{ApprovalPolicy, NetworkMode, SandboxMode};
use stockade_session::{KnobSource, Session, SessionError};

use crate::approval::ApprovalService;
use crate::policy::PolicyService;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "PresetSpec")]
pub struct Preset {
    pub name: String,
    pub mode: SandboxMode,
    pub approval: ApprovalPolicy,
    /// Left out of a table entry, the default that goes with `mode`.
    pub network: NetworkMode,
}

impl Preset {
    /// A preset whose network is the default that goes with `mode`.
    pub fn new(name: impl Into<String>, mode: SandboxMode, approval: ApprovalPolicy) -> Self {
        Self {
            name: name.into(),
            mode,
            approval,
            network: NetworkMode::default_for(mode),
        }
    }

    pub fn with_network(mut self, network: NetworkMode) -> Self {
        self.network = network;
        self
    }
}

/// A table entry as written: `network` may be left out, and its default
/// depends on `mode`, which a field default cannot see.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetSpec {
    name: String,
    mode: SandboxMode,
    approval: ApprovalPolicy,
    network: Option<NetworkMode>,
}

impl From<PresetSpec> for Preset {
    fn from(p: PresetSpec) -> Self {
        let preset = Preset::new(p.name, p.mode, p.approval);
        match p.network {
            Some(n) => preset.with_network(n),
            None => preset,
        }
    }
}

/// What a current combination outside the table reads as.
pub const CUSTOM: &str = "custom";

#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error("permission presets need an approval service (configure [approval])")]
    NoApprovalService,
    #[error("permission presets need a confining executor (a sandboxed bash executor)")]
    NotConfining,
    #[error("preset {name:?} appears twice in the table")]
    Duplicate { name: String },
    #[error("preset name {CUSTOM:?} is reserved for combinations outside the table")]
    Reserved,
    /// `danger-full-access` confines nothing, the network included, so a
    /// narrower network beside it could never be what the session runs.
    #[error(
        "preset {name:?}: danger-full-access runs unconfined, so its network is always \"allow\", never \"{network}\""
    )]
    UnconfinedNetwork { name: String, network: NetworkMode },
    #[error("unknown preset {name:?}: expected one of {}", .valid.join(", "))]
    Unknown { name: String, valid: Vec<String> },
    #[error(transparent)]
    Session(#[from] SessionError),
}

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
        for (i, p) in presets.iter().enumerate() {
            if p.name == CUSTOM {
                return Err(PresetError::Reserved);
            }
            if presets[..i].iter().any(|q| q.name == p.name) {
                return Err(PresetError::Duplicate {
                    name: p.name.clone(),
                });
            }
            if p.mode == SandboxMode::DangerFullAccess && p.network != NetworkMode::Allow {
                return Err(PresetError::UnconfinedNetwork {
                    name: p.name.clone(),
                    network: p.network,
                });
            }
        }
        Ok(Self {
            presets,
            policy,
            approval,
        })
    }

    pub fn presets(&self) -> &[Preset] {
        &self.presets
    }

    /// Record only the knobs whose effective value changes; a no-op
    /// selection records nothing. Returns how many events were appended.
    pub fn select(&self, session: &Session, name: &str) -> Result<usize, PresetError> {
        let preset = self
            .presets
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| PresetError::Unknown {
                name: name.to_owned(),
                valid: self.presets.iter().map(|p| p.name.clone()).collect(),
            })?;
        let source = || KnobSource::Preset {
            name: preset.name.clone(),
        };
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

    /// The preset the current combination is, or `custom`.
    pub fn current(&self, session: &Session) -> &str {
        let mode = self.policy.effective_mode(Some(session));
        let network = self.policy.effective_network(Some(session));
        let approval = self.approval.policy(session);
        self.presets
            .iter()
            .find(|p| p.mode == mode && p.network == network && p.approval == approval)
            .map_or(CUSTOM, |p| p.name.as_str())
    }
}
