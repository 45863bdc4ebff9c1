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

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead};

use mnemo_api::limits::MAX_CONTENT_BYTES;
use mnemo_api::{
    Actor, MemoryId, MemoryPath, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, Timestamp, content_sha256,
    content_too_large_message, is_sha256_hex,
};
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

/// Why a file cannot be imported. Nothing has been written when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read the file")]
    Io(#[source] io::Error),
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
        "the file ends after line {lines} without its trailer line: it is truncated (an interrupted export, or a partial copy)"
    )]
    Truncated { lines: usize },
    #[error(
        "the trailer says the file holds {said} {what}, but it holds {found}: lines are missing or were added (a damaged or edited file)"
    )]
    Counts { what: &'static str, said: u64, found: u64 },
}

/// A checked export: the header, every live memory (histories are counted, checked and
/// dropped: an import cannot replay them), the trailer.
#[derive(Debug, Clone)]
pub struct ExportFile {
    pub header: Header,
    /// In file order; no path twice, none overlapping another.
    pub memories: Vec<MemoryEntry>,
    pub trailer: Trailer,
}

impl ExportFile {
    /// Reads and checks a whole file. See the module documentation for what is checked.
    pub fn read(reader: impl BufRead) -> Result<Self, FileError> {
        let mut lines = Lines { reader, number: 0, text: String::new() };
        let Some(first) = lines.next()? else { return Err(FileError::Empty) };
        let header = read_header(&lines.text, first)?;
        let mut memories = Vec::new();
        let mut seen = HashMap::new();
        let mut counted = Trailer::default();
        let mut trailer = None;
        while let Some(line) = lines.next()? {
            let bad = |why: String| FileError::Line { line, why };
            if trailer.is_some() {
                return Err(bad("comes after the trailer line, which must be the last".into()));
            }
            let text = &lines.text;
            if text.trim().is_empty() {
                return Err(bad("is empty".into()));
            }
            let parsed: Line = serde_json::from_str(text).map_err(|e| bad(json_error(&e, text)))?;
            match parsed {
                Line::Header(_) => return Err(bad("is a second header".into())),
                Line::Memory(mut entry) => {
                    check_memory(&entry).map_err(bad)?;
                    if let Some(versions) = &entry.versions {
                        versions.iter().try_for_each(check_version).map_err(bad)?;
                    }
                    if let Some(first) = seen.insert(entry.path.clone(), line) {
                        return Err(bad(format!("path `{}` appears twice (first on line {first})", entry.path)));
                    }
                    counted.count_memory(&entry);
                    entry.versions = None;
                    memories.push(entry);
                }
                Line::History(history) => {
                    history.versions.iter().try_for_each(check_version).map_err(bad)?;
                    counted.count_history(&history);
                }
                Line::Trailer(t) => trailer = Some(t),
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
        check_overlaps(&memories, &seen)?;
        Ok(Self { header, memories, trailer })
    }
}

/// The file line by line, counting them.
struct Lines<R> {
    reader: R,
    number: usize,
    /// The current line, with its newline.
    text: String,
}

impl<R: BufRead> Lines<R> {
    /// Reads the next line into `text`: its number, or `None` at the end.
    fn next(&mut self) -> Result<Option<usize>, FileError> {
        self.text.clear();
        let n = self.reader.read_line(&mut self.text).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => FileError::Line { line: self.number + 1, why: "is not UTF-8 text".into() },
            _ => FileError::Io(e),
        })?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        Ok(Some(self.number))
    }
}

/// The first line, checked for the format and its version before it is read in full, so an
/// unknown file or a newer version is named as such rather than as a missing field.
fn read_header(text: &str, line: usize) -> Result<Header, FileError> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| FileError::NotAnExport("its first line is not a JSON object".into()))?;
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
fn json_error(e: &serde_json::Error, text: &str) -> String {
    if e.is_eof() || !text.ends_with('\n') {
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
fn check_overlaps(memories: &[MemoryEntry], lines: &HashMap<String, usize>) -> Result<(), FileError> {
    for entry in memories {
        let path = MemoryPath::parse(&entry.path).expect("checked on its line");
        if let Some((above, at)) = path.ancestors().find_map(|a| lines.get(a).map(|at| (a, at))) {
            return Err(FileError::Line {
                line: lines[&entry.path],
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
        assert_eq!(file.memories, ms);
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
        assert_eq!(file.memories[0].versions, None, "an import does not keep them");
        assert_eq!(file.trailer.versions, 3);

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
}
