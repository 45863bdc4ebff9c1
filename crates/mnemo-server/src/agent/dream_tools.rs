//! A dream's tools, run inside the server against the store (spec `dreams-api.md` §10.4): no
//! worker, no filesystem, no `bash`. Three roots and nothing else:
//!
//! - `/mnt/memory/input/` — the input store as it was when the dream started (read-only);
//! - `/mnt/memory/output/` — the output store, live; the only place `write`, `edit`, `delete`
//!   and `move` reach, each an immediate memory version by the dream's session;
//! - `/mnt/dream/sessions/` — the input sessions' transcripts and their `_index.md` (read-only).
//!
//! A path outside them, with `..`, or malformed is a tool error the model can read. A write to
//! a memory that exists needs the `content_sha256` of the model's last read of it, so a change
//! by anyone else since is "changed since you read it; read it again", never overwritten.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use mnemo_api::{Access, Actor, Memory, MemoryPath, MemoryStoreId, SessionId, ToolUse, WorkspaceId};
use mnemo_store::{ExportPart, MemoryChange, Store, StoreError};
use serde_json::Value;
use tokio::sync::Mutex;

pub(crate) const INPUT_ROOT: &str = "/mnt/memory/input";
pub(crate) const OUTPUT_ROOT: &str = "/mnt/memory/output";
pub(crate) const SESSIONS_ROOT: &str = "/mnt/dream/sessions";

/// Most lines a `read` returns without a range, and most matches a `grep` lists.
const READ_LINES: usize = 2000;
const GREP_MATCHES: usize = 200;

/// Which root a path is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Root {
    Input,
    Output,
    Sessions,
}

impl Root {
    const ALL: [Root; 3] = [Root::Input, Root::Output, Root::Sessions];

    fn path(self) -> &'static str {
        match self {
            Root::Input => INPUT_ROOT,
            Root::Output => OUTPUT_ROOT,
            Root::Sessions => SESSIONS_ROOT,
        }
    }
}

/// A path the tools accept: its root and the part after it (`""` for the root itself, else
/// `/a/b.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) root: Root,
    pub(crate) rest: String,
}

impl Place {
    fn shown(&self) -> String {
        format!("{}{}", self.root.path(), self.rest)
    }
}

/// Confines a tool's path to the dream's roots.
pub(crate) fn place(raw: &str) -> Result<Place, String> {
    if !raw.starts_with('/') {
        return Err(format!("{raw}: paths must be absolute, under {INPUT_ROOT}, {OUTPUT_ROOT} or {SESSIONS_ROOT}"));
    }
    let trimmed = raw.trim_end_matches('/');
    if trimmed.split('/').skip(1).any(|s| s.is_empty() || s == "." || s == "..") && !trimmed.is_empty() {
        return Err(format!("{raw}: `.`, `..` and empty segments are not allowed"));
    }
    for root in Root::ALL {
        if let Some(rest) = trimmed.strip_prefix(root.path())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Ok(Place { root, rest: rest.to_owned() });
        }
    }
    Err(format!("{raw} is outside the dream's folders: read {INPUT_ROOT} and {SESSIONS_ROOT}, write {OUTPUT_ROOT}"))
}

/// A file as the tools see it: its text, and (for memories) its id and digest.
#[derive(Debug, Clone)]
struct File {
    content: String,
    memory: Option<(mnemo_api::MemoryId, String)>,
}

/// The output store as last read, refreshed when its listing position moves.
#[derive(Default)]
struct OutputView {
    seq: Option<i64>,
    files: BTreeMap<String, Memory>,
}

/// The tools of one dream.
pub(crate) struct DreamTools {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) ws: WorkspaceId,
    pub(crate) session: SessionId,
    pub(crate) output: MemoryStoreId,
    /// The input at the start: path → content.
    pub(crate) input: BTreeMap<String, String>,
    /// Transcript files: `/name.md` → text.
    pub(crate) transcripts: BTreeMap<String, String>,
    view: Mutex<OutputView>,
    /// The digest of each output memory as the model last read it (by memory path).
    read: Mutex<HashMap<String, String>>,
}

impl DreamTools {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        ws: WorkspaceId,
        session: SessionId,
        output: MemoryStoreId,
        input: BTreeMap<String, String>,
        transcripts: BTreeMap<String, String>,
    ) -> Self {
        Self { store, ws, session, output, input, transcripts, view: Mutex::default(), read: Mutex::default() }
    }

    fn actor(&self) -> Actor {
        Actor::SessionActor { session_id: self.session.clone() }
    }

    /// The output store's live memories, read again if anything changed since.
    async fn output_files(&self) -> Result<BTreeMap<String, Memory>, StoreError> {
        let seq = self.store.memory_change_seq(&self.ws, &self.output).await?;
        let mut view = self.view.lock().await;
        if view.seq != Some(seq) {
            let mut export = self.store.export_memories(&self.ws, &self.output, 500).await?;
            let mut files = BTreeMap::new();
            while let Some(part) = export.parts.recv().await {
                match part? {
                    ExportPart::Memories(memories) => {
                        for m in memories {
                            files.insert(m.path.clone(), m);
                        }
                    }
                    ExportPart::Done => break,
                }
            }
            *view = OutputView { seq: Some(export.seq), files };
        }
        Ok(view.files.clone())
    }

    /// Every file under `root`, `rest` → file.
    async fn files(&self, root: Root) -> Result<BTreeMap<String, File>, StoreError> {
        let plain = |m: &BTreeMap<String, String>| {
            m.iter().map(|(p, c)| (p.clone(), File { content: c.clone(), memory: None })).collect()
        };
        Ok(match root {
            Root::Input => plain(&self.input),
            Root::Sessions => plain(&self.transcripts),
            Root::Output => self
                .output_files()
                .await?
                .into_iter()
                .map(|(p, m)| {
                    let memory = Some((m.id.clone(), m.content_sha256.clone()));
                    (p, File { content: m.content.unwrap_or_default(), memory })
                })
                .collect(),
        })
    }

    /// Runs one call: the result's text and whether it is an error.
    pub(crate) async fn call(&self, call: &ToolUse) -> (String, bool) {
        let input = Value::Object(call.input.clone());
        let outcome = match call.name.as_str() {
            "read" => self.read(&input).await,
            "glob" => self.glob(&input).await,
            "grep" => self.grep(&input).await,
            "write" => self.write(&input).await,
            "edit" => self.edit(&input).await,
            "delete" => self.delete(&input).await,
            "move" => self.rename(&input).await,
            other => {
                Err(format!("{other}: no such tool here; a dream has read, glob, grep, write, edit, delete and move"))
            }
        };
        match outcome {
            Ok(text) => (text, false),
            Err(text) => (text, true),
        }
    }

    async fn read(&self, input: &Value) -> Result<String, String> {
        let place = place(text_field(input, "file_path")?)?;
        let files = self.files(place.root).await.map_err(|e| store_error(&e))?;
        let Some(file) = files.get(&place.rest) else {
            let prefix = format!("{}/", place.rest);
            let children: Vec<String> =
                files.keys().filter(|p| p.starts_with(&prefix)).map(|p| format!("{}{p}", place.root.path())).collect();
            if children.is_empty() {
                return Err(format!("{}: no such file", place.shown()));
            }
            return Ok(format!("{} is a directory holding:\n{}", place.shown(), children.join("\n")));
        };
        if let Some((_, sha)) = &file.memory {
            self.read.lock().await.insert(place.rest.clone(), sha.clone());
        }
        let lines: Vec<&str> = file.content.lines().collect();
        let (start, end) = range(input, lines.len())?;
        if lines.is_empty() {
            return Ok(format!("{} is empty", place.shown()));
        }
        let mut out = String::new();
        for (n, line) in lines.iter().enumerate().take(end).skip(start) {
            out.push_str(&format!("{:>6}\t{line}\n", n + 1));
        }
        if end < lines.len() {
            out.push_str(&format!("… {} more lines; read on with offset {}\n", lines.len() - end, end + 1));
        }
        Ok(out)
    }

    async fn glob(&self, input: &Value) -> Result<String, String> {
        let pattern = text_field(input, "pattern")?;
        let base = input.get("path").and_then(Value::as_str).unwrap_or("/mnt");
        let full = if pattern.starts_with('/') {
            pattern.to_owned()
        } else {
            format!("{}/{pattern}", base.trim_end_matches('/'))
        };
        let matcher = globset::GlobBuilder::new(&full)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{pattern}: not a glob pattern ({e})"))?
            .compile_matcher();
        let mut found = Vec::new();
        for root in Root::ALL {
            for path in self.files(root).await.map_err(|e| store_error(&e))?.keys() {
                let shown = format!("{}{path}", root.path());
                if matcher.is_match(&shown) {
                    found.push(shown);
                }
            }
        }
        Ok(if found.is_empty() { "No files found".into() } else { found.join("\n") })
    }

    async fn grep(&self, input: &Value) -> Result<String, String> {
        let pattern = text_field(input, "pattern")?;
        let insensitive = input.get("-i").and_then(Value::as_bool).unwrap_or(false);
        let regex = grep_regex::RegexMatcherBuilder::new()
            .case_insensitive(insensitive)
            .size_limit(1 << 20)
            .build(pattern)
            .map_err(|e| format!("{pattern}: not a regular expression ({e})"))?;
        let scope = match input.get("path").and_then(Value::as_str) {
            Some(p) => Some(place(p)?),
            None => None,
        };
        let mut out = Vec::new();
        let mut more = 0;
        for root in Root::ALL {
            if scope.as_ref().is_some_and(|s| s.root != root) {
                continue;
            }
            for (path, file) in self.files(root).await.map_err(|e| store_error(&e))? {
                if let Some(s) = &scope
                    && !(path == s.rest || path.starts_with(&format!("{}/", s.rest)) || s.rest.is_empty())
                {
                    continue;
                }
                for (n, line) in file.content.lines().enumerate() {
                    if grep_matcher::Matcher::is_match(&regex, line.as_bytes()).unwrap_or(false) {
                        if out.len() < GREP_MATCHES {
                            out.push(format!("{}{path}:{}:{line}", root.path(), n + 1));
                        } else {
                            more += 1;
                        }
                    }
                }
            }
        }
        if out.is_empty() {
            return Ok("No matches found".into());
        }
        if more > 0 {
            out.push(format!("… {more} more matches; narrow the pattern or the path"));
        }
        Ok(out.join("\n"))
    }

    /// The output memory at `place`, checked writable: the memory path, and the memory if one
    /// is there now.
    async fn writable(&self, place: &Place, tool: &str) -> Result<(MemoryPath, Option<Memory>), String> {
        if place.root != Root::Output {
            return Err(format!(
                "{tool}: {} is inside read-only directory {}; write under {OUTPUT_ROOT}",
                place.shown(),
                place.root.path()
            ));
        }
        // The store's word too: a store attached read-only takes no write from this session.
        let access = self
            .store
            .session_store_access(&self.ws, &self.session, &self.output)
            .await
            .map_err(|e| store_error(&e))?;
        if access == Some(Access::ReadOnly) {
            return Err(format!("{tool}: the output store is attached read-only"));
        }
        let path = MemoryPath::parse(&place.rest).map_err(|e| format!("{tool}: {}: {e}", place.shown()))?;
        let current = self.output_files().await.map_err(|e| store_error(&e))?.remove(&place.rest);
        Ok((path, current))
    }

    /// The read precondition of a change to `memory`: its digest as the model last read it.
    async fn read_sha(&self, place: &Place, memory: &Memory, tool: &str) -> Result<String, String> {
        match self.read.lock().await.get(&place.rest) {
            Some(sha) if *sha == memory.content_sha256 => Ok(sha.clone()),
            Some(_) => Err(format!("{tool}: {} changed since you read it; read it again", place.shown())),
            None => Err(format!("{tool}: read {} before you change it", place.shown())),
        }
    }

    async fn remember(&self, place: &Place, memory: &Memory) {
        self.read.lock().await.insert(place.rest.clone(), memory.content_sha256.clone());
    }

    async fn write(&self, input: &Value) -> Result<String, String> {
        let place = place(text_field(input, "file_path")?)?;
        let content = text_field(input, "content")?.to_owned();
        let (path, current) = self.writable(&place, "write").await?;
        let written = match current {
            Some(memory) => {
                let sha = self.read_sha(&place, &memory, "write").await?;
                let change = MemoryChange { content: Some(content), path: None, expected_sha256: Some(sha) };
                self.store.update_memory(&self.ws, &self.output, &memory.id, change, self.actor()).await
            }
            None => self.store.create_memory(&self.ws, &self.output, path, content, self.actor()).await,
        }
        .map_err(|e| write_error(&place, "write", e))?;
        self.remember(&place, &written).await;
        Ok(format!("Wrote {} ({} bytes)", place.shown(), written.content_size_bytes))
    }

    async fn edit(&self, input: &Value) -> Result<String, String> {
        let place = place(text_field(input, "file_path")?)?;
        let old = text_field(input, "old_string")?;
        let new = text_field(input, "new_string")?;
        let all = input.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
        let (_, current) = self.writable(&place, "edit").await?;
        let Some(memory) = current else { return Err(format!("edit: {}: no such file", place.shown())) };
        let sha = self.read_sha(&place, &memory, "edit").await?;
        let text = memory.content.clone().unwrap_or_default();
        let count = text.matches(old).count();
        if old.is_empty() || count == 0 {
            return Err(format!("edit: old_string was not found in {}", place.shown()));
        }
        if count > 1 && !all {
            return Err(format!(
                "edit: old_string occurs {count} times in {}; give more context or set replace_all",
                place.shown()
            ));
        }
        let content = if all { text.replace(old, new) } else { text.replacen(old, new, 1) };
        let change = MemoryChange { content: Some(content), path: None, expected_sha256: Some(sha) };
        let written = self
            .store
            .update_memory(&self.ws, &self.output, &memory.id, change, self.actor())
            .await
            .map_err(|e| write_error(&place, "edit", e))?;
        self.remember(&place, &written).await;
        Ok(format!("Edited {}", place.shown()))
    }

    async fn delete(&self, input: &Value) -> Result<String, String> {
        let place = place(text_field(input, "file_path")?)?;
        let (_, current) = self.writable(&place, "delete").await?;
        let Some(memory) = current else { return Err(format!("delete: {}: no such file", place.shown())) };
        let sha = self.read_sha(&place, &memory, "delete").await?;
        self.store
            .delete_memory(&self.ws, &self.output, &memory.id, Some(sha), self.actor())
            .await
            .map_err(|e| write_error(&place, "delete", e))?;
        self.read.lock().await.remove(&place.rest);
        Ok(format!("Deleted {}", place.shown()))
    }

    async fn rename(&self, input: &Value) -> Result<String, String> {
        let from = place(text_field(input, "file_path")?)?;
        let to = place(text_field(input, "new_path")?)?;
        let (_, current) = self.writable(&from, "move").await?;
        let (new_path, _) = self.writable(&to, "move").await?;
        let Some(memory) = current else { return Err(format!("move: {}: no such file", from.shown())) };
        let sha = self.read_sha(&from, &memory, "move").await?;
        let change = MemoryChange { content: None, path: Some(new_path), expected_sha256: Some(sha) };
        let written = self
            .store
            .update_memory(&self.ws, &self.output, &memory.id, change, self.actor())
            .await
            .map_err(|e| write_error(&from, "move", e))?;
        self.read.lock().await.remove(&from.rest);
        self.remember(&to, &written).await;
        Ok(format!("Moved {} to {}", from.shown(), to.shown()))
    }
}

fn text_field<'a>(input: &'a Value, key: &str) -> Result<&'a str, String> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| format!("`{key}` is required (a string)"))
}

/// The lines a `read` returns: `offset` (1-based) and `limit`, or `view_range` `[first, last]`.
fn range(input: &Value, lines: usize) -> Result<(usize, usize), String> {
    let number = |v: &Value| v.as_u64().map(|n| n as usize);
    if let Some(Value::Array(r)) = input.get("view_range") {
        let (Some(first), Some(last)) = (
            r.first().and_then(number),
            r.get(1).and_then(|v| if v.as_i64() == Some(-1) { Some(lines) } else { number(v) }),
        ) else {
            return Err("view_range is [first_line, last_line] (1-based; -1 for the end)".into());
        };
        let start = first.max(1) - 1;
        return Ok((start.min(lines), last.min(lines).max(start.min(lines))));
    }
    if input.get("view_range").is_some_and(|v| !v.is_null()) {
        return Err("view_range is [first_line, last_line] (1-based; -1 for the end)".into());
    }
    let start = input.get("offset").and_then(number).unwrap_or(1).max(1) - 1;
    let limit = input.get("limit").and_then(number).unwrap_or(READ_LINES);
    Ok((start.min(lines), start.saturating_add(limit).min(lines)))
}

/// A store refusal as words the model can act on; a failure of the database as a short note
/// (the details go to the log).
fn write_error(place: &Place, tool: &str, e: StoreError) -> String {
    match e {
        StoreError::PreconditionFailed { .. } => {
            format!("{tool}: {} changed since you read it; read it again", place.shown())
        }
        StoreError::PathConflict { conflicting_path, .. } => {
            format!("{tool}: {} collides with {OUTPUT_ROOT}{conflicting_path}", place.shown())
        }
        StoreError::NotFound { .. } => format!("{tool}: {}: no such file (deleted meanwhile?)", place.shown()),
        StoreError::Invalid(m) | StoreError::Archived(m) | StoreError::Conflict(m) | StoreError::Forbidden(m) => {
            format!("{tool}: {m}")
        }
        StoreError::StoreFull { limit, .. } => format!("{tool}: the output store holds its limit of {limit} memories"),
        other => store_error(&other),
    }
}

fn store_error(e: &StoreError) -> String {
    tracing::warn!(error = %e.chain(), "a dream's tool could not reach the store");
    "the memory store could not be reached; try again".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_roots() {
        let ok = |raw: &str, root: Root, rest: &str| {
            assert_eq!(place(raw), Ok(Place { root, rest: rest.into() }), "{raw}");
        };
        ok("/mnt/memory/output/a/b.md", Root::Output, "/a/b.md");
        ok("/mnt/memory/output", Root::Output, "");
        ok("/mnt/memory/output/", Root::Output, "");
        ok("/mnt/memory/input/x.md", Root::Input, "/x.md");
        ok("/mnt/dream/sessions/_index.md", Root::Sessions, "/_index.md");
        for bad in [
            "/mnt/memory/output/../input/x.md",
            "/mnt/memory/outputs/x.md",
            "/etc/passwd",
            "mnt/memory/output/x",
            "/mnt/memory/output//x",
            "/mnt/memory/output/./x",
            "/mnt/memory",
        ] {
            assert!(place(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_read_range_is_offset_and_limit_or_view_range() {
        let r = |v: Value| range(&v, 10);
        assert_eq!(r(serde_json::json!({})), Ok((0, 10)));
        assert_eq!(r(serde_json::json!({"offset": 3, "limit": 2})), Ok((2, 4)));
        assert_eq!(r(serde_json::json!({"view_range": [2, 4]})), Ok((1, 4)));
        assert_eq!(r(serde_json::json!({"view_range": [5, -1]})), Ok((4, 10)));
        assert_eq!(r(serde_json::json!({"offset": 50})), Ok((10, 10)));
        assert!(r(serde_json::json!({"view_range": "x"})).is_err());
    }
}
