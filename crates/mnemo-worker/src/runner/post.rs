//! Running one routed call and posting its result, retrying within the lease's TTL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mnemo_api::{Backoff, Jitter};
use mnemo_client::Client;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::routing::{Call, Shared};
use super::{Observed, RunnerOptions};
use crate::tools::{TOOL_CALL_TIMEOUT, ToolOutput, Toolset};

/// Result-send retry window when no lease TTL is known.
const DEFAULT_SEND_WINDOW: Duration = Duration::from_secs(300);
/// Pauses between result-send attempts: `uniform(d/2, d)` with `d = min(2^attempt, 30)` seconds
/// (each cut to what is left of the window).
const SEND_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30)).with_jitter(Jitter::Shave(0.5));

/// Runs one call (unless it was answered or its thread ended meanwhile) and posts its result.
pub(super) async fn execute(
    client: &Client,
    session_id: &str,
    tools: &mut Toolset,
    opts: &RunnerOptions,
    shared: &Shared,
    call: Call,
) -> Observed {
    let skip = shared.lock().settled(&call);
    let mut observed = Observed { tool_use_id: call.id.clone(), name: call.name.clone(), ..Default::default() };
    if skip {
        shared.done(&call.id, false);
        return observed;
    }
    let started = Instant::now();
    let mut outcome = "ok";
    let output = match tokio::time::timeout(TOOL_CALL_TIMEOUT, tools.call(&call.name, call.input.clone())).await {
        Ok(out) => out,
        Err(_) => {
            outcome = "timeout";
            // The shell may be mid-command: start the next call on a fresh one.
            tools.close().await;
            ToolOutput::error(format!("tool '{}' timed out", call.name))
        }
    };
    tracing::debug!(tool_use_id = %call.id, tool = %call.name, is_error = output.is_error, elapsed_ms = started.elapsed().as_millis() as u64, "tool call ran");
    observed.is_error = output.is_error;
    if output.is_error && outcome == "ok" {
        outcome = "error";
    }
    // Labelled by the tool's name only for the built-in tools this runner owns.
    let tool = crate::tools::metric_name(&call.name);
    metrics::counter!("mnemo_tool_calls_total", "tool" => tool, "outcome" => outcome).increment(1);
    metrics::histogram!("mnemo_tool_call_duration_seconds", "tool" => tool).record(started.elapsed().as_secs_f64());
    observed.wrote = output.wrote.clone();
    let thread_ended = shared.lock().thread_ended(&call);
    if !thread_ended {
        let result = json!({
            "type": "user.tool_result",
            "tool_use_id": call.id,
            "is_error": output.is_error,
            "content": output.content,
        });
        observed.posted = post_result(client, session_id, &result, &opts.ttl_seconds).await;
    }
    shared.done(&call.id, observed.posted);
    observed
}

/// Posts a result, retrying transient failures within the lease's TTL (300 s when unknown).
async fn post_result(client: &Client, session_id: &str, result: &Value, ttl: &AtomicU64) -> bool {
    let started = Instant::now();
    let mut attempt: u32 = 0;
    loop {
        match client.send_events(session_id, std::slice::from_ref(result)).await {
            Ok(_) => return true,
            Err(e) if e.is_permanent() => {
                tracing::warn!(tool_use_id = ?result.get("tool_use_id"), "the tool result was refused: {e}");
                return false;
            }
            Err(e) => {
                let window = match ttl.load(Ordering::Relaxed) {
                    0 => DEFAULT_SEND_WINDOW,
                    secs => Duration::from_secs(secs),
                };
                let left = window.saturating_sub(started.elapsed());
                if left.is_zero() {
                    tracing::warn!(tool_use_id = ?result.get("tool_use_id"), "giving up sending the tool result: {e}");
                    return false;
                }
                let sleep = SEND_BACKOFF.delay(attempt).min(left);
                attempt += 1;
                tracing::warn!(tool_use_id = ?result.get("tool_use_id"), "sending the tool result failed, retrying in {sleep:?}: {e}");
                tokio::time::sleep(sleep).await;
            }
        }
    }
}
