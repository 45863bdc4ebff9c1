//! The agent loop's rules: who runs a session's turn (the turn lease), whether a session owes
//! its agent a turn, and how far the current turn has gone.
//!
//! The lease makes one runner per session turn across every process sharing a database: a
//! runner claims it before it appends anything as the agent, renews it while it works, and
//! releases it when the session goes idle. A lease whose holder died lapses after its TTL (on
//! the store's clock), and any process may then claim it and carry the turn on from the log.

use mnemo_api::{Event, LoggedEvent, SessionStatus, StopReason};

/// A session's turn lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnLease {
    /// Who runs the turn (a process-unique name).
    pub holder: String,
    /// When it lapses (microseconds, the store's clock).
    pub expires_at: i64,
}

/// What a claim of the turn lease does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the lease (new or renewed) until this.
    Granted(TurnLease),
    /// Another holder's lease still runs: the caller must not run the turn.
    Held,
}

/// Judges a claim of the turn lease by `holder` at `now` for `ttl_micros`: granted when nobody
/// holds it, the caller already does (a renewal), or the holder's lease has lapsed.
pub fn claim(current: Option<&TurnLease>, holder: &str, now: i64, ttl_micros: i64) -> Claim {
    match current {
        Some(lease) if lease.holder != holder && lease.expires_at > now => Claim::Held,
        _ => Claim::Granted(TurnLease { holder: holder.to_owned(), expires_at: now.saturating_add(ttl_micros) }),
    }
}

/// Whether a release by `holder` clears the lease (only its own).
pub fn releases(current: Option<&TurnLease>, holder: &str) -> bool {
    current.is_some_and(|lease| lease.holder == holder)
}

/// What a session owes its agent, judged from its status and log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing: idle with nothing new, waiting on tool results, or terminated.
    Nothing,
    /// Call the model: a new message arrived, every tool call of a step is answered, or a turn
    /// was left running by a runner that died.
    Run,
    /// A turn left running was interrupted: end it without calling the model.
    EndInterrupted,
}

/// What the session owes its agent. `log` is the session's events in log order.
///
/// A `user.message` is consumed by the next model call: the loop records
/// `span.model_request_start` before it reads the log for a request, so a message is new
/// exactly when it comes after the newest start (and after the newest interrupt, which ends
/// the turn the message belonged to).
pub fn due(status: SessionStatus, stop_reason: Option<&StopReason>, log: &[LoggedEvent]) -> Due {
    let start = log.iter().rposition(|e| matches!(e.event, Event::ModelRequestStart));
    let interrupt = log.iter().rposition(|e| matches!(e.event, Event::UserInterrupt(_)));
    match status {
        SessionStatus::Terminated => Due::Nothing,
        SessionStatus::Running | SessionStatus::Rescheduling => {
            if interrupt > start {
                Due::EndInterrupted
            } else {
                Due::Run
            }
        }
        SessionStatus::Idle => {
            if stop_reason.is_some_and(StopReason::requires_action) {
                return Due::Nothing;
            }
            let seen = start.max(interrupt);
            let fresh = log
                .iter()
                .enumerate()
                .any(|(i, e)| matches!(e.event, Event::UserMessage(_)) && seen.is_none_or(|s| i > s));
            if fresh { Due::Run } else { Due::Nothing }
        }
    }
}

/// How far the current turn has gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnProgress {
    /// Model calls started in this turn.
    pub model_calls: u32,
    /// `processed_at` of the turn's first event (RFC 3339), if it has begun.
    pub started_at: Option<String>,
}

/// The current turn's progress: the turn began after the last `session.status_idle` that ended
/// a turn (any stop reason but `requires_action`).
pub fn progress(log: &[LoggedEvent]) -> TurnProgress {
    let ended =
        log.iter().rposition(|e| matches!(&e.event, Event::StatusIdle(idle) if !idle.stop_reason.requires_action()));
    let turn = &log[ended.map_or(0, |i| i + 1)..];
    let model_calls = turn.iter().filter(|e| matches!(e.event, Event::ModelRequestStart)).count();
    let started_at = turn
        .iter()
        .find(|e| matches!(e.event, Event::StatusRunning | Event::ModelRequestStart))
        .and_then(|e| e.processed_at.clone());
    TurnProgress { model_calls: u32::try_from(model_calls).unwrap_or(u32::MAX), started_at }
}

#[cfg(test)]
mod tests {
    use mnemo_api::EventId;
    use serde_json::{Value, json};

    use super::*;

    fn lease(holder: &str, expires_at: i64) -> TurnLease {
        TurnLease { holder: holder.into(), expires_at }
    }

    #[test]
    fn the_lease_goes_to_one_holder_until_it_lapses() {
        let cases = [
            (None, "a", Claim::Granted(lease("a", 130))),
            (Some(lease("a", 110)), "a", Claim::Granted(lease("a", 130))),
            (Some(lease("b", 101)), "a", Claim::Held),
            (Some(lease("b", 100)), "a", Claim::Granted(lease("a", 130))),
            (Some(lease("b", 50)), "a", Claim::Granted(lease("a", 130))),
        ];
        for (current, holder, expected) in cases {
            assert_eq!(claim(current.as_ref(), holder, 100, 30), expected, "{current:?} claimed by {holder}");
        }
        assert!(releases(Some(&lease("a", 1)), "a"));
        assert!(!releases(Some(&lease("b", 1)), "a"));
        assert!(!releases(None, "a"));
    }

    /// A log event from its JSON (without its id, which is made up).
    fn logged(mut value: Value) -> LoggedEvent {
        value["id"] = json!(EventId::generate());
        LoggedEvent::from_json(value).unwrap()
    }

    fn log(types: &[&str]) -> Vec<LoggedEvent> {
        types.iter().map(|t| logged(event_of(t))).collect()
    }

    /// The smallest event of a type.
    fn event_of(kind: &str) -> Value {
        match kind {
            "user.tool_result" => json!({"type": kind, "tool_use_id": EventId::generate()}),
            _ => json!({"type": kind, "content": [], "name": "t", "input": {}}),
        }
    }

    #[test]
    fn a_session_owes_a_turn_for_new_input_and_for_turns_left_running() {
        use SessionStatus::{Idle, Running, Terminated};
        let end = StopReason::EndTurn;
        let waits = StopReason::RequiresAction { event_ids: vec![] };
        let cases: &[(SessionStatus, Option<&StopReason>, &[&str], Due)] = &[
            (Idle, None, &[], Due::Nothing),
            (Idle, None, &["user.message"], Due::Run),
            (Idle, Some(&end), &["user.message", "span.model_request_start", "agent.message"], Due::Nothing),
            // A message that came during the last call was not seen by it.
            (Idle, Some(&end), &["user.message", "span.model_request_start", "user.message"], Due::Run),
            (Idle, Some(&end), &["user.message", "user.interrupt"], Due::Nothing),
            (Idle, Some(&end), &["user.message", "user.interrupt", "user.message"], Due::Run),
            // Waiting on tools: the results, not the message, start the next step.
            (Idle, Some(&waits), &["span.model_request_start", "agent.tool_use", "user.message"], Due::Nothing),
            (Running, None, &["user.message", "span.model_request_start", "user.tool_result"], Due::Run),
            (Running, None, &["span.model_request_start", "user.interrupt"], Due::EndInterrupted),
            (Running, None, &["user.interrupt", "span.model_request_start"], Due::Run),
            (Terminated, None, &["user.message"], Due::Nothing),
        ];
        for (status, reason, types, expected) in cases {
            assert_eq!(due(*status, *reason, &log(types)), *expected, "{status:?} {reason:?} {types:?}");
        }
    }

    #[test]
    fn progress_counts_the_model_calls_of_the_current_turn_only() {
        let mut events: Vec<LoggedEvent> = [
            json!({"type": "user.message", "content": []}),
            json!({"type": "session.status_running", "processed_at": "t1"}),
            json!({"type": "span.model_request_start", "processed_at": "t1"}),
            json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}),
            json!({"type": "user.message", "content": []}),
        ]
        .into_iter()
        .map(logged)
        .collect();
        assert_eq!(progress(&events), TurnProgress { model_calls: 0, started_at: None });
        events.extend(
            [
                json!({"type": "session.status_running", "processed_at": "t2"}),
                json!({"type": "span.model_request_start", "processed_at": "t2"}),
                json!({"type": "session.status_idle", "stop_reason": {"type": "requires_action", "event_ids": []}}),
                json!({"type": "session.status_running", "processed_at": "t3"}),
                json!({"type": "span.model_request_start", "processed_at": "t3"}),
                // An event this build does not know changes nothing.
                json!({"type": "agent.thinking", "processed_at": "t3"}),
            ]
            .into_iter()
            .map(logged),
        );
        assert_eq!(progress(&events), TurnProgress { model_calls: 2, started_at: Some("t2".into()) });
    }
}
