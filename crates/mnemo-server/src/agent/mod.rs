//! The agent loop: `mnemo serve` runs the agent of every session whose agent's model resolves
//! to a configured provider; other sessions keep being driven from outside.
//!
//! The [`AgentLoop`] supervisor hears of every append — from this process's handlers
//! ([`AgentLoop::wake`]) and, on a database several replicas share, from the store's signals —
//! and asks of the session's log whether it owes its agent a step
//! ([`mnemo_store::rules::agent::due`]). If it does, it claims the session's turn lease in the
//! store (one runner per turn across every replica) and runs the turn (`turn::run`), renewing the lease
//! while it works. A lease whose holder died lapses, and a periodic scan of running sessions
//! picks such turns up again, so no session stays `running` with nobody on it; the scan at
//! start (and after missed signals) also looks at idle sessions, for a message a process
//! stored but died before answering.

mod dream;
mod dream_tools;
mod request;
mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_api::{Backoff, Event, Jitter, SessionId, SessionStatus, WorkspaceId};
use mnemo_model::Resolved;
use mnemo_store::{Appended, EventAuthor, Signal, Store, StoreError};
use tokio::sync::{Notify, broadcast, mpsc};

use crate::hub::EventHub;
use crate::rate_limit::ModelMeter;

/// The loop's bounds.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `max_tokens` of every model call.
    pub max_tokens: u32,
    /// Model calls one turn may make; then it ends with `model_call_limit_reached`.
    pub max_model_calls_per_turn: u32,
    /// How long a turn may take from its first model call; then it ends with `turn_timeout`.
    pub turn_timeout: Duration,
    /// The pauses before retrying a retryable provider failure (429, 529, 5xx, a cut stream),
    /// and how many retries a call gets.
    pub retry: Backoff,
    /// How long a turn lease lasts unless renewed (renewed every third of it).
    pub lease_ttl: Duration,
    /// How often running sessions are scanned for turns nobody holds (and dreams for runners).
    pub scan_every: Duration,
    /// How dreams run.
    pub dreams: mnemo_store::rules::dream::DreamLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tokens: 8192,
            max_model_calls_per_turn: 50,
            turn_timeout: Duration::from_secs(1800),
            retry: Backoff::doubling(Duration::from_millis(500), Duration::from_secs(30))
                .with_jitter(Jitter::Full)
                .with_retries(4),
            lease_ttl: Duration::from_secs(30),
            scan_every: Duration::from_secs(15),
            dreams: mnemo_store::rules::dream::DreamLimits::default(),
        }
    }
}

/// Which sessions a scan looks at.
#[derive(Debug, Clone, Copy)]
enum Scan {
    /// Running ones: a turn whose runner died is among them (the periodic scan).
    Running,
    /// Running and idle ones: an idle session may hold input nobody answered (at start, and
    /// after missed signals). Idle sessions of agents no provider runs cost one read each.
    Everything,
}

/// Which provider runs an agent model id (`None`: the session is driven from outside).
pub type Resolve = Arc<dyn Fn(&str) -> Option<Resolved> + Send + Sync>;

/// What a turn needs from the server.
pub(crate) struct Ctx {
    pub(crate) store: Arc<dyn Store>,
    hub: Arc<EventHub>,
    work_signal: Arc<Notify>,
    pub(crate) limits: Limits,
    /// The workspaces' model rate limits.
    pub(crate) meter: ModelMeter,
}

impl Ctx {
    /// Appends as the agent to workspace `ws`'s session, and tells this process's streams and
    /// long polls, as a handler does.
    pub(crate) async fn append(
        &self,
        ws: &WorkspaceId,
        id: &SessionId,
        events: Vec<Event>,
    ) -> Result<Appended, StoreError> {
        self.append_as(ws, id, events, EventAuthor::Server).await
    }

    /// Appends as `author` (the agent loop, or the server running a dream's tools).
    pub(crate) async fn append_as(
        &self,
        ws: &WorkspaceId,
        id: &SessionId,
        events: Vec<Event>,
        author: EventAuthor,
    ) -> Result<Appended, StoreError> {
        let appended = self.store.append_events(ws, id, events, author).await?;
        self.hub.publish(&*self.store, id, &appended.written).await;
        if appended.enqueued_work {
            self.work_signal.notify_waiters();
        }
        Ok(appended)
    }
}

/// A session this process is looking at or running: its wake-ups, and whether one came while
/// it was busy (then it looks again before it lets go).
struct Active {
    wake: Arc<Notify>,
    again: bool,
}

struct Inner {
    ctx: Ctx,
    resolve: Resolve,
    /// This process's name on the leases it holds.
    holder: String,
    active: Mutex<HashMap<SessionId, Active>>,
    /// The dreams this process runs.
    dreams: dream::Dreams,
}

/// The supervisor of the agent loop (cheap to clone).
#[derive(Clone)]
pub struct AgentLoop {
    inner: Arc<Inner>,
    wake_tx: mpsc::UnboundedSender<(WorkspaceId, SessionId)>,
}

impl std::fmt::Debug for AgentLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoop").field("holder", &self.inner.holder).finish_non_exhaustive()
    }
}

impl AgentLoop {
    pub(crate) fn start(
        store: Arc<dyn Store>,
        hub: Arc<EventHub>,
        work_signal: Arc<Notify>,
        resolve: Resolve,
        limits: Limits,
        meter: ModelMeter,
    ) -> Self {
        let holder = format!("loop_{:016x}", rand::random::<u64>());
        let signals = store.signals();
        let scan_every = limits.scan_every;
        let inner = Arc::new(Inner {
            ctx: Ctx { store, hub, work_signal, limits, meter },
            resolve,
            holder,
            active: Mutex::default(),
            dreams: dream::Dreams::default(),
        });
        let (wake_tx, wake_rx) = mpsc::unbounded_channel();
        let this = Self { inner, wake_tx };
        tokio::spawn(this.clone().supervise(wake_rx, signals, scan_every));
        tokio::spawn(this.clone().supervise_dreams());
        this
    }

    /// Whether `model` maps to a configured provider (a dream needs one).
    pub fn resolves(&self, model: &str) -> bool {
        (self.inner.resolve)(model).is_some()
    }

    /// The dream limits of the models file.
    pub fn dream_limits(&self) -> mnemo_store::rules::dream::DreamLimits {
        self.inner.ctx.limits.dreams
    }

    /// Tells the dream runner a dream was created.
    pub fn wake_dreams(&self) {
        self.inner.dreams.wake.notify_one();
    }

    /// Tells the dream runner that dream `id` was canceled: this process's run of it stops now.
    pub fn dream_canceled(&self, id: &mnemo_api::DreamId) {
        self.inner.dreams.cancel(id);
    }

    /// Tells the loop that workspace `ws`'s `session` changed (events appended, or a session
    /// created with events).
    pub fn wake(&self, ws: &WorkspaceId, session: &SessionId) {
        let _ = self.wake_tx.send((ws.clone(), session.clone()));
    }

    async fn supervise(
        self,
        mut wakes: mpsc::UnboundedReceiver<(WorkspaceId, SessionId)>,
        mut signals: Option<broadcast::Receiver<Signal>>,
        scan_every: Duration,
    ) {
        let mut scan = tokio::time::interval(scan_every);
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut first_scan = true;
        loop {
            let signal = async {
                match signals.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                woken = wakes.recv() => match woken {
                    Some((ws, session)) => self.look_at(Some(ws), session),
                    None => return,
                },
                signal = signal => match signal {
                    // A signal names the session only: its workspace is looked up.
                    Ok(Signal::Events { session, .. }) => self.look_at(None, session),
                    // Signals were missed: any session may have new input.
                    Ok(Signal::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => self.scan(Scan::Everything).await,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Closed) => signals = None,
                },
                _ = scan.tick() => {
                    // The first tick is at once: at start, turns a dead process left running and
                    // messages it stored but never answered (the session still idle) are picked up.
                    let what = if first_scan { Scan::Everything } else { Scan::Running };
                    first_scan = false;
                    self.scan(what).await;
                }
            }
        }
    }

    /// Looks at the sessions `what` names, in every workspace.
    async fn scan(&self, what: Scan) {
        let statuses: Vec<String> = match what {
            Scan::Running => vec!["running".into()],
            Scan::Everything => vec!["running".into(), "idle".into()],
        };
        let mut after = None;
        loop {
            match self.inner.ctx.store.list_turn_sessions(statuses.clone(), 100, after).await {
                Ok(page) => {
                    for (ws, id) in page.items {
                        self.look_at(Some(ws), id);
                    }
                    match page.next {
                        Some(next) => after = Some(next),
                        None => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e.chain(), "cannot list running sessions for the agent loop");
                    return;
                }
            }
        }
    }

    /// Hands a wake-up to the session's task, or starts one (`ws`: the session's workspace, if
    /// known; else the task looks it up).
    fn look_at(&self, ws: Option<WorkspaceId>, session: SessionId) {
        let wake = {
            let mut active = self.inner.active.lock().expect("agent loop poisoned");
            if let Some(a) = active.get_mut(&session) {
                a.again = true;
                a.wake.notify_one();
                return;
            }
            let wake = Arc::new(Notify::new());
            active.insert(session.clone(), Active { wake: Arc::clone(&wake), again: false });
            wake
        };
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = this.attend(ws.as_ref(), &session, &wake).await {
                    tracing::warn!(session.id = %session, error = %e.chain(), "the agent loop could not carry on a turn");
                }
                let mut active = this.inner.active.lock().expect("agent loop poisoned");
                match active.get_mut(&session) {
                    Some(a) if a.again => a.again = false,
                    _ => {
                        active.remove(&session);
                        return;
                    }
                }
            }
        });
    }

    /// Runs the session's turn if its agent resolves, it owes a step and the lease is ours,
    /// reading and writing the session in its own workspace.
    async fn attend(&self, ws: Option<&WorkspaceId>, id: &SessionId, wake: &Notify) -> Result<(), StoreError> {
        let ctx = &self.inner.ctx;
        let looked_up;
        let ws = match ws {
            Some(ws) => ws,
            None => match ctx.store.session_workspace(id).await? {
                Some(ws) => {
                    looked_up = ws;
                    &looked_up
                }
                None => return Ok(()),
            },
        };
        let session = match ctx.store.get_session(ws, id).await {
            Ok(s) => s,
            Err(StoreError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        if session.metadata.contains_key(mnemo_store::rules::dream::meta::DREAM_ID) {
            // A dream's session: its dream's runner drives it (`dream`).
            return Ok(());
        }
        let Some(model) = session.agent["model"]["id"].as_str() else { return Ok(()) };
        let Some(resolved) = (self.inner.resolve)(model) else { return Ok(()) };
        if session.status == SessionStatus::Terminated {
            return Ok(());
        }
        if session.status == SessionStatus::Idle && !turn::owes_a_step(ctx, ws, id, &session).await? {
            // Most idle sessions a scan finds owe nothing: no lease write for them.
            return Ok(());
        }
        if !ctx.store.claim_turn(ws, id, &self.inner.holder, ctx.limits.lease_ttl).await? {
            return Ok(());
        }
        tracing::debug!(session.id = %id, provider = %resolved.provider_name, "running a turn");
        let outcome = tokio::select! {
            outcome = turn::run(ctx, ws, id, &resolved, wake, None, turn::Bounds {
                max_model_calls: ctx.limits.max_model_calls_per_turn,
                timeout: ctx.limits.turn_timeout,
            }) => outcome,
            lost = self.keep_lease(ws, id) => Err(lost),
        };
        if let Err(e) = ctx.store.release_turn(ws, id, &self.inner.holder).await {
            tracing::warn!(session.id = %id, error = %e.chain(), "cannot release a turn lease (it lapses by itself)");
        }
        outcome
    }

    /// Renews the turn lease every third of its TTL; resolves (with why) once it is lost, or
    /// once renewals have failed for longer than the lease lasts (another may hold it by now).
    async fn keep_lease(&self, ws: &WorkspaceId, id: &SessionId) -> StoreError {
        let ttl = self.inner.ctx.limits.lease_ttl;
        let mut renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(ttl / 3).await;
            match self.inner.ctx.store.claim_turn(ws, id, &self.inner.holder, ttl).await {
                Ok(true) => renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    return StoreError::Conflict(format!("the turn lease of session `{id}` went to another runner"));
                }
                Err(e) if renewed.elapsed() >= ttl => return e,
                Err(e) => tracing::warn!(session.id = %id, error = %e.chain(), "cannot renew a turn lease"),
            }
        }
    }
}

#[cfg(test)]
mod tests;
