//! `landlock-run`: exec ARGV confined by a Landlock ruleset (filesystem,
//! Unix sockets, signals) plus, where Landlock cannot confine Unix sockets, a
//! seccomp filter. Grammar, exit codes, the status channel, the isolation
//! facts and the exact lines printed: this crate's README.md.
// `unsafe` is denied everywhere but `sys`, the system calls no safe wrapper
// offers (its one allowance), each block with a SAFETY note.
#![deny(unsafe_code)]

/// The launcher: Landlock exists only on Linux, so this is one failure.
#[cfg(not(target_os = "linux"))]
pub fn main() {
    eprintln!("landlock-run: Landlock is only available on Linux");
    std::process::exit(125);
}

/// The launcher: parses the process's arguments and confines and execs the
/// command, or fails (125).
#[cfg(target_os = "linux")]
pub fn main() {
    let _ = lifetime::PARENT.set(rustix::process::getppid());
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // The channel first, before anything else can fail or open a file.
    if let Some(value) = args::status_fd_arg(&args) {
        let fd = fds::take_status_fd(value);
        *status::STATUS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fd);
    }
    match args::parse(&args) {
        Ok(args::Cmd::Run(opts, argv)) => run::run(&opts, &argv),
        Ok(args::Cmd::CloseFds(opts, argv)) => run::close_fds(&opts, &argv),
        Ok(args::Cmd::Isolation(sockets)) => run::isolation(&sockets),
        Ok(args::Cmd::Syscalls) => {
            crate::syscalls::print();
            std::process::exit(0)
        }
        Ok(args::Cmd::Probe) => probe::probe(),
        Ok(args::Cmd::ProbeChild(dir)) => probe::probe_child(&dir),
        Err(why) => status::usage(why),
    }
}

#[cfg(target_os = "linux")]
mod args;
#[cfg(target_os = "linux")]
mod bridge;
#[cfg(target_os = "linux")]
pub mod direct;
#[cfg(target_os = "linux")]
mod fds;
#[cfg(target_os = "linux")]
mod isolate;
#[cfg(target_os = "linux")]
mod lifetime;
#[cfg(target_os = "linux")]
pub mod netns_listener;
#[cfg(target_os = "linux")]
mod plan;
#[cfg(target_os = "linux")]
mod probe;
#[cfg(target_os = "linux")]
mod ruleset;
#[cfg(target_os = "linux")]
mod run;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod socket_filter;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub mod spawn;
#[cfg(target_os = "linux")]
mod status;
#[cfg(target_os = "linux")]
mod supervise;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod syscalls;

/// No filter for other architectures: `plan` fails closed unless
/// `--allow-socket` (or ABI 9) makes it unnecessary.
#[cfg(all(
    target_os = "linux",
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
mod socket_filter {
    pub const SUPPORTED: bool = false;

    pub fn unix_program() -> Result<seccompiler::BpfProgram, String> {
        Err(format!("no filter for {}", std::env::consts::ARCH))
    }

    pub fn net_program(_: &crate::plan::Plan) -> Result<Option<seccompiler::BpfProgram>, String> {
        Err(format!("no filter for {}", std::env::consts::ARCH))
    }
}
