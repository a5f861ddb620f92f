//! One writer per session across processes: the test binary re-executes
//! itself as the other process, which opens the session through this crate's
//! own `open`, exactly as a second agent or editor would.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stockade_session::{Event, Role, SessionError, SessionId, SessionStore};

/// Set in a re-executed child: what it is to do (`hold`, or `append:<n>:<tag>`).
const CHILD: &str = "STOCKADE_SESSION_LOCK_CHILD";
const CHILD_DIR: &str = "STOCKADE_SESSION_LOCK_DIR";
const CHILD_ID: &str = "STOCKADE_SESSION_LOCK_ID";
/// What a holding child prints once the session is open in it.
const OPENED: &str = "session-open-in-child";

fn message(content: String) -> Event {
    Event::Message {
        role: Role::User,
        content,
        source: None,
    }
}

/// Re-run this binary as the child named by `task`, on session `id`.
fn spawn_child(dir: &Path, id: &SessionId, task: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, task)
        .env(CHILD_DIR, dir)
        .env(CHILD_ID, id.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Not a test of its own: the body of the other process. Without the
/// variable (an ordinary test run) it does nothing.
#[test]
fn child_process() {
    let Ok(task) = std::env::var(CHILD) else {
        return;
    };
    let store = SessionStore::new(PathBuf::from(std::env::var_os(CHILD_DIR).unwrap()));
    let id: SessionId = std::env::var(CHILD_ID).unwrap().parse().unwrap();
    if task == "hold" {
        let session = store.open(&id).unwrap();
        session.append(message("from the child".into())).unwrap();
        // Straight to the handle: `println!` may be captured by the harness.
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{OPENED}").unwrap();
        stdout.flush().unwrap();
        // Held open until the parent closes our stdin.
        std::io::stdin().read_to_end(&mut Vec::new()).unwrap();
        drop(session);
        return;
    }
    let mut parts = task.strip_prefix("append:").unwrap().splitn(2, ':');
    let n: usize = parts.next().unwrap().parse().unwrap();
    let tag = parts.next().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        match store.open(&id) {
            Ok(session) => break session,
            Err(SessionError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("{tag}: {e}"),
        }
    };
    for i in 0..n {
        session.append(message(format!("{tag}/{i}"))).unwrap();
    }
}

fn store() -> (tempfile::TempDir, SessionStore) {
    let tmp = tempfile::tempdir().unwrap();
    let store = SessionStore::new(tmp.path().join("sessions"));
    (tmp, store)
}

#[cfg(unix)]
#[test]
fn a_session_open_in_another_process_is_refused_until_it_closes() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("from the parent".into())).unwrap();
    let id = session.id().clone();
    let path = session.path().to_path_buf();
    // Closed here, so the child can have it.
    drop(session);

    let mut child = spawn_child(store.dir(), &id, "hold");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The harness prints its own text on the same line (`test ... `).
    while !line.trim_end().ends_with(OPENED) {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the child ended before it opened the session"
        );
    }

    let before = std::fs::read(&path).unwrap();
    for _ in 0..3 {
        match store.open(&id).unwrap_err() {
            SessionError::Locked { id: i, path: p } => {
                assert_eq!(i, id);
                assert_eq!(p, path);
            }
            e => panic!("{e:?}"),
        }
    }
    let err = store.open(&id).unwrap_err().to_string();
    assert!(err.contains(id.as_str()), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");

    // Closing the child's stdin lets it drop the session and exit.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let session = store.open(&id).unwrap();
    let contents: Vec<String> = session
        .records()
        .into_iter()
        .map(|r| match r.event {
            Event::Message { content, .. } => content,
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(contents, ["from the parent", "from the child"]);
    session.append(message("after".into())).unwrap();
}

#[cfg(unix)]
#[test]
fn processes_racing_to_write_one_session_never_repeat_a_seq() {
    const CHILDREN: usize = 6;
    const EACH: usize = 25;
    let (_tmp, store) = store();
    let id = store.create("/w").unwrap().id().clone();

    let children: Vec<Child> = (0..CHILDREN)
        .map(|c| spawn_child(store.dir(), &id, &format!("append:{EACH}:c{c}")))
        .collect();
    for mut child in children {
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
    }

    // Replay refuses a repeated or missing seq, so loading at all says the
    // log is whole; check the numbers anyway.
    let session = store.open(&id).unwrap();
    let records = session.records();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = (1..=(CHILDREN * EACH) as u64).collect();
    assert_eq!(seqs, expected);
    // Each child held the session for its whole batch: no interleaving.
    let contents: Vec<String> = records
        .into_iter()
        .map(|r| match r.event {
            Event::Message { content, .. } => content,
            e => panic!("{e:?}"),
        })
        .collect();
    for batch in contents.chunks(EACH) {
        let tag = batch[0].split('/').next().unwrap();
        let want: Vec<String> = (0..EACH).map(|i| format!("{tag}/{i}")).collect();
        assert_eq!(batch, want.as_slice());
    }
}
