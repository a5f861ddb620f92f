//! A run that is timed out, killed (a background job) or dropped (its
//! caller was cancelled) ends with its whole tree, not only its process
//! group: a daemon that left the group with `setsid -f` while the command
//! runs on is killed too, on the real Landlock and bwrap runners. Each
//! daemon appends to a file once a second; after the run settled the file
//! must not grow, no process carrying the run's marker may remain, and
//! (this process being a subreaper, as `stockade acp` is) a settled run
//! hands it no zombie.
//! (In-process, so as the test's own user; `stockade exec` and `stockade
//! acp`'s suites run the same trees as root and as `nobody`.)
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stockade_core::{ExecutionPolicy, NetworkMode, NetworkPolicy, SandboxMode, SandboxProvider};
use stockade_local::{BackendPreference, LocalProvider, LocalSettings};
use stockade_shell::{SandboxedExecutor, ShellExecutor, ShellRequest};

/// A failure detector only.
const HANG: Duration = Duration::from_secs(60);

/// One test at a time: the zombie check looks at this whole process.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn marker() -> String {
    stockade_testkit::procs::marker("shell-tree")
}

use stockade_testkit::procs::marked;

/// Our children that exited and were not reaped.
fn zombie_children() -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in list
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            if state == Some("Z") {
                out.push(pid);
            }
        }
    }
    out
}

fn reap_zombies() {
    for pid in zombie_children() {
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
    }
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn providers() -> Vec<(&'static str, Arc<dyn SandboxProvider>)> {
    let mut out: Vec<(&'static str, Arc<dyn SandboxProvider>)> = Vec::new();
    let launcher = stockade_testkit::built_launcher();
    if stockade_testkit::require("bwrap", stockade_testkit::have_bwrap()) {
        let s = LocalSettings {
            backend: BackendPreference::Bwrap,
            launcher_path: launcher.clone(),
            ..Default::default()
        };
        out.push(("bwrap", Arc::new(LocalProvider::new(s).unwrap())));
    }
    if stockade_testkit::require("the built landlock-run", launcher.is_some()) {
        let s = LocalSettings {
            backend: BackendPreference::Landlock,
            launcher_path: launcher,
            ..Default::default()
        };
        out.push(("landlock", Arc::new(LocalProvider::new(s).unwrap())));
    }
    out
}

struct Case {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    mark: String,
    exec: SandboxedExecutor,
}

impl Case {
    fn new(provider: Arc<dyn SandboxProvider>) -> Self {
        // As `stockade acp` is: orphans of the runs are handed to us.
        stockade_shell::tree::adopt_orphans();
        let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let dir = tempfile::Builder::new()
            .prefix("tree-cancel-")
            .tempdir_in(base)
            .unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let policy =
            ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &ws).with_network(NetworkPolicy {
                mode: NetworkMode::Deny,
                ..Default::default()
            });
        Self {
            _dir: dir,
            ws,
            mark: marker(),
            exec: SandboxedExecutor::new(provider, policy),
        }
    }

    /// Daemonizes (out of the group, out of the session), then runs on.
    fn request(&self) -> ShellRequest {
        let m = &self.mark;
        ShellRequest::argv(
            vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "export STOCKADE_TREE_MARK={m}; \
                     setsid -f sh -c ': {m}; while :; do date >> f; sleep 1; done'; \
                     while :; do sleep 1; done"
                )
                .into(),
            ],
            &self.ws,
        )
    }

    async fn daemon_wrote(&self) -> bool {
        let start = Instant::now();
        while size(&self.ws.join("f")) == 0 {
            if start.elapsed() > HANG {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }

    /// After the run settled: nothing writes, nothing of the tree remains,
    /// and (`settled`) no zombie of it was handed to us, the subreaper.
    async fn nothing_left(&self, what: &str, settled: bool) {
        if settled {
            let zombies = zombie_children();
            assert!(
                zombies.is_empty(),
                "{what}: zombies handed to us: {zombies:?}"
            );
        }
        let f = self.ws.join("f");
        assert!(size(&f) > 0, "{what}: the daemon never wrote (void)");
        let before = size(&f);
        // The runner itself (whose argv holds the command) is SIGKILLed by
        // the group kill and reaped by the runtime a moment later; it runs
        // nothing of the command's. Everything else is gone already.
        let left: Vec<u32> = marked(&self.mark)
            .into_iter()
            .filter(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                !matches!(comm.trim(), "landlock-run" | "bwrap")
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let after = size(&f);
        let later = marked(&self.mark);
        for pid in left.iter().chain(&later) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
        assert_eq!(before, after, "{what}: the daemon wrote after the run");
        assert!(
            left.is_empty() && later.is_empty(),
            "{what}: processes remain: {left:?} {later:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_run_ends_its_whole_tree() {
    let _serial = SERIAL.lock().await;
    for (backend, provider) in providers() {
        let c = Case::new(provider);
        // Long enough for the daemon to write (checked: a run that timed
        // out before it did fails as void, never passes).
        let req = c.request().with_timeout(Duration::from_secs(5));
        let r = tokio::time::timeout(HANG, c.exec.run(c.exec.resolve(req)))
            .await
            .expect("the run hung")
            .unwrap();
        assert!(r.timed_out, "{backend}: {r:?}");
        c.nothing_left(&format!("{backend} timeout"), true).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_background_job_ends_its_whole_tree() {
    let _serial = SERIAL.lock().await;
    for (backend, provider) in providers() {
        let c = Case::new(provider);
        let job = c.exec.start(c.exec.resolve(c.request())).unwrap();
        assert!(c.daemon_wrote().await, "{backend}: the daemon never wrote");
        job.kill();
        let r = tokio::time::timeout(HANG, job.wait())
            .await
            .expect("the job hung");
        assert!(r.cancelled, "{backend}: {r:?}");
        c.nothing_left(&format!("{backend} job kill"), true).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_run_ends_its_whole_tree() {
    let _serial = SERIAL.lock().await;
    for (backend, provider) in providers() {
        let c = Case::new(provider);
        let run = c.exec.run(c.exec.resolve(c.request()));
        tokio::select! {
            r = run => panic!("{backend}: the run ended on its own: {r:?}"),
            wrote = c.daemon_wrote() => assert!(wrote, "{backend}: the daemon never wrote"),
        }
        // The run's future is dropped with the select: its tree ends then.
        c.nothing_left(&format!("{backend} drop"), false).await;
        // A dropped run cannot wait for its runner: what it had not reaped
        // yet is ours now. Reaped here, so the next test starts clean.
        reap_zombies();
    }
}

/// A long-running piped child (an MCP server) that is killed ends with its
/// whole tree too.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_piped_child_ends_its_whole_tree() {
    let _serial = SERIAL.lock().await;
    for (backend, provider) in providers() {
        let c = Case::new(provider);
        let mut child = c.exec.spawn_piped(c.request()).await.unwrap();
        assert!(c.daemon_wrote().await, "{backend}: the daemon never wrote");
        child.kill();
        let exit = tokio::time::timeout(HANG, child.wait())
            .await
            .expect("the piped child hung");
        assert_eq!(exit.signal, Some(9), "{backend}: {exit:?}");
        // Its runner is stopped while its tree dies (so it dies of the
        // kill, as asked), so what it had not reaped is ours: reaped here.
        c.nothing_left(&format!("{backend} piped kill"), false)
            .await;
        reap_zombies();
    }
}
