//! Structured failures. Every Win32 failure carries the API that failed and
//! its error code, so a refusal to confine always says exactly what broke.

use std::fmt;
use std::path::PathBuf;

/// `ERROR_ALREADY_EXISTS`: `CreateDirectoryW` found something at the path.
pub const ERROR_ALREADY_EXISTS: u32 = 183;
/// `ERROR_INVALID_PARAMETER`: what Win32 reports for an argument it rejects
/// before doing anything (std reports interior NULs this way, without a code).
pub const ERROR_INVALID_PARAMETER: u32 = 87;

/// One failed Win32 call: the API name and the code it reported
/// (`GetLastError`, the returned `WIN32_ERROR`, or the returned NTSTATUS for
/// the few APIs that return one, e.g. `BCryptGenRandom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{api} failed with Win32 error {code} ({code:#010x})")]
pub struct WinError {
    pub api: &'static str,
    pub code: u32,
}

impl WinError {
    pub const fn new(api: &'static str, code: u32) -> Self {
        Self { api, code }
    }
}

/// What the rung or the runner was doing when a Win32 call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    CanonicalizeWorkspace,
    LocateTempRoot,
    CanonicalizeTempRoot,
    DrawTempName,
    ReadWorkspaceDacl,
    GrantWorkspaceAce,
    CreateTempDir,
    GrantTempAce,
    RevokeTempAce,
    RemoveTempDir,
    OpenProcessToken,
    QueryTokenUser,
    QueryLogonSid,
    CreateRestrictedToken,
    SetDefaultDacl,
    ShieldConsole,
    SpawnChild,
    WaitChild,
}

impl Step {
    pub const fn describe(self) -> &'static str {
        match self {
            Step::CanonicalizeWorkspace => "canonicalizing the workspace",
            Step::LocateTempRoot => "locating the temp root",
            Step::CanonicalizeTempRoot => "canonicalizing the temp root",
            Step::DrawTempName => "drawing a random private temp name",
            Step::ReadWorkspaceDacl => "reading the workspace DACL",
            Step::GrantWorkspaceAce => "granting the standing workspace ACE",
            Step::CreateTempDir => "creating the private temp directory",
            Step::GrantTempAce => "granting the private temp ACE",
            Step::RevokeTempAce => "revoking the private temp ACE",
            Step::RemoveTempDir => "removing the private temp directory",
            Step::OpenProcessToken => "opening the caller's token",
            Step::QueryTokenUser => "reading the token user",
            Step::QueryLogonSid => "reading the token logon SID",
            Step::CreateRestrictedToken => "creating the restricted token",
            Step::SetDefaultDacl => "setting the token default DACL",
            Step::ShieldConsole => "installing the console control handler",
            Step::SpawnChild => "starting the child",
            Step::WaitChild => "waiting for the child",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Which way a writable root and the private temp directory overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The writable root is the temp directory or contains it.
    RootContainsTemp,
    /// The temp directory contains the writable root.
    TempContainsRoot,
}

/// Every way the rung or the runner refuses. Paths are shown with `{:?}` so a
/// path holding a newline cannot split the runner's one failure line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{step}{}: {source}", on_path(.path))]
    Win32 {
        step: Step,
        path: Option<PathBuf>,
        source: WinError,
    },
    /// The workspace's inheritable standing ACE would reach every private
    /// temp directory of every session.
    #[error(
        "workspace {workspace:?} is the temp root {temp_root:?} or contains it; its standing ACE would reach every private temp directory"
    )]
    WorkspaceContainsTempRoot {
        workspace: PathBuf,
        temp_root: PathBuf,
    },
    #[error("{}", overlap_text(*.overlap, .root, .temp_dir))]
    TempOverlap {
        root: PathBuf,
        temp_dir: PathBuf,
        overlap: Overlap,
    },
    #[error("path {path:?} is not an absolute, normalized Windows path")]
    NotAbsolute { path: PathBuf },
    #[error("path {path:?} cannot be represented as UTF-16")]
    PathEncoding { path: PathBuf },
    #[error(
        "no free private temp name under {temp_root:?} after {attempts} random draws (ERROR_ALREADY_EXISTS each time)"
    )]
    TempNameExhausted { temp_root: PathBuf, attempts: u32 },
    #[error("runner not found at {path:?}")]
    RunnerMissing { path: PathBuf },
    #[error("the runner could not be located: {why}")]
    RunnerUnlocated { why: String },
    #[error("the caller's token has no logon SID (SE_GROUP_LOGON_ID)")]
    NoLogonSid,
    #[error("{flag} {given} does not match the SID derived from its path ({derived})")]
    SidMismatch {
        flag: &'static str,
        given: String,
        derived: String,
    },
    #[error("usage: {detail}")]
    Usage { detail: String },
    #[error("{what} contains a NUL character")]
    InteriorNul { what: &'static str },
    #[error("environment variable name {name:?} is not valid")]
    EnvName { name: std::ffi::OsString },
    #[error("program name {program:?} contains a double quote, which no command line can carry")]
    ProgramQuote { program: std::ffi::OsString },
}

fn on_path(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" on {p:?}"),
        None => String::new(),
    }
}

fn overlap_text(overlap: Overlap, root: &std::path::Path, temp: &std::path::Path) -> String {
    match overlap {
        Overlap::RootContainsTemp => {
            format!("writable root {root:?} is or contains the private temp directory {temp:?}")
        }
        Overlap::TempContainsRoot => {
            format!("private temp directory {temp:?} contains the writable root {root:?}")
        }
    }
}

impl Error {
    pub fn win32(step: Step, path: Option<&std::path::Path>, source: WinError) -> Self {
        Error::Win32 {
            step,
            path: path.map(std::path::Path::to_path_buf),
            source,
        }
    }

    /// The failed Win32 call, when this is a Win32 failure.
    pub fn win_error(&self) -> Option<WinError> {
        match self {
            Error::Win32 { source, .. } => Some(*source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn win32_failures_name_the_api_and_the_code() {
        let e = Error::win32(
            Step::GrantWorkspaceAce,
            Some(std::path::Path::new(r"C:\w")),
            WinError::new("SetNamedSecurityInfoW", 5),
        );
        assert_eq!(
            e.to_string(),
            r#"granting the standing workspace ACE on "C:\\w": SetNamedSecurityInfoW failed with Win32 error 5 (0x00000005)"#
        );
        let e = Error::win32(
            Step::CreateRestrictedToken,
            None,
            WinError::new("CreateRestrictedToken", 1314),
        );
        assert_eq!(
            e.to_string(),
            "creating the restricted token: CreateRestrictedToken failed with Win32 error 1314 (0x00000522)"
        );
    }

    #[test]
    fn paths_in_messages_cannot_break_the_line() {
        let e = Error::RunnerMissing {
            path: PathBuf::from("C:\\a\nb"),
        };
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}
