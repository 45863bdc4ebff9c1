//! The durable journal: what a mount must remember to survive a kill -9.
//!
//! After every download, sync and flush the engine writes its state — the baseline, the
//! unsettled sends, the refusals and the pending deletes — to a file *next to* the folder (never
//! inside it, where the agent could edit it and where it would be synced) with
//! [`crate::fs::atomic_write`]'s sequence: temp file, fsync, rename, fsync of the parent. `mnemo mount --resume` reads it back, so edits made while the
//! mount was down are uploaded and nothing is re-downloaded over them. A folder without a
//! journal naming the same store and folder is still refused.
//!
//! A journal is trusted only whole: it carries a SHA-256 of its own content, and one that is
//! damaged (a flipped bit, a cut), too large, has a field this version does not know, names a
//! path outside the folder or holds a digest that is no SHA-256 is refused with the reason,
//! rather than read in part. (Journals of versions that wrote no checksum are still read.)

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::State;
use crate::fs::{Digest, Durability, RelPath, atomic_write_with};

const FORMAT: u32 = 1;

/// The largest journal read: far above what the largest store's state takes (every path of a
/// store at its cap, in each of the four maps), small enough that a hostile file cannot make a
/// resume allocate without bound.
pub const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// Why a journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("no journal at {0}")]
    Missing(PathBuf),
    #[error("cannot read the journal {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("the journal {path} belongs to {other}, not to this store and folder")]
    Foreign { path: PathBuf, other: String },
    #[error("cannot write the journal {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    format: u32,
    memory_store_id: String,
    /// The folder, as UTF-8 (a folder whose path is not UTF-8 keeps no journal).
    root: String,
    baseline: BTreeMap<String, String>,
    unsettled: BTreeMap<String, String>,
    refused: BTreeMap<String, String>,
    /// Path → milliseconds since the Unix epoch when it was first seen missing.
    pending_deletes: BTreeMap<String, u64>,
    /// SHA-256 (hex) of the journal as written without this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checksum: Option<String>,
}

impl OnDisk {
    /// The digest of everything but the checksum itself.
    fn digest(&self) -> String {
        let bare = OnDiskRef { checksum: None, ..self.as_ref() };
        hex::encode(Sha256::digest(serde_json::to_vec(&bare).expect("the journal serialises")))
    }

    fn as_ref(&self) -> OnDiskRef<'_> {
        OnDiskRef {
            format: self.format,
            memory_store_id: &self.memory_store_id,
            root: &self.root,
            baseline: &self.baseline,
            unsettled: &self.unsettled,
            refused: &self.refused,
            pending_deletes: &self.pending_deletes,
            checksum: self.checksum.as_deref(),
        }
    }
}

/// [`OnDisk`] borrowed, serialised field for field alike.
#[derive(Serialize)]
struct OnDiskRef<'a> {
    format: u32,
    memory_store_id: &'a str,
    root: &'a str,
    baseline: &'a BTreeMap<String, String>,
    unsettled: &'a BTreeMap<String, String>,
    refused: &'a BTreeMap<String, String>,
    pending_deletes: &'a BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum: Option<&'a str>,
}

/// Where the journal of the folder `root` lives: `.<folder name>.mnemo-journal` beside it.
pub fn journal_path(root: &Path) -> PathBuf {
    let name = root.file_name().map_or_else(|| "root".into(), |n| n.to_string_lossy().into_owned());
    root.with_file_name(format!(".{name}.mnemo-journal"))
}

/// The paths and digests of one map, or why the journal cannot be trusted.
fn rel_map<C: FromIterator<(RelPath, Digest)>>(what: &str, map: BTreeMap<String, String>) -> Result<C, String> {
    map.into_iter()
        .map(|(k, v)| {
            let rel = RelPath::parse(&k).map_err(|e| format!("its {what} names a path outside the folder ({e})"))?;
            // The journal writes lowercase hex only: anything else is not ours.
            let digest = v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')).then(|| Digest::parse_hex(&v));
            let digest =
                digest.flatten().ok_or_else(|| format!("its {what} holds a digest that is not a SHA-256 for `{k}`"))?;
            Ok((rel, digest))
        })
        .collect()
}

/// Writes journal bytes made by [`encode`] with [`atomic_write_with`] (temp file, rename, fsync
/// of the parent; [`Durability::Durable`] also fsyncs the temp file): `before_rename` runs once
/// the temp file is written (with [`Durability::FlushedByCaller`], the caller flushes it there)
/// and may call the write off (`Ok(false)`).
pub(crate) fn write_encoded(
    root: &Path,
    bytes: &[u8],
    durability: Durability,
    before_rename: impl FnOnce() -> bool,
) -> Result<bool, JournalError> {
    let path = journal_path(root);
    atomic_write_with(&path, bytes, durability, before_rename).map_err(|source| JournalError::Write { path, source })
}

/// One map of the journal, borrowed from the state and in key order, as [`OnDisk`]'s
/// `BTreeMap<String, _>` serialises it.
struct Entries<'a, V>(Vec<(&'a str, V)>);

impl<'a, V> Entries<'a, V> {
    fn sorted(entries: impl Iterator<Item = (&'a RelPath, V)>) -> Self {
        let mut entries: Vec<(&str, V)> = entries.map(|(k, v)| (k.as_str(), v)).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Self(entries)
    }
}

impl<V: Serialize> Serialize for Entries<'_, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// [`OnDisk`] without its checksum, borrowed from the state: serialised field for field alike,
/// so the bytes are those [`OnDisk::digest`] hashes when the journal is read back.
#[derive(Serialize)]
struct Bare<'a> {
    format: u32,
    memory_store_id: &'a str,
    root: &'a str,
    baseline: Entries<'a, Digest>,
    unsettled: Entries<'a, Digest>,
    refused: Entries<'a, Digest>,
    pending_deletes: Entries<'a, u64>,
}

/// The journal's bytes for `state`, checksum included. Serialised once, straight from the
/// state (it used to copy every path and digest into strings, then serialise twice: once for
/// the checksum and once for the file): the checksum is appended as the last field.
pub(crate) fn encode(root: &Path, store_id: &str, state: &State) -> Result<Vec<u8>, JournalError> {
    let now_wall = SystemTime::now();
    let now = Instant::now();
    let root_text = root.to_str().ok_or_else(|| JournalError::Write {
        path: journal_path(root),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the folder's path is not UTF-8, so it keeps no journal",
        ),
    })?;
    let bare = Bare {
        format: FORMAT,
        memory_store_id: store_id,
        root: root_text,
        baseline: Entries(state.baseline.iter().map(|(k, v)| (k.as_str(), *v)).collect()),
        unsettled: Entries::sorted(state.unsettled.iter().map(|(k, v)| (k, *v))),
        refused: Entries::sorted(state.refused.iter().map(|(k, v)| (k, *v))),
        pending_deletes: Entries::sorted(state.pending_deletes.iter().map(|(k, since)| {
            let wall = now_wall - now.saturating_duration_since(*since);
            (k, wall.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64)
        })),
    };
    let mut bytes = serde_json::to_vec(&bare).expect("the journal serialises");
    let checksum = hex::encode(Sha256::digest(&bytes));
    debug_assert_eq!(bytes.last(), Some(&b'}'));
    bytes.pop();
    bytes.extend_from_slice(format!(r#","checksum":"{checksum}"}}"#).as_bytes());
    Ok(bytes)
}

/// Reads the state of `root` back, if the journal names this store and folder and is whole.
pub(crate) fn load(root: &Path, store_id: &str) -> Result<State, JournalError> {
    let path = journal_path(root);
    let bytes = match read_bounded(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(JournalError::Missing(path));
        }
        Err(e) => {
            return Err(JournalError::Unreadable { path, reason: e.to_string() });
        }
    };
    decode(&bytes, root, store_id).map_err(|e| match e {
        Refusal::Foreign(other) => JournalError::Foreign { path, other },
        Refusal::Damaged(reason) => JournalError::Unreadable { path, reason },
    })
}

/// Why journal bytes were refused.
enum Refusal {
    /// Another store's or folder's journal.
    Foreign(String),
    /// Not a journal this version can trust, and why.
    Damaged(String),
}

fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_JOURNAL_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_JOURNAL_BYTES {
        let message = format!("it is larger than {MAX_JOURNAL_BYTES} bytes, more than any journal mnemo writes");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message));
    }
    Ok(bytes)
}

fn decode(bytes: &[u8], root: &Path, store_id: &str) -> Result<State, Refusal> {
    let damaged = |reason: String| {
        Refusal::Damaged(format!("{reason}; the journal is damaged or not mnemo's, so it is not trusted"))
    };
    let on_disk: OnDisk = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
    if on_disk.format != FORMAT {
        return Err(Refusal::Damaged(format!("unknown format {}", on_disk.format)));
    }
    if let Some(checksum) = &on_disk.checksum
        && *checksum != on_disk.digest()
    {
        return Err(damaged("its checksum does not match its content".into()));
    }
    if on_disk.memory_store_id != store_id || Path::new(&on_disk.root) != root {
        return Err(Refusal::Foreign(format!("{} at {}", on_disk.memory_store_id, on_disk.root)));
    }
    let now_wall = SystemTime::now();
    let now = Instant::now();
    let mut pending_deletes = HashMap::with_capacity(on_disk.pending_deletes.len());
    for (k, ms) in on_disk.pending_deletes {
        let rel = RelPath::parse(&k)
            .map_err(|e| damaged(format!("its pending deletes name a path outside the folder ({e})")))?;
        let since = UNIX_EPOCH.checked_add(Duration::from_millis(ms)).unwrap_or(now_wall);
        let ago = now_wall.duration_since(since).unwrap_or_default();
        pending_deletes.insert(rel, now.checked_sub(ago).unwrap_or(now));
    }
    Ok(State {
        baseline: rel_map("baseline", on_disk.baseline).map_err(damaged)?,
        unsettled: rel_map("unsettled sends", on_disk.unsettled).map_err(damaged)?,
        refused: rel_map("refusals", on_disk.refused).map_err(damaged)?,
        pending_deletes,
    })
}

/// Removes the journal (after a clean teardown).
pub(crate) fn remove(root: &Path) {
    let _ = std::fs::remove_file(journal_path(root));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(n: u8) -> String {
        hex::encode([n; 32])
    }

    fn digest(n: u8) -> Digest {
        Digest::from_bytes([n; 32])
    }

    fn state() -> State {
        let rel = |s: &str| RelPath::parse(s).unwrap();
        let mut s = State::default();
        s.baseline.insert(rel("a.md"), digest(1));
        s.baseline.insert(rel("notes/b.md"), digest(2));
        s.unsettled.insert(rel("c.md"), digest(3));
        s.refused.insert(rel("big.md"), digest(4));
        s.pending_deletes.insert(rel("gone.md"), Instant::now());
        s
    }

    fn root() -> PathBuf {
        PathBuf::from("/srv/mnt/store")
    }

    fn refused(bytes: &[u8]) -> String {
        match decode(bytes, &root(), "memstore_x") {
            Ok(_) => panic!("accepted: {}", String::from_utf8_lossy(bytes)),
            Err(Refusal::Damaged(reason) | Refusal::Foreign(reason)) => reason,
        }
    }

    #[test]
    fn a_journal_reads_back_what_was_written() {
        let bytes = encode(&root(), "memstore_x", &state()).unwrap();
        let back = decode(&bytes, &root(), "memstore_x").ok().unwrap();
        assert_eq!(back.baseline, state().baseline);
        assert_eq!(back.unsettled, state().unsettled);
        assert_eq!(back.refused, state().refused);
        assert_eq!(back.pending_deletes.keys().collect::<Vec<_>>(), state().pending_deletes.keys().collect::<Vec<_>>());
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("\"checksum\":\""), "{text}");
        // Byte for byte what the parsed journal serialises to (the form its checksum covers),
        // with several entries in the hashed maps, whose order is not the state's.
        let mut many = state();
        for i in 0..20u8 {
            many.unsettled.insert(RelPath::parse(&format!("u/{i}.md")).unwrap(), digest(i));
            many.refused.insert(RelPath::parse(&format!("r/{}.md", 20 - i)).unwrap(), digest(i));
            many.pending_deletes.insert(RelPath::parse(&format!("p{i}.md")).unwrap(), Instant::now());
        }
        let bytes = encode(&root(), "memstore_x", &many).unwrap();
        let parsed: OnDisk = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&parsed.as_ref()).unwrap(), bytes);
        assert_eq!(parsed.checksum, Some(parsed.digest()));
        assert!(decode(&bytes, &root(), "memstore_x").is_ok());
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        let bytes = encode(&root(), "memstore_x", &state()).unwrap();
        let mut flips = 0;
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut spoiled = bytes.clone();
                spoiled[i] ^= 1 << bit;
                let reason = refused(&spoiled);
                assert!(!reason.is_empty());
                flips += 1;
            }
        }
        for len in 0..bytes.len() {
            refused(&bytes[..len]);
        }
        assert!(flips > 2_000, "{flips}");
    }

    #[test]
    fn hostile_journals_are_refused_with_the_reason() {
        let good: serde_json::Value =
            serde_json::from_slice(&encode(&root(), "memstore_x", &state()).unwrap()).unwrap();
        // Rewritten by hand (no checksum, as older versions wrote them), each with one lie.
        let variant = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = good.clone();
            v.as_object_mut().unwrap().remove("checksum");
            edit(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        let plain = variant(&|_| {});
        assert!(decode(&plain, &root(), "memstore_x").is_ok(), "a journal without a checksum (older versions) is read");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (variant(&|v| v["baseline"]["../../etc/passwd"] = sha(9).into()), "outside the folder"),
            (variant(&|v| v["baseline"]["/etc/passwd"] = sha(9).into()), "outside the folder"),
            (variant(&|v| v["unsettled"]["a\u{0}b"] = sha(9).into()), "outside the folder"),
            (variant(&|v| v["pending_deletes"]["x/../../y"] = 1.into()), "outside the folder"),
            (variant(&|v| v["baseline"]["a.md"] = "not-a-digest".into()), "not a SHA-256"),
            (variant(&|v| v["refused"]["big.md"] = sha(0xab).to_uppercase().into()), "not a SHA-256"),
            (variant(&|v| v["format"] = 2.into()), "unknown format 2"),
            (variant(&|v| v["extra"] = true.into()), "unknown field"),
            (variant(&|v| v["memory_store_id"] = "memstore_other".into()), "memstore_other at /srv/mnt/store"),
            (variant(&|v| v["root"] = "/elsewhere".into()), "memstore_x at /elsewhere"),
            (variant(&|v| v["baseline"] = serde_json::json!([1, 2])), "invalid type"),
            (variant(&|v| v["pending_deletes"]["gone.md"] = (-1).into()), "invalid value"),
            (b"null".to_vec(), "invalid type"),
            (b"".to_vec(), "EOF"),
        ];
        for (bytes, want) in cases {
            let reason = refused(&bytes);
            assert!(reason.contains(want), "{want}: {reason}");
        }
        // A time far beyond any clock is no panic.
        let far = variant(&|v| v["pending_deletes"]["gone.md"] = u64::MAX.into());
        assert!(decode(&far, &root(), "memstore_x").is_ok());
    }

    #[test]
    fn an_oversized_journal_is_not_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let file = std::fs::File::create(journal_path(&root)).unwrap();
        file.set_len(MAX_JOURNAL_BYTES + 1).unwrap();
        let err = load(&root, "memstore_x").unwrap_err().to_string();
        assert!(err.contains("larger than") && err.contains(&journal_path(&root).display().to_string()), "{err}");
    }

    #[test]
    fn a_folder_whose_path_is_not_utf8_keeps_no_journal_and_says_why() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(std::ffi::OsStr::from_bytes(b"st\xffore"));
        let err = encode(&root, "memstore_x", &state()).unwrap_err().to_string();
        assert!(err.contains("not UTF-8"), "{err}");
    }
}
