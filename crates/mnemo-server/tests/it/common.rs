use std::sync::Arc;

use mnemo_api::{CreateMemoryStore, MemoryId, MemoryStore, MemoryStoreId, MemoryVersion};
use mnemo_client::Client;
use mnemo_client::ListMemoryVersionsParams;
use mnemo_server::{AppState, ServeConfig, hash_credential};
use mnemo_store::{Limits, Store};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub(crate) const KEY: &str = "sk-test-key";

/// The tools of an agent that uses the built-in toolset as it comes.
pub(crate) fn toolset() -> Value {
    json!([{"type": "agent_toolset_20260401"}])
}

/// The records many tests start from, made through the API of any server that answers a JSON
/// call (the shared [`TestServer`] and the timeout tests' own).
pub(crate) trait Fixtures {
    /// A JSON call with a bearer token: the status and the body.
    async fn call(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value);

    /// A new agent named `a` with these tools: its id.
    async fn new_agent(&self, tools: Value) -> String {
        let body = json!({"name": "a", "model": "claude-opus-4-6", "tools": tools});
        let (status, agent) = self.call(Method::POST, "/v1/agents", KEY, Some(body)).await;
        assert_eq!(status, 200, "{agent}");
        agent["id"].as_str().unwrap().to_owned()
    }

    /// A new environment named `e` (self-hosted, the default) and a key for it: the
    /// environment's id and the key.
    async fn new_environment_with_key(&self) -> (String, String) {
        let (status, env) = self.call(Method::POST, "/v1/environments", KEY, Some(json!({"name": "e"}))).await;
        assert_eq!(status, 200, "{env}");
        let env = env["id"].as_str().unwrap().to_owned();
        let (status, key) = self.call(Method::POST, &format!("/v1/environments/{env}/keys"), KEY, None).await;
        assert_eq!(status, 200, "{key}");
        (env, key["key"].as_str().unwrap().to_owned())
    }

    /// A session (on a new self-hosted environment) with `store` attached read-only, its work
    /// polled: the session's sessions token and the environment's key.
    async fn read_only_sessions_token(&self, store: &mnemo_api::MemoryStoreId) -> (String, String) {
        let (_, agent) = self.call(Method::POST, "/v1/agents", KEY, Some(json!({"name": "a", "model": "m"}))).await;
        let (env, env_key) = self.new_environment_with_key().await;
        let session = json!({
            "agent": agent["id"], "environment_id": env,
            "resources": [{"type": "memory_store", "memory_store_id": store, "access": "read_only"}]
        });
        assert_eq!(self.call(Method::POST, "/v1/sessions", KEY, Some(session)).await.0, 200);
        let (_, work) = self.call(Method::GET, &format!("/v1/environments/{env}/work/poll"), &env_key, None).await;
        let secret = mnemo_api::WorkSecret::decode(work["secret"].as_str().unwrap()).unwrap();
        (secret.sessions_token.into_exposed(), env_key)
    }
}

/// A server on 127.0.0.1 with its own database, stopped on drop.
pub(crate) struct TestServer {
    pub(crate) client: Client,
    pub(crate) base: String,
    /// The server's state, for what only it can tell (how many reads the change feeds made).
    pub(crate) state: AppState,
    _stop: oneshot::Sender<()>,
    _store: mnemo_store_tests::TestStore,
}

impl TestServer {
    pub(crate) async fn start() -> Self {
        Self::with_limits(Limits::default()).await
    }

    /// A server on a fresh store of the backend `MNEMO_TEST_DATABASE` names (SQLite unless
    /// told otherwise), so this whole suite runs per backend.
    pub(crate) async fn with_limits(limits: Limits) -> Self {
        Self::configured(limits, |state| state).await
    }

    /// [`with_limits`](Self::with_limits), with the server's state changed by `configure`.
    pub(crate) async fn configured(limits: Limits, configure: impl FnOnce(AppState) -> AppState) -> Self {
        Self::serving(limits, configure, ServeConfig::default()).await
    }

    /// [`configured`](Self::configured), its connections served as `serve` says.
    pub(crate) async fn serving(
        limits: Limits,
        configure: impl FnOnce(AppState) -> AppState,
        serve: ServeConfig,
    ) -> Self {
        let opened = mnemo_store_tests::from_env().open(limits).await;
        let store: Arc<dyn Store> = Arc::clone(&opened.store);
        store.ensure_api_key(hash_credential(KEY), "test").await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let state = configure(AppState::new(Arc::clone(&store)));
        let router = mnemo_server::router(state.clone());
        tokio::spawn(mnemo_server::serve_with(listener, router, serve, async {
            let _ = stopped.await;
        }));
        let client = Client::new(&base, KEY).unwrap().with_max_retries(0);
        Self { client, base, state, _stop: stop, _store: opened }
    }

    /// The server's store.
    pub(crate) fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self._store.store)
    }

    pub(crate) async fn new_store(&self, name: &str) -> MemoryStore {
        self.client.create_memory_store(&CreateMemoryStore { name: name.into(), ..Default::default() }).await.unwrap()
    }

    /// The versions of one memory, newest first (one page).
    pub(crate) async fn versions_of(&self, store: &MemoryStoreId, memory: &MemoryId) -> Vec<MemoryVersion> {
        let params = ListMemoryVersionsParams { memory_id: Some(memory.to_string()), ..Default::default() };
        self.client.list_memory_versions(store, &params).await.unwrap().data
    }

    /// A JSON call with a bearer token: the status and the body.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self.raw(method, path).bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
    }

    /// A raw request, for what the typed client cannot express.
    pub(crate) fn raw(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().request(method, format!("{}{path}", self.base))
    }
}

impl Fixtures for TestServer {
    async fn call(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        TestServer::call(self, method, path, token, body).await
    }
}

/// The error type of a failed call.
pub(crate) fn error_type<T: std::fmt::Debug>(r: Result<T, mnemo_client::ClientError>) -> (u16, String) {
    let e = r.expect_err("the call should fail");
    (e.status().unwrap_or(0), e.error_type().unwrap_or("").to_owned())
}
