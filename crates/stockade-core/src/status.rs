//! The runner status protocol: how a trusted runner tells the spawner, on a
//! descriptor the confined command never holds, whether it started the
//! command. Records are lines; the last one counts.
//!
//! - `ok`: written immediately before the final `execve` of the command.
//! - `fail <message>`: the runner gave up; nothing of the command ran.
//! - `noexec <code> <message>`: the runner was ready but the command itself
//!   could not be executed (not found: 127, not executable: 126, as a shell
//!   says). That is the command's failure, not the runner's.
//!
//! The descriptor is close-on-exec, so a successful exec closes it and the
//! command cannot append a record. No record at all means the runner died
//! (or its outer layer, e.g. bwrap's own setup, failed) before it got there.
//!
//! bwrap running the command itself (no launcher inside) reports on the same
//! descriptor in its own words (`--json-status-fd`): a JSON document per
//! line, `exit-code` among them only once its `execvp` of the command
//! succeeded (bwrap learns that from a close-on-exec pipe of its own) and
//! the command has ended. That document is the started record. An `execvp`
//! that failed leaves only bwrap's line on stderr
//! ([`RunnerStatus::bwrap_exec_failure`]).

/// The record written right before the command's exec.
pub const STARTED: &str = "ok";
/// The prefix of a failure record; the rest of the line is the reason.
pub const FAILED_PREFIX: &str = "fail ";
/// The prefix of a record for a command that could not be executed.
pub const NOT_EXECUTABLE_PREFIX: &str = "noexec ";

/// What a runner's status channel said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerStatus {
    /// The runner exec'd the command.
    Started,
    /// The runner failed with this reason; the command did not run.
    Failed(String),
    /// No record: the runner never reached the point of reporting.
    Silent,
    /// The confinement was in place but the command could not be executed:
    /// `code` is the shell's status (127 not found, 126 not executable).
    NotExecutable { code: i32, message: String },
}

impl RunnerStatus {
    /// Read everything the channel carried. Unknown lines are ignored; a
    /// torn final line (no newline) still counts.
    pub fn parse(bytes: &[u8]) -> Self {
        let mut last = RunnerStatus::Silent;
        for line in bytes.split(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\r');
            if line == STARTED || is_bwrap_exit_code(line) {
                last = RunnerStatus::Started;
            } else if let Some(why) = line.strip_prefix(FAILED_PREFIX) {
                last = RunnerStatus::Failed(why.to_owned());
            } else if let Some(rest) = line.strip_prefix(NOT_EXECUTABLE_PREFIX)
                && let Some((code, message)) = rest.split_once(' ')
                && let Ok(code @ (126 | 127)) = code.parse::<i32>()
            {
                last = RunnerStatus::NotExecutable {
                    code,
                    message: message.to_owned(),
                };
            }
        }
        last
    }

    /// The record for a failure, one line whatever the message holds.
    pub fn failure_record(message: &str) -> String {
        format!("{FAILED_PREFIX}{}\n", message.replace(['\n', '\r'], " "))
    }

    /// The record for a command that could not be executed.
    pub fn not_executable_record(code: i32, message: &str) -> String {
        format!(
            "{NOT_EXECUTABLE_PREFIX}{code} {}\n",
            message.replace(['\n', '\r'], " ")
        )
    }

    /// What bwrap's line for an `execvp` of the command that failed
    /// (`bwrap: execvp PROG: REASON`, in the C locale bwrap never leaves)
    /// means as the launcher's record: the shell's status and line. Only
    /// for a run whose status channel carried no `exit-code`, so the line
    /// is bwrap's, never the command's.
    pub fn bwrap_exec_failure(line: &str) -> Option<RunnerStatus> {
        let rest = line.strip_prefix("bwrap: execvp ")?;
        let (program, reason) = rest.rsplit_once(": ")?;
        let errno = match reason {
            "No such file or directory" => Some(2),
            "Not a directory" => Some(20),
            "Permission denied" => Some(13),
            "Exec format error" => Some(8),
            _ => None,
        };
        let (code, message) = match errno {
            Some(e) => Self::shell_exec_failure(program, e),
            None => (126, format!("{program}: {reason}")),
        };
        Some(RunnerStatus::NotExecutable { code, message })
    }

    /// How a shell reports an `execvp` of `program` that failed with
    /// `errno`: the exit status and the one line it prints.
    pub fn shell_exec_failure(program: &str, errno: i32) -> (i32, String) {
        // ENOENT and ENOTDIR: nothing to run; everything else: not runnable.
        const ENOENT: i32 = 2;
        const ENOTDIR: i32 = 20;
        const EACCES: i32 = 13;
        const ENOEXEC: i32 = 8;
        let named_by_path = program.contains('/');
        match errno {
            ENOENT | ENOTDIR if !named_by_path => (127, format!("{program}: command not found")),
            ENOENT | ENOTDIR => (127, format!("{program}: No such file or directory")),
            EACCES => (126, format!("{program}: Permission denied")),
            ENOEXEC => (
                126,
                format!("{program}: cannot execute binary file: Exec format error"),
            ),
            e => (126, format!("{program}: cannot execute (os error {e})")),
        }
    }
}

/// bwrap's `{ "exit-code": N }` document (see the module's notes).
/// bwrap's first document on its status channel (`--json-status-fd`):
/// the pid of its child, as this pid namespace numbers it, and the inode
/// of that child's network namespace, which bwrap read from outside right
/// after the clone. Written before the child is let run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwrapChild {
    pub pid: i32,
    pub net_namespace: Option<u64>,
}

impl BwrapChild {
    /// The `child-pid` document on the first complete line of `bytes`;
    /// `None` while that line is incomplete, or when it is another.
    pub fn first_line(bytes: &[u8]) -> Option<BwrapChild> {
        let end = bytes.iter().position(|b| *b == b'\n')?;
        let line = std::str::from_utf8(&bytes[..end]).ok()?.trim();
        let body = line.strip_prefix('{')?.strip_suffix('}')?;
        let number = |key: &str| -> Option<u64> {
            body.split(',').find_map(|field| {
                let (k, v) = field.split_once(':')?;
                (k.trim() == format!("\"{key}\"")).then(|| v.trim().parse().ok())?
            })
        };
        let pid = i32::try_from(number("child-pid")?)
            .ok()
            .filter(|p| *p > 0)?;
        Some(BwrapChild {
            pid,
            net_namespace: number("net-namespace"),
        })
    }
}

fn is_bwrap_exit_code(line: &str) -> bool {
    line.trim_start().starts_with('{') && line.contains("\"exit-code\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bwraps_child_document_names_the_pid_and_the_network_namespace() {
        let doc = b"{ \"child-pid\": 14987, \"cgroup-namespace\": 4026532180, \"net-namespace\": 4026532181, \"pid-namespace\": 4026532179 }\n{ \"exit-code\": 0 }\n";
        assert_eq!(
            BwrapChild::first_line(doc),
            Some(BwrapChild {
                pid: 14987,
                net_namespace: Some(4026532181)
            })
        );
        assert_eq!(
            BwrapChild::first_line(b"{ \"child-pid\": 7 }\n"),
            Some(BwrapChild {
                pid: 7,
                net_namespace: None
            })
        );
        // Only a whole first line, only that document, only a real pid.
        for bytes in [
            &b"{ \"child-pid\": 7, \"net-namespace\": 9 }"[..],
            b"{ \"exit-code\": 0 }\n{ \"child-pid\": 7 }\n",
            b"{ \"child-pid\": 0 }\n",
            b"{ \"child-pid\": -1 }\n",
            b"{ \"child-pid\": 99999999999 }\n",
            b"{ \"child-pidx\": 7 }\n",
            b"ok\n",
            b"\n",
        ] {
            assert_eq!(BwrapChild::first_line(bytes), None, "{bytes:?}");
        }
    }

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
    fn a_command_that_cannot_be_executed_is_its_own_record() {
        let r = RunnerStatus::not_executable_record(127, "x: command not found");
        assert_eq!(
            RunnerStatus::parse(format!("ok\n{r}").as_bytes()),
            RunnerStatus::NotExecutable {
                code: 127,
                message: "x: command not found".into()
            }
        );
        // Only the shell's two codes; anything else is not this record.
        assert_eq!(RunnerStatus::parse(b"noexec 0 x\n"), RunnerStatus::Silent);
        assert_eq!(RunnerStatus::parse(b"noexec 127\n"), RunnerStatus::Silent);
        assert_eq!(
            RunnerStatus::shell_exec_failure("nope", 2),
            (127, "nope: command not found".into())
        );
        assert_eq!(RunnerStatus::shell_exec_failure("./x", 2).0, 127);
        assert_eq!(
            RunnerStatus::shell_exec_failure("./x", 13),
            (126, "./x: Permission denied".into())
        );
        assert_eq!(RunnerStatus::shell_exec_failure("./x", 8).0, 126);
    }

    #[test]
    fn bwraps_exit_code_is_the_started_record_and_its_pid_is_not() {
        let pid = b"{ \"child-pid\": 7, \"pid-namespace\": 4026532176 }\n";
        assert_eq!(RunnerStatus::parse(pid), RunnerStatus::Silent);
        let both = [&pid[..], b"{ \"exit-code\": 1 }\n"].concat();
        assert_eq!(RunnerStatus::parse(&both), RunnerStatus::Started);
        // A torn document still counts, as a torn record does.
        assert_eq!(
            RunnerStatus::parse(b"{ \"exit-code\": 137 }"),
            RunnerStatus::Started
        );
        assert_eq!(
            RunnerStatus::parse(b"\"exit-code\": 0\n"),
            RunnerStatus::Silent
        );
    }

    #[test]
    fn bwraps_execvp_line_is_the_shells_status() {
        let not = |line: &str| RunnerStatus::bwrap_exec_failure(line);
        assert_eq!(
            not("bwrap: execvp nope: No such file or directory"),
            Some(RunnerStatus::NotExecutable {
                code: 127,
                message: "nope: command not found".into()
            })
        );
        assert_eq!(
            not("bwrap: execvp /a: b/x: No such file or directory"),
            Some(RunnerStatus::NotExecutable {
                code: 127,
                message: "/a: b/x: No such file or directory".into()
            })
        );
        for (reason, code) in [
            ("Not a directory", 127),
            ("Permission denied", 126),
            ("Exec format error", 126),
            ("Text file busy", 126),
        ] {
            let Some(RunnerStatus::NotExecutable { code: c, message }) =
                not(&format!("bwrap: execvp ./x: {reason}"))
            else {
                panic!("{reason}: not read as an exec failure");
            };
            assert_eq!(c, code, "{reason}");
            assert!(message.starts_with("./x: "), "{message}");
        }
        // bwrap's other lines (its setup) are not this.
        assert_eq!(not("bwrap: Can't mount proc on /newroot/proc"), None);
        assert_eq!(not("execvp x: No such file or directory"), None);
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
