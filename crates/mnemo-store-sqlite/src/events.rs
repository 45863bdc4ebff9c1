//! Session events: the log, and the rules that appending applies.

use mnemo_api::{SessionId, WorkData};
use mnemo_store::{Appended, Cursor, EventAuthor, ListEvents, Listing, Result, SessionEvent, StoreError};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use crate::engine::backend;
use crate::{now_micros, sessions, work};

fn rows(c: &Connection, sql: &str, p: impl rusqlite::Params) -> Result<Vec<SessionEvent>> {
    c.prepare_cached(sql)
        .and_then(|mut s| {
            s.query_map(p, |r| {
                let body: String = r.get(1)?;
                Ok(SessionEvent { seq: r.get(0)?, body: serde_json::from_str(&body).unwrap_or(Value::Null) })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)
}

pub(crate) fn list(c: &Connection, session: &SessionId, q: &ListEvents) -> Result<Listing<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(c, session)?;
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
            "SELECT seq, body FROM session_events WHERE session_seq = ?1 AND seq {cmp} ?2 \
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

pub(crate) fn after(c: &Connection, session: &SessionId, after: i64) -> Result<Vec<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(c, session)?;
    rows(
        c,
        "SELECT seq, body FROM session_events WHERE session_seq = ?1 AND seq > ?2 ORDER BY seq",
        params![seq, after],
    )
}

/// The tool call an answer refers to, by kind.
fn call_kind(result_type: &str) -> Option<(&'static str, &'static str)> {
    match result_type {
        "user.tool_result" => Some(("tool_use_id", "agent.tool_use")),
        "user.custom_tool_result" => Some(("custom_tool_use_id", "agent.custom_tool_use")),
        _ => None,
    }
}

/// The permission an agent's configuration gives a built-in tool: `allow`, `ask` or `deny`.
fn evaluate_permission(agent: &Value, tool: &str) -> (&'static str, Option<Value>) {
    let toolset =
        agent["tools"].as_array().and_then(|tools| tools.iter().find(|t| t["type"] == "agent_toolset_20260401"));
    let Some(toolset) = toolset else { return ("deny", None) };
    let config = toolset["configs"].as_array().and_then(|c| c.iter().find(|c| c["name"] == tool || c["type"] == tool));
    let enabled =
        config.and_then(|c| c["enabled"].as_bool()).or_else(|| toolset["default_config"]["enabled"].as_bool());
    if enabled == Some(false) {
        return ("deny", None);
    }
    let policy = config
        .map(|c| &c["permission_policy"])
        .filter(|p| !p.is_null())
        .unwrap_or(&toolset["default_config"]["permission_policy"]);
    match policy["type"].as_str() {
        Some("always_ask") => ("ask", Some(json!({"type": "always_ask"}))),
        _ => ("allow", Some(json!({"type": "always_allow"}))),
    }
}

struct Log<'a> {
    c: &'a Connection,
    session_seq: i64,
    written: Vec<SessionEvent>,
}

impl Log<'_> {
    fn push(&mut self, event: &Value) -> Result<SessionEvent> {
        let now = now_micros();
        let body = sessions::insert_event(self.c, self.session_seq, event, Some(now))?;
        let stored = SessionEvent { seq: self.c.last_insert_rowid(), body };
        self.written.push(stored.clone());
        Ok(stored)
    }

    fn set_status(&mut self, status: &str, stop_reason: Option<Value>) -> Result<()> {
        sessions::set_status(self.c, self.session_seq, status, stop_reason)
    }
}

fn open_calls(c: &Connection, session_seq: i64) -> Result<Vec<String>> {
    c.prepare_cached(
        "SELECT id FROM session_events WHERE session_seq = ?1 AND type IN ('agent.tool_use', 'agent.custom_tool_use') \
         AND answered = 0 ORDER BY seq",
    )
    .and_then(|mut s| s.query_map([session_seq], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>())
    .map_err(backend)
}

pub(crate) fn append(
    c: &Connection,
    session: &SessionId,
    events: &[Value],
    author: EventAuthor,
    lease_ttl: u64,
) -> Result<Appended> {
    let (s, session_seq) = sessions::get_with_seq(c, session)?;
    let terminated = s.status == "terminated" || s.archived_at.is_some();
    let mut log = Log { c, session_seq, written: Vec::new() };
    let mut recorded = Vec::new();
    let mut needs_worker = false;
    let mut status = s.status.clone();
    for event in events {
        let kind = event["type"].as_str().ok_or_else(|| StoreError::Invalid("every event needs a `type`".into()))?;
        if terminated {
            return Err(StoreError::Invalid(format!("session `{session}` is terminated; it accepts no events")));
        }
        if let Some((key, call_type)) = call_kind(kind) {
            let call_id = event[key].as_str().ok_or_else(|| StoreError::Invalid(format!("{kind} needs `{key}`")))?;
            let call: Option<(String, bool)> = c
                .prepare_cached("SELECT type, answered FROM session_events WHERE id = ?1 AND session_seq = ?2")
                .and_then(|mut st| {
                    st.query_row(params![call_id, session_seq], |r| Ok((r.get(0)?, r.get(1)?))).optional()
                })
                .map_err(backend)?;
            match call {
                Some((t, _)) if t != call_type => {
                    return Err(StoreError::Invalid(format!("`{call_id}` is a {t}, which {kind} cannot answer")));
                }
                None => return Err(StoreError::Invalid(format!("no {call_type} `{call_id}` in session `{session}`"))),
                Some((_, true)) => {
                    // A retried POST: the same answer again is accepted as it was; another is refused.
                    let existing = log_result(c, session_seq, kind, key, call_id)?;
                    match existing {
                        Some(e) if same_answer(&e.body, event) => {
                            recorded.push(e);
                            continue;
                        }
                        _ => return Err(StoreError::Conflict(format!("tool call `{call_id}` is already answered"))),
                    }
                }
                Some((_, false)) => {}
            }
            c.execute("UPDATE session_events SET answered = 1 WHERE id = ?1", [call_id]).map_err(backend)?;
            recorded.push(log.push(&only_request_fields(event))?);
            continue;
        }
        match kind {
            "user.tool_confirmation" => {
                let call_id = event["tool_use_id"]
                    .as_str()
                    .ok_or_else(|| StoreError::Invalid("user.tool_confirmation needs `tool_use_id`".into()))?;
                let result = event["result"].as_str().unwrap_or("");
                if !matches!(result, "allow" | "deny") {
                    return Err(StoreError::Invalid("result must be `allow` or `deny`".into()));
                }
                let exists: Option<bool> = c
                    .prepare_cached("SELECT answered FROM session_events WHERE id = ?1 AND session_seq = ?2 AND type = 'agent.tool_use'")
                    .and_then(|mut st| st.query_row(params![call_id, session_seq], |r| r.get(0)).optional())
                    .map_err(backend)?;
                match exists {
                    None => {
                        return Err(StoreError::Invalid(format!(
                            "no agent.tool_use `{call_id}` in session `{session}`"
                        )));
                    }
                    Some(true) => {
                        return Err(StoreError::Conflict(format!("tool call `{call_id}` is already resolved")));
                    }
                    Some(false) => {}
                }
                if result == "deny" {
                    c.execute("UPDATE session_events SET answered = 1 WHERE id = ?1", [call_id]).map_err(backend)?;
                }
                recorded.push(log.push(&only_request_fields(event))?);
            }
            "user.message" | "user.interrupt" | "user.define_outcome" | "system.message" => {
                needs_worker = true;
                recorded.push(log.push(&only_request_fields(event))?);
            }
            "agent.message" | "agent.tool_use" | "agent.custom_tool_use" => {
                if author != EventAuthor::Agent {
                    return Err(StoreError::Forbidden(format!(
                        "only an API key driving the session may post {kind} events"
                    )));
                }
                if status != "running" {
                    log.push(&json!({"type": "session.status_running"}))?;
                    log.set_status("running", None)?;
                    status = "running".into();
                }
                let mut event = only_request_fields(event);
                if kind != "agent.message" {
                    let name = event["name"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| StoreError::Invalid(format!("{kind} needs a `name`")))?;
                    if !event["input"].is_object() {
                        return Err(StoreError::Invalid(format!("{kind} needs an `input` object")));
                    }
                    if kind == "agent.tool_use" {
                        let (permission, evaluation) = evaluate_permission(&s.agent, name);
                        event["evaluated_permission"] = json!(permission);
                        event["evaluation"] = evaluation.unwrap_or(Value::Null);
                    }
                    needs_worker = true;
                }
                let stored = log.push(&event)?;
                if event["evaluated_permission"] == "deny" {
                    c.execute("UPDATE session_events SET answered = 1 WHERE seq = ?1", [stored.seq])
                        .map_err(backend)?;
                }
                recorded.push(stored);
            }
            "session.status_idle" => {
                if author != EventAuthor::Agent {
                    return Err(StoreError::Forbidden("only an API key driving the session may end its turn".into()));
                }
                let open = open_calls(c, session_seq)?;
                if !open.is_empty() {
                    return Err(StoreError::Invalid(format!(
                        "{} tool call(s) still wait for results; the turn cannot end yet",
                        open.len()
                    )));
                }
                let stop_reason = event
                    .get("stop_reason")
                    .filter(|r| !r.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "end_turn"}));
                recorded.push(
                    log.push(
                        &json!({"type": "session.status_idle", "stop_reason": stop_reason, "stop_details": null}),
                    )?,
                );
                log.set_status("idle", Some(stop_reason))?;
                status = "idle".into();
            }
            other => return Err(StoreError::Invalid(format!("events of type `{other}` cannot be posted"))),
        }
    }
    // The agent is blocked on tool calls: the session idles, asking for their results.
    let open = open_calls(c, session_seq)?;
    if status == "running" && !open.is_empty() && author == EventAuthor::Agent {
        let reason = json!({"type": "requires_action", "event_ids": open});
        log.push(&json!({"type": "session.status_idle", "stop_reason": reason, "stop_details": null}))?;
        log.set_status("idle", Some(reason))?;
    } else if s.status == "idle"
        && status == "idle"
        && open.is_empty()
        && s.stop_reason.as_ref().is_some_and(|r| r["type"] == "requires_action")
    {
        // Every call is answered: the agent runs again.
        log.push(&json!({"type": "session.status_running"}))?;
        log.set_status("running", None)?;
    }
    let mut enqueued_work = false;
    if needs_worker {
        let (env, env_seq) = crate::environments::get_with_seq(c, &s.environment_id)?;
        if env.is_self_hosted() && !work::has_live_work(c, session)? {
            work::enqueue(c, env_seq, &WorkData::session(session), lease_ttl)?;
            enqueued_work = true;
        }
    }
    Ok(Appended { recorded, written: log.written, enqueued_work })
}

/// Keeps the fields a client may set; the server assigns `id` and `processed_at`.
fn only_request_fields(event: &Value) -> Value {
    let mut e = event.clone();
    if let Some(o) = e.as_object_mut() {
        o.remove("id");
        o.remove("processed_at");
        o.remove("session_thread_id");
    }
    e
}

fn same_answer(stored: &Value, incoming: &Value) -> bool {
    ["content", "is_error"]
        .iter()
        .all(|k| stored.get(*k).unwrap_or(&Value::Null) == incoming.get(*k).unwrap_or(&Value::Null))
}

fn log_result(c: &Connection, session_seq: i64, kind: &str, key: &str, call_id: &str) -> Result<Option<SessionEvent>> {
    let found = rows(
        c,
        &format!(
            "SELECT seq, body FROM session_events WHERE session_seq = ?1 AND type = ?2 \
             AND json_extract(body, '$.{key}') = ?3 ORDER BY seq LIMIT 1"
        ),
        params![session_seq, kind, call_id],
    )?;
    Ok(found.into_iter().next())
}
