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

/// Splits a server-sent-event byte stream into messages (field lines ended by a blank line).
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete message, or `None` when more bytes are needed.
    pub(crate) fn next_raw(&mut self) -> Option<SseMessage> {
        let end = find_blank_line(&self.buf)?;
        let raw: Vec<u8> = self.buf.drain(..end.0).collect();
        self.buf.drain(..end.1);
        let text = String::from_utf8_lossy(&raw);
        let mut message = SseMessage { event: None, id: None, data: String::new() };
        for line in text.lines() {
            let (field, value) =
                line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
            match field {
                "event" => message.event = Some(value.to_owned()),
                "id" => message.id = Some(value.to_owned()),
                "data" => {
                    if !message.data.is_empty() {
                        message.data.push('\n');
                    }
                    message.data.push_str(value);
                }
                _ => {}
            }
        }
        Some(message)
    }

    /// The next complete message as a session stream reads it: `Some(Ok(Some(json)))` for an
    /// event, `Some(Ok(None))` for a message to skip (ping, comment), `None` when more bytes are
    /// needed.
    pub(crate) fn next_message(&mut self) -> Option<Result<Option<Value>>> {
        let message = self.next_raw()?;
        if message.is_skipped() {
            return Some(Ok(None));
        }
        Some(message.json().map(Some))
    }
}

/// Where the first message ends: (length of the message, length of the separator).
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some((i, 2));
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some((i, 3));
            }
        }
        i += 1;
    }
    None
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
        let m = p.next_raw().unwrap();
        assert_eq!(
            (m.event.as_deref(), m.id.as_deref(), m.data.as_str()),
            (Some("memory.created"), Some("42"), "{\"a\":1}")
        );
        assert!(!m.is_skipped());
    }
}
