//! One work item, from claim to stop (spec `worker-behaviour.md` §4).

use std::path::Path;

use mnemo_api::{Secret, Work, WorkSecret};
use mnemo_client::Client;
use mnemo_sync::TeardownSteps;
use tokio_util::sync::CancellationToken;

use crate::config::WorkerConfig;
use crate::lease::{Lease, LeaseEnd};
use crate::memory::{self, Memory, MemoryOptions};
use crate::runner::{self, RunEnd, RunnerOptions};
use crate::tools::{ToolContext, Toolset, sandbox, tool_env};
use crate::{WorkerError, skills};

/// The credential an item is served with: its sessions token when the secret carries one,
/// else the environment key.
#[derive(Debug, Clone)]
pub struct ItemCredential {
    token: Secret,
    /// Whether `token` is a sessions token (memory needs one).
    pub sessions_token: bool,
}

impl ItemCredential {
    /// Spec §2: decode the secret; fall back to the environment key.
    pub fn for_item(work: &Work, environment_key: Option<&str>) -> Result<Self, WorkerError> {
        if let Some(secret) = work.secret.as_ref().map(mnemo_api::Secret::expose) {
            match WorkSecret::decode(secret) {
                Some(s) => return Ok(Self { token: s.sessions_token, sessions_token: true }),
                None => {
                    tracing::warn!(work_id = %work.id, "the work item's secret carried no sessions token; using the environment key")
                }
            }
        }
        match environment_key.filter(|k| !k.is_empty()) {
            Some(key) => Ok(Self { token: key.into(), sessions_token: false }),
            None => Err(WorkerError::NoCredential { work_id: work.id.to_string() }),
        }
    }

    pub fn client(&self, base_url: &str) -> Result<Client, WorkerError> {
        Ok(Client::new(base_url, self.token.expose())?)
    }
}

/// Serves one claimed item to the end: heartbeat, session, memory, tools, teardown, stop.
/// `cancel` (a signal) ends the session run early; teardown and the stop still happen.
pub async fn handle_item(
    cfg: &WorkerConfig,
    environment_key: Option<&str>,
    work: &Work,
    cancel: &CancellationToken,
) -> Result<(), WorkerError> {
    let credential = ItemCredential::for_item(work, environment_key)?;
    let client = credential.client(&cfg.base_url)?;
    if work.data.kind != "session" {
        tracing::info!(work_id = %work.id, kind = %work.data.kind, "stopping a work item that is not a session");
        force_stop(&client, work).await;
        return Ok(());
    }
    let lease = Lease::start(client.clone(), work.environment_id.clone(), work.id.clone());
    let served = Serving { cfg, client: &client, credential: &credential, work, lease: &lease, cancel }.serve().await;
    let end = lease.finish(LeaseEnd::RunnerDone).await;
    let outcome = match (&served, end.is_lost()) {
        (_, true) => "lease_lost",
        (Ok(()), false) => "served",
        (Err(_), false) => "failed",
    };
    metrics::counter!("mnemo_worker_items_total", "outcome" => outcome).increment(1);
    if end.is_lost() {
        tracing::warn!(work_id = %work.id, session_id = %work.data.id, "lease lost; released work_id={} session_id={} without stopping it", work.id, work.data.id);
    } else {
        force_stop(&client, work).await;
    }
    served
}

/// Ends the item for good; a 409 (already stopped) is fine.
async fn force_stop(client: &Client, work: &Work) {
    match client.stop_work(&work.environment_id, &work.id, true).await {
        Ok(_) => tracing::info!(work_id = %work.id, "work item stopped"),
        Err(e) if e.is_conflict() => {}
        Err(e) => tracing::warn!(work_id = %work.id, "force-stop on exit failed: {e}"),
    }
}

/// What serving one item needs, borrowed for its duration.
struct Serving<'a> {
    cfg: &'a WorkerConfig,
    client: &'a Client,
    credential: &'a ItemCredential,
    work: &'a Work,
    lease: &'a Lease,
    cancel: &'a CancellationToken,
}

impl Serving<'_> {
    async fn serve(&self) -> Result<(), WorkerError> {
        let Self { cfg, client, credential, work, lease, cancel } = *self;
        let session_id = work.data.id.as_str();
        // Signals and the end of the lease both end the run.
        let stop = CancellationToken::new();
        let _stop_guard = stop.clone().drop_guard();
        {
            let (stop, cancel, ended) = (stop.clone(), cancel.clone(), lease.ended());
            tokio::spawn(async move {
                tokio::select! {
                    () = cancel.cancelled() => stop.cancel(),
                    () = ended.cancelled() => stop.cancel(),
                    () = stop.cancelled() => {}
                }
            });
        }
        let session = tokio::select! {
            s = get_session_retrying(client, session_id) => s.map_err(|source| WorkerError::Session { session_id: session_id.to_owned(), source: Box::new(source) })?,
            () = stop.cancelled() => return Ok(()),
        };
        if session.is_terminated() {
            tracing::info!(work_id = %work.id, session_id, "skipping the work item of a terminated session");
            return Ok(());
        }
        let mounts = memory::plan(&session, &cfg.workdir, &cfg.memory_mount_root)?;
        let memory_enabled = credential.sessions_token && cfg.memory_sync_interval.is_some();
        if !memory_enabled && cfg.memory_sync_interval.is_some() && !mounts.is_empty() {
            return Err(WorkerError::NoSessionsToken {
                work_id: work.id.to_string(),
                session_id: session_id.to_owned(),
            });
        }
        // The agent's skills land in <workdir>/skills/ before memory; they go again at the end.
        let skill_dirs = skills::download(client, &session.agent.skills, &cfg.workdir).await;
        let served = self.run_tools(&stop, &mounts).await;
        skills::remove(&skill_dirs).await;
        served
    }

    /// Memory, tools, the session run and its teardown.
    async fn run_tools(&self, stop: &CancellationToken, mounts: &[memory::StoreMount]) -> Result<(), WorkerError> {
        let Self { cfg, client, credential, work, lease, cancel } = *self;
        let session_id = work.data.id.as_str();
        let memory_enabled = credential.sessions_token && cfg.memory_sync_interval.is_some();
        let sandbox = sandbox::detect();
        let mut memory = match (memory_enabled, cfg.memory_sync_interval) {
            (true, Some(interval)) if !mounts.is_empty() => {
                let opts = MemoryOptions {
                    interval,
                    deletions: cfg.memory_sync_deletions,
                    state_dir: cfg.state_dir.clone(),
                    sandbox,
                    tool_owner: cfg.tool_user.as_ref().map(|u| (u.uid, u.gid)),
                    live: cfg.memory_live,
                };
                // The download is not cut short by a signal: a half-written folder would be left
                // behind. A signal that arrived meanwhile skips the run instead.
                Some(Memory::mount(client, session_id, mounts, &opts).await?)
            }
            _ => None,
        };
        let mut ctx = ToolContext::new(&cfg.workdir);
        ctx.env = tool_env(&cfg.tool_env);
        ctx.tool_user.clone_from(&cfg.tool_user);
        ctx.max_file_bytes = cfg.max_file_bytes;
        ctx.max_file_bytes_explicit = cfg.max_file_bytes_explicit;
        ctx.sandbox = sandbox;
        if let Some(m) = &memory {
            (ctx.allowed_roots, ctx.read_only_roots) = m.roots();
        }
        let mut tools = Toolset::new(ctx);
        let opts = RunnerOptions { max_idle: cfg.max_idle, ttl_seconds: lease.ttl_handle() };
        let end = if stop.is_cancelled() {
            RunEnd::Cancelled
        } else {
            runner::run_session(client, session_id, &mut tools, &opts, stop, &mut MemoryBetween(memory.as_mut())).await
        };
        tracing::info!(work_id = %work.id, session_id, end = ?end, "session run ended");
        // A signal drains the session like a clean end (final sync included); a lease that ended
        // means the item may be someone else's now, so only the push-only flush runs.
        let drained = end == RunEnd::Cancelled && cancel.is_cancelled() && !lease.ended().is_cancelled();
        let clean = matches!(end, RunEnd::Idle | RunEnd::Terminated) || drained;
        tools.close().await;
        if let Some(m) = memory.take() {
            m.teardown(TeardownSteps { final_sync: clean, dispose: true }).await;
        }
        match end {
            RunEnd::Refused(e) => Err(WorkerError::Runner(e)),
            _ => Ok(()),
        }
    }
}

/// The session's memory between tool calls: the interval sync after a call, live work whenever
/// it is ready.
struct MemoryBetween<'a>(Option<&'a mut Memory>);

impl runner::Between for MemoryBetween<'_> {
    type Work = (usize, mnemo_sync::LiveWork);

    async fn after_call(&mut self, call: &runner::Observed) {
        if let Some(m) = self.0.as_deref_mut() {
            m.first_call_done();
            if let Some(path) = &call.wrote {
                m.wrote(path);
            }
            m.sync_if_due().await;
        }
    }

    async fn ready(&mut self) -> Self::Work {
        match self.0.as_deref_mut() {
            Some(m) => m.next_live().await,
            None => std::future::pending().await,
        }
    }

    async fn run(&mut self, work: Self::Work) {
        if let Some(m) = self.0.as_deref_mut() {
            m.run_live(work).await;
        }
    }
}

/// The work item `mnemo worker run` serves: what the poller handed over through the
/// environment.
pub fn synthesize_item(
    work_id: &str,
    environment_id: &str,
    session_id: &str,
    secret: Option<String>,
) -> Result<Work, WorkerError> {
    let bad = |what: &str, v: &str| WorkerError::Config(format!("{what} is not a valid id: {v:?}"));
    Ok(Work {
        id: work_id.parse().map_err(|_| bad("ANTHROPIC_WORK_ID", work_id))?,
        environment_id: environment_id.parse().map_err(|_| bad("ANTHROPIC_ENVIRONMENT_ID", environment_id))?,
        state: mnemo_api::WorkState::Starting,
        data: mnemo_api::WorkData { kind: "session".into(), id: session_id.to_owned() },
        secret: secret.map(mnemo_api::Secret::from),
        metadata: Default::default(),
        created_at: String::new(),
        acknowledged_at: None,
        started_at: None,
        latest_heartbeat_at: None,
        stop_requested_at: None,
        stopped_at: None,
    })
}

/// Reads a credential (`what`: "work secret", "environment key") from a file that neither its
/// group nor others may read or write (0600 or tighter), trimmed.
pub fn read_secret_file(path: &Path, what: &str) -> Result<String, WorkerError> {
    use std::os::unix::fs::PermissionsExt;
    let cannot =
        |e: std::io::Error| WorkerError::Config(format!("cannot read the {what} file {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(WorkerError::Config(format!(
            "the {what} file {} is readable or writable by its group or others (mode {:o}); chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        )));
    }
    let text = std::fs::read_to_string(path).map_err(cannot)?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(WorkerError::Config(format!("the {what} file {} is empty", path.display())));
    }
    Ok(secret.to_owned())
}

/// How many times the item's session is fetched before the item fails.
const SESSION_ATTEMPTS: u32 = 5;

/// Pauses between those fetches: 0.5 s doubling to 4 s, up to a quarter off.
const SESSION_RETRY: mnemo_api::Backoff =
    mnemo_api::Backoff::doubling(std::time::Duration::from_millis(500), std::time::Duration::from_secs(4))
        .with_jitter(mnemo_api::Jitter::Shave(0.25))
        .with_retries(SESSION_ATTEMPTS - 1);

/// The item's session, fetched again after a transient failure outlasting the client's own
/// retries (a `5xx` burst, a broken connection): found by the fault campaign, one such fault
/// used to fail the work item for good.
async fn get_session_retrying(
    client: &mnemo_client::Client,
    session_id: &str,
) -> Result<mnemo_client::WorkerSession, mnemo_client::ClientError> {
    let mut attempt = 0;
    loop {
        let e = match client.get_session(session_id).await {
            Err(e) if !e.is_permanent() => e,
            other => return other,
        };
        let Some(delay) = SESSION_RETRY.retry(attempt) else { return Err(e) };
        tracing::warn!(session_id, ?delay, "cannot fetch the session, retrying: {e}");
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(secret: Option<String>) -> Work {
        synthesize_item("work_abc", "env_abc", "sesn_abc", secret).unwrap()
    }

    #[test]
    fn the_sessions_token_wins_over_the_environment_key() {
        let secret = WorkSecret { sessions_token: "sk-ses-1".into() }.encode();
        let c = ItemCredential::for_item(&item(Some(secret)), Some("envkey")).unwrap();
        assert!(c.sessions_token);
        assert_eq!(c.token.expose(), "sk-ses-1");
    }

    #[test]
    fn a_bad_secret_falls_back_to_the_environment_key() {
        let c = ItemCredential::for_item(&item(Some("%%%".into())), Some("envkey")).unwrap();
        assert!(!c.sessions_token);
        assert_eq!(c.token.expose(), "envkey");
    }

    #[test]
    fn no_token_and_no_key_fails_naming_the_item() {
        let e = ItemCredential::for_item(&item(None), None).unwrap_err().to_string();
        assert!(e.contains("yielded no sessions token and no environment key") && e.contains("work_abc"), "{e}");
    }

    #[test]
    fn credentials_never_print() {
        let c = ItemCredential { token: "sk-ses-secret".into(), sessions_token: true };
        let printed = format!("{c:?}");
        assert!(!printed.contains("secret") && printed.contains("[redacted]"), "{printed}");
    }

    #[test]
    fn secret_files_must_be_private_and_non_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secret");
        std::fs::write(&p, "  abc\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_secret_file(&p, "work secret").unwrap(), "abc");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(read_secret_file(&p, "work secret").unwrap(), "abc");
        for mode in [0o644, 0o640, 0o620, 0o604, 0o660] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = read_secret_file(&p, "environment key").unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "the environment key file {} is readable or writable by its group or others (mode {mode:o}); chmod 600 it",
                    p.display()
                )
            );
        }
        std::fs::write(&p, "\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_secret_file(&p, "work secret").unwrap_err().to_string().contains("is empty"));
    }
}
