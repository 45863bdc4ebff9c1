//! The work queue. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async)]

use std::collections::BTreeMap;

use mnemo_api::{EnvironmentId, SessionId, Work, WorkData, WorkId, WorkQueueStats};
use mnemo_store::{CredentialHash, Cursor, HeartbeatOutcome, Listing, Result};

use crate::engine::{Tx, failure};

/// Microseconds since the epoch on the database's clock.
pub(crate) type Micros = i64;

pub(crate) async fn expire(tx: &Tx<'_>, environment_seq: Option<i64>, now: Micros) -> Result<u64> { Err(failure("unported")) }
pub(crate) async fn settle_session(tx: &Tx<'_>, session: &SessionId, now: Micros) -> Result<()> { Err(failure("unported")) }
pub(crate) async fn enqueue(tx: &Tx<'_>, environment_seq: i64, data: &WorkData, ttl: u64) -> Result<WorkId> { Err(failure("unported")) }
pub(crate) async fn poll(tx: &Tx<'_>, env: &EnvironmentId, worker_id: Option<&str>, reclaim_ms: u64, token_hash: &CredentialHash) -> Result<Option<Work>> { Err(failure("unported")) }
pub(crate) async fn ack(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId) -> Result<Work> { Err(failure("unported")) }
pub(crate) async fn heartbeat(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId, expected_last_heartbeat: &str, desired_ttl_seconds: Option<u64>) -> Result<HeartbeatOutcome> { Err(failure("unported")) }
pub(crate) async fn stop(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work> { Err(failure("unported")) }
pub(crate) async fn stop_session_work(tx: &Tx<'_>, session: &SessionId) -> Result<()> { Err(failure("unported")) }
pub(crate) async fn get(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId) -> Result<Work> { Err(failure("unported")) }
pub(crate) async fn update_metadata(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId, patch: &BTreeMap<String, Option<String>>) -> Result<Work> { Err(failure("unported")) }
pub(crate) async fn list(tx: &Tx<'_>, env: &EnvironmentId, limit: u32, after: Option<&Cursor>) -> Result<Listing<Work>> { Err(failure("unported")) }
pub(crate) async fn stats(tx: &Tx<'_>, env: &EnvironmentId) -> Result<WorkQueueStats> { Err(failure("unported")) }
pub(crate) async fn find_token(tx: &Tx<'_>, hash: &CredentialHash) -> Result<Option<(WorkId, Option<SessionId>, EnvironmentId)>> { Err(failure("unported")) }
pub(crate) async fn has_live_work(tx: &Tx<'_>, session: &SessionId) -> Result<bool> { Err(failure("unported")) }
pub(crate) async fn enqueue_healthcheck(tx: &Tx<'_>, env: &EnvironmentId, ttl: u64) -> Result<Work> { Err(failure("unported")) }
