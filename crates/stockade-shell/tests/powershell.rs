//! Both PowerShells through the sandboxed executor: the argv handed to the
//! provider and the .NET/Win32 denial dialect read from their stderr. The
//! provider here only records and "runs" a refused PowerShell as the Windows
//! rung would report it (fault injection, not confinement).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};

use stockade_core::{
    Confined, Enforcement, ExecutionPolicy, SandboxMode, SandboxPolicy, SandboxProvider,
    SandboxUnavailable,
};
use stockade_shell::{Interpreter, SandboxedExecutor, Shell, ShellExecutor, ShellRequest};

/// Records each argv and hands back a command that prints `line` on stderr.
struct Refusing {
    seen: Mutex<Vec<Vec<OsString>>>,
    line: &'static str,
}

impl SandboxProvider for Refusing {
    fn confine(
        &self,
        argv: &[OsString],
        _: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        self.seen.lock().unwrap().push(argv.to_vec());
        Ok(Confined {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "printf '%s\\n' \"$1\" >&2; exit 1".into(),
                "sh".into(),
                self.line.into(),
            ],
            backend: "restricted-token",
            enforcement: Enforcement::Partial,
            denial_signatures: vec![],
            runner_failure_rules: vec![],
            writable_roots: vec![],
            pass_fds: vec![],
            status: None,
            gaps: vec![],
            runner_env_remove: vec![],
            deny_read: vec![],
            read_only: vec![],
            network_log: None,
            after_run: None,
            direct: None,
        })
    }
}

fn ws() -> tempfile::TempDir {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    tempfile::Builder::new()
        .prefix("pwsh-")
        .tempdir_in(base)
        .unwrap()
}

#[tokio::test]
async fn both_powershells_hand_over_their_argv_and_read_the_dotnet_and_win32_dialects() {
    let dir = ws();
    let lines = [
        "Set-Content: Access to the path 'C:\\x' is denied.",
        "out-file : Access is denied.",
    ];
    for (interpreter, program) in [
        (Interpreter::pwsh(), "pwsh"),
        (Interpreter::powershell(), "powershell.exe"),
    ] {
        for line in lines {
            let provider = Arc::new(Refusing {
                seen: Mutex::default(),
                line,
            });
            let exec = SandboxedExecutor::new(
                provider.clone(),
                ExecutionPolicy::new(SandboxMode::WorkspaceWrite, dir.path()),
            )
            .with_interpreter(interpreter.clone());
            assert!(exec.interpreter().shell().is_powershell());
            let r = exec
                .run(exec.resolve(ShellRequest::new("Set-Content C:\\x hi", dir.path())))
                .await
                .unwrap();
            assert_eq!(
                provider.seen.lock().unwrap().as_slice(),
                [vec![
                    OsString::from(program),
                    "-NoProfile".into(),
                    "-Command".into(),
                    "Set-Content C:\\x hi".into()
                ]]
            );
            let facts = r.sandbox.unwrap();
            assert!(facts.denied, "{program}: {line}");
            assert_eq!(facts.enforcement, Some(Enforcement::Partial));
        }
    }
    // bash does not read that dialect.
    let provider = Arc::new(Refusing {
        seen: Mutex::default(),
        line: lines[0],
    });
    let bash = SandboxedExecutor::new(
        provider,
        ExecutionPolicy::new(SandboxMode::WorkspaceWrite, dir.path()),
    );
    assert_eq!(bash.interpreter().shell(), Shell::Bash);
    let r = bash
        .run(bash.resolve(ShellRequest::new("x", dir.path())))
        .await
        .unwrap();
    assert!(!r.sandbox.unwrap().denied);
}
