//! Shell executors: run a command (confined or not), tell a denied file
//! effect from a broken sandbox, and run background jobs.
//!
//! Before start, a spawn rejection is a runner failure only when the workdir
//! is usable and the OS reports ENOENT/EACCES for the provider's argv[0].
//! After start, one classifier reads every process: a runner-failure rule
//! (exit-code gate and a fatal line left after informational exclusions)
//! outranks a denial signature; a denial is a result fact, orthogonal to the
//! exit code.
#![forbid(unsafe_code)]

mod error;
mod executor;
mod job;
mod output;
mod process;
mod spec;

pub use error::ShellError;
pub use executor::{BoxFuture, Interpreter, SandboxedExecutor, ShellExecutor, UnconfinedExecutor};
pub use job::JobHandle;
pub use output::denied_path;
pub use output::{CapturedOutput, OutputLimits};
pub use spec::{Command, ExitFacts, SandboxFacts, ShellRequest, ShellResult, ShellSpec, Stdin};
