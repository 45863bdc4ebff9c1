//! Single sign-on with the organization's OpenID Provider (issue 33 item 3):
//! `GET /console/oidc/start` sends the browser to the provider, `GET /console/oidc/callback`
//! takes it back, redeems the code, validates the ID token ([`mnemo_oidc`]), sets the person's
//! roles from their groups ([`sign_in_person`]) and ends at `auth::begin_person_session`.
//!
//! The sign-in's own secrets (state, nonce, PKCE verifier, where to go next) stay on the server,
//! keyed by a random id in the `mnemo_oidc` cookie. That cookie is `SameSite=Lax`: the provider's
//! redirect back is a cross-site top-level navigation, on which a browser withholds `Strict`
//! cookies; it holds nothing but the id, and is scoped to `/console/oidc` for ten minutes. The
//! console session cookie set at the end stays `Strict`. An entry is taken out at the first
//! callback that names it, so a callback (and its code) is used once; a `state` that differs from
//! the entry's is refused. With several replicas, route `/console/oidc/` of one browser to one
//! replica (or let the sign-in be retried): the entries are in memory.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mnemo_api::{AuditActor, AuditActorType, AuditOutcome, AuditResource, WorkspaceId};
use mnemo_oidc::{Claims, Provider, SignIn};
use mnemo_store::ops::sso::{RoleChange, SsoIdentity, SsoSignIn};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::sso::{self, RoleMapping};
use mnemo_store::{Store, StoreError};
use serde::Deserialize;
use serde_json::json;

use crate::Console;
use crate::auth::{over_tls, safe_next};

/// The cookie naming a sign-in in progress.
const FLOW_COOKIE: &str = "mnemo_oidc";
/// How long a sign-in may stay at the provider.
const FLOW_TTL: Duration = Duration::from_secs(600);
/// Most sign-ins in progress at once; more are refused until some finish or expire, so a flood
/// of `/start` requests cannot grow memory without bound.
const MAX_PENDING: usize = 10_000;

/// Single sign-on as `mnemo serve` configured it.
#[derive(Debug)]
pub struct Sso {
    pub provider: Provider,
    /// `--oidc-role`, workspaces resolved to ids.
    pub mappings: Vec<RoleMapping<WorkspaceId>>,
    /// `--oidc-groups-claim`.
    pub groups_claim: String,
    /// `--oidc-provider-name`: "Sign in with {name}".
    pub provider_name: String,
    /// `<public url>/console/oidc/callback`, registered at the provider.
    pub callback_url: String,
    pending: Mutex<HashMap<String, Pending>>,
}

#[derive(Debug)]
struct Pending {
    sign_in: SignIn,
    next: String,
    at: Instant,
}

/// Why a person was not signed in: a sentence for them, or the store failing.
#[derive(Debug)]
pub enum Refused {
    /// Shown to the person as it is.
    Plain(String),
    Store(StoreError),
}

impl Sso {
    pub fn new(
        provider: Provider,
        mappings: Vec<RoleMapping<WorkspaceId>>,
        groups_claim: String,
        provider_name: String,
        callback_url: String,
    ) -> Self {
        Self { provider, mappings, groups_claim, provider_name, callback_url, pending: Mutex::default() }
    }

    fn remember(&self, id: String, pending: Pending) -> bool {
        let mut map = self.pending.lock().expect("sign-ins poisoned");
        map.retain(|_, p| p.at.elapsed() < FLOW_TTL);
        if map.len() >= MAX_PENDING {
            return false;
        }
        map.insert(id, pending);
        true
    }

    fn take(&self, id: &str) -> Option<Pending> {
        let found = self.pending.lock().expect("sign-ins poisoned").remove(id)?;
        (found.at.elapsed() < FLOW_TTL).then_some(found)
    }
}

/// How the audit log names changes single sign-on makes.
fn sso_actor() -> AuditActor {
    AuditActor { kind: AuditActorType::System, id: "sso".into() }
}

/// An audit entry of single sign-on (actor `system`/`sso`).
fn sso_event(
    action: AuditAction,
    workspace: Option<WorkspaceId>,
    resource: Option<AuditResource>,
    peer: Option<IpAddr>,
    outcome: AuditOutcome,
    details: serde_json::Value,
) -> mnemo_store::ops::NewAuditEvent {
    mnemo_store::ops::NewAuditEvent {
        action,
        workspace,
        actor: sso_actor(),
        resource,
        client_ip: peer.map(|p| p.to_string()),
        outcome,
        details,
    }
}

/// Records an audit entry, logging (not failing) when it cannot be written.
async fn record(store: &dyn Store, event: mnemo_store::ops::NewAuditEvent) {
    if let Err(e) = store.record_audit_event(event).await {
        tracing::warn!(error = %e, "could not record an audit entry of single sign-on");
    }
}

/// Records a failed single sign-on: `reason` is one of a few fixed words, never a token.
pub async fn record_failure(store: &dyn Store, peer: Option<IpAddr>, reason: &str) {
    let details = json!({"method": "oidc", "reason": reason});
    record(store, sso_event(AuditAction::SignInFailed, None, None, peer, AuditOutcome::Failure, details)).await;
}

/// Signs in the person `claims` describe (validated by the caller): their groups' grants, or a
/// refusal when none of their groups is mapped; the person created or updated with exactly
/// those roles; every role change recorded in the audit log. Both the console's callback and the
/// API's bearer tokens use it.
pub async fn sign_in_person(
    store: &dyn Store,
    sso: &Sso,
    claims: &Claims,
    peer: Option<IpAddr>,
) -> Result<SsoSignIn, Refused> {
    let groups = claims.groups(&sso.groups_claim);
    let identity = SsoIdentity {
        issuer: claims.issuer.clone(),
        subject: claims.subject.clone(),
        // An address the provider says it has not verified is not trusted to name anyone.
        email: claims.email.clone().filter(|_| claims.email_verified != Some(false)),
        name: claims.name.clone(),
    };
    let Some(grants) = sso::grants(&sso.mappings, &groups) else {
        // Someone who had roles and is now in no mapped group loses them all, and their console
        // sessions end: the provider took their access away.
        match store.sso_person(identity.issuer.clone(), identity.subject.clone()).await {
            Ok(Some((user, _))) => {
                let none = sso::Grants { org_role: mnemo_api::OrgRole::User, workspaces: Default::default() };
                match store.sso_sign_in(identity, none).await {
                    Ok(done) => record_changes(store, &done, peer).await,
                    Err(e) => tracing::warn!(error = %e, "could not take the roles of a person in no mapped group"),
                }
                if let Err(e) = store.sign_out_user(&user.id).await {
                    tracing::warn!(error = %e, "could not end the console sessions of a person in no mapped group");
                }
            }
            Ok(None) => {}
            Err(e) => return Err(Refused::Store(e)),
        }
        record_failure(store, peer, "no mapped group").await;
        return Err(Refused::Plain(sso::NO_MAPPED_GROUP.into()));
    };
    let done = match store.sso_sign_in(identity, grants).await {
        Ok(done) => done,
        Err(StoreError::Forbidden(message)) => {
            record_failure(store, peer, "refused").await;
            return Err(Refused::Plain(message));
        }
        Err(e) => return Err(Refused::Store(e)),
    };
    if done.created {
        tracing::info!(user.id = %done.user.id, "single sign-on created a person");
    }
    record_changes(store, &done, peer).await;
    Ok(done)
}

/// Records in the audit log every role change a sign-in made.
async fn record_changes(store: &dyn Store, done: &SsoSignIn, peer: Option<IpAddr>) {
    let user = done.user.id.to_string();
    let person = || Some(AuditResource { kind: "user".into(), id: user.clone() });
    for change in &done.changes {
        match change {
            RoleChange::Org { from, to } => {
                let details = json!({"role": to.as_str(), "previous_role": from.as_str(), "via": "oidc"});
                let event = sso_event(AuditAction::UserUpdate, None, person(), peer, AuditOutcome::Success, details);
                record(store, event).await;
            }
            RoleChange::Member { workspace, from, to } => {
                let action = match (from, to) {
                    (None, _) => AuditAction::WorkspaceMemberAdd,
                    (_, None) => AuditAction::WorkspaceMemberRemove,
                    _ => AuditAction::WorkspaceMemberUpdate,
                };
                let details = json!({
                    "user_id": user,
                    "workspace_role": to.map(|r| r.as_str()),
                    "previous_workspace_role": from.map(|r| r.as_str()),
                    "via": "oidc",
                });
                let resource = Some(AuditResource { kind: "workspace_member".into(), id: user.clone() });
                let event = sso_event(action, Some(workspace.clone()), resource, peer, AuditOutcome::Success, details);
                record(store, event).await;
            }
        }
    }
}

fn flow_cookie(value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    // Lax, not Strict: it must come back with the provider's cross-site redirect.
    let cookie =
        format!("{FLOW_COOKIE}={value}; Path=/console/oidc; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}");
    HeaderValue::from_str(&cookie).expect("cookie values are ASCII")
}

#[derive(Debug, Deserialize)]
pub(crate) struct StartQuery {
    next: Option<String>,
}

/// `GET /console/oidc/start?next=…`: to the provider's sign-in page.
pub(crate) async fn start(State(console): State<Console>, headers: HeaderMap, Query(q): Query<StartQuery>) -> Response {
    let Some(sso) = console.config.oidc.as_deref() else { return StatusCode::NOT_FOUND.into_response() };
    let next = safe_next(q.next.as_deref()).to_owned();
    let (url, sign_in) = sso.provider.begin(&sso.callback_url);
    let id = mnemo_api::generate_secret("");
    if !sso.remember(id.clone(), Pending { sign_in, next, at: Instant::now() }) {
        let mut response =
            (StatusCode::SERVICE_UNAVAILABLE, "too many sign-ins are in progress; try again in a minute")
                .into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
        return response;
    }
    let mut response = crate::page::see_other(url.as_str());
    response
        .headers_mut()
        .append(header::SET_COOKIE, flow_cookie(&id, FLOW_TTL.as_secs(), over_tls(&console, &headers)));
    response
}

#[derive(Debug, Deserialize)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /console/oidc/callback?code=…&state=…`: back from the provider.
pub(crate) async fn callback(State(console): State<Console>, req: axum::extract::Request) -> Response {
    let Some(sso) = console.config.oidc.as_deref() else { return StatusCode::NOT_FOUND.into_response() };
    let headers = req.headers().clone();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let q: CallbackQuery = serde_urlencoded::from_str(req.uri().query().unwrap_or_default()).unwrap_or(CallbackQuery {
        code: None,
        state: None,
        error: None,
    });
    let secure = over_tls(&console, &headers);
    let pending = crate::auth::cookie(&headers, FLOW_COOKIE).and_then(|id| sso.take(id));
    let response = match pending {
        None => {
            record_failure(&*console.store, peer, "unknown or used sign-in").await;
            refuse(&console, &headers, "/console", "This sign-in has expired or was already used. Sign in again.")
        }
        Some(pending) => finish(&console, sso, &headers, peer, pending, q).await,
    };
    let mut response = response;
    response.headers_mut().append(header::SET_COOKIE, flow_cookie("", 0, secure));
    response
}

async fn finish(
    console: &Console,
    sso: &Sso,
    headers: &HeaderMap,
    peer: Option<IpAddr>,
    pending: Pending,
    q: CallbackQuery,
) -> Response {
    let next = pending.next.as_str();
    if let Some(error) = q.error {
        // The provider's error code, cut to its alphabet; its description is not shown.
        let code: String = error.chars().filter(|c| c.is_ascii_lowercase() || *c == '_').take(40).collect();
        record_failure(&*console.store, peer, "provider refused").await;
        let message = format!("{} did not sign you in ({code}). Try again.", sso.provider_name);
        return refuse(console, headers, next, &message);
    }
    let (Some(code), Some(state)) = (q.code, q.state) else {
        record_failure(&*console.store, peer, "incomplete callback").await;
        return refuse(console, headers, next, "The identity provider's answer was incomplete. Sign in again.");
    };
    if !pending.sign_in.state_matches(&state) {
        tracing::info!("single sign-on callback with a mismatched state refused");
        record_failure(&*console.store, peer, "mismatched state").await;
        return refuse(
            console,
            headers,
            next,
            "This sign-in does not match the one this browser started. Sign in again.",
        );
    }
    let claims = match sso.provider.finish(&pending.sign_in, &code, &sso.callback_url).await {
        Ok(claims) => claims,
        Err(e) => {
            tracing::warn!(error = %e, "single sign-on failed");
            record_failure(&*console.store, peer, "token refused").await;
            let message = format!("The answer of {} could not be verified. Sign in again.", sso.provider_name);
            return refuse(console, headers, next, &message);
        }
    };
    match sign_in_person(&*console.store, sso, &claims, peer).await {
        Ok(done) => land(crate::auth::begin_person_session(console, headers, &done.user.id, next, peer).await),
        Err(Refused::Plain(message)) => refuse(console, headers, next, &message),
        Err(Refused::Store(e)) => crate::page::PageError::from(e).into_response(),
    }
}

/// The end of a sign-in, made a page of our own rather than a redirect. The request that reached
/// the callback is a cross-site navigation (it came from the provider), and a browser judges the
/// redirects that follow it as cross-site too, so it would withhold the `SameSite=Strict`
/// session cookie just set from the redirect to `next`. A page that refreshes to `next` starts a
/// navigation of its own, from this site, which carries it. No script is needed (a `meta`
/// refresh, and a link); the callback's URL, which holds the code, is not sent on as a referrer.
fn land(response: Response) -> Response {
    if !response.status().is_redirection() {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    let to = parts.headers.remove(header::LOCATION).and_then(|v| v.to_str().ok().map(str::to_owned));
    let to = to.unwrap_or_else(|| "/console".into());
    let to: String = to
        .chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '"' => "&quot;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect();
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={to}\">\
         <title>Signed in</title></head><body><p>Signed in. <a href=\"{to}\">Continue to the console</a>.</p></body></html>"
    );
    parts.status = StatusCode::OK;
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    parts.headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    parts.headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// The sign-in page with `message`, as a refusal (403).
fn refuse(console: &Console, headers: &HeaderMap, next: &str, message: &str) -> Response {
    let mut response = crate::auth::sign_in_page(console, headers, next, Some(message.to_owned()));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_in_ends_on_a_page_of_this_site_that_keeps_the_session_cookie() {
        let mut redirect = crate::page::see_other("/console/stores?x=1&y=\"<2>");
        redirect.headers_mut().append(header::SET_COOKIE, HeaderValue::from_static("mnemo_console=s; SameSite=Strict"));
        let page = land(redirect);
        assert_eq!(page.status(), StatusCode::OK);
        assert!(page.headers().get(header::LOCATION).is_none());
        assert_eq!(page.headers()[header::SET_COOKIE], "mnemo_console=s; SameSite=Strict");
        assert_eq!(page.headers()[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(page.headers()[header::CACHE_CONTROL], "no-store");
        // A refusal (the sign-in page) passes through unchanged.
        let refusal = (StatusCode::FORBIDDEN, "no").into_response();
        assert_eq!(land(refusal).status(), StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn the_page_escapes_where_it_goes() {
        let page = land(crate::page::see_other("/console/x?a=1&b=\"<s>"));
        let body = axum::body::to_bytes(page.into_body(), 10_000).await.unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.contains("url=/console/x?a=1&amp;b=&quot;&lt;s&gt;"), "{body}");
        assert!(!body.contains("<s>"));
    }

    #[test]
    fn the_flow_cookie_survives_the_providers_redirect_and_nothing_else() {
        let cookie = flow_cookie("abc", 600, true);
        let cookie = cookie.to_str().unwrap();
        for part in ["mnemo_oidc=abc", "Path=/console/oidc", "Max-Age=600", "HttpOnly", "SameSite=Lax", "Secure"] {
            assert!(cookie.contains(part), "{cookie}");
        }
    }
}
