//! What starting one confined run costs the caller, by the caller's size:
//! the fork path (tokio's `Command` with a descriptor placed by a
//! `pre_exec` hook, as stockade-shell spawned before issue 26) against
//! `landlock_run::spawn` (posix_spawn file actions, no fork), each placing
//! one descriptor at 3 and running a static do-nothing binary, with the
//! caller holding BALLAST_MB (0, 256, 1024 by default) of touched memory.
//! Interleaved, ROUNDS (default 300) each; medians in ms.
//!
//! `cargo run --release -p stockade-shell --example spawn_cost -- FLOOR`
//! where FLOOR is a static do-nothing binary (`gcc -O2 -static`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails loudly

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main() {
    use std::os::fd::OwnedFd;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use command_fds::{CommandFdExt, FdMapping};

    let floor = PathBuf::from(std::env::args_os().nth(1).expect("FLOOR: a static binary"));
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let sizes: Vec<usize> = std::env::var("BALLAST_MB")
        .unwrap_or_else(|_| "0,256,1024".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let placed = || -> OwnedFd { std::fs::File::open("/dev/null").unwrap().into() };
    let forked = || {
        let t = Instant::now();
        let mut cmd = std::process::Command::new(&floor);
        cmd.fd_mappings(vec![FdMapping {
            parent_fd: placed(),
            child_fd: 3,
        }])
        .unwrap();
        let s = cmd.status().unwrap();
        assert!(s.success());
        t.elapsed()
    };
    let spawned = || {
        let t = Instant::now();
        let pid = landlock_run::spawn::spawn(landlock_run::spawn::Spawn {
            program: &floor,
            args: &[],
            env: Vec::new(),
            cwd: std::path::Path::new("/"),
            fds: vec![(placed(), 3)],
            own_group: false,
        })
        .unwrap();
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let (_, s) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(s.exit_status(), Some(0));
        t.elapsed()
    };
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    println!("ballast MB   fork ms   posix_spawn ms   fork / spawn");
    let mut ballast: Vec<u8> = Vec::new();
    for mb in sizes {
        // Touched, so the pages are the caller's to copy.
        ballast.resize(mb << 20, 1);
        for i in (0..ballast.len()).step_by(4096) {
            ballast[i] = (i & 0xff) as u8;
        }
        for _ in 0..10 {
            forked();
            spawned();
        }
        let (mut f, mut s) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            f.push(forked());
            s.push(spawned());
        }
        let (fm, sm) = (median(&mut f), median(&mut s));
        println!("{mb:>10} {fm:>9.3} {sm:>16.3} {:>14.1}", fm / sm);
    }
    std::hint::black_box(&ballast);
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() {}
