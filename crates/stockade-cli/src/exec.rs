//! `stockade exec`: the invocation's policy from flags, environment and
//! config, one run, and after a denial at most one approved wider retry.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use stockade_config::{self as config, Config};
use stockade_core::files::{self, FilePolicy, ListKind};
use stockade_core::{ExecutionPolicy, NetworkMode, NetworkPolicy, SandboxMode, net};
use stockade_local::{LocalProvider, LocalSettings};
use stockade_shell::{
    SandboxedExecutor, ShellError, ShellExecutor, ShellRequest, ShellResult, Stdin,
};

use crate::args::ExecArgs;
use crate::exit::{
    EXIT_CANNOT_START, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, exit_code, fail,
};
use crate::provider::provider_with;
use crate::signals::Interrupts;
use crate::{deny_read, terminal, tree};

fn not_found(e: &ShellError) -> bool {
    matches!(e, ShellError::Start { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

enum Outcome {
    Finished(Box<ShellResult>),
    Failed(ExitCode),
    /// The sandbox itself could not run: the only outcome after which the
    /// cached backend verdict may be stale.
    Unavailable(ExitCode),
}

async fn run_once(
    exec: &SandboxedExecutor,
    args: &ExecArgs,
    workdir: &Path,
    policy: ExecutionPolicy,
) -> Outcome {
    let mut request = ShellRequest::argv(args.command.clone(), workdir).with_policy(policy);
    request.stdin = Stdin::Inherit;
    request.passthrough = !args.json;
    // The command runs in the terminal's foreground with us, so it can read
    // the terminal; cancellation still kills its group.
    request.own_process_group = false;
    // At a terminal the command gets one of its own; ours is raw until the
    // session is dropped, on every way out of this function.
    let session = (!args.json).then(terminal::Session::start).flatten();
    request.terminal = session.as_ref().map(|s| s.terminal().clone());
    let mut interrupts = Interrupts::catch(session.is_none());
    let run = exec.run(exec.resolve(request));
    let result = match tokio::select! {
        r = run => Ok(r),
        sig = interrupts.next() => Err(sig),
    } {
        Ok(r) => r,
        Err(sig) => {
            // The run was dropped with the select: the command is killed.
            // What it started is ended too, in every mode.
            tree::kill_descendants();
            return Outcome::Failed(ExitCode::from((128 + sig) as u8));
        }
    };
    // The status is reported only once nothing the command started runs:
    // what a runner leaves none of, danger-full-access and an unsupervised
    // run leave to us as their orphans.
    tree::kill_descendants();
    // Ours again before anything of ours is printed.
    drop(session);
    // A deny-read path beneath a writable root: whether this run enforced
    // it, once per run, in every output mode (JSON carries it too).
    if let Ok(r) = &result
        && let Some(line) = r.sandbox.as_ref().and_then(deny_read::line)
    {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    // What the audit after the run set aside, whatever else happened
    // (JSON carries it in the result).
    if let Ok(r) = &result
        && let Some(f) = &r.sandbox
        && !args.json
    {
        for line in f.after_run_lines() {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
    match result {
        Ok(r) => Outcome::Finished(Box::new(r)),
        Err(ShellError::SandboxUnavailable(e)) => Outcome::Unavailable(fail(EXIT_UNAVAILABLE, e)),
        // Unconfined (danger-full-access): the same words and statuses a
        // shell, or the launcher under a sandbox, gives.
        Err(ShellError::Start {
            ref program,
            ref source,
            ..
        }) if let Some(errno) = source.raw_os_error()
            && matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::NotADirectory
                    | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            let (code, line) = stockade_core::status::RunnerStatus::shell_exec_failure(
                &program.display().to_string(),
                errno,
            );
            let _ = writeln!(std::io::stderr(), "{line}");
            Outcome::Failed(ExitCode::from(
                u8::try_from(code).unwrap_or(EXIT_CANNOT_START),
            ))
        }
        Err(e @ ShellError::Start { .. }) if not_found(&e) => {
            Outcome::Failed(fail(EXIT_NOT_FOUND, e))
        }
        Err(e) => Outcome::Failed(fail(EXIT_CANNOT_START, e)),
    }
}

/// After a denial: the markers, what was refused, and what was writable.
fn report_denial(r: &ShellResult) {
    let Some(f) = &r.sandbox else { return };
    let mut err = std::io::stderr().lock();
    // Our lines start at a line start: the command's passed-through stderr
    // may have ended mid-line (a prompt, a progress bar, `printf x >&2`).
    if r.stderr.bytes.last().is_some_and(|b| *b != b'\n') {
        let _ = writeln!(err);
    }
    for marker in f.markers() {
        let _ = writeln!(err, "{marker}");
    }
    for line in f.denial_details() {
        let _ = writeln!(err, "stockade: {line}");
    }
}

/// The invocation's network policy: the mode (`--network`, else the
/// config's, else the mode's default; always `allow` under
/// danger-full-access) and the host list (the config's, else the default
/// list; `--no-default-hosts` keeps only what the config wrote out, then
/// `--allow-host` adds).
fn network_policy(
    args: &ExecArgs,
    mode: SandboxMode,
    config: Option<&Config>,
) -> Result<NetworkPolicy, String> {
    let mut hosts = match (config, args.no_default_hosts) {
        (Some(c), false) => c.allowed_hosts().to_vec(),
        (Some(c), true) if c.policy.allowed_hosts.is_some() => c.allowed_hosts().to_vec(),
        (_, true) => Vec::new(),
        (None, false) => stockade_config::default_allowed_hosts(),
    };
    let given =
        net::parse_hosts(&args.allow_hosts).map_err(|(_, e)| format!("--allow-host {e}"))?;
    for h in given {
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let network = match mode {
        SandboxMode::DangerFullAccess => NetworkMode::Allow,
        _ => args
            .network
            .or(config.and_then(|c| c.policy.network))
            .unwrap_or(NetworkMode::default_for(mode)),
    };
    Ok(NetworkPolicy::new(network, hosts).with_listen(args.allow_listen.clone()))
}

/// What `--ask` offers after a denial: the next wider file mode for a
/// refused file effect, `allow` for a refused connection, or both.
fn retry_offer(
    r: &ShellResult,
    file_to: Option<SandboxMode>,
    network: NetworkMode,
) -> (Option<SandboxMode>, Option<NetworkMode>) {
    let Some(f) = &r.sandbox else {
        return (None, None);
    };
    let file = file_to.filter(|_| f.file_denied);
    let net = (f.network_denied && network < NetworkMode::Allow).then_some(NetworkMode::Allow);
    (file, net)
}

/// Ask on the terminal; anything but yes (or no terminal at all) is no.
fn ask_retry(mode: Option<SandboxMode>, network: Option<NetworkMode>) -> bool {
    if !std::io::stdin().is_terminal() {
        return false;
    }
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return false;
    };
    let mut out = &tty;
    let what = match (mode, network) {
        (Some(m), Some(n)) => format!("under {m} with network {n}"),
        (Some(m), None) => format!("under {m}"),
        (None, Some(n)) => format!("with network {n}"),
        (None, None) => return false,
    };
    if write!(out, "stockade: retry this command once {what}? [y/N] ").is_err() {
        return false;
    }
    let _ = out.flush();
    let mut line = String::new();
    if std::io::BufReader::new(&tty).read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn print_json(r: &ShellResult, retried: Option<&ShellResult>) -> anyhow::Result<()> {
    let mut v = serde_json::json!({ "result": r, "retry": retried });
    deny_read::add_to_json(&mut v["result"], r.sandbox.as_ref());
    if let Some(retry) = retried {
        deny_read::add_to_json(&mut v["retry"], retry.sandbox.as_ref());
    }
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// A directory the invocation names (`flag`), absolute: a relative one is
/// resolved against the current directory once, here, and never again;
/// none is the current directory.
fn absolute_dir(flag: &str, given: Option<&Path>) -> Result<PathBuf, String> {
    match given {
        Some(w) => std::path::absolute(w).map_err(|e| {
            format!(
                "{flag} {}: cannot be made absolute against the current directory: {e}",
                w.display()
            )
        }),
        None => std::env::current_dir()
            .map_err(|e| format!("{flag}: cannot read the current directory: {e}")),
    }
}

/// `--cd`: absolute, and a directory now (the runner would otherwise fail
/// with a message about its own chdir, or the launch about the runner).
fn command_dir(given: Option<&Path>) -> Result<PathBuf, String> {
    let dir = absolute_dir("--cd", given)?;
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(format!("--cd {}: not a directory", dir.display())),
        Err(e) => Err(format!("--cd {}: {e}", dir.display())),
    }
}

/// The invocation's file policy: the config's lists (expanded when it was
/// loaded), then the flags expanded once. The deny list is the config's
/// (the default list when it left `deny_read` out; with no config, the
/// default list); `--no-default-deny-read` keeps only what the config wrote
/// out. The error names the flag and the value.
fn file_policy(args: &ExecArgs, config: Option<&Config>) -> Result<FilePolicy, String> {
    let env = files::process_env;
    let list = |values: &[OsString], kind: ListKind| {
        files::expand_all(values, kind, &env).map_err(|(_, e)| format!("{} {e}", kind.flag()))
    };
    let base = config.map(|c| c.file_policy().clone()).unwrap_or_default();
    let mut deny_read = match (config, args.no_default_deny_read) {
        (Some(_), false) => base.deny_read.clone(),
        (Some(c), true) if c.policy.deny_read.is_some() => base.deny_read.clone(),
        (_, true) => Vec::new(),
        (None, false) => stockade_config::default_deny_read(&env).map_err(|(_, e)| {
            format!("the default deny-read list {e} (or pass --no-default-deny-read)")
        })?,
    };
    let merge = |into: &mut Vec<PathBuf>, more: Vec<PathBuf>| {
        for p in more {
            if !into.contains(&p) {
                into.push(p);
            }
        }
    };
    merge(&mut deny_read, list(&args.deny_read, ListKind::DenyRead)?);
    let mut writable_roots = base.writable_roots;
    merge(
        &mut writable_roots,
        list(&args.writable, ListKind::WritableRoots)?,
    );
    let mut read_only = base.read_only;
    merge(&mut read_only, list(&args.read_only, ListKind::ReadOnly)?);
    // The protect list rides on read_only (its names are relative or
    // ~/, which read_only's absolute entries never are). The default
    // applies as deny-read's does: the config's (its default when it left
    // `protect` out), else the default; --no-default-protect keeps only
    // what the config wrote out.
    let defaults: Vec<PathBuf> = config::DEFAULT_PROTECT.iter().map(PathBuf::from).collect();
    match (config, args.no_default_protect) {
        (Some(c), true) if c.policy.protect.is_none() => {
            read_only.retain(|p| !defaults.contains(p));
        }
        (None, true) | (Some(_), _) => {}
        (None, false) => merge(&mut read_only, defaults),
    }
    let mut protect = Vec::new();
    for name in &args.protect {
        protect.push(config::protect_entry(name).map_err(|e| format!("--protect {e}"))?);
    }
    merge(&mut read_only, protect);
    Ok(FilePolicy {
        writable_roots,
        deny_read,
        read_only,
    })
}

/// The config `exec` reads: `--config`, else `$STOCKADE_CONFIG`, else
/// none. A file at the default path is never read unless named: a run of
/// an earlier invocation whose writable roots covered that path could have
/// planted it, and it would decide this run's confinement. `$STOCKADE_MODE`
/// is applied over its mode by the loader.
fn exec_config(given: Option<&Path>) -> Result<Option<stockade_config::LoadedConfig>, String> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(stockade_config::ENV_CONFIG) {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => return Ok(None),
        },
    };
    stockade_config::load_config(Some(&path))
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Register what decides `stockade acp`'s later runs (its default config
/// file and its session logs, whether or not they exist yet) as control
/// state, so no extra writable root of this run may contain them.
fn protect_agent_state(provider: &LocalProvider) {
    if let Ok(path) = Config::default_path() {
        provider.pins().add_control_path("config", &path);
    }
    if let Ok(dir) = stockade_config::session_dir() {
        provider
            .pins()
            .add_control_path("session log directory", &dir);
    }
}

/// The mode, by [`stockade_config::MODE_PRECEDENCE`]: `--mode`, else
/// `$STOCKADE_MODE` (already applied to a loaded config's), else the
/// config's, else the default. `exec` has no session.
fn exec_mode(args: &ExecArgs, config: Option<&Config>) -> Result<SandboxMode, String> {
    let layers = stockade_config::ModeLayers {
        flag: args.mode,
        config: config.map(|c| c.policy.mode),
        ..Default::default()
    };
    layers
        .resolve_reading_env(stockade_config::env_mode)
        .map(|(mode, _)| mode)
        .map_err(|e| e.to_string())
}

/// The provider's settings: the config's [sandbox] (paths relative to the
/// config's directory), `--backend` and `--allow-socket` over it.
fn exec_settings(
    args: &ExecArgs,
    loaded: Option<&stockade_config::LoadedConfig>,
) -> Result<LocalSettings, String> {
    let verdict_cache_dir = LocalSettings::default_verdict_cache_dir();
    let sandbox = loaded.and_then(|l| l.config.sandbox.as_ref().map(|sb| (l, sb)));
    let mut settings = match sandbox {
        Some((l, sb)) => stockade_config::local_settings(sb, &l.path, &l.dir, verdict_cache_dir)
            .map_err(|e| e.to_string())?,
        None => LocalSettings {
            verdict_cache_dir,
            ..Default::default()
        },
    };
    if let Some(b) = args.backend {
        settings.backend = b;
    }
    for s in &args.allow_sockets {
        if !settings.allow_sockets.contains(s) {
            settings.allow_sockets.push(s.clone());
        }
    }
    Ok(settings)
}

pub(crate) async fn exec(args: ExecArgs) -> anyhow::Result<ExitCode> {
    tree::adopt_orphans();
    let workspace = match absolute_dir("--workspace", args.workspace.as_deref()) {
        Ok(w) => w,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    let workdir = match command_dir(args.cd.as_deref()) {
        Ok(d) => d,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    let loaded = match exec_config(args.config.as_deref()) {
        Ok(l) => l,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    let config = loaded.as_ref().map(|l| &l.config);
    let mode = match exec_mode(&args, config) {
        Ok(m) => m,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    let files = match file_policy(&args, config) {
        Ok(f) => f,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    // `--writable @npm` means the cache even before npm first made it.
    if let Some((dir, e)) = stockade_local::create_group_caches(&args.writable).first() {
        return Ok(fail(
            EXIT_USAGE,
            format_args!("--writable: cannot create {}: {e}", dir.display()),
        ));
    }
    // A relative socket would name a different socket wherever CMD runs.
    if let Some(p) = args.allow_sockets.iter().find(|p| !p.is_absolute()) {
        return Ok(fail(
            EXIT_USAGE,
            format_args!("--allow-socket {}: must be an absolute path", p.display()),
        ));
    }
    let escalate_to = match (args.ask, args.escalate_to, mode.wider()) {
        (false, _, _) => None,
        (true, Some(to), _) if to > mode => Some(to),
        (true, Some(to), _) => {
            return Ok(fail(
                EXIT_USAGE,
                format_args!("--escalate-to {to} is not wider than the mode ({mode})"),
            ));
        }
        (true, None, wider) => wider,
    };
    let settings = match exec_settings(&args, loaded.as_ref()) {
        Ok(s) => s,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    let provider = match provider_with(settings) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            return Ok(fail(
                EXIT_USAGE,
                format_args!("invalid sandbox settings: {e}"),
            ));
        }
    };
    // Held before anything runs, through the provider's own pins: `/`, a
    // symlink a confined run planted in /tmp, or a workspace moved in its
    // place is refused here, and every run of this invocation (the retry
    // too) gets this directory, never whatever the path names later.
    let held = match provider.pins().workspace(&workspace) {
        Ok(h) => h,
        Err(e) => return Ok(fail(EXIT_USAGE, e)),
    };
    // The config decides every later run's confinement: one a run of this
    // workspace (or of the temp roots) could rewrite is refused, and no
    // extra root may contain it.
    if let Some(l) = &loaded {
        if let Err(e) = provider
            .pins()
            .refuse_beneath("config", &l.path, Some(&held))
        {
            return Ok(fail(EXIT_USAGE, e));
        }
        provider.pins().add_control_path("config", &l.path);
    }
    protect_agent_state(&provider);
    // Extra roots likewise, once, before anything runs (one that holds
    // stockade itself or the verdict cache is refused, naming both).
    for root in &files.writable_roots {
        if let Err(e) = provider.pins().extra_root(root) {
            return Ok(fail(EXIT_USAGE, e));
        }
    }
    let network = match network_policy(&args, mode, config) {
        Ok(n) => n,
        Err(message) => return Ok(fail(EXIT_USAGE, message)),
    };
    let policy = ExecutionPolicy::new(mode, workspace.clone())
        .with_files(files.clone())
        .with_network(network.clone());
    let exec = SandboxedExecutor::new(provider.clone(), policy.clone());
    let first = match run_once(&exec, &args, &workdir, policy).await {
        Outcome::Finished(r) => r,
        Outcome::Unavailable(code) => {
            // The cached auto verdict may be stale; the next run re-probes.
            provider.forget_verdict();
            return Ok(code);
        }
        // A command that could not start (a typo under danger-full-access)
        // says nothing about the backends.
        Outcome::Failed(code) => return Ok(code),
    };
    if !first.denied() {
        if args.json {
            print_json(&first, None)?;
        }
        return Ok(exit_code(&first.exit));
    }
    if !args.json {
        report_denial(&first);
    }
    let (file_to, net_to) = match args.ask {
        true => retry_offer(&first, escalate_to, network.mode),
        false => (None, None),
    };
    if (file_to.is_none() && net_to.is_none()) || !ask_retry(file_to, net_to) {
        if args.json {
            print_json(&first, None)?;
        }
        return Ok(exit_code(&first.exit));
    }
    // The grant is this one retry; nothing remembers it. A wider file mode
    // keeps the network the invocation had unless that was widened too
    // (danger-full-access always means allow).
    let to = file_to.unwrap_or(mode);
    let mut retry_net = network;
    if let Some(n) = net_to {
        retry_net.mode = n;
    }
    if to == SandboxMode::DangerFullAccess {
        retry_net.mode = NetworkMode::Allow;
    }
    let wider = ExecutionPolicy::new(to, workspace)
        .with_files(files)
        .with_network(retry_net);
    let retry = match run_once(&exec, &args, &workdir, wider).await {
        Outcome::Finished(r) => r,
        Outcome::Failed(code) | Outcome::Unavailable(code) => return Ok(code),
    };
    if args.json {
        print_json(&first, Some(&retry))?;
    } else if retry.denied() {
        report_denial(&retry);
    }
    Ok(exit_code(&retry.exit))
}
