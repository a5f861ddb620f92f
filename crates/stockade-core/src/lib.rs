//! The stockade vocabulary and the provider seam.
//!
//! Everything here is pure data and logic: no I/O, no processes. The local
//! backends, the shell executors and the tools all speak these types, so the
//! vocabulary can never grow silently in one place and not another.
#![forbid(unsafe_code)]

pub mod files;
pub mod gaps;
mod mode;
pub mod net;
mod policy;
mod provider;
pub mod run_approval;
mod runner_failure;
pub mod status;
pub mod supervision;
pub mod texts;

pub use files::FilePolicy;
pub use mode::{
    ApprovalOutcome, ApprovalPolicy, ConfiningMode, Enforcement, NetworkMode, ParseVocabularyError,
    SandboxMode,
};
pub use net::NetworkPolicy;
pub use policy::{ExecutionPolicy, SandboxPolicy};
pub use provider::{
    AfterRun, AfterRunHandle, AfterRunReport, BackendAttempt, Confined, Direct, DirectRelay, Gap,
    NetworkLog, NetworkLogHandle, PassFd, QuarantineReason, Quarantined, SANDBOX_UNAVAILABLE,
    SandboxProvider, SandboxUnavailable, SessionEndError, StatusChannel,
};
pub use run_approval::{
    PathOp, ReplyTo, RunAnswer, RunApproval, RunApprover, RunQuestion, RunReply,
};
pub use runner_failure::{FatalLine, RunnerFailureRule};
