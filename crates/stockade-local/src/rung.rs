use std::ffi::OsString;

use stockade_core::{Confined, SandboxPolicy, SandboxUnavailable, SessionEndError};

use crate::{BackendReport, Platform};

/// One backend: it turns a command and its resolved policy into the
/// runner's argv and the facts of the run. Every backend is one: bwrap,
/// Landlock, Seatbelt and an operator's `runner_command` in this crate, the
/// Windows restricted token in `stockade-windows`;
/// [`LocalProvider`](crate::LocalProvider) only selects one and delegates.
pub trait Rung: Send + Sync {
    /// Its backend name, as in [`Confined::backend`].
    fn backend(&self) -> &'static str;
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable>;
}

/// A platform's rung built in a crate of its own. The Windows
/// restricted-token rung lives in `stockade-windows`, which depends on this
/// crate (never the reverse) and is mounted with
/// [`LocalProvider::with_rung`](crate::LocalProvider::with_rung). Without a
/// mounted rung that platform's chain fails closed.
pub trait PlatformRung: Rung {
    /// The one platform this rung serves.
    fn platform(&self) -> Platform;
    /// Its line in `stockade probe`.
    fn report(&self) -> BackendReport;
    /// Session `session` is over (see
    /// [`SandboxProvider::end_session`](stockade_core::SandboxProvider::end_session)).
    /// A rung that allocates nothing per session keeps this default.
    fn end_session(&self, session: &str) -> Result<(), SessionEndError> {
        let _ = session;
        Ok(())
    }
}
