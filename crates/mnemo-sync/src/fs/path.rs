//! [`RelPath`]: a path inside a store folder that cannot escape it.

use std::fmt;
use std::sync::Arc;

use super::FsError;

/// A validated path relative to a store root, `/`-separated, e.g. `notes/todo.md`.
///
/// It has at least one segment, so it never names the root itself, and no segment is empty, `.`
/// or `..`, so it can be walked one `openat` at a time without any normalisation. Backslashes and
/// NUL are refused as well, because they would mean different things to different tools.
///
/// Clones share the text: the engine keeps the same paths in several maps (the baseline, the
/// local view, the listing), which then hold one copy of each path between them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Arc<str>);

impl RelPath {
    /// Parses a root-relative path such as `notes/todo.md`.
    pub fn parse(s: &str) -> Result<Self, FsError> {
        check(s).map_err(|reason| FsError::InvalidPath { path: s.to_owned(), reason })?;
        Ok(Self(s.into()))
    }

    /// Parses a memory path such as `/notes/todo.md`: exactly one leading `/` is stripped, then
    /// the rest must be a valid [`RelPath`]. The error names the memory path as given.
    pub fn from_memory_path(path: &str) -> Result<Self, FsError> {
        let rel = path.strip_prefix('/').unwrap_or(path);
        check(rel).map_err(|reason| FsError::InvalidPath { path: path.to_owned(), reason })?;
        Ok(Self(rel.into()))
    }

    /// The path as stored, without a leading `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The memory path this file holds: `/` followed by the relative path.
    pub fn to_memory_path(&self) -> String {
        format!("/{}", self.0)
    }

    /// The folder segments above the file, outermost first, each with the path up to and
    /// including it (for error messages).
    pub(super) fn parents(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut end = 0;
        let (dirs, _) = self.split_last();
        dirs.map(|dirs| dirs.split('/')).into_iter().flatten().map(move |seg| {
            end += seg.len();
            let prefix = &self.0[..end];
            end += 1;
            (seg, prefix)
        })
    }

    /// The last segment: the file's own name inside its parent folder.
    pub(super) fn file_name(&self) -> &str {
        self.split_last().1
    }

    /// Whether this is exactly `name` directly under the root.
    pub(super) fn is_top_level(&self, name: &str) -> bool {
        &*self.0 == name
    }

    /// The first segment, which names an entry directly under the root.
    pub(super) fn first_segment(&self) -> &str {
        self.0.split('/').next().unwrap_or(&self.0)
    }

    fn split_last(&self) -> (Option<&str>, &str) {
        match self.0.rsplit_once('/') {
            Some((dirs, name)) => (Some(dirs), name),
            None => (None, &self.0),
        }
    }

    /// Builds `prefix/name` from a prefix that is already valid and a single directory entry
    /// name, refusing names that could not round-trip through [`RelPath::parse`].
    pub(super) fn join_entry(prefix: Option<&Self>, name: &str) -> Result<Self, FsError> {
        match prefix {
            Some(p) => Self::parse(&format!("{}/{name}", p.0)),
            None => Self::parse(name),
        }
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Returns why `s` is not a valid relative path, if it is not.
fn check(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        return Err("is empty; it must name a file below the store root");
    }
    if s.contains('\0') {
        return Err("contains a NUL byte");
    }
    if s.split(['/', '\\']).any(|seg| seg == "..") {
        return Err("escapes the store root");
    }
    if s.contains('\\') {
        return Err("contains a backslash");
    }
    if s.starts_with('/') {
        return Err("is absolute; it must be relative to the store root");
    }
    if s.ends_with('/') {
        return Err("ends with `/`; it must name a file");
    }
    for seg in s.split('/') {
        if seg.is_empty() {
            return Err("has an empty segment");
        }
        if seg == "." {
            return Err("has a `.` segment");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_plain_relative_paths() {
        for ok in [
            "a",
            "notes/todo.md",
            "a/b/c/d.txt",
            ".hidden",
            "..dots",
            "a/...",
            "dir.d/file..md",
            "with space/ünï.md",
            ".anthropic-memory-store",
        ] {
            let p = RelPath::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(p.as_str(), ok);
            assert_eq!(p.to_string(), ok);
            assert_eq!(p.to_memory_path(), format!("/{ok}"));
        }
    }

    #[test]
    fn parse_refuses_every_escape_and_malformed_path() {
        let cases: &[(&str, &str)] = &[
            ("", "is empty"),
            ("/a", "is absolute"),
            ("/", "is absolute"),
            ("a//b", "empty segment"),
            ("a/", "ends with"),
            ("..", "escapes the store root"),
            ("../a", "escapes the store root"),
            ("a/../b", "escapes the store root"),
            ("a/..", "escapes the store root"),
            ("/../a", "escapes the store root"),
            ("a\\..\\b", "escapes the store root"),
            (".", "`.` segment"),
            ("./a", "`.` segment"),
            ("a/./b", "`.` segment"),
            ("a\\b", "backslash"),
            ("a\0b", "NUL"),
        ];
        for (input, want) in cases {
            let err = RelPath::parse(input).expect_err(input);
            assert!(err.is_refusal(), "{input}");
            let msg = err.to_string();
            assert!(msg.contains(want), "{input:?}: {msg}");
            assert!(msg.starts_with("path `"), "{msg}");
            assert!(!msg.ends_with('.'), "{msg}");
        }
    }

    #[test]
    fn from_memory_path_strips_exactly_one_slash() {
        let p = RelPath::from_memory_path("/notes/a.md").unwrap();
        assert_eq!(p.as_str(), "notes/a.md");
        assert_eq!(p.to_memory_path(), "/notes/a.md");
        assert!(RelPath::from_memory_path("//a").is_err());
        assert!(RelPath::from_memory_path("/").is_err());
        let err = RelPath::from_memory_path("/a/../../etc/passwd").unwrap_err();
        assert_eq!(err.to_string(), "path `/a/../../etc/passwd` escapes the store root");
    }

    #[test]
    fn segments_are_split_for_walking() {
        let p = RelPath::parse("a/bb/c.md").unwrap();
        assert_eq!(p.parents().collect::<Vec<_>>(), [("a", "a"), ("bb", "a/bb")]);
        assert_eq!(p.file_name(), "c.md");
        assert_eq!(p.first_segment(), "a");
        let top = RelPath::parse("x").unwrap();
        assert_eq!(top.parents().count(), 0);
        assert_eq!(top.file_name(), "x");
        assert!(top.is_top_level("x"));
    }

    // ---- hostile input ---------------------------------------------------------------------

    use std::path::{Component, Path};

    use mnemo_api::MemoryPath;
    use proptest::prelude::*;

    fn config(default: u32) -> ProptestConfig {
        let env = |name| std::env::var(name).ok().and_then(|n: String| n.parse().ok());
        let cases = env("MNEMO_FUZZ_CASES").or_else(|| env("PROPTEST_CASES")).unwrap_or(default);
        ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
    }

    fn rel_like() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => Just("/".to_owned()),
            1 => Just("//".to_owned()),
            2 => Just(".".to_owned()),
            2 => Just("..".to_owned()),
            1 => Just("\\".to_owned()),
            1 => Just("\\..\\".to_owned()),
            4 => "[a-z0-9._-]{1,8}",
            1 => Just("\u{0}".to_owned()),
            1 => Just("\u{7f}".to_owned()),
            1 => Just("e\u{301}".to_owned()),
            1 => Just("\u{202e}".to_owned()),
            1 => any::<char>().prop_map(String::from),
        ];
        prop_oneof![
            4 => prop::collection::vec(piece, 0..24).prop_map(|p| p.concat()),
            1 => any::<String>(),
        ]
    }

    /// The relative-path rules, spelled out on their own.
    fn obeys_the_rules(s: &str) -> bool {
        !s.is_empty()
            && !s.contains(['\0', '\\'])
            && !s.starts_with('/')
            && s.split('/').all(|g| !g.is_empty() && g != "." && g != "..")
    }

    proptest! {
        #![proptest_config(config(3_000))]

        /// Accepted exactly by the rules; an accepted path never leaves the folder (every
        /// component is a plain name, no root, no `..`) and round-trips.
        #[test]
        fn rel_paths_never_escape_the_folder(s in rel_like()) {
            let parsed = RelPath::parse(&s);
            prop_assert_eq!(parsed.is_ok(), obeys_the_rules(&s), "{:?}: {:?}", s, parsed);
            match parsed {
                Ok(rel) => {
                    prop_assert_eq!(rel.as_str(), &s);
                    let components: Vec<Component<'_>> = Path::new(rel.as_str()).components().collect();
                    prop_assert!(components.iter().all(|c| matches!(c, Component::Normal(_))), "{:?}", components);
                    prop_assert_eq!(components.len(), s.split('/').count());
                    prop_assert_eq!(Path::new("/root").join(rel.as_str()).starts_with("/root"), true);
                    prop_assert_eq!(RelPath::from_memory_path(&rel.to_memory_path()).unwrap(), rel.clone());
                    let names: Vec<(&str, &str)> = rel.parents().collect();
                    prop_assert_eq!(names.len(), components.len() - 1);
                    let rebuilt = names.iter().map(|(seg, _)| *seg).chain([rel.file_name()]).collect::<Vec<_>>().join("/");
                    prop_assert_eq!(rebuilt, s);
                }
                Err(e) => prop_assert!(e.is_refusal()),
            }
        }

        /// Memory path ↔ folder path is a bijection on what both accept: every memory path a
        /// folder can hold maps to one file and back, and only a backslash keeps a valid memory
        /// path out of a folder.
        #[test]
        fn memory_paths_and_folder_paths_map_one_to_one(s in rel_like()) {
            let memory = format!("/{s}");
            if let Ok(m) = MemoryPath::parse(&memory) {
                match RelPath::from_memory_path(m.as_str()) {
                    Ok(rel) => {
                        prop_assert_eq!(rel.to_memory_path(), m.as_str().to_owned());
                        prop_assert_eq!(rel.as_str(), m.relative());
                    }
                    Err(_) => prop_assert!(m.as_str().contains('\\'), "{:?} is a valid memory path", m),
                }
            }
            if let Ok(rel) = RelPath::parse(&s) {
                let back = rel.to_memory_path();
                if let Ok(m) = MemoryPath::parse(&back) {
                    prop_assert_eq!(RelPath::from_memory_path(m.as_str()).unwrap(), rel);
                }
            }
            // Exactly one leading `/` is stripped: `//x` is never `x`.
            if let Ok(rel) = RelPath::from_memory_path(&format!("//{s}")) {
                prop_assert!(false, "{:?} came from a path with two leading slashes", rel);
            }
        }
    }
}
