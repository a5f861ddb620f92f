//! `landlock_run::netns_listener`: the proxy's listener made from outside
//! in a real bwrap's private network namespace, before bwrap lets its
//! command run, as root and as `nobody` (where bwrap makes a user
//! namespace that the helper must enter first). The command inside reaches
//! it on 127.0.0.1; the host does not; the caller's own namespaces are
//! unchanged. A namespace other than the one bwrap named is refused. When
//! `CI=true` a missing bwrap is a failure, never a skip.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use landlock_run::netns_listener::{ListenError, NamedChild, listen_in};
use stockade_core::status::BwrapChild;
use stockade_testkit::users::users;

/// The leg re-run as `nobody` reads this to know it is the leg.
const LEG: &str = "STOCKADE_NETNS_LISTENER_LEG";
const PORT: u16 = 38127;

fn bwrap() -> bool {
    let found = Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    stockade_testkit::require("bwrap", found)
}

/// bwrap with a private network namespace, stopped before its command
/// until a byte arrives on its block descriptor; its status channel's read
/// end and the block descriptor's write end.
fn blocked_bwrap(script: &str) -> (std::process::Child, std::fs::File, std::fs::File) {
    let (status_r, status_w) = std::io::pipe().unwrap();
    let (block_r, block_w) = std::io::pipe().unwrap();
    let mut cmd = Command::new("bwrap");
    cmd.args([
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
        "--json-status-fd",
        "3",
        "--block-fd",
        "4",
        "--",
        "bash",
        "-c",
        script,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd.fd_mappings(vec![
        FdMapping {
            parent_fd: OwnedFd::from(status_w),
            child_fd: 3,
        },
        FdMapping {
            parent_fd: OwnedFd::from(block_r),
            child_fd: 4,
        },
    ])
    .unwrap();
    let child = cmd.spawn().unwrap();
    drop(cmd);
    (
        child,
        OwnedFd::from(status_r).into(),
        OwnedFd::from(block_w).into(),
    )
}

fn first_document(status: &mut std::fs::File) -> BwrapChild {
    let mut line = String::new();
    BufReader::new(status).read_line(&mut line).unwrap();
    BwrapChild::first_line(line.as_bytes()).unwrap_or_else(|| panic!("not a child-pid: {line:?}"))
}

fn ns(which: &str) -> std::fs::Metadata {
    std::fs::metadata(format!("/proc/thread-self/ns/{which}")).unwrap()
}

/// The leg itself, as whoever runs it.
fn reached_from_inside_only() {
    use std::os::unix::fs::MetadataExt as _;
    let script = format!(
        "exec 5<>/dev/tcp/127.0.0.1/{PORT} && echo hello >&5 && read -r reply <&5 && echo \"$reply\""
    );
    let (child, mut status, mut block) = blocked_bwrap(&script);
    let doc = first_document(&mut status);
    let (net, user) = (ns("net"), ns("user"));
    let listener = listen_in(doc, PORT).unwrap();
    assert_eq!(ns("net").ino(), net.ino(), "our network namespace is ours");
    assert_eq!(ns("user").ino(), user.ino(), "our user namespace is ours");
    // The host's 127.0.0.1:PORT is another address altogether.
    assert!(TcpStream::connect(("127.0.0.1", PORT)).is_err());
    block.write_all(b"x").unwrap();
    drop(block);
    listener.set_nonblocking(false).unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut hello = [0u8; 6];
    conn.read_exact(&mut hello).unwrap();
    assert_eq!(&hello, b"hello\n");
    conn.write_all(b"world\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "world\n");
}

#[test]
fn a_listener_made_from_outside_is_reached_from_inside_only() {
    if std::env::var_os(LEG).is_some() {
        return reached_from_inside_only();
    }
    if !bwrap() {
        return;
    }
    for who in users() {
        let out = who
            .command(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_listener_made_from_outside_is_reached_from_inside_only",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(LEG, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "as {who:?}: {text}");
        assert!(text.contains("1 passed"), "as {who:?} the leg ran: {text}");
    }
}

/// In a pid namespace whose /proc is another's (`unshare --pid` without
/// its own /proc mounted), bwrap's child pid names another process there,
/// and bwrap, reading that /proc, names that other process's namespaces.
/// The listener is never made there: from the pidfd (Linux 6.11) the
/// child's real namespace is not the one named; through /proc (older
/// kernels) a /proc that is not this pid namespace's is refused; and
/// where that other /proc has no process of the child's pid, bwrap names
/// no child at all. As root (`unshare` makes the pid namespace). The first
/// build listened in the host's namespace here.
#[test]
fn a_proc_of_another_pid_namespace_is_never_trusted() {
    if std::env::var_os(LEG).is_some_and(|v| v == "pidns") {
        let (mut child, status, block) = blocked_bwrap("echo ran");
        let mut line = String::new();
        BufReader::new(status).read_line(&mut line).unwrap();
        // Where the pid that other /proc shows is no process at all, bwrap
        // itself fails to read its child's namespaces and names none.
        let Some(doc) = BwrapChild::first_line(line.as_bytes()) else {
            println!("bwrap named no child");
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        };
        match listen_in(doc, PORT) {
            Ok(_) => println!("listened"),
            Err(ListenError::Mismatch { .. } | ListenError::ForeignProc { .. }) => {
                println!("refused")
            }
            Err(e) => panic!("{e}"),
        }
        child.kill().unwrap();
        child.wait().unwrap();
        drop(block);
        return;
    }
    if !bwrap() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        assert!(!stockade_testkit::in_ci(), "CI runs as root");
        return;
    }
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_proc_of_another_pid_namespace_is_never_trusted",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LEG, "pidns")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        (text.contains("refused") || text.contains("bwrap named no child"))
            && !text.contains("listened"),
        "{text}"
    );
}

#[test]
fn a_namespace_other_than_the_one_bwrap_named_is_refused() {
    if !bwrap() {
        return;
    }
    let (mut child, mut status, block) = blocked_bwrap("echo ran");
    let doc = first_document(&mut status);
    let named = doc.net_namespace.unwrap();
    let wrong = BwrapChild {
        net_namespace: Some(named + 1),
        ..doc
    };
    match listen_in(wrong, PORT) {
        Err(ListenError::Mismatch { pid, found, .. }) => {
            assert_eq!((pid, found), (doc.pid, named));
        }
        other => panic!("{other:?}"),
    }
    let unnamed = BwrapChild {
        net_namespace: None,
        ..doc
    };
    assert!(matches!(
        listen_in(unnamed, PORT),
        Err(ListenError::Unnamed { .. })
    ));
    // A pid that is no process: nothing to open.
    let gone = BwrapChild {
        pid: i32::MAX,
        ..doc
    };
    assert!(matches!(
        listen_in(gone, PORT),
        Err(ListenError::Gone { .. })
    ));
    // As the spawner does on a refusal: bwrap's child, which sets no
    // parent-death signal before its block descriptor, is killed where it
    // was found (bwrap too), and the block pipe closes only after. Killing
    // bwrap alone would let the child read an end of file and run the
    // command; this test caught that.
    let found = NamedChild::find(doc).unwrap();
    let started = Instant::now();
    found.kill().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    drop(block);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!out.contains("ran"), "{out}");
}
