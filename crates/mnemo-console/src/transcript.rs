//! A session's events as a transcript a person reads: messages, tool calls with their input,
//! results and errors, status changes. Each event becomes one [`Entry`]; the page renders them
//! with `entry.html`, and the live stream sends the same fragment for each new event.

use askama::Template;
use mnemo_api::{Event, EventPoster, LoggedEvent};
use serde_json::Value;

use crate::text::{clip, when_str};

/// One event as the transcript shows it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) seq: i64,
    pub(crate) id: String,
    /// `user`, `agent`, `tool`, `result`, `status`, `error` or `other`: how it is styled.
    pub(crate) kind: &'static str,
    pub(crate) title: String,
    pub(crate) time: String,
    /// Prose (message text).
    pub(crate) text: Option<String>,
    /// Preformatted detail: a tool call's input, a result's output, an unknown event's JSON.
    pub(crate) detail: Option<String>,
    pub(crate) is_error: bool,
    /// For a status change: the session's status after it.
    pub(crate) status: Option<String>,
    /// Who posted it (`posted_by`), in words; `None` for the server's own status changes and
    /// events recorded before mnemo recorded their poster.
    pub(crate) poster: Option<String>,
}

/// The fragment of one entry, as the page and the live stream render it.
#[derive(Debug, Template)]
#[template(path = "entry.html")]
pub(crate) struct EntryFragment<'a> {
    pub(crate) e: &'a Entry,
}

/// Longest tool output shown in full; longer output is cut (the API has all of it).
const MAX_DETAIL_CHARS: usize = 20_000;

/// The text of an event's content blocks (text blocks in full, others by their type).
fn blocks_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            let parts: Vec<String> = blocks
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    Some(other) => format!("[{other}]"),
                    None => String::new(),
                })
                .filter(|s| !s.is_empty())
                .collect();
            (!parts.is_empty()).then(|| parts.join("\n\n"))
        }
        _ => None,
    }
}

fn pretty(v: &Value) -> String {
    clip(&serde_json::to_string_pretty(v).unwrap_or_default(), MAX_DETAIL_CHARS)
}

/// Who posted an event, in words: the credential that sent it (never a secret: ids only).
fn poster_text(poster: &EventPoster) -> String {
    match poster {
        EventPoster::ApiActor { api_key_id } => format!("API key {api_key_id}"),
        EventPoster::EnvironmentKeyActor { environment_key_id } => {
            format!("worker (environment key {environment_key_id})")
        }
        EventPoster::SessionActor { work_id, .. } => format!("worker (sessions token of {work_id})"),
        EventPoster::ServerActor => "mnemo (agent loop)".to_owned(),
        EventPoster::UserActor { user_id } => format!("person {user_id}"),
    }
}

fn str_field<'a>(body: &'a Value, name: &str) -> Option<&'a str> {
    body.get(name).and_then(Value::as_str)
}

/// Token counts as a person reads them (`model_usage` of a model call, or a session's `usage`):
/// `1,200 tokens in (1,000 from the cache), 35 out`; None when there are none.
pub(crate) fn tokens_text(usage: &Value) -> Option<String> {
    let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cache_read_input_tokens");
    let written = n("cache_creation_input_tokens")
        + usage.pointer("/cache_creation/ephemeral_5m_input_tokens").and_then(Value::as_u64).unwrap_or(0)
        + usage.pointer("/cache_creation/ephemeral_1h_input_tokens").and_then(Value::as_u64).unwrap_or(0);
    let input = n("input_tokens") + cached + written;
    let output = n("output_tokens");
    if input == 0 && output == 0 {
        return None;
    }
    let from_cache = if cached > 0 { format!(" ({} from the cache)", thousands(cached)) } else { String::new() };
    Some(format!("{} tokens in{from_cache}, {} out", thousands(input), thousands(output)))
}

pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether the event is a status change (one this build knows, or a newer one).
fn is_status(event: &Event) -> bool {
    match event {
        Event::StatusRunning | Event::StatusIdle(_) | Event::StatusTerminated => true,
        Event::Unknown(unknown) => unknown.kind().starts_with("session.status_"),
        _ => false,
    }
}

/// The transcript entry of one logged event. Who, when and which come from the typed event;
/// what it says is rendered from its JSON, which also shows types this build does not know.
pub(crate) fn entry(seq: i64, logged: &LoggedEvent) -> Entry {
    let json = logged.to_json();
    let body = &json;
    let kind_name = logged.event.kind();
    let mut e = Entry {
        seq,
        id: logged.id.to_string(),
        kind: "other",
        title: kind_name.to_owned(),
        time: logged.processed_at.as_deref().map(when_str).unwrap_or_default(),
        text: None,
        detail: None,
        is_error: false,
        status: None,
        poster: logged
            .posted_by
            .as_ref()
            .filter(|p| !(is_status(&logged.event) && **p == EventPoster::ServerActor))
            .map(poster_text),
    };
    match kind_name {
        "user.message" | "system.message" | "agent.message" => {
            // Who spoke: the system's words are shown on the user's side, as its input.
            (e.kind, e.title) = match kind_name {
                "user.message" => ("user", "User".into()),
                "system.message" => ("user", "System".into()),
                _ => ("agent", "Agent".into()),
            };
            e.text = body.get("content").and_then(blocks_text);
        }
        "agent.thinking" => {
            e.kind = "agent";
            e.title = "Agent (thinking)".into();
        }
        "agent.tool_use" | "agent.custom_tool_use" | "agent.mcp_tool_use" => {
            e.kind = "tool";
            let name = str_field(body, "name").unwrap_or("tool");
            e.title = if kind_name == "agent.custom_tool_use" {
                format!("Custom tool call: {name}")
            } else {
                format!("Tool call: {name}")
            };
            e.detail = body.get("input").map(|input| match input.get("command").and_then(Value::as_str) {
                Some(command) if input.as_object().is_some_and(|o| o.len() == 1) => clip(command, MAX_DETAIL_CHARS),
                _ => pretty(input),
            });
        }
        "user.tool_result" | "user.custom_tool_result" | "agent.tool_result" | "agent.mcp_tool_result" => {
            e.kind = "result";
            e.is_error = body.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            e.title = if e.is_error { "Tool error".into() } else { "Tool result".into() };
            e.detail = body.get("content").and_then(blocks_text).map(|t| clip(&t, MAX_DETAIL_CHARS));
        }
        "user.tool_confirmation" => {
            e.kind = "user";
            let verdict = str_field(body, "result").unwrap_or("?");
            e.title = if verdict == "allow" { "Tool call allowed".into() } else { "Tool call denied".into() };
            e.text = str_field(body, "deny_message").map(str::to_owned);
        }
        "user.interrupt" => {
            e.kind = "user";
            e.title = "Interrupted by the user".into();
        }
        "user.define_outcome" => {
            e.kind = "user";
            e.title = "Outcome defined".into();
            e.text = str_field(body, "description").map(str::to_owned);
        }
        "session.error" => {
            e.kind = "error";
            e.is_error = true;
            e.title = "Session error".into();
            e.text = body.pointer("/error/message").and_then(Value::as_str).map(str::to_owned);
            e.detail = body.get("error").map(pretty);
        }
        "span.model_request_start" => {
            e.kind = "model";
            e.title = "Model call".into();
        }
        "span.model_request_end" => {
            e.kind = "model";
            e.is_error = body.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            e.title = if e.is_error { "Model call failed".into() } else { "Model call finished".into() };
            e.text = body.get("model_usage").and_then(tokens_text);
        }
        k if k.starts_with("session.status_") => {
            let status = &k["session.status_".len()..];
            e.kind = "status";
            e.status = Some(status.to_owned());
            e.title = format!("Status: {status}");
            if let Some(reason) = body.pointer("/stop_reason/type").and_then(Value::as_str) {
                e.text = Some(match reason {
                    "end_turn" => "the agent finished its turn".to_owned(),
                    "requires_action" => "waiting for a tool result or a confirmation".to_owned(),
                    other => other.replace('_', " "),
                });
            }
        }
        _ => {
            e.detail = Some(pretty(body));
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The entry of an event given as JSON (its id made up when it has none).
    fn entry(seq: i64, value: &Value) -> Entry {
        let mut value = value.clone();
        if value.get("id").is_none() {
            value["id"] = json!(mnemo_api::EventId::generate());
        }
        super::entry(seq, &LoggedEvent::from_json(value).unwrap())
    }

    #[test]
    fn events_read_as_a_transcript() {
        let m =
            entry(1, &json!({"type": "user.message", "content": [{"type": "text", "text": "hi"}, {"type": "image"}]}));
        assert_eq!((m.kind, m.title.as_str(), m.text.as_deref()), ("user", "User", Some("hi\n\n[image]")));
        let call = entry(2, &json!({"type": "agent.tool_use", "name": "bash", "input": {"command": "ls /mnt"}}));
        assert_eq!((call.title.as_str(), call.detail.as_deref()), ("Tool call: bash", Some("ls /mnt")));
        let write =
            entry(3, &json!({"type": "agent.tool_use", "name": "write", "input": {"file_path": "/a", "content": "x"}}));
        assert!(write.detail.unwrap().contains("\"file_path\": \"/a\""));
        let err = entry(
            4,
            &json!({"type": "user.tool_result", "tool_use_id": "sevt_1", "content": [{"type": "text", "text": "boom"}], "is_error": true}),
        );
        assert_eq!((err.title.as_str(), err.is_error, err.detail.as_deref()), ("Tool error", true, Some("boom")));
        let idle = entry(5, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        assert_eq!((idle.status.as_deref(), idle.text.as_deref()), (Some("idle"), Some("the agent finished its turn")));
        let call = entry(6, &json!({"type": "span.model_request_start"}));
        assert_eq!((call.kind, call.title.as_str()), ("model", "Model call"));
        let usage = json!({"input_tokens": 200, "output_tokens": 35, "cache_read_input_tokens": 1000,
                           "cache_creation_input_tokens": 0});
        let done = entry(
            7,
            &json!({"type": "span.model_request_end", "model_request_start_id": "sevt_1", "is_error": false, "model_usage": usage}),
        );
        assert_eq!(
            (done.title.as_str(), done.text.as_deref()),
            ("Model call finished", Some("1,200 tokens in (1,000 from the cache), 35 out"))
        );
        let none = json!({"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0});
        let failed = entry(
            8,
            &json!({"type": "span.model_request_end", "model_request_start_id": "sevt_1", "is_error": true, "model_usage": none}),
        );
        assert_eq!((failed.title.as_str(), failed.is_error, failed.text), ("Model call failed", true, None));
        let odd = entry(9, &json!({"type": "span.outcome_evaluation_start"}));
        assert_eq!(odd.kind, "other");
        assert!(odd.detail.is_some());
    }

    #[test]
    fn each_entry_names_who_posted_it() {
        let poster = |posted_by: Value, kind: &str| {
            let mut event = json!({"type": kind, "posted_by": posted_by, "content": [], "result": "allow"});
            event["tool_use_id"] = json!("sevt_1");
            entry(1, &event).poster
        };
        assert_eq!(
            poster(json!({"type": "api_actor", "api_key_id": "apikey_1"}), "user.tool_confirmation").as_deref(),
            Some("API key apikey_1")
        );
        assert_eq!(
            poster(json!({"type": "session_actor", "session_id": "sesn_1", "work_id": "work_1"}), "user.tool_result")
                .as_deref(),
            Some("worker (sessions token of work_1)")
        );
        assert_eq!(
            poster(json!({"type": "environment_key_actor", "environment_key_id": "envkey_1"}), "user.tool_result")
                .as_deref(),
            Some("worker (environment key envkey_1)")
        );
        assert_eq!(poster(json!({"type": "server_actor"}), "agent.message").as_deref(), Some("mnemo (agent loop)"));
        // The server's own status changes say nothing; old events have no poster.
        assert_eq!(poster(json!({"type": "server_actor"}), "session.status_idle"), None);
        assert_eq!(poster(Value::Null, "user.message"), None);
        let e = entry(
            1,
            &json!({"type": "user.message", "content": [], "posted_by": {"type": "api_actor", "api_key_id": "apikey_1"}}),
        );
        let html = EntryFragment { e: &e }.render().unwrap();
        assert!(html.contains("by API key apikey_1"), "{html}");
    }

    #[test]
    fn a_fragment_escapes_what_the_agent_wrote() {
        let e =
            entry(1, &json!({"type": "agent.message", "content": [{"type": "text", "text": "<script>x()</script>"}]}));
        let html = EntryFragment { e: &e }.render().unwrap();
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&#60;script&#62;x()"), "{html}");
    }
}
