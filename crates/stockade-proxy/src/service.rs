//! One client connection: judge each request by its host name, resolve it
//! once, judge each address, then tunnel (CONNECT) or forward
//! (absolute-form HTTP) to a judged address, or refuse.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use stockade_core::net::{HostPattern, IpRange};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::address;
use crate::approval::Scope;
use crate::ledger::Ledger;
use crate::target::{self, Host, Target};

type Body = BoxBody<Bytes, hyper::Error>;

/// A dead upstream must not hold a client (and a connection slot) for the
/// OS's multi-minute SYN timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// What every connection shares: the policy and the record.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) patterns: Vec<HostPattern>,
    /// The address and CIDR entries: the only way to a non-public address.
    pub(crate) ranges: Vec<IpRange>,
    pub(crate) resolve: HashMap<String, Vec<SocketAddr>>,
    pub(crate) ledger: Ledger,
    /// The runs that ask about unlisted hosts, by token.
    pub(crate) scopes: std::sync::Mutex<HashMap<String, Arc<Scope>>>,
    /// Questions unanswered at once, across every run.
    pub(crate) outstanding: Arc<Semaphore>,
    /// Set once a client has connected and the runtime was built.
    pub(crate) serving: std::sync::atomic::AtomicBool,
}

/// Why a request is not let through.
enum Refusal {
    /// The name is not in the list.
    Name,
    /// An address, not a name: the allow list names hosts, and an address
    /// would let a client skip the name check altogether.
    Address,
    /// The name is allowed but resolves only to non-public addresses.
    Resolved(String),
    /// A numeric name read as an IPv4 address.
    Spelling(String),
}

/// A request's fate before any connection is made.
enum Judged {
    /// Connect to these, in order; every one passed.
    Connect(Vec<SocketAddr>),
    Refused(Refusal),
    /// The name is allowed but could not be resolved.
    Unresolved(String),
}

impl Shared {
    fn explicitly_allowed(&self, addr: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(addr))
    }

    /// The asking scope of the run `token` names, if it has one.
    fn scope(&self, token: Option<&str>) -> Option<Arc<Scope>> {
        let scopes = self
            .scopes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        scopes.get(token?).cloned()
    }

    /// Judges the name (asking the run's approver about one not on the
    /// list, when the run has one), resolves it once and judges each
    /// address. The addresses returned are the ones connected to: nothing
    /// is resolved again between this check and the connection.
    async fn judge(&self, target: &Target, scope: Option<Arc<Scope>>) -> Judged {
        let name = match &target.host {
            Host::Addr(a) => {
                return if self.explicitly_allowed(*a) {
                    Judged::Connect(vec![SocketAddr::new(*a, target.port)])
                } else {
                    Judged::Refused(Refusal::Address)
                };
            }
            Host::Name(n) => n,
        };
        if !self.patterns.iter().any(|p| p.matches(name)) {
            // Asked before any lookup: a name no one allowed is never
            // sent to DNS.
            let approved = match scope {
                Some(s) => s.decide(name, target.port, &self.outstanding).await,
                None => false,
            };
            if !approved {
                return Judged::Refused(Refusal::Name);
            }
        }
        let addrs = match self.resolve(name, target.port).await {
            Ok(a) if a.is_empty() => {
                return Judged::Unresolved(format!("{name} resolved to no address"));
            }
            Ok(a) => a,
            Err(e) => return Judged::Unresolved(format!("cannot resolve {name}: {e}")),
        };
        let mut why = Vec::new();
        let passed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| {
                let ip = a.ip();
                match address::special(ip) {
                    Some(s) if !self.explicitly_allowed(ip) => {
                        why.push(format!("{ip}: {s}"));
                        false
                    }
                    _ => true,
                }
            })
            .collect();
        if passed.is_empty() {
            return Judged::Refused(Refusal::Resolved(why.join("; ")));
        }
        Judged::Connect(passed)
    }

    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Some(addrs) = self.resolve.get(host) {
            return Ok(addrs.clone());
        }
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }

    async fn connect(
        &self,
        host: &Host,
        port: u16,
        addrs: Vec<SocketAddr>,
    ) -> Result<TcpStream, String> {
        let mut last = format!("{host} has no address to connect to");
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = format!("cannot connect to {host}:{port} ({addr}): {e}"),
                Err(_) => last = format!("timed out connecting to {host}:{port} ({addr})"),
            }
        }
        Err(last)
    }
}

/// Serves one accepted connection until it closes. `permit` is this
/// connection's slot; CONNECT tunnels carry a share of it, because they
/// outlive the HTTP exchange that opened them.
pub(crate) async fn serve_connection<I>(
    io: I,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
    header_timeout: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let permit = Arc::new(permit);
    let svc = hyper::service::service_fn(move |req| {
        let shared = Arc::clone(&shared);
        let permit = Arc::clone(&permit);
        async move { Ok::<_, Infallible>(handle(shared, permit, req).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    // Errors here are the client's (a reset, a slow request line); hyper has
    // already answered what it could parse, and there is no one to tell.
    let _ = builder
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades()
        .await;
}

async fn handle(
    shared: Arc<Shared>,
    permit: Arc<OwnedSemaphorePermit>,
    req: Request<Incoming>,
) -> Response<Body> {
    let token = token_of(req.headers());
    if req.method() == Method::CONNECT {
        connect(shared, permit, token, req).await
    } else {
        forward(shared, token, req).await
    }
}

async fn connect(
    shared: Arc<Shared>,
    permit: Arc<OwnedSemaphorePermit>,
    token: Option<String>,
    mut req: Request<Incoming>,
) -> Response<Body> {
    // Authority-form only (RFC 9110 §9.3.6): no scheme, no path.
    let uri = req.uri();
    let parsed = match (uri.scheme(), uri.path_and_query(), uri.authority()) {
        (None, None, Some(a)) => target::parse_authority(a.as_str(), None),
        _ => {
            return text(
                StatusCode::BAD_REQUEST,
                "stockade: CONNECT needs host:port".to_owned(),
            );
        }
    };
    let target = match parsed {
        Ok(t) => t,
        Err(e) => return target_error(&shared, token.as_deref(), "CONNECT target", e),
    };
    let addrs = match admit(&shared, token.as_deref(), &target).await {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    // Connect before answering, so a client is told 502 rather than handed
    // a tunnel that goes nowhere.
    let upstream = match shared.connect(&target.host, target.port, addrs).await {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("stockade: {e}")),
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let _slot = permit;
        let Ok(upgraded) = upgrade.await else { return };
        let mut client = TokioIo::new(upgraded);
        let mut upstream = upstream;
        // No idle timeout: a build may sit on one long download.
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    });
    Response::new(empty())
}

async fn forward(
    shared: Arc<Shared>,
    token: Option<String>,
    req: Request<Incoming>,
) -> Response<Body> {
    let uri = req.uri().clone();
    match uri.scheme_str() {
        Some("http") => {}
        Some(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                "stockade: only http:// URLs are forwarded; https goes through CONNECT".to_owned(),
            );
        }
        None => {
            return text(
                StatusCode::BAD_REQUEST,
                "stockade: not a proxy request; this is a forward proxy (absolute-form or CONNECT)"
                    .to_owned(),
            );
        }
    }
    let Some(authority) = uri.authority() else {
        return text(
            StatusCode::BAD_REQUEST,
            "stockade: the URL names no host".to_owned(),
        );
    };
    let target = match target::parse_authority(authority.as_str(), Some(80)) {
        Ok(t) => t,
        Err(e) => return target_error(&shared, token.as_deref(), "URL's host", e),
    };
    // The origin routes by Host; one that names another host than the one
    // judged would reach a host no one judged (a virtual host behind an
    // allowed address, or a server that trusts Host).
    let mut given = req.headers().get_all(header::HOST).iter();
    match (given.next(), given.next()) {
        (None, _) => {}
        (Some(h), None)
            if h.to_str()
                .ok()
                .and_then(|v| target::parse_authority(v, Some(80)).ok())
                .is_some_and(|t| t == target) => {}
        (Some(h), None) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "stockade: the Host header ({}) is not the URL's host ({}:{})",
                    String::from_utf8_lossy(h.as_bytes()),
                    target.host,
                    target.port
                ),
            );
        }
        (Some(_), Some(_)) => {
            return text(
                StatusCode::BAD_REQUEST,
                "stockade: more than one Host header".to_owned(),
            );
        }
    }
    let (host, port) = (target.host.to_string(), target.port);
    let addrs = match admit(&shared, token.as_deref(), &target).await {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let upstream = match shared.connect(&target.host, port, addrs).await {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("stockade: {e}")),
    };
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => {
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!("stockade: cannot talk to {host}:{port}: {e}"),
                );
            }
        };
    tokio::spawn(async move {
        // Ends when the response body has been read or the client went away.
        let _ = conn.await;
    });

    let (mut parts, body) = req.into_parts();
    let host_header = match authority.port() {
        Some(p) => format!("{}:{}", authority.host(), p.as_str()),
        None => authority.host().to_owned(),
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = match path.parse::<Uri>() {
        Ok(u) => u,
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                "stockade: the URL's path is malformed".to_owned(),
            );
        }
    };
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    match HeaderValue::from_str(&host_header) {
        Ok(v) => {
            parts.headers.insert(header::HOST, v);
        }
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                "stockade: the URL's host is malformed".to_owned(),
            );
        }
    }
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            format!("stockade: {host}:{port} failed: {e}"),
        ),
    }
}

/// Judges `target`, records the verdict, and returns the addresses to
/// connect to or the response to send instead.
async fn admit(
    shared: &Shared,
    token: Option<&str>,
    target: &Target,
) -> Result<Vec<SocketAddr>, Response<Body>> {
    let host = target.host.to_string();
    match shared.judge(target, shared.scope(token)).await {
        Judged::Connect(addrs) => {
            shared.ledger.record(token, &host, true);
            Ok(addrs)
        }
        Judged::Unresolved(e) => {
            shared.ledger.record(token, &host, true);
            Err(text(StatusCode::BAD_GATEWAY, format!("stockade: {e}")))
        }
        Judged::Refused(r) => Err(refuse(shared, token, &host, r)),
    }
}

/// A target that could not be read: malformed is the client's error (400,
/// not recorded); an odd address spelling is a refusal like any other.
fn target_error(
    shared: &Shared,
    token: Option<&str>,
    what: &str,
    e: target::TargetError,
) -> Response<Body> {
    match e {
        target::TargetError::Malformed(why) => text(
            StatusCode::BAD_REQUEST,
            format!("stockade: the {what} {why}"),
        ),
        target::TargetError::OddAddress { ref spelled, .. } => {
            let host = spelled.clone();
            refuse(shared, token, &host, Refusal::Spelling(e.to_string()))
        }
    }
}

/// Records `host` as refused and says why.
fn refuse(shared: &Shared, token: Option<&str>, host: &str, refusal: Refusal) -> Response<Body> {
    let why = match refusal {
        Refusal::Name => "not in allowed_hosts".to_owned(),
        Refusal::Address => "not in allowed_hosts; an IP address is only allowed when allowed_hosts lists it or its range, so name the host".to_owned(),
        Refusal::Resolved(what) => format!(
            "it resolves only to addresses that are not public ({what}); allowed_hosts must list the address or its range to reach it"
        ),
        Refusal::Spelling(what) => what,
    };
    shared.ledger.record(token, host, false);
    let mut resp = text(
        StatusCode::FORBIDDEN,
        format!("stockade: network access to {host} denied ({why})"),
    );
    if let Ok(v) = HeaderValue::from_str(host) {
        resp.headers_mut()
            .insert(HeaderName::from_static("x-stockade-denied"), v);
    }
    resp
}

/// The run token a request carries. The proxy URL gives it as the password
/// of the user [`crate::PROXY_USER`] (`stockade:<token>`), because clients
/// such as Python's urllib and pip send `Proxy-Authorization` only when the
/// URL has both a user and a password. A bare user name (`<token>:`), which
/// curl, git and Node send for a URL without a password, is read too. The
/// token is only ever looked up among the ones this proxy issued, so a
/// forged one attributes nothing to anyone.
fn token_of(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::PROXY_AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credentials) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let token = match decoded.split_once(':') {
        Some((user, password)) if user == crate::PROXY_USER => password,
        Some((user, _)) => user,
        None => decoded.as_str(),
    };
    Some(token.to_owned())
}

/// One spelling per host, so the record and the resolve map agree however
/// the client wrote it: lower case, no trailing dot, no IPv6 brackets.
pub(crate) fn normalize(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.to_ascii_lowercase()
}

/// Removes what belongs to one hop (RFC 9110 §7.6.1), including the run
/// token, which must never reach the origin.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    let proxy: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy {
        headers.remove(name);
    }
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn text(status: StatusCode, line: String) -> Response<Body> {
    let body = Full::new(Bytes::from(line + "\n"))
        .map_err(|never| match never {})
        .boxed();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
