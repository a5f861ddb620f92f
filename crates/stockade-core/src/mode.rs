//! Closed vocabularies. Each is parsed in exactly one place (`FromStr`), which
//! serde and the CLI reuse, so every rejection lists the same valid values.

use std::fmt;
use std::str::FromStr;

/// A value outside one of the closed vocabularies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {vocabulary} {value:?}: expected one of {}", .valid.join(", "))]
pub struct ParseVocabularyError {
    /// Which vocabulary rejected the value (e.g. `sandbox mode`).
    pub vocabulary: &'static str,
    /// The rejected input, verbatim.
    pub value: String,
    /// Every accepted spelling, in order.
    pub valid: &'static [&'static str],
}

macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Every accepted spelling, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The one spelling of this value.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = ParseVocabularyError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(ParseVocabularyError {
                        vocabulary: $what,
                        value: s.to_owned(),
                        valid: Self::NAMES,
                    }),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

vocabulary! {
    /// What a confined command may do to files. FILE effects only: network and
    /// process visibility are not claimed by any mode. Ordered by width, so
    /// `a < b` means `b` permits strictly more.
    SandboxMode, "sandbox mode" {
        /// Only `/dev/null` is writable (plus what a backend must grant to keep
        /// the child alive, named in its profile).
        ReadOnly = "read-only",
        /// The workspace root, the host temp roots and `/dev/null` are writable.
        WorkspaceWrite = "workspace-write",
        /// Unconfined. Never handed to a provider.
        DangerFullAccess = "danger-full-access",
    }
}

vocabulary! {
    /// What a confined command may reach over the network. A second knob
    /// beside [`SandboxMode`], ordered by width like it.
    NetworkMode, "network mode" {
        /// Nothing but a loopback private to the sandbox (where the backend
        /// has one).
        Deny = "deny",
        /// Only the allowed hosts, through stockade's CONNECT proxy.
        AllowListed = "allow-listed",
        /// The host's network, unchanged.
        Allow = "allow",
    }
}

impl NetworkMode {
    /// The next wider value, or `None` at the widest.
    pub const fn wider(self) -> Option<NetworkMode> {
        match self {
            NetworkMode::Deny => Some(NetworkMode::AllowListed),
            NetworkMode::AllowListed => Some(NetworkMode::Allow),
            NetworkMode::Allow => None,
        }
    }

    /// The default that goes with a file mode in the default preset table:
    /// `read-only` denies, `workspace-write` allows the listed hosts,
    /// `danger-full-access` always means `allow`.
    pub const fn default_for(mode: SandboxMode) -> NetworkMode {
        match mode {
            SandboxMode::ReadOnly => NetworkMode::Deny,
            SandboxMode::WorkspaceWrite => NetworkMode::AllowListed,
            SandboxMode::DangerFullAccess => NetworkMode::Allow,
        }
    }
}

vocabulary! {
    /// The subset of [`SandboxMode`] a provider is ever asked to confine.
    ConfiningMode, "confining sandbox mode" {
        ReadOnly = "read-only",
        WorkspaceWrite = "workspace-write",
    }
}

vocabulary! {
    /// How completely the selected backend governs the promised file effects on
    /// this host. Never promoted: a backend that cannot govern every promised
    /// effect says `partial`.
    Enforcement, "enforcement" {
        Full = "full",
        Partial = "partial",
    }
}

vocabulary! {
    /// Whether a session may ask the user to approve a wider retry.
    ApprovalPolicy, "approval policy" {
        Ask = "ask",
        Never = "never",
    }
}

vocabulary! {
    /// How one approval request ended.
    ApprovalOutcome, "approval outcome" {
        /// The user allowed this one call; nothing is remembered.
        AllowedOnce = "allowed-once",
        Rejected = "rejected",
        /// The request ended before anyone answered (the turn was cancelled).
        Cancelled = "cancelled",
        /// No one can be asked (policy `never`, or no answerer answered).
        Unavailable = "unavailable",
    }
}

impl SandboxMode {
    /// The next wider mode, or `None` at the widest.
    pub const fn wider(self) -> Option<SandboxMode> {
        match self {
            SandboxMode::ReadOnly => Some(SandboxMode::WorkspaceWrite),
            SandboxMode::WorkspaceWrite => Some(SandboxMode::DangerFullAccess),
            SandboxMode::DangerFullAccess => None,
        }
    }

    /// The confining form of this mode, or `None` for `danger-full-access`.
    pub const fn confining(self) -> Option<ConfiningMode> {
        match self {
            SandboxMode::ReadOnly => Some(ConfiningMode::ReadOnly),
            SandboxMode::WorkspaceWrite => Some(ConfiningMode::WorkspaceWrite),
            SandboxMode::DangerFullAccess => None,
        }
    }
}

impl From<ConfiningMode> for SandboxMode {
    fn from(mode: ConfiningMode) -> Self {
        match mode {
            ConfiningMode::ReadOnly => SandboxMode::ReadOnly,
            ConfiningMode::WorkspaceWrite => SandboxMode::WorkspaceWrite,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_ordered_by_width() {
        assert!(SandboxMode::ReadOnly < SandboxMode::WorkspaceWrite);
        assert!(SandboxMode::WorkspaceWrite < SandboxMode::DangerFullAccess);
        let mut sorted = SandboxMode::ALL.to_vec();
        sorted.sort();
        assert_eq!(sorted, SandboxMode::ALL);
    }

    #[test]
    fn every_spelling_round_trips() {
        for mode in SandboxMode::ALL {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(*mode));
            let json = serde_json::to_string(mode).unwrap();
            assert_eq!(serde_json::from_str::<SandboxMode>(&json).unwrap(), *mode);
        }
        for e in Enforcement::ALL {
            assert_eq!(e.to_string().parse::<Enforcement>(), Ok(*e));
        }
    }

    #[test]
    fn values_outside_the_vocabulary_are_rejected_listing_valid_ones() {
        for bad in [
            "",
            "readonly",
            "Read-Only",
            "workspace_write",
            "full-access",
            " read-only",
        ] {
            let err = bad.parse::<SandboxMode>().unwrap_err();
            assert_eq!(err.value, bad);
            assert_eq!(
                err.to_string(),
                format!(
                    "invalid sandbox mode {bad:?}: expected one of read-only, workspace-write, danger-full-access"
                )
            );
        }
        let err = serde_json::from_str::<SandboxMode>("\"yolo\"").unwrap_err();
        assert!(
            err.to_string()
                .contains("expected one of read-only, workspace-write, danger-full-access"),
            "{err}"
        );
        assert!(serde_json::from_str::<SandboxMode>("3").is_err());
        let err = "danger-full-access".parse::<ConfiningMode>().unwrap_err();
        assert!(
            err.to_string()
                .contains("expected one of read-only, workspace-write")
        );
        assert!("strict".parse::<Enforcement>().is_err());
    }

    #[test]
    fn wider_climbs_the_ladder_one_rung() {
        for m in SandboxMode::ALL {
            if let Some(w) = m.wider() {
                assert!(w > *m);
            }
        }
        assert_eq!(SandboxMode::DangerFullAccess.wider(), None);
        assert_eq!(
            SandboxMode::ReadOnly.wider(),
            Some(SandboxMode::WorkspaceWrite)
        );
    }

    #[test]
    fn only_danger_full_access_is_not_confining() {
        assert_eq!(
            SandboxMode::ReadOnly.confining(),
            Some(ConfiningMode::ReadOnly)
        );
        assert_eq!(
            SandboxMode::WorkspaceWrite.confining(),
            Some(ConfiningMode::WorkspaceWrite)
        );
        assert_eq!(SandboxMode::DangerFullAccess.confining(), None);
        for c in ConfiningMode::ALL {
            assert_eq!(SandboxMode::from(*c).confining(), Some(*c));
        }
    }
}
