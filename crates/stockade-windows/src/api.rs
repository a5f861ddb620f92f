//! The small trait over the Win32 calls. Everything above it (the grant
//! lifecycle, the rung, the runner) is pure logic tested with a recording
//! mock; the real implementation (`ffi::System`, Windows only) is a thin,
//! checked binding with no decisions of its own.

use std::path::{Path, PathBuf};

use crate::acl::{AclEntry, Dacl};
use crate::error::WinError;
use crate::sid::Sid;

/// Every fallible method returns the Win32 API that failed and its code, so
/// the caller can fail closed naming both.
pub trait Win32: Send + Sync {
    /// An open token handle, closed when dropped.
    type Token;
    /// A started child (and whatever keeps its process tree bound to the
    /// runner), released when dropped.
    type Child;

    // ---- the rung side: directories and ACLs --------------------------------

    /// The host temp root (`GetTempPathW`), as Windows reports it.
    fn temp_root(&self) -> Result<PathBuf, WinError>;
    /// The final path of an existing file or directory, every link resolved.
    fn canonicalize(&self, path: &Path) -> Result<PathBuf, WinError>;
    /// 16 bytes from the system CSPRNG.
    fn random(&self) -> Result<[u8; 16], WinError>;
    /// Create one directory; `ERROR_ALREADY_EXISTS` if anything is there.
    fn create_dir(&self, path: &Path) -> Result<(), WinError>;
    /// Remove a directory and everything below it.
    fn remove_dir_all(&self, path: &Path) -> Result<(), WinError>;
    /// Whether a regular file exists at `path` (the runner binary).
    fn is_file(&self, path: &Path) -> bool;
    /// The object's DACL, explicit and inherited ACEs alike.
    fn read_dacl(&self, path: &Path) -> Result<Dacl, WinError>;
    /// Merge `entries` into the object's DACL (`SetEntriesInAclW`) and write
    /// it back (`SetNamedSecurityInfoW`), which propagates inheritable ACEs
    /// through the whole subtree immediately.
    fn apply_acl(&self, path: &Path, entries: &[AclEntry]) -> Result<(), WinError>;

    // ---- the runner side: the token and the child ---------------------------

    /// The runner's own primary token.
    fn open_process_token(&self) -> Result<Self::Token, WinError>;
    /// The token's user SID.
    fn token_user(&self, token: &Self::Token) -> Result<Sid, WinError>;
    /// The token's logon SID (the group with `SE_GROUP_LOGON_ID`), if any.
    fn token_logon_sid(&self, token: &Self::Token) -> Result<Option<Sid>, WinError>;
    /// `CreateRestrictedToken(token, flags, restricting SIDs)`.
    fn create_restricted_token(
        &self,
        token: &Self::Token,
        flags: u32,
        restricting: &[Sid],
    ) -> Result<Self::Token, WinError>;
    /// `SetTokenInformation(TokenDefaultDacl)` with an ACL of `entries`.
    fn set_default_dacl(&self, token: &Self::Token, entries: &[AclEntry]) -> Result<(), WinError>;
    /// Keep the runner alive through Ctrl+C/Ctrl+Break so it reports the
    /// child's own exit; the child shares the console and decides itself.
    fn shield_console(&self) -> Result<(), WinError>;
    /// Start the child under `token` with the NUL-terminated `command_line`
    /// and `environment` block, inheriting the runner's standard handles (and
    /// no other handle), its current directory and its console, in a job that
    /// kills the child's tree when the runner lets go of it.
    fn spawn(
        &self,
        token: &Self::Token,
        command_line: &[u16],
        environment: &[u16],
    ) -> Result<Self::Child, WinError>;
    /// Wait for the child to exit and return its exit code.
    fn wait(&self, child: &Self::Child) -> Result<u32, WinError>;
}
