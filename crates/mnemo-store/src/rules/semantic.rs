//! Semantic search (`mode=semantic|hybrid` of `memories:search`, when the server has an
//! embeddings provider): what a query means as text to embed, how vectors are stored and
//! compared, and how two rankings are fused.
//!
//! | mode       | ranks                                                                                       |
//! |------------|---------------------------------------------------------------------------------------------|
//! | `text`     | the full-text ranking of [`super::search`] (every searched term must match)                 |
//! | `semantic` | memories by their meaning's closeness to the query's; a memory not embedded yet joins by its full-text rank |
//! | `hybrid`   | both rankings fused by reciprocal rank ([`fuse`]): a memory found by either is found        |
//!
//! In every mode a query's narrowing terms hold: `path:`, `-path:` and `-excluded` terms
//! ([`SearchQuery::narrows`]). Vectors are unit length (the embedder scales them), so their dot
//! product is the cosine similarity.

use std::collections::HashMap;
use std::hash::Hash;

use super::search::SearchQuery;

/// The constant of reciprocal rank fusion: a result at rank `r` (from 1) of a ranking scores
/// `1 / (RRF_K + r)`. 60 is the value of the method's paper, and what most search engines use.
pub const RRF_K: f64 = 60.0;
/// The most results a semantic or hybrid search ranks: pages end there.
pub const MAX_RANKED: u64 = 1_000;
/// The fewest results of each ranking a fused page is built from (so the first pages agree
/// with each other).
pub const MIN_DEPTH: u64 = 100;

/// How a search ranks (`mode`): the API's type.
pub use mnemo_api::SearchMode;

/// Why a search by meaning cannot run on a server without an embeddings provider (a `400`).
pub fn no_provider(mode: SearchMode) -> String {
    format!(
        "`mode={}` ranks by meaning, which needs an embeddings provider: this server has none (name one in the `[embeddings]` table of `mnemo serve --models FILE`); search with `mode=text`",
        mode.as_str()
    )
}

/// What a search by meaning says when it answered by full text because the provider could not
/// embed the query (`why`).
pub fn fallback_notice(mode: SearchMode, why: &str) -> String {
    format!(
        "ranked by full text only: the embeddings provider could not embed the query ({why}); try `mode={}` again later",
        mode.as_str()
    )
}

/// How deep each ranking of a fused page reads: the page's end and one more, at least
/// [`MIN_DEPTH`], at most [`MAX_RANKED`].
pub fn depth(page_end: u64) -> u64 {
    (page_end + 1).clamp(MIN_DEPTH, MAX_RANKED)
}

impl SearchQuery {
    /// What the query means, as text to embed: its searched words, phrases and prefix stems in
    /// order, space-separated (exclusions and path terms narrow, they are not meaning).
    pub fn meaning(&self) -> String {
        let words: Vec<&str> = self.terms.iter().filter(|t| !t.excluded).map(|t| t.text.as_str()).collect();
        words.join(" ")
    }

    /// Whether a memory passes the query's narrowing terms (`path:`, `-path:`, `-excluded`):
    /// what a semantic result must pass, as it need not contain the searched words.
    pub fn narrows(&self, path: &str, content: &str) -> bool {
        let narrowing = SearchQuery {
            terms: self.terms.iter().filter(|t| t.excluded).cloned().collect(),
            paths: self.paths.clone(),
            excluded_paths: self.excluded_paths.clone(),
        };
        narrowing.matches(path, content)
    }

    /// Whether a path passes the query's path terms (checked before a memory's content is read).
    pub fn narrows_path(&self, path: &str) -> bool {
        (self.paths.is_empty() || self.paths.iter().any(|p| path.starts_with(p.as_str())))
            && !self.excluded_paths.iter().any(|p| path.starts_with(p.as_str()))
    }
}

/// A vector as stored: little-endian `f32`s.
pub fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector; `None` for bytes that are not a whole, non-empty number of `f32`s.
pub fn decode(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The similarity of a stored vector (`bytes`, [`encode`]d) to `query`: their dot product,
/// read straight from the bytes; `None` when their lengths differ (another model's vector).
pub fn similarity(query: &[f32], bytes: &[u8]) -> Option<f32> {
    if bytes.len() != query.len() * 4 {
        return None;
    }
    Some(bytes.chunks_exact(4).zip(query).map(|(c, q)| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * q).sum())
}

/// The `n` best of `scored`, best first; equal scores keep their order in `scored`.
pub fn best<T>(mut scored: Vec<(T, f32)>, n: usize) -> Vec<(T, f32)> {
    let by_score = |a: &(T, f32), b: &(T, f32)| b.1.total_cmp(&a.1);
    if scored.len() > n {
        // Partition first (linear), then sort only the kept ones; the stable sort after keeps
        // ties in input order among what is kept.
        scored.select_nth_unstable_by(n, by_score);
        scored.truncate(n);
    }
    scored.sort_by(by_score);
    scored
}

/// Reciprocal rank fusion of rankings (each best first, without repeats): every key scores
/// the sum over the rankings holding it of `1 / (RRF_K + rank)`; best first, ties in order of
/// first appearance (the first ranking's order first).
pub fn fuse<K: Eq + Hash + Clone>(rankings: &[Vec<K>]) -> Vec<(K, f64)> {
    let mut scores: HashMap<K, (f64, usize)> = HashMap::new();
    let mut order = 0usize;
    for ranking in rankings {
        for (at, key) in ranking.iter().enumerate() {
            let add = 1.0 / (RRF_K + at as f64 + 1.0);
            scores.entry(key.clone()).and_modify(|(s, _)| *s += add).or_insert_with(|| {
                order += 1;
                (add, order)
            });
        }
    }
    let mut out: Vec<(K, f64, usize)> = scores.into_iter().map(|(k, (s, o))| (k, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(k, s, _)| (k, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::search::parse;

    #[test]
    fn modes_read_their_wire_names_only() {
        for mode in [SearchMode::Text, SearchMode::Semantic, SearchMode::Hybrid] {
            assert_eq!(SearchMode::parse(mode.as_str()), Ok(mode));
        }
        assert_eq!(SearchMode::default(), SearchMode::Text);
        let e = SearchMode::parse("Semantic").unwrap_err();
        assert_eq!(e, "`mode` is `text`, `semantic` or `hybrid` (got `Semantic`)");
    }

    #[test]
    fn a_query_means_its_searched_terms_and_narrows_by_the_rest() {
        let table: &[(&str, &str)] = &[
            ("staging database", "staging database"),
            ("\"Staging  DB\" host*", "staging db host"),
            ("postgres -legacy path:ops/ -path:ops/old/", "postgres"),
        ];
        for (q, meaning) in table {
            assert_eq!(parse(q).unwrap().meaning(), *meaning, "{q}");
        }
        let q = parse("postgres -legacy path:ops/ -path:ops/old/").unwrap();
        let cases: &[(&str, &str, bool)] = &[
            ("/ops/db.md", "the database", true), // need not contain `postgres`
            ("/ops/db.md", "a legacy database", false),
            ("/notes/db.md", "the database", false),
            ("/ops/old/db.md", "the database", false),
        ];
        for (path, content, want) in cases {
            assert_eq!(q.narrows(path, content), *want, "{path} {content}");
            assert_eq!(q.narrows_path(path), !path.starts_with("/notes") && !path.starts_with("/ops/old"));
        }
    }

    #[test]
    fn vectors_round_trip_and_compare_only_at_one_length() {
        let v = [0.6f32, -0.8, 0.0];
        let bytes = encode(&v);
        assert_eq!(bytes.len(), 12);
        assert_eq!(decode(&bytes).unwrap(), v);
        assert_eq!(decode(&bytes[..5]), None);
        assert_eq!(decode(&[]), None);
        assert!((similarity(&v, &bytes).unwrap() - 1.0).abs() < 1e-6);
        assert!((similarity(&[0.0, 1.0, 0.0], &bytes).unwrap() + 0.8).abs() < 1e-6);
        assert_eq!(similarity(&[1.0, 0.0], &bytes), None);
    }

    #[test]
    fn best_keeps_the_top_in_order_and_ties_in_input_order() {
        let scored = vec![("a", 0.1), ("b", 0.9), ("c", 0.5), ("d", 0.9), ("e", -1.0)];
        assert_eq!(best(scored.clone(), 3), vec![("b", 0.9), ("d", 0.9), ("c", 0.5)]);
        assert_eq!(best(scored.clone(), 10).len(), 5);
        assert_eq!(best(scored, 0), vec![]);
    }

    #[test]
    fn fusion_rewards_agreement_and_keeps_what_either_found() {
        let text = vec!["a", "b", "c"];
        let meaning = vec!["c", "d", "a"];
        let fused: Vec<&str> = fuse(&[text.clone(), meaning.clone()]).into_iter().map(|(k, _)| k).collect();
        // a: 1/61 + 1/63; c: 1/63 + 1/61 (tie: a appeared first); b: 1/62; d: 1/62 (b first).
        assert_eq!(fused, vec!["a", "c", "b", "d"]);
        let one = fuse(std::slice::from_ref(&text));
        assert_eq!(one.iter().map(|(k, _)| *k).collect::<Vec<_>>(), text);
        assert!((one[0].1 - 1.0 / 61.0).abs() < 1e-12);
        assert!(fuse::<&str>(&[vec![], vec![]]).is_empty());
    }

    #[test]
    fn refusals_and_notices_say_what_to_do() {
        let refusal = no_provider(SearchMode::Hybrid);
        assert!(refusal.starts_with("`mode=hybrid` ranks by meaning"), "{refusal}");
        assert!(refusal.contains("[embeddings]") && refusal.ends_with("search with `mode=text`"), "{refusal}");
        let notice = fallback_notice(SearchMode::Semantic, "timed out");
        assert_eq!(
            notice,
            "ranked by full text only: the embeddings provider could not embed the query (timed out); try `mode=semantic` again later"
        );
    }

    #[test]
    fn depth_reads_past_the_page_within_bounds() {
        let table = [(0, 100), (20, 100), (99, 100), (100, 101), (500, 501), (5_000, 1_000)];
        for (page_end, want) in table {
            assert_eq!(depth(page_end), want, "{page_end}");
        }
    }
}
