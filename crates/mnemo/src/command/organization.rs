//! `mnemo workspace` and `mnemo api-key`: the organization's workspaces and keys (admin-api.md
//! §8.4–§8.5), through a running server's Admin API with an admin key. (`mnemo admin bootstrap`,
//! which opens the database directly, is in `admin`.)

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use mnemo_api::{AdminPage, ApiKey, ApiKeyCreated, Workspace};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Where and with which admin key to call the server.
#[derive(Debug, Args)]
pub(crate) struct AdminServer {
    /// The mnemo server.
    #[arg(long, env = "ANTHROPIC_BASE_URL", default_value = "http://127.0.0.1:8080")]
    base_url: String,

    /// An admin key of that server (`sk-mnemo-admin-…`).
    #[arg(long, env = "MNEMO_ADMIN_KEY", hide_env_values = true)]
    admin_key: mnemo_api::Secret,
}

impl AdminServer {
    /// One Admin API call: the JSON answer, or the server's error message.
    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<T> {
        let url = format!("{}{path}", self.base_url.trim_end_matches('/'));
        let mut req = reqwest::Client::new().request(method, &url).bearer_auth(self.admin_key.expose());
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.with_context(|| format!("call {}", self.base_url))?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(text);
            bail!("the server answered {status}: {message}");
        }
        serde_json::from_str(&text).context("the server's answer is not what the Admin API returns")
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspaceCmd {
    /// Create a workspace and print its id.
    Create {
        /// Its name (1–255 characters).
        name: String,
        #[command(flatten)]
        server: AdminServer,
    },
    /// List workspaces (the Default one included; archived ones with --include-archived).
    List {
        #[arg(long)]
        include_archived: bool,
        #[command(flatten)]
        server: AdminServer,
    },
    /// Archive a workspace: its API keys and environment keys stop working at once.
    Archive {
        /// The workspace (`wrkspc_…`).
        workspace_id: String,
        #[command(flatten)]
        server: AdminServer,
    },
}

impl WorkspaceCmd {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        use reqwest::Method;
        match self {
            Self::Create { name, server } => {
                let ws: Workspace =
                    server.call(Method::POST, "/v1/organizations/workspaces", Some(json!({"name": name}))).await?;
                println!("{}", ws.id);
            }
            Self::List { include_archived, server } => {
                let mut after: Option<String> = None;
                loop {
                    let mut path = format!(
                        "/v1/organizations/workspaces?include_default=true&include_archived={include_archived}&limit=100"
                    );
                    if let Some(a) = &after {
                        path.push_str(&format!("&after_id={a}"));
                    }
                    let page: AdminPage<Workspace> = server.call(Method::GET, &path, None).await?;
                    for ws in &page.data {
                        let state = ws.archived_at.map_or_else(|| "active".to_owned(), |at| format!("archived {at}"));
                        println!("{}\t{}\t{state}", ws.id, ws.name);
                    }
                    if !page.has_more || page.last_id.is_none() {
                        break;
                    }
                    after = page.last_id;
                }
            }
            Self::Archive { workspace_id, server } => {
                let path = format!("/v1/organizations/workspaces/{workspace_id}/archive");
                let ws: Workspace = server.call(Method::POST, &path, None).await?;
                println!("{} archived at {}", ws.id, ws.archived_at.unwrap_or_default());
            }
        }
        Ok(())
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ApiKeyCmd {
    /// Mint an API key in a workspace and print the secret alone on stdout (shown once).
    Create {
        /// The workspace (`wrkspc_…`).
        #[arg(long)]
        workspace: String,
        /// Its name (1–255 characters).
        #[arg(long)]
        name: String,
        /// When it stops working (RFC 3339, in the future).
        #[arg(long)]
        expires_at: Option<String>,
        #[command(flatten)]
        server: AdminServer,
    },
    /// List API keys (ids, names, status, workspace; never secrets).
    List {
        /// Only this workspace's keys.
        #[arg(long)]
        workspace: Option<String>,
        #[command(flatten)]
        server: AdminServer,
    },
    /// Deactivate a key (`status: inactive`): refused from the next request on.
    Revoke {
        /// The key (`apikey_…`).
        api_key_id: String,
        #[command(flatten)]
        server: AdminServer,
    },
}

impl ApiKeyCmd {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        use reqwest::Method;
        match self {
            Self::Create { workspace, name, expires_at, server } => {
                let mut body = json!({"name": name, "workspace_id": workspace});
                if let Some(at) = expires_at {
                    body["expires_at"] = Value::String(at);
                }
                let created: ApiKeyCreated =
                    server.call(Method::POST, "/v1/organizations/api_keys", Some(body)).await?;
                tracing::info!(api_key.id = %created.api_key.id, "created API key");
                println!("{}", created.key.expose());
            }
            Self::List { workspace, server } => {
                let mut after: Option<String> = None;
                loop {
                    let mut path = "/v1/organizations/api_keys?limit=100".to_owned();
                    if let Some(ws) = &workspace {
                        path.push_str(&format!("&workspace_id={ws}"));
                    }
                    if let Some(a) = &after {
                        path.push_str(&format!("&after_id={a}"));
                    }
                    let page: AdminPage<ApiKey> = server.call(Method::GET, &path, None).await?;
                    for key in &page.data {
                        let ws = match &key.scope {
                            mnemo_api::ApiKeyScope::Workspace { workspace_id } => workspace_id.to_string(),
                            mnemo_api::ApiKeyScope::Organization => "organization".to_owned(),
                        };
                        println!("{}\t{}\t{}\t{ws}", key.id, key.name, key.status);
                    }
                    if !page.has_more || page.last_id.is_none() {
                        break;
                    }
                    after = page.last_id;
                }
            }
            Self::Revoke { api_key_id, server } => {
                let path = format!("/v1/organizations/api_keys/{api_key_id}");
                let key: ApiKey = server.call(Method::POST, &path, Some(json!({"status": "inactive"}))).await?;
                println!("{} {}", key.id, key.status);
            }
        }
        Ok(())
    }
}
