//! A typed async client for the memory-stores API, used by the worker and the CLI.
//!
//! It speaks to `mnemo serve` and to the hosted API alike: bearer authentication, the
//! `anthropic-version`/`anthropic-beta` headers, the error envelope decoded into
//! [`ClientError::Api`], and the reference client's retry policy (connection errors, 408, 409,
//! 429 and 5xx are retried with capped exponential back-off unless the server says
//! `x-should-retry: false`).

mod changes;
mod dreams;
mod error;
mod lenient;
mod session;
mod skills;
mod sse;
mod stream;
#[cfg(test)]
mod testing;
mod work;

use std::time::Duration;

use mnemo_api::headers::{WRITER_HEADER, WriterId};
use mnemo_api::{Backoff, Jitter, Secret};
use mnemo_api::{
    CreateEnvironment, CreateMemory, CreateMemoryStore, Environment, EnvironmentDeleted, EnvironmentId, EnvironmentKey,
    EnvironmentKeyId, ErrorBody, Memory, MemoryDeleted, MemoryId, MemoryListItem, MemoryStore, MemoryStoreDeleted,
    MemoryStoreId, MemoryVersion, MemoryVersionId, MemoryWriteBatch, MemoryWriteResults, Page, UpdateEnvironment,
    UpdateMemory, UpdateMemoryStore, View, WebhookEndpoint, WebhookEndpointId,
};
pub use reqwest::Method;
use reqwest::{RequestBuilder, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use changes::{ChangeStream, ChangeSubscription, FEED_BACKOFF, FEED_IDLE, FEED_PING, FeedEvent};
pub use dreams::{DREAMING_BETA, ListDreamsParams};
pub use error::{ClientError, PathConflict};
pub use session::{SessionAgent, SessionResource, SessionSkill, WorkerSession};
pub use skills::SkillVersion;
pub use stream::{MemoryStream, StreamItem, StreamedMemory};
pub use work::{EventPage, NO_HEARTBEAT};

pub use mnemo_api::headers::{API_VERSION, MANAGED_AGENTS_BETA, MEMORY_BETA};

/// The reference client's retry delays: `min(0.5 s × 2^attempt, 8 s)` with up to 25 % off.
const RETRY_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_millis(500), Duration::from_secs(8)).with_jitter(Jitter::Shave(0.25));

/// Result of every client call.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// A connection to one server with one credential.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Secret,
    /// The workspace every request names (`anthropic-workspace-id`), for a credential that
    /// reaches several (a person's token); `None`: the credential's own.
    workspace: Option<mnemo_api::WorkspaceId>,
    max_retries: u32,
    /// What answers said of the server's extensions (shared by clones).
    extensions: std::sync::Arc<stream::Extensions>,
    /// Names this client's memory writes and change feeds to `mnemo serve`
    /// ([`WRITER_HEADER`]), so its feeds leave out the content of versions it wrote itself;
    /// a clone with another credential gets a new one.
    writer: WriterId,
}

// Query strings are written by `serde_urlencoded` (through reqwest's `query`), which leaves a
// `None` field out: the query types below need no `skip_serializing_if`.

/// Query of [`Client::list_memories`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct ListMemoriesParams {
    pub path_prefix: Option<String>,
    pub depth: Option<u32>,
    pub limit: Option<u32>,
    pub view: Option<View>,
    pub page: Option<String>,
}

/// Query of [`Client::search_memories`] (a mnemo extension).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchMemoriesParams {
    pub q: String,
    pub path_prefix: Option<String>,
    pub limit: Option<u32>,
    pub page: Option<String>,
    /// `text` (the server's default), `semantic` or `hybrid`.
    pub mode: Option<mnemo_api::SearchMode>,
}

/// Query of [`Client::list_memory_stores`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct ListMemoryStoresParams {
    pub limit: Option<u32>,
    pub page: Option<String>,
    pub include_archived: Option<bool>,
    #[serde(rename = "created_at[gte]")]
    pub created_at_gte: Option<String>,
    #[serde(rename = "created_at[lte]")]
    pub created_at_lte: Option<String>,
}

/// Query of [`Client::list_memory_versions`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct ListMemoryVersionsParams {
    pub memory_id: Option<String>,
    pub operation: Option<String>,
    pub session_id: Option<String>,
    pub api_key_id: Option<String>,
    #[serde(rename = "created_at[gte]")]
    pub created_at_gte: Option<String>,
    #[serde(rename = "created_at[lte]")]
    pub created_at_lte: Option<String>,
    pub limit: Option<u32>,
    pub view: Option<View>,
    pub page: Option<String>,
}

#[derive(Serialize)]
struct ViewQuery {
    view: Option<View>,
}

#[derive(Serialize)]
struct DeleteQuery<'a> {
    expected_content_sha256: Option<&'a str>,
}

impl Client {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8080`) authenticating with `token`.
    pub fn new(base_url: &str, token: &str) -> Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(ClientError::Transport)?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
            token: token.into(),
            workspace: None,
            max_retries: 2,
            extensions: Default::default(),
            writer: WriterId::random(),
        })
    }

    /// The same server and connection pool with another credential (a server that acts for
    /// each of its callers with their own).
    pub fn with_token(&self, token: &str) -> Self {
        Self { token: token.into(), writer: WriterId::random(), ..self.clone() }
    }

    /// Names `workspace` on every request (`anthropic-workspace-id`), as a credential that
    /// reaches several workspaces must.
    pub fn in_workspace(mut self, workspace: Option<mnemo_api::WorkspaceId>) -> Self {
        self.workspace = workspace;
        self
    }

    /// Sets how many times a retryable failure is retried (default 2).
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The base URL without anything that may carry a credential (user name and password,
    /// query, fragment): what may be shown, logged or written down.
    pub fn public_base_url(&self) -> String {
        match reqwest::Url::parse(&self.base) {
            Ok(mut url) => {
                // Neither fails on a URL with a host, the only kind a request can go to.
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url.set_query(None);
                url.set_fragment(None);
                url.as_str().trim_end_matches('/').to_owned()
            }
            Err(_) => "(an invalid base URL)".to_owned(),
        }
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
            .header("anthropic-version", API_VERSION);
        let req = match &self.workspace {
            Some(ws) => req.header("anthropic-workspace-id", ws.as_str()),
            None => req,
        };
        match beta_for(path) {
            Some(beta) => req.header(mnemo_api::headers::BETA_HEADER, beta),
            None => req,
        }
    }

    /// Names this client on a memory write ([`WRITER_HEADER`]) when the server is known to be
    /// `mnemo serve` (the hosted API is sent nothing it does not know).
    fn named(&self, req: RequestBuilder) -> RequestBuilder {
        if self.extensions.batch() { req.header(WRITER_HEADER, self.writer.as_str()) } else { req }
    }

    /// This client's [`WRITER_HEADER`] value.
    pub(crate) fn writer(&self) -> &WriterId {
        &self.writer
    }

    /// Sends with the retry policy and decodes a 2xx body, or the error envelope.
    async fn send<T: DeserializeOwned>(&self, build: impl Fn() -> RequestBuilder) -> Result<T> {
        let answer = self.send_buffered(build).await?;
        parse(&answer)
    }

    /// Sends with the retry policy, reading the whole body inside it (as the reference client
    /// does): a connection that breaks while the body is being read is retried like one that
    /// breaks before the headers. Answers a 2xx or a `304`, else the error envelope decoded.
    async fn send_buffered(&self, build: impl Fn() -> RequestBuilder) -> Result<Buffered> {
        let mut attempt = 0;
        loop {
            let outcome = match build().send().await {
                Ok(resp) => {
                    self.extensions.learn(resp.status(), resp.headers());
                    let (status, headers) = (resp.status(), resp.headers().clone());
                    resp.bytes().await.map(|body| Buffered { status, headers, body: body.to_vec() })
                }
                Err(e) => Err(e),
            };
            let retry_after = match &outcome {
                Ok(b) if b.status.is_success() || b.status == StatusCode::NOT_MODIFIED => None,
                Ok(b) => should_retry(b.status, &b.headers).then(|| server_delay(&b.headers)),
                Err(e) => transient(e).then_some(None),
            };
            match (retry_after, attempt < self.max_retries) {
                (Some(delay), true) => {
                    let delay = delay.unwrap_or_else(|| RETRY_BACKOFF.delay(attempt));
                    tracing::debug!(attempt, ?delay, "retrying request");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                _ => {
                    let b = outcome.map_err(ClientError::Transport)?;
                    if b.status.is_success() || b.status == StatusCode::NOT_MODIFIED {
                        return Ok(b);
                    }
                    let request_id = b.headers.get("request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
                    return Err(ClientError::from_response(b.status.as_u16(), request_id, &b.body));
                }
            }
        }
    }

    /// Sends with the retry policy; answers the successful response unread, or the error
    /// envelope decoded.
    async fn send_raw(&self, build: impl Fn() -> RequestBuilder) -> Result<Response> {
        let mut attempt = 0;
        loop {
            let outcome = build().send().await;
            if let Ok(resp) = &outcome {
                self.extensions.learn(resp.status(), resp.headers());
            }
            let retry_after = match &outcome {
                Ok(resp) if resp.status().is_success() => None,
                Ok(resp) => should_retry(resp.status(), resp.headers()).then(|| server_delay(resp.headers())),
                Err(e) => transient(e).then_some(None),
            };
            match (retry_after, attempt < self.max_retries) {
                (Some(delay), true) => {
                    let delay = delay.unwrap_or_else(|| RETRY_BACKOFF.delay(attempt));
                    tracing::debug!(attempt, ?delay, "retrying request");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                _ => return success(outcome.map_err(ClientError::Transport)?).await,
            }
        }
    }

    // ---- memory stores -------------------------------------------------------------------

    pub async fn create_memory_store(&self, body: &CreateMemoryStore) -> Result<MemoryStore> {
        self.send(|| self.request(Method::POST, "/v1/memory_stores").json(body)).await
    }

    pub async fn get_memory_store(&self, id: &MemoryStoreId) -> Result<MemoryStore> {
        self.send(|| self.request(Method::GET, &format!("/v1/memory_stores/{id}"))).await
    }

    pub async fn update_memory_store(&self, id: &MemoryStoreId, body: &UpdateMemoryStore) -> Result<MemoryStore> {
        self.send(|| self.request(Method::POST, &format!("/v1/memory_stores/{id}")).json(body)).await
    }

    pub async fn list_memory_stores(&self, params: &ListMemoryStoresParams) -> Result<Page<MemoryStore>> {
        self.send(|| self.request(Method::GET, "/v1/memory_stores").query(params)).await
    }

    pub async fn archive_memory_store(&self, id: &MemoryStoreId) -> Result<MemoryStore> {
        self.send(|| self.request(Method::POST, &format!("/v1/memory_stores/{id}/archive"))).await
    }

    pub async fn delete_memory_store(&self, id: &MemoryStoreId) -> Result<MemoryStoreDeleted> {
        self.send(|| self.request(Method::DELETE, &format!("/v1/memory_stores/{id}"))).await
    }

    // ---- memories ------------------------------------------------------------------------

    pub async fn create_memory(
        &self,
        store: &MemoryStoreId,
        path: &str,
        content: &str,
        view: Option<View>,
    ) -> Result<Memory> {
        let body = CreateMemory { path: path.to_owned(), content: Some(content.to_owned()) };
        self.send(|| {
            self.named(self.request(Method::POST, &format!("/v1/memory_stores/{store}/memories")))
                .query(&ViewQuery { view })
                .json(&body)
        })
        .await
    }

    /// Whether the server is known to apply memory batches ([`Client::write_memories`]): only
    /// after an answer from `mnemo serve` named the extension (the hosted API has none).
    pub fn offers_memory_batch(&self) -> bool {
        self.extensions.batch()
    }

    /// Applies creates and updates of one store in order, in one request
    /// (`POST /v1/memory_stores/{store}/memories:batch`, a mnemo extension): one outcome per
    /// write, in order, each what the write's own request would have been answered with (the
    /// memory, without content, or its [`ClientError::Api`]). The outer `Err` is the request's
    /// own failure: then none of the writes is known to have applied. Call it only when
    /// [`Client::offers_memory_batch`] says so; a server without it answers `404`.
    pub async fn write_memories(&self, store: &MemoryStoreId, body: &MemoryWriteBatch) -> Result<Vec<Result<Memory>>> {
        let path = format!("/v1/memory_stores/{store}/memories:batch");
        let answer: MemoryWriteResults = self
            .send(|| self.request(Method::POST, &path).header(WRITER_HEADER, self.writer.as_str()).json(body))
            .await?;
        if answer.results.len() != body.writes.len() {
            return Err(ClientError::Decode {
                status: 200,
                message: format!("{} results for {} writes", answer.results.len(), body.writes.len()),
            });
        }
        Ok(answer
            .results
            .into_iter()
            .map(|r| match (r.status, r.memory, r.error) {
                (200..=299, Some(memory), _) => Ok(memory),
                (status, _, error) => Err(ClientError::Api {
                    status,
                    error: error.unwrap_or_else(|| ErrorBody {
                        kind: "api_error".into(),
                        message: format!("the write failed with status {status} and no error object"),
                        extra: Default::default(),
                    }),
                    request_id: None,
                }),
            })
            .collect())
    }

    pub async fn get_memory(&self, store: &MemoryStoreId, id: &MemoryId, view: Option<View>) -> Result<Memory> {
        self.send(|| {
            self.request(Method::GET, &format!("/v1/memory_stores/{store}/memories/{id}")).query(&ViewQuery { view })
        })
        .await
    }

    pub async fn update_memory(
        &self,
        store: &MemoryStoreId,
        id: &MemoryId,
        body: &UpdateMemory,
        view: Option<View>,
    ) -> Result<Memory> {
        self.send(|| {
            self.named(self.request(Method::POST, &format!("/v1/memory_stores/{store}/memories/{id}")))
                .query(&ViewQuery { view })
                .json(body)
        })
        .await
    }

    pub async fn delete_memory(
        &self,
        store: &MemoryStoreId,
        id: &MemoryId,
        expected_content_sha256: Option<&str>,
    ) -> Result<MemoryDeleted> {
        self.send(|| {
            self.request(Method::DELETE, &format!("/v1/memory_stores/{store}/memories/{id}"))
                .query(&DeleteQuery { expected_content_sha256 })
        })
        .await
    }

    pub async fn list_memories(
        &self,
        store: &MemoryStoreId,
        params: &ListMemoriesParams,
    ) -> Result<Page<MemoryListItem>> {
        self.send(|| self.request(Method::GET, &format!("/v1/memory_stores/{store}/memories")).query(params)).await
    }

    /// Store `id`'s version retention (`version_retention`, a mnemo extension); `Ok(None)` from
    /// a server without it (the hosted API answers `404`).
    pub async fn get_version_retention(&self, id: &MemoryStoreId) -> Result<Option<mnemo_api::VersionRetention>> {
        match self.send(|| self.request(Method::GET, &format!("/v1/memory_stores/{id}/version_retention"))).await {
            Ok(view) => Ok(Some(view)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sets store `id`'s own version retention (`30d`, `forever`), or with `None` returns it to
    /// the server's.
    pub async fn set_version_retention(
        &self,
        id: &MemoryStoreId,
        retention: Option<&str>,
    ) -> Result<mnemo_api::VersionRetention> {
        let body = serde_json::json!({ "retention": retention });
        self.send(|| self.request(Method::POST, &format!("/v1/memory_stores/{id}/version_retention")).json(&body)).await
    }

    /// A page of memories matching a search (`memories:search`, a mnemo extension; the hosted
    /// API answers `404`): in one store, or with `store: None` across every store the
    /// credential reaches. Best first, each with a snippet marking the matches `«…»`.
    pub async fn search_memories(
        &self,
        store: Option<&MemoryStoreId>,
        params: &SearchMemoriesParams,
    ) -> Result<mnemo_api::MemorySearchPage> {
        let path = match store {
            Some(store) => format!("/v1/memory_stores/{store}/memories:search"),
            None => "/v1/memories:search".to_owned(),
        };
        self.send(|| self.request(Method::GET, &path).query(params)).await
    }

    /// Every memory of a store, content-free, unless the store is unchanged since the listing
    /// that returned `etag` (`Ok(None)`). Servers that do not tag listings (the hosted API)
    /// simply always list. Returns the memories and the new tag, if any.
    pub async fn list_all_memories_if_changed(
        &self,
        store: &MemoryStoreId,
        etag: Option<&str>,
    ) -> Result<Option<(Vec<Memory>, Option<String>)>> {
        let path = format!("/v1/memory_stores/{store}/memories");
        let first = ListMemoriesParams { limit: Some(100), view: Some(View::Basic), ..Default::default() };
        let answer = self
            .send_buffered(|| {
                let req = self.request(Method::GET, &path).query(&first);
                match etag {
                    Some(tag) => req.header(reqwest::header::IF_NONE_MATCH, tag),
                    None => req,
                }
            })
            .await?;
        if answer.status == StatusCode::NOT_MODIFIED {
            return Ok(None);
        }
        let tag = answer.headers.get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let page: Page<MemoryListItem> = parse(&answer)?;
        Ok(Some((self.follow_pages(store, first, page).await?, tag)))
    }

    /// Every memory of a store (prefix items skipped), following `next_page` to the end.
    pub async fn list_all_memories(&self, store: &MemoryStoreId, view: View) -> Result<Vec<Memory>> {
        let limit = if view == View::Full { 20 } else { 100 };
        let params = ListMemoriesParams { limit: Some(limit), view: Some(view), ..Default::default() };
        let first = self.list_memories(store, &params).await?;
        self.follow_pages(store, params, first).await
    }

    /// The memories directly in one folder (`prefix` is `/` or ends with `/`), content-free:
    /// deeper ones are rolled up by the server (`depth=1`) and skipped. What a sync of a few
    /// paths reads instead of the whole store.
    pub async fn list_folder(&self, store: &MemoryStoreId, prefix: &str) -> Result<Vec<Memory>> {
        let params = ListMemoriesParams {
            path_prefix: Some(prefix.to_owned()),
            depth: Some(1),
            limit: Some(100),
            view: Some(View::Basic),
            page: None,
        };
        let first = self.list_memories(store, &params).await?;
        self.follow_pages(store, params, first).await
    }

    /// The memories of `page` and of every page after it (same query, `page` = the cursor).
    async fn follow_pages(
        &self,
        store: &MemoryStoreId,
        mut params: ListMemoriesParams,
        mut page: Page<MemoryListItem>,
    ) -> Result<Vec<Memory>> {
        let mut out = Vec::new();
        loop {
            out.extend(page.data.into_iter().filter_map(|item| match item {
                MemoryListItem::Memory(m) => Some(m),
                MemoryListItem::Prefix(_) => None,
            }));
            match page.next_page.filter(|p| !p.is_empty()) {
                Some(next) => params.page = Some(next),
                None => return Ok(out),
            }
            page = self.list_memories(store, &params).await?;
        }
    }

    /// Any JSON call, for endpoints without a typed method: the same headers, retries and
    /// error decoding as the typed ones.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value> {
        self.send(|| {
            let req = self.request(method.clone(), path);
            match body {
                Some(b) => req.json(b),
                None => req,
            }
        })
        .await
    }

    // ---- environments ------------------------------------------------------------------

    pub async fn create_environment(&self, body: &CreateEnvironment) -> Result<Environment> {
        self.send(|| self.request(Method::POST, "/v1/environments").json(body)).await
    }

    pub async fn get_environment(&self, id: &EnvironmentId) -> Result<Environment> {
        self.send(|| self.request(Method::GET, &format!("/v1/environments/{id}"))).await
    }

    pub async fn update_environment(&self, id: &EnvironmentId, body: &UpdateEnvironment) -> Result<Environment> {
        self.send(|| self.request(Method::POST, &format!("/v1/environments/{id}")).json(body)).await
    }

    pub async fn list_environments(
        &self,
        include_archived: bool,
        limit: Option<u32>,
        page: Option<&str>,
    ) -> Result<Page<Environment>> {
        #[derive(Serialize)]
        struct Q<'a> {
            include_archived: bool,
            limit: Option<u32>,
            page: Option<&'a str>,
        }
        self.send(|| self.request(Method::GET, "/v1/environments").query(&Q { include_archived, limit, page })).await
    }

    pub async fn archive_environment(&self, id: &EnvironmentId) -> Result<Environment> {
        self.send(|| self.request(Method::POST, &format!("/v1/environments/{id}/archive"))).await
    }

    pub async fn delete_environment(&self, id: &EnvironmentId) -> Result<EnvironmentDeleted> {
        self.send(|| self.request(Method::DELETE, &format!("/v1/environments/{id}"))).await
    }

    /// Mints an environment key (a mnemo extension); the answer carries the secret once.
    pub async fn create_environment_key(&self, id: &EnvironmentId) -> Result<EnvironmentKey> {
        self.send(|| self.request(Method::POST, &format!("/v1/environments/{id}/keys"))).await
    }

    pub async fn list_environment_keys(&self, id: &EnvironmentId) -> Result<Page<EnvironmentKey>> {
        self.send(|| self.request(Method::GET, &format!("/v1/environments/{id}/keys"))).await
    }

    pub async fn revoke_environment_key(&self, id: &EnvironmentId, key: &EnvironmentKeyId) -> Result<EnvironmentKey> {
        self.send(|| self.request(Method::POST, &format!("/v1/environments/{id}/keys/{key}/revoke"))).await
    }

    // ---- webhook endpoints (a mnemo extension) ------------------------------------------

    /// Registers an endpoint; the answer carries its signing secret.
    pub async fn create_webhook_endpoint(&self, body: &mnemo_api::CreateWebhookEndpoint) -> Result<WebhookEndpoint> {
        self.send(|| self.request(Method::POST, "/v1/webhook_endpoints").json(body)).await
    }

    pub async fn list_webhook_endpoints(
        &self,
        limit: Option<u32>,
        page: Option<&str>,
    ) -> Result<Page<WebhookEndpoint>> {
        #[derive(Serialize)]
        struct Q<'a> {
            limit: Option<u32>,
            page: Option<&'a str>,
        }
        self.send(|| self.request(Method::GET, "/v1/webhook_endpoints").query(&Q { limit, page })).await
    }

    pub async fn get_webhook_endpoint(&self, id: &WebhookEndpointId) -> Result<WebhookEndpoint> {
        self.send(|| self.request(Method::GET, &format!("/v1/webhook_endpoints/{id}"))).await
    }

    /// The endpoint with its signing secret.
    pub async fn webhook_endpoint_secret(&self, id: &WebhookEndpointId) -> Result<WebhookEndpoint> {
        self.send(|| self.request(Method::GET, &format!("/v1/webhook_endpoints/{id}/secret"))).await
    }

    /// Replaces the endpoint's signing secret (the answer carries the new one); the old one keeps
    /// signing for `keep_previous_seconds` (the server's default: a day).
    pub async fn rotate_webhook_secret(
        &self,
        id: &WebhookEndpointId,
        keep_previous_seconds: Option<u64>,
    ) -> Result<WebhookEndpoint> {
        let body = mnemo_api::RotateWebhookSecret { keep_previous_seconds };
        self.send(|| self.request(Method::POST, &format!("/v1/webhook_endpoints/{id}/rotate_secret")).json(&body)).await
    }

    pub async fn update_webhook_endpoint(
        &self,
        id: &WebhookEndpointId,
        body: &mnemo_api::UpdateWebhookEndpoint,
    ) -> Result<WebhookEndpoint> {
        self.send(|| self.request(Method::POST, &format!("/v1/webhook_endpoints/{id}")).json(body)).await
    }

    pub async fn delete_webhook_endpoint(&self, id: &WebhookEndpointId) -> Result<mnemo_api::WebhookEndpointDeleted> {
        self.send(|| self.request(Method::DELETE, &format!("/v1/webhook_endpoints/{id}"))).await
    }

    /// An endpoint's deliveries, newest first (`status`: `pending`, `delivered` or `failed`).
    pub async fn list_webhook_deliveries(
        &self,
        id: &WebhookEndpointId,
        status: Option<&str>,
        limit: Option<u32>,
        page: Option<&str>,
    ) -> Result<Page<mnemo_api::WebhookDelivery>> {
        #[derive(Serialize)]
        struct Q<'a> {
            status: Option<&'a str>,
            limit: Option<u32>,
            page: Option<&'a str>,
        }
        self.send(|| {
            self.request(Method::GET, &format!("/v1/webhook_endpoints/{id}/deliveries")).query(&Q {
                status,
                limit,
                page,
            })
        })
        .await
    }

    // ---- memory versions -----------------------------------------------------------------

    pub async fn list_memory_versions(
        &self,
        store: &MemoryStoreId,
        params: &ListMemoryVersionsParams,
    ) -> Result<Page<MemoryVersion>> {
        self.send(|| self.request(Method::GET, &format!("/v1/memory_stores/{store}/memory_versions")).query(params))
            .await
    }

    /// Every version `params` selects, following `next_page` to the end, in the server's order
    /// (newest first on `mnemo serve`). Pages hold 100 versions, or 20 with `view=full`, unless
    /// `params.limit` says otherwise; `params.page` is where the walk starts.
    pub async fn list_all_memory_versions(
        &self,
        store: &MemoryStoreId,
        mut params: ListMemoryVersionsParams,
    ) -> Result<Vec<MemoryVersion>> {
        let full = params.view == Some(View::Full);
        params.limit = params.limit.or(Some(if full { 20 } else { 100 }));
        let mut out = Vec::new();
        loop {
            let page = self.list_memory_versions(store, &params).await?;
            out.extend(page.data);
            match page.next_page.filter(|p| !p.is_empty()) {
                Some(next) => params.page = Some(next),
                None => return Ok(out),
            }
        }
    }

    pub async fn get_memory_version(
        &self,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        view: Option<View>,
    ) -> Result<MemoryVersion> {
        self.send(|| {
            self.request(Method::GET, &format!("/v1/memory_stores/{store}/memory_versions/{id}"))
                .query(&ViewQuery { view })
        })
        .await
    }

    pub async fn redact_memory_version(&self, store: &MemoryStoreId, id: &MemoryVersionId) -> Result<MemoryVersion> {
        self.send(|| self.request(Method::POST, &format!("/v1/memory_stores/{store}/memory_versions/{id}/redact")))
            .await
    }
}

/// The beta header the reference client sends for `path`: none for the skills resource.
fn beta_for(path: &str) -> Option<&'static str> {
    if path == "/v1/skills" || path.starts_with("/v1/skills/") {
        None
    } else if path.split('?').next().is_some_and(|p| p == "/v1/dreams" || p.starts_with("/v1/dreams/")) {
        Some(DREAMING_BETA)
    } else if path.starts_with("/v1/memory_stores") {
        Some(MEMORY_BETA)
    } else {
        Some(MANAGED_AGENTS_BETA)
    }
}

/// A response read to its end.
struct Buffered {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

/// A buffered 2xx body as JSON.
fn parse<T: DeserializeOwned>(answer: &Buffered) -> Result<T> {
    serde_json::from_slice(&answer.body)
        .map_err(|e| ClientError::Decode { status: answer.status.as_u16(), message: e.to_string() })
}

/// A transport failure worth another attempt: no connection, a timeout, a connection that
/// broke while the request was sent or while the response's body was read (reqwest calls
/// that a decoding error of the body; this client never lets reqwest decode JSON).
fn transient(e: &reqwest::Error) -> bool {
    e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() || e.is_decode()
}

/// The reference client's rule: the server's `x-should-retry` wins; otherwise 408, 409, 429
/// and 5xx are retried.
fn should_retry(s: StatusCode, headers: &reqwest::header::HeaderMap) -> bool {
    match headers.get("x-should-retry").and_then(|v| v.to_str().ok()) {
        Some("true") => true,
        Some("false") => false,
        _ => {
            s == StatusCode::REQUEST_TIMEOUT
                || s == StatusCode::CONFLICT
                || s == StatusCode::TOO_MANY_REQUESTS
                || s.is_server_error()
        }
    }
}

/// A delay the server asked for with `retry-after-ms` or `retry-after` (seconds), if sane.
fn server_delay(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok());
    let secs = header("retry-after-ms").map(|ms| ms / 1000.0).or_else(|| header("retry-after"))?;
    (secs > 0.0 && secs <= 60.0).then(|| Duration::from_secs_f64(secs))
}

/// The response if it is a success, else its error envelope decoded.
async fn success(resp: Response) -> Result<Response> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status().as_u16();
    let request_id = resp.headers().get("request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = resp.bytes().await.map_err(ClientError::Transport)?;
    Err(ClientError::from_response(status, request_id, &bytes))
}

/// A success's JSON body, or the error envelope decoded.
async fn decode<T: DeserializeOwned>(resp: Response) -> Result<T> {
    let resp = success(resp).await?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(ClientError::Transport)?;
    serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode { status, message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_credential() {
        let client = Client::new("http://127.0.0.1:1", "sk-mnemo-TOPSECRET").unwrap();
        for printed in [format!("{client:?}"), format!("{client:#?}")] {
            assert!(!printed.contains("TOPSECRET") && printed.contains("[redacted]"), "{printed}");
        }
    }
    use crate::testing::{json, serve};

    /// The query string `query` makes, as the requests above send it.
    fn query_of(query: &impl Serialize) -> String {
        let req = reqwest::Client::new().get("http://127.0.0.1/").query(query).build().unwrap();
        req.url().query().unwrap_or_default().to_owned()
    }

    #[test]
    fn absent_query_fields_are_left_out() {
        assert_eq!(query_of(&ListMemoriesParams::default()), "");
        assert_eq!(query_of(&ViewQuery { view: None }), "");
        let params = ListMemoriesParams { limit: Some(3), view: Some(View::Full), ..Default::default() };
        assert_eq!(query_of(&params), "limit=3&view=full");
        let stores = ListMemoryStoresParams {
            include_archived: Some(true),
            created_at_gte: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        assert_eq!(query_of(&stores), "include_archived=true&created_at%5Bgte%5D=2026-01-01T00%3A00%3A00Z");
        assert_eq!(query_of(&DeleteQuery { expected_content_sha256: Some("ab") }), "expected_content_sha256=ab");
    }

    #[test]
    fn the_public_base_url_carries_no_credential() {
        let shown = |base: &str| Client::new(base, "sk-secret").unwrap().public_base_url();
        assert_eq!(shown("http://127.0.0.1:8080/"), "http://127.0.0.1:8080");
        assert_eq!(shown("https://user:pa55@api.example.com/prefix/?key=sk-x#frag"), "https://api.example.com/prefix");
        assert_eq!(shown("https://api.anthropic.com"), "https://api.anthropic.com");
        assert_eq!(shown("not a url"), "(an invalid base URL)");
    }

    fn version_json(store: &MemoryStoreId, n: u32) -> serde_json::Value {
        serde_json::json!({
            "type": "memory_version", "id": MemoryVersionId::generate(), "memory_id": MemoryId::generate(),
            "memory_store_id": store, "operation": "created", "path": format!("/v{n}"), "content": format!("c{n}"),
            "content_sha256": mnemo_api::content_sha256(format!("c{n}").as_bytes()), "content_size_bytes": 2,
            "created_at": "2026-12-01T10:00:00Z", "created_by": {"type": "api_actor", "api_key_id": "apikey_01"},
            "redacted_at": null, "redacted_by": null,
        })
    }

    #[tokio::test]
    async fn every_version_is_listed_page_after_page_with_the_same_query() {
        let store = MemoryStoreId::generate();
        let page = |items: Vec<serde_json::Value>, next: Option<&str>| {
            json("200 OK", &serde_json::json!({"data": items, "next_page": next}).to_string())
        };
        let (base, seen) = serve(vec![
            page(vec![version_json(&store, 1), version_json(&store, 2)], Some("c2")),
            // An empty page that still points on is followed, as the reference client does.
            page(vec![], Some("c3")),
            page(vec![version_json(&store, 3)], None),
        ])
        .await;
        let client = Client::new(&base, "k").unwrap();
        let params = ListMemoryVersionsParams { view: Some(View::Full), ..Default::default() };
        let versions = client.list_all_memory_versions(&store, params).await.unwrap();
        let paths: Vec<_> = versions.iter().map(|v| v.path.as_deref().unwrap()).collect();
        assert_eq!(paths, ["/v1", "/v2", "/v3"]);
        assert_eq!(versions[0].content.as_deref(), Some("c1"));
        let seen = seen.lock().unwrap().clone();
        let path = format!("get /v1/memory_stores/{store}/memory_versions?").to_lowercase();
        assert!(seen[0].starts_with(&format!("{path}limit=20&view=full ")), "{}", seen[0]);
        assert!(seen[1].starts_with(&format!("{path}limit=20&view=full&page=c2 ")), "{}", seen[1]);
        assert!(seen[2].starts_with(&format!("{path}limit=20&view=full&page=c3 ")), "{}", seen[2]);
    }

    /// A client names itself (`mnemo-writer`) on memory writes only to `mnemo serve`, and a clone
    /// with another credential is another writer.
    #[tokio::test]
    async fn a_client_names_its_writes_only_to_mnemo_serve() {
        let store = MemoryStoreId::generate();
        let memory = serde_json::json!({
            "type": "memory", "id": MemoryId::generate(), "memory_store_id": store, "path": "/a.md",
            "content": null, "content_sha256": mnemo_api::content_sha256(b"a"), "content_size_bytes": 1,
            "memory_version_id": MemoryVersionId::generate(),
            "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:00Z",
        })
        .to_string();
        let hosted = json("200 OK", &memory);
        let mnemo = hosted.replace("\r\n\r\n", "\r\nmnemo-extensions: memory-batch\r\n\r\n");
        let (base, seen) = serve(vec![hosted.clone(), hosted, mnemo.clone(), mnemo.clone(), mnemo]).await;
        let client = Client::new(&base, "k").unwrap();
        // Not heard from yet, then heard from a server without mnemo's extensions: nothing sent.
        client.create_memory(&store, "/a.md", "a", None).await.unwrap();
        client.create_memory(&store, "/a.md", "a", None).await.unwrap();
        // This answer names the batch: from then on the writes carry the header.
        client.create_memory(&store, "/a.md", "a", None).await.unwrap();
        client.create_memory(&store, "/a.md", "a", None).await.unwrap();
        client.with_token("other").create_memory(&store, "/a.md", "a", None).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        let writer =
            |head: &String| head.lines().find_map(|l| l.strip_prefix("mnemo-writer: ")).map(|w| w.trim().to_owned());
        let named: Vec<Option<String>> = seen.iter().map(writer).collect();
        assert_eq!(named[..3], [None, None, None], "{seen:?}");
        let mine = named[3].clone().expect("the fourth write names its client");
        assert_eq!(mine, client.writer().as_str());
        let other = named[4].clone().expect("the clone names itself too");
        assert_ne!(other, mine, "another credential is another writer");
    }

    /// Issue 16 / the fault proxy's mount scenario: a `5xx` (or a reset) on the first page of
    /// an interval sync's conditional listing used to skip the retry policy and lose the sync.
    #[tokio::test]
    async fn a_5xx_on_the_first_listing_page_of_an_interval_sync_is_retried() {
        let store = MemoryStoreId::generate();
        let page = json("200 OK", r#"{"data": [], "next_page": null}"#).replace("\r\n\r\n", "\r\netag: \"t2\"\r\n\r\n");
        let (base, seen) = serve(vec![json("503 Service Unavailable", "{}"), page]).await;
        let client = Client::new(&base, "k").unwrap();
        let (memories, tag) = client.list_all_memories_if_changed(&store, Some("\"t1\"")).await.unwrap().unwrap();
        assert!(memories.is_empty());
        assert_eq!(tag.as_deref(), Some("\"t2\""));
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "retried once: {seen:?}");
        assert!(seen.iter().all(|h| h.contains("if-none-match: \"t1\"")), "the retry is conditional too: {seen:?}");
    }

    /// The fault proxy's truncated responses: a connection that breaks while the body is read
    /// is retried, as the reference client (which reads the body inside its retry loop) does.
    #[tokio::test]
    async fn a_response_cut_short_in_its_body_is_retried() {
        let cut = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\nconnection: close\r\n\r\n{\"id\": ".to_owned();
        let (base, seen) = serve(vec![cut, json("200 OK", r#"{"id": "whole"}"#)]).await;
        let client = Client::new(&base, "k").unwrap();
        let answer = client.json(Method::GET, "/v1/agents/a", None).await.unwrap();
        assert_eq!(answer["id"], "whole");
        assert_eq!(seen.lock().unwrap().len(), 2);
        // Without retries the cut body is a transport error, not a decoding one.
        let (base, _) = serve(vec![json("200 OK", "{}").replace("content-length: 2", "content-length: 9")]).await;
        let err = Client::new(&base, "k").unwrap().with_max_retries(0).json(Method::GET, "/x", None).await.unwrap_err();
        assert!(matches!(err, ClientError::Transport(_)), "{err:?}");
    }
}
