//! System V IPC is not a file: a shared memory segment another process of
//! the user maps can be written by anyone its mode lets in, whatever the
//! file rules. bwrap gives every run a private IPC namespace, so a segment
//! outside cannot even be named; Landlock cannot, and its runs say so (gap
//! `ipc`). The exploit is run for real (shmat, then a write into the
//! segment), through `stockade exec` on both backends, as root and (when we
//! are root, as in CI) as `nobody`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use stockade_testkit::users::{Who, users};

mod common;
use common::*;

/// Attach segment `argv[1]` and write `argv[2]` at its start, or read it
/// back with no `argv[2]`. Exit 3 when the segment cannot be attached.
const SHM: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
addr = libc.shmat(int(sys.argv[1]), None, 0)
if addr is None or addr == ctypes.c_void_p(-1).value:
    print("refused", ctypes.get_errno()); sys.exit(3)
if len(sys.argv) > 2:
    ctypes.memmove(addr, sys.argv[2].encode(), len(sys.argv[2])); print("wrote")
else:
    print(ctypes.string_at(addr, 8).decode(errors="replace"))
"#;

/// A segment owned by `who`, mode 0600, and its id.
fn segment(who: Who) -> String {
    let out = who
        .command("ipcmk")
        .args(["-M", "4096", "-p", "0600"])
        .output()
        .unwrap();
    ok(&out);
    let line = text(&out.stdout);
    line.rsplit(' ').next().unwrap().trim().to_owned()
}

fn python(who: Who, args: &[&str]) -> String {
    let out = who
        .command("/usr/bin/python3")
        .arg("-c")
        .arg(SHM)
        .args(args)
        .output()
        .unwrap();
    text(&out.stdout)
}

#[test]
fn a_shared_memory_segment_outside_is_out_of_reach_under_bwrap_and_a_named_gap_under_landlock() {
    let base = base();
    for who in users() {
        let id = segment(who);
        // The control: unconfined, the same user writes into it.
        assert_eq!(python(who, &[&id, "HOSTDATA"]).trim(), "wrote");
        for backend in backends() {
            let home = owned_dir(&base, "home-", who);
            let ws = owned_dir(&base, "ws-", who);
            let script = format!(
                "/usr/bin/python3 -c '{}' {id} PLANTED!",
                SHM.replace('\'', "'\\''")
            );
            let out = exec(
                who,
                home.path(),
                None,
                backend,
                ws.path(),
                &["--json"],
                &script,
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{who:?} {backend}: {e}: {}", text(&out.stderr)));
            let stdout = ["text", "bytes"]
                .iter()
                .find_map(|k| v["result"]["stdout"][k].as_str())
                .unwrap_or_default()
                .to_owned();
            let gaps: Vec<String> = v["result"]["sandbox"]["gaps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["name"].as_str().unwrap().to_owned())
                .collect();
            let named = gaps.iter().any(|g| g == stockade_core::gaps::IPC);
            if backend == "bwrap" {
                assert!(stdout.starts_with("refused"), "{who:?} bwrap: {v}");
                assert!(!named, "{who:?} bwrap names a gap it closes: {gaps:?}");
                assert_eq!(
                    python(who, &[&id]).trim_end_matches('\0').trim(),
                    "HOSTDATA"
                );
            } else {
                // Landlock reaches it (the gap it names), so the segment
                // is restored for the next leg.
                assert!(named, "{who:?} {backend}: gap ipc not named: {gaps:?}");
                python(who, &[&id, "HOSTDATA"]);
            }
        }
        ok(&who.command("ipcrm").args(["-m", &id]).output().unwrap());
    }
}
