//! `stockade exec` at a terminal: the command runs on a pseudo-terminal of
//! its own (its stdin, stdout, stderr and controlling terminal), keystrokes
//! and the window size go in, denials are still reported, and the caller's
//! terminal comes back as it was on every way out. Without a terminal,
//! stdout and stderr that are one pipe keep their order.
//!
//! CI has no controlling terminal, so each test makes its own: a pty
//! allocated here, whose slave is `stockade`'s stdin, stdout, stderr and
//! (through util-linux `setsid --ctty`) controlling terminal, with
//! `stockade` leading its session in the foreground as in a shell. Every
//! leg runs on both backends and unconfined, as root and as `nobody`.
//! When `CI=true` a missing bwrap or python3 is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::pty::OpenptFlags;
use rustix::termios::{LocalModes, Termios, Winsize, tcgetattr, tcsetwinsize};
use stockade_testkit::users::{Who, users};

const STOCKADE: &str = env!("CARGO_BIN_EXE_stockade");
/// Bounds every wait; a healthy run takes well under a second.
const LIMIT: Duration = Duration::from_secs(60);

/// How a leg runs: a backend, or unconfined.
#[derive(Clone, Copy, Debug)]
enum Leg {
    Confined(&'static str),
    /// A backend under `--network deny`, where bwrap without a terminal
    /// runs the command itself: with one, its closer must still be there
    /// to make the terminal the command's controlling one.
    Denied(&'static str),
    Unconfined,
}

fn legs() -> Vec<Leg> {
    let mut legs: Vec<Leg> = common::backends().into_iter().map(Leg::Confined).collect();
    legs.push(Leg::Unconfined);
    legs
}

/// The system python3 (not a per-user shim that `nobody` could not reach).
fn python() -> bool {
    stockade_testkit::require("/usr/bin/python3", Path::new("/usr/bin/python3").is_file())
}

/// A workspace and a home for `who`, outside every writable root.
struct Place {
    _base: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    outside: PathBuf,
}

fn place(who: Who) -> Place {
    let base = common::owned_dir(&common::base(), "term-", who);
    let (ws, home, outside) = (
        base.path().join("ws"),
        base.path().join("home"),
        base.path().join("outside"),
    );
    for d in [&ws, &home, &outside] {
        fs::create_dir(d).unwrap();
    }
    who.own(base.path());
    Place {
        ws: fs::canonicalize(&ws).unwrap(),
        home,
        outside: fs::canonicalize(&outside).unwrap(),
        _base: base,
    }
}

/// An argument that stands for the outer terminal's slave (by name).
const OUTER: &str = "%OUTER%";

fn exec_args(leg: Leg, p: &Place, argv: &[&str], outer: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["exec".into()];
    match leg {
        Leg::Confined(b) | Leg::Denied(b) => {
            a.extend(["--backend", b, "--mode", "workspace-write", "--workspace"].map(Into::into));
            a.push(p.ws.clone().into());
            if let Leg::Denied(_) = leg {
                a.extend(["--network", "deny"].map(Into::into));
            }
        }
        Leg::Unconfined => a.extend(["--mode", "danger-full-access"].map(Into::into)),
    }
    a.push("--".into());
    a.extend(argv.iter().map(|&x| match x {
        OUTER => outer.as_os_str().to_owned(),
        x => x.into(),
    }));
    a
}

/// The outer terminal: `stockade exec` runs in the foreground of a pty
/// whose master this test holds.
struct Term {
    master: Arc<OwnedFd>,
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    /// The outer slave's device number and name (the caller's terminal).
    rdev: u64,
    name: PathBuf,
    /// Its settings before stockade started.
    before: Termios,
    what: String,
}

impl Term {
    fn start(who: Who, leg: Leg, p: &Place, size: (u16, u16), argv: &[&str]) -> Term {
        let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        rustix::pty::grantpt(&master).unwrap();
        rustix::pty::unlockpt(&master).unwrap();
        let name = PathBuf::from(OsString::from_vec(
            rustix::pty::ptsname(&master, Vec::new())
                .unwrap()
                .into_bytes(),
        ));
        let slave = rustix::pty::ioctl_tiocgptpeer(
            &master,
            OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
        )
        .unwrap();
        tcsetwinsize(
            &master,
            Winsize {
                ws_row: size.0,
                ws_col: size.1,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
        )
        .unwrap();
        let rdev = rustix::fs::fstat(&slave).unwrap().st_rdev;
        let before = tcgetattr(&master).unwrap();
        let mut c = common::as_user(who, OsStr::new("setsid"), &p.home, None);
        c.args(["--ctty", "--", STOCKADE])
            .args(exec_args(leg, p, argv, &name))
            .current_dir(&p.ws)
            .env("TERM", "xterm")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = c.spawn().expect("setsid runs");
        // Our slave copies close with `c`: the master reads EIO (the end)
        // once stockade and everything it started have closed theirs.
        drop(c);
        let master = Arc::new(master);
        let out = Arc::new(Mutex::new(Vec::new()));
        let (m, o) = (master.clone(), out.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = rustix::io::read(m.as_fd(), &mut buf) {
                if n == 0 {
                    break;
                }
                o.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Term {
            master,
            child,
            out,
            rdev,
            name,
            before,
            what: format!("{leg:?} as {who:?}: {argv:?}"),
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits (bounded) until the output holds `needle` `times` times.
    fn wait_for_n(&self, needle: &str, times: usize) {
        let start = Instant::now();
        while self.text().matches(needle).count() < times {
            assert!(
                start.elapsed() < LIMIT,
                "{}: no {needle:?} (x{times}) in {:?}",
                self.what,
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_for(&self, needle: &str) {
        self.wait_for_n(needle, 1);
    }

    fn send(&self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = rustix::io::write(self.master.as_fd(), rest).unwrap();
            rest = &rest[n..];
        }
    }

    fn settings(&self) -> Termios {
        tcgetattr(self.master.as_fd()).unwrap()
    }

    /// The caller's terminal is raw while the command runs.
    fn assert_raw(&self) {
        let modes = self.settings().local_modes;
        assert!(
            !modes.intersects(LocalModes::ECHO | LocalModes::ICANON | LocalModes::ISIG),
            "{}: the caller's terminal is not raw during the run: {modes:?}",
            self.what
        );
    }

    fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }

    /// Waits (bounded) for stockade to exit; its status, with the caller's
    /// terminal checked to be as it was before.
    fn finish(mut self) -> (ExitStatus, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > LIMIT {
                let _ = self.child.kill();
                panic!("{}: stockade did not exit: {:?}", self.what, self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let after = self.settings();
        assert_eq!(
            format!("{:?}", after),
            format!("{:?}", self.before),
            "{}: the caller's terminal settings were not restored; output {:?}",
            self.what,
            self.text()
        );
        // Whatever was still on its way to the master.
        let start = Instant::now();
        while Arc::strong_count(&self.master) > 1 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        (status, self.text())
    }
}

/// The controlling-terminal number /proc/PID/stat gives for `rdev`.
fn tty_nr(rdev: u64) -> u64 {
    let (major, minor) = (
        rustix::fs::major(rdev) as u64,
        rustix::fs::minor(rdev) as u64,
    );
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

fn line_value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim_end_matches('\r').split_once(key).map(|(_, v)| v))
        .unwrap_or_else(|| panic!("no {key:?} line in {text:?}"))
        .trim()
}

#[test]
fn the_command_gets_a_terminal_of_its_own() {
    if !python() {
        return;
    }
    // The caller's terminal, by name: TIOCSTI into it must fail, whatever
    // the command may open.
    let script = r#"
        tty
        [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo ALL-ARE-TTYS
        echo "CTTY=$(cut -d' ' -f7 /proc/self/stat)"
        echo "RDEV=$(stat -L -c '%t:%T' /proc/self/fd/0)"
        echo opened-dev-tty >/dev/tty
        exec /usr/bin/python3 -c '
import fcntl, os, sys, termios
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
    fcntl.ioctl(fd, termios.TIOCSTI, b"Z")
    print("OUTER-STI=done", flush=True)
except OSError as e:
    print("OUTER-STI=refused", e.errno, flush=True)
try:
    for c in b"own\n":
        fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
    print("OWN-STI=" + input(), flush=True)
except OSError as e:
    print("OWN-STI=refused", e.errno, flush=True)
' "$1"
    "#;
    let denied = common::backends().into_iter().map(Leg::Denied);
    for who in users() {
        for leg in legs().into_iter().chain(denied.clone()) {
            let p = place(who);
            let t = Term::start(
                who,
                leg,
                &p,
                (24, 80),
                &["/bin/sh", "-c", script, "sh", OUTER],
            );
            let outer_rdev = t.rdev;
            let outer_name = t.name.display().to_string();
            let what = t.what.clone();
            let (status, text) = t.finish();
            assert!(status.success(), "{what}: {status:?} {text:?}");
            assert!(text.contains("ALL-ARE-TTYS"), "{what}: {text:?}");
            let tty = text
                .lines()
                .next()
                .unwrap_or_default()
                .trim_end_matches('\r');
            match leg {
                // bwrap's /dev is its own (a fresh devpts): the command's
                // terminal is reachable there only as /dev/console, which
                // bwrap binds to the terminal it was started on, the one
                // stockade allocated.
                Leg::Confined("bwrap") | Leg::Denied("bwrap") => {
                    assert_eq!(tty, "/dev/console", "{what}: {text:?}")
                }
                _ => assert!(
                    tty.starts_with("/dev/pts/") && tty != outer_name,
                    "{what}: {text:?}"
                ),
            }
            let ctty: u64 = line_value(&text, "CTTY=").parse().unwrap();
            let (major, minor) = line_value(&text, "RDEV=").split_once(':').unwrap();
            let rdev = rustix::fs::makedev(
                u32::from_str_radix(major, 16).unwrap(),
                u32::from_str_radix(minor, 16).unwrap(),
            );
            assert_eq!(
                ctty,
                tty_nr(rdev),
                "{what}: stdin is its controlling terminal: {text:?}"
            );
            assert_ne!(rdev, outer_rdev, "{what}: the caller's terminal: {text:?}");
            assert!(text.contains("opened-dev-tty"), "{what}: {text:?}");
            // Unconfined root keeps CAP_SYS_ADMIN, which TIOCSTI honours
            // on any terminal: that is what danger-full-access means.
            if matches!(leg, Leg::Confined(_) | Leg::Denied(_)) || who == Who::Nobody {
                let outer_sti = line_value(&text, "OUTER-STI=");
                assert!(outer_sti.starts_with("refused"), "{what}: {text:?}");
            }
            // What is true on this kernel: TIOCSTI into its own terminal is
            // the command typing to itself (refused where the kernel has
            // dev.tty.legacy_tiocsti=0); it never reaches the caller.
            let own = line_value(&text, "OWN-STI=");
            // (Unconfined root's Z went to the caller, who typed it on to
            // the command: it may land anywhere in the line.)
            assert!(
                own.replace('Z', "") == "own" || own.starts_with("refused"),
                "{what}: {text:?}"
            );
        }
    }
}

#[test]
fn bash_gets_a_prompt_and_job_control() {
    for who in users() {
        for leg in legs() {
            let p = place(who);
            let t = Term::start(
                who,
                leg,
                &p,
                (24, 80),
                &[
                    "/usr/bin/env",
                    "PS1=stk$ ",
                    "bash",
                    "--norc",
                    "--noprofile",
                    "-i",
                ],
            );
            t.wait_for("stk$ ");
            // Typed, so echoed: the quotes keep the echo from matching.
            t.send(b"case $- in *m*) echo JOB''CONTROL-ON;; esac\r");
            t.wait_for("JOBCONTROL-ON");
            t.send(b"exit 7\r");
            let what = t.what.clone();
            let (status, text) = t.finish();
            assert_eq!(status.code(), Some(7), "{what}: {text:?}");
            assert!(!text.contains("no job control"), "{what}: {text:?}");
            assert!(!text.contains("cannot set terminal"), "{what}: {text:?}");
        }
    }
}

#[test]
fn ctrl_c_interrupts_the_command_and_the_run_goes_on() {
    if !python() {
        return;
    }
    let repl = r#"
while True:
    try:
        line = input("py> ")
    except KeyboardInterrupt:
        print("KEYBOARD-INTERRUPT", flush=True)
        continue
    if line == "quit":
        break
print("REPL-DONE", flush=True)
"#;
    for who in users() {
        for leg in legs() {
            let p = place(who);
            let t = Term::start(who, leg, &p, (24, 80), &["/usr/bin/python3", "-c", repl]);
            t.wait_for("py> ");
            t.assert_raw();
            t.send(b"\x03");
            t.wait_for("KEYBOARD-INTERRUPT");
            t.wait_for_n("py> ", 2);
            t.send(b"\x03");
            t.wait_for_n("KEYBOARD-INTERRUPT", 2);
            t.wait_for_n("py> ", 3);
            t.send(b"quit\r");
            t.wait_for("REPL-DONE");
            let what = t.what.clone();
            let (status, text) = t.finish();
            assert!(status.success(), "{what}: {status:?} {text:?}");
        }
    }
}

#[test]
fn the_callers_terminal_comes_back_on_every_way_out() {
    use rustix::process::Signal;
    enum End {
        Exit,
        CommandKilled,
        NotFound,
        Stockade(Signal),
    }
    let ways = [
        (End::Exit, 0),
        (End::CommandKilled, 128 + 9),
        (End::NotFound, 127),
        (End::Stockade(Signal::TERM), 128 + 15),
        (End::Stockade(Signal::HUP), 128 + 1),
        (End::Stockade(Signal::QUIT), 128 + 3),
    ];
    for who in users() {
        for leg in legs() {
            for (end, code) in &ways {
                let p = place(who);
                let argv: &[&str] = match end {
                    End::Exit => &["/bin/sh", "-c", "echo READY; read x"],
                    End::CommandKilled => &["/bin/sh", "-c", "echo READY; read x; kill -9 $$"],
                    End::NotFound => &["/no/such/command"],
                    End::Stockade(_) => &["/bin/sh", "-c", "echo READY; exec sleep 1000"],
                };
                let t = Term::start(who, leg, &p, (24, 80), argv);
                match end {
                    End::Exit | End::CommandKilled => {
                        t.wait_for("READY");
                        t.assert_raw();
                        t.send(b"\r");
                    }
                    End::NotFound => {}
                    End::Stockade(sig) => {
                        t.wait_for("READY");
                        t.assert_raw();
                        t.signal(*sig);
                    }
                }
                let what = t.what.clone();
                let (status, text) = t.finish();
                assert_eq!(status.code(), Some(*code), "{what}: {text:?}");
                if let End::NotFound = end {
                    // As a shell says it, whoever started the command.
                    assert!(
                        text.contains("/no/such/command: No such file or directory"),
                        "{what}: {text:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_window_size_is_the_callers_and_follows_a_resize() {
    // /dev/tty: the size of the command's own terminal, not of whatever
    // stdin happens to be.
    let script = "stty size </dev/tty; echo READY; while read x; do stty size </dev/tty; done";
    for who in users() {
        for leg in legs() {
            let p = place(who);
            let t = Term::start(who, leg, &p, (33, 101), &["/bin/sh", "-c", script]);
            t.wait_for("READY");
            assert!(t.text().contains("33 101"), "{}: {:?}", t.what, t.text());
            tcsetwinsize(
                t.master.as_fd(),
                Winsize {
                    ws_row: 44,
                    ws_col: 120,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                },
            )
            .unwrap();
            // The kernel signals the resize to stockade, which copies it;
            // each line asks again until the new size shows (bounded).
            let start = Instant::now();
            while !t.text().contains("44 120") {
                assert!(start.elapsed() < LIMIT, "{}: {:?}", t.what, t.text());
                t.send(b"\r");
                std::thread::sleep(Duration::from_millis(100));
            }
            t.send(b"\x04");
            let what = t.what.clone();
            let (status, text) = t.finish();
            assert!(status.success(), "{what}: {status:?} {text:?}");
        }
    }
}

#[test]
fn a_denial_on_a_terminal_is_still_reported() {
    for who in users() {
        for leg in legs() {
            let Leg::Confined(_) = leg else { continue };
            let p = place(who);
            let target = p.outside.join("f");
            let script = format!(
                "[ -t 2 ] && echo STDERR-IS-A-TTY; echo x > {}",
                target.display()
            );
            let t = Term::start(who, leg, &p, (24, 80), &["/bin/sh", "-c", &script]);
            let what = t.what.clone();
            let (status, text) = t.finish();
            assert_eq!(status.code(), Some(2), "{what}: {text:?}");
            assert!(text.contains("STDERR-IS-A-TTY"), "{what}: {text:?}");
            assert!(
                text.contains(&format!("stockade: denied: {}", target.display())),
                "{what}: {text:?}"
            );
            assert!(!target.exists(), "{what}");
        }
    }
}

#[test]
fn stdout_and_stderr_into_one_pipe_keep_their_order() {
    let script = "i=0; while [ $i -lt 300 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done";
    for who in users() {
        for leg in legs() {
            let p = place(who);
            let (mut rx, tx) = std::io::pipe().unwrap();
            let mut c = common::as_user(who, OsStr::new(STOCKADE), &p.home, None);
            c.args(exec_args(
                leg,
                &p,
                &["/bin/sh", "-c", script],
                Path::new(""),
            ))
            .current_dir(&p.ws)
            .stdout(Stdio::from(tx.try_clone().unwrap()))
            .stderr(Stdio::from(tx));
            let mut child = c.spawn().unwrap();
            drop(c);
            let mut out = String::new();
            std::io::Read::read_to_string(&mut rx, &mut out).unwrap();
            let status = child.wait().unwrap();
            assert!(status.success(), "{leg:?} as {who:?}: {out:?}");
            let want: Vec<String> = (0..300)
                .flat_map(|i| [format!("out{i}"), format!("err{i}")])
                .collect();
            let got: Vec<&str> = out.lines().collect();
            assert_eq!(got, want, "{leg:?} as {who:?}");
        }
    }
}

/// `landlock-run --ctty` takes only a terminal no session holds: given one
/// that is another session's controlling terminal (as the caller's own is),
/// the kernel refuses it and the run fails (125) before anything runs, in
/// both of its modes (Landlock's run mode, and bwrap's closer); stdin that
/// is no terminal fails too.
#[test]
fn the_launcher_never_takes_a_terminal_another_session_holds() {
    let launcher = env!("CARGO_BIN_EXE_landlock-run");
    for who in users() {
        let (_master, slave) = fresh_pty();
        let rdev = rustix::fs::fstat(&slave).unwrap().st_rdev;
        let mut holder = std::process::Command::new("setsid")
            .args(["--ctty", "--", "sleep", "60"])
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stat = format!("/proc/{}/stat", holder.id());
        let start = Instant::now();
        while fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.split(' ').nth(6).and_then(|f| f.parse::<u64>().ok()))
            != Some(tty_nr(rdev))
        {
            assert!(
                start.elapsed() < LIMIT,
                "setsid --ctty never took the terminal"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let marker = tempfile::tempdir_in(common::base()).unwrap();
        who.own(marker.path());
        let ran = marker.path().join("ran");
        let touch = format!("touch {}", ran.display());
        let modes: [&[&str]; 2] = [
            &["--ro", "/", "--ctty", "--", "/bin/sh", "-c", &touch],
            &["--close-fds", "--ctty", "--", "/bin/sh", "-c", &touch],
        ];
        for args in modes {
            let out = who
                .command(launcher)
                .args(args)
                .stdin(Stdio::from(slave.try_clone().unwrap()))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{who:?} {args:?}: {err}");
            assert!(
                err.contains("--ctty: cannot make stdin the controlling terminal"),
                "{who:?} {args:?}: {err}"
            );
            assert!(!ran.exists(), "{who:?} {args:?}: the command ran");
            let out = who
                .command(launcher)
                .args(args)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{who:?} {args:?}: {err}");
            assert!(
                err.contains("--ctty: stdin is not a terminal"),
                "{who:?}: {err}"
            );
            assert!(!ran.exists(), "{who:?} {args:?}: the command ran");
        }
        let _ = holder.kill();
        let _ = holder.wait();
    }
}

/// A new pseudo-terminal that is nobody's controlling terminal: (master,
/// slave).
fn fresh_pty() -> (OwnedFd, OwnedFd) {
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let slave = rustix::pty::ioctl_tiocgptpeer(
        &master,
        OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
    )
    .unwrap();
    (master, slave)
}

/// In a pid namespace whose session and group leaders lie outside it (a
/// container entered with `exec`, as CI is), the kernel reports our session
/// as 0. The launcher must still run, take a fresh terminal with `--ctty`
/// and detach from one without it, in both of its modes.
#[test]
fn the_launcher_runs_where_its_session_leader_is_outside_its_namespace() {
    let launcher = env!("CARGO_BIN_EXE_landlock-run");
    let root = rustix::process::geteuid().is_root();
    for who in users() {
        let marker = tempfile::tempdir_in(common::base()).unwrap();
        who.own(marker.path());
        let ran = marker.path().join("ran");
        let touch = format!("touch {}", ran.display());
        let m = marker.path().to_str().unwrap();
        let modes: [&[&str]; 4] = [
            &[
                "--ro", "/", "--rw", m, "--ctty", "--", "/bin/sh", "-c", &touch,
            ],
            &["--close-fds", "--ctty", "--", "/bin/sh", "-c", &touch],
            &["--ro", "/", "--rw", m, "--", "/bin/sh", "-c", &touch],
            &["--close-fds", "--", "/bin/sh", "-c", &touch],
        ];
        for args in modes {
            let (master, slave) = fresh_pty();
            let name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
            who.own(Path::new(OsStr::from_bytes(name.as_bytes())));
            let mut unshare = std::process::Command::new("unshare");
            if !root {
                unshare.arg("--user").arg("--map-root-user");
            }
            // Its own /proc, as a container has (the supervisor refuses
            // another namespace's: landlock_supervisor.rs).
            unshare.args(["--pid", "--fork", "--mount-proc", "--"]);
            if who == Who::Nobody {
                unshare.args([
                    "setpriv",
                    &format!("--reuid={}", stockade_testkit::users::NOBODY),
                    &format!("--regid={}", stockade_testkit::users::NOBODY),
                    "--clear-groups",
                    "--",
                ]);
            }
            let out = unshare
                .arg(launcher)
                .args(args)
                .stdin(Stdio::from(slave))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{who:?} {args:?}: {err}");
            assert!(ran.exists(), "{who:?} {args:?}: the command never ran");
            fs::remove_file(&ran).unwrap();
            drop(master);
        }
    }
}
