//! The web console of `mnemo serve`: memory stores, their memories and history, sessions and
//! their transcripts, dreams and their output, environments and their keys, in a browser.
//!
//! Pages are rendered on the server from compile-time-checked templates (askama; every value is
//! HTML-escaped unless a template says otherwise, and none does for stored data). Every state
//! change is a plain HTML form `POST` guarded by a CSRF token, answered with a redirect (or a page
//! that explains a refusal). The one script, `console.js`, only adds what a form cannot: the live
//! transcript of a running session and a copy button. Assets are embedded in the binary.
//!
//! The console calls the same [`Store`] as the HTTP API, so archived stores, path overlaps,
//! preconditions and the cap are refused with the API's own words. A person signs in with their
//! email and password (or an API key); the server keeps a console session (by the hash of its
//! cookie's secret) and nothing else reaches the browser. A person acts with their roles in the
//! workspace shown, asked of the same scope decision as the API's (`Signed::allow`); what they
//! write carries them (`user_actor`), or the key, as its actor.
//!
//! Modules: `auth` (sign-in, the session cookie, the CSRF check in `Posted`), `stores`,
//! `memories` (folder tree, path filter, editing guarded by `content_sha256`), `history`
//! (versions, diffs, restore, redaction), `compare` (two stores path by path, a dream's output
//! with its input), `sessions` and `transcript` (events as readable entries, live over SSE
//! from the server's event hub), `dreams` (the list, a dream's page, cancel and archive),
//! `environments` (queue figures, keys),
//! `api_keys`, `rate_limits` and `audit_log` (the signed-in workspace's keys, limits and log),
//! `people` (people, invites, members, a person's own page), `join` and `password` (invites
//! and the setup link accepted; argon2id),
//! `page` (layout, error pages, security headers), `text` (what templates print), `assets`. The
//! server is reached through [`Hooks`] (forget credentials after a revocation; follow a
//! session's events), implemented in `mnemo-server`.

mod api_keys;
mod assets;
mod audit_log;
mod auth;
mod compare;
mod dreams;
mod environments;
mod history;
mod join;
mod memories;
pub mod oidc;
mod page;
mod password;
mod people;
mod rate_limits;
mod search;
mod sessions;
mod stores;
mod text;
mod transcript;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::routing::{get, post};
use mnemo_api::SessionId;
use mnemo_store::{Store, StoreError, Streamed};
use tokio::sync::broadcast;

/// Largest form body accepted: a memory's content (100 kB) grows up to three-fold when
/// percent-encoded, plus the other fields.
pub(crate) const MAX_FORM_BYTES: usize = 512 * 1024;

/// What the console needs from the server around it, beyond the [`Store`].
#[async_trait]
pub trait Hooks: Send + Sync + 'static {
    /// A credential was revoked through the console: remembered lookups must be dropped.
    fn credentials_changed(&self);
    /// Events appended to workspace `ws`'s `session` from now on (the same feed the API's event
    /// stream uses).
    async fn subscribe(
        &self,
        ws: &mnemo_api::WorkspaceId,
        session: &SessionId,
    ) -> Result<broadcast::Receiver<Streamed>, StoreError>;
    /// Whether a sign-in from `peer` may be tried now: `Err(wait)` while the address has failed
    /// too often (the key is then not even looked up).
    fn sign_in_allowed(&self, _peer: Option<std::net::IpAddr>) -> Result<(), Duration> {
        Ok(())
    }
    /// A place for one more live transcript of the person signed in with `credential` (an API
    /// key, or the person), held (the returned value) while it stays open: the API's stream
    /// limits count it as one of that credential's streams. `Err(wait)` past them.
    fn open_stream(&self, _credential: &mnemo_store::Credential) -> Result<Box<dyn std::any::Any + Send>, Duration> {
        Ok(Box::new(()))
    }
    /// A sign-in from `peer` failed: `Err(wait)` when that was over the address's limit.
    fn sign_in_failed(&self, _peer: Option<std::net::IpAddr>) -> Result<(), Duration> {
        Ok(())
    }
    /// Whether a password sign-in for the account `account` names (a digest of the normalized
    /// email, whoever has it or not) may be tried now: `Err(wait)` while that account has
    /// failed too often, from whatever address.
    fn account_sign_in_allowed(&self, _account: &mnemo_store::CredentialHash) -> Result<(), Duration> {
        Ok(())
    }
    /// A password sign-in for `account` failed: `Err(wait)` when that was over its limit.
    fn account_sign_in_failed(&self, _account: &mnemo_store::CredentialHash) -> Result<(), Duration> {
        Ok(())
    }
    /// What embeds search queries when the server ranks by meaning (`[embeddings]`); `None`:
    /// searches rank by full text only, and the search page offers no other ranking.
    fn query_embedder(&self) -> Option<Arc<dyn mnemo_store::search::QueryEmbedder>> {
        None
    }
    /// Dream `id` was canceled through the console: its runner (if this process has it) stops
    /// now rather than at its next look.
    fn dream_canceled(&self, _id: &mnemo_api::DreamId) {}
    /// The server's rate-limit entries and the organization's values (`--rate-limit`), which
    /// the rate-limits page shows beside the workspace's overrides.
    fn rate_limits(&self) -> (Vec<mnemo_store::rules::rate_limit::Entry>, mnemo_store::rules::rate_limit::OrgLimits) {
        (mnemo_store::rules::rate_limit::catalogue(&[]), Default::default())
    }
}

/// How a deployment tunes the console.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// How long a sign-in lasts.
    pub session_ttl: Duration,
    /// Mark cookies `Secure` even when no proxy says the request came over TLS.
    pub secure_cookies: bool,
    /// The identity provider's display name when single sign-on is on: the sign-in page then
    /// offers "Sign in with {name}".
    pub oidc_provider_name: Option<String>,
    /// Whether people may sign in with their email and password (off when SSO replaces it).
    pub password_sign_in: bool,
    /// Where people reach the console (`--public-url`), for invite links; `None`: the address
    /// the browser used.
    pub public_url: Option<String>,
    /// How long an invite made in the console stays acceptable.
    pub invite_ttl_secs: u64,
    /// Single sign-on (`/console/oidc/start` and `/callback`), when `--oidc-issuer` is given.
    pub oidc: Option<std::sync::Arc<oidc::Sso>>,
    /// How long versions are kept unless a store says otherwise (`--version-retention`).
    pub version_retention: mnemo_store::rules::retention::Retention,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            session_ttl: Duration::from_secs(12 * 3600),
            secure_cookies: false,
            oidc_provider_name: None,
            password_sign_in: true,
            public_url: None,
            invite_ttl_secs: mnemo_store::rules::people::DEFAULT_INVITE_TTL_SECS,
            oidc: None,
            version_retention: mnemo_store::rules::retention::Retention::Forever,
        }
    }
}

/// Everything a console handler can reach.
#[derive(Clone)]
pub struct Console {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) hooks: Arc<dyn Hooks>,
    pub(crate) config: Arc<ConsoleConfig>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Console {
    pub fn new(store: Arc<dyn Store>, hooks: Arc<dyn Hooks>, config: ConsoleConfig) -> Self {
        Self { store, hooks, config: Arc::new(config) }
    }
}

/// The console's routes, all under `/console` (and `/` redirecting there). Merge it into the
/// server's router inside its request-id middleware: error pages name the request's id when the
/// request carries a [`mnemo_api::RequestId`] extension.
pub fn router<S: Clone + Send + Sync + 'static>(console: Console) -> Router<S> {
    Router::new()
        .route("/", get(page::to_console))
        .route("/console", get(stores::list))
        .route("/console/", get(page::to_console))
        .route("/console/assets/{name}", get(assets::serve))
        .route("/console/sign-in", get(auth::sign_in_form).post(auth::sign_in))
        .route("/console/sign-in/password", post(auth::sign_in_with_password))
        .route("/console/oidc/start", get(oidc::start))
        .route("/console/oidc/callback", get(oidc::callback))
        .route("/console/sign-out", post(auth::sign_out))
        .route("/console/workspace", post(auth::switch_workspace))
        .route("/console/invite/{secret}", get(join::invite_form).post(join::accept_invite))
        .route("/console/setup/{secret}", get(join::setup_form).post(join::use_setup_link))
        .route("/console/stores", get(stores::list).post(stores::create))
        .route("/console/stores/new", get(stores::new_form))
        .route("/console/stores/{store}", get(memories::store_page))
        .route("/console/stores/{store}/archive", get(stores::archive_confirm).post(stores::archive))
        .route("/console/stores/{store}/retention", post(memories::set_retention))
        .route("/console/stores/{store}/delete", get(stores::delete_confirm).post(stores::delete))
        .route("/console/stores/{store}/memories", post(memories::create))
        .route("/console/stores/{store}/memories/new", get(memories::new_form))
        .route("/console/stores/{store}/memories/{memory}", get(memories::memory_page))
        .route("/console/stores/{store}/memories/{memory}/edit", get(memories::edit_form).post(memories::save))
        .route("/console/stores/{store}/memories/{memory}/rename", get(memories::rename_form).post(memories::rename))
        .route("/console/stores/{store}/memories/{memory}/delete", get(memories::delete_confirm).post(memories::delete))
        .route("/console/stores/{store}/compare", get(compare::page))
        .route("/console/stores/{store}/history", get(history::list))
        .route("/console/stores/{store}/versions/{version}", get(history::version_page))
        .route("/console/stores/{store}/versions/{version}/restore", post(history::restore))
        .route("/console/stores/{store}/versions/{version}/redact", get(history::redact_confirm).post(history::redact))
        .route("/console/search", get(search::page))
        .route("/console/sessions", get(sessions::list))
        .route("/console/sessions/{session}", get(sessions::session_page))
        .route("/console/sessions/{session}/live", get(sessions::live))
        .route("/console/dreams", get(dreams::list))
        .route("/console/dreams/{dream}", get(dreams::dream_page))
        .route("/console/dreams/{dream}/cancel", post(dreams::cancel))
        .route("/console/dreams/{dream}/archive", post(dreams::archive))
        .route("/console/environments", get(environments::list))
        .route("/console/environments/{environment}", get(environments::environment_page))
        .route("/console/environments/{environment}/keys", post(environments::mint_key))
        .route(
            "/console/environments/{environment}/keys/{key}/revoke",
            get(environments::revoke_confirm).post(environments::revoke),
        )
        .route("/console/api-keys", get(api_keys::list).post(api_keys::mint))
        .route("/console/api-keys/{api_key_id}/deactivate", post(api_keys::deactivate))
        .route("/console/api-keys/{api_key_id}/activate", post(api_keys::activate))
        .route("/console/api-keys/{api_key_id}/archive", get(api_keys::archive_confirm).post(api_keys::archive))
        .route("/console/rate-limits", get(rate_limits::page))
        .route("/console/audit-log", get(audit_log::page))
        .route("/console/people", get(people::people))
        .route("/console/people/invites", post(people::invite))
        .route("/console/people/invites/{invite_id}/resend", post(people::resend))
        .route("/console/people/invites/{invite_id}/revoke", post(people::revoke_invite))
        .route("/console/people/{user_id}/role", post(people::change_role))
        .route("/console/people/{user_id}/remove", post(people::remove))
        .route("/console/members", get(people::members).post(people::add_member))
        .route("/console/members/{user_id}/role", post(people::change_member))
        .route("/console/members/{user_id}/remove", post(people::remove_member))
        .route("/console/me", get(people::me))
        .route("/console/me/sign-out-everywhere", post(people::sign_out_everywhere))
        .route("/console/workspaces", get(page::organization).post(page::organization))
        .route("/console/workspaces/{*rest}", get(page::organization).post(page::organization))
        .route("/console/{*rest}", get(page::not_found).post(page::not_found))
        .method_not_allowed_fallback(page::method_not_allowed)
        .layer(axum::middleware::from_fn(page::headers))
        .with_state(console)
}

#[cfg(test)]
mod tests;
