//! Environments and environment keys.

use mnemo_api::{Environment, EnvironmentId, EnvironmentKey, EnvironmentKeyId};
use mnemo_store::rules::catalog;
use mnemo_store::{CredentialHash, Cursor, EnvironmentPatch, ErrorCode, Listing, NewEnvironment, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{backend, query_one};
use crate::stores::page;
use crate::webhooks::emit_one;
use crate::{now_micros, parse_id, rfc3339, rfc3339_opt};
use mnemo_store::rules::webhook::{Change, Resource};

const COLUMNS: &str = "id, name, description, metadata, config, scope, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(Environment, i64)> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    let metadata: String = r.get(3)?;
    let config: String = r.get(4)?;
    Ok((
        Environment {
            id: parse_id(&r.get::<_, String>(0)?).map_err(bad)?,
            name: r.get(1)?,
            description: r.get(2)?,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            config: serde_json::from_str(&config).unwrap_or_default(),
            scope: r.get(5)?,
            created_at: rfc3339(r.get(6)?),
            updated_at: rfc3339(r.get(7)?),
            archived_at: rfc3339_opt(r.get(8)?),
        },
        r.get(9)?,
    ))
}

pub(crate) fn get_with_seq(c: &Connection, id: &EnvironmentId) -> Result<(Environment, i64)> {
    query_one(c, &format!("SELECT {COLUMNS} FROM environments WHERE id = ?1"), [id.as_str()], from_row)?.ok_or_else(
        || StoreError::Coded { code: ErrorCode::EnvironmentNotFound, message: format!("environment `{id}` not found") },
    )
}

pub(crate) fn create(c: &Connection, new: &NewEnvironment) -> Result<Environment> {
    let id = EnvironmentId::generate();
    let now = now_micros();
    c.execute(
        "INSERT INTO environments (id, name, description, metadata, config, scope, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
        params![
            id.as_str(),
            new.name,
            new.description,
            serde_json::to_string(&new.metadata).expect("metadata serialises"),
            new.config.to_string(),
            new.scope,
            now
        ],
    )
    .map_err(backend)?;
    emit_one(c, Change::Created(Resource::Environment), id.as_str())?;
    get_with_seq(c, &id).map(|(e, _)| e)
}

pub(crate) fn update(c: &Connection, id: &EnvironmentId, patch: EnvironmentPatch) -> Result<Environment> {
    let (current, seq) = get_with_seq(c, id)?;
    let env = catalog::update_environment(&current, patch)?;
    c.execute(
        "UPDATE environments SET name = ?1, description = ?2, metadata = ?3, config = ?4, scope = ?5, updated_at = ?6 \
         WHERE seq = ?7",
        params![
            env.name,
            env.description,
            serde_json::to_string(&env.metadata).expect("metadata serialises"),
            env.config.to_string(),
            env.scope,
            now_micros(),
            seq
        ],
    )
    .map_err(backend)?;
    emit_one(c, Change::Updated { resource: Resource::Environment, changed: true }, id.as_str())?;
    get_with_seq(c, id).map(|(e, _)| e)
}

pub(crate) fn list(
    c: &Connection,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Environment>> {
    let before = crate::stores::before(after)?;
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM environments WHERE seq < ?1 AND (?2 OR archived_at IS NULL) ORDER BY seq DESC LIMIT ?3"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![before, include_archived, i64::from(limit) + 1], from_row)
        .map_err(backend)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend)?;
    Ok(page(rows, limit))
}

pub(crate) fn archive(c: &Connection, id: &EnvironmentId) -> Result<Environment> {
    let (env, seq) = get_with_seq(c, id)?;
    emit_one(c, Change::Archived { resource: Resource::Environment, already: env.archived_at.is_some() }, id.as_str())?;
    if env.archived_at.is_none() {
        c.execute(
            "UPDATE environments SET archived_at = ?1, updated_at = ?1 WHERE seq = ?2",
            params![now_micros(), seq],
        )
        .map_err(backend)?;
    }
    get_with_seq(c, id).map(|(e, _)| e)
}

pub(crate) fn delete(c: &Connection, id: &EnvironmentId) -> Result<()> {
    let (_, seq) = get_with_seq(c, id)?;
    c.execute("DELETE FROM environment_keys WHERE environment_seq = ?1", [seq]).map_err(backend)?;
    c.execute("DELETE FROM environments WHERE seq = ?1", [seq]).map_err(backend)?;
    emit_one(c, Change::Deleted(Resource::Environment), id.as_str())?;
    Ok(())
}

const KEY_COLUMNS: &str = "k.id, e.id, k.created_at, k.revoked_at";

fn key_from_row(r: &Row<'_>) -> rusqlite::Result<EnvironmentKey> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    Ok(EnvironmentKey {
        id: parse_id(&r.get::<_, String>(0)?).map_err(bad)?,
        environment_id: parse_id(&r.get::<_, String>(1)?).map_err(bad)?,
        key: None,
        created_at: rfc3339(r.get(2)?),
        revoked_at: rfc3339_opt(r.get(3)?),
    })
}

pub(crate) fn create_key(c: &Connection, environment: &EnvironmentId, hash: CredentialHash) -> Result<EnvironmentKey> {
    let (env, seq) = get_with_seq(c, environment)?;
    catalog::check_takes_keys(&env)?;
    let id = EnvironmentKeyId::generate();
    c.execute(
        "INSERT INTO environment_keys (id, environment_seq, secret_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![id.as_str(), seq, &hash[..], now_micros()],
    )
    .map_err(backend)?;
    get_key(c, &id)
}

fn get_key(c: &Connection, id: &EnvironmentKeyId) -> Result<EnvironmentKey> {
    query_one(c, &format!(
        "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq WHERE k.id = ?1"
    ), [id.as_str()], key_from_row)?
    .ok_or_else(|| StoreError::not_found("environment key", id))
}

pub(crate) fn revoke_key(c: &Connection, environment: &EnvironmentId, id: &EnvironmentKeyId) -> Result<EnvironmentKey> {
    catalog::check_key_of(&get_key(c, id)?, environment)?;
    c.execute(
        "UPDATE environment_keys SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL",
        params![now_micros(), id.as_str()],
    )
    .map_err(backend)?;
    get_key(c, id)
}

pub(crate) fn list_keys(c: &Connection, environment: &EnvironmentId) -> Result<Vec<EnvironmentKey>> {
    let (_, seq) = get_with_seq(c, environment)?;
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
             WHERE k.environment_seq = ?1 ORDER BY k.seq"
        ))
        .map_err(backend)?;
    stmt.query_map([seq], key_from_row).map_err(backend)?.collect::<rusqlite::Result<Vec<_>>>().map_err(backend)
}

/// The environment key hashing to `hash`, unless revoked, with its environment.
pub(crate) fn find_key(c: &Connection, hash: &CredentialHash) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> {
    let row: Option<(String, String)> = query_one(
        c,
        "SELECT k.id, e.id FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
             WHERE k.secret_hash = ?1 AND k.revoked_at IS NULL",
        [&hash[..]],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    row.map(|(k, e)| Ok((parse_id(&k)?, parse_id(&e)?))).transpose()
}

impl mnemo_store::ops::EnvironmentSql for crate::engine::Lite<'_> {
    async fn hold_environment(&self, id: &EnvironmentId) -> Result<mnemo_store::ops::EnvironmentRow> {
        // The single writer excludes every other writer: reading is holding.
        let (environment, seq) = get_with_seq(self, id)?;
        Ok(mnemo_store::ops::EnvironmentRow { environment, seq })
    }
}
