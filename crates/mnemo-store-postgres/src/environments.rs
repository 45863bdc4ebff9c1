//! Environments and environment keys: the SQL of [`ops::environments`], whose module docs say
//! which write takes which lock. Update, archive and a key's revocation lock the environment's
//! row `FOR NO KEY UPDATE` (work items and worker polls that reference it are still inserted
//! meanwhile); delete locks it `FOR UPDATE` and waits for every writer that [holds](hold) it; a
//! new key takes it `FOR SHARE`.

use mnemo_api::{Environment, EnvironmentId, EnvironmentKey, EnvironmentKeyId, WorkspaceId};
use mnemo_store::ops::environments::{json_columns, not_found};
use mnemo_store::ops::{self, EnvironmentColumns, EnvironmentRow};
use mnemo_store::{CredentialHash, Cursor, Listing, Result};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, exec, opt};
use crate::stores::page;
use crate::{parse_id, rfc3339, rfc3339_opt};

const COLUMNS: &str = "id, name, description, metadata, config, scope, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row) -> Result<EnvironmentRow> {
    EnvironmentColumns {
        id: col(r, 0)?,
        name: col(r, 1)?,
        description: col(r, 2)?,
        metadata: col(r, 3)?,
        config: col(r, 4)?,
        scope: col(r, 5)?,
        created_at: col(r, 6)?,
        updated_at: col(r, 7)?,
        archived_at: col(r, 8)?,
        seq: col(r, 9)?,
    }
    .decode()
}

/// Workspace `ws`'s environment `id`, locked as `lock` says (`""`: not at all)
/// (one of another workspace is not found).
async fn find(tx: &Tx<'_>, ws: &WorkspaceId, id: &EnvironmentId, lock: &str) -> Result<Option<EnvironmentRow>> {
    let sql = format!("SELECT {COLUMNS} FROM environments WHERE id = $1 AND workspace_id = $2{lock}");
    let row = opt(tx, &sql, &[&id.as_str(), &ws.as_str()]).await?;
    row.as_ref().map(from_row).transpose()
}

/// Workspace `ws`'s environment and its row number, or not-found.
pub(crate) async fn get_with_seq(tx: &Tx<'_>, ws: &WorkspaceId, id: &EnvironmentId) -> Result<(Environment, i64)> {
    let row = find(tx, ws, id, "").await?.ok_or_else(|| not_found(id))?;
    Ok((row.environment, row.seq))
}

pub(crate) async fn list(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Environment>> {
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM environments WHERE workspace_id = $4 AND seq < $1 AND ($2 OR archived_at IS NULL) \
             ORDER BY seq DESC LIMIT $3"
        ),
        &[&before, &include_archived, &(i64::from(limit) + 1), &ws.as_str()],
    )
    .await?;
    let rows = rows.iter().map(|r| from_row(r).map(|row| (row.environment, row.seq))).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
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

impl ops::EnvironmentSql for Pg<'_, '_> {
    /// Like [`get_with_seq`], and keeps the environment from being deleted until the transaction
    /// ends (`FOR KEY SHARE`, the lock a foreign key takes): a writer that goes on to insert rows
    /// referencing it (a work item) meets no deleted parent, and a delete waits for it. It does not
    /// wait for updates, nor they for it.
    async fn hold_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<EnvironmentRow> {
        find(self, ws, id, " FOR KEY SHARE").await?.ok_or_else(|| not_found(id))
    }
}

impl ops::EnvironmentRowSql for Pg<'_, '_> {
    async fn find_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id, "").await
    }

    async fn share_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id, " FOR SHARE").await
    }

    async fn lock_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id, " FOR NO KEY UPDATE").await
    }

    async fn lock_environment_to_delete(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Option<EnvironmentRow>> {
        find(self, ws, id, " FOR UPDATE").await
    }

    async fn insert_environment(&self, ws: &WorkspaceId, env: &Environment, now: i64) -> Result<()> {
        let (metadata, config) = json_columns(env);
        exec(
            self,
            "INSERT INTO environments \
             (id, name, description, metadata, config, scope, created_at, updated_at, workspace_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)",
            &[&env.id.as_str(), &env.name, &env.description, &metadata, &config, &env.scope, &now, &ws.as_str()],
        )
        .await
        .map(drop)
    }

    async fn set_environment(&self, seq: i64, env: &Environment, now: i64) -> Result<()> {
        let (metadata, config) = json_columns(env);
        exec(
            self,
            "UPDATE environments SET name = $1, description = $2, metadata = $3, config = $4, scope = $5, \
             updated_at = $6 WHERE seq = $7",
            &[&env.name, &env.description, &metadata, &config, &env.scope, &now, &seq],
        )
        .await
        .map(drop)
    }

    async fn set_environment_archived(&self, seq: i64, now: i64) -> Result<()> {
        exec(self, "UPDATE environments SET archived_at = $1, updated_at = $1 WHERE seq = $2", &[&now, &seq])
            .await
            .map(drop)
    }

    async fn delete_environment_keys(&self, seq: i64) -> Result<()> {
        exec(self, "DELETE FROM environment_keys WHERE environment_seq = $1", &[&seq]).await.map(drop)
    }

    async fn delete_environment_row(&self, seq: i64) -> Result<()> {
        exec(self, "DELETE FROM environments WHERE seq = $1", &[&seq]).await.map(drop)
    }

    async fn insert_environment_key(
        &self,
        id: &EnvironmentKeyId,
        environment: i64,
        hash: &CredentialHash,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO environment_keys (id, environment_seq, secret_hash, created_at) VALUES ($1, $2, $3, $4)",
            &[&id.as_str(), &environment, &&hash[..], &now],
        )
        .await
        .map(drop)
    }

    async fn find_environment_key(&self, ws: &WorkspaceId, id: &EnvironmentKeyId) -> Result<Option<EnvironmentKey>> {
        let row = opt(
            self,
            &format!(
                "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
                 WHERE k.id = $1 AND e.workspace_id = $2"
            ),
            &[&id.as_str(), &ws.as_str()],
        )
        .await?;
        row.as_ref().map(key_from_row).transpose()
    }

    async fn set_environment_key_revoked(&self, id: &EnvironmentKeyId, now: i64) -> Result<()> {
        exec(self, "UPDATE environment_keys SET revoked_at = $1 WHERE id = $2", &[&now, &id.as_str()]).await.map(drop)
    }

    async fn environment_keys(&self, environment: i64) -> Result<Vec<EnvironmentKey>> {
        let rows = all(
            self,
            &format!(
                "SELECT {KEY_COLUMNS} FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
                 WHERE k.environment_seq = $1 ORDER BY k.seq"
            ),
            &[&environment],
        )
        .await?;
        rows.iter().map(key_from_row).collect()
    }
}
