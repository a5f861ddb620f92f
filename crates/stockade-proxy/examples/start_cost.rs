//! What starting an unused proxy costs a fresh process: run it under
//! `hyperfine -N` once per mode, side by side with the do-nothing floor.
//!
//! - `nothing`: returns at once;
//! - `plain`: `start` + `run_token` + `url_for` + drop, no runtime;
//! - `runtime`: builds a current-thread runtime (as `stockade exec` does)
//!   and returns from its `block_on`;
//! - `in-runtime`: the same runtime, the proxy started and dropped inside
//!   it (its own thread waits for a first client);
//! - `in-scope`: the same, inside [`stockade_proxy::wait_on_runtime`] (the
//!   runtime waits for the first client: no thread).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use stockade_proxy::{Proxy, ProxyConfig};

fn once() {
    let proxy = Proxy::start(ProxyConfig::default()).unwrap();
    let token = proxy.run_token();
    std::hint::black_box(proxy.url_for(&token));
    drop(proxy);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "nothing" => {}
        "plain" => once(),
        "runtime" => runtime().block_on(async {}),
        "in-runtime" => runtime().block_on(async { once() }),
        "in-scope" => runtime().block_on(stockade_proxy::wait_on_runtime(async { once() })),
        _ => panic!("mode: nothing | plain | runtime | in-runtime | in-scope"),
    }
}
