//! Where a proxy waits for its first client: on the caller's runtime
//! inside `wait_on_runtime`, on a thread of its own elsewhere. Whichever,
//! a client that connects the moment `start` returns is served, and a
//! proxy that outlives the scope (or the runtime) it was started in keeps
//! serving. Requests go through the proxy to a backend on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

mod common;

use common::{assert_served, backend, exchange, request};
use stockade_proxy::{Proxy, ProxyConfig, wait_on_runtime};

fn config(backend: SocketAddr) -> ProxyConfig {
    ProxyConfig {
        allowed_hosts: vec!["allowed.test".into(), "127.0.0.1".into()],
        resolve: [("allowed.test".to_owned(), vec![backend])].into(),
        relay: false,
    }
}

/// The request on an already connected client, without a runtime.
fn get(mut client: TcpStream, backend: SocketAddr) -> String {
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    client.write_all(request(backend).as_bytes()).unwrap();
    let mut response = String::new();
    client.read_to_string(&mut response).unwrap();
    response
}

/// The request on an already connected client, awaited: the caller's
/// runtime keeps running, as `wait_on_runtime` asks.
async fn get_async(client: TcpStream, backend: SocketAddr) -> String {
    client.set_nonblocking(true).unwrap();
    let mut client = tokio::net::TcpStream::from_std(client).unwrap();
    exchange(&mut client, &request(backend)).await
}

#[test]
fn a_client_at_once_is_served_inside_a_scope_on_a_multi_thread_runtime() {
    let addr = backend();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(wait_on_runtime(async move {
        let proxy = Proxy::start(config(addr)).unwrap();
        let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        assert_served(&get_async(client, addr).await);
        assert!(proxy.is_serving());
    }));
}

#[test]
fn a_client_at_once_is_served_inside_a_scope_on_a_current_thread_runtime() {
    let addr = backend();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(wait_on_runtime(async move {
        let proxy = Proxy::start(config(addr)).unwrap();
        let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        assert_served(&get_async(client, addr).await);
    }));
}

#[test]
fn a_client_at_once_is_served_with_no_runtime() {
    let addr = backend();
    let proxy = Proxy::start(config(addr)).unwrap();
    let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    assert_served(&get(client, addr));
    assert!(proxy.is_serving());
}

/// On a runtime but outside a scope, the proxy has its own thread: a
/// caller that blocks its runtime's only thread is still served.
#[test]
fn outside_a_scope_a_blocked_runtime_does_not_stall_the_proxy() {
    let addr = backend();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let proxy = Proxy::start(config(addr)).unwrap();
        let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        // Blocking on purpose: nothing on this runtime runs meanwhile.
        assert_served(&get(client, addr));
    });
}

/// A proxy kept after its scope ends, with a client that connected inside
/// it and was never accepted: the scope's end gives the proxy its thread,
/// so the client is served with the runtime no longer driven.
#[test]
fn a_proxy_outliving_its_scope_serves_the_client_queued_inside() {
    let addr = backend();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (proxy, queued) = rt.block_on(wait_on_runtime(async move {
        let proxy = Proxy::start(config(addr)).unwrap();
        let queued = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        (proxy, queued)
    }));
    assert_served(&get(queued, addr));
    let later = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    assert_served(&get(later, addr));
    drop(rt);
}

/// A proxy whose runtime shuts down while its scope is still open (the
/// scope's task is dropped with the runtime): it gets its thread and keeps
/// serving.
#[test]
fn a_proxy_outliving_its_runtime_still_serves() {
    let addr = backend();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(wait_on_runtime(async move {
        tx.send(Proxy::start(config(addr)).unwrap()).unwrap();
        std::future::pending::<()>().await;
    }));
    let proxy = rx.recv().unwrap();
    drop(rt);
    let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    assert_served(&get(client, addr));
}
