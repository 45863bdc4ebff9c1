//! An [`IndexPlan`] as a tantivy query over the index's words.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use mnemo_store::rules::search::index::{IndexPlan, IndexTerm, PieceMatch};
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, Occur, Query, RangeQuery, RegexPhraseQuery, TermQuery,
    TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{Searcher, Term};

use crate::vocabulary::{Part, Vocabulary};
use crate::{Fields, Scope};

/// The most words one piece of a single-piece term may stand for; a piece that stands for more
/// (`a`, `e`) narrows nothing worth ranking, and is left to the rule.
pub(crate) const MAX_WORDS: usize = 1024;
/// The same for a piece of a phrase (its words become one pattern for the positions).
pub(crate) const MAX_PHRASE_WORDS: usize = 128;

/// A path hit weighs this many content hits.
const PATH_BOOST: f32 = 2.0;

/// A phrase is first ranked as its pieces alone, without their positions, when it is likely
/// to stand in enough of the memories holding its words: reading the positions of every memory
/// holding two common words costs tens of milliseconds at 100,000, and the rule judges the
/// order. Each piece must stand in a quarter of the memories (and in this many), and the phrase
/// must be expected [`LOOSE_EXPECTED`] times per memory (its words' shares of every word held,
/// multiplied, times a memory's words), so that the first
/// [`LOOSE_CANDIDATES`](crate::LOOSE_CANDIDATES) memories hold a page of it. In the bench at
/// 100,000: "mutat vocule" expects 0.27 (loose: 10 ms, by positions 40–80 ms); "jalexjen
/// gardanhit" 0.010, its words in 98 % and 70 % of the memories (by positions: ~15 ms; loose,
/// it failed and then read the positions: 42–61 ms).
#[cfg(not(test))]
pub(crate) const LOOSE_FROM_MEMORIES: u64 = 1_000;
/// (A handful in this crate's tests.)
#[cfg(test)]
pub(crate) const LOOSE_FROM_MEMORIES: u64 = 3;
/// The share of the memories each piece of a loosely ranked phrase stands in, at least.
const LOOSE_FROM_SHARE: u64 = 4;
/// How many times a loosely ranked phrase is expected in a memory, at least: 0.15 puts it in
/// one memory of seven holding its words, 21 of 150 (a first page and the sign of a next).
#[cfg(not(test))]
const LOOSE_EXPECTED: f64 = 0.15;
#[cfg(test)]
const LOOSE_EXPECTED: f64 = 0.1;

/// The queries of a search: `strict` finds phrases by their words' positions; `loose`, when a
/// phrase is made of common words, by the words alone (more candidates, far cheaper).
pub(crate) struct Built {
    pub(crate) strict: Box<dyn Query>,
    pub(crate) loose: Option<Box<dyn Query>>,
}

/// What a term comes to.
enum Looked {
    /// The index can look it up (`loose`: also without positions).
    Query { strict: Box<dyn Query>, loose: Option<Box<dyn Query>> },
    /// No word of the index holds it: nothing matches.
    Nothing,
    /// Too broad to look up: the rule alone judges it.
    Broad,
}

/// The queries for `plan` in `scope`; `None` when no term can be looked up.
pub(crate) fn build(
    fields: &Fields,
    searcher: &Searcher,
    vocabularies: &[Arc<Vocabulary>],
    plan: &IndexPlan,
    scope: &Scope<'_>,
) -> Option<Built> {
    let mut strict: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut loose: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut loosened = false;
    let mut nothing = false;
    for term in &plan.terms {
        match look_up(fields, searcher, vocabularies, term) {
            Looked::Query { strict: s, loose: l } => {
                loosened |= l.is_some();
                loose.push((Occur::Must, l.unwrap_or_else(|| s.box_clone())));
                strict.push((Occur::Must, s));
            }
            Looked::Nothing => nothing = true,
            Looked::Broad => {}
        }
    }
    if strict.is_empty() && !nothing {
        return None;
    }
    if nothing {
        return Some(Built { strict: Box::new(EmptyQuery), loose: None });
    }
    let mut shared: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for term in &plan.excluded {
        let [piece] = term.pieces.as_slice() else { continue };
        for (part, field) in [(Part::Content, fields.content), (Part::Path, fields.path)] {
            let Some(words) = expand(vocabularies, part, &piece.text, piece.how, MAX_WORDS) else { continue };
            for word in words {
                shared.push((Occur::MustNot, Box::new(TermQuery::new(text(field, &word), IndexRecordOption::Basic))));
            }
        }
    }
    let stores = TermSetQuery::new(scope.stores.iter().map(|s| Term::from_field_u64(fields.store, *s)));
    shared.push((Occur::Must, filter(Box::new(stores))));
    if !scope.paths.is_empty() {
        let any: Vec<(Occur, Box<dyn Query>)> =
            scope.paths.iter().map(|p| (Occur::Should, prefix(fields.path_raw, p))).collect();
        shared.push((Occur::Must, filter(Box::new(BooleanQuery::new(any)))));
    }
    for p in scope.excluded_paths {
        shared.push((Occur::MustNot, prefix(fields.path_raw, p)));
    }
    if let Some(p) = scope.path_prefix {
        shared.push((Occur::Must, filter(prefix(fields.path_raw, p))));
    }
    let loose = loosened.then(|| {
        loose.extend(shared.iter().map(|(occur, q)| (*occur, q.box_clone())));
        Box::new(BooleanQuery::new(loose)) as Box<dyn Query>
    });
    strict.extend(shared);
    Some(Built { strict: Box::new(BooleanQuery::new(strict)), loose })
}

/// A term as the words that hold its pieces, in the path (weighted) or the content.
fn look_up(fields: &Fields, searcher: &Searcher, vocabularies: &[Arc<Vocabulary>], term: &IndexTerm) -> Looked {
    let single = term.pieces.len() == 1;
    let max = if single { MAX_WORDS } else { MAX_PHRASE_WORDS };
    // Each kept piece, at its offset in the term, with its words in the content and the path.
    // A piece too broad in either field is dropped from both (the others keep their offsets).
    let mut kept: Vec<(usize, [BTreeSet<String>; 2])> = Vec::new();
    for (offset, piece) in term.pieces.iter().enumerate() {
        let content = expand(vocabularies, Part::Content, &piece.text, piece.how, max);
        let path = expand(vocabularies, Part::Path, &piece.text, piece.how, max);
        if let (Some(content), Some(path)) = (content, path) {
            kept.push((offset, [content, path]));
        }
    }
    if kept.is_empty() {
        return Looked::Broad;
    }
    // Common words side by side in most memories (in the content): positions are read only if
    // the words alone do not find enough.
    let common = kept.len() > 1
        && kept.iter().all(|(_, words)| {
            let memories: u64 = words[0].iter().map(|w| searcher.doc_freq(&text(fields.content, w)).unwrap_or(0)).sum();
            memories >= LOOSE_FROM_MEMORIES.max(searcher.num_docs() / LOOSE_FROM_SHARE)
        })
        && expected(searcher, fields.content, kept.iter().map(|(_, words)| &words[0])) >= LOOSE_EXPECTED;
    let mut strict: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut loose: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for (i, (field, boost)) in [(fields.content, 1.0), (fields.path, PATH_BOOST)].into_iter().enumerate() {
        if kept.iter().any(|(_, words)| words[i].is_empty()) {
            continue;
        }
        let weigh = |q: Box<dyn Query>| -> Box<dyn Query> {
            if boost == 1.0 { q } else { Box::new(BoostQuery::new(q, boost)) }
        };
        let any_word = |words: &BTreeSet<String>| -> Box<dyn Query> {
            let any: Vec<(Occur, Box<dyn Query>)> = words
                .iter()
                .map(|w| (Occur::Should, Box::new(TermQuery::new(text(field, w), IndexRecordOption::WithFreqs)) as _))
                .collect();
            Box::new(BooleanQuery::new(any))
        };
        if let [(_, words)] = kept.as_slice() {
            strict.push((Occur::Should, weigh(any_word(&words[i]))));
            continue;
        }
        let first = kept[0].0;
        let patterns = kept
            .iter()
            .map(|(offset, words)| {
                // Words are word characters only: nothing in them needs escaping.
                let alternatives: Vec<&str> = words[i].iter().map(String::as_str).collect();
                (offset - first, format!("(?:{})", alternatives.join("|")))
            })
            .collect();
        strict.push((Occur::Should, weigh(Box::new(RegexPhraseQuery::new_with_offset(field, patterns)))));
        if common {
            let all: Vec<(Occur, Box<dyn Query>)> =
                kept.iter().map(|(_, words)| (Occur::Must, any_word(&words[i]))).collect();
            loose.push((Occur::Should, weigh(Box::new(BooleanQuery::new(all)))));
        }
    }
    if strict.is_empty() {
        return Looked::Nothing;
    }
    let loose = common.then(|| Box::new(BooleanQuery::new(loose)) as Box<dyn Query>);
    Looked::Query { strict: Box::new(BooleanQuery::new(strict)), loose }
}

/// How many times words of each set, side by side in that order, are expected in one memory's
/// `field`: the sets' shares of every word held, multiplied, times the words of a memory.
fn expected<'a>(searcher: &Searcher, field: Field, sets: impl Iterator<Item = &'a BTreeSet<String>>) -> f64 {
    let segments = searcher.segment_readers();
    let held: u64 = segments.iter().filter_map(|s| s.inverted_index(field).ok()).map(|i| i.total_num_tokens()).sum();
    let memories = searcher.num_docs();
    if held == 0 || memories == 0 {
        return 0.0;
    }
    let mut chance = held as f64 / memories as f64;
    for words in sets {
        let mut occurrences = 0u64;
        for segment in segments {
            let Ok(index) = segment.inverted_index(field) else { continue };
            for word in words {
                let Ok(Some(mut postings)) =
                    index.read_block_postings(&text(field, word), IndexRecordOption::WithFreqs)
                else {
                    continue;
                };
                while !postings.docs().is_empty() {
                    occurrences += postings.freqs().iter().map(|f| u64::from(*f)).sum::<u64>();
                    postings.advance();
                }
            }
        }
        chance *= occurrences as f64 / held as f64;
    }
    chance
}

/// The words of `part` holding `piece` as `how` says, over every segment; `None` when more
/// than `max`.
fn expand(
    vocabularies: &[Arc<Vocabulary>],
    part: Part,
    piece: &str,
    how: PieceMatch,
    max: usize,
) -> Option<BTreeSet<String>> {
    let mut words = BTreeSet::new();
    for vocabulary in vocabularies {
        if !vocabulary.expand(part, piece, how, max, &mut words) {
            return None;
        }
    }
    Some(words)
}

fn text(field: Field, word: &str) -> Term {
    Term::from_field_text(field, word)
}

/// A filter: it decides, it does not score.
fn filter(query: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(query, 0.0))
}

/// Paths starting with `start`: the range from it to the first string after every string that
/// starts with it.
fn prefix(field: Field, start: &str) -> Box<dyn Query> {
    let lower = Bound::Included(text(field, start));
    let upper = match successor(start) {
        Some(after) => Bound::Excluded(text(field, &after)),
        None => Bound::Unbounded,
    };
    Box::new(RangeQuery::new(lower, upper))
}

/// The first string after every string starting with `s` (its last character that can grow,
/// grown; what follows it dropped); `None` when there is none.
fn successor(s: &str) -> Option<String> {
    let mut chars: Vec<char> = s.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::successor;

    #[test]
    fn the_successor_of_a_prefix_follows_every_string_it_starts() {
        assert_eq!(successor("/notes/").as_deref(), Some("/notes0"));
        assert_eq!(successor("a\u{d7ff}").as_deref(), Some("a\u{e000}"));
        assert_eq!(successor("a\u{10ffff}").as_deref(), Some("b"));
        assert_eq!(successor("\u{10ffff}"), None);
        for s in ["/notes/", "/notes/x", "/notes/\u{10ffff}"] {
            assert!(*s < *successor("/notes/").unwrap(), "{s}");
        }
    }
}
