//! Who is calling: bearer tokens and `x-api-key`, resolved by looking the token up.
//!
//! Every credential kind (API key, environment key, sessions token) can arrive as
//! `Authorization: Bearer`, so the kind is decided by the lookup, never by the header. When
//! both headers are present, `x-api-key` wins: it can only ever carry an API key.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use mnemo_api::{Actor, ApiKeyId};
use mnemo_store::{CredentialHash, Store};
use sha2::{Digest, Sha256};

use crate::{ApiError, AppState};

/// The SHA-256 under which a credential is stored.
pub fn hash_credential(secret: &str) -> CredentialHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// Resolves credentials, remembering the ones it has seen.
pub(crate) struct Authenticator {
    store: Arc<dyn Store>,
    known: RwLock<HashMap<CredentialHash, ApiKeyId>>,
}

impl Authenticator {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            known: RwLock::default(),
        }
    }

    async fn resolve(&self, secret: &str) -> Result<ApiKeyId, ApiError> {
        let hash = hash_credential(secret);
        if let Some(id) = self
            .known
            .read()
            .expect("credential cache poisoned")
            .get(&hash)
        {
            return Ok(id.clone());
        }
        match self.store.find_api_key(hash).await? {
            Some(id) => {
                self.known
                    .write()
                    .expect("credential cache poisoned")
                    .insert(hash, id.clone());
                Ok(id)
            }
            None => Err(ApiError::authentication(
                "invalid x-api-key or bearer token",
            )),
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    ApiKey(ApiKeyId),
}

impl Caller {
    /// The actor recorded on the versions this caller writes.
    pub(crate) fn actor(&self) -> Actor {
        match self {
            Self::ApiKey(id) => Actor::ApiActor {
                api_key_id: id.clone(),
            },
        }
    }
}

fn credential(parts: &Parts) -> Option<&str> {
    if let Some(key) = parts.headers.get("x-api-key") {
        return key.to_str().ok().map(str::trim);
    }
    let value = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let secret = credential(parts).filter(|s| !s.is_empty()).ok_or_else(|| {
            ApiError::authentication(
                "missing credentials: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
            )
        })?;
        state.auth.resolve(secret).await.map(Caller::ApiKey)
    }
}
