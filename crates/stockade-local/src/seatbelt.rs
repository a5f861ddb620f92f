//! The macOS rung: Seatbelt through Apple's `/usr/bin/sandbox-exec`.
//!
//! The chain has this one candidate and it is selected without a probe: the
//! runner is the pinned `/usr/bin/sandbox-exec`, never one found on `PATH`
//! (whoever can replace that file already has root). If Apple ever removes
//! it, the spawn fails with ENOENT attributable to `argv[0]`, and a present
//! runner that refuses the profile prints a `sandbox-exec: ` line; both are
//! runner failures, so the command never runs unconfined.
//!
//! The profile is a FIXED string per mode. User paths never appear in it: the
//! workspace-write profile names `(param "...")` slots and the paths travel as
//! `-D KEY=VALUE` arguments, built from the path's bytes, so a quote, a
//! parenthesis, a space, a newline or a non-UTF-8 byte in a path cannot change
//! the policy.
//!
//! Everything here except [`MacHost`] is pure: the host facts (canonical
//! forms, `$TMPDIR`, whether the runner exists) come in as [`HostPaths`] or
//! through the [`Host`] trait, so the whole rung is pinned by tests on Linux.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use stockade_core::{
    Confined, ConfiningMode, Enforcement, FatalLine, RunnerFailureRule, SandboxPolicy,
    SandboxUnavailable,
};

use crate::{BackendReport, Host, Rung, profile};

/// The backend's name, as in [`Confined::backend`].
pub const BACKEND: &str = "seatbelt";
/// The one runner this rung ever uses.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";
/// What a denied file effect prints (`EPERM`).
pub const SEATBELT_DENIAL: &str = "Operation not permitted";
/// `sandbox-exec` prefixes its own failures (a profile it cannot compile or
/// apply, a command it cannot exec) with this.
pub const SANDBOX_EXEC_PREFIX: &str = "sandbox-exec: ";

/// read-only: every operation but `file-write*` is allowed, and a write only
/// to `/dev/null`. Later rules take precedence in SBPL, so the narrow allow
/// after the blanket deny wins for exactly what it names.
pub const READ_ONLY_PROFILE: &str = "\
(version 1)
(allow default)
(deny file-write*)
(allow file-write* (literal \"/dev/null\"))
";

/// workspace-write: as read-only, plus everything beneath each root slot.
/// Every slot is always passed (see [`params`]), so the profile never reads
/// an unset parameter.
pub const WORKSPACE_WRITE_PROFILE: &str = "\
(version 1)
(allow default)
(deny file-write*)
(allow file-write*
    (literal \"/dev/null\")
    (subpath (param \"WORKSPACE_ROOT\"))
    (subpath (param \"WORKSPACE_ROOT_CANONICAL\"))
    (subpath (param \"TMP\"))
    (subpath (param \"TMP_CANONICAL\"))
    (subpath (param \"TMPDIR\"))
    (subpath (param \"TMPDIR_CANONICAL\")))
";

/// The parameter slots of [`WORKSPACE_WRITE_PROFILE`], in the order they are
/// passed.
pub const PARAMS: [&str; 6] = [
    "WORKSPACE_ROOT",
    "WORKSPACE_ROOT_CANONICAL",
    "TMP",
    "TMP_CANONICAL",
    "TMPDIR",
    "TMPDIR_CANONICAL",
];

/// The fixed profile text for `mode`.
pub const fn profile(mode: ConfiningMode) -> &'static str {
    match mode {
        ConfiningMode::ReadOnly => READ_ONLY_PROFILE,
        ConfiningMode::WorkspaceWrite => WORKSPACE_WRITE_PROFILE,
    }
}

/// The host facts the workspace-write parameters are computed from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPaths {
    /// The workspace root's canonical form, `None` when it cannot be resolved.
    pub workspace_canonical: Option<PathBuf>,
    /// `/tmp`'s canonical form (`/private/tmp` on macOS).
    pub tmp_canonical: Option<PathBuf>,
    /// `$TMPDIR` exactly as set (non-empty), e.g. `/var/folders/xy/T/`.
    pub tmpdir: Option<PathBuf>,
    /// `$TMPDIR`'s canonical form when it is a directory, e.g.
    /// `/private/var/folders/xy/T`.
    pub tmpdir_canonical: Option<PathBuf>,
}

impl HostPaths {
    /// Ask `host` for what a workspace-write run under `policy` needs.
    /// Read-only needs nothing, so nothing is asked.
    pub fn gather(host: &dyn Host, policy: &SandboxPolicy) -> Self {
        if policy.mode == ConfiningMode::ReadOnly {
            return Self::default();
        }
        Self {
            workspace_canonical: host.canonicalize(policy.workspace_root()),
            tmp_canonical: host.canonicalize(Path::new("/tmp")),
            tmpdir: host.tmpdir_as_set(),
            tmpdir_canonical: host.tmpdir(),
        }
    }
}

/// A root's two spellings: as given (without redundant separators or `.`
/// components, so `$TMPDIR`'s usual trailing `/` does not leave a
/// `subpath` that never matches) and canonical. A spelling that cannot be
/// had (an unresolvable root, a relative given path) repeats the other.
fn spellings(given: &Path, canonical: Option<&Path>) -> (PathBuf, PathBuf) {
    let given: PathBuf = given.components().collect();
    let canonical = canonical.map_or_else(|| given.clone(), Path::to_path_buf);
    let given = if given.is_absolute() {
        given
    } else {
        canonical.clone()
    };
    (given, canonical)
}

/// The `-D` parameters for `policy`, in [`PARAMS`] order (none for read-only).
///
/// Every slot is ALWAYS passed. What `(param "X")` yields for an unset `X`
/// is not documented (an error, or a non-string `subpath` rejects), so an
/// ordinary host without `$TMPDIR` must not depend on it. An absent root
/// instead repeats a root already in the set (`$TMPDIR`'s slots repeat
/// `/tmp`'s), and granting a root twice widens nothing. Fixed slots keep the
/// profile one constant string, whatever the host.
///
/// `$TMPDIR` counts only when set, a directory, and not `/` in either
/// spelling: the ambient environment must not turn workspace-write into full
/// access (the rule of [`profile::writable_roots`]).
///
/// Fails when the workspace root has no absolute spelling: `(subpath "")` or
/// a relative subpath must never reach the profile.
pub fn params(
    policy: &SandboxPolicy,
    host: &HostPaths,
) -> Result<Vec<(&'static str, PathBuf)>, String> {
    if policy.mode == ConfiningMode::ReadOnly {
        return Ok(Vec::new());
    }
    let (ws, ws_canonical) =
        spellings(policy.workspace_root(), host.workspace_canonical.as_deref());
    if !ws.is_absolute() || !ws_canonical.is_absolute() {
        return Err(format!(
            "the workspace root {:?} is not an absolute path and cannot be resolved to one",
            policy.workspace_root()
        ));
    }
    let (tmp, tmp_canonical) = spellings(Path::new("/tmp"), host.tmp_canonical.as_deref());
    let root = Path::new("/");
    let (tmpdir, tmpdir_canonical) = match (&host.tmpdir, &host.tmpdir_canonical) {
        (Some(given), Some(canonical)) => {
            let (g, c) = spellings(given, Some(canonical));
            if g == root || c == root || !g.is_absolute() || !c.is_absolute() {
                (tmp.clone(), tmp_canonical.clone())
            } else {
                (g, c)
            }
        }
        _ => (tmp.clone(), tmp_canonical.clone()),
    };
    let values = [
        ws,
        ws_canonical,
        tmp,
        tmp_canonical,
        tmpdir,
        tmpdir_canonical,
    ];
    Ok(PARAMS.into_iter().zip(values).collect())
}

/// One `-D` value: the bytes `KEY=` followed by the path's own bytes, never
/// a lossy conversion. `sandbox-exec` splits at the first `=`, and no key
/// contains one, so a path holding `=` stays whole.
pub fn define(key: &str, value: &Path) -> OsString {
    let mut out = OsString::with_capacity(key.len() + 1 + value.as_os_str().len());
    out.push(key);
    out.push("=");
    out.push(value.as_os_str());
    out
}

/// The `sandbox-exec` arguments (without the runner itself) that confine
/// `argv`: `-p PROFILE [-D KEY=VALUE]... -- ARGV...`.
///
/// `--` is passed. `sandbox-exec` reads its options with getopt(3)
/// (`-f`/`-n`/`-p`/`-D`), which takes `--` as the end of the options and
/// consumes it; Codex's Seatbelt wrapper (openai/codex) passes it the same
/// way, and its macOS tests run that argv through the real binary. Without it, an `argv[0]` starting with `-` would
/// be read as an option. Each `-D` is followed by its value as a separate
/// argument, so getopt takes that value verbatim whatever its first byte.
pub fn seatbelt_args(
    policy: &SandboxPolicy,
    host: &HostPaths,
    argv: &[OsString],
) -> Result<Vec<OsString>, String> {
    let params = params(policy, host)?;
    let mut out: Vec<OsString> = Vec::with_capacity(3 + 2 * params.len() + argv.len());
    out.push("-p".into());
    out.push(profile(policy.mode).into());
    for (key, value) in &params {
        out.push("-D".into());
        out.push(define(key, value));
    }
    out.push("--".into());
    out.extend(argv.iter().cloned());
    Ok(out)
}

/// `sandbox-exec` reserves no exit status for its own failures, so its rule
/// is signature-only: a `sandbox-exec: ` line, whatever the exit code.
pub fn seatbelt_rules() -> Vec<RunnerFailureRule> {
    vec![RunnerFailureRule {
        exit_codes: None,
        fatal_lines: vec![FatalLine::Prefix(SANDBOX_EXEC_PREFIX.into())],
        informational_lines: vec![],
    }]
}

/// The macOS rung; `runner` is the selection's, which is always
/// [`SANDBOX_EXEC`].
// Only the Unix confine path reaches Seatbelt (it runs on macOS alone).
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) struct Seatbelt<'a> {
    pub runner: &'a Path,
    pub host: &'a dyn Host,
}

impl Rung for Seatbelt<'_> {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// Seatbelt grants each root in both its given and its canonical
    /// spelling, so it takes the policy as given.
    fn confine(
        &self,
        argv: &[OsString],
        policy: &SandboxPolicy,
    ) -> Result<Confined, SandboxUnavailable> {
        let Seatbelt { runner, host } = *self;
        let args = seatbelt_args(policy, &HostPaths::gather(host, policy), argv)
            .map_err(|d| SandboxUnavailable::single(BACKEND, d))?;
        Ok(Confined::new(
            profile::with_runner(runner.as_os_str(), args),
            BACKEND,
            Enforcement::Full,
        )
        .with_denial_signatures(vec![SEATBELT_DENIAL.into()])
        .with_runner_failure_rules(seatbelt_rules())
        .with_writable_roots(profile::granted(policy, host.tmpdir().as_deref()))
        .with_gaps(
            [
                stockade_core::files::unenforced(&policy.files, BACKEND),
                stockade_core::net::unenforced(&policy.network, BACKEND),
            ]
            .concat(),
        ))
    }
}

/// Seatbelt's line in `stockade probe`: no probe runs, the line says whether
/// the pinned runner is there.
pub(crate) fn report(host: &dyn Host) -> BackendReport {
    let runner = PathBuf::from(SANDBOX_EXEC);
    let usable = host.is_file(&runner);
    let detail = if usable {
        format!(
            "selected without a probe (the macOS chain's sole candidate); {SANDBOX_EXEC} is present"
        )
    } else {
        format!("{SANDBOX_EXEC} is missing or not a file: every confined command would fail closed")
    };
    BackendReport {
        backend: BACKEND.into(),
        runner: Some(runner),
        usable,
        detail,
        enforcement: usable.then_some(Enforcement::Full),
        landlock_abi: None,
        protections: Vec::new(),
        gaps: Vec::new(),
    }
}

/// The real macOS host. The Linux chain is never consulted here; the
/// Seatbelt facts (`canonicalize`, `tmpdir_as_set`, `is_file`) are the
/// trait's defaults.
#[cfg(target_os = "macos")]
pub(crate) struct MacHost;

#[cfg(target_os = "macos")]
impl Host for MacHost {
    fn locate(&self, backend: crate::Backend, _: &crate::LocalSettings) -> Result<PathBuf, String> {
        Err(format!("{backend} exists only on Linux"))
    }
    fn landlock_abi(&self) -> Option<u8> {
        None
    }
    fn probe(
        &self,
        backend: crate::Backend,
        _: &Path,
        _: Option<&Path>,
        _: std::time::Duration,
    ) -> Result<(), String> {
        Err(format!("{backend} exists only on Linux"))
    }
    fn tmpdir(&self) -> Option<PathBuf> {
        let t = self.tmpdir_as_set()?;
        std::fs::canonicalize(t).ok().filter(|p| p.is_dir())
    }
    fn verdict_key(&self, _: &[(crate::Backend, Option<&crate::Located>)]) -> Option<Vec<u8>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    fn cmd() -> Vec<OsString> {
        vec!["bash".into(), "-c".into(), "echo hi".into()]
    }

    /// A typical macOS host: `/tmp` -> `/private/tmp`, `$TMPDIR` under
    /// `/var/folders` (-> `/private/var/folders`) with its trailing slash.
    fn mac(ws_canonical: Option<&str>) -> HostPaths {
        HostPaths {
            workspace_canonical: ws_canonical.map(PathBuf::from),
            tmp_canonical: Some("/private/tmp".into()),
            tmpdir: Some("/var/folders/xy/abc/T/".into()),
            tmpdir_canonical: Some("/private/var/folders/xy/abc/T".into()),
        }
    }

    fn strs(v: &[OsString]) -> Vec<&str> {
        v.iter().map(|s| s.to_str().unwrap()).collect()
    }

    fn defines(args: &[OsString]) -> Vec<&[u8]> {
        args.windows(2)
            .filter(|w| w[0] == "-D")
            .map(|w| w[1].as_bytes())
            .collect()
    }

    #[test]
    fn profiles_are_pinned() {
        assert_eq!(
            READ_ONLY_PROFILE,
            "(version 1)\n\
             (allow default)\n\
             (deny file-write*)\n\
             (allow file-write* (literal \"/dev/null\"))\n"
        );
        assert_eq!(
            WORKSPACE_WRITE_PROFILE,
            "(version 1)\n\
             (allow default)\n\
             (deny file-write*)\n\
             (allow file-write*\n    \
             (literal \"/dev/null\")\n    \
             (subpath (param \"WORKSPACE_ROOT\"))\n    \
             (subpath (param \"WORKSPACE_ROOT_CANONICAL\"))\n    \
             (subpath (param \"TMP\"))\n    \
             (subpath (param \"TMP_CANONICAL\"))\n    \
             (subpath (param \"TMPDIR\"))\n    \
             (subpath (param \"TMPDIR_CANONICAL\")))\n"
        );
        assert_eq!(profile(ConfiningMode::ReadOnly), READ_ONLY_PROFILE);
        assert_eq!(
            profile(ConfiningMode::WorkspaceWrite),
            WORKSPACE_WRITE_PROFILE
        );
    }

    /// The profile reads exactly the slots that are passed, so it never
    /// reads an unset parameter; read-only reads none.
    #[test]
    fn the_profile_names_exactly_the_passed_parameters() {
        let named: Vec<&str> = WORKSPACE_WRITE_PROFILE
            .split("(param \"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap())
            .collect();
        assert_eq!(named, PARAMS);
        assert!(!READ_ONLY_PROFILE.contains("param"));
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/w");
        for host in [HostPaths::default(), mac(None), mac(Some("/w"))] {
            let keys: Vec<&str> = params(&ww, &host).unwrap().iter().map(|p| p.0).collect();
            assert_eq!(keys, PARAMS);
        }
        let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, "/w");
        assert_eq!(params(&ro, &mac(None)), Ok(vec![]));
    }

    #[test]
    fn read_only_argv() {
        let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, "/Users/me/ws");
        let args = seatbelt_args(&ro, &mac(Some("/Users/me/ws")), &cmd()).unwrap();
        assert_eq!(
            strs(&args),
            ["-p", READ_ONLY_PROFILE, "--", "bash", "-c", "echo hi"]
        );
    }

    #[test]
    fn workspace_write_argv() {
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/Users/me/ws-link");
        let args = seatbelt_args(&ww, &mac(Some("/Users/me/ws")), &cmd()).unwrap();
        assert_eq!(
            strs(&args),
            [
                "-p",
                WORKSPACE_WRITE_PROFILE,
                "-D",
                "WORKSPACE_ROOT=/Users/me/ws-link",
                "-D",
                "WORKSPACE_ROOT_CANONICAL=/Users/me/ws",
                "-D",
                "TMP=/tmp",
                "-D",
                "TMP_CANONICAL=/private/tmp",
                "-D",
                "TMPDIR=/var/folders/xy/abc/T",
                "-D",
                "TMPDIR_CANONICAL=/private/var/folders/xy/abc/T",
                "--",
                "bash",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn hostile_paths_never_reach_the_profile_and_pass_byte_for_byte() {
        let plain = seatbelt_args(
            &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/Users/me/ws"),
            &mac(None),
            &cmd(),
        )
        .unwrap();
        let hostile: &[&[u8]] = &[
            b"/Users/me/a \"quoted\" dir",
            b"/Users/me/paren(s)) (allow file-write* (subpath \"/\"))",
            b"/Users/me/new\nline\")\n(allow file-write*)\n;",
            b"/Users/me/bad\xff\xfe utf8",
            b"/Users/me/eq=KEY=x",
            b"/Users/me/-D TMP=/ x",
        ];
        for ws in hostile {
            let ws = OsStr::from_bytes(ws);
            let td = [ws.as_bytes(), b"/T"].concat();
            let host = HostPaths {
                workspace_canonical: Some(PathBuf::from(ws)),
                tmp_canonical: Some("/private/tmp".into()),
                tmpdir: Some(PathBuf::from(OsStr::from_bytes(&td))),
                tmpdir_canonical: Some(PathBuf::from(OsStr::from_bytes(&td))),
            };
            let args = seatbelt_args(
                &SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws),
                &host,
                &cmd(),
            )
            .unwrap();
            // The profile is the very same text as for a plain path.
            assert_eq!(args[..2], plain[..2]);
            assert_eq!(args[1], WORKSPACE_WRITE_PROFILE);
            // Same shape: only the -D values differ.
            assert_eq!(args.len(), plain.len());
            let d = defines(&args);
            assert_eq!(d[0], [b"WORKSPACE_ROOT=", ws.as_bytes()].concat());
            assert_eq!(d[1], [b"WORKSPACE_ROOT_CANONICAL=", ws.as_bytes()].concat());
            assert_eq!(d[4], [b"TMPDIR=".as_slice(), &td].concat());
            assert_eq!(d[5], [b"TMPDIR_CANONICAL=".as_slice(), &td].concat());
            assert_eq!(&args[args.len() - 4..], &plain[plain.len() - 4..]);
        }
    }

    #[test]
    fn the_wrapped_argv_passes_through_byte_for_byte() {
        let argv = vec![OsString::from(OsStr::from_bytes(b"-\xfe\x01"))];
        let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, "/w");
        let args = seatbelt_args(&ro, &HostPaths::default(), &argv).unwrap();
        assert_eq!(args[args.len() - 2], "--");
        assert_eq!(args.last().unwrap().as_bytes(), b"-\xfe\x01");
    }

    #[test]
    fn tmp_and_tmpdir_are_granted_in_both_spellings() {
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/Users/me/ws");
        let p = params(&ww, &mac(None)).unwrap();
        let values: Vec<&Path> = p.iter().map(|(_, v)| v.as_path()).collect();
        for want in [
            "/tmp",
            "/private/tmp",
            "/var/folders/xy/abc/T",
            "/private/var/folders/xy/abc/T",
        ] {
            assert!(values.contains(&Path::new(want)), "{want} in {values:?}");
        }
        // An unresolvable workspace is granted as given, in both slots.
        assert_eq!(p[0].1, Path::new("/Users/me/ws"));
        assert_eq!(p[1].1, Path::new("/Users/me/ws"));
        // A /tmp that is no symlink: both slots say /tmp.
        let host = HostPaths {
            tmp_canonical: None,
            ..mac(None)
        };
        let p = params(&ww, &host).unwrap();
        assert_eq!((&*p[2].1, &*p[3].1), (Path::new("/tmp"), Path::new("/tmp")));
    }

    #[test]
    fn an_absent_or_root_tmpdir_never_widens_workspace_write() {
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "/Users/me/ws");
        let base = mac(Some("/Users/me/ws"));
        let cases = [
            // unset
            HostPaths {
                tmpdir: None,
                tmpdir_canonical: None,
                ..base.clone()
            },
            // set but not a directory
            HostPaths {
                tmpdir_canonical: None,
                ..base.clone()
            },
            // `/`
            HostPaths {
                tmpdir: Some("/".into()),
                tmpdir_canonical: Some("/".into()),
                ..base.clone()
            },
            // `//` and a spelling that resolves to `/`
            HostPaths {
                tmpdir: Some("//".into()),
                tmpdir_canonical: Some("/".into()),
                ..base.clone()
            },
            HostPaths {
                tmpdir: Some("/private/..".into()),
                tmpdir_canonical: Some("/".into()),
                ..base.clone()
            },
            // relative
            HostPaths {
                tmpdir: Some("T".into()),
                tmpdir_canonical: Some("T".into()),
                ..base.clone()
            },
        ];
        for host in cases {
            let p = params(&ww, &host).unwrap();
            assert_eq!(p[4], ("TMPDIR", PathBuf::from("/tmp")), "{host:?}");
            assert_eq!(
                p[5],
                ("TMPDIR_CANONICAL", PathBuf::from("/private/tmp")),
                "{host:?}"
            );
            assert!(p.iter().all(|(_, v)| v != Path::new("/")), "{host:?}");
        }
    }

    #[test]
    fn a_workspace_without_an_absolute_spelling_fails_closed() {
        for ws in ["", "relative/ws", "."] {
            let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, ws);
            assert!(params(&ww, &mac(None)).is_err(), "{ws:?}");
        }
        // A relative root that resolves is granted by its canonical form.
        let ww = SandboxPolicy::new(ConfiningMode::WorkspaceWrite, "ws");
        let p = params(&ww, &mac(Some("/Users/me/ws"))).unwrap();
        assert_eq!(p[0].1, Path::new("/Users/me/ws"));
        assert_eq!(p[1].1, Path::new("/Users/me/ws"));
        // Read-only never grants the workspace, so any root is fine there.
        let ro = SandboxPolicy::new(ConfiningMode::ReadOnly, "");
        assert!(seatbelt_args(&ro, &HostPaths::default(), &cmd()).is_ok());
    }

    #[test]
    fn the_rule_reads_runner_failures_not_denials() {
        let rules = seatbelt_rules();
        for (code, line) in [
            (
                Some(1),
                "sandbox-exec: sandbox_apply: Operation not permitted",
            ),
            (
                Some(71),
                "sandbox-exec: execvp() of 'bash' failed: No such file or directory",
            ),
            (Some(0), "sandbox-exec: unbound variable: TMPDIR"),
            (None, "sandbox-exec: killed"),
        ] {
            let err = format!("{line}\n");
            assert_eq!(
                RunnerFailureRule::first_fatal_line(&rules, code, err.as_bytes()).as_deref(),
                Some(line)
            );
        }
        for denial in [
            "bash: /etc/x: Operation not permitted\n",
            "touch: /Users/me/x: Operation not permitted\n",
            " sandbox-exec: not at the start\n",
        ] {
            assert_eq!(
                RunnerFailureRule::first_fatal_line(&rules, Some(1), denial.as_bytes()),
                None,
                "{denial}"
            );
        }
        assert_eq!(
            rules,
            [RunnerFailureRule {
                exit_codes: None,
                fatal_lines: vec![FatalLine::Prefix("sandbox-exec: ".into())],
                informational_lines: vec![],
            }]
        );
    }

    #[test]
    fn define_is_key_equals_then_the_path_bytes() {
        let p = Path::new(OsStr::from_bytes(b"/a\xff\n\"(b)"));
        assert_eq!(define("TMP", p).as_bytes(), b"TMP=/a\xff\n\"(b)");
    }
}
