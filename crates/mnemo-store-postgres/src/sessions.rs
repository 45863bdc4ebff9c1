//! Sessions: their rows as SQL primitives ([`ops::SessionRowSql`]; the operations, and the
//! order in which they lock, are [`ops::sessions`]'s), reads and listings.
//!
//! A write that reads a session's state and then changes it first locks the session's row
//! with [`lock`] (`FOR UPDATE`) and holds it until it commits: writers of one session take
//! turns, and a session's events are numbered in commit order.

use mnemo_api::{Access, LoggedEvent, MemoryStoreId, Session, SessionId, SessionStatus, WorkspaceId};
use mnemo_store::ops::{self, NewSessionRow};
use mnemo_store::row::{SessionBody as Body, SessionColumns};
use mnemo_store::rules::agent::TurnLease;
use mnemo_store::{Cursor, ListSessions, Listing, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, exec, one, opt};
use crate::stores::page;

const COLUMNS: &str = "id, environment_id, body, status, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row) -> Result<(Session, i64)> {
    let columns = SessionColumns {
        id: col(r, 0)?,
        environment_id: col(r, 1)?,
        status: col(r, 3)?,
        created_at: col(r, 4)?,
        updated_at: col(r, 5)?,
        archived_at: col(r, 6)?,
    };
    let body = Body::parse(&columns.id, &col::<String>(r, 2)?)?;
    Ok((body.into_session(&columns)?, col(r, 7)?))
}

/// Workspace `ws`'s session and its row number, or not-found (also for another workspace's).
pub(crate) async fn get_with_seq(tx: &Tx<'_>, ws: &WorkspaceId, id: &SessionId) -> Result<(Session, i64)> {
    let sql = format!("SELECT {COLUMNS} FROM sessions WHERE id = $1 AND workspace_id = $2");
    let row = opt(tx, &sql, &[&id.as_str(), &ws.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("session", id))
}

/// Like [`get_with_seq`], and locks the session's row until the transaction ends: the writer
/// holding it is the only one judging and changing the session (its status, its log).
pub(crate) async fn lock(tx: &Tx<'_>, ws: &WorkspaceId, id: &SessionId) -> Result<(Session, i64)> {
    let sql = format!("SELECT {COLUMNS} FROM sessions WHERE id = $1 AND workspace_id = $2 FOR UPDATE");
    let row = opt(tx, &sql, &[&id.as_str(), &ws.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("session", id))
}

/// Records one event processed at `processed_at`; returns its position in the log. The caller
/// holds the session's row lock (or created the session), so positions grow in commit order.
pub(crate) async fn insert_event(tx: &Tx<'_>, session_seq: i64, event: &LoggedEvent, processed_at: i64) -> Result<i64> {
    let row = one(
        tx,
        "INSERT INTO session_events (id, session_seq, type, body, processed_at) VALUES ($1, $2, $3, $4, $5) \
         RETURNING seq",
        &[&event.id.as_str(), &session_seq, &event.event.kind(), &event.to_json().to_string(), &processed_at],
    )
    .await?;
    col(&row, 0)
}

pub(crate) async fn list(tx: &Tx<'_>, ws: &WorkspaceId, q: &ListSessions) -> Result<Listing<Session>> {
    let before = crate::stores::before(q.after.as_ref())?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM sessions s WHERE workspace_id = $9 AND seq < $1 AND ($2 OR archived_at IS NULL) \
               AND ($3::text IS NULL OR agent_id = $3) \
               AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM session_memory_stores m \
                    WHERE m.session_seq = s.seq AND m.memory_store_id = $4)) \
               AND (cardinality($5::text[]) = 0 OR status = ANY($5)) \
               AND created_at >= $7 AND created_at <= $8 \
             ORDER BY seq DESC LIMIT $6"
        ),
        &[
            &before,
            &q.include_archived,
            &q.agent_id.as_ref().map(|a| a.as_str()),
            &q.memory_store_id.as_ref().map(MemoryStoreId::as_str),
            &q.statuses,
            &(i64::from(q.limit) + 1),
            &q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
            &ws.as_str(),
        ],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, q.limit))
}

/// Sessions of every workspace in one of `statuses`, newest first, with their workspace.
pub(crate) async fn list_turn_sessions(
    tx: &Tx<'_>,
    statuses: &[String],
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<(WorkspaceId, SessionId)>> {
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        "SELECT workspace_id, id, seq FROM sessions WHERE seq < $1 AND status = ANY($2) ORDER BY seq DESC LIMIT $3",
        &[&before, &statuses, &(i64::from(limit) + 1)],
    )
    .await?;
    let rows = rows
        .iter()
        .map(|r| {
            let ws = crate::parse_id(&col::<String>(r, 0)?)?;
            Ok(((ws, crate::parse_id(&col::<String>(r, 1)?)?), col(r, 2)?))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

/// The workspace of session `id`, if it exists.
pub(crate) async fn workspace_of(tx: &Tx<'_>, id: &SessionId) -> Result<Option<WorkspaceId>> {
    let row = opt(tx, "SELECT workspace_id FROM sessions WHERE id = $1", &[&id.as_str()]).await?;
    row.map(|r| crate::parse_id(&col::<String>(&r, 0)?)).transpose()
}

impl ops::SessionRowSql for Pg<'_, '_> {
    async fn insert_session(&self, new: &NewSessionRow<'_>) -> Result<i64> {
        let row = one(
            self,
            "INSERT INTO sessions (id, environment_id, agent_id, body, status, created_at, updated_at, workspace_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $6, $7) RETURNING seq",
            &[
                &new.id.as_str(),
                &new.environment.as_str(),
                &new.agent.as_str(),
                &new.body.to_json()?,
                &new.status.as_str(),
                &new.created_at,
                &new.workspace.as_str(),
            ],
        )
        .await?;
        col(&row, 0)
    }

    async fn attach_store(&self, session: i64, store: &MemoryStoreId, access: Access) -> Result<()> {
        exec(
            self,
            "INSERT INTO session_memory_stores (session_seq, memory_store_id, read_only) VALUES ($1, $2, $3)",
            &[&session, &store.as_str(), &(access == Access::ReadOnly)],
        )
        .await
        .map(drop)
    }

    async fn update_session_body(&self, session: i64, body: &Body, now: i64) -> Result<()> {
        exec(self, "UPDATE sessions SET body = $1, updated_at = $2 WHERE seq = $3", &[&body.to_json()?, &now, &session])
            .await
            .map(drop)
    }

    async fn archive_session_row(&self, session: i64, status: SessionStatus, now: i64) -> Result<()> {
        exec(
            self,
            "UPDATE sessions SET archived_at = $1, updated_at = $1, status = $2 WHERE seq = $3",
            &[&now, &status.as_str(), &session],
        )
        .await
        .map(drop)
    }

    async fn delete_session_row(&self, session: i64) -> Result<()> {
        for sql in [
            "DELETE FROM session_events WHERE session_seq = $1",
            "DELETE FROM session_memory_stores WHERE session_seq = $1",
            "DELETE FROM sessions WHERE seq = $1",
        ] {
            exec(self, sql, &[&session]).await?;
        }
        Ok(())
    }

    async fn turn_lease(&self, session: i64) -> Result<Option<TurnLease>> {
        let row = one(self, "SELECT turn_holder, turn_expires_at FROM sessions WHERE seq = $1", &[&session]).await?;
        let holder: Option<String> = col(&row, 0)?;
        let expires_at: Option<i64> = col(&row, 1)?;
        Ok(holder.zip(expires_at).map(|(holder, expires_at)| TurnLease { holder, expires_at }))
    }

    async fn set_turn_lease(&self, session: i64, lease: Option<&TurnLease>) -> Result<()> {
        exec(
            self,
            "UPDATE sessions SET turn_holder = $1, turn_expires_at = $2 WHERE seq = $3",
            &[&lease.map(|l| l.holder.as_str()), &lease.map(|l| l.expires_at), &session],
        )
        .await
        .map(drop)
    }

    async fn store_access(&self, ws: &WorkspaceId, id: &SessionId, store: &MemoryStoreId) -> Result<Option<Access>> {
        let row = opt(
            self,
            "SELECT m.read_only FROM session_memory_stores m JOIN sessions s ON s.seq = m.session_seq \
             WHERE s.id = $1 AND s.workspace_id = $3 AND m.memory_store_id = $2",
            &[&id.as_str(), &store.as_str(), &ws.as_str()],
        )
        .await?;
        row.map(|r| Ok(if col::<bool>(&r, 0)? { Access::ReadOnly } else { Access::ReadWrite })).transpose()
    }
}
