//! Rate limits per workspace on the Managed Agents endpoints (admin-api.md §8.9).
//!
//! A request by an API key to a Managed Agents endpoint takes one token from its workspace's
//! `ratelimit_api` / `requests_per_minute` bucket, once, as its caller is extracted (an event
//! stream or a long poll counts once, when opened). Worker traffic (environment keys, sessions
//! tokens), the console and the Admin API are never counted
//! ([`mnemo_store::rules::rate_limit::counted`]).
//!
//! The limit that applies is the lower of the workspace's override and the organization's
//! `--rate-limit` value. Overrides are remembered per workspace: forgotten at once when this
//! process's Admin API changes them, and — when other replicas share the store and may change
//! them — after [`SHARED_OVERRIDES`] at most. With no limit (the default) a request does no
//! database work beyond that remembered read; with one, it takes from the bucket row every
//! replica shares ([`mnemo_store::Operations::take_rate_limit`]), so the replicas together admit
//! N plus one second of refill.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::response::Response;
use mnemo_api::{LimiterType, WorkspaceId};
use mnemo_store::ops::workspaces::Overrides;
use mnemo_store::rules::rate_limit::{self, Draw, MANAGED_AGENTS_ENTRY_ID, Outcome};
use mnemo_store::{Credential, Store, StoreError};

use crate::{ApiError, AppState};

/// How long a workspace's overrides are trusted when other processes share the store and may
/// change them: their change takes effect here within this.
pub(crate) const SHARED_OVERRIDES: Duration = Duration::from_secs(2);

const REQUESTS: LimiterType = LimiterType::RequestsPerMinute;

/// The limits of each workspace, as far as they are known.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    /// The organization's values (`--rate-limit`).
    org: rate_limit::OrgLimits,
    /// Each workspace's overrides, and when they were read.
    overrides: RwLock<HashMap<WorkspaceId, (Arc<Overrides>, Instant)>>,
    /// How long overrides are trusted (`None`: until this process changes them).
    remember_for: Option<Duration>,
}

/// What a counted request met: the `anthropic-ratelimit-requests-*` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    pub(crate) limit: u64,
    pub(crate) remaining: u64,
    /// When the bucket is full again (microseconds); for a refused request, when one fits.
    pub(crate) reset_at: i64,
}

impl RateLimiter {
    pub(crate) fn new(org: &rate_limit::OrgLimits, shared: bool) -> Self {
        Self { org: org.clone(), overrides: RwLock::default(), remember_for: shared.then_some(SHARED_OVERRIDES) }
    }

    /// A limiter for other organization values, trusting overrides as long as this one does.
    pub(crate) fn with_org_limits(&self, org: &rate_limit::OrgLimits) -> Self {
        Self::new(org, self.remember_for.is_some())
    }

    /// The limit of `limiter` in entry `entry` that applies to workspace `ws`, `None` for no
    /// limit.
    async fn limit(
        &self,
        store: &dyn Store,
        ws: &WorkspaceId,
        entry: &str,
        limiter: &LimiterType,
    ) -> Result<Option<u64>, StoreError> {
        let known = match self.overrides.read().expect("rate-limit cache poisoned").get(ws) {
            Some((own, at)) if self.remember_for.is_none_or(|d| at.elapsed() < d) => Some(Arc::clone(own)),
            _ => None,
        };
        let own = match known {
            Some(own) => own,
            None => {
                let own = Arc::new(store.workspace_rate_limits(ws).await?);
                let mut cache = self.overrides.write().expect("rate-limit cache poisoned");
                cache.insert(ws.clone(), (Arc::clone(&own), Instant::now()));
                own
            }
        };
        let own = own.get(entry).and_then(|limits| limits.get(limiter).copied());
        Ok(rate_limit::effective(own, self.org.get(&(entry.to_owned(), limiter.clone())).copied()))
    }

    /// Forgets workspace `ws`'s overrides (after the Admin API changed them).
    pub(crate) fn forget(&self, ws: &WorkspaceId) {
        self.overrides.write().expect("rate-limit cache poisoned").remove(ws);
    }
}

/// The agent loop's model calls, counted per workspace against their model family's entry
/// (admin-api.md §8.9, [`rate_limit::BEFORE_MODEL_CALL`], [`rate_limit::after_model_call`]). A
/// refusal is a wait the loop sits out inside the session; no model call answers `429`.
#[derive(Clone)]
pub(crate) struct ModelMeter {
    store: Arc<dyn Store>,
    limiter: Arc<RateLimiter>,
    catalogue: Arc<[rate_limit::Entry]>,
}

impl ModelMeter {
    pub(crate) fn new(store: Arc<dyn Store>, limiter: Arc<RateLimiter>, catalogue: &[rate_limit::Entry]) -> Self {
        Self { store, limiter, catalogue: catalogue.into() }
    }

    /// `None` when a call of agent model `model` may start now in workspace `ws` (its request
    /// is then counted); else how long to wait before asking again.
    pub(crate) async fn admit(&self, ws: &WorkspaceId, model: &str) -> Result<Option<Duration>, StoreError> {
        let Some(entry) = rate_limit::entry_for_model(&self.catalogue, model) else { return Ok(None) };
        for (kind, draw) in rate_limit::BEFORE_MODEL_CALL {
            if let Outcome::Limited { retry_after_secs } = self.draw(ws, entry, &kind, draw).await? {
                return Ok(Some(Duration::from_secs(retry_after_secs)));
            }
        }
        Ok(None)
    }

    /// Charges a finished call of agent model `model` the tokens it used.
    pub(crate) async fn charge(
        &self,
        ws: &WorkspaceId,
        model: &str,
        usage: &mnemo_model::Usage,
    ) -> Result<(), StoreError> {
        let Some(entry) = rate_limit::entry_for_model(&self.catalogue, model) else { return Ok(()) };
        let u = usage;
        for (kind, draw) in rate_limit::after_model_call(
            u.input_tokens,
            u.cache_creation_input_tokens,
            u.cache_read_input_tokens,
            u.output_tokens,
        ) {
            self.draw(ws, entry, &kind, draw).await?;
        }
        Ok(())
    }

    /// Draws from workspace `ws`'s bucket of `kind` in `entry`, if a limit applies to it.
    async fn draw(
        &self,
        ws: &WorkspaceId,
        entry: &rate_limit::Entry,
        kind: &LimiterType,
        draw: Draw,
    ) -> Result<Outcome, StoreError> {
        let unlimited = Outcome::Admitted { remaining: u64::MAX, reset_at: 0 };
        if !entry.limiters.contains(kind) {
            return Ok(unlimited);
        }
        match self.limiter.limit(&*self.store, ws, &entry.id, kind).await? {
            Some(limit) => self.store.take_rate_limit(ws, &entry.id, kind, limit, draw).await,
            None => Ok(unlimited),
        }
    }
}

/// Counts a Managed Agents request by `credential` in workspace `ws` against its bucket, once
/// per request: `Ok` to go on, or the `429` to answer. Uncounted callers pass untouched.
pub(crate) async fn count(
    parts: &Parts,
    state: &AppState,
    credential: &Credential,
    ws: &WorkspaceId,
) -> Result<(), ApiError> {
    if !rate_limit::counted(rate_limit::caller_of(credential)) {
        return Ok(());
    }
    let slot = parts.extensions.get::<crate::request::ServedIn>();
    if slot.is_some_and(|s| s.counted().is_some()) {
        return Ok(());
    }
    let limiter = &state.rate_limiter;
    let Some(limit) = limiter.limit(&*state.store, ws, MANAGED_AGENTS_ENTRY_ID, &REQUESTS).await? else {
        return Ok(());
    };
    let outcome = state.store.take_rate_limit(ws, MANAGED_AGENTS_ENTRY_ID, &REQUESTS, limit, Draw::One).await?;
    let counted = match outcome {
        Outcome::Admitted { remaining, reset_at } => Counted { limit, remaining, reset_at },
        Outcome::Limited { retry_after_secs } => {
            let now = chrono::Utc::now().timestamp_micros();
            Counted { limit, remaining: 0, reset_at: now + retry_after_secs as i64 * 1_000_000 }
        }
    };
    if let Some(slot) = slot {
        slot.set_counted(counted);
    }
    match outcome {
        Outcome::Admitted { .. } => Ok(()),
        Outcome::Limited { retry_after_secs } => Err(ApiError::rate_limited(
            rate_limit::limited_message(ws, &REQUESTS, limit, retry_after_secs),
            Duration::from_secs(retry_after_secs),
        )),
    }
}

/// Adds the `anthropic-ratelimit-requests-*` headers of a counted request to its answer.
pub(crate) fn add_headers(response: &mut Response, counted: Counted) {
    let headers = response.headers_mut();
    headers.insert("anthropic-ratelimit-requests-limit", HeaderValue::from(counted.limit));
    headers.insert("anthropic-ratelimit-requests-remaining", HeaderValue::from(counted.remaining));
    // Whole seconds, rounded up: a client that waits until the reset never comes back early.
    let secs = counted.reset_at.div_euclid(1_000_000) + i64::from(counted.reset_at.rem_euclid(1_000_000) > 0);
    let reset = chrono::DateTime::from_timestamp(secs, 0).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    if let Some(value) = reset.and_then(|r| HeaderValue::from_str(&r).ok()) {
        headers.insert("anthropic-ratelimit-requests-reset", value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_carry_the_limit_the_remainder_and_an_rfc_3339_reset() {
        let mut response = Response::new(axum::body::Body::empty());
        // 2026-12-04T00:00:00.5Z: the reset rounds up to whole seconds.
        add_headers(&mut response, Counted { limit: 60, remaining: 59, reset_at: 1_796_342_400_500_000 });
        let h = |name: &str| response.headers().get(name).unwrap().to_str().unwrap().to_owned();
        assert_eq!(h("anthropic-ratelimit-requests-limit"), "60");
        assert_eq!(h("anthropic-ratelimit-requests-remaining"), "59");
        assert_eq!(h("anthropic-ratelimit-requests-reset"), "2026-12-04T00:00:01Z");
    }

    #[tokio::test]
    async fn the_lower_of_the_workspace_and_organization_values_applies_per_entry_and_limiter() {
        use mnemo_store_tests::StoreFactory;
        let store = mnemo_store_tests::Sqlite.open(mnemo_store::Limits::default()).await;
        let ws = store.default_workspace().await.unwrap();
        let model = "ratelimit_model_x";
        let org: rate_limit::OrgLimits =
            [((MANAGED_AGENTS_ENTRY_ID.to_owned(), REQUESTS), 600), ((model.to_owned(), REQUESTS), 5)].into();
        let limiter = RateLimiter::new(&org, false);
        let limit = async |entry: &str, kind: &LimiterType| limiter.limit(&*store, &ws, entry, kind).await.unwrap();
        assert_eq!(limit(MANAGED_AGENTS_ENTRY_ID, &REQUESTS).await, Some(600));
        assert_eq!(limit(model, &REQUESTS).await, Some(5));
        assert_eq!(limit(model, &LimiterType::OutputTokensPerMinute).await, None, "no value, no limit");
        let entries =
            rate_limit::catalogue(&[rate_limit::ModelFamily { display_name: "X".into(), models: vec!["x".into()] }]);
        let body = serde_json::from_value(serde_json::json!({"limits": [{"type": "requests_per_minute", "value": 2}]}));
        store.update_workspace_rate_limits(&ws, entries[1].clone(), body.unwrap()).await.unwrap();
        assert_eq!(limit(model, &REQUESTS).await, Some(5), "remembered until this process is told");
        limiter.forget(&ws);
        assert_eq!(limit(model, &REQUESTS).await, Some(2), "the workspace's lower value");
        assert_eq!(limit(MANAGED_AGENTS_ENTRY_ID, &REQUESTS).await, Some(600), "another entry keeps the org's");
        assert_eq!(RateLimiter::new(&org, true).remember_for, Some(SHARED_OVERRIDES));
    }
}
