//! The conformance cases, each an `async fn(&impl StoreFactory)`; add new ones to the list
//! in [`crate::conformance!`].

use mnemo_store::Limits;

use crate::StoreFactory;

/// `[n; 32]` as a credential hash.
pub fn hash(n: u8) -> [u8; 32] {
    [n; 32]
}

pub async fn api_keys_are_found_by_hash_and_counted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    assert_eq!(s.count_api_keys().await.unwrap(), 0);
    let id = s.ensure_api_key(hash(1), "first").await.unwrap();
    assert_eq!(s.ensure_api_key(hash(1), "again").await.unwrap(), id, "a known hash keeps its key");
    assert_eq!(s.find_api_key(hash(1)).await.unwrap(), Some(id));
    assert_eq!(s.find_api_key(hash(2)).await.unwrap(), None);
    assert_eq!(s.count_api_keys().await.unwrap(), 1);
}
