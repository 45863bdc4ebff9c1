//! The session tool runner: follows a session's events, runs the calls of the built-in tools,
//! posts their results, and decides when the session no longer needs serving.
//!
//! Structure (spec `sessions-events-api.md` §6): a spawned *stream task* opens the live stream
//! first, then reads the whole history and reconciles it, then routes live events; a
//! *watchdog* task ends the run once the turn has ended and the session stayed idle for
//! `max_idle`; the caller's task *dispatches* routed calls one at a time, so a call is never run
//! twice at once, and runs the caller's [`Between`] work (memory syncs) between calls.
//!
//! - `routing` — the pure routing state (which calls run, wait or are denied; the idle clock).
//! - `stream` — the stream task and the watchdog.
//! - `post` — one call run and its result posted.

mod post;
mod routing;
mod stream;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_client::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::routing::{Dispatch, Shared};
use crate::tools::Toolset;

/// How the runner behaves.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Stop once the turn ended and the session stayed idle this long; `None` = never.
    pub max_idle: Option<Duration>,
    /// The latest lease TTL in seconds (0 = unknown): the window for re-sending a result.
    pub ttl_seconds: Arc<AtomicU64>,
}

/// One tool call the runner dealt with, handed to the caller after it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub tool_use_id: String,
    pub name: String,
    /// Whether a result was posted (false for denied calls, calls of tools this runner does not
    /// own, and results that could not be sent).
    pub posted: bool,
    pub denied: bool,
    pub is_error: bool,
    /// The file the call wrote in full (`write`, `edit`).
    pub wrote: Option<std::path::PathBuf>,
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// `session.status_terminated` or `session.deleted`.
    Terminated,
    /// The turn ended and the session stayed idle for `max_idle`.
    Idle,
    /// The stream was refused for good (e.g. the session is gone or the token lapsed).
    Refused(String),
    /// The caller cancelled the run (lease ended, signal).
    Cancelled,
}

/// What the caller does between tool calls (the worker syncs memory there). It never runs
/// while a call does.
pub trait Between {
    /// Work found while waiting, run by [`run`](Self::run).
    type Work;
    /// After every call the runner dealt with.
    fn after_call(&mut self, call: &Observed) -> impl Future<Output = ()> + Send;
    /// Resolves when there is work to do before the next call; must be cancel-safe (it is
    /// dropped whenever a call or the end of the run comes first). Ready work goes before a
    /// call that is waiting too, so a call sees what was ready when it started.
    fn ready(&mut self) -> impl Future<Output = Self::Work> + Send;
    /// Does the work `ready` found (to the end: it is never cancelled).
    fn run(&mut self, work: Self::Work) -> impl Future<Output = ()> + Send;
}

/// Nothing between calls.
impl Between for () {
    type Work = std::convert::Infallible;
    async fn after_call(&mut self, _: &Observed) {}
    async fn ready(&mut self) -> Self::Work {
        std::future::pending().await
    }
    async fn run(&mut self, work: Self::Work) {
        match work {}
    }
}

/// Runs the session until it ends, the idle timeout fires, or `cancel` is cancelled, with the
/// caller's `between` work after every call it dealt with and whenever that work is ready.
pub async fn run_session<B: Between>(
    client: &Client,
    session_id: &str,
    tools: &mut Toolset,
    opts: &RunnerOptions,
    cancel: &CancellationToken,
    between: &mut B,
) -> RunEnd {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared::new(tx));
    let stop = CancellationToken::new();
    let end = Arc::new(Mutex::new(None::<RunEnd>));
    let stream_task = tokio::spawn(stream::stream_loop(
        client.clone(),
        session_id.to_owned(),
        Arc::clone(&shared),
        stop.clone(),
        Arc::clone(&end),
    ));
    let watchdog = opts
        .max_idle
        .map(|max_idle| tokio::spawn(stream::watchdog(Arc::clone(&shared), max_idle, stop.clone(), Arc::clone(&end))));

    enum Next<W> {
        Work(W),
        Call(Option<Dispatch>),
    }
    let outcome = loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => break RunEnd::Cancelled,
            work = between.ready() => Next::Work(work),
            next = rx.recv() => Next::Call(next),
        };
        let next = match next {
            Next::Work(work) => {
                between.run(work).await;
                continue;
            }
            Next::Call(next) => next,
        };
        let Some(dispatch) = next else {
            break end.lock().expect("run end lock").clone().unwrap_or(RunEnd::Terminated);
        };
        let observed = match dispatch {
            Dispatch::Execute(call) => post::execute(client, session_id, tools, opts, &shared, call).await,
            Dispatch::Denied(call) => {
                tracing::info!(tool_use_id = %call.id, tool = %call.name, "tool call denied; not running it");
                Observed { tool_use_id: call.id, name: call.name, denied: true, ..Default::default() }
            }
            Dispatch::Unowned(call) => {
                tracing::debug!(tool_use_id = %call.id, tool = %call.name, "tool call belongs to another client");
                Observed { tool_use_id: call.id, name: call.name, ..Default::default() }
            }
        };
        between.after_call(&observed).await;
    };
    stop.cancel();
    shared.close();
    stream_task.abort();
    if let Some(w) = watchdog {
        w.abort();
    }
    outcome
}
