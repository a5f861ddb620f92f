//! How the Linux chain enforces a call's network mode: `deny` is a private
//! network namespace (bwrap) or no network socket at all (landlock-run);
//! `allow-listed` adds the session's proxy as the only way out (a relay into
//! bwrap's namespace, or the proxy's port as the only TCP destination under
//! Landlock) and points the command's proxy variables at it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use stockade_core::{
    Gap, NetworkLog, NetworkLogHandle, NetworkMode, SandboxPolicy, SandboxUnavailable, gaps,
};
use stockade_proxy::{HostApproval, Proxy, ProxyConfig, RunToken};

use crate::Backend;
use crate::profile::ProfileNet;

/// The label of a refusal that is about the network guard.
const NETWORK: &str = "network";

/// Test hook: `name=ip:port,...` resolved by the proxy instead of DNS, for
/// names under the reserved `.test` top-level domain only (RFC 6761), so it
/// can never redirect a real host. Read only by a build with the
/// `test-hooks` feature: the stockade-cli suites turn it on through a
/// dev-dependency, which cargo activates only when it builds tests, so
/// `cargo test` builds the binary with the hook and `cargo build`/`cargo
/// install` without.
pub const ENV_TEST_RESOLVE: &str = "STOCKADE_PROXY_RESOLVE";

/// The proxies of one provider (a session, an `exec` invocation), one per
/// allowed-host list, started on first use and stopped with the provider.
#[derive(Debug, Default)]
pub(crate) struct Proxies {
    map: Mutex<HashMap<Vec<String>, Arc<Running>>>,
    /// Who is asked about hosts not on the list, per session (`None`: the
    /// runs of no session, such as one `exec`); a session without an entry
    /// is refused at once, as always.
    approvals: Mutex<HashMap<Option<String>, HostApproval>>,
}

/// A started proxy, stopped once the provider and every run's log are done
/// with it.
#[derive(Debug)]
struct Running {
    proxy: Proxy,
}

/// One run's network profile, environment, log and gaps.
pub(crate) struct RunNet {
    pub profile: ProfileNet,
    pub env: Vec<(OsString, OsString)>,
    pub log: Option<NetworkLogHandle>,
    pub gaps: Vec<Gap>,
    /// bwrap's relay end of the proxy, for the child (the chain numbers it
    /// and puts the number in `profile`).
    pub relay: Option<std::os::fd::OwnedFd>,
}

/// The refused hosts of one run: its token's share of the proxy's record.
#[derive(Debug)]
struct RunLog {
    running: Arc<Running>,
    token: RunToken,
    /// How many of the proxy's own problems (proxy-wide, each kept once)
    /// were known before this run: only later ones are this run's to say,
    /// so a long session does not repeat an old one after every command.
    problems_before: usize,
}

/// The run is over once its log is let go (the executor holds it as long
/// as the command runs): its unanswered questions are withdrawn.
impl Drop for RunLog {
    fn drop(&mut self) {
        self.running.proxy.end_run(&self.token);
    }
}

impl NetworkLog for RunLog {
    fn refused(&self) -> Vec<String> {
        self.running.proxy.refused(&self.token)
    }
    fn problems(&self) -> Vec<String> {
        since(self.running.proxy.problems(), self.problems_before)
    }
}

/// The problems of a list that only grows, after the first `before`.
fn since(mut all: Vec<String>, before: usize) -> Vec<String> {
    all.drain(..before.min(all.len()));
    all
}

fn refused(detail: impl std::fmt::Display) -> SandboxUnavailable {
    SandboxUnavailable::single(NETWORK, detail.to_string())
}

/// What the proxy resolves itself instead of asking DNS: nothing, unless
/// this build has the test hook and the test set [`ENV_TEST_RESOLVE`].
#[cfg(feature = "test-hooks")]
fn test_hook_resolve() -> HashMap<String, Vec<SocketAddr>> {
    test_resolve(std::env::var_os(ENV_TEST_RESOLVE))
}

#[cfg(not(feature = "test-hooks"))]
fn test_hook_resolve() -> HashMap<String, Vec<SocketAddr>> {
    HashMap::new()
}

/// `name=ip:port` pairs for `.test` names; anything else is ignored.
#[cfg(any(test, feature = "test-hooks"))]
fn test_resolve(value: Option<OsString>) -> HashMap<String, Vec<SocketAddr>> {
    let mut out: HashMap<String, Vec<SocketAddr>> = HashMap::new();
    let Some(value) = value.and_then(|v| v.into_string().ok()) else {
        return out;
    };
    for pair in value.split(',') {
        if let Some((name, addr)) = pair.split_once('=')
            && let Ok(addr) = addr.parse::<SocketAddr>()
        {
            let name = name.trim().to_ascii_lowercase();
            if name.ends_with(".test") {
                out.entry(name).or_default().push(addr);
            }
        }
    }
    out
}

impl Proxies {
    /// Asks `approval` about unlisted hosts in the later runs of `session`
    /// (`None`: clears it; runs already started keep what they had).
    pub(crate) fn set_approval(&self, session: Option<&str>, approval: Option<HostApproval>) {
        let mut map = self
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = session.map(str::to_owned);
        match approval {
            Some(a) => {
                map.insert(key, a);
            }
            None => {
                map.remove(&key);
            }
        }
    }

    fn approval(&self, session: Option<&str>) -> Option<HostApproval> {
        let map = self
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(&session.map(str::to_owned)).cloned()
    }

    /// The proxy for `hosts`, started on first use, with the socket pair
    /// a relay hands connections over on (bwrap's namespace reaches the
    /// proxy only that way; see `stockade_proxy::hand_over`).
    fn get(&self, hosts: &[String]) -> Result<Arc<Running>, SandboxUnavailable> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = map.get(hosts) {
            return Ok(p.clone());
        }
        let proxy = Proxy::start(ProxyConfig {
            allowed_hosts: hosts.to_vec(),
            resolve: test_hook_resolve(),
            relay: cfg!(target_os = "linux"),
        })
        .map_err(|e| refused(format!("cannot start the allow-listed proxy: {e}")))?;
        let running = Arc::new(Running { proxy });
        map.insert(hosts.to_vec(), running.clone());
        Ok(running)
    }
}

/// What `sandbox`'s network policy means for one run of its session on
/// `backend` (`None`: an operator runner, which has no relay and so cannot
/// host the proxy); the session picks who is asked about unlisted hosts
/// (see [`Proxies::set_approval`]). `supervised`: this host can run
/// landlock-run's supervisor (`stockade_core::supervision`), which governs
/// connect where Landlock has no TCP rights.
pub(crate) fn for_run(
    proxies: &Proxies,
    backend: Option<Backend>,
    sandbox: &SandboxPolicy,
    landlock_abi: Option<u8>,
    supervised: bool,
) -> Result<RunNet, SandboxUnavailable> {
    let (policy, session) = (&sandbox.network, sandbox.session.as_deref());
    let mut run = RunNet {
        profile: ProfileNet::Host,
        env: Vec::new(),
        log: None,
        gaps: Vec::new(),
        relay: None,
    };
    match policy.mode {
        NetworkMode::Allow => {}
        NetworkMode::Deny => run.profile = ProfileNet::Deny,
        NetworkMode::AllowListed => {
            let bwrap_like = backend != Some(Backend::Landlock);
            if backend.is_none() {
                return Err(refused(
                    "allow-listed needs stockade's own runner to relay the proxy into the sandbox; an operator runner_command cannot (use deny or allow)",
                ));
            }
            // Without Landlock's TCP rights (ABI 4) only the supervisor
            // keeps a command from connecting past the proxy (landlock-run
            // then performs every connect itself); without either, a
            // default that cannot be enforced is refused, never run
            // weakened. No Landlock at all: nothing to supervise under.
            let abi = landlock_abi.unwrap_or(0);
            if !bwrap_like && (abi == 0 || (abi < 4 && !supervised)) {
                return Err(refused(unenforceable(landlock_abi)));
            }
            // bwrap reaches the proxy through the relay end it is handed;
            // Landlock through its loopback port.
            let running = proxies.get(&policy.allowed_hosts)?;
            let proxy = &running.proxy;
            if bwrap_like {
                run.relay = relay_end(proxy)?;
            }
            // A request's own approver takes the place of the session's.
            let asking = sandbox
                .approval
                .as_ref()
                .map(crate::run_approval::hosts)
                .or_else(|| proxies.approval(session));
            let token = match asking {
                Some(a) => proxy.run_token_asking(a),
                None => proxy.run_token(),
            };
            run.env = proxy_env(&proxy.url_for(&token));
            run.profile = ProfileNet::Proxy {
                port: proxy.port(),
                relay_fd: None,
            };
            let problems_before = running.proxy.problems().len();
            run.log = Some(NetworkLogHandle(Arc::new(RunLog {
                running,
                token,
                problems_before,
            })));
        }
    }
    // Below ABI 4 the supervisor connects only to 127.0.0.1 at the
    // proxy's port: no by-port gap there.
    if backend == Some(Backend::Landlock)
        && policy.mode == NetworkMode::AllowListed
        && landlock_abi.unwrap_or(0) >= 4
    {
        run.gaps.push(Gap::new(
            gaps::NETWORK_PORT,
            "Landlock allows TCP by port only: the proxy's port is reachable on every address, not only loopback",
        ));
    }
    Ok(run)
}

/// A descriptor of the proxy's relay end for one bwrap run.
#[cfg(target_os = "linux")]
fn relay_end(proxy: &Proxy) -> Result<Option<std::os::fd::OwnedFd>, SandboxUnavailable> {
    match proxy.relay_end() {
        Ok(Some(fd)) => Ok(Some(fd)),
        Ok(None) => Err(refused(
            "allow-listed under bwrap needs the proxy's relay, and this proxy was started without one",
        )),
        Err(e) => Err(refused(format!(
            "cannot hand the proxy's relay end to the run: {e}"
        ))),
    }
}

#[cfg(not(target_os = "linux"))]
fn relay_end(_proxy: &Proxy) -> Result<Option<std::os::fd::OwnedFd>, SandboxUnavailable> {
    Err(refused("allow-listed under bwrap needs a Linux host"))
}

/// Hosts that never go through the proxy: the sandbox's own loopback (a dev
/// server the command started; bwrap's is private, Landlock's refuses every
/// port but the proxy's and the `--allow-listen` ones).
const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// What points every client the command may run at the proxy `url`.
///
/// - curl, git and cargo (libcurl), Python's urllib, requests and pip,
///   Go, and Node's `fetch` where it reads them: `http_proxy`,
///   `https_proxy`, `all_proxy` and their upper-case forms (libcurl reads
///   only the lower-case `http_proxy`, others only upper case).
/// - Node's built-in `fetch` (undici) ignores those unless
///   `NODE_USE_ENV_PROXY=1` (Node 24, 22.21): set always, an unknown
///   variable is harmless to older Node, whose `fetch` then fails to
///   resolve the name (no way out but the proxy) and says so.
/// - npm: `npm_config_proxy` / `npm_config_https_proxy` (and `noproxy`)
///   take precedence over a proxy a user's `.npmrc` names, which would
///   not be reachable from the sandbox; yarn's own names likewise.
/// - git: `GIT_HTTP_PROXY_AUTHMETHOD=basic`. git asks libcurl for "any"
///   proxy authentication, which sends no credentials until a `407`
///   challenge names a method; the proxy never challenges (it refuses no
///   one for lacking a token), so git's requests were nobody's.
/// - cargo: `CARGO_HTTP_PROXY` overrides `http.proxy` in a cargo config.
/// - pip: `PIP_PROXY` overrides `proxy` in a pip config.
///
/// The URL carries the run's token as a password, which every one of these
/// sends as `Proxy-Authorization`.
fn proxy_env(url: &str) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "CARGO_HTTP_PROXY",
        "PIP_PROXY",
    ] {
        env.push((name.into(), url.into()));
    }
    for name in ["NO_PROXY", "no_proxy", "npm_config_noproxy"] {
        env.push((name.into(), NO_PROXY.into()));
    }
    env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    env.push(("GIT_HTTP_PROXY_AUTHMETHOD".into(), "basic".into()));
    env
}

/// Why `allow-listed` cannot run under Landlock on this kernel, and the
/// flags that choose what can.
fn unenforceable(abi: Option<u8>) -> String {
    let kernel = match abi {
        Some(n) => format!("this kernel's Landlock ABI is {n}"),
        None => "this kernel has no Landlock".to_owned(),
    };
    format!(
        "allow-listed cannot be enforced under Landlock: {kernel}, and restricting TCP connections needs ABI 4 (Linux 6.7) or landlock-run's supervisor (seccomp user notification, which this host lacks), so a command could connect past the proxy; choose `--network deny` (no network) or `--network allow` (the host's network), or the bwrap backend"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_core::NetworkPolicy;

    fn sandbox_with(network: &NetworkPolicy) -> SandboxPolicy {
        SandboxPolicy::new(stockade_core::ConfiningMode::WorkspaceWrite, "/")
            .with_network(network.clone())
    }

    #[test]
    fn a_run_says_only_the_proxy_problems_that_came_after_it_started() {
        let all = |n: usize| (0..n).map(|i| format!("p{i}")).collect::<Vec<_>>();
        assert_eq!(since(all(3), 0), all(3));
        assert_eq!(since(all(3), 2), ["p2"]);
        assert!(since(all(3), 3).is_empty());
        assert!(since(all(2), 5).is_empty());
    }

    /// Every client's variable carries the same URL, with the token as a
    /// password, and git and Node are told what makes them use it.
    #[test]
    fn every_client_is_pointed_at_the_proxy_with_credentials() {
        let url = "http://stockade:00ff@127.0.0.1:9";
        let env: HashMap<String, String> = proxy_env(url)
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        for name in [
            "HTTP_PROXY",
            "https_proxy",
            "all_proxy",
            "npm_config_proxy",
            "npm_config_https_proxy",
            "CARGO_HTTP_PROXY",
            "PIP_PROXY",
        ] {
            assert_eq!(env[name], url, "{name}");
        }
        assert_eq!(env["NODE_USE_ENV_PROXY"], "1");
        assert_eq!(env["GIT_HTTP_PROXY_AUTHMETHOD"], "basic");
        assert_eq!(env["no_proxy"], NO_PROXY);
    }

    #[test]
    fn the_test_resolver_takes_only_test_names() {
        let m = test_resolve(Some(
            "allowed.test=127.0.0.1:8080,crates.io=127.0.0.1:1,bad,x.test=nope".into(),
        ));
        assert_eq!(m.len(), 1);
        assert_eq!(m["allowed.test"], ["127.0.0.1:8080".parse().unwrap()]);
        assert!(test_resolve(None).is_empty());
    }

    /// A bwrap run gets a relay end of its own (a datagram socket the
    /// proxy reads), a Landlock run none; no path names the proxy.
    #[cfg(target_os = "linux")]
    #[test]
    fn each_bwrap_run_gets_its_own_relay_end() {
        use std::os::fd::AsRawFd as _;
        let proxies = Proxies::default();
        let listed = NetworkPolicy::new(NetworkMode::AllowListed, vec!["crates.io".into()]);
        let run = |backend| {
            for_run(
                &proxies,
                Some(backend),
                &sandbox_with(&listed),
                Some(7),
                true,
            )
            .unwrap()
        };
        let (a, b) = (run(Backend::Bwrap), run(Backend::Bwrap));
        let (a, b) = (a.relay.unwrap(), b.relay.unwrap());
        assert_ne!(a.as_raw_fd(), b.as_raw_fd());
        for fd in [&a, &b] {
            assert_eq!(
                rustix::net::sockopt::socket_type(fd),
                Ok(rustix::net::SocketType::DGRAM)
            );
        }
        assert!(run(Backend::Landlock).relay.is_none());
        // One proxy for the list, however many runs.
        assert_eq!(proxies.map.lock().unwrap().len(), 1);
    }

    /// Below Landlock ABI 4 without the supervisor nothing restricts TCP,
    /// so `allow-listed` under Landlock is refused (naming the ABI and the
    /// flags that choose what can run), never run with TCP open; with the
    /// supervisor it runs (landlock-run governs connect), without the
    /// by-port gap; bwrap and ABI 4 are unaffected.
    #[test]
    fn allow_listed_under_landlock_below_abi_4_needs_the_supervisor() {
        let proxies = Proxies::default();
        let listed = NetworkPolicy::new(NetworkMode::AllowListed, vec!["crates.io".into()]);
        // (abi, supervised): no Landlock is refused even when supervised.
        let refusals = [
            (Some(3), false),
            (Some(1), false),
            (Some(0), false),
            (None, false),
            (Some(0), true),
            (None, true),
        ];
        for (abi, sup) in refusals {
            let Err(e) = for_run(
                &proxies,
                Some(Backend::Landlock),
                &sandbox_with(&listed),
                abi,
                sup,
            ) else {
                panic!("abi {abi:?}: allow-listed ran with TCP unrestricted");
            };
            let text = e.to_string();
            assert_eq!(e.attempts[0].backend, NETWORK, "{text}");
            for part in ["--network deny", "--network allow", "ABI 4"] {
                assert!(text.contains(part), "{text}");
            }
            let kernel = abi.map_or("no Landlock".to_owned(), |n| format!("Landlock ABI is {n}"));
            assert!(text.contains(&kernel), "{text}");
        }
        // No proxy was started for a refused run.
        assert!(proxies.map.lock().unwrap().is_empty());
        for (abi, sup, port_gap) in [
            (3, true, false),
            (1, true, false),
            (4, false, true),
            (4, true, true),
            (7, true, true),
        ] {
            let ok = for_run(
                &proxies,
                Some(Backend::Landlock),
                &sandbox_with(&listed),
                Some(abi),
                sup,
            )
            .unwrap();
            assert!(matches!(ok.profile, ProfileNet::Proxy { .. }), "abi {abi}");
            let gap = ok.gaps.iter().any(|g| g.name == gaps::NETWORK_PORT);
            assert_eq!(gap, port_gap, "abi {abi} supervised {sup}");
        }
        // deny and allow need no TCP rights; they still run at ABI 3
        // unsupervised.
        for mode in [NetworkMode::Deny, NetworkMode::Allow] {
            let p = NetworkPolicy::new(mode, vec![]);
            for_run(
                &proxies,
                Some(Backend::Landlock),
                &sandbox_with(&p),
                Some(3),
                false,
            )
            .unwrap();
        }
    }
}
