//! Memories. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async, clippy::needless_pass_by_value)]

use mnemo_api::{Actor, Memory, MemoryId, MemoryListItem, MemoryPath, MemoryStoreId};
use mnemo_store::{ListMemories, Listing, MemoryChange, Result};

use crate::engine::{Tx, failure};

pub(crate) async fn create(tx: &Tx<'_>, store: &MemoryStoreId, path: &MemoryPath, content: String, actor: &Actor, limit: u32) -> Result<Memory> { Err(failure("unported")) }
pub(crate) async fn get(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> { Err(failure("unported")) }
pub(crate) async fn update(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryId, change: MemoryChange, actor: &Actor) -> Result<Memory> { Err(failure("unported")) }
pub(crate) async fn delete(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryId, expected_sha256: Option<&str>, actor: &Actor) -> Result<()> { Err(failure("unported")) }
pub(crate) async fn list(tx: &Tx<'_>, store: &MemoryStoreId, q: &ListMemories) -> Result<Listing<MemoryListItem>> { Err(failure("unported")) }
