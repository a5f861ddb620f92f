//! What the configuration git itself would read in a workspace names that
//! git later runs or reads more configuration from: hooks directories,
//! programs (`core.fsmonitor`, `core.pager`, filters, diff and merge
//! drivers, credential helpers, aliases, ...) and included files.
//!
//! The files are those git reads: system (`$GIT_CONFIG_SYSTEM` or the
//! system file, unless `$GIT_CONFIG_NOSYSTEM`), global (`$GIT_CONFIG_GLOBAL`,
//! else `$XDG_CONFIG_HOME/git/config` or `~/.config/git/config`, and
//! `~/.gitconfig`), every git directory's `config` and `config.worktree`,
//! and every file they include. Each is parsed by `gix-config`, git's own
//! syntax (quoting, continuation lines, case rules). Every `include.path`
//! and every `includeIf.<condition>.path` is followed whatever its
//! condition: a condition such as `onbranch:` can change during a run, so
//! the wider set is the one to protect. The git installation's own file
//! (`$(git --exec-path)/../etc/gitconfig` style) is not read: finding it
//! would run git itself; it lies outside every workspace in practice.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix_config::file::{Metadata, init};

/// At most this many configuration files are read for one workspace (an
/// include cycle or a fan-out stops here).
const MAX_FILES: usize = 256;

/// What one configuration value makes git run or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `core.hooksPath`: a directory of hooks (relative to the worktree).
    Hooks(PathBuf),
    /// A path a command names (its program, or a script it is given),
    /// resolved against the worktree top when relative.
    Program(PathBuf),
    /// A configuration file read by `include.path` / `includeIf.*.path`.
    Include(PathBuf),
}

/// The configuration git would read for `gitdirs` (their `config` and
/// `config.worktree`) plus the system and global files, and what they name.
/// Returns the files that exist (read or not) and the targets.
pub(crate) fn targets(top: &Path, gitdirs: &[PathBuf]) -> (Vec<PathBuf>, Vec<Target>) {
    let env = |name: &str| std::env::var_os(name);
    let mut queue: Vec<PathBuf> = Vec::new();
    for source in [
        gix_config::Source::System,
        gix_config::Source::Git,
        gix_config::Source::User,
    ] {
        if let Some(p) = source.storage_location(&mut |n| env(n)) {
            queue.push(p);
        }
    }
    for dir in gitdirs {
        queue.push(dir.join("config"));
        queue.push(dir.join("config.worktree"));
    }
    let home = env("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
    let mut files: Vec<PathBuf> = Vec::new();
    let mut out: Vec<Target> = Vec::new();
    let mut i = 0;
    while i < queue.len() && files.len() < MAX_FILES {
        let path = queue[i].clone();
        i += 1;
        if files.contains(&path) {
            continue;
        }
        // A run may have planted a FIFO or a huge file at an included name.
        let Ok(bytes) = crate::bounded::read_path(&path, crate::bounded::MAX_CONFIG) else {
            continue;
        };
        files.push(path.clone());
        let base = path.parent().unwrap_or(top).to_path_buf();
        for (section, key, value) in entries(&bytes) {
            for t in classify(&section, &key, &value, top, &base, home.as_deref()) {
                if let Target::Include(inc) = &t {
                    queue.push(inc.clone());
                }
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    (files, out)
}

/// `(section, subsection, key, value)` triples as `(section, key, value)`,
/// section and key lower-cased (git compares them case-insensitively; the
/// subsection is not needed to decide what a key runs). A file git cannot
/// parse makes git itself refuse to run, so it names nothing.
pub(crate) fn entries(bytes: &[u8]) -> Vec<(String, String, OsString)> {
    let Ok(file) = gix_config::File::from_bytes_no_includes(
        bytes,
        Metadata::from(gix_config::Source::Local),
        init::Options::default(),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for section in file.sections() {
        let name = section.header().name().to_string().to_ascii_lowercase();
        let mut keys: Vec<String> = section.value_names().collect();
        keys.dedup();
        for key in keys {
            for v in section.values(&key) {
                out.push((
                    name.clone(),
                    key.to_ascii_lowercase(),
                    OsStr::from_bytes(v.as_slice()).to_os_string(),
                ));
            }
        }
    }
    out
}

/// The keys whose value is a command git (or a tool it starts) runs.
fn is_command(section: &str, key: &str) -> bool {
    matches!(
        (section, key),
        (
            "core",
            "fsmonitor" | "sshcommand" | "editor" | "pager" | "askpass" | "gitproxy"
        ) | ("sequence", "editor")
            | ("gpg", "program")
            | ("diff", "command" | "textconv" | "external")
            | ("merge", "driver")
            | ("filter", "clean" | "smudge" | "process")
            | ("credential", "helper")
            | ("interactive", "difffilter")
            | (
                "mergetool" | "difftool" | "browser" | "man" | "guitool",
                "cmd" | "path"
            )
            | ("web", "browser")
            | ("remote", "uploadpack" | "receivepack")
            | ("uploadpack", "packobjectshook")
            | ("sendemail", "sendmailcmd" | "smtpserver")
            | ("imap", "tunnel")
            | ("pager" | "alias", _)
    )
}

pub(crate) fn classify(
    section: &str,
    key: &str,
    value: &OsStr,
    top: &Path,
    base: &Path,
    home: Option<&Path>,
) -> Vec<Target> {
    if value.is_empty() {
        return Vec::new();
    }
    match (section, key) {
        ("include" | "includeif", "path") => {
            vec![Target::Include(resolve(base, Path::new(value), home))]
        }
        ("core", "hookspath") => vec![Target::Hooks(resolve(top, Path::new(value), home))],
        _ if is_command(section, key) => words(value)
            .into_iter()
            .map(|w| Target::Program(resolve(top, Path::new(&w), home)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The words of a command that name a file (hold a `/`), unquoted: the
/// program itself and any script it is given (`sh ./tools/x.sh`). A bare
/// name is found on `$PATH`, which is outside this list (see the README).
fn words(value: &OsStr) -> Vec<OsString> {
    let bytes = value.as_bytes();
    let bytes = bytes.strip_prefix(b"!").unwrap_or(bytes);
    bytes
        .split(|b| b.is_ascii_whitespace() || matches!(b, b';' | b'&' | b'|' | b'(' | b')'))
        .map(|w| {
            let w = w.strip_prefix(b"\"").unwrap_or(w);
            let w = w.strip_suffix(b"\"").unwrap_or(w);
            let w = w.strip_prefix(b"'").unwrap_or(w);
            w.strip_suffix(b"'").unwrap_or(w)
        })
        .filter(|w| w.contains(&b'/'))
        .map(|w| OsStr::from_bytes(w).to_os_string())
        .collect()
}

/// `~/x` against `$HOME`, an absolute path as is, a relative one against
/// `base` (as git resolves each of these keys).
fn resolve(base: &Path, value: &Path, home: Option<&Path>) -> PathBuf {
    if let Ok(rest) = value.strip_prefix("~")
        && let Some(h) = home
    {
        return h.join(rest);
    }
    base.join(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_syntax_is_read_as_git_reads_it() {
        let text = b"[Core]\n\tHooksPath = \"./hooks dir\"\n\tfsMonitor = ./mon.sh ; comment\n[diff \"x\"]\n\ttextconv = sh tools/conv\n[alias]\n\tst = !./scripts/st\n[include]\n\tpath = ~/inc\n[filter \"f\"]\n\tclean = \\\n  /opt/clean\n";
        let home = Path::new("/home/u");
        let mut got = Vec::new();
        for (s, k, v) in entries(text) {
            got.extend(classify(
                &s,
                &k,
                &v,
                Path::new("/ws"),
                Path::new("/ws/.git"),
                Some(home),
            ));
        }
        assert_eq!(
            got,
            vec![
                Target::Hooks("/ws/./hooks dir".into()),
                Target::Program("/ws/./mon.sh".into()),
                Target::Program("/ws/tools/conv".into()),
                Target::Program("/ws/./scripts/st".into()),
                Target::Include("/home/u/inc".into()),
                Target::Program("/opt/clean".into()),
            ]
        );
    }
}
