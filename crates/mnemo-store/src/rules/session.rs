//! The session state machine: which event is accepted in which state, which open tool call a
//! result answers, confirmations, the `requires_action` / running transitions, permissions,
//! and when a session needs a worker.
//!
//! [`plan_append`] is a pure function: a backend loads a [`SessionView`] and the [`KnownCall`]s
//! the request refers to, inside its transaction, asks for a plan, and carries the plan's
//! [`Step`]s out in order. It decides nothing itself.

use std::collections::HashMap;

use mnemo_api::{
    ApiKeyId, EnvironmentKeyId, Event, EventId, EventPoster, LoggedEvent, ModelUsage, Permission, PermissionPolicy,
    SessionId, SessionStatus, StatusIdle, StopReason, ToolResult, Toolset, Verdict, WorkId,
};

use crate::{SessionEvent, StoreError};

/// Who appends events, and so what they may post (see [`EventAuthor::may_post`]) and what the
/// log records as their poster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventAuthor {
    /// The server's own agent loop: the agent side only (`agent.*`, `span.*`, `session.error`,
    /// ending a turn).
    Server,
    /// The server's agent loop on a session whose tools the server runs itself (a dream): the
    /// agent side and `agent.tool_result`; its tool calls leave the session running, since the
    /// server answers them.
    ServerTools,
    /// An API key: a person's client, the console, or an agent loop run outside the server —
    /// the user side and the agent side.
    ApiKey(ApiKeyId),
    /// A worker with the environment's key: tool results only, and only to a session that has a
    /// work item in progress.
    EnvironmentKey(EnvironmentKeyId),
    /// A worker with the sessions token of one delivery of `work` for `session`: tool results
    /// only, to that session (the scope decision has checked the session is its own).
    SessionToken { session: SessionId, work: WorkId },
    /// A person with their identity provider's token: the user's side (input and tool results
    /// of their client), never the agent's.
    Person(mnemo_api::UserId),
}

/// Which side of a session an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `agent.*`, `span.*`, `session.error`, ending a turn.
    Agent,
    /// `user.tool_result`, `user.custom_tool_result`: what a worker sends back.
    ToolResult,
    /// `user.message`, `user.interrupt`, `user.tool_confirmation`, `user.define_outcome`,
    /// `system.message`: a person's (or their client's) input.
    User,
}

impl Side {
    /// The side of a posted event; `None` for the status events only the server emits.
    pub fn of(event: &Event) -> Option<Self> {
        Some(match event {
            Event::UserToolResult(_) | Event::UserCustomToolResult(_) => Self::ToolResult,
            Event::UserMessage(_)
            | Event::UserInterrupt(_)
            | Event::UserToolConfirmation(_)
            | Event::UserDefineOutcome(_)
            | Event::SystemMessage(_) => Self::User,
            Event::AgentMessage(_)
            | Event::AgentToolUse(_)
            | Event::AgentCustomToolUse(_)
            | Event::ModelRequestStart
            | Event::ModelRequestEnd(_)
            | Event::SessionError(_)
            | Event::AgentToolResult(_)
            | Event::StatusIdle(_) => Self::Agent,
            Event::StatusRunning | Event::StatusTerminated | Event::Unknown(_) => return None,
        })
    }
}

impl EventAuthor {
    /// Whether this author may post an event of `side` to a session; `has_live_work`: the
    /// session has a work item that is not stopped. The refusal says who may.
    pub fn may_post(&self, side: Side, kind: &str, has_live_work: bool) -> Result<(), String> {
        match (self, side) {
            (Self::ApiKey(_), _) | (Self::Server | Self::ServerTools, Side::Agent) => Ok(()),
            (Self::Server | Self::ServerTools, _) => {
                Err(format!("the server's agent loop posts agent events only, not {kind}"))
            }
            (Self::EnvironmentKey(_) | Self::SessionToken { .. }, Side::Agent) => {
                Err(format!("only an API key driving the session may post {kind} events"))
            }
            (Self::EnvironmentKey(_) | Self::SessionToken { .. }, Side::User) => Err(format!(
                "environment keys and sessions tokens may post tool results only \
                 (`user.tool_result`, `user.custom_tool_result`); {kind} needs an API key"
            )),
            (Self::EnvironmentKey(_), Side::ToolResult) if !has_live_work => {
                Err("this session has no work item in progress: an environment key may post tool results only to a \
                 session its worker serves"
                    .into())
            }
            (Self::EnvironmentKey(_) | Self::SessionToken { .. }, Side::ToolResult) => Ok(()),
            (Self::Person(_), Side::User | Side::ToolResult) => Ok(()),
            (Self::Person(_), Side::Agent) => Err(format!(
                "a person posts the user's side of a session; {kind} is the agent's (an API key driving it may post it)"
            )),
        }
    }

    /// Whether this author drives the agent side (its tool calls leave the session waiting).
    pub fn drives_agent(&self) -> bool {
        matches!(self, Self::Server | Self::ServerTools | Self::ApiKey(_))
    }

    /// Whether this author answers the tool calls it makes itself (`agent.tool_result`), so
    /// they never leave the session waiting.
    pub fn runs_tools(&self) -> bool {
        matches!(self, Self::ServerTools)
    }

    /// What the log records as the poster of this author's events.
    pub fn poster(&self) -> EventPoster {
        match self {
            Self::Server | Self::ServerTools => EventPoster::ServerActor,
            Self::ApiKey(id) => EventPoster::ApiActor { api_key_id: id.clone() },
            Self::EnvironmentKey(id) => EventPoster::EnvironmentKeyActor { environment_key_id: id.clone() },
            Self::SessionToken { session, work } => {
                EventPoster::SessionActor { session_id: session.clone(), work_id: work.clone() }
            }
            Self::Person(user) => EventPoster::UserActor { user_id: user.clone() },
        }
    }
}

/// The kind of tool call an event id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `agent.tool_use`, answered by `user.tool_result`.
    Tool,
    /// `agent.custom_tool_use`, answered by `user.custom_tool_result`.
    Custom,
}

impl CallKind {
    /// The event types of calls, which a result or a denial answers.
    pub const CALL_TYPES: [&'static str; 2] = [Self::Tool.call_type(), Self::Custom.call_type()];

    /// The event type of the result answering such a call, and the field naming the call.
    pub fn result_type_and_key(self) -> (&'static str, &'static str) {
        match self {
            Self::Tool => ("user.tool_result", "tool_use_id"),
            Self::Custom => ("user.custom_tool_result", "custom_tool_use_id"),
        }
    }

    /// The event type of the call.
    pub const fn call_type(self) -> &'static str {
        match self {
            Self::Tool => "agent.tool_use",
            Self::Custom => "agent.custom_tool_use",
        }
    }

    /// The kind of call an event type is, if it is one.
    pub fn of_type(event_type: &str) -> Option<Self> {
        match event_type {
            "agent.tool_use" => Some(Self::Tool),
            "agent.custom_tool_use" => Some(Self::Custom),
            _ => None,
        }
    }
}

/// A tool call of the session's log that a request refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownCall {
    pub kind: CallKind,
    /// Answered by a result, or denied.
    pub answered: bool,
    /// The recorded result that answered it, if a result did (for recognising a retried POST).
    pub answer: Option<(ToolResult, SessionEvent)>,
}

/// What the rules need to know about a session before an append.
#[derive(Debug, Clone)]
pub struct SessionView<'a> {
    pub id: &'a SessionId,
    pub status: SessionStatus,
    pub archived: bool,
    /// Why it last went idle.
    pub stop_reason: Option<StopReason>,
    /// The toolset of the session's agent snapshot: it gives permissions.
    pub tools: Toolset,
    /// Unanswered tool calls, in log order.
    pub open_calls: Vec<EventId>,
    /// Its environment runs a work queue.
    pub self_hosted: bool,
    /// It has a work item that is not stopped.
    pub has_live_work: bool,
}

/// One thing a backend does to carry out an append, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Append this event to the log. `requested`: it is one of the request's events (its
    /// answer lists it), not a status change the server emits.
    Record { event: LoggedEvent, requested: bool },
    /// Mark a tool call (possibly one recorded earlier in this plan) answered.
    MarkAnswered(EventId),
    /// A retried POST of a result already recorded: answer with the recorded event.
    Existing(SessionEvent),
}

/// What an append does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppendPlan {
    pub steps: Vec<Step>,
    /// The session's new status, if it changes.
    pub status: Option<SessionStatus>,
    /// Why the session went idle, if it went idle (kept while it runs again).
    pub stop_reason: Option<StopReason>,
    /// Queue a work item for the session.
    pub enqueue_work: bool,
    /// Tokens the recorded `span.model_request_end` events report: added to the session's usage.
    pub usage: Option<ModelUsage>,
}

/// Where the plan gets what it cannot decide: ids and the time.
pub trait Minter {
    fn event_id(&mut self) -> EventId;
    /// RFC 3339 of the time the append is processed.
    fn processed_at(&self) -> String;
}

/// Mints real ids at a fixed processing time.
#[derive(Debug, Clone)]
pub struct FreshIds(pub String);

impl Minter for FreshIds {
    fn event_id(&mut self) -> EventId {
        EventId::generate()
    }

    fn processed_at(&self) -> String {
        self.0.clone()
    }
}

/// The event ids the request refers to (results and confirmations): a backend loads these as
/// [`KnownCall`]s before planning.
pub fn referenced_calls(events: &[Event]) -> Vec<&EventId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::UserToolResult(r) | Event::UserCustomToolResult(r) | Event::AgentToolResult(r) => Some(&r.call_id),
            Event::UserToolConfirmation(c) => Some(&c.tool_use_id),
            _ => None,
        })
        .collect()
}

/// The calls as the plan goes: those the backend loaded, and those the plan records.
struct Calls {
    known: HashMap<EventId, KnownCall>,
    /// Unanswered calls in log order.
    open: Vec<EventId>,
}

impl Calls {
    fn answer(&mut self, id: &EventId) {
        if let Some(call) = self.known.get_mut(id) {
            call.answered = true;
        }
        self.open.retain(|open| open != id);
    }
}

/// Plans an append of `events` by `author` to the session `view` describes.
pub fn plan_append(
    view: &SessionView<'_>,
    known: HashMap<EventId, KnownCall>,
    events: Vec<Event>,
    author: &EventAuthor,
    minter: &mut impl Minter,
) -> Result<AppendPlan, StoreError> {
    let session = view.id;
    let mut plan = AppendPlan::default();
    let mut calls = Calls { known, open: view.open_calls.clone() };
    let mut status = view.status;
    let mut needs_worker = false;
    let poster = author.poster();
    let mut record = |plan: &mut AppendPlan, event: Event, requested: bool| -> EventId {
        let id = minter.event_id();
        // What the request posted is its author's; what the server emits in answer is the server's.
        let posted_by = Some(if requested { poster.clone() } else { EventPoster::ServerActor });
        let logged = LoggedEvent { id: id.clone(), event, processed_at: Some(minter.processed_at()), posted_by };
        plan.steps.push(Step::Record { event: logged, requested });
        id
    };
    let terminated = view.status == SessionStatus::Terminated || view.archived;
    for event in events {
        if terminated {
            return Err(StoreError::Invalid(format!("session `{session}` is terminated; it accepts no events")));
        }
        if let Some(side) = Side::of(&event) {
            author.may_post(side, event.kind(), view.has_live_work).map_err(StoreError::Forbidden)?;
        }
        match event {
            Event::UserToolResult(ref result) | Event::UserCustomToolResult(ref result) => {
                let kind = if matches!(event, Event::UserToolResult(_)) { CallKind::Tool } else { CallKind::Custom };
                let id = &result.call_id;
                let Some(call) = calls.known.get(id) else {
                    return Err(StoreError::Invalid(format!("no {} `{id}` in session `{session}`", kind.call_type())));
                };
                if call.kind != kind {
                    return Err(StoreError::Invalid(format!(
                        "`{id}` is a {}, which {} cannot answer",
                        call.kind.call_type(),
                        event.kind()
                    )));
                }
                if call.answered {
                    // A retried POST: the same answer again is accepted as it was; another is refused.
                    return match &call.answer {
                        Some((recorded, existing)) if recorded.same_answer(result) => {
                            plan.steps.push(Step::Existing(existing.clone()));
                            continue;
                        }
                        _ => Err(StoreError::Conflict(format!("tool call `{id}` is already answered"))),
                    };
                }
                let id = id.clone();
                calls.answer(&id);
                plan.steps.push(Step::MarkAnswered(id));
                record(&mut plan, event, true);
            }
            Event::AgentToolResult(ref result) => {
                // The server ran the call itself: it answers a built-in or a custom call alike.
                let id = &result.call_id;
                match calls.known.get(id) {
                    None => return Err(StoreError::Invalid(format!("no tool call `{id}` in session `{session}`"))),
                    Some(call) if call.answered => {
                        return Err(StoreError::Conflict(format!("tool call `{id}` is already answered")));
                    }
                    Some(_) => {}
                }
                let id = id.clone();
                calls.answer(&id);
                plan.steps.push(Step::MarkAnswered(id));
                record(&mut plan, event, true);
            }
            Event::UserToolConfirmation(ref confirmation) => {
                let id = &confirmation.tool_use_id;
                match calls.known.get(id) {
                    Some(call) if call.kind == CallKind::Tool && call.answered => {
                        return Err(StoreError::Conflict(format!("tool call `{id}` is already resolved")));
                    }
                    Some(call) if call.kind == CallKind::Tool => {}
                    _ => return Err(StoreError::Invalid(format!("no agent.tool_use `{id}` in session `{session}`"))),
                }
                if confirmation.result == Verdict::Deny {
                    let id = id.clone();
                    calls.answer(&id);
                    plan.steps.push(Step::MarkAnswered(id));
                }
                record(&mut plan, event, true);
            }
            Event::UserMessage(_) | Event::UserInterrupt(_) | Event::UserDefineOutcome(_) | Event::SystemMessage(_) => {
                needs_worker = true;
                record(&mut plan, event, true);
            }
            Event::AgentMessage(_)
            | Event::AgentToolUse(_)
            | Event::AgentCustomToolUse(_)
            | Event::ModelRequestStart
            | Event::ModelRequestEnd(_)
            | Event::SessionError(_) => {
                if let Event::ModelRequestEnd(end) = &event {
                    plan.usage = Some(plan.usage.unwrap_or_default().plus(end.model_usage));
                }
                // An error or the end of a model call reports on the turn; it does not start one.
                let reports = matches!(event, Event::ModelRequestEnd(_) | Event::SessionError(_));
                if status != SessionStatus::Running && !reports {
                    record(&mut plan, Event::StatusRunning, false);
                    status = SessionStatus::Running;
                    plan.status = Some(status);
                }
                let (event, kind, denied) = match event {
                    Event::AgentToolUse(mut call) => {
                        let (permission, policy) = view.tools.permission(&call.name);
                        call.evaluated_permission = Some(permission);
                        call.evaluation = policy.map(PermissionPolicy::to_json);
                        (Event::AgentToolUse(call), Some(CallKind::Tool), permission == Permission::Deny)
                    }
                    Event::AgentCustomToolUse(mut call) => {
                        call.evaluated_permission = None;
                        call.evaluation = None;
                        (Event::AgentCustomToolUse(call), Some(CallKind::Custom), false)
                    }
                    message => (message, None, false),
                };
                let id = record(&mut plan, event, true);
                if let Some(kind) = kind {
                    needs_worker = true;
                    calls.known.insert(id.clone(), KnownCall { kind, answered: denied, answer: None });
                    if denied {
                        plan.steps.push(Step::MarkAnswered(id));
                    } else {
                        calls.open.push(id);
                    }
                }
            }
            Event::StatusIdle(idle) => {
                if !calls.open.is_empty() {
                    return Err(StoreError::Invalid(format!(
                        "{} tool call(s) still wait for results; the turn cannot end yet",
                        calls.open.len()
                    )));
                }
                if idle.stop_reason.requires_action() {
                    return Err(StoreError::Invalid(
                        "a turn cannot end with `requires_action`: the server reports it while tool calls wait".into(),
                    ));
                }
                let reason = idle.stop_reason.clone();
                record(
                    &mut plan,
                    Event::StatusIdle(StatusIdle { stop_reason: reason.clone(), stop_details: None }),
                    true,
                );
                status = SessionStatus::Idle;
                plan.status = Some(status);
                plan.stop_reason = Some(reason);
            }
            Event::StatusRunning | Event::StatusTerminated | Event::Unknown(_) => {
                return Err(StoreError::Invalid(format!("events of type `{}` cannot be posted", event.kind())));
            }
        }
    }
    if status == SessionStatus::Running && !calls.open.is_empty() && author.drives_agent() && !author.runs_tools() {
        // The agent is blocked on tool calls: the session idles, asking for their results.
        let reason = StopReason::RequiresAction { event_ids: calls.open.clone() };
        record(&mut plan, Event::StatusIdle(StatusIdle { stop_reason: reason.clone(), stop_details: None }), false);
        plan.status = Some(SessionStatus::Idle);
        plan.stop_reason = Some(reason);
    } else if view.status == SessionStatus::Idle
        && status == SessionStatus::Idle
        && calls.open.is_empty()
        && view.stop_reason.as_ref().is_some_and(StopReason::requires_action)
    {
        // Every call is answered: the agent runs again.
        record(&mut plan, Event::StatusRunning, false);
        plan.status = Some(SessionStatus::Running);
    }
    plan.enqueue_work = needs_worker && view.self_hosted && !view.has_live_work;
    Ok(plan)
}

#[cfg(test)]
mod tests;
