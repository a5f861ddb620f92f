//! The allow-listed network proxy: an HTTP/HTTPS forward proxy on loopback
//! that lets a sandboxed command reach only the hosts its policy names.
//!
//! There is no TLS interception. HTTPS arrives as `CONNECT host:port` and is
//! judged by the host NAME the client asked for; plain HTTP arrives in
//! absolute form (`GET http://host/path`, whose Host header must name the
//! same host) and is judged the same way, then forwarded. Matching is
//! [`stockade_core::net::HostPattern`]'s, so the policy and the proxy can
//! never disagree about what a pattern means.
//!
//! A name is then resolved once and each address judged: loopback,
//! private, link-local (cloud metadata), CGNAT, unique-local, multicast,
//! unspecified, documentation and other special-purpose addresses, and
//! IPv6 forms carrying one, are never connected to unless `allowed_hosts`
//! lists the address or its range; the connection goes to an address that
//! passed, never to a fresh lookup. Targets are read strictly: no
//! percent-encoding, control bytes, user names or zone ids, and a name that
//! reads as a number (`2130706433`, `0x7f.1`, `127.1`) is refused.
//!
//! The caller is synchronous: [`Proxy::start`] binds, spawns one thread, and
//! returns; dropping the [`Proxy`] stops it. The thread sleeps in `poll` on
//! the listeners until the first client connects, and only then builds its
//! single-threaded tokio runtime, so a run that never uses the network pays
//! for its listeners and a sleeping thread, not a runtime. Inside
//! [`wait_on_runtime`] (a caller that awaits its whole run on a tokio
//! runtime, as `stockade exec` does) not even the thread: the caller's
//! runtime waits for the first client, and the thread starts with it.
//! Each run gets a [`RunToken`] carried as the password of its proxy URL, so what a run was
//! refused can be told back to it. The proxy prints nothing;
//! [`Proxy::refused`] and [`Proxy::problems`] are how the caller learns what
//! happened.
//!
//! A run may instead ask about hosts not on the list
//! ([`Proxy::run_token_asking`] with a [`HostApproval`]): such a request is
//! held while a [`HostApprover`] is asked [`HostQuestion`] `{ host, port }`
//! (a strictly read host name, never an address or free text), once per
//! host per command, at most [`DEFAULT_MAX_QUESTIONS`] per command and
//! [`MAX_OUTSTANDING`] at once by default, for at most [`DEFAULT_TIMEOUT`].
//! Allowed, it proceeds exactly as for a listed host (addresses still
//! judged); refused, timed out or withdrawn, the command gets today's
//! `403` and `x-stockade-denied`. [`HostGrants`] is the session's memory of
//! `AllowForSession` and `Refuse`, kept by the caller across commands. The
//! `approval` module says the rest.
#![forbid(unsafe_code)]

mod address;
mod approval;
#[cfg(unix)]
mod lazy;
mod ledger;
#[cfg(target_os = "linux")]
mod relay;
mod service;
mod target;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use stockade_core::net::{HostPattern, HostPatternError};
use tokio::sync::{Semaphore, oneshot};

use crate::approval::Scope;
use crate::ledger::Ledger;
use crate::service::Shared;

#[cfg(unix)]
pub use crate::lazy::wait_on_runtime;
#[cfg(target_os = "linux")]
pub use crate::relay::{hand_over, hand_over_connection};

/// Off Unix proxies always have their thread: `fut` runs as it is.
#[cfg(not(unix))]
pub async fn wait_on_runtime<F: std::future::Future>(fut: F) -> F::Output {
    fut.await
}

pub use crate::approval::{
    DEFAULT_MAX_QUESTIONS, DEFAULT_TIMEOUT, GrantError, HostAnswer, HostApproval, HostApprover,
    HostGrants, HostQuestion, HostReply, MAX_OUTSTANDING,
};

/// Connections served at once; more wait in the listen backlog, so a
/// runaway command cannot exhaust the session's descriptors through us.
const MAX_CONNECTIONS: usize = 256;

/// How long a client may take to send its request line and headers (and so
/// how long an idle keep-alive connection keeps its slot). Tunnels, once
/// open, are never timed out.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// The user name of every run's proxy URL; the run's token is its password.
pub const PROXY_USER: &str = "stockade";

/// What the proxy lets through and where it listens.
#[derive(Debug, Clone, Default)]
pub struct ProxyConfig {
    /// Validated host patterns (exact or `*.suffix`), as
    /// [`stockade_core::net::parse_hosts`] returns.
    pub allowed_hosts: Vec<String>,
    /// Test hook: names resolved here instead of DNS (e.g. `allowed.test`
    /// -> `127.0.0.1:PORT`); the addresses are used as given, port included.
    /// Empty in production.
    pub resolve: HashMap<String, Vec<SocketAddr>>,
    /// Also serve connections a relay hands over ([`Proxy::relay_end`]),
    /// Unix only; `false` = TCP only.
    pub relay: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("allowed_hosts entry {index}: {source}")]
    Pattern {
        index: usize,
        #[source]
        source: HostPatternError,
    },
    #[error("cannot listen on 127.0.0.1: {0}")]
    BindTcp(#[source] io::Error),
    #[error("cannot make the relay's socket pair: {0}")]
    Relay(#[source] io::Error),
    #[error("a relay is not available on this platform")]
    RelayUnsupported,
    #[error("cannot start the proxy runtime: {0}")]
    Runtime(#[source] io::Error),
    #[error("cannot read the OS random source: {0}")]
    Entropy(getrandom::Error),
}

/// Attributes requests to one run: 128 random bits as hex, carried as the
/// password of the run's proxy URL. The list is the same for every request;
/// the token says whose refusals are whose and, for a run that asks
/// ([`Proxy::run_token_asking`]), whose approver is asked and whose
/// answers apply. Only the run's own command is given it (in its
/// environment), and a request without it is never asked about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunToken(String);

impl RunToken {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A running proxy. Stops on drop: the listeners close, open connections
/// and tunnels are cut, and the thread (if one started) is joined.
pub struct Proxy {
    port: u16,
    /// The relay's end of the pair ([`Proxy::relay_end`]).
    relay_end: Option<RelayEnd>,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    serving: Option<Serving>,
    /// Fallback token material, see [`Proxy::run_token`].
    seed: u128,
    issued: AtomicU64,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("port", &self.port)
            .field("relay", &self.relay_end.is_some())
            .finish_non_exhaustive()
    }
}

/// Who waits for the first client.
enum Serving {
    /// A thread of the proxy's own.
    Thread {
        thread: JoinHandle<()>,
        /// Dropped to wake a thread still waiting for its first client.
        wake: Option<Waker>,
    },
    /// The caller's runtime, until a client comes ([`wait_on_runtime`]).
    #[cfg(unix)]
    Lazy(Arc<lazy::Lazy>),
}

impl Proxy {
    /// Binds `127.0.0.1:0` (and makes the relay's pair, if asked) and starts
    /// serving on a thread of its own; inside [`wait_on_runtime`], the
    /// thread starts when the first client connects.
    pub fn start(config: ProxyConfig) -> Result<Proxy, ProxyError> {
        Self::start_with(config, HEADER_TIMEOUT, MAX_OUTSTANDING)
    }

    fn start_with(
        config: ProxyConfig,
        header_timeout: Duration,
        max_outstanding: usize,
    ) -> Result<Proxy, ProxyError> {
        let patterns = config
            .allowed_hosts
            .iter()
            .enumerate()
            .map(|(index, h)| {
                HostPattern::parse(h).map_err(|source| ProxyError::Pattern { index, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ranges = patterns.iter().filter_map(|p| p.range().copied()).collect();
        let resolve = config
            .resolve
            .into_iter()
            .map(|(h, a)| (service::normalize(&h), a))
            .collect();
        let mut seed = [0u8; 16];
        getrandom::fill(&mut seed).map_err(ProxyError::Entropy)?;
        let shared = Arc::new(Shared {
            patterns,
            ranges,
            resolve,
            ledger: Ledger::default(),
            scopes: std::sync::Mutex::default(),
            outstanding: Arc::new(Semaphore::new(max_outstanding)),
            serving: std::sync::atomic::AtomicBool::new(false),
        });

        // Bound here, on the caller's thread, so a failure is the caller's
        // error rather than a silent dead thread.
        let tcp = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(ProxyError::BindTcp)?;
        let port = tcp.local_addr().map_err(ProxyError::BindTcp)?.port();
        let (relay, relay_end) = match config.relay {
            false => (None, None),
            true => {
                let (ours, theirs) = relay_pair()?;
                (Some(ours), Some(theirs))
            }
        };

        let listeners = Listeners { tcp, relay };
        let (shutdown, stopped) = oneshot::channel::<()>();
        let proxy = |serving, relay_end| Proxy {
            port,
            relay_end,
            shared: Arc::clone(&shared),
            shutdown: Some(shutdown),
            serving: Some(serving),
            seed: u128::from_ne_bytes(seed),
            issued: AtomicU64::new(0),
        };
        #[cfg(unix)]
        let start = lazy::Start {
            port,
            shared: Arc::clone(&shared),
            header_timeout,
            stopped,
        };
        #[cfg(unix)]
        let (listeners, lazy::Start { stopped, .. }) = match lazy::wait(listeners, start) {
            Ok(lazy::Waited::Lazy(l)) => return Ok(proxy(Serving::Lazy(l), relay_end)),
            Ok(lazy::Waited::Outside(listeners, start)) => (listeners, start),
            Err(e) => return Err(ProxyError::Runtime(e)),
        };
        #[cfg(unix)]
        let (wake, woken) = match std::os::unix::net::UnixStream::pair() {
            Ok((w, r)) => (Some(w), Some(r)),
            Err(e) => return Err(ProxyError::Runtime(e)),
        };
        #[cfg(not(unix))]
        let (wake, woken): (Option<Waker>, Option<Waker>) = (None, None);
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("stockade-proxy".to_owned())
            .spawn(move || {
                serve(
                    listeners,
                    port,
                    serving,
                    header_timeout,
                    stopped,
                    woken,
                    None,
                );
            });
        let thread = thread.map_err(ProxyError::Runtime)?;
        Ok(proxy(Serving::Thread { thread, wake }, relay_end))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new descriptor for the relay's end of the pair (close-on-exec),
    /// for a relay that hands connections over ([`hand_over`]); `None` for
    /// a proxy started without `relay`. Each run's relay gets its own.
    #[cfg(unix)]
    pub fn relay_end(&self) -> io::Result<Option<std::os::fd::OwnedFd>> {
        self.relay_end.as_ref().map(|fd| fd.try_clone()).transpose()
    }

    /// Whether a client has connected, so the proxy's runtime runs. Until
    /// then the proxy is its bound listeners and one thread asleep in
    /// `poll`, or inside [`wait_on_runtime`] no thread (on Unix; elsewhere
    /// the runtime starts at once).
    pub fn is_serving(&self) -> bool {
        self.shared.serving.load(Ordering::Relaxed)
    }

    /// A fresh token for one run; requests that carry it (as the password
    /// of the proxy URL, i.e. `Proxy-Authorization: Basic
    /// base64("stockade:<token>")`, or as a bare user name) are attributed
    /// to that run.
    pub fn run_token(&self) -> RunToken {
        let n = self.issued.fetch_add(1, Ordering::Relaxed);
        let mut bytes = [0u8; 16];
        let value = match getrandom::fill(&mut bytes) {
            Ok(()) => u128::from_ne_bytes(bytes),
            // The source worked at start, so this is all but unreachable;
            // a token needs only to be unique within this proxy (it grants
            // nothing), which the start seed and a counter still give.
            Err(_) => self.seed.wrapping_add(u128::from(n) + 1),
        };
        let token = RunToken(format!("{value:032x}"));
        self.shared.ledger.register(token.as_str());
        token
    }

    /// A fresh token for one command that asks `approval`'s approver about
    /// hosts not on the list instead of refusing them at once (see the
    /// [`approval`](HostApproval) docs: what is asked, when, how long a
    /// connection is held, what the command sees). Call [`Proxy::end_run`]
    /// when the command is over, so its pending questions are withdrawn
    /// and the approver is let go.
    pub fn run_token_asking(&self, approval: HostApproval) -> RunToken {
        let token = self.run_token();
        self.lock_scopes()
            .insert(token.as_str().to_owned(), Arc::new(Scope::new(approval)));
        token
    }

    /// The command of `token` is over: its unanswered questions are
    /// withdrawn ([`HostReply::is_pending`] turns false, their connections
    /// get today's refusal) and nothing more is asked for it. Its refused
    /// and allowed hosts stay readable. A token that never asked: nothing.
    pub fn end_run(&self, token: &RunToken) {
        let scope = self.lock_scopes().remove(token.as_str());
        if let Some(s) = scope {
            s.end();
        }
    }

    fn lock_scopes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Scope>>> {
        // A map of Arcs: a panic elsewhere cannot leave it half-written.
        self.shared
            .scopes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The proxy URL for a run: `http://stockade:<token>@127.0.0.1:<port>`.
    /// A password, not only a user name: Python's urllib (and so pip's
    /// fallbacks) sends no `Proxy-Authorization` for a user without one,
    /// which left a run's refusals unattributed. The token is hex, so it
    /// needs no percent-encoding in any client's URL parser.
    pub fn url_for(&self, token: &RunToken) -> String {
        format!(
            "http://{PROXY_USER}:{}@127.0.0.1:{}",
            token.as_str(),
            self.port
        )
    }

    /// Hosts refused for this run so far, deduplicated, in order.
    pub fn refused(&self, token: &RunToken) -> Vec<String> {
        self.shared.ledger.run(token.as_str()).refused
    }

    /// Hosts allowed for this run so far, deduplicated, in order.
    pub fn allowed(&self, token: &RunToken) -> Vec<String> {
        self.shared.ledger.run(token.as_str()).allowed
    }

    /// Hosts refused to requests that carried no token this proxy issued.
    pub fn refused_unattributed(&self) -> Vec<String> {
        self.shared.ledger.unattributed().refused
    }

    /// Hosts allowed to requests that carried no token this proxy issued.
    pub fn allowed_unattributed(&self) -> Vec<String> {
        self.shared.ledger.unattributed().allowed
    }

    /// The proxy's own failures (a listener it could not serve, accept
    /// errors), once each. The proxy prints nothing: the caller decides
    /// where such lines go (see `ledger`).
    pub fn problems(&self) -> Vec<String> {
        self.shared.ledger.problems()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // After the send: a thread that wakes to a client now still finds
        // the stop waiting for its runtime.
        match self.serving.take() {
            Some(Serving::Thread { thread, wake }) => {
                // Closed here, before the join: wakes a thread still in
                // its first `poll`.
                {
                    let _closed = wake;
                }
                // A panicked proxy thread has nothing left to clean up.
                let _ = thread.join();
            }
            #[cfg(unix)]
            Some(Serving::Lazy(l)) => l.stop(),
            None => {}
        }
    }
}

/// The proxy's listeners, bound before [`Proxy::start`] returns: the TCP
/// one, and the proxy's end of the relay's pair.
struct Listeners {
    tcp: std::net::TcpListener,
    relay: Option<RelaySocket>,
}

/// A client accepted before the proxy's runtime started: the first one,
/// accepted on the caller's runtime (see [`wait_on_runtime`]).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Accepted {
    Tcp(std::net::TcpStream),
    Unix(UnixStream),
}

/// The stop signal of a thread that has no runtime yet: one end of a
/// socket pair, whose other end the [`Proxy`] drops to stop it.
#[cfg(unix)]
type Waker = std::os::unix::net::UnixStream;
#[cfg(not(unix))]
type Waker = std::convert::Infallible;

/// The proxy thread. Most runs never use the network, so the runtime (and
/// its allocator arena, epoll set and timer wheel) is built only once a
/// client has connected; until then the thread sleeps in one `poll` and
/// touches nothing. The listeners exist from the start, so a client that
/// connects at once waits in the backlog, never meets a refusal.
fn serve(
    listeners: Listeners,
    port: u16,
    shared: Arc<Shared>,
    header_timeout: Duration,
    stopped: oneshot::Receiver<()>,
    woken: Option<Waker>,
    first: Option<Accepted>,
) {
    #[cfg(unix)]
    if let Some(stop) = &woken
        && !first_client(&listeners, stop)
    {
        return;
    }
    #[cfg(not(unix))]
    let _ = woken;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            // The listeners close with this thread: the command's
            // connections are refused, and the run says why.
            shared
                .ledger
                .problem(format!("cannot start the proxy runtime: {e}"));
            return;
        }
    };
    shared.serving.store(true, Ordering::Relaxed);
    let Listeners { tcp, relay } = listeners;
    runtime.block_on(async move {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        if let Some(client) = first {
            serve_first(client, &shared, &slots, header_timeout);
        }
        match tokio::net::TcpListener::from_std(tcp) {
            Ok(l) => {
                tokio::spawn(accept_tcp(
                    l,
                    Arc::clone(&shared),
                    Arc::clone(&slots),
                    header_timeout,
                ));
            }
            Err(e) => shared
                .ledger
                .problem(format!("cannot serve 127.0.0.1:{port}: {e}")),
        }
        #[cfg(target_os = "linux")]
        if let Some(relay) = relay {
            match tokio::net::UnixDatagram::from_std(relay) {
                Ok(r) => {
                    tokio::spawn(accept_relayed(r, shared, slots, header_timeout));
                }
                Err(e) => shared
                    .ledger
                    .problem(format!("cannot serve the relay: {e}")),
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _: Option<RelaySocket> = relay;
        // Either a send or the sender's drop ends the wait.
        let _ = stopped.await;
    });
    // Dropping the runtime here cancels every task: listeners,
    // connections and tunnels all close.
    drop(runtime);
}

/// Waits until a client is queued on either listener (true) or the proxy
/// is stopped first (false). Nothing is accepted here: the runtime's
/// listeners find the client still queued (epoll reports a descriptor
/// already readable when it is added). Allocates nothing, so an unused
/// proxy costs no allocator arena.
#[cfg(unix)]
fn first_client(listeners: &Listeners, stop: &Waker) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    use std::os::fd::AsFd as _;

    // Without a relay its slot watches the stop end a second time.
    let relay = listeners
        .relay
        .as_ref()
        .map_or_else(|| stop.as_fd(), |r| r.as_fd());
    loop {
        let mut fds = [
            PollFd::from_borrowed_fd(stop.as_fd(), PollFlags::IN),
            PollFd::from_borrowed_fd(listeners.tcp.as_fd(), PollFlags::IN),
            PollFd::from_borrowed_fd(relay, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            // The stop end reports EOF (or an error) once the Proxy is
            // dropped; that wins over a client queued at the same moment.
            Ok(_) if !fds[0].revents().is_empty() => return false,
            Ok(_) if fds[1..].iter().any(|f| !f.revents().is_empty()) => return true,
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            // Cannot wait here: let the runtime do the waiting, as a
            // proxy that started eagerly would.
            Err(_) => return true,
        }
    }
}

/// Serves the client the caller's runtime accepted, as the accept loops
/// serve theirs. Called first, inside the runtime.
fn serve_first(
    client: Accepted,
    shared: &Arc<Shared>,
    slots: &Arc<Semaphore>,
    header_timeout: Duration,
) {
    // The semaphore is fresh: a slot is always there.
    let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
        return;
    };
    // Only that client is lost; the listeners serve the rest.
    if let Err(e) = adopt(client, Arc::clone(shared), slot, header_timeout) {
        shared
            .ledger
            .problem(format!("cannot serve the first client: {e}"));
    }
}

/// Serves `client` on the current runtime, holding `slot` while it lasts.
fn adopt(
    client: Accepted,
    shared: Arc<Shared>,
    slot: tokio::sync::OwnedSemaphorePermit,
    header_timeout: Duration,
) -> io::Result<()> {
    match client {
        Accepted::Tcp(s) => tokio::net::TcpStream::from_std(s).map(|s| {
            let _ = s.set_nodelay(true);
            tokio::spawn(service::serve_connection(s, shared, slot, header_timeout));
        }),
        #[cfg(unix)]
        Accepted::Unix(s) => tokio::net::UnixStream::from_std(s).map(|s| {
            tokio::spawn(service::serve_connection(s, shared, slot, header_timeout));
        }),
        #[cfg(not(unix))]
        Accepted::Unix(never) => match never {},
    }
}

async fn accept_tcp(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    header_timeout: Duration,
) {
    loop {
        // The slot is taken before accepting, so excess clients queue in
        // the kernel backlog instead of being accepted and dropped.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(service::serve_connection(
                    stream,
                    Arc::clone(&shared),
                    slot,
                    header_timeout,
                ));
            }
            Err(e) => accept_failed(&shared, e).await,
        }
    }
}

#[cfg(target_os = "linux")]
async fn accept_relayed(
    relay: tokio::net::UnixDatagram,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    header_timeout: Duration,
) {
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        match relay::next(&relay)
            .await
            .and_then(|client| adopt(client, Arc::clone(&shared), slot, header_timeout))
        {
            Ok(()) => {}
            Err(e) => accept_failed(&shared, e).await,
        }
    }
}

/// Accept errors are mostly transient (out of descriptors, a client that
/// reset while queued); pause so a persistent one cannot spin the thread.
async fn accept_failed(shared: &Shared, e: io::Error) {
    shared.ledger.problem(format!("accept failed: {e}"));
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[cfg(unix)]
type UnixStream = std::os::unix::net::UnixStream;
#[cfg(not(unix))]
type UnixStream = std::convert::Infallible;
// The relay is bwrap's, so Linux's: it needs `MSG_CMSG_CLOEXEC`, so that a
// connection handed over never leaks into a child stockade starts.
#[cfg(target_os = "linux")]
use crate::relay::RelaySocket;
#[cfg(all(unix, not(target_os = "linux")))]
type RelaySocket = std::os::unix::net::UnixDatagram;
#[cfg(not(unix))]
type RelaySocket = std::convert::Infallible;
#[cfg(unix)]
type RelayEnd = std::os::fd::OwnedFd;
#[cfg(not(unix))]
type RelayEnd = std::convert::Infallible;

#[cfg(target_os = "linux")]
fn relay_pair() -> Result<(RelaySocket, RelayEnd), ProxyError> {
    relay::pair().map_err(ProxyError::Relay)
}

#[cfg(not(target_os = "linux"))]
fn relay_pair() -> Result<(RelaySocket, RelayEnd), ProxyError> {
    Err(ProxyError::RelayUnsupported)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::io::{Read as _, Write as _};

    #[test]
    fn a_client_that_sends_no_request_line_is_dropped() {
        let proxy =
            Proxy::start_with(ProxyConfig::default(), Duration::from_millis(300), 1).unwrap();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let started = std::time::Instant::now();
        let mut buf = Vec::new();
        // EOF (or a reset) rather than the read timeout: the proxy hung up.
        let _ = s.read_to_end(&mut buf);
        assert!(started.elapsed() < Duration::from_secs(5));
        // The slot came back: a new client is still served.
        let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut line = [0u8; 12];
        s.read_exact(&mut line).unwrap();
        assert_eq!(&line, b"HTTP/1.1 400");
    }

    /// Nothing but the listeners and a sleeping thread until a client
    /// connects: no runtime for a run that never uses the network. A
    /// client that connects the moment `start` returns is served (the
    /// listener existed), on the TCP listener or handed over by a relay,
    /// and a proxy dropped unused closes its listeners.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_runtime_starts_on_the_first_client_only() {
        let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let relayed = || ProxyConfig {
            relay: true,
            ..ProxyConfig::default()
        };
        let unused = Proxy::start(relayed()).unwrap();
        let port = unused.port();
        // Long enough for an eager thread to have built its runtime.
        std::thread::sleep(Duration::from_millis(300));
        assert!(!unused.is_serving(), "the runtime started with no client");
        drop(unused);
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());

        for relay in [false, true] {
            let proxy = Proxy::start(relayed()).unwrap();
            let mut line = [0u8; 12];
            if relay {
                let end = proxy.relay_end().unwrap().unwrap();
                let mut s = hand_over(std::os::fd::AsFd::as_fd(&end)).unwrap();
                s.write_all(request).unwrap();
                s.read_exact(&mut line).unwrap();
            } else {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
                s.write_all(request).unwrap();
                s.read_exact(&mut line).unwrap();
            }
            assert_eq!(&line, b"HTTP/1.1 400", "relay {relay}");
            assert!(proxy.is_serving(), "relay {relay}");
        }
    }

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let proxy = Proxy::start(ProxyConfig::default()).unwrap();
        let a = proxy.run_token();
        let b = proxy.run_token();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(
            proxy.url_for(&a),
            format!("http://stockade:{a}@127.0.0.1:{}", proxy.port())
        );
    }

    #[test]
    fn a_bad_pattern_is_refused_at_start() {
        let err = Proxy::start(ProxyConfig {
            allowed_hosts: vec!["ok.example".into(), "https://x".into()],
            ..ProxyConfig::default()
        })
        .unwrap_err();
        assert!(matches!(err, ProxyError::Pattern { index: 1, .. }), "{err}");
    }
}
