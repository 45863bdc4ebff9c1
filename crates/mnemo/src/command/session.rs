//! `mnemo session script`: drive a session as its agent from a JSON file (the external agent
//! driver's command-line front).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use mnemo_client::{Client, Method};
use serde::Deserialize;
use serde_json::{Value, json};

/// How often results and the work item are looked at.
const POLL_EVERY: Duration = Duration::from_millis(200);

#[derive(Debug, Subcommand)]
pub(crate) enum Session {
    /// Create a session, post one tool call per step, print each result as a JSON line, end
    /// the turn and wait until the worker is done with the session.
    Script(Script),
}

impl Session {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Script(s) => s.run().await,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct Script {
    /// The script: `{"agent", "environment_id", "resources": [...], "steps": [{"tool", "input"}]}`.
    file: PathBuf,

    /// The mnemo server.
    #[arg(long, env = "ANTHROPIC_BASE_URL", default_value = "http://127.0.0.1:8080")]
    base_url: String,

    /// An API key of that server.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    api_key: mnemo_api::Secret,

    /// Seconds the whole run may take.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
}

#[derive(Debug, Deserialize)]
struct ScriptFile {
    agent: Value,
    environment_id: String,
    #[serde(default)]
    resources: Vec<Value>,
    #[serde(default)]
    title: Option<String>,
    steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
struct Step {
    tool: String,
    #[serde(default = "empty_object")]
    input: Value,
}

fn empty_object() -> Value {
    json!({})
}

/// The text blocks of a result, joined.
pub(super) fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

impl Script {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(&self.file).with_context(|| format!("read {}", self.file.display()))?;
        let script: ScriptFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid session script", self.file.display()))?;
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            bail!("--timeout must be a positive number of seconds");
        }
        let client = Client::new(&self.base_url, self.api_key.expose())?;
        tokio::time::timeout(Duration::from_secs_f64(self.timeout), drive(&client, script))
            .await
            .map_err(|_| anyhow::anyhow!("the session did not finish within {} s (--timeout)", self.timeout))?
    }
}

async fn drive(client: &Client, script: ScriptFile) -> anyhow::Result<()> {
    let mut body =
        json!({"agent": script.agent, "environment_id": script.environment_id, "resources": script.resources});
    if let Some(title) = script.title {
        body["title"] = json!(title);
    }
    let session = client.json(Method::POST, "/v1/sessions", Some(&body)).await.context("create the session")?;
    let sid = session["id"].as_str().context("the server returned no session id")?.to_owned();
    eprintln!("session {sid}");
    let events = format!("/v1/sessions/{sid}/events");
    for (i, step) in script.steps.into_iter().enumerate() {
        let call = json!({"events": [{"type": "agent.tool_use", "name": step.tool, "input": step.input}]});
        let sent = client.json(Method::POST, &events, Some(&call)).await.with_context(|| format!("post step {i}"))?;
        let tool_use = &sent["data"][0];
        let id = tool_use["id"].as_str().context("the server returned no tool-use id")?.to_owned();
        let line = if tool_use["evaluated_permission"] == "deny" {
            json!({"step": i, "tool": step.tool, "is_error": true, "text": "the agent's permission policy denies this tool"})
        } else {
            let result = wait_for_result(client, &events, &id).await?;
            json!({"step": i, "tool": step.tool, "is_error": result["is_error"].as_bool().unwrap_or(false), "text": result_text(&result)})
        };
        println!("{line}");
    }
    client
        .json(Method::POST, &events, Some(&json!({"events": [{"type": "session.status_idle"}]})))
        .await
        .context("end the turn")?;
    wait_for_worker(client, &session).await
}

pub(super) async fn wait_for_result(client: &Client, events: &str, tool_use_id: &str) -> anyhow::Result<Value> {
    loop {
        let page = client.json(Method::GET, &format!("{events}?limit=1000&types[]=user.tool_result"), None).await?;
        if let Some(result) = page["data"].as_array().into_iter().flatten().find(|e| e["tool_use_id"] == tool_use_id) {
            return Ok(result.clone());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Waits until every work item of the session is stopped (the worker tore down).
pub(super) async fn wait_for_worker(client: &Client, session: &Value) -> anyhow::Result<()> {
    let (sid, env) =
        (session["id"].as_str().unwrap_or_default(), session["environment_id"].as_str().unwrap_or_default());
    loop {
        let page = client.json(Method::GET, &format!("/v1/environments/{env}/work?limit=100"), None).await?;
        let mine: Vec<&Value> =
            page["data"].as_array().into_iter().flatten().filter(|w| w["data"]["id"] == sid).collect();
        if !mine.is_empty() && mine.iter().all(|w| w["state"] == "stopped") {
            return Ok(());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}
