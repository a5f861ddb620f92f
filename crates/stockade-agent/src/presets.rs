//! Permission presets: one product-facing choice over both policy knobs.

use std::sync::Arc;

use stockade_core::{ApprovalPolicy, SandboxMode};
use stockade_session::{KnobSource, Session, SessionError};

use crate::approval::ApprovalService;
use crate::policy::PolicyService;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Preset {
    pub name: String,
    pub mode: SandboxMode,
    pub approval: ApprovalPolicy,
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
    /// `workspace-write` = workspace-write + ask, `danger-full-access` =
    /// danger-full-access + never.
    pub fn default_table() -> Vec<Preset> {
        vec![
            Preset {
                name: "workspace-write".into(),
                mode: SandboxMode::WorkspaceWrite,
                approval: ApprovalPolicy::Ask,
            },
            Preset {
                name: "danger-full-access".into(),
                mode: SandboxMode::DangerFullAccess,
                approval: ApprovalPolicy::Never,
            },
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
        if self.approval.policy(session) != preset.approval {
            session.set_approval_policy(preset.approval, source())?;
            appended += 1;
        }
        Ok(appended)
    }

    /// The preset the current combination is, or `custom`.
    pub fn current(&self, session: &Session) -> &str {
        let mode = self.policy.effective_mode(Some(session));
        let approval = self.approval.policy(session);
        self.presets
            .iter()
            .find(|p| p.mode == mode && p.approval == approval)
            .map_or(CUSTOM, |p| p.name.as_str())
    }
}
