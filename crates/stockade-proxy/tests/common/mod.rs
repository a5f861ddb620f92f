//! What the lazy-proxy suites share: a backend behind the proxy, the
//! request a client sends it through the proxy, and the exchange.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// An HTTP backend on 127.0.0.1 answering each connection once.
pub fn backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let _ = reader.into_inner().write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n",
            );
        }
    });
    addr
}

/// The request a client sends through the proxy to `backend`.
pub fn request(backend: SocketAddr) -> String {
    format!(
        "GET http://allowed.test:{0}/ HTTP/1.1\r\nHost: allowed.test:{0}\r\nConnection: close\r\n\r\n",
        backend.port()
    )
}

/// Sends `request` on `client`, awaited (the caller's runtime keeps
/// running, as `wait_on_runtime` asks), and reads the whole answer.
pub async fn exchange(client: &mut (impl AsyncRead + AsyncWrite + Unpin), request: &str) -> String {
    client.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        client.read_to_string(&mut response),
    )
    .await
    .unwrap()
    .unwrap();
    response
}

/// The backend's answer, relayed whole.
pub fn assert_served(response: &str) {
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hello\n"), "{response}");
}
