//! A recording [`Win32`] for tests: a small simulated host (directories with
//! DACLs, a temp root, a token), every call recorded in order, and a failure
//! injectable at the n-th call of any operation.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::acl::{
    ACCESS_ALLOWED, Ace, AclEntry, AclMode, Dacl, FILE_ALL_ACCESS, INHERITED, SUBTREE,
};
use crate::api::Win32;
use crate::error::{ERROR_ALREADY_EXISTS, WinError};
use crate::sid::Sid;

pub const ERROR_FILE_NOT_FOUND: u32 = 2;
pub const ERROR_ACCESS_DENIED: u32 = 5;

pub const RAW_TEMP_ROOT: &str = r"C:\Users\DEV~1\AppData\Local\Temp\";
pub const TEMP_ROOT: &str = r"C:\Users\dev\AppData\Local\Temp";
pub const WORKSPACE: &str = r"C:\Users\dev\proj";
pub const OTHER_WORKSPACE: &str = r"D:\src\other";
pub const RUNNER: &str = r"C:\tools\stockade-winrun.exe";
pub const USER: &str = "S-1-5-21-1111-2222-3333-1001";
pub const LOGON: &str = "S-1-5-5-0-424242";

/// Every fallible operation of the trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    TempRoot,
    Canonicalize,
    Random,
    CreateDir,
    RemoveDirAll,
    ReadDacl,
    ApplyAcl,
    OpenProcessToken,
    TokenUser,
    TokenLogonSid,
    CreateRestrictedToken,
    SetDefaultDacl,
    ShieldConsole,
    Spawn,
    Wait,
}

impl Op {
    /// The API the real binding reports for this operation.
    pub fn api(self) -> &'static str {
        match self {
            Op::TempRoot => "GetTempPathW",
            Op::Canonicalize => "GetFinalPathNameByHandleW",
            Op::Random => "BCryptGenRandom",
            Op::CreateDir => "CreateDirectoryW",
            Op::RemoveDirAll => "RemoveDirectoryW",
            Op::ReadDacl => "GetNamedSecurityInfoW",
            Op::ApplyAcl => "SetNamedSecurityInfoW",
            Op::OpenProcessToken => "OpenProcessToken",
            Op::TokenUser | Op::TokenLogonSid => "GetTokenInformation",
            Op::CreateRestrictedToken => "CreateRestrictedToken",
            Op::SetDefaultDacl => "SetTokenInformation",
            Op::ShieldConsole => "SetConsoleCtrlHandler",
            Op::Spawn => "CreateProcessAsUserW",
            Op::Wait => "WaitForSingleObject",
        }
    }
}

/// One recorded call. Handles are numbered in the order they are opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    TempRoot,
    Canonicalize(PathBuf),
    Random,
    CreateDir(PathBuf),
    RemoveDirAll(PathBuf),
    IsFile(PathBuf),
    ReadDacl(PathBuf),
    ApplyAcl(PathBuf, Vec<AclEntry>),
    OpenProcessToken,
    TokenUser(u32),
    TokenLogonSid(u32),
    CreateRestrictedToken {
        from: u32,
        flags: u32,
        sids: Vec<Sid>,
    },
    SetDefaultDacl(u32, Vec<AclEntry>),
    ShieldConsole,
    Spawn {
        token: u32,
        command_line: String,
        environment: Vec<String>,
    },
    Wait(u32),
    Close(u32),
}

impl Call {
    /// Whether this call changes the host (a directory or an ACL).
    pub fn mutates(&self) -> bool {
        matches!(
            self,
            Call::CreateDir(_) | Call::RemoveDirAll(_) | Call::ApplyAcl(..)
        )
    }
}

pub struct State {
    pub calls: Vec<Call>,
    fail: Vec<(Op, usize, u32)>,
    counts: HashMap<Op, usize>,
    pub raw_temp_root: PathBuf,
    /// `canonicalize` results for paths that are not their own final form.
    pub aliases: HashMap<PathBuf, PathBuf>,
    pub dirs: BTreeMap<PathBuf, Dacl>,
    pub files: BTreeSet<PathBuf>,
    pub randoms: VecDeque<[u8; 16]>,
    next_random: u8,
    pub user: Sid,
    pub logon: Option<Sid>,
    pub exit_code: u32,
    next_handle: u32,
    pub open: BTreeSet<u32>,
}

#[derive(Clone)]
pub struct Mock(Arc<Mutex<State>>);

/// A mock handle; dropping it records the close.
pub struct Handle {
    pub id: u32,
    mock: Mock,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut s = self.mock.state();
        s.open.remove(&self.id);
        s.calls.push(Call::Close(self.id));
    }
}

fn user_ace(user: &Sid, flags: u8) -> Ace {
    Ace {
        ace_type: ACCESS_ALLOWED,
        flags,
        mask: FILE_ALL_ACCESS,
        sid: Some(user.clone()),
    }
}

fn parent(p: &Path) -> Option<PathBuf> {
    let b = p.as_os_str().as_encoded_bytes();
    let i = b.iter().rposition(|c| *c == b'\\')?;
    std::str::from_utf8(&b[..i]).ok().map(PathBuf::from)
}

fn within(p: &Path, root: &Path) -> bool {
    let (p, r) = (
        p.as_os_str().as_encoded_bytes(),
        root.as_os_str().as_encoded_bytes(),
    );
    p.len() > r.len() && p.starts_with(r) && p[r.len()] == b'\\'
}

impl Mock {
    /// A host with a user profile, a temp root reported in its 8.3 form, a
    /// workspace, a second workspace on another drive, and the runner.
    pub fn new() -> Self {
        let user: Sid = USER.parse().unwrap();
        let mut dirs = BTreeMap::new();
        let mut aliases = HashMap::new();
        for d in [TEMP_ROOT, WORKSPACE, OTHER_WORKSPACE] {
            dirs.insert(
                PathBuf::from(d),
                Dacl::Entries(vec![user_ace(&user, SUBTREE | INHERITED)]),
            );
            // std::fs::canonicalize returns the verbatim form.
            aliases.insert(PathBuf::from(d), PathBuf::from(format!(r"\\?\{d}")));
        }
        aliases.insert(
            PathBuf::from(RAW_TEMP_ROOT),
            PathBuf::from(format!(r"\\?\{TEMP_ROOT}")),
        );
        Mock(Arc::new(Mutex::new(State {
            calls: Vec::new(),
            fail: Vec::new(),
            counts: HashMap::new(),
            raw_temp_root: PathBuf::from(RAW_TEMP_ROOT),
            aliases,
            dirs,
            files: BTreeSet::from([PathBuf::from(RUNNER)]),
            randoms: VecDeque::new(),
            next_random: 1,
            user,
            logon: Some(LOGON.parse().unwrap()),
            exit_code: 0,
            next_handle: 1,
            open: BTreeSet::new(),
        })))
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Make the `nth` (1-based) call of `op` fail with `code`.
    pub fn fail(&self, op: Op, nth: usize, code: u32) {
        self.state().fail.push((op, nth, code));
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    pub fn mutations(&self) -> Vec<Call> {
        self.calls().into_iter().filter(Call::mutates).collect()
    }

    pub fn dacl(&self, path: &str) -> Option<Dacl> {
        self.state().dirs.get(Path::new(path)).cloned()
    }

    pub fn set_dacl(&self, path: &str, dacl: Dacl) {
        self.state().dirs.insert(PathBuf::from(path), dacl);
    }

    /// The directories directly or indirectly below `root`.
    pub fn dirs_under(&self, root: &str) -> Vec<PathBuf> {
        let root = Path::new(root);
        self.state()
            .dirs
            .keys()
            .filter(|d| within(d, root))
            .cloned()
            .collect()
    }

    /// Every (directory, ACE) whose SID is `sid`.
    pub fn aces_for(&self, sid: &Sid) -> Vec<(PathBuf, Ace)> {
        let mut out = Vec::new();
        for (d, dacl) in &self.state().dirs {
            if let Dacl::Entries(aces) = dacl {
                for a in aces.iter().filter(|a| a.sid.as_ref() == Some(sid)) {
                    out.push((d.clone(), a.clone()));
                }
            }
        }
        out
    }

    pub fn push_random(&self, bytes: [u8; 16]) {
        self.state().randoms.push_back(bytes);
    }

    pub fn count(&self, pred: impl Fn(&Call) -> bool) -> usize {
        self.calls().iter().filter(|c| pred(c)).count()
    }

    fn enter(&self, s: &mut State, op: Op) -> Result<(), WinError> {
        let n = s.counts.entry(op).or_insert(0);
        *n += 1;
        let n = *n;
        match s.fail.iter().find(|(o, at, _)| *o == op && *at == n) {
            Some((_, _, code)) => Err(WinError::new(op.api(), *code)),
            None => Ok(()),
        }
    }

    fn handle(&self, s: &mut State) -> Handle {
        let id = s.next_handle;
        s.next_handle += 1;
        s.open.insert(id);
        Handle {
            id,
            mock: self.clone(),
        }
    }

    fn op<T>(
        &self,
        op: Op,
        call: Call,
        f: impl FnOnce(&mut State) -> Result<T, WinError>,
    ) -> Result<T, WinError> {
        let mut s = self.state();
        s.calls.push(call);
        self.enter(&mut s, op)?;
        f(&mut s)
    }
}

fn apply(aces: &mut Vec<Ace>, entries: &[AclEntry], inherited: bool) {
    for e in entries {
        // Explicit ACEs of the trustee (or, below the object, the copies it
        // propagated) are replaced.
        aces.retain(|a| {
            !(a.sid.as_ref() == Some(&e.sid) && ((a.flags & INHERITED != 0) == inherited))
        });
        if e.mode == AclMode::Set && (!inherited || e.inheritance & SUBTREE != 0) {
            let ace = Ace {
                ace_type: ACCESS_ALLOWED,
                flags: if inherited {
                    e.inheritance | INHERITED
                } else {
                    e.inheritance
                },
                mask: e.mask,
                sid: Some(e.sid.clone()),
            };
            if inherited {
                aces.push(ace);
            } else {
                aces.insert(0, ace);
            }
        }
    }
}

impl Win32 for Mock {
    type Token = Handle;
    type Child = Handle;

    fn temp_root(&self) -> Result<PathBuf, WinError> {
        self.op(Op::TempRoot, Call::TempRoot, |s| {
            Ok(s.raw_temp_root.clone())
        })
    }

    fn canonicalize(&self, path: &Path) -> Result<PathBuf, WinError> {
        self.op(Op::Canonicalize, Call::Canonicalize(path.into()), |s| {
            if let Some(c) = s.aliases.get(path) {
                return Ok(c.clone());
            }
            if s.dirs.contains_key(path) || s.files.contains(path) {
                return Ok(path.to_path_buf());
            }
            Err(WinError::new(Op::Canonicalize.api(), ERROR_FILE_NOT_FOUND))
        })
    }

    fn random(&self) -> Result<[u8; 16], WinError> {
        self.op(Op::Random, Call::Random, |s| {
            Ok(s.randoms.pop_front().unwrap_or_else(|| {
                let n = s.next_random;
                s.next_random = s.next_random.wrapping_add(1);
                [n; 16]
            }))
        })
    }

    fn create_dir(&self, path: &Path) -> Result<(), WinError> {
        self.op(Op::CreateDir, Call::CreateDir(path.into()), |s| {
            if s.dirs.contains_key(path) || s.files.contains(path) {
                return Err(WinError::new(Op::CreateDir.api(), ERROR_ALREADY_EXISTS));
            }
            let inherited: Vec<Ace> = parent(path)
                .and_then(|p| s.dirs.get(&p).cloned())
                .map(|d| match d {
                    Dacl::Entries(aces) => aces
                        .into_iter()
                        .filter(|a| a.flags & SUBTREE != 0)
                        .map(|a| Ace {
                            flags: a.flags | INHERITED,
                            ..a
                        })
                        .collect(),
                    Dacl::Null => Vec::new(),
                })
                .ok_or_else(|| WinError::new(Op::CreateDir.api(), 3))?;
            s.dirs.insert(path.to_path_buf(), Dacl::Entries(inherited));
            Ok(())
        })
    }

    fn remove_dir_all(&self, path: &Path) -> Result<(), WinError> {
        self.op(Op::RemoveDirAll, Call::RemoveDirAll(path.into()), |s| {
            if !s.dirs.contains_key(path) {
                return Err(WinError::new(Op::RemoveDirAll.api(), ERROR_FILE_NOT_FOUND));
            }
            s.dirs.retain(|d, _| d != path && !within(d, path));
            Ok(())
        })
    }

    fn is_file(&self, path: &Path) -> bool {
        let mut s = self.state();
        s.calls.push(Call::IsFile(path.into()));
        s.files.contains(path)
    }

    fn read_dacl(&self, path: &Path) -> Result<Dacl, WinError> {
        self.op(Op::ReadDacl, Call::ReadDacl(path.into()), |s| {
            s.dirs
                .get(path)
                .cloned()
                .ok_or_else(|| WinError::new(Op::ReadDacl.api(), ERROR_FILE_NOT_FOUND))
        })
    }

    fn apply_acl(&self, path: &Path, entries: &[AclEntry]) -> Result<(), WinError> {
        self.op(
            Op::ApplyAcl,
            Call::ApplyAcl(path.into(), entries.to_vec()),
            |s| {
                let dacl = s
                    .dirs
                    .get_mut(path)
                    .ok_or_else(|| WinError::new(Op::ApplyAcl.api(), ERROR_FILE_NOT_FOUND))?;
                if matches!(dacl, Dacl::Null) && entries.iter().all(|e| e.mode == AclMode::Revoke) {
                    // As the binding does: nothing to revoke from a NULL DACL.
                    return Ok(());
                }
                let mut aces = match dacl {
                    Dacl::Null => Vec::new(),
                    Dacl::Entries(a) => a.clone(),
                };
                apply(&mut aces, entries, false);
                *dacl = Dacl::Entries(aces);
                // The eager propagation SetNamedSecurityInfoW does.
                for (d, dacl) in s.dirs.iter_mut() {
                    if within(d, path)
                        && let Dacl::Entries(aces) = dacl
                    {
                        apply(aces, entries, true);
                    }
                }
                Ok(())
            },
        )
    }

    fn open_process_token(&self) -> Result<Handle, WinError> {
        self.op(Op::OpenProcessToken, Call::OpenProcessToken, |s| {
            Ok(self.handle(s))
        })
    }

    fn token_user(&self, token: &Handle) -> Result<Sid, WinError> {
        self.op(Op::TokenUser, Call::TokenUser(token.id), |s| {
            Ok(s.user.clone())
        })
    }

    fn token_logon_sid(&self, token: &Handle) -> Result<Option<Sid>, WinError> {
        self.op(Op::TokenLogonSid, Call::TokenLogonSid(token.id), |s| {
            Ok(s.logon.clone())
        })
    }

    fn create_restricted_token(
        &self,
        token: &Handle,
        flags: u32,
        restricting: &[Sid],
    ) -> Result<Handle, WinError> {
        let call = Call::CreateRestrictedToken {
            from: token.id,
            flags,
            sids: restricting.to_vec(),
        };
        self.op(Op::CreateRestrictedToken, call, |s| Ok(self.handle(s)))
    }

    fn set_default_dacl(&self, token: &Handle, entries: &[AclEntry]) -> Result<(), WinError> {
        self.op(
            Op::SetDefaultDacl,
            Call::SetDefaultDacl(token.id, entries.to_vec()),
            |_| Ok(()),
        )
    }

    fn shield_console(&self) -> Result<(), WinError> {
        self.op(Op::ShieldConsole, Call::ShieldConsole, |_| Ok(()))
    }

    fn spawn(
        &self,
        token: &Handle,
        command_line: &[u16],
        environment: &[u16],
    ) -> Result<Handle, WinError> {
        let line = command_line.strip_suffix(&[0]).unwrap_or(command_line);
        let env = environment.strip_suffix(&[0, 0]).unwrap_or(environment);
        let call = Call::Spawn {
            token: token.id,
            command_line: String::from_utf16(line).unwrap(),
            environment: env
                .split(|u| *u == 0)
                .map(|e| String::from_utf16(e).unwrap())
                .collect(),
        };
        self.op(Op::Spawn, call, |s| Ok(self.handle(s)))
    }

    fn wait(&self, child: &Handle) -> Result<u32, WinError> {
        self.op(Op::Wait, Call::Wait(child.id), |s| Ok(s.exit_code))
    }
}
