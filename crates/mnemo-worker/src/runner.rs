//! The session tool runner: follows a session's events, runs the calls of the built-in tools,
//! posts their results, and decides when the session no longer needs serving.
//!
//! Structure (spec `sessions-events-api.md` §6): a spawned *stream task* opens the live stream
//! first, then reads the whole history and reconciles it, then routes live events; a
//! *watchdog* task ends the run once the turn has ended and the session stayed idle for
//! `max_idle`; the caller's task *dispatches* routed calls one at a time, so a call is never run
//! twice at once and the caller can sync memory between calls.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use mnemo_client::{Backoff, Client, ClientError, Jitter};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::tools::{TOOL_CALL_TIMEOUT, ToolOutput, Toolset};

/// Page size of the history read.
const HISTORY_PAGE: u32 = 1000;
/// Result-send retry window when no lease TTL is known.
const DEFAULT_SEND_WINDOW: Duration = Duration::from_secs(300);
/// Pauses between result-send attempts: `uniform(d/2, d)` with `d = min(2^attempt, 30)` seconds
/// (each cut to what is left of the window).
const SEND_BACKOFF: Backoff =
    Backoff { initial: Duration::from_secs(1), max: Duration::from_secs(30), jitter: Jitter::Shave(0.5) };
/// Pauses between event-stream reconnects: 0.5 s doubling to 10 s, back to 0.5 s once an event
/// arrives.
const RECONNECT_BACKOFF: Backoff =
    Backoff { initial: Duration::from_millis(500), max: Duration::from_secs(10), jitter: Jitter::None };

/// How the runner behaves.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Stop once the turn ended and the session stayed idle this long; `None` = never.
    pub max_idle: Option<Duration>,
    /// The latest lease TTL in seconds (0 = unknown): the window for re-sending a result.
    pub ttl_seconds: Arc<AtomicU64>,
}

/// One tool call the runner dealt with, handed to the caller after it.
#[derive(Debug, Clone)]
pub struct Observed {
    pub tool_use_id: String,
    pub name: String,
    /// Whether a result was posted (false for denied calls, calls of tools this runner does not
    /// own, and results that could not be sent).
    pub posted: bool,
    pub denied: bool,
    pub is_error: bool,
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

#[derive(Debug, Clone)]
struct Call {
    id: String,
    name: String,
    input: Value,
    thread: Option<String>,
    custom: bool,
}

impl Call {
    fn from_event(ev: &Value) -> Option<Self> {
        let kind = ev.get("type")?.as_str()?;
        let custom = match kind {
            "agent.tool_use" => false,
            "agent.custom_tool_use" => true,
            _ => return None,
        };
        Some(Self {
            id: ev.get("id")?.as_str()?.to_owned(),
            name: ev.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            input: ev.get("input").cloned().unwrap_or_else(|| json!({})),
            thread: ev.get("session_thread_id").and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_owned),
            custom,
        })
    }
}

#[derive(Debug)]
enum Dispatch {
    Execute(Call),
    Denied(Call),
    Unowned(Call),
}

/// What the stream task and the dispatcher share.
#[derive(Debug, Default)]
struct State {
    seen: HashSet<String>,
    answered: HashSet<String>,
    /// tool_use_id → verdict (`allow`, `deny`, …) of confirmations seen so far.
    confirmations: HashMap<String, String>,
    /// Ask-gated calls waiting for their confirmation.
    held: HashMap<String, Call>,
    terminated_threads: HashSet<String>,
    /// Calls routed for execution and not yet done, plus held ones: the idle clock waits for 0.
    outstanding: usize,
    /// The last non-neutral event ended the turn.
    turn_ended: bool,
    /// When the idle clock was armed.
    idle_since: Option<Instant>,
    /// Between the start of a history read and its success (or a live non-neutral event), a
    /// thread termination is not neutral: the idle that armed the clock may be outdated.
    reading_history: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    idle_changed: Notify,
    tx: Mutex<Option<mpsc::UnboundedSender<Dispatch>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("runner state lock")
    }

    fn send(&self, d: Dispatch) {
        if let Some(tx) = self.tx.lock().expect("runner tx lock").as_ref() {
            let _ = tx.send(d);
        }
    }

    /// Closes the queue for new calls; buffered ones are still drained.
    fn close(&self) {
        self.tx.lock().expect("runner tx lock").take();
    }

    /// Routes one unanswered call (spec §6.3). Runs under the state lock.
    fn route(&self, st: &mut State, call: Call, permission: Option<&str>) {
        if st.answered.contains(&call.id) || st.held.contains_key(&call.id) {
            return;
        }
        if call.thread.as_ref().is_some_and(|t| st.terminated_threads.contains(t)) {
            return;
        }
        if call.custom || !Toolset::handles(&call.name) {
            self.send(Dispatch::Unowned(call));
            return;
        }
        let verdict = st.confirmations.get(&call.id).cloned();
        match (verdict.as_deref(), permission) {
            (Some("allow"), _) | (None, None | Some("allow")) => self.enqueue(st, call),
            (Some(_), _) | (None, Some("deny")) => self.deny(st, call),
            (None, Some(_)) => {
                st.outstanding += 1;
                st.held.insert(call.id.clone(), call);
                self.disarm_for_work(st);
            }
        }
    }

    fn enqueue(&self, st: &mut State, call: Call) {
        st.outstanding += 1;
        self.disarm_for_work(st);
        self.send(Dispatch::Execute(call));
    }

    fn deny(&self, st: &mut State, call: Call) {
        st.answered.insert(call.id.clone());
        self.send(Dispatch::Denied(call));
    }

    /// Work is outstanding: the idle clock must not run (arming resumes when it is done).
    fn disarm_for_work(&self, st: &mut State) {
        if st.idle_since.take().is_some() {
            self.idle_changed.notify_one();
        }
    }

    /// Arms the idle clock if the turn ended and nothing is outstanding.
    fn maybe_arm(&self, st: &mut State) {
        if st.turn_ended && st.outstanding == 0 && st.idle_since.is_none() {
            st.idle_since = Some(Instant::now());
            self.idle_changed.notify_one();
        }
    }

    fn disarm(&self, st: &mut State) {
        st.turn_ended = false;
        if st.idle_since.take().is_some() {
            self.idle_changed.notify_one();
        }
    }

    /// A routed call finished (executed, skipped, or released from hold).
    fn done(&self, id: &str, answered: bool) {
        let mut st = self.lock();
        if answered {
            st.answered.insert(id.to_owned());
        }
        st.outstanding = st.outstanding.saturating_sub(1);
        self.maybe_arm(&mut st);
    }
}

fn event_type(ev: &Value) -> &str {
    ev.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// `session.status_idle` with any stop reason but `requires_action`.
fn ends_turn(ev: &Value) -> bool {
    event_type(ev) == "session.status_idle"
        && ev.pointer("/stop_reason/type").and_then(Value::as_str) != Some("requires_action")
}

fn is_neutral(kind: &str, reading_history: bool) -> bool {
    kind == "user.tool_confirmation" || (kind == "session.thread_status_terminated" && !reading_history)
}

/// Runs the session until it ends, the idle timeout fires, or `cancel` is cancelled. After
/// every call it dealt with, `after_call` runs (the worker syncs memory there).
pub async fn run_session(
    client: &Client,
    session_id: &str,
    tools: &mut Toolset,
    opts: &RunnerOptions,
    cancel: &CancellationToken,
    mut after_call: impl AsyncFnMut(&Observed),
) -> RunEnd {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared { state: Mutex::default(), idle_changed: Notify::new(), tx: Mutex::new(Some(tx)) });
    let stop = CancellationToken::new();
    let end = Arc::new(Mutex::new(None::<RunEnd>));
    let stream_task = tokio::spawn(stream_loop(
        client.clone(),
        session_id.to_owned(),
        Arc::clone(&shared),
        stop.clone(),
        Arc::clone(&end),
    ));
    let watchdog = opts
        .max_idle
        .map(|max_idle| tokio::spawn(watchdog(Arc::clone(&shared), max_idle, stop.clone(), Arc::clone(&end))));

    let outcome = loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => break RunEnd::Cancelled,
            next = rx.recv() => next,
        };
        let Some(dispatch) = next else {
            break end.lock().expect("run end lock").clone().unwrap_or(RunEnd::Terminated);
        };
        let observed = match dispatch {
            Dispatch::Execute(call) => execute(client, session_id, tools, opts, &shared, call).await,
            Dispatch::Denied(call) => {
                tracing::info!(tool_use_id = %call.id, tool = %call.name, "tool call denied; not running it");
                Observed { tool_use_id: call.id, name: call.name, posted: false, denied: true, is_error: false }
            }
            Dispatch::Unowned(call) => {
                tracing::debug!(tool_use_id = %call.id, tool = %call.name, "tool call belongs to another client");
                Observed { tool_use_id: call.id, name: call.name, posted: false, denied: false, is_error: false }
            }
        };
        after_call(&observed).await;
    };
    stop.cancel();
    shared.close();
    stream_task.abort();
    if let Some(w) = watchdog {
        w.abort();
    }
    outcome
}

/// Runs one call (unless it was answered or its thread ended meanwhile) and posts its result.
async fn execute(
    client: &Client,
    session_id: &str,
    tools: &mut Toolset,
    opts: &RunnerOptions,
    shared: &Shared,
    call: Call,
) -> Observed {
    let skip = {
        let st = shared.lock();
        st.answered.contains(&call.id) || call.thread.as_ref().is_some_and(|t| st.terminated_threads.contains(t))
    };
    let mut observed = Observed {
        tool_use_id: call.id.clone(),
        name: call.name.clone(),
        posted: false,
        denied: false,
        is_error: false,
    };
    if skip {
        shared.done(&call.id, false);
        return observed;
    }
    let started = Instant::now();
    let output = match tokio::time::timeout(TOOL_CALL_TIMEOUT, tools.call(&call.name, call.input.clone())).await {
        Ok(out) => out,
        Err(_) => {
            // The shell may be mid-command: start the next call on a fresh one.
            tools.close().await;
            ToolOutput::error(format!("tool '{}' timed out", call.name))
        }
    };
    tracing::debug!(tool_use_id = %call.id, tool = %call.name, is_error = output.is_error, elapsed_ms = started.elapsed().as_millis() as u64, "tool call ran");
    observed.is_error = output.is_error;
    let thread_ended = call.thread.as_ref().is_some_and(|t| shared.lock().terminated_threads.contains(t));
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

/// Records why the run ends (first reason wins) and closes the queue.
fn finish(shared: &Shared, end: &Mutex<Option<RunEnd>>, stop: &CancellationToken, reason: RunEnd) {
    end.lock().expect("run end lock").get_or_insert(reason);
    stop.cancel();
    shared.close();
}

async fn stream_loop(
    client: Client,
    session_id: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
    end: Arc<Mutex<Option<RunEnd>>>,
) {
    let mut reconnects: u32 = 0;
    while !stop.is_cancelled() {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            s = client.stream_events(&session_id) => s,
        };
        match stream {
            Err(e) if e.is_permanent() => {
                tracing::warn!(session_id = %session_id, "the event stream was refused: {e}");
                finish(&shared, &end, &stop, RunEnd::Refused(e.to_string()));
                return;
            }
            Err(e) => tracing::warn!(session_id = %session_id, "cannot open the event stream, retrying: {e}"),
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                shared.lock().reading_history = true;
                match read_history(&client, &session_id).await {
                    Ok(history) => reconcile(&shared, &history),
                    Err(e) => {
                        if e.is_permanent() {
                            finish(&shared, &end, &stop, RunEnd::Refused(e.to_string()));
                            return;
                        }
                        tracing::warn!(session_id = %session_id, "cannot read the session's history; retrying on reconnect: {e}");
                    }
                }
                loop {
                    let item = tokio::select! {
                        () = stop.cancelled() => return,
                        item = stream.next() => item,
                    };
                    match item {
                        Some(Ok(ev)) => {
                            reconnects = 0;
                            if let Some(reason) = on_live_event(&shared, &ev) {
                                finish(&shared, &end, &stop, reason);
                                return;
                            }
                        }
                        Some(Err(ClientError::Decode { message, .. })) => {
                            tracing::warn!(session_id = %session_id, "skipping an unreadable event: {message}");
                        }
                        Some(Err(e)) => {
                            tracing::debug!(session_id = %session_id, "event stream broke: {e}");
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RECONNECT_BACKOFF.delay(reconnects)) => {}
        }
        reconnects = reconnects.saturating_add(1);
    }
}

async fn read_history(client: &Client, session_id: &str) -> Result<Vec<Value>, ClientError> {
    let mut out = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let p = client.list_events(session_id, HISTORY_PAGE, page.as_deref()).await?;
        out.extend(p.data);
        match p.next_page.filter(|n| !n.is_empty()) {
            Some(next) => page = Some(next),
            None => return Ok(out),
        }
    }
}

/// Reads the whole history before acting, so a call answered later in it is not re-run.
fn reconcile(shared: &Shared, history: &[Value]) {
    let mut st = shared.lock();
    let mut last_ends_turn = false;
    for ev in history {
        let kind = event_type(ev);
        match kind {
            "user.tool_result" | "user.custom_tool_result" => {
                let key = if kind == "user.tool_result" { "tool_use_id" } else { "custom_tool_use_id" };
                if let Some(id) = ev.get(key).and_then(Value::as_str) {
                    st.answered.insert(id.to_owned());
                }
            }
            "user.tool_confirmation" => record_verdict(&mut st, ev),
            "session.thread_status_terminated" => {
                if let Some(t) = ev.get("session_thread_id").and_then(Value::as_str) {
                    st.terminated_threads.insert(t.to_owned());
                }
            }
            _ => {}
        }
        if !is_neutral(kind, false) {
            last_ends_turn = ends_turn(ev);
        }
    }
    st.reading_history = false;
    shared.disarm(&mut st);
    for ev in history {
        if let Some(call) = Call::from_event(ev) {
            st.seen.insert(call.id.clone());
            let permission = ev.get("evaluated_permission").and_then(Value::as_str);
            if !st.answered.contains(&call.id) {
                shared.route(&mut st, call, permission);
            }
        }
    }
    // Held calls whose confirmation arrived in the window just read.
    let released: Vec<String> = st.held.keys().filter(|id| st.confirmations.contains_key(*id)).cloned().collect();
    for id in released {
        release(shared, &mut st, &id);
    }
    st.turn_ended = last_ends_turn;
    shared.maybe_arm(&mut st);
}

fn record_verdict(st: &mut State, ev: &Value) {
    let (Some(id), Some(result)) =
        (ev.get("tool_use_id").and_then(Value::as_str), ev.get("result").and_then(Value::as_str))
    else {
        return;
    };
    if !st.answered.contains(id) {
        st.confirmations.insert(id.to_owned(), result.to_owned());
    }
}

/// Lets a held call go the way its verdict says.
fn release(shared: &Shared, st: &mut State, id: &str) {
    let Some(call) = st.held.remove(id) else { return };
    st.outstanding = st.outstanding.saturating_sub(1);
    if st.confirmations.get(id).map(String::as_str) == Some("allow") {
        shared.enqueue(st, call);
    } else {
        shared.deny(st, call);
        shared.maybe_arm(st);
    }
}

/// Handles one live event; answers why the run must end, if it must.
fn on_live_event(shared: &Shared, ev: &Value) -> Option<RunEnd> {
    let kind = event_type(ev);
    let mut st = shared.lock();
    match kind {
        "session.status_terminated" | "session.deleted" => return Some(RunEnd::Terminated),
        "agent.tool_use" | "agent.custom_tool_use" => {
            if let Some(call) = Call::from_event(ev)
                && st.seen.insert(call.id.clone())
            {
                let permission = ev.get("evaluated_permission").and_then(Value::as_str).map(str::to_owned);
                shared.route(&mut st, call, permission.as_deref());
            }
        }
        "user.tool_result" | "user.custom_tool_result" => {
            let key = if kind == "user.tool_result" { "tool_use_id" } else { "custom_tool_use_id" };
            if let Some(id) = ev.get(key).and_then(Value::as_str) {
                st.answered.insert(id.to_owned());
            }
        }
        "user.tool_confirmation" => {
            record_verdict(&mut st, ev);
            if let Some(id) = ev.get("tool_use_id").and_then(Value::as_str) {
                if st.held.contains_key(id) {
                    release(shared, &mut st, id);
                } else if st.seen.contains(id)
                    && st.confirmations.get(id).is_some_and(|v| v != "allow")
                    && !st.answered.contains(id)
                {
                    // Denied while queued: the user's word wins, the call never runs.
                    st.answered.insert(id.to_owned());
                }
            }
        }
        "session.thread_status_terminated" => {
            if let Some(t) = ev.get("session_thread_id").and_then(Value::as_str) {
                st.terminated_threads.insert(t.to_owned());
            }
        }
        _ => {}
    }
    if ends_turn(ev) {
        st.reading_history = false;
        st.turn_ended = true;
        shared.maybe_arm(&mut st);
    } else if !is_neutral(kind, st.reading_history) {
        st.reading_history = false;
        shared.disarm(&mut st);
    }
    None
}

/// Ends the run once the idle clock has stayed armed for `max_idle`.
async fn watchdog(shared: Arc<Shared>, max_idle: Duration, stop: CancellationToken, end: Arc<Mutex<Option<RunEnd>>>) {
    loop {
        let since = shared.lock().idle_since;
        match since {
            None => tokio::select! {
                () = stop.cancelled() => return,
                () = shared.idle_changed.notified() => {}
            },
            Some(since) => {
                let deadline = since + max_idle;
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = shared.idle_changed.notified() => {}
                    () = tokio::time::sleep_until(deadline) => {
                        if shared.lock().idle_since == Some(since) {
                            tracing::info!("the session stayed idle for {}s; done serving it", max_idle.as_secs());
                            finish(&shared, &end, &stop, RunEnd::Idle);
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> (Arc<Shared>, mpsc::UnboundedReceiver<Dispatch>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Shared { state: Mutex::default(), idle_changed: Notify::new(), tx: Mutex::new(Some(tx)) }), rx)
    }

    fn tool_use(id: &str, name: &str, permission: Option<&str>) -> Value {
        let mut ev = json!({"type": "agent.tool_use", "id": id, "name": name, "input": {}});
        if let Some(p) = permission {
            ev["evaluated_permission"] = json!(p);
        }
        ev
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Dispatch>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(d) = rx.try_recv() {
            out.push(match d {
                Dispatch::Execute(c) => format!("run {}", c.id),
                Dispatch::Denied(c) => format!("deny {}", c.id),
                Dispatch::Unowned(c) => format!("unowned {}", c.id),
            });
        }
        out
    }

    #[test]
    fn reconcile_skips_calls_answered_later_in_history() {
        let (s, mut rx) = shared();
        let history = vec![
            tool_use("a", "bash", Some("allow")),
            tool_use("b", "read", None),
            json!({"type": "user.tool_result", "tool_use_id": "a", "content": []}),
            json!({"type": "agent.custom_tool_use", "id": "c", "name": "lookup", "input": {}}),
            tool_use("d", "web_fetch", None),
        ];
        reconcile(&s, &history);
        assert_eq!(drain(&mut rx), ["run b", "unowned c", "unowned d"]);
        // The live stream repeats an event already read: not routed twice.
        assert!(on_live_event(&s, &tool_use("b", "read", None)).is_none());
        assert!(drain(&mut rx).is_empty());
    }

    #[test]
    fn permissions_gate_calls() {
        let (s, mut rx) = shared();
        on_live_event(&s, &tool_use("x", "bash", Some("deny")));
        on_live_event(&s, &tool_use("y", "bash", Some("ask")));
        on_live_event(&s, &tool_use("z", "bash", Some("something-new")));
        assert_eq!(drain(&mut rx), ["deny x"]);
        on_live_event(&s, &json!({"type": "user.tool_confirmation", "tool_use_id": "y", "result": "allow"}));
        on_live_event(&s, &json!({"type": "user.tool_confirmation", "tool_use_id": "z", "result": "deny"}));
        assert_eq!(drain(&mut rx), ["run y", "deny z"]);
    }

    #[test]
    fn a_verdict_seen_before_its_call_is_remembered() {
        let (s, mut rx) = shared();
        on_live_event(&s, &json!({"type": "user.tool_confirmation", "tool_use_id": "q", "result": "deny"}));
        on_live_event(&s, &tool_use("q", "bash", Some("ask")));
        assert_eq!(drain(&mut rx), ["deny q"]);
    }

    #[test]
    fn a_call_denied_while_queued_is_skipped() {
        let (s, mut rx) = shared();
        on_live_event(&s, &tool_use("a", "bash", None));
        on_live_event(&s, &json!({"type": "user.tool_confirmation", "tool_use_id": "a", "result": "deny"}));
        assert_eq!(drain(&mut rx), ["run a"]);
        assert!(s.lock().answered.contains("a"), "the dispatcher skips answered calls");
    }

    #[test]
    fn calls_of_terminated_threads_are_dropped() {
        let (s, mut rx) = shared();
        on_live_event(&s, &json!({"type": "session.thread_status_terminated", "session_thread_id": "t1"}));
        let mut ev = tool_use("a", "bash", None);
        ev["session_thread_id"] = json!("t1");
        on_live_event(&s, &ev);
        assert!(drain(&mut rx).is_empty());
    }

    #[test]
    fn the_idle_clock_arms_on_a_turn_end_and_waits_for_outstanding_calls() {
        let (s, mut rx) = shared();
        on_live_event(&s, &tool_use("a", "bash", None));
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        assert!(s.lock().idle_since.is_none(), "a call is still outstanding");
        assert_eq!(drain(&mut rx), ["run a"]);
        s.done("a", true);
        assert!(s.lock().idle_since.is_some());
        // A requires_action idle is not a turn end and disarms.
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "requires_action"}}));
        assert!(s.lock().idle_since.is_none());
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        assert!(s.lock().idle_since.is_some());
        // Confirmations are neutral; a user message disarms.
        on_live_event(&s, &json!({"type": "user.tool_confirmation", "tool_use_id": "zz", "result": "allow"}));
        assert!(s.lock().idle_since.is_some());
        on_live_event(&s, &json!({"type": "user.message", "content": []}));
        assert!(s.lock().idle_since.is_none());
    }

    #[test]
    fn history_ending_the_turn_arms_the_clock() {
        let (s, _rx) = shared();
        reconcile(
            &s,
            &[
                json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}),
                json!({"type": "session.thread_status_terminated", "session_thread_id": "t"}),
            ],
        );
        assert!(s.lock().idle_since.is_some());
    }

    #[test]
    fn termination_ends_the_run() {
        let (s, _rx) = shared();
        assert_eq!(on_live_event(&s, &json!({"type": "session.status_terminated"})), Some(RunEnd::Terminated));
        assert_eq!(on_live_event(&s, &json!({"type": "session.deleted"})), Some(RunEnd::Terminated));
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_fires_after_max_idle() {
        let (s, _rx) = shared();
        let stop = CancellationToken::new();
        let end = Arc::new(Mutex::new(None));
        let dog = tokio::spawn(watchdog(Arc::clone(&s), Duration::from_secs(60), stop.clone(), Arc::clone(&end)));
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!stop.is_cancelled());
        // Activity disarms; a new turn end re-arms from scratch.
        on_live_event(&s, &json!({"type": "user.message"}));
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        tokio::time::sleep(Duration::from_secs(45)).await;
        assert!(!stop.is_cancelled());
        tokio::time::sleep(Duration::from_secs(20)).await;
        dog.await.unwrap();
        assert!(stop.is_cancelled());
        assert_eq!(*end.lock().unwrap(), Some(RunEnd::Idle));
    }
}

/// The routing state machine under random event sequences, reconnects and dispatches.
#[cfg(test)]
mod model {
    use std::collections::{HashMap, HashSet};

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        ToolUse { id: u8, custom: bool, permission: Option<&'static str>, thread: Option<u8> },
        Result { id: u8 },
        Confirm { id: u8, verdict: &'static str },
        ThreadTerminated { thread: u8 },
        IdleEndTurn,
        IdleRequiresAction,
        UserMessage,
        Reconnect,
        Dispatch,
    }

    fn op() -> impl Strategy<Value = Op> {
        let permission =
            prop_oneof![Just(None), Just(Some("allow")), Just(Some("ask")), Just(Some("deny")), Just(Some("later"))];
        prop_oneof![
            4 => (0u8..6, prop::bool::weighted(0.15), permission, prop::option::weighted(0.2, 0u8..2))
                .prop_map(|(id, custom, permission, thread)| Op::ToolUse { id, custom, permission, thread }),
            1 => (0u8..6).prop_map(|id| Op::Result { id }),
            2 => (0u8..6, prop_oneof![Just("allow"), Just("deny"), Just("maybe")]).prop_map(|(id, verdict)| Op::Confirm { id, verdict }),
            1 => (0u8..2).prop_map(|thread| Op::ThreadTerminated { thread }),
            1 => Just(Op::IdleEndTurn),
            1 => Just(Op::IdleRequiresAction),
            1 => Just(Op::UserMessage),
            1 => Just(Op::Reconnect),
            4 => Just(Op::Dispatch),
        ]
    }

    fn id(n: u8) -> String {
        format!("sevt_{n}")
    }

    /// What the test knows about the session, to judge the runner.
    #[derive(Default)]
    struct World {
        /// The server's log (what a history read returns).
        history: Vec<Value>,
        calls: HashMap<String, (bool, Option<&'static str>, Option<String>)>,
        results: HashSet<String>,
        verdicts: HashMap<String, &'static str>,
        terminated: HashSet<String>,
        ran: HashSet<String>,
        /// Calls the server resolved by a denial (permission `deny` or a non-`allow` verdict):
        /// it accepts no confirmation or result for them afterwards.
        resolved: HashSet<String>,
    }

    impl World {
        fn may_run(&self, call: &str) -> bool {
            let (custom, permission, _) = self.calls[call];
            !custom
                && match self.verdicts.get(call) {
                    Some(v) => *v == "allow",
                    None => matches!(permission, None | Some("allow")),
                }
        }
    }

    /// The dispatcher's half, without tools: run (or skip) the next queued call.
    fn dispatch(s: &Shared, rx: &mut mpsc::UnboundedReceiver<Dispatch>, w: &mut World) -> Result<(), TestCaseError> {
        let Ok(d) = rx.try_recv() else { return Ok(()) };
        let Dispatch::Execute(call) = d else { return Ok(()) };
        let skip = {
            let st = s.lock();
            st.answered.contains(&call.id) || call.thread.as_ref().is_some_and(|t| st.terminated_threads.contains(t))
        };
        if skip {
            s.done(&call.id, false);
            return Ok(());
        }
        prop_assert!(!w.ran.contains(&call.id), "{} ran twice", call.id);
        prop_assert!(!w.results.contains(&call.id), "{} ran although answered", call.id);
        prop_assert!(w.may_run(&call.id), "{} ran without permission", call.id);
        w.ran.insert(call.id.clone());
        w.results.insert(call.id.clone());
        w.history.push(json!({"type": "user.tool_result", "tool_use_id": call.id}));
        s.done(&call.id, true);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 2048 } else { 16384 }))]

        #[test]
        fn every_runnable_call_runs_exactly_once_and_nothing_else_runs(ops in prop::collection::vec(op(), 1..60)) {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let s = Shared { state: Mutex::default(), idle_changed: Notify::new(), tx: Mutex::new(Some(tx)) };
            let mut w = World::default();
            for op in ops {
                let live = match op {
                    Op::ToolUse { id: n, custom, permission, thread } => {
                        if w.calls.contains_key(&id(n)) {
                            continue;
                        }
                        let thread = thread.map(|t| format!("thread_{t}"));
                        let mut ev = json!({"type": if custom { "agent.custom_tool_use" } else { "agent.tool_use" },
                                            "id": id(n), "name": "bash", "input": {}});
                        if let Some(p) = permission.filter(|_| !custom) {
                            ev["evaluated_permission"] = json!(p);
                        }
                        if let Some(t) = &thread {
                            ev["session_thread_id"] = json!(t);
                        }
                        w.calls.insert(id(n), (custom, permission.filter(|_| !custom), thread));
                        if permission == Some("deny") && !custom {
                            w.resolved.insert(id(n));
                        }
                        Some(ev)
                    }
                    // Only another client answers: a result for a call that exists, not yet answered.
                    Op::Result { id: n } => {
                        let k = id(n);
                        if !w.calls.contains_key(&k) || w.results.contains(&k) || w.resolved.contains(&k) {
                            continue;
                        }
                        w.results.insert(k.clone());
                        Some(json!({"type": "user.tool_result", "tool_use_id": k}))
                    }
                    Op::Confirm { id: n, verdict } => {
                        let k = id(n);
                        let resolved = w.resolved.contains(&k);
                        if w.verdicts.contains_key(&k) || w.results.contains(&k) || w.ran.contains(&k) || resolved {
                            continue;
                        }
                        w.verdicts.insert(k.clone(), verdict);
                        if verdict != "allow" {
                            w.resolved.insert(k.clone());
                        }
                        Some(json!({"type": "user.tool_confirmation", "tool_use_id": k, "result": verdict}))
                    }
                    Op::ThreadTerminated { thread } => {
                        w.terminated.insert(format!("thread_{thread}"));
                        Some(json!({"type": "session.thread_status_terminated", "session_thread_id": format!("thread_{thread}")}))
                    }
                    Op::IdleEndTurn => Some(json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}})),
                    Op::IdleRequiresAction => Some(json!({"type": "session.status_idle", "stop_reason": {"type": "requires_action"}})),
                    Op::UserMessage => Some(json!({"type": "user.message"})),
                    Op::Reconnect => {
                        reconcile(&s, &w.history);
                        None
                    }
                    Op::Dispatch => {
                        dispatch(&s, &mut rx, &mut w)?;
                        None
                    }
                };
                if let Some(ev) = live {
                    w.history.push(ev.clone());
                    prop_assert!(on_live_event(&s, &ev).is_none());
                }
            }
            // A last reconnect and a full drain: everything that may run has run, once.
            reconcile(&s, &w.history);
            while !rx.is_empty() {
                dispatch(&s, &mut rx, &mut w)?;
            }
            for (call, (_, _, thread)) in &w.calls {
                let open = !w.results.contains(call) || w.ran.contains(call);
                let thread_alive = thread.as_ref().is_none_or(|t| !w.terminated.contains(t));
                if w.may_run(call) && thread_alive && open {
                    prop_assert!(w.ran.contains(call), "{call} never ran");
                }
            }
            // Nothing is outstanding once drained, except calls still waiting for a verdict.
            let st = s.lock();
            prop_assert_eq!(st.outstanding, st.held.len());
            for held in st.held.keys() {
                prop_assert!(!w.verdicts.contains_key(held), "{held} is held although its verdict arrived");
            }
        }
    }
}
