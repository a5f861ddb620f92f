//! The network knob in the agent layer: resolution (escalation > session
//! override > configured default > the mode's default, `danger-full-access`
//! always `allow`), presets over both knobs, the policy context's network
//! line, and the bash tool's one approved wider-network retry, checked at
//! the provider.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use common::world;
use serde_json::json;
use stockade_agent::{
    Answerer, ApprovalRequest, ApprovalService, BashTool, EscalationGate, Fixed, PolicyContext,
    PolicyService, PresetService, Tool, ToolContext, ToolOutput,
};
use stockade_core::texts::network::{self as network_texts, Widening};
use stockade_core::{
    ApprovalOutcome, ApprovalPolicy, Confined, NetworkMode, NetworkPolicy, SandboxMode,
    SandboxPolicy, SandboxProvider, SandboxUnavailable, texts,
};
use stockade_session::{Event, KnobSource, Session};
use stockade_shell::{BoxFuture, SandboxedExecutor, ShellExecutor, UnconfinedExecutor};

fn hosts() -> Vec<String> {
    vec!["crates.io".into(), "*.github.com".into()]
}

#[test]
fn the_network_resolves_escalation_over_override_over_default() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    // No [policy] network: the mode's default, per mode.
    for mode in SandboxMode::ALL {
        let policy = PolicyService::new(*mode, &w.ws);
        let want = NetworkMode::default_for(*mode);
        assert_eq!(policy.effective_network(None), want, "{mode}");
        assert_eq!(policy.effective_network(Some(&s)), want, "{mode}");
        assert_eq!(policy.resolve(Some(&s), None).network.mode, want, "{mode}");
    }
    assert_eq!(
        PolicyService::new(SandboxMode::ReadOnly, &w.ws).effective_network(None),
        NetworkMode::Deny
    );
    assert_eq!(
        PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws).effective_network(None),
        NetworkMode::AllowListed
    );

    let policy = PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws)
        .with_default_network(Some(NetworkMode::Deny))
        .with_allowed_hosts(hosts());
    // The configured default beats the mode's.
    let p = policy.resolve(Some(&s), None);
    assert_eq!(p.network, NetworkPolicy::new(NetworkMode::Deny, hosts()));
    // The session override beats the configured default.
    s.set_network_mode(NetworkMode::AllowListed, KnobSource::User)
        .unwrap();
    assert_eq!(
        policy.resolve(Some(&s), None).network.mode,
        NetworkMode::AllowListed
    );
    // An escalation beats the override, for its own call.
    let p = policy.resolve_with_network(Some(&s), None, Some(NetworkMode::Allow));
    assert_eq!(p.network.mode, NetworkMode::Allow);
    assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(
        policy.resolve(Some(&s), None).network.mode,
        NetworkMode::AllowListed
    );
    // A granted file mode leaves the network where the session has it.
    s.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    let p = policy.resolve(Some(&s), Some(SandboxMode::WorkspaceWrite));
    assert_eq!(
        (p.mode, p.network.mode),
        (SandboxMode::WorkspaceWrite, NetworkMode::AllowListed)
    );
    // danger-full-access is always allow: granted, overridden or default,
    // whatever the network knob says.
    let p = policy.resolve(Some(&s), Some(SandboxMode::DangerFullAccess));
    assert_eq!(p.network.mode, NetworkMode::Allow);
    s.set_network_mode(NetworkMode::Deny, KnobSource::User)
        .unwrap();
    s.set_sandbox_mode(SandboxMode::DangerFullAccess, KnobSource::User)
        .unwrap();
    assert_eq!(policy.effective_network(Some(&s)), NetworkMode::Allow);
    assert_eq!(
        policy.resolve(Some(&s), None).network.mode,
        NetworkMode::Allow
    );
    let dfa = PolicyService::new(SandboxMode::DangerFullAccess, &w.ws)
        .with_default_network(Some(NetworkMode::Deny));
    assert_eq!(dfa.resolve(None, None).network.mode, NetworkMode::Allow);
    // The hosts ride every policy; left alone, the default list.
    assert_eq!(policy.resolve(None, None).network.allowed_hosts, hosts());
    assert_eq!(
        PolicyService::new(SandboxMode::ReadOnly, &w.ws)
            .resolve(None, None)
            .network
            .allowed_hosts,
        stockade_config::default_allowed_hosts()
    );
}

#[test]
fn a_resumed_session_keeps_its_network_override() {
    let w = world();
    let policy = PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws);
    let id = {
        let s = w.store.create(&w.ws).unwrap();
        s.set_network_mode(NetworkMode::Deny, KnobSource::User)
            .unwrap();
        s.id().clone()
    };
    let s = w.store.open(&id).unwrap();
    assert_eq!(policy.effective_network(Some(&s)), NetworkMode::Deny);
}

// ---- presets --------------------------------------------------------------

fn approval(outcome: ApprovalOutcome) -> Arc<ApprovalService> {
    Arc::new(ApprovalService::new(
        ApprovalPolicy::Ask,
        vec![Arc::new(Fixed(outcome))],
    ))
}

fn knob_events(s: &Session) -> Vec<String> {
    s.with_records(|r| {
        r.iter()
            .filter_map(|r| match &r.event {
                Event::SandboxMode { mode, .. } => Some(format!("mode {mode}")),
                Event::SandboxNetwork { mode, .. } => Some(format!("network {mode}")),
                Event::ApprovalPolicy { policy, .. } => Some(format!("approval {policy}")),
                _ => None,
            })
            .collect()
    })
}

#[test]
fn a_preset_sets_both_knobs_each_only_when_it_changes() {
    let w = world();
    let policy = Arc::new(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws));
    let approval = approval(ApprovalOutcome::Rejected);
    let presets = PresetService::new(
        PresetService::default_table(),
        policy.clone(),
        Some(approval.clone()),
        true,
    )
    .unwrap();
    let names: Vec<(&str, NetworkMode)> = presets
        .presets()
        .iter()
        .map(|p| (p.name.as_str(), p.network))
        .collect();
    assert_eq!(
        names,
        [
            ("read-only", NetworkMode::Deny),
            ("workspace-write", NetworkMode::AllowListed),
            ("danger-full-access", NetworkMode::Allow)
        ]
    );
    let s = w.store.create(&w.ws).unwrap();
    assert_eq!(presets.current(&s), "workspace-write");
    // The mode's default network is the preset's: only the mode is recorded.
    assert_eq!(presets.select(&s, "read-only").unwrap(), 1);
    assert_eq!(policy.effective_network(Some(&s)), NetworkMode::Deny);
    assert_eq!(presets.current(&s), "read-only");
    // A network override makes the combination custom, and a preset brings
    // the network back through its own setter.
    s.set_network_mode(NetworkMode::Allow, KnobSource::User)
        .unwrap();
    assert_eq!(presets.current(&s), "custom");
    assert_eq!(presets.select(&s, "read-only").unwrap(), 1);
    assert_eq!(presets.current(&s), "read-only");
    assert_eq!(presets.select(&s, "workspace-write").unwrap(), 2);
    assert_eq!(policy.effective_network(Some(&s)), NetworkMode::AllowListed);
    assert_eq!(presets.select(&s, "danger-full-access").unwrap(), 2);
    assert_eq!(policy.effective_network(Some(&s)), NetworkMode::Allow);
    assert_eq!(presets.select(&s, "danger-full-access").unwrap(), 0);
    assert_eq!(
        knob_events(&s),
        [
            "mode read-only",
            "network allow",
            "network deny",
            "mode workspace-write",
            "network allow-listed",
            "mode danger-full-access",
            "approval never",
        ]
    );
    // Every preset event names its preset.
    assert!(s.with_records(|r| r.iter().all(|r| match &r.event {
        Event::SandboxNetwork { source, .. } if source == &KnobSource::User => true,
        Event::SandboxNetwork { source, .. }
        | Event::SandboxMode { source, .. }
        | Event::ApprovalPolicy { source, .. } => matches!(source, KnobSource::Preset { .. }),
        _ => true,
    })));

    // A table entry's network: written, or the mode's default.
    let table: stockade_config::PresetsSection = toml::from_str(
        "[[preset]]\nname = \"offline\"\nmode = \"workspace-write\"\nnetwork = \"deny\"\napproval = \"ask\"\n[[preset]]\nname = \"ww\"\nmode = \"workspace-write\"\napproval = \"ask\"\n",
    )
    .unwrap();
    let nets: Vec<NetworkMode> = table.preset.iter().map(|p| p.network).collect();
    assert_eq!(nets, [NetworkMode::Deny, NetworkMode::AllowListed]);
    let e = toml::from_str::<stockade_config::PresetsSection>(
        "[[preset]]\nname = \"x\"\nmode = \"read-only\"\nnetwork = \"open\"\napproval = \"ask\"\n",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("expected one of deny, allow-listed, allow"),
        "{e}"
    );
    let e = toml::from_str::<stockade_config::PresetsSection>(
        "[[preset]]\nname = \"x\"\nmode = \"read-only\"\nnetwrk = \"deny\"\napproval = \"ask\"\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown field `netwrk`"), "{e}");

    // A narrower network beside danger-full-access could never be in force.
    let bad = vec![
        stockade_agent::Preset::new("yolo", SandboxMode::DangerFullAccess, ApprovalPolicy::Never)
            .with_network(NetworkMode::Deny),
    ];
    let e = PresetService::new(bad, policy, Some(approval), true)
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "preset \"yolo\": danger-full-access runs unconfined, so its network is always \"allow\", never \"deny\""
    );
}

// ---- the policy context ---------------------------------------------------

#[test]
fn the_policy_context_states_the_network_and_its_source() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let approval = approval(ApprovalOutcome::Rejected);
    let render = |policy: PolicyService, s: &Session| {
        PolicyContext::new(Arc::new(policy), Some(approval.clone()), true)
            .with_fenced_files(true)
            .render(s)
            .replace(&w.ws.display().to_string(), "<workspace>")
    };
    let listed = render(
        PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws).with_allowed_hosts(hosts()),
        &s,
    );
    assert!(
        listed.contains("Network: allow-listed (configured default): only these hosts, through a proxy: crates.io, *.github.com."),
        "{listed}"
    );
    insta::assert_snapshot!("policy_context_network_allow_listed", listed);
    let deny = render(PolicyService::new(SandboxMode::ReadOnly, &w.ws), &s);
    insta::assert_snapshot!("policy_context_network_deny", deny);
    let none = render(
        PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws).with_allowed_hosts(vec![]),
        &s,
    );
    assert!(
        none.contains("none are allowed: no network except loopback"),
        "{none}"
    );
    let dfa = render(PolicyService::new(SandboxMode::DangerFullAccess, &w.ws), &s);
    assert!(
        dfa.contains("Network: allow (danger-full-access): any host this machine can reach."),
        "{dfa}"
    );

    s.set_network_mode(NetworkMode::Allow, KnobSource::User)
        .unwrap();
    let overridden = render(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws), &s);
    insta::assert_snapshot!("policy_context_network_allow_override", overridden);
    // danger-full-access wins over the knob, and says so.
    s.set_network_mode(NetworkMode::Deny, KnobSource::User)
        .unwrap();
    assert!(
        render(PolicyService::new(SandboxMode::DangerFullAccess, &w.ws), &s)
            .contains("Network: allow (danger-full-access)")
    );

    // Commands not confined: nothing is claimed about the network.
    let files_only = PolicyContext::new(
        Arc::new(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws)),
        None,
        false,
    )
    .with_fenced_files(true)
    .render(&s);
    assert!(!files_only.contains("Network"), "{files_only}");

    // A switch of the network alone is a new policy message.
    let ctxm = PolicyContext::new(
        Arc::new(PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws)),
        Some(approval.clone()),
        true,
    );
    let t = w.store.create(&w.ws).unwrap();
    assert!(ctxm.reconcile(&t).unwrap().is_some());
    assert!(ctxm.reconcile(&t).unwrap().is_none());
    t.set_network_mode(NetworkMode::Deny, KnobSource::User)
        .unwrap();
    let added = ctxm.reconcile(&t).unwrap().unwrap();
    assert!(
        matches!(&added.event, Event::Message { content, .. }
            if content.contains("Network: deny (set for this session): no network except loopback inside the sandbox.")),
        "{added:?}"
    );
}

// ---- escalation -----------------------------------------------------------

/// Records the policy each confine is asked for, then refuses: nothing runs.
#[derive(Default)]
struct Recording(Mutex<Vec<SandboxPolicy>>);

impl SandboxProvider for Recording {
    fn confine(
        &self,
        _: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        self.0.lock().unwrap().push(policy.clone());
        Err(SandboxUnavailable::single("recording", "records only"))
    }
}

/// Remembers every request it is asked, and allows it.
#[derive(Default)]
struct Asked(Mutex<Vec<ApprovalRequest>>);

impl Answerer for Asked {
    fn answer<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalOutcome>> {
        self.0.lock().unwrap().push(r.clone());
        Box::pin(async { Some(ApprovalOutcome::AllowedOnce) })
    }
}

struct Rig {
    tool: BashTool,
    provider: Arc<Recording>,
}

fn rig(policy: PolicyService, answerer: Option<Arc<dyn Answerer>>) -> Rig {
    let policy = Arc::new(policy);
    let provider = Arc::new(Recording::default());
    let exec: Arc<dyn ShellExecutor> = Arc::new(SandboxedExecutor::new(
        provider.clone(),
        policy.resolve(None, None),
    ));
    let approval = answerer.map(|a| Arc::new(ApprovalService::new(ApprovalPolicy::Ask, vec![a])));
    Rig {
        tool: BashTool::new(exec, policy, EscalationGate::new(approval)),
        provider,
    }
}

fn ctx(s: &Session, call: &str) -> ToolContext {
    ToolContext {
        session: Some(s.clone()),
        call_id: call.into(),
    }
}

fn plain() -> serde_json::Value {
    json!({ "command": "curl -sI https://example.com", "description": "fetch a page" })
}

fn wider(network: Option<&str>, mode: Option<&str>) -> serde_json::Value {
    let mut v = plain();
    if let Some(n) = network {
        v["network"] = json!(n);
    }
    if let Some(m) = mode {
        v["sandbox_permissions"] = json!(m);
    }
    v["justification"] = json!("the task needs that host");
    v
}

fn asks(s: &Session) -> Vec<String> {
    s.with_records(|r| {
        r.iter()
            .filter_map(|r| match &r.event {
                Event::ApprovalAsked {
                    call_id,
                    target,
                    network,
                    ..
                } => Some(format!(
                    "{call_id} {target} {}",
                    network.map_or("-".to_owned(), |n| n.to_string())
                )),
                _ => None,
            })
            .collect()
    })
}

#[tokio::test]
async fn a_granted_network_widens_its_own_call_only() {
    let w = world();
    let asked = Arc::new(Asked::default());
    let r = rig(
        PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws).with_allowed_hosts(hosts()),
        Some(asked.clone()),
    );
    let s = w.store.create(&w.ws).unwrap();
    r.tool.call(&ctx(&s, "before"), plain()).await;
    r.tool
        .call(&ctx(&s, "granted"), wider(Some("allow"), None))
        .await;
    r.tool.call(&ctx(&s, "after"), plain()).await;
    // Both at once: one ask, both widened.
    s.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    r.tool
        .call(
            &ctx(&s, "both"),
            wider(Some("allow-listed"), Some("workspace-write")),
        )
        .await;
    r.tool.call(&ctx(&s, "last"), plain()).await;

    let seen: Vec<(String, NetworkMode)> = r
        .provider
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|p| (p.mode.to_string(), p.network.mode))
        .collect();
    assert_eq!(
        seen,
        [
            ("workspace-write".to_owned(), NetworkMode::AllowListed),
            ("workspace-write".to_owned(), NetworkMode::Allow),
            ("workspace-write".to_owned(), NetworkMode::AllowListed),
            ("workspace-write".to_owned(), NetworkMode::AllowListed),
            ("read-only".to_owned(), NetworkMode::Deny),
        ]
    );
    for p in r.provider.0.lock().unwrap().iter() {
        assert_eq!(p.network.allowed_hosts, hosts());
    }
    // Nothing was persisted: no knob moved but the two set above.
    assert_eq!(s.network_override(), None);
    assert_eq!(
        asks(&s),
        [
            "granted workspace-write allow",
            "both workspace-write allow-listed"
        ]
    );
    let shown: Vec<String> = asked
        .0
        .lock()
        .unwrap()
        .iter()
        .map(ApprovalRequest::under)
        .collect();
    assert_eq!(
        shown,
        [
            "\"workspace-write\" with network \"allow\"",
            "\"workspace-write\" with network \"allow-listed\""
        ]
    );
}

#[tokio::test]
async fn a_network_target_not_wider_asks_no_one_and_runs_nothing() {
    let w = world();
    let asked = Arc::new(Asked::default());
    let r = rig(
        PolicyService::new(SandboxMode::WorkspaceWrite, &w.ws),
        Some(asked.clone()),
    );
    let s = w.store.create(&w.ws).unwrap();
    let out = r
        .tool
        .call(&ctx(&s, "same"), wider(Some("allow-listed"), None))
        .await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        network_texts::not_wider(NetworkMode::AllowListed, NetworkMode::AllowListed)
    );
    s.set_network_mode(NetworkMode::Allow, KnobSource::User)
        .unwrap();
    let out = r
        .tool
        .call(&ctx(&s, "narrower"), wider(Some("allow-listed"), None))
        .await;
    assert_eq!(
        out.content,
        network_texts::not_wider(NetworkMode::AllowListed, NetworkMode::Allow)
    );
    // A wider network beside a file mode that is not wider: the file
    // mode's own refusal, and still no ask.
    let out = r
        .tool
        .call(
            &ctx(&s, "mode"),
            wider(Some("allow"), Some("workspace-write")),
        )
        .await;
    assert_eq!(
        out.content,
        texts::not_wider(SandboxMode::WorkspaceWrite, SandboxMode::WorkspaceWrite)
    );
    assert!(asked.0.lock().unwrap().is_empty());
    assert!(asks(&s).is_empty());
    assert!(r.provider.0.lock().unwrap().is_empty(), "nothing ran");
}

#[tokio::test]
async fn every_non_grant_outcome_of_a_network_request_runs_nothing_and_says_so() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let only = Widening {
        mode: None,
        network: NetworkMode::Allow,
    };
    let cases: Vec<(Option<Arc<dyn Answerer>>, String)> = vec![
        (
            Some(Arc::new(Fixed(ApprovalOutcome::Rejected))),
            format!(
                "{}\n{}",
                network_texts::rejected(only),
                texts::REJECTED_NO_REASK
            ),
        ),
        (
            Some(Arc::new(Fixed(ApprovalOutcome::Cancelled))),
            network_texts::cancelled(only),
        ),
        (
            Some(Arc::new(Fixed(ApprovalOutcome::Unavailable))),
            network_texts::unavailable(only),
        ),
        (None, network_texts::no_approval_service(only)),
    ];
    for (i, (answerer, want)) in cases.into_iter().enumerate() {
        // A session per case: within one, the first rejection would answer
        // every later request for the same command (no re-ask).
        let s = w.store.create(&w.ws).unwrap();
        let r = rig(PolicyService::new(SandboxMode::ReadOnly, &w.ws), answerer);
        let out = r
            .tool
            .call(&ctx(&s, &format!("n{i}")), wider(Some("allow"), None))
            .await;
        assert!(out.is_error, "case {i}");
        assert_eq!(out.content, want, "case {i}");
        assert!(r.provider.0.lock().unwrap().is_empty(), "case {i} ran");
    }
    // Both at once reads as both.
    let r = rig(
        PolicyService::new(SandboxMode::ReadOnly, &w.ws),
        Some(Arc::new(Fixed(ApprovalOutcome::Rejected))),
    );
    let out = r
        .tool
        .call(
            &ctx(&s, "both"),
            wider(Some("allow"), Some("workspace-write")),
        )
        .await;
    assert!(
        out.content.starts_with(
            "the user rejected widening this command to \"workspace-write\" with network \"allow\""
        ),
        "{}",
        out.content
    );
    // No session, no justification.
    let r = rig(
        PolicyService::new(SandboxMode::ReadOnly, &w.ws),
        Some(Arc::new(Fixed(ApprovalOutcome::AllowedOnce))),
    );
    let agentless = ToolContext {
        session: None,
        call_id: "x".into(),
    };
    let out = r.tool.call(&agentless, wider(Some("allow"), None)).await;
    assert_eq!(out.content, network_texts::no_session(only));
    let mut args = wider(Some("allow"), None);
    args["justification"] = json!(" ");
    let out = r.tool.call(&ctx(&s, "j"), args).await;
    assert_eq!(out.content, network_texts::MISSING_JUSTIFICATION);
    assert!(r.provider.0.lock().unwrap().is_empty());
}

#[tokio::test]
async fn network_is_no_parameter_where_commands_are_not_confined() {
    let w = world();
    let s = w.store.create(&w.ws).unwrap();
    let tool = BashTool::new(
        Arc::new(UnconfinedExecutor::default()),
        Arc::new(PolicyService::new(SandboxMode::ReadOnly, &w.ws)),
        EscalationGate::new(None),
    );
    assert!(tool.schema()["properties"].get("network").is_none());
    let mut args = json!({ "command": "true", "description": "x", "network": "allow" });
    let out: ToolOutput = tool.call(&ctx(&s, "u"), args.clone()).await;
    assert!(out.is_error);
    assert_eq!(out.content, network_texts::NOT_OFFERED);
    args["network"] = json!("open");
    let out = tool.call(&ctx(&s, "v"), args).await;
    assert!(
        out.content.starts_with("invalid arguments for bash"),
        "{}",
        out.content
    );
}

// ---- with the real runner ---------------------------------------------------

/// The real Landlock backend, as the other agent suites use it.
fn landlock() -> Option<Arc<stockade_local::LocalProvider>> {
    let launcher = stockade_testkit::built_launcher();
    if !stockade_testkit::require("the built landlock-run", launcher.is_some()) {
        return None;
    }
    let s = stockade_local::LocalSettings {
        backend: stockade_local::BackendPreference::Landlock,
        launcher_path: launcher,
        ..Default::default()
    };
    Some(Arc::new(stockade_local::LocalProvider::new(s).unwrap()))
}

/// What curl prints when the name cannot be resolved: a refusal where the
/// network is narrowed, an ordinary failure where it is not. Printed, not
/// fetched, so the test needs no resolver and no curl.
const REFUSED: &str = "echo 'curl: (6) Could not resolve host: registry.example' >&2; exit 6";

#[tokio::test]
async fn a_network_denial_reads_marker_instruction_and_hint_and_a_granted_retry_does_not() {
    let Some(provider) = landlock() else {
        return;
    };
    let w = world();
    let policy = Arc::new(PolicyService::new(SandboxMode::ReadOnly, &w.ws));
    let exec: Arc<dyn ShellExecutor> =
        Arc::new(SandboxedExecutor::new(provider, policy.resolve(None, None)));
    let tool = BashTool::new(
        exec,
        policy,
        EscalationGate::new(Some(approval(ApprovalOutcome::AllowedOnce))),
    );
    let s = w.store.create(&w.ws).unwrap();
    let args = json!({ "command": REFUSED, "description": "fetch" });
    let out = tool.call(&ctx(&s, "denied"), args.clone()).await;
    assert!(out.is_error);
    let hint = network_texts::escalation_hint(NetworkMode::Deny).unwrap();
    let first: Vec<&str> = out.content.lines().take(3).collect();
    assert_eq!(
        first,
        [
            texts::network_denial_marker(Some("registry.example"), NetworkMode::Deny).as_str(),
            texts::NETWORK_DENIAL_INSTRUCTION,
            hint.as_str()
        ],
        "{}",
        out.content
    );
    insta::assert_snapshot!("denied_network_bash_result", out.content);

    let mut retry = args;
    retry["network"] = json!("allow");
    retry["justification"] = json!("the task needs the registry");
    let out = tool.call(&ctx(&s, "granted"), retry).await;
    assert!(
        !out.content.contains("[sandbox: network access"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("sandbox: read-only (landlock, full enforcement), network allow granted by the user for this call only"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_network_beside_danger_full_access_is_not_asked_for_separately() {
    let w = world();
    let asked = Arc::new(Asked::default());
    let r = rig(
        PolicyService::new(SandboxMode::ReadOnly, &w.ws),
        Some(asked.clone()),
    );
    let s = w.store.create(&w.ws).unwrap();
    let args = json!({
        "command": "true",
        "description": "nothing",
        "sandbox_permissions": "danger-full-access",
        "network": "allow-listed",
        "justification": "the task needs everything"
    });
    let out = r.tool.call(&ctx(&s, "dfa"), args).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains(
            "sandbox: danger-full-access (unconfined), granted by the user for this call only"
        ),
        "{}",
        out.content
    );
    let shown: Vec<String> = asked
        .0
        .lock()
        .unwrap()
        .iter()
        .map(ApprovalRequest::under)
        .collect();
    assert_eq!(shown, ["\"danger-full-access\""]);
    assert_eq!(asks(&s), ["dfa danger-full-access -"]);
    assert!(r.provider.0.lock().unwrap().is_empty(), "never confined");
}
