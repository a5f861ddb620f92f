//! The knob folds: pure functions of a session's records. Each is a find-last
//! over its own event and nothing else, so the log stays the only store and a
//! resumed session folds to exactly what it had.

use std::path::PathBuf;

use stockade_core::{ApprovalOutcome, ApprovalPolicy, NetworkMode, SandboxMode};

use crate::{Event, HostAnswer, PathAnswer, Record};

/// The value of the last `sandbox/mode` event, if any.
pub fn sandbox_override(records: &[Record]) -> Option<SandboxMode> {
    records.iter().rev().find_map(|r| match r.event {
        Event::SandboxMode { mode, .. } => Some(mode),
        _ => None,
    })
}

/// The value of the last `sandbox/network` event, if any.
pub fn network_override(records: &[Record]) -> Option<NetworkMode> {
    records.iter().rev().find_map(|r| match r.event {
        Event::SandboxNetwork { mode, .. } => Some(mode),
        _ => None,
    })
}

/// The value of the last `approval/policy` event, if any.
pub fn approval_override(records: &[Record]) -> Option<ApprovalPolicy> {
    records.iter().rev().find_map(|r| match r.event {
        Event::ApprovalPolicy { policy, .. } => Some(policy),
        _ => None,
    })
}

/// The hosts the user allowed and refused for the session while its
/// commands waited (`network/host-answered` with a `-for-session`
/// answer), each in the order answered; a later answer about the same
/// host replaces an earlier one. A change of the session's mode or network
/// (a `sandbox/mode` or `sandbox/network` event) forgets every earlier
/// answer: the user changed something, so each host is asked about again.
pub fn host_answers(records: &[Record]) -> (Vec<String>, Vec<String>) {
    let (mut allowed, mut refused) = (Vec::<String>::new(), Vec::<String>::new());
    for r in records {
        match &r.event {
            Event::SandboxMode { .. } | Event::SandboxNetwork { .. } => {
                allowed.clear();
                refused.clear();
            }
            Event::HostAnswered { host, answer } => {
                let to = match answer {
                    HostAnswer::AllowedForSession => &mut allowed,
                    HostAnswer::RefusedForSession => &mut refused,
                    _ => continue,
                };
                if !to.contains(host) {
                    to.push(host.clone());
                }
                let from = match answer {
                    HostAnswer::AllowedForSession => &mut refused,
                    _ => &mut allowed,
                };
                from.retain(|h| h != host);
            }
            _ => {}
        }
    }
    (allowed, refused)
}

/// The paths the user refused while the call `call_id` ran (an
/// `fs/path-asked` under it, answered `refused`), in the order asked: the
/// user already said no to writing there, so a retry with that place
/// writable is not offered for the same call. An unanswered question (timed
/// out) is no answer and is not listed.
pub fn paths_refused_during(records: &[Record], call_id: &str) -> Vec<PathBuf> {
    let mut asked: Vec<&PathBuf> = Vec::new();
    let mut refused = Vec::new();
    for r in records {
        match &r.event {
            Event::PathAsked {
                path,
                call_id: Some(c),
                ..
            } if c == call_id => asked.push(path),
            Event::PathAnswered {
                path,
                answer: PathAnswer::Refused,
            } if asked.contains(&path) && !refused.contains(path) => refused.push(path.clone()),
            _ => {}
        }
    }
    refused
}

/// Whether the user already rejected a request for the same effect that
/// was at least as wide as this one: running under `target` or wider, and
/// with `network` (when this one widens it) or wider. The design's "a
/// rejection permits no re-ask", folded from the log like every knob, so a
/// resumed session remembers it too.
///
/// The effect is the tool's key of what the call would do
/// (`stockade_agent::effect`), so a command respelled, or a path reached
/// through another file tool, is the same question. A record written
/// before effects were logged is matched by its tool and subject.
pub fn rejected_before(
    records: &[Record],
    tool: &str,
    subject: &str,
    effect: &str,
    target: SandboxMode,
    network: Option<NetworkMode>,
) -> bool {
    records.iter().enumerate().any(|(i, r)| {
        let Event::ApprovalAsked {
            call_id,
            tool: t,
            target: rt,
            network: rn,
            subject: s,
            effect: e,
            ..
        } = &r.event
        else {
            return false;
        };
        let same = match (e, s) {
            (Some(e), _) => e == effect,
            (None, Some(s)) => t == tool && s == subject,
            (None, None) => false,
        };
        // danger-full-access confines nothing, the network included: its
        // rejection covers every network a narrower request could name.
        let rejected_network = if *rt == SandboxMode::DangerFullAccess {
            Some(NetworkMode::Allow)
        } else {
            *rn
        };
        let covers = same
            && target <= *rt
            && match (network, rejected_network) {
                (None, _) => true,
                (Some(n), Some(m)) => n <= m,
                (Some(_), None) => false,
            };
        covers
            && records[i + 1..].iter().any(|d| {
                matches!(&d.event, Event::ApprovalDecided {
                    call_id: c,
                    outcome: ApprovalOutcome::Rejected,
                    ..
                } if c == call_id)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KnobSource, Role};

    fn records(events: Vec<Event>) -> Vec<Record> {
        events
            .into_iter()
            .zip(1..)
            .map(|(event, seq)| Record {
                seq,
                at_unix_ms: 0,
                event,
            })
            .collect()
    }

    #[test]
    fn host_answers_fold_for_the_session_until_the_mode_or_network_changes() {
        let answered = |host: &str, answer| Event::HostAnswered {
            host: host.into(),
            answer,
        };
        let rs = records(vec![
            answered("a.test", HostAnswer::AllowedForSession),
            answered("b.test", HostAnswer::RefusedForSession),
            answered("c.test", HostAnswer::AllowedOnce),
            answered("d.test", HostAnswer::RefusedOnce),
            answered("e.test", HostAnswer::Unanswered),
        ]);
        assert_eq!(
            host_answers(&rs),
            (vec!["a.test".to_owned()], vec!["b.test".to_owned()])
        );
        // A later answer about the same host replaces the earlier one.
        let mut more = rs.clone();
        more.extend(records(vec![answered(
            "a.test",
            HostAnswer::RefusedForSession,
        )]));
        assert_eq!(
            host_answers(&more),
            (vec![], vec!["b.test".to_owned(), "a.test".to_owned()])
        );
        // The user changed the network: every answer is forgotten.
        for change in [
            Event::SandboxNetwork {
                mode: NetworkMode::AllowListed,
                source: KnobSource::User,
            },
            Event::SandboxMode {
                mode: SandboxMode::ReadOnly,
                source: KnobSource::User,
            },
        ] {
            let mut changed = rs.clone();
            changed.extend(records(vec![change]));
            assert_eq!(host_answers(&changed), (vec![], vec![]));
        }
    }

    #[test]
    fn paths_refused_during_a_call_are_those_it_asked_and_the_user_refused() {
        let asked = |path: &str, call: &str| Event::PathAsked {
            op: "write".into(),
            path: path.into(),
            call_id: Some(call.into()),
        };
        let answered = |path: &str, answer| Event::PathAnswered {
            path: path.into(),
            answer,
        };
        let rs = records(vec![
            asked("/srv/a", "c1"),
            answered("/srv/a", PathAnswer::Refused),
            asked("/srv/b", "c1"),
            answered("/srv/b", PathAnswer::AllowPath),
            asked("/srv/c", "c1"),
            answered("/srv/c", PathAnswer::TimedOut),
            asked("/srv/d", "c2"),
            answered("/srv/d", PathAnswer::Refused),
        ]);
        assert_eq!(paths_refused_during(&rs, "c1"), [PathBuf::from("/srv/a")]);
        assert_eq!(paths_refused_during(&rs, "c2"), [PathBuf::from("/srv/d")]);
        assert!(paths_refused_during(&rs, "c3").is_empty());
    }

    #[test]
    fn no_knob_event_means_no_override() {
        let rs = records(vec![Event::Message {
            role: Role::User,
            content: "hi".into(),
            source: None,
        }]);
        assert_eq!(sandbox_override(&rs), None);
        assert_eq!(approval_override(&rs), None);
        assert_eq!(network_override(&rs), None);
        assert_eq!(sandbox_override(&[]), None);
    }

    #[test]
    fn the_last_event_of_each_knob_wins_independently() {
        let rs = records(vec![
            Event::SandboxMode {
                mode: SandboxMode::DangerFullAccess,
                source: KnobSource::User,
            },
            Event::ApprovalPolicy {
                policy: ApprovalPolicy::Never,
                source: KnobSource::User,
            },
            Event::SandboxNetwork {
                mode: NetworkMode::Allow,
                source: KnobSource::User,
            },
            Event::SandboxMode {
                mode: SandboxMode::ReadOnly,
                source: KnobSource::Config,
            },
            Event::SandboxNetwork {
                mode: NetworkMode::Deny,
                source: KnobSource::User,
            },
            Event::Message {
                role: Role::User,
                content: "later".into(),
                source: None,
            },
        ]);
        assert_eq!(sandbox_override(&rs), Some(SandboxMode::ReadOnly));
        assert_eq!(approval_override(&rs), Some(ApprovalPolicy::Never));
        assert_eq!(network_override(&rs), Some(NetworkMode::Deny));
    }

    fn asked(
        call: &str,
        subject: &str,
        target: SandboxMode,
        network: Option<NetworkMode>,
    ) -> Event {
        Event::ApprovalAsked {
            call_id: call.into(),
            tool: "bash".into(),
            reason: "r".into(),
            target,
            network,
            subject: Some(subject.into()),
            effect: None,
            writable_root: None,
        }
    }

    fn decided(call: &str, outcome: ApprovalOutcome) -> Event {
        Event::ApprovalDecided {
            call_id: call.into(),
            tool: "bash".into(),
            outcome,
        }
    }

    #[test]
    fn a_rejection_answers_the_same_subject_at_the_same_width_or_narrower() {
        use SandboxMode::*;
        let rs = records(vec![
            asked("c1", "make", WorkspaceWrite, Some(NetworkMode::AllowListed)),
            decided("c1", ApprovalOutcome::Rejected),
            asked("c2", "ls", WorkspaceWrite, None),
            decided("c2", ApprovalOutcome::AllowedOnce),
            asked("c3", "rm", WorkspaceWrite, None),
            decided("c3", ApprovalOutcome::Cancelled),
        ]);
        let r =
            |subject, target, network| rejected_before(&rs, "bash", subject, "", target, network);
        assert!(r("make", WorkspaceWrite, None));
        assert!(r("make", ReadOnly, Some(NetworkMode::AllowListed)));
        assert!(r("make", WorkspaceWrite, Some(NetworkMode::AllowListed)));
        // Wider in either direction: a new question.
        assert!(!r("make", DangerFullAccess, None));
        assert!(!r("make", WorkspaceWrite, Some(NetworkMode::Allow)));
        // Another subject, another tool, an allow, a cancel: no answer.
        assert!(!r("make ", WorkspaceWrite, None));
        assert!(!rejected_before(
            &rs,
            "write",
            "make",
            "",
            WorkspaceWrite,
            None
        ));
        assert!(!r("ls", WorkspaceWrite, None));
        assert!(!r("rm", WorkspaceWrite, None));
        // An ask without its decision yet decides nothing.
        let open = records(vec![asked("c9", "make", WorkspaceWrite, None)]);
        assert!(!rejected_before(
            &open,
            "bash",
            "make",
            "",
            WorkspaceWrite,
            None
        ));
    }

    #[test]
    fn a_rejection_with_an_effect_answers_that_effect_through_any_tool_or_spelling() {
        use SandboxMode::*;
        let keyed = |call: &str, tool: &str, subject: &str, effect: &str, target, network| {
            Event::ApprovalAsked {
                call_id: call.into(),
                tool: tool.into(),
                reason: "r".into(),
                target,
                network,
                subject: Some(subject.into()),
                effect: Some(effect.into()),
                writable_root: None,
            }
        };
        let rs = records(vec![
            keyed(
                "c1",
                "write",
                "write /ws/a",
                "write /ws/a",
                WorkspaceWrite,
                None,
            ),
            decided("c1", ApprovalOutcome::Rejected),
            keyed(
                "c2",
                "bash",
                "curl x",
                "run curl x in /ws",
                DangerFullAccess,
                None,
            ),
            decided("c2", ApprovalOutcome::Rejected),
        ]);
        // Another tool and another subject text, the same effect.
        assert!(rejected_before(
            &rs,
            "edit",
            "edit /ws/./a",
            "write /ws/a",
            WorkspaceWrite,
            None
        ));
        assert!(!rejected_before(
            &rs,
            "edit",
            "edit /ws/b",
            "write /ws/b",
            WorkspaceWrite,
            None
        ));
        // The subject no longer decides once an effect is logged.
        assert!(!rejected_before(
            &rs,
            "write",
            "write /ws/a",
            "write /ws/b",
            WorkspaceWrite,
            None
        ));
        // danger-full-access was refused: the network field alone, or with
        // a narrower mode, is narrower.
        let curl = |target, network| {
            rejected_before(
                &rs,
                "bash",
                "bash -c 'curl x'",
                "run curl x in /ws",
                target,
                network,
            )
        };
        assert!(curl(ReadOnly, Some(NetworkMode::Allow)));
        assert!(curl(WorkspaceWrite, Some(NetworkMode::AllowListed)));
        assert!(curl(DangerFullAccess, None));
    }
}
