//! Integration tests of `landlock-run`'s seccomp user-notification supervisor
//! against the real kernel.
//!
//! - Metadata: mode, owner, timestamps, extended attributes, POSIX ACLs and
//!   inode flags of anything outside the writable roots cannot be changed
//!   (EACCES), through every way of naming the target that was thought of;
//!   inside the roots every such call works. Each "outside" target is owned by
//!   the user running the command and the same calls are shown to succeed
//!   under `--no-supervise`, so a refusal is the supervisor's, not ownership's.
//! - `--protect`: a protected file or directory inside a root cannot be
//!   written, created in, renamed, replaced, removed, linked or reached through
//!   a symlink, also while a symlink is swapped under the calls; its
//!   neighbours stay writable.
//! - Exit status, output and signals pass through; no process the command
//!   started outlives the run or the launcher.
//!
//! Every behavioural test runs as ourselves and, when we are root (as in CI),
//! as `nobody` through `setpriv`. Scratch lives outside /tmp and $TMPDIR,
//! which are never granted here. When `CI=true` a missing python3 fails.
#![cfg(target_os = "linux")]
// A failed unwrap is a failed test; the workspace-wide deny is for the binaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

const BIN: &str = env!("CARGO_BIN_EXE_landlock-run");
/// The system python3 (not a per-user shim that `nobody` could not reach).
const PY: &str = "/usr/bin/python3";
use stockade_testkit::users::{NOBODY, Who, users};

// ---------------------------------------------------------------------------
// Who runs, where, and how.

/// python3 drives most calls; CI must have it.
fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

/// `BASE/NAME/ws` (granted) and its sibling `BASE/NAME/outside` (never
/// granted), both owned by the user the command runs as.
struct Scratch {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
}

impl Scratch {
    /// `fill(ws, outside)` populates both before they are handed to `who`.
    fn new(who: Who, fill: impl FnOnce(&Path, &Path)) -> Scratch {
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        // The unprivileged legs must reach it.
        stockade_testkit::open_to_all(&base);
        let dir = tempfile::Builder::new()
            .prefix("llr-supervisor-")
            .tempdir_in(&base)
            .unwrap();
        let ws = dir.path().join("ws");
        let out = dir.path().join("outside");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(&out).unwrap();
        fill(&ws, &out);
        give(dir.path(), who);
        Scratch { _dir: dir, ws, out }
    }
}

/// Hands the tree at `p` to `who` (nothing to do for ourselves).
fn give(p: &Path, who: Who) {
    if who == Who::Nobody {
        std::os::unix::fs::lchown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        if p.symlink_metadata().unwrap().is_dir() {
            for e in fs::read_dir(p).unwrap() {
                give(&e.unwrap().path(), who);
            }
        }
    }
}

fn write_file(p: &Path, content: &str, mode: u32) {
    fs::write(p, content).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn make_dir(p: &Path, mode: u32) {
    fs::create_dir_all(p).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `program` as `who`, with stdin closed and `$PY` naming python3.
fn as_user(who: Who, program: &str) -> Command {
    let mut c = who.command(program);
    c.env_remove("TMPDIR")
        .env("PY", PY)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null());
    c
}

/// `landlock-run --ro / --rw /dev/null --rw WS OPTS... -- ARGV...` as `who`,
/// in WS.
fn launcher(who: Who, ws: &Path, opts: &[OsString], argv: &[&OsStr]) -> Command {
    let mut c = as_user(who, BIN);
    c.args(["--ro", "/", "--rw", "/dev/null", "--rw"])
        .arg(ws)
        .args(opts)
        .arg("--")
        .args(argv)
        .current_dir(ws);
    c
}

fn no_supervise() -> Vec<OsString> {
    vec!["--no-supervise".into()]
}

/// Runs `cmd` to completion with a 30 s bound.
fn output(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).map(|_| v)
        })
    };
    let so = drain(Box::new(child.stdout.take().unwrap()));
    let se = drain(Box::new(child.stderr.take().unwrap()));
    let status = wait_bounded(&mut child, Duration::from_secs(30), cmd);
    Output {
        status,
        stdout: so.join().unwrap().unwrap(),
        stderr: se.join().unwrap().unwrap(),
    }
}

fn wait_bounded(child: &mut Child, limit: Duration, what: &Command) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out: {what:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `/bin/sh -c SCRIPT` confined, as `who`, in WS.
fn sh(who: Who, ws: &Path, opts: &[OsString], script: &str) -> Output {
    output(&mut launcher(
        who,
        ws,
        opts,
        &[os("/bin/sh"), os("-c"), os(script)],
    ))
}

/// `LABEL RESULT` lines of a script that must itself have run to the end.
fn results(out: &Output, what: &str) -> BTreeMap<String, String> {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

// ---------------------------------------------------------------------------
// What a file looks like, to tell "unchanged" from "changed".

/// Everything about one file that a metadata call or a write can change
/// (ctime included: every successful metadata call sets it). Not atime.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// A regular file's bytes, or a symlink's target.
    content: Vec<u8>,
    xattrs: BTreeMap<String, Vec<u8>>,
    /// FS_IOC_GETFLAGS, for regular files and directories.
    flags: Option<u32>,
}

impl Entry {
    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("kind", self.kind.to_owned()),
            ("ino", self.ino.to_string()),
            ("mode", format!("{:o}", self.mode)),
            ("uid", self.uid.to_string()),
            ("gid", self.gid.to_string()),
            ("nlink", self.nlink.to_string()),
            ("mtime", format!("{:?}", self.mtime)),
            ("ctime", format!("{:?}", self.ctime)),
            ("content", self.content.escape_ascii().to_string()),
            ("xattrs", format!("{:?}", self.xattrs.keys())),
            ("flags", format!("{:x?}", self.flags)),
        ]
    }
}

fn xattrs(p: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut names = vec![0u8; 1 << 16];
    // A filesystem without xattrs at all fails here, loudly.
    let n = rustix::fs::llistxattr(p, &mut names[..]).unwrap();
    names[..n]
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| {
            let mut value = vec![0u8; 1 << 16];
            let len = rustix::fs::lgetxattr(p, name, &mut value[..]).unwrap();
            value.truncate(len);
            (text(name), value)
        })
        .collect()
}

fn entry(p: &Path) -> Entry {
    let m = fs::symlink_metadata(p).unwrap();
    let ft = m.file_type();
    let (kind, content) = if ft.is_file() {
        ("file", fs::read(p).unwrap())
    } else if ft.is_dir() {
        ("dir", Vec::new())
    } else if ft.is_symlink() {
        (
            "symlink",
            fs::read_link(p).unwrap().as_os_str().as_bytes().to_vec(),
        )
    } else {
        ("other", Vec::new())
    };
    let flags = (ft.is_file() || ft.is_dir())
        .then(|| fs::File::open(p).ok())
        .flatten()
        .and_then(|f| rustix::fs::ioctl_getflags(&f).ok())
        .map(|f| f.bits());
    Entry {
        kind,
        ino: m.ino(),
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        nlink: m.nlink(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
        content,
        xattrs: xattrs(p),
        flags,
    }
}

/// Every entry beneath `root` (itself as ""), not following symlinks; empty
/// when `root` is gone.
fn tree(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, rel: &Path, map: &mut BTreeMap<PathBuf, Entry>) {
        // `root.join("")` would add a slash, wrong for a file.
        let path = if rel.as_os_str().is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let e = entry(&path);
        let is_dir = e.kind == "dir";
        map.insert(rel.to_path_buf(), e);
        if is_dir {
            let mut names: Vec<OsString> = fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            for name in names {
                walk(root, &rel.join(name), map);
            }
        }
    }
    let mut map = BTreeMap::new();
    if root.symlink_metadata().is_ok() {
        walk(root, Path::new(""), &mut map);
    }
    map
}

/// What differs between two trees, one line per path, for failure messages.
fn differences(before: &BTreeMap<PathBuf, Entry>, after: &BTreeMap<PathBuf, Entry>) -> String {
    let keys: BTreeSet<&PathBuf> = before.keys().chain(after.keys()).collect();
    let mut lines = Vec::new();
    for k in keys {
        match (before.get(k), after.get(k)) {
            (Some(_), None) => lines.push(format!("{}: gone", k.display())),
            (None, Some(_)) => lines.push(format!("{}: appeared", k.display())),
            (Some(b), Some(a)) if a != b => {
                let changed: Vec<String> = b
                    .fields()
                    .into_iter()
                    .zip(a.fields())
                    .filter(|(x, y)| x != y)
                    .map(|((name, x), (_, y))| format!("{name} {x} -> {y}"))
                    .collect();
                lines.push(format!("{}: {}", k.display(), changed.join(", ")));
            }
            _ => {}
        }
    }
    lines.join("\n")
}

#[track_caller]
fn assert_unchanged(
    before: &BTreeMap<PathBuf, Entry>,
    after: &BTreeMap<PathBuf, Entry>,
    what: &str,
) {
    assert!(
        before == after,
        "{what}: changed:\n{}",
        differences(before, after)
    );
}

/// A version 2 `system.posix_acl_*` value: owner rwx, user `uid` r, group r,
/// mask r, other r (a named user makes it an extended ACL, kept as an xattr).
fn acl_blob(uid: u32) -> Vec<u8> {
    const UNDEFINED: u32 = u32::MAX;
    let entries = [
        (0x01u16, 7u16, UNDEFINED), // USER_OBJ
        (0x02, 4, uid),             // USER
        (0x04, 4, UNDEFINED),       // GROUP_OBJ
        (0x10, 4, UNDEFINED),       // MASK
        (0x20, 4, UNDEFINED),       // OTHER
    ];
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        v.extend(tag.to_le_bytes());
        v.extend(perm.to_le_bytes());
        v.extend(id.to_le_bytes());
    }
    v
}

fn set_xattr(p: &Path, name: &str, value: &[u8]) {
    rustix::fs::setxattr(p, name, value, rustix::fs::XattrFlags::empty()).unwrap();
}

// ---------------------------------------------------------------------------
// Metadata outside the roots: refused; inside: works.

/// `python3 -c OPS CLASS WS TARGET...`: every way it knows to make a CLASS
/// change to each TARGET, printed as `BASENAME:WAY RESULT`, RESULT `ok` or
/// the errno name. Ways: the call on the path as given, through a symlink
/// planted in the workspace (to the target and to its directory), through a
/// path lexically inside the workspace (`WS/../...`), through /proc/self/fd
/// of an O_PATH descriptor, relative to the cwd, on a descriptor, relative to
/// a directory descriptor, the *at2/xattrat/file_setattr variants where the
/// kernel has them, and the coreutils tool.
const OPS: &str = r#"
import ctypes, errno, fcntl, itertools, os, platform, re, shutil, struct, subprocess, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT_FDCWD, AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH = -100, 0x100, 0x1000
X86_64 = platform.machine() == "x86_64"
KERNEL = tuple(int(n) for n in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
cls, ws, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
uid, gid = os.getuid(), os.getgid()
serial = itertools.count()


def sc(nr, *args):
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(ctypes.c_long(nr), *args) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def tool(*argv):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
    if p.returncode:
        err = p.stderr.decode(errors="replace")
        sys.stderr.write(err)
        for code in (errno.EACCES, errno.EPERM):
            if os.strerror(code) in err:
                raise OSError(code, err)
        raise OSError(errno.EIO, err)


def fresh(what):
    return os.path.join(ws, f".{what}-{os.getpid()}-{next(serial)}")


def forms(t):
    def symlink():
        link = fresh("link")
        os.symlink(t, link)
        return link

    def parent_symlink():
        link = fresh("dir")
        os.symlink(os.path.dirname(t), link)
        return os.path.join(link, os.path.basename(t))

    def dotdot():
        return os.path.join(ws, "..", os.path.relpath(t, os.path.dirname(ws)))

    def proc_fd():
        return f"/proc/self/fd/{os.open(t, os.O_PATH)}"

    return [("path", lambda: t), ("symlink", symlink), ("parent-symlink", parent_symlink),
            ("dotdot", dotdot), ("proc-fd", proc_fd)]


def in_cwd(t, fn):
    here = os.getcwd()
    os.chdir(os.path.dirname(t))
    try:
        fn(os.path.basename(t))
    finally:
        os.chdir(here)


def with_fd(t, fn, flags=os.O_RDONLY):
    fd = os.open(t, flags)
    try:
        fn(fd)
    finally:
        os.close(fd)


def at_parent(t, fn):
    d = os.open(os.path.dirname(t), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fn(d, os.path.basename(t))
    finally:
        os.close(d)


def chmod_ops(t):
    modes = iter([0o700, 0o750, 0o705, 0o770, 0o707, 0o775, 0o757, 0o777, 0o751, 0o715])
    ops = [(f"chmod-{n}", lambda p=p, m=next(modes): os.chmod(p(), m)) for n, p in forms(t)]
    ops += [
        ("chmod-cwd", lambda m=next(modes): in_cwd(t, lambda n: os.chmod(n, m))),
        ("fchmod", lambda m=next(modes): with_fd(t, lambda fd: os.fchmod(fd, m))),
        ("fchmodat", lambda m=next(modes): at_parent(t, lambda d, n: os.chmod(n, m, dir_fd=d))),
    ]
    if KERNEL >= (6, 6):
        ops += [
            ("fchmodat2", lambda m=next(modes): sc(452, AT_FDCWD, os.fsencode(t), m, AT_SYMLINK_NOFOLLOW)),
            ("fchmodat2-empty-path", lambda m=next(modes): with_fd(
                t, lambda fd: sc(452, fd, b"", m, AT_EMPTY_PATH), os.O_PATH)),
        ]
    return ops + [("chmod-tool", lambda: tool("chmod", "0711", t)),
                  ("chmod-tool-setuid", lambda: tool("chmod", "u+s", t))]


def fchownat(fd, path, flags):
    if libc.fchownat(fd, path, uid, gid, flags) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def chown_ops(t):
    ops = [(f"chown-{n}", lambda p=p: os.chown(p(), uid, gid)) for n, p in forms(t)]
    return ops + [
        ("chown-cwd", lambda: in_cwd(t, lambda n: os.chown(n, uid, gid))),
        ("fchown", lambda: with_fd(t, lambda fd: os.fchown(fd, uid, gid))),
        ("fchownat", lambda: at_parent(t, lambda d, n: os.chown(n, uid, gid, dir_fd=d))),
        ("lchown", lambda: os.lchown(t, uid, gid)),
        ("fchownat-empty-path", lambda: with_fd(t, lambda fd: fchownat(fd, b"", AT_EMPTY_PATH), os.O_PATH)),
        ("chgrp-only", lambda: os.chown(t, -1, gid)),
        ("chown-tool", lambda: tool("chown", f"{uid}:{gid}", t)),
        ("chgrp-tool", lambda: tool("chgrp", str(gid), t)),
    ]


def utime_ops(t):
    stamps = itertools.count(1_000_000_000)

    def ns():
        s = next(stamps) * 10**9
        return (s, s)

    def timeval():
        s = next(stamps)
        return ctypes.create_string_buffer(struct.pack("<qqqq", s, 0, s, 0), 32)

    ops = [(f"utime-{n}", lambda p=p, v=ns(): os.utime(p(), ns=v)) for n, p in forms(t)]
    ops += [
        ("utime-cwd", lambda v=ns(): in_cwd(t, lambda n: os.utime(n, ns=v))),
        ("futimens", lambda v=ns(): with_fd(t, lambda fd: os.utime(fd, ns=v))),
        ("utimensat-dirfd", lambda v=ns(): at_parent(t, lambda d, n: os.utime(n, ns=v, dir_fd=d))),
        ("utimensat-nofollow", lambda v=ns(): os.utime(t, ns=v, follow_symlinks=False)),
        ("utimensat-now", lambda: os.utime(t)),
    ]
    if X86_64:
        ops += [
            ("utimes", lambda tv=timeval(): sc(235, os.fsencode(t), tv)),
            ("utime", lambda s=next(stamps): sc(
                132, os.fsencode(t), ctypes.create_string_buffer(struct.pack("<qq", s, s), 16))),
            ("futimesat", lambda tv=timeval(): sc(261, AT_FDCWD, os.fsencode(t), tv)),
        ]
    return ops + [("touch-tool", lambda: tool("touch", t)),
                  ("touch-tool-date", lambda: tool("touch", "-d", "@1234567890", t))]


def setxattrat(dfd, path, flags, name, value):
    buf = ctypes.create_string_buffer(value, len(value))
    args = ctypes.create_string_buffer(struct.pack("<QII", ctypes.addressof(buf), len(value), 0), 16)
    sc(463, dfd, path, flags, name.encode(), args, 16)


def removexattrat(dfd, path, flags, name):
    sc(466, dfd, path, flags, name.encode())


def restore(t, name, value, fn):
    # A removal needs something to remove: put it back first (that is
    # refused wherever the removal must be, and then the original is there).
    try:
        os.setxattr(t, name, value)
    except OSError:
        pass
    fn()


def xattr_family(t, name, values, keep, keep_value):
    # The *at calls come first: a supervisor may refuse them everywhere
    # (ENOSYS), and then the classic calls after them decide the end state.
    ops = []
    if KERNEL >= (6, 13):
        ops += [
            ("setxattrat", lambda: setxattrat(AT_FDCWD, os.fsencode(t), 0, name, next(values))),
            ("setxattrat-empty-path", lambda: with_fd(
                t, lambda fd: setxattrat(fd, b"", AT_EMPTY_PATH, name, next(values)))),
            ("removexattrat", lambda: restore(t, keep, keep_value, lambda: removexattrat(
                AT_FDCWD, os.fsencode(t), 0, keep))),
        ]
    ops += [(f"set-{n}", lambda p=p: os.setxattr(p(), name, next(values))) for n, p in forms(t)]
    ops += [
        ("set-cwd", lambda: in_cwd(t, lambda n: os.setxattr(n, name, next(values)))),
        ("fsetxattr", lambda: with_fd(t, lambda fd: os.setxattr(fd, name, next(values)))),
        ("lsetxattr", lambda: os.setxattr(t, name, next(values), follow_symlinks=False)),
    ]
    ops += [(f"remove-{n}", lambda p=p: restore(t, keep, keep_value, lambda: os.removexattr(p(), keep)))
            for n, p in forms(t)]
    ops += [
        ("fremovexattr", lambda: restore(t, keep, keep_value, lambda: with_fd(
            t, lambda fd: os.removexattr(fd, keep)))),
        ("lremovexattr", lambda: restore(t, keep, keep_value, lambda: os.removexattr(
            t, keep, follow_symlinks=False))),
    ]
    return ops


def xattr_ops(t):
    values = (f"v{i}".encode() for i in itertools.count())
    return xattr_family(t, "user.stockade", values, "user.keep", b"keep")


def acl(user):
    entries = [(1, 7, -1), (2, 4, user), (4, 4, -1), (0x10, 4, -1), (0x20, 4, -1)]
    return b"\x02\x00\x00\x00" + b"".join(
        struct.pack("<HHI", tag, perm, ident & 0xFFFFFFFF) for tag, perm, ident in entries)


def acl_ops(t):
    access = "system.posix_acl_access"
    values = (acl(u) for u in itertools.count(5000))
    # Removing the ACL removes what the test put there (named user 1111).
    ops = xattr_family(t, access, values, access, acl(1111))
    if os.path.isdir(t):
        ops += [("set-default-acl", lambda: os.setxattr(t, "system.posix_acl_default", acl(4343)))]
    return ops + [("set-final", lambda: os.setxattr(t, access, acl(4242)))]


GETFLAGS, SETFLAGS = 0x80086601, 0x40086602
FSGETXATTR, FSSETXATTR = 0x801C581F, 0x401C5820
NODUMP, NOATIME = 0x40, 0x80
XFLAGS = {NODUMP: 0x80, NOATIME: 0x40}  # FS_XFLAG_NODUMP, FS_XFLAG_NOATIME


def getflags(fd):
    return struct.unpack("i", fcntl.ioctl(fd, GETFLAGS, b"\0" * 4))[0]


def setflags(fd, combo):
    fcntl.ioctl(fd, SETFLAGS, struct.pack("i", (getflags(fd) & ~(NODUMP | NOATIME)) | combo))


def xflags(combo):
    return sum(x for f, x in XFLAGS.items() if combo & f)


def fssetxattr(fd, combo):
    raw = bytearray(fcntl.ioctl(fd, FSGETXATTR, b"\0" * 28))
    struct.pack_into("<I", raw, 0, (struct.unpack_from("<I", raw)[0] & ~0xC0) | xflags(combo))
    fcntl.ioctl(fd, FSSETXATTR, bytes(raw))


def file_setattr(dfd, path, flags, combo):
    got = ctypes.create_string_buffer(24)
    sc(468, dfd, path, got, 24, flags)  # file_getattr
    raw = bytearray(got.raw)
    struct.pack_into("<Q", raw, 0, (struct.unpack_from("<Q", raw)[0] & ~0xC0) | xflags(combo))
    sc(469, dfd, path, ctypes.create_string_buffer(bytes(raw), 24), 24, flags)


def chattr(t):
    # Lands on a state other than the one before it, and not on "neither".
    fd = os.open(t, os.O_RDONLY)
    try:
        now = getflags(fd) & (NODUMP | NOATIME)
    finally:
        os.close(fd)
    tool("chattr", {0: "+d", NOATIME: "+d", NODUMP: "+A"}.get(now, "-d"), t)


def flags_ops(t):
    # Each call sets a combination other than the one before it.
    combos = itertools.cycle([NODUMP, NOATIME, NODUMP | NOATIME])
    ops = []
    if KERNEL >= (6, 17):
        ops += [
            ("file_setattr", lambda c=next(combos): file_setattr(AT_FDCWD, os.fsencode(t), 0, c)),
            ("file_setattr-empty-path", lambda c=next(combos): with_fd(
                t, lambda fd: file_setattr(fd, b"", AT_EMPTY_PATH, c))),
        ]
    ops += [(f"setflags-{n}", lambda p=p, c=next(combos): with_fd(p(), lambda fd: setflags(fd, c)))
           for n, p in forms(t)]
    ops += [
        ("setflags-cwd", lambda c=next(combos): in_cwd(
            t, lambda n: with_fd(n, lambda fd: setflags(fd, c)))),
        ("setflags-dirfd", lambda c=next(combos): at_parent(t, lambda d, n: setflags_at(d, n, c))),
        ("fssetxattr", lambda c=next(combos): with_fd(t, lambda fd: fssetxattr(fd, c))),
    ]
    if shutil.which("chattr"):
        ops += [("chattr-tool", lambda: chattr(t))]
    return ops


def setflags_at(d, n, combo):
    fd = os.open(n, os.O_RDONLY, dir_fd=d)
    try:
        setflags(fd, combo)
    finally:
        os.close(fd)


CLASSES = {"chmod": chmod_ops, "chown": chown_ops, "utime": utime_ops,
           "xattr": xattr_ops, "acl": acl_ops, "flags": flags_ops}
for t in targets:
    for label, fn in CLASSES[cls](t):
        try:
            fn()
            result = "ok"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno))
        print(f"{os.path.basename(t)}:{label}", result, flush=True)
"#;

/// One kind of metadata change.
struct Class {
    name: &'static str,
    /// Done by the test to each target before any run.
    prepare: fn(&Path),
    /// Whether the calls did their work (`before` -> `after`).
    changed: fn(&Entry, &Entry) -> bool,
    /// Ways newer than the classic calls: a supervisor may refuse those
    /// wholesale, inside the roots too, with ENOSYS (callers then fall back
    /// to a classic call it governs) instead of EACCES.
    newer: &'static [&'static str],
}

impl Class {
    fn is_newer(&self, label: &str) -> bool {
        let way = label.split_once(':').unwrap().1;
        self.newer.iter().any(|n| way.starts_with(n))
    }
}

fn ops(
    who: Who,
    ws: &Path,
    opts: &[OsString],
    class: &str,
    targets: &[PathBuf],
) -> BTreeMap<String, String> {
    let mut argv = vec![
        os(PY),
        os("-I"),
        os("-c"),
        os(OPS),
        os(class),
        ws.as_os_str(),
    ];
    argv.extend(targets.iter().map(|t| t.as_os_str()));
    let out = output(&mut launcher(who, ws, opts, &argv));
    let r = results(&out, &format!("{who:?} {class} {opts:?}"));
    for t in targets {
        let prefix = format!("{}:", t.file_name().unwrap().to_str().unwrap());
        assert!(
            r.keys().any(|k| k.starts_with(&prefix)),
            "{who:?} {class}: nothing tried on {}: {r:?}",
            t.display()
        );
    }
    r
}

fn labels(r: &BTreeMap<String, String>) -> Vec<&String> {
    r.keys().collect()
}

/// For each user: (1) supervised, every way on a file and a directory
/// outside is refused with EACCES and nothing outside changes; (2) with
/// `--no-supervise` the same ways all succeed and do change them (so (1)
/// proves the supervisor); (3) supervised, the same ways all succeed inside.
fn metadata_class(c: &Class) {
    if !python() {
        return;
    }
    for who in users() {
        let s = Scratch::new(who, |ws, out| {
            for dir in [ws, out] {
                write_file(&dir.join("f"), "data\n", 0o644);
                make_dir(&dir.join("d"), 0o755);
            }
        });
        let outside = [s.out.join("f"), s.out.join("d")];
        let inside = [s.ws.join("f"), s.ws.join("d")];
        for t in outside.iter().chain(&inside) {
            (c.prepare)(t);
        }
        let what = format!("{who:?} {}", c.name);

        let before = tree(&s.out);
        let refused = ops(who, &s.ws, &[], c.name, &outside);
        assert_unchanged(
            &before,
            &tree(&s.out),
            &format!("{what}: outside, supervised: {refused:#?}"),
        );
        let wrong: Vec<_> = refused
            .iter()
            .filter(|(label, r)| !(*r == "EACCES" || (c.is_newer(label) && *r == "ENOSYS")))
            .collect();
        assert!(
            wrong.is_empty(),
            "{what}: outside, not refused with EACCES: {wrong:#?}"
        );

        let plain = ops(who, &s.ws, &no_supervise(), c.name, &outside);
        assert_eq!(labels(&plain), labels(&refused), "{what}");
        let failed: Vec<_> = plain.iter().filter(|(_, r)| *r != "ok").collect();
        assert!(
            failed.is_empty(),
            "{what}: outside with --no-supervise these failed, so the supervised leg proves nothing: {failed:#?}"
        );
        for t in &outside {
            let key = Path::new(t.file_name().unwrap());
            assert!(
                (c.changed)(&before[key], &entry(t)),
                "{what}: --no-supervise left {} as it was:\n{:#?}",
                t.display(),
                entry(t).fields()
            );
        }

        let before: Vec<Entry> = inside.iter().map(|t| entry(t)).collect();
        let allowed = ops(who, &s.ws, &[], c.name, &inside);
        assert_eq!(labels(&allowed), labels(&refused), "{what}");
        let failed: Vec<_> = allowed
            .iter()
            .filter(|(label, r)| *r != "ok" && !(c.is_newer(label) && *r == "ENOSYS"))
            .collect();
        assert!(failed.is_empty(), "{what}: inside, refused: {failed:#?}");
        for (t, b) in inside.iter().zip(&before) {
            assert!(
                (c.changed)(b, &entry(t)),
                "{what}: inside, {} did not change:\n{:#?}",
                t.display(),
                entry(t).fields()
            );
        }
    }
}

fn nothing(_: &Path) {}

#[test]
fn mode_changes_outside_are_refused_and_work_inside() {
    metadata_class(&Class {
        name: "chmod",
        prepare: nothing,
        // The last ways are `chmod 0711` and `chmod u+s`.
        changed: |_, a| a.mode & 0o7777 == 0o4711,
        // fchmodat2 is governed like fchmodat: no ENOSYS allowed.
        newer: &[],
    });
}

#[test]
fn owner_changes_outside_are_refused_and_work_inside() {
    metadata_class(&Class {
        name: "chown",
        prepare: nothing,
        // Chown to oneself changes nothing but ctime.
        changed: |b, a| a.ctime != b.ctime && (a.uid, a.gid) == (b.uid, b.gid),
        newer: &[],
    });
}

#[test]
fn timestamp_changes_outside_are_refused_and_work_inside() {
    metadata_class(&Class {
        name: "utime",
        prepare: nothing,
        // The last way is `touch -d @1234567890`.
        changed: |_, a| a.mtime == (1_234_567_890, 0),
        newer: &[],
    });
}

#[test]
fn user_xattr_changes_outside_are_refused_and_work_inside() {
    metadata_class(&Class {
        name: "xattr",
        prepare: |p| set_xattr(p, "user.keep", b"keep"),
        changed: |_, a| {
            a.xattrs.contains_key("user.stockade") && !a.xattrs.contains_key("user.keep")
        },
        newer: &["setxattrat", "removexattrat"],
    });
}

#[test]
fn acl_changes_outside_are_refused_and_work_inside() {
    metadata_class(&Class {
        name: "acl",
        prepare: |p| set_xattr(p, "system.posix_acl_access", &acl_blob(1111)),
        changed: |_, a| {
            a.xattrs.get("system.posix_acl_access") == Some(&acl_blob(4242))
                && (a.kind != "dir"
                    || a.xattrs.get("system.posix_acl_default") == Some(&acl_blob(4343)))
        },
        newer: &["setxattrat", "removexattrat"],
    });
}

#[test]
fn inode_flag_changes_outside_are_refused_and_work_inside() {
    metadata_class(&Class {
        name: "flags",
        prepare: nothing,
        changed: |b, a| a.flags.is_some() && a.flags != b.flags,
        newer: &["file_setattr"],
    });
}

/// The contrast, on its own: plain Landlock (`--no-supervise`) governs
/// writes but not metadata, so `touch -d` on a file outside works there and
/// is refused under the supervisor; a write outside is refused by both.
#[test]
fn no_supervise_is_plain_landlock() {
    for who in users() {
        let s = Scratch::new(who, |_, out| write_file(&out.join("f"), "data\n", 0o644));
        let f = s.out.join("f");
        let touch = format!("touch -d @1000000000 '{}'", f.display());
        let write = format!("echo x > '{}'", f.display());
        let before = entry(&f);

        let out = sh(who, &s.ws, &[], &touch);
        assert!(
            !out.status.success(),
            "{who:?}: touch -d outside worked under supervision"
        );
        assert!(
            text(&out.stderr).contains("Permission denied"),
            "{who:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(entry(&f), before, "{who:?}");

        let out = sh(who, &s.ws, &no_supervise(), &touch);
        assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        assert_eq!(entry(&f).mtime, (1_000_000_000, 0), "{who:?}");

        for opts in [vec![], no_supervise()] {
            let out = sh(who, &s.ws, &opts, &write);
            assert!(
                !out.status.success(),
                "{who:?} {opts:?}: a write outside worked"
            );
            assert_eq!(fs::read(&f).unwrap(), b"data\n");
        }
    }
}

#[test]
fn isolation_reports_the_supervisor() {
    for who in users() {
        let out = output(as_user(who, BIN).arg("--isolation"));
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        for line in [
            "metadata supervised",
            "protected-paths supervised",
            "path-approval supervised",
        ] {
            assert!(
                stdout.lines().any(|l| l == line),
                "{who:?}: no `{line}`: {stdout:?}"
            );
        }
    }
}

/// What a build tool does inside its workspace must keep working under the
/// supervisor: mode, setuid, owner-to-self, timestamps, xattrs, ACLs, flags,
/// hard links, renames (also RENAME_EXCHANGE), symlinks, O_TMPFILE,
/// directories, fifos, /dev/null, and writes to stdout/stderr reopened
/// through /dev/stderr and /proc/self/fd/1.
#[test]
fn ordinary_work_inside_the_roots_still_works() {
    if !python() {
        return;
    }
    let script = r#"set -e
echo a > f
chown "$(id -u):$(id -g)" f
chmod +x f
ln f hard
mv hard renamed
ln -s renamed sym
echo b >> sym
chmod u+s f
mkdir d
chmod 700 d
mkdir -p tree/sub
mv tree tree2
rmdir tree2/sub
mkfifo fifo
echo null > /dev/null
{ echo out-proc > /proc/self/fd/1; echo err-dev > /dev/stderr; } 2>&1 | cat > piped
if [ -n "$INHERITED" ]; then echo out-inherited > /proc/self/fd/1; echo err-inherited > /dev/stderr; fi
echo one > x1
echo two > x2
"$PY" -I -c '
import ctypes, fcntl, os, struct
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)
os.write(fd, b"tmp")
os.link(f"/proc/self/fd/{fd}", "tmpfile-linked")
if libc.renameat2(-100, b"x1", -100, b"x2", 2):
    raise OSError(ctypes.get_errno(), "renameat2")
for p in ("f", "d"):
    os.setxattr(p, "user.x", b"1")
    fd = os.open(p, os.O_RDONLY)
    cur = struct.unpack("i", fcntl.ioctl(fd, 0x80086601, b"\0" * 4))[0]
    fcntl.ioctl(fd, 0x40086602, struct.pack("i", cur | 0x40))
    os.close(fd)
open("acl-f", "w").close()
acl = b"\x02\x00\x00\x00" + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in
    [(1, 7, 0xFFFFFFFF), (2, 4, 4242), (4, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF), (0x20, 4, 0xFFFFFFFF)])
os.setxattr("acl-f", "system.posix_acl_access", acl)
'
touch -d @1000000000 f d
rm x1
echo done
"#;
    for who in users() {
        let s = Scratch::new(who, |_, _| {});
        let mut cmd = launcher(who, &s.ws, &[], &[os("/bin/sh"), os("-c"), os(script)]);
        // A pipe reopened through /proc/self/fd is checked against the
        // pipe's owner: only our own pipes can be reopened by the same user.
        if who == Who::Me {
            cmd.env("INHERITED", "1");
        }
        let out = output(&mut cmd);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{who:?}: {stdout}\n{stderr}");
        assert!(stdout.ends_with("done\n"), "{who:?}: {stdout}");
        if who == Who::Me {
            assert!(stdout.contains("out-inherited\n"), "{stdout}");
            assert!(stderr.contains("err-inherited\n"), "{stderr}");
        }
        let ws = &s.ws;
        let f = entry(&ws.join("f"));
        assert_eq!(f.mode & 0o4100, 0o4100, "{who:?}: {:o}", f.mode);
        assert_eq!(f.mtime, (1_000_000_000, 0));
        assert_eq!(f.content, b"a\nb\n");
        assert_eq!(f.nlink, 2);
        assert_eq!(f.xattrs.get("user.x").map(Vec::as_slice), Some(&b"1"[..]));
        assert_eq!(f.flags.unwrap() & 0x40, 0x40, "{who:?}: NODUMP not set");
        assert_eq!(entry(&ws.join("renamed")).ino, f.ino);
        assert_eq!(entry(&ws.join("sym")).content, b"renamed");
        let d = entry(&ws.join("d"));
        assert_eq!((d.mode & 0o777, d.mtime), (0o700, (1_000_000_000, 0)));
        assert!(d.xattrs.contains_key("user.x"));
        assert!(ws.join("tree2").is_dir() && !ws.join("tree").exists());
        assert_eq!(entry(&ws.join("fifo")).kind, "other");
        assert_eq!(fs::read(ws.join("tmpfile-linked")).unwrap(), b"tmp");
        assert_eq!(
            fs::read(ws.join("x2")).unwrap(),
            b"one\n",
            "{who:?}: exchange"
        );
        assert_eq!(fs::read(ws.join("piped")).unwrap(), b"out-proc\nerr-dev\n");
        assert_eq!(
            entry(&ws.join("acl-f"))
                .xattrs
                .get("system.posix_acl_access"),
            Some(&acl_blob(4242))
        );
    }
}

// ---------------------------------------------------------------------------
// --protect

/// `WS/.git` with HEAD, objects/, config and hooks/ (holding a sample hook,
/// unless `empty_hooks`), and `WS/a.txt`.
fn repo(who: Who, empty_hooks: bool) -> Scratch {
    Scratch::new(who, |ws, _| {
        let git = ws.join(".git");
        make_dir(&git.join("objects"), 0o755);
        make_dir(&git.join("hooks"), 0o755);
        write_file(&git.join("HEAD"), "ref: refs/heads/main\n", 0o644);
        write_file(&git.join("config"), "[core]\n\tbare = false\n", 0o644);
        if !empty_hooks {
            write_file(
                &git.join("hooks/pre-push.sample"),
                "#!/bin/sh\nexit 0\n",
                0o755,
            );
        }
        write_file(&ws.join("a.txt"), "a\n", 0o644);
    })
}

fn protect(ws: &Path) -> Vec<OsString> {
    let mut v = Vec::new();
    for p in [".git/hooks", ".git/config"] {
        v.push("--protect".into());
        v.push(ws.join(p).into_os_string());
    }
    v
}

/// The protected objects (`.git/config`, `.git/hooks` and all beneath it)
/// plus the inode of `.git`, whose name cannot move either.
fn protected(ws: &Path) -> (Option<u64>, BTreeMap<PathBuf, Entry>) {
    let mut map: BTreeMap<PathBuf, Entry> = tree(&ws.join(".git/hooks"))
        .into_iter()
        .map(|(k, v)| (Path::new(".git/hooks").join(k), v))
        .collect();
    map.extend(
        tree(&ws.join(".git/config"))
            .into_values()
            .map(|v| (PathBuf::from(".git/config"), v)),
    );
    (
        ws.join(".git").symlink_metadata().ok().map(|m| m.ino()),
        map,
    )
}

/// An attack: its name, the script (run in WS, `$PY` is python3) and paths
/// relative to WS that must not exist afterwards.
type Attack = (&'static str, &'static str, &'static [&'static str]);

/// Each attack, in a fresh repository, as each user: the script fails and
/// the protected objects are byte-for-byte, mode- and inode-unchanged. As a
/// control, the same script without `--protect` must do its damage, so a
/// script that could never work does not pass as a refusal.
fn attacks_fail(attacks: &[Attack], empty_hooks: bool) {
    if !python() {
        return;
    }
    let mut failures = Vec::new();
    for who in users() {
        for (name, script, absent) in attacks {
            let s = repo(who, empty_hooks);
            let (git, before) = protected(&s.ws);
            // `ran` proves the launcher started it: a launcher failure
            // (exit 125) changes nothing either, but refuses nothing.
            let out = sh(who, &s.ws, &protect(&s.ws), &format!("echo ran; {script}"));
            let (git_after, after) = protected(&s.ws);
            if !text(&out.stdout).starts_with("ran\n") {
                failures.push(format!(
                    "{who:?} `{name}`: never ran ({:?}): {}",
                    out.status,
                    text(&out.stderr)
                ));
            } else if out.status.success() {
                failures.push(format!("{who:?} `{name}`: the script succeeded"));
            }
            if git_after != git {
                failures.push(format!(
                    "{who:?} `{name}`: .git moved ({git:?} -> {git_after:?})"
                ));
            }
            if after != before {
                failures.push(format!(
                    "{who:?} `{name}`:\n{}",
                    differences(&before, &after)
                ));
            }
            for a in *absent {
                if s.ws.join(a).symlink_metadata().is_ok() {
                    failures.push(format!("{who:?} `{name}`: {a} exists"));
                }
            }

            let s = repo(who, empty_hooks);
            let before = protected(&s.ws);
            let out = sh(who, &s.ws, &[], script);
            let created = absent
                .iter()
                .any(|a| s.ws.join(a).symlink_metadata().is_ok());
            if protected(&s.ws) == before && !created {
                failures.push(format!(
                    "{who:?} `{name}`: harmless even unprotected ({:?}): {}",
                    out.status,
                    text(&out.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn protected_config_cannot_be_written() {
    attacks_fail(
        &[
            ("O_TRUNC write", "echo evil > .git/config", &[]),
            ("append", "echo evil >> .git/config", &[]),
            (
                "O_WRONLY in place",
                r#""$PY" -c 'import os; fd = os.open(".git/config", os.O_WRONLY); os.write(fd, b"X")'"#,
                &[],
            ),
            (
                "O_RDWR in place",
                r#""$PY" -c 'import os; fd = os.open(".git/config", os.O_RDWR); os.write(fd, b"X")'"#,
                &[],
            ),
            (
                "O_TRUNC open alone",
                r#""$PY" -c 'import os; os.open(".git/config", os.O_WRONLY | os.O_TRUNC)'"#,
                &[],
            ),
            ("truncate(2)", "truncate -s 0 .git/config", &[]),
            ("sed -i", "sed -i s/false/true/ .git/config", &[]),
            (
                "reopen through /proc/self/fd",
                r#""$PY" -c 'import os; fd = os.open(".git/config", os.O_RDONLY); w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY); os.write(w, b"X")'"#,
                &[],
            ),
        ],
        false,
    );
}

#[test]
fn protected_hooks_cannot_gain_or_change_files() {
    attacks_fail(
        &[
            (
                "create a hook",
                "printf '#!/bin/sh\\n' > .git/hooks/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            (
                "copy a hook in",
                "cp .git/HEAD .git/hooks/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            ("mkdir", "mkdir .git/hooks/sub", &[".git/hooks/sub"]),
            (
                "symlink",
                "ln -s /bin/true .git/hooks/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            (
                "fifo",
                "mkfifo .git/hooks/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            (
                "O_TMPFILE then link",
                r##""$PY" -c 'import os; fd = os.open(".git/hooks", os.O_TMPFILE | os.O_WRONLY, 0o755); os.write(fd, b"#!/bin/sh\n"); os.link(f"/proc/self/fd/{fd}", ".git/hooks/pre-commit")'"##,
                &[".git/hooks/pre-commit"],
            ),
            (
                "append to a hook",
                "echo evil >> .git/hooks/pre-push.sample",
                &[],
            ),
        ],
        false,
    );
}

/// A Python one-liner doing renameat2(A, B, RENAME_EXCHANGE).
macro_rules! exchange {
    ($a:literal, $b:literal) => {
        concat!(
            r#""$PY" -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = libc.renameat2(-100, b""#,
            $a,
            r#"", -100, b""#,
            $b,
            r#"", 2); raise SystemExit(os.strerror(ctypes.get_errno()) if r else 0)'"#
        )
    };
}

#[test]
fn protected_paths_cannot_be_renamed_or_replaced() {
    attacks_fail(
        &[
            (
                "rename over config",
                "echo evil > cfg && mv -f cfg .git/config",
                &[],
            ),
            (
                "exchange with config",
                concat!("echo evil > cfg && ", exchange!("cfg", ".git/config")),
                &[],
            ),
            ("rename config away", "mv .git/config stolen", &["stolen"]),
            (
                "rename hooks away",
                "mv .git/hooks .git/hooks-old",
                &[".git/hooks-old"],
            ),
            (
                "exchange with hooks",
                concat!("mkdir h2 && ", exchange!("h2", ".git/hooks")),
                &[],
            ),
            (
                "rename a hook out",
                "mv .git/hooks/pre-push.sample x",
                &["x"],
            ),
            (
                "rename into hooks",
                "echo x > h && mv h .git/hooks/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            ("rename .git away", "mv .git .git-old", &[".git-old"]),
            (
                "exchange with .git",
                concat!("mkdir g2 && ", exchange!("g2", ".git")),
                &[],
            ),
        ],
        false,
    );
    // Over an empty directory a rename would otherwise succeed.
    attacks_fail(
        &[
            (
                "rename a directory over empty hooks",
                "mkdir h && mv -T h .git/hooks",
                &[],
            ),
            ("rmdir empty hooks", "rmdir .git/hooks", &[]),
        ],
        true,
    );
}

#[test]
fn protected_paths_cannot_be_removed() {
    attacks_fail(
        &[
            ("unlink config", "rm -f .git/config", &[]),
            ("unlink a hook", "rm -f .git/hooks/pre-push.sample", &[]),
            ("rm -rf hooks", "rm -rf .git/hooks", &[]),
            ("rm -rf .git", "rm -rf .git", &[]),
        ],
        false,
    );
}

#[test]
fn protected_paths_cannot_be_reached_through_links() {
    attacks_fail(
        &[
            (
                "hard link config out",
                "ln .git/config cfglink && echo evil >> cfglink",
                &["cfglink"],
            ),
            (
                "hard link config within .git",
                "ln .git/config .git/config2",
                &[".git/config2"],
            ),
            (
                "hard link into hooks",
                "echo x > h && ln h .git/hooks/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            (
                "symlink to a new hook",
                "ln -s .git/hooks/pre-commit x && echo evil > x",
                &[".git/hooks/pre-commit"],
            ),
            (
                "symlink to config",
                "ln -s .git/config y && echo evil > y",
                &[],
            ),
            (
                "symlink to hooks",
                "ln -s .git/hooks hk && echo evil > hk/pre-commit",
                &[".git/hooks/pre-commit"],
            ),
            (
                "symlink to .git",
                "ln -s .git g && echo evil > g/config",
                &[],
            ),
        ],
        false,
    );
}

#[test]
fn protected_metadata_cannot_change() {
    attacks_fail(
        &[
            ("chmod config", "chmod 777 .git/config", &[]),
            ("chmod hooks", "chmod 777 .git/hooks", &[]),
            ("chmod a hook", "chmod -x .git/hooks/pre-push.sample", &[]),
            ("touch config", "touch .git/config", &[]),
            ("touch -d hooks", "touch -d @1 .git/hooks", &[]),
            (
                "chown config to self",
                r#"chown "$(id -u):$(id -g)" .git/config"#,
                &[],
            ),
            (
                "xattr on config",
                r#""$PY" -c 'import os; os.setxattr(".git/config", "user.x", b"1")'"#,
                &[],
            ),
            (
                "inode flags on config",
                r#""$PY" -c 'import fcntl, os, struct; fd = os.open(".git/config", os.O_RDONLY); fcntl.ioctl(fd, 0x40086602, struct.pack("i", 0x40))'"#,
                &[],
            ),
        ],
        false,
    );
}

/// Next to the protected objects, the rest of `.git` and the workspace stay
/// fully writable, and the protected ones readable.
#[test]
fn ordinary_files_next_to_protected_ones_stay_writable() {
    let script = r#"set -e
cat .git/config > /dev/null
ls .git/hooks > /dev/null
echo 'ref: refs/heads/other' > .git/HEAD
mkdir -p .git/objects/ab
echo blob > .git/objects/ab/x
echo lock > .git/index.lock
mv .git/index.lock .git/index
mkdir .git/info
echo x > .git/info/exclude
echo a >> a.txt
mv a.txt b.txt
chmod +x b.txt
touch -d @1000000000 b.txt
ln b.txt c.txt
rm .git/index
echo ok
"#;
    for who in users() {
        let s = repo(who, false);
        let before = protected(&s.ws);
        let out = sh(who, &s.ws, &protect(&s.ws), script);
        assert_eq!(text(&out.stdout), "ok\n", "{who:?}: {}", text(&out.stderr));
        assert_eq!(protected(&s.ws), before, "{who:?}");
        let git = s.ws.join(".git");
        assert_eq!(
            fs::read(git.join("HEAD")).unwrap(),
            b"ref: refs/heads/other\n"
        );
        assert_eq!(fs::read(git.join("objects/ab/x")).unwrap(), b"blob\n");
        assert_eq!(fs::read(s.ws.join("b.txt")).unwrap(), b"a\na\n");
        assert_eq!(entry(&s.ws.join("c.txt")).nlink, 2);
    }
}

// ---------------------------------------------------------------------------
// Races: a symlink swapped between an allowed and a forbidden directory
// while calls go through it.

/// argv: WS, A, B, SECONDS, UNTIL. One thread swaps `WS/link` between
/// pointing to A and to B (a fresh symlink renamed over it), the other keeps
/// calling chmod, utime, chown, setxattr, create and append through
/// `link/`, for SECONDS and at least until 40 swaps (30 s at most). Prints
/// `OP RESULT COUNT` and `swaps N`.
const RACE: &str = r#"
import errno, os, sys, threading, time

ws, a, b, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
# Hand the GIL over often, so swaps land between (and during) the calls.
sys.setswitchinterval(0.0001)
link = os.path.join(ws, "link")
os.symlink(a, link)
stop = time.monotonic() + seconds
# At least this many swaps, however slow a loaded machine makes each call
# (both threads' calls are notifications the supervisor answers), up to a
# hard end: a race that did not race proves nothing.
MIN_SWAPS = 40
hard_stop = time.monotonic() + max(seconds, 30.0)
swaps = 0
done = False


def swapper():
    global swaps
    while not done:
        tmp = os.path.join(ws, ".swap")
        os.symlink(b if swaps % 2 == 0 else a, tmp)
        os.rename(tmp, link)
        swaps += 1


def touch(path):
    with open(path, "w"):
        pass


def append(path):
    with open(path, "a") as f:
        f.write("x")


f = os.path.join(link, "f")
uid, gid = os.getuid(), os.getgid()
OPS = [
    ("chmod", lambda n: os.chmod(f, 0o777 if n % 2 else 0o700)),
    ("utime", lambda n: os.utime(f, ns=(n, n))),
    ("chown", lambda n: os.chown(f, uid, gid)),
    ("setxattr", lambda n: os.setxattr(f, "user.race", str(n).encode())),
    ("create", lambda n: touch(os.path.join(link, "new"))),
    ("append", lambda n: append(f)),
]
counts = {}
t = threading.Thread(target=swapper)
t.start()
n = 0
while (time.monotonic() < stop or swaps < MIN_SWAPS) and time.monotonic() < hard_stop:
    n += 1
    for name, fn in OPS:
        try:
            fn(n)
            result = "ok"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno))
        counts[(name, result)] = counts.get((name, result), 0) + 1
done = True
t.join()
for (name, result), count in sorted(counts.items()):
    print(name, result, count)
print("swaps", swaps)
"#;

fn race(
    who: Who,
    ws: &Path,
    opts: &[OsString],
    a: &Path,
    b: &Path,
    seconds: &str,
) -> BTreeMap<(String, String), u64> {
    let argv = [
        os(PY),
        os("-I"),
        os("-c"),
        os(RACE),
        ws.as_os_str(),
        a.as_os_str(),
        b.as_os_str(),
        os(seconds),
    ];
    let out = output(&mut launcher(who, ws, opts, &argv));
    assert!(out.status.success(), "{who:?} race: {}", text(&out.stderr));
    let mut counts = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts[..] {
            ["swaps", n] => assert!(
                n.parse::<u64>().unwrap() > 20,
                "{who:?}: too few swaps: {line}"
            ),
            [op, result, n] => {
                counts.insert((op.to_owned(), result.to_owned()), n.parse().unwrap());
            }
            _ => panic!("{line:?}"),
        }
    }
    counts
}

/// The race reached both sides: some calls through the link worked (it
/// pointed inside) and some were refused (it pointed at the forbidden side);
/// nothing but `allowed_errors` came back.
fn assert_race_was_real(
    counts: &BTreeMap<(String, String), u64>,
    allowed_errors: &[&str],
    what: &str,
) {
    let odd: Vec<_> = counts
        .keys()
        .filter(|(_, r)| r != "ok" && !allowed_errors.contains(&r.as_str()))
        .collect();
    assert!(odd.is_empty(), "{what}: unexpected results: {counts:?}");
    let n = |r: &dyn Fn(&str) -> bool| -> u64 {
        counts
            .iter()
            .filter(|((op, res), _)| op == "chmod" && r(res))
            .map(|(_, c)| c)
            .sum()
    };
    assert!(n(&|r| r == "ok") > 0, "{what}: never inside: {counts:?}");
    assert!(n(&|r| r != "ok") > 0, "{what}: never refused: {counts:?}");
}

#[test]
fn a_symlink_swapped_under_the_calls_never_reaches_outside() {
    if !python() {
        return;
    }
    let fill = |ws: &Path, out: &Path| {
        make_dir(&ws.join("in"), 0o755);
        write_file(&ws.join("in/f"), "in\n", 0o644);
        write_file(&out.join("f"), "out\n", 0o644);
    };
    for who in users() {
        let s = Scratch::new(who, fill);
        let before = tree(&s.out);
        let counts = race(who, &s.ws, &[], &s.ws.join("in"), &s.out, "2");
        assert_unchanged(
            &before,
            &tree(&s.out),
            &format!("{who:?}: outside during the race: {counts:?}"),
        );
        assert_race_was_real(&counts, &["EACCES"], &format!("{who:?}"));

        // The same race without the supervisor does reach outside.
        let s = Scratch::new(who, fill);
        let before = tree(&s.out);
        race(who, &s.ws, &no_supervise(), &s.ws.join("in"), &s.out, "0.5");
        assert_ne!(
            tree(&s.out),
            before,
            "{who:?}: the race never reached outside unsupervised"
        );
    }
}

#[test]
fn a_symlink_swapped_under_the_calls_never_reaches_protected_hooks() {
    if !python() {
        return;
    }
    for who in users() {
        let prepare = || {
            let s = repo(who, false);
            make_dir(&s.ws.join("in"), 0o755);
            write_file(&s.ws.join("in/f"), "in\n", 0o644);
            write_file(&s.ws.join(".git/hooks/f"), "#!/bin/sh\n", 0o755);
            give(&s.ws, who);
            s
        };
        let s = prepare();
        let before = protected(&s.ws);
        let hooks = s.ws.join(".git/hooks");
        let counts = race(who, &s.ws, &protect(&s.ws), &s.ws.join("in"), &hooks, "2");
        let after = protected(&s.ws);
        assert!(
            after == before,
            "{who:?}: protected hooks changed during the race: {counts:?}\n{}",
            differences(&before.1, &after.1)
        );
        assert_race_was_real(&counts, &["EACCES", "EPERM"], &format!("{who:?}"));

        // Without --protect the same race does change the hooks.
        let s = prepare();
        let before = protected(&s.ws);
        race(
            who,
            &s.ws,
            &[],
            &s.ws.join("in"),
            &s.ws.join(".git/hooks"),
            "0.5",
        );
        assert_ne!(
            protected(&s.ws),
            before,
            "{who:?}: the race never reached the hooks"
        );
    }
}

// ---------------------------------------------------------------------------
// Exit status, output, signals, process lifetime.

#[test]
fn exit_status_and_output_pass_through() {
    for who in users() {
        let s = Scratch::new(who, |_, _| {});
        let out = sh(who, &s.ws, &[], "printf out; printf err >&2; exit 7");
        assert_eq!(out.status.code(), Some(7), "{who:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "out", "{who:?}");
        assert_eq!(text(&out.stderr), "err", "{who:?}");

        let out = sh(
            who,
            &s.ws,
            &[],
            "head -c 1048576 /dev/zero; head -c 262144 /dev/zero >&2",
        );
        assert_eq!(out.status.code(), Some(0), "{who:?}");
        assert_eq!(
            (out.stdout.len(), out.stderr.len()),
            (1 << 20, 1 << 18),
            "{who:?}"
        );
    }
}

/// A process we saw alive, by pid and start time (a reused pid is another
/// process).
#[derive(Clone, Copy, Debug)]
struct Proc {
    pid: i32,
    start: u64,
}

/// (state, start time) from /proc/PID/stat.
fn stat(pid: i32) -> Option<(char, u64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = s[s.rfind(')')? + 2..].split(' ').collect();
    Some((fields[0].chars().next()?, fields[19].parse().ok()?))
}

impl Proc {
    /// The live process `pid`, which must be running `sleep 1000`.
    fn sleeper(pid: i32) -> Proc {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert_eq!(
            cmdline.escape_ascii().to_string(),
            b"sleep\x001000\x00".escape_ascii().to_string(),
            "pid {pid} is not the command's sleep"
        );
        let (_, start) = stat(pid).unwrap();
        Proc { pid, start }
    }

    fn alive(&self) -> bool {
        matches!(stat(self.pid), Some((state, start)) if start == self.start && state != 'Z' && state != 'X')
    }

    fn gone_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.alive() {
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
        true
    }
}

/// Kills, on drop, whatever a failed test would otherwise leave running.
struct Reaper(Vec<Proc>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in &self.0 {
            if p.alive() {
                let _ = rustix::process::kill_process(Pid::from_raw(p.pid).unwrap(), Signal::KILL);
            }
        }
    }
}

/// Waits for `file` (written whole by a rename) and returns the pid in it.
fn pid_from(file: &Path, child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = fs::read_to_string(file) {
            return s.trim().parse().unwrap();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the launcher exited ({status:?}) before writing {}",
                file.display()
            );
        }
        assert!(Instant::now() < deadline, "no {}", file.display());
        thread::sleep(Duration::from_millis(10));
    }
}

/// `sh -c 'echo $$ > WS/pid; exec sleep 1000'`, confined, as `who`.
fn spawn_sleeper(who: Who, ws: &Path) -> (Child, Proc) {
    let pidfile = ws.join("pid");
    let mut child = launcher(
        who,
        ws,
        &[],
        &[
            os("/bin/sh"),
            os("-c"),
            os(r#"echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 1000"#),
            os("sh"),
            pidfile.as_os_str(),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let pid = pid_from(&pidfile, &mut child);
    // exec may not have happened yet.
    let deadline = Instant::now() + Duration::from_secs(5);
    while fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default() != b"sleep\x001000\x00" {
        assert!(Instant::now() < deadline, "pid {pid} never became sleep");
        thread::sleep(Duration::from_millis(10));
    }
    (child, Proc::sleeper(pid))
}

/// The command dies of a signal: the launcher dies of the same one.
#[test]
fn a_command_killed_by_a_signal_kills_the_launcher_with_it() {
    for who in users() {
        for sig in [Signal::TERM, Signal::KILL] {
            let s = Scratch::new(who, |_, _| {});
            let (mut child, sleeper) = spawn_sleeper(who, &s.ws);
            let _reaper = Reaper(vec![sleeper]);
            rustix::process::kill_process(Pid::from_raw(sleeper.pid).unwrap(), sig).unwrap();
            let status = wait_bounded(&mut child, Duration::from_secs(10), &Command::new(BIN));
            assert_eq!(
                status.signal(),
                Some(sig.as_raw()),
                "{who:?} {sig:?}: {status:?}"
            );
        }
    }
}

/// `kill -9` of the launcher: the command goes too.
#[test]
fn killing_the_launcher_kills_the_command() {
    for who in users() {
        let s = Scratch::new(who, |_, _| {});
        let (mut child, sleeper) = spawn_sleeper(who, &s.ws);
        let _reaper = Reaper(vec![sleeper]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            sleeper.gone_within(Duration::from_secs(5)),
            "{who:?}: the command outlived its launcher: {sleeper:?}"
        );
    }
}

/// When the command exits, what it left running in the background (a plain
/// `&` child, and one detached with setsid in a subshell that exited) is
/// killed too.
#[test]
fn background_processes_die_with_the_command() {
    let script = r#"
sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! > "$1/bg.tmp" && mv "$1/bg.tmp" "$1/bg"
( setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "$1/orphan.tmp" && mv "$1/orphan.tmp" "$1/orphan" )
while [ -e "$1/hold" ]; do sleep 0.05; done
exit 0
"#;
    for who in users() {
        let s = Scratch::new(who, |ws, _| fs::write(ws.join("hold"), "").unwrap());
        let mut child = launcher(
            who,
            &s.ws,
            &[],
            &[
                os("/bin/sh"),
                os("-c"),
                os(script),
                os("sh"),
                s.ws.as_os_str(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let mut reaper = Reaper(Vec::new());
        let mut left = Vec::new();
        for name in ["bg", "orphan"] {
            let pid = pid_from(&s.ws.join(name), &mut child);
            let deadline = Instant::now() + Duration::from_secs(5);
            while fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
                != b"sleep\x001000\x00"
            {
                assert!(
                    Instant::now() < deadline,
                    "{who:?}: {name} pid {pid} never became sleep"
                );
                thread::sleep(Duration::from_millis(10));
            }
            let p = Proc::sleeper(pid);
            reaper.0.push(p);
            left.push((name, p));
        }
        fs::remove_file(s.ws.join("hold")).unwrap();
        let status = wait_bounded(&mut child, Duration::from_secs(10), &Command::new(BIN));
        assert_eq!(status.code(), Some(0), "{who:?}: {status:?}");
        let survivors: Vec<_> = left
            .iter()
            .filter(|(_, p)| !p.gone_within(Duration::from_secs(5)))
            .collect();
        assert!(
            survivors.is_empty(),
            "{who:?}: outlived the command: {survivors:?}"
        );
    }
}

/// A command that is gone before the supervisor is fully up (a static
/// do-nothing binary, many times over) still ends the launcher at once: the
/// child's exit must never be missed. A lost SIGCHLD hangs the launcher,
/// which `output` turns into a failure.
#[test]
fn a_command_that_exits_at_once_never_hangs_the_launcher() {
    let s = Scratch::new(Who::Me, |_, _| {});
    for code in 0..60 {
        let script = format!("exit {}", code % 4);
        let out = output(&mut launcher(
            Who::Me,
            &s.ws,
            &[],
            &[os("/bin/sh"), os("-c"), os(&script)],
        ));
        assert_eq!(out.status.code(), Some(code % 4), "{}", text(&out.stderr));
        let out = output(&mut launcher(Who::Me, &s.ws, &[], &[os("/bin/true")]));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
}

/// A writable root nested in another (a workspace under /tmp) cannot be
/// renamed or removed by the run: the next run must find it where it was.
/// Its siblings still move freely.
#[test]
fn a_nested_writable_root_cannot_be_moved_away() {
    for who in users() {
        let s = Scratch::new(who, |ws, _| {
            fs::create_dir(ws.join("inner")).unwrap();
            fs::create_dir(ws.join("sibling")).unwrap();
        });
        let inner = s.ws.join("inner");
        let opts = vec![OsString::from("--rw"), inner.clone().into_os_string()];
        let out = sh(
            who,
            &s.ws,
            &opts,
            "mv inner inner.old; echo mv=$?; rmdir inner; echo rmdir=$?; \
             mv sibling sibling2; echo sib=$?",
        );
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("mv=1") && stdout.contains("rmdir=1") && stdout.contains("sib=0"),
            "{who:?}: {stdout} {}",
            text(&out.stderr)
        );
        assert!(
            inner.is_dir() && !s.ws.join("inner.old").exists(),
            "{who:?}"
        );
        assert!(s.ws.join("sibling2").is_dir(), "{who:?}");
    }
}

/// `cmd` run in a new pid namespace (and, when we are not root, a user
/// namespace to make one): with that namespace's own /proc, or with the
/// /proc of the namespace outside, where every number names another process.
fn in_pid_namespace(cmd: &Command, own_proc: bool) -> Command {
    let mut c = Command::new("unshare");
    if !rustix::process::geteuid().is_root() {
        c.args(["--user", "--map-root-user"]);
    }
    c.args(["--pid", "--fork"]);
    if own_proc {
        c.arg("--mount-proc");
    }
    c.arg("--").arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        c.current_dir(dir);
    }
    c.stdin(Stdio::null());
    c
}

/// The supervisor reads the command's threads as /proc/<tid>. Where /proc
/// is another pid namespace's, those numbers name other processes (their
/// cwd, their descriptors): it refuses to start (125, nothing run), and
/// runs as usual where the namespace has its own /proc.
#[test]
fn the_supervisor_refuses_a_proc_of_another_pid_namespace() {
    for who in users() {
        let s = Scratch::new(who, |_, _| {});
        let made = s.ws.join("made");
        let touch = launcher(who, &s.ws, &[], &[os("/usr/bin/touch"), made.as_os_str()]);
        let out = output(&mut in_pid_namespace(&touch, false));
        assert_eq!(
            out.status.code(),
            Some(125),
            "{who:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("/proc belongs to another pid namespace"),
            "{who:?}: {}",
            text(&out.stderr)
        );
        assert!(!made.exists(), "{who:?}: the command ran");
        let out = output(&mut in_pid_namespace(&touch, true));
        assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        assert!(made.exists(), "{who:?}: the command never ran");
        // Unsupervised, nothing reads /proc/<tid>: it runs either way.
        fs::remove_file(&made).unwrap();
        let plain = launcher(
            who,
            &s.ws,
            &no_supervise(),
            &[os("/usr/bin/touch"), made.as_os_str()],
        );
        let out = output(&mut in_pid_namespace(&plain, false));
        assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        assert!(made.exists(), "{who:?}: the unsupervised command never ran");
    }
}
