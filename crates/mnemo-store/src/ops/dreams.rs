//! Dreams, each operation written once over [`DreamSql`]: create (checked against the
//! workspace's stores and sessions), cancel and archive ([`dream::cancel`], [`dream::archive`]),
//! the runner's lease ([`agent::claim`], as a session's turn), the start that creates the
//! dream's session in the transaction that makes it `running`, the copy of the input into a
//! new output store in one transaction, usage, and the finish that archives the session and
//! lets go of the lease.
//!
//! Every operation on an existing dream locks its row first (PostgreSQL `FOR UPDATE`); the
//! start and the copy then take the session's and the stores' locks as their own operations
//! do.

use mnemo_api::{
    Actor, Dream, DreamError, DreamId, DreamModel, DreamOutput, DreamRequest, DreamStatus, DreamUsage, MemoryPath,
    MemoryStoreId, WorkspaceId,
};

use super::agents::AgentSql;
use super::credentials::CredentialSql;
use super::environments::EnvironmentSql;
use super::memories::{MemorySql, create_memory};
use super::sessions::{SessionRowSql, archive as archive_session, create as create_session};
use super::stores::{LockedStore, StoreSql, create_store};
use super::webhooks::WebhookSql;
use super::work::WorkSql;
use super::{Micros, Seq};
use crate::row::ts;
use crate::rules::agent::{self, Claim, TurnLease};
use crate::rules::dream::{self, Change, Outcome, code};
use crate::{Cursor, Listing, NewMemoryStore, NewSession, Result, StoreError};

/// A dream as stored: the object, and what only the server sees.
#[derive(Debug, Clone, PartialEq)]
pub struct DreamRow {
    pub seq: Seq,
    pub workspace: WorkspaceId,
    pub dream: Dream,
    /// Who runs it, until when.
    pub lease: Option<TurnLease>,
    /// The `Idempotency-Key` it was created with, and the SHA-256 of that request.
    pub idempotency: Option<(String, String)>,
}

/// A dream row's columns as both backends store them (`body` is the dream object's JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DreamColumns {
    pub id: String,
    pub workspace_id: String,
    pub status: &'static str,
    pub input_store_id: String,
    pub update_existing: bool,
    pub output_store_id: Option<String>,
    pub session_id: Option<String>,
    pub created_at: Micros,
    pub archived_at: Option<Micros>,
    pub lease_holder: Option<String>,
    pub lease_expires_at: Option<Micros>,
    pub idempotency_key: Option<String>,
    pub request_sha256: Option<String>,
    pub body: String,
}

/// The table of dreams, as [`StoreError::corrupt`] names it.
pub const DREAMS_TABLE: &str = "dreams";

impl DreamRow {
    /// The row's columns.
    pub fn columns(&self) -> Result<DreamColumns> {
        let d = &self.dream;
        Ok(DreamColumns {
            id: d.id.to_string(),
            workspace_id: self.workspace.to_string(),
            status: d.status.as_str(),
            input_store_id: d.input_store().map(ToString::to_string).unwrap_or_default(),
            update_existing: self.update_existing(),
            output_store_id: d.output_store().map(ToString::to_string),
            session_id: d.session_id.as_ref().map(ToString::to_string),
            created_at: d.created_at.timestamp_micros(),
            archived_at: d.archived_at.map(|t| t.timestamp_micros()),
            lease_holder: self.lease.as_ref().map(|l| l.holder.clone()),
            lease_expires_at: self.lease.as_ref().map(|l| l.expires_at),
            idempotency_key: self.idempotency.as_ref().map(|(k, _)| k.clone()),
            request_sha256: self.idempotency.as_ref().map(|(_, s)| s.clone()),
            body: serde_json::to_string(d).map_err(StoreError::backend)?,
        })
    }

    /// Reads a row back from its number, workspace, body and the server-only columns.
    pub fn decode(
        seq: Seq,
        workspace: &str,
        body: &str,
        lease: (Option<String>, Option<Micros>),
        idempotency: (Option<String>, Option<String>),
    ) -> Result<Self> {
        let dream: Dream =
            serde_json::from_str(body).map_err(|e| StoreError::corrupt(DREAMS_TABLE, &seq, "body", e))?;
        let lease = match lease {
            (Some(holder), Some(expires_at)) => Some(TurnLease { holder, expires_at }),
            _ => None,
        };
        let idempotency = match idempotency {
            (Some(key), Some(sha)) => Some((key, sha)),
            _ => None,
        };
        Ok(Self { seq, workspace: crate::row::parse_id(workspace)?, dream, lease, idempotency })
    }

    /// Whether it rewrites its input store.
    pub fn update_existing(&self) -> bool {
        matches!(self.dream.output_behavior, mnemo_api::OutputBehavior::UpdateExisting { .. })
    }
}

/// Filters of the dream listing (newest first).
#[derive(Debug, Clone, Default)]
pub struct ListDreams {
    /// Inclusive bounds on `created_at`.
    pub created_at_gte: Option<mnemo_api::Timestamp>,
    pub created_at_lte: Option<mnemo_api::Timestamp>,
    pub statuses: Vec<DreamStatus>,
    pub include_archived: bool,
    pub limit: u32,
    pub after: Option<Cursor>,
}

/// A dream a runner claimed.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub workspace: WorkspaceId,
    pub dream: Dream,
}

/// SQL over dreams.
pub trait DreamSql: StoreSql {
    /// Inserts a dream; its row number.
    async fn insert_dream(&self, row: &DreamRow) -> Result<Seq>;
    /// Workspace `ws`'s dream `id`, without a lock; `None` when unknown or another workspace's.
    async fn find_dream(&self, ws: &WorkspaceId, id: &DreamId) -> Result<Option<DreamRow>>;
    /// Workspace `ws`'s dream `id`, its row locked until the transaction ends; `None` when
    /// unknown or another workspace's.
    async fn lock_dream(&self, ws: &WorkspaceId, id: &DreamId) -> Result<Option<DreamRow>>;
    /// Writes a dream's object, columns and lease back.
    async fn write_dream(&self, row: &DreamRow) -> Result<()>;
    /// A page of workspace `ws`'s dreams, newest first: at most `limit + 1` rows.
    async fn list_dream_rows(&self, ws: &WorkspaceId, q: &ListDreams) -> Result<Vec<DreamRow>>;
    /// How many of workspace `ws`'s dreams are in `status`.
    async fn count_dreams(&self, ws: &WorkspaceId, status: DreamStatus) -> Result<u64>;
    /// The `update_existing` dreams on store `store` in one of `statuses` or still leased.
    async fn update_dreams_on(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        statuses: &[DreamStatus],
    ) -> Result<Vec<DreamRow>>;
    /// Dreams in one of `statuses` whose lease is free or lapsed at `now`, oldest first; at
    /// most `limit`.
    async fn runnable_dreams(
        &self,
        now: Micros,
        statuses: &[DreamStatus],
        limit: u32,
    ) -> Result<Vec<(WorkspaceId, DreamId)>>;
    /// How many dreams in one of `statuses` hold a live lease at `now`.
    async fn held_dreams(&self, now: Micros, statuses: &[DreamStatus]) -> Result<u64>;
    /// Workspace `ws`'s dream created with idempotency key `key`.
    async fn dream_by_idempotency_key(&self, ws: &WorkspaceId, key: &str) -> Result<Option<DreamRow>>;
    /// The live memories of store `store` (row number), path order: path and content.
    async fn store_contents(&self, store: Seq) -> Result<Vec<(String, String)>>;
    /// The versions of store `store` written by `actor`.
    async fn versions_by(&self, store: Seq, actor: &Actor) -> Result<u64>;
    /// A dream of workspace `ws` in one of `statuses` whose session, or `create_new` output
    /// store, is `id`.
    async fn active_dream_using(&self, ws: &WorkspaceId, id: &str, statuses: &[DreamStatus])
    -> Result<Option<DreamId>>;
}

fn not_found(id: &DreamId) -> StoreError {
    StoreError::not_found("dream", id)
}

async fn locked<S: DreamSql>(sql: &S, ws: &WorkspaceId, id: &DreamId) -> Result<DreamRow> {
    sql.lock_dream(ws, id).await?.ok_or_else(|| not_found(id))
}

/// Creates a dream in workspace `ws`, `pending`. Checks, first failing wins: a retried
/// `Idempotency-Key` (the same request answers the same dream; another is a conflict), the
/// input store (exists here, not archived), each session (exists here, not archived), another
/// `update_existing` dream holding the store, and the workspace's queue (`max_pending`).
pub async fn create<S: DreamSql + super::SessionSql>(
    sql: &S,
    ws: &WorkspaceId,
    request: &DreamRequest,
    idempotency: Option<(String, String)>,
    max_pending: u32,
) -> Result<Dream> {
    if let Some((key, sha)) = &idempotency
        && let Some(existing) = sql.dream_by_idempotency_key(ws, key).await?
    {
        return match &existing.idempotency {
            Some((_, same)) if same == sha => Ok(existing.dream),
            _ => Err(StoreError::Conflict(format!(
                "Idempotency-Key `{key}` was used for another request (dream `{}`)",
                existing.dream.id
            ))),
        };
    }
    let store = sql.get_store(ws, &request.store).await?;
    if store.archived_at.is_some() {
        return Err(StoreError::Invalid(format!(
            "inputs: memory store `{}` is archived; a dream reads a live store",
            store.id
        )));
    }
    for id in &request.sessions {
        let session = sql.lock_session(ws, id).await?.session;
        if session.archived_at.is_some() {
            return Err(StoreError::Invalid(format!("inputs: session `{id}` is archived")));
        }
    }
    if request.update_existing {
        let holders = sql.update_dreams_on(ws, &request.store, &dream::ACTIVE).await?;
        if let Some(holder) = holders.iter().find(|d| dream::holds_store(true, d.dream.status, d.lease.as_ref())) {
            return Err(dream::store_taken(request.store.as_str(), holder.dream.id.as_str()));
        }
    }
    if sql.count_dreams(ws, DreamStatus::Pending).await? >= u64::from(max_pending) {
        return Err(StoreError::Limited(format!(
            "this workspace has {max_pending} dreams waiting to run; wait for some to start, or cancel some"
        )));
    }
    let now = sql.now().await?;
    let dream = Dream {
        id: DreamId::generate(),
        status: DreamStatus::Pending,
        inputs: request.inputs(),
        output_behavior: request.output_behavior(),
        outputs: Vec::new(),
        model: DreamModel { id: request.model.clone(), speed: Some("standard".into()) },
        instructions: request.instructions.clone(),
        session_id: None,
        usage: DreamUsage::default(),
        error: None,
        created_at: ts(now),
        ended_at: None,
        archived_at: None,
    };
    let mut row = DreamRow { seq: 0, workspace: ws.clone(), dream, lease: None, idempotency };
    row.seq = sql.insert_dream(&row).await?;
    Ok(row.dream)
}

/// Workspace `ws`'s dream `id`.
pub async fn get<S: DreamSql>(sql: &S, ws: &WorkspaceId, id: &DreamId) -> Result<Dream> {
    Ok(sql.find_dream(ws, id).await?.ok_or_else(|| not_found(id))?.dream)
}

/// A page of workspace `ws`'s dreams, newest first.
pub async fn list<S: DreamSql>(sql: &S, ws: &WorkspaceId, q: &ListDreams) -> Result<Listing<Dream>> {
    let mut rows = sql.list_dream_rows(ws, q).await?;
    let next = if rows.len() > q.limit as usize {
        rows.truncate(q.limit as usize);
        rows.last().map(|r| Cursor::Before(r.seq))
    } else {
        None
    };
    Ok(Listing { items: rows.into_iter().map(|r| r.dream).collect(), next })
}

/// Cancels a dream ([`dream::cancel`]): `canceled` and `ended_at` at once. Its runner learns of
/// it at its next look and stops.
pub async fn cancel<S: DreamSql>(sql: &S, ws: &WorkspaceId, id: &DreamId) -> Result<Dream> {
    let mut row = locked(sql, ws, id).await?;
    if dream::cancel(&row.dream)? == Change::Apply {
        let now = sql.now().await?;
        row.dream.status = DreamStatus::Canceled;
        row.dream.ended_at = Some(ts(now));
        sql.write_dream(&row).await?;
    }
    Ok(row.dream)
}

/// Archives a final dream ([`dream::archive`]).
pub async fn archive<S: DreamSql>(sql: &S, ws: &WorkspaceId, id: &DreamId) -> Result<Dream> {
    let mut row = locked(sql, ws, id).await?;
    if dream::archive(&row.dream)? == Change::Apply {
        row.dream.archived_at = Some(ts(sql.now().await?));
        sql.write_dream(&row).await?;
    }
    Ok(row.dream)
}

/// Claims the next dream to run for `holder` (`ttl_micros`): a running dream whose runner died,
/// else the oldest pending one — while fewer than `max_running` are held. `None`: nothing to
/// run, or enough are running.
pub async fn claim_next<S: DreamSql>(
    sql: &S,
    holder: &str,
    ttl_micros: i64,
    max_running: u32,
) -> Result<Option<Claimed>> {
    let now = sql.now().await?;
    if sql.held_dreams(now, &dream::ACTIVE).await? >= u64::from(max_running) {
        return Ok(None);
    }
    for (ws, id) in sql.runnable_dreams(now, &dream::ACTIVE, 4).await? {
        let Some(mut row) = sql.lock_dream(&ws, &id).await? else { continue };
        if row.dream.status.is_final() {
            continue;
        }
        if let Claim::Granted(lease) = agent::claim(row.lease.as_ref(), holder, now, ttl_micros) {
            row.lease = Some(lease);
            sql.write_dream(&row).await?;
            return Ok(Some(Claimed { workspace: ws, dream: row.dream }));
        }
    }
    Ok(None)
}

/// Renews `holder`'s lease on a dream; the dream as it stands, or `None` when the lease went to
/// another runner (or the dream is gone).
pub async fn renew<S: DreamSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &DreamId,
    holder: &str,
    ttl_micros: i64,
) -> Result<Option<Dream>> {
    let Some(mut row) = sql.lock_dream(ws, id).await? else { return Ok(None) };
    let now = sql.now().await?;
    match agent::claim(row.lease.as_ref(), holder, now, ttl_micros) {
        Claim::Granted(lease) => {
            row.lease = Some(lease);
            sql.write_dream(&row).await?;
            Ok(Some(row.dream))
        }
        Claim::Held => Ok(None),
    }
}

fn check_holder(row: &DreamRow, holder: &str) -> Result<()> {
    if agent::releases(row.lease.as_ref(), holder) {
        Ok(())
    } else {
        Err(StoreError::Conflict(format!("the lease of dream `{}` went to another runner", row.dream.id)))
    }
}

/// Starts a pending dream `holder` holds: creates its session (`new`) and makes it `running`
/// with that session, in one transaction. A dream no longer pending is returned unchanged.
pub async fn start<S>(
    sql: &S,
    ws: &WorkspaceId,
    id: &DreamId,
    holder: &str,
    new: &NewSession,
    work_lease_ttl: u64,
) -> Result<Dream>
where
    S: DreamSql + SessionRowSql + EnvironmentSql + AgentSql + WorkSql + WebhookSql + CredentialSql,
{
    let mut row = locked(sql, ws, id).await?;
    check_holder(&row, holder)?;
    if row.dream.status != DreamStatus::Pending {
        return Ok(row.dream);
    }
    let created = create_session(sql, ws, new, work_lease_ttl).await?;
    row.dream.status = DreamStatus::Running;
    row.dream.session_id = Some(created.session.id);
    sql.write_dream(&row).await?;
    Ok(row.dream)
}

/// What the copy of a dream's input found.
#[derive(Debug, Clone, PartialEq)]
pub enum Copied {
    /// The output is recorded (now or by an earlier run): the dream, and the live memories the
    /// input held at the copy.
    Done { dream: Box<Dream>, memories: u64 },
    /// The dream cannot go on: fail it with this.
    Refused(DreamError),
}

/// Under `create_new`, creates the output store and copies every live memory of the input into
/// it at one snapshot, as versions by `actor`, then records it in `outputs` — one transaction,
/// so a crash leaves no output or a complete one, and a resumed dream never copies twice.
/// Under `update_existing`, records the input as the output. The input must be live and within
/// `max_bytes`.
pub async fn copy_input<S: DreamSql + MemorySql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &DreamId,
    holder: &str,
    actor: &Actor,
    max_bytes: u64,
    max_memories: u32,
) -> Result<Copied> {
    let mut row = locked(sql, ws, id).await?;
    check_holder(&row, holder)?;
    let input =
        row.dream.input_store().cloned().ok_or_else(|| StoreError::backend("a dream without an input store"))?;
    let unavailable = || {
        Copied::Refused(DreamError::new(
            code::STORE_UNAVAILABLE,
            format!("the input memory store `{input}` was archived or deleted"),
        ))
    };
    let LockedStore { store, seq, memory_count } = match sql.lock_store(ws, &input).await {
        Ok(locked) => locked,
        Err(StoreError::NotFound { .. }) => return Ok(unavailable()),
        Err(e) => return Err(e),
    };
    if store.archived_at.is_some() {
        return Ok(unavailable());
    }
    if row.dream.output_store().is_some() {
        return Ok(Copied::Done { dream: Box::new(row.dream), memories: memory_count });
    }
    if row.update_existing() {
        row.dream.outputs = vec![DreamOutput { memory_store_id: input }];
        sql.write_dream(&row).await?;
        return Ok(Copied::Done { dream: Box::new(row.dream), memories: memory_count });
    }
    let contents = sql.store_contents(seq).await?;
    let bytes: u64 = contents.iter().map(|(_, c)| c.len() as u64).sum();
    if bytes > max_bytes {
        return Ok(Copied::Refused(DreamError::new(
            code::INPUT_TOO_LARGE,
            format!("the input memory store holds {bytes} bytes; dreams read at most {max_bytes}"),
        )));
    }
    let metadata =
        [(dream::meta::DREAM_ID.to_owned(), id.to_string()), (dream::meta::DREAM_INPUT.to_owned(), input.to_string())]
            .into_iter()
            .collect();
    let output = create_store(
        sql,
        ws,
        NewMemoryStore { name: dream::output_store_name(&store.name), description: store.description, metadata },
    )
    .await?;
    for (path, content) in contents {
        let path = MemoryPath::parse(&path).map_err(|e| StoreError::corrupt("memories", &path, "path", e))?;
        create_memory(sql, ws, &output.id, &path, content, actor, max_memories).await?;
    }
    row.dream.outputs = vec![DreamOutput { memory_store_id: output.id }];
    sql.write_dream(&row).await?;
    Ok(Copied::Done { dream: Box::new(row.dream), memories: memory_count })
}

/// Records a dream's usage (its runner, or after a cancel while the last call winds down).
pub async fn set_usage<S: DreamSql>(sql: &S, ws: &WorkspaceId, id: &DreamId, usage: DreamUsage) -> Result<Dream> {
    let mut row = locked(sql, ws, id).await?;
    if row.dream.usage != usage {
        row.dream.usage = usage;
        sql.write_dream(&row).await?;
    }
    Ok(row.dream)
}

/// What the server checks before a dream completes: the facts of [`dream::verify`].
pub async fn verification<S: DreamSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &DreamId,
    start_memories: u64,
) -> Result<dream::Verification> {
    let row = locked(sql, ws, id).await?;
    let session = row.dream.session_id.clone();
    let input = row.dream.input_store().cloned();
    let mut input_writes = 0;
    if let (Some(session), Some(input)) = (&session, &input)
        && let Ok(locked) = sql.lock_store(ws, input).await
    {
        let actor = Actor::SessionActor { session_id: session.clone() };
        input_writes = sql.versions_by(locked.seq, &actor).await?;
    }
    let mut output_usable = false;
    let mut output_memories = 0;
    let mut reserved_paths = false;
    if let Some(output) = row.dream.output_store()
        && let Ok(locked) = sql.lock_store(ws, output).await
    {
        output_usable = locked.store.archived_at.is_none();
        output_memories = locked.memory_count;
        reserved_paths = sql.store_contents(locked.seq).await?.iter().any(|(path, _)| dream::is_reserved(path));
    }
    Ok(dream::Verification {
        create_new: !row.update_existing(),
        input_writes,
        output_usable,
        start_memories,
        output_memories,
        reserved_paths,
    })
}

/// Ends `holder`'s run of a dream: a dream not yet final takes the outcome's status
/// ([`dream::finish`]; a cancel that came first stays), its session is archived, and the lease
/// is let go — one transaction.
pub async fn finish<S>(sql: &S, ws: &WorkspaceId, id: &DreamId, holder: &str, outcome: Outcome) -> Result<Dream>
where
    S: DreamSql + SessionRowSql + WorkSql + WebhookSql,
{
    let mut row = locked(sql, ws, id).await?;
    if let Some(lease) = &row.lease
        && lease.holder != holder
    {
        return Err(StoreError::Conflict(format!("the lease of dream `{id}` went to another runner")));
    }
    if let Some((status, error)) = dream::finish(row.dream.status, outcome) {
        row.dream.status = status;
        row.dream.error = error;
        row.dream.ended_at = Some(ts(sql.now().await?));
        // Final before its session is archived: the guard on a dream's session lets go.
        sql.write_dream(&row).await?;
    }
    if let Some(session) = &row.dream.session_id {
        match archive_session(sql, ws, session).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    row.lease = None;
    sql.write_dream(&row).await?;
    Ok(row.dream)
}

/// Refuses a change to a store or session an active dream of workspace `ws` uses — its
/// `create_new` output store, its session: `what` names the change (`archive`, `delete`, `post
/// events to`).
pub async fn guard<S: DreamSql>(sql: &S, ws: &WorkspaceId, id: &str, what: &str) -> Result<()> {
    match sql.active_dream_using(ws, id, &dream::ACTIVE).await? {
        Some(dream) => Err(StoreError::Invalid(format!(
            "`{id}` belongs to dream `{dream}`, which has not ended; cancel the dream before you {what} it"
        ))),
        None => Ok(()),
    }
}
