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

/// The first process below `root` (breadth first, across every thread's
/// children) whose executable is `exe`. A test that signals "the program
/// under test" must find it this way, never as `root`'s one child: a
/// wrapper such as `script` runs it through `$SHELL -c`, and a shell that
/// does not exec its last command (dash, CI's `/bin/sh`) sits between.
pub fn descendant_running(root: u32, exe: &std::path::Path) -> Option<u32> {
    let want = std::fs::canonicalize(exe).ok()?;
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(pid) = queue.pop_front() {
        if pid != root && std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == want) {
            return Some(pid);
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            queue.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    None
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

    #[test]
    fn the_program_is_found_below_a_shell_that_does_not_exec_it() {
        // `sleep` as the second of two commands: no shell execs it in
        // place, so it is a grandchild.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; true"])
            .spawn()
            .unwrap_or_else(|e| panic!("sh: {e}"));
        let sleep = std::process::Command::new("sh")
            .args(["-c", "command -v sleep"])
            .output()
            .unwrap_or_else(|e| panic!("sh: {e}"));
        let sleep = std::path::PathBuf::from(String::from_utf8_lossy(&sleep.stdout).trim());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = None;
        while found.is_none() && std::time::Instant::now() < deadline {
            found = descendant_running(child.id(), &sleep);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let found = found.unwrap_or_else(|| panic!("no sleep below {}", child.id()));
        assert_ne!(found, child.id());
        let status = std::fs::read_to_string(format!("/proc/{found}/status")).unwrap_or_default();
        assert!(
            status.contains(&format!("PPid:\t{}", child.id())),
            "{status}"
        );
        let _ = std::process::Command::new("kill")
            .arg(found.to_string())
            .status();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(descendant_running(child.id(), &sleep), None);
    }
}
