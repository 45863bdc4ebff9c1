//! Dreams (beta `dreaming-2026-04-21`): a model curates a memory store from the sessions that
//! used it. The dream object, its nested shapes, and the create request parsed once into a
//! [`DreamRequest`] whose refusals name the field. How a dream runs is the server's; which
//! transitions it may take is `mnemo_store::rules::dream`'s.

use std::collections::BTreeSet;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::ids::{DreamId, MemoryStoreId, SessionId};
use crate::types::Invalid;

/// Most sessions one dream reads.
pub const MAX_DREAM_SESSIONS: usize = 100;
/// Longest `instructions`, in characters.
pub const MAX_DREAM_INSTRUCTIONS_CHARS: usize = 4_096;
/// Longest model id, in characters.
pub const MAX_DREAM_MODEL_CHARS: usize = 256;

/// Where a dream stands (`dream.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DreamStatus {
    /// Accepted and queued; its inputs are not read yet.
    Pending,
    /// Reading its inputs and writing the result.
    Running,
    /// Finished: the output store holds the result.
    Completed,
    /// Stopped on an error (`error` says which).
    Failed,
    /// Stopped by a cancel.
    Canceled,
}

impl DreamStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 5] = [Self::Pending, Self::Running, Self::Completed, Self::Failed, Self::Canceled];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the status never changes again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled)
    }
}

impl fmt::Display for DreamStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One input of a dream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DreamInput {
    /// The store to read (and, under `update_existing`, to rewrite).
    MemoryStore { memory_store_id: MemoryStoreId },
    /// The sessions whose transcripts are read, sorted.
    Sessions { session_ids: Vec<SessionId> },
}

/// Where a dream writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputBehavior {
    /// A new store that starts as a copy of the input (the default).
    CreateNew,
    /// The input store itself.
    UpdateExisting { memory_store_id: MemoryStoreId },
}

/// A dream's output store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_store")]
pub struct DreamOutput {
    pub memory_store_id: MemoryStoreId,
}

/// The model that does a dream's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DreamModel {
    pub id: String,
    /// Always `standard` for dreams.
    pub speed: Option<String>,
}

/// Tokens a dream's model calls used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DreamUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl DreamUsage {
    /// Both usages summed.
    pub fn plus(self, other: Self) -> Self {
        Self {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cache_creation_input_tokens: self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens: self.cache_read_input_tokens + other.cache_read_input_tokens,
        }
    }
}

/// Why a dream failed: a code (`timeout`, `model_error`, …) and words for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DreamError {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

impl DreamError {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        Self { kind: kind.to_owned(), message: message.into() }
    }
}

/// A dream (`type: "dream"`); every key is always present, nullable ones as `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "dream")]
pub struct Dream {
    pub id: DreamId,
    pub status: DreamStatus,
    /// The memory store first, then the sessions.
    pub inputs: Vec<DreamInput>,
    pub output_behavior: OutputBehavior,
    /// Empty until the output store exists; then that store.
    pub outputs: Vec<DreamOutput>,
    pub model: DreamModel,
    pub instructions: Option<String>,
    /// The session that runs the dream, once it started.
    pub session_id: Option<SessionId>,
    pub usage: DreamUsage,
    /// Set exactly when `status` is `failed`.
    pub error: Option<DreamError>,
    pub created_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub archived_at: Option<DateTime<Utc>>,
}

impl Dream {
    /// The input store.
    pub fn input_store(&self) -> Option<&MemoryStoreId> {
        self.inputs.iter().find_map(|i| match i {
            DreamInput::MemoryStore { memory_store_id } => Some(memory_store_id),
            DreamInput::Sessions { .. } => None,
        })
    }

    /// The input sessions.
    pub fn input_sessions(&self) -> &[SessionId] {
        self.inputs
            .iter()
            .find_map(|i| match i {
                DreamInput::Sessions { session_ids } => Some(session_ids.as_slice()),
                DreamInput::MemoryStore { .. } => None,
            })
            .unwrap_or_default()
    }

    /// The output store, once recorded.
    pub fn output_store(&self) -> Option<&MemoryStoreId> {
        self.outputs.first().map(|o| &o.memory_store_id)
    }
}

/// The body of `POST /v1/dreams`, as the OpenAPI document describes it (the handler parses the
/// JSON with [`DreamRequest::parse`], which names the field of each refusal).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct CreateDream {
    /// Exactly one `memory_store` entry and one `sessions` entry (1–100 unique ids).
    inputs: Vec<DreamInput>,
    /// A model id, or `{"id": "...", "speed": "standard"}`.
    model: Value,
    /// 1–4,096 characters of guidance for the whole pass.
    instructions: Option<String>,
    /// `create_new` (default) or `update_existing` with the input store's id.
    output_behavior: Option<OutputBehavior>,
}

/// A create request, parsed and checked for shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DreamRequest {
    pub store: MemoryStoreId,
    /// Sorted, unique.
    pub sessions: Vec<SessionId>,
    pub model: String,
    pub instructions: Option<String>,
    pub update_existing: bool,
}

fn field(name: &str, message: impl fmt::Display) -> Invalid {
    Invalid(format!("{name}: {message}"))
}

impl DreamRequest {
    /// Parses a create body, naming the field of the first thing wrong
    /// (`inputs[1].session_ids: at most 100`).
    pub fn parse(body: &Value) -> Result<Self, Invalid> {
        let Value::Object(fields) = body else { return Err(Invalid("the body must be a JSON object".into())) };
        for key in fields.keys() {
            if !matches!(key.as_str(), "inputs" | "model" | "instructions" | "output_behavior") {
                return Err(field(key, "is not a field of a dream (inputs, model, instructions, output_behavior)"));
            }
        }
        let Some(Value::Array(inputs)) = fields.get("inputs") else {
            return Err(field("inputs", "is required: one memory_store entry and one sessions entry"));
        };
        let mut store = None;
        let mut sessions = None;
        for (i, input) in inputs.iter().enumerate() {
            let at = format!("inputs[{i}]");
            match input.get("type").and_then(Value::as_str) {
                Some("memory_store") => {
                    if store.is_some() {
                        return Err(field(&at, "a second memory_store input (a dream reads exactly one store)"));
                    }
                    let raw = input.get("memory_store_id").and_then(Value::as_str).unwrap_or_default();
                    let id = raw.parse::<MemoryStoreId>().map_err(|e| field(&format!("{at}.memory_store_id"), e))?;
                    store = Some(id);
                }
                Some("sessions") => {
                    if sessions.is_some() {
                        return Err(field(&at, "a second sessions input (list every session in one entry)"));
                    }
                    let at = format!("{at}.session_ids");
                    let Some(Value::Array(ids)) = input.get("session_ids") else {
                        return Err(field(&at, "is required: 1 to 100 session ids"));
                    };
                    if ids.is_empty() {
                        return Err(field(&at, "at least 1 session"));
                    }
                    if ids.len() > MAX_DREAM_SESSIONS {
                        return Err(field(&at, format!("at most {MAX_DREAM_SESSIONS} (got {})", ids.len())));
                    }
                    let mut seen = BTreeSet::new();
                    for (j, id) in ids.iter().enumerate() {
                        let raw = id.as_str().unwrap_or_default();
                        let id = raw.parse::<SessionId>().map_err(|e| field(&format!("{at}[{j}]"), e))?;
                        if !seen.insert(id.clone()) {
                            return Err(field(&format!("{at}[{j}]"), format!("`{id}` is listed twice")));
                        }
                    }
                    sessions = Some(seen.into_iter().collect::<Vec<_>>());
                }
                Some(other) => {
                    return Err(field(&format!("{at}.type"), format!("`{other}` is not memory_store or sessions")));
                }
                None => return Err(field(&format!("{at}.type"), "is required (memory_store or sessions)")),
            }
        }
        let store = store.ok_or_else(|| field("inputs", "needs one memory_store entry"))?;
        let sessions = sessions.ok_or_else(|| field("inputs", "needs one sessions entry"))?;
        let model = match fields.get("model") {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Object(m)) => {
                for key in m.keys() {
                    if !matches!(key.as_str(), "id" | "speed") {
                        return Err(field(&format!("model.{key}"), "is not a field of a model (id, speed)"));
                    }
                }
                match m.get("speed") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) if s == "standard" => {}
                    Some(other) => {
                        return Err(field("model.speed", format!("dreams run at `standard` speed only (got {other})")));
                    }
                }
                m.get("id").and_then(Value::as_str).ok_or_else(|| field("model.id", "is required"))?.to_owned()
            }
            Some(_) => return Err(field("model", "must be a model id or {\"id\": ..., \"speed\": \"standard\"}")),
            None => return Err(field("model", "is required")),
        };
        let chars = model.chars().count();
        if chars == 0 || chars > MAX_DREAM_MODEL_CHARS {
            return Err(field("model.id", format!("1 to {MAX_DREAM_MODEL_CHARS} characters (got {chars})")));
        }
        let instructions = match fields.get("instructions") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => {
                let chars = text.chars().count();
                if chars == 0 || chars > MAX_DREAM_INSTRUCTIONS_CHARS {
                    return Err(field(
                        "instructions",
                        format!("1 to {MAX_DREAM_INSTRUCTIONS_CHARS} characters (got {chars})"),
                    ));
                }
                Some(text.clone())
            }
            Some(_) => return Err(field("instructions", "must be a string or null")),
        };
        let update_existing = match fields.get("output_behavior") {
            None | Some(Value::Null) => false,
            Some(behavior) => match behavior.get("type").and_then(Value::as_str) {
                Some("create_new") => false,
                Some("update_existing") => {
                    let raw = behavior.get("memory_store_id").and_then(Value::as_str).unwrap_or_default();
                    let id = raw.parse::<MemoryStoreId>().map_err(|e| field("output_behavior.memory_store_id", e))?;
                    if id != store {
                        return Err(field(
                            "output_behavior.memory_store_id",
                            format!(
                                "`{id}` is not the memory_store input `{store}` (update_existing rewrites its input)"
                            ),
                        ));
                    }
                    true
                }
                Some(other) => {
                    return Err(field(
                        "output_behavior.type",
                        format!("`{other}` is not create_new or update_existing"),
                    ));
                }
                None => return Err(field("output_behavior.type", "is required (create_new or update_existing)")),
            },
        };
        Ok(Self { store, sessions, model, instructions, update_existing })
    }

    /// The inputs as the dream object shows them.
    pub fn inputs(&self) -> Vec<DreamInput> {
        vec![
            DreamInput::MemoryStore { memory_store_id: self.store.clone() },
            DreamInput::Sessions { session_ids: self.sessions.clone() },
        ]
    }

    /// The output behaviour as the dream object shows it.
    pub fn output_behavior(&self) -> OutputBehavior {
        if self.update_existing {
            OutputBehavior::UpdateExisting { memory_store_id: self.store.clone() }
        } else {
            OutputBehavior::CreateNew
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const STORE: &str = "memstore_01Ab";

    fn body(inputs: &Value) -> Value {
        json!({"inputs": inputs, "model": "claude-sonnet-4-6"})
    }

    fn sessions(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("sesn_{i:04}")).collect()
    }

    #[test]
    fn a_create_body_parses_into_one_store_and_sorted_sessions() {
        let parsed = DreamRequest::parse(&json!({
            "inputs": [{"type": "sessions", "session_ids": ["sesn_02", "sesn_01"]}, {"type": "memory_store", "memory_store_id": STORE}],
            "model": {"id": "m", "speed": "standard"},
            "instructions": "keep deploy notes",
            "output_behavior": {"type": "update_existing", "memory_store_id": STORE},
        }))
        .unwrap();
        assert_eq!(parsed.store.as_str(), STORE);
        assert_eq!(parsed.sessions.iter().map(SessionId::as_str).collect::<Vec<_>>(), ["sesn_01", "sesn_02"]);
        assert_eq!(parsed.model, "m");
        assert!(parsed.update_existing);
        assert_eq!(parsed.inputs()[0], DreamInput::MemoryStore { memory_store_id: parsed.store });
    }

    #[test]
    fn each_refusal_names_its_field() {
        let store = json!({"type": "memory_store", "memory_store_id": STORE});
        let two = json!({"type": "sessions", "session_ids": ["sesn_01", "sesn_02"]});
        let with = |extra: Value| {
            let mut b = body(&json!([store, two]));
            for (k, v) in extra.as_object().unwrap() {
                b[k] = v.clone();
            }
            b
        };
        let cases: Vec<(Value, &str)> = vec![
            (json!({"model": "m"}), "inputs: is required"),
            (body(&json!([store])), "inputs: needs one sessions entry"),
            (body(&json!([two])), "inputs: needs one memory_store entry"),
            (body(&json!([store, store, two])), "inputs[1]: a second memory_store"),
            (body(&json!([store, {"type": "sessions", "session_ids": []}])), "inputs[1].session_ids: at least 1"),
            (
                body(&json!([store, {"type": "sessions", "session_ids": sessions(101)}])),
                "inputs[1].session_ids: at most 100 (got 101)",
            ),
            (
                body(&json!([store, {"type": "sessions", "session_ids": ["sesn_01", "sesn_01"]}])),
                "inputs[1].session_ids[1]: `sesn_01` is listed twice",
            ),
            (body(&json!([store, {"type": "sessions", "session_ids": ["memstore_1"]}])), "inputs[1].session_ids[0]:"),
            (body(&json!([{"type": "memory_store", "memory_store_id": ""}, two])), "inputs[0].memory_store_id:"),
            (body(&json!([store, two, {"type": "files"}])), "inputs[2].type: `files` is not"),
            (json!({"inputs": [store, two]}), "model: is required"),
            (with(json!({"model": ""})), "model.id: 1 to 256 characters (got 0)"),
            (with(json!({"model": "x".repeat(257)})), "model.id: 1 to 256 characters (got 257)"),
            (with(json!({"model": {"id": "m", "speed": "fast"}})), "model.speed: dreams run at `standard` speed only"),
            (with(json!({"instructions": ""})), "instructions: 1 to 4096 characters (got 0)"),
            (with(json!({"instructions": "é".repeat(4097)})), "instructions: 1 to 4096 characters (got 4097)"),
            (with(json!({"output_behavior": {"type": "replace"}})), "output_behavior.type: `replace` is not"),
            (
                with(json!({"output_behavior": {"type": "update_existing", "memory_store_id": "memstore_other"}})),
                "output_behavior.memory_store_id: `memstore_other` is not the memory_store input",
            ),
            (with(json!({"colour": "blue"})), "colour: is not a field of a dream"),
        ];
        for (body, expected) in cases {
            let err = DreamRequest::parse(&body).unwrap_err().0;
            assert!(err.starts_with(expected), "{body}: {err}");
        }
        assert_eq!(
            DreamRequest::parse(&with(json!({"instructions": "é".repeat(4096)})))
                .unwrap()
                .instructions
                .unwrap()
                .chars()
                .count(),
            4096
        );
        assert!(
            !DreamRequest::parse(&with(json!({"output_behavior": {"type": "create_new"}}))).unwrap().update_existing
        );
        assert_eq!(
            DreamRequest::parse(&body(&json!([store, {"type": "sessions", "session_ids": sessions(100)}])))
                .unwrap()
                .sessions
                .len(),
            100
        );
    }

    #[test]
    fn a_dream_serialises_every_key() {
        let dream = Dream {
            id: "drm_01".parse().unwrap(),
            status: DreamStatus::Pending,
            inputs: vec![],
            output_behavior: OutputBehavior::CreateNew,
            outputs: vec![],
            model: DreamModel { id: "m".into(), speed: Some("standard".into()) },
            instructions: None,
            session_id: None,
            usage: DreamUsage::default(),
            error: None,
            created_at: Utc::now(),
            ended_at: None,
            archived_at: None,
        };
        let json = serde_json::to_value(&dream).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 14, "{json}");
        assert_eq!(json["type"], "dream");
        assert_eq!(json["output_behavior"], json!({"type": "create_new"}));
        assert_eq!(serde_json::from_value::<Dream>(json).unwrap(), dream);
    }
}
