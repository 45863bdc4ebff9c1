//! API keys, credential resolution and closing. (Sessions tokens are in
//! [`super::work`] and [`super::leases`], where they are minted.)

use mnemo_store::{Credential, Limits};

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
    let api = s.ensure_api_key(hash(1), "admin").await.unwrap();
    assert_eq!(s.resolve_credential(hash(1)).await.unwrap(), Some(Credential::ApiKey(api)));

    let env = environment(&*s, true).await;
    let key = s.create_environment_key(&env.id, hash(2)).await.unwrap();
    assert_eq!((&key.environment_id, key.key.as_deref(), key.revoked_at.as_deref()), (&env.id, None, None));
    assert_eq!(
        s.resolve_credential(hash(2)).await.unwrap(),
        Some(Credential::EnvironmentKey { id: key.id.clone(), environment: env.id.clone() })
    );
    assert_eq!(s.find_api_key(hash(2)).await.unwrap(), None, "an environment key is not an API key");
    assert_eq!(s.count_api_keys().await.unwrap(), 1);
    assert_eq!(s.resolve_credential(hash(3)).await.unwrap(), None, "an unknown hash is nobody");

    s.revoke_environment_key(&env.id, &key.id).await.unwrap();
    assert_eq!(s.resolve_credential(hash(2)).await.unwrap(), None, "a revoked key is nobody");
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
