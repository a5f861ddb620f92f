//! What a hook costs a tool call: one `pre_tool` hook (`true`) run through
//! `Hooks::run` (the confined command, its JSON on stdin, its `hook/ran`
//! record in the session log) versus the same command run by the executor
//! alone, per backend, with a floor (a static do-nothing binary, the first
//! argument) timed in the same interleaved rounds. Run by `bench/hooks/run`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails loudly

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_agent::PolicyService;
use stockade_agent::hooks::{HookConfig, HookEvent, HookScope, Hooks, Verdict};
use stockade_core::SandboxMode;
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_session::SessionStore;
use stockade_shell::{SandboxedExecutor, ShellExecutor, ShellRequest};

fn median_ms(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

async fn floor(bin: &Path) -> Duration {
    let t = Instant::now();
    let st = tokio::process::Command::new(bin).status().await.unwrap();
    assert!(st.success());
    t.elapsed()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args_os().skip(1);
    let floor_bin = args.next().expect("the floor binary");
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let launcher = std::env::var_os("LANDLOCK_RUN").map(Into::into);
    let dir = tempfile::Builder::new()
        .prefix("stockade-hooks-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let store = SessionStore::new(dir.path().join("state"));
    let session = store.create(&ws).unwrap();
    let policy = Arc::new(
        PolicyService::new(SandboxMode::WorkspaceWrite, &ws)
            .with_default_network(Some(stockade_core::NetworkMode::Deny)),
    );
    let hook = HookConfig {
        event: HookEvent::PreTool,
        matcher: None,
        command: "true".into(),
        timeout_ms: None,
    };
    let mut rows = Vec::new();
    let mut floors = Vec::new();
    for backend in [BackendPreference::Bwrap, BackendPreference::Landlock] {
        let provider = LocalProvider::new(LocalSettings {
            backend,
            launcher_path: launcher.clone(),
            ..Default::default()
        })
        .unwrap();
        let executor: Arc<dyn ShellExecutor> = Arc::new(SandboxedExecutor::new(
            Arc::new(provider),
            policy.resolve(Some(&session), None),
        ));
        let hooks = Hooks::new(vec![hook.clone()], executor.clone(), policy.clone());
        let (mut command, mut hooked) = (Vec::new(), Vec::new());
        for _ in 0..20 {
            let _ = floor(Path::new(&floor_bin)).await;
        }
        for _ in 0..rounds {
            floors.push(floor(Path::new(&floor_bin)).await);
            let t = Instant::now();
            let r = executor
                .run(
                    executor.resolve(
                        ShellRequest::new("true", &ws)
                            .with_policy(policy.resolve(Some(&session), None)),
                    ),
                )
                .await
                .unwrap();
            assert!(r.exit.success() && !r.denied(), "{r:?}");
            command.push(t.elapsed());
            let t = Instant::now();
            let mut payload = serde_json::Map::new();
            payload.insert("tool".into(), "bash".into());
            let v = hooks
                .run(
                    &session,
                    HookEvent::PreTool,
                    HookScope {
                        tool: Some("bash"),
                        call_id: Some("c"),
                    },
                    payload,
                )
                .await
                .unwrap();
            assert_eq!(v, Verdict::Proceed);
            hooked.push(t.elapsed());
        }
        rows.push((format!("{backend:?}"), command, hooked));
    }
    let floor = median_ms(&mut floors);
    println!("floor (static do-nothing binary): {floor:.3} ms median, {rounds} rounds per backend");
    println!(
        "{:<10}{:>16}{:>10}{:>16}{:>10}{:>14}",
        "backend", "command ms", "floors", "one hook ms", "floors", "hook - cmd"
    );
    for (name, mut command, mut hooked) in rows {
        let (c, h) = (median_ms(&mut command), median_ms(&mut hooked));
        println!(
            "{name:<10}{c:>16.3}{:>10.1}{h:>16.3}{:>10.1}{:>+11.2} fl",
            c / floor,
            h / floor,
            (h - c) / floor
        );
    }
}
