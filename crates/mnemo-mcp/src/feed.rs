//! The stores' change feeds, followed for the life of the MCP server so that a client's
//! resource subscriptions hear of every change made after the server started, whoever made it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mnemo_api::{MemoryChangeEvent, MemoryStoreId};
use mnemo_client::{Client, FeedEvent};
use tokio::sync::{broadcast, mpsc};

use crate::paths::Mount;

/// Changes buffered for slow subscribers (one that falls behind misses the oldest).
const BUFFERED: usize = 1024;

/// How long start-up waits for a store's feed to open before serving without it.
const CONNECT: Duration = Duration::from_secs(10);

/// Every followed store's changes, in each store's commit order.
#[derive(Debug, Clone)]
pub(crate) struct Feed {
    changes: broadcast::Sender<MemoryChangeEvent>,
    /// The task following each store; they stop when the last clone of the feed goes.
    following: Arc<Following>,
}

/// The tasks following stores; aborts them when dropped.
#[derive(Debug, Default)]
struct Following(std::sync::Mutex<HashMap<MemoryStoreId, tokio::task::JoinHandle<()>>>);

impl Drop for Following {
    fn drop(&mut self) {
        for task in self.0.lock().expect("feed poisoned").values() {
            task.abort();
        }
    }
}

impl Feed {
    /// Opens the change feed of every mount and waits until each is open: `None` if no store's
    /// server has a change feed (the hosted API), so the server offers no subscriptions.
    pub(crate) async fn start(client: &Client, mounts: &[Mount]) -> Option<Feed> {
        let feed = Feed { changes: broadcast::channel(BUFFERED).0, following: Arc::default() };
        feed.follow(client, mounts).await.then_some(feed)
    }

    /// Follows each of `mounts` not followed yet (a store created since), waiting until its
    /// feed is open; whether any store's feed is open.
    pub(crate) async fn follow(&self, client: &Client, mounts: &[Mount]) -> bool {
        let (opened_tx, mut opened) = mpsc::channel(mounts.len().max(1));
        let mut started = 0;
        {
            let mut following = self.following.0.lock().expect("feed poisoned");
            let new: Vec<&Mount> = mounts.iter().filter(|m| !following.contains_key(&m.store)).collect();
            for mount in new {
                let mut feed = client.subscribe_memory_changes(mount.store.clone(), None);
                let (changes, opened_tx, store) = (self.changes.clone(), opened_tx.clone(), mount.store.clone());
                following.insert(
                    mount.store.clone(),
                    tokio::spawn(async move {
                        let mut told = false;
                        loop {
                            match feed.next().await {
                                FeedEvent::Connected { .. } => {}
                                FeedEvent::Change { change, .. } => {
                                    let _ = changes.send(change);
                                }
                                FeedEvent::Unsupported | FeedEvent::Refused(_) => {
                                    report(&store, told, &opened_tx, false).await;
                                    return;
                                }
                            }
                            if !told {
                                told = true;
                                report(&store, false, &opened_tx, true).await;
                            }
                        }
                    }),
                );
                started += 1;
            }
        }
        drop(opened_tx);
        if started == 0 {
            return true;
        }
        let mut any = false;
        // Each store's task reports once (its senders live as long as it does).
        let waiting = async {
            for _ in 0..started {
                any |= opened.recv().await.unwrap_or(false);
            }
        };
        if tokio::time::timeout(CONNECT, waiting).await.is_err() {
            tracing::warn!(
                "a memory store's change feed did not open in time; subscriptions may miss its first changes"
            );
        }
        any
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<MemoryChangeEvent> {
        self.changes.subscribe()
    }
}

/// Tells start-up once whether `store`'s feed opened.
async fn report(store: &MemoryStoreId, already: bool, opened: &mpsc::Sender<bool>, open: bool) {
    if !already {
        if !open {
            tracing::info!(memory_store_id = %store, "no change feed: resource subscriptions will not hear of its changes");
        }
        let _ = opened.send(open).await;
    }
}

/// What one change tells subscribers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    /// The resource at this URI changed (a new version, a move away, a deletion).
    Updated(String),
    /// Resources appeared or went (a memory created, deleted or moved).
    ListChanged,
}

/// Where each memory was when last heard of, so a version at another path reads as a move.
pub(crate) type Whereabouts = std::collections::HashMap<mnemo_api::MemoryId, String>;

/// The notes of `change` (`uri` names a path of its store), updating `whereabouts`.
pub(crate) fn notes(
    change: &MemoryChangeEvent,
    uri: impl Fn(&str) -> String,
    whereabouts: &mut Whereabouts,
) -> Vec<Note> {
    // A redacted version names no path; it changes no memory as it is now.
    let Some(path) = &change.path else { return Vec::new() };
    let before = match change.operation {
        mnemo_api::Operation::Deleted => whereabouts.remove(&change.memory_id),
        _ => whereabouts.insert(change.memory_id.clone(), path.clone()),
    };
    let moved_from = before.filter(|b| b != path);
    let mut out: Vec<Note> = std::iter::once(path).chain(moved_from.iter()).map(|p| Note::Updated(uri(p))).collect();
    if moved_from.is_some() || matches!(change.operation, mnemo_api::Operation::Created | mnemo_api::Operation::Deleted)
    {
        out.push(Note::ListChanged);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_api::Operation;

    fn change(memory: &str, operation: Operation, path: Option<&str>) -> MemoryChangeEvent {
        serde_json::from_value(serde_json::json!({
            "memory_id": memory, "memory_store_id": "memstore_s", "memory_version_id": "memver_v",
            "operation": operation.as_str(), "path": path, "content_sha256": null, "content_size_bytes": null,
            "created_at": "2026-12-04T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn each_change_tells_what_it_changed() {
        let uri = |p: &str| format!("u:{p}");
        let up = |p: &str| Note::Updated(format!("u:{p}"));
        let mut seen = Whereabouts::new();
        #[rustfmt::skip]
        let rows = [
            ("a new memory", change("mem_a", Operation::Created, Some("/a.md")), vec![up("/a.md"), Note::ListChanged]),
            ("a new version", change("mem_a", Operation::Modified, Some("/a.md")), vec![up("/a.md")]),
            ("a move tells both paths and the list", change("mem_a", Operation::Modified, Some("/b.md")), vec![up("/b.md"), up("/a.md"), Note::ListChanged]),
            ("a deletion", change("mem_a", Operation::Deleted, Some("/b.md")), vec![up("/b.md"), Note::ListChanged]),
            ("a version of a memory not heard of before", change("mem_z", Operation::Modified, Some("/z.md")), vec![up("/z.md")]),
            ("a redacted version names no path and changes nothing", change("mem_z", Operation::Modified, None), vec![]),
            ("the memory is still where it was", change("mem_z", Operation::Modified, Some("/z.md")), vec![up("/z.md")]),
        ];
        for (rule, change, expected) in rows {
            assert_eq!(notes(&change, uri, &mut seen), expected, "rule: {rule}");
        }
    }
}
