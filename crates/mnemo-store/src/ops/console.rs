//! Console sessions: people signed in to the web console, known by the hash of their cookie's
//! secret, acting as the API key they signed in with. Expiry is judged on the transaction's
//! clock; how long a session lasts and how long an ended one is kept are
//! [`rules::console`](crate::rules::console)'s.

use mnemo_api::{ApiKeyId, ApiKeyStatus, WorkspaceId};

use super::{Clock, Micros, Seq};
use crate::row::ts;
use crate::rules::api_key::authenticates;
use crate::rules::console;
use crate::{ConsoleSession, CredentialHash, Result, StoreError};

/// A console session as stored.
#[derive(Debug, Clone)]
pub struct ConsoleRow {
    pub api_key: ConsoleKey,
    pub created_at: Micros,
    pub expires_at: Micros,
}

/// The API key a console session acts as, as its lookup finds it.
#[derive(Debug, Clone)]
pub struct ConsoleKey {
    pub seq: Seq,
    pub id: ApiKeyId,
    pub workspace: WorkspaceId,
    pub status: ApiKeyStatus,
    pub expires_at: Option<Micros>,
}

impl ConsoleKey {
    /// Whether the key still authenticates at `now` ([`authenticates`]).
    fn live(&self, now: Micros) -> bool {
        authenticates(self.status, self.expires_at, now)
    }
}

impl ConsoleRow {
    fn session(self) -> ConsoleSession {
        ConsoleSession {
            api_key: self.api_key.id,
            workspace: self.api_key.workspace,
            created_at: ts(self.created_at),
            expires_at: ts(self.expires_at),
        }
    }
}

/// SQL over console sessions.
pub trait ConsoleSql: Clock {
    /// API key `id`, held against a status change until the transaction ends (PostgreSQL:
    /// `FOR SHARE`).
    async fn hold_api_key(&self, id: &ApiKeyId) -> Result<Option<ConsoleKey>>;
    /// Deletes key `key`'s console sessions that expired or were revoked before `cutoff`.
    async fn delete_console_sessions_ended_before(&self, key: Seq, cutoff: Micros) -> Result<()>;
    /// Records a console session of key `key`.
    async fn insert_console_session(
        &self,
        hash: &CredentialHash,
        key: Seq,
        created_at: Micros,
        expires_at: Micros,
    ) -> Result<()>;
    /// The console session with secret `hash` that is not revoked and expires after `now`,
    /// with its key (whatever the key's status).
    async fn find_console_session(&self, hash: &CredentialHash, now: Micros) -> Result<Option<ConsoleRow>>;
    /// Revokes the console session with secret `hash` at `now` if it is not revoked; whether
    /// one was.
    async fn revoke_console_session(&self, hash: &CredentialHash, now: Micros) -> Result<bool>;
}

/// Starts a console session for a live API key (held against a concurrent revocation), first
/// deleting that key's sessions that ended longer ago than [`console::ENDED_KEPT_MICROS`]; it
/// lasts `ttl_seconds` ([`console::expiry`]). An unknown or revoked key: not found.
pub async fn create<S: ConsoleSql>(
    sql: &S,
    hash: &CredentialHash,
    api_key: &ApiKeyId,
    ttl_seconds: u64,
) -> Result<ConsoleSession> {
    let now = sql.now().await?;
    let key = sql.hold_api_key(api_key).await?.filter(|k| k.live(now));
    let key = key.ok_or_else(|| StoreError::not_found("api key", api_key))?;
    let (workspace, key) = (key.workspace, key.seq);
    sql.delete_console_sessions_ended_before(key, console::kept_since(now)).await?;
    let expires_at = console::expiry(now, ttl_seconds);
    sql.insert_console_session(hash, key, now, expires_at).await?;
    Ok(ConsoleSession { api_key: api_key.clone(), workspace, created_at: ts(now), expires_at: ts(expires_at) })
}

/// The live console session with secret `hash`: one whose key still authenticates.
pub async fn find<S: ConsoleSql>(sql: &S, hash: &CredentialHash) -> Result<Option<ConsoleSession>> {
    let now = sql.now().await?;
    Ok(sql.find_console_session(hash, now).await?.filter(|row| row.api_key.live(now)).map(ConsoleRow::session))
}

/// Ends the console session with secret `hash`; whether a live one was ended.
pub async fn revoke<S: ConsoleSql>(sql: &S, hash: &CredentialHash) -> Result<bool> {
    let now = sql.now().await?;
    sql.revoke_console_session(hash, now).await
}
