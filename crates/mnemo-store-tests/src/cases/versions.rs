//! Memory versions: the audit trail every change writes, its listings, and redaction.

use std::time::Duration;

use mnemo_api::{Actor, MemoryChangeEvent, MemoryVersion, MemoryVersionId, Operation, SessionId, View, content_sha256};
use mnemo_store::{Limits, ListMemoryVersions, MemoryChange, MemoryFeedEntry, Signal, Store, StoreError};
use tokio::sync::broadcast;

use super::fixtures::{all_versions, memory_store, path, versions};
use crate::StoreFactory;

fn api(key: &str) -> Actor {
    Actor::ApiActor { api_key_id: key.parse().unwrap() }
}

fn user(id: &str) -> Actor {
    Actor::UserActor { user_id: id.into() }
}

fn ids(versions: &[MemoryVersion]) -> Vec<&MemoryVersionId> {
    versions.iter().map(|v| &v.id).collect()
}

pub async fn versions_record_every_change_and_filter(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "audited").await;
    let other = memory_store(&*s, "other").await;
    let session = SessionId::generate();
    let by_session = Actor::SessionActor { session_id: session.clone() };
    let by_service = Actor::ServiceAccountActor { service_account_id: "svac_1".into() };

    let m1 = s.create_memory(&ws, &store, path("/m1"), "one".into(), api("apikey_a")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let change = MemoryChange { content: Some("two".into()), path: None, expected_sha256: None };
    let changed = s.update_memory(&ws, &store, &m1.id, change, by_session.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let rename = MemoryChange { content: None, path: Some(path("/m1b")), expected_sha256: None };
    let moved = s.update_memory(&ws, &store, &m1.id, rename, by_service.clone()).await.unwrap();
    s.delete_memory(&ws, &store, &m1.id, None, user("user_1")).await.unwrap();
    let m2 = s.create_memory(&ws, &store, path("/m2"), "x".into(), api("apikey_b")).await.unwrap();
    s.create_memory(&ws, &other, path("/m1"), "elsewhere".into(), api("apikey_a")).await.unwrap();

    // Newest first, one version per change, each saying what it recorded and who made it.
    let all = all_versions(&*s, &store, versions(100)).await;
    let summary: Vec<_> = all
        .iter()
        .map(|v| {
            (
                &v.memory_id,
                v.operation,
                v.path.as_deref(),
                v.content_sha256.clone(),
                v.content_size_bytes,
                v.created_by.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (&m2.id, Operation::Created, Some("/m2"), Some(content_sha256(b"x")), Some(1), Some(api("apikey_b"))),
            (&m1.id, Operation::Deleted, Some("/m1b"), None, None, Some(user("user_1"))),
            (&m1.id, Operation::Modified, Some("/m1b"), Some(content_sha256(b"two")), Some(3), Some(by_service)),
            (&m1.id, Operation::Modified, Some("/m1"), Some(content_sha256(b"two")), Some(3), Some(by_session)),
            (&m1.id, Operation::Created, Some("/m1"), Some(content_sha256(b"one")), Some(3), Some(api("apikey_a"))),
        ]
    );
    assert!(all.iter().all(|v| v.memory_store_id == store && v.redacted_at.is_none() && v.redacted_by.is_none()));
    assert!(all.iter().all(|v| v.content.is_none()), "basic views carry no content");
    assert_eq!(ids(&all)[2..], [&moved.memory_version_id, &changed.memory_version_id, &m1.memory_version_id]);
    assert_eq!(all[0].id, m2.memory_version_id);
    let full = all_versions(&*s, &store, ListMemoryVersions { view: View::Full, ..versions(100) }).await;
    let contents: Vec<_> = full.iter().map(|v| v.content.as_deref()).collect();
    assert_eq!(contents, [Some("x"), None, Some("two"), Some("two"), Some("one")]);
    for limit in [1, 2, 3] {
        assert_eq!(all_versions(&*s, &store, versions(limit)).await, all, "pages of {limit}");
    }

    // Filters.
    let only = async |query: ListMemoryVersions| {
        let got = all_versions(&*s, &store, query).await;
        got.into_iter().map(|v| v.id).collect::<Vec<_>>()
    };
    let pick = |indices: &[usize]| indices.iter().map(|&i| all[i].id.clone()).collect::<Vec<_>>();
    assert_eq!(only(ListMemoryVersions { memory_id: Some(m1.id.clone()), ..versions(100) }).await, pick(&[1, 2, 3, 4]));
    assert_eq!(only(ListMemoryVersions { memory_id: Some(m1.id.clone()), ..versions(1) }).await, pick(&[1, 2, 3, 4]));
    assert_eq!(only(ListMemoryVersions { operation: Some(Operation::Created), ..versions(100) }).await, pick(&[0, 4]));
    assert_eq!(only(ListMemoryVersions { operation: Some(Operation::Modified), ..versions(1) }).await, pick(&[2, 3]));
    assert_eq!(only(ListMemoryVersions { operation: Some(Operation::Deleted), ..versions(100) }).await, pick(&[1]));
    assert_eq!(only(ListMemoryVersions { session_id: Some(session.clone()), ..versions(100) }).await, pick(&[3]));
    assert_eq!(
        only(ListMemoryVersions { api_key_id: Some("apikey_a".parse().unwrap()), ..versions(100) }).await,
        pick(&[4])
    );
    assert_eq!(
        only(ListMemoryVersions { service_account_id: Some("svac_1".into()), ..versions(100) }).await,
        pick(&[2])
    );
    let two_actors = ListMemoryVersions {
        session_id: Some(session),
        api_key_id: Some("apikey_a".parse().unwrap()),
        ..versions(100)
    };
    assert!(only(two_actors).await.is_empty(), "no version has two authors");
    let since = all[2].created_at;
    assert_eq!(only(ListMemoryVersions { created_at_gte: Some(since), ..versions(100) }).await, pick(&[0, 1, 2]));
    let until = all[3].created_at;
    assert_eq!(only(ListMemoryVersions { created_at_lte: Some(until), ..versions(100) }).await, pick(&[3, 4]));
    let both = ListMemoryVersions {
        memory_id: Some(m1.id.clone()),
        operation: Some(Operation::Modified),
        created_at_lte: Some(until),
        ..versions(100)
    };
    assert_eq!(only(both).await, pick(&[3]));

    // Single versions.
    let got = s.get_memory_version(&ws, &store, &changed.memory_version_id, View::Full).await.unwrap();
    assert_eq!((got.content.as_deref(), got.operation), (Some("two"), Operation::Modified));
    let basic = s.get_memory_version(&ws, &store, &changed.memory_version_id, View::Basic).await.unwrap();
    assert_eq!(basic, MemoryVersion { content: None, ..got });
    assert_eq!(basic, all[3]);
    assert_err!(
        s.get_memory_version(&ws, &other, &changed.memory_version_id, View::Full).await,
        StoreError::NotFound { .. }
    );
    assert_err!(
        s.get_memory_version(&ws, &store, &MemoryVersionId::generate(), View::Full).await,
        StoreError::NotFound { .. }
    );
    assert_err!(
        s.list_memory_versions(&ws, &mnemo_api::MemoryStoreId::generate(), versions(10)).await,
        StoreError::NotFound { .. }
    );
}

pub async fn redaction_clears_a_version_but_never_the_current_one(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "redacted").await;
    let created = s.create_memory(&ws, &store, path("/secret.md"), "password".into(), api("apikey_a")).await.unwrap();
    let change = MemoryChange { content: Some("nothing to see".into()), path: None, expected_sha256: None };
    let current = s.update_memory(&ws, &store, &created.id, change, api("apikey_a")).await.unwrap();

    assert_err!(
        s.redact_memory_version(&ws, &store, &current.memory_version_id, user("admin")).await,
        StoreError::RedactCurrentVersion { version, memory }
            if version == current.memory_version_id.as_str() && memory == created.id.as_str()
    );
    let untouched = s.get_memory_version(&ws, &store, &current.memory_version_id, View::Full).await.unwrap();
    assert_eq!((untouched.content.as_deref(), untouched.redacted_at), (Some("nothing to see"), None));

    let redacted = s.redact_memory_version(&ws, &store, &created.memory_version_id, user("admin")).await.unwrap();
    assert_eq!(
        (
            redacted.path.as_deref(),
            redacted.content.as_deref(),
            redacted.content_sha256.as_deref(),
            redacted.content_size_bytes
        ),
        (None, None, None, None)
    );
    assert!(redacted.redacted_at.is_some());
    assert_eq!(redacted.redacted_by, Some(user("admin")));
    assert_eq!((redacted.operation, &redacted.memory_id), (Operation::Created, &created.id), "what happened stays");
    assert_eq!(redacted.created_by, Some(api("apikey_a")), "and who did it");
    assert_eq!(s.get_memory_version(&ws, &store, &created.memory_version_id, View::Full).await.unwrap(), redacted);
    let listed = all_versions(&*s, &store, ListMemoryVersions { view: View::Full, ..versions(100) }).await;
    assert_eq!(listed[1], redacted);

    let twice = s.redact_memory_version(&ws, &store, &created.memory_version_id, user("someone else")).await.unwrap();
    assert_eq!(twice, redacted, "redacting twice is a no-op: the first redaction stands");
    assert_eq!(s.get_memory(&ws, &store, &created.id).await.unwrap().content.as_deref(), Some("nothing to see"));

    // Once the memory is gone, none of its versions is current.
    s.delete_memory(&ws, &store, &created.id, None, api("apikey_a")).await.unwrap();
    let last = s.redact_memory_version(&ws, &store, &current.memory_version_id, user("admin")).await.unwrap();
    assert_eq!((last.path, last.content, last.content_sha256), (None, None, None));
    let all = all_versions(&*s, &store, versions(100)).await;
    assert_eq!(all[0].operation, Operation::Deleted);
    let deleted = s.redact_memory_version(&ws, &store, &all[0].id, user("admin")).await.unwrap();
    assert_eq!((deleted.operation, deleted.path), (Operation::Deleted, None));
    assert!(all_versions(&*s, &store, versions(100)).await.iter().all(|v| v.redacted_at.is_some() && v.path.is_none()));

    let other = memory_store(&*s, "other").await;
    assert_err!(
        s.redact_memory_version(&ws, &other, &created.memory_version_id, user("admin")).await,
        StoreError::NotFound { .. }
    );
    assert_err!(
        s.redact_memory_version(&ws, &store, &MemoryVersionId::generate(), user("admin")).await,
        StoreError::NotFound { .. }
    );
}

fn feed_ops(feed: &[MemoryFeedEntry]) -> Vec<(Operation, Option<&str>)> {
    feed.iter().map(|e| (e.change.operation, e.change.path.as_deref())).collect()
}

pub async fn the_change_feed_lists_a_stores_versions_in_commit_order(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "fed").await;
    let other = memory_store(&*s, "elsewhere").await;
    assert!(s.memory_changes_after(&ws, &store, 0, 10, false).await.unwrap().is_empty(), "a new store has no changes");
    let a = s.create_memory(&ws, &store, path("/a.md"), "one".into(), api("apikey_feed")).await.unwrap();
    s.create_memory(&ws, &other, path("/a.md"), "not here".into(), api("apikey_feed")).await.unwrap();
    let change = |content: Option<&str>, to: Option<&str>| MemoryChange {
        content: content.map(Into::into),
        path: to.map(path),
        expected_sha256: None,
    };
    s.update_memory(&ws, &store, &a.id, change(Some("two"), None), api("apikey_feed")).await.unwrap();
    s.update_memory(&ws, &store, &a.id, change(Some("two"), None), api("apikey_feed")).await.unwrap();
    s.update_memory(&ws, &store, &a.id, change(None, Some("/b.md")), user("mover")).await.unwrap();
    s.delete_memory(&ws, &store, &a.id, None, api("apikey_feed")).await.unwrap();

    let feed = s.memory_changes_after(&ws, &store, 0, 100, false).await.unwrap();
    assert_eq!(
        feed_ops(&feed),
        [
            (Operation::Created, Some("/a.md")),
            (Operation::Modified, Some("/a.md")),
            (Operation::Modified, Some("/b.md")),
            (Operation::Deleted, Some("/b.md")),
        ],
        "one entry per version (an update that changes nothing writes none), in commit order, this store only"
    );
    assert!(feed.windows(2).all(|w| w[0].seq < w[1].seq), "positions grow");
    assert_eq!(
        feed.last().unwrap().seq,
        s.memory_change_seq(&ws, &store).await.unwrap(),
        "the last position is the listing's"
    );
    let listed = all_versions(&*s, &store, versions(100)).await;
    for (entry, version) in feed.iter().zip(listed.iter().rev()) {
        let c = &entry.change;
        assert_eq!((&c.memory_version_id, &c.memory_id, &c.memory_store_id), (&version.id, &a.id, &store));
        assert_eq!((&c.content_sha256, c.content_size_bytes), (&version.content_sha256, version.content_size_bytes));
        assert_eq!((c.created_at, &c.created_by), (version.created_at, &version.created_by));
    }
    assert_eq!(feed[0].change.content_sha256.as_deref(), Some(content_sha256(b"one").as_str()));
    assert_eq!(feed[3].change.content_sha256, None, "a deletion has no content");
    assert!(feed.iter().all(|e| e.change.content.is_none()), "no content unless asked for");

    // `content=inline`: the same entries, small creates and changes with their content.
    let inline = s.memory_changes_after(&ws, &store, 0, 100, true).await.unwrap();
    let contents: Vec<_> = inline.iter().map(|e| e.change.content.as_deref()).collect();
    assert_eq!(contents, [Some("one"), Some("two"), Some("two"), None], "a move carries its content, a deletion none");
    let without: Vec<_> = inline
        .iter()
        .map(|e| MemoryFeedEntry { change: MemoryChangeEvent { content: None, ..e.change.clone() }, ..e.clone() })
        .collect();
    assert_eq!(without, feed, "inline changes nothing else");

    // Reading on from a position, and in pages.
    let rest = s.memory_changes_after(&ws, &store, feed[1].seq, 100, false).await.unwrap();
    assert_eq!(rest, feed[2..], "after a position: exactly the later versions");
    let page = s.memory_changes_after(&ws, &store, 0, 2, false).await.unwrap();
    assert_eq!(page, feed[..2], "at most `limit`");
    assert!(s.memory_changes_after(&ws, &store, feed[3].seq, 100, false).await.unwrap().is_empty());

    // A redacted version stays in the feed without path, digest or size.
    let created = &feed[0].change.memory_version_id;
    s.redact_memory_version(&ws, &store, created, user("admin")).await.unwrap();
    let redacted = &s.memory_changes_after(&ws, &store, 0, 1, false).await.unwrap()[0];
    assert_eq!((&redacted.change.memory_version_id, redacted.seq), (created, feed[0].seq));
    assert_eq!(
        (&redacted.change.path, &redacted.change.content_sha256, redacted.change.content_size_bytes),
        (&None, &None, None)
    );
    let redacted = &s.memory_changes_after(&ws, &store, 0, 2, true).await.unwrap();
    assert_eq!(
        (redacted[0].change.content.as_deref(), redacted[1].change.content.as_deref()),
        (None, Some("two")),
        "a redacted version carries no content, inline or not"
    );

    assert_err!(
        s.memory_changes_after(&ws, &mnemo_api::MemoryStoreId::generate(), 0, 10, false).await,
        StoreError::NotFound { .. }
    );
}

/// Waits for the next `Signal::Memory`, skipping other signals.
async fn next_memory_signal(rx: &mut broadcast::Receiver<Signal>) -> (mnemo_api::MemoryStoreId, i64) {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match rx.recv().await {
                Ok(Signal::Memory { store, seq }) => return (store, seq),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the store stopped signalling"),
            }
        }
    })
    .await
    .expect("a memory signal within 10 s")
}

/// Waits until memory signals flow: a backend whose listener is still connecting (PostgreSQL's
/// `LISTEN`) loses what commits meanwhile and covers it with `Resync` only, so the checked
/// sequence starts once a warm-up write has been heard (written again every 2 s until it is).
async fn until_signals_flow(s: &dyn Store, rx: &mut broadcast::Receiver<Signal>) {
    let ws = s.default_workspace().await.unwrap();
    let warm = memory_store(s, "signals warm-up").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for i in 0.. {
        s.create_memory(&ws, &warm, path(&format!("/warm-{i}")), "w".into(), api("apikey_sig")).await.unwrap();
        let heard = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match rx.recv().await {
                    Ok(Signal::Memory { store, .. }) if store == warm => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => panic!("the store stopped signalling"),
                }
            }
        })
        .await;
        if heard.is_ok() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no memory signal within 60 s");
    }
}

pub async fn memory_signals_follow_every_committed_version(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "signalled").await;
    let mut rx = s.memory_signals();
    until_signals_flow(&*s, &mut rx).await;
    let m = s.create_memory(&ws, &store, path("/a"), "1".into(), api("apikey_sig")).await.unwrap();
    assert_eq!(next_memory_signal(&mut rx).await, (store.clone(), s.memory_change_seq(&ws, &store).await.unwrap()));
    let unchanged = MemoryChange { content: Some("1".into()), path: None, expected_sha256: None };
    s.update_memory(&ws, &store, &m.id, unchanged, api("apikey_sig")).await.unwrap();
    let changed = MemoryChange { content: Some("2".into()), path: None, expected_sha256: None };
    s.update_memory(&ws, &store, &m.id, changed, api("apikey_sig")).await.unwrap();
    assert_eq!(
        next_memory_signal(&mut rx).await,
        (store.clone(), s.memory_change_seq(&ws, &store).await.unwrap()),
        "an update that writes nothing signals nothing; the next one does"
    );
    s.delete_memory(&ws, &store, &m.id, None, api("apikey_sig")).await.unwrap();
    assert_eq!(next_memory_signal(&mut rx).await, (store.clone(), s.memory_change_seq(&ws, &store).await.unwrap()));
}
