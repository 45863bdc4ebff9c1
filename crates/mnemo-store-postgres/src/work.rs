//! The self-hosted work queue's SQL: the primitives of [`mnemo_store::ops::work`] on a
//! transaction, row decoding, and the item listing. Every transition, and the order in which
//! its locks are taken, is decided by the operations there, on the database's clock
//! ([`crate::engine::now`]).
//!
//! Several replicas write at once, so the primitives lock as their names say:
//!
//! - `lock_work` locks the items it selects (`FOR UPDATE OF w`, never their environment's
//!   row), waiting for any other holder: acknowledgement, heartbeats, stops and metadata
//!   updates judge an item only once it is locked;
//! - `claim_work` and `claim_first_work` lock with `FOR UPDATE OF w SKIP LOCKED`: a poll and the
//!   expiry sweep pass over items another transaction holds, so two pollers are never handed
//!   the same item and never wait for each other;
//! - `read_work` and `first_work` lock nothing.
//!
//! A session's row is locked before its items (see [`crate::engine`]); nothing here locks a
//! session, so callers that hold one (appends, archive, delete) keep that order.

use std::collections::BTreeMap;

use mnemo_api::{EnvironmentId, Work, WorkState, WorkspaceId};
use mnemo_store::ops::{self, NewWork, StoredToken, WorkFilter};
use mnemo_store::row::{before, page};
use mnemo_store::rules::work::{Change, DELIVERABLE_STATE, LAPSING_STATES, Lease, Micros};
use mnemo_store::{CredentialHash, Cursor, Listing, Result};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::engine::{Cols, Param, Pg, Tx, all, backend, col, exec, failure, one, opt};
use crate::{environments, parse_id};

use mnemo_store::row::WORK_COLUMNS as COLUMNS;

/// Locks nothing.
const NO_LOCK: &str = "";
/// Locks the selected items (never their environment) until the transaction ends, waiting for
/// any other holder.
const LOCK: &str = "FOR UPDATE OF w";
/// Locks the selected items, passing over those another transaction holds.
const LOCK_SKIP: &str = "FOR UPDATE OF w SKIP LOCKED";

use mnemo_store::ops::WorkRow as Item;

fn from_row(r: &Row) -> Result<Item> {
    mnemo_store::row::work(&Cols(r))
}

/// One owned statement parameter.
type Value = Box<dyn ToSql + Sync + Send>;

/// What an item in a lapsing state is held until ([`Lease::expire`]'s hold).
const HOLD: &str = "COALESCE(w.lease_expires_at, w.pending_until, 0)";

/// A filter as SQL over `w` (items) and `e` (their environments), locked as `lock` says, and
/// its parameters in order.
fn filter_sql(filter: WorkFilter<'_>, lock: &str) -> (String, Vec<Value>) {
    fn text(s: &str) -> Value {
        Box::new(s.to_owned())
    }
    fn int(n: i64) -> Value {
        Box::new(n)
    }
    fn state(s: WorkState) -> Value {
        text(s.as_str())
    }
    /// Binds `value`; its placeholder.
    fn bind(params: &mut Vec<Value>, value: Value) -> String {
        params.push(value);
        format!("${}", params.len())
    }
    // An item that may have lapsed by `now` (`Lease::expire` decides).
    let lapsed = |now: Micros, params: &mut Vec<Value>| {
        let states = LAPSING_STATES.map(|s| bind(params, state(s))).join(", ");
        let now = bind(params, int(now));
        format!("w.state IN ({states}) AND {HOLD} < {now}")
    };
    let p = &mut Vec::new();
    let sql = match filter {
        WorkFilter::Item { ws, environment, id } => format!(
            "w.id = {} AND e.id = {} AND e.workspace_id = {}",
            bind(p, text(id.as_str())),
            bind(p, text(environment.as_str())),
            bind(p, text(ws.as_str()))
        ),
        WorkFilter::Seq(seq) => format!("w.seq = {}", bind(p, int(seq))),
        WorkFilter::Lapsed { environment, now } => {
            let lapsed = lapsed(now, p);
            match environment {
                Some(env) => format!("{lapsed} AND w.environment_seq = {}", bind(p, int(env))),
                None => lapsed,
            }
        }
        WorkFilter::LapsedOfSession { session, now } => {
            let session = bind(p, text(session.as_str()));
            format!("w.session_id = {session} AND {}", lapsed(now, p))
        }
        WorkFilter::UnstoppedOfSession(session) => {
            let session = bind(p, text(session.as_str()));
            format!("w.session_id = {session} AND w.state != {}", bind(p, state(WorkState::Stopped)))
        }
        WorkFilter::Deliverable { environment, now } => {
            let (env, state) = (bind(p, int(environment)), bind(p, state(DELIVERABLE_STATE)));
            let now = bind(p, int(now));
            format!(
                "w.environment_seq = {env} AND w.state = {state} AND (w.pending_until IS NULL OR w.pending_until < {now})"
            )
        }
        WorkFilter::Queued { environment } => {
            let (env, state) = (bind(p, int(environment)), bind(p, state(DELIVERABLE_STATE)));
            format!("w.environment_seq = {env} AND w.state = {state}")
        }
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
         WHERE {sql} ORDER BY w.seq {lock}"
    );
    (sql, std::mem::take(p))
}

fn refs(params: &[Value]) -> Vec<Param<'_>> {
    params.iter().map(|v| v.as_ref() as Param<'_>).collect()
}

/// The items `filter` selects, in queue order, locked as `lock` says.
async fn select(tx: &Tx<'_>, filter: WorkFilter<'_>, lock: &str) -> Result<Vec<Item>> {
    let (sql, params) = filter_sql(filter, lock);
    all(tx, &sql, &refs(&params)).await?.iter().map(from_row).collect()
}

/// The first item `filter` selects, in queue order, that `wanted` accepts. Rows are fetched one
/// at a time through a portal and the scan stops there, so a deep queue costs only the items
/// skipped, and a `lock` takes only the rows fetched (those passed over stay locked until the
/// transaction ends).
async fn first(
    tx: &Tx<'_>,
    filter: WorkFilter<'_>,
    lock: &str,
    wanted: &(dyn Fn(&Lease) -> bool + Sync),
) -> Result<Option<Item>> {
    let (sql, params) = filter_sql(filter, lock);
    let stmt = tx.prepare_cached(&sql).await.map_err(backend)?;
    let portal = tx.bind(&stmt, &refs(&params)).await.map_err(backend)?;
    loop {
        let rows = tx.query_portal(&portal, 1).await.map_err(backend)?;
        let Some(row) = rows.first() else { return Ok(None) };
        let item = from_row(row)?;
        if wanted(&item.lease) {
            return Ok(Some(item));
        }
    }
}

/// A page of the items of workspace `ws`'s environment, newest first.
pub(crate) async fn list(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    env: &EnvironmentId,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Work>> {
    let (_, env_seq) = environments::get_with_seq(tx, ws, env).await?;
    let before = before(after)?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
             WHERE w.environment_seq = $1 AND w.seq < $2 ORDER BY w.seq DESC LIMIT $3"
        ),
        &[&env_seq, &before, &(i64::from(limit) + 1)],
    )
    .await?;
    let items = rows.iter().map(|r| from_row(r).map(|i| (i.work, i.seq))).collect::<Result<Vec<_>>>()?;
    Ok(page(items, limit))
}

impl ops::WorkSql for Pg<'_, '_> {
    async fn earliest_lapse(&self) -> Result<Option<Micros>> {
        let states: Vec<String> = LAPSING_STATES.iter().map(|s| s.as_str().to_owned()).collect();
        let row =
            one(self, &format!("SELECT MIN({HOLD}) FROM work_items w WHERE w.state = ANY($1)"), &[&states]).await?;
        col(&row, 0)
    }

    async fn read_work(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        select(self, filter, NO_LOCK).await
    }

    async fn lock_work(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        select(self, filter, LOCK).await
    }

    async fn claim_work(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        select(self, filter, LOCK_SKIP).await
    }

    async fn first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<Item>> {
        first(self, filter, NO_LOCK, wanted).await
    }

    async fn claim_first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<Item>> {
        first(self, filter, LOCK_SKIP, wanted).await
    }

    async fn apply_lease(&self, seq: i64, change: &Change, now: Micros) -> Result<()> {
        let l = &change.lease;
        let ttl = i64::try_from(l.ttl_seconds).unwrap_or(i64::MAX);
        exec(
            self,
            "UPDATE work_items SET state = $1, pending_until = $2, lease_expires_at = $3, last_heartbeat = $4, \
             ttl_seconds = $5, acknowledged_at = $6, started_at = $7, latest_heartbeat_at = $8, \
             stop_requested_at = $9, stopped_at = $10 WHERE seq = $11",
            &[
                &l.state.as_str(),
                &l.pending_until,
                &l.lease_expires_at,
                &l.last_heartbeat,
                &ttl,
                &l.acknowledged_at,
                &l.started_at,
                &l.latest_heartbeat_at,
                &l.stop_requested_at,
                &l.stopped_at,
                &seq,
            ],
        )
        .await?;
        if change.revoke_tokens {
            exec(
                self,
                "UPDATE session_tokens SET revoked_at = $1 WHERE work_seq = $2 AND revoked_at IS NULL",
                &[&now, &seq],
            )
            .await?;
        }
        Ok(())
    }

    async fn insert_work(&self, new: &NewWork<'_>) -> Result<()> {
        exec(
            self,
            "INSERT INTO work_items (id, environment_seq, session_id, data, state, metadata, created_at, ttl_seconds) \
             VALUES ($1, $2, $3, $4, $5, '{}', $6, $7)",
            &[
                &new.id.as_str(),
                &new.environment,
                &new.session,
                &serde_json::to_string(new.data).map_err(|e| failure(format!("serialise work data: {e}")))?,
                &new.state.as_str(),
                &new.created_at,
                &i64::try_from(new.ttl_seconds).unwrap_or(i64::MAX),
            ],
        )
        .await
        .map(drop)
    }

    async fn set_work_metadata(&self, seq: i64, metadata: &BTreeMap<String, String>) -> Result<()> {
        let metadata = serde_json::to_string(metadata).map_err(|e| failure(format!("serialise work metadata: {e}")))?;
        exec(self, "UPDATE work_items SET metadata = $1 WHERE seq = $2", &[&metadata, &seq]).await.map(drop)
    }

    async fn insert_session_token(
        &self,
        hash: &CredentialHash,
        work: i64,
        session: Option<&str>,
        now: Micros,
    ) -> Result<()> {
        // A token minted for no session stores the empty id.
        exec(
            self,
            "INSERT INTO session_tokens (secret_hash, work_seq, session_id, created_at) VALUES ($1, $2, $3, $4)",
            &[&&hash[..], &work, &session.unwrap_or_default(), &now],
        )
        .await
        .map(drop)
    }

    async fn find_session_token(&self, hash: &CredentialHash) -> Result<Option<StoredToken>> {
        let found = opt(
            self,
            "SELECT work_seq, session_id FROM session_tokens WHERE secret_hash = $1 AND revoked_at IS NULL",
            &[&&hash[..]],
        )
        .await?;
        let Some(token) = found else { return Ok(None) };
        let (work, session): (i64, String) = (col(&token, 0)?, col(&token, 1)?);
        let session = (!session.is_empty()).then(|| parse_id(&session)).transpose()?;
        Ok(Some(StoredToken { work, session }))
    }

    /// The upsert locks the worker's row until commit: a poll by the same worker on another
    /// replica waits for it.
    async fn record_poll(&self, environment: i64, worker: &str, now: Micros) -> Result<()> {
        exec(
            self,
            "INSERT INTO worker_polls (environment_seq, worker_id, last_poll_at) VALUES ($1, $2, $3) \
             ON CONFLICT (environment_seq, worker_id) \
             DO UPDATE SET last_poll_at = GREATEST(worker_polls.last_poll_at, excluded.last_poll_at)",
            &[&environment, &worker, &now],
        )
        .await
        .map(drop)
    }

    async fn workers_polled_since(&self, environment: i64, since: Micros) -> Result<u64> {
        let row = one(
            self,
            "SELECT COUNT(*) FROM worker_polls WHERE environment_seq = $1 AND last_poll_at >= $2",
            &[&environment, &since],
        )
        .await?;
        u64::try_from(col::<i64>(&row, 0)?).map_err(|e| failure(format!("worker count: {e}")))
    }

    async fn environment_seq(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<i64> {
        environments::get_with_seq(self, ws, id).await.map(|(_, seq)| seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_api::{SessionId, WorkId};

    /// Every filter's SQL binds as many parameters as it numbers, locks as asked, and names no
    /// state.
    #[test]
    fn every_filter_binds_what_it_names() {
        let (env, id, session): (EnvironmentId, WorkId, SessionId) =
            (EnvironmentId::generate(), WorkId::generate(), SessionId::generate());
        let ws = WorkspaceId::generate();
        let filters = [
            WorkFilter::Item { ws: &ws, environment: &env, id: &id },
            WorkFilter::Seq(1),
            WorkFilter::Lapsed { environment: None, now: 1 },
            WorkFilter::Lapsed { environment: Some(1), now: 1 },
            WorkFilter::LapsedOfSession { session: &session, now: 1 },
            WorkFilter::UnstoppedOfSession(&session),
            WorkFilter::Deliverable { environment: 1, now: 1 },
            WorkFilter::Queued { environment: 1 },
        ];
        for filter in filters {
            let (sql, params) = filter_sql(filter, LOCK_SKIP);
            assert!(sql.ends_with(LOCK_SKIP), "{sql}");
            for n in 1..=params.len() {
                assert!(sql.contains(&format!("${n}")), "{filter:?}: ${n} unused in {sql}");
            }
            assert!(!sql.contains(&format!("${}", params.len() + 1)), "{filter:?}: {sql}");
            for state in ["queued", "starting", "active", "stopping", "stopped"] {
                assert!(!sql.contains(&format!("'{state}'")), "{filter:?}: {sql}");
            }
        }
    }
}
