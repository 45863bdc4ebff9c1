//! The worker's endpoints: the environment's work queue and a session's events (the session
//! itself is read through [`crate::WorkerSession`]).
//!
//! Everything here takes the worker's own credentials (an environment key for poll and ack,
//! the item's sessions token for the rest); none of it needs an API key.

use std::time::Duration;

use futures::{Stream, StreamExt};
use mnemo_api::{EnvironmentId, StopWork, Work, WorkHeartbeat, WorkId};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sse::SseParser;
use crate::{Client, ClientError, Result, decode, success};

pub use mnemo_api::NO_HEARTBEAT;

/// A page of session events, oldest first.
#[derive(Debug, Clone, Deserialize)]
pub struct EventPage {
    pub data: Vec<Value>,
    #[serde(default)]
    pub next_page: Option<String>,
}

#[derive(Serialize)]
struct PollQuery {
    block_ms: u64,
    reclaim_older_than_ms: Option<u64>,
}

#[derive(Serialize)]
struct HeartbeatQuery<'a> {
    expected_last_heartbeat: &'a str,
    desired_ttl_seconds: Option<u64>,
}

#[derive(Serialize)]
struct EventsQuery<'a> {
    limit: u32,
    page: Option<&'a str>,
}

impl Client {
    /// Long-polls the queue for up to `block_ms`; `None` when nothing was waiting.
    pub async fn poll_work(
        &self,
        environment: &EnvironmentId,
        worker_id: &str,
        block_ms: u64,
        reclaim_older_than_ms: Option<u64>,
    ) -> Result<Option<Work>> {
        let path = format!("/v1/environments/{environment}/work/poll");
        let query = PollQuery { block_ms, reclaim_older_than_ms };
        self.send(|| self.request(Method::GET, &path).query(&query).header("anthropic-worker-id", worker_id)).await
    }

    /// Acknowledges a polled item: it is ours now.
    pub async fn ack_work(&self, environment: &EnvironmentId, work: &WorkId) -> Result<Work> {
        self.send(|| self.request(Method::POST, &format!("/v1/environments/{environment}/work/{work}/ack"))).await
    }

    /// One item as it stands (its state, its latest heartbeat).
    pub async fn get_work(&self, environment: &EnvironmentId, work: &WorkId) -> Result<Work> {
        self.send(|| self.request(Method::GET, &format!("/v1/environments/{environment}/work/{work}"))).await
    }

    /// Extends the lease. Not retried here: the caller owns the cadence and bounds each call
    /// with `timeout`. A `412` carries the lease as it stands in the error's `current_state`.
    pub async fn heartbeat_work(
        &self,
        environment: &EnvironmentId,
        work: &WorkId,
        expected_last_heartbeat: &str,
        timeout: Duration,
    ) -> Result<WorkHeartbeat> {
        let path = format!("/v1/environments/{environment}/work/{work}/heartbeat");
        let query = HeartbeatQuery { expected_last_heartbeat, desired_ttl_seconds: None };
        let resp = self.request(Method::POST, &path).query(&query).timeout(timeout).send().await;
        decode(resp.map_err(ClientError::Transport)?).await
    }

    /// Stops an item; `force` ends it at once, otherwise it goes through `stopping`.
    pub async fn stop_work(&self, environment: &EnvironmentId, work: &WorkId, force: bool) -> Result<Work> {
        let body = StopWork { force: force.then_some(true) };
        self.send(|| {
            self.request(Method::POST, &format!("/v1/environments/{environment}/work/{work}/stop")).json(&body)
        })
        .await
    }

    /// One page of a session's events, oldest first.
    pub async fn list_events(&self, session: &str, limit: u32, page: Option<&str>) -> Result<EventPage> {
        let path = format!("/v1/sessions/{session}/events");
        let query = EventsQuery { limit, page };
        self.send(|| self.request(Method::GET, &path).query(&query)).await
    }

    /// Appends events (`{"events": [...]}`); answers the recorded events. Retries follow the
    /// client's policy; callers add their own window on top.
    pub async fn send_events(&self, session: &str, events: &[Value]) -> Result<Value> {
        let path = format!("/v1/sessions/{session}/events");
        let body = serde_json::json!({ "events": events });
        self.send(|| self.request(Method::POST, &path).json(&body)).await
    }

    /// Opens the session's live event stream (server-sent events). Each item is one event's
    /// JSON; `ping`s are skipped. The stream ends when the server closes it.
    pub async fn stream_events(&self, session: &str) -> Result<impl Stream<Item = Result<Value>> + Send + 'static> {
        let path = format!("/v1/sessions/{session}/events/stream");
        let resp = self
            .request(Method::GET, &path)
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(24 * 3600))
            .send()
            .await
            .map_err(ClientError::Transport)?;
        let bytes = success(resp).await?.bytes_stream();
        Ok(futures::stream::unfold((bytes, SseParser::default()), |(mut bytes, mut parser)| async move {
            loop {
                if parser.is_refused() {
                    // The stream was refused (an oversized message): it ends here.
                    return None;
                }
                if let Some(message) = parser.next_message() {
                    match message {
                        Ok(Some(event)) => return Some((Ok(event), (bytes, parser))),
                        Ok(None) => continue,
                        Err(e) => return Some((Err(e), (bytes, parser))),
                    }
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => parser.push(&chunk),
                    Some(Err(e)) => return Some((Err(ClientError::Transport(e)), (bytes, parser))),
                    None => return None,
                }
            }
        }))
    }
}
