//! How an MCP tool result reads to the model: its text content as text,
//! every other kind of content named (never its bytes), bounded.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The most of a result the model is shown: the head and the tail, half
/// each, with what was left out named in between.
pub const MAX_RESULT_BYTES: usize = 128 * 1024;

/// The result's content as text, and whether the server flagged it as an
/// error.
pub fn render(result: &CallToolResult) -> (String, bool) {
    let mut parts: Vec<String> = result.content.iter().map(block).collect();
    if parts.is_empty() {
        parts.push(match &result.structured_content {
            Some(v) => v.to_string(),
            None => "(the tool returned no content)".to_owned(),
        });
    }
    (bound(parts.join("\n")), result.is_error == Some(true))
}

fn block(b: &ContentBlock) -> String {
    match b {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!(
            "[image content ({}, {} base64 bytes), not shown]",
            i.mime_type,
            i.data.len()
        ),
        ContentBlock::Audio(a) => format!(
            "[audio content ({}, {} base64 bytes), not shown]",
            a.mime_type,
            a.data.len()
        ),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri} ({}, {} base64 bytes), not shown]",
                mime_type.as_deref().unwrap_or("binary"),
                blob.len()
            ),
            _ => "[a resource of a kind stockade does not show]".to_owned(),
        },
        ContentBlock::ResourceLink(l) => format!("[resource link {} ({})]", l.uri, l.name),
        _ => "[content of a kind stockade does not show]".to_owned(),
    }
}

fn bound(text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let half = MAX_RESULT_BYTES / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes of the result not shown ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_text_and_other_content_is_named() {
        let mut r = CallToolResult::success(vec![
            ContentBlock::text("wrote 3 bytes"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::embedded_text("file:///a", "inside"),
        ]);
        let (text, is_error) = render(&r);
        assert!(!is_error);
        assert_eq!(
            text,
            "wrote 3 bytes\n[image content (image/png, 8 base64 bytes), not shown]\n[resource file:///a]\ninside"
        );
        r.is_error = Some(true);
        assert!(render(&r).1);
        let empty = CallToolResult::success(vec![]);
        assert_eq!(render(&empty).0, "(the tool returned no content)");
    }

    #[test]
    fn a_huge_result_keeps_its_head_and_tail() {
        let big = format!("{}é{}", "a".repeat(MAX_RESULT_BYTES), "z".repeat(10));
        let out = bound(big);
        assert!(out.len() < MAX_RESULT_BYTES + 100);
        assert!(out.starts_with("aaa") && out.ends_with("zzzzzzzzzz"));
        assert!(out.contains("bytes of the result not shown"));
    }
}
