//! The bwrap rung: the first of the Linux chain. bwrap builds the mount and
//! pid namespaces; the Landlock launcher, run inside as the fd closer,
//! closes inherited descriptors before the command starts.

use std::ffi::OsString;

use stockade_core::{Confined, SandboxPolicy, SandboxUnavailable};

use crate::linux_chain::Chain;
use crate::{Backend, Rung, profile};

pub(crate) struct Bwrap<'a>(pub Chain<'a>);

impl Rung for Bwrap<'_> {
    fn backend(&self) -> &'static str {
        Backend::Bwrap.as_str()
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let mut run = self.0.prepare(Backend::Bwrap, policy)?;
        if !run.prepared.profile.allow_listen.is_empty() {
            run.prepared.gaps.push(stockade_core::Gap::new(
                stockade_core::gaps::LISTEN,
                "--allow-listen: the listener is on the sandbox's private loopback, which nothing on the host can reach (use the landlock backend for a dev server)",
            ));
        }
        let args = profile::bwrap_args(&run.prepared.profile, argv);
        Ok(self
            .0
            .finish(Backend::Bwrap, policy, run, args, profile::BWRAP_DENIAL))
    }
}
