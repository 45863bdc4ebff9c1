//! The agent loop end to end: `mnemo serve --models` on the fake model server (Anthropic and
//! OpenAI formats), `mnemo worker` running the tools, a memory store attached.

mod common;

use std::process::Stdio;
use std::time::Duration;

use mnemo_client::{Client, Method};
use mnemo_model::testing::{FakeModelServer, FakeReply};
use serde_json::{Value, json};

use common::{KEY, Server, wait_until_async, worker_poll};

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
    let key = key["key"].as_str().unwrap();
    let (work, state) = (tmp.path().join("work"), tmp.path().join("state"));
    let mut worker = worker_poll(env_id, key, &server.base, &mnt, &work, &state)
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

/// A model key as long as a real one.
const MODEL_KEY: &str = "sk-ant-api03-Xq7vR2mK9pL4wT8nB3cF6hJ1dS5gZ0yAe4Uu-Wt2Nn_Pp8Qq";

/// Whether `text` holds a run of [`MODEL_KEY`] long enough to matter (8 characters, see
/// `mnemo_model::redact`).
fn holds_key_run(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let key = MODEL_KEY.to_ascii_lowercase();
    key.as_bytes().windows(8).any(|w| lower.contains(std::str::from_utf8(w).unwrap()))
}

/// `mnemo serve --models FILE` logging at `trace`, its stderr read as it comes; killed on drop.
struct Traced {
    child: std::process::Child,
    base: String,
    log: Option<std::thread::JoinHandle<String>>,
}

impl Traced {
    fn start(tmp: &std::path::Path, models: &str) -> Self {
        let path = tmp.join("models.toml");
        std::fs::write(&path, models).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
            .args(["serve", "--listen", "127.0.0.1:0", "--api-key", KEY, "--models"])
            .arg(&path)
            .arg("--database")
            .arg(format!("sqlite://{}", tmp.join("db.sqlite").display()))
            .env("RUST_LOG", "trace")
            .env_remove("MNEMO_API_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let base = line.trim().strip_prefix("listening on ").expect("listening on").to_owned();
        let mut stderr = child.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut s);
            String::from_utf8_lossy(&s).into_owned()
        });
        Self { child, base, log: Some(log) }
    }

    /// Stops the server (SIGTERM) and answers everything it logged.
    fn stop(&mut self) -> String {
        common::signal(&self.child, "-TERM");
        let _ = self.child.wait();
        self.log.take().unwrap().join().unwrap()
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Posts a message and waits for the turn it starts to end (the session's `n`th idle).
async fn turn(api: &Client, session: &str, n: usize) -> Vec<Value> {
    let body = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "go"}]}]});
    api.json(Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();
    let ended = wait_until_async(Duration::from_secs(60), || async {
        events(api, session).await.iter().filter(|e| e["type"] == "session.status_idle").count() >= n
    })
    .await;
    let log = events(api, session).await;
    assert!(ended, "turn {n} never ended: {log:#?}");
    log
}

/// A gateway that echoes the key it got in its error bodies and error events (whole, as
/// `Bearer …`, split in two, in part): no `session.error`, no event at all and no log line (at
/// `trace`) holds a run of the key; the `session.error`s name the status and the error type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_echoing_the_model_key_leaks_it_nowhere() {
    let tmp = tempfile::tempdir().unwrap();
    let echo = format!(
        "invalid x-api-key {{key}} (Authorization: Bearer {{key}}); halves {} / {}; part {}",
        &MODEL_KEY[..25],
        &MODEL_KEY[25..],
        &MODEL_KEY[31..47]
    );
    let script = || {
        vec![
            FakeReply::status(401, &echo),
            FakeReply::stream_error("invalid_request_error").with_stream_error_message(&echo),
        ]
    };
    let fake = FakeModelServer::start(script()).await;
    fake.push(script());
    // And an answer carrying an event no client knows, named with the key (a debug log line).
    fake.push([FakeReply::text("Fine.").with_unknown_event("{key}")]);
    let models = format!(
        "[providers.gw]\nkind = \"anthropic\"\nbase_url = \"{0}\"\napi_key = \"{MODEL_KEY}\"\n\
         [providers.gw-openai]\nkind = \"openai\"\nbase_url = \"{0}/v1\"\napi_key = \"{MODEL_KEY}\"\n\
         [models]\n\"claude-gw\" = \"gw/claude-gw\"\n\"oa-gw\" = \"gw-openai/oa\"\n",
        fake.url()
    );
    let mut server = Traced::start(tmp.path(), &models);
    let api = Client::new(&server.base, KEY).unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let mut all = Vec::new();
    let mut first_session = String::new();
    for model in ["claude-gw", "oa-gw"] {
        let agent = json!({"name": model, "model": model, "tools": []});
        let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
        let body = json!({"agent": agent["id"], "environment_id": env["id"]});
        let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
        let session = session["id"].as_str().unwrap().to_owned();
        if first_session.is_empty() {
            first_session = session.clone();
        }
        turn(&api, &session, 1).await;
        let log = turn(&api, &session, 2).await;
        let errors: Vec<&Value> = log.iter().filter(|e| e["type"] == "session.error").collect();
        let messages: Vec<&str> = errors.iter().map(|e| e["error"]["message"].as_str().unwrap()).collect();
        let provider = if model == "claude-gw" { "gw" } else { "gw-openai" };
        assert_eq!(
            messages,
            [
                format!(
                    "the model request to provider `{provider}` failed: request refused (HTTP 401, authentication_error)"
                ),
                format!(
                    "the model request to provider `{provider}` failed: request refused (HTTP 400, invalid_request_error)"
                ),
            ],
            "{log:#?}"
        );
        all.extend(log);
    }
    // The Anthropic session's third turn: the answer with the unknown event.
    let log = turn(&api, &first_session, 3).await;
    let end = log.iter().rfind(|e| e["type"] == "session.status_idle").unwrap();
    assert_eq!(end["stop_reason"]["type"], "end_turn", "{log:#?}");
    all.extend(log);
    assert_eq!(fake.requests().len(), 5, "every scripted answer was given");
    for e in &all {
        assert!(!holds_key_run(&e.to_string()), "an event holds the key: {e}");
    }
    let log = server.stop();
    assert!(log.contains("a model call failed") && log.contains("[redacted]"), "the echo reached the log, cleaned");
    let leaked: Vec<&str> = log.lines().filter(|l| holds_key_run(l)).collect();
    assert!(leaked.is_empty(), "log lines hold the key: {leaked:#?}");
}

/// A provider that redirects (307, then 302) to another address: the other address never hears
/// from the server (so never sees the key), and each turn ends at once with an error naming the
/// status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_redirect_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_url = format!("http://{}", other.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let reached = std::sync::Arc::clone(&seen);
    let _other = tokio::spawn(async move {
        while let Ok((mut conn, _)) = other.accept().await {
            let mut buf = vec![0u8; 65536];
            let n = tokio::io::AsyncReadExt::read(&mut conn, &mut buf).await.unwrap_or(0);
            reached.lock().unwrap().extend_from_slice(b"CONNECTION ");
            reached.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let fake = FakeModelServer::start(vec![
        FakeReply::redirect(307, format!("{other_url}/v1/messages")),
        FakeReply::redirect(302, format!("{other_url}/v1/messages")),
    ])
    .await;
    let models = format!(
        "[providers.gw]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"{MODEL_KEY}\"\n[models]\ndefault = \"gw\"\n",
        fake.url()
    );
    let mut server = Traced::start(tmp.path(), &models);
    let api = Client::new(&server.base, KEY).unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let agent =
        api.json(Method::POST, "/v1/agents", Some(&json!({"name": "a", "model": "m", "tools": []}))).await.unwrap();
    let body = json!({"agent": agent["id"], "environment_id": env["id"]});
    let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    turn(&api, &session, 1).await;
    let log = turn(&api, &session, 2).await;
    let errors: Vec<&str> =
        log.iter().filter(|e| e["type"] == "session.error").map(|e| e["error"]["message"].as_str().unwrap()).collect();
    assert_eq!(
        errors,
        [
            "the model request to provider `gw` failed: redirect not followed (HTTP 307)",
            "the model request to provider `gw` failed: redirect not followed (HTTP 302)",
        ],
        "{log:#?}"
    );
    let ends: Vec<&Value> =
        log.iter().filter(|e| e["type"] == "session.status_idle").map(|e| &e["stop_reason"]["type"]).collect();
    assert_eq!(ends, ["retries_exhausted", "retries_exhausted"]);
    assert_eq!(fake.requests().len(), 2, "one call per turn: a redirect is not retried");
    assert!(
        seen.lock().unwrap().is_empty(),
        "the redirect's target was reached: {}",
        String::from_utf8_lossy(&seen.lock().unwrap())
    );
    let log = server.stop();
    assert!(log.contains("redirect (HTTP 307)"), "the operator's log names the redirect");
    assert!(!holds_key_run(&log), "the log holds the key");
}
