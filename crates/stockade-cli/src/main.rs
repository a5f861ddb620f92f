//! `stockade`: run a command confined, or show what the sandbox can do here.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

use anyhow::Context;
use clap::{Parser, Subcommand};
use stockade_core::{ExecutionPolicy, SandboxMode, SandboxProvider, SandboxUnavailable};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};

/// Exit status when no confinement could be had (nothing ran).
const EXIT_UNAVAILABLE: u8 = 125;
/// Exit status for bad input (nothing ran).
const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(name = "stockade", version, about = "Confine what a command may write")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run CMD confined, with inherited stdin/stdout/stderr; exit with its status.
    Exec {
        /// read-only | workspace-write | danger-full-access (unconfined)
        #[arg(long, default_value = "workspace-write")]
        mode: SandboxMode,
        /// The directory workspace-write may write under (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// auto | bwrap | landlock
        #[arg(long, default_value = "auto")]
        backend: BackendPreference,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Probe every backend of this platform's chain and say which `auto` selects.
    Probe {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Where `auto` keeps its verdict between invocations: per user, and per boot
/// when `$XDG_RUNTIME_DIR` (a tmpfs) is available.
fn verdict_cache_dir() -> Option<PathBuf> {
    let nonempty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    nonempty("XDG_RUNTIME_DIR")
        .or_else(|| nonempty("XDG_CACHE_HOME"))
        .or_else(|| nonempty("HOME").map(|h| h.join(".cache")))
        .filter(|d| d.is_absolute())
        .map(|d| d.join("stockade"))
}

fn provider(backend: BackendPreference) -> anyhow::Result<LocalProvider> {
    let settings = LocalSettings {
        backend,
        verdict_cache_dir: verdict_cache_dir(),
        ..Default::default()
    };
    LocalProvider::new(settings).context("invalid sandbox settings")
}

fn exit_code(status: ExitStatus) -> ExitCode {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal: Option<i32> = None;
    match (status.code(), signal) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        (None, None) => ExitCode::from(EXIT_UNAVAILABLE),
    }
}

fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("stockade: {message}");
    ExitCode::from(code)
}

fn exec(
    mode: SandboxMode,
    workspace: Option<PathBuf>,
    backend: BackendPreference,
    command: Vec<OsString>,
) -> anyhow::Result<ExitCode> {
    let workspace = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    match std::fs::metadata(&workspace) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Ok(fail(
                EXIT_USAGE,
                format_args!("workspace is not a directory: {}", workspace.display()),
            ));
        }
        Err(e) => {
            return Ok(fail(
                EXIT_USAGE,
                format_args!("workspace {}: {e}", workspace.display()),
            ));
        }
    }
    let policy = ExecutionPolicy::new(mode, workspace);
    let Some(sandbox) = policy.sandbox_policy() else {
        return run(&command, &command[0], None);
    };
    let provider = provider(backend)?;
    let confined = match provider.confine(&command, &sandbox) {
        Ok(c) => c,
        Err(e) => return Ok(fail(EXIT_UNAVAILABLE, e)),
    };
    run(
        &confined.argv,
        &command[0],
        Some((&provider, confined.backend)),
    )
}

/// Spawn `argv` with inherited stdio. A runner that cannot be started is a
/// sandbox failure (nothing ran); the command's own exec failure is reported
/// by the runner from inside.
fn run(
    argv: &[OsString],
    shown: &OsString,
    runner: Option<(&LocalProvider, &str)>,
) -> anyhow::Result<ExitCode> {
    let (program, args) = argv.split_first().context("empty argv")?;
    match Command::new(program).args(args).status() {
        Ok(status) => Ok(exit_code(status)),
        Err(e) => match runner {
            Some((provider, backend))
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied) =>
            {
                provider.forget_verdict();
                let detail = format!("cannot start runner {}: {e}", Path::new(program).display());
                Ok(fail(
                    EXIT_UNAVAILABLE,
                    SandboxUnavailable::single(backend, detail),
                ))
            }
            Some(_) => Ok(fail(
                EXIT_UNAVAILABLE,
                format_args!("cannot start the sandbox runner: {e}"),
            )),
            None => Ok(fail(
                if e.kind() == ErrorKind::NotFound {
                    127
                } else {
                    126
                },
                format_args!("{}: {e}", Path::new(shown).display()),
            )),
        },
    }
}

fn probe(json: bool) -> anyhow::Result<ExitCode> {
    let report = provider(BackendPreference::Auto)?.report();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Exec {
            mode,
            workspace,
            backend,
            command,
        } => exec(mode, workspace, backend, command),
        Cmd::Probe { json } => probe(json),
    };
    result.unwrap_or_else(|e| fail(EXIT_UNAVAILABLE, format_args!("{e:#}")))
}
