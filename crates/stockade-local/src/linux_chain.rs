//! What the two rungs of the Linux chain share around their own arguments:
//! the runners checked and held as control paths, the profile prepared,
//! the loader environment and the network; then the run's facts.

use std::ffi::OsString;
use std::path::PathBuf;

use stockade_core::{Confined, NetworkLogHandle, SandboxPolicy, SandboxUnavailable};

use crate::confine::{self, Prepared};
use crate::{Backend, LocalProvider, Selected, network, profile};

/// A Linux rung's view of its provider for one call: the selection it
/// runs and the writable roots no runner may lie beneath.
#[derive(Clone, Copy)]
pub(crate) struct Chain<'a> {
    pub provider: &'a LocalProvider,
    pub selected: &'a Selected,
    pub guards: &'a [PathBuf],
}

/// A prepared run, before its rung adds its own gaps and arguments.
pub(crate) struct Run {
    pub prepared: Prepared,
    pub runner_env_remove: Vec<OsString>,
    pub network_log: Option<NetworkLogHandle>,
}

impl Chain<'_> {
    pub(crate) fn prepare(
        self,
        backend: Backend,
        policy: &SandboxPolicy,
    ) -> Result<Run, SandboxUnavailable> {
        let Chain {
            provider: p,
            selected: sel,
            guards,
        } = self;
        confine::check_runners(sel, guards)?;
        // What decides every later run: no extra root may contain it.
        for path in std::iter::once(&sel.runner).chain(sel.fd_closer.as_ref()) {
            p.pins.add_control_path("runner", path);
        }
        let mut prepared = confine::prepare(
            &p.pins,
            p.host_facts(),
            policy,
            Some(backend),
            sel.fd_closer.as_deref(),
            &p.settings.allow_sockets,
        )?;
        let (runner_env_remove, command_env) = profile::loader_env(std::env::vars_os());
        prepared.profile.command_env = command_env;
        let net = network::for_run(
            &p.proxies,
            Some(backend),
            policy,
            p.host_facts().landlock_abi,
            p.host_facts().supervised,
        )?;
        prepared.profile.net = net.profile;
        if let (Some(relay), profile::ProfileNet::Proxy { relay_fd, .. }) =
            (net.relay, &mut prepared.profile.net)
        {
            *relay_fd = Some(confine::pass_next(&mut prepared.pass_fds, relay));
        }
        prepared.profile.command_env.extend(net.env);
        prepared.gaps.extend(net.gaps);
        prepared.profile.allow_listen = policy.network.listen_ports().to_vec();
        Ok(Run {
            prepared,
            runner_env_remove,
            network_log: net.log,
        })
    }

    /// The run's facts, with `args` (the rung's arguments after the
    /// runner) and the stderr signature of its denials.
    pub(crate) fn finish(
        self,
        backend: Backend,
        policy: &SandboxPolicy,
        run: Run,
        args: Vec<OsString>,
        denial: &str,
    ) -> Confined {
        let Run {
            mut prepared,
            runner_env_remove,
            network_log,
        } = run;
        let facts = self.provider.host_facts();
        let mut gaps = confine::gaps_for(
            backend,
            policy.mode,
            facts.landlock_abi,
            facts.supervised,
            &self.provider.settings.allow_sockets,
        );
        gaps.append(&mut prepared.gaps);
        // The status channel decides runner failure; no stderr rule.
        Confined::new(
            profile::with_runner(self.selected.runner.as_os_str(), args),
            backend.as_str(),
            self.selected.enforcement,
        )
        .with_denial_signatures(vec![denial.into()])
        .with_writable_roots(prepared.writable)
        .with_pass_fds(prepared.pass_fds)
        .with_status(confine::status_channel())
        .with_gaps(gaps)
        .with_runner_env_remove(runner_env_remove)
        .with_deny_read(prepared.deny_read)
        .with_read_only(prepared.read_only)
        .with_network_log(network_log)
        .with_after_run(prepared.after_run)
    }
}
