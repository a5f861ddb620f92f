//! Operator settings for the local provider, validated when they are built.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use stockade_core::ParseVocabularyError;

/// Which backend of the platform chain to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendPreference {
    /// Probe the chain in order and take the first that really confines.
    #[default]
    Auto,
    /// Only bwrap: a sole candidate, not probed.
    Bwrap,
    /// Only the Landlock launcher: a sole candidate, not probed.
    Landlock,
}

impl BackendPreference {
    pub const NAMES: &'static [&'static str] = &["auto", "bwrap", "landlock"];

    pub const fn as_str(self) -> &'static str {
        match self {
            BackendPreference::Auto => "auto",
            BackendPreference::Bwrap => "bwrap",
            BackendPreference::Landlock => "landlock",
        }
    }
}

impl fmt::Display for BackendPreference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendPreference {
    type Err = ParseVocabularyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "bwrap" => Ok(Self::Bwrap),
            "landlock" => Ok(Self::Landlock),
            _ => Err(ParseVocabularyError {
                vocabulary: "sandbox backend",
                value: s.to_owned(),
                valid: Self::NAMES,
            }),
        }
    }
}

/// A settings value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("runner_command: must name a program (it is empty)")]
    EmptyRunnerCommand,
    #[error("runner_failure_signatures[{index}]: must not be empty")]
    EmptySignature { index: usize },
    #[error("runner_failure_signatures[{index}]: must be a single line, got {value:?}")]
    MultilineSignature { index: usize, value: String },
    #[error("probe_timeout: must be greater than zero")]
    ZeroProbeTimeout,
    #[error("allow_sockets[{index}]: must be an absolute path, got {}", path.display())]
    RelativeSocket { index: usize, path: PathBuf },
}

/// An operator-asserted bwrap-compatible runner: the chain and its probes are
/// skipped and the runner receives the bwrap profile arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerCommand {
    argv: Vec<OsString>,
    failure_signatures: Vec<String>,
}

impl RunnerCommand {
    pub fn new(
        argv: Vec<OsString>,
        failure_signatures: Vec<String>,
    ) -> Result<Self, SettingsError> {
        match argv.first() {
            Some(p) if !p.is_empty() => {}
            _ => return Err(SettingsError::EmptyRunnerCommand),
        }
        for (index, s) in failure_signatures.iter().enumerate() {
            if s.is_empty() {
                return Err(SettingsError::EmptySignature { index });
            }
            if s.contains(['\n', '\r']) {
                return Err(SettingsError::MultilineSignature {
                    index,
                    value: s.clone(),
                });
            }
        }
        Ok(Self {
            argv,
            failure_signatures,
        })
    }

    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    pub fn failure_signatures(&self) -> &[String] {
        &self.failure_signatures
    }
}

/// Everything an operator may set on the local provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSettings {
    pub backend: BackendPreference,
    /// bwrap to use instead of the one on `PATH`.
    pub bwrap_path: Option<PathBuf>,
    /// The launcher to use when none is next to the executable or on `PATH`.
    pub launcher_path: Option<PathBuf>,
    pub runner_command: Option<RunnerCommand>,
    pub probe_timeout: Duration,
    /// Where `auto` may keep its verdict between processes, in order: a run
    /// uses the first that lies beneath none of its writable roots. Empty
    /// keeps the verdict for the provider's lifetime only.
    pub verdict_cache_dirs: Vec<PathBuf>,
    /// Unix sockets a confined command may still connect to (absolute
    /// paths). Every other socket outside the sandbox is out of reach.
    pub allow_sockets: Vec<PathBuf>,
}

impl Default for LocalSettings {
    fn default() -> Self {
        Self {
            backend: BackendPreference::Auto,
            bwrap_path: None,
            launcher_path: None,
            runner_command: None,
            probe_timeout: Duration::from_secs(5),
            verdict_cache_dirs: Vec::new(),
            allow_sockets: Vec::new(),
        }
    }
}

/// `/var/tmp/stockade-<euid>`: no sandbox writes `/var/tmp` unless it is
/// granted, and its sticky bit keeps other users from renaming our
/// directory (one they made first is not ours, so it is never trusted).
/// Only the Linux chain probes, so only it keeps a verdict.
#[cfg(target_os = "linux")]
fn per_user_var_tmp() -> Option<PathBuf> {
    Some(PathBuf::from(format!(
        "/var/tmp/stockade-{}",
        rustix::process::geteuid().as_raw()
    )))
}

#[cfg(not(target_os = "linux"))]
fn per_user_var_tmp() -> Option<PathBuf> {
    None
}

impl LocalSettings {
    /// Where a process keeps `auto`'s verdict by default, per user: per boot
    /// in `$XDG_RUNTIME_DIR` (a tmpfs) when it is set; then the XDG cache
    /// dir; then `/var/tmp/stockade-<euid>`, for the runs whose workspace
    /// holds the cache dir (`$HOME` as the workspace with no runtime dir)
    /// and which would otherwise probe on every start.
    pub fn default_verdict_cache_dirs() -> Vec<PathBuf> {
        let nonempty = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let mut dirs: Vec<PathBuf> = [
            nonempty("XDG_RUNTIME_DIR"),
            nonempty("XDG_CACHE_HOME").or_else(|| nonempty("HOME").map(|h| h.join(".cache"))),
        ]
        .into_iter()
        .flatten()
        .filter(|d| d.is_absolute())
        .map(|d| d.join("stockade"))
        .chain(per_user_var_tmp())
        .collect();
        dirs.dedup();
        dirs
    }

    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.probe_timeout.is_zero() {
            return Err(SettingsError::ZeroProbeTimeout);
        }
        for (index, path) in self.allow_sockets.iter().enumerate() {
            if !path.is_absolute() {
                return Err(SettingsError::RelativeSocket {
                    index,
                    path: path.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Create the caches a toolchain group names (`@npm` is `~/.npm`, ...) when
/// they are missing, private to the user, so `writable_roots = ["@npm"]`
/// works before the tool first ran. Explicit paths are never created: a
/// missing one is simply not granted. Returns what could not be created.
pub fn create_group_caches<S: AsRef<std::ffi::OsStr>>(
    entries: &[S],
) -> Vec<(PathBuf, std::io::Error)> {
    use stockade_core::files::{ListKind, expand, process_env};
    let mut failed = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.as_ref().as_encoded_bytes().first() == Some(&b'@'))
    {
        for dir in expand(e.as_ref(), ListKind::WritableRoots, &process_env).unwrap_or_default() {
            let mut b = std::fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
            if let Err(err) = b.create(&dir) {
                failed.push((dir, err));
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_command_validation_names_the_entry() {
        assert_eq!(
            RunnerCommand::new(vec![], vec![]),
            Err(SettingsError::EmptyRunnerCommand)
        );
        assert_eq!(
            RunnerCommand::new(vec!["".into()], vec![]),
            Err(SettingsError::EmptyRunnerCommand)
        );
        let e = RunnerCommand::new(vec!["r".into()], vec!["ok".into(), "".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "runner_failure_signatures[1]: must not be empty"
        );
        let e = RunnerCommand::new(vec!["r".into()], vec!["a\nb".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "runner_failure_signatures[0]: must be a single line, got \"a\\nb\""
        );
        assert!(RunnerCommand::new(vec!["r".into()], vec!["x\r".into()]).is_err());
        let ok = RunnerCommand::new(vec!["r".into(), "--x".into()], vec!["fatal:".into()]).unwrap();
        assert_eq!(ok.argv().len(), 2);
        assert_eq!(ok.failure_signatures(), ["fatal:"]);
    }

    #[test]
    fn backend_preference_is_a_closed_vocabulary() {
        for name in BackendPreference::NAMES {
            assert_eq!(name.parse::<BackendPreference>().unwrap().as_str(), *name);
        }
        let e = "firejail".parse::<BackendPreference>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid sandbox backend \"firejail\": expected one of auto, bwrap, landlock"
        );
    }

    #[test]
    fn zero_probe_timeout_is_rejected() {
        let s = LocalSettings {
            probe_timeout: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(s.validate(), Err(SettingsError::ZeroProbeTimeout));
        assert_eq!(LocalSettings::default().validate(), Ok(()));
    }
}
