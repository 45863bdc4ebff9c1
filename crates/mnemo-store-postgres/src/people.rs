//! People, invites and workspace memberships as SQL primitives ([`ops::PeopleSql`]; what they
//! mean is [`ops::people`]'s).

use mnemo_api::{InviteId, UserId, WorkspaceId};
use mnemo_store::ops::{
    self,
    people::{InviteRow, MemberRow, NewInviteRow, NewUserRow, UserRow},
};
use mnemo_store::{CredentialHash, Result};

use crate::engine::{Pg, all, col, exec, opt};

impl ops::PeopleSql for Pg<'_, '_> {
    /// A transaction-scoped advisory lock: changes to people take turns on every replica, so
    /// "the last admin" or "a pending invite for this email" is judged on what commits.
    async fn hold_people(&self) -> Result<()> {
        exec(self, "SELECT pg_advisory_xact_lock(hashtext('mnemo people ' || current_setting('search_path')))", &[])
            .await
            .map(drop)
    }

    async fn insert_user(&self, row: NewUserRow<'_>) -> Result<()> {
        exec(
            self,
            "INSERT INTO users (id, email, name, role, password_hash, added_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&row.id.as_str(), &row.email, &row.name, &row.role, &row.password_hash, &row.added_at],
        )
        .await
        .map(drop)
    }

    async fn user_rows(&self, only: Option<&UserId>, email: Option<&str>) -> Result<Vec<UserRow>> {
        let rows = all(
            self,
            "SELECT id, email, name, role, added_at FROM users \
             WHERE ($1::text IS NULL OR id = $1) AND ($2::text IS NULL OR email = $2) ORDER BY seq",
            &[&only.map(UserId::as_str), &email],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(UserRow {
                    id: col(r, 0)?,
                    email: col(r, 1)?,
                    name: col(r, 2)?,
                    role: col(r, 3)?,
                    added_at: col(r, 4)?,
                })
            })
            .collect()
    }

    async fn set_user_role(&self, id: &UserId, role: &str) -> Result<()> {
        exec(self, "UPDATE users SET role = $2 WHERE id = $1", &[&id.as_str(), &role]).await.map(drop)
    }

    async fn set_user_profile(&self, id: &UserId, email: &str, name: &str) -> Result<()> {
        exec(self, "UPDATE users SET email = $2, name = $3 WHERE id = $1", &[&id.as_str(), &email, &name])
            .await
            .map(drop)
    }

    async fn delete_user(&self, id: &UserId) -> Result<()> {
        exec(self, "DELETE FROM workspace_members WHERE user_id = $1", &[&id.as_str()]).await?;
        exec(self, "DELETE FROM person_sessions WHERE user_id = $1", &[&id.as_str()]).await?;
        exec(self, "DELETE FROM users WHERE id = $1", &[&id.as_str()]).await.map(drop)
    }

    async fn insert_invite(&self, row: NewInviteRow<'_>) -> Result<()> {
        exec(
            self,
            "INSERT INTO invites (id, email, role, secret_hash, invited_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&row.id.as_str(), &row.email, &row.role, &&row.secret_hash[..], &row.invited_at, &row.expires_at],
        )
        .await
        .map(drop)
    }

    async fn invite_rows(&self, only: Option<&InviteId>, email: Option<&str>) -> Result<Vec<InviteRow>> {
        let rows = all(
            self,
            "SELECT id, email, role, invited_at, expires_at, accepted_at, deleted_at FROM invites \
             WHERE ($1::text IS NULL OR id = $1) AND ($2::text IS NULL OR email = $2) ORDER BY seq",
            &[&only.map(InviteId::as_str), &email],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(InviteRow {
                    id: col(r, 0)?,
                    email: col(r, 1)?,
                    role: col(r, 2)?,
                    invited_at: col(r, 3)?,
                    expires_at: col(r, 4)?,
                    accepted_at: col(r, 5)?,
                    deleted_at: col(r, 6)?,
                })
            })
            .collect()
    }

    async fn set_invite_deleted(&self, id: &InviteId, at: i64) -> Result<()> {
        exec(self, "UPDATE invites SET deleted_at = $2 WHERE id = $1", &[&id.as_str(), &at]).await.map(drop)
    }

    async fn member_rows(&self, ws: &WorkspaceId, user: Option<&UserId>) -> Result<Vec<MemberRow>> {
        let rows = all(
            self,
            "SELECT user_id, workspace_role FROM workspace_members \
             WHERE workspace_id = $1 AND ($2::text IS NULL OR user_id = $2) ORDER BY seq",
            &[&ws.as_str(), &user.map(UserId::as_str)],
        )
        .await?;
        rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?))).collect()
    }

    async fn put_member(&self, ws: &WorkspaceId, user: &UserId, role: &str, at: i64) -> Result<()> {
        exec(
            self,
            "INSERT INTO workspace_members (workspace_id, user_id, workspace_role, added_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET workspace_role = excluded.workspace_role",
            &[&ws.as_str(), &user.as_str(), &role, &at],
        )
        .await
        .map(drop)
    }

    async fn delete_member(&self, ws: &WorkspaceId, user: &UserId) -> Result<()> {
        exec(
            self,
            "DELETE FROM workspace_members WHERE workspace_id = $1 AND user_id = $2",
            &[&ws.as_str(), &user.as_str()],
        )
        .await
        .map(drop)
    }

    async fn invite_by_hash(&self, hash: &CredentialHash) -> Result<Option<InviteRow>> {
        let row = opt(
            self,
            "SELECT id, email, role, invited_at, expires_at, accepted_at, deleted_at FROM invites WHERE secret_hash = $1",
            &[&&hash[..]],
        )
        .await?;
        row.map(|r| {
            Ok(InviteRow {
                id: col(&r, 0)?,
                email: col(&r, 1)?,
                role: col(&r, 2)?,
                invited_at: col(&r, 3)?,
                expires_at: col(&r, 4)?,
                accepted_at: col(&r, 5)?,
                deleted_at: col(&r, 6)?,
            })
        })
        .transpose()
    }

    async fn set_invite_accepted(&self, id: &InviteId, at: i64) -> Result<()> {
        exec(self, "UPDATE invites SET accepted_at = $2 WHERE id = $1", &[&id.as_str(), &at]).await.map(drop)
    }

    async fn insert_setup_link(&self, hash: &CredentialHash, created_at: i64, expires_at: i64) -> Result<()> {
        exec(
            self,
            "INSERT INTO setup_links (secret_hash, created_at, expires_at) VALUES ($1, $2, $3)",
            &[&&hash[..], &created_at, &expires_at],
        )
        .await
        .map(drop)
    }

    async fn setup_link_by_hash(&self, hash: &CredentialHash) -> Result<Option<(i64, Option<i64>)>> {
        let row =
            opt(self, "SELECT expires_at, used_at FROM setup_links WHERE secret_hash = $1", &[&&hash[..]]).await?;
        row.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
    }

    async fn set_setup_link_used(&self, hash: &CredentialHash, at: i64) -> Result<()> {
        exec(self, "UPDATE setup_links SET used_at = $2 WHERE secret_hash = $1", &[&&hash[..], &at]).await.map(drop)
    }

    async fn delete_person_sessions_ended_before(&self, user: &UserId, cutoff: i64) -> Result<()> {
        exec(
            self,
            "DELETE FROM person_sessions WHERE user_id = $1 AND (expires_at < $2 OR revoked_at < $2)",
            &[&user.as_str(), &cutoff],
        )
        .await
        .map(drop)
    }

    async fn insert_person_session(
        &self,
        hash: &CredentialHash,
        user: &UserId,
        created_at: i64,
        expires_at: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO person_sessions (secret_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
            &[&&hash[..], &user.as_str(), &created_at, &expires_at],
        )
        .await
        .map(drop)
    }

    async fn person_session_by_hash(&self, hash: &CredentialHash, now: i64) -> Result<Option<(String, i64, i64)>> {
        let row = opt(
            self,
            "SELECT user_id, created_at, expires_at FROM person_sessions \
             WHERE secret_hash = $1 AND revoked_at IS NULL AND expires_at > $2",
            &[&&hash[..], &now],
        )
        .await?;
        row.map(|r| Ok((col(&r, 0)?, col(&r, 1)?, col(&r, 2)?))).transpose()
    }

    async fn revoke_person_session(&self, hash: &CredentialHash, now: i64) -> Result<bool> {
        let ended = exec(
            self,
            "UPDATE person_sessions SET revoked_at = $1 WHERE secret_hash = $2 AND revoked_at IS NULL",
            &[&now, &&hash[..]],
        )
        .await?;
        Ok(ended > 0)
    }

    async fn password_hash(&self, id: &UserId) -> Result<Option<String>> {
        let row = opt(self, "SELECT password_hash FROM users WHERE id = $1", &[&id.as_str()]).await?;
        Ok(row.map(|r| col::<Option<String>>(&r, 0)).transpose()?.flatten())
    }

    async fn live_person_sessions(&self, user: &UserId, now: i64) -> Result<Vec<(i64, i64)>> {
        let rows = all(
            self,
            "SELECT created_at, expires_at FROM person_sessions \
             WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > $2 ORDER BY created_at DESC",
            &[&user.as_str(), &now],
        )
        .await?;
        rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?))).collect()
    }

    async fn revoke_person_sessions(&self, user: &UserId, now: i64) -> Result<u64> {
        exec(
            self,
            "UPDATE person_sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
            &[&now, &user.as_str()],
        )
        .await
    }
}
