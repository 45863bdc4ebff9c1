//! The worker tests' fixture: a `mnemo serve` with a folder of its own, under which its memory
//! mounts land (`--memory-mount-root`), an API client and an agent ([`Fixture`]); and, for a
//! test that runs `mnemo worker poll` on it, an environment and its key ([`Setup`]).
//!
//! Included by the tests that use it, beside `common`: `#[path = "common/fixture.rs"] mod fixture;`.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mnemo_client::{Client, Method};
use serde_json::{Value, json};

use crate::common::{KEY, Server, mnemo};

/// A server whose memory mounts land under the test's own folder, with an agent.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub server: Server,
    pub api: Client,
    pub agent: String,
}

impl Fixture {
    /// Starts the server with `extra` flags added.
    pub async fn new(extra: &[&str]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mnt = tmp.path().join("mnt");
        let mut args = vec!["--api-key", KEY, "--memory-mount-root", mnt.to_str().unwrap()];
        args.extend_from_slice(extra);
        let server = Server::start(&tmp.path().join("db.sqlite"), &args);
        let api = Client::new(&server.base, KEY).unwrap();
        let agent = json!({"name": "a", "model": "m", "tools": [{"type": "agent_toolset_20260401"}]});
        let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
        Self { agent: agent["id"].as_str().unwrap().to_owned(), api, server, tmp }
    }

    /// The server's `--memory-mount-root`.
    pub fn mnt(&self) -> PathBuf {
        self.tmp.path().join("mnt")
    }

    /// A new environment: (id, key).
    pub async fn environment(&self) -> (String, String) {
        let env = self.api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
        let id = env["id"].as_str().unwrap().to_owned();
        let key = self.api.json(Method::POST, &format!("/v1/environments/{id}/keys"), None).await.unwrap();
        (id, key["key"].as_str().unwrap().to_owned())
    }

    /// A store named `name` holding `memories` (path → content).
    pub async fn store(&self, name: &str, memories: &[(&str, &str)]) -> String {
        store(&self.api, name, memories).await
    }
}

/// A store named `name` holding `memories` (path → content).
pub async fn store(api: &Client, name: &str, memories: &[(&str, &str)]) -> String {
    let store = api.json(Method::POST, "/v1/memory_stores", Some(&json!({"name": name}))).await.unwrap();
    let id = store["id"].as_str().unwrap().to_owned();
    for (path, content) in memories {
        let body = json!({"path": path, "content": content});
        api.json(Method::POST, &format!("/v1/memory_stores/{id}/memories"), Some(&body)).await.unwrap();
    }
    id
}

/// A [`Fixture`] with an environment, its key, and a workdir (`work`) for the worker; its
/// fields and methods are the fixture's too.
pub struct Setup {
    pub fixture: Fixture,
    pub env_id: String,
    pub env_key: String,
}

impl std::ops::Deref for Setup {
    type Target = Fixture;

    fn deref(&self) -> &Fixture {
        &self.fixture
    }
}

impl Setup {
    /// Starts the server with `extra` flags added, and makes the environment and its key.
    pub async fn new(extra: &[&str]) -> Self {
        let fixture = Fixture::new(extra).await;
        let (env_id, env_key) = fixture.environment().await;
        std::fs::create_dir_all(fixture.tmp.path().join("work")).unwrap();
        Self { fixture, env_id, env_key }
    }

    /// The worker's `--workdir`.
    pub fn workdir(&self) -> PathBuf {
        self.tmp.path().join("work")
    }

    /// `mnemo worker poll` against this server, not spawned yet: the key in its environment,
    /// the server's mount root, [`Setup::workdir`], `state_dir`, `--max-idle 1s`; its stdout
    /// discarded and its stderr piped. A test adds its own flags and variables.
    pub fn poll(&self, state_dir: &Path) -> Command {
        let mut cmd = mnemo();
        cmd.args(["worker", "poll", "--environment-id", &self.env_id, "--base-url", &self.server.base])
            // Inherited by an `--on-work` script's `mnemo worker run` too.
            .env("MNEMO_MEMORY_MOUNT_ROOT", self.mnt())
            .arg("--workdir")
            .arg(self.workdir())
            .arg("--state-dir")
            .arg(state_dir)
            .args(["--max-idle", "1s"])
            .env("ANTHROPIC_ENVIRONMENT_KEY", &self.env_key)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// Creates a session directly (the test plays the agent).
    pub async fn session(&self, resources: Value) -> String {
        let body = json!({"agent": self.agent, "environment_id": self.env_id, "resources": resources});
        let s = self.api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
        s["id"].as_str().unwrap().to_owned()
    }

    /// The states of the session's work items, oldest first.
    pub async fn work_states(&self, session: &str) -> Vec<String> {
        let page = self
            .api
            .json(Method::GET, &format!("/v1/environments/{}/work?limit=100", self.env_id), None)
            .await
            .unwrap();
        let mut items: Vec<&Value> =
            page["data"].as_array().unwrap().iter().filter(|w| w["data"]["id"] == session).collect();
        items.sort_by_key(|w| w["created_at"].as_str().unwrap().to_owned());
        items.iter().map(|w| w["state"].as_str().unwrap().to_owned()).collect()
    }
}
