//! `--ask-fd`: a call the supervisor refuses only because its place lies
//! outside every writable root is asked about on the approval channel
//! while the calling thread waits, and performed on allow, against the real
//! kernel. A scripted answerer (a thread of this test) holds the other end
//! of the socket pair and records every question.
//!
//! - allow this path: the command finishes in one run (a counter in the
//!   root written once) and the outside file is written; a second name in
//!   that directory is a new question.
//! - refuse, and no answer in time: today's errno (EACCES), as without
//!   the channel.
//! - allow the directory: a second file there and beneath it, never a
//!   sibling directory.
//! - protected and deny-read places are never asked about.
//! - 1000 distinct outside paths: at most `--ask-max` questions (default
//!   8), and the command finishes.
//! - a symlink swapped between the question and the answer: the grant is
//!   the directory held when asked, not the name looked up again.
//!
//! Every scenario runs as ourselves and, when we are root (as in CI), as
//! `nobody`. When `CI=true` a missing python3 fails.
#![cfg(target_os = "linux")]
// A failed unwrap is a failed test; the workspace-wide deny is for the binaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use stockade_testkit::users::{Who, WsAndOutside, users};

const BIN: &str = env!("CARGO_BIN_EXE_landlock-run");
const PY: &str = "/usr/bin/python3";

/// One launcher with an inheritable channel at a time: a child another
/// test spawns meanwhile would inherit it too.
static SPAWN: Mutex<()> = Mutex::new(());

fn python() -> bool {
    stockade_testkit::require(PY, Path::new(PY).is_file())
}

/// Each argument `OP:PATH` (w: create or truncate and write, a: append,
/// m: mkdir), performed in order; one line per argument: `PATH ok` or
/// `PATH ERRNO-NAME`. `flood:DIR:N` creates DIR/f0..f{N-1} and prints the
/// count refused; `par:DIR:N` creates DIR/p0..p{N-1} from N threads at
/// once and prints the count created.
const OPS: &str = r#"
import errno, os, sys
for arg in sys.argv[1:]:
    op, _, path = arg.partition(":")
    if op == "stall":
        import threading
        out, _, ws = path.partition(":")
        def ask(i):
            try:
                os.close(os.open(f"{out}/q{i}", os.O_WRONLY | os.O_CREAT, 0o644))
            except OSError:
                pass
        ts = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for t in ts:
            t.start()
        for i in range(20):
            os.close(os.open(f"{ws}/i{i}", os.O_WRONLY | os.O_CREAT, 0o644))
        os.close(os.open(f"{ws}/done", os.O_WRONLY | os.O_CREAT, 0o644))
        for t in ts:
            t.join()
        print("stall ok")
        continue
    if op == "par":
        import threading
        d, _, n = path.rpartition(":")
        n = int(n)
        go = threading.Barrier(n)
        done = []
        def make(i):
            go.wait()
            try:
                os.close(os.open(f"{d}/p{i}", os.O_WRONLY | os.O_CREAT, 0o644))
                done.append(i)
            except OSError:
                pass
        ts = [threading.Thread(target=make, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(f"par {len(done)}")
        continue
    if op == "flood":
        d, _, n = path.rpartition(":")
        refused = 0
        for i in range(int(n)):
            try:
                os.close(os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT, 0o644))
            except OSError:
                refused += 1
        print(f"flood {refused}")
        continue
    try:
        if op == "w":
            with open(path, "w") as f:
                f.write("written\n")
        elif op == "a":
            with open(path, "a") as f:
                f.write("1\n")
        elif op == "m":
            os.mkdir(path)
        print(f"{path} ok")
    except OSError as e:
        print(f"{path} {errno.errorcode[e.errno]}")
"#;

/// `BASE/llr-ask-*/{ws,outside}`, filled, handed to `who`.
fn scratch(who: Who, fill: impl FnOnce(&Path, &Path)) -> WsAndOutside {
    WsAndOutside::new(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "llr-ask-",
        who,
        fill,
    )
}

/// What the answerer says to a question: `None` never answers it.
type Script = Box<dyn FnMut(u8, &[u8]) -> Option<u8> + Send>;

const PATH: u8 = 1;
const DIRECTORY: u8 = 2;
const REFUSE: u8 = 0;

/// Reads questions until the channel ends; answers each by `script`.
fn answerer(mut s: UnixStream, mut script: Script) -> thread::JoinHandle<Vec<(u8, Vec<u8>)>> {
    thread::spawn(move || {
        let mut asked = Vec::new();
        loop {
            let mut head = [0u8; 13];
            if s.read_exact(&mut head).is_err() {
                return asked;
            }
            let id = &head[..8];
            let kind = head[8];
            let len = u32::from_le_bytes(head[9..13].try_into().unwrap()) as usize;
            let mut path = vec![0u8; len];
            s.read_exact(&mut path).unwrap();
            let answer = script(kind, &path);
            asked.push((kind, path));
            if let Some(a) = answer {
                let mut reply = id.to_vec();
                reply.push(a);
                if s.write_all(&reply).is_err() {
                    return asked;
                }
            }
        }
    })
}

struct Run {
    out: Output,
    asked: Vec<(u8, Vec<u8>)>,
}

impl Run {
    fn results(&self) -> BTreeMap<String, String> {
        assert!(
            self.out.status.success(),
            "{:?}\nstdout: {}\nstderr: {}",
            self.out.status,
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        );
        // A path named again is `PATH#2`, `PATH#3`, ...
        let mut out = BTreeMap::new();
        for l in String::from_utf8_lossy(&self.out.stdout).lines() {
            let (k, v) = l.rsplit_once(' ').unwrap();
            let mut key = k.to_owned();
            let mut n = 1;
            while out.contains_key(&key) {
                n += 1;
                key = format!("{k}#{n}");
            }
            out.insert(key, v.to_owned());
        }
        out
    }

    fn asked_paths(&self) -> Vec<String> {
        self.asked
            .iter()
            .map(|(_, p)| String::from_utf8(p.clone()).unwrap())
            .collect()
    }
}

/// `landlock-run --ro / --rw /dev/null --rw WS [--ask-fd N] OPTS -- python3
/// -c OPS ARGS`, as `who`, in WS; `script` answers (no channel when `None`).
fn run(who: Who, ws: &Path, opts: &[&str], script: Option<Script>, args: &[String]) -> Run {
    let mut c = who.command(BIN);
    c.env_remove("TMPDIR")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["--ro", "/", "--rw", "/dev/null", "--rw"])
        .arg(ws)
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut ours = None;
    let guard = SPAWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let theirs = script.map(|script| {
        let (mine, theirs) = UnixStream::pair().unwrap();
        // Inherited by the launcher (it takes it close-on-exec at once).
        rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty()).unwrap();
        c.arg("--ask-fd").arg(theirs.as_raw_fd().to_string());
        ours = Some((mine.try_clone().unwrap(), answerer(mine, script)));
        theirs
    });
    c.args(opts).arg("--").args([PY, "-c", OPS]).args(args);
    let child = c.spawn().unwrap();
    drop(theirs);
    drop(guard);
    let out = wait(child, &c);
    let asked = match ours {
        Some((end, thread)) => {
            let _ = end.shutdown(Shutdown::Both);
            thread.join().unwrap()
        }
        None => Vec::new(),
    };
    Run { out, asked }
}

fn wait(mut child: std::process::Child, what: &Command) -> Output {
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).map(|_| v)
        })
    };
    let so = drain(Box::new(child.stdout.take().unwrap()));
    let se = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out: {what:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: so.join().unwrap().unwrap(),
        stderr: se.join().unwrap().unwrap(),
    }
}

fn p(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

fn op(op: &str, path: &Path) -> String {
    format!("{op}:{}", p(path))
}

fn always(answer: u8) -> Script {
    Box::new(move |_, _| Some(answer))
}

/// Allow this path: the counter in the root is written once (no rerun),
/// the outside file is written, the question named its exact path as an
/// open; a second name in the same directory is a new question (refused
/// here: EACCES).
#[test]
fn allow_path_finishes_in_one_run() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, _| {});
        let (counter, a, b) = (s.ws.join("counter"), s.out.join("a"), s.out.join("b"));
        let script: Script =
            Box::new(move |_, path| Some(if path.ends_with(b"/a") { PATH } else { REFUSE }));
        let r = run(
            who,
            &s.ws,
            &[],
            Some(script),
            &[op("a", &counter), op("w", &a), op("w", &a), op("w", &b)],
        );
        let res = r.results();
        assert_eq!(res[&p(&counter)], "ok", "{who:?}");
        assert_eq!(res[&p(&a)], "ok", "{who:?}");
        assert_eq!(res[&format!("{}#2", p(&a))], "ok", "{who:?}");
        assert_eq!(res[&p(&b)], "EACCES", "{who:?}");
        assert_eq!(fs::read_to_string(&counter).unwrap(), "1\n", "{who:?}");
        assert_eq!(fs::read_to_string(&a).unwrap(), "written\n", "{who:?}");
        assert!(!b.exists());
        // Written twice, asked once; the open kind (1).
        assert_eq!(r.asked_paths(), [p(&a), p(&b)], "{who:?}");
        assert!(r.asked.iter().all(|(k, _)| *k == 1));
    }
}

/// Refused, and not answered in time: the same errno and outcome as a run
/// without the channel.
#[test]
fn refusal_and_timeout_are_todays_refusal() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, _| {});
        let (a, d) = (s.out.join("a"), s.out.join("d"));
        let args = [op("w", &a), op("m", &d)];
        let today = run(who, &s.ws, &[], None, &args).results();
        assert_eq!(today[&p(&a)], "EACCES");
        assert_eq!(today[&p(&d)], "EACCES");
        let refused = run(who, &s.ws, &[], Some(always(REFUSE)), &args);
        assert_eq!(refused.results(), today, "{who:?}");
        assert_eq!(refused.asked.len(), 2);
        let silent: Script = Box::new(|_, _| None);
        let timed_out = run(who, &s.ws, &["--ask-timeout", "1"], Some(silent), &args);
        assert_eq!(timed_out.results(), today, "{who:?}");
        // A timeout refuses that question, not the channel.
        assert_eq!(timed_out.asked_paths(), [p(&a), p(&d)], "{who:?}");
        assert!(!a.exists() && !d.exists());
    }
}

/// Allow the directory: another file in it, a directory made in it and a
/// file beneath that are not asked about; a sibling directory is.
#[test]
fn allow_directory_covers_beneath_and_not_a_sibling() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, out| {
            fs::create_dir(out.join("d")).unwrap();
            fs::create_dir(out.join("e")).unwrap();
        });
        let (d, e) = (s.out.join("d"), s.out.join("e"));
        let script: Script = Box::new(|_, path| {
            Some(if path.ends_with(b"/d/a") {
                DIRECTORY
            } else {
                REFUSE
            })
        });
        let r = run(
            who,
            &s.ws,
            &[],
            Some(script),
            &[
                op("w", &d.join("a")),
                op("w", &d.join("b")),
                op("m", &d.join("sub")),
                op("w", &d.join("sub/c")),
                op("w", &e.join("x")),
            ],
        );
        let res = r.results();
        for ok in ["a", "b", "sub", "sub/c"] {
            assert_eq!(res[&p(&d.join(ok))], "ok", "{who:?} {ok}");
        }
        assert_eq!(res[&p(&e.join("x"))], "EACCES", "{who:?}");
        assert_eq!(r.asked_paths(), [p(&d.join("a")), p(&e.join("x"))]);
        assert!(d.join("sub/c").is_file() && !e.join("x").exists());
    }
}

/// A directory grant never lets the command plant what the user's tools
/// run later: no dot-name is made, written or reached through beneath it
/// (a new `.envrc`, a new `.git`, an existing repository's hooks and
/// config), and those refusals ask nothing; ordinary names beneath it are
/// written as the grant says.
#[test]
fn a_directory_grant_reaches_no_dot_name_beneath_it() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, out| {
            fs::create_dir_all(out.join("d/repo/.git/hooks")).unwrap();
            fs::write(out.join("d/repo/.git/config"), "").unwrap();
        });
        let d = s.out.join("d");
        let script: Script = Box::new(|_, path| {
            Some(if path.ends_with(b"/d/a") {
                DIRECTORY
            } else {
                REFUSE
            })
        });
        let refused = [
            d.join(".envrc"),
            d.join("sub/.git"),
            d.join("repo/.git/config"),
            d.join("repo/.git/hooks/post-commit"),
            d.join("repo/.git/new"),
        ];
        let r = run(
            who,
            &s.ws,
            &[],
            Some(script),
            &[
                op("w", &d.join("a")),
                op("w", &refused[0]),
                op("m", &d.join("sub")),
                op("m", &refused[1]),
                op("a", &refused[2]),
                op("w", &refused[3]),
                op("m", &refused[4]),
                op("w", &d.join("repo/src.txt")),
            ],
        );
        let res = r.results();
        for ok in [d.join("a"), d.join("sub"), d.join("repo/src.txt")] {
            assert_eq!(res[&p(&ok)], "ok", "{who:?} {}", ok.display());
        }
        for no in &refused {
            assert_eq!(res[&p(no)], "EACCES", "{who:?} {}", no.display());
        }
        assert_eq!(r.asked_paths(), [p(&d.join("a"))], "{who:?}");
        assert!(!d.join(".envrc").exists() && !d.join("sub/.git").exists());
        assert!(!d.join("repo/.git/hooks/post-commit").exists());
        assert_eq!(fs::read(d.join("repo/.git/config")).unwrap(), b"");
    }
}

/// A protected path in the root and a deny-read secret outside it are
/// refused as today, never asked about, whatever the answerer would say.
#[test]
fn protected_and_deny_read_are_never_asked() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |ws, out| {
            fs::create_dir_all(ws.join(".git/hooks")).unwrap();
            fs::write(ws.join(".git/config"), "").unwrap();
            fs::create_dir(out.join("secret")).unwrap();
            fs::write(out.join("secret/key"), "k").unwrap();
            fs::write(out.join("token"), "t").unwrap();
        });
        let config = s.ws.join(".git/config");
        let hook = s.ws.join(".git/hooks/pre-commit");
        let (secret, token) = (s.out.join("secret"), s.out.join("token"));
        let opts = [
            "--protect",
            &p(&config),
            "--protect",
            &p(&s.ws.join(".git/hooks")),
            "--deny-read",
            &p(&secret),
            "--deny-read",
            &p(&token),
        ];
        let r = run(
            who,
            &s.ws,
            &opts,
            Some(always(DIRECTORY)),
            &[
                op("w", &config),
                op("w", &hook),
                op("w", &secret.join("key")),
                op("w", &secret.join("new")),
                op("w", &token),
            ],
        );
        let res = r.results();
        for refused in [
            &config,
            &hook,
            &secret.join("key"),
            &secret.join("new"),
            &token,
        ] {
            assert_eq!(res[&p(refused)], "EACCES", "{who:?} {refused:?}");
        }
        assert!(r.asked.is_empty(), "{who:?}: {:?}", r.asked_paths());
        assert_eq!(fs::read_to_string(secret.join("key")).unwrap(), "k");
    }
}

/// A device node (`/dev/tty` without a terminal, as every shell probes it
/// at start, and `/dev/zero`) and a kernel interface (`/proc/self/comm`)
/// are refused as without a channel, never offered, whatever the answerer
/// would say; a file outside is still asked about in the same run.
#[test]
fn devices_and_kernel_interfaces_are_never_asked() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, _| {});
        let file = s.out.join("f");
        let kernel = ["/dev/tty", "/dev/zero", "/proc/self/comm"];
        let mut args: Vec<String> = kernel.iter().map(|k| format!("w:{k}")).collect();
        args.push(op("w", &file));
        let r = run(who, &s.ws, &[], Some(always(DIRECTORY)), &args);
        let res = r.results();
        for k in kernel {
            assert_ne!(res[k], "ok", "{who:?} {k}");
        }
        assert_eq!(res[&p(&file)], "ok", "{who:?}");
        assert_eq!(r.asked_paths(), [p(&file)], "{who:?}");
    }
}

/// Eight threads create eight files in one outside directory at once
/// while the first question waits (answered "allow the directory" only
/// after a pause): one question, every create done.
#[test]
fn questions_waiting_behind_a_directory_grant_are_not_asked() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, _| {});
        let script: Script = Box::new(|_, _| {
            thread::sleep(Duration::from_millis(300));
            Some(DIRECTORY)
        });
        let par = format!("par:{}:8", p(&s.out));
        let r = run(who, &s.ws, &[], Some(script), &[par]);
        assert_eq!(r.results()["par"], "8", "{who:?}");
        assert_eq!(r.asked.len(), 1, "{who:?}: {:?}", r.asked_paths());
        assert_eq!(fs::read_dir(&s.out).unwrap().count(), 8);
    }
}

/// While questions wait (six threads write outside, each a question, the
/// first not answered until the workspace shows `done`), the command's
/// other calls are served: a seventh thread creates 21 files in the root,
/// `done` last. The answerer waits for it at most 20 s and the test fails
/// if it never came.
#[test]
fn calls_go_on_while_questions_wait() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, _| {});
        let done = s.ws.join("done");
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, marker) = (seen.clone(), done.clone());
        let mut first = true;
        let script: Script = Box::new(move |_, _| {
            if std::mem::take(&mut first) {
                let deadline = Instant::now() + Duration::from_secs(20);
                while !marker.exists() && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(10));
                }
                flag.store(marker.exists(), std::sync::atomic::Ordering::SeqCst);
            }
            Some(REFUSE)
        });
        let stall = format!("stall:{}:{}", p(&s.out), p(&s.ws));
        let r = run(who, &s.ws, &[], Some(script), &[stall]);
        assert_eq!(r.results()["stall"], "ok", "{who:?}");
        assert!(seen.load(std::sync::atomic::Ordering::SeqCst), "{who:?}");
        assert!(done.exists());
    }
}

/// 1000 distinct outside paths: 8 questions (the default bound), every
/// create refused, and the command finishes; `--ask-max 3` asks 3.
#[test]
fn a_flood_asks_at_most_the_bound() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, _| {});
        let flood = format!("flood:{}:1000", p(&s.out));
        let r = run(
            who,
            &s.ws,
            &[],
            Some(always(REFUSE)),
            std::slice::from_ref(&flood),
        );
        assert_eq!(r.results()["flood"], "1000", "{who:?}");
        assert_eq!(r.asked.len(), 8, "{who:?}");
        let r = run(
            who,
            &s.ws,
            &["--ask-max", "3"],
            Some(always(REFUSE)),
            &[flood],
        );
        assert_eq!(r.results()["flood"], "1000", "{who:?}");
        assert_eq!(r.asked.len(), 3, "{who:?}");
        assert_eq!(fs::read_dir(&s.out).unwrap().count(), 0);
    }
}

/// The directory is swapped for a symlink to another one between the
/// question and the answer "allow the directory": the call, performed
/// again, resolves the name to the other directory, which is not granted
/// (refused, unasked); the grant stays with the directory held when asked,
/// under its new name.
#[test]
fn a_swap_before_the_answer_does_not_redirect_the_grant() {
    if !python() {
        return;
    }
    for who in users() {
        let s = scratch(who, |_, out| {
            fs::create_dir(out.join("x")).unwrap();
            fs::create_dir(out.join("other")).unwrap();
        });
        let (x, moved, other) = (s.out.join("x"), s.out.join("x-held"), s.out.join("other"));
        let (x2, moved2, other2) = (x.clone(), moved.clone(), other.clone());
        let mut first = true;
        let script: Script = Box::new(move |_, _| {
            if !std::mem::take(&mut first) {
                return Some(REFUSE);
            }
            fs::rename(&x2, &moved2).unwrap();
            std::os::unix::fs::symlink(&other2, &x2).unwrap();
            Some(DIRECTORY)
        });
        let r = run(
            who,
            &s.ws,
            &[],
            Some(script),
            &[
                op("w", &x.join("f")),
                op("w", &moved.join("g")),
                op("w", &other.join("h")),
            ],
        );
        let res = r.results();
        assert_eq!(res[&p(&x.join("f"))], "EACCES", "{who:?}");
        assert_eq!(res[&p(&moved.join("g"))], "ok", "{who:?}");
        assert_eq!(res[&p(&other.join("h"))], "EACCES", "{who:?}");
        assert!(!other.join("f").exists() && !moved.join("f").exists());
        assert_eq!(r.asked_paths(), [p(&x.join("f")), p(&other.join("h"))]);
    }
}

/// The channel needs the supervisor, and its bounds need the channel.
#[test]
fn ask_options_are_checked() {
    let ws = tempfile::tempdir().unwrap();
    let (_mine, theirs) = UnixStream::pair().unwrap();
    for (opts, why) in [
        (
            vec![
                "--no-supervise".to_owned(),
                "--ask-fd".into(),
                theirs.as_raw_fd().to_string(),
            ],
            "--ask-fd needs the supervisor",
        ),
        (
            vec!["--ask-max".to_owned(), "3".into()],
            "--ask-timeout and --ask-max need --ask-fd",
        ),
        (
            vec!["--ask-timeout".to_owned(), "0".into()],
            "--ask-timeout needs a number from 1",
        ),
    ] {
        let _g = SPAWN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty()).unwrap();
        let out = Command::new(BIN)
            .args(["--rw"])
            .arg(ws.path())
            .args(&opts)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::CLOEXEC).unwrap();
        assert_eq!(out.status.code(), Some(125), "{opts:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{opts:?}: {err}");
    }
}
