//! Session events: the log, and appending to it under the session's rules.
//!
//! An append locks the session's row first ([`sessions::lock`]) and holds it until it commits,
//! so what it judges (the status, the open tool calls, whether work is live) stays true while
//! it writes, and the events it writes are numbered after every event already committed: a
//! reader that has seen position `n` of a log never later finds an event before `n`.

use mnemo_api::{EventId, LoggedEvent, SessionId, SessionStatus, WorkspaceId};
use mnemo_store::ops::{self, SessionRow};
use mnemo_store::row::SessionBody;
use mnemo_store::{Cursor, ListEvents, Listing, Result, SessionEvent, StoreError};

use crate::engine::{Param, Pg, Tx, all, col, exec, opt};
use crate::{parse_id, sessions};

/// The events `sql` finds, as `(seq, id, body)` rows; a body that cannot be read back is a
/// corrupt row ([`SessionEvent::decode`]).
async fn rows(tx: &Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<Vec<SessionEvent>> {
    all(tx, sql, params)
        .await?
        .iter()
        .map(|r| SessionEvent::decode(col(r, 0)?, &col::<String>(r, 1)?, &col::<String>(r, 2)?))
        .collect()
}

pub(crate) async fn list(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    session: &SessionId,
    q: &ListEvents,
) -> Result<Listing<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(tx, ws, session).await?;
    let (bound, order, cmp) = match (&q.after, q.descending) {
        (None, false) => (i64::MIN, "ASC", ">"),
        (None, true) => (i64::MAX, "DESC", "<"),
        (Some(Cursor::After(s)), false) => (*s, "ASC", ">"),
        (Some(Cursor::Before(s)), true) => (*s, "DESC", "<"),
        _ => return Err(StoreError::InvalidCursor),
    };
    let mut events = rows(
        tx,
        &format!(
            "SELECT seq, id, body FROM session_events WHERE session_seq = $1 AND seq {cmp} $2 \
             AND (cardinality($3::text[]) = 0 OR type = ANY($3)) \
             AND COALESCE(processed_at, 0) >= $5 AND COALESCE(processed_at, 0) <= $6 ORDER BY seq {order} LIMIT $4"
        ),
        &[
            &seq,
            &bound,
            &q.types,
            &(i64::from(q.limit) + 1),
            &q.processed_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.processed_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
        ],
    )
    .await?;
    let more = events.len() > q.limit as usize;
    events.truncate(q.limit as usize);
    let next =
        more.then(|| events.last().map(|e| if q.descending { Cursor::Before(e.seq) } else { Cursor::After(e.seq) }));
    Ok(Listing { items: events, next: next.flatten() })
}

/// Every event of a session after position `after`, in log order.
pub(crate) async fn after(tx: &Tx<'_>, ws: &WorkspaceId, session: &SessionId, after: i64) -> Result<Vec<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(tx, ws, session).await?;
    rows(
        tx,
        "SELECT seq, id, body FROM session_events WHERE session_seq = $1 AND seq > $2 ORDER BY seq",
        &[&seq, &after],
    )
    .await
}

impl ops::SessionSql for Pg<'_, '_> {
    async fn lock_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<SessionRow> {
        let (session, seq) = sessions::lock(self, ws, id).await?;
        Ok(SessionRow { session, seq })
    }

    async fn unanswered_events(&self, session: i64, types: &[&str]) -> Result<Vec<EventId>> {
        let rows = all(
            self,
            "SELECT id FROM session_events WHERE session_seq = $1 AND type = ANY($2) AND NOT answered ORDER BY seq",
            &[&session, &types],
        )
        .await?;
        rows.iter().map(|r| parse_id(&col::<String>(r, 0)?)).collect()
    }

    async fn event_answered(&self, session: i64, id: &EventId) -> Result<Option<(String, bool)>> {
        let row = opt(
            self,
            "SELECT type, answered FROM session_events WHERE id = $1 AND session_seq = $2",
            &[&id.as_str(), &session],
        )
        .await?;
        row.map(|row| Ok((col(&row, 0)?, col(&row, 1)?))).transpose()
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
            "SELECT seq, id, body FROM session_events WHERE session_seq = $1 AND type = $2 \
             AND (body::jsonb ->> $3) = $4 ORDER BY seq LIMIT 1",
            &[&session, &kind, &key, &id.as_str()],
        )
        .await?;
        Ok(found.into_iter().next())
    }

    async fn insert_event(&self, session: i64, event: &LoggedEvent, processed_at: i64) -> Result<i64> {
        sessions::insert_event(self, session, event, processed_at).await
    }

    async fn mark_answered(&self, session: i64, id: &EventId) -> Result<()> {
        exec(
            self,
            "UPDATE session_events SET answered = TRUE WHERE id = $1 AND session_seq = $2",
            &[&id.as_str(), &session],
        )
        .await
        .map(drop)
    }

    async fn update_session_state(
        &self,
        session: i64,
        status: SessionStatus,
        body: &SessionBody,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "UPDATE sessions SET status = $1, body = $2, updated_at = $3 WHERE seq = $4",
            &[&status.as_str(), &body.to_json()?, &now, &session],
        )
        .await
        .map(drop)
    }
}
