//! Links between people and the identity provider's subjects as SQL primitives
//! ([`ops::SsoSql`]; what they mean is [`ops::sso`]'s).

use mnemo_api::UserId;
use mnemo_store::Result;
use mnemo_store::ops;
use rusqlite::params;

use crate::engine::{Lite, backend, query_one};

impl ops::SsoSql for Lite<'_> {
    async fn sso_user(&self, issuer: &str, subject: &str) -> Result<Option<String>> {
        query_one(
            self,
            "SELECT user_id FROM sso_identities WHERE issuer = ?1 AND subject = ?2",
            params![issuer, subject],
            |r| r.get(0),
        )
    }

    async fn put_sso_identity(&self, issuer: &str, subject: &str, user: &UserId, at: i64) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO sso_identities (issuer, subject, user_id, linked_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (issuer, subject) DO UPDATE SET user_id = excluded.user_id, linked_at = excluded.linked_at",
        )
        .and_then(|mut s| s.execute(params![issuer, subject, user.as_str(), at]))
        .map_err(backend)?;
        Ok(())
    }
}
