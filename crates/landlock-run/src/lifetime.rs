//! `--die-with-parent`: the launcher (and so the command) ends with its
//! caller.

use crate::status::fail;

/// The process that started this launcher, read first thing in `main`.
pub(crate) static PARENT: std::sync::OnceLock<Option<rustix::process::Pid>> =
    std::sync::OnceLock::new();

/// `--die-with-parent`: this launcher gets SIGKILL when the process
/// that started it dies (bwrap's flag of the same name), so a killed
/// caller leaves nothing running: a supervised command dies with its
/// supervisor (the child's own parent-death signal), an unsupervised one
/// keeps this setting across its exec. The kernel ties the signal to the
/// caller's thread that spawned this launcher. A caller already gone by
/// now is a failure, never a run nobody waits for.
pub(crate) fn die_with_parent() {
    let parent = PARENT.get().copied().flatten();
    let kill = Some(rustix::process::Signal::KILL);
    if rustix::process::set_parent_process_death_signal(kill).is_err() {
        fail("--die-with-parent: cannot set the parent-death signal");
    }
    if parent.is_none() || rustix::process::getppid() != parent {
        fail("--die-with-parent: the caller is already gone");
    }
}
