//! `mnemo session script` against `mnemo serve`, with the test playing the worker.

mod common;

use std::process::Stdio;
use std::time::Duration;

use mnemo_client::{Client, Method};
use serde_json::{Value, json};

use common::{KEY, Server, mnemo};

/// An agent with the built-in toolset and a self-hosted environment.
async fn agent_and_environment(api: &Client) -> (Value, Value) {
    let agent = json!({"name": "a", "model": "m", "tools": [{"type": "agent_toolset_20260401"}]});
    let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    (agent, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_posts_each_step_prints_each_result_and_waits_for_the_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let api = Client::new(&server.base, KEY).unwrap();
    let (agent, env) = agent_and_environment(&api).await;
    let env_id = env["id"].as_str().unwrap().to_owned();
    let key = api.json(Method::POST, &format!("/v1/environments/{env_id}/keys"), None).await.unwrap();
    let env_key = key["key"].as_str().unwrap().to_owned();
    let script = json!({
        "agent": agent["id"], "environment_id": env_id,
        "steps": [
            {"tool": "write", "input": {"file_path": "/tmp/x.md", "content": "hello"}},
            {"tool": "bash", "input": {"command": "false"}}
        ]
    });
    let file = tmp.path().join("script.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let child = mnemo()
        .args(["session", "script"])
        .arg(&file)
        .args(["--base-url", &server.base, "--api-key", KEY, "--timeout", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // The worker: claim the item, answer each call as it appears, stop the item at the end.
    let worker = Client::new(&server.base, &env_key).unwrap();
    let work = loop {
        let w =
            worker.json(Method::GET, &format!("/v1/environments/{env_id}/work/poll?block_ms=500"), None).await.unwrap();
        if !w.is_null() {
            break w;
        }
    };
    let wid = work["id"].as_str().unwrap().to_owned();
    worker.json(Method::POST, &format!("/v1/environments/{env_id}/work/{wid}/ack"), None).await.unwrap();
    let token = mnemo_api::WorkSecret::decode(work["secret"].as_str().unwrap()).unwrap().sessions_token.into_exposed();
    let as_worker = Client::new(&server.base, &token).unwrap();
    let sid = work["data"]["id"].as_str().unwrap().to_owned();
    let mut answered = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let log = as_worker.json(Method::GET, &format!("/v1/sessions/{sid}/events?limit=1000"), None).await.unwrap();
        let events = log["data"].as_array().unwrap();
        let done = |id: &Value| events.iter().any(|e| e["type"] == "user.tool_result" && e["tool_use_id"] == *id);
        for call in events.iter().filter(|e| e["type"] == "agent.tool_use" && !done(&e["id"])) {
            let (text, is_error) =
                if call["name"] == "write" { ("wrote 5 bytes to /tmp/x.md", false) } else { ("", true) };
            let result = json!({"events": [{"type": "user.tool_result", "tool_use_id": call["id"], "is_error": is_error,
                                            "content": [{"type": "text", "text": if text.is_empty() { "(no output)" } else { text }}]}]});
            as_worker.json(Method::POST, &format!("/v1/sessions/{sid}/events"), Some(&result)).await.unwrap();
            answered += 1;
        }
        if events.iter().any(|e| e["type"] == "session.status_idle" && e["stop_reason"]["type"] == "end_turn") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answered, 2);
    as_worker
        .json(Method::POST, &format!("/v1/environments/{env_id}/work/{wid}/stop"), Some(&json!({"force": true})))
        .await
        .unwrap();

    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        lines,
        [
            json!({"step": 0, "tool": "write", "is_error": false, "text": "wrote 5 bytes to /tmp/x.md"}),
            json!({"step": 1, "tool": "bash", "is_error": true, "text": "(no output)"})
        ]
    );
}

#[tokio::test]
async fn a_script_times_out_clearly_without_a_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let api = Client::new(&server.base, KEY).unwrap();
    let (agent, env) = agent_and_environment(&api).await;
    let file = tmp.path().join("s.json");
    std::fs::write(&file, json!({"agent": agent["id"], "environment_id": env["id"], "steps": [{"tool": "bash", "input": {"command": "ls"}}]}).to_string()).unwrap();
    let out = mnemo()
        .args(["session", "script"])
        .arg(&file)
        .args(["--base-url", &server.base, "--api-key", KEY, "--timeout", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not finish within"));
    std::fs::write(&file, "{not json").unwrap();
    let out = mnemo()
        .args(["session", "script"])
        .arg(&file)
        .args(["--base-url", &server.base, "--api-key", KEY])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid session script"));
}
