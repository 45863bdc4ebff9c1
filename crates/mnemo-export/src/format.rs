//! The export file: JSON Lines, one object per line, each with a `type`.
//!
//! ```text
//! {"type":"header","format":"mnemo-memory-store","format_version":1,"mnemo_version":…,"exported_at":…,
//!  "source":{"base_url":…,"memory_store_id":…},"store":{"name":…,"description":…,"metadata":{…},…},"versions":false}
//! {"type":"memory","path":"/notes/todo.md","content":"- ship\n","content_sha256":"…","size":7,…}
//! {"type":"history","memory_id":"mem_…","versions":[…]}       (with --versions: a deleted memory's past)
//! {"type":"trailer","memories":1,"content_bytes":7,"histories":0,"versions":0}
//! ```
//!
//! The header comes first and the trailer last; the trailer's counts let a reader tell a whole
//! file from one cut short at a line boundary (a cut inside a line is not JSON). [`ExportFile::read`]
//! checks everything an import relies on — the format and its version, every path, size and
//! digest, no path twice or overlapping another, the counts — before anything is written.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;

use mnemo_api::limits::{MAX_CONTENT_BYTES, MAX_PATH_BYTES};
use mnemo_api::{
    Actor, MemoryId, MemoryPath, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, Overlap, Timestamp,
    content_sha256, content_too_large_message, is_sha256_hex,
};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `format` of the header: what this file is.
pub const FORMAT: &str = "mnemo-memory-store";
/// The `format_version` this code writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header(Header),
    Memory(MemoryEntry),
    History(History),
    Trailer(Trailer),
}

/// The first line: what the file is, where it came from, and the store's own fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written by this code.
    pub format_version: u32,
    /// The mnemo that wrote the file (`0.1.0 (git 130fd4b)`).
    pub mnemo_version: String,
    pub exported_at: Timestamp,
    pub source: Source,
    pub store: StoreFields,
    /// Whether memory lines carry their history and deleted memories have history lines.
    pub versions: bool,
}

/// Where the memories were read from. Never a credential: the base URL is written without user
/// info, query or fragment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub base_url: String,
    pub memory_store_id: MemoryStoreId,
}

/// The exported store's own fields: what a store created by an import gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreFields {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    #[serde(default)]
    pub archived_at: Option<Timestamp>,
    /// The store's own version retention (`30d`, `forever`), when it has one and the server
    /// has the extension: a store an import creates gets it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_retention: Option<String>,
}

/// One live memory: its path and exact content, with the digest and size to check it by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub path: String,
    pub content: String,
    /// Lowercase hex SHA-256 of `content`'s UTF-8 bytes, as the API reports it.
    pub content_sha256: String,
    /// `content`'s length in bytes.
    pub size: u64,
    /// The memory's id, time of creation and last change in the source store (for reference:
    /// an import cannot keep them, the server assigns its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<MemoryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Timestamp>,
    /// With `--versions`: the memory's history, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<VersionEntry>>,
}

/// The history of a memory that no longer exists (with `--versions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub memory_id: MemoryId,
    /// Oldest first; the last is normally its `deleted` version.
    pub versions: Vec<VersionEntry>,
}

/// One memory version as the source recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionEntry {
    pub id: MemoryVersionId,
    pub operation: Operation,
    /// Null when redacted.
    pub path: Option<String>,
    /// Null for a `deleted` version and when redacted.
    pub content: Option<String>,
    pub content_sha256: Option<String>,
    pub size: Option<u64>,
    pub created_at: Timestamp,
    /// Who made the change (null when the source recorded nobody).
    pub created_by: Option<Actor>,
    pub redacted_at: Option<Timestamp>,
    pub redacted_by: Option<Actor>,
}

impl From<MemoryVersion> for VersionEntry {
    fn from(v: MemoryVersion) -> Self {
        Self {
            id: v.id,
            operation: v.operation,
            path: v.path,
            content: v.content,
            content_sha256: v.content_sha256,
            size: v.content_size_bytes,
            created_at: v.created_at,
            created_by: v.created_by,
            redacted_at: v.redacted_at,
            redacted_by: v.redacted_by,
        }
    }
}

/// The last line: what the lines before it hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trailer {
    /// Memory lines.
    pub memories: u64,
    /// The sum of their `size`s.
    pub content_bytes: u64,
    /// History lines (deleted memories).
    pub histories: u64,
    /// Versions, in memory lines and history lines together.
    pub versions: u64,
}

impl Trailer {
    /// Counts one memory line.
    pub fn count_memory(&mut self, entry: &MemoryEntry) {
        self.memories += 1;
        self.content_bytes += entry.size;
        self.versions += entry.versions.as_ref().map_or(0, |v| v.len() as u64);
    }

    /// Counts one history line.
    pub fn count_history(&mut self, history: &History) {
        self.histories += 1;
        self.versions += history.versions.len() as u64;
    }
}

/// The most bytes a reader takes for one line, and the most one memory (or one version of a
/// memory's history) may take on its line: 1 MiB.
///
/// It admits the largest line a legal memory makes, [`LARGEST_MEMORY_LINE`], with room to
/// spare; a line holding a history may be longer (one version after another, each within the
/// cap: the reader checks and drops them one at a time). Anything longer is not an export —
/// and a reader that took it whole would hold it all in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The longest line of a legal memory, written at worst: its content (at most
/// [`MAX_CONTENT_BYTES`]) and path (at most [`MAX_PATH_BYTES`]) with every byte escaped as
/// `\u00XX` — six bytes for one, the most JSON ever spends on a byte (control characters must be
/// escaped so; a writer may escape any other character too, at no more than six bytes per byte:
/// `\uXXXX` for a 2–3 byte character, a 12-byte surrogate pair for a 4-byte one) — plus 4 KiB for
/// the digest, size, id, times, keys and punctuation (under 2 KiB even with every one of their
/// characters escaped). 624,640 bytes.
pub const LARGEST_MEMORY_LINE: usize = 6 * (MAX_CONTENT_BYTES + MAX_PATH_BYTES) + 4096;
const _: () = assert!(LARGEST_MEMORY_LINE <= MAX_LINE_BYTES);

/// Why a file cannot be imported. Nothing has been written when one is returned (but for
/// [`FileError::Changed`], met while importing).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read the file")]
    Io(#[source] io::Error),
    #[error("cannot keep a copy of the input in a temporary file (an import reads it twice)")]
    Copy(#[source] io::Error),
    #[error("the file is empty")]
    Empty,
    #[error("this is not a mnemo memory store export: {0}")]
    NotAnExport(String),
    #[error(
        "the file is in format version {found}, newer than this mnemo reads (version {FORMAT_VERSION}); import it with a newer mnemo"
    )]
    NewerVersion { found: u64 },
    #[error("line {line}: {why}")]
    Line { line: usize, why: String },
    #[error(
        "line {line} is too long: more than {cap} bytes for one memory (or one version of its history), and no memory takes more than {LARGEST_MEMORY_LINE} (its content is at most {MAX_CONTENT_BYTES} bytes): the file is damaged or not an export"
    )]
    LineTooLong { line: usize, cap: usize },
    #[error(
        "the file ends after line {lines} without its trailer line: it is truncated (an interrupted export, or a partial copy)"
    )]
    Truncated { lines: usize },
    #[error(
        "the trailer says the file holds {said} {what}, but it holds {found}: lines are missing or were added (a damaged or edited file)"
    )]
    Counts { what: &'static str, said: u64, found: u64 },
    #[error(
        "line {line} no longer holds what it held when the file was checked: the file changed during the import; run the command again (what is already imported is skipped)"
    )]
    Changed { line: usize },
}

/// One live memory of a checked file, without its content: what an import plans and checks
/// by. The content is read again, line by line, as it is written ([`ExportFile::contents`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryIndex {
    pub path: String,
    /// Lowercase hex SHA-256 of the content.
    pub content_sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    /// The line that holds it.
    pub line: usize,
}

/// A checked export: the header, every live memory's path, digest and size (histories are
/// counted, checked and dropped: an import cannot replay them), the trailer. No content is
/// kept, so what reading a file costs is bounded by its longest line ([`MAX_LINE_BYTES`]) and
/// its number of memories, whatever its size.
#[derive(Debug, Clone)]
pub struct ExportFile {
    pub header: Header,
    /// In file order; no path twice, none overlapping another.
    pub memories: Arc<[MemoryIndex]>,
    pub trailer: Trailer,
}

impl ExportFile {
    /// Reads and checks a whole file. See the module documentation for what is checked.
    pub fn read(reader: impl BufRead) -> Result<Self, FileError> {
        let mut lines = LineReader::new(reader);
        let Some(first) = lines.next()? else { return Err(FileError::Empty) };
        if !first.whole {
            return Err(FileError::NotAnExport(format!("its first line is longer than {MAX_LINE_BYTES} bytes")));
        }
        let header = read_header(&lines.buf, first.number)?;
        let mut memories = Vec::new();
        let mut seen = HashMap::new();
        let mut counted = Trailer::default();
        let mut trailer = None;
        while let Some(at) = lines.next()? {
            let line = at.number;
            let bad = |why: String| FileError::Line { line, why };
            if trailer.is_some() {
                return Err(bad("comes after the trailer line, which must be the last".into()));
            }
            if at.whole && lines.buf.trim_ascii().is_empty() {
                return Err(bad("is empty".into()));
            }
            match lines.parse(at)? {
                Parsed::Header => return Err(bad("is a second header".into())),
                Parsed::Memory { entry, versions } => {
                    check_memory(&entry).map_err(bad)?;
                    if let Some(first) = seen.insert(entry.path.clone(), line) {
                        return Err(bad(format!("path `{}` appears twice (first on line {first})", entry.path)));
                    }
                    counted.memories += 1;
                    counted.content_bytes += entry.size;
                    counted.versions += versions;
                    let MemoryEntry { path, content_sha256, size, .. } = entry;
                    memories.push(MemoryIndex { path, content_sha256, size, line });
                }
                Parsed::History { versions } => {
                    counted.histories += 1;
                    counted.versions += versions;
                }
                Parsed::Trailer(t) => trailer = Some(t),
            }
        }
        let number = lines.number;
        let Some(trailer) = trailer else { return Err(FileError::Truncated { lines: number }) };
        for (what, said, found) in [
            ("memories", trailer.memories, counted.memories),
            ("content bytes", trailer.content_bytes, counted.content_bytes),
            ("deleted memories' histories", trailer.histories, counted.histories),
            ("versions", trailer.versions, counted.versions),
        ] {
            if said != found {
                return Err(FileError::Counts { what, said, found });
            }
        }
        check_overlaps(&memories)?;
        Ok(Self { header, memories: memories.into(), trailer })
    }

    /// [`ExportFile::read`], writing every byte it reads to `copy` as it goes (a pipe, kept in a
    /// temporary file to be read again by [`ExportFile::contents`]). A file refused early (a
    /// line too long) is copied only up to where it was refused.
    pub fn read_copying(reader: impl BufRead, copy: impl Write) -> Result<Self, FileError> {
        let mut tee = Tee { inner: reader, copy, error: None };
        let file = Self::read(&mut tee);
        if let Some(e) = tee.error.take() {
            return Err(FileError::Copy(e));
        }
        let file = file?;
        tee.copy.flush().map_err(FileError::Copy)?;
        Ok(file)
    }

    /// The second reading of the file this was read from: each memory line in file order, with
    /// its content, checked again (its digest and size) and against what the first reading
    /// found there — a file that changed in between is [`FileError::Changed`], never imported.
    pub fn contents<R: BufRead>(&self, reader: R) -> Contents<R> {
        Contents { lines: LineReader::new(reader), memories: Arc::clone(&self.memories), next: 0 }
    }
}

/// The memory lines of a checked file, read again ([`ExportFile::contents`]).
#[derive(Debug)]
pub struct Contents<R> {
    lines: LineReader<R>,
    memories: Arc<[MemoryIndex]>,
    /// The index of the next memory expected.
    next: usize,
}

impl<R: BufRead> Contents<R> {
    fn next_entry(&mut self) -> Result<Option<MemoryEntry>, FileError> {
        while let Some(at) = self.lines.next()? {
            let line = at.number;
            if line == 1 {
                if !at.whole {
                    return Err(FileError::Changed { line });
                }
                continue; // The header was checked by the first reading.
            }
            let changed = FileError::Changed { line };
            let Parsed::Memory { entry, .. } = self.lines.parse(at).map_err(|_| FileError::Changed { line })? else {
                continue;
            };
            let Some(expected) = self.memories.get(self.next) else { return Err(changed) };
            let same = expected.line == line
                && expected.path == entry.path
                && expected.content_sha256 == entry.content_sha256
                && expected.size == entry.size;
            if !same || check_memory(&entry).is_err() {
                return Err(changed);
            }
            self.next += 1;
            return Ok(Some(entry));
        }
        match self.memories.get(self.next) {
            Some(missing) => Err(FileError::Changed { line: missing.line }),
            None => Ok(None),
        }
    }
}

impl<R: BufRead> Iterator for Contents<R> {
    type Item = Result<MemoryEntry, FileError>;

    /// The next memory with its content (its `versions` dropped); after an error, nothing more.
    fn next(&mut self) -> Option<Self::Item> {
        if self.next == usize::MAX {
            return None;
        }
        let item = self.next_entry().transpose();
        if matches!(item, Some(Err(_))) {
            self.next = usize::MAX;
        }
        item
    }
}

/// A reader that writes what is consumed from it to `copy`.
struct Tee<R, W> {
    inner: R,
    copy: W,
    /// The first write error (`consume` cannot return one); reading stops at it.
    error: Option<io::Error>,
}

impl<R: BufRead, W: Write> io::Read for Tee<R, W> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(out.len());
            out[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead, W: Write> BufRead for Tee<R, W> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.error.is_some() {
            return Err(io::Error::other("the copy failed"));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        // The bytes being consumed are still in the inner buffer: no I/O happens here.
        match self.inner.fill_buf() {
            Ok(buffered) => {
                if let Err(e) = self.copy.write_all(&buffered[..n]) {
                    self.error.get_or_insert(e);
                }
            }
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self.inner.consume(n);
    }
}

/// Where the reader stands after [`LineReader::next`].
#[derive(Debug, Clone, Copy)]
struct At {
    /// The line's number (from 1).
    number: usize,
    /// The whole line is in `buf`; otherwise `buf` holds its first `MAX_LINE_BYTES + 1` bytes
    /// and the rest is still to be read.
    whole: bool,
}

/// The file line by line, counting them; each line is taken whole only up to
/// [`MAX_LINE_BYTES`].
#[derive(Debug)]
struct LineReader<R> {
    reader: R,
    number: usize,
    /// The current line (with its newline), or its first `MAX_LINE_BYTES + 1` bytes.
    buf: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    fn new(reader: R) -> Self {
        Self { reader, number: 0, buf: Vec::new() }
    }

    /// Reads the next line (or its start) into `buf`: where it stands, or `None` at the end.
    fn next(&mut self) -> Result<Option<At>, FileError> {
        self.buf.clear();
        let limit = MAX_LINE_BYTES + 1;
        let whole = loop {
            let available = self.reader.fill_buf().map_err(FileError::Io)?;
            if available.is_empty() {
                break true;
            }
            let window = &available[..available.len().min(limit - self.buf.len())];
            if let Some(i) = window.iter().position(|b| *b == b'\n') {
                self.buf.extend_from_slice(&window[..=i]);
                self.reader.consume(i + 1);
                break true;
            }
            let n = window.len();
            self.buf.extend_from_slice(window);
            self.reader.consume(n);
            if self.buf.len() == limit {
                break false;
            }
        };
        if self.buf.is_empty() {
            return Ok(None);
        }
        self.number += 1;
        Ok(Some(At { number: self.number, whole }))
    }

    /// Parses the line `next` stood at: from `buf` when it is whole, else streamed — `buf`, then
    /// the rest of the line — with at most [`MAX_LINE_BYTES`] for each unit (the line's own
    /// fields, each version of a history).
    fn parse(&mut self, at: At) -> Result<Parsed, FileError> {
        let line = at.number;
        let budget = Cell::new(MAX_LINE_BYTES);
        let failed_check = RefCell::new(None);
        let seed = LineSeed { budget: &budget, failed_check: &failed_check };
        let (parsed, terminated, over) = if at.whole {
            let mut de = serde_json::Deserializer::from_slice(&self.buf);
            let parsed = seed.deserialize(&mut de).and_then(|p| de.end().map(|()| p));
            (parsed, self.buf.ends_with(b"\n"), false)
        } else {
            let rest = RestOfLine { reader: &mut self.reader, ended: false };
            let mut source = Budgeted { inner: io::Cursor::new(&self.buf[..]).chain(rest), left: &budget, over: false };
            let parsed = {
                let mut de = serde_json::Deserializer::from_reader(&mut source);
                seed.deserialize(&mut de).and_then(|p| de.end().map(|()| p))
            };
            let (_, rest) = source.inner.get_ref();
            (parsed, rest.ended, source.over)
        };
        if over {
            return Err(FileError::LineTooLong { line, cap: MAX_LINE_BYTES });
        }
        if let Some(why) = failed_check.into_inner() {
            return Err(FileError::Line { line, why });
        }
        parsed.map_err(|e| match e.classify() {
            serde_json::error::Category::Io => FileError::Io(e.into()),
            _ => FileError::Line { line, why: json_error(&e, terminated) },
        })
    }
}

/// The rest of the current line: up to and with its newline, then nothing.
struct RestOfLine<'a, R> {
    reader: &'a mut R,
    /// The newline was read.
    ended: bool,
}

impl<R: BufRead> io::Read for RestOfLine<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        let available = self.reader.fill_buf()?;
        let window = &available[..available.len().min(out.len())];
        let n = match window.iter().position(|b| *b == b'\n') {
            Some(i) => {
                self.ended = true;
                i + 1
            }
            None => window.len(),
        };
        out[..n].copy_from_slice(&window[..n]);
        self.reader.consume(n);
        Ok(n)
    }
}

/// A reader that fails once more than `left` bytes were read since the budget was last set.
struct Budgeted<'a, R> {
    inner: R,
    left: &'a Cell<usize>,
    /// The budget ran out.
    over: bool,
}

impl<R: io::Read> io::Read for Budgeted<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let want = out.len().min(self.left.get().saturating_add(1));
        let n = self.inner.read(&mut out[..want])?;
        if n > self.left.get() {
            self.over = true;
            return Err(io::Error::other("the line is too long"));
        }
        self.left.set(self.left.get() - n);
        Ok(n)
    }
}

/// What a line after the header holds, as far as reading checks it.
#[derive(Debug)]
enum Parsed {
    /// A second header (refused).
    Header,
    /// A live memory (its history checked, counted and dropped).
    Memory {
        entry: MemoryEntry,
        versions: u64,
    },
    /// A deleted memory's history (checked, counted and dropped).
    History {
        versions: u64,
    },
    Trailer(Trailer),
}

/// Reads one line object field by field, so that a history is checked and dropped version by
/// version (never held whole), and resets the byte budget after each version.
#[derive(Clone, Copy)]
struct LineSeed<'a> {
    budget: &'a Cell<usize>,
    /// A version whose content does not match its digest: the message (the error that stops
    /// the parse only carries it out).
    failed_check: &'a RefCell<Option<String>>,
}

const LINE_TYPES: &[&str] = &["header", "memory", "history", "trailer"];

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = Parsed;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Parsed, D::Error> {
        deserializer.deserialize_map(self)
    }
}

/// Sets a field seen once; a second time is an error, as serde's own derive has it.
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value);
    Ok(())
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an export line (a JSON object with a `type`)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut kind: Option<String> = None;
        let (mut path, mut content, mut sha, mut size) = (None, None, None, None);
        let (mut memory_id, mut created_at, mut updated_at): (Option<Option<MemoryId>>, _, _) = (None, None, None);
        let mut versions: Option<Versions> = None;
        let (mut memories, mut content_bytes, mut histories) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => once(&mut kind, map.next_value()?, "type")?,
                "path" => once(&mut path, map.next_value::<String>()?, "path")?,
                "content" => once(&mut content, map.next_value::<String>()?, "content")?,
                "content_sha256" => once(&mut sha, map.next_value::<String>()?, "content_sha256")?,
                "size" => once(&mut size, map.next_value::<u64>()?, "size")?,
                "memory_id" => once(&mut memory_id, map.next_value()?, "memory_id")?,
                "created_at" => once(&mut created_at, map.next_value::<Option<Timestamp>>()?, "created_at")?,
                "updated_at" => once(&mut updated_at, map.next_value::<Option<Timestamp>>()?, "updated_at")?,
                "versions" => once(&mut versions, map.next_value_seed(self.versions())?, "versions")?,
                "memories" => once(&mut memories, map.next_value::<u64>()?, "memories")?,
                "content_bytes" => once(&mut content_bytes, map.next_value::<u64>()?, "content_bytes")?,
                "histories" => once(&mut histories, map.next_value::<u64>()?, "histories")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        let list = |v: Option<Versions>, required: bool| match v {
            None if required => Err(de::Error::missing_field("versions")),
            None => Ok(None),
            Some(Versions::List(n)) => Ok(Some(n)),
            Some(Versions::Count(n)) => {
                Err(de::Error::invalid_type(de::Unexpected::Unsigned(n), &"a list of versions"))
            }
        };
        match kind.as_str() {
            "header" => Ok(Parsed::Header),
            "memory" => {
                let versions = list(versions, false)?;
                let entry = MemoryEntry {
                    path: path.ok_or_else(|| de::Error::missing_field("path"))?,
                    content: content.ok_or_else(|| de::Error::missing_field("content"))?,
                    content_sha256: sha.ok_or_else(|| de::Error::missing_field("content_sha256"))?,
                    size: size.ok_or_else(|| de::Error::missing_field("size"))?,
                    memory_id: memory_id.flatten(),
                    created_at: created_at.flatten(),
                    updated_at: updated_at.flatten(),
                    versions: None,
                };
                Ok(Parsed::Memory { entry, versions: versions.unwrap_or(0) })
            }
            "history" => {
                memory_id.flatten().ok_or_else(|| de::Error::missing_field("memory_id"))?;
                Ok(Parsed::History { versions: list(versions, true)?.unwrap_or(0) })
            }
            "trailer" => {
                let versions = match versions {
                    Some(Versions::Count(n)) => n,
                    Some(Versions::List(_)) => {
                        return Err(de::Error::invalid_type(de::Unexpected::Seq, &"a count of versions"));
                    }
                    None => return Err(de::Error::missing_field("versions")),
                };
                Ok(Parsed::Trailer(Trailer {
                    memories: memories.ok_or_else(|| de::Error::missing_field("memories"))?,
                    content_bytes: content_bytes.ok_or_else(|| de::Error::missing_field("content_bytes"))?,
                    histories: histories.ok_or_else(|| de::Error::missing_field("histories"))?,
                    versions,
                }))
            }
            other => Err(de::Error::unknown_variant(other, LINE_TYPES)),
        }
    }
}

impl<'a> LineSeed<'a> {
    fn versions(self) -> VersionsSeed<'a> {
        VersionsSeed { line: self }
    }
}

/// A `versions` field: a memory's or a deleted memory's history (how many versions it held,
/// each checked), or the trailer's count.
enum Versions {
    List(u64),
    Count(u64),
}

#[derive(Clone, Copy)]
struct VersionsSeed<'a> {
    line: LineSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for VersionsSeed<'_> {
    type Value = Versions;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Versions, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for VersionsSeed<'_> {
    type Value = Versions;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of versions, or a count")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Versions, E> {
        Ok(Versions::Count(n))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Versions, A::Error> {
        let mut n = 0;
        while let Some(version) = seq.next_element::<VersionEntry>()? {
            if let Err(why) = check_version(&version) {
                *self.line.failed_check.borrow_mut() = Some(why);
                return Err(de::Error::custom("a version failed its check"));
            }
            n += 1;
            // Each version is a unit of its own: the next one has the whole budget.
            self.line.budget.set(MAX_LINE_BYTES);
        }
        Ok(Versions::List(n))
    }
}

/// The first line, checked for the format and its version before it is read in full, so an
/// unknown file or a newer version is named as such rather than as a missing field.
fn read_header(text: &[u8], line: usize) -> Result<Header, FileError> {
    let value: Value = serde_json::from_slice(text)
        .map_err(|_| FileError::NotAnExport("its first line is not a JSON object".into()))?;
    if value.get("type").and_then(Value::as_str) != Some("header")
        || value.get("format").and_then(Value::as_str) != Some(FORMAT)
    {
        return Err(FileError::NotAnExport(format!(
            "its first line is not a header of format `{FORMAT}` (as `mnemo store export` writes)"
        )));
    }
    match value.get("format_version").and_then(Value::as_u64) {
        Some(v) if v == u64::from(FORMAT_VERSION) => {}
        Some(v) if v > u64::from(FORMAT_VERSION) => return Err(FileError::NewerVersion { found: v }),
        _ => {
            return Err(FileError::Line { line, why: format!("the header's format_version must be {FORMAT_VERSION}") });
        }
    }
    match serde_json::from_value(value) {
        Ok(Line::Header(header)) => Ok(header),
        Ok(_) => unreachable!("the type was checked"),
        Err(e) => Err(FileError::Line { line, why: format!("the header is incomplete: {e}") }),
    }
}

/// What is wrong with a line that is not a valid line object, in words that point at a cut.
fn json_error(e: &serde_json::Error, terminated: bool) -> String {
    if e.is_eof() || !terminated {
        format!("is cut short ({e}): the file is truncated or damaged")
    } else {
        format!("is not a valid export line: {e}")
    }
}

/// A memory line's path, size and digest agree with its content, and the API would take it.
pub fn check_memory(entry: &MemoryEntry) -> Result<(), String> {
    MemoryPath::parse_request(&entry.path)?;
    let path = &entry.path;
    let bytes = entry.content.len();
    if entry.size != bytes as u64 {
        return Err(format!("memory `{path}`: size says {} bytes, but the content is {bytes} bytes", entry.size));
    }
    if bytes > MAX_CONTENT_BYTES {
        return Err(format!("memory `{path}`: {}", content_too_large_message(bytes)));
    }
    let actual = content_sha256(entry.content.as_bytes());
    if !is_sha256_hex(&entry.content_sha256) || entry.content_sha256 != actual {
        return Err(format!(
            "memory `{path}`: content_sha256 is {}, but the content hashes to {actual}: the content was altered or damaged",
            entry.content_sha256
        ));
    }
    Ok(())
}

/// A version's content, where the file holds it, agrees with its digest and size.
fn check_version(v: &VersionEntry) -> Result<(), String> {
    let Some(content) = &v.content else { return Ok(()) };
    let actual = content_sha256(content.as_bytes());
    if v.content_sha256.as_deref() != Some(actual.as_str()) || v.size != Some(content.len() as u64) {
        return Err(format!(
            "version `{}`: its content does not match its content_sha256 and size: the file was altered or damaged",
            v.id
        ));
    }
    Ok(())
}

/// No memory of the file lies below another (a store cannot hold `/a` and `/a/b`).
fn check_overlaps(memories: &[MemoryIndex]) -> Result<(), FileError> {
    let lines: HashMap<&str, usize> = memories.iter().map(|m| (m.path.as_str(), m.line)).collect();
    for entry in memories {
        let path = MemoryPath::parse(&entry.path).expect("checked on its line");
        if let Some((above, at)) = Overlap::of(&path).above().find_map(|a| lines.get(a).map(|at| (a, at))) {
            return Err(FileError::Line {
                line: entry.line,
                why: format!(
                    "path `{}` lies below the memory `{above}` (line {at}); a store cannot hold both",
                    entry.path
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            mnemo_version: "0.1.0 (git test)".into(),
            exported_at: "2026-12-01T10:00:00Z".parse().unwrap(),
            source: Source {
                base_url: "http://127.0.0.1:8080".into(),
                memory_store_id: "memstore_0357RbCaZGDhQDl3zapm8E".parse().unwrap(),
            },
            store: StoreFields {
                name: "Prefs".into(),
                description: "d".into(),
                metadata: BTreeMap::from([("k".into(), "v".into())]),
                created_at: "2026-11-01T10:00:00Z".parse().unwrap(),
                archived_at: None,
                version_retention: None,
            },
            versions: false,
        }
    }

    fn memory(path: &str, content: &str) -> MemoryEntry {
        MemoryEntry {
            path: path.into(),
            content: content.into(),
            content_sha256: content_sha256(content.as_bytes()),
            size: content.len() as u64,
            memory_id: None,
            created_at: None,
            updated_at: None,
            versions: None,
        }
    }

    /// The lines of a file holding `memories`, its trailer counted.
    fn lines(memories: &[MemoryEntry]) -> Vec<String> {
        let mut out = vec![serde_json::to_string(&Line::Header(header())).unwrap()];
        let mut trailer = Trailer::default();
        for m in memories {
            trailer.count_memory(m);
            out.push(serde_json::to_string(&Line::Memory(m.clone())).unwrap());
        }
        out.push(serde_json::to_string(&Line::Trailer(trailer)).unwrap());
        out
    }

    fn read(lines: &[String]) -> Result<ExportFile, FileError> {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        ExportFile::read(text.as_bytes())
    }

    fn refusal(lines: &[String]) -> String {
        read(lines).expect_err("the file must be refused").to_string()
    }

    #[test]
    fn a_whole_file_reads_back_exactly() {
        let ms = [memory("/a/b.md", "x\n"), memory("/empty", ""), memory("/ünï/cödé.md", "é ∑ 🦀\u{2028}\0")];
        let file = read(&lines(&ms)).unwrap();
        assert_eq!(file.header, header());
        let index: Vec<MemoryIndex> = ms
            .iter()
            .enumerate()
            .map(|(i, m)| MemoryIndex {
                path: m.path.clone(),
                content_sha256: m.content_sha256.clone(),
                size: m.size,
                line: i + 2,
            })
            .collect();
        assert_eq!(*file.memories, *index, "no content kept");
        // The second reading gives each memory back whole.
        let text: String = lines(&ms).iter().map(|l| format!("{l}\n")).collect();
        let again: Vec<MemoryEntry> = file.contents(text.as_bytes()).map(Result::unwrap).collect();
        assert_eq!(again, ms);
        let bytes = ms.iter().map(|m| m.content.len() as u64).sum();
        assert_eq!(file.trailer, Trailer { memories: 3, content_bytes: bytes, histories: 0, versions: 0 });
        // The last line may lack its newline.
        let text = lines(&ms).join("\n");
        assert_eq!(ExportFile::read(text.as_bytes()).unwrap().memories.len(), 3);
    }

    #[test]
    fn histories_are_checked_counted_and_dropped() {
        let version = |content: Option<&str>| VersionEntry {
            id: MemoryVersionId::generate(),
            operation: if content.is_some() { Operation::Created } else { Operation::Deleted },
            path: Some("/gone".into()),
            content: content.map(str::to_owned),
            content_sha256: content.map(|c| content_sha256(c.as_bytes())),
            size: content.map(|c| c.len() as u64),
            created_at: "2026-12-01T10:00:00Z".parse().unwrap(),
            created_by: None,
            redacted_at: None,
            redacted_by: None,
        };
        let mut m = memory("/a", "x");
        m.versions = Some(vec![version(Some("x"))]);
        let history = History { memory_id: MemoryId::generate(), versions: vec![version(Some("old")), version(None)] };
        let mut l = lines(&[m]);
        l.insert(2, serde_json::to_string(&Line::History(history.clone())).unwrap());
        l[3] =
            serde_json::to_string(&Line::Trailer(Trailer { memories: 1, content_bytes: 1, histories: 1, versions: 3 }))
                .unwrap();
        let file = read(&l).unwrap();
        assert_eq!(file.trailer.versions, 3);
        let text: String = l.iter().map(|l| format!("{l}\n")).collect();
        let again: Vec<MemoryEntry> = file.contents(text.as_bytes()).map(Result::unwrap).collect();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].versions, None, "an import does not keep them");

        let mut damaged = history;
        damaged.versions[0].content = Some("tampered".into());
        l[2] = serde_json::to_string(&Line::History(damaged)).unwrap();
        assert!(refusal(&l).contains("line 3: version"), "{}", refusal(&l));
    }

    #[test]
    fn a_file_cut_short_is_refused() {
        let l = lines(&[memory("/a", "x"), memory("/b", "y")]);
        // Cut at a line boundary: no trailer.
        assert!(refusal(&l[..2]).contains("without its trailer line: it is truncated"), "{}", refusal(&l[..2]));
        // Cut inside a line.
        let text = l.join("\n");
        let cut = &text[..text.len() - 10];
        let e = ExportFile::read(cut.as_bytes()).unwrap_err().to_string();
        assert!(e.starts_with("line 4: is cut short"), "{e}");
        // A line dropped from the middle: the counts tell.
        let dropped = [l[0].clone(), l[2].clone(), l[3].clone()];
        assert!(refusal(&dropped).contains("holds 2 memories, but it holds 1"), "{}", refusal(&dropped));
        // Lines after the trailer.
        let mut after = l.clone();
        after.push(l[1].clone());
        assert!(refusal(&after).contains("comes after the trailer"));
        assert!(matches!(ExportFile::read(&b""[..]), Err(FileError::Empty)));
    }

    #[test]
    fn unknown_formats_and_newer_versions_are_named() {
        let mut l = lines(&[memory("/a", "x")]);
        assert!(refusal(&["{\"hello\": 1}".into()]).contains("not a mnemo memory store export"));
        assert!(refusal(&["not json".into()]).contains("not a mnemo memory store export"));
        l[0] = l[0].replace("\"format_version\":1", "\"format_version\":2");
        assert!(refusal(&l).contains("format version 2, newer than this mnemo reads (version 1)"), "{}", refusal(&l));
        l[0] = l[0].replace("\"format_version\":2", "\"format_version\":0");
        assert!(refusal(&l).contains("format_version must be 1"));
        let mut l = lines(&[memory("/a", "x")]);
        l[1] = l[1].replace("\"type\":\"memory\"", "\"type\":\"blob\"");
        assert!(
            refusal(&l).starts_with("line 2: is not a valid export line: unknown variant `blob`"),
            "{}",
            refusal(&l)
        );
    }

    #[test]
    fn damaged_or_unacceptable_memories_are_refused_with_their_line() {
        type Damage = fn(&mut MemoryEntry);
        let cases: [(&str, Damage); 6] = [
            ("content was altered", |m| {
                m.content.push('!');
                m.size += 1;
            }),
            ("size says 99 bytes", |m| m.size = 99),
            ("invalid path `a/b`", |m| m.path = "a/b".into()),
            ("invalid path `/a/../b`", |m| m.path = "/a/../b".into()),
            ("invalid path `/a\\0`: path contains the character U+0000", |m| m.path = "/a\0".into()),
            ("a memory holds at most 102400 bytes", |m| {
                m.content = "x".repeat(MAX_CONTENT_BYTES + 1);
                m.size = m.content.len() as u64;
                m.content_sha256 = content_sha256(m.content.as_bytes());
            }),
        ];
        for (expected, damage) in cases {
            let mut m = memory("/ok", "fine");
            damage(&mut m);
            let e = refusal(&lines(&[memory("/first", ""), m]));
            assert!(e.starts_with("line 3: ") && e.contains(expected), "{expected}: {e}");
        }
        let mut at_limit = memory("/big", "");
        at_limit.content = "é".repeat(MAX_CONTENT_BYTES / 2);
        at_limit.size = MAX_CONTENT_BYTES as u64;
        at_limit.content_sha256 = content_sha256(at_limit.content.as_bytes());
        assert!(read(&lines(&[at_limit])).is_ok(), "exactly the limit is fine");
    }

    #[test]
    fn paths_twice_or_overlapping_are_refused() {
        let e = refusal(&lines(&[memory("/a", "x"), memory("/b", "y"), memory("/a", "x")]));
        assert_eq!(e, "line 4: path `/a` appears twice (first on line 2)");
        let e = refusal(&lines(&[memory("/a/b/c", "x"), memory("/a", "y")]));
        assert_eq!(e, "line 2: path `/a/b/c` lies below the memory `/a` (line 3); a store cannot hold both");
        assert!(read(&lines(&[memory("/a", "x"), memory("/a.md", "y"), memory("/ab/c", "z")])).is_ok());
    }

    /// A memory whose content is `n` control characters (each escaped as `\u00XX`: the JSON
    /// line's worst case).
    fn escaped_memory(path: &str, n: usize) -> MemoryEntry {
        memory(path, &"\u{1}".repeat(n))
    }

    fn text_of(lines: &[String]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn the_largest_legal_memory_line_is_taken_and_longer_lines_are_refused() {
        let mut biggest = escaped_memory("/big", MAX_CONTENT_BYTES);
        biggest.path = format!("/{}", "p".repeat(MAX_PATH_BYTES - 1));
        let l = lines(&[biggest.clone()]);
        assert!(l[1].len() > 6 * MAX_CONTENT_BYTES && l[1].len() <= LARGEST_MEMORY_LINE, "{}", l[1].len());
        let file = read(&l).unwrap();
        assert_eq!(file.memories[0].size, MAX_CONTENT_BYTES as u64);
        assert_eq!(file.contents(text_of(&l).as_bytes()).next().unwrap().unwrap(), biggest);

        // A memory line past the cap (a content too big to be legal): refused on its line, by
        // its length, before its content is read whole.
        let mut l = lines(&[memory("/a", "x"), memory("/b", "y")]);
        let hostile = format!(
            "{{\"type\":\"memory\",\"path\":\"/huge\",\"content\":\"{}\",\"content_sha256\":\"00\",\"size\":1}}",
            "z".repeat(MAX_LINE_BYTES + 10)
        );
        l.insert(2, hostile);
        let e = read(&l).unwrap_err();
        assert!(matches!(e, FileError::LineTooLong { line: 3, cap: MAX_LINE_BYTES }), "{e:?}");
        let shown = e.to_string();
        assert!(shown.starts_with("line 3 is too long: more than 1048576 bytes"), "{shown}");
        // Whatever holds the bytes: an unknown field, a string with no line end at all.
        for hostile in [
            format!("{{\"type\":\"memory\",\"junk\":[{}1]}}", "1,".repeat(MAX_LINE_BYTES)),
            format!("{{\"type\":\"memory\",\"versions\":[],\"content\":\"{}", "w".repeat(3 * MAX_LINE_BYTES)),
        ] {
            let text = format!("{}\n{hostile}", lines(&[])[0]);
            let e = ExportFile::read(text.as_bytes()).unwrap_err();
            assert!(matches!(e, FileError::LineTooLong { line: 2, .. }), "{e:?}");
        }
        // A header past the cap.
        let text = format!("{{\"type\":\"header\",\"x\":\"{}\"}}\n", "h".repeat(MAX_LINE_BYTES));
        assert!(matches!(ExportFile::read(text.as_bytes()), Err(FileError::NotAnExport(_))));
    }

    /// A history longer than the cap is legal: read version by version (each checked and
    /// dropped), in a memory line and in a history line alike; a damaged version deep in it is
    /// still found.
    #[test]
    fn a_long_history_is_read_version_by_version() {
        let version = |content: &str| VersionEntry {
            id: MemoryVersionId::generate(),
            operation: Operation::Modified,
            path: Some("/long".into()),
            content: Some(content.into()),
            content_sha256: Some(content_sha256(content.as_bytes())),
            size: Some(content.len() as u64),
            created_at: "2026-12-01T10:00:00Z".parse().unwrap(),
            created_by: None,
            redacted_at: None,
            redacted_by: None,
        };
        let big = "\u{2}".repeat(MAX_CONTENT_BYTES);
        let mut m = escaped_memory("/long", 10);
        m.versions = Some((0..12).map(|_| version(&big)).collect());
        let history = History { memory_id: MemoryId::generate(), versions: (0..12).map(|_| version(&big)).collect() };
        let mut l = lines(&[m.clone()]);
        l.insert(2, serde_json::to_string(&Line::History(history.clone())).unwrap());
        let trailer = Trailer { memories: 1, content_bytes: 10, histories: 1, versions: 24 };
        l[3] = serde_json::to_string(&Line::Trailer(trailer)).unwrap();
        assert!(l[1].len() > 7 * MAX_LINE_BYTES && l[2].len() > 7 * MAX_LINE_BYTES);
        let file = read(&l).unwrap();
        assert_eq!(file.trailer, trailer);
        let again: Vec<MemoryEntry> = file.contents(text_of(&l).as_bytes()).map(Result::unwrap).collect();
        assert_eq!(again, [MemoryEntry { versions: None, ..m.clone() }]);

        let whole = l[1].clone();
        let mut damaged = m;
        damaged.versions.as_mut().unwrap()[9].content = Some("\u{2}".repeat(MAX_CONTENT_BYTES - 1) + "!");
        l[1] = serde_json::to_string(&Line::Memory(damaged)).unwrap();
        let e = read(&l).unwrap_err().to_string();
        assert!(e.starts_with("line 2: version `") && e.contains("does not match its content_sha256"), "{e}");
        // Many small versions within one unit's budget each, but a single version past it: refused.
        let mut huge = history;
        huge.versions[5].content = Some("\u{3}".repeat(MAX_LINE_BYTES));
        l[1] = whole;
        l[2] = serde_json::to_string(&Line::History(huge)).unwrap();
        let e = read(&l).unwrap_err();
        assert!(matches!(e, FileError::LineTooLong { line: 3, .. }), "{e:?}");
    }

    #[test]
    fn a_file_that_changed_before_its_second_reading_is_refused() {
        let ms = [memory("/a", "one"), memory("/b", "two"), memory("/c", "three")];
        let l = lines(&ms);
        let file = read(&l).unwrap();
        let altered = {
            let mut l = l.clone();
            l[2] = serde_json::to_string(&Line::Memory(memory("/b", "TWO"))).unwrap();
            l
        };
        let dropped = [l[0].clone(), l[1].clone(), l[3].clone(), l[4].clone()];
        let moved = [l[0].clone(), l[2].clone(), l[1].clone(), l[3].clone(), l[4].clone()];
        let cut = l[..3].to_vec();
        for (what, changed, line) in
            [("altered", &altered[..], 3), ("dropped", &dropped, 3), ("moved", &moved, 2), ("cut", &cut, 4)]
        {
            let got: Vec<Result<MemoryEntry, FileError>> = file.contents(text_of(changed).as_bytes()).collect();
            let last = got.last().unwrap();
            assert!(matches!(last, Err(FileError::Changed { line: l }) if *l == line), "{what}: {got:?}");
            assert!(got[..got.len() - 1].iter().all(Result::is_ok), "{what}: nothing after the error");
        }
    }

    #[test]
    fn read_copying_copies_every_byte_it_read() {
        let l = lines(&[memory("/a", "one"), escaped_memory("/b", 5000)]);
        let text = text_of(&l);
        let mut copy = Vec::new();
        let file = ExportFile::read_copying(text.as_bytes(), &mut copy).unwrap();
        assert_eq!(copy, text.as_bytes());
        let again: Vec<MemoryEntry> = file.contents(&copy[..]).map(Result::unwrap).collect();
        assert_eq!(again.len(), 2);
        // A copy that cannot be written is named as such.
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("no space left"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        assert!(matches!(ExportFile::read_copying(text.as_bytes(), Full), Err(FileError::Copy(_))));
    }
}
