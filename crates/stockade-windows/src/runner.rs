//! `stockade-winrun`: derive the WRITE_RESTRICTED token, point TMP/TEMP at
//! the private temp directory, run the child under the token, mirror its exit
//! code.
//!
//! ```text
//! stockade-winrun --mode read-only -- ARGV...
//! stockade-winrun --mode workspace-write --workspace DIR --workspace-sid SID
//!                 [--temp-dir DIR --temp-sid SID] -- ARGV...
//! ```
//!
//! Each SID travels next to the path it was derived from and the runner
//! re-derives it: a mismatched pair is refused, so an argv cannot carry a
//! capability for a path other than the one it names. Every runner failure
//! prints one `stockade-winrun: ` line and exits [`RUNNER_FAILURE_EXIT`]
//! without running anything.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use stockade_core::{ConfiningMode, FatalLine, RunnerFailureRule};

use crate::api::Win32;
use crate::error::{Error, Step};
use crate::grants::{self, Allocation};
use crate::sid::{self, Sid};
use crate::token::{self, RESTRICTED_TOKEN_FLAGS, TokenMode};
use crate::{RUNNER_FAILURE_EXIT, cmdline, env};

/// Every line the runner prints about itself starts with this.
pub const FAILURE_PREFIX: &str = "stockade-winrun: ";
/// What the runner prints (and how it exits) off Windows.
pub const ONLY_ON_WINDOWS: &str = "stockade-winrun: only available on Windows";

const MODE: &str = "--mode";
const WORKSPACE: &str = "--workspace";
const WORKSPACE_SID: &str = "--workspace-sid";
const TEMP_DIR: &str = "--temp-dir";
const TEMP_SID: &str = "--temp-sid";

/// The rule the rung hands the shell executor.
pub fn failure_rule() -> RunnerFailureRule {
    RunnerFailureRule {
        exit_codes: Some(vec![RUNNER_FAILURE_EXIT]),
        fatal_lines: vec![FatalLine::Prefix(FAILURE_PREFIX.into())],
        informational_lines: vec![],
    }
}

/// The runner's validated arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerArgs {
    pub mode: ConfiningMode,
    pub workspace: Option<(PathBuf, Sid)>,
    pub temp: Option<(PathBuf, Sid)>,
    pub argv: Vec<OsString>,
}

fn usage(detail: impl Into<String>) -> Error {
    Error::Usage {
        detail: detail.into(),
    }
}

impl RunnerArgs {
    pub fn read_only(argv: Vec<OsString>) -> Self {
        Self {
            mode: ConfiningMode::ReadOnly,
            workspace: None,
            temp: None,
            argv,
        }
    }

    pub fn from_allocation(alloc: &Allocation, argv: Vec<OsString>) -> Self {
        Self {
            mode: ConfiningMode::WorkspaceWrite,
            workspace: Some((alloc.workspace.clone(), alloc.workspace_sid.clone())),
            temp: Some((alloc.temp_dir.clone(), alloc.temp_sid.clone())),
            argv,
        }
    }

    /// The runner's arguments (without its own path).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![MODE.into(), self.mode.as_str().into()];
        let mut pair = |flag: &str, path: &Path, sid_flag: &str, sid: &Sid| {
            out.push(flag.into());
            out.push(path.as_os_str().to_owned());
            out.push(sid_flag.into());
            out.push(sid.to_string().into());
        };
        if let Some((p, s)) = &self.workspace {
            pair(WORKSPACE, p, WORKSPACE_SID, s);
        }
        if let Some((p, s)) = &self.temp {
            pair(TEMP_DIR, p, TEMP_SID, s);
        }
        out.push("--".into());
        out.extend(self.argv.iter().cloned());
        out
    }

    /// Parse and validate the runner's arguments (without its own path).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, Error> {
        let mut args = args.into_iter();
        let mut values: [(&str, Option<OsString>); 5] = [
            (MODE, None),
            (WORKSPACE, None),
            (WORKSPACE_SID, None),
            (TEMP_DIR, None),
            (TEMP_SID, None),
        ];
        loop {
            let flag = args
                .next()
                .ok_or_else(|| usage("missing -- before the command"))?;
            if flag == "--" {
                break;
            }
            let slot = values
                .iter_mut()
                .find(|(name, _)| flag == *name)
                .ok_or_else(|| usage(format!("unknown argument {flag:?}")))?;
            if slot.1.is_some() {
                return Err(usage(format!("{} given twice", slot.0)));
            }
            let value = args
                .next()
                .ok_or_else(|| usage(format!("{} needs a value", slot.0)))?;
            slot.1 = Some(value);
        }
        let argv: Vec<OsString> = args.collect();
        if argv.is_empty() {
            return Err(usage("no command to run after --"));
        }
        let [mode, workspace, workspace_sid, temp_dir, temp_sid] = values.map(|(_, v)| v);

        let mode_text = mode.ok_or_else(|| usage("--mode is required"))?;
        let mode: ConfiningMode = mode_text
            .to_str()
            .ok_or_else(|| usage(format!("--mode {mode_text:?} is not valid")))?
            .parse()
            .map_err(|e: stockade_core::ParseVocabularyError| usage(e.to_string()))?;

        let workspace = paired(
            WORKSPACE,
            workspace,
            WORKSPACE_SID,
            workspace_sid,
            sid::workspace_sid,
        )?;
        let temp = paired(TEMP_DIR, temp_dir, TEMP_SID, temp_sid, sid::temp_sid)?;
        match mode {
            ConfiningMode::ReadOnly => {
                if workspace.is_some() || temp.is_some() {
                    return Err(usage(
                        "read-only carries no capability: --workspace and --temp-dir are refused",
                    ));
                }
            }
            ConfiningMode::WorkspaceWrite => {
                let Some((ws, _)) = &workspace else {
                    return Err(usage(
                        "workspace-write needs --workspace and --workspace-sid",
                    ));
                };
                if let Some((t, _)) = &temp {
                    grants::check_overlap(&[ws.as_path()], t)?;
                }
            }
        }
        Ok(Self {
            mode,
            workspace,
            temp,
            argv,
        })
    }

    /// The token shape these arguments ask for.
    pub fn token_mode(&self) -> TokenMode {
        match (&self.mode, &self.workspace) {
            (ConfiningMode::WorkspaceWrite, Some((_, ws))) => TokenMode::WorkspaceWrite {
                workspace: ws.clone(),
                temp: self.temp.as_ref().map(|(_, s)| s.clone()),
            },
            // `parse` refuses workspace-write without a workspace; a
            // hand-built value without one gets the narrower token.
            _ => TokenMode::ReadOnly,
        }
    }
}

/// A path and the SID derived from it: both or neither, and they must match.
fn paired(
    path_flag: &'static str,
    path: Option<OsString>,
    sid_flag: &'static str,
    given: Option<OsString>,
    derive: fn(&Path) -> Result<Sid, Error>,
) -> Result<Option<(PathBuf, Sid)>, Error> {
    let (path, given) = match (path, given) {
        (None, None) => return Ok(None),
        (Some(p), Some(s)) => (PathBuf::from(p), s),
        _ => return Err(usage(format!("{path_flag} and {sid_flag} go together"))),
    };
    // Absolute and normalized, or the overlap checks could not be trusted.
    crate::paths::same_or_within(&path, &path)?;
    let given_text = given
        .to_str()
        .ok_or_else(|| usage(format!("{sid_flag} {given:?} is not a SID")))?;
    let sid: Sid = given_text
        .parse()
        .map_err(|e: sid::ParseSidError| usage(format!("{sid_flag}: {e}")))?;
    let derived = derive(&path)?;
    if derived != sid {
        return Err(Error::SidMismatch {
            flag: sid_flag,
            given: sid.to_string(),
            derived: derived.to_string(),
        });
    }
    Ok(Some((path, sid)))
}

/// Build the token and run the child; the child's exit code on success.
///
/// Everything that can be refused without Win32 (the command line, the
/// environment block) is built first, so a refusal opens nothing. Handles
/// are released as soon as they are no longer needed (the base token before
/// the child starts, the restricted one once it runs).
pub fn run<W: Win32>(
    sys: &W,
    args: &RunnerArgs,
    environment: Vec<(OsString, OsString)>,
) -> Result<u32, Error> {
    let mode = args.token_mode();
    let command_line = cmdline::command_line(&args.argv)?;
    let temp_dir = args.temp.as_ref().map(|(p, _)| p.as_path());
    let block = env::block(&env::with_private_temp(environment, temp_dir))?;

    let w = |step| move |e| Error::win32(step, None, e);
    let base = sys
        .open_process_token()
        .map_err(w(Step::OpenProcessToken))?;
    let user = sys.token_user(&base).map_err(w(Step::QueryTokenUser))?;
    let logon = sys
        .token_logon_sid(&base)
        .map_err(w(Step::QueryLogonSid))?
        .ok_or(Error::NoLogonSid)?;
    let restricting = token::restricting_sids(&logon, &mode);
    let restricted = sys
        .create_restricted_token(&base, RESTRICTED_TOKEN_FLAGS, &restricting)
        .map_err(w(Step::CreateRestrictedToken))?;
    drop(base);
    sys.set_default_dacl(&restricted, &token::default_dacl(&user, &mode))
        .map_err(w(Step::SetDefaultDacl))?;
    sys.shield_console().map_err(w(Step::ShieldConsole))?;
    let child = sys
        .spawn(&restricted, &command_line, &block)
        .map_err(w(Step::SpawnChild))?;
    drop(restricted);
    sys.wait(&child).map_err(w(Step::WaitChild))
}

/// The one line a runner failure prints.
pub fn failure_line(e: &Error) -> String {
    let text: String = e
        .to_string()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("{FAILURE_PREFIX}{text}")
}

/// The runner's whole behaviour over any [`Win32`]: `args` includes the
/// program name. Returns the process exit code.
pub fn run_main<W: Win32>(
    sys: &W,
    args: impl IntoIterator<Item = OsString>,
    environment: Vec<(OsString, OsString)>,
    stderr: &mut dyn Write,
) -> i32 {
    let result =
        RunnerArgs::parse(args.into_iter().skip(1)).and_then(|a| run(sys, &a, environment));
    match result {
        // Bit-preserving: ExitProcess takes the same 32 bits back, so an
        // NTSTATUS like 0xC0000142 is mirrored exactly.
        Ok(code) => i32::from_ne_bytes(code.to_ne_bytes()),
        Err(e) => {
            // If stderr itself is gone there is nobody left to tell; the
            // reserved exit code still says what happened.
            let _ = writeln!(stderr, "{}", failure_line(&e));
            RUNNER_FAILURE_EXIT
        }
    }
}

/// The binary's entry point (`runner/main.rs`).
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    #[cfg(windows)]
    {
        run_main(
            &crate::ffi::System,
            args,
            std::env::vars_os().collect(),
            &mut std::io::stderr(),
        )
    }
    #[cfg(not(windows))]
    {
        drop(args);
        eprintln!("{ONLY_ON_WINDOWS}");
        RUNNER_FAILURE_EXIT
    }
}

#[cfg(test)]
mod tests;
