//! How the Linux chain enforces a call's network mode: `deny` is a private
//! network namespace (bwrap) or no network socket at all (landlock-run);
//! `allow-listed` adds the session's proxy as the only way out (a relay into
//! bwrap's namespace, or the proxy's port as the only TCP destination under
//! Landlock) and points the command's proxy variables at it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use stockade_core::{
    Gap, NetworkLog, NetworkLogHandle, NetworkMode, NetworkPolicy, SandboxUnavailable, gaps,
};
use stockade_proxy::{Proxy, ProxyConfig, RunToken};
use stockade_roots::{RootPins, beneath};

use crate::Backend;
use crate::profile::ProfileNet;

/// The label of a refusal that is about the network guard.
const NETWORK: &str = "network";

/// Test hook: `name=ip:port,...` resolved by the proxy instead of DNS, for
/// names under the reserved `.test` top-level domain only (RFC 6761), so it
/// can never redirect a real host.
pub const ENV_TEST_RESOLVE: &str = "STOCKADE_PROXY_RESOLVE";

/// The proxies of one provider (a session, an `exec` invocation), one per
/// allowed-host list, started on first use and stopped with the provider.
#[derive(Debug, Default)]
pub(crate) struct Proxies {
    map: Mutex<HashMap<Vec<String>, Arc<Proxy>>>,
}

/// One run's network profile, environment, log and gaps.
pub(crate) struct RunNet {
    pub profile: ProfileNet,
    pub env: Vec<(OsString, OsString)>,
    pub log: Option<NetworkLogHandle>,
    pub gaps: Vec<Gap>,
}

/// The refused hosts of one run: its token's share of the proxy's record.
#[derive(Debug)]
struct RunLog {
    proxy: Arc<Proxy>,
    token: RunToken,
}

impl NetworkLog for RunLog {
    fn refused(&self) -> Vec<String> {
        self.proxy.refused(&self.token)
    }
}

fn refused(detail: impl std::fmt::Display) -> SandboxUnavailable {
    SandboxUnavailable::single(NETWORK, detail.to_string())
}

/// `name=ip:port` pairs for `.test` names; anything else is ignored.
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
    /// The proxy for `hosts`, started on first use with its Unix socket in a
    /// fresh private directory beneath `dir` (never beneath a writable root:
    /// a confined run could put its own listener in the socket's place).
    fn get(
        &self,
        hosts: &[String],
        dir: Option<&Path>,
        pins: &RootPins,
    ) -> Result<Arc<Proxy>, SandboxUnavailable> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = map.get(hosts) {
            return Ok(p.clone());
        }
        let unix_dir = match dir {
            Some(d) => Some(private_dir(d, pins)?),
            None => None,
        };
        let proxy = Proxy::start(ProxyConfig {
            allowed_hosts: hosts.to_vec(),
            resolve: test_resolve(std::env::var_os(ENV_TEST_RESOLVE)),
            unix_dir: unix_dir.clone(),
        })
        .map_err(|e| refused(format!("cannot start the allow-listed proxy: {e}")))?;
        if let Some(d) = &unix_dir {
            pins.add_control_path("proxy socket directory", d);
        }
        let proxy = Arc::new(proxy);
        map.insert(hosts.to_vec(), proxy.clone());
        Ok(proxy)
    }
}

/// `<dir>/proxy-XXXX`, mode 0700, refused beneath a writable root.
fn private_dir(dir: &Path, pins: &RootPins) -> Result<PathBuf, SandboxUnavailable> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
        .map_err(|e| refused(format!("cannot create {}: {e}", dir.display())))?;
    let resolved = std::fs::canonicalize(dir)
        .map_err(|e| refused(format!("cannot resolve {}: {e}", dir.display())))?;
    if let Some(root) = beneath(&resolved, &pins.all_writable_paths()) {
        return Err(refused(format!(
            "the proxy's socket directory {} lies beneath the writable root {}, where a confined command could replace the socket",
            resolved.display(),
            root.display()
        )));
    }
    let made = tempfile_dir(&resolved).map_err(|e| {
        refused(format!(
            "cannot create a private directory in {}: {e}",
            resolved.display()
        ))
    })?;
    Ok(made)
}

/// A fresh directory under `dir` that only this user can enter.
fn tempfile_dir(dir: &Path) -> std::io::Result<PathBuf> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("proxy-{}-{name}", std::process::id()));
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(&path)?;
    Ok(path)
}

/// What `policy` means for one run on `backend` (`None`: an operator
/// runner, which has no relay and so cannot host the proxy). `supervised`:
/// this host can run landlock-run's supervisor
/// (`stockade_core::supervision`), which governs connect where Landlock
/// has no TCP rights.
pub(crate) fn for_run(
    proxies: &Proxies,
    backend: Option<Backend>,
    policy: &NetworkPolicy,
    landlock_abi: Option<u8>,
    supervised: bool,
    dir: Option<&Path>,
    pins: &RootPins,
) -> Result<RunNet, SandboxUnavailable> {
    let mut run = RunNet {
        profile: ProfileNet::Host,
        env: Vec::new(),
        log: None,
        gaps: Vec::new(),
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
            // bwrap reaches the proxy through its Unix socket; Landlock
            // through its loopback port.
            let proxy = proxies.get(&policy.allowed_hosts, dir.filter(|_| bwrap_like), pins)?;
            let unix = proxy.unix_path().map(Path::to_path_buf);
            if bwrap_like && unix.is_none() {
                return Err(refused(
                    "allow-listed under bwrap needs a private directory for the proxy's socket ($XDG_RUNTIME_DIR, $XDG_CACHE_HOME or $HOME)",
                ));
            }
            let token = proxy.run_token();
            let url = OsString::from(proxy.url_for(&token));
            for name in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
            ] {
                run.env.push((name.into(), url.clone()));
            }
            for name in ["NO_PROXY", "no_proxy"] {
                run.env
                    .push((name.into(), "localhost,127.0.0.1,::1".into()));
            }
            run.profile = ProfileNet::Proxy {
                port: proxy.port(),
                unix,
            };
            run.log = Some(NetworkLogHandle(Arc::new(RunLog { proxy, token })));
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

    #[test]
    fn the_test_resolver_takes_only_test_names() {
        let m = test_resolve(Some(
            "allowed.test=127.0.0.1:8080,crates.io=127.0.0.1:1,bad,x.test=nope".into(),
        ));
        assert_eq!(m.len(), 1);
        assert_eq!(m["allowed.test"], ["127.0.0.1:8080".parse().unwrap()]);
        assert!(test_resolve(None).is_empty());
    }

    /// Below Landlock ABI 4 without the supervisor nothing restricts TCP,
    /// so `allow-listed` under Landlock is refused (naming the ABI and the
    /// flags that choose what can run), never run with TCP open; with the
    /// supervisor it runs (landlock-run governs connect), without the
    /// by-port gap; bwrap and ABI 4 are unaffected.
    #[test]
    fn allow_listed_under_landlock_below_abi_4_needs_the_supervisor() {
        let pins = RootPins::without_temp_roots();
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
                &listed,
                abi,
                sup,
                None,
                &pins,
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
                &listed,
                Some(abi),
                sup,
                None,
                &pins,
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
                &p,
                Some(3),
                false,
                None,
                &pins,
            )
            .unwrap();
        }
    }
}
