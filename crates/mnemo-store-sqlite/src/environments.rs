//! Environments and environment keys: the SQL of [`ops::environments`]. The single writer
//! excludes every other writer, so its locking primitives only read.

use mnemo_api::{EnvironmentId, EnvironmentKey, EnvironmentKeyId, WorkspaceId};
use mnemo_store::ops::environments::{json_columns, not_found};
use mnemo_store::ops::{self, EnvironmentColumns, EnvironmentRow};
use mnemo_store::{CredentialHash, Cursor, Listing, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{Lite, backend, query_all, query_one};
use crate::stores::page;
use crate::{parse_id, rfc3339, rfc3339_opt};

const COLUMNS: &str = "id, name, description, metadata, config, scope, created_at, updated_at, archived_at, seq";

fn columns(r: &Row<'_>) -> rusqlite::Result<EnvironmentColumns> {
    Ok(EnvironmentColumns {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        metadata: r.get(3)?,
        config: r.get(4)?,
        scope: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        archived_at: r.get(8)?,
        seq: r.get(9)?,
    })
}

/// Workspace `ws`'s environment: one of another workspace is not found.
fn find(c: &Connection, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
    let sql = format!("SELECT {COLUMNS} FROM environments WHERE id = ?1 AND workspace_id = ?2");
    query_one(c, &sql, [id.as_str(), ws.as_str()], columns)?.map(EnvironmentColumns::decode).transpose()
}

/// Workspace `ws`'s environment and its row number, or not-found.
pub(crate) fn get_with_seq(
    c: &Connection,
    ws: &WorkspaceId,
    id: &EnvironmentId,
) -> Result<(mnemo_api::Environment, i64)> {
    let row = find(c, ws, id)?.ok_or_else(|| not_found(id))?;
    Ok((row.environment, row.seq))
}

pub(crate) fn list(
    c: &Connection,
    ws: &WorkspaceId,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<mnemo_api::Environment>> {
    let before = crate::stores::before(after)?;
    let rows = query_all(
        c,
        &format!(
            "SELECT {COLUMNS} FROM environments WHERE workspace_id = ?4 AND seq < ?1 AND (?2 OR archived_at IS NULL) \
             ORDER BY seq DESC LIMIT ?3"
        ),
        params![before, include_archived, i64::from(limit) + 1, ws.as_str()],
        columns,
    )?
    .into_iter()
    .map(|cols| cols.decode().map(|row| (row.environment, row.seq)))
    .collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
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

impl ops::EnvironmentSql for Lite<'_> {
    async fn hold_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<EnvironmentRow> {
        find(self, ws, id)?.ok_or_else(|| not_found(id))
    }
}

impl ops::EnvironmentRowSql for Lite<'_> {
    async fn find_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id)
    }

    async fn share_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id)
    }

    async fn lock_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id)
    }

    async fn lock_environment_to_delete(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id)
    }

    async fn insert_environment(&self, ws: &WorkspaceId, env: &mnemo_api::Environment, now: i64) -> Result<()> {
        let (metadata, config) = json_columns(env);
        self.execute(
            "INSERT INTO environments \
             (id, name, description, metadata, config, scope, created_at, updated_at, workspace_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)",
            params![env.id.as_str(), env.name, env.description, metadata, config, env.scope, now, ws.as_str()],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn set_environment(&self, seq: i64, env: &mnemo_api::Environment, now: i64) -> Result<()> {
        let (metadata, config) = json_columns(env);
        self.execute(
            "UPDATE environments SET name = ?1, description = ?2, metadata = ?3, config = ?4, scope = ?5, \
             updated_at = ?6 WHERE seq = ?7",
            params![env.name, env.description, metadata, config, env.scope, now, seq],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn set_environment_archived(&self, seq: i64, now: i64) -> Result<()> {
        self.execute("UPDATE environments SET archived_at = ?1, updated_at = ?1 WHERE seq = ?2", params![now, seq])
            .map_err(backend)?;
        Ok(())
    }

    async fn delete_environment_keys(&self, seq: i64) -> Result<()> {
        self.execute("DELETE FROM environment_keys WHERE environment_seq = ?1", [seq]).map_err(backend)?;
        Ok(())
    }

    async fn delete_environment_row(&self, seq: i64) -> Result<()> {
        self.execute("DELETE FROM environments WHERE seq = ?1", [seq]).map_err(backend)?;
        Ok(())
    }

    async fn insert_environment_key(
        &self,
        id: &EnvironmentKeyId,
        environment: i64,
        hash: &CredentialHash,
        now: i64,
    ) -> Result<()> {
        self.execute(
            "INSERT INTO environment_keys (id, environment_seq, secret_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![id.as_str(), environment, &hash[..], now],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn find_environment_key(&self, ws: &WorkspaceId, id: &EnvironmentKeyId) -> Result<Option<EnvironmentKey>> {
        query_one(
            self,
            &format!(
                "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
                 WHERE k.id = ?1 AND e.workspace_id = ?2"
            ),
            [id.as_str(), ws.as_str()],
            key_from_row,
        )
    }

    async fn set_environment_key_revoked(&self, id: &EnvironmentKeyId, now: i64) -> Result<()> {
        self.execute("UPDATE environment_keys SET revoked_at = ?1 WHERE id = ?2", params![now, id.as_str()])
            .map_err(backend)?;
        Ok(())
    }

    async fn environment_keys(&self, environment: i64) -> Result<Vec<EnvironmentKey>> {
        query_all(
            self,
            &format!(
                "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
                 WHERE k.environment_seq = ?1 ORDER BY k.seq"
            ),
            [environment],
            key_from_row,
        )
    }
}
