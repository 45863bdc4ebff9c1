//! Joining the organization: the page behind an invite's `accept_url` (`/console/invite/<secret>`)
//! and the one-time setup link of a first start (`/console/setup/<secret>`, admin-api.md §8.3).
//!
//! Each lets a person choose their name and password (and, for the setup link, their email); the
//! password is hashed here with argon2id ([`crate::password`]) and only the hash reaches the
//! store. A link that cannot be used — unknown, used, expired, deleted — answers one page, so the
//! page tells a guesser nothing; failed attempts count against the address like failed sign-ins.
//! The form is guarded like the sign-in form: a double-submitted token and the request's origin.

use askama::Template;
use axum::extract::{ConnectInfo, FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mnemo_api::{AuditActor, AuditActorType, AuditOutcome, MIN_PASSWORD_CHARS, Secret, User};
use mnemo_store::StoreError;
use mnemo_store::ops::people::Joining;
use mnemo_store::rules::audit::AuditAction;
use serde::Deserialize;

use crate::Console;
use crate::auth::{SIGN_IN_COOKIE, cookie, from_elsewhere, hash, over_tls, same, set_cookie};
use crate::page::{Chrome, PageError, render_with};

/// Which link a page is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Invite,
    Setup,
}

const INVALID_INVITE: &str = "this invite link is no longer valid; ask an admin for a new invite";

#[derive(Debug, Template)]
#[template(path = "join.html")]
struct JoinPage {
    chrome: Chrome,
    heading: &'static str,
    intro: String,
    action: String,
    button: &'static str,
    /// The invite's email (fixed); `None`: the person types theirs (setup link).
    email: Option<String>,
    usable: bool,
    token: Secret,
    min_password: usize,
    message: Option<String>,
}

#[derive(Debug, Template)]
#[template(path = "joined.html")]
struct JoinedPage {
    chrome: Chrome,
    name: String,
    email: String,
    role: String,
}

/// The link's page: the form when the link is usable, else why not.
async fn page(console: &Console, headers: &HeaderMap, link: Link, secret: &str, message: Option<String>) -> Response {
    let (usable, email, intro) = match link {
        Link::Invite => match console.store.invite_by_link(hash(secret)).await {
            Ok(Some(invite)) if invite.status == mnemo_api::InviteStatus::Pending => {
                let intro = format!(
                    "You are invited to join this mnemo organization as {}. Choose your name and a password.",
                    invite.role
                );
                (true, Some(invite.email), intro)
            }
            Ok(_) => (false, None, String::new()),
            Err(err) => return PageError::from(err).into_response(),
        },
        Link::Setup => match console.store.setup_link_usable(hash(secret)).await {
            Ok(usable) => (
                usable,
                None,
                "This link makes you the first admin of this mnemo organization. Choose your email, name and password."
                    .to_owned(),
            ),
            Err(err) => return PageError::from(err).into_response(),
        },
    };
    let message = message.or_else(|| {
        (!usable).then(|| match link {
            Link::Invite => INVALID_INVITE.to_owned(),
            Link::Setup => mnemo_store::rules::people::SETUP_LINK_INVALID.to_owned(),
        })
    });
    let token = mnemo_api::generate_secret("");
    let (heading, button, path) = match link {
        Link::Invite => ("Join mnemo", "Join", "invite"),
        Link::Setup => ("Set up mnemo", "Create the admin", "setup"),
    };
    let status = match (usable, &message) {
        (false, _) => StatusCode::NOT_FOUND,
        (true, Some(_)) => StatusCode::BAD_REQUEST,
        (true, None) => StatusCode::OK,
    };
    let page = JoinPage {
        chrome: Chrome::signed_out(),
        heading,
        intro,
        action: format!("/console/{path}/{secret}"),
        button,
        email,
        usable,
        token: token.clone().into(),
        min_password: MIN_PASSWORD_CHARS,
        message,
    };
    let mut response = render_with(status, &page);
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, &token, 3600, over_tls(console, headers)));
    response
}

pub(crate) async fn invite_form(
    State(console): State<Console>,
    headers: HeaderMap,
    Path(secret): Path<String>,
) -> Response {
    page(&console, &headers, Link::Invite, &secret, None).await
}

pub(crate) async fn setup_form(
    State(console): State<Console>,
    headers: HeaderMap,
    Path(secret): Path<String>,
) -> Response {
    page(&console, &headers, Link::Setup, &secret, None).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct JoinForm {
    #[serde(default)]
    token: Secret,
    #[serde(default)]
    email: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: Secret,
    #[serde(default)]
    password_again: Secret,
}

pub(crate) async fn accept_invite(
    State(console): State<Console>,
    Path(secret): Path<String>,
    req: Request,
) -> Response {
    join(console, Link::Invite, secret, req).await
}

pub(crate) async fn use_setup_link(
    State(console): State<Console>,
    Path(secret): Path<String>,
    req: Request,
) -> Response {
    join(console, Link::Setup, secret, req).await
}

/// What the form asks of the password, before it is hashed.
fn check_password(form: &JoinForm) -> Result<(), String> {
    mnemo_api::validate_password(form.password.expose()).map_err(|e| e.0)?;
    if !same(form.password.expose(), form.password_again.expose()) {
        return Err("the two passwords differ; type the same password twice".into());
    }
    Ok(())
}

async fn join(console: Console, link: Link, secret: String, req: Request) -> Response {
    let headers = req.headers().clone();
    let peer = req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let form = match axum::Form::<JoinForm>::from_request(req, &console).await {
        Ok(axum::Form(form)) => form,
        Err(_) => return page(&console, &headers, link, &secret, Some("the form was incomplete".into())).await,
    };
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if from_elsewhere(&headers) || expected.is_empty() || !same(expected, form.token.expose()) {
        return page(&console, &headers, link, &secret, Some("this form has expired; fill it in again".into())).await;
    }
    if let Err(wait) = console.hooks.sign_in_allowed(peer) {
        let secs = wait.as_secs().max(1);
        let message = format!("too many failed attempts from this address; wait {secs} seconds and try again");
        let mut response = page(&console, &headers, link, &secret, Some(message)).await;
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        return response;
    }
    if let Err(message) = check_password(&form) {
        return page(&console, &headers, link, &secret, Some(message)).await;
    }
    let password_hash = match crate::password::hash(form.password).await {
        Ok(h) => h,
        Err(err) => {
            tracing::error!(error = %err, "could not hash a new password");
            return PageError::from(StoreError::backend(err)).into_response();
        }
    };
    let joining = Joining { name: form.name, password_hash };
    let joined = match link {
        Link::Invite => console.store.accept_invite(hash(&secret), joining).await,
        Link::Setup => console.store.use_setup_link(hash(&secret), form.email, joining).await,
    };
    let user = match joined {
        Ok(user) => user,
        Err(StoreError::Invalid(message) | StoreError::Coded { message, .. }) => {
            // An unusable link counts like a failed sign-in: links are not to be guessed.
            let _ = console.hooks.sign_in_failed(peer);
            return page(&console, &headers, link, &secret, Some(message)).await;
        }
        Err(err) => return PageError::from(err).into_response(),
    };
    record(&console, peer, link, &user).await;
    tracing::info!(user.id = %user.id, role = %user.role, "a person joined the organization");
    let page =
        JoinedPage { chrome: Chrome::signed_out(), name: user.name, email: user.email, role: user.role.to_string() };
    let mut response = render_with(StatusCode::OK, &page);
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, "", 0, over_tls(&console, &headers)));
    response
}

/// Records the joining in the audit log, as the person who joined.
async fn record(console: &Console, peer: Option<std::net::IpAddr>, link: Link, user: &User) {
    let action = match link {
        Link::Invite => AuditAction::InviteAccept,
        Link::Setup => AuditAction::SetupLinkUse,
    };
    let event = mnemo_store::ops::NewAuditEvent {
        action,
        workspace: None,
        actor: AuditActor { kind: AuditActorType::User, id: user.id.to_string() },
        resource: Some(mnemo_api::AuditResource { kind: "user".into(), id: user.id.to_string() }),
        client_ip: peer.map(|ip| ip.to_string()),
        outcome: AuditOutcome::Success,
        details: serde_json::json!({ "role": user.role.as_str() }),
    };
    if let Err(e) = console.store.record_audit_event(event).await {
        tracing::error!(error = %e.chain(), %action, "could not record an audit event");
    }
}
