//! Answering a question a child (typically `script` running stockade on a
//! pseudo-terminal) shows on its stdout, once it shows: typed ahead, the
//! answer would reach the confined command, which owns the terminal while
//! it runs.

use std::io::{Read, Write};
use std::process::{Child, Output};
use std::time::Duration;

/// Wait until `question` appears in the child's stdout (or the output ends,
/// or a minute passes), type `answer` on its stdin, close it, and return
/// everything the child printed with its status. The child's stdin and
/// stdout must be piped.
pub fn answer_when_asked(mut child: Child, question: &str, answer: &str) -> Output {
    let mut stdout = child.stdout.take().expect("the child's stdout is piped");
    let question = question.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut all, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            all.extend_from_slice(&buf[..n]);
            let _ = tx.send(String::from_utf8_lossy(&all).contains(&question));
        }
        all
    });
    let mut stdin = child.stdin.take().expect("the child's stdin is piped");
    while let Ok(false) = rx.recv_timeout(Duration::from_secs(60)) {}
    let _ = stdin.write_all(answer.as_bytes());
    drop(stdin);
    let printed = reader.join().expect("the reader thread");
    let mut out = child.wait_with_output().expect("the child is waited for");
    out.stdout = printed;
    out
}
