//! Memory versions. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async)]

use mnemo_api::{Actor, MemoryStoreId, MemoryVersion, MemoryVersionId, View};
use mnemo_store::{ListMemoryVersions, Listing, Result};

use crate::engine::{Tx, failure};

pub(crate) async fn get(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryVersionId, view: View) -> Result<MemoryVersion> { Err(failure("unported")) }
pub(crate) async fn list(tx: &Tx<'_>, store: &MemoryStoreId, q: &ListMemoryVersions) -> Result<Listing<MemoryVersion>> { Err(failure("unported")) }
pub(crate) async fn redact(tx: &Tx<'_>, store: &MemoryStoreId, id: &MemoryVersionId, actor: &Actor) -> Result<MemoryVersion> { Err(failure("unported")) }
