//! The knob folds: pure functions of a session's records. Each is a find-last
//! over its own event and nothing else, so the log stays the only store and a
//! resumed session folds to exactly what it had.

use stockade_core::{ApprovalPolicy, NetworkMode, SandboxMode};

use crate::{Event, Record};

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
}
