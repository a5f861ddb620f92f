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
pub fn answer_when_asked(child: Child, question: &str, answer: &str) -> Output {
    answer_in_turn(child, &[(question, answer)])
}

/// [`answer_when_asked`] for several questions in turn: each answer is
/// typed once its question shows after the previous answer was typed
/// (never ahead: the command owns the terminal meanwhile). stdin is closed
/// only after the last answer, so no question is left to whatever the
/// terminal makes of an end of file.
pub fn answer_in_turn(mut child: Child, turns: &[(&str, &str)]) -> Output {
    let mut stdout = child.stdout.take().expect("the child's stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let (mut all, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            all.extend_from_slice(&buf[..n]);
            let _ = tx.send(buf[..n].to_vec());
        }
        all
    });
    let mut stdin = child.stdin.take().expect("the child's stdin is piped");
    // What was printed since the last answer was typed.
    let mut since = Vec::new();
    for (question, answer) in turns {
        let shown = |since: &[u8]| String::from_utf8_lossy(since).contains(question);
        while !shown(&since) {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(chunk) => since.extend_from_slice(&chunk),
                Err(_) => break,
            }
        }
        since.clear();
        let _ = stdin.write_all(answer.as_bytes());
        let _ = stdin.flush();
    }
    drop(stdin);
    let printed = reader.join().expect("the reader thread");
    let mut out = child.wait_with_output().expect("the child is waited for");
    out.stdout = printed;
    out
}
