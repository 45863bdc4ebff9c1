//! Session events: the log and its listings, and the session state machine carried out by
//! `append_events`.

use std::time::Duration;

use mnemo_api::{EventId, SessionId, SessionStatus, WorkState};
use mnemo_store::{Appended, EventAuthor, Limits, ListEvents, SessionEvent, Store, StoreError};
use serde_json::{Value, json};

use super::fixtures::{
    agent, environment, event, follow, id_of, new_session, processed_at, seqs, types, user_message, with_session,
    work_of,
};
use crate::StoreFactory;

fn all(limit: u32) -> ListEvents {
    ListEvents { limit, ..Default::default() }
}

/// Every event a listing returns, following `next` to the end.
async fn listed(s: &dyn Store, session: &SessionId, query: ListEvents) -> Vec<SessionEvent> {
    let ws = s.default_workspace().await.unwrap();
    follow(query.limit, query.after.clone(), async |after| {
        s.list_events(&ws, session, ListEvents { after, ..query.clone() }).await.unwrap()
    })
    .await
}

fn tool_use(name: &str) -> mnemo_api::Event {
    event(json!({"type": "agent.tool_use", "name": name, "input": {"path": "/x"}}))
}

fn custom_tool_use() -> mnemo_api::Event {
    event(json!({"type": "agent.custom_tool_use", "name": "lookup", "input": {"word": "x"}}))
}

fn tool_result(call: &EventId, text: &str) -> mnemo_api::Event {
    event(
        json!({"type": "user.tool_result", "tool_use_id": call, "content": [{"type": "text", "text": text}], "is_error": false}),
    )
}

fn custom_result(call: &EventId, text: &str) -> mnemo_api::Event {
    event(
        json!({"type": "user.custom_tool_result", "custom_tool_use_id": call, "content": [{"type": "text", "text": text}]}),
    )
}

fn confirmation(call: &EventId, verdict: &str) -> mnemo_api::Event {
    event(json!({"type": "user.tool_confirmation", "tool_use_id": call, "result": verdict}))
}

fn end_turn() -> mnemo_api::Event {
    event(json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}))
}

fn agent_message(text: &str) -> mnemo_api::Event {
    event(json!({"type": "agent.message", "content": [{"type": "text", "text": text}]}))
}

/// The session's status and why it last went idle.
/// (As the API shows them: the stop reason as JSON.)
async fn state(s: &dyn Store, session: &SessionId) -> (String, Value) {
    let ws = s.default_workspace().await.unwrap();
    let got = s.get_session(&ws, session).await.unwrap();
    (got.status.as_str().to_owned(), serde_json::to_value(got.stop_reason).unwrap())
}

fn requires_action(calls: &[&EventId]) -> Value {
    json!({"type": "requires_action", "event_ids": calls})
}

/// `recorded` are the request's events and `written` everything logged, in log order.
fn assert_appended(got: &Appended, recorded: &[&str], written: &[&str]) {
    assert_eq!(types(&got.recorded), recorded, "recorded");
    assert_eq!(types(&got.written), written, "written");
    assert!(got.written.windows(2).all(|w| w[0].seq < w[1].seq), "written in log order");
}

pub async fn events_are_listed_in_order_with_filters_and_cursors(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, false).await;
    let agent = agent(&*s).await;
    let mut new = new_session(&agent, &env);
    new.initial_events = vec![user_message("0")];
    let session = s.create_session(&ws, new).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let first = s
        .append_events(&ws, &session.id, vec![user_message("1"), user_message("2")], super::fixtures::person())
        .await
        .unwrap();
    assert_appended(&first, &["user.message", "user.message"], &["user.message", "user.message"]);
    assert!(!first.enqueued_work, "a session without a work queue gets no work");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let system = event(json!({"type": "system.message", "content": [{"type": "text", "text": "be brief"}]}));
    let interrupt = event(json!({"type": "user.interrupt"}));
    let second = s.append_events(&ws, &session.id, vec![system, interrupt], super::fixtures::person()).await.unwrap();

    let log = s.events_after(&ws, &session.id, 0).await.unwrap();
    assert_eq!(types(&log), ["user.message", "user.message", "user.message", "system.message", "user.interrupt"]);
    assert!(log.windows(2).all(|w| w[0].seq < w[1].seq), "positions increase along the log");
    assert!(log.iter().all(|e| e.to_json()["id"].is_string() && e.to_json()["processed_at"].is_string()));
    assert_eq!(&log[1..3], &first.recorded[..], "an append answers with the events as logged");
    assert_eq!(&log[3..], &second.recorded[..]);
    assert_eq!(log[2].to_json()["content"][0]["text"], "2");

    // Both directions, whole and page by page.
    let mut reversed = log.clone();
    reversed.reverse();
    let page = s.list_events(&ws, &session.id, all(100)).await.unwrap();
    assert_eq!((page.items.as_slice(), page.next.is_none()), (log.as_slice(), true));
    assert_eq!(listed(&*s, &session.id, ListEvents { descending: true, ..all(100) }).await, reversed);
    for limit in [1, 2, 4] {
        assert_eq!(listed(&*s, &session.id, all(limit)).await, log, "ascending pages of {limit}");
        assert_eq!(listed(&*s, &session.id, ListEvents { descending: true, ..all(limit) }).await, reversed);
    }

    // Types.
    let messages = ListEvents { types: vec!["user.message".into()], ..all(100) };
    assert_eq!(seqs(&listed(&*s, &session.id, messages.clone()).await), seqs(&log[..3]));
    assert_eq!(seqs(&listed(&*s, &session.id, ListEvents { limit: 1, ..messages }).await), seqs(&log[..3]));
    let two = ListEvents { types: vec!["system.message".into(), "user.interrupt".into()], descending: true, ..all(1) };
    assert_eq!(seqs(&listed(&*s, &session.id, two).await), [log[4].seq, log[3].seq]);

    // Inclusive bounds on `processed_at`.
    let (t0, t1, t2) = (processed_at(&log[0]), processed_at(&log[1]), processed_at(&log[3]));
    assert!(t0 < t1 && t1 < t2, "{t0} {t1} {t2}");
    let from_second = ListEvents { processed_gte: Some(t2), ..all(100) };
    assert_eq!(seqs(&listed(&*s, &session.id, from_second).await), seqs(&log[3..]));
    let until_first = ListEvents { processed_lte: Some(t1), ..all(100) };
    assert_eq!(seqs(&listed(&*s, &session.id, until_first).await), seqs(&log[..3]));
    let just_first = ListEvents { processed_gte: Some(t1), processed_lte: Some(t1), descending: true, ..all(1) };
    assert_eq!(seqs(&listed(&*s, &session.id, just_first).await), [log[2].seq, log[1].seq]);

    // Resuming.
    assert_eq!(s.events_after(&ws, &session.id, log[2].seq).await.unwrap(), &log[3..]);
    assert!(s.events_after(&ws, &session.id, log[4].seq).await.unwrap().is_empty());

    let unknown = SessionId::generate();
    assert_err!(s.list_events(&ws, &unknown, all(10)).await, StoreError::NotFound { .. });
    assert_err!(s.events_after(&ws, &unknown, 0).await, StoreError::NotFound { .. });
    assert_err!(
        s.append_events(&ws, &unknown, vec![user_message("x")], super::fixtures::person()).await,
        StoreError::NotFound { .. }
    );
}

pub async fn the_session_state_machine_runs_through_the_store(factory: &impl StoreFactory) {
    let (s, ws, _, session) = with_session(factory, Limits::default(), true).await;
    let id = &session.id;

    // The agent calls two tools: the session runs, then idles waiting for both.
    let calls = s
        .append_events(
            &ws,
            id,
            vec![agent_message("let me look"), tool_use("read"), custom_tool_use()],
            EventAuthor::Server,
        )
        .await
        .unwrap();
    assert_appended(
        &calls,
        &["agent.message", "agent.tool_use", "agent.custom_tool_use"],
        &["session.status_running", "agent.message", "agent.tool_use", "agent.custom_tool_use", "session.status_idle"],
    );
    let (tool, custom) = (id_of(&calls.recorded[1]), id_of(&calls.recorded[2]));
    assert_eq!(calls.recorded[1].to_json()["evaluated_permission"], "allow");
    assert_eq!(calls.written[4].to_json()["stop_reason"], requires_action(&[&tool, &custom]));
    assert_eq!(state(&*s, id).await, ("idle".into(), requires_action(&[&tool, &custom])));

    // A result answers its call; the other still waits.
    let answered =
        s.append_events(&ws, id, vec![tool_result(&tool, "contents")], super::fixtures::person()).await.unwrap();
    assert_appended(&answered, &["user.tool_result"], &["user.tool_result"]);
    assert_eq!(answered.recorded[0].to_json()["tool_use_id"], json!(tool));
    assert_eq!(state(&*s, id).await.0, "idle");

    // A retried identical result is the recorded one; a different one is a conflict.
    let retried =
        s.append_events(&ws, id, vec![tool_result(&tool, "contents")], super::fixtures::person()).await.unwrap();
    assert_eq!(retried.recorded, answered.recorded, "the recorded event, same position and id");
    assert!(retried.written.is_empty(), "a retry writes nothing");
    assert_err!(
        s.append_events(&ws, id, vec![tool_result(&tool, "other")], super::fixtures::person()).await,
        StoreError::Conflict(_)
    );

    // A result must name an open call of its own kind.
    assert_err!(
        s.append_events(&ws, id, vec![tool_result(&custom, "x")], super::fixtures::person()).await,
        StoreError::Invalid(_)
    );
    assert_err!(
        s.append_events(&ws, id, vec![custom_result(&tool, "x")], super::fixtures::person()).await,
        StoreError::Invalid(_)
    );
    let unknown = EventId::generate();
    assert_err!(
        s.append_events(&ws, id, vec![tool_result(&unknown, "x")], super::fixtures::person()).await,
        StoreError::Invalid(_)
    );
    let message_id = id_of(&calls.recorded[0]);
    assert_err!(
        s.append_events(&ws, id, vec![tool_result(&message_id, "x")], super::fixtures::person()).await,
        StoreError::Invalid(_),
        "an agent.message is no call"
    );

    // The last answer runs the session again.
    let last =
        s.append_events(&ws, id, vec![custom_result(&custom, "found")], super::fixtures::person()).await.unwrap();
    assert_appended(&last, &["user.custom_tool_result"], &["user.custom_tool_result", "session.status_running"]);
    assert_eq!(state(&*s, id).await.0, "running");

    // A turn cannot end while calls are open, nor claim `requires_action`; status changes
    // other than the end of a turn are never posted.
    let pending = s.append_events(&ws, id, vec![tool_use("glob")], EventAuthor::Server).await.unwrap();
    let glob = id_of(&pending.recorded[0]);
    assert_eq!(state(&*s, id).await, ("idle".into(), requires_action(&[&glob])));
    assert_err!(s.append_events(&ws, id, vec![end_turn()], EventAuthor::Server).await, StoreError::Invalid(_));
    let claim =
        event(json!({"type": "session.status_idle", "stop_reason": {"type": "requires_action", "event_ids": [glob]}}));
    assert_err!(s.append_events(&ws, id, vec![claim], EventAuthor::Server).await, StoreError::Invalid(_));
    for posted in [json!({"type": "session.status_running"}), json!({"type": "session.status_terminated"})] {
        assert_err!(s.append_events(&ws, id, vec![event(posted)], EventAuthor::Server).await, StoreError::Invalid(_));
    }

    // One request may answer and end the turn at once, in order.
    let done = s.append_events(&ws, id, vec![tool_result(&glob, "[]")], super::fixtures::person()).await.unwrap();
    assert_appended(&done, &["user.tool_result"], &["user.tool_result", "session.status_running"]);
    let ended = s.append_events(&ws, id, vec![agent_message("done"), end_turn()], EventAuthor::Server).await.unwrap();
    assert_appended(&ended, &["agent.message", "session.status_idle"], &["agent.message", "session.status_idle"]);
    assert_eq!(state(&*s, id).await, ("idle".into(), json!({"type": "end_turn"})));

    // A refused request writes none of its events.
    let before = s.events_after(&ws, id, 0).await.unwrap();
    let mixed = vec![user_message("fine"), tool_result(&unknown, "x")];
    assert_err!(s.append_events(&ws, id, mixed, super::fixtures::person()).await, StoreError::Invalid(_));
    assert_eq!(s.events_after(&ws, id, 0).await.unwrap(), before, "all or nothing");
}

pub async fn confirmations_gate_tool_calls(factory: &impl StoreFactory) {
    let (s, ws, _, session) = with_session(factory, Limits::default(), false).await;
    let id = &session.id;

    // `bash` asks: a confirmation that allows leaves the call open for its result.
    let asked = s.append_events(&ws, id, vec![tool_use("bash")], EventAuthor::Server).await.unwrap();
    let bash = id_of(&asked.recorded[0]);
    assert_eq!(asked.recorded[0].to_json()["evaluated_permission"], "ask");
    let allowed =
        s.append_events(&ws, id, vec![confirmation(&bash, "allow")], super::fixtures::person()).await.unwrap();
    assert_appended(&allowed, &["user.tool_confirmation"], &["user.tool_confirmation"]);
    assert_eq!(state(&*s, id).await, ("idle".into(), requires_action(&[&bash])));
    let answered = s.append_events(&ws, id, vec![tool_result(&bash, "ok")], super::fixtures::person()).await.unwrap();
    assert_appended(&answered, &["user.tool_result"], &["user.tool_result", "session.status_running"]);
    assert_err!(
        s.append_events(&ws, id, vec![confirmation(&bash, "deny")], super::fixtures::person()).await,
        StoreError::Conflict(_)
    );

    // A denial answers the call: the session runs again, and no result can follow.
    let asked = s.append_events(&ws, id, vec![tool_use("bash")], EventAuthor::Server).await.unwrap();
    let second = id_of(&asked.recorded[0]);
    assert_eq!(types(&asked.written), ["agent.tool_use", "session.status_idle"], "already running");
    let deny =
        event(json!({"type": "user.tool_confirmation", "tool_use_id": second, "result": "deny", "deny_message": "no"}));
    let denied = s.append_events(&ws, id, vec![deny], super::fixtures::person()).await.unwrap();
    assert_appended(&denied, &["user.tool_confirmation"], &["user.tool_confirmation", "session.status_running"]);
    assert_err!(
        s.append_events(&ws, id, vec![tool_result(&second, "late")], super::fixtures::person()).await,
        StoreError::Conflict(_)
    );

    // A disabled tool is denied at once: it counts as answered and idles nothing.
    let fetch = s.append_events(&ws, id, vec![tool_use("web_fetch")], EventAuthor::Server).await.unwrap();
    assert_appended(&fetch, &["agent.tool_use"], &["agent.tool_use"]);
    assert_eq!(fetch.recorded[0].to_json()["evaluated_permission"], "deny");
    assert_eq!(state(&*s, id).await.0, "running");
    assert_err!(
        s.append_events(&ws, id, vec![tool_result(&id_of(&fetch.recorded[0]), "x")], super::fixtures::person()).await,
        StoreError::Conflict(_)
    );
    s.append_events(&ws, id, vec![end_turn()], EventAuthor::Server).await.unwrap();

    // Only built-in tool calls are confirmed.
    let custom = s.append_events(&ws, id, vec![custom_tool_use()], EventAuthor::Server).await.unwrap();
    let custom = id_of(&custom.recorded[0]);
    assert_err!(
        s.append_events(&ws, id, vec![confirmation(&custom, "allow")], super::fixtures::person()).await,
        StoreError::Invalid(_)
    );
    assert_err!(
        s.append_events(&ws, id, vec![confirmation(&EventId::generate(), "allow")], super::fixtures::person()).await,
        StoreError::Invalid(_)
    );
}

pub async fn only_the_agent_side_posts_agent_events(factory: &impl StoreFactory) {
    let (s, ws, _, session) = with_session(factory, Limits::default(), false).await;
    let worker = EventAuthor::SessionToken { session: session.id.clone(), work: "work_w".parse().unwrap() };
    for agent_only in [agent_message("hi"), tool_use("read"), custom_tool_use(), end_turn()] {
        let kind = agent_only.kind().to_owned();
        let got = s.append_events(&ws, &session.id, vec![agent_only], worker.clone()).await;
        assert!(matches!(got, Err(StoreError::Forbidden(_))), "{kind} from a worker: {got:?}");
    }
    assert!(s.events_after(&ws, &session.id, 0).await.unwrap().is_empty(), "nothing was written");
    assert_eq!(state(&*s, &session.id).await.0, "idle");
}

/// Workers (environment keys, sessions tokens) post tool results only; every event records who
/// posted it, and what the server emits in answer is the server's.
pub async fn workers_post_results_only_and_every_event_names_its_poster(factory: &impl StoreFactory) {
    let (s, ws, env, session) = with_session(factory, Limits::default(), true).await;
    let item = work_of(&*s, &env, &session).await;
    let id = &session.id;
    let token = EventAuthor::SessionToken { session: id.clone(), work: item.id.clone() };
    let env_key = EventAuthor::EnvironmentKey("envkey_w".parse().unwrap());
    let call = s.append_events(&ws, id, vec![tool_use("bash")], EventAuthor::Server).await.unwrap();
    let call = id_of(&call.recorded[0]);
    let input = [
        user_message("approve yourself"),
        confirmation(&call, "allow"),
        event(json!({"type": "system.message", "content": []})),
        event(json!({"type": "user.interrupt"})),
        event(json!({"type": "user.define_outcome", "description": "d", "rubric": {"type": "text", "content": "r"}})),
    ];
    for worker in [&token, &env_key] {
        for e in input.clone() {
            let kind = e.kind().to_owned();
            let got = s.append_events(&ws, id, vec![e], worker.clone()).await;
            assert!(matches!(got, Err(StoreError::Forbidden(_))), "{kind} from {worker:?}: {got:?}");
        }
    }

    // The environment key answers while the session has its live item; the log says who did.
    let answered = s.append_events(&ws, id, vec![tool_result(&call, "ok")], env_key.clone()).await.unwrap();
    assert_eq!(
        answered.recorded[0].to_json()["posted_by"],
        json!({"type": "environment_key_actor", "environment_key_id": "envkey_w"})
    );
    let second = s.append_events(&ws, id, vec![tool_use("read")], EventAuthor::Server).await.unwrap();
    let second = id_of(&second.recorded[0]);
    let answered = s.append_events(&ws, id, vec![tool_result(&second, "ok")], token.clone()).await.unwrap();
    assert_eq!(
        answered.recorded[0].to_json()["posted_by"],
        json!({"type": "session_actor", "session_id": id, "work_id": item.id})
    );
    let message = s.append_events(&ws, id, vec![user_message("thanks")], super::fixtures::person()).await.unwrap();
    assert_eq!(message.recorded[0].to_json()["posted_by"], json!({"type": "api_actor", "api_key_id": "apikey_person"}));

    // Read back from the log: the requests' events are their posters', status changes the server's.
    let log = s.events_after(&ws, id, 0).await.unwrap();
    let refused = ["user.tool_confirmation", "system.message", "user.interrupt", "user.define_outcome"];
    assert!(
        !log.iter().any(|e| refused.contains(&e.to_json()["type"].as_str().unwrap())),
        "nothing refused was written"
    );
    assert_eq!(log.iter().filter(|e| e.to_json()["type"] == "user.message").count(), 1, "only the person's message");
    for e in &log {
        let json = e.to_json();
        let kind = json["type"].as_str().unwrap();
        let poster = json["posted_by"]["type"].as_str().unwrap_or_else(|| panic!("{kind} records no poster"));
        let expected = match kind {
            "user.tool_result" => ["environment_key_actor", "session_actor"].as_slice(),
            "user.message" => &["api_actor"],
            _ => &["server_actor"],
        };
        assert!(expected.contains(&poster), "{kind} posted by {poster}");
    }

    // Without a live item, an environment key answers nothing.
    let third = s.append_events(&ws, id, vec![tool_use("glob")], EventAuthor::Server).await.unwrap();
    let third = id_of(&third.recorded[0]);
    for w in s.list_work(&ws, &env.id, 10, None).await.unwrap().items {
        if w.state != WorkState::Stopped {
            s.stop_work(&ws, &env.id, &w.id, true).await.unwrap();
        }
    }
    let got = s.append_events(&ws, id, vec![tool_result(&third, "late")], env_key).await;
    assert!(matches!(got, Err(StoreError::Forbidden(_))), "{got:?}");
}

pub async fn terminated_sessions_accept_no_events(factory: &impl StoreFactory) {
    let (s, ws, env, session) = with_session(factory, Limits::default(), true).await;
    let calls = s.append_events(&ws, &session.id, vec![tool_use("read")], EventAuthor::Server).await.unwrap();
    let call = id_of(&calls.recorded[0]);
    s.archive_session(&ws, &session.id).await.unwrap();
    let before = s.events_after(&ws, &session.id, 0).await.unwrap();
    for (author, late) in [
        (super::fixtures::person(), user_message("anyone?")),
        (super::fixtures::person(), tool_result(&call, "late")),
        (EventAuthor::Server, agent_message("still here")),
    ] {
        let kind = late.kind().to_owned();
        let got = s.append_events(&ws, &session.id, vec![late], author).await;
        assert!(matches!(got, Err(StoreError::Invalid(_))), "{kind} to a terminated session: {got:?}");
    }
    assert_eq!(s.events_after(&ws, &session.id, 0).await.unwrap(), before);
    let work = work_of(&*s, &env, &session).await;
    assert_eq!(work.state, WorkState::Stopped, "and no work was queued for it");
    assert_eq!(state(&*s, &session.id).await.0, SessionStatus::Terminated.as_str());
}

pub async fn input_enqueues_work_only_without_live_work(factory: &impl StoreFactory) {
    let (s, ws, env, session) = with_session(factory, Limits::default(), true).await;
    let first = work_of(&*s, &env, &session).await;
    let live = s.append_events(&ws, &session.id, vec![user_message("hi")], super::fixtures::person()).await.unwrap();
    assert!(!live.enqueued_work, "the session already has a live item");

    s.stop_work(&ws, &env.id, &first.id, true).await.unwrap();
    let input =
        s.append_events(&ws, &session.id, vec![user_message("again")], super::fixtures::person()).await.unwrap();
    assert!(input.enqueued_work, "new input for a session without live work queues an item");
    let items = s.list_work(&ws, &env.id, 10, None).await.unwrap().items;
    assert_eq!(items.iter().map(|w| w.state).collect::<Vec<_>>(), [WorkState::Queued, WorkState::Stopped]);
    assert_eq!(items[0].data.id, session.id.as_str());
    let more =
        s.append_events(&ws, &session.id, vec![user_message("and again")], super::fixtures::person()).await.unwrap();
    assert!(!more.enqueued_work);

    // Results need a worker already there; tool calls need one.
    s.stop_work(&ws, &env.id, &items[0].id, true).await.unwrap();
    let call = s.append_events(&ws, &session.id, vec![tool_use("read")], EventAuthor::Server).await.unwrap();
    assert!(call.enqueued_work, "a tool call without a worker queues one");
    let items = s.list_work(&ws, &env.id, 10, None).await.unwrap().items;
    assert_eq!(items.len(), 3);
    s.stop_work(&ws, &env.id, &items[0].id, true).await.unwrap();
    let result = s
        .append_events(&ws, &session.id, vec![tool_result(&id_of(&call.recorded[0]), "ok")], super::fixtures::person())
        .await
        .unwrap();
    assert!(!result.enqueued_work, "a result is not input that needs a worker");

    let cloud = environment(&*s, false).await;
    let elsewhere = super::fixtures::session(&*s, &cloud).await;
    let got = s.append_events(&ws, &elsewhere.id, vec![user_message("hi")], super::fixtures::person()).await.unwrap();
    assert!(!got.enqueued_work, "a session without a work queue never gets work");
}
