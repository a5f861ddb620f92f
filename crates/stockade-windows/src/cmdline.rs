//! The child's command line: Windows passes one string, which the child's C
//! runtime (`CommandLineToArgvW` rules) splits back into argv. Quoting here is
//! the exact inverse, so the child sees the argv the caller gave.

use std::ffi::OsString;

use crate::error::Error;
use crate::paths;

const QUOTE: u16 = b'"' as u16;
const BACKSLASH: u16 = b'\\' as u16;

fn needs_quotes(arg: &[u16]) -> bool {
    arg.is_empty()
        || arg
            .iter()
            .any(|u| matches!(u8::try_from(*u), Ok(b' ' | b'\t' | b'\n' | 0x0b | b'"')))
}

/// Append one argument. Backslashes are literal unless they precede a quote;
/// so a run of backslashes before a quote (or before the closing quote) is
/// doubled, and the quote itself escaped.
fn push_arg(out: &mut Vec<u16>, arg: &[u16]) {
    if !needs_quotes(arg) {
        out.extend_from_slice(arg);
        return;
    }
    out.push(QUOTE);
    let mut backslashes = 0usize;
    for &u in arg {
        if u == BACKSLASH {
            backslashes += 1;
            continue;
        }
        if u == QUOTE {
            out.extend(std::iter::repeat_n(BACKSLASH, 2 * backslashes + 1));
        } else {
            out.extend(std::iter::repeat_n(BACKSLASH, backslashes));
        }
        backslashes = 0;
        out.push(u);
    }
    out.extend(std::iter::repeat_n(BACKSLASH, 2 * backslashes));
    out.push(QUOTE);
}

/// The NUL-terminated command line for `argv`. The program name is parsed by
/// different rules (everything up to the next quote or blank, no escapes), so
/// it is quoted plainly and may not contain a quote at all.
pub fn command_line(argv: &[OsString]) -> Result<Vec<u16>, Error> {
    let (program, args) = argv.split_first().ok_or_else(|| Error::Usage {
        detail: "no command to run after --".into(),
    })?;
    let encode = |a: &OsString| {
        let w = paths::wide(a).ok_or_else(|| Error::Usage {
            detail: format!("argument {a:?} cannot be represented as UTF-16"),
        })?;
        if w.contains(&0) {
            return Err(Error::InteriorNul {
                what: "an argument",
            });
        }
        Ok(w)
    };
    let prog = encode(program)?;
    if prog.contains(&QUOTE) {
        return Err(Error::ProgramQuote {
            program: program.clone(),
        });
    }
    let mut out = Vec::new();
    if prog.is_empty() || needs_quotes(&prog) {
        out.push(QUOTE);
        out.extend_from_slice(&prog);
        out.push(QUOTE);
    } else {
        out.extend_from_slice(&prog);
    }
    for a in args {
        out.push(u16::from(b' '));
        push_arg(&mut out, &encode(a)?);
    }
    out.push(0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(argv: &[&str]) -> String {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let w = command_line(&argv).unwrap();
        assert_eq!(w.last(), Some(&0));
        String::from_utf16(&w[..w.len() - 1]).unwrap()
    }

    /// `CommandLineToArgvW`'s rules for arguments after the program name
    /// (the post-2008 MSVCRT behaviour), to check quoting round-trips.
    fn split(line: &str) -> Vec<String> {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut out = Vec::new();
        // Program name: up to the next blank, quotes toggle, no escapes.
        let mut prog = String::new();
        let mut q = false;
        while i < chars.len() && (q || (chars[i] != ' ' && chars[i] != '\t')) {
            if chars[i] == '"' {
                q = !q;
            } else {
                prog.push(chars[i]);
            }
            i += 1;
        }
        out.push(prog);
        loop {
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
            if i >= chars.len() {
                return out;
            }
            let mut arg = String::new();
            let mut quoted = false;
            while i < chars.len() {
                let c = chars[i];
                if c == '\\' {
                    let start = i;
                    while i < chars.len() && chars[i] == '\\' {
                        i += 1;
                    }
                    let n = i - start;
                    if i < chars.len() && chars[i] == '"' {
                        arg.extend(std::iter::repeat_n('\\', n / 2));
                        if n % 2 == 1 {
                            arg.push('"');
                            i += 1;
                        }
                    } else {
                        arg.extend(std::iter::repeat_n('\\', n));
                    }
                    continue;
                }
                if c == '"' {
                    if quoted && i + 1 < chars.len() && chars[i + 1] == '"' {
                        arg.push('"');
                        i += 2;
                        continue;
                    }
                    quoted = !quoted;
                    i += 1;
                    continue;
                }
                if !quoted && (c == ' ' || c == '\t') {
                    break;
                }
                arg.push(c);
                i += 1;
            }
            out.push(arg);
        }
    }

    #[test]
    fn quoting_is_exact() {
        assert_eq!(line(&["cmd.exe", "/c", "echo"]), "cmd.exe /c echo");
        assert_eq!(
            line(&[r"C:\Program Files\x.exe", "a b", ""]),
            r#""C:\Program Files\x.exe" "a b" """#
        );
        assert_eq!(line(&["p", r#"say "hi""#]), r#"p "say \"hi\"""#);
        assert_eq!(line(&["p", r"C:\dir\"]), r"p C:\dir\");
        assert_eq!(line(&["p", r"C:\my dir\"]), r#"p "C:\my dir\\""#);
        assert_eq!(line(&["p", r#"a\"b"#]), r#"p "a\\\"b""#);
    }

    #[test]
    fn quoting_round_trips_through_the_crt_rules() {
        let nasty = [
            "plain",
            "",
            "two words",
            "tab\there",
            r#"q"uote"#,
            r"back\slash",
            r"trailing\",
            r"trailing\\",
            r#"mix\\"\"x"#,
            r#"\""#,
            "new\nline",
            "ünïcödé ✓",
        ];
        let mut argv = vec![r"C:\Program Files\pwsh\pwsh.exe"];
        argv.extend(nasty);
        assert_eq!(split(&line(&argv)), argv);
    }

    #[test]
    fn programs_with_quotes_and_nuls_are_refused() {
        let q = [OsString::from(r#"a"b.exe"#)];
        assert!(matches!(command_line(&q), Err(Error::ProgramQuote { .. })));
        let n = [OsString::from("a.exe"), OsString::from("x\0y")];
        assert!(matches!(command_line(&n), Err(Error::InteriorNul { .. })));
        assert!(matches!(command_line(&[]), Err(Error::Usage { .. })));
    }
}
