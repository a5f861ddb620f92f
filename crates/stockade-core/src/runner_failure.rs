//! Telling a broken sandbox apart from a command that failed.
//!
//! The evidence is in-band (exit status plus stderr), so a confined child can
//! mimic it; that is an availability/diagnostic false attribution, never a
//! bypass, because the child is already confined. Requiring the exit-code gate
//! AND a fatal line left after exact informational exclusions keeps accidental
//! matches rare.

/// How a stderr line is recognised as the runner's own fatal report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "text", rename_all = "kebab-case")]
pub enum FatalLine {
    /// The line starts with this text (e.g. `bwrap: `).
    Prefix(String),
    /// The line contains this text anywhere (an operator's signature).
    Signature(String),
}

impl FatalLine {
    fn matches(&self, line: &str) -> bool {
        match self {
            FatalLine::Prefix(p) => line.starts_with(p.as_str()),
            FatalLine::Signature(s) => line.contains(s.as_str()),
        }
    }
}

/// One structured piece of runner-failure evidence.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunnerFailureRule {
    /// When set, the rule applies only to these exit codes.
    pub exit_codes: Option<Vec<i32>>,
    /// A line matching any of these is fatal evidence.
    pub fatal_lines: Vec<FatalLine>,
    /// Lines equal to one of these are excluded before fatal matching.
    pub informational_lines: Vec<String>,
}

impl RunnerFailureRule {
    /// Whether the exit-code gate admits a process that exited with
    /// `exit_code` (`None` when killed by a signal).
    pub fn admits_exit(&self, exit_code: Option<i32>) -> bool {
        match (&self.exit_codes, exit_code) {
            (None, _) => true,
            (Some(codes), Some(code)) => codes.contains(&code),
            (Some(_), None) => false,
        }
    }

    /// Whether one stderr line (without its line ending) is fatal evidence:
    /// informational lines are excluded first, exactly.
    pub fn is_fatal_line(&self, line: &str) -> bool {
        !self.informational_lines.iter().any(|i| i == line)
            && self.fatal_lines.iter().any(|f| f.matches(line))
    }

    /// The fatal line this rule finds in `stderr` for a process that exited
    /// with `exit_code` (`None` when killed by a signal), if any.
    pub fn fatal_line(&self, exit_code: Option<i32>, stderr: &[u8]) -> Option<String> {
        if !self.admits_exit(exit_code) {
            return None;
        }
        stderr
            .split(|b| *b == b'\n')
            .map(|raw| String::from_utf8_lossy(raw.strip_suffix(b"\r").unwrap_or(raw)))
            .find(|line| self.is_fatal_line(line))
            .map(|line| line.into_owned())
    }

    /// The first fatal line any of `rules` finds.
    pub fn first_fatal_line(
        rules: &[RunnerFailureRule],
        exit_code: Option<i32>,
        stderr: &[u8],
    ) -> Option<String> {
        rules.iter().find_map(|r| r.fatal_line(exit_code, stderr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landlock_like() -> RunnerFailureRule {
        RunnerFailureRule {
            exit_codes: Some(vec![125]),
            fatal_lines: vec![FatalLine::Prefix("landlock-run: ".into())],
            informational_lines: vec![
                "landlock-run: partial enforcement (older Landlock ABI)".into(),
            ],
        }
    }

    #[test]
    fn exit_code_gate_and_fatal_line_are_both_required() {
        let rule = landlock_like();
        let err = b"landlock-run: grant path does not exist: /nope\n";
        assert_eq!(
            rule.fatal_line(Some(125), err).as_deref(),
            Some("landlock-run: grant path does not exist: /nope")
        );
        assert_eq!(rule.fatal_line(Some(1), err), None);
        assert_eq!(rule.fatal_line(None, err), None);
        assert_eq!(rule.fatal_line(Some(125), b"some other error\n"), None);
    }

    #[test]
    fn informational_lines_are_excluded_exactly() {
        let rule = landlock_like();
        let notice = b"landlock-run: partial enforcement (older Landlock ABI)\n";
        for code in [1, 2, 125] {
            assert_eq!(rule.fatal_line(Some(code), notice), None);
        }
        // A near-miss of the notice is not excluded.
        let near = b"landlock-run: partial enforcement (older Landlock ABI) \n";
        assert!(rule.fatal_line(Some(125), near).is_some());
        // The notice followed by a real fatal line still matches that line.
        let both = b"landlock-run: partial enforcement (older Landlock ABI)\r\nlandlock-run: cannot execute \"x\"\n";
        assert_eq!(
            rule.fatal_line(Some(125), both).as_deref(),
            Some("landlock-run: cannot execute \"x\"")
        );
    }

    #[test]
    fn signature_rules_match_anywhere_and_ignore_exit_code() {
        let rule = RunnerFailureRule {
            exit_codes: None,
            fatal_lines: vec![FatalLine::Signature("runner broke".into())],
            informational_lines: vec![],
        };
        assert!(
            rule.fatal_line(Some(0), b"x\nfatal: runner broke here\n")
                .is_some()
        );
        assert!(rule.fatal_line(None, b"runner broke").is_some());
        assert_eq!(rule.fatal_line(Some(1), b"Read-only file system\n"), None);
        assert_eq!(
            RunnerFailureRule::first_fatal_line(&[landlock_like(), rule], Some(3), b"runner broke"),
            Some("runner broke".into())
        );
    }
}
