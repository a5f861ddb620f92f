//! One client connection: judge each request by its host name, then tunnel
//! (CONNECT) or forward (absolute-form HTTP), or refuse.

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
use stockade_core::net::HostPattern;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::ledger::Ledger;

type Body = BoxBody<Bytes, hyper::Error>;

/// A dead upstream must not hold a client (and a connection slot) for the
/// OS's multi-minute SYN timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// What every connection shares: the policy and the record.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) patterns: Vec<HostPattern>,
    /// The entries as written, for the literal-address rule.
    pub(crate) literal: Vec<String>,
    pub(crate) resolve: HashMap<String, Vec<SocketAddr>>,
    pub(crate) ledger: Ledger,
}

enum Verdict {
    Allowed,
    Refused,
    /// An address, not a name: the allow list names hosts, and an address
    /// would let a client skip the name check altogether.
    RefusedAddress,
}

impl Shared {
    fn judge(&self, host: &str) -> Verdict {
        if host.parse::<IpAddr>().is_ok() {
            if self.literal.iter().any(|e| e == host) {
                Verdict::Allowed
            } else {
                Verdict::RefusedAddress
            }
        } else if self.patterns.iter().any(|p| p.matches(host)) {
            Verdict::Allowed
        } else {
            Verdict::Refused
        }
    }

    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Some(addrs) = self.resolve.get(host) {
            return Ok(addrs.clone());
        }
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }

    async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, String> {
        let addrs = self
            .resolve(host, port)
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?;
        let mut last = format!("{host} resolved to no address");
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
    let Some((host, port)) = req
        .uri()
        .authority()
        .and_then(|a| Some((normalize(a.host()), a.port_u16()?)))
    else {
        return text(
            StatusCode::BAD_REQUEST,
            "stockade: CONNECT needs host:port".to_owned(),
        );
    };
    if let Some(refusal) = judge_and_record(&shared, token.as_deref(), &host) {
        return refusal;
    }
    // Connect before answering, so a client is told 502 rather than handed
    // a tunnel that goes nowhere.
    let upstream = match shared.connect(&host, port).await {
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
    let host = normalize(authority.host());
    let port = authority.port_u16().unwrap_or(80);
    if let Some(refusal) = judge_and_record(&shared, token.as_deref(), &host) {
        return refusal;
    }
    let upstream = match shared.connect(&host, port).await {
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

/// Judges `host`, records the verdict, and returns the refusal to send.
fn judge_and_record(shared: &Shared, token: Option<&str>, host: &str) -> Option<Response<Body>> {
    let why = match shared.judge(host) {
        Verdict::Allowed => {
            shared.ledger.record(token, host, true);
            return None;
        }
        Verdict::Refused => "not in allowed_hosts",
        Verdict::RefusedAddress => {
            "not in allowed_hosts; an IP address is only allowed when listed literally, so name the host"
        }
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
    Some(resp)
}

/// The run token: the user name of the proxy URL, which clients send as
/// `Proxy-Authorization: Basic base64("<token>:")`.
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
    let user = decoded.split_once(':').map_or(decoded.as_str(), |(u, _)| u);
    Some(user.to_owned())
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
