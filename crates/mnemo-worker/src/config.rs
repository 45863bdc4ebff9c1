//! The worker's knobs, with the reference worker's defaults.

use std::path::PathBuf;
use std::time::Duration;

use mnemo_sync::DeletionMode;

use crate::WorkerError;
use crate::tools::sandbox::ToolUser;

/// The shortest memory sync interval the worker accepts.
pub const MIN_SYNC_INTERVAL: Duration = Duration::from_secs(5);
/// The default memory sync interval.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(15);
/// The default idle time after which a session whose turn ended stops being served.
pub const DEFAULT_MAX_IDLE: Duration = Duration::from_secs(60);

/// How long an `--on-work` poller waits for the sandbox's worker to heartbeat.
pub const DEFAULT_SCRIPT_LEASE_WAIT: Duration = Duration::from_secs(45);

/// How one worker serves its items.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// API base URL (`mnemo serve` or the hosted API).
    pub base_url: String,
    /// Relative tool paths resolve here; the bash shell starts here.
    pub workdir: PathBuf,
    /// Stop serving a session once its turn has ended and it stayed idle this long.
    pub max_idle: Option<Duration>,
    /// Minimum time between memory syncs; `None` disables memory entirely.
    pub memory_sync_interval: Option<Duration>,
    /// What syncs do with local deletions.
    pub memory_sync_deletions: DeletionMode,
    /// Live memory sync where the server has a change feed (`mnemo serve`): remote changes
    /// pulled and local edits pushed between tool calls within moments, not at the interval.
    pub memory_live: bool,
    /// Sent as `Anthropic-Worker-ID` on every poll.
    pub worker_id: String,
    /// Cap of whole-file `read` and `edit`; `None` = uncapped.
    pub max_file_bytes: Option<u64>,
    pub max_file_bytes_explicit: bool,
    /// Where the worker remembers which folders it mounted for which session, so a worker
    /// restarted after a crash can take them back.
    pub state_dir: PathBuf,
    /// How long an `--on-work` poller waits for a heartbeat from inside the sandbox before it
    /// keeps the lease alive itself.
    pub script_lease_wait: Duration,
    /// The only folder under which a server's `mount_path` may land (`/mnt/memory`): a store
    /// whose path lies elsewhere fails the item (see [`crate::memory::plan`]).
    pub memory_mount_root: PathBuf,
    /// The user the tool shell runs as (`--tool-user`); the worker's own when `None`.
    pub tool_user: Option<ToolUser>,
    /// Variables passed to the tool shell beyond the allowlist (`--tool-env`).
    pub tool_env: Vec<String>,
}

impl WorkerConfig {
    /// The defaults for `workdir` against `base_url`.
    pub fn new(base_url: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        let workdir = workdir.into();
        let state_dir = default_state_dir(&workdir);
        Self {
            base_url: base_url.into(),
            workdir,
            max_idle: Some(DEFAULT_MAX_IDLE),
            memory_sync_interval: Some(DEFAULT_SYNC_INTERVAL),
            memory_sync_deletions: DeletionMode::Enabled,
            memory_live: true,
            worker_id: default_worker_id(),
            max_file_bytes: Some(crate::tools::DEFAULT_MAX_FILE_BYTES),
            max_file_bytes_explicit: false,
            state_dir,
            script_lease_wait: DEFAULT_SCRIPT_LEASE_WAIT,
            memory_mount_root: PathBuf::from(mnemo_api::DEFAULT_MEMORY_MOUNT_ROOT),
            tool_user: None,
            tool_env: Vec::new(),
        }
    }

    /// Checks the knobs the reference rejects at construction.
    pub fn validate(&self) -> Result<(), WorkerError> {
        if let Some(interval) = self.memory_sync_interval
            && interval < MIN_SYNC_INTERVAL
        {
            return Err(WorkerError::Config(format!(
                "memory_sync_interval must be at least {} seconds, got {:?}",
                MIN_SYNC_INTERVAL.as_secs(),
                interval
            )));
        }
        if !self.memory_mount_root.is_absolute()
            || self.memory_mount_root.components().any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(WorkerError::Config(format!(
                "--memory-mount-root must be an absolute path without `..` (got {})",
                self.memory_mount_root.display()
            )));
        }
        if let Some(name) = self.tool_env.iter().find(|n| n.is_empty() || n.contains(['=', '\0'])) {
            return Err(WorkerError::Config(format!("--tool-env {name:?} is not a variable name")));
        }
        if let Some(name) = self.tool_env.iter().find(|n| SECRET_VARIABLES.contains(&n.as_str())) {
            return Err(WorkerError::Config(format!(
                "--tool-env {name} would hand a worker credential to the agent's shell; remove it"
            )));
        }
        Ok(())
    }
}

/// The variables that carry the worker's credentials (or where to find them): never passed to
/// the tool shell, whatever `--tool-env` says.
pub const SECRET_VARIABLES: [&str; 4] = [
    "ANTHROPIC_ENVIRONMENT_KEY",
    "ANTHROPIC_ENVIRONMENT_KEY_FILE",
    "ANTHROPIC_WORK_SECRET",
    "ANTHROPIC_WORK_SECRET_FILE",
];

/// `<hostname>-<12 hex>`, like the reference.
pub fn default_worker_id() -> String {
    let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
    let suffix: [u8; 6] = rand::random();
    format!("{host}-{}", hex::encode(suffix))
}

/// `$XDG_STATE_HOME/mnemo/worker` (or `~/.local/state/…`), else `<workdir>/.mnemo-worker`.
fn default_state_dir(workdir: &std::path::Path) -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .map(|base| base.join("mnemo/worker"))
        .unwrap_or_else(|| workdir.join(".mnemo-worker"))
}
