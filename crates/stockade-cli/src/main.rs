//! `stockade`: run a command confined, or show what the sandbox can do here.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

mod args;
mod ask;
mod deny_read;
mod exec;
mod exit;
mod probe;
mod provider;
mod signals;
mod terminal;
mod tree;

use anyhow::Context;
use clap::Parser;

use args::{Cli, Cmd};
use exit::{EXIT_UNAVAILABLE, EXIT_USAGE, fail};

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// A configuration error names the file and key, a control-state refusal
/// names the file and the writable root it lies beneath; nothing is served
/// then.
async fn acp(config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let loaded = match stockade_config::load_config_with(&args::acp_overrides(config)) {
        Ok(c) => c,
        Err(e) => return Ok(fail(EXIT_USAGE, e)),
    };
    match stockade_acp::serve(&loaded).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.is_refusal() => Ok(fail(EXIT_USAGE, e)),
        Err(e) => Err(e.into()),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `stockade exec true`: clap only sees an unexpected argument;
            // what is missing is the separator.
            let missing_separator = e.kind() == clap::error::ErrorKind::UnknownArgument
                && std::env::args_os().nth(1).is_some_and(|a| a == "exec")
                && !std::env::args_os().any(|a| a == "--");
            let code = e.exit_code();
            let _ = e.print();
            if missing_separator {
                let _ = writeln!(
                    std::io::stderr(),
                    "stockade: put `--` before the command: stockade exec [OPTIONS] -- CMD [ARGS...]"
                );
            }
            return ExitCode::from(u8::try_from(code).unwrap_or(EXIT_USAGE));
        }
    };
    let result = match cli.command {
        Cmd::Exec(args) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .and_then(|rt| {
                // The run is awaited on this runtime to its end, so an
                // allow-listed proxy waits for its first client here: no
                // proxy thread for a command that never connects.
                #[cfg(unix)]
                let code = rt.block_on(stockade_proxy::wait_on_runtime(exec::exec(*args)));
                #[cfg(not(unix))]
                let code = rt.block_on(exec::exec(*args));
                // A question given up on a signal leaves its thread in a
                // read of the terminal that nothing can cancel: not waited
                // for (the process ends with it).
                rt.shutdown_background();
                code
            }),
        Cmd::Acp { config } => runtime().and_then(|rt| rt.block_on(acp(config))),
        Cmd::Probe { json } => probe::probe(json),
    };
    result.unwrap_or_else(|e| fail(EXIT_UNAVAILABLE, format_args!("{e:#}")))
}
