//! Shared helpers of the binary's end-to-end tests: real `mnemo` processes on 127.0.0.1.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const KEY: &str = "sk-e2e-key-0123456789abcdefghijklmn";

/// A `mnemo serve` process with its own database, killed on drop. Its stderr is read as it
/// comes (a server logs a line per request, and an undrained pipe would block it).
pub struct Server {
    pub child: Child,
    pub base: String,
    log: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    /// Starts the binary and waits for its `listening on` line.
    pub fn start(db: &Path, extra: &[&str]) -> Self {
        Self::on(&format!("sqlite://{}", db.display()), extra)
    }

    /// Starts the binary on the database `url` names.
    pub fn on(url: &str, extra: &[&str]) -> Self {
        Self::try_listen(url, "127.0.0.1:0", extra).unwrap_or_else(|line| panic!("unexpected first line {line:?}"))
    }

    /// Starts the binary on `listen` (e.g. the address of a server just killed); answers the
    /// first line it printed if that is not `listening on` (e.g. the port is not free yet).
    pub fn try_listen(url: &str, listen: &str, extra: &[&str]) -> Result<Self, String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mnemo"))
            .args(["serve", "--listen", listen, "--database", url])
            .args(extra)
            .env_remove("MNEMO_API_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mnemo serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let Some(base) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(line);
        };
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let log = std::thread::spawn(move || {
            // Kept up to a bound: a long load run logs a line per request.
            const KEEP: usize = 64 << 20;
            let (mut s, mut chunk) = (Vec::new(), [0u8; 64 << 10]);
            while let Ok(n @ 1..) = stderr.read(&mut chunk) {
                if s.len() < KEEP {
                    s.extend_from_slice(&chunk[..n]);
                }
            }
            String::from_utf8_lossy(&s).into_owned()
        });
        Ok(Self { child, base, log: Some(log) })
    }

    /// A server accepting [`KEY`].
    pub fn with_key(dir: &Path) -> Self {
        Self::start(&dir.join("db.sqlite"), &["--api-key", KEY])
    }

    pub fn client(&self) -> mnemo_client::Client {
        mnemo_client::Client::new(&self.base, KEY).unwrap().with_max_retries(0)
    }

    /// Everything the server wrote on stderr; call it once the process has ended.
    pub fn stderr(&mut self) -> String {
        self.log.take().expect("stderr is read once").join().expect("the stderr reader does not panic")
    }

    pub fn signal(&self, sig: &str) {
        signal(&self.child, sig);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

/// The `mnemo` binary.
pub fn mnemo() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnemo"));
    cmd.env_remove("ANTHROPIC_API_KEY").env_remove("ANTHROPIC_BASE_URL").env("RUST_LOG", "info,mnemo_sync=debug");
    cmd
}

/// Polls `cond` every 50 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Async flavour of [`wait_until`].
pub async fn wait_until_async<F, Fut>(timeout: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `mnemo worker poll` serving environment `env` of the server at `base` with `key`: its memory
/// folders under `mnt`, its work and state folders where the test says.
pub fn worker_poll(env: &str, key: &str, base: &str, mnt: &Path, workdir: &Path, state: &Path) -> Command {
    let mut cmd = mnemo();
    cmd.args(["worker", "poll", "--environment-id", env, "--base-url", base])
        .arg("--memory-mount-root")
        .arg(mnt)
        .arg("--workdir")
        .arg(workdir)
        .arg("--state-dir")
        .arg(state)
        .env("ANTHROPIC_ENVIRONMENT_KEY", key);
    cmd
}

/// Every memory of a store, as the server holds it: path to content.
pub async fn remote_files(
    client: &mnemo_client::Client,
    store: &mnemo_api::MemoryStoreId,
) -> std::collections::BTreeMap<String, String> {
    client
        .list_all_memories(store, mnemo_api::View::Full)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.path, m.content.unwrap_or_default()))
        .collect()
}

/// Posts one tool call as the agent; answers its event id.
pub async fn call(api: &mnemo_client::Client, session: &str, tool: &str, input: serde_json::Value) -> String {
    let body = serde_json::json!({"events": [{"type": "agent.tool_use", "name": tool, "input": input}]});
    let r = api.json(mnemo_client::Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();
    r["data"][0]["id"].as_str().unwrap().to_owned()
}

/// The result of `tool_use_id`, once the worker posted it (a failed listing is tried again: a
/// test may restart the server meanwhile).
pub async fn result(api: &mnemo_client::Client, session: &str, tool_use_id: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(log) =
            api.json(mnemo_client::Method::GET, &format!("/v1/sessions/{session}/events?limit=1000"), None).await
        {
            let found = log["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["type"] == "user.tool_result" && e["tool_use_id"] == tool_use_id)
                .cloned();
            if let Some(found) = found {
                return found;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no result for {tool_use_id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
