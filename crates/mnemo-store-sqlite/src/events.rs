//! Session events: the log, and appending to it under the session's rules.

use mnemo_api::{EventId, LoggedEvent, SessionId, SessionStatus, WorkspaceId};
use mnemo_store::ops::{self, SessionRow};
use mnemo_store::row::SessionBody;
use mnemo_store::{Cursor, ListEvents, Listing, Result, SessionEvent, StoreError};
use rusqlite::{Connection, params};

use crate::engine::{Lite, backend, query_all, query_one};
use crate::{parse_id, sessions};

/// The events `sql` finds, as `(seq, id, body)` rows; a body that cannot be read back is a
/// corrupt row ([`SessionEvent::decode`]).
fn rows(c: &Connection, sql: &str, p: impl rusqlite::Params) -> Result<Vec<SessionEvent>> {
    let raw = query_all(c, sql, p, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
    raw.into_iter().map(|(seq, id, body)| SessionEvent::decode(seq, &id, &body)).collect()
}

pub(crate) fn list(
    c: &Connection,
    ws: &WorkspaceId,
    session: &SessionId,
    q: &ListEvents,
) -> Result<Listing<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(c, ws, session)?;
    let types = serde_json::to_string(&q.types).map_err(backend)?;
    let (bound, order, cmp) = match (&q.after, q.descending) {
        (None, false) => (i64::MIN, "ASC", ">"),
        (None, true) => (i64::MAX, "DESC", "<"),
        (Some(Cursor::After(s)), false) => (*s, "ASC", ">"),
        (Some(Cursor::Before(s)), true) => (*s, "DESC", "<"),
        _ => return Err(StoreError::InvalidCursor),
    };
    let mut events = rows(
        c,
        &format!(
            "SELECT seq, id, body FROM session_events WHERE session_seq = ?1 AND seq {cmp} ?2 \
             AND (?3 = '[]' OR type IN (SELECT value FROM json_each(?3))) \
             AND COALESCE(processed_at, 0) >= ?5 AND COALESCE(processed_at, 0) <= ?6 ORDER BY seq {order} LIMIT ?4"
        ),
        params![
            seq,
            bound,
            types,
            i64::from(q.limit) + 1,
            q.processed_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            q.processed_lte.map_or(i64::MAX, |t| t.timestamp_micros())
        ],
    )?;
    let more = events.len() > q.limit as usize;
    events.truncate(q.limit as usize);
    let next =
        more.then(|| events.last().map(|e| if q.descending { Cursor::Before(e.seq) } else { Cursor::After(e.seq) }));
    Ok(Listing { items: events, next: next.flatten() })
}

pub(crate) fn after(c: &Connection, ws: &WorkspaceId, session: &SessionId, after: i64) -> Result<Vec<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(c, ws, session)?;
    rows(
        c,
        "SELECT seq, id, body FROM session_events WHERE session_seq = ?1 AND seq > ?2 ORDER BY seq",
        params![seq, after],
    )
}

impl ops::SessionSql for Lite<'_> {
    async fn lock_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<SessionRow> {
        // The single writer excludes every other writer: reading is locking.
        let (session, seq) = sessions::get_with_seq(self, ws, id)?;
        Ok(SessionRow { session, seq })
    }

    async fn unanswered_events(&self, session: i64, types: &[&str]) -> Result<Vec<EventId>> {
        let types = serde_json::to_string(types).map_err(backend)?;
        let ids = self
            .prepare_cached(
                "SELECT id FROM session_events WHERE session_seq = ?1 AND type IN (SELECT value FROM json_each(?2)) \
                 AND answered = 0 ORDER BY seq",
            )
            .and_then(|mut s| {
                s.query_map(params![session, types], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()
            })
            .map_err(backend)?;
        ids.iter().map(|id| parse_id(id)).collect()
    }

    async fn event_answered(&self, session: i64, id: &EventId) -> Result<Option<(String, bool)>> {
        query_one(
            self,
            "SELECT type, answered FROM session_events WHERE id = ?1 AND session_seq = ?2",
            params![id.as_str(), session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    async fn first_event_naming(
        &self,
        session: i64,
        kind: &str,
        key: &str,
        id: &EventId,
    ) -> Result<Option<SessionEvent>> {
        let found = rows(
            self,
            "SELECT seq, id, body FROM session_events WHERE session_seq = ?1 AND type = ?2 \
             AND json_extract(body, '$.' || ?3) = ?4 ORDER BY seq LIMIT 1",
            params![session, kind, key, id.as_str()],
        )?;
        Ok(found.into_iter().next())
    }

    async fn insert_event(&self, session: i64, event: &LoggedEvent, processed_at: i64) -> Result<i64> {
        sessions::insert_event(self, session, event, processed_at)
    }

    async fn mark_answered(&self, session: i64, id: &EventId) -> Result<()> {
        self.prepare_cached("UPDATE session_events SET answered = 1 WHERE id = ?1 AND session_seq = ?2")
            .and_then(|mut st| st.execute(params![id.as_str(), session]))
            .map_err(backend)?;
        Ok(())
    }

    async fn update_session_state(
        &self,
        session: i64,
        status: SessionStatus,
        body: &SessionBody,
        now: i64,
    ) -> Result<()> {
        let body = body.to_json()?;
        self.prepare_cached("UPDATE sessions SET status = ?1, body = ?2, updated_at = ?3 WHERE seq = ?4")
            .and_then(|mut st| st.execute(params![status.as_str(), body, now, session]))
            .map_err(backend)?;
        Ok(())
    }
}
