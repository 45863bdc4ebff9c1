//! The agent loop's turn lease and the usage its model calls record.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use mnemo_api::SessionId;
use mnemo_store::{EventAuthor, Limits, StoreError};
use serde_json::json;

use super::fixtures::{environment, event, id_of, session};
use crate::StoreFactory;

const LONG: Duration = Duration::from_secs(60);

pub async fn turn_leases_go_to_one_holder_until_released_or_lapsed(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let id = session(&*s, &env).await.id;
    assert!(s.claim_turn(&ws, &id, "a", LONG).await.unwrap(), "a free lease is granted");
    assert!(!s.claim_turn(&ws, &id, "b", LONG).await.unwrap(), "a running lease is held");
    assert!(s.claim_turn(&ws, &id, "a", LONG).await.unwrap(), "its holder renews it");
    s.release_turn(&ws, &id, "b").await.unwrap();
    assert!(!s.claim_turn(&ws, &id, "b", LONG).await.unwrap(), "only the holder releases a lease");
    s.release_turn(&ws, &id, "a").await.unwrap();
    assert!(s.claim_turn(&ws, &id, "b", Duration::from_millis(200)).await.unwrap(), "a released lease is free");
    // b dies without releasing: once its lease lapses on the store's clock, a may take over.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(s.claim_turn(&ws, &id, "a", LONG).await.unwrap(), "a lapsed lease is free");
    assert!(!s.claim_turn(&ws, &id, "b", LONG).await.unwrap());
    let unknown = SessionId::generate();
    assert_err!(s.claim_turn(&ws, &unknown, "a", LONG).await, StoreError::NotFound { .. });
}

pub async fn concurrent_claimers_get_one_turn_lease(factory: &impl StoreFactory) {
    const CLAIMERS: usize = 8;
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    for round in 0..6 {
        let id = session(&*s, &env).await.id;
        let handles: Vec<_> = (0..CLAIMERS)
            .map(|i| {
                let (s, id, ws) = (Arc::clone(&s.store), id.clone(), ws.clone());
                tokio::spawn(async move { s.claim_turn(&ws, &id, &format!("replica-{i}"), LONG).await.unwrap() })
            })
            .collect();
        let granted = join_all(handles).await.into_iter().filter(|r| *r.as_ref().expect("a task panicked")).count();
        assert_eq!(granted, 1, "round {round}: exactly one claimer runs the turn");
    }
}

pub async fn model_calls_add_their_usage_to_the_session(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let id = session(&*s, &env).await.id;
    assert_eq!(s.get_session(&ws, &id).await.unwrap().usage["input_tokens"], 0);
    for (round, (input, output, read, created)) in [(10, 5, 0, 100), (20, 7, 100, 0)].into_iter().enumerate() {
        let start =
            s.append_events(&ws, &id, vec![event(json!({"type": "span.model_request_start"}))], EventAuthor::Server);
        let start = start.await.unwrap();
        let first = if round == 0 { "session.status_running" } else { "span.model_request_start" };
        assert_eq!(start.written[0].to_json()["type"], first, "the first model call runs the session");
        let end = event(json!({"type": "span.model_request_end", "model_request_start_id": id_of(&start.recorded[0]),
            "model_usage": {"input_tokens": input, "output_tokens": output,
                            "cache_read_input_tokens": read, "cache_creation_input_tokens": created}}));
        let ended = s.append_events(&ws, &id, vec![end], EventAuthor::Server).await.unwrap();
        assert_eq!(ended.written.len(), 1, "the end of a call changes no status");
    }
    let error = event(json!({"type": "session.error", "error": {"type": "model_overloaded_error",
        "message": "overloaded", "retry_status": {"type": "exhausted"}}}));
    let idle = event(json!({"type": "session.status_idle", "stop_reason": {"type": "retries_exhausted"}}));
    s.append_events(&ws, &id, vec![error, idle], EventAuthor::Server).await.unwrap();
    let session = s.get_session(&ws, &id).await.unwrap();
    assert_eq!(session.status, mnemo_api::SessionStatus::Idle);
    assert_eq!(
        session.usage,
        json!({"input_tokens": 30, "output_tokens": 12, "cache_read_input_tokens": 100,
               "cache_creation": {"ephemeral_5m_input_tokens": 100}})
    );
    let worker = EventAuthor::SessionToken { session: id.clone(), work: "work_w".parse().unwrap() };
    let client = s.append_events(&ws, &id, vec![event(json!({"type": "span.model_request_start"}))], worker);
    assert_err!(client.await, StoreError::Forbidden(_), "only the agent side reports model calls");
}
