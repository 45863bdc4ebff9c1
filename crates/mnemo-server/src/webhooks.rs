//! Webhook delivery: a background task claims due deliveries from the store's outbox, POSTs each
//! event signed the Standard Webhooks way (what the reference SDK's `webhooks.unwrap`
//! verifies), and records what the endpoint answered; [`mnemo_store::rules::webhook`] decides
//! whether that delivered it, when to try again, and when to give up.
//!
//! Every replica sharing a database may run one: a claim hides a delivery from every other
//! claimer for the attempt's lease, so an attempt is never made twice at once. An attempt whose
//! sender died (a crash, a restart mid-send) is made again once its lease ends: delivery is at
//! least once, and receivers deduplicate by the event's id (`webhook-id`), the same on every
//! attempt.
//!
//! When nothing is due the sender looks again after `poll_interval` — on a database only this
//! process writes (SQLite), only once this process wrote something since its last look
//! (`maintenance::WRITES`: a delivery is only ever queued by a write, and an attempt's
//! outcome is one), the earliest pending delivery falls due as stored
//! ([`mnemo_store::Operations::next_webhook_attempt_in`]: a retry this process scheduled, one a
//! previous process scheduled before a restart, a claim whose lease runs out), or [`IDLE_LOOK`]
//! has passed. An idle server used to spend most of its CPU on a look at the outbox every second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use mnemo_api::{Backoff, WebhookEvent, WebhookEventData, rfc3339_micros, webhook_secret_key};
use mnemo_store::rules::webhook::{Answer, DeliveryPolicy, Next, after_attempt};
use mnemo_store::{ClaimedDelivery, Store, WebhookAttempt};
use rand::Rng;
use tokio::sync::Semaphore;

use crate::outbound::WebhookTargets;

/// The header names of a signed delivery (Standard Webhooks).
pub mod headers {
    pub const ID: &str = "webhook-id";
    pub const TIMESTAMP: &str = "webhook-timestamp";
    pub const SIGNATURE: &str = "webhook-signature";
}

/// How `mnemo serve` delivers webhooks.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Attempts, delays and jitter.
    pub policy: DeliveryPolicy,
    /// How long one attempt may take (connecting, sending, and the endpoint's answer).
    pub timeout: Duration,
    /// How often the outbox is looked at when nothing is due.
    pub poll_interval: Duration,
    /// Most attempts under way at once in this process.
    pub concurrency: usize,
    /// How long finished deliveries (delivered or failed) stay listed.
    pub retention: Duration,
    /// Which addresses deliveries may connect to (public ones only by default).
    pub targets: WebhookTargets,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            policy: DeliveryPolicy::default(),
            timeout: Duration::from_secs(15),
            poll_interval: Duration::from_secs(1),
            concurrency: 8,
            retention: Duration::from_secs(7 * 86_400),
            targets: WebhookTargets::public_only(),
        }
    }
}

/// On a database only this process writes, the longest an idle sender goes without looking at
/// the outbox. The store tells it when the next pending delivery is due and this process's
/// writes wake it, so this is only the safety net for what neither covers: the store's clock
/// (wall time) moving against the sender's timer (monotonic), and a write to the database by
/// another program. One look a minute is next to nothing at rest.
pub const IDLE_LOOK: Duration = Duration::from_secs(60);

/// After a look that found nothing more to claim (begun when
/// [`WRITES`](crate::maintenance::WRITES) stood at `seen`), waits until a look is worth it: a
/// write since, the earliest pending delivery due as the store has it, or [`IDLE_LOOK`]. A store
/// that cannot say when returns at once (the caller looks again after its poll interval).
async fn idle(store: &dyn Store, seen: u64) {
    let wait = match store.next_webhook_attempt_in().await {
        Ok(due) => due.map_or(IDLE_LOOK, |due| due.min(IDLE_LOOK)),
        Err(e) => {
            tracing::warn!(error = %e.chain(), "could not read when the next webhook attempt is due");
            return;
        }
    };
    if wait.is_zero() {
        return;
    }
    tokio::select! {
        () = crate::maintenance::WRITES.since(seen) => {}
        () = tokio::time::sleep(wait) => {}
    }
}

impl WebhookConfig {
    /// How long a claim hides a delivery: the attempt's timeout and a margin, so a slow attempt
    /// is never made again while it still runs.
    fn lease(&self) -> Duration {
        self.timeout + Duration::from_secs(30)
    }
}

/// The `webhook-signature` of `payload` sent as `id` at `timestamp` (seconds since the epoch):
/// `v1,` and the base64 of the HMAC-SHA256 of `{id}.{timestamp}.{payload}`, keyed by the bytes
/// the `whsec_…` secret stands for. `None` for a secret that is not base64 (never one mnemo made).
pub fn sign(secret: &str, id: &str, timestamp: i64, payload: &str) -> Option<String> {
    let key = webhook_secret_key(secret)?;
    let mut mac = hmac::Hmac::<sha2_next::Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(payload.as_bytes());
    Some(format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())))
}

/// The payload of a claimed delivery: the same bytes on every attempt.
pub(crate) fn payload(d: &ClaimedDelivery) -> String {
    let event = WebhookEvent {
        id: d.event.clone(),
        created_at: rfc3339_micros(d.created_at.timestamp_micros()),
        data: WebhookEventData {
            kind: d.event_type,
            id: d.resource_id.clone(),
            organization_id: d.organization_id.clone(),
            workspace_id: d.workspace_id.to_string(),
        },
    };
    serde_json::to_string(&event).expect("an event serialises")
}

/// Delivers webhooks until the task is dropped: claims what is due (as many as
/// `config.concurrency` attempts at a time), sends each in its own task, and every hour prunes
/// deliveries finished longer ago than `config.retention`. Store failures are logged and
/// retried on the next round.
pub async fn deliver_webhooks(store: Arc<dyn Store>, config: WebhookConfig) {
    let targets = Arc::new(config.targets.clone());
    let http = match reqwest::Client::builder()
        .timeout(config.timeout)
        .connect_timeout(config.timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::none())
        // Names resolve through the target policy, so only an allowed address is ever
        // connected to; no proxy, whose own resolution would escape that judgement.
        .dns_resolver(targets.resolver())
        .no_proxy()
        .user_agent(concat!("mnemo-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook HTTP client; no webhooks will be sent");
            return;
        }
    };
    let config = Arc::new(config);
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut pruned = Instant::now();
    // Another process may queue deliveries (replicas sharing PostgreSQL): look on every interval.
    let alone = store.signals().is_none();
    loop {
        if pruned.elapsed() >= Duration::from_secs(3600) {
            pruned = Instant::now();
            match store.prune_webhook_deliveries(config.retention).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deliveries = n, "pruned finished webhook deliveries"),
                Err(e) => tracing::warn!(error = %e.chain(), "could not prune webhook deliveries"),
            }
        }
        // Wait for a free slot, then claim as many deliveries as there are free slots.
        let first = Arc::clone(&slots).acquire_owned().await.expect("the semaphore is never closed");
        let free = u32::try_from(slots.available_permits() + 1).unwrap_or(u32::MAX);
        // Read before the look: a write committed after it counts as new.
        let seen = crate::maintenance::WRITES.seen();
        let claimed = match store.claim_webhook_deliveries(free, config.lease()).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e.chain(), "could not claim webhook deliveries");
                Vec::new()
            }
        };
        let full = claimed.len() as u32 == free;
        let mut first = Some(first);
        for delivery in claimed {
            let permit = match first.take() {
                Some(p) => p,
                None => Arc::clone(&slots).acquire_owned().await.expect("the semaphore is never closed"),
            };
            let (store, http, config) = (Arc::clone(&store), http.clone(), Arc::clone(&config));
            tokio::spawn(async move {
                attempt(&*store, &http, &config, delivery).await;
                drop(permit);
            });
        }
        drop(first);
        if !full {
            tokio::time::sleep(config.poll_interval).await;
            if alone {
                idle(&*store, seen).await;
            }
        }
    }
}

/// Makes one attempt of a claimed delivery and records its outcome.
async fn attempt(store: &dyn Store, http: &reqwest::Client, config: &WebhookConfig, d: ClaimedDelivery) {
    let body = payload(&d);
    let timestamp = chrono::Utc::now().timestamp();
    // During a rotation both secrets sign (Standard Webhooks: space-separated signatures, any
    // one of which verifies), so a receiver holding either accepts the delivery.
    let signed = std::iter::once(&d.secret)
        .chain(d.previous_secret.as_ref())
        .map(|secret| sign(secret.expose(), d.event.as_str(), timestamp, &body))
        .collect::<Option<Vec<String>>>();
    let Some(signature) = signed.map(|all| all.join(" ")) else {
        tracing::error!(webhook_endpoint.id = %d.endpoint, "the endpoint's signing secret is not base64; failing its delivery");
        record(store, &d, None, Some("the endpoint's signing secret is malformed".into()), Next::Failed).await;
        return;
    };
    let started = Instant::now();
    // The resolver judges names; an IP literal (whatever its spelling, the URL parser made it
    // dotted) is connected to without resolving, so it is judged here.
    let url = match reqwest::Url::parse(&d.url) {
        Ok(url) => url,
        Err(_) => {
            tracing::error!(webhook_endpoint.id = %d.endpoint, "the endpoint's url does not parse; failing its delivery");
            record(store, &d, None, Some("the endpoint's url is malformed".into()), Next::Failed).await;
            return;
        }
    };
    if let Err(refused) = config.targets.check_url(&url) {
        tracing::warn!(
            webhook_endpoint.id = %d.endpoint, reason = %refused,
            "webhook endpoint refused: not a public address (see --webhook-allow-private, --webhook-allow-hosts)"
        );
        let next = after_attempt(Answer::NoAnswer, d.attempt, &config.policy, rand::rng().random::<f64>());
        record(store, &d, None, Some(COARSE_ERROR.into()), next).await;
        return;
    }
    let sent = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(headers::ID, d.event.as_str())
        .header(headers::TIMESTAMP, timestamp.to_string())
        .header(headers::SIGNATURE, signature)
        .body(body)
        .send()
        .await;
    let (answer, error) = match sent {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (Answer::Status(status), (!resp.status().is_success()).then(|| format!("the endpoint answered {status}")))
        }
        Err(e) => (Answer::NoAnswer, Some(describe(&e, config.timeout, config.targets.allows_private()))),
    };
    let next = after_attempt(answer, d.attempt, &config.policy, rand::rng().random::<f64>());
    let outcome = match next {
        Next::Delivered => "delivered",
        Next::RetryIn(_) => "retry",
        Next::Failed => "failed",
    };
    metrics::counter!("mnemo_webhook_attempts_total", "outcome" => outcome).increment(1);
    metrics::histogram!("mnemo_webhook_attempt_duration_seconds").record(started.elapsed().as_secs_f64());
    let status = match answer {
        Answer::Status(s) => Some(s),
        Answer::NoAnswer => None,
    };
    match next {
        Next::Delivered => tracing::debug!(
            webhook_delivery.id = %d.id, webhook_endpoint.id = %d.endpoint, event.r#type = %d.event_type,
            attempt = d.attempt, status, "delivered webhook"
        ),
        Next::RetryIn(delay) => tracing::info!(
            webhook_delivery.id = %d.id, webhook_endpoint.id = %d.endpoint, event.r#type = %d.event_type,
            attempt = d.attempt, status, error = error.as_deref().unwrap_or(""), retry_in = ?delay,
            "webhook attempt failed; will retry"
        ),
        Next::Failed => tracing::warn!(
            webhook_delivery.id = %d.id, webhook_endpoint.id = %d.endpoint, event.r#type = %d.event_type,
            attempt = d.attempt, status, error = error.as_deref().unwrap_or(""),
            "webhook delivery failed after its last attempt"
        ),
    }
    record(store, &d, status, error, next).await;
}

/// The pauses between tries at recording an attempt's outcome: 200 ms, then 400 ms.
const RECORD_RETRY: Backoff = Backoff::linear(Duration::from_millis(200), Duration::from_millis(400)).with_retries(2);

/// Records an attempt's outcome (a few tries: a transient store failure would otherwise make
/// the attempt again after its lease, a duplicate).
async fn record(store: &dyn Store, d: &ClaimedDelivery, status_code: Option<u16>, error: Option<String>, next: Next) {
    let report = WebhookAttempt { delivery: d.id.clone(), attempt: d.attempt, status_code, error, next };
    write_outcome(store, d, report).await;
    // Wakes an idle sender, which then learns from the store when the retry is due.
    crate::maintenance::WRITES.made();
}

/// Writes an attempt's outcome, with a few tries.
async fn write_outcome(store: &dyn Store, d: &ClaimedDelivery, report: WebhookAttempt) {
    for round in 0.. {
        match store.finish_webhook_attempt(report.clone()).await {
            Ok(true) => return,
            Ok(false) => {
                tracing::debug!(webhook_delivery.id = %d.id, "the delivery moved on (or is gone); outcome not recorded");
                return;
            }
            Err(e) => match RECORD_RETRY.retry(round).filter(|_| e.is_retryable()) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => {
                    tracing::warn!(webhook_delivery.id = %d.id, error = %e.chain(), "could not record a webhook attempt; it will be made again");
                    return;
                }
            },
        }
    }
}

/// What a delivery records when it got no answer and private targets are not allowed: one
/// text for a refused address, a closed port, a filtered one or a failed handshake, so the
/// deliveries API cannot be used to map what the server can reach.
pub(crate) const COARSE_ERROR: &str = "connection failed";

/// Why a request got no answer, without its URL (which may carry a token in its query). Only
/// with `detailed` (private targets allowed: the operator's own network) does it say more than
/// [`COARSE_ERROR`] about a connection that was never made.
fn describe(e: &reqwest::Error, timeout: Duration, detailed: bool) -> String {
    if !detailed {
        if e.is_connect() {
            tracing::debug!(error = %error_chain(e), "webhook connection failed");
            return COARSE_ERROR.into();
        }
        if e.is_timeout() {
            return format!("no answer within {}s", timeout.as_secs_f64());
        }
        return "the request failed".into();
    }
    if e.is_timeout() {
        return format!("no answer within {}s", timeout.as_secs_f64());
    }
    let out = if e.is_connect() { "could not connect" } else { "the request failed" };
    format!("{out}{}", error_chain(e))
}

/// The causes of `e`, each after `: ` (never its URL: reqwest's own text is not included).
fn error_chain(e: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_standard_webhooks_hmacs() {
        // The example of the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let payload = r#"{"test": 2432232314}"#;
        assert_eq!(
            sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, payload).unwrap(),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert_eq!(sign("whsec_!!!", "x", 1, "{}"), None);
    }
}
