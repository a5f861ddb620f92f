//! Ending the command's whole process tree. `stockade exec` is the child
//! subreaper of everything it starts, so no orphan of the command's tree is
//! re-parented past it: under danger-full-access (nothing wraps the command,
//! which runs in our process group so it can read the terminal), under
//! plain Landlock, or when a runner was killed outright. After every run,
//! and when `stockade exec` is told to stop, what is left below us is
//! killed and reaped (see `stockade_shell::tree`), so nothing the command
//! started outlives it.

pub use stockade_shell::tree::{adopt_orphans, kill_descendants};
