//! Every word one segment of the index holds, per field, for looking pieces up by substring.
//!
//! tantivy's term dictionary is a finite-state transducer: a word's prefix is found at once,
//! but a piece inside a word (`db` in `staging_db`) needs a walk of every word, state by state
//! — 17 ms at 100,000 memories, most of a search. Here the words of a field are one buffer,
//! each followed by `\n` (a word never holds one), searched with `memchr`'s substring finder:
//! well under a millisecond for the same words. A segment never changes once written, so its
//! vocabulary is built once, when the reader first sees the segment.

use std::collections::BTreeSet;

use mnemo_store::rules::search::index::PieceMatch;
use tantivy::SegmentReader;
use tantivy::schema::Field;

/// The words of a segment's path and content fields.
#[derive(Debug)]
pub(crate) struct Vocabulary {
    path: Vec<u8>,
    content: Vec<u8>,
}

/// Which field's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Path,
    Content,
}

impl Vocabulary {
    pub(crate) fn of(segment: &SegmentReader, path: Field, content: Field) -> tantivy::Result<Self> {
        Ok(Self { path: words(segment, path)?, content: words(segment, content)? })
    }

    /// Adds to `out` the words of `part` that hold `piece` as `how` says; `false` (and stops)
    /// once `out` would hold more than `max`.
    pub(crate) fn expand(
        &self,
        part: Part,
        piece: &str,
        how: PieceMatch,
        max: usize,
        out: &mut BTreeSet<String>,
    ) -> bool {
        let buffer = match part {
            Part::Path => &self.path,
            Part::Content => &self.content,
        };
        let needle = piece.as_bytes();
        if needle.is_empty() {
            return true;
        }
        if how == PieceMatch::Whole {
            // A whole word: one probe of `\nword\n`.
            let mut framed = Vec::with_capacity(needle.len() + 2);
            framed.push(b'\n');
            framed.extend_from_slice(needle);
            framed.push(b'\n');
            if memchr::memmem::find(buffer, &framed).is_some() {
                out.insert(piece.to_owned());
            }
            return out.len() <= max;
        }
        // The first hit in each word decides for the word (the finder's hits do not overlap,
        // so a later one inside the same word may never come: `bb` ends `bbb` at its second).
        let mut last_start = usize::MAX;
        for at in memchr::memmem::find_iter(buffer, needle) {
            let start = memchr::memrchr(b'\n', &buffer[..at]).map_or(0, |i| i + 1);
            if start == last_start {
                continue;
            }
            last_start = start;
            let end = at + memchr::memchr(b'\n', &buffer[at..]).unwrap_or(buffer.len() - at);
            let word = &buffer[start..end];
            let fits = match how {
                PieceMatch::Within | PieceMatch::Whole => true,
                PieceMatch::Start => word.starts_with(needle),
                PieceMatch::End => word.ends_with(needle),
            };
            // Words are whole UTF-8 strings cut at `\n`, which no UTF-8 sequence holds inside.
            if fits && let Ok(word) = std::str::from_utf8(word) {
                out.insert(word.to_owned());
                if out.len() > max {
                    return false;
                }
            }
        }
        true
    }
}

/// `\n` then every word of `field` in `segment`, each followed by `\n`.
fn words(segment: &SegmentReader, field: Field) -> tantivy::Result<Vec<u8>> {
    let index = segment.inverted_index(field)?;
    let mut out = vec![b'\n'];
    let mut stream = index.terms().stream()?;
    while stream.advance() {
        out.extend_from_slice(stream.key());
        out.push(b'\n');
    }
    out.shrink_to_fit();
    Ok(out)
}
