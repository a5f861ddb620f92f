//! `stockade probe`: what every backend of this platform's chain can do
//! here, and which `auto` selects.

use std::process::ExitCode;

use anyhow::Context;
use stockade_core::files::{self, FilePolicy};
use stockade_local::BackendPreference;

use crate::deny_read;
use crate::provider::provider;

/// What `stockade exec --ask` and `stockade acp` can approve while a
/// command of `backend` waits: (hosts, paths). Hosts: every connection of
/// a Linux backend passes stockade's proxy, which holds an unlisted host
/// while it asks (`exec --ask` at a terminal, `acp` with `[approval]`).
/// Paths: only supervised Landlock has a channel (`path-approval` above),
/// and only `exec --ask` under workspace-write mounts it; `acp` does not
/// yet. Elsewhere a refused write reruns, the refused directory offered
/// first.
fn runtime_approval(backend: &str) -> (bool, bool) {
    (
        matches!(backend, "bwrap" | "landlock"),
        backend == "landlock",
    )
}

fn approval_line(backend: &str) -> &'static str {
    match runtime_approval(backend) {
        (true, true) => {
            "approve while it runs (exec --ask at a terminal, acp with [approval]): hosts, held while asked; paths: exec --ask under workspace-write when supervised, the write held while asked (acp: not yet, a refused write reruns, its directory offered first)"
        }
        (true, false) => {
            "approve while it runs (exec --ask at a terminal, acp with [approval]): hosts, held while asked; paths: no channel, a refused write reruns (its directory offered first)"
        }
        (false, _) => {
            "approve while it runs (exec --ask, acp): nothing; a refused host or write reruns (a write's directory offered first)"
        }
    }
}

pub(crate) fn probe(json: bool) -> anyhow::Result<ExitCode> {
    let report = provider(BackendPreference::Auto, Vec::new())
        .context("invalid sandbox settings")?
        .report();
    // What `stockade exec` applies without flags: no extra roots, no
    // read-only paths, the default deny list (when $HOME places it).
    let env = files::process_env;
    let defaults = FilePolicy {
        deny_read: stockade_config::default_deny_read(&env).unwrap_or_default(),
        ..FilePolicy::default()
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let beneath = deny_read::probe_lines(&report, &defaults.deny_read, &cwd);
    if json {
        let mut v = serde_json::to_value(&report)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("file_policy".into(), serde_json::to_value(&defaults)?);
            obj.insert("deny_read_beneath_workspace".into(), beneath.into());
            let approval: serde_json::Map<String, serde_json::Value> = report
                .backends
                .iter()
                .map(|b| {
                    let (hosts, paths) = runtime_approval(&b.backend);
                    (
                        b.backend.to_owned(),
                        serde_json::json!({ "hosts": hosts, "paths": paths }),
                    )
                })
                .collect();
            obj.insert("runtime_approval".into(), approval.into());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("platform: {}", report.platform);
        for b in &report.backends {
            let state = if b.usable { "usable" } else { "unusable" };
            let mut facts = String::new();
            if let Some(e) = b.enforcement {
                facts.push_str(&format!(" enforcement={e}"));
            }
            if let Some(abi) = b.landlock_abi {
                facts.push_str(&format!(" landlock-abi={abi}"));
            }
            if let Some(r) = &b.runner {
                facts.push_str(&format!(" runner={}", r.display()));
            }
            println!("{:<10} {state}{facts}\n           {}", b.backend, b.detail);
            for p in &b.protections {
                println!("           {}: {}", p.name, p.state);
            }
            for g in &b.gaps {
                println!("           gap {}: {}", g.name, g.detail);
            }
            println!("           {}", approval_line(&b.backend));
        }
        let shown: Vec<String> = defaults
            .deny_read
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        println!(
            "deny-read (exec default): {}",
            if shown.is_empty() {
                "none ($HOME unset)".to_owned()
            } else {
                shown.join(", ")
            }
        );
        for line in &beneath {
            println!("{line}");
        }
        if let Some(note) = &report.tmpdir {
            println!("$TMPDIR: {note}");
        }
        match report.auto_selects {
            Some(b) => println!("auto selects: {b}"),
            None => println!("auto selects: nothing (every command would fail closed)"),
        }
    }
    Ok(if report.auto_selects.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
