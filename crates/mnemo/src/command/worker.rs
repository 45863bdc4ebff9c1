//! `mnemo worker poll | run`: serve an environment's sessions on this host.
//!
//! Flags match `ant beta:worker` so operators can switch without relearning; each falls back to
//! its `ANTHROPIC_*` variable. Credentials reach this module sealed (see `crate::credentials`):
//! never from the process's environment block or command line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use mnemo_api::EnvironmentId;
use mnemo_worker::WorkerConfig;
use mnemo_worker::hardening;
use mnemo_worker::item::{handle_item, read_secret_file, synthesize_item};
use mnemo_worker::poller::{self, Serve};
use mnemo_worker::tools::sandbox::{self, ToolUser};
use tokio_util::sync::CancellationToken;

use crate::credentials::{self, Credential, Source};

use super::args::{Deletions, parse_interval};
use super::signals::Signals;

#[derive(Debug, Subcommand)]
pub(crate) enum Worker {
    /// Poll an environment's work queue and serve each session, one after another, until
    /// SIGINT/SIGTERM (which drain the session in flight: final sync, flush, cleanup, stop).
    Poll(Poll),
    /// Serve exactly one already-claimed work item, described by the environment variables an
    /// `--on-work` script receives (plus `ANTHROPIC_WORK_SECRET` or `ANTHROPIC_WORK_SECRET_FILE`).
    Run(Run),
}

/// What `poll` and `run` share.
#[derive(Debug, Args)]
struct Common {
    /// Working directory of the sessions' tools (relative paths resolve here).
    #[arg(long, env = "ANTHROPIC_WORKDIR", default_value = ".")]
    workdir: PathBuf,

    /// API base URL (`mnemo serve` or the hosted API).
    #[arg(long, env = "ANTHROPIC_BASE_URL", default_value = "https://api.anthropic.com")]
    base_url: String,

    /// Stop serving a session this long after its turn ended (`60s`, `5m`, or `none`).
    #[arg(long, env = "ANTHROPIC_MAX_IDLE", default_value = "60s", value_parser = parse_max_idle)]
    max_idle: MaxIdle,

    /// Minimum seconds between memory syncs (at least 5).
    #[arg(long, env = "ANTHROPIC_MEMORY_SYNC_INTERVAL", default_value = "15", value_parser = parse_interval)]
    memory_sync_interval: Duration,

    /// What syncs do with files deleted locally.
    #[arg(long, env = "ANTHROPIC_MEMORY_SYNC_DELETIONS", value_enum, default_value_t = Deletions::Enabled)]
    memory_sync_deletions: Deletions,

    /// Sync memory on the interval only: no change feed, no upload right after a local edit.
    /// Live sync is on by default where the server has a feed (`mnemo serve`) and off by itself
    /// where it has none (the hosted API).
    #[arg(long, env = "MNEMO_NO_LIVE")]
    no_live: bool,

    /// Do not mount memory stores (sessions run without them).
    #[arg(long, env = "ANTHROPIC_NO_MEMORY")]
    no_memory: bool,

    /// Serve Prometheus metrics (`GET /metrics`: syncs, tool calls, items) on this address (off
    /// by default).
    #[arg(long, value_name = "ADDR", env = "MNEMO_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,

    /// Where the worker records the folders it mounted, so a restarted worker can recover them.
    #[arg(long, env = "MNEMO_WORKER_STATE_DIR")]
    state_dir: Option<PathBuf>,

    /// The only folder under which a server's `mount_path` may land (the server's own
    /// `--memory-mount-root`); a session whose store asks for a path elsewhere fails.
    #[arg(long, value_name = "DIR", env = "MNEMO_MEMORY_MOUNT_ROOT", default_value = mnemo_api::DEFAULT_MEMORY_MOUNT_ROOT)]
    memory_mount_root: PathBuf,

    /// Run the agent's bash as this user (a name or a uid) instead of the worker's own: it can
    /// then neither read nor signal the worker even where namespaces cannot be made. Needs
    /// util-linux's setpriv and a worker running as root; the workdir must be writable by it.
    #[arg(long, value_name = "USER", env = "MNEMO_TOOL_USER")]
    tool_user: Option<String>,

    /// Pass this variable of the worker's environment on to the agent's bash (repeatable). Only
    /// PATH, HOME, LANG, LC_*, TERM, TZ and USER are passed otherwise.
    #[arg(long, value_name = "NAME", env = "MNEMO_TOOL_ENV", value_delimiter = ',')]
    tool_env: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
struct MaxIdle(Option<Duration>);

fn parse_max_idle(s: &str) -> Result<MaxIdle, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(MaxIdle(None));
    }
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a duration (try `60s`, `5m` or `none`)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s, m or h)")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("`{s}` is not a valid duration"));
    }
    Ok(MaxIdle(Some(Duration::from_secs_f64(secs))))
}

impl Common {
    fn config(&self) -> anyhow::Result<WorkerConfig> {
        let workdir = std::path::absolute(&self.workdir)
            .with_context(|| format!("resolve the workdir {}", self.workdir.display()))?;
        anyhow::ensure!(workdir.is_dir(), "the workdir {} is not a directory", workdir.display());
        let mut cfg = WorkerConfig::new(&self.base_url, workdir);
        cfg.max_idle = self.max_idle.0;
        cfg.memory_sync_interval = (!self.no_memory).then_some(self.memory_sync_interval);
        cfg.memory_sync_deletions = self.memory_sync_deletions.into();
        cfg.memory_live = !self.no_live;
        if let Some(dir) = &self.state_dir {
            cfg.state_dir = std::path::absolute(dir)?;
        }
        cfg.memory_mount_root.clone_from(&self.memory_mount_root);
        cfg.tool_env.clone_from(&self.tool_env);
        if let Some(user) = &self.tool_user {
            cfg.tool_user = Some(ToolUser::resolve(user).map_err(anyhow::Error::msg)?);
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// What a worker that runs tools itself checks and says at start: a tool user it cannot
    /// switch to is refused, and what the tool shell runs without is one warning.
    fn check_isolation(cfg: &WorkerConfig) -> anyhow::Result<()> {
        if cfg.tool_user.is_some() {
            anyhow::ensure!(
                sandbox::isolation().has_setpriv(),
                "--tool-user needs util-linux's setpriv, which is not installed or does not work here"
            );
        }
        sandbox::warn_at_start(cfg.tool_user.as_ref());
        Ok(())
    }
}

/// A credential from its sealed value (the environment or the flag, see `credentials`) or from
/// its file, which wins when both are given. A value from the command line is warned about.
fn credential(
    credential: Credential,
    clap_value: Option<mnemo_api::Secret>,
    file: Option<&Path>,
) -> anyhow::Result<Option<String>> {
    let what = match credential {
        Credential::EnvironmentKey => "environment key",
        Credential::WorkSecret => "work secret",
    };
    if let Some(path) = file {
        return Ok(Some(read_secret_file(path, what)?));
    }
    let sealed = credentials::sealed(credential);
    if sealed.is_some_and(|s| s.source == Source::Flag) {
        tracing::warn!(
            "{} was given on the command line, which every local user can read (ps, /proc/<pid>/cmdline) until the \
             worker re-executed itself without it; pass the {what} in the environment or in a 0600 file instead",
            credential.flag()
        );
    }
    Ok(sealed
        .map(|s| s.value.expose().to_owned())
        .or(clap_value.map(mnemo_api::Secret::into_exposed))
        .filter(|v| !v.trim().is_empty()))
}

/// Done first by every worker: non-dumpable, so a process of its user can neither read its
/// memory nor trace it.
fn harden() {
    if let Err(e) = hardening::make_non_dumpable() {
        tracing::warn!("cannot make the worker non-dumpable (processes of its user may read its memory): {e}");
    }
}

#[derive(Debug, Args)]
pub(crate) struct Poll {
    /// The self-hosted environment to serve (`env_…`).
    #[arg(long, env = "ANTHROPIC_ENVIRONMENT_ID")]
    environment_id: EnvironmentId,

    /// The environment's key. Prefer the environment variable or --environment-key-file: a
    /// value on the command line is visible to every local user until the worker re-executes
    /// itself without it.
    #[arg(long, env = "ANTHROPIC_ENVIRONMENT_KEY", hide_env_values = true)]
    environment_key: Option<mnemo_api::Secret>,

    /// A file holding the environment's key (must be readable by its owner only: 0600).
    #[arg(long, value_name = "FILE", env = "ANTHROPIC_ENVIRONMENT_KEY_FILE")]
    environment_key_file: Option<PathBuf>,

    /// Run SCRIPT once per claimed session instead of serving it in this process. It gets the
    /// work item JSON (with `.secret`) on stdin and ANTHROPIC_{WORK,SESSION,ENVIRONMENT}_ID,
    /// ANTHROPIC_ENVIRONMENT_KEY and ANTHROPIC_BASE_URL in its environment.
    #[arg(long, env = "ANTHROPIC_ON_WORK")]
    on_work: Option<PathBuf>,

    /// Sent as `Anthropic-Worker-ID` on every poll (default: hostname plus a random suffix).
    #[arg(long, env = "ANTHROPIC_WORKER_ID")]
    worker_id: Option<String>,

    /// With `--on-work`: how long to wait for a heartbeat from inside the sandbox before the
    /// poller keeps the item's lease alive itself (`45s`).
    #[arg(long, default_value = "45s", value_parser = parse_max_idle, hide = true)]
    on_work_lease_wait: MaxIdle,

    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct Run {
    /// The claimed work item (`work_…`).
    #[arg(long, env = "ANTHROPIC_WORK_ID")]
    work_id: String,
    /// The session the item is for (`sesn_…`).
    #[arg(long, env = "ANTHROPIC_SESSION_ID")]
    session_id: String,
    /// The environment the item came from (`env_…`).
    #[arg(long, env = "ANTHROPIC_ENVIRONMENT_ID")]
    environment_id: String,
    /// Optional when a work secret is given: the item then runs on its sessions token alone.
    #[arg(long, env = "ANTHROPIC_ENVIRONMENT_KEY", hide_env_values = true)]
    environment_key: Option<mnemo_api::Secret>,
    /// A file holding the environment's key (must be readable by its owner only: 0600).
    #[arg(long, value_name = "FILE", env = "ANTHROPIC_ENVIRONMENT_KEY_FILE")]
    environment_key_file: Option<PathBuf>,
    /// A file holding the work secret (must be readable by its owner only: 0600).
    #[arg(long, env = "ANTHROPIC_WORK_SECRET_FILE")]
    work_secret_file: Option<PathBuf>,
    /// The work secret (prefer the file or the environment variable over the flag, which every
    /// local user can read until the worker re-executes itself without it).
    #[arg(long, env = "ANTHROPIC_WORK_SECRET", hide_env_values = true)]
    work_secret: Option<mnemo_api::Secret>,

    #[command(flatten)]
    common: Common,
}

impl Worker {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        harden();
        let cancel = CancellationToken::new();
        let mut signals = Signals::install()?;
        {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                signals.next().await;
                tracing::info!("signal received: finishing the session in flight (flush, cleanup, stop), then exiting");
                cancel.cancel();
                // A second signal aborts without finishing the teardown.
                signals.abort_on_next();
            });
        }
        let metrics_listen = match &self {
            Self::Poll(p) => p.common.metrics_listen,
            Self::Run(r) => r.common.metrics_listen,
        };
        if let Some(at) = metrics_listen {
            crate::metrics::serve(at, None).await?;
        }
        match self {
            Self::Poll(p) => p.run(&cancel).await,
            Self::Run(r) => r.run(&cancel).await,
        }
    }
}

impl Poll {
    async fn run(self, cancel: &CancellationToken) -> anyhow::Result<()> {
        let mut cfg = self.common.config()?;
        if let Some(id) = self.worker_id {
            cfg.worker_id = id;
        }
        if let Some(wait) = self.on_work_lease_wait.0 {
            cfg.script_lease_wait = wait;
        }
        let serve = match self.on_work {
            Some(script) => Serve::Script(script),
            None => {
                Common::check_isolation(&cfg)?;
                Serve::InProcess
            }
        };
        let key = credential(Credential::EnvironmentKey, self.environment_key, self.environment_key_file.as_deref())?
            .context("set ANTHROPIC_ENVIRONMENT_KEY or --environment-key-file (the environment's key)")?;
        poller::run(&cfg, &self.environment_id, &key, &serve, cancel).await?;
        tracing::info!("worker stopped");
        Ok(())
    }
}

impl Run {
    async fn run(self, cancel: &CancellationToken) -> anyhow::Result<()> {
        let cfg = self.common.config()?;
        Common::check_isolation(&cfg)?;
        let secret = credential(Credential::WorkSecret, self.work_secret, self.work_secret_file.as_deref())?;
        let key = credential(Credential::EnvironmentKey, self.environment_key, self.environment_key_file.as_deref())?;
        anyhow::ensure!(
            secret.is_some() || key.is_some(),
            "set ANTHROPIC_WORK_SECRET (or ANTHROPIC_WORK_SECRET_FILE) or ANTHROPIC_ENVIRONMENT_KEY (or ANTHROPIC_ENVIRONMENT_KEY_FILE)"
        );
        let work = synthesize_item(&self.work_id, &self.environment_id, &self.session_id, secret)?;
        handle_item(&cfg, key.as_deref(), &work, cancel).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_idle_takes_units_and_none() {
        assert_eq!(parse_max_idle("60s").unwrap().0, Some(Duration::from_secs(60)));
        assert_eq!(parse_max_idle("90").unwrap().0, Some(Duration::from_secs(90)));
        assert_eq!(parse_max_idle("2m").unwrap().0, Some(Duration::from_secs(120)));
        assert_eq!(parse_max_idle("500ms").unwrap().0, Some(Duration::from_millis(500)));
        assert_eq!(parse_max_idle("none").unwrap().0, None);
        assert!(parse_max_idle("soon").is_err());
        assert!(parse_max_idle("5d").is_err());
    }
}
