//! The signals that stop a run.

/// The signals that stop a run (INT, TERM, HUP, QUIT), caught from the
/// moment this is made: made before the command starts, so that a signal sent as soon as the
/// command shows life is never the default action's (which would kill us
/// with the command left running and the caller's terminal raw).
///
/// The child may sit in a session of its own (the Landlock launcher
/// detaches from the terminal), so it would not see the terminal's signal:
/// dropping the run kills its process group instead.
///
/// `interrupt`: whether SIGINT stops the run. On a terminal of its own the
/// command gets Ctrl-C as a byte (ours is raw) and its terminal signals its
/// own foreground job; a SIGINT sent to us is then ignored, never left to
/// kill us with the caller's terminal raw.
pub(crate) struct Interrupts {
    #[cfg(unix)]
    streams: Vec<(tokio::signal::unix::Signal, i32)>,
}

impl Interrupts {
    /// Must be called within the runtime.
    pub(crate) fn catch(interrupt: bool) -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let kinds = [
                (SignalKind::interrupt(), 2),
                (SignalKind::terminate(), 15),
                (SignalKind::hangup(), 1),
                // Its default action dumps core, leaving the caller's
                // terminal raw and the command's tree to nobody.
                (SignalKind::quit(), 3),
            ];
            let mut streams = Vec::new();
            for (kind, n) in kinds {
                if let Ok(s) = signal(kind)
                    && (n != 2 || interrupt)
                {
                    streams.push((s, n));
                }
            }
            Self { streams }
        }
        #[cfg(not(unix))]
        {
            // No terminal of its own here: Ctrl-C always stops the run.
            let _ = interrupt;
            Self {}
        }
    }

    /// Resolves with the number of the first signal caught.
    pub(crate) async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        {
            if self.streams.is_empty() {
                return std::future::pending().await;
            }
            let waits = self.streams.iter_mut().map(|(s, n)| {
                let n = *n;
                Box::pin(async move {
                    s.recv().await;
                    n
                })
            });
            futures_select_all(waits.collect()).await
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            2
        }
    }
}

/// The first of several futures to finish.
#[cfg(unix)]
async fn futures_select_all<F: std::future::Future<Output = i32> + Unpin>(mut futs: Vec<F>) -> i32 {
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}
