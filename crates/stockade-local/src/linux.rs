//! The real Linux host: runner lookup, the in-process Landlock ABI check, and
//! functional probes that run each backend's real profile.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use landlock::{ABI, RestrictSelf};
use stockade_core::ConfiningMode;
use wait_timeout::ChildExt;

use crate::profile::{Grant, LinuxProfile};
use crate::{Backend, Host, LocalSettings, Located, profile};
use command_fds::{CommandFdExt, FdMapping};

/// Where a probe hands its workspace to the runner.
const PROBE_FD: i32 = 4;

pub(crate) struct LinuxHost;

const LAUNCHER: &str = "landlock-run";

fn is_executable_file(p: &Path) -> bool {
    executable(p).is_some()
}

/// `p` as found when it is an executable file, stamped from the same look
/// (the one metadata read that decides it is a runner also keys it).
fn executable(p: &Path) -> Option<Located> {
    let m = fs::metadata(p).ok()?;
    (m.is_file() && m.permissions().mode() & 0o111 != 0).then(|| Located {
        path: p.to_path_buf(),
        stamp: Some(crate::confine::stamp_of(&m)),
    })
}

/// Only absolute `PATH` entries count: a relative one (`.`, `node_modules/.bin`)
/// names a different directory wherever stockade runs, typically one a
/// confined command can write.
fn find_on_path(name: &str) -> Option<Located> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .find_map(|d| executable(&d.join(name)))
}

/// Why `name` was not found on `PATH`, naming a relative entry that has it.
fn not_on_path(name: &str) -> String {
    let relative = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .filter(|d| !d.is_absolute())
            .find(|d| is_executable_file(&d.join(name)))
    });
    match relative {
        Some(d) => format!(
            "{name} not found on PATH: only through the relative entry {}, which is refused (it names a different directory wherever a command runs)",
            d.display()
        ),
        None => format!("{name} not found on PATH"),
    }
}

fn explicit(p: &Path, what: &str) -> Result<Located, String> {
    executable(p).ok_or_else(|| {
        format!(
            "configured {what} {} is not an executable file",
            p.display()
        )
    })
}

/// The options bwrap must have to run the command itself (`--block-fd`
/// under `allow-listed`, where it waits for the proxy's listener; every
/// bwrap with the other two has it).
const DIRECT_OPTIONS: [&[u8]; 3] = [b"--add-seccomp-fd", b"--json-status-fd", b"--block-fd"];

/// A bwrap binary is tens of kilobytes; a file far larger is not read.
const MAX_RUNNER_LEN: u64 = 16 << 20;

/// Whether `runner`'s file, still the one it was located as (same stamp,
/// looked at through the descriptor read), lists both of
/// [`DIRECT_OPTIONS`] in its usage text. Any doubt is `false`.
fn bwrap_options_listed(runner: &Located) -> bool {
    let Ok(mut file) = fs::File::open(&runner.path) else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if runner.stamp.as_deref() != Some(crate::confine::stamp_of(&meta).as_str())
        || meta.len() > MAX_RUNNER_LEN
    {
        return false;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    if file.read_to_end(&mut bytes).is_err() {
        return false;
    }
    DIRECT_OPTIONS.iter().all(|o| contains(&bytes, o))
}

/// Whether `needle` (non-empty) occurs in `hay`. Neither a comparison at
/// every offset (a tenth of stockade's start-up, measured) nor `memchr`
/// (its CPU feature detection traps to the hypervisor on VMs): the rare
/// last byte first, then the rest.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&last, _)) = needle.split_last() else {
        return true;
    };
    let n = needle.len();
    hay.iter()
        .enumerate()
        .skip(n - 1)
        .any(|(i, &b)| b == last && hay[i + 1 - n..=i] == *needle)
}

impl Host for LinuxHost {
    fn locate(&self, backend: Backend, s: &LocalSettings) -> Result<PathBuf, String> {
        self.locate_stamped(backend, s).map(|l| l.path)
    }

    fn locate_stamped(&self, backend: Backend, s: &LocalSettings) -> Result<Located, String> {
        match backend {
            Backend::Bwrap => match &s.bwrap_path {
                Some(p) => explicit(p, "bwrap_path"),
                None => find_on_path("bwrap").ok_or_else(|| {
                    // A user without root cannot install bwrap; Landlock
                    // needs nothing beyond stockade's own launcher.
                    format!(
                        "{} (install bubblewrap, or choose the landlock backend)",
                        not_on_path("bwrap")
                    )
                }),
            },
            // Next to the running executable first: that is the copy built and
            // installed with it.
            Backend::Landlock => std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().and_then(|d| executable(&d.join(LAUNCHER))))
                .or_else(|| find_on_path(LAUNCHER))
                .map(Ok)
                .or_else(|| s.launcher_path.as_deref().map(|p| explicit(p, "launcher_path")))
                .unwrap_or_else(|| {
                    Err(format!(
                        "{LAUNCHER} not found next to the executable, on PATH, or at a configured launcher_path"
                    ))
                }),
        }
    }

    fn landlock_supervision(&self) -> Result<(), String> {
        let uname = rustix::system::uname();
        let release = String::from_utf8_lossy(uname.release().to_bytes());
        let actions = fs::read_to_string(stockade_core::supervision::ACTIONS_AVAIL).ok();
        stockade_core::supervision::check(&release, actions.as_deref())
    }

    fn bwrap_runs_direct(&self, runner: &Located) -> bool {
        // Once per runner file a process: its options are in its usage
        // text, so reading it costs no exec (`bwrap --version` would cost
        // a process per `stockade exec`, what running direct saves).
        static SEEN: std::sync::Mutex<Vec<(Located, bool)>> = std::sync::Mutex::new(Vec::new());
        let mut seen = SEEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, known)) = seen.iter().find(|(l, _)| l == runner) {
            return *known;
        }
        let known = bwrap_options_listed(runner);
        seen.push((runner.clone(), known));
        known
    }

    fn landlock_abi(&self) -> Option<u8> {
        // The running kernel's ABI cannot change while this process runs:
        // asked once (it cost ten rulesets a question, three questions a
        // run).
        static KERNEL_ABI: std::sync::OnceLock<Option<u8>> = std::sync::OnceLock::new();
        *KERNEL_ABI.get_or_init(kernel_landlock_abi)
    }

    fn probe(
        &self,
        backend: Backend,
        runner: &Path,
        fd_closer: Option<&Path>,
        timeout: Duration,
    ) -> Result<(), String> {
        let dir = tempfile::Builder::new()
            .prefix("stockade-probe-")
            .tempdir()
            .map_err(|e| format!("cannot create a probe workspace: {e}"))?;
        let ws = dir.path().join("ws");
        fs::create_dir(&ws).map_err(|e| format!("cannot create {}: {e}", ws.display()))?;
        let ws = canonical_dir(&ws)?;
        // The probe runs the real profile: the workspace handed over as a
        // held descriptor, the procfs covers, the closer with its isolation.
        let held = fs::File::open(&ws).map_err(|e| format!("cannot open {}: {e}", ws.display()))?;
        let facts = crate::confine::HostFacts::gather(
            |p| p.exists(),
            None,
            self.landlock_supervision().is_ok(),
        );
        let attempt = |mode: ConfiningMode, target: &Path| -> Result<(bool, String), String> {
            let mut profile = LinuxProfile {
                fd_closer: fd_closer.map(Path::to_path_buf),
                ..Default::default()
            };
            if backend == Backend::Bwrap {
                profile.proc_read_only = facts.proc_read_only.clone();
                profile.proc_masked = facts.proc_masked.clone();
            } else {
                profile.unsupervised = !facts.supervised;
            }
            if mode == ConfiningMode::WorkspaceWrite {
                profile.roots.push(Grant {
                    path: ws.clone(),
                    fd: Some(PROBE_FD),
                });
            }
            let inner: Vec<OsString> = vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo stockade-probe > \"$1\"".into(),
                "sh".into(),
                target.as_os_str().to_owned(),
            ];
            let args = match backend {
                Backend::Bwrap => profile::bwrap_args(&profile, &inner),
                Backend::Landlock => profile::landlock_args(&profile, &inner),
            };
            let dup = held
                .try_clone()
                .map_err(|e| format!("cannot duplicate the probe workspace handle: {e}"))?;
            run_bounded(runner.as_os_str(), &args, Some(dup), timeout)
        };
        let outside = ws.join("denied");
        let (ok, err) = attempt(ConfiningMode::ReadOnly, &outside)?;
        if ok || outside.exists() {
            return Err(format!(
                "a write outside the writable set was not denied ({})",
                outside.display()
            ));
        }
        if let Some(line) = err
            .lines()
            .find(|l| l.starts_with("bwrap: ") || l.starts_with("landlock-run: "))
            && line != profile::LANDLOCK_PARTIAL_NOTICE
        {
            return Err(line.to_owned());
        }
        let inside = ws.join("allowed");
        let (ok, err) = attempt(ConfiningMode::WorkspaceWrite, &inside)?;
        if !ok || !inside.is_file() {
            let why = err
                .lines()
                .find(|l| *l != profile::LANDLOCK_PARTIAL_NOTICE)
                .unwrap_or("no output");
            return Err(format!("a write inside the workspace failed: {why}"));
        }
        Ok(())
    }

    fn tmpdir(&self) -> Option<PathBuf> {
        let t = std::env::var_os("TMPDIR").filter(|t| !t.is_empty())?;
        fs::canonicalize(t).ok().filter(|p| p.is_dir())
    }

    fn verdict_key(&self, runners: &[(Backend, Option<&Located>)]) -> Option<Vec<u8>> {
        let mut key = Vec::new();
        key.extend_from_slice(b"boot=");
        key.extend_from_slice(
            fs::read("/proc/sys/kernel/random/boot_id")
                .ok()?
                .trim_ascii(),
        );
        key.extend_from_slice(format!(";euid={}", rustix::process::geteuid().as_raw()).as_bytes());
        // Whether bwrap works hinges on user-namespace policy, which an admin
        // can flip without a reboot.
        for knob in [
            "/proc/sys/kernel/unprivileged_userns_clone",
            "/proc/sys/user/max_user_namespaces",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        ] {
            let v = fs::read(knob).unwrap_or_default();
            key.extend_from_slice(format!(";{knob}=").as_bytes());
            key.extend_from_slice(v.trim_ascii());
        }
        for (backend, path) in runners {
            key.extend_from_slice(format!(";{backend}=").as_bytes());
            match path {
                None => key.extend_from_slice(b"absent"),
                Some(found) => {
                    // The stamp it was found with, which the selection
                    // keeps and checks it by before every run.
                    let stamp = found.stamp.as_deref()?;
                    key.extend_from_slice(found.path.as_os_str().as_bytes());
                    key.push(b':');
                    key.extend_from_slice(stamp.as_bytes());
                }
            }
        }
        Some(key)
    }
}

fn canonical_dir(p: &Path) -> Result<PathBuf, String> {
    fs::canonicalize(p).map_err(|e| format!("cannot resolve {}: {e}", p.display()))
}

/// Run `program args` with a deadline; `(exited 0, stderr)`.
fn run_bounded(
    program: &OsStr,
    args: &[OsString],
    pass: Option<fs::File>,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let shown = Path::new(program).display();
    let mut cmd = Command::new(program);
    if let Some(file) = pass {
        cmd.fd_mappings(vec![FdMapping {
            parent_fd: file.into(),
            child_fd: PROBE_FD,
        }])
        .map_err(|e| format!("cannot hand the probe workspace to {shown}: {e}"))?;
    }
    // The probe's runners start without the loader's variables, as every
    // run's do (a probe command needs none of them).
    for (k, _) in std::env::vars_os().filter(|(k, _)| profile::is_loader_var(k)) {
        cmd.env_remove(k);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    let reader = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.by_ref().take(64 * 1024).read_to_end(&mut buf);
            buf
        })
    });
    let status = match child.wait_timeout(timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{shown} did not finish within {} ms",
                timeout.as_millis()
            ));
        }
        Err(e) => return Err(format!("cannot wait for {shown}: {e}")),
    };
    let stderr = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    Ok((
        status.success(),
        String::from_utf8_lossy(&stderr).into_owned(),
    ))
}

/// The kernel's Landlock ABI, as the kernel itself reports it (one
/// `landlock_create_ruleset` with the version flag, which is all a
/// `RestrictSelf` with no ruleset and without no_new_privs does). Asking
/// the crate to *require* each ABI's filesystem rights instead answered a
/// different question: ABIs that add no filesystem right (4's TCP, 6's
/// scopes, 7's logging, 8) were reported whenever the earlier one was, so
/// an ABI 3 kernel read as 4, and this one (7) as 8. An ABI newer than the
/// crate knows reads as the newest it knows, which is all it can enforce.
pub(crate) fn kernel_landlock_abi() -> Option<u8> {
    let status = RestrictSelf::default().no_new_privs(false).apply().ok()?;
    match ABI::from(status.landlock) {
        ABI::Unsupported => None,
        abi => u8::try_from(abi as i32).ok(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn located(path: &Path) -> Located {
        executable(path).unwrap()
    }

    fn write_runner(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, text).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_bwrap_is_run_direct_only_when_it_lists_every_option() {
        let d = tempfile::tempdir().unwrap();
        let both = write_runner(
            d.path(),
            "both",
            "#!/bin/sh\n# --add-seccomp-fd FD\n# --json-status-fd FD\n# --block-fd FD\n",
        );
        let one = write_runner(d.path(), "one", "#!/bin/sh\n# --json-status-fd FD\n");
        let two = write_runner(
            d.path(),
            "two",
            "#!/bin/sh\n# --add-seccomp-fd FD\n# --json-status-fd FD\n",
        );
        assert!(!bwrap_options_listed(&located(&two)));
        let none = write_runner(d.path(), "none", "#!/bin/sh\n# --seccomp FD\n");
        assert!(bwrap_options_listed(&located(&both)));
        assert!(!bwrap_options_listed(&located(&one)));
        assert!(!bwrap_options_listed(&located(&none)));
    }

    #[test]
    fn an_option_is_found_wherever_it_lies() {
        let o = b"--json-status-fd";
        assert!(contains(o, o));
        assert!(contains(b"x--json-status-fd", o));
        assert!(contains(b"--json-status-fdx", o));
        assert!(contains(b"--json-status-f--json-status-fd", o));
        assert!(!contains(b"--json-status-f", o));
        assert!(!contains(b"-json-status-fd", o));
        assert!(!contains(b"", o));
        assert!(contains(b"anything", b""));
    }

    #[test]
    fn a_bwrap_changed_since_it_was_located_is_not_run_direct() {
        let d = tempfile::tempdir().unwrap();
        let p = write_runner(d.path(), "bwrap", "#!/bin/sh\n# --seccomp FD\n");
        let before = located(&p);
        // Replaced by one that lists both: the look that found it decides.
        fs::remove_file(&p).unwrap();
        write_runner(
            d.path(),
            "bwrap",
            "#!/bin/sh\n# --add-seccomp-fd --json-status-fd --block-fd\n",
        );
        assert!(!bwrap_options_listed(&before));
        let gone = Located {
            path: d.path().join("missing"),
            stamp: before.stamp.clone(),
        };
        assert!(!bwrap_options_listed(&gone));
        let unstamped = Located {
            stamp: None,
            ..located(&p)
        };
        assert!(!bwrap_options_listed(&unstamped));
    }

    #[test]
    fn this_hosts_bwrap_runs_the_command_itself() {
        let Some(found) = find_on_path("bwrap") else {
            assert!(
                stockade_testkit::require("bwrap", false),
                "unreachable: require fails in CI"
            );
            return;
        };
        // bwrap 0.6 and later; every machine this runs on has 0.8.
        assert!(
            LinuxHost.bwrap_runs_direct(&found),
            "{}",
            found.path.display()
        );
        // Asked again, the same answer without reading it again.
        assert!(LinuxHost.bwrap_runs_direct(&found));
    }
}
