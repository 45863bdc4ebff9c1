//! The model request of one step, built from the session and its log: the agent's system
//! prompt joined with the session's memory prompt, the conversation, and the tools.
//!
//! Pure functions over the session's agent snapshot (its [`Toolset`]) and the log's events, so
//! the whole mapping is tested here without a store or a model.

use mnemo_api::{ContentBlock, Event, LoggedEvent, Permission, Toolset, Verdict};
use mnemo_model::{Block, Message, ModelRequest, ResultPart, Role, ToolDefinition};
use serde_json::{Value, json};

/// The built-in tools of `agent_toolset_20260401` the loop offers, with what each is for.
const BUILT_IN: [&str; 6] = ["bash", "read", "write", "edit", "glob", "grep"];

/// Whether `name` is a built-in tool of the agent toolset.
pub(crate) fn is_built_in(name: &str) -> bool {
    BUILT_IN.contains(&name)
}

/// What the model is told a built-in tool does, and the input it takes (facts of the
/// toolset's input types, described in our own words).
fn built_in_definition(name: &str) -> ToolDefinition {
    let string = |about: &str| json!({"type": "string", "description": about});
    let (description, properties, required): (&str, Value, &[&str]) = match name {
        "bash" => (
            "Runs a shell command in a persistent bash session on the sandbox host and returns its output. \
             Pass `restart: true` (without a command) to start a fresh session.",
            json!({
                "command": string("The command to run."),
                "restart": {"type": "boolean", "description": "Restart the bash session instead of running a command."},
                "timeout_ms": {"type": "integer", "description": "Timeout of this call in milliseconds (default: the runner's)."},
            }),
            &[],
        ),
        "read" => (
            "Reads a file and returns its contents with line numbers (images and PDFs come back as such).",
            json!({
                "file_path": string("The file to read."),
                "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                    "description": "[first_line, last_line], 1-based and inclusive; a last line of 0 or less reads to the end."},
            }),
            &["file_path"],
        ),
        "write" => (
            "Writes a file, replacing whatever it held (parent folders are created).",
            json!({"file_path": string("The file to write."), "content": string("The file's whole new content.")}),
            &["file_path", "content"],
        ),
        "edit" => (
            "Replaces text in a file: `old_string` must occur exactly once unless `replace_all` is true.",
            json!({
                "file_path": string("The file to edit."),
                "old_string": string("The text to find."),
                "new_string": string("The text to put in its place."),
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            }),
            &["file_path", "old_string", "new_string"],
        ),
        "glob" => (
            "Lists the paths matching a glob pattern (`**` crosses folders), newest first.",
            json!({"pattern": string("The glob pattern, e.g. `**/*.md`."), "path": string("The folder to search under (default: the working directory).")}),
            &["pattern"],
        ),
        _ => (
            "Searches file contents for a regular expression and returns the matching lines.",
            json!({"pattern": string("The regular expression."), "path": string("The folder or file to search (default: the working directory).")}),
            &["pattern"],
        ),
    };
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({"type": "object", "properties": properties, "required": required}),
    }
}

/// The agent's tools as the model sees them: the enabled built-in tools of its
/// `agent_toolset_20260401` (a disabled one is left out), then its custom tools.
pub(crate) fn tool_definitions(tools: &Toolset) -> Vec<ToolDefinition> {
    let mut out = Vec::new();
    if tools.has_built_in() {
        for name in BUILT_IN {
            if tools.permission(name).0 != Permission::Deny {
                out.push(built_in_definition(name));
            }
        }
    }
    for tool in tools.custom() {
        let schema = match &tool.input_schema {
            Some(schema) => Value::Object(schema.clone()),
            None => json!({"type": "object", "properties": {}}),
        };
        out.push(ToolDefinition {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: schema,
        });
    }
    out
}

/// The system prompt: the agent's own, then what it is told about its memory.
pub(crate) fn system_prompt(agent: &Value, memory_prompt: Option<&str>) -> String {
    let parts: Vec<&str> =
        [agent["system"].as_str(), memory_prompt].into_iter().flatten().filter(|p| !p.trim().is_empty()).collect();
    parts.join("\n\n")
}

/// A content block's text field.
fn text_of(b: &ContentBlock) -> &str {
    b.fields().get("text").and_then(Value::as_str).unwrap_or_default()
}

/// The content blocks of a message event as text blocks (other kinds are named, not sent).
fn text_blocks(content: &[ContentBlock]) -> Vec<Block> {
    content
        .iter()
        .map(|b| match b.kind() {
            "text" => Block::Text { text: text_of(b).to_owned() },
            other => Block::Text { text: format!("[a {other} block, not shown]") },
        })
        .collect()
}

/// A tool result's content as result parts: text, and base64 images.
fn result_parts(content: &[ContentBlock]) -> Vec<ResultPart> {
    content
        .iter()
        .map(|b| {
            let source = b.fields().get("source").unwrap_or(&Value::Null);
            match b.kind() {
                "text" => ResultPart::Text(text_of(b).to_owned()),
                "image" if source["type"] == "base64" => ResultPart::Image {
                    media_type: source["media_type"].as_str().unwrap_or("image/png").to_owned(),
                    data: source["data"].as_str().unwrap_or_default().to_owned(),
                },
                other => ResultPart::Text(format!("[a {other} block, not shown]")),
            }
        })
        .collect()
}

fn error_result(tool_use_id: &str, text: &str) -> Block {
    Block::ToolResult {
        tool_use_id: tool_use_id.to_owned(),
        content: vec![ResultPart::Text(text.to_owned())],
        is_error: true,
    }
}

/// The conversation a log holds: user input as user turns, the agent's messages and tool
/// calls as assistant turns, results (and denials) as tool results. Consecutive blocks of one
/// role share a turn; in a user turn, tool results come first. A call the log never answers
/// is answered with an error, so the request stays well-formed.
pub(crate) fn conversation(log: &[LoggedEvent]) -> Vec<Message> {
    let mut turns: Vec<(Role, Vec<Block>)> = Vec::new();
    // Answers known as soon as the call is made (a denial): they open the next user turn, so
    // the assistant turn that made the call stays whole.
    let mut denied: Vec<Block> = Vec::new();
    let mut push = |role: Role, blocks: Vec<Block>, denied: &mut Vec<Block>| {
        let blocks: Vec<Block> = if role == Role::User { denied.drain(..).chain(blocks).collect() } else { blocks };
        if blocks.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    };
    let mut open: Vec<String> = Vec::new();
    for logged in log {
        let id = logged.id.as_str();
        match &logged.event {
            Event::UserMessage(m) => push(Role::User, text_blocks(&m.content), &mut denied),
            Event::SystemMessage(m) => {
                let mut blocks = text_blocks(&m.content);
                for b in &mut blocks {
                    if let Block::Text { text } = b {
                        *text = format!("[system] {text}");
                    }
                }
                push(Role::User, blocks, &mut denied);
            }
            Event::AgentMessage(m) => push(Role::Assistant, text_blocks(&m.content), &mut denied),
            Event::AgentToolUse(call) | Event::AgentCustomToolUse(call) => {
                let input = Value::Object(call.input.clone());
                let name = call.name.clone();
                push(Role::Assistant, vec![Block::ToolUse { id: id.to_owned(), name, input }], &mut denied);
                let built_in = matches!(logged.event, Event::AgentToolUse(_));
                if built_in && call.evaluated_permission == Some(Permission::Deny) {
                    denied.push(error_result(id, "This tool is disabled for this agent."));
                } else {
                    open.push(id.to_owned());
                }
            }
            Event::UserToolResult(r) | Event::UserCustomToolResult(r) | Event::AgentToolResult(r) => {
                let call = r.call_id.as_str();
                if let Some(i) = open.iter().position(|o| o == call) {
                    open.remove(i);
                    let result = Block::ToolResult {
                        tool_use_id: call.to_owned(),
                        content: result_parts(r.content.as_deref().unwrap_or_default()),
                        is_error: r.is_error.unwrap_or(false),
                    };
                    push(Role::User, vec![result], &mut denied);
                }
            }
            Event::UserToolConfirmation(c) if c.result == Verdict::Deny => {
                let call = c.tool_use_id.as_str();
                if let Some(i) = open.iter().position(|o| o == call) {
                    open.remove(i);
                    let why = c.deny_message.as_deref().unwrap_or("The user denied this tool call.");
                    push(Role::User, vec![error_result(call, why)], &mut denied);
                }
            }
            _ => {}
        }
    }
    push(Role::User, Vec::new(), &mut denied);
    // Calls nobody answered (an interrupted turn): the model must still see an answer.
    let abandoned: Vec<Block> =
        open.iter().map(|call| error_result(call, "This tool call was abandoned and has no result.")).collect();
    if !abandoned.is_empty() {
        // Answer them right after the turn that made them, before anything later.
        let pos = turns.iter().rposition(|(role, blocks)| {
            *role == Role::Assistant
                && blocks.iter().any(|b| matches!(b, Block::ToolUse { id, .. } if open.contains(id)))
        });
        match pos {
            Some(p) if turns.get(p + 1).is_some_and(|(r, _)| *r == Role::User) => {
                turns[p + 1].1.splice(0..0, abandoned);
            }
            Some(p) => turns.insert(p + 1, (Role::User, abandoned)),
            None => {}
        }
    }
    // A conversation ending in the agent's own words (a retried answer that broke off) asks the
    // model to carry on from them; providers refuse such a start ending in whitespace.
    if let Some((Role::Assistant, blocks)) = turns.last_mut() {
        while let Some(Block::Text { text }) = blocks.last_mut() {
            let kept = text.trim_end().len();
            text.truncate(kept);
            if !text.is_empty() {
                break;
            }
            blocks.pop();
        }
        if blocks.is_empty() {
            turns.pop();
        }
    }
    turns
        .into_iter()
        .map(|(role, mut content)| {
            if role == Role::User {
                // Stable: results keep their order, then the rest keeps its order.
                content.sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
            }
            Message { role, content }
        })
        .collect()
}

/// The request of the next step: `log` is the session's events up to the step's
/// `span.model_request_start`.
pub(crate) fn build(
    agent: &Value,
    memory_prompt: Option<&str>,
    log: &[LoggedEvent],
    model: &str,
    max_tokens: u32,
) -> ModelRequest {
    ModelRequest {
        model: model.to_owned(),
        system: system_prompt(agent, memory_prompt),
        messages: conversation(log),
        tools: tool_definitions(&Toolset::of_agent(agent)),
        max_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log from its events' JSON.
    fn logged(events: Vec<Value>) -> Vec<LoggedEvent> {
        events.into_iter().map(|e| LoggedEvent::from_json(e).unwrap()).collect()
    }

    fn tool_definitions(agent: &Value) -> Vec<ToolDefinition> {
        super::tool_definitions(&Toolset::of_agent(agent))
    }

    fn agent() -> Value {
        json!({
            "system": "Be brief.",
            "tools": [
                {"type": "agent_toolset_20260401", "default_config": {"enabled": true},
                 "configs": [{"name": "bash", "enabled": false}, {"name": "edit", "permission_policy": {"type": "always_ask"}}]},
                {"type": "custom", "name": "lookup", "description": "Looks up.", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
            ],
        })
    }

    #[test]
    fn tools_are_the_enabled_built_ins_then_the_custom_ones() {
        let tools = tool_definitions(&agent());
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["read", "write", "edit", "glob", "grep", "lookup"],
            "bash is disabled; edit asks but is offered"
        );
        assert_eq!(tools[0].input_schema["required"], json!(["file_path"]));
        assert_eq!(tools[5].input_schema["properties"]["q"]["type"], "string");
        assert_eq!(tools[5].description, "Looks up.");
        let all_off = json!({"tools": [{"type": "agent_toolset_20260401", "default_config": {"enabled": false}}]});
        assert!(tool_definitions(&all_off).is_empty());
        assert!(tool_definitions(&json!({"tools": []})).is_empty(), "no toolset, no built-in tools");
    }

    #[test]
    fn the_system_prompt_joins_the_agents_with_the_memory_prompt() {
        assert_eq!(system_prompt(&agent(), Some("You have memory.")), "Be brief.\n\nYou have memory.");
        assert_eq!(system_prompt(&json!({"system": null}), Some("You have memory.")), "You have memory.");
        assert_eq!(system_prompt(&agent(), None), "Be brief.");
    }

    fn text(t: &str) -> Block {
        Block::Text { text: t.into() }
    }

    #[test]
    fn the_log_becomes_alternating_turns_with_results_first() {
        let log = logged(vec![
            json!({"type": "user.message", "id": "sevt_1", "content": [{"type": "text", "text": "hi"}]}),
            json!({"type": "session.status_running", "id": "sevt_2"}),
            json!({"type": "span.model_request_start", "id": "sevt_3"}),
            json!({"type": "agent.message", "id": "sevt_4", "content": [{"type": "text", "text": "looking"}]}),
            json!({"type": "agent.tool_use", "id": "sevt_5", "name": "read", "input": {"file_path": "a"}, "evaluated_permission": "allow"}),
            json!({"type": "agent.tool_use", "id": "sevt_6", "name": "bash", "input": {}, "evaluated_permission": "deny"}),
            json!({"type": "agent.tool_use", "id": "sevt_7", "name": "edit", "input": {}, "evaluated_permission": "ask"}),
            json!({"type": "session.status_idle", "id": "sevt_8", "stop_reason": {"type": "requires_action", "event_ids": ["sevt_7"]}}),
            json!({"type": "user.message", "id": "sevt_9", "content": [{"type": "text", "text": "hurry"}]}),
            json!({"type": "user.tool_confirmation", "id": "sevt_10", "tool_use_id": "sevt_7", "result": "deny", "deny_message": "no edits"}),
            json!({"type": "user.tool_result", "id": "sevt_11", "tool_use_id": "sevt_5", "content": [{"type": "text", "text": "A"}], "is_error": false}),
        ]);
        let turns = conversation(&log);
        let roles: Vec<Role> = turns.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        assert_eq!(turns[0].content, [text("hi")]);
        assert_eq!(turns[1].content.len(), 4);
        assert!(matches!(&turns[1].content[1], Block::ToolUse { id, name, .. } if id == "sevt_5" && name == "read"));
        let user = &turns[2].content;
        assert_eq!(user.len(), 4);
        assert!(matches!(&user[0], Block::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "sevt_6"));
        assert!(
            matches!(&user[1], Block::ToolResult { tool_use_id, is_error: true, content } if tool_use_id == "sevt_7" && content == &[ResultPart::Text("no edits".into())])
        );
        assert!(matches!(&user[2], Block::ToolResult { tool_use_id, is_error: false, .. } if tool_use_id == "sevt_5"));
        assert_eq!(user[3], text("hurry"), "text after the results");
    }

    #[test]
    fn a_call_never_answered_gets_an_error_result_after_its_turn() {
        let log = logged(vec![
            json!({"type": "user.message", "id": "sevt_1", "content": [{"type": "text", "text": "go"}]}),
            json!({"type": "agent.custom_tool_use", "id": "sevt_2", "name": "lookup", "input": {}}),
            json!({"type": "user.interrupt", "id": "sevt_3"}),
            json!({"type": "user.message", "id": "sevt_4", "content": [{"type": "text", "text": "never mind"}]}),
        ]);
        let turns = conversation(&log);
        assert_eq!(turns.len(), 3);
        assert!(
            matches!(&turns[2].content[0], Block::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "sevt_2")
        );
        assert_eq!(turns[2].content[1], text("never mind"));
    }

    #[test]
    fn an_answer_that_broke_off_is_the_start_of_the_next_one_without_trailing_whitespace() {
        let log = logged(vec![
            json!({"type": "user.message", "id": "sevt_1", "content": [{"type": "text", "text": "go"}]}),
            json!({"type": "agent.message", "id": "sevt_2", "content": [{"type": "text", "text": "First part. "}]}),
            json!({"type": "agent.message", "id": "sevt_3", "content": [{"type": "text", "text": " \n"}]}),
        ]);
        let turns = conversation(&log);
        assert_eq!(turns.iter().map(|m| m.role).collect::<Vec<_>>(), [Role::User, Role::Assistant]);
        assert_eq!(turns[1].content, [text("First part.")], "the blank block is dropped, the other trimmed");
        let blank = &log[..1].iter().chain(&log[2..]).cloned().collect::<Vec<_>>();
        assert_eq!(conversation(blank).len(), 1, "an assistant turn of whitespace only is left out");
    }
}
