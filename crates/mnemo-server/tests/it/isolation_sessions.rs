//! Workspace isolation of agents, sessions and their events over HTTP (admin-api.md §8.2): a
//! key of workspace B gets, for workspace A's agent, session, event log and stream, exactly the
//! answer an unknown id gets (status and body, but for the id it names); B's listings show none
//! of A's rows; and a session B creates naming A's agent or environment is refused as one naming
//! an unknown id.

use mnemo_server::hash_credential;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer, toolset};

const KEY_B: &str = "sk-test-key-of-workspace-b";

/// A server whose `KEY` works in the Default workspace (A) and `KEY_B` in a second one (B).
async fn two_workspaces() -> TestServer {
    let s = TestServer::start().await;
    let store = s.store();
    let b = store.create_workspace("B").await.unwrap();
    store.ensure_api_key_in(&b, hash_credential(KEY_B), "b").await.unwrap();
    s
}

/// The body without what differs from one request to the next (its request id), with `id`
/// written as `<id>`.
fn normalized(body: &Value, id: &str) -> Value {
    let mut body = body.clone();
    if let Some(o) = body.as_object_mut() {
        o.remove("request_id");
    }
    serde_json::from_str(&body.to_string().replace(id, "<id>")).unwrap()
}

/// Asserts that B's call on A's object (`path` with `theirs`) is answered exactly as its call on
/// an unknown id (`path` with `unknown`): the same status and body, ids aside.
async fn same_answer(s: &TestServer, method: Method, path: &str, theirs: &str, unknown: &str, body: Option<Value>) {
    let (their_status, their_body) = s.call(method.clone(), &path.replace("{}", theirs), KEY_B, body.clone()).await;
    let (unknown_status, unknown_body) = s.call(method.clone(), &path.replace("{}", unknown), KEY_B, body).await;
    assert_eq!(their_status, unknown_status, "{method} {path}: {their_body} vs {unknown_body}");
    assert_eq!(their_status, 404, "{method} {path}: {their_body}");
    assert_eq!(
        normalized(&their_body, theirs),
        normalized(&unknown_body, unknown),
        "{method} {path}: another workspace's id is told from an unknown one"
    );
}

#[tokio::test]
async fn another_workspace_sees_no_agent_session_event_or_stream_of_a() {
    let s = two_workspaces().await;
    let agent = s.new_agent(toolset()).await;
    let (env, _) = s.new_environment_with_key().await;
    let (status, session) =
        s.call(Method::POST, "/v1/sessions", KEY, Some(json!({"agent": agent, "environment_id": env}))).await;
    assert_eq!(status, 200, "{session}");
    let sid = session["id"].as_str().unwrap().to_owned();
    let message = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]});
    let (status, _) = s.call(Method::POST, &format!("/v1/sessions/{sid}/events"), KEY, Some(message.clone())).await;
    assert_eq!(status, 200);

    let unknown_agent = mnemo_api::AgentId::generate().to_string();
    same_answer(&s, Method::GET, "/v1/agents/{}", &agent, &unknown_agent, None).await;
    same_answer(&s, Method::GET, "/v1/agents/{}?version=1", &agent, &unknown_agent, None).await;
    let rename = json!({"version": 1, "name": "B's now"});
    same_answer(&s, Method::POST, "/v1/agents/{}", &agent, &unknown_agent, Some(rename)).await;
    same_answer(&s, Method::POST, "/v1/agents/{}/archive", &agent, &unknown_agent, None).await;

    let unknown = mnemo_api::SessionId::generate().to_string();
    same_answer(&s, Method::GET, "/v1/sessions/{}", &sid, &unknown, None).await;
    let title = json!({"title": "B's now"});
    same_answer(&s, Method::POST, "/v1/sessions/{}", &sid, &unknown, Some(title)).await;
    same_answer(&s, Method::GET, "/v1/sessions/{}/events", &sid, &unknown, None).await;
    same_answer(&s, Method::POST, "/v1/sessions/{}/events", &sid, &unknown, Some(message)).await;
    same_answer(&s, Method::GET, "/v1/sessions/{}/events/stream", &sid, &unknown, None).await;
    same_answer(&s, Method::POST, "/v1/sessions/{}/archive", &sid, &unknown, None).await;
    same_answer(&s, Method::DELETE, "/v1/sessions/{}", &sid, &unknown, None).await;

    for list in ["/v1/agents?include_archived=true", "/v1/sessions?include_archived=true"] {
        let (status, page) = s.call(Method::GET, list, KEY_B, None).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["data"], json!([]), "B lists nothing of A's: {list}");
    }
    let (_, page) = s.call(Method::GET, &format!("/v1/sessions?agent_id={agent}"), KEY_B, None).await;
    assert_eq!(page["data"], json!([]), "nor through A's agent");

    // A's objects are as A left them: B changed nothing.
    let (_, still) = s.call(Method::GET, &format!("/v1/agents/{agent}"), KEY, None).await;
    assert_eq!((&still["version"], &still["name"], &still["archived_at"]), (&json!(1), &json!("a"), &Value::Null));
    let (_, still) = s.call(Method::GET, &format!("/v1/sessions/{sid}"), KEY, None).await;
    assert_eq!((&still["title"], &still["archived_at"]), (&Value::Null, &Value::Null), "{still}");
    let (_, log) = s.call(Method::GET, &format!("/v1/sessions/{sid}/events"), KEY, None).await;
    let messages = log["data"].as_array().unwrap().iter().filter(|e| e["type"] == "user.message").count();
    assert_eq!(messages, 1, "B appended nothing: {log}");
    let (_, page) = s.call(Method::GET, "/v1/sessions", KEY, None).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_session_names_only_its_own_workspaces_agent_and_environment() {
    let s = two_workspaces().await;
    let (env_of_a, _) = s.new_environment_with_key().await;
    let body = json!({"name": "b", "model": "claude-opus-4-6", "tools": toolset()});
    let (status, agent_of_b) = s.call(Method::POST, "/v1/agents", KEY_B, Some(body)).await;
    assert_eq!(status, 200, "{agent_of_b}");
    let agent_of_b = agent_of_b["id"].as_str().unwrap().to_owned();

    // A names B's agent: refused as an unknown agent.
    let unknown_agent = mnemo_api::AgentId::generate().to_string();
    let create = |agent: &str, env: &str| json!({"agent": agent, "environment_id": env});
    let (st, theirs) = s.call(Method::POST, "/v1/sessions", KEY, Some(create(&agent_of_b, &env_of_a))).await;
    let (su, unknown) = s.call(Method::POST, "/v1/sessions", KEY, Some(create(&unknown_agent, &env_of_a))).await;
    assert_eq!((st, normalized(&theirs, &agent_of_b)), (su, normalized(&unknown, &unknown_agent)));
    assert_eq!(st / 100, 4, "{theirs}");

    // B names A's environment: refused as an unknown environment.
    let unknown_env = mnemo_api::EnvironmentId::generate().to_string();
    let (st, theirs) = s.call(Method::POST, "/v1/sessions", KEY_B, Some(create(&agent_of_b, &env_of_a))).await;
    let (su, unknown) = s.call(Method::POST, "/v1/sessions", KEY_B, Some(create(&agent_of_b, &unknown_env))).await;
    assert_eq!((st, normalized(&theirs, &env_of_a)), (su, normalized(&unknown, &unknown_env)));
    assert_eq!(st / 100, 4, "{theirs}");

    for key in [KEY, KEY_B] {
        let (_, page) = s.call(Method::GET, "/v1/sessions?include_archived=true", key, None).await;
        assert_eq!(page["data"], json!([]), "no session was made");
    }
}
