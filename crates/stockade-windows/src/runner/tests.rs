//! The runner's argv, its validation and its whole main logic against the
//! recording mock.

use super::*;
use crate::acl::{AclEntry, GENERIC_ALL};
use crate::mock::{Call, LOGON, Mock, Op, USER};
use crate::paths;

const WS: &str = r"C:\Users\dev\proj";
const TEMP: &str = r"C:\Users\dev\AppData\Local\Temp\stockade-0123456789abcdef0123456789abcdef";

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn ws_sid() -> Sid {
    sid::workspace_sid(Path::new(WS)).unwrap()
}

fn temp_sid() -> Sid {
    sid::temp_sid(Path::new(TEMP)).unwrap()
}

fn alloc() -> Allocation {
    Allocation {
        workspace: WS.into(),
        workspace_sid: ws_sid(),
        temp_dir: TEMP.into(),
        temp_sid: temp_sid(),
    }
}

fn ww_args(argv: &[&str]) -> Vec<OsString> {
    RunnerArgs::from_allocation(&alloc(), os(argv)).to_args()
}

fn env() -> Vec<(OsString, OsString)> {
    [
        ("Path", r"C:\Windows\system32"),
        ("TEMP", r"C:\Users\dev\AppData\Local\Temp"),
        ("tmp", r"C:\Users\dev\AppData\Local\Temp"),
    ]
    .iter()
    .map(|(k, v)| ((*k).into(), (*v).into()))
    .collect()
}

/// `run_main` with the program name prepended; (exit code, stderr).
fn main_with(mock: &Mock, args: Vec<OsString>) -> (i32, String) {
    let mut argv = vec![OsString::from("stockade-winrun")];
    argv.extend(args);
    let mut err = Vec::new();
    let code = run_main(mock, argv, env(), &mut err);
    (code, String::from_utf8(err).unwrap())
}

#[test]
fn the_argv_round_trips() {
    let args = ww_args(&["pwsh", "-NoProfile", "-Command", "--", "x"]);
    assert_eq!(
        args,
        os(&[
            "--mode",
            "workspace-write",
            "--workspace",
            WS,
            "--workspace-sid",
            &ws_sid().to_string(),
            "--temp-dir",
            TEMP,
            "--temp-sid",
            &temp_sid().to_string(),
            "--",
            "pwsh",
            "-NoProfile",
            "-Command",
            "--",
            "x",
        ])
    );
    let parsed = RunnerArgs::parse(args).unwrap();
    assert_eq!(
        parsed,
        RunnerArgs::from_allocation(&alloc(), os(&["pwsh", "-NoProfile", "-Command", "--", "x"]))
    );
    let ro = RunnerArgs::read_only(os(&["cmd", "/c", "ver"]));
    assert_eq!(
        ro.to_args(),
        os(&["--mode", "read-only", "--", "cmd", "/c", "ver"])
    );
    assert_eq!(RunnerArgs::parse(ro.to_args()).unwrap(), ro);
    // Flag order does not matter.
    let reordered = os(&[
        "--temp-sid",
        &temp_sid().to_string(),
        "--workspace",
        WS,
        "--temp-dir",
        TEMP,
        "--workspace-sid",
        &ws_sid().to_string(),
        "--mode",
        "workspace-write",
        "--",
        "pwsh",
        "-NoProfile",
        "-Command",
        "--",
        "x",
    ]);
    assert_eq!(RunnerArgs::parse(reordered).unwrap(), parsed);
}

#[test]
fn workspace_write_without_temp_is_a_valid_narrower_shape() {
    let args = os(&[
        "--mode",
        "workspace-write",
        "--workspace",
        WS,
        "--workspace-sid",
        &ws_sid().to_string(),
        "--",
        "x",
    ]);
    let parsed = RunnerArgs::parse(args).unwrap();
    assert_eq!(parsed.temp, None);
    assert_eq!(
        parsed.token_mode(),
        TokenMode::WorkspaceWrite {
            workspace: ws_sid(),
            temp: None
        }
    );
}

#[test]
fn malformed_argv_is_refused() {
    let ws = ws_sid().to_string();
    let tmp = temp_sid().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "missing --"),
        (vec!["--mode", "read-only"], "missing --"),
        (vec!["--mode", "read-only", "--"], "no command"),
        (vec!["--", "x"], "--mode is required"),
        (
            vec!["--mode", "danger-full-access", "--", "x"],
            "invalid confining sandbox mode",
        ),
        (
            vec!["--mode", "read-only", "--mode", "read-only", "--", "x"],
            "given twice",
        ),
        (vec!["--mode"], "needs a value"),
        (vec!["--bogus", "1", "--", "x"], "unknown argument"),
        (
            vec![
                "--mode",
                "read-only",
                "--workspace",
                WS,
                "--workspace-sid",
                &ws,
                "--",
                "x",
            ],
            "read-only carries no capability",
        ),
        (
            vec![
                "--mode",
                "read-only",
                "--temp-dir",
                TEMP,
                "--temp-sid",
                &tmp,
                "--",
                "x",
            ],
            "read-only carries no capability",
        ),
        (
            vec!["--mode", "workspace-write", "--", "x"],
            "needs --workspace",
        ),
        (
            vec!["--mode", "workspace-write", "--workspace", WS, "--", "x"],
            "go together",
        ),
        (
            vec![
                "--mode",
                "workspace-write",
                "--workspace",
                WS,
                "--workspace-sid",
                &ws,
                "--temp-dir",
                TEMP,
                "--",
                "x",
            ],
            "go together",
        ),
        (
            vec![
                "--mode",
                "workspace-write",
                "--workspace",
                WS,
                "--workspace-sid",
                "S-1-1-0",
                "--",
                "x",
            ],
            "does not match",
        ),
        (
            vec![
                "--mode",
                "workspace-write",
                "--workspace",
                WS,
                "--workspace-sid",
                "S-1-4-01-2",
                "--",
                "x",
            ],
            "invalid SID",
        ),
        (
            vec![
                "--mode",
                "workspace-write",
                "--workspace",
                "proj",
                "--workspace-sid",
                &ws,
                "--",
                "x",
            ],
            "not an absolute",
        ),
    ];
    for (args, want) in cases {
        let err = RunnerArgs::parse(os(&args)).unwrap_err();
        assert!(err.to_string().contains(want), "{args:?}: {err}");
    }
}

#[test]
fn sids_must_be_the_ones_derived_from_their_paths() {
    // The workspace SID offered for the temp dir, and the temp SID for the
    // workspace: domain separation makes both mismatches.
    let swapped = os(&[
        "--mode",
        "workspace-write",
        "--workspace",
        WS,
        "--workspace-sid",
        &sid::temp_sid(Path::new(WS)).unwrap().to_string(),
        "--",
        "x",
    ]);
    assert!(matches!(
        RunnerArgs::parse(swapped),
        Err(Error::SidMismatch {
            flag: "--workspace-sid",
            ..
        })
    ));
    // A sibling's temp SID with this session's temp dir.
    let sibling = sid::temp_sid(Path::new(&TEMP.replace("0123", "ffff"))).unwrap();
    let mut args = ww_args(&["x"]);
    let at = args.iter().position(|a| a == "--temp-sid").unwrap() + 1;
    args[at] = sibling.to_string().into();
    assert!(matches!(
        RunnerArgs::parse(args),
        Err(Error::SidMismatch {
            flag: "--temp-sid",
            ..
        })
    ));
}

#[test]
fn a_temp_dir_overlapping_the_workspace_is_refused_both_ways() {
    for (ws, temp) in [
        (r"C:\w", r"C:\w\stockade-1"),
        (r"C:\w\stockade-1", r"C:\w\stockade-1"),
        (r"C:\t\stockade-1\ws", r"C:\t\stockade-1"),
    ] {
        let args = os(&[
            "--mode",
            "workspace-write",
            "--workspace",
            ws,
            "--workspace-sid",
            &sid::workspace_sid(Path::new(ws)).unwrap().to_string(),
            "--temp-dir",
            temp,
            "--temp-sid",
            &sid::temp_sid(Path::new(temp)).unwrap().to_string(),
            "--",
            "x",
        ]);
        let err = RunnerArgs::parse(args).unwrap_err();
        assert!(
            matches!(err, Error::TempOverlap { .. }),
            "{ws} {temp}: {err}"
        );
    }
}

#[test]
fn workspace_write_builds_the_token_and_runs_the_child() {
    let mock = Mock::new();
    mock.state().exit_code = 7;
    let (code, stderr) = main_with(&mock, ww_args(&["cmd.exe", "/c", "echo a b"]));
    assert_eq!((code, stderr.as_str()), (7, ""));
    let logon: Sid = LOGON.parse().unwrap();
    let user: Sid = USER.parse().unwrap();
    let calls = mock.calls();
    assert_eq!(
        calls[..6],
        [
            Call::OpenProcessToken,
            Call::TokenUser(1),
            Call::TokenLogonSid(1),
            Call::CreateRestrictedToken {
                from: 1,
                flags: 0x8 | 0x1 | 0x4,
                sids: vec![logon, Sid::everyone(), ws_sid(), temp_sid()],
            },
            // The base token is closed as soon as the restricted one exists.
            Call::Close(1),
            Call::SetDefaultDacl(
                2,
                vec![
                    AclEntry::default_dacl(user),
                    AclEntry::default_dacl(Sid::local_system()),
                    AclEntry::default_dacl(temp_sid()),
                ]
            ),
        ]
    );
    assert_eq!(calls[6], Call::ShieldConsole);
    let Call::Spawn {
        token,
        command_line,
        environment,
    } = &calls[7]
    else {
        panic!("{:?}", calls[7]);
    };
    assert_eq!(*token, 2);
    assert_eq!(command_line, r#"cmd.exe /c "echo a b""#);
    assert_eq!(
        environment,
        &[
            r"Path=C:\Windows\system32".to_owned(),
            format!("TEMP={TEMP}"),
            format!("TMP={TEMP}"),
        ]
    );
    assert_eq!(calls[8..], [Call::Close(2), Call::Wait(3), Call::Close(3)]);
    assert_eq!(mock.state().open.len(), 0);
    // The runner never touches an ACL or a directory.
    assert_eq!(mock.mutations(), []);
}

#[test]
fn read_only_has_no_capability_and_keeps_the_ambient_temp() {
    let mock = Mock::new();
    let (code, _) = main_with(
        &mock,
        os(&["--mode", "read-only", "--", "cmd", "/c", "ver"]),
    );
    assert_eq!(code, 0);
    let calls = mock.calls();
    let logon: Sid = LOGON.parse().unwrap();
    assert!(calls.contains(&Call::CreateRestrictedToken {
        from: 1,
        flags: 0xD,
        sids: vec![logon, Sid::everyone()],
    }));
    let dacl = calls.iter().find_map(|c| match c {
        Call::SetDefaultDacl(_, e) => Some(e.clone()),
        _ => None,
    });
    assert_eq!(
        dacl.unwrap()[2],
        AclEntry::default_dacl(Sid::everyone()),
        "Everyone under read-only"
    );
    let env = calls
        .iter()
        .find_map(|c| match c {
            Call::Spawn { environment, .. } => Some(environment.clone()),
            _ => None,
        })
        .unwrap();
    assert!(env.contains(&r"TEMP=C:\Users\dev\AppData\Local\Temp".to_owned()));
}

#[test]
fn without_temp_the_default_dacl_names_the_workspace() {
    let mock = Mock::new();
    let args = os(&[
        "--mode",
        "workspace-write",
        "--workspace",
        WS,
        "--workspace-sid",
        &ws_sid().to_string(),
        "--",
        "x",
    ]);
    main_with(&mock, args);
    let dacl = mock
        .calls()
        .into_iter()
        .find_map(|c| match c {
            Call::SetDefaultDacl(_, e) => Some(e),
            _ => None,
        })
        .unwrap();
    assert_eq!(dacl[2].sid, ws_sid());
    assert_eq!(dacl[2].mask, GENERIC_ALL);
}

#[test]
fn the_exit_code_is_mirrored_bit_for_bit() {
    for code in [0u32, 1, 255, 9009, 0xC000_0142, 0xE043_4352, u32::MAX] {
        let mock = Mock::new();
        mock.state().exit_code = code;
        let (got, stderr) = main_with(&mock, ww_args(&["x"]));
        assert_eq!(got.to_ne_bytes(), code.to_ne_bytes(), "{code:#x}");
        assert_eq!(stderr, "");
    }
}

/// Fail each Win32 step in turn: one `stockade-winrun: ` line naming the API
/// and code, the reserved exit code, every handle closed, no child started
/// after the failure point.
#[test]
fn a_failure_at_any_step_prints_one_line_and_exits_reserved() {
    let steps = [
        (Op::OpenProcessToken, "opening the caller's token"),
        (Op::TokenUser, "reading the token user"),
        (Op::TokenLogonSid, "reading the token logon SID"),
        (Op::CreateRestrictedToken, "creating the restricted token"),
        (Op::SetDefaultDacl, "setting the token default DACL"),
        (Op::ShieldConsole, "installing the console control handler"),
        (Op::Spawn, "starting the child"),
        (Op::Wait, "waiting for the child"),
    ];
    for (op, what) in steps {
        let mock = Mock::new();
        mock.fail(op, 1, 1307);
        let (code, stderr) = main_with(&mock, ww_args(&["x"]));
        assert_eq!(code, RUNNER_FAILURE_EXIT, "{op:?}");
        assert_eq!(
            stderr,
            format!(
                "stockade-winrun: {what}: {} failed with Win32 error 1307 (0x0000051b)\n",
                op.api()
            ),
            "{op:?}"
        );
        assert_eq!(stderr.lines().count(), 1);
        assert_eq!(mock.state().open.len(), 0, "{op:?}: a handle leaked");
        let spawned = mock.calls().iter().any(|c| matches!(c, Call::Spawn { .. }));
        assert_eq!(spawned, matches!(op, Op::Spawn | Op::Wait), "{op:?}");
        // The rule the rung hands out recognises exactly this output.
        let rule = failure_rule();
        assert_eq!(
            rule.fatal_line(Some(code), stderr.as_bytes()).as_deref(),
            Some(stderr.trim_end()),
        );
    }
}

#[test]
fn a_token_without_a_logon_sid_fails_closed() {
    let mock = Mock::new();
    mock.state().logon = None;
    let (code, stderr) = main_with(&mock, ww_args(&["x"]));
    assert_eq!(code, RUNNER_FAILURE_EXIT);
    assert!(stderr.starts_with("stockade-winrun: "), "{stderr}");
    assert!(stderr.contains("no logon SID"), "{stderr}");
    assert!(
        !mock
            .calls()
            .iter()
            .any(|c| matches!(c, Call::CreateRestrictedToken { .. }))
    );
    assert_eq!(mock.state().open.len(), 0);
}

#[test]
fn refusals_before_any_win32_call_open_nothing() {
    // A bad argv, an unrepresentable program name, a bad environment.
    let mock = Mock::new();
    let (code, stderr) = main_with(&mock, os(&["--mode", "read-only"]));
    assert_eq!(code, RUNNER_FAILURE_EXIT);
    assert!(stderr.starts_with("stockade-winrun: usage: "), "{stderr}");
    let (code, _) = main_with(&mock, os(&["--mode", "read-only", "--", r#"a"b"#]));
    assert_eq!(code, RUNNER_FAILURE_EXIT);
    let mut err = Vec::new();
    let bad_env = vec![(OsString::from("A=B"), OsString::from("1"))];
    let args = os(&["stockade-winrun", "--mode", "read-only", "--", "x"]);
    assert_eq!(
        run_main(&mock, args, bad_env, &mut err),
        RUNNER_FAILURE_EXIT
    );
    assert_eq!(mock.calls(), []);
}

#[test]
fn the_failure_line_is_one_line_whatever_the_paths_hold() {
    let e = Error::RunnerMissing {
        path: "C:\\a\r\nstockade-winrun: forged".into(),
    };
    let line = failure_line(&e);
    assert!(line.starts_with(FAILURE_PREFIX));
    assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
}

#[test]
fn the_rule_gates_on_the_reserved_code_and_the_prefix() {
    let rule = failure_rule();
    let line = b"stockade-winrun: creating the restricted token: x\n";
    assert!(rule.fatal_line(Some(RUNNER_FAILURE_EXIT), line).is_some());
    // A child exiting with the reserved code, without the line.
    assert!(
        rule.fatal_line(Some(RUNNER_FAILURE_EXIT), b"Access is denied.\r\n")
            .is_none()
    );
    // A child printing the prefix, with its own code.
    assert!(rule.fatal_line(Some(1), line).is_none());
    assert!(rule.fatal_line(Some(125), line).is_none());
    // The code is far from anything a program or a crash reports.
    const {
        assert!(RUNNER_FAILURE_EXIT > 0xFFFF);
        assert!(RUNNER_FAILURE_EXIT & 0xFF == 125);
        assert!(
            RUNNER_FAILURE_EXIT as u32 & 0xC000_0000 == 0,
            "success severity"
        );
        assert!(
            RUNNER_FAILURE_EXIT as u32 & 0x2000_0000 != 0,
            "customer bit"
        );
    }
}

#[cfg(not(windows))]
#[test]
fn off_windows_the_runner_says_so_and_exits_reserved() {
    assert_eq!(
        main(os(&["stockade-winrun", "--mode", "read-only", "--", "x"])),
        RUNNER_FAILURE_EXIT
    );
    assert_eq!(
        ONLY_ON_WINDOWS,
        "stockade-winrun: only available on Windows"
    );
}

#[test]
fn the_mock_paths_are_real_windows_paths() {
    // Guard for the fixtures above: both are absolute and apart.
    assert!(!paths::same_or_within(Path::new(TEMP), Path::new(WS)).unwrap());
    assert!(!paths::same_or_within(Path::new(WS), Path::new(TEMP)).unwrap());
}
