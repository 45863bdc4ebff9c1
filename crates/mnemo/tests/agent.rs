//! The agent loop end to end: `mnemo serve --models` on the fake model server (Anthropic and
//! OpenAI formats), `mnemo worker` running the tools, a memory store attached.

mod common;

use std::process::Stdio;
use std::time::Duration;

use mnemo_client::{Client, Method};
use mnemo_model::testing::{FakeModelServer, FakeReply};
use serde_json::{Value, json};

use common::{KEY, Server, mnemo, wait_until_async};

async fn events(api: &Client, session: &str) -> Vec<Value> {
    let log = api.json(Method::GET, &format!("/v1/sessions/{session}/events?limit=1000"), None).await.unwrap();
    log["data"].as_array().unwrap().clone()
}

/// The fake model reads a memory, writes a new one and answers; the worker runs both tools.
async fn reads_writes_and_answers(model: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    let notes = mnt.join("notes");
    let fake = FakeModelServer::start(vec![
        FakeReply::tool("read", json!({"file_path": notes.join("hello.md")})),
        FakeReply::tool("write", json!({"file_path": notes.join("learned.md"), "content": "the loop runs here\n"}))
            .with_text("Noting it down."),
        FakeReply::text("I read your note and saved what I learned."),
    ])
    .await;
    let models = tmp.path().join("models.toml");
    std::fs::write(&models, format!("{}\"oa\" = \"fake-openai/oa-model\"\n", fake.config_toml())).unwrap();
    let server = Server::start(
        &tmp.path().join("db.sqlite"),
        &["--api-key", KEY, "--memory-mount-root", mnt.to_str().unwrap(), "--models", models.to_str().unwrap()],
    );
    let api = Client::new(&server.base, KEY).unwrap();
    let agent = json!({"name": "a", "model": model, "system": "Remember things.", "tools": [{"type": "agent_toolset_20260401"}]});
    let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let env_id = env["id"].as_str().unwrap();
    let key = api.json(Method::POST, &format!("/v1/environments/{env_id}/keys"), None).await.unwrap();
    let store = api.json(Method::POST, "/v1/memory_stores", Some(&json!({"name": "notes"}))).await.unwrap();
    let store = store["id"].as_str().unwrap().to_owned();
    let body = json!({"path": "/hello.md", "content": "hi from memory\n"});
    api.json(Method::POST, &format!("/v1/memory_stores/{store}/memories"), Some(&body)).await.unwrap();
    std::fs::create_dir_all(tmp.path().join("work")).unwrap();
    let mut worker = mnemo()
        .args(["worker", "poll", "--environment-id", env_id, "--base-url", &server.base])
        .arg("--memory-mount-root")
        .arg(&mnt)
        .arg("--workdir")
        .arg(tmp.path().join("work"))
        .arg("--state-dir")
        .arg(tmp.path().join("state"))
        .env("ANTHROPIC_ENVIRONMENT_KEY", key["key"].as_str().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let body = json!({"agent": agent["id"], "environment_id": env_id,
                      "resources": [{"type": "memory_store", "memory_store_id": store}]});
    let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let body =
        json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "What do you remember?"}]}]});
    api.json(Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();

    let ended = wait_until_async(Duration::from_secs(60), || async {
        events(&api, &session)
            .await
            .iter()
            .any(|e| e["type"] == "session.status_idle" && e["stop_reason"]["type"] == "end_turn")
    })
    .await;
    let log = events(&api, &session).await;
    assert!(ended, "the turn never ended: {log:#?}");
    let texts: Vec<&str> = log
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .map(|e| e["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Noting it down.", "I read your note and saved what I learned."]);
    let read = log.iter().find(|e| e["type"] == "agent.tool_use" && e["name"] == "read").unwrap();
    let result = log.iter().find(|e| e["type"] == "user.tool_result" && e["tool_use_id"] == read["id"]).unwrap();
    assert!(result["content"].to_string().contains("hi from memory"), "{result}");
    assert_eq!(log.iter().filter(|e| e["type"] == "span.model_request_start").count(), 3);

    // The model saw the memory prompt and the first result.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let second = requests[1].body.to_string();
    assert!(second.contains("Remember things.") && second.contains(notes.to_str().unwrap()), "{second}");
    assert!(second.contains("hi from memory"), "{second}");

    // The new memory is in the store, written by the session.
    let landed = wait_until_async(Duration::from_secs(30), || async {
        let page = api.json(Method::GET, &format!("/v1/memory_stores/{store}/memories?view=full"), None).await.unwrap();
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["path"] == "/learned.md" && m["content"] == "the loop runs here\n")
    })
    .await;
    assert!(landed, "the written memory never reached the store");
    let versions = api.json(Method::GET, &format!("/v1/memory_stores/{store}/memory_versions"), None).await.unwrap();
    let created = versions["data"].as_array().unwrap().iter().find(|v| v["path"] == "/learned.md").unwrap();
    assert_eq!(created["created_by"]["type"], "session_actor");
    assert_eq!(created["created_by"]["session_id"], session);

    let s = api.json(Method::GET, &format!("/v1/sessions/{session}"), None).await.unwrap();
    assert!(s["usage"]["output_tokens"].as_u64().unwrap() > 0, "{}", s["usage"]);
    let _ = worker.kill();
    let _ = worker.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_an_anthropic_model_reads_and_writes_its_memory() {
    reads_writes_and_answers("claude-fake").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_an_openai_compatible_model_reads_and_writes_its_memory() {
    reads_writes_and_answers("oa").await;
}

/// `mnemo serve` killed with SIGKILL while a model call streams, then started again on the same
/// database: the turn is not left `running` — once the dead process's lease lapses, the new one
/// makes the call again and ends the turn; what the first attempt had said stays, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_turn_carries_the_turn_on_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeModelServer::start(vec![
        FakeReply::text("Thinking it over, slowly, word by word, before I answer you.")
            .slow(Duration::from_millis(400)),
        FakeReply::text("Back after the restart: here is the answer."),
    ])
    .await;
    let models = tmp.path().join("models.toml");
    std::fs::write(&models, format!("{}[limits]\nturn_lease_secs = 3\n", fake.config_toml())).unwrap();
    let db = tmp.path().join("db.sqlite");
    let args = ["--api-key", KEY, "--models", models.to_str().unwrap()];
    let mut server = Server::start(&db, &args);
    let api = Client::new(&server.base, KEY).unwrap();
    let agent = json!({"name": "a", "model": "claude-fake", "tools": []});
    let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let body = json!({"agent": agent["id"], "environment_id": env["id"]});
    let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let body = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "Take your time."}]}]});
    api.json(Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();
    // The call streams (slowly): kill the server in the middle of it.
    let streaming = wait_until_async(Duration::from_secs(30), || async { !fake.requests().is_empty() }).await;
    assert!(streaming, "the model was never called");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let _ = server.child.kill();
    let _ = server.child.wait();

    let server = Server::start(&db, &args);
    let api = Client::new(&server.base, KEY).unwrap();
    let ended = wait_until_async(Duration::from_secs(60), || async {
        events(&api, &session).await.iter().any(|e| e["type"] == "session.status_idle")
    })
    .await;
    let log = events(&api, &session).await;
    assert!(ended, "the turn was never carried on: {log:#?}");
    let end = log.iter().find(|e| e["type"] == "session.status_idle").unwrap();
    assert_eq!(end["stop_reason"]["type"], "end_turn", "{log:#?}");
    let said: Vec<&str> = log
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .map(|e| e["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(said, ["Back after the restart: here is the answer."], "the broken answer was never appended");
    assert_eq!(fake.requests().len(), 2, "the call was made again, once");
    assert_eq!(log.iter().filter(|e| e["type"] == "span.model_request_start").count(), 2);
    let s = api.json(Method::GET, &format!("/v1/sessions/{session}"), None).await.unwrap();
    assert_eq!(s["status"], "idle");
}
