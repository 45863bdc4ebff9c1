//! Memory paths: parsed once at the edge, valid everywhere after.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use unicode_normalization::is_nfc;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::limits::{MAX_PATH_BYTES, MAX_PATH_SEGMENTS};

/// Why a string is not a valid memory path or path prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path must start with `/`")]
    NotAbsolute,
    #[error("path is {0} bytes long; the limit is {MAX_PATH_BYTES}")]
    TooLong(usize),
    #[error("path has {0} segments; a path has 1 to {MAX_PATH_SEGMENTS}")]
    TooManySegments(usize),
    #[error("path has an empty segment (`//` or a trailing `/`)")]
    EmptySegment,
    #[error("path has a `.` or `..` segment")]
    DotSegment,
    #[error(
        "path contains the character U+{0:04X}, which is not allowed (control, format or line/paragraph separator)"
    )]
    ForbiddenChar(u32),
    #[error("path is not in Unicode Normalization Form C")]
    NotNfc,
    #[error("path prefix must end with `/`")]
    PrefixWithoutTrailingSlash,
}

fn forbidden(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
        || matches!(c.general_category(), GeneralCategory::Control | GeneralCategory::Format)
}

/// An absolute memory path such as `/projects/foo/notes.md`.
///
/// It starts with `/`, has 1–20 non-empty segments none of which is `.` or `..`, holds no
/// control or format characters nor U+2028/U+2029, is in NFC and is at most 1,024 bytes.
/// Comparison is byte-wise (paths are case-sensitive).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryPath(String);

impl MemoryPath {
    /// Validates `s` as a memory path.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        let rest = s.strip_prefix('/').ok_or(PathError::NotAbsolute)?;
        if s.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong(s.len()));
        }
        if let Some(c) = s.chars().find(|&c| forbidden(c)) {
            return Err(PathError::ForbiddenChar(u32::from(c)));
        }
        let mut count = 0;
        for segment in rest.split('/') {
            count += 1;
            match segment {
                "" => return Err(PathError::EmptySegment),
                "." | ".." => return Err(PathError::DotSegment),
                _ => {}
            }
        }
        if count > MAX_PATH_SEGMENTS {
            return Err(PathError::TooManySegments(count));
        }
        if !is_nfc(s) {
            return Err(PathError::NotNfc);
        }
        Ok(Self(s.to_owned()))
    }

    /// Parses a path a person or client sent, refusing it in the words the API and the console
    /// share: ``invalid path `…`: why``.
    pub fn parse_request(raw: &str) -> Result<Self, String> {
        Self::parse(raw).map_err(|e| format!("invalid path `{}`: {e}", raw.escape_debug()))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, without separators.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0[1..].split('/')
    }

    /// Every proper ancestor, shortest first: `/a`, `/a/b` for `/a/b/c`.
    ///
    /// A memory at an ancestor would turn a directory of this path into a file, so these are
    /// the paths that block this one from above.
    pub fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').skip(1).map(|(i, _)| &self.0[..i])
    }

    /// The half-open range `[start, end)` of paths strictly below this one: everything that
    /// starts with `self + "/"`. (`0` is the byte after `/`.)
    pub fn descendant_range(&self) -> (String, String) {
        (format!("{}/", self.0), format!("{}0", self.0))
    }

    /// The path relative to the store root, without the leading `/`.
    pub fn relative(&self) -> &str {
        &self.0[1..]
    }
}

impl fmt::Display for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for MemoryPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for MemoryPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A listing filter such as `/notes/`: `/` alone or a valid path followed by `/`.
///
/// It matches whole segments: `/notes/` matches `/notes/todo.md`, never `/notes-archive/x`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PathPrefix(String);

impl PathPrefix {
    /// The prefix that matches every path.
    pub fn root() -> Self {
        Self("/".to_owned())
    }

    /// Validates `s` as a path prefix.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        if s == "/" {
            return Ok(Self::root());
        }
        let Some(dir) = s.strip_suffix('/') else {
            return Err(if s.starts_with('/') {
                PathError::PrefixWithoutTrailingSlash
            } else {
                PathError::NotAbsolute
            });
        };
        MemoryPath::parse(dir)?;
        Ok(Self(s.to_owned()))
    }

    /// The prefix as text, trailing `/` included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The half-open range of paths this prefix matches: `[prefix, prefix-with-last-/-bumped)`.
    pub fn range(&self) -> (String, String) {
        let mut end = self.0[..self.0.len() - 1].to_owned();
        end.push('0');
        (self.0.clone(), end)
    }

    /// Whether `path` lies below this prefix.
    pub fn matches(&self, path: &str) -> bool {
        path.starts_with(&self.0)
    }

    /// Number of segments in the prefix (`/` has none).
    pub fn depth(&self) -> usize {
        self.0.matches('/').count() - 1
    }
}

impl fmt::Display for PathPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PathPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_paths() {
        for p in ["/a", "/projects/foo/notes.md", "/Ünïcödé/ok", "/a b/c", "/.hidden", "/a..b"] {
            assert!(MemoryPath::parse(p).is_ok(), "{p}");
        }
        let deepest = "/s".repeat(MAX_PATH_SEGMENTS);
        assert!(MemoryPath::parse(&deepest).is_ok());
        let longest = format!("/{}", "x".repeat(MAX_PATH_BYTES - 1));
        assert!(MemoryPath::parse(&longest).is_ok());
    }

    #[test]
    fn invalid_paths() {
        use PathError::*;
        let cases: &[(&str, PathError)] = &[
            ("", NotAbsolute),
            ("a/b", NotAbsolute),
            ("/", EmptySegment),
            ("/a/", EmptySegment),
            ("/a//b", EmptySegment),
            ("/./a", DotSegment),
            ("/a/..", DotSegment),
            ("/a\u{0}b", ForbiddenChar(0)),
            ("/a\nb", ForbiddenChar(10)),
            ("/a\u{7f}", ForbiddenChar(0x7f)),
            ("/a\u{200b}", ForbiddenChar(0x200b)),
            ("/a\u{feff}", ForbiddenChar(0xfeff)),
            ("/a\u{2028}", ForbiddenChar(0x2028)),
            ("/a\u{2029}", ForbiddenChar(0x2029)),
            ("/e\u{301}", NotNfc),
        ];
        for (p, want) in cases {
            assert_eq!(MemoryPath::parse(p).unwrap_err(), *want, "{p:?}");
        }
        let too_deep = "/s".repeat(MAX_PATH_SEGMENTS + 1);
        assert_eq!(MemoryPath::parse(&too_deep).unwrap_err(), TooManySegments(21));
        let too_long = format!("/{}", "x".repeat(MAX_PATH_BYTES));
        assert_eq!(MemoryPath::parse(&too_long).unwrap_err(), TooLong(1025));
    }

    #[test]
    fn ancestors_and_descendants() {
        let p = MemoryPath::parse("/a/b/c.md").unwrap();
        assert_eq!(p.ancestors().collect::<Vec<_>>(), ["/a", "/a/b"]);
        assert_eq!(MemoryPath::parse("/a").unwrap().ancestors().count(), 0);
        let (lo, hi) = p.descendant_range();
        assert_eq!((lo.as_str(), hi.as_str()), ("/a/b/c.md/", "/a/b/c.md0"));
        assert_eq!(p.relative(), "a/b/c.md");
    }

    #[test]
    fn prefixes_match_whole_segments() {
        let p = PathPrefix::parse("/notes/").unwrap();
        assert!(p.matches("/notes/todo.md"));
        assert!(!p.matches("/notes-archive/todo.md"));
        let (lo, hi) = p.range();
        assert!(lo.as_str() <= "/notes/todo.md" && "/notes/todo.md" < hi.as_str());
        assert!(!("/notes-archive/x" >= lo.as_str() && "/notes-archive/x" < hi.as_str()));
        assert_eq!(p.depth(), 1);
        assert_eq!(PathPrefix::root().depth(), 0);
        assert_eq!(PathPrefix::parse("/notes").unwrap_err(), PathError::PrefixWithoutTrailingSlash);
        assert_eq!(PathPrefix::parse("notes/").unwrap_err(), PathError::NotAbsolute);
        assert_eq!(PathPrefix::parse("/a//").unwrap_err(), PathError::EmptySegment);
    }
}
