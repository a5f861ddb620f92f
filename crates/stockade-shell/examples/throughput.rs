//! What the library adds per command: `true` through the sandboxed executor
//! versus spawning the very argv the provider returns, per backend, plus the
//! unconfined executor versus a bare `bash -c true`; then N concurrent
//! confined commands. Run by `bench/executor`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails loudly

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_core::{ExecutionPolicy, SandboxMode, SandboxProvider};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_shell::{SandboxedExecutor, ShellExecutor, ShellRequest, UnconfinedExecutor};

fn env_usize(k: &str, default: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The direct baseline: spawn `argv` with the same stdio the executor uses
/// (stdout and stderr piped and read to the end).
async fn direct(argv: &[OsString], dir: &std::path::Path) -> Duration {
    let t = Instant::now();
    let out = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .process_group(0)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    t.elapsed()
}

async fn library(exec: &dyn ShellExecutor, dir: &std::path::Path) -> Duration {
    let t = Instant::now();
    let r = exec
        .run(exec.resolve(ShellRequest::new("true", dir)))
        .await
        .unwrap();
    assert!(r.exit.success() && !r.denied(), "{r:?}");
    t.elapsed()
}

fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    (mean, ms[ms.len() / 2])
}

#[tokio::main]
async fn main() {
    let seq = env_usize("SEQUENTIAL", 200);
    let conc = env_usize("CONCURRENT", 50);
    let launcher = std::env::var_os("LANDLOCK_RUN").map(Into::into);
    let ws = tempfile::Builder::new()
        .prefix("stockade-throughput-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = ws.path();
    let bash: Vec<OsString> = vec!["bash".into(), "-c".into(), "true".into()];

    println!(
        "{:<12} {:>22} {:>22} {:>12}   {} concurrent",
        "executor", "direct mean/median ms", "library mean/median ms", "added ms", conc
    );
    // Interleave direct and library runs so drift hits both alike.
    let mut rows: Vec<(String, Option<Arc<dyn SandboxProvider>>)> =
        vec![("unconfined".into(), None)];
    for backend in [BackendPreference::Bwrap, BackendPreference::Landlock] {
        let s = LocalSettings {
            backend,
            launcher_path: launcher.clone(),
            ..Default::default()
        };
        rows.push((
            backend.to_string(),
            Some(Arc::new(LocalProvider::new(s).unwrap())),
        ));
    }
    for (name, provider) in rows {
        let (exec, argv): (Box<dyn ShellExecutor>, Vec<OsString>) = match &provider {
            None => (Box::new(UnconfinedExecutor::default()), bash.clone()),
            Some(p) => {
                let policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, dir);
                let confined = p.confine(&bash, &policy.sandbox_policy().unwrap()).unwrap();
                (
                    Box::new(SandboxedExecutor::new(p.clone(), policy)),
                    confined.argv,
                )
            }
        };
        for _ in 0..10 {
            direct(&argv, dir).await;
            library(exec.as_ref(), dir).await;
        }
        let (mut d, mut l) = (Vec::with_capacity(seq), Vec::with_capacity(seq));
        for _ in 0..seq {
            d.push(direct(&argv, dir).await);
            l.push(library(exec.as_ref(), dir).await);
        }
        let ((dm, dmed), (lm, lmed)) = (stats(&mut d), stats(&mut l));
        let t = Instant::now();
        let runs = (0..conc).map(|_| exec.run(exec.resolve(ShellRequest::new("true", dir))));
        let results = futures_join(runs.collect()).await;
        let ok = results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|r| r.exit.success()))
            .count();
        println!(
            "{name:<12} {:>10.3} / {:<9.3} {:>10.3} / {:<9.3} {:>+10.3}   {ok}/{conc} ok in {:.1} ms",
            dm,
            dmed,
            lm,
            lmed,
            lm - dm,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// Poll every future to completion, concurrently, on this task.
async fn futures_join<T>(futs: Vec<stockade_shell::BoxFuture<'_, T>>) -> Vec<T> {
    let mut slots: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    let mut futs: Vec<Option<_>> = futs.into_iter().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, fut) in slots.iter_mut().zip(futs.iter_mut()) {
            if let Some(f) = fut {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *slot = Some(v);
                        *fut = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    slots.into_iter().map(|s| s.unwrap()).collect()
}
