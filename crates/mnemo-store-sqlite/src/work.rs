//! The self-hosted work queue's SQL: the primitives of [`mnemo_store::ops::work`] on the
//! writer's (or a reader's) connection, row decoding, and the item listing. Every transition is
//! decided by the operations there; the single writer excludes every other writer, so no
//! primitive locks anything and a claim is a plain read.

use std::collections::BTreeMap;

use mnemo_api::{EnvironmentId, Work, WorkState, WorkspaceId};
use mnemo_store::ops::{self, NewWork, StoredToken, WorkFilter};
use mnemo_store::row::{before, page};
use mnemo_store::rules::work::{Change, DELIVERABLE_STATE, LAPSING_STATES, Lease, Micros};
use mnemo_store::{CredentialHash, Cursor, Listing, Result};
use rusqlite::types::Value;
use rusqlite::{Connection, Row, params, params_from_iter};

use crate::engine::{Cols, Lite, backend, query_one};
use crate::{environments, parse_id};

use mnemo_store::row::WORK_COLUMNS as COLUMNS;

use mnemo_store::ops::WorkRow as Item;

fn from_row(r: &Row<'_>) -> Result<Item> {
    mnemo_store::row::work(&Cols(r))
}

/// What an item in a lapsing state is held until ([`Lease::expire`]'s hold).
const HOLD: &str = "COALESCE(w.lease_expires_at, w.pending_until, 0)";

/// A filter as SQL over `w` (items) and `e` (their environments), and its parameters in order.
fn filter_sql(filter: WorkFilter<'_>) -> (String, Vec<Value>) {
    let text = |s: &str| Value::Text(s.to_owned());
    let state = |s: WorkState| text(s.as_str());
    // An item that may have lapsed by `now` (`Lease::expire` decides).
    let lapsed = |now: Micros, params: &mut Vec<Value>| {
        params.extend(LAPSING_STATES.map(state));
        params.push(Value::Integer(now));
        let states = vec!["?"; LAPSING_STATES.len()].join(", ");
        format!("w.state IN ({states}) AND {HOLD} < ?")
    };
    let mut params = Vec::new();
    let sql = match filter {
        WorkFilter::Item { ws, environment, id } => {
            params.extend([text(id.as_str()), text(environment.as_str()), text(ws.as_str())]);
            "w.id = ? AND e.id = ? AND e.workspace_id = ?".to_owned()
        }
        WorkFilter::Seq(seq) => {
            params.push(Value::Integer(seq));
            "w.seq = ?".to_owned()
        }
        WorkFilter::Lapsed { environment, now } => {
            let lapsed = lapsed(now, &mut params);
            match environment {
                Some(env) => {
                    params.push(Value::Integer(env));
                    format!("{lapsed} AND w.environment_seq = ?")
                }
                None => lapsed,
            }
        }
        WorkFilter::LapsedOfSession { session, now } => {
            params.push(text(session.as_str()));
            format!("w.session_id = ? AND {}", lapsed(now, &mut params))
        }
        WorkFilter::UnstoppedOfSession(session) => {
            params.extend([text(session.as_str()), state(WorkState::Stopped)]);
            "w.session_id = ? AND w.state != ?".to_owned()
        }
        WorkFilter::Deliverable { environment, now } => {
            params.extend([Value::Integer(environment), state(DELIVERABLE_STATE), Value::Integer(now)]);
            "w.environment_seq = ? AND w.state = ? AND (w.pending_until IS NULL OR w.pending_until < ?)".to_owned()
        }
        WorkFilter::Queued { environment } => {
            params.extend([Value::Integer(environment), state(DELIVERABLE_STATE)]);
            "w.environment_seq = ? AND w.state = ?".to_owned()
        }
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq WHERE {sql} ORDER BY w.seq"
    );
    (sql, params)
}

/// The items `filter` selects, in queue order.
fn select(c: &Connection, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    scan(c, filter, |item| {
        out.push(item);
        false
    })?;
    Ok(out)
}

/// Reads the items `filter` selects one at a time, in queue order, handing each to `stop` until
/// it says so.
fn scan(c: &Connection, filter: WorkFilter<'_>, mut stop: impl FnMut(Item) -> bool) -> Result<()> {
    let (sql, params) = filter_sql(filter);
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let mut rows = stmt.query(params_from_iter(params)).map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        if stop(from_row(row)?) {
            break;
        }
    }
    Ok(())
}

/// The first item `filter` selects that `wanted` accepts; the scan stops there, so a deep queue
/// costs only the items skipped.
fn first(c: &Connection, filter: WorkFilter<'_>, wanted: &(dyn Fn(&Lease) -> bool + Sync)) -> Result<Option<Item>> {
    let mut found = None;
    scan(c, filter, |item| {
        let stop = wanted(&item.lease);
        if stop {
            found = Some(item);
        }
        stop
    })?;
    Ok(found)
}

/// A page of the items of workspace `ws`'s environment, newest first.
pub(crate) fn list(
    c: &Connection,
    ws: &WorkspaceId,
    env: &EnvironmentId,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Work>> {
    let (_, env_seq) = environments::get_with_seq(c, ws, env)?;
    let before = before(after)?;
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
             WHERE w.environment_seq = ?1 AND w.seq < ?2 ORDER BY w.seq DESC LIMIT ?3"
        ))
        .map_err(backend)?;
    let mut rows = stmt.query(params![env_seq, before, i64::from(limit) + 1]).map_err(backend)?;
    let mut items = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let item = from_row(row)?;
        items.push((item.work, item.seq));
    }
    Ok(page(items, limit))
}

impl ops::WorkSql for Lite<'_> {
    async fn earliest_lapse(&self) -> Result<Option<Micros>> {
        let states = vec!["?"; LAPSING_STATES.len()].join(", ");
        let params: Vec<Value> = LAPSING_STATES.iter().map(|s| Value::Text(s.as_str().to_owned())).collect();
        self.query_row(
            &format!("SELECT MIN({HOLD}) FROM work_items w WHERE w.state IN ({states})"),
            rusqlite::params_from_iter(params),
            |r| r.get(0),
        )
        .map_err(backend)
    }

    async fn read_work(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        select(self, filter)
    }

    /// The single writer holds every row already.
    async fn lock_work(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        select(self, filter)
    }

    /// No other writer can hold a row: every selected item is claimed.
    async fn claim_work(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        select(self, filter)
    }

    async fn first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<Item>> {
        first(self, filter, wanted)
    }

    async fn claim_first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<Item>> {
        first(self, filter, wanted)
    }

    async fn apply_lease(&self, seq: i64, change: &Change, now: Micros) -> Result<()> {
        let l = &change.lease;
        self.prepare_cached(
            "UPDATE work_items SET state = ?1, pending_until = ?2, lease_expires_at = ?3, last_heartbeat = ?4, \
             ttl_seconds = ?5, acknowledged_at = ?6, started_at = ?7, latest_heartbeat_at = ?8, \
             stop_requested_at = ?9, stopped_at = ?10 WHERE seq = ?11",
        )
        .and_then(|mut s| {
            s.execute(params![
                l.state.as_str(),
                l.pending_until,
                l.lease_expires_at,
                l.last_heartbeat,
                i64::try_from(l.ttl_seconds).unwrap_or(i64::MAX),
                l.acknowledged_at,
                l.started_at,
                l.latest_heartbeat_at,
                l.stop_requested_at,
                l.stopped_at,
                seq
            ])
        })
        .map_err(backend)?;
        if change.revoke_tokens {
            self.prepare_cached("UPDATE session_tokens SET revoked_at = ?1 WHERE work_seq = ?2 AND revoked_at IS NULL")
                .and_then(|mut s| s.execute(params![now, seq]))
                .map_err(backend)?;
        }
        Ok(())
    }

    async fn insert_work(&self, new: &NewWork<'_>) -> Result<()> {
        self.execute(
            "INSERT INTO work_items (id, environment_seq, session_id, data, state, metadata, created_at, ttl_seconds) \
             VALUES (?1, ?2, ?3, ?4, ?5, '{}', ?6, ?7)",
            params![
                new.id.as_str(),
                new.environment,
                new.session,
                serde_json::to_string(new.data).map_err(backend)?,
                new.state.as_str(),
                new.created_at,
                i64::try_from(new.ttl_seconds).unwrap_or(i64::MAX)
            ],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn set_work_metadata(&self, seq: i64, metadata: &BTreeMap<String, String>) -> Result<()> {
        let metadata = serde_json::to_string(metadata).map_err(backend)?;
        self.execute("UPDATE work_items SET metadata = ?1 WHERE seq = ?2", params![metadata, seq]).map_err(backend)?;
        Ok(())
    }

    async fn insert_session_token(
        &self,
        hash: &CredentialHash,
        work: i64,
        session: Option<&str>,
        now: Micros,
    ) -> Result<()> {
        // A token minted for no session stores the empty id.
        self.execute(
            "INSERT INTO session_tokens (secret_hash, work_seq, session_id, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![&hash[..], work, session.unwrap_or_default(), now],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn find_session_token(&self, hash: &CredentialHash) -> Result<Option<StoredToken>> {
        let found: Option<(i64, String)> = query_one(
            self,
            "SELECT work_seq, session_id FROM session_tokens WHERE secret_hash = ?1 AND revoked_at IS NULL",
            [&hash[..]],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        found
            .map(|(work, session)| {
                let session = (!session.is_empty()).then(|| parse_id(&session)).transpose()?;
                Ok(StoredToken { work, session })
            })
            .transpose()
    }

    async fn record_poll(&self, environment: i64, worker: &str, now: Micros) -> Result<()> {
        self.execute(
            "INSERT INTO worker_polls (environment_seq, worker_id, last_poll_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (environment_seq, worker_id) \
             DO UPDATE SET last_poll_at = max(worker_polls.last_poll_at, excluded.last_poll_at)",
            params![environment, worker, now],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn workers_polled_since(&self, environment: i64, since: Micros) -> Result<u64> {
        let count: i64 = self
            .query_row(
                "SELECT COUNT(*) FROM worker_polls WHERE environment_seq = ?1 AND last_poll_at >= ?2",
                params![environment, since],
                |r| r.get(0),
            )
            .map_err(backend)?;
        u64::try_from(count).map_err(backend)
    }

    async fn environment_seq(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<i64> {
        environments::get_with_seq(self, ws, id).map(|(_, seq)| seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_api::{SessionId, WorkId};

    /// Every filter's SQL binds as many parameters as it has placeholders, and names no state.
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
            let (sql, params) = filter_sql(filter);
            assert_eq!(sql.matches('?').count(), params.len(), "{filter:?}: {sql}");
            for state in ["queued", "starting", "active", "stopping", "stopped"] {
                assert!(!sql.contains(&format!("'{state}'")), "{filter:?}: {sql}");
            }
        }
    }
}
