//! The real [`Win32`]: thin, checked bindings over `windows-sys`. No policy
//! lives here; every decision is made by the pure code above the trait. Each
//! call's failure is returned with the API's name and its code, so nothing
//! fails open.
//!
//! This is the only module of the crate allowed to use `unsafe`.

use std::ffi::{OsString, c_void};
use std::mem::size_of;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::ptr;

use windows_sys::Win32::Foundation::{
    DUPLICATE_SAME_ACCESS, DuplicateHandle, ERROR_INSUFFICIENT_BUFFER, ERROR_SUCCESS, GetLastError,
    HANDLE, INVALID_HANDLE_VALUE, LocalFree, WAIT_FAILED,
};
use windows_sys::Win32::Security::Authorization::{
    EXPLICIT_ACCESS_W, GetNamedSecurityInfoW, NO_MULTIPLE_TRUSTEE, REVOKE_ACCESS, SE_FILE_OBJECT,
    SET_ACCESS, SetEntriesInAclW, SetNamedSecurityInfoW, TRUSTEE_IS_SID, TRUSTEE_IS_UNKNOWN,
    TRUSTEE_W,
};
use windows_sys::Win32::Security::Cryptography::{
    BCRYPT_USE_SYSTEM_PREFERRED_RNG, BCryptGenRandom,
};
use windows_sys::Win32::Security::{
    ACL, CreateRestrictedToken, DACL_SECURITY_INFORMATION, GetLengthSid, GetTokenInformation,
    IsValidSid, PSECURITY_DESCRIPTOR, PSID, SID_AND_ATTRIBUTES, SetTokenInformation,
    TOKEN_ADJUST_DEFAULT, TOKEN_ASSIGN_PRIMARY, TOKEN_DEFAULT_DACL, TOKEN_DUPLICATE, TOKEN_GROUPS,
    TOKEN_INFORMATION_CLASS, TOKEN_QUERY, TOKEN_USER, TokenDefaultDacl, TokenGroups, TokenUser,
};
use windows_sys::Win32::Storage::FileSystem::GetTempPathW;
use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, CTRL_C_EVENT, GetStdHandle, STD_ERROR_HANDLE, STD_HANDLE, STD_INPUT_HANDLE,
    STD_OUTPUT_HANDLE, SetConsoleCtrlHandler,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
    SetInformationJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT, CreateProcessAsUserW,
    DeleteProcThreadAttributeList, EXTENDED_STARTUPINFO_PRESENT, GetCurrentProcess,
    GetExitCodeProcess, INFINITE, InitializeProcThreadAttributeList, LPPROC_THREAD_ATTRIBUTE_LIST,
    OpenProcessToken, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, PROCESS_INFORMATION, ResumeThread,
    STARTF_USESTDHANDLES, STARTUPINFOEXW, STARTUPINFOW, TerminateProcess,
    UpdateProcThreadAttribute, WaitForSingleObject,
};

use crate::RUNNER_FAILURE_EXIT;
use crate::acl::{AclEntry, AclMode, Dacl};
use crate::api::Win32;
use crate::error::{ERROR_INVALID_PARAMETER, WinError};
use crate::sid::Sid;

/// `SE_GROUP_LOGON_ID` (windows-sys has it only as an `i32` in another
/// feature).
const SE_GROUP_LOGON_ID: u32 = 0xC000_0000;
const ERROR_INVALID_SID: u32 = 1337;
const ERROR_INVALID_ACL: u32 = 1336;

/// The Windows host.
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

/// An owned token handle.
pub struct Token(OwnedHandle);

/// A started child: its process, and the job that kills its whole tree when
/// the runner lets go of it (the runner exits, or dies), so no confined
/// process outlives the runner that reports on it.
pub struct Child {
    process: OwnedHandle,
    _job: OwnedHandle,
}

fn last_error(api: &'static str) -> WinError {
    // SAFETY: GetLastError has no preconditions; it reads this thread's
    // last-error value, set by the call that just failed.
    WinError::new(api, unsafe { GetLastError() })
}

/// std reports Win32 failures with their code; the only code-less errors on
/// these calls are argument validation (an interior NUL), which Win32 itself
/// would report as ERROR_INVALID_PARAMETER.
fn io_error(api: &'static str, e: &std::io::Error) -> WinError {
    WinError::new(
        api,
        e.raw_os_error().map_or(ERROR_INVALID_PARAMETER, |c| {
            u32::from_ne_bytes(c.to_ne_bytes())
        }),
    )
}

fn wide_nul(path: &Path, api: &'static str) -> Result<Vec<u16>, WinError> {
    let mut w: Vec<u16> = path.as_os_str().encode_wide().collect();
    if w.contains(&0) {
        return Err(WinError::new(api, ERROR_INVALID_PARAMETER));
    }
    w.push(0);
    Ok(w)
}

fn len_u32(n: usize, api: &'static str) -> Result<u32, WinError> {
    u32::try_from(n).map_err(|_| WinError::new(api, ERROR_INVALID_PARAMETER))
}

/// A SID in 4-byte aligned storage, as the `SID` structure requires.
struct SidBuf(Vec<u32>);

impl SidBuf {
    fn new(sid: &Sid) -> Self {
        let words = sid
            .to_bytes()
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_ne_bytes(w)
            })
            .collect();
        Self(words)
    }

    /// The APIs this is passed to only read through it.
    fn as_psid(&self) -> PSID {
        self.0.as_ptr().cast_mut().cast()
    }
}

/// Memory Win32 allocated with `LocalAlloc`, freed on drop.
struct Local(*mut c_void);

impl Drop for Local {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from a Win32 call documented to
            // allocate it with LocalAlloc, and is freed exactly once. A
            // failure here leaks the block; there is nothing to undo.
            unsafe { LocalFree(self.0) };
        }
    }
}

/// # Safety
/// `psid` must point to a SID that stays alive for the duration of the call.
unsafe fn read_sid(psid: PSID, api: &'static str) -> Result<Sid, WinError> {
    // SAFETY: the caller guarantees `psid` points to a live SID; IsValidSid
    // only reads it.
    if unsafe { IsValidSid(psid) } == 0 {
        return Err(WinError::new(api, ERROR_INVALID_SID));
    }
    // SAFETY: `psid` is a valid SID, so GetLengthSid reads only its header.
    let len = unsafe { GetLengthSid(psid) } as usize;
    // SAFETY: a valid SID occupies exactly GetLengthSid bytes at `psid`, all
    // alive for this call (caller's guarantee).
    let bytes = unsafe { std::slice::from_raw_parts(psid.cast::<u8>().cast_const(), len) };
    Sid::from_bytes(bytes).map_err(|_| WinError::new(api, ERROR_INVALID_SID))
}

/// A token information class, in a buffer aligned for the structures (which
/// hold pointers) that Win32 writes into it.
fn token_information(token: HANDLE, class: TOKEN_INFORMATION_CLASS) -> Result<Vec<u64>, WinError> {
    let mut needed = 0u32;
    // SAFETY: a size query: a null buffer of length 0, Win32 writes only
    // `needed`.
    let ok = unsafe { GetTokenInformation(token, class, ptr::null_mut(), 0, &mut needed) };
    if ok == 0 {
        let e = last_error("GetTokenInformation");
        if e.code != ERROR_INSUFFICIENT_BUFFER {
            return Err(e);
        }
    }
    let mut buf = vec![0u64; (needed as usize).div_ceil(8).max(1)];
    let cap = len_u32(buf.len() * 8, "GetTokenInformation")?;
    // SAFETY: `buf` has `cap` writable bytes, 8-byte aligned.
    let ok =
        unsafe { GetTokenInformation(token, class, buf.as_mut_ptr().cast(), cap, &mut needed) };
    if ok == 0 {
        return Err(last_error("GetTokenInformation"));
    }
    Ok(buf)
}

/// An ACL built by `SetEntriesInAclW` from `entries` merged into `old`.
fn build_acl(entries: &[AclEntry], old: *const ACL) -> Result<Local, WinError> {
    let sids: Vec<SidBuf> = entries.iter().map(|e| SidBuf::new(&e.sid)).collect();
    let explicit: Vec<EXPLICIT_ACCESS_W> = entries
        .iter()
        .zip(&sids)
        .map(|(e, sid)| EXPLICIT_ACCESS_W {
            grfAccessPermissions: e.mask,
            grfAccessMode: match e.mode {
                AclMode::Set => SET_ACCESS,
                AclMode::Revoke => REVOKE_ACCESS,
            },
            grfInheritance: u32::from(e.inheritance),
            Trustee: TRUSTEE_W {
                pMultipleTrustee: ptr::null_mut(),
                MultipleTrusteeOperation: NO_MULTIPLE_TRUSTEE,
                TrusteeForm: TRUSTEE_IS_SID,
                TrusteeType: TRUSTEE_IS_UNKNOWN,
                // With TRUSTEE_IS_SID the name field carries the PSID.
                ptstrName: sid.as_psid().cast(),
            },
        })
        .collect();
    let count = len_u32(explicit.len(), "SetEntriesInAclW")?;
    let mut new: *mut ACL = ptr::null_mut();
    // SAFETY: `explicit` and the SID buffers it points into live across the
    // call; `old` is null or an ACL alive across the call; `new` receives a
    // LocalAlloc'd ACL that `Local` frees.
    let rc = unsafe { SetEntriesInAclW(count, explicit.as_ptr(), old, &mut new) };
    if rc != ERROR_SUCCESS {
        return Err(WinError::new("SetEntriesInAclW", rc));
    }
    Ok(Local(new.cast()))
}

/// The object's DACL: the descriptor that owns it, and the DACL pointer
/// inside it (null for a NULL DACL).
fn named_dacl(path: &Path) -> Result<(Local, *mut ACL), WinError> {
    let api = "GetNamedSecurityInfoW";
    let name = wide_nul(path, api)?;
    let mut dacl: *mut ACL = ptr::null_mut();
    let mut sd: PSECURITY_DESCRIPTOR = ptr::null_mut();
    // SAFETY: `name` is NUL-terminated; only the DACL is requested, the other
    // out-pointers are null as documented; `sd` receives a LocalAlloc'd
    // descriptor that `Local` frees and `dacl` points inside it.
    let rc = unsafe {
        GetNamedSecurityInfoW(
            name.as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION,
            ptr::null_mut(),
            ptr::null_mut(),
            &mut dacl,
            ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != ERROR_SUCCESS {
        return Err(WinError::new(api, rc));
    }
    Ok((Local(sd), dacl))
}

extern "system" fn ignore_interrupt(ctrl: u32) -> windows_sys::core::BOOL {
    // Handled (TRUE) only for the interrupts; close/logoff/shutdown keep
    // their default handling.
    windows_sys::core::BOOL::from(ctrl == CTRL_C_EVENT || ctrl == CTRL_BREAK_EVENT)
}

/// A standard handle of the runner duplicated as inheritable (the way std
/// passes inherited stdio), or null when the runner has none.
fn inheritable_std(which: STD_HANDLE) -> Result<Option<OwnedHandle>, WinError> {
    // SAFETY: GetStdHandle has no preconditions.
    let h = unsafe { GetStdHandle(which) };
    if h == INVALID_HANDLE_VALUE {
        return Err(last_error("GetStdHandle"));
    }
    if h.is_null() {
        return Ok(None);
    }
    let mut dup: HANDLE = ptr::null_mut();
    // SAFETY: `h` is a live handle of this process (the pseudo-handle from
    // GetCurrentProcess needs no closing); `dup` receives a new handle that
    // OwnedHandle closes.
    let ok = unsafe {
        DuplicateHandle(
            GetCurrentProcess(),
            h,
            GetCurrentProcess(),
            &mut dup,
            0,
            1,
            DUPLICATE_SAME_ACCESS,
        )
    };
    if ok == 0 {
        return Err(last_error("DuplicateHandle"));
    }
    // SAFETY: `dup` is a fresh handle nobody else owns.
    Ok(Some(unsafe { OwnedHandle::from_raw_handle(dup) }))
}

fn raw(h: &Option<OwnedHandle>) -> HANDLE {
    h.as_ref()
        .map_or(ptr::null_mut(), AsRawHandle::as_raw_handle)
}

/// A process attribute list naming the only handles the child inherits
/// (`PROC_THREAD_ATTRIBUTE_HANDLE_LIST`). Without it `bInheritHandles` would
/// pass every inheritable handle of the runner, and a writable handle the
/// agent leaked to it would let the child write around the token, which is
/// checked at open time only.
struct HandleList {
    /// The initialized attribute list (8-byte aligned storage).
    list: Vec<u64>,
    /// The attribute stores a pointer to this array, not a copy; it lives
    /// (unmodified, on the heap) until the list is deleted.
    handles: Vec<HANDLE>,
}

impl HandleList {
    fn new(handles: Vec<HANDLE>) -> Result<Self, WinError> {
        let api = "InitializeProcThreadAttributeList";
        let mut size = 0usize;
        // SAFETY: a size query with a null list, as documented; only `size`
        // is written.
        if unsafe { InitializeProcThreadAttributeList(ptr::null_mut(), 1, 0, &mut size) } == 0 {
            let e = last_error(api);
            if e.code != ERROR_INSUFFICIENT_BUFFER {
                return Err(e);
            }
        }
        let mut list = vec![0u64; size.div_ceil(8).max(1)];
        // SAFETY: `list` has at least `size` writable bytes, 8-byte aligned.
        if unsafe { InitializeProcThreadAttributeList(list.as_mut_ptr().cast(), 1, 0, &mut size) }
            == 0
        {
            return Err(last_error(api));
        }
        // From here on Drop deletes the initialized list.
        let mut this = Self { list, handles };
        let bytes = this.handles.len() * size_of::<HANDLE>();
        let value = this.handles.as_ptr().cast::<c_void>();
        // SAFETY: the list is initialized for one attribute; `handles` is
        // kept alive and unmodified by `this` until the list is deleted.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                this.as_ptr(),
                0,
                PROC_THREAD_ATTRIBUTE_HANDLE_LIST as usize,
                value,
                bytes,
                ptr::null_mut(),
                ptr::null(),
            )
        };
        if ok == 0 {
            return Err(last_error("UpdateProcThreadAttribute"));
        }
        Ok(this)
    }

    fn as_ptr(&mut self) -> LPPROC_THREAD_ATTRIBUTE_LIST {
        self.list.as_mut_ptr().cast()
    }
}

impl Drop for HandleList {
    fn drop(&mut self) {
        // SAFETY: the list was initialized (a HandleList exists only then)
        // and is deleted exactly once.
        unsafe { DeleteProcThreadAttributeList(self.as_ptr()) };
    }
}

fn kill_on_close_job() -> Result<OwnedHandle, WinError> {
    // SAFETY: an anonymous job with default security; no pointers but nulls.
    let h = unsafe { CreateJobObjectW(ptr::null(), ptr::null()) };
    if h.is_null() {
        return Err(last_error("CreateJobObjectW"));
    }
    // SAFETY: `h` is a fresh job handle nobody else owns.
    let job = unsafe { OwnedHandle::from_raw_handle(h) };
    let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    let size = len_u32(
        size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>(),
        "SetInformationJobObject",
    )?;
    // SAFETY: the job handle is live; `info` is the structure this class
    // names, passed with its exact size, alive across the call.
    let ok = unsafe {
        SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            ptr::from_ref(&info).cast(),
            size,
        )
    };
    if ok == 0 {
        return Err(last_error("SetInformationJobObject"));
    }
    Ok(job)
}

/// Terminate a child that must not run (it was never resumed). The original
/// failure is what gets reported; if even this fails, the child stays
/// suspended with its first instruction unexecuted.
fn terminate(process: &OwnedHandle) {
    // SAFETY: the process handle is live and was opened with full access by
    // CreateProcessAsUserW.
    unsafe {
        TerminateProcess(
            process.as_raw_handle(),
            u32::from_ne_bytes(RUNNER_FAILURE_EXIT.to_ne_bytes()),
        )
    };
}

impl Win32 for System {
    type Token = Token;
    type Child = Child;

    fn temp_root(&self) -> Result<PathBuf, WinError> {
        let mut buf = vec![0u16; 261];
        loop {
            let cap = len_u32(buf.len(), "GetTempPathW")?;
            // SAFETY: `buf` has `cap` writable UTF-16 units.
            let n = unsafe { GetTempPathW(cap, buf.as_mut_ptr()) } as usize;
            if n == 0 {
                return Err(last_error("GetTempPathW"));
            }
            if n < buf.len() {
                buf.truncate(n);
                return Ok(PathBuf::from(OsString::from_wide(&buf)));
            }
            // Too small: `n` is the size needed, NUL included.
            buf.resize(n, 0);
        }
    }

    fn canonicalize(&self, path: &Path) -> Result<PathBuf, WinError> {
        // std opens the object (CreateFileW) and asks for its final name.
        std::fs::canonicalize(path).map_err(|e| io_error("GetFinalPathNameByHandleW", &e))
    }

    fn random(&self) -> Result<[u8; 16], WinError> {
        let mut bytes = [0u8; 16];
        // SAFETY: `bytes` is 16 writable bytes; a null algorithm handle is
        // what BCRYPT_USE_SYSTEM_PREFERRED_RNG requires.
        let status = unsafe {
            BCryptGenRandom(
                ptr::null_mut(),
                bytes.as_mut_ptr(),
                16,
                BCRYPT_USE_SYSTEM_PREFERRED_RNG,
            )
        };
        if status != 0 {
            return Err(WinError::new(
                "BCryptGenRandom",
                u32::from_ne_bytes(status.to_ne_bytes()),
            ));
        }
        Ok(bytes)
    }

    fn create_dir(&self, path: &Path) -> Result<(), WinError> {
        std::fs::create_dir(path).map_err(|e| io_error("CreateDirectoryW", &e))
    }

    fn remove_dir_all(&self, path: &Path) -> Result<(), WinError> {
        std::fs::remove_dir_all(path).map_err(|e| io_error("RemoveDirectoryW", &e))
    }

    fn is_file(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.is_file())
    }

    fn read_dacl(&self, path: &Path) -> Result<Dacl, WinError> {
        let (_sd, dacl) = named_dacl(path)?;
        if dacl.is_null() {
            return Ok(Dacl::Null);
        }
        // SAFETY: `dacl` points to a live ACL inside `_sd`; its header's
        // AclSize is the number of bytes it occupies.
        let bytes = unsafe {
            let size = usize::from((*dacl).AclSize);
            std::slice::from_raw_parts(dacl.cast::<u8>().cast_const(), size)
        };
        Dacl::parse(bytes)
            .map(Dacl::Entries)
            .map_err(|_| WinError::new("GetNamedSecurityInfoW", ERROR_INVALID_ACL))
    }

    fn apply_acl(&self, path: &Path, entries: &[AclEntry]) -> Result<(), WinError> {
        let (sd, old) = named_dacl(path)?;
        if old.is_null() && entries.iter().all(|e| e.mode == AclMode::Revoke) {
            // A NULL DACL holds no ACE to revoke, and writing the (empty)
            // merge result would deny everyone everything.
            return Ok(());
        }
        let new = build_acl(entries, old)?;
        drop(sd);
        let api = "SetNamedSecurityInfoW";
        let name = wide_nul(path, api)?;
        // SAFETY: `name` is NUL-terminated; only the DACL is written (owner,
        // group and SACL pointers are null as documented); `new` is a live
        // ACL. Inheritable ACEs propagate to every descendant before return.
        let rc = unsafe {
            SetNamedSecurityInfoW(
                name.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                ptr::null_mut(),
                ptr::null_mut(),
                new.0.cast::<ACL>().cast_const(),
                ptr::null(),
            )
        };
        if rc != ERROR_SUCCESS {
            return Err(WinError::new(api, rc));
        }
        Ok(())
    }

    fn open_process_token(&self) -> Result<Token, WinError> {
        let mut h: HANDLE = ptr::null_mut();
        // SAFETY: the current-process pseudo-handle needs no closing; `h`
        // receives a token handle on success.
        let ok = unsafe {
            OpenProcessToken(
                GetCurrentProcess(),
                TOKEN_DUPLICATE | TOKEN_QUERY | TOKEN_ASSIGN_PRIMARY | TOKEN_ADJUST_DEFAULT,
                &mut h,
            )
        };
        if ok == 0 {
            return Err(last_error("OpenProcessToken"));
        }
        // SAFETY: `h` is a fresh token handle nobody else owns.
        Ok(Token(unsafe { OwnedHandle::from_raw_handle(h) }))
    }

    fn token_user(&self, token: &Token) -> Result<Sid, WinError> {
        let buf = token_information(token.0.as_raw_handle(), TokenUser)?;
        // SAFETY: GetTokenInformation(TokenUser) wrote a TOKEN_USER at the
        // start of `buf`, whose SID pointer points into `buf`, alive here.
        unsafe {
            let user = buf.as_ptr().cast::<TOKEN_USER>();
            read_sid((*user).User.Sid, "GetTokenInformation")
        }
    }

    fn token_logon_sid(&self, token: &Token) -> Result<Option<Sid>, WinError> {
        let buf = token_information(token.0.as_raw_handle(), TokenGroups)?;
        // SAFETY: GetTokenInformation(TokenGroups) wrote a TOKEN_GROUPS at
        // the start of `buf`: GroupCount entries follow in the same buffer,
        // and every SID pointer points into `buf`, alive here.
        unsafe {
            let groups = buf.as_ptr().cast::<TOKEN_GROUPS>();
            let first = ptr::addr_of!((*groups).Groups).cast::<SID_AND_ATTRIBUTES>();
            let all = std::slice::from_raw_parts(first, (*groups).GroupCount as usize);
            for g in all {
                if g.Attributes & SE_GROUP_LOGON_ID == SE_GROUP_LOGON_ID {
                    return read_sid(g.Sid, "GetTokenInformation").map(Some);
                }
            }
        }
        Ok(None)
    }

    fn create_restricted_token(
        &self,
        token: &Token,
        flags: u32,
        restricting: &[Sid],
    ) -> Result<Token, WinError> {
        let api = "CreateRestrictedToken";
        let sids: Vec<SidBuf> = restricting.iter().map(SidBuf::new).collect();
        let entries: Vec<SID_AND_ATTRIBUTES> = sids
            .iter()
            .map(|s| SID_AND_ATTRIBUTES {
                Sid: s.as_psid(),
                // Restricting SIDs take no attributes.
                Attributes: 0,
            })
            .collect();
        let count = len_u32(entries.len(), api)?;
        let mut h: HANDLE = ptr::null_mut();
        // SAFETY: the base token is live with TOKEN_DUPLICATE; `entries` and
        // the SID buffers they point to live across the call; nothing is
        // disabled or deleted explicitly (null arrays of length 0).
        let ok = unsafe {
            CreateRestrictedToken(
                token.0.as_raw_handle(),
                flags,
                0,
                ptr::null(),
                0,
                ptr::null(),
                count,
                entries.as_ptr(),
                &mut h,
            )
        };
        if ok == 0 {
            return Err(last_error(api));
        }
        // SAFETY: `h` is a fresh token handle nobody else owns.
        Ok(Token(unsafe { OwnedHandle::from_raw_handle(h) }))
    }

    fn set_default_dacl(&self, token: &Token, entries: &[AclEntry]) -> Result<(), WinError> {
        let acl = build_acl(entries, ptr::null())?;
        let info = TOKEN_DEFAULT_DACL {
            DefaultDacl: acl.0.cast(),
        };
        let size = len_u32(size_of::<TOKEN_DEFAULT_DACL>(), "SetTokenInformation")?;
        // SAFETY: the token handle is live and carries TOKEN_ADJUST_DEFAULT
        // (inherited from the base handle's access); `info` points at a live
        // ACL for the call, which the token copies.
        let ok = unsafe {
            SetTokenInformation(
                token.0.as_raw_handle(),
                TokenDefaultDacl,
                ptr::from_ref(&info).cast(),
                size,
            )
        };
        if ok == 0 {
            return Err(last_error("SetTokenInformation"));
        }
        Ok(())
    }

    fn shield_console(&self) -> Result<(), WinError> {
        // SAFETY: registers a static handler that touches no state; handler
        // routines (unlike the NULL "ignore" flag) are not inherited, so the
        // child keeps its default Ctrl+C behaviour.
        let ok = unsafe { SetConsoleCtrlHandler(Some(ignore_interrupt), 1) };
        if ok == 0 {
            return Err(last_error("SetConsoleCtrlHandler"));
        }
        Ok(())
    }

    fn spawn(
        &self,
        token: &Token,
        command_line: &[u16],
        environment: &[u16],
    ) -> Result<Child, WinError> {
        let api = "CreateProcessAsUserW";
        if command_line.last() != Some(&0) || !environment.ends_with(&[0, 0]) {
            return Err(WinError::new(api, ERROR_INVALID_PARAMETER));
        }
        let job = kill_on_close_job()?;
        let stdin = inheritable_std(STD_INPUT_HANDLE)?;
        let stdout = inheritable_std(STD_OUTPUT_HANDLE)?;
        let stderr = inheritable_std(STD_ERROR_HANDLE)?;
        let inherited: Vec<HANDLE> = [&stdin, &stdout, &stderr]
            .into_iter()
            .filter_map(|h| h.as_ref().map(AsRawHandle::as_raw_handle))
            .collect();
        // With no standard handle at all there is nothing to inherit.
        let mut list = if inherited.is_empty() {
            None
        } else {
            Some(HandleList::new(inherited)?)
        };
        let mut si = STARTUPINFOEXW::default();
        si.StartupInfo.cb = len_u32(
            if list.is_some() {
                size_of::<STARTUPINFOEXW>()
            } else {
                size_of::<STARTUPINFOW>()
            },
            api,
        )?;
        si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
        si.StartupInfo.hStdInput = raw(&stdin);
        si.StartupInfo.hStdOutput = raw(&stdout);
        si.StartupInfo.hStdError = raw(&stderr);
        si.lpAttributeList = list.as_mut().map_or(ptr::null_mut(), HandleList::as_ptr);
        let mut flags = CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT;
        if list.is_some() {
            flags |= EXTENDED_STARTUPINFO_PRESENT;
        }
        // CreateProcessW may write into the command line buffer.
        let mut line = command_line.to_vec();
        let mut pi = PROCESS_INFORMATION::default();
        // SAFETY: the restricted token is live with TOKEN_ASSIGN_PRIMARY;
        // `line` is a writable NUL-terminated buffer and `environment` a
        // double-NUL-terminated UTF-16 block (checked above), both alive
        // across the call; `si` (with its attribute list and the handles it
        // names) and `pi` are valid for reading/writing. The child starts
        // suspended so it is in the job before it runs anything.
        let ok = unsafe {
            CreateProcessAsUserW(
                token.0.as_raw_handle(),
                ptr::null(),
                line.as_mut_ptr(),
                ptr::null(),
                ptr::null(),
                windows_sys::core::BOOL::from(list.is_some()),
                flags,
                environment.as_ptr().cast(),
                ptr::null(),
                ptr::from_ref(&si).cast::<STARTUPINFOW>(),
                &mut pi,
            )
        };
        drop(list);
        if ok == 0 {
            return Err(last_error(api));
        }
        // SAFETY: on success `pi` holds two fresh handles nobody else owns.
        let (process, thread) = unsafe {
            (
                OwnedHandle::from_raw_handle(pi.hProcess),
                OwnedHandle::from_raw_handle(pi.hThread),
            )
        };
        // SAFETY: the job and process handles are live.
        if unsafe { AssignProcessToJobObject(job.as_raw_handle(), process.as_raw_handle()) } == 0 {
            let e = last_error("AssignProcessToJobObject");
            terminate(&process);
            return Err(e);
        }
        // SAFETY: the thread handle is live; ResumeThread returns the previous
        // suspend count or u32::MAX on failure.
        if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
            let e = last_error("ResumeThread");
            terminate(&process);
            return Err(e);
        }
        Ok(Child { process, _job: job })
    }

    fn wait(&self, child: &Child) -> Result<u32, WinError> {
        let h = child.process.as_raw_handle();
        // SAFETY: the process handle is live and has SYNCHRONIZE access.
        if unsafe { WaitForSingleObject(h, INFINITE) } == WAIT_FAILED {
            return Err(last_error("WaitForSingleObject"));
        }
        let mut code = 0u32;
        // SAFETY: the process handle is live; `code` is writable.
        if unsafe { GetExitCodeProcess(h, &mut code) } == 0 {
            return Err(last_error("GetExitCodeProcess"));
        }
        Ok(code)
    }
}
