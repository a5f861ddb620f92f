//! What the SDK costs per confined run over the raw runner it spawns, in
//! floors, in ONE long-lived process (an agent's situation: the sandbox is
//! composed once, then every command goes through the executor request
//! API).
//!
//! Per backend (BACKENDS, default `landlock bwrap`) it composes the very
//! sandbox `stockade exec --workspace W --backend B --network N` composes
//! (`stockade_config::sandbox`, so the same profile: default deny-read and
//! protect lists, the same mode and network) and times, interleaved and in
//! a random order each round:
//!
//! - `floor`: posix_spawn of FLOOR (a static do-nothing binary) + wait;
//! - `B-raw`: posix_spawn of the runner argv the provider hands the SDK for
//!   `[/bin/true]` (`SandboxProvider::confine`, once), its held descriptors
//!   and a status pipe placed at the numbers that argv names, stdio on
//!   /dev/null, + wait (the status pipe drained);
//! - `B-sdk`: `executor.run(executor.resolve(ShellRequest::argv([/bin/true], W)))`
//!   with the SDK's defaults (output captured, a process group of its own).
//!
//! Also `B-raw-piped`: the raw row with stdout and stderr on pipes read to
//! their end, as the SDK captures them. It prints medians and means in ms
//! and `(sdk - raw) / floor` (medians), the calling thread's own CPU time
//! per row (median, mean and 90th percentile: a tail shows in the mean) and
//! its times scheduled in (/proc/thread-self/schedstat),
//! then the provider's `confine()` and its after-run audit alone per call
//! (ROUNDS calls after the interleaved rounds), which the SDK does on every
//! run and the raw row does not, `confine()` again each time right after a
//! raw run (`B-confine-cold`: as the SDK calls it, after a run this thread
//! slept through, not back to back), the floor waited for through
//! tokio's pidfd against `waitpid` (the SDK's wait), and one hop to tokio's
//! blocking pool and back (how the SDK runs that audit).
//!
//! Usage: `sdk_floors FLOOR WORKSPACE` (ROUNDS, default 300; BACKENDS;
//! NETWORK, default deny; INNER, default /bin/true). The launcher is found
//! beside this executable, as `stockade` finds it: copy both into one
//! directory (bench/exec-floors/run does).
//!
//! `sdk_floors --once sdk|raw B FLOOR WORKSPACE` makes one run of that row
//! (COUNT runs) and nothing else, for `strace -f -e execve` to show that
//! both spawn the same runner argv with the same descriptors (bench/exec-floors/run checks
//! it before timing).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails loudly

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;
    use std::io::Read as _;
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use stockade_config::{Overrides, Sandbox};
    use stockade_core::{Confined, NetworkMode, SandboxProvider as _};
    use stockade_local::BackendPreference;
    use stockade_shell::{ShellExecutor as _, ShellRequest};

    fn null() -> OwnedFd {
        std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap()
            .into()
    }

    /// posix_spawn (the SDK's own spawn seam) of `argv` with `fds` (stdio
    /// included) at their numbers, then a blocking wait.
    fn spawn_wait(
        argv: &[OsString],
        env: Vec<(OsString, OsString)>,
        cwd: &Path,
        fds: Vec<(OwnedFd, i32)>,
    ) -> i32 {
        let pid = landlock_run::spawn::spawn(landlock_run::spawn::Spawn {
            program: Path::new(&argv[0]),
            args: &argv[1..],
            env,
            cwd,
            fds,
            own_group: true,
        })
        .unwrap();
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let (_, s) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
            .unwrap()
            .unwrap();
        s.exit_status().unwrap_or(-1)
    }

    struct Row {
        backend: String,
        sandbox: Sandbox,
        confined: Confined,
        env: Vec<(OsString, OsString)>,
    }

    impl Row {
        fn new(backend: &str, network: NetworkMode, ws: &Path, inner: &[OsString]) -> Self {
            let overrides = Overrides {
                workspace: Some(ws.to_path_buf()),
                backend: Some(backend.parse::<BackendPreference>().unwrap()),
                network: Some(network),
                ..Overrides::from_env()
            };
            let sandbox = stockade_config::sandbox(&overrides).unwrap();
            let policy = sandbox.policy.resolve(None, None);
            let confined = sandbox
                .provider
                .confine(inner, &policy.sandbox_policy().expect("a confining mode"))
                .unwrap();
            let env = std::env::vars_os()
                .filter(|(k, _)| !confined.runner_env_remove.contains(k))
                .collect();
            Self {
                backend: backend.to_owned(),
                sandbox,
                confined,
                env,
            }
        }

        /// `pipes`: stdout and stderr on pipes read to their end after the
        /// wait, as the SDK captures them, instead of /dev/null.
        fn raw(&self, pipes: bool) -> Duration {
            let t = Instant::now();
            let mut placed: Vec<(OwnedFd, i32)> = vec![(null(), 0)];
            let mut out = Vec::new();
            for n in [1, 2] {
                if pipes {
                    let (r, w) = std::io::pipe().unwrap();
                    placed.push((w.into(), n));
                    out.push(r);
                } else {
                    placed.push((null(), n));
                }
            }
            // The run the SDK takes: bwrap running the command itself
            // where the provider offers that (its filters read from the
            // start each time: this row reuses one wrap).
            let direct = self.confined.direct.as_ref();
            // The raw row spawns without the spawner's handshake, which an
            // allow-listed direct run needs (`DirectRelay`).
            assert!(direct.is_none_or(|d| d.relay.is_none()), "NETWORK=deny");
            let pass_fds = direct.map_or(self.confined.pass_fds.as_slice(), |d| &d.pass_fds);
            if let Some(d) = direct {
                for p in &d.pass_fds {
                    // The filters are read from the start each time.
                    let _ = std::io::Seek::rewind(&mut &*p.file);
                }
            }
            placed.extend(
                pass_fds
                    .iter()
                    .map(|p| (p.file.try_clone().unwrap().into(), p.child_fd)),
            );
            let mut status = None;
            if let Some(ch) = &self.confined.status {
                let (r, w) = std::io::pipe().unwrap();
                placed.push((w.into(), ch.child_fd));
                status = Some(r);
            }
            let code = spawn_wait(
                direct.map_or(&self.confined.argv, |d| &d.argv),
                self.env.clone(),
                &self.sandbox.workdir,
                placed,
            );
            for mut r in out.into_iter().chain(status) {
                let mut rec = Vec::new();
                r.read_to_end(&mut rec).unwrap();
            }
            let d = t.elapsed();
            assert_eq!(code, 0, "{} raw runner exited {code}", self.backend);
            d
        }

        /// The provider's per-call work alone: what the SDK does before its
        /// spawn on every run (the raw row reuses one wrap).
        /// And the provider's after-run audit of that wrap, which the SDK
        /// runs (on tokio's blocking pool) once the command's tree ended.
        fn confine(&self, inner: &[OsString]) -> (Duration, Duration) {
            let policy = self.sandbox.policy.resolve(None, None);
            let t = Instant::now();
            let c = self
                .sandbox
                .provider
                .confine(inner, &policy.sandbox_policy().expect("a confining mode"))
                .unwrap();
            let d = t.elapsed();
            let t = Instant::now();
            if let Some(h) = &c.after_run {
                drop(h.0.after_run());
            }
            let a = t.elapsed();
            drop(c);
            (d, a)
        }

        async fn sdk(&self, inner: &[OsString]) -> Duration {
            let exec = &self.sandbox.executor;
            let t = Instant::now();
            let r = exec
                .run(exec.resolve(ShellRequest::argv(inner.to_vec(), &self.sandbox.workdir)))
                .await
                .unwrap();
            let d = t.elapsed();
            assert!(
                r.exit.success() && !r.denied(),
                "{} sdk: {r:?}",
                self.backend
            );
            d
        }
    }

    fn floor_run(floor: &Path) -> Duration {
        let t = Instant::now();
        let code = spawn_wait(
            &[floor.into()],
            std::env::vars_os().collect(),
            Path::new("/"),
            vec![(null(), 0), (null(), 1), (null(), 2)],
        );
        let d = t.elapsed();
        assert_eq!(code, 0);
        d
    }

    /// The floor, waited for as the SDK waits: a pidfd through the
    /// runtime's epoll (one sleep and one wake-up by the reactor), not a
    /// blocking `waitpid`.
    async fn floor_run_tokio(floor: &Path) -> Duration {
        use rustix::process::{PidfdFlags, WaitId, WaitIdOptions, pidfd_open, waitid};
        let t = Instant::now();
        let pid = landlock_run::spawn::spawn(landlock_run::spawn::Spawn {
            program: floor,
            args: &[],
            env: std::env::vars_os().collect(),
            cwd: Path::new("/"),
            fds: vec![(null(), 0), (null(), 1), (null(), 2)],
            own_group: true,
        })
        .unwrap();
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        // As in stockade-shell's spawn: an OwnedFd owned by the AsyncFd
        // and never handed out mutably is what `register` asks for.
        #[allow(deprecated)]
        let fd =
            tokio::io::unix::AsyncFd::new(pidfd_open(pid, PidfdFlags::NONBLOCK).unwrap()).unwrap();
        loop {
            let mut ready = fd.readable().await.unwrap();
            match waitid(
                WaitId::PidFd(std::os::fd::AsFd::as_fd(fd.get_ref())),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {
                Ok(Some(_)) => break,
                _ => ready.clear_ready(),
            }
        }
        t.elapsed()
    }

    /// This thread's CPU time (ns) and the times it was scheduled in.
    fn schedstat() -> (u64, u64) {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (f[0], f[2])
    }

    /// The caller's CPU ms (median, mean, 90th percentile) and the median
    /// of its times scheduled in.
    fn cpu_stats(v: &[(u64, u64)]) -> (f64, f64, f64, u64) {
        let mut c: Vec<u64> = v.iter().map(|x| x.0).collect();
        let mut s: Vec<u64> = v.iter().map(|x| x.1).collect();
        c.sort_unstable();
        s.sort_unstable();
        let mean = c.iter().sum::<u64>() as f64 / c.len() as f64 / 1e6;
        (
            c[c.len() / 2] as f64 / 1e6,
            mean,
            c[c.len() * 9 / 10] as f64 / 1e6,
            s[s.len() / 2],
        )
    }

    fn ms(v: &mut [Duration]) -> (f64, f64) {
        v.sort();
        let mean = v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len() as f64;
        (v[v.len() / 2].as_secs_f64() * 1e3, mean * 1e3)
    }

    pub async fn main() {
        let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
        let once = if args.first().is_some_and(|a| a == "--once") {
            let what = args[1].to_str().unwrap().to_owned();
            let backend = args[2].to_str().unwrap().to_owned();
            args.drain(..3);
            Some((what, backend))
        } else {
            None
        };
        let floor = PathBuf::from(args.first().expect("FLOOR: a static do-nothing binary"));
        let ws = PathBuf::from(args.get(1).expect("WORKSPACE: a directory"));
        let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
        let rounds: usize = env("ROUNDS", "300").parse().unwrap();
        let network: NetworkMode = env("NETWORK", "deny").parse().unwrap();
        let inner: Vec<OsString> = env("INNER", "/bin/true")
            .split(' ')
            .map(Into::into)
            .collect();
        if let Some((what, backend)) = once {
            let row = Row::new(&backend, network, &ws, &inner);
            // COUNT runs of the one row (for `strace -c`, `perf`).
            for _ in 0..env("COUNT", "1").parse::<usize>().unwrap() {
                match what.as_str() {
                    "sdk" => drop(row.sdk(&inner).await),
                    "raw" => drop(row.raw(false)),
                    other => panic!("--once sdk|raw, not {other}"),
                }
            }
            return;
        }
        let backends = env("BACKENDS", "landlock bwrap");
        let rows: Vec<Row> = backends
            .split_whitespace()
            .map(|b| Row::new(b, network, &ws, &inner))
            .collect();
        // Columns: floor, then raw, raw with piped output and sdk per
        // backend.
        let n = 1 + 3 * rows.len();
        let mut t: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); n];
        // The calling thread's own CPU time and times scheduled in, per run
        // (/proc/thread-self/schedstat, read outside the timed span): what
        // the caller computes, apart from what it waits for.
        let mut cpu: Vec<Vec<(u64, u64)>> = vec![Vec::with_capacity(rounds); n];
        // A fresh random order each round (xorshift, seeded from the clock):
        // a rotation would have each row follow the same neighbour nearly
        // every time, and the one after a run of the same launcher finds it
        // warmer.
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut order: Vec<usize> = (0..n).collect();
        for r in 0..10 + rounds {
            for k in (1..n).rev() {
                order.swap(k, (next() % (k as u64 + 1)) as usize);
            }
            for &i in &order {
                let before = schedstat();
                let d = match i {
                    0 => floor_run(&floor),
                    i if i % 3 == 1 => rows[i / 3].raw(false),
                    i if i % 3 == 2 => rows[i / 3].raw(true),
                    i => rows[i / 3 - 1].sdk(&inner).await,
                };
                let after = schedstat();
                if r >= 10 {
                    t[i].push(d);
                    cpu[i].push((after.0 - before.0, after.1 - before.1));
                }
            }
        }
        let (floor_med, floor_mean) = ms(&mut t[0]);
        println!(
            "1 floor = {floor_med:.3} ms (median; mean {floor_mean:.3}); {rounds} rounds interleaved, network {network}, command {}",
            inner
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        println!(
            "{:<14} {:>9} {:>9} {:>9} {:>9} {:>14}",
            "row", "median", "mean", "raw med", "sdk-raw", "floors over raw"
        );
        println!("{:<14} {floor_med:>9.3} {floor_mean:>9.3}", "floor");
        for (k, row) in rows.iter().enumerate() {
            let (rm, rmean) = ms(&mut t[1 + 3 * k]);
            let (pm, pmean) = ms(&mut t[2 + 3 * k]);
            let (sm, smean) = ms(&mut t[3 + 3 * k]);
            println!(
                "{:<14} {rm:>9.3} {rmean:>9.3}",
                format!("{}-raw", row.backend)
            );
            println!(
                "{:<14} {pm:>9.3} {pmean:>9.3} {rm:>9.3} {:>+9.3} {:>+14.2}",
                format!("{}-raw-piped", row.backend),
                pm - rm,
                (pm - rm) / floor_med
            );
            println!(
                "{:<14} {sm:>9.3} {smean:>9.3} {rm:>9.3} {:>+9.3} {:>+14.2}",
                format!("{}-sdk", row.backend),
                sm - rm,
                (sm - rm) / floor_med
            );
        }
        println!(
            "the calling thread per run: CPU ms (median, mean, p90), times scheduled in (median)"
        );
        let names: Vec<String> =
            std::iter::once("floor".to_owned())
                .chain(rows.iter().flat_map(|r| {
                    ["raw", "raw-piped", "sdk"].map(|k| format!("{}-{k}", r.backend))
                }))
                .collect();
        for (i, name) in names.iter().enumerate() {
            let (c, mean, p90, w) = cpu_stats(&cpu[i]);
            println!("  {name:<20} {c:>7.3} {mean:>7.3} {p90:>7.3} {w:>4}");
        }
        // After the interleaved rounds: the provider's confine() per call,
        // which the SDK pays on every run and the raw row does not.
        for row in &rows {
            let (mut c, mut a): (Vec<Duration>, Vec<Duration>) =
                (0..rounds).map(|_| row.confine(&inner)).unzip();
            // confine() as the SDK meets it: each call right after a run of
            // the runner that this thread slept through (other processes on
            // its CPU meanwhile), not back to back.
            let mut cold: Vec<Duration> = (0..rounds)
                .map(|_| {
                    let _ = row.raw(false);
                    row.confine(&inner).0
                })
                .collect();
            for (name, v) in [
                ("confine", &mut c),
                ("confine-cold", &mut cold),
                ("after-run", &mut a),
            ] {
                let (m, mean) = ms(v);
                println!(
                    "{:<18} {m:>5.3} {mean:>9.3} {:>9} {:>9} {:>+14.2}   ({name} alone, {rounds} calls after{})",
                    format!("{}-{name}", row.backend),
                    "",
                    "",
                    m / floor_med,
                    if name == "confine-cold" {
                        ", each after a raw run"
                    } else {
                        ""
                    }
                );
            }
        }
        // The floor waited for by a blocking waitpid and through the
        // runtime, interleaved: what the reactor's sleep and wake-up cost.
        let (mut fb, mut ft) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
        for _ in 0..rounds {
            fb.push(floor_run(&floor));
            ft.push(floor_run_tokio(&floor).await);
        }
        let ((bm, _), (tm, tmean)) = (ms(&mut fb), ms(&mut ft));
        println!(
            "{:<18} {tm:>5.3} {tmean:>9.3} {bm:>9.3} {:>+9.3} {:>+14.2}   (the floor waited through tokio's pidfd vs waitpid, {rounds} each after)",
            "floor-tokio",
            tm - bm,
            (tm - bm) / floor_med
        );
        // One hop to tokio's blocking pool and back, as the SDK makes for
        // the after-run audit: a wake-up each way.
        let mut hop = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            tokio::task::spawn_blocking(|| ()).await.unwrap();
            hop.push(t.elapsed());
        }
        let (m, mean) = ms(&mut hop);
        println!(
            "{:<18} {m:>5.3} {mean:>9.3} {:>9} {:>9} {:>+14.2}   (spawn_blocking(no-op).await, {rounds} calls after)",
            "blocking-hop",
            "",
            "",
            m / floor_med
        );
    }
}

#[cfg(target_os = "linux")]
fn main() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(linux::main());
}

#[cfg(not(target_os = "linux"))]
fn main() {}
