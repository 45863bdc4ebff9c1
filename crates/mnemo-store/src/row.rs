//! How every backend lays values out in its rows, in one place: both backends store the same
//! columns the same way (so `mnemo db copy` moves rows column for column), and a backend only
//! reads and writes them.
//!
//! Timestamps are microseconds since the Unix epoch; an actor is two columns `(kind, id)`; a
//! session's descriptive fields are one JSON column ([`SessionBody`]); newest-first listings
//! page by row number ([`before`], [`page`]); a memory listing rolled up by depth is a scan
//! that a backend feeds in batches ([`RollupScan`]).

use std::collections::BTreeMap;

use chrono::DateTime;
use mnemo_api::{
    Actor, Memory, MemoryListItem, MemoryPrefix, MemoryStoreResource, ModelUsage, Session, SessionId, SessionStatus,
    StopReason, Timestamp, Work, WorkData, WorkId, WorkState,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ops::WorkRow;
use crate::rules::work::Lease;
use crate::{Cursor, ListMemories, ListMemoryVersions, Listing, Result, SESSIONS_TABLE, StoreError, rollup};

/// A timestamp column (microseconds since the epoch).
pub fn ts(micros: i64) -> Timestamp {
    DateTime::from_timestamp_micros(micros).unwrap_or_default()
}

/// A nullable timestamp column.
pub fn ts_opt(micros: Option<i64>) -> Option<Timestamp> {
    micros.map(ts)
}

/// A nullable timestamp column as the API's RFC 3339 text.
pub fn rfc3339_opt(micros: Option<i64>) -> Option<String> {
    micros.map(mnemo_api::rfc3339_micros)
}

/// An actor as the two columns `(kind, id)`.
pub fn actor_columns(actor: &Actor) -> (&'static str, &str) {
    match actor {
        Actor::SessionActor { session_id } => ("session_actor", session_id.as_str()),
        Actor::ApiActor { api_key_id } => ("api_actor", api_key_id.as_str()),
        Actor::UserActor { user_id } => ("user_actor", user_id),
        Actor::ServiceAccountActor { service_account_id } => ("service_account_actor", service_account_id),
    }
}

/// An actor read back from its two columns; unknown shapes read as "not recorded".
pub fn actor_from_columns(kind: Option<String>, id: Option<String>) -> Option<Actor> {
    let id = id?;
    Some(match kind?.as_str() {
        "session_actor" => Actor::SessionActor { session_id: id.parse().ok()? },
        "api_actor" => Actor::ApiActor { api_key_id: id.parse().ok()? },
        "user_actor" => Actor::UserActor { user_id: id },
        "service_account_actor" => Actor::ServiceAccountActor { service_account_id: id },
        _ => return None,
    })
}

/// An id column; a malformed one is a database failure.
pub fn parse_id<T: std::str::FromStr>(s: &str) -> Result<T> {
    s.parse().map_err(|_| StoreError::backend(format!("malformed id `{s}` in the database")))
}

/// The exclusive upper bound of a newest-first page: rows older than the cursor.
pub fn before(after: Option<&Cursor>) -> Result<i64> {
    match after {
        None => Ok(i64::MAX),
        Some(Cursor::Before(seq)) => Ok(*seq),
        Some(_) => Err(StoreError::InvalidCursor),
    }
}

/// Cuts `limit + 1` newest-first rows (with their row numbers) into a page and its cursor.
pub fn page<T>(mut rows: Vec<(T, i64)>, limit: u32) -> Listing<T> {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = if more { rows.last().map(|(_, seq)| Cursor::Before(*seq)) } else { None };
    Listing { items: rows.into_iter().map(|(item, _)| item).collect(), next }
}

/// The JSON column of a session row: what a session says about itself beyond its id,
/// environment, status and times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionBody {
    pub title: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub agent: Value,
    pub resources: Vec<MemoryStoreResource>,
    pub budget: Option<Value>,
    pub stop_reason: Option<StopReason>,
    pub memory_prompt: Option<String>,
    /// Tokens the session's model calls used, summed (absent: none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ModelUsage>,
}

/// A session's `usage` as the API shows it.
pub fn usage_json(usage: ModelUsage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.cache_creation_input_tokens},
    })
}

/// Reads back what [`usage_json`] wrote.
fn usage_of(value: &Value) -> Option<ModelUsage> {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let usage = ModelUsage {
        input_tokens: n(&value["input_tokens"]),
        output_tokens: n(&value["output_tokens"]),
        cache_read_input_tokens: n(&value["cache_read_input_tokens"]),
        cache_creation_input_tokens: n(&value["cache_creation"]["ephemeral_5m_input_tokens"]),
    };
    (usage != ModelUsage::default()).then_some(usage)
}

/// The columns of a session row besides its body.
#[derive(Debug, Clone)]
pub struct SessionColumns {
    pub id: String,
    pub environment_id: String,
    pub status: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub archived_at: Option<i64>,
}

impl SessionBody {
    /// The body of a session as loaded.
    pub fn of(s: &Session) -> Self {
        Self {
            title: s.title.clone(),
            metadata: s.metadata.clone(),
            agent: s.agent.clone(),
            resources: s.resources.clone(),
            budget: s.budget.clone(),
            stop_reason: s.stop_reason.clone(),
            memory_prompt: s.memory_prompt.clone(),
            usage: usage_of(&s.usage),
        }
    }

    /// The column's text.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| StoreError::backend(format!("serialise a session body: {e}")))
    }

    /// Reads the column's text of session row `id`; text that cannot be read is a
    /// [`StoreError::corrupt`] naming the row.
    pub fn parse(id: &str, text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| StoreError::corrupt(SESSIONS_TABLE, &id, "body", e))
    }

    /// The session a row holds; a column that cannot be read is a [`StoreError::corrupt`].
    pub fn into_session(self, columns: &SessionColumns) -> Result<Session> {
        let corrupt =
            |column, cause: &dyn std::fmt::Display| StoreError::corrupt(SESSIONS_TABLE, &columns.id, column, cause);
        let id: SessionId = columns.id.parse().map_err(|e| corrupt("id", &e))?;
        let status = SessionStatus::parse(&columns.status)
            .ok_or_else(|| corrupt("status", &format_args!("`{}` is not a session status", columns.status)))?;
        Ok(Session {
            id,
            environment_id: columns.environment_id.parse().map_err(|e| corrupt("environment_id", &e))?,
            status,
            title: self.title,
            metadata: self.metadata,
            agent: self.agent,
            resources: self.resources,
            budget: self.budget,
            outcome_evaluations: Vec::new(),
            stats: json!({"active_seconds": 0.0, "duration_seconds": 0.0}),
            usage: usage_json(self.usage.unwrap_or_default()),
            vault_ids: Vec::new(),
            deployment_id: None,
            created_at: ts(columns.created_at),
            updated_at: ts(columns.updated_at),
            archived_at: ts_opt(columns.archived_at),
            stop_reason: self.stop_reason,
            memory_prompt: self.memory_prompt,
        })
    }
}

/// A row as a backend's driver hands it over, read by position in the types every backend
/// stores (TEXT and 64-bit INTEGER columns). Each backend implements it once for its row type,
/// so a row shape is decoded once for all backends (e.g. [`work`]).
pub trait Columns {
    /// A TEXT column.
    fn text(&self, idx: usize) -> Result<String>;
    /// A nullable TEXT column.
    fn opt_text(&self, idx: usize) -> Result<Option<String>>;
    /// An INTEGER column.
    fn int(&self, idx: usize) -> Result<i64>;
    /// A nullable INTEGER column.
    fn opt_int(&self, idx: usize) -> Result<Option<i64>>;
}

/// The table of work items.
pub const WORK_TABLE: &str = "work_items";

/// What [`work`] reads, in order, over `w` (the item) joined to `e` (its environment).
pub const WORK_COLUMNS: &str = "w.id, e.id, w.state, w.data, w.metadata, w.created_at, w.acknowledged_at, \
                                w.started_at, w.latest_heartbeat_at, w.stop_requested_at, w.stopped_at, w.seq, \
                                w.last_heartbeat, w.ttl_seconds, w.pending_until, w.lease_expires_at";

/// The typed columns of work item `id` — its state, data, metadata and lease length — read
/// from what is stored; one that cannot be read is a [`StoreError::corrupt`] naming it.
pub fn work_typed(
    id: &str,
    state: &str,
    data: &str,
    metadata: &str,
    ttl_seconds: i64,
) -> Result<(WorkState, WorkData, BTreeMap<String, String>, u64)> {
    let corrupt = |column, cause: &dyn std::fmt::Display| StoreError::corrupt(WORK_TABLE, &id, column, cause);
    let state = WorkState::parse(state).ok_or_else(|| corrupt("state", &format_args!("unknown state `{state}`")))?;
    let data = serde_json::from_str(data).map_err(|e| corrupt("data", &e))?;
    let metadata = serde_json::from_str(metadata).map_err(|e| corrupt("metadata", &e))?;
    let ttl_seconds = u64::try_from(ttl_seconds).map_err(|e| corrupt("ttl_seconds", &e))?;
    Ok((state, data, metadata, ttl_seconds))
}

/// A work item selected as [`WORK_COLUMNS`].
pub fn work(r: &impl Columns) -> Result<WorkRow> {
    let id = r.text(0)?;
    let (state, data, metadata, ttl_seconds) = work_typed(&id, &r.text(2)?, &r.text(3)?, &r.text(4)?, r.int(13)?)?;
    let id: WorkId = parse_id(&id)?;
    let lease = Lease {
        id: id.clone(),
        state,
        pending_until: r.opt_int(14)?,
        lease_expires_at: r.opt_int(15)?,
        last_heartbeat: r.opt_text(12)?,
        ttl_seconds,
        acknowledged_at: r.opt_int(6)?,
        started_at: r.opt_int(7)?,
        latest_heartbeat_at: r.opt_int(8)?,
        stop_requested_at: r.opt_int(9)?,
        stopped_at: r.opt_int(10)?,
    };
    Ok(WorkRow {
        work: Work {
            id,
            environment_id: parse_id(&r.text(1)?)?,
            state,
            data,
            secret: None,
            metadata,
            created_at: mnemo_api::rfc3339_micros(r.int(5)?),
            acknowledged_at: rfc3339_opt(lease.acknowledged_at),
            started_at: rfc3339_opt(lease.started_at),
            latest_heartbeat_at: rfc3339_opt(lease.latest_heartbeat_at),
            stop_requested_at: rfc3339_opt(lease.stop_requested_at),
            stopped_at: rfc3339_opt(lease.stopped_at),
        },
        lease,
        seq: r.int(11)?,
    })
}

/// The one actor filter of a version listing, as columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorFilter<'a> {
    /// No actor filter.
    Any,
    /// `actor_kind = .0 AND actor_id = .1`.
    One(&'static str, &'a str),
    /// Filters on two different actor kinds: no version matches.
    Nothing,
}

impl<'a> ActorFilter<'a> {
    /// The filter as a listing's `(actor_kind, actor_id)` parameters (both `NULL`: any actor);
    /// `None` when no version matches.
    pub fn params(self) -> Option<(Option<&'static str>, Option<&'a str>)> {
        match self {
            ActorFilter::Any => Some((None, None)),
            ActorFilter::One(kind, id) => Some((Some(kind), Some(id))),
            ActorFilter::Nothing => None,
        }
    }
}

impl ListMemoryVersions {
    /// The listing's actor filter (`session_id`, `api_key_id`, `service_account_id`) as columns.
    pub fn actor_filter(&self) -> ActorFilter<'_> {
        let actors: Vec<(&'static str, &str)> = [
            self.session_id.as_ref().map(|s| ("session_actor", s.as_str())),
            self.api_key_id.as_ref().map(|k| ("api_actor", k.as_str())),
            self.service_account_id.as_deref().map(|s| ("service_account_actor", s)),
        ]
        .into_iter()
        .flatten()
        .collect();
        match actors.as_slice() {
            [] => ActorFilter::Any,
            [(kind, id)] => ActorFilter::One(kind, id),
            _ => ActorFilter::Nothing,
        }
    }
}

/// One batch a [`RollupScan`] wants: memories of the store with `from <= path`, `after < path`
/// and `path < until`, in byte order of path, at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanBatch {
    pub from: String,
    pub after: String,
    pub until: String,
    pub limit: usize,
}

/// A memory listing in byte order of path with keyset pagination. With a depth, each run of
/// memories below a rolled-up prefix becomes one `memory_prefix` item and the scan seeks past
/// the prefix's subtree, so a page costs O(limit) index seeks however many memories hide below.
/// A backend asks [`Self::next_batch`], runs it, and hands the rows to [`Self::feed`].
#[derive(Debug)]
pub struct RollupScan<'q> {
    query: &'q ListMemories,
    from: String,
    after: String,
    until: String,
    want: usize,
    items: Vec<(MemoryListItem, Cursor)>,
    done: bool,
}

impl<'q> RollupScan<'q> {
    /// A scan for `query`; a cursor of another listing is refused.
    pub fn new(query: &'q ListMemories) -> Result<Self> {
        let (lo, hi) = query.prefix.range();
        let (from, after) = match &query.after {
            None => (lo, String::new()),
            Some(Cursor::AfterPath(p)) => (lo, p.clone()),
            Some(Cursor::FromPath(p)) => (lo.max(p.clone()), String::new()),
            Some(Cursor::Before(_) | Cursor::After(_) | Cursor::Offset(_)) => return Err(StoreError::InvalidCursor),
        };
        let want = query.limit as usize + 1;
        Ok(Self { query, from, after, until: hi, want, items: Vec::with_capacity(want), done: false })
    }

    /// The batch to read next, or `None` when the page is complete.
    pub fn next_batch(&self) -> Option<ScanBatch> {
        (!self.done && self.items.len() < self.want).then(|| ScanBatch {
            from: self.from.clone(),
            after: self.after.clone(),
            until: self.until.clone(),
            limit: self.want - self.items.len(),
        })
    }

    /// Takes the rows `batch` found (in path order).
    pub fn feed(&mut self, batch: &ScanBatch, memories: Vec<Memory>) {
        let seen = memories.len();
        for memory in memories {
            match rollup(&self.query.prefix, self.query.depth, &memory.path) {
                None => {
                    let cursor = Cursor::AfterPath(memory.path.clone());
                    self.items.push((MemoryListItem::Memory(memory), cursor));
                }
                Some(dir) => {
                    // Skip the whole subtree: the next candidate is >= dir with its `/` bumped.
                    let mut skip = dir[..dir.len() - 1].to_owned();
                    skip.push('0');
                    let item = MemoryListItem::Prefix(MemoryPrefix { path: dir.to_owned() });
                    self.items.push((item, Cursor::FromPath(skip.clone())));
                    self.from = skip;
                    self.after = String::new();
                    return;
                }
            }
            if self.items.len() == self.want {
                return;
            }
        }
        if seen < batch.limit {
            self.done = true;
        } else if let Some((_, Cursor::AfterPath(p))) = self.items.last() {
            self.after = p.clone();
        }
    }

    /// The page and its cursor.
    pub fn finish(self) -> Listing<MemoryListItem> {
        let mut items = self.items;
        let more = items.len() > self.query.limit as usize;
        items.truncate(self.query.limit as usize);
        let next = if more { items.last().map(|(_, c)| c.clone()) } else { None };
        Listing { items: items.into_iter().map(|(i, _)| i).collect(), next }
    }
}

/// The audit log's table.
pub const AUDIT_TABLE: &str = "audit_events";

/// What [`audit_event`] reads, in order.
pub const AUDIT_COLUMNS: &str = "id, created_at, workspace_id, actor_type, actor_id, action, resource_type, \
                                 resource_id, client_ip, outcome, details";

/// An audit entry selected as [`AUDIT_COLUMNS`]; a column that cannot be read is a
/// [`StoreError::corrupt`] naming it.
pub fn audit_event(r: &impl Columns) -> Result<mnemo_api::AuditEvent> {
    use mnemo_api::{AuditActor, AuditActorType, AuditOutcome, AuditResource};
    let id = r.text(0)?;
    let corrupt = |column, cause: &dyn std::fmt::Display| StoreError::corrupt(AUDIT_TABLE, &id, column, cause);
    let created_at = ts(r.int(1)?);
    let workspace_id = r.opt_text(2)?.map(|w| w.parse()).transpose().map_err(|e| corrupt("workspace_id", &e))?;
    let actor_type = r.text(3)?;
    let kind: AuditActorType = serde_json::from_value(serde_json::Value::String(actor_type.clone()))
        .map_err(|_| corrupt("actor_type", &format_args!("`{actor_type}` is not an actor type")))?;
    let resource = match (r.opt_text(6)?, r.opt_text(7)?) {
        (Some(kind), Some(id)) => Some(AuditResource { kind, id }),
        _ => None,
    };
    let outcome = r.text(9)?;
    let outcome: AuditOutcome = serde_json::from_value(serde_json::Value::String(outcome.clone()))
        .map_err(|_| corrupt("outcome", &format_args!("`{outcome}` is not an outcome")))?;
    let details = serde_json::from_str(&r.text(10)?).map_err(|e| corrupt("details", &e))?;
    Ok(mnemo_api::AuditEvent {
        id: id.parse().map_err(|e| corrupt("id", &e))?,
        created_at,
        workspace_id,
        actor: AuditActor { kind, id: r.text(4)? },
        action: r.text(5)?,
        resource,
        client_ip: r.opt_text(8)?,
        outcome,
        details,
    })
}

#[cfg(test)]
mod tests {
    use mnemo_api::{MemoryId, PathPrefix, View};

    use super::*;

    fn memory(path: &str) -> Memory {
        Memory {
            id: MemoryId::generate(),
            memory_store_id: mnemo_api::MemoryStoreId::generate(),
            path: path.into(),
            content_sha256: String::new(),
            content_size_bytes: 0,
            memory_version_id: mnemo_api::MemoryVersionId::generate(),
            created_at: ts(0),
            updated_at: ts(0),
            content: None,
        }
    }

    /// Runs a scan over `paths` (sorted) as a backend would.
    fn scan(paths: &[&str], depth: u32, limit: u32, after: Option<Cursor>) -> (Vec<String>, Option<Cursor>, usize) {
        let query = ListMemories { prefix: PathPrefix::root(), depth, limit, view: View::Basic, after };
        let mut scan = RollupScan::new(&query).unwrap();
        let mut batches = 0;
        while let Some(batch) = scan.next_batch() {
            batches += 1;
            let rows: Vec<Memory> = paths
                .iter()
                .filter(|p| **p >= batch.from.as_str() && **p > batch.after.as_str() && **p < batch.until.as_str())
                .take(batch.limit)
                .map(|p| memory(p))
                .collect();
            scan.feed(&batch, rows);
        }
        let page = scan.finish();
        let names = page
            .items
            .iter()
            .map(|i| match i {
                MemoryListItem::Memory(m) => m.path.clone(),
                MemoryListItem::Prefix(p) => p.path.clone(),
            })
            .collect();
        (names, page.next, batches)
    }

    #[test]
    fn a_rolled_up_scan_seeks_past_subtrees_and_pages() {
        let paths = ["/a/1", "/a/2", "/a/3", "/b", "/c/x/y", "/d"];
        let (names, next, batches) = scan(&paths, 1, 10, None);
        assert_eq!(names, ["/a/", "/b", "/c/", "/d"]);
        assert_eq!(next, None);
        assert_eq!(batches, 3, "one seek per rolled-up prefix, then the rest in one batch");

        let (first, next, _) = scan(&paths, 1, 2, None);
        assert_eq!(first, ["/a/", "/b"]);
        let (second, next, _) = scan(&paths, 1, 2, next);
        assert_eq!(second, ["/c/", "/d"]);
        assert_eq!(next, None);

        let (flat, _, _) = scan(&paths, 0, 10, None);
        assert_eq!(flat, paths);
        assert!(
            RollupScan::new(&ListMemories {
                prefix: PathPrefix::root(),
                depth: 0,
                limit: 1,
                view: View::Basic,
                after: Some(Cursor::Before(3))
            })
            .is_err()
        );
    }

    #[test]
    fn version_listings_have_at_most_one_actor_filter() {
        let mut q = ListMemoryVersions::newest(10);
        assert_eq!(q.actor_filter(), ActorFilter::Any);
        assert_eq!(q.actor_filter().params(), Some((None, None)));
        q.service_account_id = Some("svc".into());
        assert_eq!(q.actor_filter(), ActorFilter::One("service_account_actor", "svc"));
        assert_eq!(q.actor_filter().params(), Some((Some("service_account_actor"), Some("svc"))));
        q.api_key_id = Some(mnemo_api::ApiKeyId::generate());
        assert_eq!(q.actor_filter(), ActorFilter::Nothing);
        assert_eq!(q.actor_filter().params(), None);
    }

    #[test]
    fn actors_survive_their_columns() {
        for actor in [
            Actor::UserActor { user_id: "u".into() },
            Actor::ServiceAccountActor { service_account_id: "s".into() },
            Actor::SessionActor { session_id: SessionId::generate() },
        ] {
            let (kind, id) = actor_columns(&actor);
            assert_eq!(actor_from_columns(Some(kind.into()), Some(id.into())), Some(actor.clone()));
        }
        assert_eq!(actor_from_columns(Some("robot".into()), Some("r".into())), None);
        assert_eq!(actor_from_columns(None, Some("r".into())), None);
    }
}
