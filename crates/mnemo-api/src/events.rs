//! Session events: every type the API accepts on `POST /v1/sessions/{id}/events` (and in a
//! session's `initial_events`) and every type the server emits into a session's log.
//!
//! Requests are parsed once, at the edge, with [`Event::parse`]: an unknown type or a malformed
//! field is an [`EventError`] that names the field. Content blocks stay JSON objects (their
//! many shapes are the model's business, not the log's), checked only for a string `type`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::ids::{ApiKeyId, EnvironmentKeyId, EventId, SessionId, WorkId};

/// One content block (`text`, `image`, `document`, `search_result`, `redacted`, …), kept as
/// the JSON object the client sent.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(transparent)]
pub struct ContentBlock(Map<String, Value>);

impl ContentBlock {
    /// A `{"type": "text", "text": …}` block.
    pub fn text(text: impl Into<String>) -> Self {
        let mut block = Map::new();
        block.insert("type".into(), Value::String("text".into()));
        block.insert("text".into(), Value::String(text.into()));
        Self(block)
    }

    /// The block's `type`.
    pub fn kind(&self) -> &str {
        self.0.get("type").and_then(Value::as_str).unwrap_or_default()
    }

    /// The block's fields (`type` included).
    pub fn fields(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let block = Map::<String, Value>::deserialize(d)?;
        match block.get("type") {
            Some(Value::String(_)) => Ok(Self(block)),
            _ => Err(serde::de::Error::custom("a content block needs a string `type`")),
        }
    }
}

/// A person's answer to a tool call that asked for confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
}

/// What an agent's configuration lets a built-in tool call do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Run it.
    Allow,
    /// Hold it until a `user.tool_confirmation` arrives.
    Ask,
    /// Never run it; it counts as answered.
    Deny,
}

/// Why a session went idle (`session.status_idle.stop_reason`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    /// The agent waits on these tool calls (emitted by the server, never posted).
    RequiresAction {
        event_ids: Vec<EventId>,
    },
    RetriesExhausted,
    BudgetReached,
    Refusal,
    /// mnemo: the agent loop made as many model calls in one turn as its limit allows.
    ModelCallLimitReached,
    /// mnemo: the agent loop's turn ran longer than its wall-clock bound.
    TurnTimeout,
}

impl StopReason {
    /// Whether the session waits on tool calls rather than on new input.
    pub fn requires_action(&self) -> bool {
        matches!(self, Self::RequiresAction { .. })
    }

    /// The wire `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::RequiresAction { .. } => "requires_action",
            Self::RetriesExhausted => "retries_exhausted",
            Self::BudgetReached => "budget_reached",
            Self::Refusal => "refusal",
            Self::ModelCallLimitReached => "model_call_limit_reached",
            Self::TurnTimeout => "turn_timeout",
        }
    }
}

/// `user.message`, `system.message` and `agent.message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Message {
    pub content: Vec<ContentBlock>,
}

/// `user.interrupt`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Interrupt {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_thread_id: Option<String>,
}

/// `user.tool_confirmation`: allow or deny an `agent.tool_use` whose permission is `ask`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolConfirmation {
    pub tool_use_id: EventId,
    pub result: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_message: Option<String>,
}

/// `user.tool_result` and `user.custom_tool_result`: the answer to one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolResult {
    /// `tool_use_id` or `custom_tool_use_id` on the wire, by the event's type.
    #[serde(alias = "tool_use_id", alias = "custom_tool_use_id", skip_serializing)]
    pub call_id: EventId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ContentBlock>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

impl ToolResult {
    /// Whether `other` carries the same answer (a retried POST of this result).
    pub fn same_answer(&self, other: &Self) -> bool {
        self.call_id == other.call_id && self.content == other.content && self.is_error == other.is_error
    }
}

/// A `user.tool_result`: the answer to an `agent.tool_use`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct BuiltInToolResult {
    /// The `agent.tool_use` event this answers.
    tool_use_id: EventId,
    content: Option<Vec<ContentBlock>>,
    is_error: Option<bool>,
}

/// A `user.custom_tool_result`: the answer to an `agent.custom_tool_use`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct CustomToolResult {
    /// The `agent.custom_tool_use` event this answers.
    custom_tool_use_id: EventId,
    content: Option<Vec<ContentBlock>>,
    is_error: Option<bool>,
}

/// `user.define_outcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DefineOutcome {
    pub description: String,
    pub rubric: Rubric,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
}

/// How an outcome is graded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Rubric {
    Text { content: String },
    File { file_id: String },
}

/// `agent.tool_use` and `agent.custom_tool_use`: a call a worker (or client) must answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolUse {
    pub name: String,
    pub input: Map<String, Value>,
    /// Set by the server on `agent.tool_use` from the agent's tool configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluated_permission: Option<Permission>,
    /// The policy that gave the permission (`{"type": "always_allow"}`, …), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<Value>,
}

/// `session.status_idle`: the agent's turn ended (posted by the agent side, or emitted by the
/// server when tool calls wait).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StatusIdle {
    /// Absent or `null` when posted: `end_turn`.
    #[serde(default = "end_turn", deserialize_with = "stop_reason_or_end_turn")]
    pub stop_reason: StopReason,
    #[serde(default)]
    pub stop_details: Option<Value>,
}

fn end_turn() -> StopReason {
    StopReason::EndTurn
}

fn stop_reason_or_end_turn<'de, D: Deserializer<'de>>(d: D) -> Result<StopReason, D::Error> {
    Ok(Option::<StopReason>::deserialize(d)?.unwrap_or(StopReason::EndTurn))
}

/// `session.error`: something went wrong while the session ran (after retries, when any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionError {
    pub error: ErrorObject,
}

/// The `error` of a `session.error` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorObject {
    #[serde(rename = "type")]
    pub kind: SessionErrorKind,
    /// Human-readable; never carries a credential.
    pub message: String,
    pub retry_status: RetryStatus,
}

/// The kinds of `session.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionErrorKind {
    UnknownError,
    ModelOverloadedError,
    ModelRateLimitedError,
    ModelRequestFailedError,
    McpConnectionFailedError,
    McpAuthenticationFailedError,
    BillingError,
    CredentialHostUnreachableError,
    ToolUseLimitReachedError,
    CompactionLimitReachedError,
    RepositoryAuthenticationError,
    RepositoryForbiddenError,
    RepositoryNotFoundError,
    RepositoryCheckoutError,
    RepositoryCloneError,
}

/// What happens after a `session.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RetryStatus {
    /// The server retries by itself; the same error may come again.
    Retrying,
    /// The turn is over and the session idle; a new message may be sent.
    Exhausted,
    /// The session ends.
    Terminal,
}

/// Tokens one model call used (`span.model_request_end.model_usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl ModelUsage {
    /// The sum of two usages (saturating).
    pub fn plus(self, other: Self) -> Self {
        Self {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_read_input_tokens: self.cache_read_input_tokens.saturating_add(other.cache_read_input_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_add(other.cache_creation_input_tokens),
        }
    }
}

/// `span.model_request_end`: a model call finished (or failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ModelRequestEnd {
    /// The `span.model_request_start` event this ends.
    pub model_request_start_id: EventId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    pub model_usage: ModelUsage,
}

/// Every event type mnemo accepts or emits, tagged by `type` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "user.message")]
    UserMessage(Message),
    #[serde(rename = "user.interrupt")]
    UserInterrupt(Interrupt),
    #[serde(rename = "user.tool_confirmation")]
    UserToolConfirmation(ToolConfirmation),
    #[serde(rename = "user.tool_result", serialize_with = "tool_result_as::<_, true>")]
    UserToolResult(ToolResult),
    #[serde(rename = "user.custom_tool_result", serialize_with = "tool_result_as::<_, false>")]
    UserCustomToolResult(ToolResult),
    #[serde(rename = "user.define_outcome")]
    UserDefineOutcome(DefineOutcome),
    #[serde(rename = "system.message")]
    SystemMessage(Message),
    #[serde(rename = "agent.message")]
    AgentMessage(Message),
    #[serde(rename = "agent.tool_use")]
    AgentToolUse(ToolUse),
    #[serde(rename = "agent.custom_tool_use")]
    AgentCustomToolUse(ToolUse),
    #[serde(rename = "session.status_running")]
    StatusRunning,
    #[serde(rename = "session.status_idle")]
    StatusIdle(StatusIdle),
    #[serde(rename = "session.status_terminated")]
    StatusTerminated,
    #[serde(rename = "session.error")]
    SessionError(SessionError),
    #[serde(rename = "span.model_request_start")]
    ModelRequestStart,
    #[serde(rename = "span.model_request_end")]
    ModelRequestEnd(ModelRequestEnd),
    /// The result of an `agent.tool_use` (or a custom call) the server ran itself, as a dream's
    /// tools are: the session does not wait for a worker or a client.
    #[serde(rename = "agent.tool_result", serialize_with = "tool_result_as::<_, true>")]
    AgentToolResult(ToolResult),
    /// An event of a type this build does not know, read back from a log (a newer build wrote
    /// it): kept as its JSON, `type` included, so it lists and streams unchanged. Requests never
    /// parse into it ([`Event::parse`] refuses an unknown type).
    #[serde(untagged)]
    Unknown(UnknownEvent),
}

/// The JSON of an event whose type this build does not know (without `id`, `processed_at` and
/// `posted_by`, which [`LoggedEvent`] holds).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct UnknownEvent(Map<String, Value>);

impl UnknownEvent {
    /// Its `type`.
    pub fn kind(&self) -> &str {
        self.0.get("type").and_then(Value::as_str).unwrap_or_default()
    }

    /// Its fields, `type` included.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.0
    }
}

/// Serialises a result with its call id under the key its type uses.
fn tool_result_as<S: serde::Serializer, const BUILT_IN: bool>(r: &ToolResult, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(None)?;
    map.serialize_entry(if BUILT_IN { "tool_use_id" } else { "custom_tool_use_id" }, &r.call_id)?;
    if let Some(content) = &r.content {
        map.serialize_entry("content", content)?;
    }
    if let Some(is_error) = r.is_error {
        map.serialize_entry("is_error", &is_error)?;
    }
    map.end()
}

/// An event that cannot be parsed: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct EventError {
    /// The offending field inside the event (`tool_use_id`, `content[0]`), or empty.
    pub field: String,
    pub message: String,
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.field, self.message) }
    }
}

impl EventError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        Self { field: field.to_owned(), message: message.into() }
    }

    /// The same error with its field placed inside `outer` (`events[2]` → `events[2].tool_use_id`).
    pub fn within(self, outer: &str) -> Self {
        let field = if self.field.is_empty() {
            outer.to_owned()
        } else if self.field.starts_with('[') {
            format!("{outer}{}", self.field)
        } else {
            format!("{outer}.{}", self.field)
        };
        Self { field, message: self.message }
    }
}

impl Event {
    /// Every `type` this enum knows, in the order of its variants.
    pub const TYPES: [&'static str; 17] = [
        "user.message",
        "user.interrupt",
        "user.tool_confirmation",
        "user.tool_result",
        "user.custom_tool_result",
        "user.define_outcome",
        "system.message",
        "agent.message",
        "agent.tool_use",
        "agent.custom_tool_use",
        "session.status_running",
        "session.status_idle",
        "session.status_terminated",
        "session.error",
        "span.model_request_start",
        "span.model_request_end",
        "agent.tool_result",
    ];

    /// The wire `type`.
    pub fn kind(&self) -> &str {
        Self::TYPES[match self {
            Self::Unknown(unknown) => return unknown.kind(),
            Self::UserMessage(_) => 0,
            Self::UserInterrupt(_) => 1,
            Self::UserToolConfirmation(_) => 2,
            Self::UserToolResult(_) => 3,
            Self::UserCustomToolResult(_) => 4,
            Self::UserDefineOutcome(_) => 5,
            Self::SystemMessage(_) => 6,
            Self::AgentMessage(_) => 7,
            Self::AgentToolUse(_) => 8,
            Self::AgentCustomToolUse(_) => 9,
            Self::StatusRunning => 10,
            Self::StatusIdle(_) => 11,
            Self::StatusTerminated => 12,
            Self::SessionError(_) => 13,
            Self::ModelRequestStart => 14,
            Self::ModelRequestEnd(_) => 15,
            Self::AgentToolResult(_) => 16,
        }]
    }

    /// Parses one event of a request, naming the field that is wrong when it is.
    pub fn parse(value: Value) -> Result<Self, EventError> {
        let Value::Object(mut fields) = value else {
            return Err(EventError::new("", "an event must be a JSON object"));
        };
        // Fields the server assigns are ignored if a client echoes them back.
        for assigned in ["id", "processed_at"] {
            fields.remove(assigned);
        }
        Self::parse_fields(fields, false)
    }

    /// Parses an event's fields (without `id` and `processed_at`); with `keep_unknown`, a type
    /// this build does not know is an [`Event::Unknown`] rather than an error.
    fn parse_fields(mut fields: Map<String, Value>, keep_unknown: bool) -> Result<Self, EventError> {
        let kind = match fields.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(_) => return Err(EventError::new("type", "must be a string")),
            None => return Err(EventError::new("type", "is required")),
        };
        if keep_unknown && !Self::TYPES.contains(&kind.as_str()) {
            return Ok(Self::Unknown(UnknownEvent(fields)));
        }
        fields.remove("type");
        let body = Value::Object(fields);
        Ok(match kind.as_str() {
            "user.message" => Self::UserMessage(fields_of(body)?),
            "user.interrupt" => Self::UserInterrupt(fields_of(body)?),
            "user.tool_confirmation" => {
                let c: ToolConfirmation = fields_of(body)?;
                if c.deny_message.is_some() && c.result != Verdict::Deny {
                    return Err(EventError::new("deny_message", "is allowed only with `\"result\": \"deny\"`"));
                }
                Self::UserToolConfirmation(c)
            }
            "user.tool_result" => Self::UserToolResult(result_of(body, "tool_use_id", "custom_tool_use_id")?),
            "user.custom_tool_result" => {
                Self::UserCustomToolResult(result_of(body, "custom_tool_use_id", "tool_use_id")?)
            }
            "user.define_outcome" => Self::UserDefineOutcome(fields_of(body)?),
            "system.message" => Self::SystemMessage(fields_of(body)?),
            "agent.message" => Self::AgentMessage(fields_of(body)?),
            "agent.tool_use" => Self::AgentToolUse(tool_use_of(body)?),
            "agent.custom_tool_use" => Self::AgentCustomToolUse(tool_use_of(body)?),
            "session.status_running" => Self::StatusRunning,
            "session.status_idle" => Self::StatusIdle(fields_of(body)?),
            "session.status_terminated" => Self::StatusTerminated,
            "session.error" => Self::SessionError(fields_of(body)?),
            "span.model_request_start" => Self::ModelRequestStart,
            "span.model_request_end" => Self::ModelRequestEnd(fields_of(body)?),
            "agent.tool_result" => Self::AgentToolResult(result_of(body, "tool_use_id", "custom_tool_use_id")?),
            other => {
                return Err(EventError::new(
                    "type",
                    format!("`{other}` is not an event type (known: {})", Self::TYPES.join(", ")),
                ));
            }
        })
    }

    /// The call this event answers, for results.
    pub fn answered_call(&self) -> Option<&EventId> {
        match self {
            Self::UserToolResult(r) | Self::UserCustomToolResult(r) | Self::AgentToolResult(r) => Some(&r.call_id),
            _ => None,
        }
    }

    /// This event as the JSON the log records (without `id` and `processed_at`).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("an event serialises")
    }
}

fn fields_of<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, EventError> {
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        EventError::new(&field, e.into_inner().to_string())
    })
}

fn result_of(body: Value, key: &str, other_key: &str) -> Result<ToolResult, EventError> {
    if body.get(other_key).is_some() {
        return Err(EventError::new(other_key, format!("this event answers its call with `{key}`")));
    }
    if body.get(key).is_none() {
        return Err(EventError::new(key, "is required"));
    }
    fields_of(body)
}

fn tool_use_of(body: Value) -> Result<ToolUse, EventError> {
    let call: ToolUse = fields_of(body)?;
    if call.name.is_empty() {
        return Err(EventError::new("name", "must not be empty"));
    }
    Ok(call)
}

/// Who posted an event to a session's log (the mnemo extension field `posted_by`): the
/// credential that sent it, or the server itself for what it emits and its own agent loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPoster {
    /// An API key (a person's client, the console, or an agent loop run outside the server).
    ApiActor { api_key_id: ApiKeyId },
    /// A worker holding the environment's key.
    EnvironmentKeyActor { environment_key_id: EnvironmentKeyId },
    /// A worker holding the sessions token of one delivery of a work item for this session.
    SessionActor { session_id: SessionId, work_id: WorkId },
    /// The server: the status changes it emits and its own agent loop (`mnemo serve --models`).
    ServerActor,
    /// A person, with their identity provider's token (the user's side of a session).
    UserActor { user_id: crate::UserId },
}

/// An event as a session's log records it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct LoggedEvent {
    pub id: EventId,
    #[serde(flatten)]
    pub event: Event,
    /// RFC 3339; null for input not yet processed.
    pub processed_at: Option<String>,
    /// Who posted it (a mnemo extension); null for events recorded before mnemo recorded it.
    pub posted_by: Option<EventPoster>,
}

impl LoggedEvent {
    /// The JSON the API lists and streams (and the log stores).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("an event serialises")
    }

    /// Reads back what [`Self::to_json`] wrote: `from_json(e.to_json()) == e`, and an event
    /// whose type this build does not know reads as [`Event::Unknown`] and writes back
    /// unchanged. An error names the field that cannot be read.
    pub fn from_json(value: Value) -> Result<Self, EventError> {
        let Value::Object(mut fields) = value else {
            return Err(EventError::new("", "an event must be a JSON object"));
        };
        let id = match fields.remove("id") {
            Some(Value::String(id)) => {
                id.parse().map_err(|e: crate::ids::IdError| EventError::new("id", e.to_string()))?
            }
            _ => return Err(EventError::new("id", "must be an event id")),
        };
        let processed_at = match fields.remove("processed_at") {
            None | Some(Value::Null) => None,
            Some(Value::String(at)) => Some(at),
            Some(_) => return Err(EventError::new("processed_at", "must be a string or null")),
        };
        let posted_by = match fields.remove("posted_by") {
            None | Some(Value::Null) => None,
            Some(poster) => Some(fields_of(poster).map_err(|e| e.within("posted_by"))?),
        };
        let event = Event::parse_fields(fields, true)?;
        Ok(Self { id, event, processed_at, posted_by })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: Value) -> Result<Event, String> {
        Event::parse(v).map_err(|e| e.to_string())
    }

    #[test]
    fn each_request_type_parses_and_serialises_back() {
        let call = EventId::generate();
        let cases = [
            json!({"type": "user.message", "content": [{"type": "text", "text": "hi"}]}),
            json!({"type": "user.interrupt"}),
            json!({"type": "user.interrupt", "session_thread_id": "sthr_1"}),
            json!({"type": "user.tool_confirmation", "tool_use_id": call, "result": "deny", "deny_message": "no"}),
            json!({"type": "user.tool_result", "tool_use_id": call, "content": [{"type": "text", "text": "ok"}], "is_error": false}),
            json!({"type": "user.custom_tool_result", "custom_tool_use_id": call, "is_error": true}),
            json!({"type": "user.define_outcome", "description": "d", "rubric": {"type": "text", "content": "r"}, "max_iterations": 3}),
            json!({"type": "system.message", "content": [{"type": "text", "text": "be brief"}]}),
            json!({"type": "agent.message", "content": []}),
            json!({"type": "agent.tool_use", "name": "bash", "input": {"command": "ls"}}),
            json!({"type": "agent.custom_tool_use", "name": "lookup", "input": {}}),
            json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}, "stop_details": null}),
            json!({"type": "session.status_idle", "stop_reason": {"type": "model_call_limit_reached"}, "stop_details": null}),
            json!({"type": "session.error", "error": {"type": "model_overloaded_error", "message": "m", "retry_status": {"type": "exhausted"}}}),
            json!({"type": "span.model_request_start"}),
            json!({"type": "span.model_request_end", "model_request_start_id": call, "is_error": false,
                   "model_usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 4}}),
        ];
        for case in cases {
            let event = Event::parse(case.clone()).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(event.kind(), case["type"]);
            assert_eq!(event.to_json(), case, "round trip of {}", case["type"]);
        }
    }

    #[test]
    fn a_stop_reason_names_its_wire_type() {
        for reason in [
            StopReason::EndTurn,
            StopReason::RequiresAction { event_ids: vec![] },
            StopReason::RetriesExhausted,
            StopReason::BudgetReached,
            StopReason::Refusal,
            StopReason::ModelCallLimitReached,
            StopReason::TurnTimeout,
        ] {
            assert_eq!(serde_json::to_value(&reason).unwrap()["type"], reason.kind());
        }
    }

    #[test]
    fn server_assigned_fields_are_dropped_and_idle_defaults_to_end_turn() {
        let e = parse(json!({"type": "session.status_idle", "id": "sevt_x", "processed_at": "now"})).unwrap();
        assert_eq!(e, Event::StatusIdle(StatusIdle { stop_reason: StopReason::EndTurn, stop_details: None }));
        let null = parse(json!({"type": "session.status_idle", "stop_reason": null})).unwrap();
        assert_eq!(null, e);
    }

    #[test]
    fn a_malformed_event_names_its_field() {
        let cases = [
            (json!("text"), "an event must be a JSON object"),
            (json!({}), "type: is required"),
            (json!({"type": 3}), "type: must be a string"),
            (json!({"type": "user.shout"}), "type: `user.shout` is not an event type (known: user.message,"),
            (json!({"type": "user.message"}), "missing field `content`"),
            (
                json!({"type": "user.message", "content": [{"text": "x"}]}),
                "content[0]: a content block needs a string `type`",
            ),
            (json!({"type": "user.tool_result", "content": []}), "tool_use_id: is required"),
            (
                json!({"type": "user.tool_result", "tool_use_id": "toolu_1"}),
                "tool_use_id: `toolu_1` is not a valid session event id",
            ),
            (
                json!({"type": "user.tool_result", "custom_tool_use_id": "sevt_1"}),
                "custom_tool_use_id: this event answers its call with `tool_use_id`",
            ),
            (
                json!({"type": "user.tool_result", "tool_use_id": "sevt_1", "is_error": "yes"}),
                "is_error: invalid type: string \"yes\", expected a boolean",
            ),
            (
                json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_1", "result": "maybe"}),
                "result: unknown variant `maybe`",
            ),
            (
                json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_1", "result": "allow", "deny_message": "x"}),
                "deny_message: is allowed only with",
            ),
            (json!({"type": "agent.tool_use", "name": "", "input": {}}), "name: must not be empty"),
            (
                json!({"type": "agent.tool_use", "name": "bash", "input": []}),
                "input: invalid type: sequence, expected a map",
            ),
            (
                json!({"type": "session.status_idle", "stop_reason": {"type": "nap"}}),
                "stop_reason.type: unknown variant `nap`",
            ),
        ];
        for (value, expected) in cases {
            let got = parse(value.clone()).expect_err(&value.to_string());
            assert!(got.starts_with(expected), "{value}: got `{got}`, expected `{expected}…`");
        }
    }

    #[test]
    fn errors_nest_under_their_request_position() {
        let e = Event::parse(json!({"type": "user.message", "content": [1]})).unwrap_err();
        assert_eq!(e.within("events[2]").field, "events[2].content[0]");
        let top = Event::parse(json!(1)).unwrap_err();
        assert_eq!(top.within("events[0]").field, "events[0]");
    }

    #[test]
    fn a_logged_event_carries_its_id_and_processing_time() {
        let id = EventId::generate();
        let logged = LoggedEvent {
            id: id.clone(),
            event: Event::StatusRunning,
            processed_at: Some("t".into()),
            posted_by: Some(EventPoster::ServerActor),
        };
        assert_eq!(
            logged.to_json(),
            json!({"type": "session.status_running", "id": id, "processed_at": "t", "posted_by": {"type": "server_actor"}})
        );
        let idle = LoggedEvent {
            id: id.clone(),
            event: Event::StatusIdle(StatusIdle {
                stop_reason: StopReason::RequiresAction { event_ids: vec![id.clone()] },
                stop_details: None,
            }),
            processed_at: None,
            posted_by: None,
        };
        assert_eq!(
            idle.to_json(),
            json!({"type": "session.status_idle", "id": id, "processed_at": null, "posted_by": null,
                   "stop_reason": {"type": "requires_action", "event_ids": [id]}, "stop_details": null})
        );
    }

    /// Every stored event reads back as itself and writes back the same JSON; the table has
    /// one event of each type (so a new variant without a case fails the count) and one of a
    /// type this build does not know.
    #[test]
    fn a_logged_event_of_every_type_reads_back_unchanged() {
        let call = EventId::generate();
        let usage = ModelUsage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_input_tokens: 3,
            cache_creation_input_tokens: 4,
        };
        let tool_use = ToolUse {
            name: "bash".into(),
            input: Map::from_iter([("command".to_owned(), json!("ls"))]),
            evaluated_permission: Some(Permission::Ask),
            evaluation: Some(json!({"type": "always_ask"})),
        };
        let result =
            ToolResult { call_id: call.clone(), content: Some(vec![ContentBlock::text("ok")]), is_error: Some(false) };
        let known = [
            Event::UserMessage(Message { content: vec![ContentBlock::text("hi")] }),
            Event::UserInterrupt(Interrupt { session_thread_id: Some("sthr_1".into()) }),
            Event::UserToolConfirmation(ToolConfirmation {
                tool_use_id: call.clone(),
                result: Verdict::Deny,
                deny_message: Some("no".into()),
            }),
            Event::UserToolResult(result.clone()),
            Event::UserCustomToolResult(ToolResult { content: None, is_error: None, ..result.clone() }),
            Event::UserDefineOutcome(DefineOutcome {
                description: "d".into(),
                rubric: Rubric::File { file_id: "file_1".into() },
                max_iterations: Some(2),
            }),
            Event::SystemMessage(Message { content: vec![] }),
            Event::AgentMessage(Message { content: vec![ContentBlock::text("hello")] }),
            Event::AgentToolUse(tool_use.clone()),
            Event::AgentCustomToolUse(ToolUse { evaluated_permission: None, evaluation: None, ..tool_use }),
            Event::StatusRunning,
            Event::StatusIdle(StatusIdle {
                stop_reason: StopReason::RequiresAction { event_ids: vec![call.clone()] },
                stop_details: Some(json!({"why": 1})),
            }),
            Event::StatusTerminated,
            Event::SessionError(SessionError {
                error: ErrorObject {
                    kind: SessionErrorKind::ModelRateLimitedError,
                    message: "m".into(),
                    retry_status: RetryStatus::Retrying,
                },
            }),
            Event::ModelRequestStart,
            Event::ModelRequestEnd(ModelRequestEnd {
                model_request_start_id: call.clone(),
                is_error: None,
                model_usage: usage,
            }),
            Event::AgentToolResult(result),
        ];
        let kinds: std::collections::BTreeSet<&str> = known.iter().map(Event::kind).collect();
        assert_eq!(kinds.len(), Event::TYPES.len(), "one case per event type");
        let unknown = LoggedEvent::from_json(json!({
            "type": "agent.thinking", "id": call, "processed_at": "t", "posted_by": null,
            "thinking": "hmm", "nested": {"a": [1, 2]}
        }))
        .unwrap();
        assert!(matches!(&unknown.event, Event::Unknown(u) if u.kind() == "agent.thinking"));
        let posters = [
            None,
            Some(EventPoster::ServerActor),
            Some(EventPoster::ApiActor { api_key_id: ApiKeyId::generate() }),
            Some(EventPoster::SessionActor { session_id: SessionId::generate(), work_id: WorkId::generate() }),
        ];
        let logged = known.into_iter().enumerate().map(|(i, event)| LoggedEvent {
            id: EventId::generate(),
            event,
            processed_at: (i % 2 == 0).then(|| "2026-01-01T00:00:00.000000Z".to_owned()),
            posted_by: posters[i % posters.len()].clone(),
        });
        for e in logged.chain([unknown]) {
            let json = e.to_json();
            let back = LoggedEvent::from_json(json.clone()).unwrap_or_else(|err| panic!("{json}: {err}"));
            assert_eq!(back, e, "{json}");
            assert_eq!(back.to_json().to_string(), json.to_string(), "the JSON of {}", e.event.kind());
        }
    }

    #[test]
    fn a_stored_event_that_cannot_be_read_names_its_field() {
        let id = EventId::generate();
        let cases = [
            (json!([]), "an event must be a JSON object"),
            (json!({"type": "user.message", "content": []}), "id: must be an event id"),
            (json!({"type": "user.message", "id": "x", "content": []}), "id: `x` is not a valid session event id"),
            (json!({"type": "user.message", "id": id, "processed_at": 3, "content": []}), "processed_at: must be"),
            (
                json!({"type": "user.message", "id": id, "posted_by": {"type": "ghost"}}),
                "posted_by.type: unknown variant",
            ),
            (json!({"type": "user.message", "id": id}), "missing field `content`"),
            (json!({"id": id}), "type: is required"),
        ];
        for (value, expected) in cases {
            let got = LoggedEvent::from_json(value.clone()).expect_err(&value.to_string()).to_string();
            assert!(got.starts_with(expected), "{value}: got `{got}`, expected `{expected}…`");
        }
        let posted = Event::parse(json!({"type": "agent.thinking"})).unwrap_err();
        assert_eq!(posted.field, "type", "a request never carries an unknown type");
    }
}
