//! API keys, credential resolution and closing. (Sessions tokens are in
//! [`super::work`] and [`super::leases`], where they are minted.)

use std::time::Duration;

use mnemo_api::ApiKeyId;
use mnemo_store::{Credential, Limits, StoreError};

use super::fixtures::{environment, memory_store};
use super::hash;
use crate::StoreFactory;

pub async fn api_keys_are_found_by_hash_and_counted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    assert_eq!(s.count_api_keys().await.unwrap(), 0);
    let id = s.ensure_api_key(hash(1), "first").await.unwrap();
    assert_eq!(s.ensure_api_key(hash(1), "again").await.unwrap(), id, "a known hash keeps its key");
    assert_eq!(s.find_api_key(hash(1)).await.unwrap(), Some(id.clone()));
    assert_eq!(s.find_api_key(hash(2)).await.unwrap(), None);
    assert_eq!(s.count_api_keys().await.unwrap(), 1);
    let second = s.ensure_api_key(hash(2), "second").await.unwrap();
    assert_ne!(second, id);
    assert_eq!(s.find_api_key(hash(2)).await.unwrap(), Some(second));
    assert_eq!(s.count_api_keys().await.unwrap(), 2);
}

pub async fn credentials_resolve_to_their_kind(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let api = s.ensure_api_key(hash(1), "admin").await.unwrap();
    assert_eq!(s.resolve_credential(hash(1)).await.unwrap().map(|p| p.credential), Some(Credential::ApiKey(api)));

    let env = environment(&*s, true).await;
    let key = s.create_environment_key(&ws, &env.id, hash(2)).await.unwrap();
    assert_eq!(
        (&key.environment_id, key.key.as_ref().map(mnemo_api::Secret::expose), key.revoked_at.as_deref()),
        (&env.id, None, None)
    );
    assert_eq!(
        s.resolve_credential(hash(2)).await.unwrap().map(|p| p.credential),
        Some(Credential::EnvironmentKey { id: key.id.clone(), environment: env.id.clone() })
    );
    assert_eq!(s.find_api_key(hash(2)).await.unwrap(), None, "an environment key is not an API key");
    assert_eq!(s.count_api_keys().await.unwrap(), 1);
    assert_eq!(s.resolve_credential(hash(3)).await.unwrap().map(|p| p.credential), None, "an unknown hash is nobody");

    s.revoke_environment_key(&ws, &env.id, &key.id).await.unwrap();
    assert_eq!(s.resolve_credential(hash(2)).await.unwrap().map(|p| p.credential), None, "a revoked key is nobody");
}

pub async fn a_closed_store_refuses_calls(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    s.ensure_api_key(hash(1), "admin").await.unwrap();
    memory_store(&*s, "before").await;
    s.close().await;
    assert!(s.count_api_keys().await.is_err(), "a read after close fails");
    assert!(s.ensure_api_key(hash(2), "late").await.is_err(), "a write after close fails");
    assert!(s.resolve_credential(hash(1)).await.is_err(), "a credential lookup after close fails");
}

pub async fn console_sessions_expire_and_are_revoked(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let api = s.ensure_api_key(hash(1), "admin").await.unwrap();

    let signed_in = s.create_console_session(hash(10), &api, 3600).await.unwrap();
    assert_eq!(signed_in.api_key, api);
    assert_eq!(signed_in.expires_at - signed_in.created_at, chrono::TimeDelta::seconds(3600));
    assert_eq!(s.find_console_session(hash(10)).await.unwrap(), Some(signed_in.clone()));
    assert_eq!(s.find_console_session(hash(11)).await.unwrap(), None, "another hash is no session");
    assert_eq!(s.find_console_session(hash(1)).await.unwrap(), None, "an API key is no console session");
    assert_eq!(
        s.resolve_credential(hash(10)).await.unwrap().map(|p| p.credential),
        None,
        "a console session is no API credential"
    );

    // A second session of the same key outlives the first one's sign-out.
    let other = s.create_console_session(hash(12), &api, 3600).await.unwrap();
    s.revoke_console_session(hash(10)).await.unwrap();
    assert_eq!(s.find_console_session(hash(10)).await.unwrap(), None, "a revoked session is gone");
    assert_eq!(s.find_console_session(hash(12)).await.unwrap(), Some(other));
    s.revoke_console_session(hash(10)).await.unwrap();
    s.revoke_console_session(hash(13)).await.unwrap();
    assert_eq!(s.find_console_session(hash(10)).await.unwrap(), None, "revoking twice changes nothing");

    // An unknown API key is refused, and the refusal leaves nothing behind.
    assert_err!(
        s.create_console_session(hash(14), &ApiKeyId::generate(), 3600).await,
        StoreError::NotFound { kind: "api key", .. }
    );
    assert_eq!(s.find_console_session(hash(14)).await.unwrap(), None);

    // Expiry, on the store's clock.
    let brief = s.create_console_session(hash(15), &api, 1).await.unwrap();
    assert_eq!(s.find_console_session(hash(15)).await.unwrap(), Some(brief));
    s.create_console_session(hash(16), &api, 0).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(s.find_console_session(hash(15)).await.unwrap(), None, "an expired session is gone");
    assert_eq!(s.find_console_session(hash(16)).await.unwrap(), None, "a session without a lifetime is none");
    assert!(s.find_console_session(hash(12)).await.unwrap().is_some(), "a live one stays");
}

/// One secret presented as several kinds of credential resolves by the lookup order: an API
/// key first, then an environment key, then a sessions token.
pub async fn credentials_resolve_in_the_lookup_order(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    // One hash for all three; another for an environment key and a token only.
    let (all, two) = (hash(40), hash(41));
    let api = s.ensure_api_key(all, "admin").await.unwrap();
    let key = s.create_environment_key(&ws, &env.id, all).await.unwrap();
    let other = s.create_environment_key(&ws, &env.id, two).await.unwrap();
    let first = s.enqueue_healthcheck(&ws, &env.id).await.unwrap();
    s.poll_work(&ws, &env.id, None, 60_000, all).await.unwrap().expect("the first healthcheck");
    s.ack_work(&ws, &env.id, &first.id).await.unwrap();
    let second = s.enqueue_healthcheck(&ws, &env.id).await.unwrap();
    s.poll_work(&ws, &env.id, None, 60_000, two).await.unwrap().expect("the second healthcheck");
    s.ack_work(&ws, &env.id, &second.id).await.unwrap();

    assert_eq!(
        s.resolve_credential(all).await.unwrap().map(|p| p.credential),
        Some(Credential::ApiKey(api)),
        "an API key first"
    );
    assert_eq!(
        s.resolve_credential(two).await.unwrap().map(|p| p.credential),
        Some(Credential::EnvironmentKey { id: other.id.clone(), environment: env.id.clone() }),
        "then an environment key"
    );
    s.revoke_environment_key(&ws, &env.id, &other.id).await.unwrap();
    assert_eq!(
        s.resolve_credential(two).await.unwrap().map(|p| p.credential),
        Some(Credential::SessionToken { work: second.id, session: None, environment: env.id.clone() }),
        "then a sessions token"
    );
    s.revoke_environment_key(&ws, &env.id, &key.id).await.unwrap();
    assert!(
        matches!(s.resolve_credential(all).await.unwrap().map(|p| p.credential), Some(Credential::ApiKey(_))),
        "a live API key still wins"
    );
}

/// A console session asked to last longer than timestamps reach ends at the last showable
/// instant (year 9999), and is live until then.
pub async fn an_absurd_console_ttl_ends_at_a_showable_time(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let api = s.ensure_api_key(hash(1), "admin").await.unwrap();
    let forever = s.create_console_session(hash(50), &api, u64::MAX).await.unwrap();
    assert_eq!(forever.expires_at.format("%Y-%m-%dT%H:%M:%S").to_string(), "9999-12-31T23:59:59");
    assert_eq!(s.find_console_session(hash(50)).await.unwrap(), Some(forever));
}
