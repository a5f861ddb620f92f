//! Windows path facts computed on UTF-16 code units, never through
//! `std::path`, so they behave the same when tested on Linux (where
//! `std::path` does not treat `\` as a separator or `C:` as a prefix).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::error::Error;

const BACKSLASH: u16 = b'\\' as u16;
const SLASH: u16 = b'/' as u16;
const COLON: u16 = b':' as u16;
const QUESTION: u16 = b'?' as u16;
const DOT: u16 = b'.' as u16;
const SPACE: u16 = b' ' as u16;
/// `MAX_PATH` counts the terminating NUL.
const MAX_PATH: usize = 260;

/// The UTF-16 form of an OS string, or `None` when it has none (only possible
/// off Windows, where this crate never touches a real path).
pub(crate) fn wide(s: &OsStr) -> Option<Vec<u16>> {
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStrExt;
        Some(s.encode_wide().collect())
    }
    #[cfg(not(windows))]
    {
        s.to_str().map(|s| s.encode_utf16().collect())
    }
}

/// The inverse of [`wide`].
pub(crate) fn from_wide(w: &[u16]) -> Option<OsString> {
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStringExt;
        Some(OsString::from_wide(w))
    }
    #[cfg(not(windows))]
    {
        String::from_utf16(w).ok().map(OsString::from)
    }
}

fn wide_path(p: &Path) -> Result<Vec<u16>, Error> {
    wide(p.as_os_str()).ok_or_else(|| Error::PathEncoding {
        path: p.to_path_buf(),
    })
}

fn starts_with_ascii_ci(w: &[u16], prefix: &str) -> bool {
    w.len() >= prefix.len()
        && w.iter()
            .zip(prefix.bytes())
            .all(|(u, b)| u8::try_from(*u).is_ok_and(|c| c.eq_ignore_ascii_case(&b)))
}

fn is_drive(w: &[u16]) -> bool {
    w.len() >= 2 && u8::try_from(w[0]).is_ok_and(|c| c.is_ascii_alphabetic()) && w[1] == COLON
}

/// `std::fs::canonicalize` on Windows returns verbatim paths (`\\?\C:\...`,
/// `\\?\UNC\server\share\...`). Tools read `TMP`/`TEMP` and the workspace
/// path, and many mishandle the verbatim form, so the canonical form used
/// everywhere here (SID derivation included) drops the prefix when the plain
/// form names the very same file: under `MAX_PATH`, no component Win32 would
/// rewrite (trailing dot or space, reserved device name) and no character the
/// plain form forbids. Otherwise the verbatim form is kept. Deterministic, so
/// the workspace SID stays stable.
pub fn simplify(canonical: &Path) -> Result<PathBuf, Error> {
    let w = wide_path(canonical)?;
    let candidate: Vec<u16> = if starts_with_ascii_ci(&w, r"\\?\UNC\") {
        let mut c = vec![BACKSLASH, BACKSLASH];
        c.extend_from_slice(&w[8..]);
        c
    } else if w.starts_with(&[BACKSLASH, BACKSLASH, QUESTION, BACKSLASH])
        && is_drive(&w[4..])
        && w.get(6) == Some(&BACKSLASH)
    {
        w[4..].to_vec()
    } else {
        return Ok(canonical.to_path_buf());
    };
    if !plain_form_is_safe(&candidate) {
        return Ok(canonical.to_path_buf());
    }
    Ok(from_wide(&candidate).map_or_else(|| canonical.to_path_buf(), PathBuf::from))
}

fn plain_form_is_safe(w: &[u16]) -> bool {
    if w.len() >= MAX_PATH {
        return false;
    }
    // Past the drive (`C:`) or the UNC lead-in (`\\`).
    let body = &w[2..];
    for comp in body.split(|u| *u == BACKSLASH).filter(|c| !c.is_empty()) {
        if comp == [DOT] || comp == [DOT, DOT] {
            return false;
        }
        if comp.last().is_some_and(|u| *u == DOT || *u == SPACE) {
            return false;
        }
        if comp.iter().any(|u| {
            *u < 0x20
                || matches!(
                    u8::try_from(*u),
                    Ok(b'<' | b'>' | b':' | b'"' | b'|' | b'?' | b'*' | b'/')
                )
        }) {
            return false;
        }
        if is_reserved_device(comp) {
            return false;
        }
    }
    true
}

/// Win32 maps these names (with any extension) to devices in a plain path.
fn is_reserved_device(comp: &[u16]) -> bool {
    let stem_end = comp.iter().position(|u| *u == DOT).unwrap_or(comp.len());
    let stem: String = char::decode_utf16(comp[..stem_end].iter().copied())
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect::<String>()
        .trim_end_matches(' ')
        .to_uppercase();
    const FIXED: [&str; 6] = ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"];
    if FIXED.contains(&stem.as_str()) {
        return true;
    }
    let mut chars = stem.chars();
    let head: String = chars.by_ref().take(3).collect();
    let tail: Vec<char> = chars.collect();
    (head == "COM" || head == "LPT")
        && tail.len() == 1
        && (tail[0].is_ascii_digit() || matches!(tail[0], '¹' | '²' | '³'))
}

/// A path reduced to case-folded components, for containment checks.
#[derive(Debug, PartialEq, Eq)]
struct Key(Vec<Vec<u16>>);

/// Uppercase through a simple (one-to-one) mapping, as NTFS names and
/// environment variable names compare: each character with a one-character
/// uppercase form is mapped, others (and unpaired surrogates) are kept.
pub(crate) fn upcase(w: &[u16]) -> Vec<u16> {
    let mut out = Vec::with_capacity(w.len());
    for c in char::decode_utf16(w.iter().copied()) {
        match c {
            Ok(c) => {
                let mut up = c.to_uppercase();
                let mapped = match (up.next(), up.next()) {
                    (Some(u), None) => u,
                    _ => c,
                };
                let mut buf = [0u16; 2];
                out.extend_from_slice(mapped.encode_utf16(&mut buf));
            }
            Err(e) => out.push(e.unpaired_surrogate()),
        }
    }
    out
}

fn fold(comp: &[u16]) -> Vec<u16> {
    let mut out = upcase(comp);
    // Win32 drops trailing dots and spaces of plain-path components; folding
    // them away here can only make two paths compare as overlapping, which
    // makes the checks refuse more, never less.
    while out.last().is_some_and(|u| *u == DOT || *u == SPACE) {
        out.pop();
    }
    out
}

fn key(p: &Path) -> Result<Key, Error> {
    let w = wide_path(p)?;
    let not_absolute = || Error::NotAbsolute {
        path: p.to_path_buf(),
    };
    let mut comps: Vec<Vec<u16>> = Vec::new();
    let body: &[u16] = if starts_with_ascii_ci(&w, r"\\?\UNC\") {
        comps.push(vec![BACKSLASH, BACKSLASH]);
        &w[8..]
    } else if w.starts_with(&[BACKSLASH, BACKSLASH, QUESTION, BACKSLASH]) {
        &w[4..]
    } else if w.starts_with(&[BACKSLASH, BACKSLASH]) {
        // `\\.\` device paths are not directories this rung confines.
        if w.get(2) == Some(&DOT) || w.get(2) == Some(&QUESTION) {
            return Err(not_absolute());
        }
        comps.push(vec![BACKSLASH, BACKSLASH]);
        &w[2..]
    } else if is_drive(&w) && matches!(w.get(2), Some(&BACKSLASH) | Some(&SLASH)) {
        &w
    } else {
        return Err(not_absolute());
    };
    for comp in body.split(|u| *u == BACKSLASH || *u == SLASH) {
        if comp.is_empty() {
            continue;
        }
        if comp == [DOT] || comp == [DOT, DOT] {
            return Err(not_absolute());
        }
        comps.push(fold(comp));
    }
    let rooted = match comps.first() {
        Some(first) if first == &[BACKSLASH, BACKSLASH] => comps.len() >= 3,
        Some(first) => is_drive(first),
        None => false,
    };
    if rooted {
        Ok(Key(comps))
    } else {
        Err(not_absolute())
    }
}

/// Whether `inner` is `outer` or lies beneath it, comparing the way Windows
/// does: case-insensitively, `\` and `/` alike, verbatim and plain forms
/// alike.
pub fn same_or_within(inner: &Path, outer: &Path) -> Result<bool, Error> {
    let (i, o) = (key(inner)?, key(outer)?);
    Ok(i.0.len() >= o.0.len() && i.0[..o.0.len()] == o.0[..])
}

/// `root\name` with a Windows separator on every host.
pub fn join(root: &Path, name: &str) -> PathBuf {
    let mut s = OsString::from(root.as_os_str());
    if !matches!(
        root.as_os_str().as_encoded_bytes().last(),
        Some(b'\\' | b'/')
    ) {
        s.push("\\");
    }
    s.push(name);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn verbatim_prefixes_are_dropped_when_the_plain_form_is_the_same_file() {
        let cases = [
            (r"\\?\C:\Users\dev\proj", r"C:\Users\dev\proj"),
            (r"\\?\C:\", r"C:\"),
            (r"\\?\UNC\server\share\w", r"\\server\share\w"),
            (r"\\?\unc\server\share", r"\\server\share"),
            (r"C:\already\plain", r"C:\already\plain"),
            // Kept verbatim: the plain form would name something else.
            (r"\\?\C:\a\trailing.", r"\\?\C:\a\trailing."),
            (r"\\?\C:\a\trailing ", r"\\?\C:\a\trailing "),
            (r"\\?\C:\a\NUL", r"\\?\C:\a\NUL"),
            (r"\\?\C:\a\con.txt", r"\\?\C:\a\con.txt"),
            (r"\\?\C:\a\COM1", r"\\?\C:\a\COM1"),
            (r"\\?\C:\a\LPT¹", r"\\?\C:\a\LPT¹"),
            (r"\\?\Volume{0a1b}\x", r"\\?\Volume{0a1b}\x"),
        ];
        for (input, want) in cases {
            assert_eq!(simplify(p(input)).unwrap(), PathBuf::from(want), "{input}");
        }
        // Not reserved: only the exact stems are devices.
        assert_eq!(
            simplify(p(r"\\?\C:\a\console")).unwrap(),
            PathBuf::from(r"C:\a\console")
        );
        assert_eq!(
            simplify(p(r"\\?\C:\a\COM10")).unwrap(),
            PathBuf::from(r"C:\a\COM10")
        );
        let long = format!(r"\\?\C:\{}", "x".repeat(300));
        assert_eq!(simplify(p(&long)).unwrap(), PathBuf::from(&long));
    }

    #[test]
    fn containment_compares_like_windows() {
        let yes = [
            (r"C:\w", r"C:\w"),
            (r"C:\w\sub", r"C:\w"),
            (r"c:\W\Sub", r"C:\w"),
            (r"C:/w/sub", r"C:\w"),
            (r"\\?\C:\w\sub", r"C:\w"),
            (r"C:\w\sub\", r"\\?\C:\w"),
            (r"C:\ÄRGER\x", r"C:\ärger"),
            (r"\\srv\share\w", r"\\srv\share"),
            (r"\\?\UNC\srv\share\w\x", r"\\srv\share\w"),
            (r"C:\w\x", r"C:\"),
        ];
        for (inner, outer) in yes {
            assert!(
                same_or_within(p(inner), p(outer)).unwrap(),
                "{inner} in {outer}"
            );
        }
        let no = [
            (r"C:\wx", r"C:\w"),
            (r"C:\w", r"C:\w\sub"),
            (r"D:\w", r"C:\w"),
            (r"\\srv\share\w", r"C:\srv\share"),
            (r"\\srv\other", r"\\srv\share"),
        ];
        for (inner, outer) in no {
            assert!(
                !same_or_within(p(inner), p(outer)).unwrap(),
                "{inner} in {outer}"
            );
        }
    }

    #[test]
    fn relative_and_unnormalized_paths_are_refused() {
        for bad in [
            "relative",
            r"\rooted",
            r"C:drive-relative",
            r"C:\a\..\b",
            r"C:\a\.\b",
            r"\\.\pipe\x",
            r"\\server",
            "",
        ] {
            assert!(
                matches!(
                    same_or_within(p(bad), p(r"C:\")),
                    Err(Error::NotAbsolute { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn join_uses_a_windows_separator() {
        assert_eq!(join(p(r"C:\t"), "n"), PathBuf::from(r"C:\t\n"));
        assert_eq!(join(p(r"C:\t\"), "n"), PathBuf::from(r"C:\t\n"));
        assert_eq!(join(p(r"C:\"), "n"), PathBuf::from(r"C:\n"));
    }
}
