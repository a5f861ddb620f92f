//! Shell executors: run a command (confined or not), tell a denied file
//! effect from a broken sandbox, and run background jobs.
//!
//! Before start, a spawn rejection is a runner failure only when the workdir
//! is usable and the OS reports ENOENT/EACCES for the provider's argv[0].
//! Descriptors the provider holds (writable roots) are placed at the numbers
//! the runner's argv names, as duplicates, never re-opened by path.
//!
//! After start, one classifier reads every process. When the runner has a
//! status channel (a pipe the command never holds), its record alone says
//! whether the runner failed: `ok` means the command ran, whatever its stderr
//! or exit code; `fail <why>` or silence means it never did. Only an
//! operator's runner command, which has no channel, is judged from stderr: a
//! runner-failure rule (exit-code gate and a fatal line left after
//! informational exclusions) outranks a denial signature. Either way a
//! denial is a result fact, read from stderr, orthogonal to the exit code.
#![forbid(unsafe_code)]

mod error;
mod executor;
mod job;
mod output;
mod piped;
mod process;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod spawn;
mod spec;
mod terminal;
pub mod tree;

pub use error::{FdConflict, ShellError};
pub use executor::{
    BoxFuture, HostOs, Interpreter, SandboxedExecutor, Shell, ShellChoice, ShellExecutor,
    UnconfinedExecutor, UnknownShell, on_path,
};
pub use job::JobHandle;
pub use output::denied_path;
pub use output::{CapturedOutput, OutputLimits};
pub use piped::{PipedChild, PipedFacts};
pub use spec::{
    Command, ExitFacts, OutputStream, OutputTap, SandboxFacts, ShellRequest, ShellResult,
    ShellSpec, Stdin,
};
#[cfg(target_os = "linux")]
pub use terminal::Winsize;
pub use terminal::{Held, OutputHold, Terminal};
