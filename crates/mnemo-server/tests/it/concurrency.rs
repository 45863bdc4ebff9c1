use std::collections::HashSet;

use mnemo_api::{Precondition, UpdateMemory, View};

use crate::common::TestServer;

/// Many writers race to update one memory from the same observed digest: exactly one wins,
/// every other gets a precondition failure, and the history has exactly one new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_preconditions_have_exactly_one_winner() {
    let s = TestServer::start().await;
    let store = s.new_store("race").await;
    for round in 0..5 {
        let m = s.client.create_memory(&store.id, &format!("/race{round}"), "base", None).await.unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let client = s.client.clone();
                let (store, id, sha) = (store.id.clone(), m.id.clone(), m.content_sha256.clone());
                tokio::spawn(async move {
                    let body = UpdateMemory {
                        content: Some(format!("writer {i}")),
                        precondition: Some(Precondition::ContentSha256 { content_sha256: sha }),
                        ..Default::default()
                    };
                    client.update_memory(&store, &id, &body, None).await
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(m) => winners.push(m),
                Err(e) => assert_eq!(e.error_type(), Some("memory_precondition_failed_error")),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}");
        let stored = s.client.get_memory(&store.id, &m.id, Some(View::Full)).await.unwrap();
        assert_eq!(stored.content_sha256, winners[0].content_sha256);
    }
}

/// Writers racing to create overlapping paths: at most one of each overlapping family exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_never_leave_overlapping_paths() {
    let s = TestServer::start().await;
    let store = s.new_store("overlap").await;
    let paths = ["/a", "/a/b", "/a/b/c", "/a/b/d", "/a/c"];
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let client = s.client.clone();
            let store = store.id.clone();
            let path = paths[i % paths.len()];
            tokio::spawn(async move { client.create_memory(&store, path, "x", None).await })
        })
        .collect();
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            assert_eq!(e.error_type(), Some("memory_path_conflict_error"));
        }
    }
    let all = s.client.list_all_memories(&store.id, View::Basic).await.unwrap();
    let stored: HashSet<_> = all.iter().map(|m| m.path.clone()).collect();
    assert_eq!(stored.len(), all.len());
    for a in &stored {
        for b in &stored {
            assert!(a == b || !b.starts_with(&format!("{a}/")), "{a} overlaps {b}");
        }
    }
    assert!(!stored.is_empty());
}
