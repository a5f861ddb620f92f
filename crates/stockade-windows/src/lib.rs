//! The Windows restricted-token rung of the local provider.
//!
//! A confined child runs under a WRITE_RESTRICTED token derived from the
//! caller's own (`CreateRestrictedToken` with `WRITE_RESTRICTED |
//! DISABLE_MAX_PRIVILEGE | LUA_TOKEN`). Reads keep the caller's access; a
//! write must also match an ACE for one of the restricting SIDs, of which
//! only two are capabilities: the workspace SID (a standing ACE on the
//! workspace) and the private temp SID (a revocable ACE on a random
//! per-session directory TMP/TEMP point at, removed when the session ends;
//! session-less calls get one per provider).
//!
//! | module | what |
//! |---|---|
//! | [`sid`] | SIDs; workspace/temp derivation (sha256, domain-separated) |
//! | [`paths`] | Windows path canonical form and containment, on UTF-16 |
//! | [`acl`] | DACL parsing, the capability ACE, the exact-ACE skip |
//! | [`token`] | restricting SIDs and default DACL per mode |
//! | [`env`], [`cmdline`] | the child's TMP/TEMP, environment block, command line |
//! | [`api`] | the [`Win32`] trait every effect goes through |
//! | [`grants`] | the standing/revocable ACE lifecycle |
//! | [`rung`] | [`WindowsRung`], the `PlatformRung` |
//! | [`runner`] | `stockade-winrun`'s argv and main logic |
//!
//! Only the Windows binding of [`Win32`] may use `unsafe`.
#![deny(unsafe_code)]

pub mod acl;
pub mod api;
pub mod cmdline;
pub mod env;
pub mod error;
pub mod grants;
pub mod paths;
pub mod rung;
pub mod runner;
pub mod sid;
pub mod token;

#[cfg(windows)]
#[allow(unsafe_code)]
mod ffi;
#[cfg(test)]
mod mock;

pub use api::Win32;
pub use error::{Error, WinError};
pub use rung::{BACKEND, WindowsRung};
pub use runner::FAILURE_PREFIX;
pub use sid::Sid;

#[cfg(windows)]
pub use ffi::System;

/// The exit code reserved for the runner's own failures: `0x2000_007D`.
///
/// Why a child is unlikely to exit with it: programs and shells exit with
/// small codes (0..=255, `cmd` adds 9009), crashes exit with NTSTATUS error
/// or warning codes (`0xC...`, `0x8...`), unhandled C++/.NET exceptions with
/// `0xE...`. This value sets bit 29, the NTSTATUS *customer* bit that no
/// Windows component uses, with success severity, which no crash reports. The
/// low byte is 125, the launcher-failure code of the rest of this workspace,
/// so the non-Windows stub, whose status Unix truncates to 8 bits, exits 125
/// too. Even so a child *can* exit with it, which is why the failure rule
/// also requires a `stockade-winrun: ` line.
pub const RUNNER_FAILURE_EXIT: i32 = 0x2000_007D;

/// The runner's file name.
pub const RUNNER_NAME: &str = "stockade-winrun";

/// Where the runner is by default: next to the current executable (where
/// `cargo install` puts both). Never a relative path or `PATH` lookup: the
/// runner decides what a confined child may write.
pub fn default_runner() -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot locate the current executable: {e}"))?;
    Ok(exe.with_file_name(format!("{RUNNER_NAME}{}", std::env::consts::EXE_SUFFIX)))
}

/// The rung the CLI mounts with `LocalProvider::with_rung`: the runner at
/// `runner_path`, or next to the current executable.
#[cfg(windows)]
pub fn rung(
    runner_path: Option<std::path::PathBuf>,
) -> std::sync::Arc<dyn stockade_local::PlatformRung> {
    let runner = runner_path.map_or_else(default_runner, Ok);
    std::sync::Arc::new(WindowsRung::new(System, runner))
}
