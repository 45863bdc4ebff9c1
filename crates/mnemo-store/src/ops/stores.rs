//! Memory stores: the primitives other operations need of them.

use mnemo_api::{MemoryStore, MemoryStoreId};

use super::Clock;
use crate::Result;

/// SQL over memory stores.
pub trait StoreSql: Clock {
    /// The store (archived or not). Unknown: not found.
    async fn get_store(&self, id: &MemoryStoreId) -> Result<MemoryStore>;
}
