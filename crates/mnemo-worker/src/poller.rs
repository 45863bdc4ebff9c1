//! The poll loop: claim items one at a time and serve each to completion, in this process or
//! through an `--on-work` script.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use mnemo_api::{Backoff, EnvironmentId, Jitter, Work, WorkState};
use mnemo_client::Client;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use crate::WorkerError;
use crate::config::WorkerConfig;
use crate::item::handle_item;
use crate::lease::Lease;

/// The server's cap on a long poll.
const BLOCK_MS: u64 = 999;
/// How long a script gets after SIGTERM before it is killed.
const SCRIPT_GRACE: Duration = Duration::from_secs(30);
/// The bound of the graceful stop after a script exits.
const STOP_BOUND: Duration = Duration::from_secs(10);
/// The pause after an empty poll: `uniform(1, 3)` seconds.
const IDLE_PAUSE: Backoff = Backoff::constant(Duration::from_secs(1)).with_jitter(Jitter::Add(Duration::from_secs(2)));
/// The pause after a failed poll or ack: `min(60, 2^attempt) + uniform(0, 1)` seconds.
const FAILURE_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_secs(1), Duration::from_secs(60)).with_jitter(Jitter::Add(Duration::from_secs(1)));

/// How claimed items are served.
#[derive(Debug, Clone)]
pub enum Serve {
    /// In this process, with memory mounted.
    InProcess,
    /// By running this program once per item (the work item JSON on its stdin).
    Script(PathBuf),
}

/// Polls `environment` until `cancel`; a fatal poll error ends the loop with that error.
pub async fn run(
    cfg: &WorkerConfig,
    environment: &EnvironmentId,
    environment_key: &str,
    serve: &Serve,
    cancel: &CancellationToken,
) -> Result<(), WorkerError> {
    let client = Client::new(&cfg.base_url, environment_key)?;
    let mut poll_failures: u32 = 0;
    let mut ack_failures: u32 = 0;
    tracing::info!(environment_id = %environment, worker_id = %cfg.worker_id, "polling for work");
    while !cancel.is_cancelled() {
        let polled = tokio::select! {
            () = cancel.cancelled() => break,
            p = client.poll_work(environment, &cfg.worker_id, BLOCK_MS, None) => p,
        };
        let work = match polled {
            Ok(Some(work)) => {
                poll_failures = 0;
                work
            }
            Ok(None) => {
                sleep_or_cancel(IDLE_PAUSE.delay(0), cancel).await;
                continue;
            }
            Err(e) if e.is_permanent() => return Err(e.into()),
            Err(e) => {
                tracing::warn!("poll failed: {e}");
                sleep_or_cancel(FAILURE_BACKOFF.delay(poll_failures), cancel).await;
                poll_failures += 1;
                continue;
            }
        };
        tracing::info!(work_id = %work.id, kind = %work.data.kind, id = %work.data.id, "claimed a work item");
        match acknowledge(&client, environment, &work).await {
            Ok(_) => ack_failures = 0,
            Err(e) if e.is_permanent() => {
                tracing::warn!(work_id = %work.id, "ack refused; stopping the item: {e}");
                if let Err(e) = client.stop_work(environment, &work.id, true).await
                    && !e.is_conflict()
                {
                    tracing::warn!(work_id = %work.id, "force-stop failed: {e}");
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(work_id = %work.id, "ack failed: {e}");
                sleep_or_cancel(FAILURE_BACKOFF.delay(ack_failures), cancel).await;
                ack_failures += 1;
                continue;
            }
        }
        let outcome = match serve {
            Serve::InProcess => handle_item(cfg, Some(environment_key), &work, cancel).await,
            Serve::Script(script) => run_script(cfg, &client, environment_key, script, &work, cancel).await,
        };
        match outcome {
            Ok(()) => {}
            Err(WorkerError::ScriptNotRunnable(e)) => return Err(WorkerError::ScriptNotRunnable(e)),
            Err(e) => tracing::error!(work_id = %work.id, "work item failed work_id={} error={e}", work.id),
        }
    }
    Ok(())
}

/// Acknowledges a polled item. When the answer to an acknowledgement the server took is lost,
/// the client's retry is refused (`409`: the item is `starting` already); the item is then ours
/// if it is `starting` and nobody has heartbeat it yet. Were it someone else's after all (our
/// delivery lapsed and another poller acknowledged a new one), our sessions token died with our
/// delivery and the lease's first heartbeat decides: the loser gives the item up.
async fn acknowledge(
    client: &Client,
    environment: &EnvironmentId,
    work: &Work,
) -> Result<(), mnemo_client::ClientError> {
    let refused = match client.ack_work(environment, &work.id).await {
        Ok(_) => return Ok(()),
        Err(e) if e.is_conflict() => e,
        Err(e) => return Err(e),
    };
    // The environment key may list the queue (not fetch one item): look the item up there.
    let path = format!("/v1/environments/{environment}/work?limit=100");
    let listed = client.json(mnemo_client::Method::GET, &path, None).await;
    let now =
        listed.ok().and_then(|page| page["data"].as_array()?.iter().find(|w| w["id"] == work.id.as_str()).cloned());
    let ours = now.is_some_and(|w| w["state"] == WorkState::Starting.as_str() && w["latest_heartbeat_at"].is_null());
    if ours {
        tracing::info!(work_id = %work.id, "the answer to our acknowledgement was lost; the item is ours");
        Ok(())
    } else {
        Err(refused)
    }
}

async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        () = cancel.cancelled() => {}
    }
}

/// Runs `script` for one item and stops the item when it exits.
///
/// The lease must not lapse while a sandbox boots, but the worker inside the sandbox claims it
/// with its own first heartbeat (`NO_HEARTBEAT`), which would fail if the poller had
/// heartbeated first. So the poller watches: once the item shows a heartbeat, the worker inside
/// owns the lease; if none arrived within half the assumed TTL, nobody inside heartbeats and
/// the poller keeps the lease alive itself until the script exits.
async fn run_script(
    cfg: &WorkerConfig,
    client: &Client,
    environment_key: &str,
    script: &std::path::Path,
    work: &Work,
    cancel: &CancellationToken,
) -> Result<(), WorkerError> {
    if work.data.kind != "session" {
        tracing::info!(work_id = %work.id, kind = %work.data.kind, "not handing a non-session item to the script; stopping it");
        graceful_stop(client, work).await;
        return Ok(());
    }
    let mut child = tokio::process::Command::new(script)
        .env("ANTHROPIC_WORK_ID", work.id.as_str())
        .env("ANTHROPIC_ENVIRONMENT_ID", work.environment_id.as_str())
        .env("ANTHROPIC_SESSION_ID", &work.data.id)
        .env("ANTHROPIC_ENVIRONMENT_KEY", environment_key)
        .env("ANTHROPIC_BASE_URL", &cfg.base_url)
        .env_remove("ANTHROPIC_WORK_SECRET")
        .env_remove(crate::hardening::SEALED_CREDENTIALS_FD)
        .stdin(Stdio::piped())
        .stdout(std::io::stderr())
        .stderr(std::io::stderr())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| WorkerError::ScriptNotRunnable(format!("cannot run {}: {e}", script.display())))?;
    let item_json = serde_json::to_vec(work).expect("a work item serialises");
    if let Some(mut stdin) = child.stdin.take() {
        // A script that does not read its stdin is fine.
        let _ = stdin.write_all(&item_json).await;
        let _ = stdin.shutdown().await;
    }
    let keeper = tokio::spawn(keep_alive(client.clone(), work.clone(), cfg.script_lease_wait));
    let status = tokio::select! {
        status = child.wait() => status,
        () = cancel.cancelled() => {
            if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            match tokio::time::timeout(SCRIPT_GRACE, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    tracing::warn!(work_id = %work.id, "the script did not exit within {}s of SIGTERM; killing it", SCRIPT_GRACE.as_secs());
                    let _ = child.kill().await;
                    child.wait().await
                }
            }
        }
    };
    keeper.abort();
    let _ = keeper.await;
    match status {
        Ok(s) if s.success() => tracing::info!(work_id = %work.id, "the script finished"),
        Ok(s) => tracing::warn!(work_id = %work.id, "the script exited with {s}"),
        Err(e) => tracing::warn!(work_id = %work.id, "cannot wait for the script: {e}"),
    }
    graceful_stop(client, work).await;
    Ok(())
}

/// Watches the item and heartbeats it only if nobody inside the sandbox does.
async fn keep_alive(client: Client, work: Work, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    let every = (wait / 4).clamp(Duration::from_millis(100), Duration::from_secs(2));
    loop {
        tokio::time::sleep(every).await;
        match client.get_work(&work.environment_id, &work.id).await {
            Ok(item) if item.latest_heartbeat_at.is_some() || item.state == WorkState::Stopped => return,
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
    }
    tracing::info!(work_id = %work.id, "nothing inside the sandbox heartbeats the item; keeping its lease alive while the script runs");
    let lease = Lease::start(client, work.environment_id.clone(), work.id.clone());
    lease.ended().cancelled().await;
}

async fn graceful_stop(client: &Client, work: &Work) {
    match tokio::time::timeout(STOP_BOUND, client.stop_work(&work.environment_id, &work.id, false)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) if e.is_conflict() => {}
        Ok(Err(e)) => tracing::warn!(work_id = %work.id, "stopping the item failed: {e}"),
        Err(_) => tracing::warn!(work_id = %work.id, "stopping the item timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_backoff_is_capped() {
        for attempt in 0..20 {
            let d = FAILURE_BACKOFF.delay(attempt).as_secs_f64();
            let base = 2f64.powi(attempt.min(6) as i32).min(60.0);
            assert!(d >= base && d < base + 1.0, "attempt {attempt}: {d}");
        }
    }
}
