//! `stockade exec`: the invocation's sandbox (composed by
//! `stockade_config::sandbox` from flags, environment and config), one
//! run, and after a denial at most one approved wider retry.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use stockade_config::Sandbox;
use stockade_core::{ExecutionPolicy, NetworkMode, SandboxMode};
use stockade_shell::{
    SandboxedExecutor, ShellError, ShellExecutor, ShellRequest, ShellResult, Stdin,
};

use crate::args::ExecArgs;
use crate::ask::TerminalAnswerer;
use crate::exit::{
    EXIT_CANNOT_START, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, exit_code, fail,
};
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

/// Where questions asked while a run waits are shown (`--ask` at a
/// terminal): the run's pty session is handed to it while it lasts.
#[cfg(target_os = "linux")]
type Desk = Option<crate::ask::running::Desk>;
#[cfg(not(target_os = "linux"))]
type Desk = Option<std::convert::Infallible>;

async fn run_once(
    exec: &SandboxedExecutor,
    args: &ExecArgs,
    workdir: &Path,
    policy: ExecutionPolicy,
    desk: &Desk,
) -> Outcome {
    // Nothing else runs on exec's runtime while the run is audited.
    let mut request = ShellRequest::argv(args.command.clone(), workdir)
        .with_policy(policy)
        .with_audit_on_caller();
    // `--ask --json`: questions are read from the terminal while the
    // command runs, so it gets none of it (it could print beside a
    // question, or take the answer).
    request.stdin = if args.json && desk.is_some() {
        Stdin::Null
    } else {
        Stdin::Inherit
    };
    request.passthrough = !args.json;
    // The command runs in the terminal's foreground with us, so it can read
    // the terminal; cancellation still kills its group.
    request.own_process_group = false;
    // At a terminal the command gets one of its own; ours is raw until the
    // session is dropped, on every way out of this function.
    let session = (!args.json).then(terminal::Session::start).flatten();
    request.terminal = session.as_ref().map(|s| s.terminal().clone());
    #[cfg(target_os = "linux")]
    if let Some(d) = desk {
        d.set_run(
            session.as_ref().and_then(terminal::Session::prompt),
            !args.json,
        );
    }
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
    // Ours again before anything of ours is printed; a late question is
    // asked on /dev/tty (the run is over: none is wanted any more).
    #[cfg(target_os = "linux")]
    if let Some(d) = desk {
        d.set(None);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = desk;
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

/// What `--ask` offers after a denial: the next wider file mode for a
/// refused file effect, `allow` for a refused connection, or both.
/// A refused connection whose every host the user refused while the
/// command ran is not offered again.
fn retry_offer(
    r: &ShellResult,
    file_to: Option<SandboxMode>,
    network: NetworkMode,
    refused_by_user: &[String],
) -> (Option<SandboxMode>, Option<NetworkMode>) {
    let Some(f) = &r.sandbox else {
        return (None, None);
    };
    let file = file_to.filter(|_| f.file_denied);
    let answered = !f.network_denied_hosts.is_empty()
        && f.network_denied_hosts
            .iter()
            .all(|h| refused_by_user.contains(h));
    let net = (f.network_denied && !answered && network < NetworkMode::Allow)
        .then_some(NetworkMode::Allow);
    (file, net)
}

/// What `--ask` at a terminal asks while a run waits: hosts not on the
/// list and, under supervised Landlock, paths outside the writable roots,
/// on the caller's terminal, for this invocation's runs (the retry too).
/// The grants are this invocation's: nothing outlives it (a path grant
/// not even its command).
#[cfg(target_os = "linux")]
struct Asking {
    desk: crate::ask::running::Desk,
    grants: Arc<stockade_local::HostGrants>,
    asker: Arc<crate::ask::running::Asker>,
}

#[cfg(target_os = "linux")]
fn ask_while_running(sandbox: &Sandbox, args: &ExecArgs) -> Option<Asking> {
    use std::io::IsTerminal;
    if !args.ask || !std::io::stdin().is_terminal() {
        return None;
    }
    let desk = crate::ask::running::Desk::default();
    let asker = Arc::new(crate::ask::running::Asker::start(desk.clone())?);
    let grants = Arc::new(stockade_local::HostGrants::new());
    let mut hosts = stockade_local::HostApproval::new(asker.clone(), Arc::clone(&grants))
        .with_timeout(sandbox.ask_timeout);
    // The same bounds for paths: one answerer, one setting.
    let mut paths =
        stockade_local::PathApproval::new(asker.clone()).with_timeout(sandbox.ask_timeout);
    if let Some(n) = sandbox.ask_max_questions {
        hosts = hosts.with_max_questions(n);
        paths = paths.with_max_questions(u32::try_from(n).unwrap_or(u32::MAX));
    }
    sandbox.provider.set_host_approval(None, Some(hosts));
    // Only where writing outside the roots is what the mode refuses: under
    // read-only the mode itself forbids the write, and its widening is the
    // retry offered after the run.
    if sandbox.policy.default_mode() == SandboxMode::WorkspaceWrite {
        sandbox.provider.set_path_approval(None, Some(paths));
    }
    Some(Asking {
        desk,
        grants,
        asker,
    })
}

#[cfg(not(target_os = "linux"))]
fn ask_while_running(_: &Sandbox, _: &ExecArgs) -> Option<std::convert::Infallible> {
    None
}

#[cfg(target_os = "linux")]
fn desk_of(asking: &Option<Asking>) -> Desk {
    asking.as_ref().map(|a| a.desk.clone())
}

#[cfg(not(target_os = "linux"))]
fn desk_of(_: &Option<std::convert::Infallible>) -> Desk {
    None
}

#[cfg(target_os = "linux")]
fn refused_by_user(asking: &Option<Asking>) -> Vec<String> {
    asking
        .as_ref()
        .map(|a| a.grants.refused())
        .unwrap_or_default()
}

#[cfg(not(target_os = "linux"))]
fn refused_by_user<T>(_: &Option<T>) -> Vec<String> {
    Vec::new()
}

/// Whether the user, asked while the command waited, already said no to
/// writing a path beneath `dir`: then `dir` is not offered as a retry.
#[cfg(target_os = "linux")]
fn path_refused_beneath(asking: &Option<Asking>, dir: &Path) -> bool {
    asking
        .as_ref()
        .is_some_and(|a| a.asker.refused_paths().iter().any(|p| p.starts_with(dir)))
}

#[cfg(not(target_os = "linux"))]
fn path_refused_beneath<T>(_: &Option<T>, _: &Path) -> bool {
    false
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

pub(crate) async fn exec(args: ExecArgs) -> anyhow::Result<ExitCode> {
    tree::adopt_orphans();
    let sandbox = match stockade_config::sandbox(&args.overrides()) {
        Ok(s) => s,
        Err(e) => return Ok(fail(EXIT_USAGE, e)),
    };
    let Sandbox {
        provider,
        policy,
        executor: exec,
        workdir,
        escalate_to,
        ..
    } = &sandbox;
    let escalate_to = *escalate_to;
    let mode = policy.default_mode();
    let network = policy.effective_network(None);
    let asking = ask_while_running(&sandbox, &args);
    let desk = desk_of(&asking);
    let first = match run_once(exec, &args, workdir, policy.resolve(None, None), &desk).await {
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
    // The smallest widening first: the one directory the refused writes
    // lie in, writable for one retry. Declined, the wider offer follows;
    // accepted, it is the invocation's one retry.
    if args.ask
        && let Some(dir) = narrower(&sandbox, &first)
        && !path_refused_beneath(&asking, &dir)
        && match unless_interrupted(crate::ask::ask_narrower(&dir)).await {
            Ok(yes) => yes,
            Err(code) => return Ok(code),
        }
    {
        let mut wider = policy.resolve(None, None);
        wider.files.writable_roots.push(dir);
        return retry(exec, &args, workdir, wider, &desk, &first).await;
    }
    let (file_to, net_to) = match args.ask {
        true => retry_offer(&first, escalate_to, network, &refused_by_user(&asking)),
        false => (None, None),
    };
    // The retry is asked through the agent's approval seam, the user at
    // the terminal its only answerer.
    let approved = match (file_to, net_to) {
        (None, None) => false,
        (file, net) => {
            let answerer = Arc::new(TerminalAnswerer { mode });
            let asked = sandbox.retry_approved(answerer, &args.command, file.unwrap_or(mode), net);
            match unless_interrupted(asked).await {
                Ok(yes) => yes,
                Err(code) => return Ok(code),
            }
        }
    };
    if !approved {
        if args.json {
            print_json(&first, None)?;
        }
        return Ok(exit_code(&first.exit));
    }
    // The grant is this one retry; nothing remembers it. A wider file mode
    // keeps the network the invocation had unless that was widened too
    // (danger-full-access always means allow).
    let to = file_to.unwrap_or(mode);
    let wider = policy.resolve_with_network(None, Some(to), net_to);
    retry(exec, &args, workdir, wider, &desk, &first).await
}

/// A question at the terminal, given up when SIGINT, SIGTERM, SIGHUP or SIGQUIT
/// comes meanwhile: the run ends as a signal ends it while the command
/// runs (128 + the signal), never stuck at a prompt nobody may answer.
async fn unless_interrupted<T>(
    question: impl std::future::Future<Output = T>,
) -> Result<T, ExitCode> {
    let mut interrupts = Interrupts::catch(true);
    tokio::select! {
        answer = question => Ok(answer),
        sig = interrupts.next() => Err(ExitCode::from((128 + sig) as u8)),
    }
}

/// The invocation's one approved retry under `wider`, reported.
async fn retry(
    exec: &SandboxedExecutor,
    args: &ExecArgs,
    workdir: &Path,
    wider: ExecutionPolicy,
    desk: &Desk,
    first: &ShellResult,
) -> anyhow::Result<ExitCode> {
    let retry = match run_once(exec, args, workdir, wider, desk).await {
        Outcome::Finished(r) => r,
        Outcome::Failed(code) | Outcome::Unavailable(code) => return Ok(code),
    };
    if args.json {
        print_json(first, Some(&retry))?;
    } else if retry.denied() {
        report_denial(&retry);
    }
    Ok(exit_code(&retry.exit))
}

/// The directory to offer writable for one retry after `r`'s refused
/// writes (see `stockade_agent::narrower_root`), once the invocation's
/// provider holds it as an extra root: one holding the config, the
/// verdict cache or stockade itself is never offered.
fn narrower(sandbox: &Sandbox, r: &ShellResult) -> Option<std::path::PathBuf> {
    let dir = r.sandbox.as_ref().and_then(stockade_agent::narrower_root)?;
    matches!(sandbox.provider.pins().extra_root(&dir), Ok(Some(_))).then_some(dir)
}
