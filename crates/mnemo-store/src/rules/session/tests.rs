//! One row per rule of the session state machine.

use serde_json::{Value, json};

use super::*;

/// Ids `sevt_n1`, `sevt_n2`, … at the time `T`.
struct Counter(u32);

impl Minter for Counter {
    fn event_id(&mut self) -> EventId {
        self.0 += 1;
        id(&format!("n{}", self.0))
    }

    fn processed_at(&self) -> String {
        "T".into()
    }
}

fn id(body: &str) -> EventId {
    format!("sevt_{body}").parse().unwrap()
}

fn agent() -> Value {
    json!({"tools": [{
        "type": "agent_toolset_20260401",
        "default_config": {"enabled": true, "permission_policy": {"type": "always_allow"}},
        "configs": [
            {"name": "bash", "permission_policy": {"type": "always_ask"}},
            {"name": "web_fetch", "enabled": false},
        ],
    }]})
}

/// The session every row starts from, changed by the row's `setup`.
struct Given {
    status: SessionStatus,
    archived: bool,
    stop_reason: Option<StopReason>,
    open: Vec<&'static str>,
    calls: Vec<(&'static str, CallKind, bool, Option<Value>)>,
    self_hosted: bool,
    live_work: bool,
}

impl Default for Given {
    fn default() -> Self {
        Self {
            status: SessionStatus::Idle,
            archived: false,
            stop_reason: None,
            open: vec![],
            calls: vec![],
            self_hosted: true,
            live_work: false,
        }
    }
}

fn event(v: Value) -> Event {
    Event::parse(v).unwrap()
}

/// The plan as short lines: `+type` (requested), `~type` (emitted), `answer id`, `existing seq`,
/// then `status …`, `reason …`, `enqueue`.
fn run(given: Given, events: Vec<Value>, author: &EventAuthor) -> Result<Vec<String>, String> {
    let agent = agent();
    let session: SessionId = "sesn_s".parse().unwrap();
    let view = SessionView {
        id: &session,
        status: given.status,
        archived: given.archived,
        stop_reason: given.stop_reason,
        tools: Toolset::of_agent(&agent),
        open_calls: given.open.iter().map(|o| id(o)).collect(),
        self_hosted: given.self_hosted,
        has_live_work: given.live_work,
    };
    let known = given
        .calls
        .into_iter()
        .map(|(call, kind, answered, answer)| {
            let answer = answer.map(|body| {
                let (Event::UserToolResult(r) | Event::UserCustomToolResult(r)) = event(body.clone()) else {
                    panic!("not a result: {body}")
                };
                let logged = LoggedEvent { id: id("r"), event: event(body), processed_at: None, posted_by: None };
                (r, SessionEvent { seq: 7, event: logged })
            });
            (id(call), KnownCall { kind, answered, answer })
        })
        .collect();
    let events = events.into_iter().map(event).collect();
    let plan = plan_append(&view, known, events, author, &mut Counter(0)).map_err(|e| match e {
        StoreError::Invalid(m) => format!("invalid: {m}"),
        StoreError::Conflict(m) => format!("conflict: {m}"),
        StoreError::Forbidden(m) => format!("forbidden: {m}"),
        other => format!("other: {other}"),
    })?;
    let mut lines: Vec<String> = plan
        .steps
        .iter()
        .map(|s| match s {
            Step::Record { event, requested } => {
                let mark = if *requested { '+' } else { '~' };
                let json = event.to_json();
                let extra = match &event.event {
                    Event::AgentToolUse(c) => format!(" {}", json!(c.evaluated_permission)),
                    Event::StatusIdle(i) => format!(" {}", reason(&i.stop_reason)),
                    _ => String::new(),
                };
                format!("{mark}{}{extra}", json["type"].as_str().unwrap())
            }
            Step::MarkAnswered(id) => format!("answer {id}"),
            Step::Existing(e) => format!("existing {}", e.seq),
        })
        .collect();
    match (plan.status, &plan.stop_reason) {
        (Some(status), Some(why)) => lines.push(format!("status {} {}", status.as_str(), reason(why))),
        (Some(status), None) => lines.push(format!("status {}", status.as_str())),
        (None, Some(why)) => lines.push(format!("reason {}", reason(why))),
        (None, None) => {}
    }
    if plan.enqueue_work {
        lines.push("enqueue".into());
    }
    Ok(lines)
}

/// A stop reason in short: `end_turn`, `requires_action(sevt_a,sevt_b)`, …
fn reason(r: &StopReason) -> String {
    match r {
        StopReason::RequiresAction { event_ids } => {
            format!("requires_action({})", event_ids.iter().map(EventId::as_str).collect::<Vec<_>>().join(","))
        }
        other => json!(other)["type"].as_str().unwrap().to_owned(),
    }
}

/// A running session whose worker is already there.
fn running() -> Given {
    Given { status: SessionStatus::Running, live_work: true, ..Given::default() }
}

fn result(call: &str) -> Value {
    json!({"type": "user.tool_result", "tool_use_id": format!("sevt_{call}"), "content": [{"type": "text", "text": "ok"}]})
}

fn message() -> Value {
    json!({"type": "user.message", "content": [{"type": "text", "text": "hi"}]})
}

/// A rule, the session, the request, its author, and the plan's lines or the error.
type Row = (&'static str, Given, Vec<Value>, EventAuthor, Result<Vec<&'static str>, &'static str>);

use CallKind::{Custom, Tool};

/// A person's client (or the console, or an outside agent loop): an API key.
fn key() -> EventAuthor {
    EventAuthor::ApiKey("apikey_k".parse().unwrap())
}

/// The server's own agent loop.
fn server() -> EventAuthor {
    EventAuthor::Server
}

/// A worker holding the environment's key.
fn env_key() -> EventAuthor {
    EventAuthor::EnvironmentKey("envkey_e".parse().unwrap())
}

/// A person with their identity provider's token.
fn person() -> EventAuthor {
    EventAuthor::Person("user_p".parse().unwrap())
}

/// A worker holding the sessions token of its delivery.
fn token() -> EventAuthor {
    EventAuthor::SessionToken { session: "sesn_s".parse().unwrap(), work: "work_w".parse().unwrap() }
}

#[test]
fn the_session_state_machine() {
    let open_call = || Given { open: vec!["c"], calls: vec![("c", Tool, false, None)], ..Given::default() };
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("a terminated session accepts nothing",
            Given { status: SessionStatus::Terminated, ..Given::default() }, vec![message()], key(),
            Err("invalid: session `sesn_s` is terminated; it accepts no events")),
        ("an archived session accepts nothing",
            Given { archived: true, ..Given::default() }, vec![message()], key(),
            Err("invalid: session `sesn_s` is terminated; it accepts no events")),
        ("input queues a worker on a self-hosted environment without live work",
            Given::default(), vec![message()], key(), Ok(vec!["+user.message", "enqueue"])),
        ("input does not queue a second live item",
            Given { live_work: true, ..Given::default() }, vec![message()], key(), Ok(vec!["+user.message"])),
        ("a cloud environment has no queue",
            Given { self_hosted: false, ..Given::default() }, vec![message()], key(), Ok(vec!["+user.message"])),
        ("interrupts, outcomes and system messages are input too",
            Given::default(),
            vec![json!({"type": "user.interrupt"}),
                 json!({"type": "user.define_outcome", "description": "d", "rubric": {"type": "text", "content": "r"}}),
                 json!({"type": "system.message", "content": []})],
            key(), Ok(vec!["+user.interrupt", "+user.define_outcome", "+system.message", "enqueue"])),
        ("a result answers its open call",
            open_call(), vec![result("c")], token(), Ok(vec!["answer sevt_c", "+user.tool_result"])),
        ("a result for no call is refused",
            Given::default(), vec![result("x")], key(), Err("invalid: no agent.tool_use `sevt_x` in session `sesn_s`")),
        ("a result of the wrong kind is refused",
            Given { calls: vec![("c", Custom, false, None)], ..Given::default() }, vec![result("c")], token(),
            Err("invalid: `sevt_c` is a agent.custom_tool_use, which user.tool_result cannot answer")),
        ("a retried result answers with the recorded one",
            Given { calls: vec![("c", Tool, true, Some(result("c")))], ..Given::default() }, vec![result("c")], token(),
            Ok(vec!["existing 7"])),
        ("a different answer to an answered call is a conflict",
            Given { calls: vec![("c", Tool, true, Some(json!({"type": "user.tool_result", "tool_use_id": "sevt_c", "is_error": true})))], ..Given::default() },
            vec![result("c")], token(), Err("conflict: tool call `sevt_c` is already answered")),
        ("a denied call takes no result",
            Given { calls: vec![("c", Tool, true, None)], ..Given::default() }, vec![result("c")], token(),
            Err("conflict: tool call `sevt_c` is already answered")),
        ("a custom result answers a custom call",
            Given { open: vec!["c"], calls: vec![("c", Custom, false, None)], ..Given::default() },
            vec![json!({"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_c"})], token(),
            Ok(vec!["answer sevt_c", "+user.custom_tool_result"])),
        ("an allow confirmation is recorded and leaves the call open",
            open_call(), vec![json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_c", "result": "allow"})], key(),
            Ok(vec!["+user.tool_confirmation"])),
        ("a deny confirmation resolves the call",
            open_call(), vec![json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_c", "result": "deny"})], key(),
            Ok(vec!["answer sevt_c", "+user.tool_confirmation"])),
        ("a confirmation needs an agent.tool_use",
            Given { calls: vec![("c", Custom, false, None)], ..Given::default() },
            vec![json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_c", "result": "allow"})], key(),
            Err("invalid: no agent.tool_use `sevt_c` in session `sesn_s`")),
        ("a resolved call takes no confirmation",
            Given { calls: vec![("c", Tool, true, None)], ..Given::default() },
            vec![json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_c", "result": "deny"})], key(),
            Err("conflict: tool call `sevt_c` is already resolved")),
        ("a person posts the user's side",
            Given::default(), vec![message(), json!({"type": "user.interrupt"})], person(),
            Ok(vec!["+user.message", "+user.interrupt", "enqueue"])),
        ("a person's client answers a custom tool call",
            Given { open: vec!["c"], calls: vec![("c", Custom, false, None)], ..Given::default() },
            vec![json!({"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_c"})], person(),
            Ok(vec!["answer sevt_c", "+user.custom_tool_result"])),
        ("a person does not post agent events",
            Given::default(), vec![json!({"type": "agent.message", "content": []})], person(),
            Err("forbidden: a person posts the user's side of a session; agent.message is the agent's (an API key driving it may post it)")),
        ("a worker does not post agent events",
            Given::default(), vec![json!({"type": "agent.message", "content": []})], token(),
            Err("forbidden: only an API key driving the session may post agent.message events")),
        ("an agent message sets an idle session running",
            Given::default(), vec![json!({"type": "agent.message", "content": []})], server(),
            Ok(vec!["~session.status_running", "+agent.message", "status running"])),
        ("a tool call idles the session, requiring action, and needs a worker",
            Given::default(), vec![json!({"type": "agent.tool_use", "name": "read", "input": {}})], server(),
            Ok(vec!["~session.status_running", "+agent.tool_use \"allow\"",
                    "~session.status_idle requires_action(sevt_n2)", "status idle requires_action(sevt_n2)", "enqueue"])),
        ("an always_ask tool is evaluated ask",
            running(),
            vec![json!({"type": "agent.tool_use", "name": "bash", "input": {}})], server(),
            Ok(vec!["+agent.tool_use \"ask\"",
                    "~session.status_idle requires_action(sevt_n1)", "status idle requires_action(sevt_n1)"])),
        ("a disabled tool is denied, answered at once, and nothing waits",
            running(),
            vec![json!({"type": "agent.tool_use", "name": "web_fetch", "input": {}})], server(),
            Ok(vec!["+agent.tool_use \"deny\"", "answer sevt_n1"])),
        ("custom tool calls wait too",
            running(),
            vec![json!({"type": "agent.custom_tool_use", "name": "lookup", "input": {}})], server(),
            Ok(vec!["+agent.custom_tool_use",
                    "~session.status_idle requires_action(sevt_n1)", "status idle requires_action(sevt_n1)"])),
        ("a call answered in the same request leaves nothing waiting",
            running(),
            vec![json!({"type": "agent.tool_use", "name": "read", "input": {}}), result("n1")], key(),
            Ok(vec!["+agent.tool_use \"allow\"", "answer sevt_n1", "+user.tool_result"])),
        ("a worker does not end a turn",
            Given::default(), vec![json!({"type": "session.status_idle"})], env_key(),
            Err("forbidden: only an API key driving the session may post session.status_idle events")),
        ("a turn cannot end while calls wait",
            Given { status: SessionStatus::Running, ..open_call() }, vec![json!({"type": "session.status_idle"})], server(),
            Err("invalid: 1 tool call(s) still wait for results; the turn cannot end yet")),
        ("a turn cannot end requiring action",
            Given { status: SessionStatus::Running, ..Given::default() },
            vec![json!({"type": "session.status_idle", "stop_reason": {"type": "requires_action", "event_ids": []}})], server(),
            Err("invalid: a turn cannot end with `requires_action`: the server reports it while tool calls wait")),
        ("ending a turn idles the session with its reason",
            Given { status: SessionStatus::Running, ..Given::default() },
            vec![json!({"type": "session.status_idle", "stop_reason": {"type": "refusal"}})], server(),
            Ok(vec!["+session.status_idle refusal", "status idle refusal"])),
        ("status changes are the server's to emit",
            Given::default(), vec![json!({"type": "session.status_running"})], server(),
            Err("invalid: events of type `session.status_running` cannot be posted")),
        ("the last answer sets a session that required action running again",
            Given { stop_reason: Some(StopReason::RequiresAction { event_ids: vec![id("c")] }), live_work: true, ..open_call() },
            vec![result("c")], token(),
            Ok(vec!["answer sevt_c", "+user.tool_result", "~session.status_running", "status running"])),
        ("an answer that leaves calls waiting keeps the session idle",
            Given {
                stop_reason: Some(StopReason::RequiresAction { event_ids: vec![id("c"), id("d")] }),
                open: vec!["c", "d"], calls: vec![("c", Tool, false, None)], live_work: true, ..Given::default()
            },
            vec![result("c")], token(), Ok(vec!["answer sevt_c", "+user.tool_result"])),
        ("results need no new worker",
            Given { live_work: false, ..open_call() }, vec![result("c")], token(),
            Ok(vec!["answer sevt_c", "+user.tool_result"])),
        ("an API key drives the agent side too",
            Given::default(), vec![json!({"type": "agent.message", "content": []})], key(),
            Ok(vec!["~session.status_running", "+agent.message", "status running"])),
        ("an environment key answers a call of a session its worker serves",
            Given { live_work: true, ..open_call() }, vec![result("c")], env_key(),
            Ok(vec!["answer sevt_c", "+user.tool_result"])),
        ("an environment key posts no result to a session no worker serves",
            open_call(), vec![result("c")], env_key(),
            Err("forbidden: this session has no work item in progress: an environment key may post tool results only to a session its worker serves")),
        ("a worker does not confirm a call",
            Given { live_work: true, ..open_call() },
            vec![json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_c", "result": "allow"})], token(),
            Err("forbidden: environment keys and sessions tokens may post tool results only (`user.tool_result`, `user.custom_tool_result`); user.tool_confirmation needs an API key")),
        ("a worker posts no user input",
            Given { live_work: true, ..Given::default() }, vec![message()], env_key(),
            Err("forbidden: environment keys and sessions tokens may post tool results only (`user.tool_result`, `user.custom_tool_result`); user.message needs an API key")),
        ("a worker posts no system message",
            Given { live_work: true, ..Given::default() }, vec![json!({"type": "system.message", "content": []})], token(),
            Err("forbidden: environment keys and sessions tokens may post tool results only (`user.tool_result`, `user.custom_tool_result`); system.message needs an API key")),
        ("a worker neither interrupts nor defines outcomes",
            Given { live_work: true, ..Given::default() }, vec![json!({"type": "user.interrupt"})], token(),
            Err("forbidden: environment keys and sessions tokens may post tool results only (`user.tool_result`, `user.custom_tool_result`); user.interrupt needs an API key")),
        ("a refused event refuses the request's results before it",
            Given { live_work: true, ..open_call() }, vec![result("c"), message()], token(),
            Err("forbidden: environment keys and sessions tokens may post tool results only (`user.tool_result`, `user.custom_tool_result`); user.message needs an API key")),
        ("the server's loop posts no user input",
            Given::default(), vec![message()], server(),
            Err("forbidden: the server's agent loop posts agent events only, not user.message")),
        ("the server's loop confirms nothing",
            open_call(), vec![json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_c", "result": "allow"})], server(),
            Err("forbidden: the server's agent loop posts agent events only, not user.tool_confirmation")),
    ];
    for (rule, given, events, author, expected) in rows {
        let got = run(given, events, &author);
        let expected =
            expected.map(|lines| lines.into_iter().map(str::to_owned).collect::<Vec<_>>()).map_err(str::to_owned);
        assert_eq!(got, expected, "rule: {rule}");
    }
}

#[test]
fn a_failed_plan_changes_nothing_even_after_accepted_events() {
    // The second event fails: the whole request is refused (the backend rolls back).
    let got = run(Given::default(), vec![message(), result("nope")], &key());
    assert!(got.is_err());
}

#[test]
fn permissions_follow_the_toolset() {
    let agent = agent();
    let tools = Toolset::of_agent(&agent);
    assert_eq!(tools.permission("read").0, Permission::Allow);
    assert_eq!(tools.permission("bash").0, Permission::Ask);
    assert_eq!(tools.permission("web_fetch").0, Permission::Deny);
}

#[test]
fn the_log_records_who_posted_each_event() {
    let agent = agent();
    let session: SessionId = "sesn_s".parse().unwrap();
    let view = SessionView {
        id: &session,
        status: SessionStatus::Idle,
        archived: false,
        stop_reason: None,
        tools: Toolset::of_agent(&agent),
        open_calls: vec![],
        self_hosted: true,
        has_live_work: false,
    };
    let posters = |author: EventAuthor, events: Vec<Value>| -> Vec<(String, Option<EventPoster>)> {
        let events = events.into_iter().map(event).collect();
        let plan = plan_append(&view, HashMap::new(), events, &author, &mut Counter(0)).unwrap();
        plan.steps
            .into_iter()
            .filter_map(|step| match step {
                Step::Record { event, .. } => Some((event.event.kind().to_owned(), event.posted_by)),
                _ => None,
            })
            .collect()
    };
    let k: ApiKeyId = "apikey_k".parse().unwrap();
    // The request's events are its author's; the status change the server emits is the server's.
    assert_eq!(
        posters(key(), vec![json!({"type": "agent.message", "content": []})]),
        vec![
            ("session.status_running".into(), Some(EventPoster::ServerActor)),
            ("agent.message".into(), Some(EventPoster::ApiActor { api_key_id: k.clone() })),
        ]
    );
    assert_eq!(
        posters(key(), vec![message()]),
        vec![("user.message".into(), Some(EventPoster::ApiActor { api_key_id: k }))]
    );
    assert_eq!(
        posters(server(), vec![json!({"type": "agent.message", "content": []})]),
        vec![
            ("session.status_running".into(), Some(EventPoster::ServerActor)),
            ("agent.message".into(), Some(EventPoster::ServerActor)),
        ]
    );
    assert_eq!(
        token().poster(),
        EventPoster::SessionActor { session_id: "sesn_s".parse().unwrap(), work_id: "work_w".parse().unwrap() }
    );
    assert_eq!(
        env_key().poster(),
        EventPoster::EnvironmentKeyActor { environment_key_id: "envkey_e".parse().unwrap() }
    );
    assert_eq!(
        posters(person(), vec![message()]),
        vec![("user.message".into(), Some(EventPoster::UserActor { user_id: "user_p".parse().unwrap() }))]
    );
}
