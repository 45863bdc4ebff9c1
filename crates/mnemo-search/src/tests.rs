use mnemo_store::rules::search::parse;
use proptest::prelude::*;

use super::*;

fn memory<'a>(seq: u64, store: u64, path: &'a str, content: &'a str) -> IndexedMemory<'a> {
    IndexedMemory { seq, store, path, content }
}

const EVERYWHERE: Scope<'static> = Scope { stores: &[1, 2], paths: &[], excluded_paths: &[], path_prefix: None };

fn find(index: &SearchIndex, q: &str, scope: &Scope<'_>) -> Option<Vec<u64>> {
    let plan = parse(q).unwrap().index_plan();
    index.search(&plan, scope, 0, 100).unwrap().map(|hits| hits.into_iter().map(|h| h.seq).collect())
}

fn sorted(q: &str, index: &SearchIndex) -> Vec<u64> {
    let mut seqs = find(index, q, &EVERYWHERE).unwrap_or_else(|| panic!("{q}: the index should narrow it"));
    seqs.sort_unstable();
    seqs
}

fn notes() -> SearchIndex {
    let index = SearchIndex::in_memory();
    index
        .write(
            &[],
            &[
                memory(1, 1, "/ops/staging.md", "The staging-db-02 host runs Postgres 15."),
                memory(2, 1, "/ops/prod.md", "Production uses prod-db-01; never touch it by hand."),
                memory(3, 1, "/code/style.md", "We write snake_case names and back up nightly."),
                memory(4, 2, "/notes/other.md", "Another store's note about the staging database."),
                memory(5, 1, "/notes/backlog.md", "backlog: database vacuum, staging cleanup"),
            ],
            "1",
        )
        .unwrap();
    index
}

#[test]
fn finds_what_the_query_language_promises() {
    let index = notes();
    let table: &[(&str, &[u64])] = &[
        ("staging", &[1, 4, 5]),
        ("STAGING database", &[4, 5]),
        ("staging-db-02", &[1]),
        ("db-0", &[1, 2]),
        ("snake_case", &[3]),
        ("case", &[3]),
        ("back*", &[3, 5]),
        ("ack*", &[]),
        ("\"staging database\"", &[4]),
        ("\"up nightly\"", &[3]),
        ("staging -backlog", &[1, 4]),
        ("database -vacuum", &[4]),
        ("ops", &[1, 2]),
        ("nowhere", &[]),
    ];
    for (q, want) in table {
        assert_eq!(sorted(q, &index), *want, "{q}");
    }
}

#[test]
fn scopes_are_exact() {
    let index = notes();
    assert_eq!(find(&index, "staging", &Scope { stores: &[2], ..EVERYWHERE }), Some(vec![4]));
    assert_eq!(find(&index, "staging", &Scope { stores: &[], ..EVERYWHERE }), Some(vec![]));
    let paths = ["/notes/".to_owned()];
    let scope = Scope { paths: &paths, ..EVERYWHERE };
    let mut found = find(&index, "staging", &scope).unwrap();
    found.sort_unstable();
    assert_eq!(found, [4, 5]);
    let scope = Scope { excluded_paths: &paths, ..EVERYWHERE };
    assert_eq!(find(&index, "staging", &scope), Some(vec![1]));
    let scope = Scope { path_prefix: Some("/ops/"), ..EVERYWHERE };
    assert_eq!(
        find(&index, "db", &scope).map(|mut s| {
            s.sort_unstable();
            s
        }),
        Some(vec![1, 2])
    );
    // A prefix is a prefix: `/op` is not `/ops/` alone, `/ops` would not be `/opsx/`.
    let scope = Scope { path_prefix: Some("/ops"), ..EVERYWHERE };
    assert_eq!(find(&index, "backlog", &scope), Some(vec![]));
}

#[test]
fn a_term_named_often_and_in_the_path_ranks_first() {
    let index = SearchIndex::in_memory();
    let long = format!("{} staging once {}", "filler words here ".repeat(200), "more filler ".repeat(100));
    index
        .write(
            &[],
            &[
                memory(1, 1, "/misc/long.md", &long),
                memory(2, 1, "/staging/staging.md", "staging staging staging staging staging"),
                memory(3, 1, "/misc/short.md", "staging once"),
            ],
            "1",
        )
        .unwrap();
    let hits = index.search(&parse("staging").unwrap().index_plan(), &EVERYWHERE, 0, 10).unwrap().unwrap();
    let order: Vec<u64> = hits.iter().map(|h| h.seq).collect();
    assert_eq!(order, [2, 3, 1]);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    // Pages are positions in that ranking.
    let page = index.search(&parse("staging").unwrap().index_plan(), &EVERYWHERE, 1, 1).unwrap().unwrap();
    assert_eq!(page.iter().map(|h| h.seq).collect::<Vec<_>>(), [3]);
}

#[test]
fn a_phrase_of_common_words_is_ranked_by_its_words_until_tightened() {
    let index = SearchIndex::in_memory();
    let texts = ["staging database here", "database of staging", "staging and database", "the staging database"];
    let memories: Vec<IndexedMemory<'_>> =
        texts.iter().enumerate().map(|(i, t)| memory(i as u64 + 1, 1, "/n.md", t)).collect();
    index.write(&[], &memories, "1").unwrap();
    let plan = parse("\"staging database\"").unwrap().index_plan();
    let mut prepared = index.prepare(&plan, &EVERYWHERE).unwrap();
    let seqs = |p: &PreparedSearch| {
        let mut s: Vec<u64> = p.hits(0, 10).unwrap().into_iter().map(|h| h.seq).collect();
        s.sort_unstable();
        s
    };
    // Both words are in every memory: loose, every memory holding them is a candidate.
    assert_eq!(seqs(&prepared), [1, 2, 3, 4]);
    assert!(prepared.tighten());
    assert_eq!(seqs(&prepared), [1, 4], "then by their positions");
    assert!(!prepared.tighten(), "once");
    // A phrase with a rare word is exact from the start.
    let mut rare = index.prepare(&parse("\"the staging\"").unwrap().index_plan(), &EVERYWHERE).unwrap();
    assert_eq!(seqs(&rare), [4]);
    assert!(!rare.tighten());
}

#[test]
fn removed_and_replaced_memories_are_gone_at_once() {
    let index = notes();
    index.write(&[1], &[memory(2, 1, "/ops/prod.md", "rewritten: nothing about databases")], "2").unwrap();
    assert_eq!(sorted("staging-db", &index), Vec::<u64>::new());
    assert_eq!(sorted("prod-db", &index), Vec::<u64>::new());
    assert_eq!(sorted("rewritten", &index), [2]);
    assert!(!index.holds(1).unwrap());
    assert_eq!(index.len(), 4);
    index.clear("3").unwrap();
    assert!(index.is_empty());
    assert_eq!(index.payload().unwrap().as_deref(), Some("3"));
}

#[test]
fn too_broad_a_term_is_left_to_the_backend() {
    let index = SearchIndex::in_memory();
    let many: Vec<String> = (0..query::MAX_WORDS + 10).map(|i| format!("a{i} word{i}z")).collect();
    let memories: Vec<IndexedMemory<'_>> =
        many.iter().enumerate().map(|(i, c)| memory(i as u64, 1, "/m.md", c)).collect();
    index.write(&[], &memories, "1").unwrap();
    assert_eq!(find(&index, "a", &EVERYWHERE), None, "`a` is in every word");
    // Beside a term the index can look up, the broad one is the rule's alone.
    assert_eq!(find(&index, "a word17z", &EVERYWHERE), Some(vec![17]));
    // Nothing holds it: nothing matches, broad or not.
    assert_eq!(find(&index, "a zzz", &EVERYWHERE), Some(vec![]));
}

#[test]
fn a_long_word_is_found_by_any_part() {
    let index = SearchIndex::in_memory();
    let blob: String = (0..300).map(|i| char::from(b'a' + ((i * 7) % 26) as u8)).collect();
    index.write(&[], &[memory(1, 1, "/blob.md", &format!("key={blob};"))], "1").unwrap();
    for from in [0, 40, 150, 268] {
        let piece = &blob[from..from + 32];
        assert_eq!(sorted(piece, &index), [1], "{piece}");
    }
    assert_eq!(sorted(&format!("key={}", &blob[..80]), &index), [1]);
}

#[test]
fn the_index_on_disk_is_kept_or_built_again() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("index");
    {
        let index = SearchIndex::open(&at).unwrap();
        assert_eq!(index.payload().unwrap(), None);
        index.write(&[], &[memory(1, 1, "/a.md", "kept across opens")], "gen 1").unwrap();
        index.close();
    }
    let index = SearchIndex::open(&at).unwrap();
    assert_eq!(index.payload().unwrap().as_deref(), Some("gen 1"));
    assert_eq!(sorted("across", &index), [1]);
    drop(index);
    // Something that is not an index: replaced by an empty one.
    std::fs::write(at.join("meta.json"), "not json").unwrap();
    let index = SearchIndex::open(&at).unwrap();
    assert_eq!(index.payload().unwrap(), None);
    assert!(index.is_empty());
}

/// Texts over a small alphabet, so terms match often.
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop::sample::select(vec!['a', 'b', 'B', '_', '1', 'é', '-', '.', ' ', '\n']), 0..30)
        .prop_map(|c| c.into_iter().collect())
}

fn query() -> impl Strategy<Value = String> {
    let term = (text(), 0..4u8).prop_map(|(t, form)| {
        let t = t.split_whitespace().next().unwrap_or("a").trim_start_matches('-').replace('"', "");
        let t = if t.is_empty() { "b".to_owned() } else { t };
        match form {
            0 => t,
            1 => format!("{t}*"),
            2 => format!("\"{t} b\""),
            _ => format!("-{t}"),
        }
    });
    proptest::collection::vec(term, 1..4).prop_map(|t| t.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The index never loses a match: every memory the rule matches is among the hits.
    #[test]
    fn every_match_is_found(q in query(), docs in proptest::collection::vec((text(), text()), 1..12)) {
        let Ok(query) = parse(&q) else { return Ok(()) };
        let index = SearchIndex::in_memory();
        let paths: Vec<String> = docs.iter().map(|(p, _)| format!("/{p}")).collect();
        let memories: Vec<IndexedMemory<'_>> = docs
            .iter()
            .enumerate()
            .map(|(i, (_, content))| memory(i as u64, 1, &paths[i], content))
            .collect();
        index.write(&[], &memories, "1").unwrap();
        let Some(hits) = index.search(&query.index_plan(), &EVERYWHERE, 0, 100).unwrap() else { return Ok(()) };
        let hits: Vec<u64> = hits.into_iter().map(|h| h.seq).collect();
        for (i, (_, content)) in docs.iter().enumerate() {
            if query.matches(&paths[i], content) {
                prop_assert!(hits.contains(&(i as u64)), "{q:?} lost {:?} {content:?}", paths[i]);
            }
        }
    }
}
