//! [`RelPath`]: a path inside a store folder that cannot escape it.

use std::fmt;

use super::FsError;

/// A validated path relative to a store root, `/`-separated, e.g. `notes/todo.md`.
///
/// It has at least one segment, so it never names the root itself, and no segment is empty, `.`
/// or `..`, so it can be walked one `openat` at a time without any normalisation. Backslashes and
/// NUL are refused as well, because they would mean different things to different tools.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(String);

impl RelPath {
    /// Parses a root-relative path such as `notes/todo.md`.
    pub fn parse(s: &str) -> Result<Self, FsError> {
        check(s).map_err(|reason| FsError::InvalidPath { path: s.to_owned(), reason })?;
        Ok(Self(s.to_owned()))
    }

    /// Parses a memory path such as `/notes/todo.md`: exactly one leading `/` is stripped, then
    /// the rest must be a valid [`RelPath`]. The error names the memory path as given.
    pub fn from_memory_path(path: &str) -> Result<Self, FsError> {
        let rel = path.strip_prefix('/').unwrap_or(path);
        check(rel).map_err(|reason| FsError::InvalidPath { path: path.to_owned(), reason })?;
        Ok(Self(rel.to_owned()))
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
        self.0 == name
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
}
