//! Stories a multi-writer backend can fail: each runs its writers as tasks on a multi-thread
//! runtime, on clones of one `Arc<dyn Store>`, and repeats for several rounds so that a race
//! has its chances. Nothing here depends on timing; every check is on outcomes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::join_all;
use mnemo_api::{MemoryListItem, View, WorkId, content_sha256};
use mnemo_store::{Limits, MemoryChange, StoreError};

use super::fixtures::{
    all_memories, all_versions, api_actor, environment, fresh_hash, listed_paths, memories, memory_store, path, seqs,
    session, user_message, versions,
};
use super::memories::overlap;
use crate::StoreFactory;

const ROUNDS: usize = 8;

/// Runs every future as its own task and waits for all of them, in order.
async fn all_spawned<T: Send + 'static>(
    futures: impl IntoIterator<Item = impl Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    join_all(handles).await.into_iter().map(|r| r.expect("a task panicked")).collect()
}

pub async fn racing_creates_of_one_path_have_one_winner(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    for round in 0..ROUNDS {
        let store = memory_store(&*s, "race").await;
        let writers = 2 + round;
        let results = all_spawned((0..writers).map(|i| {
            let (s, store, ws) = (Arc::clone(&s.store), store.clone(), ws.clone());
            async move { s.create_memory(&ws, &store, path("/race.md"), format!("writer {i}"), api_actor()).await }
        }))
        .await;
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one of {writers} writers wins: {results:?}");
        let winner = winners[0];
        for result in &results {
            if let Err(e) = result {
                assert!(
                    matches!(e, StoreError::PathConflict { conflicting_memory_id: Some(id), conflicting_path, .. }
                        if *id == winner.id && conflicting_path == "/race.md"),
                    "round {round}: the losers conflict with the winner: {e:?}"
                );
            }
        }
        let listed = all_memories(&*s, &store, memories("/", 0, 100, View::Full)).await;
        assert_eq!(listed.len(), 1);
        assert!(matches!(&listed[0], MemoryListItem::Memory(m) if m.id == winner.id && m.content == winner.content));
        assert_eq!(all_versions(&*s, &store, versions(100)).await.len(), 1, "losers write no version");
    }
}

pub async fn overlapping_paths_created_concurrently_never_coexist(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    for round in 0..ROUNDS {
        let store = memory_store(&*s, "overlaps").await;
        // Groups of paths that pairwise overlap: pairs (a file and a file below it) and chains.
        let mut groups: Vec<Vec<String>> = (0..10).map(|i| vec![format!("/p{i}"), format!("/p{i}/child.md")]).collect();
        groups.extend((0..4).map(|i| vec![format!("/t{i}"), format!("/t{i}/m"), format!("/t{i}/m/leaf.md")]));
        let mut attempts: Vec<String> = groups.iter().flatten().cloned().collect();
        if round % 2 == 1 {
            attempts.reverse();
        }
        let results = all_spawned(attempts.iter().cloned().map(|p| {
            let (s, store, ws) = (Arc::clone(&s.store), store.clone(), ws.clone());
            async move {
                let got = s.create_memory(&ws, &store, path(&p), "x".into(), api_actor()).await;
                (p, got)
            }
        }))
        .await;

        let listed = listed_paths(&all_memories(&*s, &store, memories("/", 0, 100, View::Basic)).await);
        let created: BTreeSet<&String> = results.iter().filter(|(_, r)| r.is_ok()).map(|(p, _)| p).collect();
        assert_eq!(listed.iter().collect::<BTreeSet<_>>(), created, "round {round}: the listing is what succeeded");
        for (i, a) in listed.iter().enumerate() {
            for b in &listed[i + 1..] {
                assert!(!overlap(a, b), "round {round}: {a} and {b} coexist");
            }
        }
        for (p, result) in &results {
            if let Err(e) = result {
                let StoreError::PathConflict { conflicting_path, .. } = e else {
                    panic!("round {round}: {p} failed with {e:?}")
                };
                assert!(overlap(p, conflicting_path), "round {round}: {p} blocked by unrelated {conflicting_path}");
                assert!(
                    listed.contains(conflicting_path),
                    "round {round}: {p} blocked by {conflicting_path}, never created"
                );
            }
        }
        for group in &groups {
            let winners = group.iter().filter(|p| created.contains(p)).count();
            assert_eq!(winners, 1, "round {round}: one of {group:?} exists");
        }
    }
}

pub async fn concurrent_creates_fill_the_cap_exactly(factory: &impl StoreFactory) {
    const LIMIT: u32 = 5;
    let s = factory.open(Limits { max_memories_per_store: LIMIT, ..Limits::default() }).await;
    let ws = s.default_workspace().await.unwrap();
    for round in 0..ROUNDS {
        let store = memory_store(&*s, "capped").await;
        let results = all_spawned((0..20).map(|i| {
            let (s, store, ws) = (Arc::clone(&s.store), store.clone(), ws.clone());
            async move { s.create_memory(&ws, &store, path(&format!("/cap/{i}.md")), "x".into(), api_actor()).await }
        }))
        .await;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, LIMIT as usize, "round {round}: exactly the cap succeeds");
        for e in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(matches!(e, StoreError::StoreFull { limit: LIMIT, .. }), "round {round}: {e:?}");
        }
        assert_eq!(all_memories(&*s, &store, memories("/", 0, 100, View::Basic)).await.len(), LIMIT as usize);
        assert_eq!(all_versions(&*s, &store, versions(100)).await.len(), LIMIT as usize);
    }
}

/// Versions written by racing writers are listed newest first by both position and time: a
/// writer that waited for another stamps its version after the one it waited for.
pub async fn concurrent_writers_stamp_versions_in_their_order(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "stamped").await;
    all_spawned((0..8).map(|w| {
        let (s, store, ws) = (Arc::clone(&s.store), store.clone(), ws.clone());
        async move {
            for i in 0..12 {
                let m = s
                    .create_memory(&ws, &store, path(&format!("/w{w}/{i}.md")), "x".into(), api_actor())
                    .await
                    .unwrap();
                let change = MemoryChange { content: Some("y".into()), path: None, expected_sha256: None };
                s.update_memory(&ws, &store, &m.id, change, api_actor()).await.unwrap();
            }
        }
    }))
    .await;
    let listed = all_versions(&*s, &store, versions(100)).await;
    assert_eq!(listed.len(), 8 * 12 * 2);
    for pair in listed.windows(2) {
        assert!(
            pair[0].created_at >= pair[1].created_at,
            "newest first, yet {} ({}) is older than {} ({}), listed after it",
            pair[0].id,
            pair[0].created_at,
            pair[1].id,
            pair[1].created_at
        );
    }
}

pub async fn concurrent_updates_with_one_precondition_have_one_winner(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    for round in 0..ROUNDS {
        let store = memory_store(&*s, "contended").await;
        let memory = s.create_memory(&ws, &store, path("/doc.md"), "v0".into(), api_actor()).await.unwrap();
        let expected = memory.content_sha256.clone();
        let results = all_spawned((1..=10).map(|i| {
            let (s, store, id, expected, ws) =
                (Arc::clone(&s.store), store.clone(), memory.id.clone(), expected.clone(), ws.clone());
            async move {
                let change =
                    MemoryChange { content: Some(format!("v{i}")), path: None, expected_sha256: Some(expected) };
                s.update_memory(&ws, &store, &id, change, api_actor()).await
            }
        }))
        .await;
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one update applies: {results:?}");
        let winner = winners[0].content.clone().unwrap();
        for e in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(e, StoreError::PreconditionFailed { expected: x, actual }
                    if *x == expected && *actual == content_sha256(winner.as_bytes())),
                "round {round}: the others see the winner's content: {e:?}"
            );
        }
        assert_eq!(s.get_memory(&ws, &store, &memory.id).await.unwrap().content, Some(winner));
        assert_eq!(all_versions(&*s, &store, versions(100)).await.len(), 2, "created, then one change");
    }
}

pub async fn concurrent_pollers_never_share_a_delivery(factory: &impl StoreFactory) {
    const POLLERS: usize = 12;
    const ITEMS: usize = 30;
    let s = factory.open(Limits::default()).await;
    for round in 0..5 {
        let env = environment(&*s, true).await;
        for _ in 0..ITEMS {
            session(&*s, &env).await;
        }
        let queued: HashSet<WorkId> = s
            .list_work(&s.default_workspace().await.unwrap(), &env.id, 100, None)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|w| w.id)
            .collect();
        assert_eq!(queued.len(), ITEMS);
        // Each poller drains the queue, acknowledging what it gets; the delivery window
        // (60 s) stays open throughout, so no item may be handed out twice.
        let deliveries = all_spawned((0..POLLERS).map(|i| {
            let (s, env) = (Arc::clone(&s.store), env.id.clone());
            async move {
                let mut got = Vec::new();
                while let Some(work) = s
                    .poll_work(
                        &s.default_workspace().await.unwrap(),
                        &env,
                        Some(format!("poller-{i}")),
                        60_000,
                        fresh_hash(),
                    )
                    .await
                    .unwrap()
                {
                    s.ack_work(&s.default_workspace().await.unwrap(), &env, &work.id)
                        .await
                        .expect("a poller acknowledges its own delivery");
                    got.push(work.id);
                }
                got
            }
        }))
        .await;
        let mut seen: BTreeMap<WorkId, usize> = BTreeMap::new();
        for (poller, got) in deliveries.iter().enumerate() {
            for id in got {
                if let Some(other) = seen.insert(id.clone(), poller) {
                    panic!("round {round}: {id} delivered to pollers {other} and {poller}");
                }
            }
        }
        let delivered: HashSet<WorkId> = seen.into_keys().collect();
        assert_eq!(delivered, queued, "round {round}: every item delivered");
        let stats = s.work_stats(&s.default_workspace().await.unwrap(), &env.id).await.unwrap();
        assert_eq!((stats.depth, stats.pending), (0, 0));
    }
}

pub async fn a_concurrent_reader_sees_every_event_in_order(factory: &impl StoreFactory) {
    const WRITERS: usize = 4;
    const APPENDS: usize = 30;
    let s = factory.open(Limits::default()).await;
    for round in 0..5 {
        let env = environment(&*s, false).await;
        let session = session(&*s, &env).await.id;
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (s, session, done) = (Arc::clone(&s.store), session.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                let mut last = 0;
                let mut seen = Vec::new();
                loop {
                    // Read the flag first: a read that starts after every writer finished
                    // must see everything, so it is the last one.
                    let finished = done.load(Ordering::SeqCst);
                    for event in s.events_after(&s.default_workspace().await.unwrap(), &session, last).await.unwrap() {
                        assert!(event.seq > last, "events_after({last}) returned {} out of order", event.seq);
                        last = event.seq;
                        seen.push(event.seq);
                    }
                    if finished {
                        return seen;
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        let written = all_spawned((0..WRITERS).map(|w| {
            let (s, session) = (Arc::clone(&s.store), session.clone());
            async move {
                let mut seqs = Vec::new();
                for j in 0..APPENDS {
                    let batch = (0..1 + j % 3).map(|k| user_message(&format!("{w}.{j}.{k}"))).collect();
                    let appended = s
                        .append_events(
                            &s.default_workspace().await.unwrap(),
                            &session,
                            batch,
                            super::fixtures::person(),
                        )
                        .await
                        .unwrap();
                    seqs.extend(appended.written.iter().map(|e| e.seq));
                }
                seqs
            }
        }))
        .await;
        done.store(true, Ordering::SeqCst);
        let seen = reader.await.expect("the reader panicked");

        let log = seqs(&s.events_after(&s.default_workspace().await.unwrap(), &session, 0).await.unwrap());
        let mut expected: Vec<i64> = written.into_iter().flatten().collect();
        expected.sort_unstable();
        assert_eq!(log, expected, "round {round}: the log is exactly what the writers wrote");
        assert_eq!(seen, log, "round {round}: the reader saw every event, in log order, none skipped");
    }
}

/// Concurrent writers on one store, and a reader following its change feed by position while
/// they commit: the feed read after lists every version exactly once in increasing position,
/// and the follower never skips one that commits later with a smaller position.
pub async fn a_concurrent_feed_reader_sees_every_version_in_order(factory: &impl StoreFactory) {
    const WRITERS: usize = 4;
    const WRITES: usize = 15;
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    for round in 0..4 {
        let store = memory_store(&*s, &format!("feed {round}")).await;
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (s, store, done, ws) = (Arc::clone(&s.store), store.clone(), Arc::clone(&done), ws.clone());
            tokio::spawn(async move {
                let mut last = 0;
                let mut seen = Vec::new();
                loop {
                    let finished = done.load(Ordering::SeqCst);
                    for entry in s.memory_changes_after(&ws, &store, last, 7, false).await.unwrap() {
                        assert!(entry.seq > last, "memory_changes_after({last}) returned {} out of order", entry.seq);
                        last = entry.seq;
                        seen.push(entry.change.memory_version_id);
                    }
                    if finished && s.memory_changes_after(&ws, &store, last, 1, false).await.unwrap().is_empty() {
                        return seen;
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        let written = all_spawned((0..WRITERS).map(|w| {
            let (s, store, ws) = (Arc::clone(&s.store), store.clone(), ws.clone());
            async move {
                let mut ids = Vec::new();
                let m = s.create_memory(&ws, &store, path(&format!("/w{w}")), "0".into(), api_actor()).await.unwrap();
                ids.push(m.memory_version_id);
                for j in 1..WRITES {
                    let change = MemoryChange { content: Some(j.to_string()), path: None, expected_sha256: None };
                    let m = s.update_memory(&ws, &store, &m.id, change, api_actor()).await.unwrap();
                    ids.push(m.memory_version_id);
                }
                ids
            }
        }))
        .await;
        done.store(true, Ordering::SeqCst);
        let seen = reader.await.expect("the reader panicked");

        let feed = s.memory_changes_after(&ws, &store, 0, 1000, false).await.unwrap();
        assert!(feed.windows(2).all(|w| w[0].seq < w[1].seq), "round {round}: positions strictly increase");
        let listed: Vec<_> = feed.iter().map(|e| e.change.memory_version_id.clone()).collect();
        let mut expected: Vec<_> = written.into_iter().flatten().collect();
        assert_eq!(listed.len(), expected.len(), "round {round}: one entry per version written");
        let mut sorted = listed.clone();
        sorted.sort();
        expected.sort();
        assert_eq!(sorted, expected, "round {round}: every version exactly once");
        assert_eq!(seen, listed, "round {round}: the follower saw every version, in feed order, none skipped");
    }
}
