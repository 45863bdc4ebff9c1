//! The search query language of `memories:search`, what a query matches, and how a result's
//! snippet marks it.
//!
//! A person looking for one remembered fact among thousands types what they would type into
//! `grep` or a search box, so every term matches as a case-insensitive **substring** of a
//! memory's path or content: `staging-db-02`, `snake_case` and `db-0` all find
//! `staging-db-02_snake_case`. The forms:
//!
//! | form            | matches a memory whose path or content…                              |
//! |-----------------|----------------------------------------------------------------------|
//! | `word`          | contains `word` (every word must match)                              |
//! | `"two words"`   | contains the words in order, separated by any run of whitespace      |
//! | `term*`         | has a word starting with `term` (a word: letters, digits and `_`)    |
//! | `-term`         | does not contain `term` (also `-"a phrase"` and `-term*`)            |
//! | `path:notes/`   | (narrows) has a path starting with `/notes/`; several are alternatives |
//! | `-path:old/`    | (narrows) has no path starting with `/old/`                          |
//!
//! The backends' indexes find candidates ([`SearchQuery::index_plan`] for a word index,
//! [`SearchQuery::index_filter`] for substrings); [`SearchQuery::matches`] is the one judge of
//! what matches, so both backends answer the same set.

use std::fmt;

pub mod index;

/// The longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 512;
/// The most terms (words, phrases, prefixes, exclusions and path terms) in one query.
pub const MAX_TERMS: usize = 16;
/// The opening mark around a matched term in a snippet.
pub const MARK_OPEN: char = '«';
/// The closing mark around a matched term in a snippet.
pub const MARK_CLOSE: char = '»';
/// The longest snippet, in characters, marks and ellipses excluded.
pub const SNIPPET_CHARS: usize = 200;
/// How much text a snippet shows before its first match, in characters.
const SNIPPET_LEAD: usize = 60;

/// How a term matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermKind {
    /// A substring.
    Word,
    /// Words in order, separated by any run of whitespace (held joined by one space).
    Phrase,
    /// The start of a word.
    Prefix,
}

/// One term of a query: its text folded to lower case ([`fold`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub kind: TermKind,
    pub text: String,
    /// `-term`: the memory must not match it.
    pub excluded: bool,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SearchQuery {
    pub terms: Vec<Term>,
    /// `path:` prefixes (each starting with `/`); a memory's path starts with one of them.
    pub paths: Vec<String>,
    /// `-path:` prefixes; a memory's path starts with none of them.
    pub excluded_paths: Vec<String>,
}

/// Why a query cannot be run; the message says how to fix it (answered as `400`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("`q` is empty: give at least one word to search for")]
    Empty,
    #[error("`q` is {0} bytes long; a search query is at most {MAX_QUERY_BYTES} bytes")]
    TooLong(usize),
    #[error("`q` has {0} terms; a search query has at most {MAX_TERMS}")]
    TooManyTerms(usize),
    #[error("`q` opens a phrase with `\"` and never closes it; add the closing `\"`")]
    UnbalancedQuote,
    #[error("`q` has an empty phrase `\"\"`; put words between the quotes or drop them")]
    EmptyPhrase,
    #[error("`q` has a `*` with no word before it; write `term*` to find words starting with term")]
    BareStar,
    #[error("`q` has `path:` with no path after it; write e.g. `path:notes/`")]
    EmptyPath,
    #[error("`q` only excludes or narrows (`-term`, `path:`); give at least one word, phrase or prefix to search for")]
    NothingToFind,
}

/// A path or content as an index holds it for [`SearchQuery::index_filter`]: every run of
/// whitespace as one space, as the rule reads text.
pub fn index_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// What an index can check of a query ([`SearchQuery::index_filter`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexFilter {
    /// Every match contains each of these (folded; whitespace as one space).
    pub contains: Vec<String>,
    /// No match contains any of these.
    pub excludes: Vec<String>,
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let minus = if self.excluded { "-" } else { "" };
        match self.kind {
            TermKind::Word => write!(f, "{minus}{}", self.text),
            TermKind::Phrase => write!(f, "{minus}\"{}\"", self.text),
            TermKind::Prefix => write!(f, "{minus}{}*", self.text),
        }
    }
}

/// Lower case for matching, one character for one (the first of [`char::to_lowercase`]), so
/// that positions in folded text are positions in the original.
pub fn fold(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn fold_str(s: &str) -> String {
    s.chars().map(fold).collect()
}

/// A character of a word, for `term*` (as `\w` in a regular expression).
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses `q`.
pub fn parse(q: &str) -> Result<SearchQuery, QueryError> {
    if q.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong(q.len()));
    }
    let mut query = SearchQuery::default();
    let mut count = 0usize;
    let mut rest = q.trim_start();
    while !rest.is_empty() {
        let excluded = rest.starts_with('-') && rest.len() > 1 && !rest[1..].starts_with(char::is_whitespace);
        if excluded {
            rest = &rest[1..];
        }
        if let Some(after) = rest.strip_prefix('"') {
            let end = after.find('"').ok_or(QueryError::UnbalancedQuote)?;
            let words: Vec<&str> = after[..end].split_whitespace().collect();
            if words.is_empty() {
                return Err(QueryError::EmptyPhrase);
            }
            let kind = if words.len() == 1 { TermKind::Word } else { TermKind::Phrase };
            query.terms.push(Term { kind, text: fold_str(&words.join(" ")), excluded });
            rest = &after[end + 1..];
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
            let (word, tail) = rest.split_at(end);
            rest = tail;
            if word == "-" {
                // A lone dash (`a - b`) says nothing.
                rest = rest.trim_start();
                continue;
            }
            // `get` and not `[..5]`: the fifth byte may sit inside a character.
            if word.get(..5).is_some_and(|head| head.eq_ignore_ascii_case("path:")) {
                let path = &word[5..];
                if path.is_empty() {
                    return Err(QueryError::EmptyPath);
                }
                let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
                if excluded { &mut query.excluded_paths } else { &mut query.paths }.push(path);
            } else if let Some(stem) = word.strip_suffix('*') {
                let stem = stem.trim_end_matches('*');
                if stem.is_empty() {
                    return Err(QueryError::BareStar);
                }
                query.terms.push(Term { kind: TermKind::Prefix, text: fold_str(stem), excluded });
            } else {
                query.terms.push(Term { kind: TermKind::Word, text: fold_str(word), excluded });
            }
        }
        count += 1;
        rest = rest.trim_start();
    }
    if count == 0 {
        return Err(QueryError::Empty);
    }
    if count > MAX_TERMS {
        return Err(QueryError::TooManyTerms(count));
    }
    if query.terms.iter().all(|t| t.excluded) {
        return Err(QueryError::NothingToFind);
    }
    Ok(query)
}

/// Text prepared for matching: whitespace runs collapsed to one space, and its folded twin
/// (same length in characters, so a match's position is a position in the text).
struct Prepared {
    text: Vec<char>,
    folded: Vec<char>,
}

impl Prepared {
    fn new(s: &str) -> Self {
        let mut text = Vec::with_capacity(s.len());
        let mut space = false;
        for c in s.trim().chars() {
            if c.is_whitespace() {
                space = true;
                continue;
            }
            if space {
                text.push(' ');
                space = false;
            }
            text.push(c);
        }
        let folded = text.iter().copied().map(fold).collect();
        Self { text, folded }
    }

    /// Where `term` matches, as character ranges, in order.
    fn find(&self, term: &Term) -> Vec<(usize, usize)> {
        let needle: Vec<char> = term.text.chars().collect();
        let hay = &self.folded;
        let mut hits = Vec::new();
        if needle.is_empty() || needle.len() > hay.len() {
            return hits;
        }
        let mut i = 0;
        while i + needle.len() <= hay.len() {
            if hay[i..i + needle.len()] == needle[..]
                && (term.kind != TermKind::Prefix || i == 0 || !is_word_char(hay[i - 1]))
            {
                hits.push((i, i + needle.len()));
                i += needle.len();
            } else {
                i += 1;
            }
        }
        hits
    }

    fn contains(&self, term: &Term) -> bool {
        !self.find(term).is_empty()
    }
}

impl SearchQuery {
    /// Substrings every match contains (in its path or content), for a backend's index to find
    /// candidates by: each searched word, prefix stem, and each word of a phrase. A backend
    /// may find more candidates than match; [`matches`](Self::matches) judges them.
    pub fn index_terms(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for term in self.terms.iter().filter(|t| !t.excluded) {
            match term.kind {
                TermKind::Phrase => out.extend(term.text.split(' ')),
                TermKind::Word | TermKind::Prefix => out.push(term.text.as_str()),
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// What an index over a memory's path and content, **with every run of whitespace held as
    /// one space**, can check of this query: substrings every match contains, and substrings no
    /// match contains. A backend may find more candidates than match ([`matches`](Self::matches)
    /// judges them); it must never find fewer, so only what holds for every match is here:
    /// - every match contains each searched word and prefix stem, and each phrase whole (a
    ///   phrase of ASCII text; other phrases word by word, as an index may fold case in other
    ///   ways than [`fold`] does);
    /// - no match contains an excluded word or phrase of ASCII text.
    pub fn index_filter(&self) -> IndexFilter {
        let mut filter = IndexFilter::default();
        for term in &self.terms {
            match (term.excluded, term.kind) {
                (false, TermKind::Phrase) if !term.text.is_ascii() => {
                    filter.contains.extend(term.text.split(' ').map(str::to_owned));
                }
                (false, _) => filter.contains.push(term.text.clone()),
                (true, TermKind::Word | TermKind::Phrase) if term.text.is_ascii() => {
                    filter.excludes.push(term.text.clone());
                }
                (true, _) => {}
            }
        }
        filter.contains.sort_unstable();
        filter.contains.dedup();
        filter.excludes.sort_unstable();
        filter.excludes.dedup();
        filter
    }

    /// Whether a memory at `path` holding `content` matches.
    pub fn matches(&self, path: &str, content: &str) -> bool {
        if !self.paths.is_empty() && !self.paths.iter().any(|p| path.starts_with(p.as_str())) {
            return false;
        }
        if self.excluded_paths.iter().any(|p| path.starts_with(p.as_str())) {
            return false;
        }
        let (path, content) = (Prepared::new(path), Prepared::new(content));
        self.terms.iter().all(|t| (path.contains(t) || content.contains(t)) != t.excluded)
    }

    /// A passage of `content` around its first match, at most [`SNIPPET_CHARS`] characters
    /// (whitespace collapsed), every match of a searched term inside it between [`MARK_OPEN`]
    /// and [`MARK_CLOSE`], and `…` where text was cut. A memory matched by its path alone
    /// shows its content's start, unmarked.
    pub fn snippet(&self, content: &str) -> String {
        let prepared = Prepared::new(content);
        let mut ranges: Vec<(usize, usize)> =
            self.terms.iter().filter(|t| !t.excluded).flat_map(|t| prepared.find(t)).collect();
        ranges.sort_unstable();
        let len = prepared.text.len();
        let mut start = ranges.first().map_or(0, |r| r.0.saturating_sub(SNIPPET_LEAD));
        // Start at a word's beginning where one is near.
        if start > 0
            && prepared.text[start - 1] != ' '
            && let Some(space) = prepared.text[start..ranges[0].0].iter().position(|c| *c == ' ')
        {
            start += space + 1;
        }
        let end = (start + SNIPPET_CHARS).min(len);
        let mut out = String::new();
        if start > 0 {
            out.push('…');
        }
        let mut at = start;
        for (from, to) in ranges {
            let (from, to) = (from.max(at), to.min(end));
            if from >= to {
                continue;
            }
            out.extend(&prepared.text[at..from]);
            out.push(MARK_OPEN);
            out.extend(&prepared.text[from..to]);
            out.push(MARK_CLOSE);
            at = to;
        }
        out.extend(&prepared.text[at..end]);
        if end < len {
            out.push('…');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(text: &str) -> Term {
        Term { kind: TermKind::Word, text: text.into(), excluded: false }
    }
    fn phrase(text: &str) -> Term {
        Term { kind: TermKind::Phrase, text: text.into(), excluded: false }
    }
    fn prefix(text: &str) -> Term {
        Term { kind: TermKind::Prefix, text: text.into(), excluded: false }
    }
    fn not(mut t: Term) -> Term {
        t.excluded = true;
        t
    }

    #[test]
    fn parses_every_form() {
        let q = |terms: Vec<Term>, paths: &[&str], excluded_paths: &[&str]| SearchQuery {
            terms,
            paths: paths.iter().map(|p| p.to_string()).collect(),
            excluded_paths: excluded_paths.iter().map(|p| p.to_string()).collect(),
        };
        let table: &[(&str, SearchQuery)] = &[
            ("staging database", q(vec![word("staging"), word("database")], &[], &[])),
            ("  Staging   DB ", q(vec![word("staging"), word("db")], &[], &[])),
            ("staging-db-02", q(vec![word("staging-db-02")], &[], &[])),
            ("snake_case", q(vec![word("snake_case")], &[], &[])),
            ("\"exact  Phrase\"", q(vec![phrase("exact phrase")], &[], &[])),
            ("\"one\"", q(vec![word("one")], &[], &[])),
            ("db -prod", q(vec![word("db"), not(word("prod"))], &[], &[])),
            ("db -\"old notes\"", q(vec![word("db"), not(phrase("old notes"))], &[], &[])),
            ("stag*", q(vec![prefix("stag")], &[], &[])),
            ("stag** -x*", q(vec![prefix("stag"), not(prefix("x"))], &[], &[])),
            ("a - b", q(vec![word("a"), word("b")], &[], &[])),
            ("db path:notes/", q(vec![word("db")], &["/notes/"], &[])),
            ("db PATH:/notes/ path:x", q(vec![word("db")], &["/notes/", "/x"], &[])),
            ("db -path:old/", q(vec![word("db")], &[], &["/old/"])),
            ("a\"b c\"", q(vec![word("a"), phrase("b c")], &[], &[])),
            ("Ünïcode", q(vec![word("ünïcode")], &[], &[])),
        ];
        for (input, want) in table {
            assert_eq!(parse(input).as_ref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn refuses_malformed_queries() {
        let long = "a".repeat(MAX_QUERY_BYTES + 1);
        let many = "w ".repeat(MAX_TERMS + 1);
        let table: &[(&str, QueryError)] = &[
            ("", QueryError::Empty),
            ("   ", QueryError::Empty),
            (" - ", QueryError::Empty),
            (&long, QueryError::TooLong(MAX_QUERY_BYTES + 1)),
            (&many, QueryError::TooManyTerms(MAX_TERMS + 1)),
            ("\"open phrase", QueryError::UnbalancedQuote),
            ("a \"b\" \"c", QueryError::UnbalancedQuote),
            ("\"  \"", QueryError::EmptyPhrase),
            ("*", QueryError::BareStar),
            ("a -*", QueryError::BareStar),
            ("path:", QueryError::EmptyPath),
            ("-prod", QueryError::NothingToFind),
            ("-prod -\"x y\"", QueryError::NothingToFind),
            ("path:notes/", QueryError::NothingToFind),
            ("path:notes/ -x", QueryError::NothingToFind),
        ];
        for (input, want) in table {
            assert_eq!(parse(input).as_ref(), Err(want), "{input:?}");
        }
        // Every message says what to do.
        assert!(QueryError::UnbalancedQuote.to_string().contains("closing"));
    }

    #[test]
    fn matches_as_a_person_expects() {
        let content = "The Staging-DB-02 host runs\n  postgres_snake_case tables. Backups nightly.";
        let table: &[(&str, &str, bool)] = &[
            ("staging", "/notes/db.md", true),
            ("STAGING db-02", "/notes/db.md", true),
            ("db-0", "/notes/db.md", true),
            ("snake_case", "/notes/db.md", true),
            ("ake_ca", "/notes/db.md", true),
            ("staging missing", "/notes/db.md", false),
            ("\"host runs postgres\"", "/notes/db.md", true),
            ("\"runs host\"", "/notes/db.md", false),
            ("back*", "/notes/db.md", true),
            ("ackup*", "/notes/db.md", false),
            ("snake*", "/notes/db.md", false),
            ("postgres*", "/notes/db.md", true),
            ("staging -nightly", "/notes/db.md", false),
            ("staging -weekly", "/notes/db.md", true),
            ("staging -back*", "/notes/db.md", false),
            ("staging -\"runs host\"", "/notes/db.md", true),
            ("notes", "/notes/db.md", true),
            ("db.md", "/notes/db.md", true),
            ("staging path:notes/", "/notes/db.md", true),
            ("staging path:notes/ path:other", "/other/db.md", true),
            ("staging path:other/", "/notes/db.md", false),
            ("staging -path:notes/", "/notes/db.md", false),
            ("staging path:Notes/", "/notes/db.md", false),
        ];
        for (q, path, want) in table {
            assert_eq!(parse(q).unwrap().matches(path, content), *want, "{q} on {path}");
        }
    }

    #[test]
    fn index_terms_are_what_every_match_contains() {
        let q = parse("db \"exact phrase\" stag* -prod db path:x").unwrap();
        assert_eq!(q.index_terms(), vec!["db", "exact", "phrase", "stag"]);
    }

    #[test]
    fn the_index_filter_holds_for_every_match() {
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let table: &[(&str, &[&str], &[&str])] = &[
            ("db \"exact phrase\" stag* -prod db path:x", &["db", "exact phrase", "stag"], &["prod"]),
            ("\"zoë wrote\" -\"old   notes\"", &["wrote", "zoë"], &["old notes"]),
            ("a -ünï -back* -path:old", &["a"], &[]),
            ("-\"x y\" x", &["x"], &["x y"]),
        ];
        for (q, contains, excludes) in table {
            let filter = parse(q).unwrap().index_filter();
            assert_eq!(filter, IndexFilter { contains: own(contains), excludes: own(excludes) }, "{q}");
        }
    }

    proptest::proptest! {
        /// Whatever the text, a memory the rule matches holds every `contains` substring and no
        /// `excludes` one, in its path or content with whitespace collapsed and folded.
        #[test]
        fn the_index_filter_never_drops_a_match(
            words in proptest::collection::vec("(ab|b|a b|AB|é|\\s|x)", 0..12),
            q in "(-?(\"a b\"|ab|b\\*|é|x)[ ]){1,3}",
        ) {
            let content: String = words.concat();
            let Ok(query) = parse(&q) else { return Ok(()) };
            if query.matches("/m", &content) {
                let collapsed: String = index_text(&content).chars().map(fold).collect();
                proptest::prop_assert_eq!(&collapsed, &Prepared::new(&content).folded.iter().collect::<String>());
                let filter = query.index_filter();
                for c in &filter.contains {
                    proptest::prop_assert!(collapsed.contains(c.as_str()) || "/m".contains(c.as_str()), "{q:?} {content:?} {c:?}");
                }
                for e in &filter.excludes {
                    proptest::prop_assert!(!collapsed.contains(e.as_str()), "{q:?} {content:?} {e:?}");
                }
            }
        }
    }

    #[test]
    fn snippets_mark_matches_near_the_first_one() {
        let table: &[(&str, &str, &str)] = &[
            ("db", "the db and the DB", "the «db» and the «DB»"),
            ("\"a  b\"", "x a\n\nb y", "x «a b» y"),
            ("back*", "backups and outback", "«back»ups and outback"),
            ("zzz path:/", "no match here", "no match here"),
            ("needle", &format!("{} needle end", "word ".repeat(40)), &format!("…{}«needle» end", "word ".repeat(12))),
            ("start", &format!("start {}", "x".repeat(300)), &format!("«start» {}…", "x".repeat(194))),
            ("ab -abc", "ab abc", "«ab» «ab»c"),
        ];
        for (q, content, want) in table {
            assert_eq!(parse(q).unwrap().snippet(content), *want, "{q}");
        }
    }

    #[test]
    fn a_multibyte_word_where_path_would_be_is_a_word() {
        // "path:" is five bytes; these words' fifth byte is inside a character.
        for q in ["\u{11102}\u{1e005}", "abcd\u{e9}", "pat\u{e9}h:x"] {
            assert_eq!(parse(q).unwrap().terms.len(), 1, "{q:?}");
        }
    }

    proptest::proptest! {
        /// Whatever a person types, parsing answers (a query or an error) and a parsed query
        /// matches and makes snippets without failing.
        #[test]
        fn any_text_parses_or_is_refused_and_never_panics(q in "\\PC{0,40}", content in "\\PC{0,300}") {
            if let Ok(query) = parse(&q) {
                let _ = query.matches("/a/b.md", &content);
                let _ = query.snippet(&content);
                let _ = query.index_terms();
            }
        }
    }
}
