//! The Landlock rung: the Linux chain's second candidate, the
//! `landlock-run` launcher (Landlock, seccomp and, where the kernel has it,
//! the user-notification supervisor).

use std::ffi::OsString;

use stockade_core::{Confined, SandboxPolicy, SandboxUnavailable};

use crate::linux_chain::Chain;
use crate::{Backend, Rung, profile};

pub(crate) struct Landlock<'a>(pub Chain<'a>);

impl Rung for Landlock<'_> {
    fn backend(&self) -> &'static str {
        Backend::Landlock.as_str()
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let run = self.0.prepare(Backend::Landlock, policy)?;
        let args = profile::landlock_args(&run.prepared.profile, argv);
        Ok(self.0.finish(
            Backend::Landlock,
            policy,
            run,
            args,
            profile::LANDLOCK_DENIAL,
        ))
    }
}
