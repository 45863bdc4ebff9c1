//! The memory stream's lines, written without `serde_json`'s string escaper.
//!
//! A stream is mostly content: 16 MB of it for 8 stores of 2,000 memories of 1 KB, the worker's
//! first call. `serde_json` escapes a string one byte at a time, a fifth of the server's CPU
//! in such a download; [`escape_into`] looks at eight bytes at a time and copies the runs
//! between escapes whole. [`memory_line`] writes the same bytes as `serde_json::to_writer` of
//! the [`Memory`] (the tests hold it to that), so a client cannot tell the two apart.

use mnemo_api::Memory;

/// `serde_json`'s escape of a control character other than the five it names.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string (quotes included), escaped exactly as `serde_json` does:
/// `"` `\` and the control characters U+0000–U+001F, nothing else.
pub(crate) fn escape_into(out: &mut Vec<u8>, s: &str) {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    /// Whether any byte of `word` needs an escape. Bytes of 0x80 and above never do (`!word`
    /// clears their high bit), so a borrow from a flagged byte never flags a clean one as wrong
    /// in the "any" answer; which byte it is, is found one at a time.
    fn any_escape(word: u64) -> bool {
        let control = word.wrapping_sub(ONES * 0x20);
        let quote = (word ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES);
        let backslash = (word ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES);
        (control | quote | backslash) & !word & HIGHS != 0
    }
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let word = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
            if !any_escape(word) {
                at += 8;
                continue;
            }
        }
        let end = (at + 8).min(bytes.len());
        for i in at..end {
            let escape: &[u8] = match bytes[i] {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                c @ 0..0x20 => &[b'\\', b'u', b'0', b'0', HEX[usize::from(c >> 4)], HEX[usize::from(c & 0xf)]],
                _ => continue,
            };
            out.extend_from_slice(&bytes[start..i]);
            out.extend_from_slice(escape);
            start = i + 1;
        }
        at = end;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends `memory` as one stream line: its JSON (as `serde_json` writes the [`Memory`]) and a
/// newline.
pub(crate) fn memory_line(out: &mut Vec<u8>, memory: &Memory) {
    let Memory {
        id,
        memory_store_id,
        path,
        content,
        content_sha256,
        content_size_bytes,
        memory_version_id,
        created_at,
        updated_at,
    } = memory;
    out.extend_from_slice(b"{\"type\":\"memory\",\"id\":");
    escape_into(out, id.as_str());
    out.extend_from_slice(b",\"memory_store_id\":");
    escape_into(out, memory_store_id.as_str());
    out.extend_from_slice(b",\"path\":");
    escape_into(out, path);
    out.extend_from_slice(b",\"content\":");
    match content {
        Some(content) => escape_into(out, content),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"content_sha256\":");
    escape_into(out, content_sha256);
    out.extend_from_slice(b",\"content_size_bytes\":");
    out.extend_from_slice(content_size_bytes.to_string().as_bytes());
    out.extend_from_slice(b",\"memory_version_id\":");
    escape_into(out, memory_version_id.as_str());
    // Timestamps as `serde_json` writes them (chrono's format), short and rare next to content.
    out.extend_from_slice(b",\"created_at\":");
    serde_json::to_writer(&mut *out, created_at).expect("a timestamp serialises");
    out.extend_from_slice(b",\"updated_at\":");
    serde_json::to_writer(&mut *out, updated_at).expect("a timestamp serialises");
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use mnemo_api::{MemoryId, MemoryStoreId, MemoryVersionId};
    use proptest::prelude::*;

    use super::*;

    fn memory(path: String, content: Option<String>, size: u64, nanos: u32) -> Memory {
        let at = chrono::DateTime::from_timestamp(1_796_000_000, nanos).expect("a time");
        Memory {
            id: MemoryId::generate(),
            memory_store_id: MemoryStoreId::generate(),
            path,
            content,
            content_sha256: mnemo_api::content_sha256(b"x"),
            content_size_bytes: size,
            memory_version_id: MemoryVersionId::generate(),
            created_at: at,
            updated_at: at + chrono::Duration::milliseconds(1_234),
        }
    }

    fn serde_line(memory: &Memory) -> Vec<u8> {
        let mut line = serde_json::to_vec(memory).unwrap();
        line.push(b'\n');
        line
    }

    #[test]
    fn every_escape_is_serde_jsons() {
        let every_ascii: String = (0u8..0x80).map(char::from).collect();
        for s in [
            String::new(),
            every_ascii.clone(),
            every_ascii.repeat(3),
            "plain text that runs past eight bytes".into(),
            "\"quoted\" \\ back\\slash\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}".into(),
            "ünïcödé — 日本語 and \u{1F600}, then \"a quote\" after them".into(),
            "12345678\n".into(),
            "1234567\"".into(),
        ] {
            let mut ours = Vec::new();
            escape_into(&mut ours, &s);
            assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn a_line_is_serde_jsons_byte_for_byte() {
        for m in [
            memory("/notes/a.md".into(), Some("line one\nline \"two\"\n".into()), 19, 0),
            memory("/a/ü \"b\".md".into(), Some(String::new()), 0, 123_456_789),
            memory("/no/content".into(), None, 7, 5_000),
        ] {
            let mut ours = Vec::new();
            memory_line(&mut ours, &m);
            assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(serde_line(&m)).unwrap());
        }
    }

    proptest! {
        #[test]
        fn any_text_is_escaped_as_serde_json_does(s in any::<String>(), ascii in "[\\x00-\\x7f]{0,64}") {
            for s in [&s, &ascii] {
                let mut ours = Vec::new();
                escape_into(&mut ours, s);
                prop_assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(s).unwrap());
            }
        }

        #[test]
        fn any_memory_is_written_as_serde_json_does(
            path in any::<String>(), content in proptest::option::of(any::<String>()), size in any::<u64>(),
            nanos in 0u32..1_000_000_000,
        ) {
            let m = memory(path, content, size, nanos);
            let mut ours = Vec::new();
            memory_line(&mut ours, &m);
            prop_assert_eq!(ours, serde_line(&m));
        }
    }
}
