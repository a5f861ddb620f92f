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
    Gap, NetworkLog, NetworkLogHandle, NetworkMode, SandboxPolicy, SandboxUnavailable, gaps,
};
use stockade_proxy::{HostApproval, Proxy, ProxyConfig, RunToken};
use stockade_roots::{RootPins, beneath};

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

/// A started proxy and the private directory of its Unix socket. The
/// fields drop in order: the proxy stops and removes its socket, then the
/// directory goes, once the provider and every run's log are done with it.
#[derive(Debug)]
struct Running {
    proxy: Proxy,
    _dir: Option<SocketDir>,
}

/// A directory this provider made for a proxy's socket, removed on drop.
#[derive(Debug)]
struct SocketDir(PathBuf);

impl Drop for SocketDir {
    fn drop(&mut self) {
        // Ours, 0700 and outside every writable root: nothing confined can
        // have put anything in it but the socket the proxy just removed.
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

    /// The proxy for `hosts`, started on first use; with `unix`, with its
    /// Unix socket in a fresh private directory (see [`socket_dir`]).
    fn get(
        &self,
        hosts: &[String],
        unix: bool,
        cache_dirs: &[PathBuf],
        pins: &RootPins,
    ) -> Result<Arc<Running>, SandboxUnavailable> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = map.get(hosts) {
            return Ok(p.clone());
        }
        let dir = match unix {
            true => Some(socket_dir(cache_dirs, pins)?),
            false => None,
        };
        let proxy = Proxy::start(ProxyConfig {
            allowed_hosts: hosts.to_vec(),
            resolve: test_hook_resolve(),
            unix_dir: dir.as_ref().map(|d| d.0.clone()),
        })
        .map_err(|e| refused(format!("cannot start the allow-listed proxy: {e}")))?;
        if let Some(d) = &dir {
            pins.add_control_path("proxy socket directory", &d.0);
        }
        let running = Arc::new(Running { proxy, _dir: dir });
        map.insert(hosts.to_vec(), running.clone());
        Ok(running)
    }
}

/// The longest path a Unix socket address holds (`sun_path` is 108 bytes
/// on Linux, NUL included); a longer one cannot be bound at all.
const SUN_PATH_MAX: usize = 107;

/// Where bwrap's proxy socket lives: a fresh `proxy-<pid>-<rand>`, mode
/// 0700, in the first of these that is usable:
///
/// 1. `$XDG_RUNTIME_DIR/stockade`, when `$XDG_RUNTIME_DIR` is ours and
///    private (0700), as the XDG spec promises for sockets;
/// 2. `cache_dirs` (where the verdict may be kept: `$XDG_CACHE_HOME/stockade`
///    or `~/.cache/stockade`, then `/var/tmp/stockade-<euid>`, unless the
///    operator named others);
/// 3. `/var/tmp`, whose sticky bit keeps other users from renaming what we
///    make there, and which no sandbox writes unless it is granted.
///
/// A place is usable when it lies beneath no writable root (a confined
/// command could otherwise swap the socket for its own listener and see
/// every other run's traffic; `$HOME` as the workspace puts `~/.cache`
/// there), no other user can write to it, and the socket's path fits
/// `sun_path` (a long `$XDG_RUNTIME_DIR` does not).
///
/// Why a path rather than a descriptor: the relay inside bwrap's network
/// namespace (`landlock-run --net-bridge`) opens a new connection to the
/// proxy for every connection the command makes, and a Unix socket is
/// connected to by path or by abstract name; abstract names belong to a
/// network namespace, so bwrap's private one cannot reach ours. Handing a
/// descriptor over would mean a second protocol (each accepted connection
/// sent out over `SCM_RIGHTS`) in the launcher. The checks above give the
/// same property for one `connect`: nothing the command can write is on
/// the way to the socket.
///
/// Directories left by runs that were killed (no drop ran) are swept from
/// the chosen place first.
fn socket_dir(cache_dirs: &[PathBuf], pins: &RootPins) -> Result<SocketDir, SandboxUnavailable> {
    let mut places: Vec<(PathBuf, Place)> = Vec::new();
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        places.push((rt.join("stockade"), Place::Runtime(rt)));
    }
    for c in cache_dirs {
        if !places.iter().any(|(p, _)| p == c) {
            places.push((c.clone(), Place::Cache));
        }
    }
    places.push((PathBuf::from("/var/tmp"), Place::Sticky));
    let writable = pins.all_writable_paths();
    let mut why = Vec::new();
    for (base, place) in places {
        match try_place(&base, &place, &writable) {
            Ok(dir) => return Ok(dir),
            Err(e) => why.push(format!("{}: {e}", base.display())),
        }
    }
    Err(refused(format!(
        "allow-listed under bwrap needs a private directory for the proxy's socket, outside every writable root and short enough for a socket address; none would do ({})",
        why.join("; ")
    )))
}

/// What kind of place a candidate is, for the checks that apply to it.
enum Place {
    /// `$XDG_RUNTIME_DIR/stockade`; the runtime directory itself must be
    /// ours and private.
    Runtime(PathBuf),
    /// A directory of ours, made 0700 if missing.
    Cache,
    /// A shared sticky directory: our directory goes straight into it.
    Sticky,
}

fn try_place(base: &Path, place: &Place, writable: &[PathBuf]) -> Result<SocketDir, String> {
    if let Place::Runtime(rt) = place {
        let meta = std::fs::metadata(rt).map_err(|e| e.to_string())?;
        if !ours(&meta) || mode(&meta) & 0o077 != 0 {
            return Err(format!(
                "{} is not a directory private to this user",
                rt.display()
            ));
        }
    }
    // Judged before anything is made (`beneath` resolves what exists of
    // it), so a refused place (`~/.cache` in a `$HOME` workspace) gets no
    // directory of ours.
    if let Some(root) = beneath(base, writable) {
        return Err(beneath_root(&root));
    }
    if !matches!(place, Place::Sticky) {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(base)
            .map_err(|e| format!("cannot create it: {e}"))?;
    }
    let resolved =
        stockade_roots::canonical(base).map_err(|e| format!("cannot resolve it: {e}"))?;
    if let Some(root) = beneath(&resolved, writable) {
        return Err(beneath_root(&root));
    }
    let meta = std::fs::metadata(&resolved).map_err(|e| e.to_string())?;
    let shared_ok = matches!(place, Place::Sticky) && mode(&meta) & 0o1000 != 0;
    if !shared_ok && (!ours(&meta) || mode(&meta) & 0o022 != 0) {
        return Err("another user could write to it".to_owned());
    }
    sweep(&resolved);
    let dir = fresh_dir(&resolved).map_err(|e| format!("cannot create a directory in it: {e}"))?;
    let socket_len = dir
        .0
        .join(stockade_proxy::UNIX_SOCKET_NAME)
        .as_os_str()
        .len();
    if socket_len > SUN_PATH_MAX {
        drop(dir);
        return Err(format!(
            "the socket's path would be {socket_len} bytes, longer than a socket address holds ({SUN_PATH_MAX})"
        ));
    }
    Ok(dir)
}

fn beneath_root(root: &Path) -> String {
    format!(
        "it lies beneath the writable root {}, where a confined command could replace the socket",
        root.display()
    )
}

/// A fresh directory under `dir` that only this user can enter, named for
/// this process (`proxy-<pid>-<start>-<rand>`, `<start>` its start time
/// since boot) so a later run can tell when it was left behind, even once
/// the pid names another process.
fn fresh_dir(dir: &Path) -> std::io::Result<SocketDir> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    let rand: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let pid = std::process::id();
    let start = start_time(pid).unwrap_or(0);
    let path = dir.join(format!("{DIR_PREFIX}{pid}-{start}-{rand}"));
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    // Not recursive: an existing name (a clash, or one planted) fails here
    // rather than being reused.
    b.create(&path)?;
    Ok(SocketDir(path))
}

const DIR_PREFIX: &str = "proxy-";

/// The maker named in a name [`fresh_dir`] made: its pid and start time
/// (0 when it could not be read). `None` for the start of the names older
/// versions made (`proxy-<pid>-<rand>`), which were left behind after every
/// run (a version that leaves them running keeps its socket listening).
fn dir_owner(name: &str) -> Option<(u32, Option<u64>)> {
    let rest = name.strip_prefix(DIR_PREFIX)?;
    let parts: Vec<&str> = rest.split('-').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    match parts[..] {
        [pid, start, rand] if digits(pid) && digits(start) && hex(rand) => {
            Some((pid.parse().ok()?, Some(start.parse().ok()?)))
        }
        [pid, rand] if digits(pid) && hex(rand) => Some((pid.parse().ok()?, None)),
        _ => None,
    }
}

/// Removes the socket directories in `base` that runs killed before they
/// could clean up left behind: ours, named by a process that no longer
/// runs (its pid is gone, or names a process started at another time),
/// whose socket no one answers on (a live proxy in another pid namespace
/// sharing this directory still does).
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let Some((pid, start)) = entry.file_name().to_str().and_then(dir_owner) else {
            continue;
        };
        let running = match start {
            Some(start) => alive(pid, start),
            // Told by its socket alone, below.
            None => false,
        };
        if pid == std::process::id() || running {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || !ours(&meta) {
            continue;
        }
        #[cfg(unix)]
        if std::os::unix::net::UnixStream::connect(path.join(stockade_proxy::UNIX_SOCKET_NAME))
            .is_ok()
        {
            continue;
        }
        let _ = std::fs::remove_dir_all(&path);
    }
}

/// Whether the process that made a directory still runs: `pid` exists in
/// this pid namespace and, when `start` is known, started then.
#[cfg(target_os = "linux")]
fn alive(pid: u32, start: u64) -> bool {
    match start_time(pid) {
        None => !matches!(
            Path::new("/proc").join(pid.to_string()).try_exists(),
            Ok(false)
        ),
        Some(now) => start == 0 || now == start,
    }
}

/// Without a way to ask, every process is taken to be alive: nothing is
/// swept (bwrap, the only user of the socket, is Linux only).
#[cfg(not(target_os = "linux"))]
fn alive(_pid: u32, _start: u64) -> bool {
    true
}

/// When `pid` started, in clock ticks since boot (`/proc/<pid>/stat`'s
/// 22nd field): with the pid, a process's identity across pid reuse.
#[cfg(target_os = "linux")]
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or
    // parentheses itself; the fields after its last `)` start at field 3.
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(not(target_os = "linux"))]
fn start_time(_pid: u32) -> Option<u64> {
    None
}

#[cfg(target_os = "linux")]
fn ours(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    meta.uid() == rustix::process::geteuid().as_raw()
}

#[cfg(not(target_os = "linux"))]
fn ours(_meta: &std::fs::Metadata) -> bool {
    true
}

#[cfg(unix)]
fn mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    meta.mode()
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
    dirs: &[PathBuf],
    pins: &RootPins,
) -> Result<RunNet, SandboxUnavailable> {
    let (policy, session) = (&sandbox.network, sandbox.session.as_deref());
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
            let running = proxies.get(&policy.allowed_hosts, bwrap_like, dirs, pins)?;
            let proxy = &running.proxy;
            let unix = proxy.unix_path().map(Path::to_path_buf);
            if bwrap_like && unix.is_none() {
                // Started for a Landlock run of this provider, without one.
                return Err(refused(
                    "allow-listed under bwrap needs the proxy's Unix socket, and this provider's proxy for these hosts was started without one",
                ));
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
                unix,
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
    fn only_names_fresh_dir_makes_are_read_as_their_maker() {
        assert_eq!(dir_owner("proxy-123-456-0badc0de"), Some((123, Some(456))));
        assert_eq!(dir_owner("proxy-123-0-0badc0de"), Some((123, Some(0))));
        // An older version's name.
        assert_eq!(dir_owner("proxy-123-14f1219d28b18cdf"), Some((123, None)));
        for other in [
            "proxy-123",
            "proxy--456-0bad",
            "proxy-12a-456-0bad",
            "proxy-123-456-",
            "proxy-123-456-xyz",
            "proxy-123-456-0bad-1",
            "other-123-456-0bad",
            "auto-verdict",
        ] {
            assert_eq!(dir_owner(other), None, "{other}");
        }
    }

    /// This process is alive under its own start time, not under another
    /// (its pid reused), and a pid that names nothing is not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_maker_is_alive_only_with_its_start_time() {
        let me = std::process::id();
        let start = start_time(me).unwrap();
        assert!(alive(me, start));
        assert!(alive(me, 0));
        assert!(!alive(me, start + 1));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert!(!alive(gone, 0));
    }

    /// A place beneath a writable root, one another user may write to and
    /// one too long for a socket address are each refused, and the
    /// refused place beneath a root is not even created.
    #[test]
    fn a_socket_place_is_refused_beneath_a_root_shared_or_too_long() {
        use std::os::unix::fs::PermissionsExt as _;
        let t = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(t.path()).unwrap();
        let ws = top.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let inside = ws.join(".cache/stockade");
        let e = try_place(&inside, &Place::Cache, std::slice::from_ref(&ws)).unwrap_err();
        assert!(e.contains("beneath the writable root"), "{e}");
        assert!(!ws.join(".cache").exists(), "a refused place was created");

        let shared = top.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = try_place(&shared, &Place::Cache, &[]).unwrap_err();
        assert!(e.contains("another user"), "{e}");

        let mut long = top.join("l");
        while long.as_os_str().len() < SUN_PATH_MAX {
            long.push("long-enough-name");
        }
        let e = try_place(&long, &Place::Cache, &[]).unwrap_err();
        assert!(e.contains("longer than a socket address holds"), "{e}");
        // The directory it tried is not left there.
        assert_eq!(std::fs::read_dir(&long).unwrap().count(), 0);

        let ok = try_place(&top.join("fine"), &Place::Cache, &[]).unwrap();
        assert!(ok.0.is_dir());
        let made = ok.0.clone();
        drop(ok);
        assert!(!made.exists(), "the socket directory outlived its owner");
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
                &sandbox_with(&listed),
                abi,
                sup,
                &[],
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
                &sandbox_with(&listed),
                Some(abi),
                sup,
                &[],
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
                &sandbox_with(&p),
                Some(3),
                false,
                &[],
                &pins,
            )
            .unwrap();
        }
    }
}
