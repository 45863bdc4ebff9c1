//! Version retention (`GET`/`POST /v1/memory_stores/{id}/version_retention`, a mnemo
//! extension), and a purge pass as `mnemo serve` runs it: what it keeps, its audit entry, and
//! who may change a store's window.

use std::time::Duration;

use mnemo_store::rules::retention::Retention;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer};

const ADMIN: &str = "sk-mnemo-admin-retention";

fn path(store: &mnemo_api::MemoryStoreId) -> String {
    format!("/v1/memory_stores/{store}/version_retention")
}

#[tokio::test]
async fn a_stores_retention_is_read_set_refused_when_malformed_and_cleared() {
    let s = TestServer::start().await;
    let store = s.new_store("kept").await.id;
    let (status, view) = s.call(Method::GET, &path(&store), KEY, None).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        view,
        json!({"type": "memory_store_version_retention", "memory_store_id": store.as_str(), "retention": null,
               "server_default": "forever", "effective": "forever"})
    );
    let (status, view) = s.call(Method::POST, &path(&store), KEY, Some(json!({"retention": "720h"}))).await;
    assert_eq!((status, &view["retention"], &view["effective"]), (200, &json!("30d"), &json!("30d")), "{view}");
    for (body, says) in [
        (json!({"retention": "3 weeks"}), "(got `3 weeks`)"),
        (json!({"retention": "0s"}), "at least 1 second"),
        (json!({}), "retention is required"),
        (json!({"retention": 30}), "expected a string"),
    ] {
        let (status, answer) = s.call(Method::POST, &path(&store), KEY, Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{body}: {answer}");
    }
    let (_, view) = s.call(Method::GET, &path(&store), KEY, None).await;
    assert_eq!(view["retention"], "30d", "a refused change changed nothing");
    let (status, view) = s.call(Method::POST, &path(&store), KEY, Some(json!({"retention": null}))).await;
    assert_eq!((status, &view["retention"]), (200, &Value::Null), "{view}");
    // An unknown store is not found.
    let unknown = mnemo_api::MemoryStoreId::generate();
    assert_eq!(s.call(Method::GET, &path(&unknown), KEY, None).await.0, 404);
    // A sessions token reads memories but does not administer the store.
    let (token, _) = s.read_only_sessions_token(&store).await;
    let (status, body) = s.call(Method::POST, &path(&store), &token, Some(json!({"retention": "1d"}))).await;
    assert_eq!(status, 403, "{body}");
}

#[tokio::test]
async fn a_purge_pass_keeps_the_newest_and_the_young_and_is_audited() {
    let s = TestServer::start().await;
    s.store().ensure_admin_key(mnemo_server::hash_credential(ADMIN), "test").await.unwrap();
    let store = s.new_store("busy").await.id;
    let kept = s.new_store("kept forever").await.id;
    let memories = format!("/v1/memory_stores/{store}/memories");
    let (_, memory) = s.call(Method::POST, &memories, KEY, Some(json!({"path": "/a.md", "content": "1"}))).await;
    let id = memory["id"].as_str().unwrap().to_owned();
    for n in 2..=4 {
        let (status, _) =
            s.call(Method::POST, &format!("{memories}/{id}"), KEY, Some(json!({"content": n.to_string()}))).await;
        assert_eq!(status, 200);
    }
    let (_, other) = s
        .call(
            Method::POST,
            &format!("/v1/memory_stores/{kept}/memories"),
            KEY,
            Some(json!({"path": "/k.md", "content": "k"})),
        )
        .await;
    s.call(
        Method::POST,
        &format!("/v1/memory_stores/{kept}/memories/{}", other["id"].as_str().unwrap()),
        KEY,
        Some(json!({"content": "k2"})),
    )
    .await;
    // The server keeps versions for a second; this store keeps its own forever.
    s.call(Method::POST, &path(&kept), KEY, Some(json!({"retention": "forever"}))).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let window = Retention::Window(Duration::from_secs(1));
    let pass = mnemo_server::purge_pass(&*s.store(), window).await.unwrap();
    assert_eq!((pass.versions, pass.stores, pass.yielded), (3, 1, false), "{pass:?}");
    assert!(pass.bytes >= 3, "{pass:?}");

    let versions = |store: mnemo_api::MemoryStoreId| {
        let s = &s;
        async move {
            let (_, page) =
                s.call(Method::GET, &format!("/v1/memory_stores/{store}/memory_versions?limit=100"), KEY, None).await;
            page["data"].as_array().unwrap().len()
        }
    };
    assert_eq!(versions(store.clone()).await, 1, "the live memory's newest");
    assert_eq!(versions(kept.clone()).await, 2, "a store that keeps everything");
    let (_, read) = s.call(Method::GET, &format!("{memories}/{id}"), KEY, None).await;
    assert_eq!(read["content"], "4");

    let (status, log) =
        s.call(Method::GET, "/v1/organizations/audit_events?action=memory_version.purge", ADMIN, None).await;
    assert_eq!(status, 200, "{log}");
    let entry = &log["data"][0];
    assert_eq!(entry["actor"], json!({"type": "system", "id": "retention"}), "{entry}");
    assert_eq!(entry["resource"], json!({"type": "memory_store", "id": store.as_str()}), "{entry}");
    assert_eq!(entry["details"]["versions"], 3, "{entry}");
    assert_eq!(entry["details"]["retention"], "1s", "{entry}");
    // A second pass finds nothing, and records nothing.
    assert_eq!(mnemo_server::purge_pass(&*s.store(), window).await.unwrap().versions, 0);
    let (_, log) = s.call(Method::GET, "/v1/organizations/audit_events?action=memory_version.purge", ADMIN, None).await;
    assert_eq!(log["data"].as_array().unwrap().len(), 1);
}
