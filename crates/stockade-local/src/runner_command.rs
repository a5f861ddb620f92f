//! The operator's rung: `runner_command`, a runner the operator asserts
//! (bwrap-compatible arguments, its own descriptor hygiene), used instead
//! of the chain.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use stockade_core::{Confined, Enforcement, SandboxPolicy, SandboxUnavailable};
use stockade_roots::beneath;

use crate::{LocalProvider, Rung, RunnerCommand, confine, network, profile};

/// The backend name of an operator runner's runs.
const BACKEND: &str = "runner-command";

pub(crate) struct OperatorRunner<'a> {
    pub provider: &'a LocalProvider,
    pub command: &'a RunnerCommand,
    /// The writable roots the runner must not lie beneath.
    pub guards: &'a [PathBuf],
}

impl Rung for OperatorRunner<'_> {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let OperatorRunner {
            provider: p,
            command: rc,
            guards,
        } = *self;
        if let Some(program) = rc.argv().first() {
            check_runner_command(Path::new(program), guards)?;
        }
        let mut prepared = confine::prepare(&p.pins, p.host_facts(), policy, None, None, &[])?;
        let net = network::for_run(
            &p.proxies,
            None,
            policy,
            p.host_facts().landlock_abi,
            p.host_facts().supervised,
        )?;
        prepared.profile.net = net.profile;
        let mut out = rc.argv().to_vec();
        // An operator-asserted runner owns its descriptor hygiene.
        out.extend(profile::bwrap_args(&prepared.profile, argv));
        // An operator runner is asserted, not ours: no status channel (its
        // failure rules alone tell a runner failure), and it gets the
        // environment as it is.
        Ok(Confined::new(out, BACKEND, Enforcement::Full)
            .with_denial_signatures(vec![profile::BWRAP_DENIAL.into()])
            .with_runner_failure_rules(profile::signature_rules(rc.failure_signatures()))
            .with_writable_roots(prepared.writable)
            .with_pass_fds(prepared.pass_fds)
            .with_gaps(prepared.gaps)
            .with_deny_read(prepared.deny_read)
            .with_read_only(prepared.read_only)
            .with_after_run(prepared.after_run))
    }
}

/// An operator runner named by path (or found on an absolute PATH entry).
fn check_runner_command(program: &Path, guards: &[PathBuf]) -> Result<(), SandboxUnavailable> {
    let resolved = if program.components().count() > 1 {
        Some(program.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .filter(|d| d.is_absolute())
                .map(|d| d.join(program))
                .find(|c| c.is_file())
        })
    };
    if let Some(path) = resolved
        && let Some(root) = beneath(&path, guards)
    {
        return Err(SandboxUnavailable::single(
            BACKEND,
            format!(
                "runner {} lies beneath the writable root {}, where a confined command could replace it",
                path.display(),
                root.display()
            ),
        ));
    }
    Ok(())
}
