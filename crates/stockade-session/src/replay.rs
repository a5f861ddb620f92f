//! Rebuilding a session from its log bytes. Pure: the store does the I/O and
//! the repair this decides on.

use crate::header::HeaderLine;
use crate::{Record, SessionHeader};

/// What replay found besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// The last line was cut short by a crash mid-append: it was dropped, and
    /// the file was cut back to the end of the line before it.
    pub torn_tail: Option<TornTail>,
}

/// A dropped partial last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// 1-based line number (the header is line 1).
    pub line: usize,
    /// How many bytes were dropped.
    pub bytes: usize,
}

#[derive(Debug)]
pub(crate) struct Replayed {
    pub(crate) header: SessionHeader,
    pub(crate) records: Vec<Record>,
    pub(crate) report: ReplayReport,
    /// The length the file must have: every kept line, without the torn tail.
    pub(crate) keep: usize,
    /// The last kept line parsed but has no `\n`; the store must add one
    /// before the next append glues a record onto it.
    pub(crate) missing_newline: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReplayError {
    BadHeader(String),
    Corrupt { line: usize, reason: String },
}

pub(crate) fn replay(bytes: &[u8]) -> Result<Replayed, ReplayError> {
    let (header, mut offset, mut missing_newline) = match split_line(bytes) {
        None => return Err(ReplayError::BadHeader("the file is empty".into())),
        Some((line, complete)) => {
            // A header cut short is not a torn tail: without it the session
            // has no identity to replay into.
            let header = serde_json::from_slice::<HeaderLine>(line)
                .map_err(|e| ReplayError::BadHeader(e.to_string()))?
                .into_header()
                .map_err(ReplayError::BadHeader)?;
            (header, line.len() + usize::from(complete), !complete)
        }
    };

    let mut records: Vec<Record> = Vec::new();
    let mut torn_tail = None;
    let mut line_no = 1;
    while let Some((line, complete)) = split_line(&bytes[offset..]) {
        line_no += 1;
        let record = match serde_json::from_slice::<Record>(line) {
            Ok(record) => record,
            // Only the very last line may lack its newline, so an incomplete
            // line is always the last: a crash mid-append. Every byte of it
            // came from the one write that never finished.
            Err(_) if !complete => {
                torn_tail = Some(TornTail {
                    line: line_no,
                    bytes: line.len(),
                });
                break;
            }
            Err(e) => {
                return Err(ReplayError::Corrupt {
                    line: line_no,
                    reason: e.to_string(),
                });
            }
        };
        let expected = records.last().map_or(1, |r| r.seq + 1);
        if record.seq != expected {
            return Err(ReplayError::Corrupt {
                line: line_no,
                reason: format!(
                    "seq {} where {expected} was expected (a line was lost, repeated or reordered)",
                    record.seq
                ),
            });
        }
        records.push(record);
        offset += line.len() + usize::from(complete);
        missing_newline = !complete;
    }

    Ok(Replayed {
        header,
        records,
        report: ReplayReport { torn_tail },
        keep: offset,
        missing_newline,
    })
}

/// The next line (without its `\n`) and whether it had one; `None` at the end.
fn split_line(bytes: &[u8]) -> Option<(&[u8], bool)> {
    if bytes.is_empty() {
        return None;
    }
    Some(match bytes.iter().position(|&b| b == b'\n') {
        Some(end) => (&bytes[..end], true),
        None => (bytes, false),
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::event::every_event;

    fn header() -> SessionHeader {
        SessionHeader {
            id: "00112233445566778899aabbccddeeff".parse().unwrap(),
            cwd: PathBuf::from("/work"),
            created_unix_ms: 5,
            parent: None,
        }
    }

    /// A well-formed log of every event, and the byte offset where each line
    /// ends (after its newline).
    fn log() -> (Vec<u8>, Vec<Record>, Vec<usize>) {
        let mut bytes = serde_json::to_vec(&HeaderLine::new(header())).unwrap();
        bytes.push(b'\n');
        let mut ends = vec![bytes.len()];
        let records: Vec<Record> = every_event()
            .into_iter()
            .zip(1..)
            .map(|(event, seq)| Record {
                seq,
                at_unix_ms: 1000 + seq,
                event,
            })
            .collect();
        for r in &records {
            bytes.extend(serde_json::to_vec(r).unwrap());
            bytes.push(b'\n');
            ends.push(bytes.len());
        }
        (bytes, records, ends)
    }

    #[test]
    fn a_whole_log_replays_exactly() {
        let (bytes, records, _) = log();
        let r = replay(&bytes).unwrap();
        assert_eq!(r.header, header());
        assert_eq!(r.records, records);
        assert_eq!(r.report, ReplayReport::default());
        assert_eq!(r.keep, bytes.len());
        assert!(!r.missing_newline);
    }

    /// Cut the log at every byte: a cut inside the header is a bad header;
    /// any other cut keeps every complete record (and a final one missing
    /// only its newline) and reports the rest as a torn tail.
    #[test]
    fn a_cut_at_any_byte_loses_nothing_before_it() {
        let (bytes, records, ends) = log();
        for cut in 0..=bytes.len() {
            let prefix = &bytes[..cut];
            let header_end = ends[0];
            if cut < header_end - 1 {
                assert!(
                    matches!(replay(prefix), Err(ReplayError::BadHeader(_))),
                    "cut {cut}"
                );
                continue;
            }
            let r = replay(prefix).unwrap_or_else(|e| panic!("cut {cut}: {e:?}"));
            // Lines that end at or before the cut, counting a line missing
            // only its newline as whole.
            let whole = ends.iter().take_while(|&&end| end - 1 <= cut).count();
            assert_eq!(r.records, records[..whole - 1], "cut {cut}");
            let last_end = ends[whole - 1];
            if cut == last_end - 1 {
                assert!(r.missing_newline, "cut {cut}");
                assert_eq!(r.keep, cut);
                assert_eq!(r.report.torn_tail, None);
            } else if cut == last_end {
                assert!(!r.missing_newline);
                assert_eq!(r.keep, cut);
                assert_eq!(r.report.torn_tail, None);
            } else {
                assert!(!r.missing_newline);
                assert_eq!(r.keep, last_end, "cut {cut}");
                assert_eq!(
                    r.report.torn_tail,
                    Some(TornTail {
                        line: whole + 1,
                        bytes: cut - last_end
                    }),
                    "cut {cut}"
                );
            }
        }
    }

    #[test]
    fn a_complete_line_that_does_not_parse_is_corrupt_with_its_line_number() {
        let (bytes, _, ends) = log();
        // Damage line 3 (the second record) in place.
        let mut damaged = bytes.clone();
        damaged[ends[1] + 2] = b'#';
        match replay(&damaged) {
            Err(ReplayError::Corrupt { line, .. }) => assert_eq!(line, 3),
            other => panic!("{other:?}"),
        }
        // An empty line is not a record either.
        let mut blank = bytes[..ends[2]].to_vec();
        blank.push(b'\n');
        blank.extend(&bytes[ends[2]..]);
        match replay(&blank) {
            Err(ReplayError::Corrupt { line, .. }) => assert_eq!(line, 4),
            other => panic!("{other:?}"),
        }
        // Garbage on the last line is only forgiven when the line is
        // incomplete.
        let mut tail = bytes.clone();
        tail.extend(b"garbage\n");
        match replay(&tail) {
            Err(ReplayError::Corrupt { line, .. }) => assert_eq!(line, ends.len() + 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_seq_that_does_not_follow_is_corrupt() {
        let (bytes, records, ends) = log();
        // Drop line 3: line 3 now holds seq 3 where 2 was expected.
        let mut gap = bytes[..ends[1]].to_vec();
        gap.extend(&bytes[ends[2]..]);
        match replay(&gap) {
            Err(ReplayError::Corrupt { line, reason }) => {
                assert_eq!(line, 3);
                assert!(reason.contains("seq 3 where 2 was expected"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // Repeat the last record.
        let mut repeat = bytes.clone();
        repeat.extend(serde_json::to_vec(records.last().unwrap()).unwrap());
        repeat.push(b'\n');
        assert!(matches!(
            replay(&repeat),
            Err(ReplayError::Corrupt { line, .. }) if line == ends.len() + 1
        ));
        // Even as a last line without newline, a bad seq is not a torn tail.
        repeat.pop();
        assert!(matches!(replay(&repeat), Err(ReplayError::Corrupt { .. })));
    }

    #[test]
    fn a_missing_or_foreign_header_is_bad() {
        assert_eq!(
            replay(b"").unwrap_err(),
            ReplayError::BadHeader("the file is empty".into())
        );
        let (bytes, _, ends) = log();
        assert!(matches!(
            replay(&bytes[ends[0]..]),
            Err(ReplayError::BadHeader(_))
        ));
        assert!(matches!(replay(b"\n"), Err(ReplayError::BadHeader(_))));
        assert!(matches!(
            replay(b"{\"type\":\"header\"}\n"),
            Err(ReplayError::BadHeader(_))
        ));
    }
}
