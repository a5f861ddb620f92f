//! The runner status protocol: how a trusted runner tells the spawner, on a
//! descriptor the confined command never holds, whether it started the
//! command. Records are lines; the last one counts.
//!
//! - `ok`: written immediately before the final `execve` of the command.
//! - `fail <message>`: the runner gave up; nothing of the command ran.
//!
//! The descriptor is close-on-exec, so a successful exec closes it and the
//! command cannot append a record. No record at all means the runner died
//! (or its outer layer, e.g. bwrap's own setup, failed) before it got there.

/// The record written right before the command's exec.
pub const STARTED: &str = "ok";
/// The prefix of a failure record; the rest of the line is the reason.
pub const FAILED_PREFIX: &str = "fail ";

/// What a runner's status channel said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerStatus {
    /// The runner exec'd the command.
    Started,
    /// The runner failed with this reason; the command did not run.
    Failed(String),
    /// No record: the runner never reached the point of reporting.
    Silent,
}

impl RunnerStatus {
    /// Read everything the channel carried. Unknown lines are ignored; a
    /// torn final line (no newline) still counts.
    pub fn parse(bytes: &[u8]) -> Self {
        let mut last = RunnerStatus::Silent;
        for line in bytes.split(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\r');
            if line == STARTED {
                last = RunnerStatus::Started;
            } else if let Some(why) = line.strip_prefix(FAILED_PREFIX) {
                last = RunnerStatus::Failed(why.to_owned());
            }
        }
        last
    }

    /// The record for a failure, one line whatever the message holds.
    pub fn failure_record(message: &str) -> String {
        format!("{FAILED_PREFIX}{}\n", message.replace(['\n', '\r'], " "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_record_counts() {
        assert_eq!(RunnerStatus::parse(b""), RunnerStatus::Silent);
        assert_eq!(RunnerStatus::parse(b"ok\n"), RunnerStatus::Started);
        assert_eq!(
            RunnerStatus::parse(b"ok\nfail cannot execute \"x\": No such file\n"),
            RunnerStatus::Failed("cannot execute \"x\": No such file".into())
        );
        assert_eq!(
            RunnerStatus::parse(b"fail a"),
            RunnerStatus::Failed("a".into())
        );
        assert_eq!(RunnerStatus::parse(b"noise\n"), RunnerStatus::Silent);
    }

    #[test]
    fn a_failure_record_is_one_line() {
        let r = RunnerStatus::failure_record("a\nb\rc");
        assert_eq!(r, "fail a b c\n");
        assert_eq!(
            RunnerStatus::parse(r.as_bytes()),
            RunnerStatus::Failed("a b c".into())
        );
    }
}
