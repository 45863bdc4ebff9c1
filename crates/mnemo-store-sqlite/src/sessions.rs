//! Sessions: their rows as SQL primitives ([`ops::SessionRowSql`]; the operations are
//! [`ops::sessions`]'s), reads and listings.

use mnemo_api::{Access, LoggedEvent, MemoryStoreId, Session, SessionId, SessionStatus, WorkspaceId};
use mnemo_store::ops::{self, NewSessionRow};
use mnemo_store::row::{SessionBody as Body, SessionColumns};
use mnemo_store::rules::agent::TurnLease;
use mnemo_store::{Cursor, ListSessions, Listing, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{Lite, backend, query_all, query_one};
use crate::stores::page;

const COLUMNS: &str = "id, environment_id, body, status, created_at, updated_at, archived_at, seq";

/// A session row's columns and its body's text, read as they are; [`decode`] makes the
/// session of them (a row that cannot be read back is an error naming it, not a default).
fn from_row(r: &Row<'_>) -> rusqlite::Result<(SessionColumns, String, i64)> {
    let columns = SessionColumns {
        id: r.get(0)?,
        environment_id: r.get(1)?,
        status: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        archived_at: r.get(6)?,
    };
    Ok((columns, r.get(2)?, r.get(7)?))
}

/// The session a row read by [`from_row`] holds.
fn decode((columns, body, seq): (SessionColumns, String, i64)) -> Result<(Session, i64)> {
    Ok((Body::parse(&columns.id, &body)?.into_session(&columns)?, seq))
}

/// Workspace `ws`'s session and its row number; another workspace's is not found.
pub(crate) fn get_with_seq(c: &Connection, ws: &WorkspaceId, id: &SessionId) -> Result<(Session, i64)> {
    query_one(
        c,
        &format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1 AND workspace_id = ?2"),
        [id.as_str(), ws.as_str()],
        from_row,
    )?
    .map(decode)
    .transpose()?
    .ok_or_else(|| StoreError::not_found("session", id))
}

/// Records one event processed at `processed_at`; returns its position in the log.
pub(crate) fn insert_event(c: &Connection, session_seq: i64, event: &LoggedEvent, processed_at: i64) -> Result<i64> {
    c.prepare_cached(
        "INSERT INTO session_events (id, session_seq, type, body, processed_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![
            event.id.as_str(),
            session_seq,
            event.event.kind(),
            event.to_json().to_string(),
            processed_at
        ])
    })
    .map_err(backend)?;
    Ok(c.last_insert_rowid())
}

pub(crate) fn list(c: &Connection, ws: &WorkspaceId, q: &ListSessions) -> Result<Listing<Session>> {
    let before = crate::stores::before(q.after.as_ref())?;
    let statuses = serde_json::to_string(&q.statuses).map_err(backend)?;
    let rows = query_all(
        c,
        &format!(
            "SELECT {COLUMNS} FROM sessions s WHERE workspace_id = ?9 AND seq < ?1 AND (?2 OR archived_at IS NULL) \
               AND (?3 IS NULL OR agent_id = ?3) \
               AND (?4 IS NULL OR EXISTS (SELECT 1 FROM session_memory_stores m WHERE m.session_seq = s.seq AND m.memory_store_id = ?4)) \
               AND (?5 = '[]' OR status IN (SELECT value FROM json_each(?5))) \
               AND created_at >= ?7 AND created_at <= ?8 \
             ORDER BY seq DESC LIMIT ?6"
        ),
        params![
            before,
            q.include_archived,
            q.agent_id.as_ref().map(|a| a.as_str()),
            q.memory_store_id.as_ref().map(MemoryStoreId::as_str),
            statuses,
            i64::from(q.limit) + 1,
            q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
            ws.as_str()
        ],
        from_row,
    )?;
    Ok(page(rows.into_iter().map(decode).collect::<Result<Vec<_>>>()?, q.limit))
}

/// Sessions of every workspace in one of `statuses`, newest first, with their workspace.
pub(crate) fn list_turn_sessions(
    c: &Connection,
    statuses: &[String],
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<(WorkspaceId, SessionId)>> {
    let before = crate::stores::before(after)?;
    let statuses = serde_json::to_string(statuses).map_err(backend)?;
    let rows: Vec<(String, String, i64)> = query_all(
        c,
        "SELECT workspace_id, id, seq FROM sessions WHERE seq < ?1 \
           AND status IN (SELECT value FROM json_each(?2)) ORDER BY seq DESC LIMIT ?3",
        params![before, statuses, i64::from(limit) + 1],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let rows = rows
        .into_iter()
        .map(|(ws, id, seq)| Ok(((crate::parse_id(&ws)?, crate::parse_id(&id)?), seq)))
        .collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

/// The workspace of session `id`, if it exists.
pub(crate) fn workspace_of(c: &Connection, id: &SessionId) -> Result<Option<WorkspaceId>> {
    let ws: Option<String> =
        query_one(c, "SELECT workspace_id FROM sessions WHERE id = ?1", [id.as_str()], |r| r.get(0))?;
    ws.map(|ws| crate::parse_id(&ws)).transpose()
}

impl ops::SessionRowSql for Lite<'_> {
    async fn insert_session(&self, new: &NewSessionRow<'_>) -> Result<i64> {
        let body = new.body.to_json()?;
        self.prepare_cached(
            "INSERT INTO sessions (id, environment_id, agent_id, body, status, created_at, updated_at, workspace_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                new.id.as_str(),
                new.environment.as_str(),
                new.agent.as_str(),
                body,
                new.status.as_str(),
                new.created_at,
                new.workspace.as_str()
            ])
        })
        .map_err(backend)?;
        Ok(self.last_insert_rowid())
    }

    async fn attach_store(&self, session: i64, store: &MemoryStoreId, access: Access) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO session_memory_stores (session_seq, memory_store_id, read_only) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut s| s.execute(params![session, store.as_str(), access == Access::ReadOnly]))
        .map_err(backend)?;
        Ok(())
    }

    async fn update_session_body(&self, session: i64, body: &Body, now: i64) -> Result<()> {
        let body = body.to_json()?;
        self.prepare_cached("UPDATE sessions SET body = ?1, updated_at = ?2 WHERE seq = ?3")
            .and_then(|mut s| s.execute(params![body, now, session]))
            .map_err(backend)?;
        Ok(())
    }

    async fn archive_session_row(&self, session: i64, status: SessionStatus, now: i64) -> Result<()> {
        self.prepare_cached("UPDATE sessions SET archived_at = ?1, updated_at = ?1, status = ?2 WHERE seq = ?3")
            .and_then(|mut s| s.execute(params![now, status.as_str(), session]))
            .map_err(backend)?;
        Ok(())
    }

    async fn delete_session_row(&self, session: i64) -> Result<()> {
        for sql in [
            "DELETE FROM session_events WHERE session_seq = ?1",
            "DELETE FROM session_memory_stores WHERE session_seq = ?1",
            "DELETE FROM sessions WHERE seq = ?1",
        ] {
            self.prepare_cached(sql).and_then(|mut s| s.execute([session])).map_err(backend)?;
        }
        Ok(())
    }

    async fn turn_lease(&self, session: i64) -> Result<Option<TurnLease>> {
        let (holder, expires_at): (Option<String>, Option<i64>) = self
            .prepare_cached("SELECT turn_holder, turn_expires_at FROM sessions WHERE seq = ?1")
            .and_then(|mut s| s.query_row([session], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(backend)?;
        Ok(holder.zip(expires_at).map(|(holder, expires_at)| TurnLease { holder, expires_at }))
    }

    async fn set_turn_lease(&self, session: i64, lease: Option<&TurnLease>) -> Result<()> {
        self.prepare_cached("UPDATE sessions SET turn_holder = ?1, turn_expires_at = ?2 WHERE seq = ?3")
            .and_then(|mut s| s.execute(params![lease.map(|l| &l.holder), lease.map(|l| l.expires_at), session]))
            .map_err(backend)?;
        Ok(())
    }

    async fn store_access(&self, ws: &WorkspaceId, id: &SessionId, store: &MemoryStoreId) -> Result<Option<Access>> {
        let read_only: Option<bool> = query_one(
            self,
            "SELECT m.read_only FROM session_memory_stores m JOIN sessions s ON s.seq = m.session_seq \
             WHERE s.id = ?1 AND s.workspace_id = ?3 AND m.memory_store_id = ?2",
            params![id.as_str(), store.as_str(), ws.as_str()],
            |r| r.get(0),
        )?;
        Ok(read_only.map(|ro| if ro { Access::ReadOnly } else { Access::ReadWrite }))
    }
}
