//! A `session/prompt`'s content as the model reads it: one user message of
//! text. Nothing the client sends is dropped silently: text is kept as it
//! is, a resource link (an `@file` mention) becomes a line naming it, an
//! embedded text resource its URI and its text in a fence, an embedded
//! blob is named but not inlined, and what the model cannot take (images,
//! audio, kinds this build does not know) refuses the whole prompt with a
//! JSON-RPC error saying so.

use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResource, EmbeddedResourceResource, PromptCapabilities, ResourceLink,
};
use agent_client_protocol::{Error, ErrorCode};

/// What `initialize` advertises: embedded context, images exactly when the
/// configured model takes them (`[model] images`), no audio.
pub(crate) fn capabilities(images: bool) -> PromptCapabilities {
    PromptCapabilities::new()
        .embedded_context(true)
        .image(images)
        .audio(false)
}

/// The images of a prompt whose model takes them; `text` refuses them
/// otherwise.
pub(crate) fn images(blocks: &[ContentBlock]) -> Vec<stockade_agent::agent::Image> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Image(i) => Some(stockade_agent::agent::Image {
                mime_type: i.mime_type.clone(),
                data: i.data.clone(),
            }),
            _ => None,
        })
        .collect()
}

fn refused(kind: &str) -> Error {
    Error::new(
        ErrorCode::INVALID_PARAMS,
        format!(
            "this agent does not take {kind} in a prompt (its model is text only; see promptCapabilities); nothing was sent, remove the {kind} and send the prompt again"
        ),
    )
}

/// The path of a `file://` URI (percent-decoded), else `None`.
fn file_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(h), Some(l)) if hex(*h).is_some() && hex(*l).is_some() => {
                let (h, l) = (hex(*h).unwrap_or(0), hex(*l).unwrap_or(0));
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A URI as the model is shown it: a file's path, else the URI itself.
fn shown_uri(uri: &str) -> String {
    file_path(uri).unwrap_or_else(|| uri.to_owned())
}

fn link(l: &ResourceLink) -> String {
    let target = shown_uri(&l.uri);
    if l.name.is_empty() || l.name == target {
        format!("[mentioned: {target}]")
    } else {
        format!("[mentioned: {target} ({})]", l.name)
    }
}

/// A fence no line of `text` can close: one backtick more than its longest
/// run.
fn fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

fn embedded(r: &EmbeddedResource) -> Result<String, Error> {
    match &r.resource {
        EmbeddedResourceResource::TextResourceContents(t) => {
            let f = fence(&t.text);
            let newline = if t.text.ends_with('\n') { "" } else { "\n" };
            Ok(format!(
                "[attached: {}]\n{f}\n{}{newline}{f}",
                shown_uri(&t.uri),
                t.text
            ))
        }
        EmbeddedResourceResource::BlobResourceContents(b) => Ok(format!(
            "[attached: {} ({}, binary, not shown)]",
            shown_uri(&b.uri),
            b.mime_type.as_deref().unwrap_or("unknown type")
        )),
        _ => Err(refused("this kind of embedded resource")),
    }
}

/// The user's message, or the error the whole prompt is refused with.
/// With `images_ok` an image block is taken (see [`images`]) and counted
/// here only by where it sat.
pub(crate) fn text(blocks: &[ContentBlock], images_ok: bool) -> Result<String, Error> {
    let mut parts = Vec::with_capacity(blocks.len());
    for b in blocks {
        parts.push(match b {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ResourceLink(l) => link(l),
            ContentBlock::Resource(r) => embedded(r)?,
            ContentBlock::Image(i) if images_ok => format!("[image attached: {}]", i.mime_type),
            ContentBlock::Image(_) => return Err(refused("images")),
            ContentBlock::Audio(_) => return Err(refused("audio")),
            _ => return Err(refused("this kind of content")),
        });
    }
    Ok(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use agent_client_protocol::v1::schema::{
        BlobResourceContents, ImageContent, TextResourceContents,
    };

    use super::*;

    #[test]
    fn every_block_reaches_the_model_or_refuses_the_prompt() {
        let blocks = vec![
            ContentBlock::from("look at these".to_owned()),
            ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///w/src/main.rs")),
            ContentBlock::ResourceLink(ResourceLink::new("a b", "file:///w/a%20b")),
            ContentBlock::ResourceLink(ResourceLink::new("issue", "https://x.example/1")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}\n```\n",
                    "file:///w/src/main.rs",
                )),
            )),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::BlobResourceContents(
                    BlobResourceContents::new("AAAA", "file:///w/logo.png").mime_type("image/png"),
                ),
            )),
        ];
        assert_eq!(
            text(&blocks, false).unwrap(),
            "look at these\n\
             [mentioned: /w/src/main.rs (main.rs)]\n\
             [mentioned: /w/a b (a b)]\n\
             [mentioned: https://x.example/1 (issue)]\n\
             [attached: /w/src/main.rs]\n````\nfn main() {}\n```\n````\n\
             [attached: /w/logo.png (image/png, binary, not shown)]"
        );
        let image = ContentBlock::Image(ImageContent::new("AAAA", "image/png"));
        let e = text(&[ContentBlock::from("hi".to_owned()), image], false).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("does not take images"), "{e:?}");
    }
}
