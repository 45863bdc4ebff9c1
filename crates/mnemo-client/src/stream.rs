//! A store's memory stream (`GET /v1/memory_stores/{store}/memories:stream`, a mnemo
//! extension): every live memory with content in one response, JSON Lines, ending with a
//! [`MemoryStreamEnd`] line.
//!
//! Whether a server offers it is learnt from the `mnemo-extensions` header of any answer
//! (`mnemo serve` names its extensions on every answer; the hosted API sends no such header)
//! and remembered by the client and its clones, so a client that has heard from the hosted API
//! never tries, and one that has not tries once: an answer without the header tells it to use
//! pages from then on.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, Ordering};

use mnemo_api::headers::{EXTENSIONS_HEADER, MEMORY_BATCH_EXTENSION, MEMORY_STREAM_EXTENSION};
use mnemo_api::{Memory, MemoryId, MemoryStoreId, MemoryStreamEnd};
use reqwest::Response;
use reqwest::header::HeaderMap;
use serde::Deserialize;

use crate::{Client, ClientError, Method, RETRY_BACKOFF, Result};

/// Bits of [`Extensions`]: an answer came; it named the memory stream; it named the batch.
const HEARD: u8 = 1;
const STREAM: u8 = 2;
const BATCH: u8 = 4;

/// What a client knows of its server's extensions, shared by its clones: 0 until an answer came,
/// then [`HEARD`] with the bit of each extension the latest answer named.
#[derive(Debug, Default)]
pub(crate) struct Extensions(AtomicU8);

impl Extensions {
    /// Learns from an answer: the extensions header decides; its absence means a server
    /// without mnemo's extensions. A transient failure (`408`, `429`, `5xx`) teaches nothing:
    /// it may come from a proxy in front of the server, and must not turn the extensions off.
    pub(crate) fn learn(&self, status: reqwest::StatusCode, headers: &HeaderMap) {
        if status.is_server_error()
            || status == reqwest::StatusCode::REQUEST_TIMEOUT
            || status == reqwest::StatusCode::TOO_MANY_REQUESTS
        {
            return;
        }
        let mut known = HEARD;
        for name in headers.get_all(EXTENSIONS_HEADER).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(','))
        {
            match name.trim() {
                MEMORY_STREAM_EXTENSION => known |= STREAM,
                MEMORY_BATCH_EXTENSION => known |= BATCH,
                _ => {}
            }
        }
        self.0.store(known, Ordering::Relaxed);
    }

    /// Whether the server is known to offer `extension` (`None`: not heard from yet).
    fn offers(&self, extension: u8) -> Option<bool> {
        let known = self.0.load(Ordering::Relaxed);
        (known & HEARD != 0).then_some(known & extension != 0)
    }

    /// The server is known to offer the memory batch.
    pub(crate) fn batch(&self) -> bool {
        self.offers(BATCH) == Some(true)
    }
}

/// A memory of the stream as a download needs it: the rest of the line (its store, checked;
/// its version and times) is read past without being kept, so each costs three allocations
/// where a [`Memory`] costs six and two timestamps parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamedMemory {
    pub id: MemoryId,
    pub path: String,
    pub content: String,
    /// The content's SHA-256 as the server gave it; `None` when that was not 64 hex digits
    /// (a download skips such a memory, as it would a listed one).
    pub content_sha256: Option<[u8; 32]>,
}

/// What a stream's memory lines are read as ([`MemoryStream::next_batch`]): the whole
/// [`Memory`] (an export), or a [`StreamedMemory`] (a download).
pub trait StreamItem: Sized {
    /// Parses a memory line of `store`'s stream; refuses a line that is not a memory, or a
    /// memory of another store or without its content.
    fn parse(line: &[u8], store: &MemoryStoreId) -> Result<Self>;
    fn path(&self) -> &str;
}

impl StreamItem for Memory {
    fn parse(line: &[u8], store: &MemoryStoreId) -> Result<Self> {
        let memory: Memory = serde_json::from_slice(line).map_err(|e| not_a_memory(&e))?;
        check(store, memory.memory_store_id.as_str(), &memory.path, memory.content.is_some())?;
        Ok(memory)
    }

    fn path(&self) -> &str {
        &self.path
    }
}

/// A memory line with only what a [`StreamedMemory`] keeps; the other fields are skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename = "memory")]
struct LeanLine<'a> {
    id: MemoryId,
    #[serde(borrow)]
    memory_store_id: Cow<'a, str>,
    path: String,
    content: Option<String>,
    #[serde(borrow)]
    content_sha256: Cow<'a, str>,
}

impl StreamItem for StreamedMemory {
    fn parse(line: &[u8], store: &MemoryStoreId) -> Result<Self> {
        let lean: LeanLine<'_> = serde_json::from_slice(line).map_err(|e| not_a_memory(&e))?;
        check(store, &lean.memory_store_id, &lean.path, lean.content.is_some())?;
        Ok(Self {
            id: lean.id,
            content_sha256: sha256_bytes(&lean.content_sha256),
            path: lean.path,
            content: lean.content.unwrap_or_default(),
        })
    }

    fn path(&self) -> &str {
        &self.path
    }
}

/// A line that does not parse as a memory (the stream tries it as the end line first).
fn not_a_memory(e: &serde_json::Error) -> ClientError {
    decode(&format!("a memory stream line is neither a memory nor its end: {e}"))
}

fn check(store: &MemoryStoreId, of: &str, path: &str, has_content: bool) -> Result<()> {
    if of != store.as_str() {
        return Err(decode(&format!("the memory stream of {store} carried a memory of {of}")));
    }
    if !has_content {
        return Err(decode(&format!("the memory stream carried {path} without its content")));
    }
    Ok(())
}

/// 64 hex digits (either case) as 32 bytes.
fn sha256_bytes(hex: &str) -> Option<[u8; 32]> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// An open memory stream, read batch by batch ([`MemoryStream::next_batch`]). A stream cut
/// short (a broken connection, or an end without its [`MemoryStreamEnd`] line) is opened again
/// under the client's retry policy and read on after the last path already handed out, so no
/// memory is handed out twice; memories before that path are those of the first snapshot (a
/// sync reconciles them like a paged listing's).
#[derive(Debug)]
pub struct MemoryStream {
    client: Client,
    store: MemoryStoreId,
    response: Response,
    /// Bytes of a line not yet complete.
    pending: Vec<u8>,
    /// Memory lines read in the current response (the end line's count covers these).
    lines: u64,
    /// The last path handed out: a resumed stream skips up to it, and paths must grow.
    last_path: Option<String>,
    /// A resumed response is still in the part already handed out.
    skipping: bool,
    cuts: u32,
    end: Option<MemoryStreamEnd>,
    /// The first response's `ETag` (the listing's tag of the same snapshot); dropped when the
    /// stream is opened again, as the memories then come from two snapshots.
    tag: Option<String>,
}

impl Client {
    /// Opens a store's memory stream; `Ok(None)` when the server does not offer it (the
    /// hosted API): the caller lists pages instead. Known answers are remembered, so this
    /// costs no request against a server known not to offer it.
    pub async fn open_memory_stream(&self, store: &MemoryStoreId) -> Result<Option<MemoryStream>> {
        if self.extensions.offers(STREAM) == Some(false) {
            return Ok(None);
        }
        match self.stream_request(store).await {
            Ok(response) => Ok(Some(MemoryStream {
                tag: response.headers().get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_owned),
                client: self.clone(),
                store: store.clone(),
                response,
                pending: Vec::new(),
                lines: 0,
                last_path: None,
                skipping: false,
                cuts: 0,
                end: None,
            })),
            // The answer (learnt from) came from a server without the stream: use pages.
            Err(e) if e.status().is_some() && self.extensions.offers(STREAM) == Some(false) => {
                tracing::debug!(memory_store_id = %store, "the server offers no memory stream; listing pages");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the server is known to offer the memory stream (`None`: not heard from yet).
    pub fn offers_memory_stream(&self) -> Option<bool> {
        self.extensions.offers(STREAM)
    }

    async fn stream_request(&self, store: &MemoryStoreId) -> Result<Response> {
        let path = format!("/v1/memory_stores/{store}/memories:stream");
        // A whole store in one answer grows the connection's read buffer to its maximum (about
        // 400 KB), and a pooled connection keeps that buffer while it idles: closing it after
        // the stream gives the memory back (one connect on the next request costs far less).
        self.send_raw(|| {
            self.request(Method::GET, &path)
                .header(reqwest::header::ACCEPT, "application/jsonl")
                .header(reqwest::header::CONNECTION, "close")
        })
        .await
    }
}

impl MemoryStream {
    /// The next memories in path order (at least one), or `Ok(None)` once the end line came
    /// and checked out: whole [`Memory`]s, or [`StreamedMemory`]s for a download.
    pub async fn next_batch<T: StreamItem>(&mut self) -> Result<Option<Vec<T>>> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            let chunk = match self.response.chunk().await {
                Ok(chunk) => chunk,
                Err(e) => {
                    self.reopen(ClientError::Transport(e)).await?;
                    continue;
                }
            };
            let Some(chunk) = chunk else {
                let cut = ClientError::Incomplete(format!(
                    "the memory stream of {} ended after {} memories without its end line",
                    self.store, self.lines
                ));
                self.reopen(cut).await?;
                continue;
            };
            let batch = self.take_lines(&chunk)?;
            if !batch.is_empty() {
                return Ok(Some(batch));
            }
        }
    }

    /// What the end line said, once it came.
    pub fn end(&self) -> Option<MemoryStreamEnd> {
        self.end
    }

    /// The tag a content-free listing of the same snapshot carries (its `ETag`), once the
    /// stream was read to its end line in one response; `None` before, after a reopen (two
    /// snapshots) or from a server that sent none. A conditional listing with it is answered
    /// `304` while the store is as the stream showed it.
    pub fn snapshot_tag(&self) -> Option<&str> {
        self.end.and(self.tag.as_deref())
    }

    /// The complete lines `chunk` finishes, parsed; the rest waits for the next chunk.
    fn take_lines<T: StreamItem>(&mut self, chunk: &[u8]) -> Result<Vec<T>> {
        let mut out: Vec<T> = Vec::new();
        // The last path handed out is the batch's last memory's, recorded once at the end.
        let prior = self.last_path.take();
        let taken = self.take_lines_into(chunk, prior.as_deref(), &mut out);
        self.last_path = match out.last() {
            Some(last) if taken.is_ok() => Some(last.path().to_owned()),
            _ => prior,
        };
        taken.map(|()| out)
    }

    fn take_lines_into<T: StreamItem>(&mut self, chunk: &[u8], prior: Option<&str>, out: &mut Vec<T>) -> Result<()> {
        let mut rest = chunk;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let last = out.last().map(T::path).or(prior);
            let parsed = if self.pending.is_empty() {
                self.line(&rest[..at], last)
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(&rest[..at]);
                let parsed = self.line(&whole, last);
                whole.clear();
                self.pending = whole;
                parsed
            }?;
            rest = &rest[at + 1..];
            if let Some(memory) = parsed {
                out.push(memory);
            }
            if self.end.is_some() {
                if !rest.is_empty() {
                    return Err(decode("the memory stream carries data after its end line"));
                }
                break;
            }
        }
        self.pending.extend_from_slice(rest);
        Ok(())
    }

    /// One line: a memory to hand out, one to skip (a resumed stream's prefix), or the end.
    /// `last` is the last path handed out.
    fn line<T: StreamItem>(&mut self, line: &[u8], last: Option<&str>) -> Result<Option<T>> {
        if let Some(end) = self.end {
            return Err(decode(&format!("the memory stream went on after its end ({} memories)", end.memory_count)));
        }
        let memory = match T::parse(line, &self.store) {
            Ok(memory) => memory,
            Err(not_memory) => {
                let Ok(end) = serde_json::from_slice::<MemoryStreamEnd>(line) else { return Err(not_memory) };
                if end.memory_count != self.lines {
                    return Err(decode(&format!(
                        "the memory stream's end counts {} memories, {} came",
                        end.memory_count, self.lines
                    )));
                }
                self.end = Some(end);
                return Ok(None);
            }
        };
        self.lines += 1;
        let path = memory.path();
        match last {
            // Handed out already, by the stream this one resumes.
            Some(last) if path.as_bytes() <= last.as_bytes() && self.skipping => Ok(None),
            Some(last) if path.as_bytes() <= last.as_bytes() => {
                Err(decode(&format!("the memory stream is out of path order: {path} after {last}")))
            }
            _ => {
                self.skipping = false;
                Ok(Some(memory))
            }
        }
    }

    /// Opens the stream again after `cause`, under the client's retry policy, or gives up
    /// with `cause`.
    async fn reopen(&mut self, cause: ClientError) -> Result<()> {
        if self.cuts >= self.client.max_retries {
            return Err(cause);
        }
        let delay = RETRY_BACKOFF.delay(self.cuts);
        tracing::debug!(memory_store_id = %self.store, after = self.lines, ?delay, "memory stream cut short; opening it again: {cause}");
        tokio::time::sleep(delay).await;
        self.cuts += 1;
        self.tag = None;
        self.response = self.client.stream_request(&self.store).await?;
        self.pending.clear();
        self.lines = 0;
        self.skipping = true;
        Ok(())
    }
}

fn decode(message: &str) -> ClientError {
    ClientError::Decode { status: 200, message: message.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::serve;

    fn memory_line(store: &MemoryStoreId, path: &str) -> String {
        let content = format!("content of {path}");
        serde_json::json!({
            "type": "memory", "id": mnemo_api::MemoryId::generate(), "memory_store_id": store, "path": path,
            "content": content, "content_sha256": mnemo_api::content_sha256(content.as_bytes()),
            "content_size_bytes": content.len(), "memory_version_id": mnemo_api::MemoryVersionId::generate(),
            "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:00Z",
        })
        .to_string()
            + "\n"
    }

    fn end_line(count: u64) -> String {
        format!("{{\"type\":\"memory_stream_end\",\"memory_count\":{count},\"change_seq\":7}}\n")
    }

    /// A 200 whose body is `body`, announced as `length` bytes (more than sent: cut short).
    fn answer(body: &str, length: usize) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/jsonl\r\nmnemo-extensions: change-feed, memory-stream\r\netag: \"m7\"\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n{body}"
        )
    }

    fn whole(body: &str) -> String {
        answer(body, body.len())
    }

    async fn read_all(stream: &mut MemoryStream) -> Result<Vec<String>> {
        read_as::<Memory>(stream).await
    }

    async fn read_as<T: StreamItem>(stream: &mut MemoryStream) -> Result<Vec<String>> {
        let mut paths = Vec::new();
        while let Some(batch) = stream.next_batch::<T>().await? {
            paths.extend(batch.iter().map(|m| m.path().to_owned()));
        }
        Ok(paths)
    }

    #[tokio::test]
    async fn a_download_reads_what_it_needs_of_each_memory() {
        let store = MemoryStoreId::generate();
        let (a, odd) = (memory_line(&store, "/a"), memory_line(&store, "/b/ü \"q\"\n"));
        let bad_sha = a.replace("\"content_sha256\":\"", "\"content_sha256\":\"zz").replace("\"/a\"", "\"/c\"");
        let body = [a.clone(), odd.clone(), bad_sha, end_line(3)].concat();
        let (base, _) = serve(vec![whole(&body)]).await;
        let client = Client::new(&base, "k").unwrap();
        let mut stream = client.open_memory_stream(&store).await.unwrap().unwrap();
        let mut read: Vec<StreamedMemory> = Vec::new();
        while let Some(batch) = stream.next_batch().await.unwrap() {
            read.extend(batch);
        }
        for (line, lean) in [&a, &odd].into_iter().zip(&read) {
            let whole: Memory = serde_json::from_str(line).unwrap();
            let sha = (0..32).map(|i| u8::from_str_radix(&whole.content_sha256[2 * i..2 * i + 2], 16).unwrap());
            assert_eq!(
                lean,
                &StreamedMemory {
                    id: whole.id,
                    path: whole.path,
                    content: whole.content.unwrap(),
                    content_sha256: Some(sha.collect::<Vec<_>>().try_into().unwrap()),
                }
            );
        }
        assert_eq!(read[2].path, "/c");
        assert_eq!(read[2].content_sha256, None, "not a SHA-256: the download skips it");
        assert_eq!(stream.end().map(|e| e.memory_count), Some(3));
    }

    #[tokio::test]
    async fn a_whole_stream_is_read_to_its_end_line() {
        let store = MemoryStoreId::generate();
        let body = [memory_line(&store, "/a"), memory_line(&store, "/b/c"), end_line(2)].concat();
        let (base, seen) = serve(vec![whole(&body)]).await;
        let client = Client::new(&base, "k").unwrap();
        let mut stream = client.open_memory_stream(&store).await.unwrap().expect("offered");
        assert_eq!(stream.snapshot_tag(), None, "no tag before the end line vouches for the snapshot");
        assert_eq!(read_all(&mut stream).await.unwrap(), ["/a", "/b/c"]);
        assert_eq!(stream.end(), Some(MemoryStreamEnd { memory_count: 2, change_seq: 7 }));
        assert_eq!(stream.snapshot_tag(), Some("\"m7\""));
        assert_eq!(client.offers_memory_stream(), Some(true));
        let seen = seen.lock().unwrap().clone();
        let line = format!("get /v1/memory_stores/{store}/memories:stream ").to_lowercase();
        assert!(seen[0].starts_with(&line), "{seen:?}");
        // The connection is not pooled with the big read buffer the stream grew.
        assert!(seen[0].contains("connection: close"), "{seen:?}");
    }

    #[tokio::test]
    async fn a_cut_stream_is_refused_or_resumed_after_the_last_path() {
        let store = MemoryStoreId::generate();
        let (a, b, c) = (memory_line(&store, "/a"), memory_line(&store, "/b"), memory_line(&store, "/c"));
        // Cut mid-line (the connection closes before the announced length), and cut cleanly
        // between lines (no end line): both refused without retries…
        let mid_line = answer(&format!("{a}{}", &b[..20]), 10_000);
        let no_end = whole(&format!("{a}{b}"));
        for cut in [&mid_line, &no_end] {
            let (base, _) = serve(vec![cut.clone()]).await;
            let client = Client::new(&base, "k").unwrap().with_max_retries(0);
            let mut stream = client.open_memory_stream(&store).await.unwrap().unwrap();
            let err = read_all(&mut stream).await.unwrap_err();
            assert!(!err.is_permanent() && err.status().is_none(), "a cut is transient: {err:?}");
        }
        // …and with retries, opened again and read on after the last path handed out: `/a`
        // once, then the second snapshot's rest (which changed meanwhile).
        let b2 = memory_line(&store, "/b2");
        let (base, seen) = serve(vec![mid_line, whole(&[a.clone(), b2, c, end_line(3)].concat())]).await;
        let client = Client::new(&base, "k").unwrap().with_max_retries(1);
        let mut stream = client.open_memory_stream(&store).await.unwrap().unwrap();
        assert_eq!(read_all(&mut stream).await.unwrap(), ["/a", "/b2", "/c"]);
        assert_eq!(seen.lock().unwrap().len(), 2);
        // Two snapshots make no listing's: the resumed stream vouches for no tag.
        assert_eq!(stream.snapshot_tag(), None);
    }

    #[tokio::test]
    async fn a_stream_that_lies_is_refused() {
        let store = MemoryStoreId::generate();
        let other = MemoryStoreId::generate();
        let (a, b) = (memory_line(&store, "/a"), memory_line(&store, "/b"));
        for (body, why) in [
            ([a.clone(), b.clone(), end_line(3)].concat(), "a count that is not the lines'"),
            ([b.clone(), a.clone(), end_line(2)].concat(), "out of path order"),
            ([a.clone(), a.clone(), end_line(2)].concat(), "a path twice"),
            ([a.clone(), memory_line(&other, "/b"), end_line(2)].concat(), "another store's memory"),
            ([a.clone(), end_line(1), b.clone()].concat(), "data after the end"),
            (
                [a.clone(), "{\"type\":\"memory_prefix\",\"path\":\"/x/\"}\n".into(), end_line(1)].concat(),
                "not a memory",
            ),
        ] {
            for lean in [false, true] {
                let (base, _) = serve(vec![whole(&body)]).await;
                let client = Client::new(&base, "k").unwrap().with_max_retries(2);
                let mut stream = client.open_memory_stream(&store).await.unwrap().unwrap();
                let read =
                    if lean { read_as::<StreamedMemory>(&mut stream).await } else { read_all(&mut stream).await };
                let err = read.unwrap_err();
                assert!(matches!(err, ClientError::Decode { .. }), "{why} (lean: {lean}): {err:?}");
            }
        }
    }

    #[tokio::test]
    async fn a_server_without_the_stream_is_remembered() {
        let store = MemoryStoreId::generate();
        let not_found = crate::testing::json(
            "404 Not Found",
            r#"{"type":"error","error":{"type":"not_found_error","message":"no such endpoint"}}"#,
        );
        let (base, seen) = serve(vec![not_found]).await;
        let client = Client::new(&base, "k").unwrap();
        assert_eq!(client.offers_memory_stream(), None);
        assert!(client.open_memory_stream(&store).await.unwrap().is_none());
        assert_eq!(client.offers_memory_stream(), Some(false));
        assert!(client.clone().open_memory_stream(&store).await.unwrap().is_none(), "no second request");
        assert_eq!(seen.lock().unwrap().len(), 1);

        // The same 404 from `mnemo serve` (which names its extensions) is the store's.
        let gone = crate::testing::json(
            "404 Not Found",
            r#"{"type":"error","error":{"type":"not_found_error","message":"memory store not found"}}"#,
        )
        .replace("connection: close", "connection: close\r\nmnemo-extensions: memory-stream");
        let (base, _) = serve(vec![gone]).await;
        let err = Client::new(&base, "k").unwrap().open_memory_stream(&store).await.unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
    }
}
