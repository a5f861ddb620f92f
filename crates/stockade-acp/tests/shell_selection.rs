//! `[bash] shell` end to end at the composition: the shell the config
//! selects is the one the bash tool's executor hands the provider, and the
//! one its description names.
//!
//! The provider here is an operator `runner_command` pointing at a script
//! that records its argv and exits 0: it only observes what the executor
//! handed over (fault-injection style). It confines nothing, and nothing
//! here claims it does.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stockade_acp::compose::{Composition, EditorHooks, Environment, Sessions, compose};
use stockade_agent::{Delegations, Fixed, Tool, ToolContext};
use stockade_config::Config;
use stockade_core::ApprovalOutcome;
use stockade_session::SessionStore;

struct Scene {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    record: PathBuf,
    runner: PathBuf,
}

/// Outside every temp root: a runner beneath a writable root is refused.
fn scene() -> Scene {
    let base = stockade_testkit::scratch_base(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("acp-shell-")
        .tempdir_in(base)
        .unwrap();
    let root = dir.path().to_path_buf();
    let ws = root.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let record = root.join("argv");
    let runner = root.join("recording-runner");
    // Written by a child process: a write fd held here while another
    // test's spawn forks would make exec fail with ETXTBSY.
    let body = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\n",
        record.display()
    );
    let status = std::process::Command::new("/bin/sh")
        .args(["-c", "printf '%s' \"$1\" > \"$2\"", "sh", &body])
        .arg(&runner)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
    Scene {
        _dir: dir,
        root,
        ws,
        record,
        runner,
    }
}

fn composed(scene: &Scene, bash: &str) -> (Composition, SessionStore) {
    let text = format!(
        "[sandbox]\nrunner_command = [{:?}]\n[policy]\nmode = \"workspace-write\"\nnetwork = \"deny\"\n[bash]\n{bash}",
        scene.runner.display().to_string()
    );
    let config = Config::parse(&scene.root.join("stockade.toml"), &text).unwrap();
    let env = Environment {
        config_dir: scene.root.clone(),
        ..Environment::default()
    };
    let store = SessionStore::new(scene.root.join("sessions"));
    let sessions = Sessions {
        store: store.clone(),
        delegations: Arc::new(Delegations::default()),
    };
    let comp = compose(
        &config,
        &env,
        Arc::new(Fixed(ApprovalOutcome::Rejected)),
        EditorHooks::default(),
        &sessions,
    )
    .unwrap();
    (comp, store)
}

fn bash_tool(comp: &Composition) -> Arc<dyn Tool> {
    comp.agent
        .tools()
        .iter()
        .find(|t| t.name() == "bash")
        .cloned()
        .expect("the shell tool keeps its name")
}

/// Run `command` through the composed bash tool; the argv the recording
/// runner got after its own arguments (the last `--`).
async fn handed_over(scene: &Scene, comp: &Composition, store: &SessionStore) -> Vec<String> {
    let _ = std::fs::remove_file(&scene.record);
    let ctx = ToolContext {
        session: Some(store.create(&scene.ws).unwrap()),
        call_id: "call-1".into(),
    };
    let out = bash_tool(comp)
        .call(
            &ctx,
            serde_json::json!({ "command": "Write-Output hi", "description": "say hi" }),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    let recorded = std::fs::read_to_string(&scene.record).unwrap();
    let args: Vec<String> = recorded.lines().map(str::to_owned).collect();
    let at = args
        .iter()
        .rposition(|a| a == "--")
        .expect("the runner's --");
    args[at + 1..].to_vec()
}

#[tokio::test]
async fn shell_pwsh_hands_pwsh_no_profile_command_to_the_provider() {
    let s = scene();
    let (comp, store) = composed(&s, "shell = \"pwsh\"\n");
    assert_eq!(
        handed_over(&s, &comp, &store).await,
        ["pwsh", "-NoProfile", "-Command", "Write-Output hi"]
    );
    let tool = bash_tool(&comp);
    assert!(
        tool.description().starts_with("Run a PowerShell command"),
        "{}",
        tool.description()
    );
    assert_eq!(
        tool.schema()["properties"]["command"]["description"],
        "The PowerShell command to run."
    );
    // The MCP launcher shares the executor, and with it the interpreter.
    match &comp.mcp {
        stockade_mcp::Launcher::Sandboxed(e) => {
            use stockade_shell::ShellExecutor as _;
            assert_eq!(e.interpreter().shell(), stockade_shell::Shell::Pwsh);
        }
        _ => panic!("a confining composition launches MCP servers confined"),
    }
}

#[tokio::test]
async fn shell_powershell_hands_windows_powershell_to_the_provider() {
    let s = scene();
    let (comp, store) = composed(&s, "shell = \"powershell\"\n");
    assert_eq!(
        handed_over(&s, &comp, &store).await,
        [
            "powershell.exe",
            "-NoProfile",
            "-Command",
            "Write-Output hi"
        ]
    );
    assert!(
        bash_tool(&comp)
            .description()
            .starts_with("Run a Windows PowerShell command")
    );
}

/// Off Windows `auto` (and leaving the key out) is bash, as before.
#[tokio::test]
async fn auto_and_bash_hand_bash_c_to_the_provider_here() {
    for bash in ["", "shell = \"auto\"\n", "shell = \"bash\"\n"] {
        let s = scene();
        let (comp, store) = composed(&s, bash);
        assert_eq!(
            handed_over(&s, &comp, &store).await,
            ["bash", "-c", "Write-Output hi"],
            "{bash:?}"
        );
        assert!(
            bash_tool(&comp)
                .description()
                .starts_with("Run a bash command.")
        );
    }
}

/// The unconfined composition runs the chosen interpreter itself; only its
/// description is read here (no PowerShell is assumed on this host).
#[test]
fn the_unconfined_composition_selects_the_shell_too() {
    let s = scene();
    let config = Config::parse(
        &s.root.join("stockade.toml"),
        "[bash]\nexecutor = \"local\"\nshell = \"pwsh\"\n[fs]\nprovider = \"local\"\n",
    )
    .unwrap();
    let env = Environment {
        config_dir: s.root.clone(),
        ..Environment::default()
    };
    let sessions = Sessions {
        store: SessionStore::new(s.root.join("sessions")),
        delegations: Arc::new(Delegations::default()),
    };
    let comp = compose(
        &config,
        &env,
        Arc::new(Fixed(ApprovalOutcome::Rejected)),
        EditorHooks::default(),
        &sessions,
    )
    .unwrap();
    assert!(comp.provider.is_none());
    let d = bash_tool(&comp).description();
    assert!(d.starts_with("Run a PowerShell command"), "{d}");
    assert!(d.ends_with("(not sandboxed in this deployment)."), "{d}");
    // Ending a session with nothing mounted is a no-op.
    comp.end_session("00112233445566778899aabbccddeeff");
}
