//! The session log through its public API, against real files.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;

use stockade_core::{ApprovalOutcome, ApprovalPolicy, NetworkMode, SandboxMode};
use stockade_session::{
    Event, KnobSource, Record, Role, Session, SessionError, SessionHeader, SessionId, SessionStore,
    ToolCall, TornTail,
};
use tempfile::TempDir;

fn store() -> (TempDir, SessionStore) {
    let tmp = tempfile::tempdir().unwrap();
    let store = SessionStore::new(tmp.path().join("state").join("sessions"));
    (tmp, store)
}

fn message(content: &str) -> Event {
    Event::Message {
        role: Role::User,
        content: content.into(),
        source: None,
    }
}

/// Every variant, with every optional field both set and unset.
fn every_event(parent: &SessionId) -> Vec<Event> {
    let mut events = vec![
        Event::Message {
            role: Role::User,
            content: "line one\nline two \"quoted\" \u{2713} \u{0}".into(),
            source: None,
        },
        Event::Message {
            role: Role::Assistant,
            content: "ok".into(),
            source: None,
        },
        Event::Message {
            role: Role::System,
            content: "sys".into(),
            source: None,
        },
        Event::Message {
            role: Role::Context,
            content: "policy".into(),
            source: Some("sandbox:policy".into()),
        },
        Event::AssistantToolCalls {
            content: "calling".into(),
            reasoning: Some("why".into()),
            calls: vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: r#"{"command":"touch a"}"#.into(),
            }],
        },
        Event::AssistantToolCalls {
            content: String::new(),
            reasoning: None,
            calls: vec![],
        },
        Event::ToolResult {
            call_id: "c1".into(),
            tool: "bash".into(),
            content: "Permission denied".into(),
            is_error: true,
        },
        Event::ToolResult {
            call_id: "c2".into(),
            tool: "job_output".into(),
            content: String::new(),
            is_error: false,
        },
    ];
    for target in SandboxMode::ALL {
        events.push(Event::ApprovalAsked {
            call_id: "c3".into(),
            tool: "bash".into(),
            reason: "write the build dir".into(),
            target: *target,
            network: None,
            subject: None,
            effect: None,
            writable_root: None,
        });
    }
    for network in NetworkMode::ALL {
        events.push(Event::ApprovalAsked {
            call_id: "c4".into(),
            tool: "bash".into(),
            reason: "fetch the crates".into(),
            target: SandboxMode::WorkspaceWrite,
            network: Some(*network),
            subject: None,
            effect: None,
            writable_root: None,
        });
    }
    for outcome in ApprovalOutcome::ALL {
        events.push(Event::ApprovalDecided {
            call_id: "c3".into(),
            tool: "bash".into(),
            outcome: *outcome,
        });
    }
    let sources = [
        KnobSource::Default,
        KnobSource::User,
        KnobSource::Preset {
            name: "workspace-write".into(),
        },
        KnobSource::Delegated {
            parent: parent.clone(),
        },
        KnobSource::Config,
    ];
    for (i, source) in sources.into_iter().enumerate() {
        events.push(Event::SandboxMode {
            mode: SandboxMode::ALL[i % 3],
            source: source.clone(),
        });
        events.push(Event::SandboxNetwork {
            mode: NetworkMode::ALL[i % 3],
            source: source.clone(),
        });
        events.push(Event::ApprovalPolicy {
            policy: ApprovalPolicy::ALL[i % 2],
            source,
        });
    }
    events
}

fn reopen(store: &SessionStore, session: Session) -> Session {
    let id = session.id().clone();
    // The last handle goes, so `open` replays the file rather than handing
    // back the live session.
    drop(session);
    store.open(&id).unwrap()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn replay_rebuilds_every_event_exactly() {
    let (_tmp, store) = store();
    let session = store.create("/work/project").unwrap();
    let parent = SessionId::generate().unwrap();
    let mut appended = Vec::new();
    for (event, seq) in every_event(&parent).into_iter().zip(1..) {
        let record = session.append(event.clone()).unwrap();
        assert_eq!(record.seq, seq);
        assert_eq!(record.event, event);
        appended.push(record);
    }
    assert_eq!(session.records(), appended);
    let header = session.header().clone();
    let path = session.path().to_path_buf();

    let resumed = reopen(&store, session);
    assert_eq!(resumed.header(), &header);
    assert_eq!(resumed.path(), path);
    assert_eq!(resumed.records(), appended);
    assert_eq!(resumed.replay_report().torn_tail, None);
    resumed.with_records(|rs| assert_eq!(rs, appended.as_slice()));

    // One header line plus one line per record, each a JSON object.
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), appended.len() + 1);
    let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(first["type"], "header");
    assert_eq!(first["id"], header.id.as_str());
    for (line, record) in lines[1..].iter().zip(&appended) {
        assert_eq!(&serde_json::from_str::<Record>(line).unwrap(), record);
    }
}

#[test]
fn a_torn_tail_is_reported_skipped_and_cut_off() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    for i in 0..3 {
        session.append(message(&format!("m{i}"))).unwrap();
    }
    let before = session.records();
    let path = session.path().to_path_buf();
    drop(session);
    let good_len = fs::metadata(&path).unwrap().len();
    let partial = br#"{"seq":4,"at_unix_ms":17,"event":{"type":"mess"#;
    append_raw(&path, partial);

    let session = store
        .open(&path_id(&path))
        .expect("a torn tail is not an error");
    assert_eq!(
        session.replay_report().torn_tail,
        Some(TornTail {
            line: 5,
            bytes: partial.len()
        })
    );
    assert_eq!(session.records(), before, "no earlier event is lost");
    assert_eq!(fs::metadata(&path).unwrap().len(), good_len);

    let next = session.append(message("after the crash")).unwrap();
    assert_eq!(next.seq, 4);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 5);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("\"content\":\"after the crash\"")
    );

    let again = reopen(&store, session);
    assert_eq!(again.replay_report().torn_tail, None);
    let mut expected = before;
    expected.push(next);
    assert_eq!(again.records(), expected);
}

#[test]
fn a_last_line_missing_only_its_newline_is_kept() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("a")).unwrap();
    session.append(message("b")).unwrap();
    let before = session.records();
    let path = session.path().to_path_buf();
    drop(session);
    let mut bytes = fs::read(&path).unwrap();
    assert_eq!(bytes.pop(), Some(b'\n'));
    fs::write(&path, &bytes).unwrap();

    let session = store.open(&path_id(&path)).unwrap();
    assert_eq!(session.replay_report().torn_tail, None);
    assert_eq!(session.records(), before);
    assert!(fs::read(&path).unwrap().ends_with(b"}\n"));
    session.append(message("c")).unwrap();
    let again = reopen(&store, session);
    assert_eq!(again.records().len(), 3);
    assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 4);
}

/// A crash can cut the last append anywhere. At every cut, opening keeps
/// every record that was whole, the next append lands on its own line, and
/// the file then reopens cleanly.
#[test]
fn a_crash_at_any_byte_of_the_last_append_recovers() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("first")).unwrap();
    session
        .set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    let kept = session.records();
    let path = session.path().to_path_buf();
    let id = session.id().clone();
    let before_last = fs::metadata(&path).unwrap().len() as usize;
    session
        .append(message("the last one, cut anywhere"))
        .unwrap();
    let full = session.records();
    drop(session);
    let bytes = fs::read(&path).unwrap();

    for cut in before_last..=bytes.len() {
        fs::write(&path, &bytes[..cut]).unwrap();
        let session = store.open(&id).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let whole = cut >= bytes.len() - 1;
        let torn = cut != before_last && !whole;
        assert_eq!(
            session.replay_report().torn_tail.is_some(),
            torn,
            "cut {cut}"
        );
        assert_eq!(
            session.records(),
            if whole { &full[..] } else { &kept[..] },
            "cut {cut}"
        );
        let next = session.append(message("next")).unwrap();
        assert_eq!(next.seq, if whole { 4 } else { 3 });
        let again = reopen(&store, session);
        assert_eq!(again.replay_report().torn_tail, None, "cut {cut}");
        assert_eq!(again.records().last(), Some(&next));
        drop(again);
    }
}

#[test]
fn a_corrupt_middle_line_is_an_error_naming_file_and_line() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    for i in 0..4 {
        session.append(message(&format!("m{i}"))).unwrap();
    }
    let path = session.path().to_path_buf();
    let id = session.id().clone();
    drop(session);
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[2] = "{\"seq\":2,\"at_unix_ms\":1,\"event\":{\"type\":\"mess".into();
    fs::write(&path, lines.join("\n") + "\n").unwrap();

    let err = store.open(&id).unwrap_err();
    match &err {
        SessionError::Corrupt { path: p, line, .. } => {
            assert_eq!(p, &path);
            assert_eq!(*line, 3);
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}:3: corrupt session log line: ", path.display())),
        "{text}"
    );
    // Nothing was repaired away: the damaged file is as it was.
    assert_eq!(fs::read_to_string(&path).unwrap(), lines.join("\n") + "\n");
}

#[test]
fn a_duplicated_line_is_corrupt() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("a")).unwrap();
    session.append(message("b")).unwrap();
    let path = session.path().to_path_buf();
    let id = session.id().clone();
    drop(session);
    let text = fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap().to_owned();
    append_raw(&path, format!("{last}\n").as_bytes());
    match store.open(&id).unwrap_err() {
        SessionError::Corrupt { line, reason, .. } => {
            assert_eq!(line, 4);
            assert!(reason.contains("seq 2 where 3 was expected"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bad_header_is_an_error_for_open_and_list() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("a")).unwrap();
    let path = session.path().to_path_buf();
    let id = session.id().clone();
    drop(session);
    let text = fs::read_to_string(&path).unwrap();
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();

    for bad in [
        "",
        "{}\n",
        "not json\n",
        "{\"type\":\"header\",\"format\":9}\n",
    ] {
        fs::write(&path, format!("{bad}{body}")).unwrap();
        let err = store.open(&id).unwrap_err();
        assert!(
            matches!(&err, SessionError::BadHeader { path: p, .. } if p == &path),
            "{bad:?}: {err:?}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("{}:1: bad session log header: ", path.display())),
            "{err}"
        );
        assert!(matches!(
            store.list().unwrap_err(),
            SessionError::BadHeader { .. }
        ));
    }
    fs::write(&path, "").unwrap();
    assert!(matches!(
        store.open(&id).unwrap_err(),
        SessionError::BadHeader { reason, .. } if reason == "the file is empty"
    ));

    // A log copied under another session's name is not that session.
    fs::write(&path, &text).unwrap();
    let other = SessionId::generate().unwrap();
    fs::copy(&path, store.path_of(&other)).unwrap();
    match store.open(&other).unwrap_err() {
        SessionError::BadHeader { reason, .. } => {
            assert_eq!(reason, format!("the header names session {id}"));
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(
        store.list().unwrap_err(),
        SessionError::BadHeader { .. }
    ));
}

#[test]
fn opening_an_unknown_session_is_not_found() {
    let (_tmp, store) = store();
    let id = SessionId::generate().unwrap();
    let err = store.open(&id).unwrap_err();
    assert!(
        matches!(&err, SessionError::NotFound { id: i, dir } if i == &id && dir == store.dir())
    );
    assert_eq!(
        err.to_string(),
        format!("no session {id} in {}", store.dir().display())
    );
}

#[test]
fn knobs_fold_over_the_log_with_the_default_given_at_call_time() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    // No override: whatever the default is now.
    assert_eq!(session.sandbox_override(), None);
    assert_eq!(session.approval_override(), None);
    for default in SandboxMode::ALL {
        assert_eq!(session.sandbox_mode(*default), *default);
    }
    for default in ApprovalPolicy::ALL {
        assert_eq!(session.approval_policy(*default), *default);
    }
    session.append(message("unrelated")).unwrap();
    assert_eq!(session.sandbox_override(), None);

    // A default changed while the process was down takes effect on resume.
    let session = reopen(&store, session);
    assert_eq!(
        session.sandbox_mode(SandboxMode::ReadOnly),
        SandboxMode::ReadOnly
    );
    assert_eq!(
        session.approval_policy(ApprovalPolicy::Never),
        ApprovalPolicy::Never
    );

    // The setter is the event; the last one wins.
    let r = session
        .set_sandbox_mode(SandboxMode::DangerFullAccess, KnobSource::User)
        .unwrap();
    assert_eq!(
        r.event,
        Event::SandboxMode {
            mode: SandboxMode::DangerFullAccess,
            source: KnobSource::User
        }
    );
    session
        .set_sandbox_mode(
            SandboxMode::ReadOnly,
            KnobSource::Preset {
                name: "locked".into(),
            },
        )
        .unwrap();
    session
        .set_approval_policy(ApprovalPolicy::Never, KnobSource::Config)
        .unwrap();
    for default in SandboxMode::ALL {
        assert_eq!(session.sandbox_mode(*default), SandboxMode::ReadOnly);
    }
    for default in ApprovalPolicy::ALL {
        assert_eq!(session.approval_policy(*default), ApprovalPolicy::Never);
    }
}

#[test]
fn a_resumed_session_keeps_its_overrides_and_their_sources() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session
        .set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    session
        .set_approval_policy(ApprovalPolicy::Never, KnobSource::User)
        .unwrap();
    session.append(message("after")).unwrap();
    let records = session.records();
    let session = reopen(&store, session);
    assert_eq!(session.records(), records);
    assert_eq!(session.sandbox_override(), Some(SandboxMode::ReadOnly));
    assert_eq!(
        session.sandbox_mode(SandboxMode::DangerFullAccess),
        SandboxMode::ReadOnly
    );
    assert_eq!(session.approval_override(), Some(ApprovalPolicy::Never));
    assert_eq!(
        session.approval_policy(ApprovalPolicy::Ask),
        ApprovalPolicy::Never
    );
}

#[test]
fn the_network_knob_folds_from_its_own_events_and_survives_resume() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    assert_eq!(session.network_override(), None);
    let r = session
        .set_network_mode(NetworkMode::Allow, KnobSource::User)
        .unwrap();
    assert_eq!(
        r.event,
        Event::SandboxNetwork {
            mode: NetworkMode::Allow,
            source: KnobSource::User
        }
    );
    session
        .set_network_mode(
            NetworkMode::Deny,
            KnobSource::Preset {
                name: "read-only".into(),
            },
        )
        .unwrap();
    // The other knobs neither move it nor are moved by it.
    session
        .set_sandbox_mode(SandboxMode::WorkspaceWrite, KnobSource::User)
        .unwrap();
    assert_eq!(session.network_override(), Some(NetworkMode::Deny));
    assert_eq!(
        session.sandbox_override(),
        Some(SandboxMode::WorkspaceWrite)
    );
    assert_eq!(session.approval_override(), None);
    let text = fs::read_to_string(session.path()).unwrap();
    assert!(
        text.contains(r#"{"type":"sandbox/network","mode":"deny","source":{"kind":"preset","name":"read-only"}}"#),
        "{text}"
    );

    let records = session.records();
    let session = reopen(&store, session);
    assert_eq!(session.records(), records);
    assert_eq!(session.network_override(), Some(NetworkMode::Deny));
}

#[test]
fn a_network_event_outside_the_vocabulary_is_an_error_naming_the_line() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session
        .set_network_mode(NetworkMode::Deny, KnobSource::User)
        .unwrap();
    let (id, path) = (session.id().clone(), session.path().to_path_buf());
    drop(session);
    append_raw(
        &path,
        br#"{"seq":2,"at_unix_ms":0,"event":{"type":"sandbox/network","mode":"open","source":{"kind":"user"}}}
{"seq":3,"at_unix_ms":0,"event":{"type":"message","role":"user","content":"after"}}
"#,
    );
    let err = store.open(&id).unwrap_err();
    assert!(
        matches!(&err, SessionError::Corrupt { line: 3, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("expected one of deny, allow-listed, allow"),
        "{err}"
    );
}

#[test]
fn delegation_seeds_the_network_override_too() {
    let (_tmp, store) = store();
    let parent = store.create("/p").unwrap();
    parent
        .set_network_mode(NetworkMode::Deny, KnobSource::User)
        .unwrap();
    let child = store.create_child(&parent, "/c").unwrap();
    let events: Vec<Event> = child.records().into_iter().map(|r| r.event).collect();
    assert_eq!(
        events,
        [Event::SandboxNetwork {
            mode: NetworkMode::Deny,
            source: KnobSource::Delegated {
                parent: parent.id().clone()
            }
        }]
    );
    let child = reopen(&store, child);
    assert_eq!(child.network_override(), Some(NetworkMode::Deny));
}

#[test]
fn delegation_seeds_the_child_with_the_parents_overrides_source_tagged() {
    let (_tmp, store) = store();
    let parent = store.create("/parent").unwrap();
    parent
        .set_sandbox_mode(SandboxMode::DangerFullAccess, KnobSource::User)
        .unwrap();
    parent
        .set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    parent
        .set_approval_policy(ApprovalPolicy::Never, KnobSource::Config)
        .unwrap();
    parent.append(message("not copied")).unwrap();

    let child = store.create_child(&parent, "/child").unwrap();
    assert_ne!(child.id(), parent.id());
    assert_eq!(child.header().parent.as_ref(), Some(parent.id()));
    assert_eq!(child.header().cwd, PathBuf::from("/child"));
    let delegated = KnobSource::Delegated {
        parent: parent.id().clone(),
    };
    let events: Vec<Event> = child.records().into_iter().map(|r| r.event).collect();
    assert_eq!(
        events,
        vec![
            Event::SandboxMode {
                mode: SandboxMode::ReadOnly,
                source: delegated.clone()
            },
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Never,
                source: delegated
            },
        ]
    );
    // A wider default cannot leak in, now or after resume.
    assert_eq!(
        child.sandbox_mode(SandboxMode::DangerFullAccess),
        SandboxMode::ReadOnly
    );
    let child = reopen(&store, child);
    assert_eq!(child.records().len(), 2);
    assert_eq!(
        child.sandbox_mode(SandboxMode::DangerFullAccess),
        SandboxMode::ReadOnly
    );
    assert_eq!(child.header().parent.as_ref(), Some(parent.id()));
    // The parent is untouched by delegation.
    assert_eq!(parent.records().len(), 4);

    // A grandchild inherits through the child.
    let grandchild = store.create_child(&child, "/gc").unwrap();
    assert_eq!(grandchild.sandbox_override(), Some(SandboxMode::ReadOnly));
    assert!(grandchild.records().iter().all(|r| matches!(
        &r.event,
        Event::SandboxMode { source: KnobSource::Delegated { parent }, .. }
        | Event::ApprovalPolicy { source: KnobSource::Delegated { parent }, .. }
        if parent == child.id()
    )));
}

#[test]
fn delegation_from_a_parent_without_overrides_seeds_nothing() {
    let (_tmp, store) = store();
    let parent = store.create("/p").unwrap();
    parent.append(message("hi")).unwrap();
    let child = store.create_child(&parent, "/c").unwrap();
    assert_eq!(child.records(), vec![]);
    assert_eq!(child.sandbox_override(), None);
    assert_eq!(child.approval_override(), None);

    // Only the knob the parent set is seeded.
    parent
        .set_approval_policy(ApprovalPolicy::Never, KnobSource::User)
        .unwrap();
    let child = store.create_child(&parent, "/c").unwrap();
    assert_eq!(child.sandbox_override(), None);
    assert_eq!(child.approval_override(), Some(ApprovalPolicy::Never));
    assert_eq!(child.records().len(), 1);
}

#[test]
fn concurrent_sessions_never_see_each_others_events() {
    let (_tmp, store) = store();
    let a = store.create("/a").unwrap();
    let b = store.create("/b").unwrap();
    b.set_sandbox_mode(SandboxMode::ReadOnly, KnobSource::User)
        .unwrap();
    let per_thread = 100;
    let mut handles = Vec::new();
    for (session, name) in [(&a, "a"), (&b, "b")] {
        for t in 0..3 {
            let session = session.clone();
            handles.push(thread::spawn(move || {
                for i in 0..per_thread {
                    session.append(message(&format!("{name}/{t}/{i}"))).unwrap();
                }
            }));
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    let check = |session: &Session, name: &str, extra: usize| {
        let records = session.records();
        assert_eq!(records.len(), 3 * per_thread + extra);
        for (r, seq) in records.iter().zip(1..) {
            assert_eq!(r.seq, seq);
            if let Event::Message { content, .. } = &r.event {
                assert!(content.starts_with(&format!("{name}/")), "{content}");
            }
        }
    };
    check(&a, "a", 0);
    check(&b, "b", 1);
    assert_eq!(a.sandbox_override(), None);
    assert_eq!(b.sandbox_override(), Some(SandboxMode::ReadOnly));

    let (ra, rb) = (a.records(), b.records());
    let a = reopen(&store, a);
    let b = reopen(&store, b);
    assert_eq!(a.records(), ra);
    assert_eq!(b.records(), rb);
}

#[test]
fn opening_a_live_session_shares_its_state() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    let same = store.open(session.id()).unwrap();
    // Through another spelling of the directory, too.
    let dotted = SessionStore::new(store.dir().join("."));
    let also = dotted.open(session.id()).unwrap();
    session.append(message("one")).unwrap();
    same.append(message("two")).unwrap();
    also.append(message("three")).unwrap();
    assert_eq!(session.records().len(), 3);
    assert_eq!(same.records(), session.records());
    drop((same, also));
    let resumed = reopen(&store, session);
    let seqs: Vec<u64> = resumed.records().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
}

#[test]
fn with_records_may_append_without_deadlock() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("seen")).unwrap();
    let appended = session.with_records(|rs| {
        assert_eq!(rs.len(), 1);
        session.append(message("added while looking")).unwrap();
        rs.len()
    });
    assert_eq!(appended, 1);
    assert_eq!(session.records().len(), 2);
}

#[test]
fn a_writer_behind_the_sessions_back_is_refused_not_interleaved() {
    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    session.append(message("a")).unwrap();
    let path = session.path().to_path_buf();
    let before = fs::read(&path).unwrap();
    append_raw(&path, b"{\"seq\":2,\"at_unix_ms\":0,\"event\":{\"type\":\"message\",\"role\":\"user\",\"content\":\"x\"}}\n");
    let after = fs::read(&path).unwrap();
    match session.append(message("b")).unwrap_err() {
        SessionError::ConcurrentWriter {
            expected, found, ..
        } => {
            assert_eq!(expected, before.len() as u64);
            assert_eq!(found, after.len() as u64);
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(fs::read(&path).unwrap(), after, "nothing was written");
    assert_eq!(session.records().len(), 1);
}

#[test]
fn ids_are_unique_and_list_returns_every_header_oldest_first() {
    let (_tmp, store) = store();
    assert_eq!(store.list().unwrap(), vec![], "a missing dir is empty");
    let sessions: Vec<Session> = (0..40)
        .map(|i| store.create(format!("/w/{i}")).unwrap())
        .collect();
    let mut ids: Vec<&SessionId> = sessions.iter().map(Session::id).collect();
    for id in &ids {
        assert_eq!(id.as_str().parse::<SessionId>().as_ref(), Ok(*id));
        assert_eq!(
            store.path_of(id).file_name().unwrap(),
            format!("{id}.jsonl").as_str()
        );
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40);

    // Foreign files in the directory are not sessions.
    fs::write(store.dir().join("README"), "hi").unwrap();
    fs::write(store.dir().join("notes.jsonl"), "{}\n").unwrap();
    fs::write(
        store.dir().join(format!("{}.jsonl.bak", sessions[0].id())),
        "",
    )
    .unwrap();

    // A log still being created (no complete header yet) is not listed.
    fs::write(store.path_of(&SessionId::generate().unwrap()), "").unwrap();
    let half = SessionId::generate().unwrap();
    fs::write(
        store.path_of(&half),
        format!("{{\"type\":\"header\",\"id\":\"{half}"),
    )
    .unwrap();
    assert!(matches!(
        store.open(&half).unwrap_err(),
        SessionError::BadHeader { .. }
    ));

    let listed = store.list().unwrap();
    let mut expected: Vec<SessionHeader> = sessions.iter().map(|s| s.header().clone()).collect();
    expected.sort_by(|a, b| (a.created_unix_ms, &a.id).cmp(&(b.created_unix_ms, &b.id)));
    assert_eq!(listed, expected);
}

#[test]
fn a_relative_cwd_is_made_absolute_at_creation() {
    let (_tmp, store) = store();
    let session = store.create("sub/dir").unwrap();
    let expected = std::env::current_dir().unwrap().join("sub/dir");
    assert_eq!(session.header().cwd, expected);
    assert!(session.header().cwd.is_absolute());
    assert!(matches!(
        store.create("").unwrap_err(),
        SessionError::Cwd { .. }
    ));
}

#[cfg(unix)]
#[test]
fn a_non_utf8_cwd_survives_create_open_and_list() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let (_tmp, store) = store();
    let cwd = PathBuf::from(OsStr::from_bytes(b"/srv/caf\xe9/\xff\xfe"));
    let session = store.create(&cwd).unwrap();
    assert_eq!(session.header().cwd, cwd);
    let path = session.path().to_path_buf();
    let first = fs::read_to_string(&path).unwrap();
    let header: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(
        header["cwd"]["unix"],
        serde_json::json!(b"/srv/caf\xe9/\xff\xfe".to_vec())
    );
    let session = reopen(&store, session);
    assert_eq!(
        session.header().cwd.as_os_str().as_bytes(),
        cwd.as_os_str().as_bytes()
    );
    assert_eq!(store.list().unwrap()[0].cwd, cwd);
    // A child may work in a non-UTF-8 directory too.
    let child = store.create_child(&session, &cwd).unwrap();
    assert_eq!(reopen(&store, child).header().cwd, cwd);
}

#[cfg(unix)]
#[test]
fn the_store_is_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;

    let (_tmp, store) = store();
    let session = store.create("/w").unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // The umask may only narrow these.
    assert_eq!(mode(store.dir()) & !0o700, 0);
    assert_eq!(mode(session.path()) & !0o600, 0);
}

#[test]
fn sessions_are_send_sync_and_sync_to_disk() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Session>();
    assert_send_sync::<SessionStore>();
    let (_tmp, store) = store();
    let session = Arc::new(store.create("/w").unwrap());
    session.append(message("durable")).unwrap();
    session.sync().unwrap();
}

/// The id a log path names.
fn path_id(path: &Path) -> SessionId {
    path.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

#[test]
fn a_header_is_read_without_opening_or_repairing_the_log() {
    let (_tmp, store) = store();
    let unknown = SessionId::generate().unwrap();
    assert!(matches!(
        store.header(&unknown).unwrap_err(),
        SessionError::NotFound { id, .. } if id == unknown
    ));
    let cwd = store.dir().parent().unwrap().to_path_buf();
    let session = store.create(&cwd).unwrap();
    let id = session.id().clone();
    let path = session.path().to_path_buf();
    drop(session);
    // A torn tail stays as it is: reading the header is no resume.
    append_raw(&path, b"{\"seq\":1,\"at_");
    let before = fs::read(&path).unwrap();
    let header = store.header(&id).unwrap();
    assert_eq!(header.id, id);
    assert_eq!(header.cwd, cwd);
    assert_eq!(fs::read(&path).unwrap(), before);
}
