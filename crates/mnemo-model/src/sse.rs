//! An incremental server-sent-events parser (bytes in any chunking → whole messages), and the
//! byte stream of a response with an idle timeout between chunks.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::ModelError;

/// One complete SSE message: its `event:` name (if any) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseMessage {
    pub(crate) event: Option<String>,
    pub(crate) data: String,
}

/// Feeds bytes, yields messages. Lines end in `\n`, `\r\n` or `\r`; a blank line ends a message;
/// comments (`:`) and unknown fields are skipped.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the current, incomplete line.
    line: Vec<u8>,
    /// The last byte fed was a `\r` (a following `\n` belongs to the same line end).
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds one chunk; pushes every message it completes onto `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut VecDeque<SseMessage>) {
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(out);
                }
                _ => self.line.push(b),
            }
        }
    }

    /// The end of the input: a message not closed by a blank line is dropped (per the SSE spec).
    pub(crate) fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.data.is_some()
    }

    fn end_line(&mut self, out: &mut VecDeque<SseMessage>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            let event = self.event.take();
            if let Some(data) = self.data.take() {
                out.push_back(SseMessage { event, data });
            }
            return;
        }
        let line = String::from_utf8_lossy(&line);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
    }
}

/// The messages of a streaming response, each `Err` ending the stream: a chunk not arriving
/// within `idle` is [`ModelError::Timeout`], a broken connection [`ModelError::Stream`]. The end
/// of the body ends the stream (`None`); the caller decides whether that end was expected.
pub(crate) fn messages(
    response: reqwest::Response,
    idle: Duration,
) -> BoxStream<'static, Result<SseMessage, ModelError>> {
    struct State {
        body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
        parser: SseParser,
        ready: VecDeque<SseMessage>,
        done: bool,
    }
    let state = State {
        body: response.bytes_stream().boxed(),
        parser: SseParser::default(),
        ready: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        loop {
            if let Some(m) = st.ready.pop_front() {
                return Some((Ok(m), st));
            }
            if st.done {
                return None;
            }
            match tokio::time::timeout(idle, st.body.next()).await {
                Err(_) => {
                    st.done = true;
                    return Some((Err(ModelError::Timeout), st));
                }
                Ok(None) => {
                    st.done = true;
                    if st.parser.has_partial() {
                        tracing::debug!("model stream ended inside an SSE message");
                    }
                }
                Ok(Some(Err(e))) => {
                    st.done = true;
                    let e = crate::transport_error(e);
                    let e = match e {
                        ModelError::Timeout => ModelError::Timeout,
                        other => ModelError::Stream(other.to_string()),
                    };
                    return Some((Err(e), st));
                }
                Ok(Some(Ok(chunk))) => {
                    let State { parser, ready, .. } = &mut st;
                    parser.feed(&chunk, ready);
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseMessage> {
        let mut p = SseParser::default();
        let mut out = VecDeque::new();
        for c in chunks {
            p.feed(c, &mut out);
        }
        out.into_iter().collect()
    }

    const WIRE: &str = "event: message_start\ndata: {\"a\":1}\n\n: a comment\r\n\r\nevent: ping\r\ndata: {}\r\n\r\nevent: content_block_delta\rdata: {\"t\":\"h\u{e9}llo\"}\r\rdata: line1\ndata:line2\nid: 7\nretry: 10\n\nevent: empty\n\n";

    fn expected() -> Vec<SseMessage> {
        let m = |e: Option<&str>, d: &str| SseMessage { event: e.map(str::to_string), data: d.into() };
        vec![
            m(Some("message_start"), "{\"a\":1}"),
            m(Some("ping"), "{}"),
            m(Some("content_block_delta"), "{\"t\":\"h\u{e9}llo\"}"),
            m(None, "line1\nline2"),
        ]
    }

    #[test]
    fn whole_input_parses_every_line_ending() {
        assert_eq!(parse_all(&[WIRE.as_bytes()]), expected());
    }

    #[test]
    fn a_message_without_its_blank_line_is_partial() {
        let mut p = SseParser::default();
        let mut out = VecDeque::new();
        p.feed(b"event: x\ndata: 1\n", &mut out);
        assert!(out.is_empty());
        assert!(p.has_partial());
    }

    proptest! {
        /// Any split of the bytes (even inside a UTF-8 sequence or between `\r` and `\n`)
        /// gives the same messages.
        #[test]
        fn any_chunking_gives_the_same_messages(cuts in proptest::collection::vec(0usize..=WIRE.len(), 0..12)) {
            let bytes = WIRE.as_bytes();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut at = 0;
            for c in cuts {
                chunks.push(&bytes[at..c]);
                at = c;
            }
            chunks.push(&bytes[at..]);
            prop_assert_eq!(parse_all(&chunks), expected());
        }
    }
}
