//! The one server-sent-events parser of the client, shared by the session event stream
//! ([`crate::Client::stream_events`]) and the memory change feed
//! ([`crate::Client::memory_changes_stream`]).

use serde_json::Value;

use crate::{ClientError, Result};

/// One complete SSE message: its `event:` name, its `id:` (if it carried one) and its `data:`
/// lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseMessage {
    pub(crate) event: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) data: String,
}

impl SseMessage {
    /// A message to skip: no `event:` line (the reference SDK drops those too), a `ping`, or no
    /// data (a comment, a bare `id:`).
    pub(crate) fn is_skipped(&self) -> bool {
        self.event.is_none() || self.event.as_deref() == Some("ping") || self.data.is_empty()
    }

    /// The data as JSON.
    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.data)
            .map_err(|e| ClientError::Decode { status: 200, message: format!("bad event in stream: {e}") })
    }
}

/// The most bytes one message may take (its field lines together, a line being read
/// included). A stream that sends more without a blank line is refused ([`ClientError::Decode`]),
/// so a hostile or broken server cannot make the client buffer without limit. Far above any
/// event: a request body is at most a few MiB, and an event is one.
pub(crate) const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Splits a server-sent-event byte stream into messages (field lines ended by a blank line), as
/// the HTML standard's event-stream interpretation does: lines end with CRLF, LF or CR (a CRLF
/// split between two chunks is one line end), a leading BOM is skipped, `:` starts a comment,
/// one space after the field's colon is dropped, `data:` lines are joined with `\n`, an `id:`
/// holding NUL is ignored. Chunk boundaries never change the outcome. Bounded by
/// [`MAX_MESSAGE_BYTES`]; after that refusal the parser takes nothing more.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    /// Bytes at the front of `buf` already read as lines.
    start: usize,
    /// Where the search for the next line end resumes (bytes before it hold none).
    scanned: usize,
    /// The last line ended with a CR that was the last byte seen: an LF first in the next chunk
    /// belongs to it.
    after_cr: bool,
    /// A first line has been read (a BOM is only skipped before it).
    begun: bool,
    message: Partial,
    /// The bound was crossed: the stream is refused.
    failed: bool,
}

/// The message being read.
#[derive(Debug, Default)]
struct Partial {
    event: Option<String>,
    id: Option<String>,
    data: String,
    /// Any line (a comment included) since the last blank line.
    lines: bool,
    /// Bytes of its lines so far.
    size: usize,
}

impl SseParser {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if !self.failed {
            self.buf.extend_from_slice(chunk);
        }
    }

    /// The next complete message, `None` when more bytes are needed, or an error when a
    /// message outgrows [`MAX_MESSAGE_BYTES`] (then `None` ever after).
    pub(crate) fn next_raw(&mut self) -> Option<Result<SseMessage>> {
        loop {
            if self.failed {
                return None;
            }
            if self.after_cr && self.start < self.buf.len() {
                self.after_cr = false;
                if self.buf[self.start] == b'\n' {
                    self.start += 1;
                }
            }
            let from = self.scanned.max(self.start);
            let Some(i) = self.buf[from..].iter().position(|&b| b == b'\n' || b == b'\r') else {
                if self.message.size + (self.buf.len() - self.start) > MAX_MESSAGE_BYTES {
                    return Some(Err(self.refuse()));
                }
                // Keep only the unread tail.
                self.buf.drain(..self.start);
                self.start = 0;
                self.scanned = self.buf.len();
                return None;
            };
            let end = from + i;
            if self.message.size + (end - self.start) > MAX_MESSAGE_BYTES {
                return Some(Err(self.refuse()));
            }
            let line = String::from_utf8_lossy(&self.buf[self.start..end]).into_owned();
            self.start = end + 1;
            if self.buf[end] == b'\r' {
                match self.buf.get(self.start) {
                    Some(b'\n') => self.start += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if let Some(message) = self.line(&line) {
                return Some(Ok(message));
            }
        }
    }

    /// Reads one line; a blank one ends the message, if there is one.
    fn line(&mut self, line: &str) -> Option<SseMessage> {
        let line = if self.begun { line } else { line.strip_prefix('\u{feff}').unwrap_or(line) };
        self.begun = true;
        if line.is_empty() {
            if !self.message.lines {
                return None;
            }
            let mut m = std::mem::take(&mut self.message);
            if m.data.ends_with('\n') {
                m.data.pop();
            }
            return Some(SseMessage { event: m.event, id: m.id, data: m.data });
        }
        self.message.lines = true;
        self.message.size += line.len() + 1;
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "event" => self.message.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.message.id = Some(value.to_owned()),
            "data" => {
                self.message.data.push_str(value);
                self.message.data.push('\n');
            }
            _ => {}
        }
        None
    }

    fn refuse(&mut self) -> ClientError {
        self.failed = true;
        self.buf = Vec::new();
        (self.start, self.scanned) = (0, 0);
        self.message = Partial::default();
        ClientError::Decode {
            status: 200,
            message: format!("an event in the stream is larger than {MAX_MESSAGE_BYTES} bytes; the stream is refused"),
        }
    }

    /// The next complete message as a session stream reads it: `Some(Ok(Some(json)))` for an
    /// event, `Some(Ok(None))` for a message to skip (ping, comment), `Some(Err(_))` for bad
    /// JSON or an oversized message, `None` when more bytes are needed.
    pub(crate) fn next_message(&mut self) -> Option<Result<Option<Value>>> {
        let message = match self.next_raw()? {
            Ok(m) => m,
            Err(e) => return Some(Err(e)),
        };
        if message.is_skipped() {
            return Some(Ok(None));
        }
        Some(message.json().map(Some))
    }

    /// Whether the stream was refused for its size: nothing more will come out of it.
    pub(crate) fn is_refused(&self) -> bool {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_messages_split_across_chunks() {
        let mut p = SseParser::default();
        p.push(b"event: ping\ndata: {}\n\nevent: message\nda");
        assert!(matches!(p.next_message(), Some(Ok(None))));
        assert!(p.next_message().is_none());
        p.push(b"ta: {\"type\":\"user.message\"}\n\n: comment\n\n");
        let event = p.next_message().unwrap().unwrap().unwrap();
        assert_eq!(event["type"], "user.message");
        assert!(matches!(p.next_message(), Some(Ok(None))));
        assert!(p.next_message().is_none());
    }

    #[test]
    fn messages_without_an_event_line_are_skipped() {
        let mut p = SseParser::default();
        p.push(b"data: {\"type\":\"x\"}\r\n\r\n");
        assert!(matches!(p.next_message(), Some(Ok(None))));
    }

    #[test]
    fn bad_json_is_a_decode_error() {
        let mut p = SseParser::default();
        p.push(b"event: message\ndata: {nope\n\n");
        assert!(matches!(p.next_message(), Some(Err(ClientError::Decode { .. }))));
    }

    #[test]
    fn ids_and_event_names_are_kept() {
        let mut p = SseParser::default();
        p.push(b"event: memory.created\nid: 42\ndata: {\"a\":1}\n\n");
        let m = p.next_raw().unwrap().unwrap();
        assert_eq!(
            (m.event.as_deref(), m.id.as_deref(), m.data.as_str()),
            (Some("memory.created"), Some("42"), "{\"a\":1}")
        );
        assert!(!m.is_skipped());
    }

    // ---- hostile streams -------------------------------------------------------------------

    use proptest::prelude::*;

    /// Cases per property: `MNEMO_FUZZ_CASES` (or `PROPTEST_CASES`), else `default`.
    fn config(default: u32) -> ProptestConfig {
        let env = |name| std::env::var(name).ok().and_then(|n: String| n.parse().ok());
        let cases = env("MNEMO_FUZZ_CASES").or_else(|| env("PROPTEST_CASES")).unwrap_or(default);
        ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
    }

    /// Everything a parser hands out for a stream fed in `chunks`, until it needs more bytes.
    fn parse_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<std::result::Result<SseMessage, String>> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for chunk in chunks {
            p.push(chunk);
            while let Some(m) = p.next_raw() {
                out.push(m.map_err(|e| e.to_string()));
            }
        }
        out
    }

    /// The standard's algorithm over the whole stream at once, the plainest way: split into
    /// lines at CRLF, LF or CR; only lines that were ended count.
    fn reference(stream: &[u8]) -> Vec<SseMessage> {
        let text = String::from_utf8_lossy(stream);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut lines = Vec::new();
        let (mut line, mut chars) = (String::new(), text.chars().peekable());
        while let Some(c) = chars.next() {
            match c {
                '\r' => {
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    lines.push(std::mem::take(&mut line));
                }
                '\n' => lines.push(std::mem::take(&mut line)),
                c => line.push(c),
            }
        }
        let (mut out, mut event, mut id, mut data, mut any) = (Vec::new(), None, None, String::new(), false);
        for line in lines {
            if line.is_empty() {
                if any {
                    let data = data.strip_suffix('\n').map(str::to_owned).unwrap_or_else(|| data.clone());
                    out.push(SseMessage { event: event.take(), id: id.take(), data });
                }
                (data, any) = (String::new(), false);
                continue;
            }
            any = true;
            if line.starts_with(':') {
                continue;
            }
            let (f, v) = line.split_once(':').map_or((&line[..], ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
            match f {
                "event" => event = Some(v.to_owned()),
                "id" if !v.contains('\0') => id = Some(v.to_owned()),
                "data" => {
                    data.push_str(v);
                    data.push('\n');
                }
                _ => {}
            }
        }
        out
    }

    /// Byte streams made mostly of the pieces an event stream is made of, and some noise.
    fn stream() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"data".to_vec()),
            Just(b"data: ".to_vec()),
            Just(b"event: ".to_vec()),
            Just(b"id: ".to_vec()),
            Just(b"retry: 10".to_vec()),
            Just(b": comment".to_vec()),
            Just(b":".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n\n".to_vec()),
            Just(b"\r\r".to_vec()),
            Just(b"\xef\xbb\xbf".to_vec()),
            Just(b"\xff\xfe".to_vec()),
            Just(b"\0".to_vec()),
            Just("\u{e9}\u{1F600}".as_bytes().to_vec()),
            Just(b"{\"type\":\"user.message\"}".to_vec()),
            "[a-z ]{0,6}".prop_map(String::into_bytes),
            prop::collection::vec(any::<u8>(), 0..8),
        ];
        prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
    }

    #[test]
    fn every_line_ending_ends_a_line() {
        let mut p = SseParser::default();
        p.push(b"\xef\xbb\xbfevent: a\rdata: 1\r\revent: b\r\ndata: 2\r\n\r\nevent: c\ndata: 3\ndata\n\n");
        let got: Vec<_> = std::iter::from_fn(|| p.next_raw()).map(|m| m.unwrap()).collect();
        let want = |e: &str, d: &str| SseMessage { event: Some(e.into()), id: None, data: d.into() };
        assert_eq!(got, [want("a", "1"), want("b", "2"), want("c", "3\n")]);
    }

    #[test]
    fn a_crlf_split_between_chunks_is_one_line_end() {
        let got = parse_chunks([&b"event: a\r"[..], b"\ndata: 1\r", b"\n\r", b"\n"]);
        assert_eq!(got, [Ok(SseMessage { event: Some("a".into()), id: None, data: "1".into() })]);
    }

    #[test]
    fn a_message_without_end_is_bounded() {
        // A hostile server streams one endless line: refused at the bound, memory stays bounded.
        let mut p = SseParser::default();
        let chunk = vec![b'a'; 64 << 10];
        let mut refused = None;
        for sent in 1..=(MAX_MESSAGE_BYTES / chunk.len() + 2) {
            p.push(&chunk);
            assert!(p.buf.len() <= MAX_MESSAGE_BYTES + chunk.len(), "the buffer is bounded");
            assert!(p.buf.capacity() <= 2 * (MAX_MESSAGE_BYTES + chunk.len()));
            if let Some(r) = p.next_raw() {
                refused = Some((sent, r));
                break;
            }
        }
        let (sent, result) = refused.expect("an endless line is refused");
        assert!(sent * chunk.len() > MAX_MESSAGE_BYTES);
        let err = result.unwrap_err().to_string();
        assert!(err.contains("larger than") && err.contains("refused"), "{err}");
        p.push(b"\n\nevent: a\ndata: 1\n\n");
        assert!(p.next_raw().is_none() && p.is_refused() && p.buf.is_empty(), "nothing more is taken in");

        // Many short data lines count too.
        let mut p = SseParser::default();
        let line = [b"data: ".as_slice(), &[b'x'; 1000], b"\n"].concat();
        let mut refused = false;
        for _ in 0..(MAX_MESSAGE_BYTES / line.len() + 2) {
            p.push(&line);
            if let Some(r) = p.next_raw() {
                assert!(r.is_err());
                refused = true;
                break;
            }
        }
        assert!(refused, "a message of endless lines is refused");
        assert!(p.message.data.is_empty());
    }

    #[test]
    fn a_message_just_under_the_bound_is_read() {
        let data = "x".repeat(MAX_MESSAGE_BYTES - 64);
        let mut p = SseParser::default();
        p.push(format!("event: a\ndata: {data}\n\n").as_bytes());
        let m = p.next_raw().unwrap().unwrap();
        assert_eq!(m.data.len(), data.len());
    }

    proptest! {
        #![proptest_config(config(2_000))]

        /// Any stream split at any boundaries parses exactly as when it comes whole, and as
        /// the standard's algorithm reads it; nothing panics.
        #[test]
        fn chunk_boundaries_never_change_the_outcome(
            stream in stream(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let whole = parse_chunks([&stream[..]]);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in at {
                chunks.push(&stream[from..cut]);
                from = cut;
            }
            chunks.push(&stream[from..]);
            prop_assert_eq!(&parse_chunks(chunks.iter().copied()), &whole);
            let whole: Vec<SseMessage> = whole.into_iter().map(|m| m.unwrap()).collect();
            prop_assert_eq!(whole, reference(&stream));
            // Byte at a time too.
            let bytes: Vec<&[u8]> = stream.chunks(1).collect();
            let one_by_one: Vec<SseMessage> = parse_chunks(bytes).into_iter().map(|m| m.unwrap()).collect();
            prop_assert_eq!(one_by_one, reference(&stream));
        }

        /// Random bytes: no panic, and every message is well-formed JSON or a decode error.
        #[test]
        fn random_bytes_never_panic(stream in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut p = SseParser::default();
            p.push(&stream);
            while let Some(m) = p.next_message() {
                let _ = m;
            }
        }
    }
}
