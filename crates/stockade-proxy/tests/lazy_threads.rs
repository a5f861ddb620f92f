//! A proxy started inside `wait_on_runtime` on a current-thread runtime
//! (what `stockade exec` does) starts no thread until a client connects,
//! and stops on drop without leaving a task or a listener behind. Its own
//! binary without the test harness: libtest runs tests on threads of its
//! own, which would blur the count of this process's threads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

mod common;

use common::backend;
use stockade_proxy::{Proxy, ProxyConfig, wait_on_runtime};
use tokio::io::AsyncReadExt as _;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Tasks alive on the current runtime (the `block_on` future is not one).
fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Lets the runtime run everything that is ready, the waiting task
/// included, and lets time pass for anything that would start on its own.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
}

fn config(backend: Option<SocketAddr>) -> ProxyConfig {
    ProxyConfig {
        allowed_hosts: vec!["allowed.test".into(), "127.0.0.1".into()],
        resolve: backend
            .map(|a| ("allowed.test".to_owned(), vec![a]))
            .into_iter()
            .collect(),
        relay: true,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = threads();
    rt.block_on(wait_on_runtime(async move {
        // Never used: no thread, one waiting task, and on drop neither,
        // the listeners closed and the relay's end dead.
        let proxy = Proxy::start(config(None)).unwrap();
        let (port, end) = (proxy.port(), proxy.relay_end().unwrap().unwrap());
        settle().await;
        assert_eq!(threads(), before, "an unused proxy started a thread");
        assert_eq!(tasks(), 1, "the proxy's waiting task");
        assert!(!proxy.is_serving());
        drop(proxy);
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
        assert!(
            stockade_proxy::hand_over(std::os::fd::AsFd::as_fd(&end)).is_err(),
            "an unused proxy still takes relayed connections"
        );
        settle().await;
        assert_eq!(tasks(), 0, "the waiting task outlived its proxy");
        assert_eq!(threads(), before, "a dropped proxy started a thread");

        // A client queued before the runtime ever polled the waiting task,
        // dropped with the proxy: its connection ends, it is not left
        // hanging in a backlog nobody reads.
        let proxy = Proxy::start(config(None)).unwrap();
        let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        drop(proxy);
        let mut client = tokio::net::TcpStream::from_std(nonblocking(client)).unwrap();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(10), client.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "a queued client of a dropped proxy: {read:?}"
        );
        settle().await;
        assert_eq!(tasks(), 0);
        assert_eq!(threads(), before);

        // Used: a client that connects before the waiting task first runs
        // is served, through the proxy to a backend; the proxy thread
        // starts then (the backend's threads are counted out).
        let addr = backend();
        let with_backend = threads();
        let proxy = Proxy::start(config(Some(addr))).unwrap();
        let client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        let mut client = tokio::net::TcpStream::from_std(nonblocking(client)).unwrap();
        let request = common::request(addr);
        common::assert_served(&common::exchange(&mut client, &request).await);
        assert!(proxy.is_serving());
        assert_eq!(threads(), with_backend + 1, "the proxy thread");

        // Dropped while a client of the running proxy waits for its
        // answer (no request line yet): the client's connection ends and
        // the thread is joined.
        let mut waiting = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        settle().await;
        drop(proxy);
        assert_eq!(threads(), with_backend, "the proxy thread was not joined");
        let read = tokio::time::timeout(Duration::from_secs(10), waiting.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "a waiting client of a dropped proxy: {read:?}"
        );
        settle().await;
        assert_eq!(tasks(), 0);

        // A first client handed over by a relay, before the waiting task
        // first runs: served the same way, on the thread it starts.
        let proxy = Proxy::start(config(Some(addr))).unwrap();
        let end = proxy.relay_end().unwrap().unwrap();
        let client = stockade_proxy::hand_over(std::os::fd::AsFd::as_fd(&end)).unwrap();
        client.set_nonblocking(true).unwrap();
        let mut client = tokio::net::UnixStream::from_std(client).unwrap();
        common::assert_served(&common::exchange(&mut client, &request).await);
        assert!(proxy.is_serving());
        assert_eq!(threads(), with_backend + 1, "the proxy thread");
        drop(proxy);
        assert_eq!(threads(), with_backend, "the proxy thread was not joined");
        settle().await;
        assert_eq!(tasks(), 0);

        // A TCP connection handed over whole (as the spawner hands over
        // what it accepts in a direct bwrap run's namespace): the first
        // client, served on the thread it starts; and one more, handed to
        // the running proxy.
        let proxy = Proxy::start(config(Some(addr))).unwrap();
        let end = proxy.relay_end().unwrap().unwrap();
        let elsewhere = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        for _ in 0..2 {
            let client = TcpStream::connect(elsewhere.local_addr().unwrap()).unwrap();
            let (served, _) = elsewhere.accept().unwrap();
            stockade_proxy::hand_over_connection(
                std::os::fd::AsFd::as_fd(&end),
                std::os::fd::AsFd::as_fd(&served),
            )
            .unwrap();
            drop(served);
            let mut client = tokio::net::TcpStream::from_std(nonblocking(client)).unwrap();
            common::assert_served(&common::exchange(&mut client, &request).await);
            assert!(proxy.is_serving());
        }
        // A datagram carrying a socket that is no stream connection is
        // dropped, and the proxy serves on.
        let udp = std::net::UdpSocket::bind(("127.0.0.1", 0)).unwrap();
        stockade_proxy::hand_over_connection(
            std::os::fd::AsFd::as_fd(&end),
            std::os::fd::AsFd::as_fd(&udp),
        )
        .unwrap();
        let client = stockade_proxy::hand_over(std::os::fd::AsFd::as_fd(&end)).unwrap();
        client.set_nonblocking(true).unwrap();
        let mut client = tokio::net::UnixStream::from_std(client).unwrap();
        common::assert_served(&common::exchange(&mut client, &request).await);
        drop(proxy);
        assert_eq!(threads(), with_backend, "the proxy thread was not joined");
        settle().await;
        assert_eq!(tasks(), 0);
    }));
    println!("lazy_threads: ok");
}

fn nonblocking(s: TcpStream) -> TcpStream {
    s.set_nonblocking(true).unwrap();
    s
}
