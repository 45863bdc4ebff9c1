//! Environments: the list with their work queues, an environment's page with its queue and its
//! keys (minted once and shown once, revoked behind a confirmation).

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_api::{
    ENVIRONMENT_KEY_PREFIX, Environment, EnvironmentId, EnvironmentKeyId, WorkQueueStats, config_type, generate_secret,
};
use mnemo_http::{Id, Query};

use crate::Console;
use crate::audit_log::record;
use crate::auth::{NoFields, Posted, Signed, hash};
use crate::page::{Chrome, PageError, Section, render};
use crate::stores::{ArchivedList, ConfirmPage};
use crate::text::when_str;
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::scope::Action;

/// Environments per page of the list.
const PAGE: u32 = 50;

#[derive(Debug)]
pub(crate) struct Queue {
    depth: u64,
    pending: u64,
    workers: String,
    oldest: String,
}

fn queue(stats: &WorkQueueStats) -> Queue {
    Queue {
        depth: stats.depth,
        pending: stats.pending,
        workers: stats.workers_polling.map_or_else(|| "unknown".into(), |n| n.to_string()),
        oldest: stats.oldest_queued_at.as_deref().map(when_str).unwrap_or_default(),
    }
}

#[derive(Debug)]
pub(crate) struct EnvironmentRow {
    id: String,
    name: String,
    description: String,
    kind: String,
    created: String,
    archived: bool,
    queue: Option<Queue>,
}

fn row(env: &Environment, stats: Option<&WorkQueueStats>) -> EnvironmentRow {
    EnvironmentRow {
        id: env.id.to_string(),
        name: env.name.clone(),
        description: env.description.clone().unwrap_or_default(),
        kind: config_type(&env.config).unwrap_or("unknown").replace('_', "-"),
        created: when_str(&env.created_at),
        archived: env.archived_at.is_some(),
        queue: stats.map(queue),
    }
}

async fn stats(console: &Console, who: &Signed, env: &Environment) -> Result<Option<WorkQueueStats>, PageError> {
    if !env.is_self_hosted() {
        return Ok(None);
    }
    Ok(Some(console.store.work_stats(&who.workspace, &env.id).await?))
}

#[derive(Debug, Template)]
#[template(path = "environments.html")]
struct EnvironmentsPage {
    chrome: Chrome,
    rows: Vec<EnvironmentRow>,
    archived: bool,
    next: Option<String>,
    first_page: bool,
}

pub(crate) async fn list(
    State(console): State<Console>,
    who: Signed,
    Query(mut q): Query<ArchivedList>,
) -> Result<Response, PageError> {
    let first_page = q.after.is_none();
    let listing = console.store.list_environments(&who.workspace, q.archived, PAGE, q.after.take()).await?;
    let mut rows = Vec::with_capacity(listing.items.len());
    for env in &listing.items {
        rows.push(row(env, stats(&console, &who, env).await?.as_ref()));
    }
    let next = q.next_link("/console/environments", listing.next);
    let archived = q.archived;
    Ok(render(&EnvironmentsPage { chrome: who.chrome(Section::Environments), rows, archived, next, first_page }))
}

#[derive(Debug)]
pub(crate) struct KeyRow {
    id: String,
    created: String,
    revoked: String,
}

#[derive(Debug, Template)]
#[template(path = "environment.html")]
struct EnvironmentPage {
    chrome: Chrome,
    env: EnvironmentRow,
    keys: Vec<KeyRow>,
    /// A key just minted: shown this once.
    minted: Option<(String, String)>,
}

async fn environment_page_with(
    console: &Console,
    who: &Signed,
    env_id: &EnvironmentId,
    minted: Option<(String, String)>,
) -> Result<Response, PageError> {
    let env = console.store.get_environment(&who.workspace, env_id).await?;
    let (stats, keys) = tokio::try_join!(stats(console, who, &env), async {
        console.store.list_environment_keys(&who.workspace, env_id).await.map_err(PageError::from)
    })?;
    let keys = keys
        .iter()
        .map(|k| KeyRow {
            id: k.id.to_string(),
            created: when_str(&k.created_at),
            revoked: k.revoked_at.as_deref().map(when_str).unwrap_or_default(),
        })
        .collect();
    Ok(render(&EnvironmentPage {
        chrome: who.chrome(Section::Environments),
        env: row(&env, stats.as_ref()),
        keys,
        minted,
    }))
}

pub(crate) async fn environment_page(
    State(console): State<Console>,
    who: Signed,
    Id(env_id): Id<EnvironmentId>,
) -> Result<Response, PageError> {
    environment_page_with(&console, &who, &env_id, None).await
}

/// Mints an environment key and shows it on the answer to this `POST` only: it is never stored,
/// and reloading the page does not show it again.
pub(crate) async fn mint_key(
    State(console): State<Console>,
    Id(env_id): Id<EnvironmentId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Administer)?;
    let secret = generate_secret(ENVIRONMENT_KEY_PREFIX);
    let key = console.store.create_environment_key(&posted.who.workspace, &env_id, hash(&secret)).await?;
    let details = serde_json::json!({ "environment_id": env_id.as_str() });
    record(&console, &posted.who, AuditAction::EnvironmentKeyCreate, key.id.as_str(), details).await;
    tracing::info!(environment.id = %env_id, environment_key.id = %key.id, by = %posted.who.label(), "minted environment key in the console");
    let mut response =
        environment_page_with(&console, &posted.who, &env_id, Some((key.id.to_string(), secret))).await?;
    response.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(response)
}

pub(crate) async fn revoke_confirm(
    State(console): State<Console>,
    who: Signed,
    Id(env_id): Id<EnvironmentId>,
    Id(key_id): Id<EnvironmentKeyId>,
) -> Result<Response, PageError> {
    who.allow(Action::Administer)?;
    let env = console.store.get_environment(&who.workspace, &env_id).await?;
    let keys = console.store.list_environment_keys(&who.workspace, &env_id).await?;
    let key = keys
        .iter()
        .find(|k| k.id == key_id)
        .ok_or_else(|| PageError::NotFound(format!("environment key `{key_id}` not found")))?;
    Ok(render(&ConfirmPage {
        chrome: who.chrome(Section::Environments),
        title: "Revoke this key?".into(),
        message: format!(
            "Revoke key {} of “{}”, created {}? Workers using it are refused at once, on every replica.",
            key.id,
            env.name,
            when_str(&key.created_at)
        ),
        detail: Some("A revoked key cannot be restored; mint a new one for the workers that still need one.".into()),
        action: format!("/console/environments/{env_id}/keys/{key_id}/revoke"),
        button: "Revoke key".into(),
        cancel: format!("/console/environments/{env_id}"),
    }))
}

pub(crate) async fn revoke(
    State(console): State<Console>,
    Id(env_id): Id<EnvironmentId>,
    Id(key_id): Id<EnvironmentKeyId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Administer)?;
    console.store.revoke_environment_key(&posted.who.workspace, &env_id, &key_id).await?;
    console.hooks.credentials_changed();
    let details = serde_json::json!({ "environment_id": env_id.as_str() });
    record(&console, &posted.who, AuditAction::EnvironmentKeyRevoke, key_id.as_str(), details).await;
    tracing::info!(environment.id = %env_id, environment_key.id = %key_id, by = %posted.who.label(), "revoked environment key in the console");
    Ok(crate::page::see_other(&format!("/console/environments/{env_id}")))
}
