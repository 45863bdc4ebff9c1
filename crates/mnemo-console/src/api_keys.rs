//! The workspace's API keys: the list (name, hint, status, when made), minting one (its secret
//! shown on the answering page only, with a copy button), deactivating and reactivating one,
//! and archiving one behind a confirmation.
//!
//! A console session of an API key acts as `workspace_developer` of the key's workspace
//! (admin-api.md §8.2), who may mint, deactivate and archive that workspace's keys (§8.6). A
//! key of another workspace answers exactly like an unknown one. What is done here goes to
//! the audit log as the API's own calls would, with the key's name and status, never its
//! secret.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_api::{
    API_KEY_PREFIX, AdminCursor, AdminPageQuery, ApiKey, ApiKeyId, ApiKeyScope, ApiKeyStatus, ApiKeyUpdate, NewApiKey,
    Secret, generate_secret,
};
use mnemo_http::{BadInput, FromQuery, Id, Params, Query};
use mnemo_store::StoreError;
use mnemo_store::ops::credentials::ListApiKeys;
use mnemo_store::rules::api_key::partial_key_hint;
use mnemo_store::rules::audit::AuditAction;
use serde::Deserialize;

use crate::Console;
use crate::audit_log::record;
use crate::auth::{NoFields, Posted, Signed, encode_component, hash};
use crate::page::{Chrome, PageError, Section, refusal, render, render_with, see_other};
use crate::stores::ConfirmPage;
use crate::text::when;
use mnemo_store::rules::scope::{Action, WorkspaceOp};

/// Keys per page of the list.
const PAGE: u32 = 50;

#[derive(Debug)]
pub(crate) struct KeyRow {
    id: String,
    name: String,
    hint: String,
    status: &'static str,
    created: String,
    expires: String,
    /// The key this console session signed in with.
    current: bool,
}

impl KeyRow {
    fn of(key: &ApiKey, who: &Signed) -> Self {
        Self {
            id: key.id.to_string(),
            name: key.name.clone(),
            hint: key.partial_key_hint.clone().unwrap_or_default(),
            status: key.status.as_str(),
            created: when(&key.created_at),
            expires: key.expires_at.as_ref().map(when).unwrap_or_default(),
            current: who.api_key() == Some(&key.id),
        }
    }

    /// Active or deactivated: the statuses a person can still change.
    fn changeable(&self) -> bool {
        matches!(self.status, "active" | "inactive")
    }
}

/// A key just minted: its secret is on this one page and nowhere else.
#[derive(Debug)]
pub(crate) struct Minted {
    id: String,
    name: String,
    secret: Secret,
}

#[derive(Debug, Template)]
#[template(path = "api_keys.html")]
struct KeysPage {
    chrome: Chrome,
    workspace: String,
    rows: Vec<KeyRow>,
    next: Option<String>,
    first_page: bool,
    minted: Option<Minted>,
    /// The mint form's name, kept when it was refused.
    name: String,
    message: Option<String>,
}

/// The list's page link (`after`: the last key of the previous page).
#[derive(Debug)]
pub(crate) struct KeysQuery {
    after: Option<String>,
}

impl FromQuery for KeysQuery {
    const ONCE: &'static [&'static str] = &["after"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self { after: q.one("after").filter(|a| !a.is_empty()).map(str::to_owned) })
    }
}

struct Shown {
    minted: Option<Minted>,
    name: String,
    message: Option<String>,
}

async fn keys_page(
    console: &Console,
    who: &Signed,
    after: Option<String>,
    shown: Shown,
) -> Result<Response, PageError> {
    let first_page = after.is_none();
    let cursor = after.map_or(AdminCursor::Start, AdminCursor::After);
    let page = console
        .store
        .list_api_keys(ListApiKeys {
            status: None,
            workspace: Some(who.workspace.clone()),
            created_by_user_id: None,
            page: AdminPageQuery { limit: PAGE, cursor },
        })
        .await?;
    let rows = page.data.iter().map(|k| KeyRow::of(k, who)).collect();
    let next = page
        .last_id
        .filter(|_| page.has_more)
        .map(|last| format!("/console/api-keys?after={}", encode_component(&last)));
    let status = if shown.message.is_some() { axum::http::StatusCode::BAD_REQUEST } else { axum::http::StatusCode::OK };
    let mut response = render_with(
        status,
        &KeysPage {
            chrome: who.chrome(Section::ApiKeys),
            workspace: who.workspace_name.clone(),
            rows,
            next,
            first_page,
            minted: shown.minted,
            name: shown.name,
            message: shown.message,
        },
    );
    response.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(response)
}

pub(crate) async fn list(
    State(console): State<Console>,
    who: Signed,
    Query(q): Query<KeysQuery>,
) -> Result<Response, PageError> {
    keys_page(&console, &who, q.after, Shown { minted: None, name: String::new(), message: None }).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct MintForm {
    #[serde(default)]
    name: String,
    /// The last UTC day the key works (`YYYY-MM-DD`), or empty for a key that never expires.
    #[serde(default)]
    expires: String,
}

/// When a key whose last day is `day` (`YYYY-MM-DD`, UTC) expires: the start of the next day;
/// `None` for an empty field.
fn expiry(day: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, String> {
    let day = day.trim();
    if day.is_empty() {
        return Ok(None);
    }
    chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.succ_opt())
        .map(|next| Some(next.and_time(chrono::NaiveTime::MIN).and_utc()))
        .ok_or_else(|| {
            format!("the last day must be written YYYY-MM-DD (got `{}`)", day.chars().take(40).collect::<String>())
        })
}

/// Mints a key in the signed-in workspace and shows its secret on the answer to this `POST`
/// only: the store keeps its hash and hint, and reloading the page does not show it again.
pub(crate) async fn mint(State(console): State<Console>, posted: Posted<MintForm>) -> Result<Response, PageError> {
    posted.who.allow(Action::Workspace(WorkspaceOp::ApiKeys))?;
    let who = &posted.who;
    let name = posted.form.name.trim().to_owned();
    let refused = |message: String| Shown { minted: None, name: name.clone(), message: Some(message) };
    let expires_at = match expiry(&posted.form.expires) {
        Ok(at) => at,
        Err(message) => return keys_page(&console, who, None, refused(message)).await,
    };
    let new = NewApiKey { name: name.clone(), workspace_id: who.workspace.clone(), expires_at };
    if let Err(invalid) = new.validate(chrono::Utc::now()) {
        return keys_page(&console, who, None, refused(invalid.0)).await;
    }
    let secret = generate_secret(API_KEY_PREFIX);
    let hint = partial_key_hint(&secret);
    // A person's key names them as its maker (`created_by`, spec §8.4); a key's session, nobody.
    let creator = match &who.credential {
        mnemo_store::Credential::Person { user, .. } => Some(user.to_string()),
        _ => None,
    };
    let key = match console.store.create_api_key(new, hash(&secret), &hint, creator.as_deref()).await {
        Ok(key) => key,
        Err(err) => return keys_page(&console, who, None, refused(refusal(err)?)).await,
    };
    let details = match key.expires_at {
        Some(at) => serde_json::json!({ "name": key.name, "expires_at": at }),
        None => serde_json::json!({ "name": key.name }),
    };
    record(&console, who, AuditAction::ApiKeyCreate, key.id.as_str(), details).await;
    tracing::info!(api_key.id = %key.id, by = %who.label(), "minted API key in the console");
    let minted = Minted { id: key.id.to_string(), name: key.name, secret: secret.into() };
    keys_page(&console, who, None, Shown { minted: Some(minted), name: String::new(), message: None }).await
}

/// The key `id` of the signed-in workspace; another workspace's answers as an unknown one.
async fn own_key(console: &Console, who: &Signed, id: &ApiKeyId) -> Result<ApiKey, PageError> {
    let key = console.store.get_api_key(id).await?;
    match &key.scope {
        ApiKeyScope::Workspace { workspace_id } if *workspace_id == who.workspace => Ok(key),
        _ => Err(StoreError::not_found("API key", id).into()),
    }
}

/// Sets a key's status, tells the server when it stopped authenticating, and records it.
async fn set_status(
    console: &Console,
    who: &Signed,
    id: &ApiKeyId,
    status: ApiKeyStatus,
) -> Result<Response, PageError> {
    own_key(console, who, id).await?;
    let update = ApiKeyUpdate { name: None, status: Some(status) };
    let (key, revoked) = console.store.update_api_key(id, update).await?;
    if revoked {
        // Cached lookups must not outlive the key, here or on another replica.
        console.hooks.credentials_changed();
    }
    record(console, who, AuditAction::ApiKeyUpdate, id.as_str(), serde_json::json!({ "status": key.status.as_str() }))
        .await;
    tracing::info!(api_key.id = %id, status = %key.status, by = %who.label(), "changed API key status in the console");
    Ok(see_other("/console/api-keys"))
}

pub(crate) async fn deactivate(
    State(console): State<Console>,
    Id(id): Id<ApiKeyId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Workspace(WorkspaceOp::ApiKeys))?;
    set_status(&console, &posted.who, &id, ApiKeyStatus::Inactive).await
}

pub(crate) async fn activate(
    State(console): State<Console>,
    Id(id): Id<ApiKeyId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Workspace(WorkspaceOp::ApiKeys))?;
    set_status(&console, &posted.who, &id, ApiKeyStatus::Active).await
}

pub(crate) async fn archive_confirm(
    State(console): State<Console>,
    who: Signed,
    Id(id): Id<ApiKeyId>,
) -> Result<Response, PageError> {
    who.allow(Action::Workspace(WorkspaceOp::ApiKeys))?;
    let key = own_key(&console, &who, &id).await?;
    let yours = if who.api_key() == Some(&key.id) {
        " This is the key you signed in with: archiving it signs you out."
    } else {
        ""
    };
    Ok(render(&ConfirmPage {
        chrome: who.chrome(Section::ApiKeys),
        title: "Archive this API key?".into(),
        message: format!(
            "Archive “{}” ({})? Every client using it is refused at once, on every replica.{yours}",
            key.name, key.id
        ),
        detail: Some(
            "Archiving cannot be undone: an archived key never works again. To pause a key, deactivate it instead."
                .into(),
        ),
        action: format!("/console/api-keys/{}/archive", key.id),
        button: "Archive key".into(),
        cancel: "/console/api-keys".into(),
    }))
}

pub(crate) async fn archive(
    State(console): State<Console>,
    Id(id): Id<ApiKeyId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Workspace(WorkspaceOp::ApiKeys))?;
    set_status(&console, &posted.who, &id, ApiKeyStatus::Archived).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_keys_page_never_prints_the_secret_in_its_debug_form() {
        let minted = Minted { id: "apikey_1".into(), name: "ci".into(), secret: "sk-mnemo-TOPSECRET".into() };
        let printed = format!("{minted:?}");
        assert!(!printed.contains("TOPSECRET") && printed.contains("[redacted]"), "{printed}");
    }

    #[test]
    fn a_keys_last_day_is_a_whole_utc_day() {
        let cases = [
            ("", Ok(None)),
            ("  ", Ok(None)),
            ("2026-12-31", Ok(Some("2027-01-01T00:00:00Z"))),
            ("2028-02-28", Ok(Some("2028-02-29T00:00:00Z"))),
            ("31/12/2026", Err(())),
            ("tomorrow", Err(())),
        ];
        for (raw, want) in cases {
            let got =
                expiry(raw).map(|t| t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))).map_err(|_| ());
            assert_eq!(got, want.map(|t| t.map(str::to_owned)), "{raw}");
        }
    }
}
