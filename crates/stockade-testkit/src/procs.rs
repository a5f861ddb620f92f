//! Finding the processes of one run: a marker a test puts in a run's argv
//! or environment (every process of its tree inherits the environment), and
//! a scan of `/proc` for it, so a test can tell that a tree ended without
//! relying on process groups or parents the tree could have escaped.

use std::sync::atomic::{AtomicU32, Ordering};

/// A marker no other run of this test process uses: `PREFIX-PID-N`.
pub fn marker(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pids of the processes (this one aside) whose argv or environment holds
/// `mark`. A process this user may not read is not seen: tests run their
/// trees as a user whose processes they can read.
pub fn marked(mark: &str) -> Vec<u32> {
    let me = std::process::id();
    let needle = mark.as_bytes();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || needle.is_empty() {
            continue;
        }
        let holds = ["cmdline", "environ"].iter().any(|f| {
            std::fs::read(entry.path().join(f))
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        });
        if holds {
            out.push(pid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_holding_the_marker_is_found_until_it_ends() {
        let mark = marker("testkit");
        assert_ne!(mark, marker("testkit"));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("TESTKIT_MARK", &mark)
            .spawn()
            .unwrap_or_else(|e| panic!("sleep: {e}"));
        // Between fork and exec the child still shows this process's
        // environment, so the marker appears only once `sleep` has started.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while marked(&mark).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(marked(&mark), vec![child.id()]);
        let _ = child.kill();
        let _ = child.wait();
        assert!(marked(&mark).is_empty());
    }
}
