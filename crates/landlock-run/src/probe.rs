//! `--probe`: enforcement proven end to end in a throwaway child.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio, exit};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::io::Errno;

use crate::isolate::confine;
use crate::plan::{kernel_abi, plan};
use crate::ruleset::open_grant;
use crate::status::{OrFail, fail};

/// Proves enforcement end to end in a throwaway child: a write the ruleset
/// allows must land and one it forbids must be refused and absent.
pub(crate) fn probe() -> ! {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir =
        std::env::temp_dir().join(format!("landlock-run-probe-{}-{nanos}", std::process::id()));
    // 0700 and create-not-reuse: nobody else can plant inside/ or outside/.
    let shown = dir.display();
    DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .or_fail(format_args!("probe failed: cannot create {shown}"));
    let result = probe_in(&dir);
    let _ = fs::remove_dir_all(&dir);
    match result {
        Ok(abi) => {
            let level = if abi >= 3 { "full" } else { "partial" };
            println!("landlock-run: probe ok: abi {abi}, {level} enforcement");
            exit(0)
        }
        Err(why) => fail(format_args!("probe failed: {why}")),
    }
}

pub(crate) fn probe_in(dir: &Path) -> Result<u32, String> {
    for sub in ["inside", "outside"] {
        fs::create_dir(dir.join(sub)).map_err(|e| format!("cannot create {sub}/: {e}"))?;
    }
    let mut child = Command::new("/proc/self/exe")
        .arg("--probe-child")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot spawn the probe child: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("probe child did not finish within 5 s".into());
            }
            Err(e) => return Err(format!("cannot wait for the probe child: {e}")),
        }
    };
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    // Checked from outside the domain: a child that lied cannot hide a landed write.
    if dir.join("outside/escape").symlink_metadata().is_ok() {
        return Err("a write outside the ruleset landed".into());
    }
    if !status.success() {
        let why = err
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("landlock-run: ");
        return Err(format!("probe child exited with {status}: {why}"));
    }
    if dir.join("inside/ok").symlink_metadata().is_err() {
        return Err("the allowed write did not land".into());
    }
    out.trim()
        .strip_prefix("abi ")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("unexpected probe child output {out:?}"))
}

pub(crate) fn probe_child(dir: &Path) -> ! {
    let rules = vec![
        open_grant(Path::new("/"), false),
        open_grant(&dir.join("inside"), true),
    ];
    // The whole confinement, socket isolation included: the probe vouches
    // for what a run does.
    let plan = plan(kernel_abi(), false).unwrap_or_else(|why| fail(why));
    let abi = confine(&plan, rules, Vec::new(), false, false);
    let create = |p: PathBuf| OpenOptions::new().write(true).create_new(true).open(p);
    create(dir.join("inside/ok")).or_fail("the allowed write was refused");
    match create(dir.join("outside/escape")) {
        Err(e) if e.raw_os_error() == Some(Errno::ACCESS.raw_os_error()) => {}
        Err(e) => fail(format_args!(
            "the forbidden write failed, but not with EACCES: {e}"
        )),
        Ok(_) => fail("the forbidden write was allowed"),
    }
    println!("abi {abi}");
    exit(0)
}
