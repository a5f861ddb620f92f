//! Ending the command's whole process tree when `stockade exec` is told to
//! stop. Under danger-full-access nothing wraps the command: it runs in our
//! process group (so it can read the terminal), and what it started in the
//! background would outlive us. As a child subreaper, every orphan of the
//! tree becomes our child; killing our children level by level, each
//! reaped before the next look, ends the tree without a pid race (an
//! unreaped child's pid cannot be reused).

/// Make orphans of the command's tree our children (Linux); elsewhere a
/// no-op.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    {
        // Failing leaves today's behaviour (orphans go to init): the
        // command itself is still killed, only its orphans could linger.
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// SIGKILL every descendant, level by level, until none is left.
pub fn kill_descendants() {
    #[cfg(target_os = "linux")]
    linux::kill_descendants();
}

#[cfg(target_os = "linux")]
mod linux {
    use rustix::process::{Pid, Signal, WaitOptions, getpid, kill_process, waitpid};

    /// The pids whose parent is `parent`, from `/proc/<pid>/stat` (the
    /// parent is the field after the state, after the last `)`: a command
    /// name may contain spaces and parentheses).
    fn children_of(parent: i32) -> Vec<i32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let name = e.ok()?.file_name();
            let pid: i32 = name.to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid: i32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
    }

    pub(super) fn kill_descendants() {
        let me = getpid().as_raw_pid();
        // A child we may not signal (it changed its real uid: a setuid
        // program that dropped ours) is left alone and never waited for,
        // so a command cannot make us hang on the way out.
        let mut untouchable: Vec<i32> = Vec::new();
        // Bounded: each round kills and reaps a level; a tree deeper or
        // wider than this forking faster than we kill is not a command.
        for _ in 0..10_000 {
            let children: Vec<Pid> = children_of(me)
                .into_iter()
                .filter(|p| !untouchable.contains(p))
                .filter_map(Pid::from_raw)
                .collect();
            if children.is_empty() {
                return;
            }
            let mut killed = Vec::new();
            for pid in children {
                match kill_process(pid, Signal::KILL) {
                    Ok(()) => killed.push(pid),
                    Err(_) => untouchable.push(pid.as_raw_pid()),
                }
            }
            // Reaped before the next look: once a child is reaped, its own
            // children have been handed to us.
            for pid in killed {
                let _ = waitpid(Some(pid), WaitOptions::empty());
            }
        }
    }
}
