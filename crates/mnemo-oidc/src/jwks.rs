//! The provider's signing keys (its JWKS), cached.
//!
//! The set is fetched on first use and replaced as a whole at every fetch, so a key the provider
//! rotated out disappears here at the next fetch. A fetch happens when the set is older than
//! `max_age`, or when a token names a `kid` the set lacks — at most once per `min_refetch`, so a
//! flood of tokens with made-up `kid`s costs the provider one request per interval.

use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;
use url::Url;

use crate::validate::{Header, TokenError};

#[derive(Debug)]
pub struct JwksCache {
    uri: Url,
    min_refetch: Duration,
    max_age: Duration,
    state: Mutex<Option<Fetched>>,
}

#[derive(Debug)]
struct Fetched {
    keys: Vec<Jwk>,
    at: Instant,
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<Value>,
}

impl JwksCache {
    pub fn new(uri: Url, min_refetch: Duration, max_age: Duration) -> Self {
        Self { uri, min_refetch, max_age, state: Mutex::new(None) }
    }

    /// The key that must have signed a token with `header`.
    pub async fn key_for(&self, http: &reqwest::Client, header: &Header) -> Result<DecodingKey, TokenError> {
        let mut state = self.state.lock().await;
        let stale = state.as_ref().is_none_or(|f| f.at.elapsed() >= self.max_age);
        if stale {
            *state = Some(self.fetch(http).await?);
        }
        let fetched = state.as_ref().ok_or(TokenError::KeysUnavailable)?;
        if let Some(key) = pick(&fetched.keys, header)? {
            return Ok(key);
        }
        if !stale && fetched.at.elapsed() >= self.min_refetch {
            tracing::debug!("a token names a key not in the provider's set; refetching it");
            *state = Some(self.fetch(http).await?);
            let fetched = state.as_ref().ok_or(TokenError::KeysUnavailable)?;
            if let Some(key) = pick(&fetched.keys, header)? {
                return Ok(key);
            }
        }
        Err(TokenError::UnknownKey)
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<Fetched, TokenError> {
        let response = http
            .get(self.uri.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| {
                tracing::warn!(error = %e, "could not fetch the identity provider's keys");
                TokenError::KeysUnavailable
            })?;
        let raw: RawSet = response.json().await.map_err(|e| {
            tracing::warn!(error = %e.without_url(), "the identity provider's keys are not a JWKS");
            TokenError::KeysUnavailable
        })?;
        // A key of a type this crate cannot read (or a private part mistakenly published) is
        // skipped, not fatal: the others still verify.
        let keys = raw.keys.into_iter().filter_map(|k| serde_json::from_value::<Jwk>(k).ok()).collect();
        Ok(Fetched { keys, at: Instant::now() })
    }
}

/// The key for `header` among `keys`: by `kid`, or the only signing key when the token names
/// none. A key marked for encryption, or for another algorithm, never verifies a signature.
fn pick(keys: &[Jwk], header: &Header) -> Result<Option<DecodingKey>, TokenError> {
    let usable = |k: &&Jwk| {
        !matches!(k.common.public_key_use, Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_)))
            && k.common.key_algorithm.is_none_or(|a| a.to_string() == format!("{:?}", header.alg))
    };
    let found = match &header.kid {
        Some(kid) => keys.iter().filter(usable).find(|k| k.common.key_id.as_deref() == Some(kid.as_str())),
        None => {
            let mut candidates = keys.iter().filter(usable);
            match (candidates.next(), candidates.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            }
        }
    };
    found.map(|k| DecodingKey::from_jwk(k).map_err(|_| TokenError::UnknownKey)).transpose()
}
