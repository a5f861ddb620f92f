//! The names the model calls MCP tools by: `<server>__<tool>`, within what
//! OpenAI-compatible APIs accept for a function name (`[A-Za-z0-9_-]`, at
//! most 64 characters).

/// The longest name a model API accepts for a function.
pub const MAX_NAME: usize = 64;
/// The server's part of a name, at most.
const MAX_SERVER: usize = 24;

/// Every character the API does not accept becomes `_`; nothing is empty.
pub(crate) fn sanitize(text: &str, empty: &str) -> String {
    let out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        empty.to_owned()
    } else {
        out
    }
}

/// A short, stable digest (FNV-1a) that keeps two long names apart once
/// they are cut.
fn digest(text: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// The server's part of its tools' names (also what tells two servers
/// apart in one session).
pub(crate) fn server_part(server: &str) -> String {
    let s = sanitize(server, "mcp");
    if s.len() <= MAX_SERVER {
        return s;
    }
    // ASCII only after sanitize, so any byte index is a boundary.
    format!("{}_{}", &s[..MAX_SERVER - 9], digest(server))
}

/// `<server>__<tool>`, sanitized and at most [`MAX_NAME`] characters; a
/// name that had to be cut ends in a digest of the original tool name.
pub fn tool_name(server: &str, tool: &str) -> String {
    let server = server_part(server);
    let room = MAX_NAME - server.len() - 2;
    let t = sanitize(tool, "tool");
    let t = if t.len() <= room {
        t
    } else {
        format!("{}_{}", &t[..room - 9], digest(tool))
    };
    format!("{server}__{t}")
}

/// `name`, or `name` with a numeric suffix when `taken` already holds it.
pub(crate) fn unique(name: String, taken: &[String]) -> String {
    if !taken.contains(&name) {
        return name;
    }
    for n in 2.. {
        let suffix = format!("_{n}");
        let mut base = name.clone();
        base.truncate(MAX_NAME - suffix.len());
        let candidate = base + &suffix;
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    unreachable!("the suffixes never run out")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_namespaced_and_sanitized() {
        assert_eq!(tool_name("files", "write_file"), "files__write_file");
        assert_eq!(tool_name("my server", "a.b/c"), "my_server__a_b_c");
        assert_eq!(tool_name("", ""), "mcp__tool");
        assert_eq!(tool_name("é", "ü"), "____");
        let long = tool_name(&"s".repeat(100), &"t".repeat(100));
        assert!(allowed(&long), "{long}");
        assert_eq!(long.len(), MAX_NAME);
        // Cut names stay apart.
        let a = tool_name("x", &format!("{}a", "t".repeat(80)));
        let b = tool_name("x", &format!("{}b", "t".repeat(80)));
        assert_ne!(a, b);
        assert!(allowed(&a) && allowed(&b));
    }

    #[test]
    fn a_taken_name_gets_a_suffix_within_the_limit() {
        let taken = vec!["a__b".to_owned(), "a__b_2".to_owned()];
        assert_eq!(unique("a__b".into(), &taken), "a__b_3");
        assert_eq!(unique("c__d".into(), &taken), "c__d");
        let long = "x".repeat(MAX_NAME);
        let u = unique(long.clone(), &[long]);
        assert!(allowed(&u) && u.ends_with("_2"), "{u}");
    }
}
