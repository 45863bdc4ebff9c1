//! What a word index holds of a memory and what it can find of a query.
//!
//! The query language promises substrings ([`super`]), but an index that can rank the best
//! twenty of 100,000 memories without reading them all holds **words**: each run of word
//! characters (letters, digits and `_`, folded with [`fold`]) of the path and the content,
//! at its position. A searched term is cut at its other characters into pieces, and each piece
//! is looked up among the index's words by how the term pins it:
//!
//! | term          | pieces (how each must sit in a word)                     |
//! |---------------|----------------------------------------------------------|
//! | `db`          | `db` anywhere in a word ([`PieceMatch::Within`])         |
//! | `staging-db-02` | a word ending in `staging`, then `db`, then a word starting with `02` |
//! | `back*`       | a word starting with `back`                              |
//! | `"two words"` | a word ending in `two`, then one starting with `words`   |
//!
//! Pieces of one term sit at consecutive positions. What the characters between them were is
//! not held, so the index may find more than match (`db 0` for `db-0`): the rule judges every
//! candidate ([`SearchQuery::matches`]). It never finds fewer — the property tests below check
//! it over any text and query. A word longer than [`WINDOW`] characters (a hash, a blob) is
//! held as overlapping windows at its one position, so that every piece of up to [`STEP`]
//! characters is still found inside it; longer pieces are looked up by a part of them.
//!
//! An **exclusion** may only be left to the index when the index answers it exactly (else it
//! would drop a true match): a word of word characters alone, of at most [`STEP`] characters
//! (`-draft`). Any other exclusion is the rule's alone (`-tmp*` too: a long word's later
//! windows start mid-word).

use super::{SearchQuery, TermKind, fold, is_word_char};

/// The longest word the index holds whole, in characters; longer ones are held as windows of
/// this length.
pub const WINDOW: usize = 64;
/// How far apart a long word's windows start: every run of up to this many characters plus one
/// lies inside one window.
pub const STEP: usize = WINDOW / 2;

/// One word of a text as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexWord {
    /// Folded with [`fold`].
    pub text: String,
    /// The how-manyth word of the text (windows of one long word share it).
    pub position: u32,
    /// Its byte range in the text.
    pub from: usize,
    pub to: usize,
}

/// The words of `text` for the index: runs of word characters after folding, long ones as
/// overlapping windows (starting every [`STEP`] characters, the last one ending with the word).
pub fn index_words(text: &str) -> Vec<IndexWord> {
    let mut out = Vec::new();
    let mut position = 0u32;
    let mut run: Vec<(usize, char)> = Vec::new();
    let mut flush = |run: &mut Vec<(usize, char)>, end: usize, out: &mut Vec<IndexWord>| {
        if run.is_empty() {
            return;
        }
        let byte_at = |i: usize| if i < run.len() { run[i].0 } else { end };
        let mut push = |from: usize, to: usize| {
            out.push(IndexWord {
                text: run[from..to].iter().map(|(_, c)| *c).collect(),
                position,
                from: byte_at(from),
                to: byte_at(to),
            });
        };
        if run.len() <= WINDOW {
            push(0, run.len());
        } else {
            let mut start = 0;
            while start + WINDOW < run.len() {
                push(start, start + WINDOW);
                start += STEP;
            }
            push(run.len() - WINDOW, run.len());
        }
        position += 1;
        run.clear();
    };
    for (at, c) in text.char_indices() {
        let folded = fold(c);
        if is_word_char(folded) {
            run.push((at, folded));
        } else {
            flush(&mut run, at, &mut out);
        }
    }
    flush(&mut run, text.len(), &mut out);
    out
}

/// How a piece of a term sits in an index word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceMatch {
    /// Anywhere inside the word.
    Within,
    /// At the word's start.
    Start,
    /// At the word's end.
    End,
    /// The whole word.
    Whole,
}

impl PieceMatch {
    /// Whether `piece`, placed this way, is in `word`.
    pub fn finds(self, piece: &str, word: &str) -> bool {
        match self {
            Self::Within => word.contains(piece),
            Self::Start => word.starts_with(piece),
            Self::End => word.ends_with(piece),
            Self::Whole => word == piece,
        }
    }
}

/// A piece of a term: folded word characters, and how it sits in its word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPiece {
    pub text: String,
    pub how: PieceMatch,
}

/// A term as the index looks for it: its pieces, one word after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexTerm {
    pub pieces: Vec<IndexPiece>,
    /// Whether the index's answer is the rule's exactly (a memory matches the term if and only
    /// if its words hold the pieces), so that an exclusion may be left to it.
    pub exact: bool,
}

/// What an index of words can look for in a query ([`SearchQuery::index_plan`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexPlan {
    /// Every match holds each of these in its path's or its content's words.
    pub terms: Vec<IndexTerm>,
    /// No match holds any of these (each [`IndexTerm::exact`]).
    pub excluded: Vec<IndexTerm>,
}

impl IndexTerm {
    /// `text` (folded, as a [`super::Term`] holds it) as pieces; `None` when it has no word
    /// character, so no word of the index can find it.
    fn of(kind: TermKind, text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split(|c: char| !is_word_char(c)).filter(|p| !p.is_empty()).collect();
        let last = parts.len().checked_sub(1)?;
        // A free end: the term's edge is inside a word, so its piece may continue there.
        let free_start = kind != TermKind::Prefix && text.starts_with(is_word_char);
        let free_end = kind == TermKind::Prefix || text.ends_with(is_word_char);
        let mut exact = parts.len() == 1 && kind != TermKind::Phrase;
        let pieces = parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let how = match (i == 0 && free_start, i == last && free_end) {
                    (true, true) => PieceMatch::Within,
                    (true, false) => PieceMatch::End,
                    (false, true) => PieceMatch::Start,
                    (false, false) => PieceMatch::Whole,
                };
                let chars: Vec<char> = part.chars().collect();
                // Longer pieces than the windows answer exactly are looked up by a part of them
                // that a window holds (a superset).
                let (text, how) = match how {
                    PieceMatch::Within if chars.len() > STEP => (chars[..STEP].iter().collect(), how),
                    PieceMatch::Start if chars.len() > WINDOW => (chars[..WINDOW].iter().collect(), how),
                    PieceMatch::End if chars.len() > WINDOW => (chars[chars.len() - WINDOW..].iter().collect(), how),
                    PieceMatch::Whole if chars.len() > WINDOW => (chars[..WINDOW].iter().collect(), PieceMatch::Start),
                    _ => ((*part).to_owned(), how),
                };
                if text != *part || how != PieceMatch::Within {
                    exact = false;
                }
                IndexPiece { text, how }
            })
            .collect();
        Some(Self { pieces, exact: exact && text.chars().all(is_word_char) })
    }

    /// Whether `words` (one text's [`index_words`]) hold this term's pieces one after the
    /// other — what an index answers for one field.
    pub fn found_in(&self, words: &[IndexWord]) -> bool {
        let Some(first) = self.pieces.first() else { return false };
        words.iter().filter(|w| first.how.finds(&first.text, &w.text)).any(|w| {
            self.pieces[1..].iter().enumerate().all(|(i, piece)| {
                let at = w.position + 1 + i as u32;
                words.iter().any(|v| v.position == at && piece.how.finds(&piece.text, &v.text))
            })
        })
    }
}

impl SearchQuery {
    /// What an index of [`index_words`] can look for: every searched term that has a word
    /// character, and the exclusions it answers exactly. `path:` terms are exact prefixes of the
    /// path, for the index to filter by as they are. An empty `terms` means the index cannot
    /// narrow the search (the backend scans).
    pub fn index_plan(&self) -> IndexPlan {
        let mut plan = IndexPlan::default();
        for term in &self.terms {
            let Some(indexed) = IndexTerm::of(term.kind, &term.text) else { continue };
            match (term.excluded, indexed.exact) {
                (false, _) => plan.terms.push(indexed),
                (true, true) => plan.excluded.push(indexed),
                (true, false) => {}
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::parse;
    use super::*;

    fn words(text: &str) -> Vec<(String, u32)> {
        index_words(text).into_iter().map(|w| (w.text, w.position)).collect()
    }

    #[test]
    fn words_are_folded_runs_of_word_characters() {
        let w = |s: &str, p: u32| (s.to_owned(), p);
        let table: &[(&str, Vec<(String, u32)>)] = &[
            ("", vec![]),
            ("  -- ", vec![]),
            ("Staging-DB-02", vec![w("staging", 0), w("db", 1), w("02", 2)]),
            ("snake_case x", vec![w("snake_case", 0), w("x", 1)]),
            ("Ünïcode  «ok»", vec![w("ünïcode", 0), w("ok", 1)]),
        ];
        for (text, want) in table {
            assert_eq!(&words(text), want, "{text:?}");
        }
        let ranges: Vec<(usize, usize)> = index_words("é-ab").iter().map(|w| (w.from, w.to)).collect();
        assert_eq!(ranges, [(0, 2), (3, 5)]);
    }

    #[test]
    fn a_long_word_is_held_as_windows_at_one_position() {
        let long: String = (0..100).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let held = index_words(&format!("x {long} y"));
        let windows: Vec<_> = held.iter().filter(|w| w.position == 1).collect();
        assert_eq!(windows.len(), 3, "0..64, 32..96, 36..100");
        assert!(windows.iter().all(|w| w.text.chars().count() == WINDOW));
        assert_eq!(windows[0].text, long[..64]);
        assert_eq!(windows[2].text, long[36..]);
        assert_eq!(held.last().map(|w| (w.text.as_str(), w.position)), Some(("y", 2)));
    }

    #[test]
    fn terms_become_pieces_pinned_where_the_term_pins_them() {
        use PieceMatch::*;
        let p = |text: &str, how| IndexPiece { text: text.into(), how };
        let table: &[(&str, Vec<IndexPiece>, bool)] = &[
            ("db", vec![p("db", Within)], true),
            ("snake_case", vec![p("snake_case", Within)], true),
            ("staging-db-02", vec![p("staging", End), p("db", Whole), p("02", Start)], false),
            ("db-0", vec![p("db", End), p("0", Start)], false),
            ("back*", vec![p("back", Start)], false),
            ("snake_c*", vec![p("snake_c", Start)], false),
            ("\"exact phrase\"", vec![p("exact", End), p("phrase", Start)], false),
            ("\"a b c\"", vec![p("a", End), p("b", Whole), p("c", Start)], false),
            (".db", vec![p("db", Start)], false),
            ("db.", vec![p("db", End)], false),
            ("«db»", vec![p("db", Whole)], false),
        ];
        for (q, want, exact) in table {
            let plan = parse(q).unwrap().index_plan();
            assert_eq!(plan.terms.len(), 1, "{q}");
            assert_eq!(&plan.terms[0].pieces, want, "{q}");
            assert_eq!(plan.terms[0].exact, *exact, "{q}");
        }
        let long = "x".repeat(40);
        let plan = parse(&long).unwrap().index_plan();
        assert_eq!(plan.terms[0].pieces, [p(&"x".repeat(STEP), Within)]);
        assert!(!plan.terms[0].exact);
        // Nothing a word can hold: left to the rule (and the backend scans).
        assert!(parse("«»").unwrap().index_plan().terms.is_empty());
    }

    #[test]
    fn only_exact_exclusions_reach_the_index() {
        let plan = parse("db -draft -tmp* -\"old notes\" -db-0 -x.y").unwrap().index_plan();
        let excluded: Vec<&str> = plan.excluded.iter().map(|t| t.pieces[0].text.as_str()).collect();
        assert_eq!(excluded, ["draft"]);
    }

    /// Texts and queries over a small alphabet, so that matches are frequent: word characters
    /// (one that folds, `_`), separators, whitespace.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(prop::sample::select(vec!['a', 'b', 'B', '_', '1', 'é', '-', '.', ' ', '\n']), 0..40)
            .prop_map(|c| c.into_iter().collect())
    }

    fn query() -> impl Strategy<Value = String> {
        let term = (text(), 0..4u8).prop_map(|(t, form)| {
            let t = t.split_whitespace().next().unwrap_or("a").trim_start_matches('-').replace('"', "");
            let t = if t.is_empty() { "a".to_owned() } else { t };
            match form {
                0 => t,
                1 => format!("{t}*"),
                2 => format!("\"{t} a\""),
                _ => format!("-{t}"),
            }
        });
        proptest::collection::vec(term, 1..4).prop_map(|t| format!("b {}", t.join(" ")))
    }

    proptest! {
        /// The index never loses a match: every match holds every planned term in its path's
        /// or its content's words, and no match holds a planned exclusion.
        #[test]
        fn the_plan_finds_every_match(q in query(), path in text(), content in text()) {
            let Ok(query) = parse(&q) else { return Ok(()) };
            let plan = query.index_plan();
            let (pw, cw) = (index_words(&path), index_words(&content));
            if query.matches(&path, &content) {
                for term in &plan.terms {
                    prop_assert!(term.found_in(&pw) || term.found_in(&cw), "{q:?} {term:?} {path:?} {content:?}");
                }
                for term in &plan.excluded {
                    prop_assert!(!term.found_in(&pw) && !term.found_in(&cw), "{q:?} {term:?}");
                }
            }
        }

        /// An exact term is found exactly where the rule finds it.
        #[test]
        fn exact_terms_are_the_rule(t in "[abB_1é]{1,40}", star in any::<bool>(), content in text(), long in "[ab_]{0,150}") {
            let q = if star { format!("{t}*") } else { t };
            let query = parse(&q).unwrap();
            let term = &query.index_plan().terms[0];
            let content = format!("{content}{long}");
            if term.exact {
                prop_assert_eq!(term.found_in(&index_words(&content)), query.matches("", &content), "{}", q);
            }
        }

        /// Long words: a piece of up to STEP characters is found inside one window.
        #[test]
        fn pieces_are_found_inside_long_words(word in "[ab]{60,200}", from in 0usize..200, len in 1usize..=STEP) {
            let from = from % word.len();
            let piece = &word[from..(from + len).min(word.len())];
            let query = parse(piece).unwrap();
            prop_assert!(query.index_plan().terms[0].found_in(&index_words(&word)));
        }
    }
}
