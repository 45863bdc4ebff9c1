//! Signing in and out, the session cookie, and the CSRF check of every form.
//!
//! Signing in trades an API key for a console session: the server stores the SHA-256 of a fresh
//! random secret, and the browser holds only that secret, in an `HttpOnly`, `SameSite=Strict`
//! cookie scoped to `/console` (`Secure` behind TLS). Every form carries a CSRF token derived
//! from the secret, which a page of another origin can neither read nor compute; a `POST`
//! without the right token, or whose `Origin` is another site's, changes nothing.

use askama::Template;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mnemo_api::{ApiKeyId, Secret};
use mnemo_http::{BadInput, FromQuery, Params, Query};
use mnemo_store::rules::audit::{AuditAction, actor_of};
use mnemo_store::rules::scope::{self, Action, Can, Decision, PersonRole};
use mnemo_store::{Credential, CredentialHash, StoreError};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::Console;
use crate::page::{Abilities, Chrome, PageError, Section, render_with, see_other};

/// The console session's cookie.
const SESSION_COOKIE: &str = "mnemo_console";
/// The sign-in form's own token (double-submitted: cookie and field), so that no other site can
/// sign a browser in with a key of theirs.
pub(crate) const SIGN_IN_COOKIE: &str = "mnemo_console_sign_in";
const SECRET_PREFIX: &str = "mcs_";
/// The prefix of a person's console session secret: the cookie says which kind of session it
/// names, so one lookup finds it.
const PERSON_SECRET_PREFIX: &str = "mps_";

pub(crate) fn hash(secret: &str) -> CredentialHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// The CSRF token of a console session: a keyed digest of its secret.
fn csrf_token(secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"mnemo-console-csrf\0");
    h.update(secret.as_bytes());
    hex::encode(h.finalize())
}

pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// Whether the browser reached us over TLS (directly or through a proxy that says so).
pub(crate) fn over_tls(console: &Console, headers: &HeaderMap) -> bool {
    console.config.secure_cookies
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim().eq_ignore_ascii_case("https")))
}

pub(crate) fn set_cookie(name: &str, value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!("{name}={value}; Path=/console; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}");
    HeaderValue::from_str(&cookie).expect("cookie values are ASCII")
}

/// A signed-in person: the credential they act with — the API key they signed in with, or
/// themselves with their roles in the workspace shown — and their forms' token. What they may
/// do is asked of the one scope decision ([`Signed::allow`]), never assumed.
#[derive(Debug, Clone)]
pub(crate) struct Signed {
    /// An API key (acting as `workspace_developer`, spec §8.2) or a person with their roles.
    pub(crate) credential: Credential,
    /// The workspace every page shows and writes in.
    pub(crate) workspace: mnemo_api::WorkspaceId,
    /// That workspace's name, as the header shows it.
    pub(crate) workspace_name: String,
    /// The person, when it is one.
    pub(crate) person: Option<mnemo_api::User>,
    /// A person's workspaces (id, name) when they have several: the header's switcher.
    pub(crate) workspaces: Vec<(mnemo_api::WorkspaceId, String)>,
    pub(crate) csrf: Secret,
    /// Where the request came from (for the audit log), when the server says.
    pub(crate) peer: Option<IpAddr>,
}

impl Signed {
    pub(crate) fn chrome(&self, section: Section) -> Chrome {
        let shown = match &self.person {
            Some(p) => format!("{} ({})", p.name, p.email),
            None => self.label(),
        };
        Chrome {
            api_key: Some(shown),
            workspace: Some(self.workspace_name.clone()),
            csrf: self.csrf.clone(),
            section,
            person: self.person.is_some(),
            workspaces: self
                .workspaces
                .iter()
                .map(|(id, name)| (id.to_string(), name.clone(), *id == self.workspace))
                .collect(),
            can: self.abilities(),
        }
    }

    /// What the controls of a page may offer, by the roles table (an API key's session acts as
    /// `workspace_developer`).
    fn abilities(&self) -> Abilities {
        let role = match &self.credential {
            Credential::Person { role, .. } => *role,
            _ => PersonRole {
                org: mnemo_api::OrgRole::Developer,
                workspace: mnemo_api::WorkspaceRole::WorkspaceDeveloper,
            },
        };
        Abilities {
            edit: role.can(Can::Edit),
            transcripts: role.can(Can::SeeTranscripts),
            api_keys: role.can(Can::ManageApiKeys),
            manage_workspace: self.person.is_some() && role.can(Can::ManageWorkspace),
            org_admin: self.person.is_some() && role.can(Can::ManageOrganization),
        }
    }

    /// Whether this credential may take `action` here: the scope decision the API makes, its
    /// refusal shown as a `403` page in the same words.
    pub(crate) fn allow(&self, action: Action<'_>) -> Result<(), PageError> {
        match scope::decide(Some(&self.credential), action) {
            Decision::Allow => Ok(()),
            Decision::Forbidden(m) | Decision::Unauthenticated(m) => Err(PageError::Forbidden(m)),
        }
    }

    /// The actor of what they write: their API key, or the person (`user_actor`).
    pub(crate) fn actor(&self) -> mnemo_api::Actor {
        scope::memory_actor(&self.credential).expect("API keys and people are recorded as actors")
    }

    /// The API key they signed in with, for a key's session.
    pub(crate) fn api_key(&self) -> Option<&ApiKeyId> {
        match &self.credential {
            Credential::ApiKey(id) => Some(id),
            _ => None,
        }
    }

    /// Who they are in logs: the key's or the person's id.
    pub(crate) fn label(&self) -> String {
        match &self.credential {
            Credential::ApiKey(id) => id.to_string(),
            Credential::Person { user, .. } => user.to_string(),
            other => format!("{other:?}"),
        }
    }
}

/// The header that ends the session cookie in the browser.
pub(crate) fn clear_session_cookie(secure: bool) -> HeaderValue {
    set_cookie(SESSION_COOKIE, "", 0, secure)
}

/// The workspace a person chose in the header's switcher (not a secret: every request checks
/// it against their memberships).
pub(crate) const WORKSPACE_COOKIE: &str = "mnemo_console_workspace";

/// What a request without a live console session gets.
#[derive(Debug)]
pub(crate) enum NotSignedIn {
    /// A page: sign in first, then come back.
    SignIn {
        next: String,
    },
    Failed(PageError),
}

impl IntoResponse for NotSignedIn {
    fn into_response(self) -> Response {
        match self {
            Self::SignIn { next } if next == "/console" => see_other("/console/sign-in"),
            Self::SignIn { next } => see_other(&format!("/console/sign-in?next={}", encode_component(&next))),
            Self::Failed(err) => err.into_response(),
        }
    }
}

/// A person's live console session and whom it belongs to.
pub(crate) async fn person_of(
    console: &Console,
    headers: &HeaderMap,
) -> Result<Option<mnemo_store::PersonSession>, StoreError> {
    match cookie(headers, SESSION_COOKIE).filter(|s| s.starts_with(PERSON_SECRET_PREFIX)) {
        Some(secret) => console.store.find_person_session(hash(secret)).await,
        None => Ok(None),
    }
}

/// The workspace a person acts in: the one they chose if they still may, else their only one,
/// else the first of theirs.
async fn person_signed(
    console: &Console,
    headers: &HeaderMap,
    user: &mnemo_api::User,
) -> Result<(mnemo_store::Principal, Vec<(mnemo_api::WorkspaceId, String)>), PageError> {
    let theirs = console.store.person_workspaces(&user.id).await?;
    let chosen = cookie(headers, WORKSPACE_COOKIE).and_then(|v| v.parse::<mnemo_api::WorkspaceId>().ok());
    let mut principal = match chosen {
        Some(ws) => match console.store.person_principal(&user.id, Some(&ws)).await {
            Err(StoreError::NotFound { .. }) => None,
            other => Some(other?),
        },
        None => None,
    };
    if principal.is_none() {
        principal = match console.store.person_principal(&user.id, None).await {
            Ok(p) => Some(p),
            Err(StoreError::WorkspaceUnspecified { .. }) => match theirs.first() {
                Some((ws, _)) => Some(console.store.person_principal(&user.id, Some(&ws.id)).await?),
                None => None,
            },
            Err(StoreError::Forbidden(m)) => return Err(PageError::Forbidden(m)),
            Err(e) => return Err(e.into()),
        };
    }
    let principal = principal.ok_or_else(|| PageError::Forbidden(mnemo_store::ops::people::NO_WORKSPACE.into()))?;
    let switcher =
        if theirs.len() > 1 { theirs.into_iter().map(|(w, _)| (w.id, w.name)).collect() } else { Vec::new() };
    Ok((principal, switcher))
}

impl FromRequestParts<Console> for Signed {
    type Rejection = NotSignedIn;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Self::Rejection> {
        let next = parts.uri.path_and_query().map_or("/console", |p| p.as_str()).to_owned();
        let secret = cookie(&parts.headers, SESSION_COOKIE)
            .filter(|s| s.starts_with(SECRET_PREFIX) || s.starts_with(PERSON_SECRET_PREFIX));
        let Some(secret) = secret else {
            return Err(NotSignedIn::SignIn { next });
        };
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        let csrf: Secret = csrf_token(secret).into();
        let (credential, workspace, person, workspaces) = if secret.starts_with(PERSON_SECRET_PREFIX) {
            let session = match person_of(console, &parts.headers).await {
                Ok(Some(session)) => session,
                Ok(None) => return Err(NotSignedIn::SignIn { next }),
                Err(err) => return Err(NotSignedIn::Failed(err.into())),
            };
            let (principal, workspaces) = match person_signed(console, &parts.headers, &session.user).await {
                Ok(found) => found,
                Err(err) => {
                    // Still signed in: the error page keeps the sign-out button and their page.
                    let mut chrome = Chrome::signed_out();
                    chrome.api_key = Some(format!("{} ({})", session.user.name, session.user.email));
                    chrome.csrf = csrf;
                    chrome.person = true;
                    crate::page::remember_signed(chrome);
                    return Err(NotSignedIn::Failed(err));
                }
            };
            let Some(ws) = principal.workspace else {
                return Err(NotSignedIn::Failed(PageError::Forbidden(mnemo_store::ops::people::NO_WORKSPACE.into())));
            };
            (principal.credential, ws, Some(session.user), workspaces)
        } else {
            match console.store.find_console_session(hash(secret)).await {
                Ok(Some(session)) => (Credential::ApiKey(session.api_key), session.workspace, None, Vec::new()),
                Ok(None) => return Err(NotSignedIn::SignIn { next }),
                Err(err) => return Err(NotSignedIn::Failed(err.into())),
            }
        };
        let workspace_name = match console.store.get_workspace(&workspace).await {
            Ok(w) => w.name,
            Err(err) => return Err(NotSignedIn::Failed(err.into())),
        };
        let signed = Self { credential, workspace, workspace_name, person, workspaces, csrf, peer };
        crate::page::remember_signed(signed.chrome(Section::None));
        Ok(signed)
    }
}

/// A form posted by a signed-in person, its CSRF token checked: `T` is the form's other fields.
#[derive(Debug)]
pub(crate) struct Posted<T> {
    pub(crate) who: Signed,
    pub(crate) form: T,
}

#[derive(Deserialize)]
struct CsrfField {
    #[serde(default)]
    csrf: String,
}

/// Refuses a state change that another site sent: by the browser's fetch metadata when it
/// sends it (every current browser does), else by the `Origin`, which must be this host.
pub(crate) fn from_elsewhere(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return !matches!(site, "same-origin" | "none");
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
    !authority.eq_ignore_ascii_case(host)
}

impl<T: serde::de::DeserializeOwned + Send> FromRequest<Console> for Posted<T> {
    type Rejection = NotSignedIn;

    async fn from_request(req: Request, console: &Console) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let who = Signed::from_request_parts(&mut parts, console).await?;
        if parts.method != Method::POST || from_elsewhere(&parts.headers) {
            return Err(NotSignedIn::Failed(PageError::Csrf));
        }
        let bytes = axum::body::to_bytes(body, crate::MAX_FORM_BYTES)
            .await
            .map_err(|_| NotSignedIn::Failed(PageError::Invalid("the form is too large".into())))?;
        let token: CsrfField =
            serde_urlencoded::from_bytes(&bytes).map_err(|_| NotSignedIn::Failed(PageError::Csrf))?;
        if !same(&token.csrf, who.csrf.expose()) {
            return Err(NotSignedIn::Failed(PageError::Csrf));
        }
        let form = serde_urlencoded::from_bytes(&bytes)
            .map_err(|e| NotSignedIn::Failed(PageError::Invalid(format!("the form is incomplete: {e}"))))?;
        Ok(Self { who, form })
    }
}

/// Percent-encodes a URL query component.
pub(crate) fn encode_component(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Only a console path may be a place to return to after signing in.
pub(crate) fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with("/console") && !n.starts_with("//") && !n.contains('\\') => n,
        _ => "/console",
    }
}

#[derive(Debug, Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    chrome: Chrome,
    token: Secret,
    next: String,
    message: Option<String>,
    /// The identity provider's display name, when single sign-on is on: a "Sign in with
    /// {name}" link to `/console/oidc/start`.
    sign_in_with: Option<String>,
    /// Whether the email and password form is shown.
    password_sign_in: bool,
}

impl SignInPage {
    /// Where the single sign-on link goes: the provider's flow, coming back to `next`.
    fn sign_in_with_href(&self) -> String {
        format!("/console/oidc/start?next={}", encode_component(&self.next))
    }
}

/// Where to go once signed in (`next`), as the sign-in redirect names it.
#[derive(Debug)]
pub(crate) struct NextQuery {
    next: Option<String>,
}

impl FromQuery for NextQuery {
    const ONCE: &'static [&'static str] = &["next"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self { next: q.one("next").map(str::to_owned) })
    }
}

pub(crate) fn sign_in_page(console: &Console, headers: &HeaderMap, next: &str, message: Option<String>) -> Response {
    let token = mnemo_api::generate_secret("");
    let status = if message.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
    let page = SignInPage {
        chrome: Chrome::signed_out(),
        token: token.clone().into(),
        next: next.to_owned(),
        message,
        sign_in_with: console.config.oidc_provider_name.clone(),
        password_sign_in: console.config.password_sign_in,
    };
    let mut response = render_with(status, &page);
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, &token, 3600, over_tls(console, headers)));
    response
}

pub(crate) async fn sign_in_form(
    State(console): State<Console>,
    headers: HeaderMap,
    Query(q): Query<NextQuery>,
) -> Response {
    sign_in_page(&console, &headers, safe_next(q.next.as_deref()), None)
}

#[derive(Debug, Deserialize)]
pub(crate) struct SignInForm {
    #[serde(default)]
    api_key: Secret,
    #[serde(default)]
    token: Secret,
    next: Option<String>,
}

/// The sign-in page answering an address over its budget of failed sign-ins: `429` with
/// `retry-after`, whatever the key (it was not looked up, or this failure was one too many).
fn throttled_page(console: &Console, headers: &HeaderMap, next: &str, wait: std::time::Duration) -> Response {
    over_budget_page(console, headers, next, wait, "from this address")
}

/// The `429` sign-in page of a budget of failures (`whose`: "from this address", "for this
/// email") spent: the wait in words and in `retry-after`.
fn over_budget_page(
    console: &Console,
    headers: &HeaderMap,
    next: &str,
    wait: std::time::Duration,
    whose: &str,
) -> Response {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let message = format!("too many failed sign-ins {whose}; wait {secs} seconds and try again");
    let mut response = sign_in_page(console, headers, next, Some(message));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    response
}

/// A failed sign-in: counted against the address, and answered with `message` — or, when that
/// failure was over the address's budget, with the throttled page.
/// Records a console sign-in (or sign-out) in the audit log: `who` is the key presented, when
/// it is a known one (a refused sign-in with an unknown key names the console itself).
async fn audit(
    console: &Console,
    peer: Option<IpAddr>,
    action: AuditAction,
    who: Option<mnemo_api::AuditActor>,
    outcome: mnemo_api::AuditOutcome,
    reason: Option<&str>,
) {
    let actor =
        who.unwrap_or_else(|| mnemo_api::AuditActor { kind: mnemo_api::AuditActorType::System, id: "console".into() });
    let details = reason.map_or_else(|| serde_json::json!({}), |r| serde_json::json!({ "reason": r }));
    let event = mnemo_store::ops::NewAuditEvent {
        action,
        workspace: None,
        actor,
        resource: None,
        client_ip: peer.map(|ip| ip.to_string()),
        outcome,
        details,
    };
    if let Err(e) = console.store.record_audit_event(event).await {
        tracing::error!(error = %e.chain(), %action, "could not record an audit event");
    }
}

/// A refused sign-in: recorded, counted against the address, and the form shown again.
async fn refused(
    console: &Console,
    headers: &HeaderMap,
    peer: Option<IpAddr>,
    next: &str,
    who: Option<&Credential>,
    message: &str,
) -> Response {
    audit(console, peer, AuditAction::SignInFailed, who.map(actor_of), mnemo_api::AuditOutcome::Failure, Some(message))
        .await;
    match console.hooks.sign_in_failed(peer) {
        Ok(()) => sign_in_page(console, headers, next, Some(message.to_owned())),
        Err(wait) => {
            tracing::info!(peer = ?peer, "console sign-in failures over the limit; throttling the address");
            throttled_page(console, headers, next, wait)
        }
    }
}

pub(crate) async fn sign_in(State(console): State<Console>, req: Request) -> Response {
    let headers = req.headers().clone();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let form = match axum::Form::<SignInForm>::from_request(req, &console).await {
        Ok(axum::Form(form)) => form,
        Err(_) => return sign_in_page(&console, &headers, "/console", Some("the sign-in form was incomplete".into())),
    };
    let next = safe_next(form.next.as_deref()).to_owned();
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if from_elsewhere(&headers) || expected.is_empty() || !same(expected, form.token.expose()) {
        return sign_in_page(
            &console,
            &headers,
            &next,
            Some("this sign-in form has expired; enter the API key again".into()),
        );
    }
    let key = form.api_key.expose().trim();
    if key.is_empty() {
        return sign_in_page(&console, &headers, &next, Some("enter an API key to sign in".into()));
    }
    // An address that failed too often is not answered about any key until its wait is over.
    if let Err(wait) = console.hooks.sign_in_allowed(peer) {
        return throttled_page(&console, &headers, &next, wait);
    }
    let found = console.store.resolve_credential(hash(key)).await.map(|p| p.map(|p| p.credential));
    let api_key = match found {
        Ok(Some(Credential::ApiKey(id))) => id,
        Ok(Some(admin @ Credential::AdminKey(_))) => {
            let message = "that is an admin key, which reaches only the Admin API; sign in with an API key";
            return refused(&console, &headers, peer, &next, Some(&admin), message).await;
        }
        // A worker's credential is a real one, but not a person's.
        Ok(Some(
            worker @ (Credential::EnvironmentKey { .. } | Credential::SessionToken { .. } | Credential::Person { .. }),
        )) => {
            let what = match worker {
                Credential::EnvironmentKey { .. } => "an environment key",
                _ => "a session's token",
            };
            let message = format!("that is {what}, which only workers use; sign in with an API key");
            return refused(&console, &headers, peer, &next, Some(&worker), &message).await;
        }
        Ok(None) => {
            tracing::info!("console sign-in refused: unknown key");
            return refused(
                &console,
                &headers,
                peer,
                &next,
                None,
                "that API key is not known to this server (or was revoked); check the key and try again",
            )
            .await;
        }
        Err(err) => return PageError::from(err).into_response(),
    };
    let secret = mnemo_api::generate_secret(SECRET_PREFIX);
    let ttl = console.config.session_ttl.as_secs().max(60);
    if let Err(err) = console.store.create_console_session(hash(&secret), &api_key, ttl).await {
        return match err {
            StoreError::NotFound { .. } => {
                sign_in_page(&console, &headers, &next, Some("that API key was revoked; sign in with another".into()))
            }
            other => PageError::from(other).into_response(),
        };
    }
    let who = Credential::ApiKey(api_key.clone());
    audit(&console, peer, AuditAction::SignIn, Some(actor_of(&who)), mnemo_api::AuditOutcome::Success, None).await;
    tracing::info!(api_key.id = %api_key, "signed in to the console");
    let secure = over_tls(&console, &headers);
    let mut response = see_other(&next);
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, &secret, ttl, secure));
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, "", 0, secure));
    response
}

#[derive(Debug, Deserialize)]
pub(crate) struct PasswordForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: Secret,
    #[serde(default)]
    token: Secret,
    next: Option<String>,
}

/// The one answer to a wrong password and to an email that is no person's: nothing in it, its
/// status or its timing tells which it was.
pub(crate) const WRONG_PASSWORD: &str =
    "that email and password do not match a person of this organization; check both and try again";

/// The account a password sign-in counts against: a digest of the email as typed, normalized
/// when it is one, so every spelling of an address shares one budget, and an address that is
/// nobody's has a budget all the same.
fn account_of(email: &str) -> CredentialHash {
    let normal = mnemo_api::normalize_email(email).unwrap_or_else(|_| email.trim().to_lowercase());
    let mut h = Sha256::new();
    h.update(b"mnemo-console-account\0");
    h.update(normal.as_bytes());
    h.finalize().into()
}

/// The sign-in page answering an account over its budget of failed password sign-ins.
fn account_throttled_page(console: &Console, headers: &HeaderMap, next: &str, wait: std::time::Duration) -> Response {
    over_budget_page(console, headers, next, wait, "for this email")
}

/// Signing in with an email and password. A wrong password and an unknown email get the same
/// answer in about the same time (the password is checked against a dummy hash of the same
/// cost when there is no real one); failures count against the client's address and against
/// the account, and the audit entry of a failure names neither the password nor whether the
/// email belongs to someone.
pub(crate) async fn sign_in_with_password(State(console): State<Console>, req: Request) -> Response {
    let headers = req.headers().clone();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let form = match axum::Form::<PasswordForm>::from_request(req, &console).await {
        Ok(axum::Form(form)) => form,
        Err(_) => return sign_in_page(&console, &headers, "/console", Some("the sign-in form was incomplete".into())),
    };
    let next = safe_next(form.next.as_deref()).to_owned();
    if !console.config.password_sign_in {
        let message = "signing in with a password is turned off on this server";
        return sign_in_page(&console, &headers, &next, Some(message.into()));
    }
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if from_elsewhere(&headers) || expected.is_empty() || !same(expected, form.token.expose()) {
        let message = "this sign-in form has expired; enter your email and password again";
        return sign_in_page(&console, &headers, &next, Some(message.into()));
    }
    if form.email.trim().is_empty() || form.password.expose().is_empty() {
        return sign_in_page(&console, &headers, &next, Some("enter your email and your password to sign in".into()));
    }
    if let Err(wait) = console.hooks.sign_in_allowed(peer) {
        return throttled_page(&console, &headers, &next, wait);
    }
    let account = account_of(&form.email);
    if let Err(wait) = console.hooks.account_sign_in_allowed(&account) {
        return account_throttled_page(&console, &headers, &next, wait);
    }
    let candidate = match console.store.sign_in_candidate(form.email.clone()).await {
        Ok(found) => found,
        Err(err) => return PageError::from(err).into_response(),
    };
    let (person, stored) = match candidate {
        Some((person, stored)) => (Some(person), stored),
        None => (None, None),
    };
    // Always one argon2 check, real or dummy: the time taken says nothing about the email.
    let matches = crate::password::verify(form.password, stored).await;
    match person {
        Some(person) if matches => begin_person_session(&console, &headers, &person.id, &next, peer).await,
        _ => {
            tracing::info!("console password sign-in refused");
            audit(
                &console,
                peer,
                AuditAction::SignInFailed,
                None,
                mnemo_api::AuditOutcome::Failure,
                Some("wrong email or password"),
            )
            .await;
            let over_account = console.hooks.account_sign_in_failed(&account);
            match console.hooks.sign_in_failed(peer) {
                Err(wait) => {
                    tracing::info!(peer = ?peer, "console sign-in failures over the limit; throttling the address");
                    throttled_page(&console, &headers, &next, wait)
                }
                Ok(()) => match over_account {
                    Err(wait) => account_throttled_page(&console, &headers, &next, wait),
                    Ok(()) => sign_in_page(&console, &headers, &next, Some(WRONG_PASSWORD.into())),
                },
            }
        }
    }
}

/// How the audit log names a person.
fn person_actor(user: &mnemo_api::UserId) -> mnemo_api::AuditActor {
    mnemo_api::AuditActor { kind: mnemo_api::AuditActorType::User, id: user.to_string() }
}

/// Signs person `user` in: makes their console session, records the sign-in, sets the session
/// cookie (`SameSite=Strict`, `HttpOnly`, `Path=/console`, `Secure` behind TLS) and redirects
/// to `next`, which the caller has already checked is a console path. Every way a person signs
/// in (their password, the identity provider's callback) ends here, once it has proved who
/// they are. A person removed meanwhile is sent back to the sign-in page.
pub(crate) async fn begin_person_session(
    console: &Console,
    headers: &HeaderMap,
    user: &mnemo_api::UserId,
    next: &str,
    peer: Option<IpAddr>,
) -> Response {
    let secret = mnemo_api::generate_secret(PERSON_SECRET_PREFIX);
    let ttl = console.config.session_ttl.as_secs().max(60);
    if let Err(err) = console.store.create_person_session(hash(&secret), user, ttl).await {
        return match err {
            StoreError::NotFound { .. } => {
                let message = "you are no longer a member of this organization; ask an admin for a new invite";
                sign_in_page(console, headers, next, Some(message.into()))
            }
            other => PageError::from(other).into_response(),
        };
    }
    audit(console, peer, AuditAction::SignIn, Some(person_actor(user)), mnemo_api::AuditOutcome::Success, None).await;
    tracing::info!(user.id = %user, "signed in to the console");
    let secure = over_tls(console, headers);
    let mut response = see_other(next);
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, &secret, ttl, secure));
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, "", 0, secure));
    response
}

/// Signing out: ends the session the cookie names, of either kind. It needs only the cookie
/// and the form's token, not a workspace, so a person who belongs to none can still leave.
pub(crate) async fn sign_out(State(console): State<Console>, req: Request) -> Response {
    let headers = req.headers().clone();
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let secure = over_tls(&console, &headers);
    let Some(secret) = cookie(&headers, SESSION_COOKIE).filter(|s| !s.is_empty()).map(str::to_owned) else {
        return see_other("/console/sign-in");
    };
    let token = match axum::Form::<CsrfField>::from_request(req, &console).await {
        Ok(axum::Form(field)) => field.csrf,
        Err(_) => String::new(),
    };
    if from_elsewhere(&headers) || !same(&token, &csrf_token(&secret)) {
        return PageError::Csrf.into_response();
    }
    let who = if secret.starts_with(PERSON_SECRET_PREFIX) {
        let person = match person_of(&console, &headers).await {
            Ok(found) => found.map(|s| s.user.id),
            Err(err) => return PageError::from(err).into_response(),
        };
        if let Err(err) = console.store.revoke_person_session(hash(&secret)).await {
            return PageError::from(err).into_response();
        }
        person.map(|id| person_actor(&id))
    } else {
        let key = match console.store.find_console_session(hash(&secret)).await {
            Ok(found) => found.map(|s| s.api_key),
            Err(err) => return PageError::from(err).into_response(),
        };
        if let Err(err) = console.store.revoke_console_session(hash(&secret)).await {
            return PageError::from(err).into_response();
        }
        key.map(|k| actor_of(&Credential::ApiKey(k)))
    };
    if let Some(actor) = who {
        tracing::info!(actor.id = %actor.id, "signed out of the console");
        audit(&console, peer, AuditAction::SignOut, Some(actor), mnemo_api::AuditOutcome::Success, None).await;
    }
    let mut response = see_other("/console/sign-in");
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, "", 0, secure));
    response
}

/// The header's workspace switcher: a person picks which of their workspaces the pages show.
#[derive(Debug, Deserialize)]
pub(crate) struct SwitchForm {
    workspace: String,
}

pub(crate) async fn switch_workspace(
    State(console): State<Console>,
    headers: HeaderMap,
    posted: Posted<SwitchForm>,
) -> Response {
    let Some(person) = &posted.who.person else {
        return PageError::Forbidden("a sign-in with an API key works in its key's workspace only".into())
            .into_response();
    };
    let Ok(ws) = posted.form.workspace.parse::<mnemo_api::WorkspaceId>() else {
        return PageError::NotFound(format!("workspace `{}` not found", posted.form.workspace)).into_response();
    };
    // Only a workspace of theirs: any other answers as an unknown one.
    if let Err(err) = console.store.person_principal(&person.id, Some(&ws)).await {
        return PageError::from(err).into_response();
    }
    let mut response = see_other("/console");
    let cookie = set_cookie(WORKSPACE_COOKIE, ws.as_str(), 400 * 86_400, over_tls(&console, &headers));
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// A form with nothing but its CSRF token.
#[derive(Debug, Deserialize)]
pub(crate) struct NoFields {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_in_form_and_page_never_print_the_key_or_the_token() {
        let form: SignInForm =
            serde_urlencoded::from_str("api_key=sk-mnemo-TOPSECRET&token=tok-TOPSECRET&next=%2Fconsole").unwrap();
        assert_eq!(form.api_key.expose(), "sk-mnemo-TOPSECRET");
        let page = SignInPage {
            chrome: Chrome::signed_out(),
            token: "tok-TOPSECRET".into(),
            next: "/console".into(),
            message: None,
            sign_in_with: None,
            password_sign_in: true,
        };
        for printed in [format!("{form:?}"), format!("{page:?}"), format!("{page:#?}")] {
            assert!(!printed.contains("TOPSECRET") && printed.contains("[redacted]"), "{printed}");
        }
        assert!(page.render().unwrap().contains("value=\"tok-TOPSECRET\""), "the page itself carries the token");
    }
}
