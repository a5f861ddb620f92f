//! Permission presets as `stockade.toml` writes them (`[[presets.preset]]`),
//! and the check a table passes at load (the schema in stockade-config
//! deserializes straight into [`Preset`]) and again when a `PresetService`
//! is built.

use stockade_core::{ApprovalPolicy, NetworkMode, SandboxMode};
use stockade_session::SessionError;

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

/// The deployment's configured default (mode, network, approval) as a
/// selection of its own: selecting it sets every knob back to what the
/// configuration says.
pub const CONFIGURED: &str = "configured";

#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error("permission presets need an approval service (configure [approval])")]
    NoApprovalService,
    #[error("permission presets need a confining executor (a sandboxed bash executor)")]
    NotConfining,
    #[error("preset {name:?} appears twice in the table")]
    Duplicate { name: String },
    #[error("a preset needs a name (it is the session mode the editor offers)")]
    EmptyName,
    #[error(
        "preset name {name:?} is reserved ({CUSTOM:?} names a combination outside the table, {CONFIGURED:?} the configured default)"
    )]
    Reserved { name: String },
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

/// A table that can be offered: every name present, none reserved or
/// repeated, and no network beside danger-full-access but `allow`. The
/// error names the entry's index. Checked when the config is loaded and
/// again when a service is built.
pub fn check_table(presets: &[Preset]) -> Result<(), (usize, PresetError)> {
    for (i, p) in presets.iter().enumerate() {
        let fail = |e| Err((i, e));
        if p.name.trim().is_empty() {
            return fail(PresetError::EmptyName);
        }
        if p.name == CUSTOM || p.name == CONFIGURED {
            return fail(PresetError::Reserved {
                name: p.name.clone(),
            });
        }
        if presets[..i].iter().any(|q| q.name == p.name) {
            return fail(PresetError::Duplicate {
                name: p.name.clone(),
            });
        }
        if p.mode == SandboxMode::DangerFullAccess && p.network != NetworkMode::Allow {
            return fail(PresetError::UnconfinedNetwork {
                name: p.name.clone(),
                network: p.network,
            });
        }
    }
    Ok(())
}
