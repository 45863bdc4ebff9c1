//! Environments and environment keys.
//!
//! A write that judges an environment (update, archive, delete, a key's revocation) first
//! locks its row, so two such writes take turns. Update, archive and revocation change no key
//! column and lock `FOR NO KEY UPDATE`: work items and worker polls that reference the
//! environment are still inserted meanwhile. Delete locks `FOR UPDATE`, and waits for every
//! writer that [holds](hold) the environment.

use std::collections::BTreeMap;

use mnemo_api::{Environment, EnvironmentId, EnvironmentKey, EnvironmentKeyId};
use mnemo_store::rules::catalog;
use mnemo_store::{CredentialHash, Cursor, EnvironmentPatch, ErrorCode, Listing, NewEnvironment, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Tx, all, col, exec, now, one, opt};
use crate::stores::page;
use crate::webhooks::emit_one;
use crate::{parse_id, rfc3339, rfc3339_opt};
use mnemo_store::rules::webhook::{Change, Resource};

const COLUMNS: &str = "id, name, description, metadata, config, scope, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row) -> Result<(Environment, i64)> {
    let metadata: String = col(r, 3)?;
    let config: String = col(r, 4)?;
    Ok((
        Environment {
            id: parse_id(&col::<String>(r, 0)?)?,
            name: col(r, 1)?,
            description: col(r, 2)?,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            config: serde_json::from_str(&config).unwrap_or_default(),
            scope: col(r, 5)?,
            created_at: rfc3339(col(r, 6)?),
            updated_at: rfc3339(col(r, 7)?),
            archived_at: rfc3339_opt(col(r, 8)?),
        },
        col(r, 9)?,
    ))
}

fn not_found(id: &EnvironmentId) -> StoreError {
    StoreError::Coded { code: ErrorCode::EnvironmentNotFound, message: format!("environment `{id}` not found") }
}

/// The environment found by `sql` (its `COLUMNS` where `id = $1`), or not-found.
async fn find(tx: &Tx<'_>, sql: &str, id: &EnvironmentId) -> Result<(Environment, i64)> {
    let row = opt(tx, sql, &[&id.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| not_found(id))
}

/// The environment and its row number, or not-found.
pub(crate) async fn get_with_seq(tx: &Tx<'_>, id: &EnvironmentId) -> Result<(Environment, i64)> {
    find(tx, &format!("SELECT {COLUMNS} FROM environments WHERE id = $1"), id).await
}

/// Like [`get_with_seq`], and keeps the environment from being deleted until the transaction
/// ends (`FOR KEY SHARE`, the lock a foreign key takes): a writer that goes on to insert rows
/// referencing it (a work item) meets no deleted parent, and a delete waits for it. It does not
/// wait for updates, nor they for it.
pub(crate) async fn hold(tx: &Tx<'_>, id: &EnvironmentId) -> Result<(Environment, i64)> {
    find(tx, &format!("SELECT {COLUMNS} FROM environments WHERE id = $1 FOR KEY SHARE"), id).await
}

/// Like [`get_with_seq`], and locks the row against other updates, archives, revocations and
/// deletes until the transaction ends.
async fn lock(tx: &Tx<'_>, id: &EnvironmentId) -> Result<(Environment, i64)> {
    find(tx, &format!("SELECT {COLUMNS} FROM environments WHERE id = $1 FOR NO KEY UPDATE"), id).await
}

fn metadata_json(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).expect("a map of strings serialises")
}

pub(crate) async fn create(tx: &Tx<'_>, new: &NewEnvironment) -> Result<Environment> {
    let id = EnvironmentId::generate();
    let now = now(tx).await?;
    let row = one(
        tx,
        &format!(
            "INSERT INTO environments (id, name, description, metadata, config, scope, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING {COLUMNS}"
        ),
        &[
            &id.as_str(),
            &new.name,
            &new.description,
            &metadata_json(&new.metadata),
            &new.config.to_string(),
            &new.scope,
            &now,
        ],
    )
    .await?;
    emit_one(tx, Change::Created(Resource::Environment), id.as_str()).await?;
    from_row(&row).map(|(e, _)| e)
}

pub(crate) async fn update(tx: &Tx<'_>, id: &EnvironmentId, patch: EnvironmentPatch) -> Result<Environment> {
    let (current, seq) = lock(tx, id).await?;
    let env = catalog::update_environment(&current, patch)?;
    let now = now(tx).await?;
    let row = one(
        tx,
        &format!(
            "UPDATE environments SET name = $1, description = $2, metadata = $3, config = $4, scope = $5, \
             updated_at = $6 WHERE seq = $7 RETURNING {COLUMNS}"
        ),
        &[&env.name, &env.description, &metadata_json(&env.metadata), &env.config.to_string(), &env.scope, &now, &seq],
    )
    .await?;
    emit_one(tx, Change::Updated { resource: Resource::Environment, changed: true }, id.as_str()).await?;
    from_row(&row).map(|(e, _)| e)
}

pub(crate) async fn list(
    tx: &Tx<'_>,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Environment>> {
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM environments WHERE seq < $1 AND ($2 OR archived_at IS NULL) ORDER BY seq DESC LIMIT $3"
        ),
        &[&before, &include_archived, &(i64::from(limit) + 1)],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

pub(crate) async fn archive(tx: &Tx<'_>, id: &EnvironmentId) -> Result<Environment> {
    let (mut env, seq) = lock(tx, id).await?;
    emit_one(tx, Change::Archived { resource: Resource::Environment, already: env.archived_at.is_some() }, id.as_str())
        .await?;
    if env.archived_at.is_none() {
        let now = now(tx).await?;
        exec(tx, "UPDATE environments SET archived_at = $1, updated_at = $1 WHERE seq = $2", &[&now, &seq]).await?;
        env.archived_at = Some(rfc3339(now));
        env.updated_at = rfc3339(now);
    }
    Ok(env)
}

/// Deletes the environment and its keys; its work items and worker polls go with it (the
/// foreign keys cascade). Sessions on it stay.
pub(crate) async fn delete(tx: &Tx<'_>, id: &EnvironmentId) -> Result<()> {
    let (_, seq) = find(tx, &format!("SELECT {COLUMNS} FROM environments WHERE id = $1 FOR UPDATE"), id).await?;
    exec(tx, "DELETE FROM environment_keys WHERE environment_seq = $1", &[&seq]).await?;
    exec(tx, "DELETE FROM environments WHERE seq = $1", &[&seq]).await?;
    emit_one(tx, Change::Deleted(Resource::Environment), id.as_str()).await?;
    Ok(())
}

const KEY_COLUMNS: &str = "k.id, e.id, k.created_at, k.revoked_at";

fn key_from_row(r: &Row) -> Result<EnvironmentKey> {
    Ok(EnvironmentKey {
        id: parse_id(&col::<String>(r, 0)?)?,
        environment_id: parse_id(&col::<String>(r, 1)?)?,
        key: None,
        created_at: rfc3339(col(r, 2)?),
        revoked_at: rfc3339_opt(col(r, 3)?),
    })
}

/// Adds a key to an environment that takes keys. The environment's row is share-locked, so an
/// archive or delete of it waits for this key, or this key for them (and then sees them).
pub(crate) async fn create_key(
    tx: &Tx<'_>,
    environment: &EnvironmentId,
    hash: CredentialHash,
) -> Result<EnvironmentKey> {
    let (env, seq) =
        find(tx, &format!("SELECT {COLUMNS} FROM environments WHERE id = $1 FOR SHARE"), environment).await?;
    catalog::check_takes_keys(&env)?;
    let id = EnvironmentKeyId::generate();
    let now = now(tx).await?;
    exec(
        tx,
        "INSERT INTO environment_keys (id, environment_seq, secret_hash, created_at) VALUES ($1, $2, $3, $4)",
        &[&id.as_str(), &seq, &&hash[..], &now],
    )
    .await?;
    Ok(EnvironmentKey { id, environment_id: env.id, key: None, created_at: rfc3339(now), revoked_at: None })
}

async fn get_key(tx: &Tx<'_>, id: &EnvironmentKeyId) -> Result<EnvironmentKey> {
    let row = opt(
        tx,
        &format!(
            "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
             WHERE k.id = $1"
        ),
        &[&id.as_str()],
    )
    .await?;
    row.as_ref().map(key_from_row).transpose()?.ok_or_else(|| StoreError::not_found("environment key", id))
}

/// Revokes a key of `environment` (a key already revoked stays as it was), with the
/// environment's row locked like every other write that judges the environment.
pub(crate) async fn revoke_key(
    tx: &Tx<'_>,
    environment: &EnvironmentId,
    id: &EnvironmentKeyId,
) -> Result<EnvironmentKey> {
    catalog::check_key_of(&get_key(tx, id).await?, environment)?;
    lock(tx, environment).await?;
    let now = now(tx).await?;
    exec(tx, "UPDATE environment_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", &[&now, &id.as_str()])
        .await?;
    get_key(tx, id).await
}

pub(crate) async fn list_keys(tx: &Tx<'_>, environment: &EnvironmentId) -> Result<Vec<EnvironmentKey>> {
    let (_, seq) = get_with_seq(tx, environment).await?;
    let rows = all(
        tx,
        &format!(
            "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
             WHERE k.environment_seq = $1 ORDER BY k.seq"
        ),
        &[&seq],
    )
    .await?;
    rows.iter().map(key_from_row).collect()
}

/// The environment key hashing to `hash`, unless revoked, with its environment.
pub(crate) async fn find_key(tx: &Tx<'_>, hash: &CredentialHash) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> {
    let row = opt(
        tx,
        "SELECT k.id, e.id FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
         WHERE k.secret_hash = $1 AND k.revoked_at IS NULL",
        &[&&hash[..]],
    )
    .await?;
    row.map(|r| Ok((parse_id(&col::<String>(&r, 0)?)?, parse_id(&col::<String>(&r, 1)?)?))).transpose()
}

impl mnemo_store::ops::EnvironmentSql for crate::engine::Pg<'_, '_> {
    async fn hold_environment(&self, id: &EnvironmentId) -> Result<mnemo_store::ops::EnvironmentRow> {
        let (environment, seq) = hold(self, id).await?;
        Ok(mnemo_store::ops::EnvironmentRow { environment, seq })
    }
}
