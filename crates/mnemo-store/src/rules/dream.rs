//! Dreams: which transitions a dream may take, who runs it (a lease, as the agent loop's turns
//! have), what blocks an `update_existing` dream, what the server checks before `completed`,
//! and the names and bounds a dream uses (spec `dreams-api.md` §5, §6, §10).

use mnemo_api::{Dream, DreamError, DreamStatus, DreamUsage, Event, LoggedEvent};

use super::agent::TurnLease;
use crate::StoreError;

/// A dream's `error.type` codes (spec §8.2).
pub mod code {
    pub const TIMEOUT: &str = "timeout";
    pub const INTERNAL: &str = "internal_error";
    pub const INPUT_TOO_LARGE: &str = "input_memory_store_too_large";
    pub const STORE_UNAVAILABLE: &str = "input_memory_store_unavailable";
    pub const SESSION_UNAVAILABLE: &str = "input_session_unavailable";
    pub const MODEL_ERROR: &str = "model_error";
    pub const MODEL_REFUSAL: &str = "model_refusal";
    pub const MODEL_CALL_LIMIT: &str = "model_call_limit_reached";
    pub const OUTPUT_INVALID: &str = "output_invalid";
}

/// Metadata keys mnemo sets on what it makes for dreams.
pub mod meta {
    /// On a dream's session and output store: the dream.
    pub const DREAM_ID: &str = "mnemo_dream_id";
    /// On an output store: the store it started as a copy of.
    pub const DREAM_INPUT: &str = "mnemo_dream_input";
    /// On the per-workspace agent and environment dreams run on.
    pub const ROLE: &str = "mnemo_role";
    pub const ROLE_DREAMER: &str = "dreamer";
    pub const ROLE_DREAMS: &str = "dreams";
}

/// The names of the per-workspace agent and environment dreams run on.
pub const DREAMER_AGENT_NAME: &str = "mnemo-dreamer";
pub const DREAMS_ENVIRONMENT_NAME: &str = "mnemo-dreams";

/// Refuses a change to the environment dreams run on: mnemo manages it.
pub fn check_unmanaged(environment: &mnemo_api::Environment) -> Result<(), StoreError> {
    if environment.metadata.get(meta::ROLE).is_some_and(|r| r == meta::ROLE_DREAMS) {
        return Err(StoreError::Invalid(format!(
            "environment `{}` runs dreams and is managed by mnemo; it cannot be changed, archived or deleted",
            environment.id
        )));
    }
    Ok(())
}

/// The bounds of dreams (`[dreams]` in the models file, spec §10.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DreamLimits {
    /// Dreams running at once, per database.
    pub max_running: u32,
    /// Dreams waiting to run, per workspace; another create is refused (`429`).
    pub max_pending: u32,
    /// Wall time of one dream from its start.
    pub timeout_secs: u64,
    /// Model calls of one dream.
    pub max_model_calls: u32,
    /// Bytes of the input store's live memories a dream may copy.
    pub max_input_bytes: u64,
    /// Characters of a tool result a transcript keeps.
    pub transcript_result_chars: usize,
}

impl Default for DreamLimits {
    fn default() -> Self {
        Self {
            max_running: mnemo_api::limits::DEFAULT_DREAM_MAX_RUNNING,
            max_pending: mnemo_api::limits::DEFAULT_DREAM_MAX_PENDING,
            timeout_secs: mnemo_api::limits::DEFAULT_DREAM_TIMEOUT_SECS,
            max_model_calls: mnemo_api::limits::DEFAULT_DREAM_MAX_MODEL_CALLS,
            max_input_bytes: mnemo_api::limits::DEFAULT_DREAM_MAX_INPUT_BYTES,
            transcript_result_chars: mnemo_api::limits::DEFAULT_DREAM_TRANSCRIPT_RESULT_CHARS,
        }
    }
}

/// The statuses of a dream that is not over.
pub const ACTIVE: [DreamStatus; 2] = [DreamStatus::Pending, DreamStatus::Running];

/// What a cancel or an archive does to a dream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Write the change.
    Apply,
    /// Already done: answer the dream as it is.
    Unchanged,
}

/// Judges a cancel: `pending`/`running` are canceled, a `canceled` dream is returned unchanged,
/// a `completed` or `failed` one is refused.
pub fn cancel(dream: &Dream) -> Result<Change, StoreError> {
    match dream.status {
        DreamStatus::Pending | DreamStatus::Running => Ok(Change::Apply),
        DreamStatus::Canceled => Ok(Change::Unchanged),
        DreamStatus::Completed | DreamStatus::Failed => Err(StoreError::Invalid(format!(
            "dream `{}` is {}; only a pending or running dream can be canceled",
            dream.id, dream.status
        ))),
    }
}

/// Judges an archive: a final dream is archived (once), a pending or running one refused.
pub fn archive(dream: &Dream) -> Result<Change, StoreError> {
    if !dream.status.is_final() {
        return Err(StoreError::Invalid(format!(
            "dream `{}` is {}; cancel it before archiving it",
            dream.id, dream.status
        )));
    }
    Ok(if dream.archived_at.is_some() { Change::Unchanged } else { Change::Apply })
}

/// Whether a dream still holds its store against another `update_existing` dream: it is an
/// `update_existing` dream that has not fully stopped (not final, or its runner has not
/// released the lease yet).
pub fn holds_store(update_existing: bool, status: DreamStatus, lease: Option<&TurnLease>) -> bool {
    update_existing && (!status.is_final() || lease.is_some())
}

/// The refusal of a second `update_existing` dream on a store `holder` holds.
pub fn store_taken(store: &str, holder: &str) -> StoreError {
    StoreError::Conflict(format!(
        "dream `{holder}` is rewriting memory store `{store}` (update_existing); wait until it has stopped, or dream into a new store"
    ))
}

/// How a run ended, as the runner reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Failed(DreamError),
}

/// The status and error a finished run leaves: `None` when the dream already reached a final
/// status (a cancel came first), which stays.
pub fn finish(status: DreamStatus, outcome: Outcome) -> Option<(DreamStatus, Option<DreamError>)> {
    if status.is_final() {
        return None;
    }
    Some(match outcome {
        Outcome::Completed => (DreamStatus::Completed, None),
        Outcome::Failed(error) => (DreamStatus::Failed, Some(error)),
    })
}

/// What the server checks before `completed` (spec §10.7), each read from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verification {
    /// The dream writes into a new store (`create_new`).
    pub create_new: bool,
    /// Versions the dream's session wrote into the input store.
    pub input_writes: u64,
    /// Whether the output store exists and is not archived.
    pub output_usable: bool,
    /// Live memories of the input when the dream started.
    pub start_memories: u64,
    /// Live memories of the output now.
    pub output_memories: u64,
    /// Whether an output memory sits under a reserved path.
    pub reserved_paths: bool,
}

/// Judges a dream's result: `Ok` lets it complete; else the error it fails with.
pub fn verify(v: Verification) -> Result<(), DreamError> {
    if v.create_new && v.input_writes > 0 {
        return Err(DreamError::new(
            code::INTERNAL,
            "the dream's session wrote into its input store; the result was not accepted",
        ));
    }
    if !v.output_usable {
        return Err(DreamError::new(code::OUTPUT_INVALID, "the output memory store was archived or deleted"));
    }
    if v.start_memories > 0 && v.output_memories == 0 {
        return Err(DreamError::new(
            code::OUTPUT_INVALID,
            "the dream left its output store empty; a dream must not empty a store",
        ));
    }
    if v.reserved_paths {
        return Err(DreamError::new(code::OUTPUT_INVALID, "the output holds a memory under a reserved path"));
    }
    Ok(())
}

/// The path under which a store holds no memory (the marker a mount keeps in its folder).
pub const RESERVED_PATH: &str = "/.anthropic-memory-store";

/// Whether `path` is, or is under, the reserved path.
pub fn is_reserved(path: &str) -> bool {
    path.strip_prefix(RESERVED_PATH).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The name of a `create_new` dream's output store: the input's, marked, within 255 characters.
pub fn output_store_name(input: &str) -> String {
    const MARK: &str = " (dream)";
    let room = mnemo_api::limits::MAX_STORE_NAME_CHARS - MARK.chars().count();
    let mut name: String = input.chars().take(room).collect();
    name.push_str(MARK);
    name
}

/// A dream's usage: the sum of its session's model calls (`span.model_request_end`).
pub fn usage(log: &[LoggedEvent]) -> DreamUsage {
    log.iter()
        .filter_map(|e| match &e.event {
            Event::ModelRequestEnd(end) => Some(end.model_usage),
            _ => None,
        })
        .fold(DreamUsage::default(), |sum, u| {
            sum.plus(DreamUsage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cache_creation_input_tokens: u.cache_creation_input_tokens,
                cache_read_input_tokens: u.cache_read_input_tokens,
            })
        })
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use mnemo_api::{DreamModel, EventId, OutputBehavior};
    use serde_json::json;

    use super::*;

    fn dream(status: DreamStatus, archived: bool) -> Dream {
        Dream {
            id: "drm_01".parse().unwrap(),
            status,
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
            archived_at: archived.then(Utc::now),
        }
    }

    #[test]
    fn cancel_and_archive_follow_the_lifecycle() {
        use DreamStatus::*;
        let cases = [
            (Pending, false, Ok(Change::Apply), Err(())),
            (Running, false, Ok(Change::Apply), Err(())),
            (Canceled, false, Ok(Change::Unchanged), Ok(Change::Apply)),
            (Canceled, true, Ok(Change::Unchanged), Ok(Change::Unchanged)),
            (Completed, false, Err(()), Ok(Change::Apply)),
            (Failed, false, Err(()), Ok(Change::Apply)),
            (Completed, true, Err(()), Ok(Change::Unchanged)),
        ];
        for (status, archived, on_cancel, on_archive) in cases {
            let d = dream(status, archived);
            assert_eq!(cancel(&d).map_err(drop), on_cancel, "cancel {status}");
            assert_eq!(archive(&d).map_err(drop), on_archive, "archive {status}");
        }
        let refused = cancel(&dream(Completed, false)).unwrap_err().to_string();
        assert!(refused.contains("is completed"), "{refused}");
    }

    #[test]
    fn an_update_dream_holds_its_store_until_fully_stopped() {
        let lease = TurnLease { holder: "a".into(), expires_at: 1 };
        let cases = [
            (true, DreamStatus::Pending, None, true),
            (true, DreamStatus::Running, Some(&lease), true),
            // Canceled, but its runner has not let go yet.
            (true, DreamStatus::Canceled, Some(&lease), true),
            (true, DreamStatus::Canceled, None, false),
            (true, DreamStatus::Completed, None, false),
            (false, DreamStatus::Running, Some(&lease), false),
        ];
        for (update, status, lease, holds) in cases {
            assert_eq!(holds_store(update, status, lease), holds, "{update} {status} {lease:?}");
        }
    }

    #[test]
    fn a_finish_never_overrides_a_final_status() {
        let failed = DreamError::new(code::TIMEOUT, "t");
        assert_eq!(finish(DreamStatus::Running, Outcome::Completed), Some((DreamStatus::Completed, None)));
        assert_eq!(
            finish(DreamStatus::Running, Outcome::Failed(failed.clone())),
            Some((DreamStatus::Failed, Some(failed.clone())))
        );
        assert_eq!(
            finish(DreamStatus::Pending, Outcome::Failed(failed.clone())),
            Some((DreamStatus::Failed, Some(failed.clone())))
        );
        assert_eq!(finish(DreamStatus::Canceled, Outcome::Completed), None);
        assert_eq!(finish(DreamStatus::Completed, Outcome::Failed(failed)), None);
    }

    #[test]
    fn verification_checks_in_order() {
        let good = Verification {
            create_new: true,
            input_writes: 0,
            output_usable: true,
            start_memories: 3,
            output_memories: 2,
            reserved_paths: false,
        };
        let cases = [
            (good, None),
            (Verification { input_writes: 1, ..good }, Some(code::INTERNAL)),
            // Under update_existing the input is the output: writes there are the point.
            (Verification { create_new: false, input_writes: 5, ..good }, None),
            (Verification { output_usable: false, ..good }, Some(code::OUTPUT_INVALID)),
            (Verification { output_memories: 0, ..good }, Some(code::OUTPUT_INVALID)),
            (Verification { start_memories: 0, output_memories: 0, ..good }, None),
            (Verification { reserved_paths: true, ..good }, Some(code::OUTPUT_INVALID)),
        ];
        for (v, expected) in cases {
            assert_eq!(verify(v).err().map(|e| e.kind), expected.map(str::to_owned), "{v:?}");
        }
    }

    #[test]
    fn the_output_store_name_fits() {
        assert_eq!(output_store_name("notes"), "notes (dream)");
        let long = output_store_name(&"é".repeat(300));
        assert_eq!(long.chars().count(), mnemo_api::limits::MAX_STORE_NAME_CHARS);
        assert!(long.ends_with(" (dream)"));
    }

    #[test]
    fn usage_sums_the_model_calls() {
        let end = |i: u64, o: u64, cw: u64, cr: u64| {
            LoggedEvent::from_json(json!({
                "type": "span.model_request_end", "id": EventId::generate(), "is_error": false,
                "model_request_start_id": EventId::generate(),
                "model_usage": {"input_tokens": i, "output_tokens": o, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr},
            }))
            .unwrap()
        };
        let message =
            LoggedEvent::from_json(json!({"type": "agent.message", "id": EventId::generate(), "content": []})).unwrap();
        let log = [end(10, 2, 3, 4), message, end(5, 1, 0, 6)];
        assert_eq!(
            usage(&log),
            DreamUsage {
                input_tokens: 15,
                output_tokens: 3,
                cache_creation_input_tokens: 3,
                cache_read_input_tokens: 10
            }
        );
    }
}
