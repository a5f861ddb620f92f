use std::ffi::OsString;

use stockade_core::{Confined, SandboxPolicy, SandboxUnavailable, SessionEndError};

use crate::{BackendReport, Platform};

/// A platform's backend built in a crate of its own. The Windows
/// restricted-token rung lives in `stockade-windows`, which depends on this
/// crate (never the reverse) and is mounted with
/// [`LocalProvider::with_rung`](crate::LocalProvider::with_rung). Without a
/// mounted rung that platform's chain fails closed.
pub trait PlatformRung: Send + Sync {
    /// The one platform this rung serves.
    fn platform(&self) -> Platform;
    /// Its backend name, as in [`Confined::backend`].
    fn backend(&self) -> &'static str;
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable>;
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
