use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::SessionId;

/// Line 1 of a session log: who the session is and where it works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    pub id: SessionId,
    /// The session's workspace root, absolute. Stored so that a non-UTF-8
    /// path survives exactly (see `cwd_wire`).
    #[serde(with = "cwd_wire")]
    pub cwd: PathBuf,
    pub created_unix_ms: u64,
    /// The session this one was delegated from.
    #[serde(default)]
    pub parent: Option<SessionId>,
}

/// The on-disk format version of the whole file, bumped on any change a
/// reader of the old format would misread.
pub(crate) const FORMAT: u32 = 1;

/// The header as written: tagged, so a file that does not start with a
/// header (or starts with a record) is refused rather than misread.
#[derive(Serialize, Deserialize)]
pub(crate) struct HeaderLine {
    #[serde(rename = "type")]
    kind: HeaderTag,
    format: u32,
    #[serde(flatten)]
    header: SessionHeader,
}

#[derive(Serialize, Deserialize)]
enum HeaderTag {
    #[serde(rename = "header")]
    Header,
}

impl HeaderLine {
    pub(crate) fn new(header: SessionHeader) -> Self {
        HeaderLine {
            kind: HeaderTag::Header,
            format: FORMAT,
            header,
        }
    }

    /// The header, when this file's format is one this code reads.
    pub(crate) fn into_header(self) -> Result<SessionHeader, String> {
        let HeaderLine {
            kind: HeaderTag::Header,
            format,
            header,
        } = self;
        if format == FORMAT {
            Ok(header)
        } else {
            Err(format!(
                "unsupported session log format {format} (this build reads {FORMAT})"
            ))
        }
    }
}

/// How a path is written: a JSON string when it is valid UTF-8 (the common,
/// readable case), else the platform's native units, `{"unix": [bytes]}` or
/// `{"windows": [utf-16 units]}`, so the path reads back identical. A path in
/// the other platform's form cannot name anything here and is refused when
/// read; it is never approximated (a lossy path would point the session's
/// workspace root somewhere else).
pub(crate) mod cwd_wire {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use serde::de::Error as _;
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    #[serde(expecting = "a path: a string, {\"unix\": [bytes]} or {\"windows\": [utf-16 units]}")]
    enum Wire {
        Text(String),
        Unix { unix: Vec<u8> },
        Windows { windows: Vec<u16> },
    }

    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => s.serialize_str(text),
            None => native(path.as_os_str().to_owned())
                .map_err(S::Error::custom)?
                .serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let os = match Wire::deserialize(d)? {
            Wire::Text(text) => OsString::from(text),
            Wire::Unix { unix } => from_unix(unix).map_err(D::Error::custom)?,
            Wire::Windows { windows } => from_windows(windows).map_err(D::Error::custom)?,
        };
        Ok(PathBuf::from(os))
    }

    #[cfg(unix)]
    fn native(os: OsString) -> Result<Wire, &'static str> {
        use std::os::unix::ffi::OsStringExt;
        Ok(Wire::Unix {
            unix: os.into_vec(),
        })
    }

    #[cfg(windows)]
    fn native(os: OsString) -> Result<Wire, &'static str> {
        use std::os::windows::ffi::OsStrExt;
        Ok(Wire::Windows {
            windows: os.encode_wide().collect(),
        })
    }

    #[cfg(not(any(unix, windows)))]
    fn native(_: OsString) -> Result<Wire, &'static str> {
        Err("a non-UTF-8 path cannot be stored on this platform")
    }

    #[cfg(unix)]
    fn from_unix(bytes: Vec<u8>) -> Result<OsString, &'static str> {
        use std::os::unix::ffi::OsStringExt;
        Ok(OsString::from_vec(bytes))
    }

    #[cfg(not(unix))]
    fn from_unix(_: Vec<u8>) -> Result<OsString, &'static str> {
        Err("the path was stored as unix bytes and cannot name a path on this platform")
    }

    #[cfg(windows)]
    fn from_windows(units: Vec<u16>) -> Result<OsString, &'static str> {
        use std::os::windows::ffi::OsStringExt;
        Ok(OsString::from_wide(&units))
    }

    #[cfg(not(windows))]
    fn from_windows(_: Vec<u16>) -> Result<OsString, &'static str> {
        Err("the path was stored as windows utf-16 units and cannot name a path on this platform")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn header(cwd: PathBuf) -> SessionHeader {
        SessionHeader {
            id: "00112233445566778899aabbccddeeff".parse().unwrap(),
            cwd,
            created_unix_ms: 1_700_000_000_000,
            parent: Some("ffeeddccbbaa99887766554433221100".parse().unwrap()),
        }
    }

    #[test]
    fn the_header_line_is_tagged_and_versioned() {
        let line = serde_json::to_value(HeaderLine::new(header("/work/é".into()))).unwrap();
        assert_eq!(
            line,
            json!({"type": "header", "format": 1, "id": "00112233445566778899aabbccddeeff",
                   "cwd": "/work/é", "created_unix_ms": 1_700_000_000_000u64,
                   "parent": "ffeeddccbbaa99887766554433221100"})
        );
        let back: HeaderLine = serde_json::from_value(line).unwrap();
        assert_eq!(back.into_header().unwrap(), header("/work/é".into()));
    }

    #[test]
    fn other_formats_and_untagged_lines_are_refused() {
        let mut line = serde_json::to_value(HeaderLine::new(header("/w".into()))).unwrap();
        line["format"] = json!(2);
        let err = serde_json::from_value::<HeaderLine>(line.clone())
            .unwrap()
            .into_header()
            .unwrap_err();
        assert_eq!(err, "unsupported session log format 2 (this build reads 1)");
        line["type"] = json!("message");
        assert!(serde_json::from_value::<HeaderLine>(line).is_err());
        assert!(serde_json::from_value::<HeaderLine>(json!({"seq": 1, "at_unix_ms": 0})).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_non_utf8_cwd_is_stored_as_bytes_and_reads_back_identical() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let cwd = PathBuf::from(OsStr::from_bytes(b"/tmp/caf\xe9/\xff"));
        let value = serde_json::to_value(header(cwd.clone())).unwrap();
        assert_eq!(
            value["cwd"],
            json!({"unix": [47, 116, 109, 112, 47, 99, 97, 102, 233, 47, 255]})
        );
        let back: SessionHeader = serde_json::from_value(value).unwrap();
        assert_eq!(back.cwd, cwd);
        assert_eq!(back.cwd.as_os_str().as_bytes(), b"/tmp/caf\xe9/\xff");
    }

    #[cfg(unix)]
    #[test]
    fn a_windows_cwd_is_refused_on_unix() {
        let mut value = serde_json::to_value(header("/w".into())).unwrap();
        value["cwd"] = json!({"windows": [67, 58, 92]});
        let err = serde_json::from_value::<SessionHeader>(value).unwrap_err();
        assert!(err.to_string().contains("windows utf-16 units"), "{err}");
    }

    #[test]
    fn a_cwd_of_the_wrong_shape_says_what_is_expected() {
        let mut value = serde_json::to_value(header("/w".into())).unwrap();
        value["cwd"] = Value::from(3);
        let err = serde_json::from_value::<SessionHeader>(value).unwrap_err();
        assert!(err.to_string().contains("a path: a string"), "{err}");
    }
}
