//! What an import does with each memory of the file, decided from the store's listing alone
//! (no I/O): create it, skip it (already there, same bytes), overwrite it (`--overwrite`), or
//! report a conflict.
//!
//! A run interrupted half-way is picked up by planning again: what it created is now listed
//! with identical digests, so it is skipped.

use std::collections::BTreeMap;

use mnemo_api::{MemoryId, MemoryPath, Overlap};

/// A memory of the target store, as a content-free listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub id: MemoryId,
    pub content_sha256: String,
}

/// What to do with one memory of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing holds the path or overlaps it.
    Create,
    /// The store holds the very same bytes at the path.
    Skip,
    /// The store holds other bytes at the path and `--overwrite` was given: update it, on the
    /// condition that it still holds what the listing showed.
    Overwrite { id: MemoryId, expected_sha256: String },
    /// Left alone and reported.
    Conflict(Conflict),
}

/// Why a memory of the file was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// The store holds other content at the path (without `--overwrite`, or it changed while
    /// it was being overwritten). Its digest, when known.
    Differs { store_sha256: Option<String> },
    /// Another memory's path overlaps this one (it lies above or below it), which no overwrite
    /// can resolve.
    Overlaps { path: String },
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Differs { store_sha256: Some(sha) } => {
                write!(f, "the store holds different content there (sha256 {})", short(sha))
            }
            Self::Differs { store_sha256: None } => write!(f, "the store holds different content there"),
            Self::Overlaps { path } if path.is_empty() => write!(f, "another memory overlaps it"),
            Self::Overlaps { path } => write!(f, "the memory at {path} overlaps it"),
        }
    }
}

/// The first 12 hex digits of a digest, enough to tell two apart in a report.
pub fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// One action per memory of `wanted` (path, content_sha256), in its order, against the store's
/// memories `existing` (path → memory).
pub fn plan<'a>(
    wanted: impl IntoIterator<Item = (&'a str, &'a str)>,
    existing: &BTreeMap<String, Existing>,
    overwrite: bool,
) -> Vec<Action> {
    wanted
        .into_iter()
        .map(|(path, sha)| match existing.get(path) {
            Some(e) if e.content_sha256 == sha => Action::Skip,
            Some(e) if overwrite => Action::Overwrite { id: e.id.clone(), expected_sha256: e.content_sha256.clone() },
            Some(e) => Action::Conflict(Conflict::Differs { store_sha256: Some(e.content_sha256.clone()) }),
            None => match overlapping(path, existing) {
                Some(other) => Action::Conflict(Conflict::Overlaps { path: other.to_owned() }),
                None => Action::Create,
            },
        })
        .collect()
}

/// The memory of `existing` that overlaps `path` ([`Overlap`]: above it, else the first below
/// it in path order), as the server would name it.
fn overlapping<'e>(path: &str, existing: &'e BTreeMap<String, Existing>) -> Option<&'e str> {
    // File paths were checked when the file was read; one that does not parse blocks nothing.
    let parsed = MemoryPath::parse(path).ok()?;
    Overlap::of(&parsed).first_in(existing).map(|(p, _)| p.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(memories: &[(&str, &str)]) -> (BTreeMap<String, Existing>, Vec<MemoryId>) {
        let ids: Vec<MemoryId> = memories.iter().map(|_| MemoryId::generate()).collect();
        let map = memories
            .iter()
            .zip(&ids)
            .map(|((p, sha), id)| (p.to_string(), Existing { id: id.clone(), content_sha256: sha.to_string() }))
            .collect();
        (map, ids)
    }

    #[test]
    fn each_case_gets_its_action() {
        let (existing, ids) = store(&[("/same", "aa"), ("/other", "bb"), ("/dir", "cc"), ("/up/down/deep", "dd")]);
        let cases: [(&str, &str, bool, Action); 10] = [
            ("/new", "aa", false, Action::Create),
            ("/same", "aa", false, Action::Skip),
            ("/same", "aa", true, Action::Skip),
            ("/other", "xx", false, Action::Conflict(Conflict::Differs { store_sha256: Some("bb".into()) })),
            ("/other", "xx", true, Action::Overwrite { id: ids[1].clone(), expected_sha256: "bb".into() }),
            // A file below a memory, a file above memories: overlaps, even with --overwrite.
            ("/dir/x", "aa", true, Action::Conflict(Conflict::Overlaps { path: "/dir".into() })),
            ("/up", "aa", false, Action::Conflict(Conflict::Overlaps { path: "/up/down/deep".into() })),
            ("/up/down", "aa", true, Action::Conflict(Conflict::Overlaps { path: "/up/down/deep".into() })),
            // Whole segments only.
            ("/dir.md", "aa", false, Action::Create),
            ("/up/downtown", "aa", false, Action::Create),
        ];
        for (path, sha, overwrite, expected) in cases {
            assert_eq!(plan([(path, sha)], &existing, overwrite), [expected], "{path} overwrite={overwrite}");
        }
    }

    #[test]
    fn planning_after_executing_the_plan_skips_everything() {
        let (mut existing, _) = store(&[("/kept", "k1"), ("/notes/a", "a0")]);
        let wanted = [("/notes/a", "a1"), ("/notes/b", "b1"), ("/kept", "k1"), ("/x/y/z", "z1")];
        let actions = plan(wanted, &existing, true);
        // Carry the plan out on the model of the store.
        for ((path, sha), action) in wanted.iter().zip(&actions) {
            match action {
                Action::Create | Action::Overwrite { .. } => {
                    let e = Existing { id: MemoryId::generate(), content_sha256: sha.to_string() };
                    existing.insert(path.to_string(), e);
                }
                Action::Skip => {}
                Action::Conflict(c) => panic!("{path}: {c}"),
            }
        }
        assert!(plan(wanted, &existing, true).iter().all(|a| *a == Action::Skip));
        assert!(plan(wanted, &existing, false).iter().all(|a| *a == Action::Skip));
    }

    #[test]
    fn conflicts_read_plainly() {
        let differs = Conflict::Differs { store_sha256: Some("0123456789abcdef".repeat(4)) };
        assert_eq!(differs.to_string(), "the store holds different content there (sha256 0123456789ab)");
        assert_eq!(Conflict::Overlaps { path: "/a".into() }.to_string(), "the memory at /a overlaps it");
    }
}
