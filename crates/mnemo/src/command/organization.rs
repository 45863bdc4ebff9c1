//! `mnemo admin`, `mnemo workspace` and `mnemo api-key`: the organization's keys and workspaces
//! (admin-api.md §8.3–§8.5). `admin bootstrap` opens the database directly, for whoever runs the
//! host and lost every admin key; the others call a running server's Admin API with an admin key.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use mnemo_api::{ADMIN_KEY_PREFIX, AdminPage, ApiKey, ApiKeyCreated, Workspace, generate_secret};
use mnemo_server::hash_credential;
use mnemo_store::Limits;
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

/// Makes a one-time setup link (admin-api.md §8.3) under `base`: only its secret's hash is kept.
pub(crate) async fn setup_link(store: &dyn mnemo_store::Store, base: &str) -> anyhow::Result<mnemo_api::Secret> {
    let secret = generate_secret("mnemo-setup-");
    store
        .create_setup_link(hash_credential(&secret), mnemo_store::rules::people::SETUP_LINK_TTL_SECS)
        .await
        .context("make the setup link")?;
    Ok(mnemo_api::Secret::new(format!("{}/console/setup/{secret}", base.trim_end_matches('/'))))
}

#[derive(Debug, Subcommand)]
pub(crate) enum Admin {
    /// Print a new admin key, opening the database directly (for a lost admin credential).
    ///
    /// Nothing is revoked. While no person is an active admin, it also prints a one-time
    /// console setup link (24 hours) that makes one.
    Bootstrap {
        /// The database: `sqlite://PATH` or `postgres://USER:PASS@HOST:PORT/DB`.
        #[arg(long, env = "MNEMO_DATABASE_URL", hide_env_values = true)]
        database: String,
        /// Where people reach the server (the setup link's base).
        #[arg(long, value_name = "URL", env = "MNEMO_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
        public_url: String,
        #[command(flatten)]
        postgres: crate::database::PostgresArgs,
    },
}

impl Admin {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Bootstrap { database, postgres, public_url } => {
                let store = crate::database::open(&database, Limits::default(), &postgres).await?;
                let key = generate_secret(ADMIN_KEY_PREFIX);
                let id = store.ensure_admin_key(hash_credential(&key), "mnemo admin bootstrap").await?;
                let link =
                    if store.setup_wanted().await? { Some(setup_link(&*store, &public_url).await?) } else { None };
                store.close().await;
                eprintln!("Created admin key {id} (shown once; only its hash is stored).");
                println!("{key}");
                if let Some(link) = link {
                    eprintln!(
                        "No person is an admin: this one-time console setup link (valid 24 hours) makes one:\n\n    {}\n",
                        link.expose()
                    );
                }
            }
        }
        Ok(())
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
