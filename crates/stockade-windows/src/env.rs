//! The child's environment: TMP/TEMP rewritten to the private temp directory,
//! and the Unicode environment block `CreateProcessAsUserW` takes.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::error::Error;
use crate::paths;

/// The variables Windows programs (and `GetTempPathW`) read for the temp
/// directory.
pub const TEMP_VARS: [&str; 2] = ["TMP", "TEMP"];

/// `vars` with every TMP/TEMP (any case: Windows names are case-insensitive)
/// replaced by the private temp directory. Without a private temp directory
/// (read-only) the ambient values are kept: writes there are denied anyway,
/// and the ambient temp root is never an implicit grant.
pub fn with_private_temp(
    vars: Vec<(OsString, OsString)>,
    temp: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let Some(temp) = temp else { return vars };
    let mut out: Vec<(OsString, OsString)> = vars
        .into_iter()
        .filter(|(k, _)| !TEMP_VARS.iter().any(|t| k.eq_ignore_ascii_case(t)))
        .collect();
    for t in TEMP_VARS {
        out.push((OsString::from(t), temp.as_os_str().to_owned()));
    }
    out
}

fn wide_of(s: &OsStr, what: &'static str) -> Result<Vec<u16>, Error> {
    let w = paths::wide(s).ok_or_else(|| Error::EnvName { name: s.to_owned() })?;
    if w.contains(&0) {
        return Err(Error::InteriorNul { what });
    }
    Ok(w)
}

/// `NAME=VALUE\0...\0\0`, sorted by uppercased name as Windows requires,
/// one entry per case-insensitive name (the last one given wins, like
/// setting a variable twice). A name may start with `=` (the hidden per-drive
/// directories) but not contain one later.
pub fn block(vars: &[(OsString, OsString)]) -> Result<Vec<u16>, Error> {
    let mut entries: Vec<(Vec<u16>, Vec<u16>, Vec<u16>)> = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        let name = wide_of(k, "an environment variable name")?;
        let eq = u16::from(b'=');
        if name.is_empty() || name.iter().skip(1).any(|u| *u == eq) {
            return Err(Error::EnvName { name: k.clone() });
        }
        let value = wide_of(v, "an environment variable value")?;
        let key = paths::upcase(&name);
        entries.retain(|(existing, _, _)| *existing != key);
        entries.push((key, name, value));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (_, name, value) in entries {
        out.extend_from_slice(&name);
        out.push(u16::from(b'='));
        out.extend_from_slice(&value);
        out.push(0);
    }
    if out.is_empty() {
        // An empty block is still terminated by two NULs.
        out.push(0);
    }
    out.push(0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    fn text(block: &[u16]) -> String {
        String::from_utf16(block).unwrap()
    }

    #[test]
    fn tmp_and_temp_point_at_the_private_directory_in_any_case() {
        let out = with_private_temp(
            vars(&[
                ("Path", r"C:\bin"),
                ("tmp", r"C:\Users\dev\AppData\Local\Temp"),
                ("TEMP", r"C:\Users\dev\AppData\Local\Temp"),
                ("TMPDIR", "/tmp"),
            ]),
            Some(Path::new(r"C:\T\stockade-ab")),
        );
        assert_eq!(
            out,
            vars(&[
                ("Path", r"C:\bin"),
                ("TMPDIR", "/tmp"),
                ("TMP", r"C:\T\stockade-ab"),
                ("TEMP", r"C:\T\stockade-ab"),
            ])
        );
        // Set even when the caller had none.
        let out = with_private_temp(vars(&[]), Some(Path::new(r"C:\T\s")));
        assert_eq!(out, vars(&[("TMP", r"C:\T\s"), ("TEMP", r"C:\T\s")]));
    }

    #[test]
    fn read_only_keeps_the_ambient_values() {
        let v = vars(&[("TEMP", r"C:\amb")]);
        assert_eq!(with_private_temp(v.clone(), None), v);
    }

    #[test]
    fn the_block_is_sorted_deduplicated_and_double_nul_terminated() {
        let b = block(&vars(&[
            ("b", "2"),
            ("=C:", r"C:\w"),
            ("A", "1"),
            ("Path", "x"),
            ("PATH", "y"),
        ]))
        .unwrap();
        assert_eq!(text(&b), "=C:=C:\\w\0A=1\0b=2\0PATH=y\0\0");
        assert_eq!(block(&[]).unwrap(), [0, 0]);
    }

    #[test]
    fn invalid_entries_are_refused() {
        assert!(matches!(
            block(&vars(&[("A=B", "1")])),
            Err(Error::EnvName { .. })
        ));
        assert!(matches!(
            block(&vars(&[("", "1")])),
            Err(Error::EnvName { .. })
        ));
        assert!(matches!(
            block(&vars(&[("A", "1\0")])),
            Err(Error::InteriorNul { .. })
        ));
    }
}
