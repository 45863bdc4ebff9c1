//! The pure half of the runner: which calls run, which are denied or held for a confirmation,
//! which belong to another client, and when the idle clock runs. [`Shared`] holds that state for
//! the stream task (which feeds it history and live events) and the dispatcher (which reports
//! calls done); nothing here does I/O.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::RunEnd;
use crate::tools::Toolset;

/// A tool call as its event announced it.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) input: Value,
    pub(super) thread: Option<String>,
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

/// What the dispatcher is told to do with a routed call.
#[derive(Debug)]
pub(super) enum Dispatch {
    Execute(Call),
    Denied(Call),
    Unowned(Call),
}

/// What the stream task and the dispatcher share.
#[derive(Debug, Default)]
pub(super) struct State {
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
    pub(super) idle_since: Option<Instant>,
    /// Between the start of a history read and its success (or a live non-neutral event), a
    /// thread termination is not neutral: the idle that armed the clock may be outdated.
    pub(super) reading_history: bool,
}

impl State {
    /// Whether a routed call no longer needs running: answered meanwhile, or its thread ended.
    pub(super) fn settled(&self, call: &Call) -> bool {
        self.answered.contains(&call.id) || self.thread_ended(call)
    }

    /// Whether the call's thread ended.
    pub(super) fn thread_ended(&self, call: &Call) -> bool {
        call.thread.as_ref().is_some_and(|t| self.terminated_threads.contains(t))
    }
}

/// The routing state behind a lock, the idle clock's wake-up and the dispatch queue.
#[derive(Debug)]
pub(super) struct Shared {
    state: Mutex<State>,
    pub(super) idle_changed: Notify,
    tx: Mutex<Option<mpsc::UnboundedSender<Dispatch>>>,
}

impl Shared {
    /// Empty state, routing into `tx`.
    pub(super) fn new(tx: mpsc::UnboundedSender<Dispatch>) -> Self {
        Self { state: Mutex::default(), idle_changed: Notify::new(), tx: Mutex::new(Some(tx)) }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("runner state lock")
    }

    fn send(&self, d: Dispatch) {
        if let Some(tx) = self.tx.lock().expect("runner tx lock").as_ref() {
            let _ = tx.send(d);
        }
    }

    /// Closes the queue for new calls; buffered ones are still drained.
    pub(super) fn close(&self) {
        self.tx.lock().expect("runner tx lock").take();
    }

    /// Routes one unanswered call (spec §6.3). Runs under the state lock.
    fn route(&self, st: &mut State, call: Call, permission: Option<&str>) {
        if st.answered.contains(&call.id) || st.held.contains_key(&call.id) {
            return;
        }
        if st.thread_ended(&call) {
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
    pub(super) fn done(&self, id: &str, answered: bool) {
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

/// Reads the whole history before acting, so a call answered later in it is not re-run.
pub(super) fn reconcile(shared: &Shared, history: &[Value]) {
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
pub(super) fn on_live_event(shared: &Shared, ev: &Value) -> Option<RunEnd> {
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

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use super::*;

    pub(in crate::runner) fn shared() -> (Arc<Shared>, mpsc::UnboundedReceiver<Dispatch>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Shared::new(tx)), rx)
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
        if s.lock().settled(&call) {
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
            let s = Shared::new(tx);
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
