//! One activation of a session's turn: call the model while the session owes it a step, stream
//! the answer into the log, and stop when the session idles (the turn ended, or tool calls
//! wait for their results — their last result runs the session again and a new activation
//! carries on from the log).
//!
//! Every event goes through [`mnemo_store::Operations::append_events`] with the agent as author, so
//! the session state machine (`requires_action`, permissions, confirmations) is the one
//! external drivers go through. The caller holds the session's turn lease throughout.

use std::pin::pin;
use std::time::Duration;

use futures::StreamExt;
use mnemo_api::{
    Backoff, ContentBlock, ErrorObject, Event, EventId, LoggedEvent, Message, ModelRequestEnd, ModelUsage, RetryStatus,
    SessionError, SessionErrorKind, SessionId, StatusIdle, StopReason, ToolUse, Toolset, WorkspaceId,
};
use mnemo_model::{Block, ModelError, ReplyEvent, Resolved};
use mnemo_store::rules::agent::{self, Due};
use mnemo_store::{SessionEvent, StoreError};
use rand::Rng;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{Ctx, request};

/// How a step's model call ended.
enum CallEnd {
    /// The model finished; `pending` are the events it produced that wait to be appended with
    /// the end of the call (its tool calls, and any text after the first of them).
    Finished {
        stop: mnemo_model::StopReason,
        usage: mnemo_model::Usage,
        pending: Vec<Event>,
    },
    Interrupted,
    TimedOut,
    Failed(ModelError),
}

/// How one attempt of a call ended.
enum Attempt {
    End(CallEnd),
    /// A provider error; `recorded`: the messages of the answer this attempt put in the log
    /// before it broke (a retry continues after them rather than saying them twice).
    Error {
        error: ModelError,
        recorded: Vec<LoggedEvent>,
    },
}

fn logged(events: Vec<SessionEvent>) -> Vec<LoggedEvent> {
    events.into_iter().map(|e| e.event).collect()
}

fn idle(reason: StopReason) -> Event {
    Event::StatusIdle(StatusIdle { stop_reason: reason, stop_details: None })
}

fn end_of_call(start: &EventId, usage: ModelUsage, is_error: bool) -> Event {
    Event::ModelRequestEnd(ModelRequestEnd {
        model_request_start_id: start.clone(),
        is_error: Some(is_error),
        model_usage: usage,
    })
}

fn usage_of(u: &mnemo_model::Usage) -> ModelUsage {
    ModelUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
    }
}

/// The `session.error` for a provider failure: the provider's name, the HTTP status and the
/// error type ([`ModelError::summary`]) — never the provider's own words, which may echo the
/// key and which the sandbox could read in the log. The operator's log has them (cleaned).
pub(crate) fn session_error(error: &ModelError, provider: &str, retry: RetryStatus) -> Event {
    let kind = match error {
        ModelError::RateLimited { .. } => SessionErrorKind::ModelRateLimitedError,
        ModelError::Overloaded => SessionErrorKind::ModelOverloadedError,
        _ => SessionErrorKind::ModelRequestFailedError,
    };
    let message = format!("the model request to provider `{provider}` failed: {}", error.summary());
    Event::SessionError(SessionError { error: ErrorObject { kind, message, retry_status: retry } })
}

/// The agent event for a tool call the model made: a built-in tool of the agent's toolset is an
/// `agent.tool_use` (the worker runs it), one of its custom tools an `agent.custom_tool_use` (the
/// client answers it). A name the agent does not know goes to the worker, which refuses it.
fn tool_call(tools: &Toolset, name: String, input: Value) -> Event {
    let input = match input {
        Value::Object(map) => map,
        other => Map::from_iter([("input".to_owned(), other)]),
    };
    let call = ToolUse { name, input, evaluated_permission: None, evaluation: None };
    if !request::is_built_in(&call.name) && tools.is_custom(&call.name) {
        Event::AgentCustomToolUse(call)
    } else {
        Event::AgentToolUse(call)
    }
}

/// The pause before retry `attempt` of a model call: `retry`'s delay for the draw `r`, never
/// shorter than the provider asked.
pub(crate) fn retry_delay(retry: &Backoff, attempt: u32, retry_after: Option<Duration>, r: f64) -> Duration {
    let delay = retry.delay_with(attempt, r);
    retry_after.map_or(delay, |after| delay.max(after))
}

/// When the turn must end: its first event's time plus the bound (the store's clock wrote it).
fn deadline(started_at: Option<&str>, bound: Duration) -> Instant {
    let elapsed = started_at
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .and_then(|t| (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).to_std().ok())
        .unwrap_or_default();
    Instant::now() + bound.saturating_sub(elapsed)
}

/// What the session owes its agent now (see [`agent::due`]).
fn due_of(session: &mnemo_api::Session, log: &[LoggedEvent]) -> Due {
    agent::due(session.status, session.stop_reason.as_ref(), log)
}

/// Whether the session owes its agent anything (read before claiming the turn lease).
pub(crate) async fn owes_a_step(
    ctx: &Ctx,
    ws: &WorkspaceId,
    id: &SessionId,
    session: &mnemo_api::Session,
) -> Result<bool, StoreError> {
    let log = logged(ctx.store.events_after(ws, id, 0).await?);
    Ok(due_of(session, &log) != Due::Nothing)
}

/// Tools the server runs itself for a session (a dream's): each call is answered in the log at
/// once (`agent.tool_result`), so the session never waits on a worker.
pub(crate) trait ToolHost: Send + Sync {
    /// Runs one call: the result's text, and whether it is an error the model should read.
    fn run<'a>(&'a self, call: &'a ToolUse) -> futures::future::BoxFuture<'a, (String, bool)>;
}

/// How far one turn may go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) max_model_calls: u32,
    pub(crate) timeout: Duration,
}

/// Runs the session's turn while it owes its agent a step (see [`agent::due`]); with `host`,
/// the server runs the agent's tool calls itself and the turn goes on until the model stops.
pub(crate) async fn run(
    ctx: &Ctx,
    ws: &WorkspaceId,
    id: &SessionId,
    resolved: &Resolved,
    wake: &tokio::sync::Notify,
    host: Option<&dyn ToolHost>,
    bounds: Bounds,
) -> Result<(), StoreError> {
    loop {
        let session = ctx.store.get_session(ws, id).await?;
        let events = ctx.store.events_after(ws, id, 0).await?;
        let seen = events.last().map_or(0, |e| e.seq);
        let log = logged(events);
        match due_of(&session, &log) {
            Due::Nothing => return Ok(()),
            Due::EndInterrupted => {
                ctx.append(ws, id, vec![idle(StopReason::EndTurn)]).await?;
                return Ok(());
            }
            Due::Run => {}
        }
        let progress = agent::progress(&log);
        if progress.model_calls >= bounds.max_model_calls {
            tracing::info!(session.id = %id, calls = progress.model_calls, "the turn reached its model call limit");
            ctx.append(ws, id, vec![idle(StopReason::ModelCallLimitReached)]).await?;
            return Ok(());
        }
        let deadline = deadline(progress.started_at.as_deref(), bounds.timeout);
        if progress.started_at.is_some() && deadline <= Instant::now() {
            ctx.append(ws, id, vec![idle(StopReason::TurnTimeout)]).await?;
            return Ok(());
        }
        // The start comes first: the request is read from the log after it, so whatever the
        // start follows is what this call sees (see `agent::due`).
        let started = ctx.append(ws, id, vec![Event::ModelRequestStart]).await?;
        let start =
            started.recorded.first().ok_or_else(|| StoreError::backend("the model call start was not recorded"))?;
        let start_id: EventId = start.event.id.clone();
        let start_seq = start.seq;
        let log = logged(ctx.store.events_after(ws, id, 0).await?.into_iter().filter(|e| e.seq <= start_seq).collect());
        let step = Step {
            ctx,
            ws,
            id,
            agent: &session.agent,
            model: session.agent["model"]["id"].as_str().unwrap_or_default(),
            tools: Toolset::of_agent(&session.agent),
            memory_prompt: session.memory_prompt.as_deref(),
            log: &log,
            resolved,
            seen,
            deadline,
            wake,
        };
        match step.call().await? {
            CallEnd::Finished { stop, usage, mut pending } => {
                let waits = pending.iter().any(|e| matches!(e, Event::AgentToolUse(_) | Event::AgentCustomToolUse(_)));
                pending.push(end_of_call(&start_id, usage_of(&usage), false));
                if !waits {
                    let reason = if matches!(stop, mnemo_model::StopReason::Refusal) {
                        StopReason::Refusal
                    } else {
                        StopReason::EndTurn
                    };
                    pending.push(idle(reason));
                }
                if let (true, Some(host)) = (waits, host) {
                    run_tools(ctx, ws, id, pending, host).await?;
                    continue;
                }
                ctx.append(ws, id, pending).await?;
                if !waits {
                    return Ok(());
                }
                // Tool calls: the session idles waiting for them, unless every one was denied
                // at once (then it still runs and the loop goes on).
            }
            CallEnd::Interrupted => {
                ctx.append(
                    ws,
                    id,
                    vec![end_of_call(&start_id, ModelUsage::default(), false), idle(StopReason::EndTurn)],
                )
                .await?;
                return Ok(());
            }
            CallEnd::TimedOut => {
                tracing::info!(session.id = %id, "the turn ran out of time");
                ctx.append(
                    ws,
                    id,
                    vec![end_of_call(&start_id, ModelUsage::default(), true), idle(StopReason::TurnTimeout)],
                )
                .await?;
                return Ok(());
            }
            CallEnd::Failed(error) => {
                tracing::warn!(session.id = %id, provider = %resolved.provider_name, error = %error, "a model call failed");
                ctx.append(
                    ws,
                    id,
                    vec![
                        end_of_call(&start_id, ModelUsage::default(), true),
                        session_error(&error, &resolved.provider_name, RetryStatus::Exhausted),
                        idle(StopReason::RetriesExhausted),
                    ],
                )
                .await?;
                return Ok(());
            }
        }
    }
}

/// Appends a step's tool calls (with the end of its model call), runs each allowed one on
/// `host`, and appends their results in one append.
async fn run_tools(
    ctx: &Ctx,
    ws: &WorkspaceId,
    id: &SessionId,
    pending: Vec<Event>,
    host: &dyn ToolHost,
) -> Result<(), StoreError> {
    let appended = ctx.append_as(ws, id, pending, mnemo_store::EventAuthor::ServerTools).await?;
    let mut results = Vec::new();
    for logged in &appended.recorded {
        let (Event::AgentToolUse(call) | Event::AgentCustomToolUse(call)) = &logged.event.event else { continue };
        if call.evaluated_permission == Some(mnemo_api::Permission::Deny) {
            continue;
        }
        let (text, is_error) = host.run(call).await;
        results.push(Event::AgentToolResult(mnemo_api::ToolResult {
            call_id: logged.event.id.clone(),
            content: Some(vec![ContentBlock::text(text)]),
            is_error: Some(is_error),
        }));
    }
    if !results.is_empty() {
        ctx.append_as(ws, id, results, mnemo_store::EventAuthor::ServerTools).await?;
    }
    Ok(())
}

/// One step: the call of the model for the log up to its start.
struct Step<'a> {
    ctx: &'a Ctx,
    ws: &'a WorkspaceId,
    id: &'a SessionId,
    agent: &'a Value,
    /// The agent's model id (what its rate limits are counted by).
    model: &'a str,
    tools: Toolset,
    memory_prompt: Option<&'a str>,
    log: &'a [LoggedEvent],
    resolved: &'a Resolved,
    /// The newest position the step's decision read: an interrupt after it ends the step.
    seen: i64,
    deadline: Instant,
    wake: &'a tokio::sync::Notify,
}

impl Step<'_> {
    /// Resolves once a `user.interrupt` is in the log after [`Self::seen`].
    async fn interrupted(&self) {
        loop {
            match self.ctx.store.events_after(self.ws, self.id, self.seen).await {
                Ok(events) if events.iter().any(|e| matches!(e.event.event, Event::UserInterrupt(_))) => return,
                Ok(_) => {}
                Err(e) => tracing::warn!(session.id = %self.id, error = %e.chain(), "cannot look for an interrupt"),
            }
            self.wake.notified().await;
        }
    }

    /// Calls the model, retrying retryable failures with back-off within the bounds. A stream
    /// that broke after some of the answer was recorded is retried with that part as the start
    /// of the model's answer, so the model carries on from it.
    async fn call(&self) -> Result<CallEnd, StoreError> {
        let limits = &self.ctx.limits;
        let interrupted = pin!(self.interrupted());
        let mut interrupted = interrupted;
        let mut attempt = 0;
        let mut log = self.log.to_vec();
        loop {
            if let Some(end) = self.within_rate_limits(interrupted.as_mut()).await? {
                return Ok(end);
            }
            let request = request::build(self.agent, self.memory_prompt, &log, &self.resolved.model, limits.max_tokens);
            let error = match self.attempt(request, interrupted.as_mut()).await? {
                Attempt::End(end) => {
                    if let CallEnd::Finished { usage, .. } = &end {
                        self.ctx.meter.charge(self.ws, self.model, usage).await?;
                    }
                    return Ok(end);
                }
                Attempt::Error { error, recorded } => {
                    log.extend(recorded);
                    error
                }
            };
            let exhausted = limits.retry.retries.is_some_and(|limit| attempt >= limit);
            if !error.is_retryable() || exhausted {
                return Ok(CallEnd::Failed(error));
            }
            let delay = retry_delay(&limits.retry, attempt, error.retry_after(), rand::rng().random::<f64>());
            if Instant::now() + delay >= self.deadline {
                return Ok(CallEnd::Failed(error));
            }
            tracing::info!(session.id = %self.id, attempt, delay_ms = delay.as_millis() as u64, error = %error, "retrying a model call");
            self.ctx
                .append(
                    self.ws,
                    self.id,
                    vec![session_error(&error, &self.resolved.provider_name, RetryStatus::Retrying)],
                )
                .await?;
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = interrupted.as_mut() => return Ok(CallEnd::Interrupted),
            }
            attempt += 1;
        }
    }

    /// Waits until the workspace's model rate limits let a call start (and counts it), inside
    /// the session: `Some` when the wait ended the step instead (an interrupt, the turn's
    /// time).
    async fn within_rate_limits(
        &self,
        mut interrupted: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Result<Option<CallEnd>, StoreError> {
        while let Some(wait) = self.ctx.meter.admit(self.ws, self.model).await? {
            tracing::info!(session.id = %self.id, wait_s = wait.as_secs(), "a model rate limit of the workspace holds the call back");
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = interrupted.as_mut() => return Ok(Some(CallEnd::Interrupted)),
                () = tokio::time::sleep_until(self.deadline) => return Ok(Some(CallEnd::TimedOut)),
            }
        }
        Ok(None)
    }

    /// One attempt: opens the stream and appends each completed text block as an
    /// `agent.message` as soon as it is complete — unless a tool call came before it, which
    /// keeps it for the end of the call so that the calls and the text stay in order and the
    /// session idles once, with every call of the step.
    async fn attempt(
        &self,
        request: mnemo_model::ModelRequest,
        mut interrupted: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Result<Attempt, StoreError> {
        let opened = tokio::select! {
            opened = self.resolved.provider.stream(request) => opened,
            () = interrupted.as_mut() => return Ok(Attempt::End(CallEnd::Interrupted)),
            () = tokio::time::sleep_until(self.deadline) => return Ok(Attempt::End(CallEnd::TimedOut)),
        };
        let mut stream = match opened {
            Ok(stream) => stream,
            Err(error) => return Ok(Attempt::Error { error, recorded: Vec::new() }),
        };
        let mut pending: Vec<Event> = Vec::new();
        let mut recorded: Vec<LoggedEvent> = Vec::new();
        loop {
            let item = tokio::select! {
                // Dropping the stream on the way out cancels the call.
                () = interrupted.as_mut() => return Ok(Attempt::End(CallEnd::Interrupted)),
                () = tokio::time::sleep_until(self.deadline) => return Ok(Attempt::End(CallEnd::TimedOut)),
                item = stream.next() => item,
            };
            match item {
                Some(Ok(ReplyEvent::Block(Block::Text { text }))) => {
                    if text.is_empty() {
                        continue;
                    }
                    let message = Event::AgentMessage(Message { content: vec![ContentBlock::text(text)] });
                    if pending.is_empty() {
                        let appended = self.ctx.append(self.ws, self.id, vec![message]).await?;
                        recorded.extend(logged(appended.recorded));
                    } else {
                        pending.push(message);
                    }
                }
                Some(Ok(ReplyEvent::Block(Block::ToolUse { name, input, .. }))) => {
                    pending.push(tool_call(&self.tools, name, input));
                }
                // A model never sends results; nothing to record.
                Some(Ok(ReplyEvent::Block(Block::ToolResult { .. }))) => {}
                Some(Ok(ReplyEvent::Finished { stop_reason, usage })) => {
                    return Ok(Attempt::End(CallEnd::Finished { stop: stop_reason, usage, pending }));
                }
                Some(Err(error)) => return Ok(Attempt::Error { error, recorded }),
                None => {
                    let error = ModelError::Stream("the reply ended before it finished".into());
                    return Ok(Attempt::Error { error, recorded });
                }
            }
        }
    }
}
