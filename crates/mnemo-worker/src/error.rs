//! Why an item (or the worker) failed.

use mnemo_client::ClientError;

/// A failure of one work item, or of the worker's configuration. Messages carry ids, never
/// credentials.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("{0}")]
    Config(String),
    #[error(
        "the work item's secret payload yielded no sessions token and no environment key is available (work_id={work_id})"
    )]
    NoCredential { work_id: String },
    #[error(
        "the session has memory stores attached but the work item carried no sessions token; the memory endpoints reject the environment key, so the memories cannot be mounted; the item is failed rather than run without them, matching hosted sandboxes (work_id={work_id} session_id={session_id})"
    )]
    NoSessionsToken { work_id: String, session_id: String },
    #[error("memory store mount_path is not a clean absolute path: '{mount_path}' (memory_store_id={store})")]
    BadMountPath { mount_path: String, store: String },
    #[error(
        "memory store {store} asks for mount_path '{mount_path}', which is not under this worker's memory mount root {}; the item is failed rather than write outside it (start the worker with the server's --memory-mount-root)",
        mount_root.display()
    )]
    MountPathOutsideRoot { mount_path: String, store: String, mount_root: std::path::PathBuf },
    #[error(transparent)]
    Mount(#[from] Box<mnemo_sync::MountError>),
    #[error("cannot fetch session {session_id}: {source}")]
    Session { session_id: String, source: Box<ClientError> },
    #[error("the session runner failed: {0}")]
    Runner(String),
    #[error(transparent)]
    Api(#[from] Box<ClientError>),
    #[error("{0}")]
    ScriptNotRunnable(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<mnemo_sync::MountError> for WorkerError {
    fn from(e: mnemo_sync::MountError) -> Self {
        Self::Mount(Box::new(e))
    }
}

impl From<ClientError> for WorkerError {
    fn from(e: ClientError) -> Self {
        Self::Api(Box::new(e))
    }
}
