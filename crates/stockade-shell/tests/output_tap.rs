//! The output tap: a caller sees a running command's output as it arrives,
//! while capture and the result stay what they were.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stockade_shell::{OutputStream, OutputTap, ShellExecutor, ShellRequest, UnconfinedExecutor};

#[tokio::test]
async fn the_tap_sees_each_stream_before_the_command_ends() {
    let seen: Arc<Mutex<Vec<(OutputStream, String, Instant)>>> = Arc::default();
    let tap = {
        let seen = seen.clone();
        OutputTap::new(move |stream, chunk| {
            seen.lock().unwrap().push((
                stream,
                String::from_utf8_lossy(chunk).into_owned(),
                Instant::now(),
            ));
        })
    };
    let exec = UnconfinedExecutor::default();
    let dir = std::env::current_dir().unwrap();
    let request = ShellRequest::new("echo first; sleep 0.5; echo oops >&2; echo last", dir)
        .with_timeout(Duration::from_secs(30))
        .with_tap(tap);
    let r = exec.run(exec.resolve(request)).await.unwrap();
    let ended = Instant::now();
    assert_eq!(r.stdout.text(), "first\nlast\n", "capture is unchanged");
    assert_eq!(r.stderr.text(), "oops\n");
    let seen = seen.lock().unwrap();
    let text = |s: OutputStream| -> String {
        seen.iter()
            .filter(|(st, _, _)| *st == s)
            .map(|(_, t, _)| t.as_str())
            .collect()
    };
    assert_eq!(text(OutputStream::Stdout), "first\nlast\n");
    assert_eq!(text(OutputStream::Stderr), "oops\n");
    let (_, first, at) = &seen[0];
    assert_eq!(first, "first\n");
    assert!(
        ended.duration_since(*at) >= Duration::from_millis(400),
        "the first line was seen while the command still ran"
    );
}
