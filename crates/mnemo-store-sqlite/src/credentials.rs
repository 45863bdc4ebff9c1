//! Credentials: API keys and the lookups of every credential by its secret's hash, as SQL
//! primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{ApiKeyId, EnvironmentId, EnvironmentKeyId, WorkId, WorkState};
use mnemo_store::ops::{self, TokenRow};
use mnemo_store::rules::work::Lease;
use mnemo_store::{CredentialHash, Result, StoreError};
use rusqlite::params;

use crate::engine::{Lite, backend, query_one};
use crate::{environments, parse_id};

impl ops::CredentialSql for Lite<'_> {
    async fn api_key_by_hash(&self, hash: &CredentialHash, live: bool) -> Result<Option<ApiKeyId>> {
        let id: Option<String> = query_one(
            self,
            "SELECT id FROM api_keys WHERE secret_hash = ?1 AND (NOT ?2 OR revoked_at IS NULL)",
            params![&hash[..], live],
            |r| r.get(0),
        )?;
        id.as_deref().map(parse_id).transpose()
    }

    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        hash: &CredentialHash,
        label: &str,
        now: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO api_keys (id, secret_hash, label, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (secret_hash) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), &hash[..], label, now]))
        .map_err(backend)?;
        Ok(())
    }

    async fn count_live_api_keys(&self) -> Result<u64> {
        self.prepare_cached("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(backend)
    }

    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> {
        environments::find_key(self, hash)
    }

    async fn session_token_by_hash(&self, hash: &CredentialHash) -> Result<Option<TokenRow>> {
        type Columns = (String, String, String, String, Option<i64>, Option<i64>, Option<String>, i64);
        type Times = (Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>);
        let row: Option<(Columns, Times)> = query_one(
            self,
            "SELECT t.session_id, w.id, e.id, w.state, w.pending_until, w.lease_expires_at, w.last_heartbeat, \
                    w.ttl_seconds, w.acknowledged_at, w.started_at, w.latest_heartbeat_at, w.stop_requested_at, \
                    w.stopped_at \
             FROM session_tokens t JOIN work_items w ON w.seq = t.work_seq \
             JOIN environments e ON e.seq = w.environment_seq \
             WHERE t.secret_hash = ?1 AND t.revoked_at IS NULL",
            [&hash[..]],
            |r| {
                Ok((
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?),
                    (r.get(8)?, r.get(9)?, r.get(10)?, r.get(11)?, r.get(12)?),
                ))
            },
        )?;
        let Some(((session, work, environment, state, pending_until, lease_expires_at, last_heartbeat, ttl), times)) =
            row
        else {
            return Ok(None);
        };
        let (acknowledged_at, started_at, latest_heartbeat_at, stop_requested_at, stopped_at) = times;
        let id: WorkId = parse_id(&work)?;
        let state = WorkState::parse(&state)
            .ok_or_else(|| StoreError::corrupt("work_items", &work, "state", format!("unknown state `{state}`")))?;
        let lease = Lease {
            id: id.clone(),
            state,
            pending_until,
            lease_expires_at,
            last_heartbeat,
            ttl_seconds: u64::try_from(ttl)
                .map_err(|_| StoreError::corrupt("work_items", &work, "ttl_seconds", format!("negative TTL {ttl}")))?,
            acknowledged_at,
            started_at,
            latest_heartbeat_at,
            stop_requested_at,
            stopped_at,
        };
        Ok(Some(TokenRow {
            work: id,
            session: (!session.is_empty()).then(|| parse_id(&session)).transpose()?,
            environment: parse_id(&environment)?,
            lease,
        }))
    }
}
