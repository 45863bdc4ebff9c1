//! People, invites and workspace memberships as SQL primitives ([`ops::PeopleSql`]; what they
//! mean is [`ops::people`]'s).

use mnemo_api::{InviteId, UserId, WorkspaceId};
use mnemo_store::ops::{
    self,
    people::{InviteRow, MemberRow, NewInviteRow, NewUserRow, UserRow},
};
use mnemo_store::{CredentialHash, Result};
use rusqlite::params;

use crate::engine::{Lite, backend, query_all, query_one};

impl ops::PeopleSql for Lite<'_> {
    /// SQLite's single writer excludes every other writer: nothing to hold.
    async fn hold_people(&self) -> Result<()> {
        Ok(())
    }

    async fn insert_user(&self, row: NewUserRow<'_>) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO users (id, email, name, role, password_hash, added_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![row.id.as_str(), row.email, row.name, row.role, row.password_hash, row.added_at])
        })
        .map_err(backend)?;
        Ok(())
    }

    async fn user_rows(&self, only: Option<&UserId>, email: Option<&str>) -> Result<Vec<UserRow>> {
        let mut s = self
            .prepare_cached(
                "SELECT id, email, name, role, added_at FROM users \
                 WHERE (?1 IS NULL OR id = ?1) AND (?2 IS NULL OR email = ?2) ORDER BY seq",
            )
            .map_err(backend)?;
        let rows = s
            .query_map(params![only.map(UserId::as_str), email], |r| {
                Ok(UserRow { id: r.get(0)?, email: r.get(1)?, name: r.get(2)?, role: r.get(3)?, added_at: r.get(4)? })
            })
            .map_err(backend)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(backend)
    }

    async fn set_user_role(&self, id: &UserId, role: &str) -> Result<()> {
        self.prepare_cached("UPDATE users SET role = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id.as_str(), role]))
            .map_err(backend)?;
        Ok(())
    }

    async fn set_user_profile(&self, id: &UserId, email: &str, name: &str) -> Result<()> {
        self.prepare_cached("UPDATE users SET email = ?2, name = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id.as_str(), email, name]))
            .map_err(backend)?;
        Ok(())
    }

    async fn delete_user(&self, id: &UserId) -> Result<()> {
        for sql in [
            "DELETE FROM workspace_members WHERE user_id = ?1",
            "DELETE FROM person_sessions WHERE user_id = ?1",
            "DELETE FROM users WHERE id = ?1",
        ] {
            self.prepare_cached(sql).and_then(|mut s| s.execute([id.as_str()])).map_err(backend)?;
        }
        Ok(())
    }

    async fn insert_invite(&self, row: NewInviteRow<'_>) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO invites (id, email, role, secret_hash, invited_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![
                row.id.as_str(),
                row.email,
                row.role,
                &row.secret_hash[..],
                row.invited_at,
                row.expires_at
            ])
        })
        .map_err(backend)?;
        Ok(())
    }

    async fn invite_rows(&self, only: Option<&InviteId>, email: Option<&str>) -> Result<Vec<InviteRow>> {
        query_all(
            self,
            &format!(
                "SELECT {INVITE_COLUMNS} FROM invites WHERE (?1 IS NULL OR id = ?1) AND (?2 IS NULL OR email = ?2) \
                 ORDER BY seq"
            ),
            params![only.map(InviteId::as_str), email],
            invite_row,
        )
    }

    async fn set_invite_deleted(&self, id: &InviteId, at: i64) -> Result<()> {
        self.prepare_cached("UPDATE invites SET deleted_at = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id.as_str(), at]))
            .map_err(backend)?;
        Ok(())
    }

    async fn member_rows(&self, ws: &WorkspaceId, user: Option<&UserId>) -> Result<Vec<MemberRow>> {
        let mut s = self
            .prepare_cached(
                "SELECT user_id, workspace_role FROM workspace_members \
                 WHERE workspace_id = ?1 AND (?2 IS NULL OR user_id = ?2) ORDER BY seq",
            )
            .map_err(backend)?;
        let rows = s
            .query_map(params![ws.as_str(), user.map(UserId::as_str)], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(backend)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(backend)
    }

    async fn put_member(&self, ws: &WorkspaceId, user: &UserId, role: &str, at: i64) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO workspace_members (workspace_id, user_id, workspace_role, added_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET workspace_role = excluded.workspace_role",
        )
        .and_then(|mut s| s.execute(params![ws.as_str(), user.as_str(), role, at]))
        .map_err(backend)?;
        Ok(())
    }

    async fn delete_member(&self, ws: &WorkspaceId, user: &UserId) -> Result<()> {
        self.prepare_cached("DELETE FROM workspace_members WHERE workspace_id = ?1 AND user_id = ?2")
            .and_then(|mut s| s.execute(params![ws.as_str(), user.as_str()]))
            .map_err(backend)?;
        Ok(())
    }

    async fn invite_by_hash(&self, hash: &CredentialHash) -> Result<Option<InviteRow>> {
        query_one(
            self,
            &format!("SELECT {INVITE_COLUMNS} FROM invites WHERE secret_hash = ?1"),
            [&hash[..]],
            invite_row,
        )
    }

    async fn set_invite_accepted(&self, id: &InviteId, at: i64) -> Result<()> {
        self.prepare_cached("UPDATE invites SET accepted_at = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id.as_str(), at]))
            .map_err(backend)?;
        Ok(())
    }

    async fn insert_setup_link(&self, hash: &CredentialHash, created_at: i64, expires_at: i64) -> Result<()> {
        self.prepare_cached("INSERT INTO setup_links (secret_hash, created_at, expires_at) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![&hash[..], created_at, expires_at]))
            .map_err(backend)?;
        Ok(())
    }

    async fn setup_link_by_hash(&self, hash: &CredentialHash) -> Result<Option<(i64, Option<i64>)>> {
        query_one(self, "SELECT expires_at, used_at FROM setup_links WHERE secret_hash = ?1", [&hash[..]], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
    }

    async fn set_setup_link_used(&self, hash: &CredentialHash, at: i64) -> Result<()> {
        self.prepare_cached("UPDATE setup_links SET used_at = ?2 WHERE secret_hash = ?1")
            .and_then(|mut s| s.execute(params![&hash[..], at]))
            .map_err(backend)?;
        Ok(())
    }

    async fn delete_person_sessions_ended_before(&self, user: &UserId, cutoff: i64) -> Result<()> {
        self.prepare_cached("DELETE FROM person_sessions WHERE user_id = ?1 AND (expires_at < ?2 OR revoked_at < ?2)")
            .and_then(|mut s| s.execute(params![user.as_str(), cutoff]))
            .map_err(backend)?;
        Ok(())
    }

    async fn insert_person_session(
        &self,
        hash: &CredentialHash,
        user: &UserId,
        created_at: i64,
        expires_at: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO person_sessions (secret_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![&hash[..], user.as_str(), created_at, expires_at]))
        .map_err(backend)?;
        Ok(())
    }

    async fn person_session_by_hash(&self, hash: &CredentialHash, now: i64) -> Result<Option<(String, i64, i64)>> {
        query_one(
            self,
            "SELECT user_id, created_at, expires_at FROM person_sessions \
             WHERE secret_hash = ?1 AND revoked_at IS NULL AND expires_at > ?2",
            params![&hash[..], now],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }

    async fn revoke_person_session(&self, hash: &CredentialHash, now: i64) -> Result<bool> {
        let ended = self
            .prepare_cached("UPDATE person_sessions SET revoked_at = ?1 WHERE secret_hash = ?2 AND revoked_at IS NULL")
            .and_then(|mut s| s.execute(params![now, &hash[..]]))
            .map_err(backend)?;
        Ok(ended > 0)
    }

    async fn password_hash(&self, id: &UserId) -> Result<Option<String>> {
        Ok(query_one(self, "SELECT password_hash FROM users WHERE id = ?1", [id.as_str()], |r| r.get(0))?.flatten())
    }

    async fn live_person_sessions(&self, user: &UserId, now: i64) -> Result<Vec<(i64, i64)>> {
        query_all(
            self,
            "SELECT created_at, expires_at FROM person_sessions \
             WHERE user_id = ?1 AND revoked_at IS NULL AND expires_at > ?2 ORDER BY created_at DESC",
            params![user.as_str(), now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    async fn revoke_person_sessions(&self, user: &UserId, now: i64) -> Result<u64> {
        let ended = self
            .prepare_cached("UPDATE person_sessions SET revoked_at = ?1 WHERE user_id = ?2 AND revoked_at IS NULL")
            .and_then(|mut s| s.execute(params![now, user.as_str()]))
            .map_err(backend)?;
        Ok(ended as u64)
    }
}

/// The columns [`invite_row`] reads, in its order.
const INVITE_COLUMNS: &str = "id, email, role, invited_at, expires_at, accepted_at, deleted_at";

/// An invite as [`INVITE_COLUMNS`] select it.
fn invite_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<InviteRow> {
    Ok(InviteRow {
        id: r.get(0)?,
        email: r.get(1)?,
        role: r.get(2)?,
        invited_at: r.get(3)?,
        expires_at: r.get(4)?,
        accepted_at: r.get(5)?,
        deleted_at: r.get(6)?,
    })
}
