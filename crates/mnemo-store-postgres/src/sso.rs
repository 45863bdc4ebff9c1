//! Links between people and the identity provider's subjects as SQL primitives
//! ([`ops::SsoSql`]; what they mean is [`ops::sso`]'s).

use mnemo_api::UserId;
use mnemo_store::Result;
use mnemo_store::ops;

use crate::engine::{Pg, col, exec, opt};

impl ops::SsoSql for Pg<'_, '_> {
    async fn sso_user(&self, issuer: &str, subject: &str) -> Result<Option<String>> {
        opt(self, "SELECT user_id FROM sso_identities WHERE issuer = $1 AND subject = $2", &[&issuer, &subject])
            .await?
            .map(|r| col(&r, 0))
            .transpose()
    }

    async fn put_sso_identity(&self, issuer: &str, subject: &str, user: &UserId, at: i64) -> Result<()> {
        exec(
            self,
            "INSERT INTO sso_identities (issuer, subject, user_id, linked_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (issuer, subject) DO UPDATE SET user_id = EXCLUDED.user_id, linked_at = EXCLUDED.linked_at",
            &[&issuer, &subject, &user.as_str(), &at],
        )
        .await
        .map(drop)
    }
}
