//! Just enough of git's index format (`DIRC`, versions 2, 3 and 4) to list
//! the gitlinks it stages (entries of mode `0160000`) and the shared index a
//! split index points at. A gitlink is a nested repository the user's next
//! `git status` recurses into; see `audit`. Read-only, bounded, and total:
//! any byte string gives a list or an error, never a panic.

use thiserror::Error;

/// The mode git gives a gitlink entry (`S_IFGITLINK`).
const GITLINK: u32 = 0o160000;
/// Mask of an entry's mode holding its type.
const TYPE_MASK: u32 = 0o170000;
/// Entry flag: a second flags word follows (versions 3 and 4).
const EXTENDED: u16 = 0x4000;
/// Entry flag bits holding the name length (`0xfff` means "at least").
const NAME_MASK: u16 = 0x0fff;
/// The fixed stat part of an entry, before the object id.
const STAT_LEN: usize = 40;

/// Why an index could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IndexError {
    #[error("the index is truncated at byte {at}")]
    Truncated { at: usize },
    #[error("not a git index (no DIRC signature)")]
    Signature,
    #[error("index version {version} is not understood")]
    Version { version: u32 },
    #[error("entry {entry}: its name is not terminated")]
    Name { entry: u32 },
    #[error("entry {entry}: its compressed name removes {strip} bytes of a {len}-byte name")]
    Prefix {
        entry: u32,
        strip: usize,
        len: usize,
    },
}

/// What an index stages that matters after a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// The paths (relative to the worktree top, `/`-separated bytes) of the
    /// gitlink entries, in index order.
    pub gitlinks: Vec<Vec<u8>>,
    /// A split index's shared index object id (`sharedindex.<hex>` in the
    /// git directory holds the rest of the entries), lower-case hex.
    pub shared: Option<String>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], IndexError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(IndexError::Truncated { at: self.at })?;
        let s = self
            .bytes
            .get(self.at..end)
            .ok_or(IndexError::Truncated { at: self.at })?;
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, IndexError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u16(&mut self) -> Result<u16, IndexError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn byte(&mut self) -> Result<u8, IndexError> {
        Ok(self.take(1)?[0])
    }

    /// git's offset varint (`decode_varint`): big-endian 7-bit groups,
    /// each continuation adding one, so every value has one spelling.
    fn varint(&mut self) -> Result<usize, IndexError> {
        let mut c = self.byte()?;
        let mut val = usize::from(c & 0x7f);
        while c & 0x80 != 0 {
            c = self.byte()?;
            val = val
                .checked_add(1)
                .and_then(|v| v.checked_mul(128))
                .and_then(|v| v.checked_add(usize::from(c & 0x7f)))
                .ok_or(IndexError::Truncated { at: self.at })?;
        }
        Ok(val)
    }

    /// Bytes up to (not including) the next NUL, which is consumed.
    fn until_nul(&mut self, entry: u32) -> Result<&'a [u8], IndexError> {
        let rest = self.bytes.get(self.at..).unwrap_or(&[]);
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(IndexError::Name { entry })?;
        let s = &rest[..n];
        self.at += n + 1;
        Ok(s)
    }
}

/// Parse `bytes` as an index whose object ids are `hash_len` bytes (20 for
/// SHA-1, 32 for SHA-256). The trailing checksum is not verified: git
/// itself refuses a corrupt index, and a list from one is only more to
/// look at.
pub fn parse(bytes: &[u8], hash_len: usize) -> Result<Index, IndexError> {
    let mut c = Cursor { bytes, at: 0 };
    if c.take(4).map_err(|_| IndexError::Signature)? != b"DIRC" {
        return Err(IndexError::Signature);
    }
    let version = c.u32()?;
    if !(2..=4).contains(&version) {
        return Err(IndexError::Version { version });
    }
    let count = c.u32()?;
    let mut out = Index::default();
    let mut previous: Vec<u8> = Vec::new();
    for entry in 0..count {
        let start = c.at;
        let stat = c.take(STAT_LEN)?;
        let mode = u32::from_be_bytes([stat[24], stat[25], stat[26], stat[27]]);
        c.take(hash_len)?;
        let flags = c.u16()?;
        if flags & EXTENDED != 0 && version >= 3 {
            c.u16()?;
        }
        let name = if version == 4 {
            let strip = c.varint()?;
            let suffix = c.until_nul(entry)?;
            let keep = previous
                .len()
                .checked_sub(strip)
                .ok_or(IndexError::Prefix {
                    entry,
                    strip,
                    len: previous.len(),
                })?;
            previous.truncate(keep);
            previous.extend_from_slice(suffix);
            previous.clone()
        } else {
            let len = usize::from(flags & NAME_MASK);
            let name = if len < usize::from(NAME_MASK) {
                let n = c.take(len)?.to_vec();
                // At least one NUL follows the name.
                c.take(1)?;
                n
            } else {
                c.until_nul(entry)?.to_vec()
            };
            // Entries are padded with NULs to a multiple of eight bytes.
            let used = c.at - start;
            let padded = used.div_ceil(8) * 8;
            c.take(padded - used)?;
            name
        };
        if mode & TYPE_MASK == GITLINK {
            out.gitlinks.push(name);
        }
    }
    // Extensions: a 4-byte signature and a 32-bit size each, until only
    // the trailing checksum is left. A damaged one ends the reading but
    // keeps the entries: they are what matters, and git reads them first.
    while bytes.len().saturating_sub(c.at) > hash_len {
        let Ok(sig) = c.take(4) else { break };
        let Ok(size) = c.u32() else { break };
        let Ok(size) = usize::try_from(size) else {
            break;
        };
        let Ok(data) = c.take(size) else { break };
        if sig == b"link" && data.len() >= hash_len {
            let id = &data[..hash_len];
            // An all-zero id: the split index is being removed.
            if id.iter().any(|&b| b != 0) {
                out.shared = Some(id.iter().map(|b| format!("{b:02x}")).collect());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry as git writes it for `version`.
    fn entry(version: u32, mode: u32, name: &[u8], strip: Option<usize>) -> Vec<u8> {
        let mut e = vec![0u8; STAT_LEN];
        e[24..28].copy_from_slice(&mode.to_be_bytes());
        e.extend_from_slice(&[0xab; 20]);
        let len = name.len().min(usize::from(NAME_MASK)) as u16;
        e.extend_from_slice(&len.to_be_bytes());
        if version == 4 {
            let strip = strip.unwrap_or(0);
            assert!(strip < 128);
            e.push(strip as u8);
            e.extend_from_slice(name);
            e.push(0);
        } else {
            e.extend_from_slice(name);
            let used = e.len();
            let padded = (used + 8) & !7;
            e.resize(padded, 0);
        }
        e
    }

    fn index(version: u32, entries: &[Vec<u8>], ext: &[u8]) -> Vec<u8> {
        let mut b = b"DIRC".to_vec();
        b.extend_from_slice(&version.to_be_bytes());
        b.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for e in entries {
            b.extend_from_slice(e);
        }
        b.extend_from_slice(ext);
        b.extend_from_slice(&[0x11; 20]);
        b
    }

    #[test]
    fn gitlinks_are_found_in_every_version() {
        for v in [2, 3] {
            let b = index(
                v,
                &[
                    entry(v, 0o100644, b"a.txt", None),
                    entry(v, 0o160000, b"sub/evil", None),
                    entry(v, 0o120000, b"link", None),
                    entry(v, 0o160000, b"x", None),
                ],
                &[],
            );
            let i = parse(&b, 20).unwrap();
            assert_eq!(
                i.gitlinks,
                vec![b"sub/evil".to_vec(), b"x".to_vec()],
                "v{v}"
            );
            assert_eq!(i.shared, None);
        }
        // Version 4: each name strips bytes off the previous one.
        let b = index(
            4,
            &[
                entry(4, 0o100644, b"sub/a", Some(0)),
                entry(4, 0o160000, b"evil", Some(1)),
                entry(4, 0o160000, b"2", Some(0)),
            ],
            &[],
        );
        let i = parse(&b, 20).unwrap();
        assert_eq!(
            i.gitlinks,
            vec![b"sub/evil".to_vec(), b"sub/evil2".to_vec()]
        );
    }

    #[test]
    fn a_split_index_names_its_shared_index() {
        let mut ext = b"link".to_vec();
        ext.extend_from_slice(&24u32.to_be_bytes());
        ext.extend_from_slice(&[0x0f; 20]);
        ext.extend_from_slice(&[0; 4]);
        let b = index(2, &[entry(2, 0o160000, b"e", None)], &ext);
        let i = parse(&b, 20).unwrap();
        assert_eq!(i.shared.as_deref(), Some("0f".repeat(20).as_str()));
    }

    #[test]
    fn damage_is_an_error() {
        assert_eq!(parse(b"DIRX", 20), Err(IndexError::Signature));
        assert_eq!(parse(b"DI", 20), Err(IndexError::Signature));
        let b = index(5, &[], &[]);
        assert_eq!(parse(&b, 20), Err(IndexError::Version { version: 5 }));
        let mut b = index(2, &[entry(2, 0o160000, b"e", None)], &[]);
        b[11] = 2; // two entries claimed, one present
        assert!(matches!(parse(&b, 20), Err(IndexError::Truncated { .. })));
        let b = index(4, &[entry(4, 0o160000, b"e", Some(3))], &[]);
        assert!(matches!(parse(&b, 20), Err(IndexError::Prefix { .. })));
    }

    /// The real thing: an index git wrote, with a gitlink staged the way
    /// the attack stages one.
    #[test]
    fn an_index_git_wrote_is_read() {
        let Ok(out) = std::process::Command::new("git").arg("--version").output() else {
            return;
        };
        assert!(out.status.success());
        let d = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .arg("-C")
                .arg(d.path())
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        git(&["init", "-q"]);
        std::fs::write(d.path().join("f"), "x").unwrap();
        git(&["add", "f"]);
        let sha = "0123456789abcdef0123456789abcdef01234567";
        for v in ["2", "3", "4"] {
            git(&["update-index", "--index-version", v]);
            git(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},deep/er/evil"),
            ]);
            let b = std::fs::read(d.path().join(".git/index")).unwrap();
            let i = parse(&b, 20).unwrap();
            assert_eq!(i.gitlinks, vec![b"deep/er/evil".to_vec()], "v{v}");
        }
        git(&["update-index", "--split-index"]);
        let b = std::fs::read(d.path().join(".git/index")).unwrap();
        let i = parse(&b, 20).unwrap();
        let shared = i.shared.unwrap();
        let b = std::fs::read(d.path().join(format!(".git/sharedindex.{shared}"))).unwrap();
        let s = parse(&b, 20).unwrap();
        assert_eq!(s.gitlinks, vec![b"deep/er/evil".to_vec()]);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse(&bytes, 20);
            let _ = parse(&bytes, 32);
        }

        #[test]
        fn a_damaged_real_index_never_panics(
            at in 0usize..400,
            byte in proptest::num::u8::ANY,
            cut in 0usize..400,
        ) {
            let mut b = index(4, &[
                entry(4, 0o100644, b"sub/a", Some(0)),
                entry(4, 0o160000, b"evil", Some(1)),
            ], &[]);
            let mut c = index(2, &[entry(2, 0o160000, b"evil", None)], b"link\0\0\0\x04abcd");
            for v in [&mut b, &mut c] {
                if let Some(x) = v.get_mut(at) { *x = byte; }
                v.truncate(cut.max(1));
                let _ = parse(v, 20);
            }
        }
    }
}
