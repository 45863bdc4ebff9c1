//! `mnemo quickstart`: the whole product in one command — a server on the embedded database, a
//! demo store, environment, key and agent, a worker in this process, and two scripted sessions
//! that show memory surviving from one to the next.

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

    async fn demo(&self, dir: &Path, signals: &mut Signals) -> anyhow::Result<()> {
        let key = mnemo_api::generate_secret("sk-mnemo-");
        let mount_root = dir.join("mnt");
        let workdir = dir.join("work");
        std::fs::create_dir_all(&workdir)?;
        let database = format!("sqlite://{}", dir.join("mnemo.sqlite").display());
        let root = mount_root.to_str().context("the data folder's path is not UTF-8")?.to_owned();

        step(1, &format!("Starting mnemo serve on {database}"));
        let serve = |listen| Serve::embedded(listen, database.clone(), key.clone(), root.clone());
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
            let setup = setup(&client).await?;
            step(3, "Starting a worker in this process (it serves the environment's sessions, mounts their memory)");
            let mut cfg = WorkerConfig::new(&base, &workdir);
            cfg.state_dir = dir.join("worker-state");
            cfg.max_idle = Some(Duration::from_secs(1));
            let worker_stop = stop.clone();
            let env_id = setup.environment.parse().context("the server returned a bad environment id")?;
            let env_key = setup.environment_key.clone();
            let worker = tokio::spawn(async move {
                poller::run(&cfg, &env_id, &env_key, &ServeItems::InProcess, &worker_stop).await
            });
            let outcome = sessions(&client, &setup).await;
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

async fn setup(client: &Client) -> anyhow::Result<Setup> {
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
    let agent = json!({"name": "demo agent", "model": "scripted", "tools": [{"type": "agent_toolset_20260401"}]});
    let agent = id(&client.json(Method::POST, "/v1/agents", Some(&agent)).await?)?;
    println!("    store {store}, environment {environment}, agent {agent}");
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
    let listing = client.json(Method::GET, &format!("/v1/memory_stores/{}/memories", setup.store), None).await?;
    let paths: Vec<&str> =
        listing["data"].as_array().into_iter().flatten().filter_map(|m| m["path"].as_str()).collect();
    println!("    the session ended; its folder {folder} is gone; the store now holds: {}", paths.join(", "));

    step(5, "Session 2, a new sandbox: the agent reads what session 1 wrote");
    run_session(client, setup, |folder| vec![("read", json!({"file_path": format!("{folder}/learned.md")}))]).await?;
    Ok(())
}

/// Creates a session with the store attached, posts `calls` as the agent (given the mount
/// path), prints each result, ends the turn and waits for the worker to finish. Answers the
/// mount path.
async fn run_session(
    client: &Client,
    setup: &Setup,
    calls: impl FnOnce(&str) -> Vec<(&'static str, Value)>,
) -> anyhow::Result<String> {
    let body = json!({
        "agent": setup.agent,
        "environment_id": setup.environment,
        "resources": [{"type": "memory_store", "memory_store_id": setup.store}],
    });
    let session = client.json(Method::POST, "/v1/sessions", Some(&body)).await.context("create a session")?;
    let sid = id(&session)?;
    let folder = session["resources"][0]["mount_path"].as_str().context("the session has no mount path")?.to_owned();
    println!("    session {sid}, memory mounted at {folder}");
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
