//! Environments and their keys: every write decided here (the catalog's rules in
//! [`crate::rules::catalog`], the webhook events of each change), written through
//! [`EnvironmentSql`] and [`EnvironmentRowSql`].
//!
//! Locks, all on the environment's row and taken first: update, archive and a key's revocation
//! [lock](EnvironmentRowSql::lock_environment) it (PostgreSQL: `FOR NO KEY UPDATE`: rows that
//! reference it are still inserted meanwhile); a delete
//! [locks it to delete](EnvironmentRowSql::lock_environment_to_delete) (`FOR UPDATE`: it waits for
//! every writer that holds it); a new key [shares](EnvironmentRowSql::share_environment) it
//! (`FOR SHARE`: an archive or a delete waits for the key, or the key for them and then sees
//! them); a write that only references it [holds](EnvironmentSql::hold_environment) it
//! (`FOR KEY SHARE`).

use mnemo_api::{Environment, EnvironmentId, EnvironmentKey, EnvironmentKeyId, WorkspaceId, rfc3339_micros as rfc3339};

use super::webhooks::{WebhookSql, emit_one};
use super::{Clock, Micros, Seq};
use crate::rules::catalog;
use crate::rules::webhook::{Change, Resource};
use crate::{CredentialHash, EnvironmentPatch, ErrorCode, NewEnvironment, Result, StoreError};

/// An environment and its row number.
#[derive(Debug, Clone)]
pub struct EnvironmentRow {
    pub environment: Environment,
    pub seq: Seq,
}

/// An environment's columns as a backend reads them, before decoding.
#[derive(Debug, Clone)]
pub struct EnvironmentColumns {
    pub seq: Seq,
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    /// JSON text of a map of strings.
    pub metadata: String,
    /// JSON text.
    pub config: String,
    pub scope: Option<String>,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub archived_at: Option<Micros>,
}

impl EnvironmentColumns {
    /// The environment the columns hold; a column that cannot be decoded is
    /// [`StoreError::corrupt`], never a default.
    pub fn decode(self) -> Result<EnvironmentRow> {
        let corrupt = |column, cause: serde_json::Error| StoreError::corrupt("environments", &self.id, column, cause);
        let metadata = serde_json::from_str(&self.metadata).map_err(|e| corrupt("metadata", e))?;
        let config = serde_json::from_str(&self.config).map_err(|e| corrupt("config", e))?;
        let id = self
            .id
            .parse()
            .map_err(|_| StoreError::corrupt("environments", &self.id, "id", "not an environment id"))?;
        Ok(EnvironmentRow {
            environment: Environment {
                id,
                name: self.name,
                description: self.description,
                metadata,
                config,
                scope: self.scope,
                created_at: rfc3339(self.created_at),
                updated_at: rfc3339(self.updated_at),
                archived_at: self.archived_at.map(rfc3339),
            },
            seq: self.seq,
        })
    }
}

/// The metadata and config columns of `environment` (JSON text).
pub fn json_columns(environment: &Environment) -> (String, String) {
    let metadata = serde_json::to_string(&environment.metadata).expect("a map of strings serialises");
    (metadata, environment.config.to_string())
}

/// What other domains' operations need of environments.
pub trait EnvironmentSql: Clock {
    /// The environment, held against deletion until the transaction ends (PostgreSQL: `FOR KEY
    /// SHARE`), so rows written under it never reference a deleted one.
    /// Unknown, or of another workspace than `ws`: [`not_found`], alike.
    async fn hold_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<EnvironmentRow>;
}

/// SQL over environments and their keys.
pub trait EnvironmentRowSql: EnvironmentSql {
    /// Workspace `ws`'s environment, if it exists there (no lock: reads). Every lookup below is
    /// of `ws` alone: another workspace's environment is not found.
    async fn find_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>>;
    /// The environment, if it exists, share-locked until the transaction ends (PostgreSQL: `FOR
    /// SHARE`): it is neither changed nor deleted meanwhile.
    async fn share_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>>;
    /// The environment, if it exists, locked against other writes that judge it until the
    /// transaction ends (PostgreSQL: `FOR NO KEY UPDATE`).
    async fn lock_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>>;
    /// The environment, if it exists, locked exclusively (PostgreSQL: `FOR UPDATE`), after every
    /// writer holding it.
    async fn lock_environment_to_delete(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>>;
    /// Records a new environment of workspace `ws`, created at `now`.
    async fn insert_environment(&self, ws: &WorkspaceId, environment: &Environment, now: Micros) -> Result<()>;
    /// Writes environment `seq`'s fields (name, description, metadata, config, scope), updated
    /// at `now`.
    async fn set_environment(&self, seq: Seq, environment: &Environment, now: Micros) -> Result<()>;
    /// Marks environment `seq` archived (and updated) at `now`.
    async fn set_environment_archived(&self, seq: Seq, now: Micros) -> Result<()>;
    /// Deletes environment `seq`'s keys.
    async fn delete_environment_keys(&self, seq: Seq) -> Result<()>;
    /// Deletes environment `seq` (its keys first: [`Self::delete_environment_keys`]; its work
    /// items and worker polls go with it).
    async fn delete_environment_row(&self, seq: Seq) -> Result<()>;
    /// Records a key of environment `environment` by the hash of its secret.
    async fn insert_environment_key(
        &self,
        id: &EnvironmentKeyId,
        environment: Seq,
        hash: &CredentialHash,
        now: Micros,
    ) -> Result<()>;
    /// The key, under whichever environment of workspace `ws`, if it exists there.
    async fn find_environment_key(&self, ws: &WorkspaceId, id: &EnvironmentKeyId) -> Result<Option<EnvironmentKey>>;
    /// Marks key `id` revoked at `now`.
    async fn set_environment_key_revoked(&self, id: &EnvironmentKeyId, now: Micros) -> Result<()>;
    /// Environment `environment`'s keys, oldest first.
    async fn environment_keys(&self, environment: Seq) -> Result<Vec<EnvironmentKey>>;
}

/// An unknown environment.
pub fn not_found(id: &EnvironmentId) -> StoreError {
    StoreError::Coded { code: ErrorCode::EnvironmentNotFound, message: format!("environment `{id}` not found") }
}

fn key_not_found(id: &EnvironmentKeyId) -> StoreError {
    StoreError::not_found("environment key", id)
}

/// Creates an environment.
pub async fn create<S: EnvironmentRowSql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    new: &NewEnvironment,
) -> Result<Environment> {
    let now = sql.now().await?;
    let environment = Environment {
        id: EnvironmentId::generate(),
        name: new.name.clone(),
        description: new.description.clone(),
        metadata: new.metadata.clone(),
        config: new.config.clone(),
        scope: new.scope.clone(),
        created_at: rfc3339(now),
        updated_at: rfc3339(now),
        archived_at: None,
    };
    sql.insert_environment(ws, &environment, now).await?;
    emit_one(sql, ws, Change::Created(Resource::Environment), environment.id.as_str()).await?;
    Ok(environment)
}

/// An environment.
pub async fn get<S: EnvironmentRowSql>(sql: &S, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
    Ok(sql.find_environment(ws, id).await?.ok_or_else(|| not_found(id))?.environment)
}

/// Applies `patch` ([`catalog::update_environment`]), the environment locked.
pub async fn update<S: EnvironmentRowSql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &EnvironmentId,
    patch: EnvironmentPatch,
) -> Result<Environment> {
    let current = sql.lock_environment(ws, id).await?.ok_or_else(|| not_found(id))?;
    crate::rules::dream::check_unmanaged(&current.environment)?;
    let mut environment = catalog::update_environment(&current.environment, patch)?;
    let now = sql.now().await?;
    sql.set_environment(current.seq, &environment, now).await?;
    environment.updated_at = rfc3339(now);
    emit_one(sql, ws, Change::Updated { resource: Resource::Environment, changed: true }, id.as_str()).await?;
    Ok(environment)
}

/// Archives an environment, locked; archiving an archived one changes nothing (and yields no
/// event).
pub async fn archive<S: EnvironmentRowSql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &EnvironmentId,
) -> Result<Environment> {
    let EnvironmentRow { mut environment, seq } = sql.lock_environment(ws, id).await?.ok_or_else(|| not_found(id))?;
    crate::rules::dream::check_unmanaged(&environment)?;
    let already = environment.archived_at.is_some();
    emit_one(sql, ws, Change::Archived { resource: Resource::Environment, already }, id.as_str()).await?;
    if !already {
        let now = sql.now().await?;
        sql.set_environment_archived(seq, now).await?;
        environment.archived_at = Some(rfc3339(now));
        environment.updated_at = rfc3339(now);
    }
    Ok(environment)
}

/// Deletes an environment, locked to delete, with its keys; sessions on it stay.
pub async fn delete<S: EnvironmentRowSql + WebhookSql>(sql: &S, ws: &WorkspaceId, id: &EnvironmentId) -> Result<()> {
    let row = sql.lock_environment_to_delete(ws, id).await?.ok_or_else(|| not_found(id))?;
    crate::rules::dream::check_unmanaged(&row.environment)?;
    sql.delete_environment_keys(row.seq).await?;
    sql.delete_environment_row(row.seq).await?;
    emit_one(sql, ws, Change::Deleted(Resource::Environment), id.as_str()).await
}

/// Adds a key to an environment that takes keys ([`catalog::check_takes_keys`]), shared.
pub async fn create_key<S: EnvironmentRowSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    hash: &CredentialHash,
) -> Result<EnvironmentKey> {
    let row = sql.share_environment(ws, environment).await?.ok_or_else(|| not_found(environment))?;
    catalog::check_takes_keys(&row.environment)?;
    let id = EnvironmentKeyId::generate();
    let now = sql.now().await?;
    sql.insert_environment_key(&id, row.seq, hash, now).await?;
    Ok(EnvironmentKey { id, environment_id: row.environment.id, key: None, created_at: rfc3339(now), revoked_at: None })
}

/// Revokes a key of `environment` ([`catalog::check_key_of`]: a key of another environment is
/// not found), the environment locked; a key already revoked stays as it was.
pub async fn revoke_key<S: EnvironmentRowSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    id: &EnvironmentKeyId,
) -> Result<EnvironmentKey> {
    catalog::check_key_of(&sql.find_environment_key(ws, id).await?.ok_or_else(|| key_not_found(id))?, environment)?;
    sql.lock_environment(ws, environment).await?.ok_or_else(|| not_found(environment))?;
    let key = sql.find_environment_key(ws, id).await?.ok_or_else(|| key_not_found(id))?;
    if key.revoked_at.is_some() {
        return Ok(key);
    }
    let now = sql.now().await?;
    sql.set_environment_key_revoked(id, now).await?;
    Ok(EnvironmentKey { revoked_at: Some(rfc3339(now)), ..key })
}

/// An environment's keys, oldest first.
pub async fn list_keys<S: EnvironmentRowSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
) -> Result<Vec<EnvironmentKey>> {
    let row = sql.find_environment(ws, environment).await?.ok_or_else(|| not_found(environment))?;
    sql.environment_keys(row.seq).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(metadata: &str, config: &str) -> EnvironmentColumns {
        EnvironmentColumns {
            seq: 7,
            id: "env_1".into(),
            name: "e".into(),
            description: None,
            metadata: metadata.into(),
            config: config.into(),
            scope: None,
            created_at: 0,
            updated_at: 1,
            archived_at: Some(2),
        }
    }

    #[test]
    fn stored_columns_decode_or_name_the_corrupt_column() {
        let row = columns(r#"{"a":"1"}"#, r#"{"type":"self_hosted"}"#).decode().unwrap();
        assert_eq!((row.seq, row.environment.metadata["a"].as_str()), (7, "1"));
        assert!(row.environment.is_self_hosted() && row.environment.archived_at.is_some());
        assert_eq!(json_columns(&row.environment), (r#"{"a":"1"}"#.into(), r#"{"type":"self_hosted"}"#.into()));
        for (bad, column) in
            [(columns("{", "{}"), "metadata"), (columns("{}", "nope"), "config"), (columns("[1]", "{}"), "metadata")]
        {
            let e = bad.decode().unwrap_err().chain();
            assert!(e.contains("environments") && e.contains("env_1") && e.contains(column), "{e}");
        }
    }
}
