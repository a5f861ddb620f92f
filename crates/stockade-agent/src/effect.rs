//! What a widened call would do, as one comparable key: the identity a
//! rejection is remembered by. A model that was refused must not get a new
//! question by spelling the same effect differently (extra whitespace, a
//! `bash -c` wrapper, the edit tool instead of write), so the key is built
//! from the effect, never from the text of the request.
//!
//! Two different effects that fold to one key only make a request answered
//! from an earlier rejection (nothing runs); one effect that folds to two
//! keys lets the model ask again. So a fold merges wherever the effect is
//! plainly the same, and keeps apart only what could differ.

use std::path::Path;

/// Interpreters whose `-c SCRIPT` runs SCRIPT and nothing else: the wrapper
/// adds no effect of its own.
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "ash",
    "busybox sh",
];

/// Wrappers are peeled at most this deep (`sh -c "bash -c '...'"`); beyond
/// it the text is kept as it is, which is still a valid key.
const MAX_PEEL: usize = 8;

/// The key of a command run in `workdir`.
pub fn command(command: &str, workdir: &Path) -> String {
    format!("run {} in {}", command_words(command), path_key(workdir))
}

/// The key of writing the file at `path` (absolute, lexically normal), the
/// same whichever tool (write, edit) would do it.
pub fn file_write(path: &Path) -> String {
    format!("write {}", path_key(path))
}

/// The key of reading the file at `path`.
pub fn file_read(path: &Path) -> String {
    format!("read {}", path_key(path))
}

/// A path as an unambiguous string: its bytes, non-UTF-8 ones escaped, so
/// two different names never meet (the key is compared, never opened).
fn path_key(path: &Path) -> String {
    path.as_os_str()
        .as_encoded_bytes()
        .escape_ascii()
        .to_string()
}

/// The command as its words (shell quoting undone, whitespace folded),
/// with every `SHELL [-flags] -c SCRIPT` wrapper peeled. Text that does not
/// split (an open quote) keeps its whitespace-folded form.
fn command_words(command: &str) -> String {
    let mut text = command.to_owned();
    for _ in 0..MAX_PEEL {
        let Some(words) = shlex::split(&text) else {
            return fold_whitespace(&text);
        };
        match peel(&words) {
            Some(script) => text = script.to_owned(),
            None => return join_words(&words),
        }
    }
    fold_whitespace(&text)
}

/// The script of `SHELL [-e|-l|-x...] -c SCRIPT` (a path to the shell too:
/// `/bin/bash`, `/usr/bin/env bash`), or `None`.
fn peel(words: &[String]) -> Option<&str> {
    let mut rest = words;
    if rest.first().is_some_and(|w| base_name(w) == "env") {
        rest = &rest[1..];
    }
    let (shell, mut rest) = rest.split_first()?;
    if !SHELLS.contains(&base_name(shell)) {
        return None;
    }
    // Option words before the script: `-c` alone or inside a cluster
    // (`-lc`, `-ec`), other single-letter options around it.
    let mut saw_c = false;
    while let Some((w, tail)) = rest.split_first() {
        let Some(flags) = w.strip_prefix('-') else {
            break;
        };
        if flags.is_empty()
            || flags.starts_with('-')
            || !flags.chars().all(|c| c.is_ascii_alphabetic())
        {
            return None;
        }
        saw_c |= flags.contains('c');
        rest = tail;
    }
    // `sh -c SCRIPT` alone: words after the script become $0, $1, ...,
    // which the script may read, so those are a different effect.
    match rest {
        [script] if saw_c => Some(script.as_str()),
        _ => None,
    }
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn fold_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Words joined so that a word boundary and a space inside a word differ
/// (`echo "a b"` is not `echo a b`).
fn join_words(words: &[String]) -> String {
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| {
        // A NUL cannot be quoted; the debug form still keeps words apart.
        format!("{words:?}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: &str) -> String {
        command(c, Path::new("/ws"))
    }

    #[test]
    fn spellings_of_one_command_share_a_key() {
        let same = [
            "make install",
            "  make   install  ",
            "make\tinstall\n",
            "'make' \"install\"",
            "bash -c 'make install'",
            "sh -c \"make install\"",
            "/bin/bash -lc 'make   install'",
            "/usr/bin/env bash -c 'make install'",
            "sh -c \"bash -c 'make install'\"",
            "bash -e -c 'make install'",
        ];
        for spelling in same {
            assert_eq!(key(spelling), key("make install"), "{spelling:?}");
        }
    }

    #[test]
    fn different_effects_keep_different_keys() {
        let base = key("make install");
        for other in [
            "make",
            "make install2",
            "make 'install x'",
            "bash -c 'make install' extra",
            "python -c 'make install'",
            "bash script.sh",
            "bash --norc -c 'make install'",
        ] {
            assert_ne!(key(other), base, "{other:?}");
        }
        assert_ne!(key("echo 'a b'"), key("echo a b"));
        assert_ne!(
            command("make install", Path::new("/ws/sub")),
            command("make install", Path::new("/ws"))
        );
    }

    #[test]
    fn unsplittable_text_folds_its_whitespace() {
        assert_eq!(key("echo 'open"), key("echo   'open"));
        assert_ne!(key("echo 'open"), key("echo 'opened"));
    }

    #[test]
    fn the_file_tools_share_a_write_key_and_reads_have_their_own() {
        let p = Path::new("/ws/a.txt");
        assert_eq!(file_write(p), file_write(Path::new("/ws/a.txt")));
        assert_ne!(file_write(p), file_read(p));
        assert_ne!(file_write(p), command("a.txt", Path::new("/ws")));
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_paths_stay_apart() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let a = Path::new(OsStr::from_bytes(b"/ws/\xff"));
        let b = Path::new(OsStr::from_bytes(b"/ws/\xfe"));
        assert_ne!(file_write(a), file_write(b));
    }
}
