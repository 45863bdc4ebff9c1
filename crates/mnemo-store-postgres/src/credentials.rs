//! Credentials: API keys and the lookups of every credential by its secret's hash, as SQL
//! primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{ApiKeyId, EnvironmentId, EnvironmentKeyId, WorkId, WorkState};
use mnemo_store::ops::{self, TokenRow};
use mnemo_store::rules::work::Lease;
use mnemo_store::{CredentialHash, Result, StoreError};

use crate::engine::{Pg, col, exec, one, opt};
use crate::{environments, parse_id};

impl ops::CredentialSql for Pg<'_, '_> {
    async fn api_key_by_hash(&self, hash: &CredentialHash, live: bool) -> Result<Option<ApiKeyId>> {
        let row = opt(
            self,
            "SELECT id FROM api_keys WHERE secret_hash = $1 AND (NOT $2 OR revoked_at IS NULL)",
            &[&&hash[..], &live],
        )
        .await?;
        row.map(|r| parse_id(&col::<String>(&r, 0)?)).transpose()
    }

    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        hash: &CredentialHash,
        label: &str,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO api_keys (id, secret_hash, label, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (secret_hash) DO NOTHING",
            &[&id.as_str(), &&hash[..], &label, &now],
        )
        .await
        .map(drop)
    }

    async fn count_live_api_keys(&self) -> Result<u64> {
        let row = one(self, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", &[]).await?;
        let n: i64 = col(&row, 0)?;
        u64::try_from(n).map_err(|_| StoreError::backend(format!("a count of {n} API keys")))
    }

    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> {
        environments::find_key(self, hash).await
    }

    async fn session_token_by_hash(&self, hash: &CredentialHash) -> Result<Option<TokenRow>> {
        let row = opt(
            self,
            "SELECT t.session_id, w.id, e.id, w.state, w.pending_until, w.lease_expires_at, w.last_heartbeat, \
                    w.ttl_seconds, w.acknowledged_at, w.started_at, w.latest_heartbeat_at, w.stop_requested_at, \
                    w.stopped_at \
             FROM session_tokens t JOIN work_items w ON w.seq = t.work_seq \
             JOIN environments e ON e.seq = w.environment_seq \
             WHERE t.secret_hash = $1 AND t.revoked_at IS NULL",
            &[&&hash[..]],
        )
        .await?;
        let Some(r) = row else { return Ok(None) };
        let session: String = col(&r, 0)?;
        let work: String = col(&r, 1)?;
        let id: WorkId = parse_id(&work)?;
        let state: String = col(&r, 3)?;
        let state = WorkState::parse(&state)
            .ok_or_else(|| StoreError::corrupt("work_items", &work, "state", format!("unknown state `{state}`")))?;
        let ttl: i64 = col(&r, 7)?;
        let lease = Lease {
            id: id.clone(),
            state,
            pending_until: col(&r, 4)?,
            lease_expires_at: col(&r, 5)?,
            last_heartbeat: col(&r, 6)?,
            ttl_seconds: u64::try_from(ttl)
                .map_err(|_| StoreError::corrupt("work_items", &work, "ttl_seconds", format!("negative TTL {ttl}")))?,
            acknowledged_at: col(&r, 8)?,
            started_at: col(&r, 9)?,
            latest_heartbeat_at: col(&r, 10)?,
            stop_requested_at: col(&r, 11)?,
            stopped_at: col(&r, 12)?,
        };
        Ok(Some(TokenRow {
            work: id,
            session: (!session.is_empty()).then(|| parse_id(&session)).transpose()?,
            environment: parse_id(&col::<String>(&r, 2)?)?,
            lease,
        }))
    }
}
