//! Sessions. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async)]

use std::collections::BTreeMap;

use mnemo_api::{Access, MemoryStoreId, Session, SessionId};
use mnemo_store::{ListSessions, Listing, NewSession, Result};

use crate::engine::{Tx, failure};

pub(crate) async fn get_with_seq(tx: &Tx<'_>, id: &SessionId) -> Result<(Session, i64)> { Err(failure("unported")) }
/// Creates a session; `true` when it queued a work item.
pub(crate) async fn create(tx: &Tx<'_>, new: &NewSession, lease_ttl: u64) -> Result<(Session, bool)> { Err(failure("unported")) }
pub(crate) async fn list(tx: &Tx<'_>, q: &ListSessions) -> Result<Listing<Session>> { Err(failure("unported")) }
pub(crate) async fn archive(tx: &Tx<'_>, id: &SessionId) -> Result<Session> { Err(failure("unported")) }
pub(crate) async fn delete(tx: &Tx<'_>, id: &SessionId) -> Result<()> { Err(failure("unported")) }
pub(crate) async fn store_access(tx: &Tx<'_>, id: &SessionId, store: &MemoryStoreId) -> Result<Option<Access>> { Err(failure("unported")) }
pub(crate) async fn update(tx: &Tx<'_>, id: &SessionId, title: Option<Option<String>>, metadata: Option<&BTreeMap<String, Option<String>>>) -> Result<Session> { Err(failure("unported")) }
