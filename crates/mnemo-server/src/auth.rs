//! Who is calling: bearer tokens and `x-api-key`, resolved by looking the token up.
//!
//! Every credential kind (API key, environment key, sessions token) can arrive as
//! `Authorization: Bearer`, so the kind is decided by the lookup, never by the header. When
//! both headers are present, `x-api-key` wins: it can only ever carry an API key.
//!
//! Handlers say what they accept through the extractor they take: [`Caller`] (anything),
//! [`MemoryCaller`] (not an environment key) or [`ApiKeyCaller`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::extract::FromRequestParts;
use axum::http::Method;
use axum::http::request::Parts;
use mnemo_api::{Access, Actor, ApiKeyId, EnvironmentId, EnvironmentKeyId, MemoryStoreId, SessionId, WorkId};
use mnemo_store::{Credential, CredentialHash, Store};
use sha2::{Digest, Sha256};

use crate::{ApiError, AppState};

/// The SHA-256 under which a credential is stored.
pub fn hash_credential(secret: &str) -> CredentialHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// Resolves credentials, remembering the ones it has seen.
pub(crate) struct Authenticator {
    store: Arc<dyn Store>,
    known: RwLock<HashMap<CredentialHash, Credential>>,
}

impl Authenticator {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self { store, known: RwLock::default() }
    }

    async fn resolve(&self, secret: &str) -> Result<Credential, ApiError> {
        let hash = hash_credential(secret);
        if let Some(found) = self.known.read().expect("credential cache poisoned").get(&hash) {
            return Ok(found.clone());
        }
        match self.store.resolve_credential(hash).await? {
            // Sessions tokens die with their work item's lease; never remember them.
            Some(found @ Credential::SessionToken { .. }) => Ok(found),
            Some(found) => {
                self.known.write().expect("credential cache poisoned").insert(hash, found.clone());
                Ok(found)
            }
            None => Err(ApiError::authentication("invalid x-api-key or bearer token")),
        }
    }

    /// Forgets every remembered credential (after a revocation).
    pub(crate) fn forget_all(&self) {
        self.known.write().expect("credential cache poisoned").clear();
    }
}

/// An authenticated caller, whatever its credential.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    ApiKey(ApiKeyId),
    EnvironmentKey { id: EnvironmentKeyId, environment: EnvironmentId },
    SessionToken { work: WorkId, session: SessionId, environment: EnvironmentId },
}

impl From<Credential> for Caller {
    fn from(c: Credential) -> Self {
        match c {
            Credential::ApiKey(id) => Self::ApiKey(id),
            Credential::EnvironmentKey { id, environment } => Self::EnvironmentKey { id, environment },
            Credential::SessionToken { work, session, environment } => {
                Self::SessionToken { work, session, environment }
            }
        }
    }
}

/// A caller allowed on the memory endpoints: anything but an environment key, which the hosted
/// API refuses there too.
#[derive(Debug, Clone)]
pub(crate) struct MemoryCaller {
    actor: Actor,
}

impl MemoryCaller {
    /// The actor recorded on the versions this caller writes.
    pub(crate) fn actor(&self) -> Actor {
        self.actor.clone()
    }
}

/// A caller holding an API key (administration: environments, keys, agents).
#[derive(Debug, Clone)]
pub(crate) struct ApiKeyCaller(
    #[expect(dead_code, reason = "kept for audit logs of administrative calls")] pub(crate) ApiKeyId,
);

fn credential(parts: &Parts) -> Option<&str> {
    if let Some(key) = parts.headers.get("x-api-key") {
        return key.to_str().ok().map(str::trim);
    }
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let secret = credential(parts).filter(|s| !s.is_empty()).ok_or_else(|| {
            ApiError::authentication("missing credentials: send `Authorization: Bearer <key>` or `x-api-key: <key>`")
        })?;
        state.auth.resolve(secret).await.map(Caller::from)
    }
}

impl FromRequestParts<AppState> for MemoryCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match Caller::from_request_parts(parts, state).await? {
            Caller::ApiKey(id) => Ok(Self { actor: Actor::ApiActor { api_key_id: id } }),
            Caller::EnvironmentKey { .. } => Err(ApiError::permission(
                "the memory endpoints do not accept an environment key; use an API key or the work item's sessions token",
            )),
            Caller::SessionToken { session, .. } => {
                session_scope(state, &parts.method, parts.uri.path(), &session).await?;
                Ok(Self { actor: Actor::SessionActor { session_id: session } })
            }
        }
    }
}

impl FromRequestParts<AppState> for ApiKeyCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match Caller::from_request_parts(parts, state).await? {
            Caller::ApiKey(id) => Ok(Self(id)),
            Caller::EnvironmentKey { .. } | Caller::SessionToken { .. } => Err(ApiError::permission(
                "this endpoint needs an API key; environment keys and sessions tokens are not accepted here",
            )),
        }
    }
}

/// What a sessions token may do on the memory endpoints: read the stores attached to its
/// session, and write those attached `read_write` — memories only (no store administration, no
/// redaction, which agents do not have).
async fn session_scope(state: &AppState, method: &Method, path: &str, session: &SessionId) -> Result<(), ApiError> {
    let refuse = |what: &str| Err(ApiError::permission(format!("a sessions token cannot {what}")));
    let Some(rest) = path.strip_prefix("/v1/memory_stores/") else {
        return refuse("create or list memory stores");
    };
    let (store, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(store) = store.parse::<MemoryStoreId>() else {
        return Err(ApiError::not_found(format!("memory store `{store}` not found")));
    };
    let Some(access) = state.store.session_store_access(session, &store).await? else {
        return Err(ApiError::permission(format!(
            "memory store `{store}` is not attached to session `{session}`, which this sessions token is scoped to"
        )));
    };
    let reading = method == Method::GET;
    let memory_write = !reading && (tail == "memories" || tail.starts_with("memories/"));
    if !reading && !memory_write {
        return refuse("change a memory store or redact its versions");
    }
    if memory_write && access == Access::ReadOnly {
        return Err(ApiError::permission(format!(
            "memory store `{store}` is attached read-only to session `{session}`; it cannot be written"
        )));
    }
    Ok(())
}
