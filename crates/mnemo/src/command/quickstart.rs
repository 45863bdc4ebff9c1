//! `mnemo quickstart`: the whole product in one command — a server on the embedded database, a
//! demo store, environment, key and agent, a worker in this process, and two sessions that show
//! memory surviving from one to the next: scripted, or — with `--models` — asked in plain words
//! of an agent that runs on a real model through the server's agent loop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use mnemo_client::{Client, Method};
use mnemo_worker::WorkerConfig;
use mnemo_worker::poller::{self, Serve as ServeItems};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::serve::Serve;
use super::session::{result_text, wait_for_result, wait_for_worker};
use super::signals::Signals;

/// The most a demo session may take.
const SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// The most a demo session on a real model may take (models can be slow).
const AGENT_SESSION_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Args)]
pub(crate) struct Quickstart {
    /// Keep the server's data here (created if missing; kept afterwards). Without it a temporary
    /// folder is used and removed on exit.
    #[arg(long)]
    data_dir: Option<PathBuf>,

    /// Address to serve on; if it is taken, a free port is used instead.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,

    /// Exit once the demo sessions are done instead of serving until Ctrl-C.
    #[arg(long)]
    exit: bool,

    /// Run the demo agent on a real model: the providers file of `mnemo serve --models` (see
    /// docs/AGENTS.md). The sessions are then asked in plain words, and the model decides
    /// which tools to call. Without it the agent's tool calls are scripted.
    #[arg(long, value_name = "FILE", env = "MNEMO_MODELS")]
    models: Option<PathBuf>,

    /// The demo agent's model id (default: the first one the providers file's `[models]` maps).
    #[arg(long, value_name = "ID", requires = "models")]
    model: Option<String>,
}

/// A step of the demo, printed as it happens.
fn step(n: usize, text: &str) {
    println!("\n[{n}] {text}");
}

impl Quickstart {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let mut signals = Signals::install()?;
        let (temp, dir) = match &self.data_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
                (None, std::path::absolute(dir)?)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("mnemo-quickstart-")
                    .tempdir()
                    .context("create a temporary folder")?;
                let path = t.path().to_path_buf();
                (Some(t), path)
            }
        };
        let outcome = self.demo(&dir, &mut signals).await;
        if let Some(t) = temp {
            let path = t.path().display().to_string();
            match t.close() {
                Ok(()) => println!("removed {path}"),
                Err(e) => eprintln!("could not remove {path}: {e}"),
            }
        }
        outcome
    }

    /// The demo agent's model when it runs on a provider.
    fn agent_model(&self) -> anyhow::Result<Option<String>> {
        let Some(path) = &self.models else { return Ok(None) };
        let config = crate::models::read(path)?;
        if let Some(model) = &self.model {
            if config.resolve(model).is_none() {
                bail!("the providers file {} maps no provider for the model `{model}`", path.display());
            }
            return Ok(Some(model.clone()));
        }
        match config.mapped_models().next() {
            Some(first) => Ok(Some(first.to_owned())),
            None if config.has_default() => {
                bail!("name the demo agent's model with --model (the providers file maps none)")
            }
            None => bail!("the providers file {} maps no model; add one under [models]", path.display()),
        }
    }

    async fn demo(&self, dir: &Path, signals: &mut Signals) -> anyhow::Result<()> {
        let model = self.agent_model()?;
        let key = mnemo_api::generate_secret("sk-mnemo-");
        let mount_root = dir.join("mnt");
        let workdir = dir.join("work");
        std::fs::create_dir_all(&workdir)?;
        let database = format!("sqlite://{}", dir.join("mnemo.sqlite").display());
        let root = mount_root.to_str().context("the data folder's path is not UTF-8")?.to_owned();

        step(1, &format!("Starting mnemo serve on {database}"));
        let serve = |listen| {
            Serve::embedded(listen, database.clone(), key.clone(), root.clone()).with_models(self.models.clone())
        };
        let running = match serve(self.listen).start().await {
            Ok(r) => r,
            Err(e) if self.listen.port() != 0 => {
                println!("    {} is taken ({e:#}); using a free port", self.listen);
                serve(SocketAddr::new(self.listen.ip(), 0)).start().await?
            }
            Err(e) => return Err(e),
        };
        let base = format!("http://{}", running.addr);
        println!("    listening on {base}");
        let client = Client::new(&base, &key)?;

        let stop = CancellationToken::new();
        let shown = async {
            let setup = setup(&client, model.as_deref()).await?;
            step(3, "Starting a worker in this process (it serves the environment's sessions, mounts their memory)");
            let mut cfg = WorkerConfig::new(&base, &workdir);
            cfg.state_dir = dir.join("worker-state");
            cfg.memory_mount_root.clone_from(&mount_root);
            cfg.max_idle = Some(Duration::from_secs(1));
            let worker_stop = stop.clone();
            let env_id = setup.environment.parse().context("the server returned a bad environment id")?;
            let env_key = setup.environment_key.clone();
            let worker = tokio::spawn(async move {
                poller::run(&cfg, &env_id, &env_key, &ServeItems::InProcess, &worker_stop).await
            });
            let outcome = match &model {
                Some(model) => agent_sessions(&client, &setup, model).await,
                None => sessions(&client, &setup).await,
            };
            Ok::<_, anyhow::Error>((setup, worker, outcome))
        };
        let (setup, worker, outcome) = tokio::select! {
            r = shown => r?,
            () = signals.next() => {
                println!("\ninterrupted: stopping");
                stop.cancel();
                return running.until(async {}).await;
            }
        };
        if let Err(e) = outcome {
            stop.cancel();
            let _ = worker.await;
            running.until(async {}).await?;
            return Err(e);
        }

        let console = if running.console { format!("{base}/console") } else { "(off)".to_owned() };
        println!(
            "\nMemory survived the session. Try it yourself:\n\n\
             \x20   web console   {console}   (sign in with the API key below)\n\
             \x20   API key       {key}\n\
             \x20   memory store  {store}\n\n\
             \x20   export ANTHROPIC_BASE_URL={base} ANTHROPIC_API_KEY={key}\n\
             \x20   curl -s $ANTHROPIC_BASE_URL/v1/memory_stores/{store}/memories -H \"x-api-key: $ANTHROPIC_API_KEY\"\n\
             \x20   mnemo mount {store} ./notes      # the store as a live folder\n\
             \x20   ANTHROPIC_ENVIRONMENT_KEY={env_key} mnemo worker poll --environment-id {env} --base-url {base}\n\n\
             Run `mnemo serve` for a server that keeps its data; docs/ explains the rest.",
            store = setup.store,
            env = setup.environment,
            env_key = setup.environment_key,
        );
        if !self.exit {
            println!("\nServing until Ctrl-C (the worker keeps serving the demo environment).");
            signals.next().await;
            println!("stopping: the worker finishes, then the server");
        }
        stop.cancel();
        match worker.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("the worker stopped with an error: {e}"),
            Err(e) => eprintln!("the worker task failed: {e}"),
        }
        running.until(async {}).await
    }
}

/// What the demo created.
struct Setup {
    store: String,
    environment: String,
    environment_key: String,
    agent: String,
}

async fn setup(client: &Client, model: Option<&str>) -> anyhow::Result<Setup> {
    step(
        2,
        "Creating a memory store \"demo-notes\" with one memory, a self-hosted environment with its key, and an agent",
    );
    let store = client
        .json(
            Method::POST,
            "/v1/memory_stores",
            Some(&json!({"name": "demo-notes", "description": "what the demo agent learns"})),
        )
        .await?;
    let store = id(&store)?;
    let welcome = "# Welcome\nThis file lives in a mnemo memory store. Sessions read and write it as a folder.\n";
    client
        .json(
            Method::POST,
            &format!("/v1/memory_stores/{store}/memories"),
            Some(&json!({"path": "/welcome.md", "content": welcome})),
        )
        .await?;
    let env = client.json(Method::POST, "/v1/environments", Some(&json!({"name": "quickstart"}))).await?;
    let environment = id(&env)?;
    let key = client.json(Method::POST, &format!("/v1/environments/{environment}/keys"), None).await?;
    let environment_key = key["key"].as_str().context("the server returned no environment key")?.to_owned();
    let agent = match model {
        Some(model) => json!({
            "name": "demo agent", "model": model, "tools": [{"type": "agent_toolset_20260401"}],
            "system": "You are the demo agent of mnemo's quick start. Keep every answer to one or two sentences.",
        }),
        None => json!({"name": "demo agent", "model": "scripted", "tools": [{"type": "agent_toolset_20260401"}]}),
    };
    let agent = id(&client.json(Method::POST, "/v1/agents", Some(&agent)).await?)?;
    let on = model.map(|m| format!(" on the model `{m}`")).unwrap_or_default();
    println!("    store {store}, environment {environment}, agent {agent}{on}");
    Ok(Setup { store, environment, environment_key, agent })
}

fn id(v: &Value) -> anyhow::Result<String> {
    Ok(v["id"].as_str().context("the server returned no id")?.to_owned())
}

/// Two sessions: the first reads and writes memory, the second finds what the first wrote.
async fn sessions(client: &Client, setup: &Setup) -> anyhow::Result<()> {
    step(4, "Session 1: the agent reads its memory, writes a note, and lists the folder");
    let folder = run_session(client, setup, |folder| {
        vec![
            ("read", json!({"file_path": format!("{folder}/welcome.md")})),
            (
                "write",
                json!({"file_path": format!("{folder}/learned.md"), "content": "The user prefers short answers.\n"}),
            ),
            ("bash", json!({"command": format!("ls -1 {folder}")})),
        ]
    })
    .await?;
    show_store(client, setup, &folder).await?;

    step(5, "Session 2, a new sandbox: the agent reads what session 1 wrote");
    run_session(client, setup, |folder| vec![("read", json!({"file_path": format!("{folder}/learned.md")}))]).await?;
    Ok(())
}

/// Prints what the store holds once a session's folder is gone.
async fn show_store(client: &Client, setup: &Setup, folder: &str) -> anyhow::Result<()> {
    let listing = client.json(Method::GET, &format!("/v1/memory_stores/{}/memories", setup.store), None).await?;
    let paths: Vec<&str> =
        listing["data"].as_array().into_iter().flatten().filter_map(|m| m["path"].as_str()).collect();
    println!("    the session ended; its folder {folder} is gone; the store now holds: {}", paths.join(", "));
    Ok(())
}

/// The same two sessions, asked in plain words: the model chooses the tool calls.
async fn agent_sessions(client: &Client, setup: &Setup, model: &str) -> anyhow::Result<()> {
    step(4, &format!("Session 1: the agent on `{model}` is asked to read its memory and note something down"));
    let folder = ask(client, setup, |folder| {
        format!(
            "Your memory is the folder {folder}. Read {folder}/welcome.md, then write one line to \
             {folder}/learned.md saying that the user prefers short answers. Then say what you did."
        )
    })
    .await?;
    show_store(client, setup, &folder).await?;

    step(5, "Session 2, a new sandbox: the agent is asked what an earlier session learned");
    ask(client, setup, |folder| {
        format!("Your memory is the folder {folder}. What did an earlier session learn about the user? Look there.")
    })
    .await?;
    Ok(())
}

/// Creates a session with the store attached, sends `prompt` (given the mount path) as the
/// user's message, prints what the agent says and does until its turn ends, and waits for the
/// worker to finish. Answers the mount path.
async fn ask(client: &Client, setup: &Setup, prompt: impl FnOnce(&str) -> String) -> anyhow::Result<String> {
    let (session, folder) = new_session(client, setup).await?;
    let sid = id(&session)?;
    let events = format!("/v1/sessions/{sid}/events");
    let text = prompt(&folder);
    println!("    user: {text}");
    let message = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]});
    let drive = async {
        client.json(Method::POST, &events, Some(&message)).await?;
        let mut shown = 0;
        let mut last_error = None;
        loop {
            let page = client.json(Method::GET, &format!("{events}?limit=1000"), None).await?;
            let log = page["data"].as_array().cloned().unwrap_or_default();
            for event in log.iter().skip(shown) {
                match event["type"].as_str().unwrap_or_default() {
                    "agent.message" => println!("    agent: {}", result_text(event)),
                    "agent.tool_use" => {
                        println!("    agent → {} {}", event["name"].as_str().unwrap_or("?"), event["input"])
                    }
                    "user.tool_result" => {
                        let text = result_text(event);
                        let shown: Vec<&str> = text.lines().take(4).collect();
                        println!("      ← {}", shown.join("\n        "));
                    }
                    "session.error" => {
                        let message = event["error"]["message"].as_str().unwrap_or("an error").to_owned();
                        println!("    error: {message}");
                        last_error = Some(message);
                    }
                    "session.status_idle" if event["stop_reason"]["type"] != "requires_action" => {
                        let reason = event["stop_reason"]["type"].as_str().unwrap_or("?");
                        if reason != "end_turn" {
                            let why = last_error.as_deref().unwrap_or("no error was reported");
                            bail!("the agent's turn ended with `{reason}`: {why}");
                        }
                        return wait_for_worker(client, &session).await;
                    }
                    _ => {}
                }
            }
            shown = log.len();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(AGENT_SESSION_TIMEOUT, drive)
        .await
        .map_err(|_| anyhow::anyhow!("session {sid} did not finish within {} s", AGENT_SESSION_TIMEOUT.as_secs()))??;
    Ok(folder)
}

/// A new session with the demo store attached, and the store's mount path.
async fn new_session(client: &Client, setup: &Setup) -> anyhow::Result<(Value, String)> {
    let body = json!({
        "agent": setup.agent,
        "environment_id": setup.environment,
        "resources": [{"type": "memory_store", "memory_store_id": setup.store}],
    });
    let session = client.json(Method::POST, "/v1/sessions", Some(&body)).await.context("create a session")?;
    let folder = session["resources"][0]["mount_path"].as_str().context("the session has no mount path")?.to_owned();
    println!("    session {}, memory mounted at {folder}", id(&session)?);
    Ok((session, folder))
}

/// Creates a session with the store attached, posts `calls` as the agent (given the mount
/// path), prints each result, ends the turn and waits for the worker to finish. Answers the
/// mount path.
async fn run_session(
    client: &Client,
    setup: &Setup,
    calls: impl FnOnce(&str) -> Vec<(&'static str, Value)>,
) -> anyhow::Result<String> {
    let (session, folder) = new_session(client, setup).await?;
    let sid = id(&session)?;
    let events = format!("/v1/sessions/{sid}/events");
    let drive = async {
        for (tool, input) in calls(&folder) {
            let call = json!({"events": [{"type": "agent.tool_use", "name": tool, "input": input}]});
            let sent = client.json(Method::POST, &events, Some(&call)).await?;
            let use_id = sent["data"][0]["id"].as_str().context("the server returned no tool-use id")?.to_owned();
            let result = wait_for_result(client, &events, &use_id).await?;
            let text = result_text(&result);
            let shown: Vec<&str> = text.lines().take(4).collect();
            println!("    agent → {tool} {input}\n      ← {}", shown.join("\n        "));
            if result["is_error"].as_bool().unwrap_or(false) {
                bail!("the {tool} call failed: {text}");
            }
        }
        client.json(Method::POST, &events, Some(&json!({"events": [{"type": "session.status_idle"}]}))).await?;
        wait_for_worker(client, &session).await
    };
    tokio::time::timeout(SESSION_TIMEOUT, drive)
        .await
        .map_err(|_| anyhow::anyhow!("session {sid} did not finish within {} s", SESSION_TIMEOUT.as_secs()))??;
    Ok(folder)
}
