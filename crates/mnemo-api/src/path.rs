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

/// What "overlap" means, the one definition every writer of memories uses (both store backends
/// when they judge a create or a move, and the export file's reader and import planner).
///
/// A store holds memories as files of one tree, so a path is blocked by a memory at the path
/// itself, at an ancestor (which would have to be a directory) or below it (which would make
/// the path a directory). In a store that keeps this rule at most one memory lies at or above
/// a path (those paths all overlap each other), and then none lies below it; so the blocker a
/// writer names is that one, or else the first below the path in byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap<'p> {
    path: &'p MemoryPath,
}

impl<'p> Overlap<'p> {
    /// The paths that overlap `path`.
    pub fn of(path: &'p MemoryPath) -> Self {
        Self { path }
    }

    /// The path whose overlaps these are.
    pub fn path(&self) -> &'p MemoryPath {
        self.path
    }

    /// Its proper ancestors, shortest first: a memory at one of them blocks from above.
    pub fn above(&self) -> impl Iterator<Item = &'p str> + use<'p> {
        self.path.ancestors()
    }

    /// The path itself, then [`above`](Self::above): what an exact-match lookup tries, in the
    /// order the blocker is named.
    pub fn at_or_above(&self) -> impl Iterator<Item = &'p str> + use<'p> {
        std::iter::once(self.path.as_str()).chain(self.above())
    }

    /// The half-open range `[start, end)`, in byte order, of the paths below it.
    pub fn below(&self) -> (String, String) {
        self.path.descendant_range()
    }

    /// Whether a memory at `other` blocks the path.
    pub fn blocked_by(&self, other: &str) -> bool {
        let path = self.path.as_str();
        other == path
            || other.strip_prefix(path).is_some_and(|rest| rest.starts_with('/'))
            || path.strip_prefix(other).is_some_and(|rest| rest.starts_with('/'))
    }

    /// The memory of `held` (path → anything, byte order) that blocks the path, named as a
    /// store names it: the one at or above it, else the first below it.
    pub fn first_in<'m, V>(&self, held: &'m std::collections::BTreeMap<String, V>) -> Option<(&'m String, &'m V)> {
        let at_or_above = self.at_or_above().find_map(|p| held.get_key_value(p));
        let (start, end) = self.below();
        at_or_above.or_else(|| held.range(start..end).next())
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
    fn overlaps() {
        let held: std::collections::BTreeMap<String, ()> =
            ["/a.md", "/b", "/c/d/e", "/c/d/f", "/c-d", "/c/d0"].into_iter().map(|p| (p.to_owned(), ())).collect();
        #[rustfmt::skip]
        let rows: &[(&str, &str, Option<&str>)] = &[
            ("the path itself", "/a.md", Some("/a.md")),
            ("an ancestor would have to be a directory", "/b/x/y", Some("/b")),
            ("the first memory below, in byte order", "/c/d", Some("/c/d/e")),
            ("a memory further below", "/c", Some("/c/d/e")),
            ("a sibling sharing a name prefix is no overlap", "/a", None),
            ("a look-alike with another separator is no overlap", "/c-", None),
            ("a longer name is no overlap", "/b.md", None),
        ];
        for (rule, path, want) in rows {
            let path = MemoryPath::parse(path).unwrap();
            let overlap = Overlap::of(&path);
            let got = overlap.first_in(&held).map(|(p, _)| p.as_str());
            assert_eq!(got, *want, "rule: {rule}");
            for other in held.keys() {
                let expected = other == path.as_str()
                    || other.starts_with(&format!("{path}/"))
                    || path.as_str().starts_with(&format!("{other}/"));
                assert_eq!(overlap.blocked_by(other), expected, "{rule}: {path} and {other}");
            }
        }
        let p = MemoryPath::parse("/x/y/z").unwrap();
        assert_eq!(Overlap::of(&p).at_or_above().collect::<Vec<_>>(), ["/x/y/z", "/x", "/x/y"]);
        assert_eq!(Overlap::of(&p).above().collect::<Vec<_>>(), ["/x", "/x/y"]);
        assert_eq!(Overlap::of(&p).below(), ("/x/y/z/".to_owned(), "/x/y/z0".to_owned()));
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

    // ---- hostile input ---------------------------------------------------------------------

    use proptest::prelude::*;

    /// Cases per property: `MNEMO_FUZZ_CASES` (or `PROPTEST_CASES`), else `default`.
    fn config(default: u32) -> ProptestConfig {
        let env = |name| std::env::var(name).ok().and_then(|n: String| n.parse().ok());
        let cases = env("MNEMO_FUZZ_CASES").or_else(|| env("PROPTEST_CASES")).unwrap_or(default);
        ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
    }

    /// Every documented rule, spelled out independently of the parser.
    fn obeys_the_rules(s: &str) -> bool {
        let Some(rest) = s.strip_prefix('/') else { return false };
        let segments: Vec<&str> = rest.split('/').collect();
        s.len() <= 1_024
            && (1..=20).contains(&segments.len())
            && segments.iter().all(|g| !g.is_empty() && *g != "." && *g != "..")
            && is_nfc(s)
            && !s.chars().any(|c| {
                c.is_control() || c.general_category() == GeneralCategory::Format || c == '\u{2028}' || c == '\u{2029}'
            })
    }

    /// Strings built from the pieces paths go wrong with, random text, and near-valid paths.
    pub(crate) fn path_like() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => Just("/".to_owned()),
            1 => Just("//".to_owned()),
            1 => Just(".".to_owned()),
            1 => Just("..".to_owned()),
            1 => Just("\\".to_owned()),
            4 => "[a-z0-9._-]{1,8}",
            1 => Just("e\u{301}".to_owned()),
            1 => Just("\u{e9}".to_owned()),
            1 => Just("\u{0}".to_owned()),
            1 => Just("\u{7f}".to_owned()),
            1 => Just("\u{85}".to_owned()),
            1 => Just("\u{200b}".to_owned()),
            1 => Just("\u{202e}".to_owned()),
            1 => Just("\u{feff}".to_owned()),
            1 => Just("\u{2028}".to_owned()),
            1 => Just("\u{1F600}".to_owned()),
            1 => Just("\u{fffd}".to_owned()),
            1 => Just("x".repeat(100)),
            1 => Just("\u{10ffff}".to_owned()),
            1 => any::<char>().prop_map(String::from),
        ];
        prop_oneof![
            4 => prop::collection::vec(piece, 0..30).prop_map(|p| p.concat()),
            1 => any::<String>(),
            // At and around the segment and byte limits.
            1 => (15usize..25).prop_map(|n| "/s".repeat(n)),
            1 => (1_000usize..1_030).prop_map(|n| format!("/{}", "y".repeat(n - 1))),
            1 => (340usize..345).prop_map(|n| format!("/{}", "\u{e9}".repeat(n))),
        ]
    }

    proptest! {
        #![proptest_config(config(3_000))]

        /// A string is accepted exactly when it obeys every rule; what is accepted round-trips
        /// and its derived forms (segments, ancestors, ranges) are consistent.
        #[test]
        fn memory_paths_are_accepted_exactly_when_they_obey_every_rule(s in path_like()) {
            let parsed = MemoryPath::parse(&s);
            prop_assert_eq!(parsed.is_ok(), obeys_the_rules(&s), "{:?}: {:?}", s, parsed);
            let Ok(p) = parsed else {
                let refused = MemoryPath::parse_request(&s).unwrap_err();
                prop_assert!(refused.starts_with("invalid path `"), "{}", refused);
                return Ok(());
            };
            prop_assert_eq!(p.as_str(), &s);
            prop_assert_eq!(&p.to_string(), &s);
            let json = serde_json::to_string(&p).unwrap();
            prop_assert_eq!(&serde_json::from_str::<MemoryPath>(&json).unwrap(), &p);
            prop_assert_eq!(p.segments().collect::<Vec<_>>().join("/"), p.relative());
            prop_assert_eq!(&format!("/{}", p.relative()), &s);
            for a in p.ancestors() {
                prop_assert!(MemoryPath::parse(a).is_ok(), "ancestor {:?} of {:?}", a, s);
                let below_a = format!("{a}/");
                prop_assert!(s.starts_with(&below_a));
            }
            prop_assert_eq!(p.ancestors().count(), p.segments().count() - 1);
            let (lo, hi) = p.descendant_range();
            let below = format!("{s}/x");
            prop_assert!(lo.as_str() <= below.as_str() && below.as_str() < hi.as_str());
            prop_assert!(!(lo.as_str() <= s.as_str() && s.as_str() < hi.as_str()), "a path is not below itself");
            // A prefix is a valid path plus `/`.
            let prefix = PathPrefix::parse(&format!("{s}/")).unwrap();
            prop_assert!(prefix.matches(&below) && !prefix.matches(&s));
            prop_assert_eq!(prefix.depth(), p.segments().count());
        }

        /// Prefixes: `/`, or a valid path followed by `/`; never a panic.
        #[test]
        fn path_prefixes_are_a_valid_path_and_a_slash(s in path_like()) {
            let parsed = PathPrefix::parse(&s);
            let valid = s == "/" || s.strip_suffix('/').is_some_and(obeys_the_rules);
            prop_assert_eq!(parsed.is_ok(), valid, "{:?}", s);
            if let Ok(prefix) = parsed {
                prop_assert_eq!(prefix.as_str(), &s);
                let (lo, hi) = prefix.range();
                let inside = format!("{s}z");
                prop_assert!(lo.as_str() <= inside.as_str() && inside.as_str() < hi.as_str());
            }
        }
    }
}
