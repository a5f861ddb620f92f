use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::SessionError;

/// A session's identity: 128 random bits from the OS, as 32 lowercase hex
/// digits. It doubles as the log's file name, so every way in (`FromStr`,
/// serde) validates it: an id can never name a path outside the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

/// A string that is not 32 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid session id {value:?}: expected 32 lowercase hex digits")]
pub struct ParseSessionIdError {
    /// The rejected input, verbatim.
    pub value: String,
}

impl SessionId {
    /// The number of hex digits in an id.
    pub const LEN: usize = 32;

    /// A fresh id from the OS CSPRNG. Ids must not be guessable or collide
    /// across processes started in the same instant, which rules out anything
    /// derived from the clock, the pid or a counter.
    pub fn generate() -> Result<Self, SessionError> {
        let mut bytes = [0u8; Self::LEN / 2];
        getrandom::fill(&mut bytes).map_err(|e| SessionError::Entropy {
            reason: e.to_string(),
        })?;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(Self::LEN);
        for b in bytes {
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
        Ok(SessionId(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The log's file name inside the store directory.
    pub(crate) fn file_name(&self) -> String {
        format!("{}.jsonl", self.0)
    }

    fn is_well_formed(s: &str) -> bool {
        s.len() == Self::LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionId {
    type Err = ParseSessionIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if Self::is_well_formed(s) {
            Ok(SessionId(s.to_owned()))
        } else {
            Err(ParseSessionIdError {
                value: s.to_owned(),
            })
        }
    }
}

impl TryFrom<String> for SessionId {
    type Error = ParseSessionIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if Self::is_well_formed(&value) {
            Ok(SessionId(value))
        } else {
            Err(ParseSessionIdError { value })
        }
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> Self {
        id.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn generated_ids_are_well_formed_and_unique() {
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let id = SessionId::generate().unwrap();
            assert_eq!(id.as_str().len(), 32);
            assert!(SessionId::is_well_formed(id.as_str()), "{id}");
            assert_eq!(id.as_str().parse::<SessionId>().unwrap(), id);
            assert!(seen.insert(id));
        }
    }

    #[test]
    fn malformed_ids_are_rejected_everywhere() {
        let good = "0123456789abcdef0123456789abcdef";
        assert!(good.parse::<SessionId>().is_ok());
        for bad in [
            "",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcdeg",
            "../../../../etc/passwd0123456789",
            "0123456789abcdef/123456789abcdef",
            " 123456789abcdef0123456789abcdef",
        ] {
            let err = bad.parse::<SessionId>().unwrap_err();
            assert_eq!(err.value, bad);
            assert_eq!(
                err.to_string(),
                format!("invalid session id {bad:?}: expected 32 lowercase hex digits")
            );
            let json = serde_json::to_string(bad).unwrap();
            let err = serde_json::from_str::<SessionId>(&json).unwrap_err();
            assert!(err.to_string().contains("invalid session id"), "{err}");
        }
    }

    #[test]
    fn serde_is_the_bare_string() {
        let id: SessionId = "00112233445566778899aabbccddeeff".parse().unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"00112233445566778899aabbccddeeff\"");
        assert_eq!(serde_json::from_str::<SessionId>(&json).unwrap(), id);
        assert_eq!(id.file_name(), "00112233445566778899aabbccddeeff.jsonl");
    }
}
