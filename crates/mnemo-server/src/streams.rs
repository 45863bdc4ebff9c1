//! How many streams may be open at once: event streams, memory change feeds (SSE) and their
//! JSON long polls each hold a connection for as long as they last, so one credential — a
//! sandbox's sessions token included — could otherwise take every connection the server has.
//!
//! Two limits, both checked when a stream opens: a cap per credential (`429 rate_limit_error`
//! past it), and a cap over all credentials, below the server's connection cap, so the rest of
//! the connections stay for ordinary requests and health checks (`529 overloaded_error` past
//! it). A [`StreamSlot`] is held for the stream's life and frees its place when dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_store::Credential;

use crate::ApiError;

/// How many streams may be open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Per credential (API key, environment key, sessions token); at least 1.
    pub per_credential: usize,
    /// Over all credentials; at least 1. Keep it below the connection cap so connections stay
    /// for other requests.
    pub total: usize,
}

impl StreamLimits {
    /// Default [`per_credential`](Self::per_credential): a worker's session needs one event
    /// stream and a change feed per attached store; a person follows a few sessions.
    pub const DEFAULT_PER_CREDENTIAL: usize = 32;

    /// The default for a server of `max_connections`: half of them for streams.
    pub fn for_connections(max_connections: usize) -> Self {
        Self { per_credential: Self::DEFAULT_PER_CREDENTIAL, total: (max_connections / 2).max(1) }
    }
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self::for_connections(crate::ServeConfig::DEFAULT_MAX_CONNECTIONS)
    }
}

/// How long a refused stream is told to wait.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The open streams, per credential and in all.
#[derive(Debug)]
pub(crate) struct StreamLimiter {
    limits: StreamLimits,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_credential: HashMap<String, usize>,
}

/// One open stream's place; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    limiter: Arc<StreamLimiter>,
    key: String,
}

/// The key a credential's streams are counted under: its id (a sessions token by its work
/// item, so a new delivery of the same item shares the count).
fn key(credential: &Credential) -> String {
    match credential {
        Credential::AdminKey(id) => id.to_string(),
        Credential::ApiKey(id) => id.to_string(),
        Credential::EnvironmentKey { id, .. } => id.to_string(),
        Credential::SessionToken { work, .. } => work.to_string(),
        Credential::Person { user, .. } => user.to_string(),
    }
}

impl StreamLimiter {
    pub(crate) fn new(limits: StreamLimits) -> Self {
        let limits = StreamLimits { per_credential: limits.per_credential.max(1), total: limits.total.max(1) };
        Self { limits, open: Mutex::default() }
    }

    /// A place for one more stream of `credential`, or the refusal to answer.
    pub(crate) fn open(self: &Arc<Self>, credential: &Credential) -> Result<StreamSlot, ApiError> {
        let key = key(credential);
        let mut open = self.open.lock().expect("stream counts poisoned");
        let mine = open.by_credential.get(&key).copied().unwrap_or(0);
        if mine >= self.limits.per_credential {
            drop(open);
            tracing::info!(credential = %key, limit = self.limits.per_credential, "stream refused: the credential's limit");
            let n = self.limits.per_credential;
            return Err(ApiError::rate_limited(
                format!(
                    "this credential already holds {n} open streams (event streams, change feeds and their long \
                     polls), the most one credential may; close one, or retry later"
                ),
                RETRY_AFTER,
            )
            .closing());
        }
        if open.total >= self.limits.total {
            drop(open);
            tracing::warn!(limit = self.limits.total, "stream refused: the server holds as many streams as it allows");
            return Err(ApiError::overloaded(
                "the server holds as many open streams as it allows; retry later (the rest of its connections are \
                 kept for other requests)",
                RETRY_AFTER,
            )
            .closing());
        }
        open.total += 1;
        *open.by_credential.entry(key.clone()).or_default() += 1;
        Ok(StreamSlot { limiter: Arc::clone(self), key })
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let open = self.open.lock().unwrap();
        (open.total, open.by_credential.len())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().expect("stream counts poisoned");
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_credential.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.by_credential.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::ApiKeyId;

    use super::*;

    fn api_key() -> Credential {
        Credential::ApiKey(ApiKeyId::generate())
    }

    #[test]
    fn each_credential_has_its_cap_and_all_share_one() {
        let limiter = Arc::new(StreamLimiter::new(StreamLimits { per_credential: 2, total: 3 }));
        let (a, b) = (api_key(), api_key());
        let a1 = limiter.open(&a).unwrap();
        let _a2 = limiter.open(&a).unwrap();
        let refused = limiter.open(&a).unwrap_err();
        assert_eq!(refused.status(), 429, "past its own cap a credential is rate limited");
        let _b1 = limiter.open(&b).unwrap();
        assert_eq!(limiter.open(&b).unwrap_err().status(), 529, "past the total the server is overloaded");
        drop(a1);
        assert_eq!(limiter.counts(), (2, 2));
        let _b2 = limiter.open(&b).expect("a closed stream frees its place");
        assert_eq!(limiter.open(&b).unwrap_err().status(), 429);
    }

    #[test]
    fn places_are_freed_when_streams_end() {
        let limiter = Arc::new(StreamLimiter::new(StreamLimits { per_credential: 1, total: 1 }));
        let key = api_key();
        for _ in 0..3 {
            let slot = limiter.open(&key).unwrap();
            drop(slot);
        }
        assert_eq!(limiter.counts(), (0, 0), "no count is left behind");
    }
}
