//! The names a [`crate::Gap`] may carry: what a backend may fail to govern.
//! One closed list, so result facts and `probe` always spell a gap the same.

/// Mode, owner, timestamps, xattrs/ACLs or inode flags of files outside the
/// writable roots can be changed (Landlock has no metadata rights).
pub const METADATA: &str = "metadata";
/// `.git/hooks`, `.git/config` (and other protected paths) inside a writable
/// root are not read-only (Landlock cannot carve a hole in an allowed root).
pub const PROTECTED_PATHS: &str = "protected-paths";
/// Files outside the writable roots can be truncated (Landlock below ABI 3).
pub const TRUNCATE: &str = "truncate";
/// Unix sockets outside the sandbox can be connected to.
pub const UNIX_SOCKETS: &str = "unix-sockets";
/// Processes outside the sandbox can be signalled.
pub const SIGNALS: &str = "signals";
/// Some of the procfs entries container runtimes mask stay readable.
pub const PROC_MASKS: &str = "proc-masks";
/// System V IPC objects (shared memory, message queues, semaphores) of the
/// user's processes outside the sandbox can be reached: they are judged by
/// their owner and mode, not by Landlock, and the IPC namespace is the
/// caller's (bwrap gives every run a private one).
pub const IPC: &str = "ipc";

/// A deny-read path this backend cannot keep unreadable here (Landlock
/// cannot take read back beneath a writable root it grants).
pub const DENY_READ: &str = "deny-read";
/// The names inside a denied directory stay listable (Landlock can refuse
/// reading a directory's files but grants listing along with its parent).
pub const DENY_READ_NAMES: &str = "deny-read-names";
/// A deny-read object may be readable by a name the look before the run
/// could not see: a mount of its filesystem or a hard link made by someone
/// outside while it runs, or a link in a denied directory too large to walk.
pub const DENY_READ_ALIASES: &str = "deny-read-aliases";

/// The call's network mode is not enforced by this backend here (a
/// kernel without what it needs, a runner that cannot host the proxy).
pub const NETWORK: &str = "network";
/// Under `allow-listed`, TCP to the proxy's port is allowed on every
/// address, not only loopback (Landlock governs TCP by port alone).
pub const NETWORK_PORT: &str = "network-port";
/// `--allow-listen` under bwrap: the listener is on the sandbox's private
/// loopback, which nothing on the host can reach.
pub const LISTEN: &str = "listen";

/// What a run creates that the host later runs (a protect-list name, a
/// nested repository staged as a gitlink) is set aside only after the
/// command's tree has ended: while it still runs, the host (an editor's
/// direnv, the user's `git status`) may act on it first.
pub const AFTER_RUN: &str = "after-run";

/// Every name, for tests and documentation.
pub const ALL: &[&str] = &[
    METADATA,
    PROTECTED_PATHS,
    TRUNCATE,
    UNIX_SOCKETS,
    SIGNALS,
    PROC_MASKS,
    IPC,
    DENY_READ,
    DENY_READ_NAMES,
    DENY_READ_ALIASES,
    NETWORK,
    NETWORK_PORT,
    AFTER_RUN,
    LISTEN,
];
