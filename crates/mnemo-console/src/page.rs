//! What every page shares: the layout's data, rendering, redirects, error pages and the
//! security headers of every console response.

use askama::Template;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use mnemo_api::{RequestId, Secret};
use mnemo_http::{BadInput, Refuse};
use mnemo_store::StoreError;

use crate::Console;
use crate::auth::Signed;

/// What an error page needs to know about the request it answers.
struct RequestContext {
    id: Option<RequestId>,
    /// Set once the request proved a signed-in person: their error pages keep the navigation.
    signed: std::cell::RefCell<Option<Chrome>>,
}

tokio::task_local! {
    static REQUEST: RequestContext;
}

/// Remembers who is signed in for this request's error page, if it gets one.
pub(crate) fn remember_signed(chrome: Chrome) {
    let _ = REQUEST.try_with(|r| *r.signed.borrow_mut() = Some(chrome));
}

/// No script but the console's own file, no style but its own sheet, nothing from any other
/// origin, no framing, forms post only here.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Sets the security headers on every console response and makes the request's id (set by the
/// server's request middleware) known to error pages.
pub(crate) async fn headers(req: Request, next: Next) -> Response {
    let context = RequestContext { id: req.extensions().get::<RequestId>().cloned(), signed: Default::default() };
    let mut response = REQUEST.scope(context, next.run(req)).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under the latter a browser sends `Origin: null` with
    // the console's own forms.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

fn request_id() -> Option<String> {
    REQUEST.try_with(|r| r.id.as_ref().map(ToString::to_string)).ok().flatten()
}

fn signed_chrome() -> Chrome {
    REQUEST.try_with(|r| r.signed.borrow().clone()).ok().flatten().unwrap_or_else(Chrome::signed_out)
}

/// Which part of the console a page belongs to (the navigation highlights it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Stores,
    Sessions,
    Dreams,
    Environments,
    ApiKeys,
    RateLimits,
    AuditLog,
    People,
    Members,
    Me,
    Search,
    None,
}

/// The layout's data: who is signed in and the token every form carries.
#[derive(Debug, Clone)]
pub(crate) struct Chrome {
    /// Who is signed in, as the header shows them: the API key's id, or a person's name and
    /// email; `None` on the sign-in page.
    pub(crate) api_key: Option<String>,
    /// The name of the workspace the pages show; `None` on the sign-in page.
    pub(crate) workspace: Option<String>,
    pub(crate) csrf: Secret,
    pub(crate) section: Section,
    /// A person's session (not an API key's): their own page and the workspace switcher.
    pub(crate) person: bool,
    /// The workspaces a person may switch to: (id, name, the one shown); empty unless several.
    pub(crate) workspaces: Vec<(String, String, bool)>,
    /// What the signed-in credential may do here, so pages offer only the controls that work.
    pub(crate) can: Abilities,
}

/// Which controls a page offers (the server checks every action all the same).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Abilities {
    /// Edit, restore, redact memories; create, archive stores; mint environment keys.
    pub(crate) edit: bool,
    /// See session transcripts.
    pub(crate) transcripts: bool,
    /// Mint and change the workspace's API keys.
    pub(crate) api_keys: bool,
    /// Manage the workspace's members; read its audit log.
    pub(crate) manage_workspace: bool,
    /// People, invites, the organization.
    pub(crate) org_admin: bool,
}

impl Chrome {
    pub(crate) fn signed_out() -> Self {
        Self {
            api_key: None,
            workspace: None,
            csrf: Secret::default(),
            section: Section::None,
            person: false,
            workspaces: Vec::new(),
            can: Abilities::default(),
        }
    }

    pub(crate) fn is(&self, section: &str) -> bool {
        matches!(
            (self.section, section),
            (Section::Stores, "stores")
                | (Section::Sessions, "sessions")
                | (Section::Dreams, "dreams")
                | (Section::Environments, "environments")
                | (Section::ApiKeys, "api-keys")
                | (Section::RateLimits, "rate-limits")
                | (Section::AuditLog, "audit-log")
                | (Section::People, "people")
                | (Section::Members, "members")
                | (Section::Me, "me")
                | (Section::Search, "search")
        )
    }
}

/// Renders a page, or the error page if the template fails (it cannot for well-formed data).
pub(crate) fn render(page: &impl Template) -> Response {
    render_with(StatusCode::OK, page)
}

pub(crate) fn render_with(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response(),
        Err(err) => {
            tracing::error!(error = %err, "a console page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be rendered").into_response()
        }
    }
}

/// A redirect after a form (`303 See Other`, so the browser follows with a GET).
pub(crate) fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}

/// Where `/` and `/console/` lead.
pub(crate) async fn to_console() -> Redirect {
    Redirect::permanent("/console")
}

/// A console path nobody serves.
pub(crate) async fn not_found(req: Request) -> PageError {
    PageError::NotFound(format!("there is no console page at {}", req.uri().path()))
}

/// Why the organization's pages (workspaces) refuse a console session of an API key: it acts
/// in its own workspace only (admin-api.md §8.2), as the API refuses that key on
/// `/v1/organizations/workspaces`.
pub(crate) const ORGANIZATION_NEEDS_ADMIN: &str = "the organization's workspaces are managed by an organization admin: \
     with an admin key through the Admin API (`/v1/organizations/workspaces`) or `mnemo workspace`. \
     A sign-in with an API key reaches only its own workspace.";

/// The organization's pages, for a signed-in person: `403` for a session of an API key (the
/// only console sessions there are until people can sign in), after the sign-in check.
pub(crate) async fn organization(_who: Signed) -> PageError {
    PageError::Forbidden(ORGANIZATION_NEEDS_ADMIN.into())
}

/// A console address opened with a method it does not answer. A `GET` of a form's address (a
/// bookmark, or Enter in the address bar after a form) leads to the page that form is on, one
/// level up; anything else is refused in plain words.
pub(crate) async fn method_not_allowed(req: Request) -> Response {
    let path = req.uri().path();
    if req.method() == axum::http::Method::GET || req.method() == axum::http::Method::HEAD {
        let parent = path.trim_end_matches('/').rsplit_once('/').map_or("/console", |(parent, _)| parent);
        let parent = if parent.starts_with("/console") && parent != "/console/stores" { parent } else { "/console" };
        return see_other(parent);
    }
    let mut response =
        PageError::Invalid(format!("{} is not something this console page does", req.method())).into_response();
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

/// Why a console request failed, shown as a page in plain words (with the request's id).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PageError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// The signed-in credential does not reach this page (`403`, as the API answers it).
    #[error("{0}")]
    Forbidden(String),
    #[error("this form has expired or did not come from this console; reload the page and try again")]
    Csrf,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    chrome: Chrome,
    title: &'static str,
    message: String,
    request_id: Option<String>,
}

impl std::fmt::Debug for ErrorPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErrorPage").field("title", &self.title).finish_non_exhaustive()
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, title, message) = match &self {
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "Not found", self.to_string()),
            Self::Invalid(_) => (StatusCode::BAD_REQUEST, "That did not work", self.to_string()),
            Self::Csrf => (StatusCode::FORBIDDEN, "Form refused", self.to_string()),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "Not allowed", self.to_string()),
            Self::Store(err) => store_failure(err),
        };
        let page = ErrorPage { chrome: signed_chrome(), title, message, request_id: request_id() };
        render_with(status, &page)
    }
}

/// A store failure as a status, a heading and the API's own words (internal causes are logged,
/// never shown).
fn store_failure(err: &StoreError) -> (StatusCode, &'static str, String) {
    match err {
        StoreError::NotFound { .. } => (StatusCode::NOT_FOUND, "Not found", err.to_string()),
        StoreError::Coded { code, .. } if code.is_not_found() => (StatusCode::NOT_FOUND, "Not found", err.to_string()),
        StoreError::Retryable(_) | StoreError::Unavailable(_) => {
            tracing::warn!(error = %err.chain(), "console request failed on a transient database error");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again",
                "the database is busy or unavailable right now; reload the page in a moment".to_owned(),
            )
        }
        StoreError::DiskFull(_) => {
            tracing::error!(error = %err.chain(), "console request failed: the database's disk is full");
            (StatusCode::INSUFFICIENT_STORAGE, "Disk full", mnemo_api::DISK_FULL_MESSAGE.to_owned())
        }
        StoreError::Backend(_) => {
            tracing::error!(error = %err.chain(), "console request failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", "internal server error".to_owned())
        }
        StoreError::Forbidden(_) => (StatusCode::FORBIDDEN, "Not allowed", err.to_string()),
        _ => (StatusCode::CONFLICT, "That did not work", err.to_string()),
    }
}

/// The message a refusal shows on the page where it happened (a form shown again).
pub(crate) fn refusal(err: StoreError) -> Result<String, PageError> {
    match err {
        StoreError::NotFound { .. }
        | StoreError::Retryable(_)
        | StoreError::Unavailable(_)
        | StoreError::Backend(_)
        | StoreError::DiskFull(_)
        | StoreError::Forbidden(_) => Err(PageError::Store(err)),
        StoreError::Coded { ref code, .. } if code.is_not_found() => Err(PageError::Store(err)),
        other => Ok(other.to_string()),
    }
}

/// Input the console refuses, in its words: an id that cannot exist is not found, a page link
/// it did not make has expired.
impl From<BadInput> for PageError {
    fn from(bad: BadInput) -> Self {
        match bad {
            BadInput::NotFound { noun, raw, .. } => Self::NotFound(BadInput::not_found_message(noun, &raw)),
            BadInput::Invalid(message) => Self::Invalid(message),
            BadInput::Cursor(_) => {
                Self::Invalid("that page link is not valid any more; start from the first page".into())
            }
            BadInput::Duplicate(name) => Self::Invalid(format!("duplicate field `{name}`")),
            BadInput::Path(rejection) => Self::Invalid(rejection.body_text()),
            BadInput::NoSuchParam(name) => Self::Store(StoreError::backend(std::io::Error::other(format!(
                "the route has no `{{{name}}}` parameter"
            )))),
        }
    }
}

/// How the console shows input it refuses: as its error page, after the sign-in check a page
/// would have made first (someone signed out is sent to sign in, not told what exists). A path
/// that does not decode, or a `page` given twice, is answered in axum's words, as before ids
/// and page links were typed.
impl Refuse for Console {
    type Rejection = Response;

    async fn refuse(&self, parts: &mut Parts, bad: BadInput) -> Response {
        match bad {
            BadInput::Path(rejection) => return rejection.into_response(),
            // As axum's own query extractor answered before `page` was typed.
            BadInput::Duplicate(name) => {
                let text = format!("Failed to deserialize query string: duplicate field `{name}`");
                return (StatusCode::BAD_REQUEST, text).into_response();
            }
            _ => {}
        }
        if let Err(not_signed) = Signed::from_request_parts(parts, self).await {
            return not_signed.into_response();
        }
        PageError::from(bad).into_response()
    }
}
