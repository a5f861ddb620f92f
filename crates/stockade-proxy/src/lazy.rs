//! A proxy that waits for its first client on the caller's runtime, with
//! no thread of its own until one comes ([`wait_on_runtime`]).
//!
//! Why a scope the caller opens rather than "whenever `start` finds a
//! runtime": a task on the caller's runtime is polled only while that
//! runtime is driven. A current-thread runtime runs its tasks only inside
//! `block_on`, and an SDK caller may confine a command and then wait for it
//! with a blocking call on the runtime's thread, or keep the provider (and
//! its cached proxy) after `block_on` returns; either would leave the
//! command's first connection queued forever. Only the caller knows that
//! its future is awaited, on a runtime that keeps running, for as long as
//! the command may connect; `stockade exec` does, so it opens the scope.
//!
//! The listeners are registered with the runtime's reactor (one
//! `epoll_ctl` each, no thread). The first client is accepted there and
//! handed, with the listeners, to the proxy thread, which starts then and
//! serves exactly as an eager proxy's thread would: serving never depends
//! on the caller's runtime after that, so a caller that later blocks or
//! drops its runtime cannot stall a connection in progress. When the scope
//! ends (or the waiting task is dropped with its runtime) while no client
//! came, a proxy still alive gets its thread then, so it keeps serving
//! outside the promise.

use std::future::{Future, poll_fn};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::{TcpListener, UnixDatagram};
use tokio::sync::oneshot;

use crate::service::Shared;
use crate::{Accepted, Listeners};

tokio::task_local! {
    static SCOPE: Arc<Scope>;
}

/// Runs `fut` with every [`Proxy`](crate::Proxy) started while it is
/// polled (by `fut` itself, not by tasks it spawns) waiting for its first
/// client on the current tokio runtime instead of on a thread of its own;
/// the proxy's thread and runtime start only when a client connects. A run
/// that never uses the network then costs its listeners and one idle task.
///
/// The caller promises that `fut` is awaited to its end on a runtime that
/// keeps running meanwhile, never blocked by a synchronous wait (`block_on`
/// of the whole run, as `stockade exec` does, keeps it). Proxies still
/// waiting when `fut` ends or is dropped get their thread then and keep
/// serving; proxies started outside it (or with no runtime) have their
/// thread from the start, as [`Proxy::start`](crate::Proxy::start) always
/// did.
///
/// # Panics
///
/// A proxy started inside panics, as tokio's own sockets do, if the
/// runtime was built without its I/O driver (`enable_io`).
pub async fn wait_on_runtime<F: Future>(fut: F) -> F::Output {
    let scope = Arc::new(Scope::default());
    // Dropped when `fut` is done or dropped: the promise ends there.
    let _end = EndOfScope(Arc::clone(&scope));
    SCOPE.scope(scope, fut).await
}

/// The proxies a [`wait_on_runtime`] scope started, by weak reference: a
/// proxy dropped inside is gone, not kept alive by its scope.
#[derive(Default)]
struct Scope {
    waiting: Mutex<Vec<Weak<Lazy>>>,
}

struct EndOfScope(Arc<Scope>);

impl Drop for EndOfScope {
    fn drop(&mut self) {
        let waiting = std::mem::take(&mut *lock(&self.0.waiting));
        for lazy in waiting.iter().filter_map(Weak::upgrade) {
            lazy.hand_off(None);
        }
    }
}

/// What the proxy thread is given when it starts.
pub(crate) struct Start {
    pub(crate) port: u16,
    pub(crate) shared: Arc<Shared>,
    pub(crate) header_timeout: Duration,
    pub(crate) stopped: oneshot::Receiver<()>,
}

/// A proxy started inside a scope, shared by the [`Proxy`](crate::Proxy),
/// the task waiting on the caller's runtime and the scope.
pub(crate) struct Lazy {
    state: Mutex<State>,
}

enum State {
    /// No client yet: the listeners are registered with the caller's
    /// runtime; `task` is the waiting task, woken when this state ends.
    Waiting {
        tcp: TcpListener,
        /// The proxy's end of the relay's pair.
        relay: Option<UnixDatagram>,
        start: Start,
        task: Option<Waker>,
    },
    /// The proxy thread has the listeners; dropping `wake` stops a thread
    /// still in its first `poll`.
    Thread {
        thread: JoinHandle<()>,
        wake: Option<UnixStream>,
    },
    Stopped,
}

/// Where a proxy's listeners went.
pub(crate) enum Waited {
    /// Registered with the scope's runtime; a task waits for the first
    /// client.
    Lazy(Arc<Lazy>),
    /// No scope or no runtime: given back for a thread of their own.
    Outside(Listeners, Start),
}

/// Inside a [`wait_on_runtime`] scope on a runtime: registers `listeners`
/// with that runtime and spawns the task that waits for the first client.
/// An error is the reactor's refusal (the listeners are closed).
pub(crate) fn wait(listeners: Listeners, start: Start) -> std::io::Result<Waited> {
    let Ok(scope) = SCOPE.try_with(Arc::clone) else {
        return Ok(Waited::Outside(listeners, start));
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return Ok(Waited::Outside(listeners, start));
    };
    let Listeners { tcp, relay } = listeners;
    let tcp = TcpListener::from_std(tcp)?;
    let relay = relay.map(UnixDatagram::from_std).transpose()?;
    let lazy = Arc::new(Lazy {
        state: Mutex::new(State::Waiting {
            tcp,
            relay,
            start,
            task: None,
        }),
    });
    {
        let mut waiting = lock(&scope.waiting);
        waiting.retain(|w| w.strong_count() > 0);
        waiting.push(Arc::downgrade(&lazy));
    }
    runtime.spawn(watch(Arc::clone(&lazy)));
    Ok(Waited::Lazy(lazy))
}

/// The task on the caller's runtime: sleeps until a client is queued on
/// the TCP listener or handed over by a relay (epoll reports one already queued when the listener is
/// added, so a client that connected before the first poll counts),
/// accepts it and hands it, with the listeners, to the proxy thread. Ends
/// too when the proxy is stopped. Dropped unfinished (its runtime shutting
/// down), it hands off all the same, so a proxy that outlives its runtime
/// still serves.
async fn watch(lazy: Arc<Lazy>) {
    let handoff = HandOffOnDrop(lazy);
    let first = poll_fn(|cx| handoff.0.poll_client(cx)).await;
    handoff.0.hand_off(first);
}

struct HandOffOnDrop(Arc<Lazy>);

impl Drop for HandOffOnDrop {
    fn drop(&mut self) {
        self.0.hand_off(None);
    }
}

impl Lazy {
    /// Ready with the first client, or with `None` when the state is no
    /// longer [`State::Waiting`] or accepting failed (the thread's own
    /// accept loop then meets and reports what is wrong).
    fn poll_client(&self, cx: &mut Context<'_>) -> Poll<Option<Accepted>> {
        let mut state = lock(&self.state);
        let State::Waiting {
            tcp, relay, task, ..
        } = &mut *state
        else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(r) = tcp.poll_accept(cx) {
            return Poll::Ready(r.and_then(|(s, _)| s.into_std()).ok().map(Accepted::Tcp));
        }
        #[cfg(target_os = "linux")]
        if let Some(r) = relay {
            // Until the socket is not ready (the waker is then registered)
            // or a datagram carried a connection; one carrying none is
            // dropped and the next looked at.
            while let Poll::Ready(ready) = r.poll_recv_ready(cx) {
                if ready.is_err() {
                    return Poll::Ready(None);
                }
                match r.try_io(tokio::io::Interest::READABLE, || {
                    crate::relay::take(std::os::fd::AsFd::as_fd(r))
                }) {
                    Ok(Some(client)) => return Poll::Ready(Some(client)),
                    Ok(None) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return Poll::Ready(None),
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = relay;
        *task = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Starts the proxy thread with the listeners (and `first`, the client
    /// accepted here), if they are still waiting. Without a client the
    /// thread waits in `poll` for one, as an eager proxy's does.
    fn hand_off(&self, first: Option<Accepted>) {
        let mut state = lock(&self.state);
        let State::Waiting { .. } = &*state else {
            return;
        };
        let State::Waiting {
            tcp,
            relay,
            start,
            task,
        } = std::mem::replace(&mut *state, State::Stopped)
        else {
            return;
        };
        // Out of the caller's reactor before the thread's runtime adds
        // them to its own.
        let listeners = match (
            tcp.into_std(),
            relay.map(UnixDatagram::into_std).transpose(),
        ) {
            (Ok(tcp), Ok(relay)) => Some(Listeners { tcp, relay }),
            _ => None,
        };
        let (wake, woken) = match first {
            // A client is here: the thread builds its runtime at once.
            Some(_) => (None, None),
            None => match UnixStream::pair() {
                Ok((w, r)) => (Some(w), Some(r)),
                Err(_) => (None, None),
            },
        };
        let Start {
            port,
            shared,
            header_timeout,
            stopped,
        } = start;
        let failed = Arc::clone(&shared);
        let spawned = listeners.map(|listeners| {
            std::thread::Builder::new()
                .name("stockade-proxy".to_owned())
                .spawn(move || {
                    crate::serve(
                        listeners,
                        port,
                        shared,
                        header_timeout,
                        stopped,
                        woken,
                        first,
                    );
                })
        });
        match spawned {
            Some(Ok(thread)) => *state = State::Thread { thread, wake },
            // The listeners are closed: the command's connections are
            // refused, and the run says why.
            Some(Err(e)) => failed
                .ledger
                .problem(format!("cannot start the proxy thread: {e}")),
            None => failed
                .ledger
                .problem(format!("cannot serve 127.0.0.1:{port}: its listener could not be handed to the proxy thread")),
        }
        drop(state);
        if let Some(t) = task {
            t.wake();
        }
    }

    /// Stops the proxy: listeners still waiting are taken out of the
    /// caller's reactor and closed now, the waiting task is woken to end,
    /// a running thread is joined (the caller sent the stop first).
    pub(crate) fn stop(&self) {
        let previous = std::mem::replace(&mut *lock(&self.state), State::Stopped);
        match previous {
            State::Waiting { task, .. } => {
                if let Some(t) = task {
                    t.wake();
                }
            }
            State::Thread { thread, wake } => {
                drop(wake);
                // A panicked proxy thread has nothing left to clean up.
                let _ = thread.join();
            }
            State::Stopped => {}
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every state is whole between statements: a panic elsewhere cannot
    // leave one half-written.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
