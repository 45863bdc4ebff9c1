//! The audit log's recorder and its listing (extension `GET /v1/organizations/audit_events`).
//!
//! Which answered requests are recorded is one table, [`AUDITED`]: a route template and method
//! name an action, and where the acted-on resource's id is found — a path parameter, or the
//! answer's `id` for a create. The recorder runs once the handler has answered, so an entry
//! says how the request ended; its actor is the caller the credential extractor saw. Nothing of
//! a request or answer body is kept but a few named fields ([`Audited::details`]), which
//! `rules::audit::check_details` checks never carry a secret.

use std::net::{IpAddr, SocketAddr};

use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use mnemo_api::{
    AdminPage, AdminPageParams, AdminPageQuery, AuditActorType, AuditEvent, AuditOutcome, AuditResource, WorkspaceId,
};
use mnemo_http::{BadInput, FromQuery, Params, Query, filter_id, timestamp};
use mnemo_store::ops::{AuditFilter, NewAuditEvent};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::scope::Action;
use serde_json::{Map, Value};

use crate::auth::{Allowed, Permit};
use crate::request::ServedIn;
use crate::{ApiError, AppState};

/// Where an audited request's resource id is.
#[derive(Debug, Clone, Copy)]
enum IdIn {
    /// The named parameter of the route template.
    Path(&'static str),
    /// The `id` of the answer (a create).
    Answer,
    /// The named field of the answer (a create of an object without an `id`).
    AnswerField(&'static str),
}

/// One audited route.
#[derive(Debug)]
struct Audited {
    method: Method,
    route: &'static str,
    action: AuditAction,
    id: IdIn,
    /// Fields of a successful answer copied into the entry's `details`.
    details: &'static [&'static str],
}

macro_rules! audited {
    ($($method:ident $route:literal => $action:ident, $id:expr, [$($detail:literal),*];)+) => {
        &[$(Audited {
            method: Method::$method,
            route: $route,
            action: AuditAction::$action,
            id: $id,
            details: &[$($detail),*],
        },)+]
    };
}

/// Every audited route.
const AUDITED: &[Audited] = audited! {
    POST "/v1/organizations/workspaces" => WorkspaceCreate, IdIn::Answer, ["name"];
    POST "/v1/organizations/workspaces/{workspace_id}" => WorkspaceUpdate, IdIn::Path("workspace_id"), ["name"];
    POST "/v1/organizations/workspaces/{workspace_id}/archive" => WorkspaceArchive, IdIn::Path("workspace_id"), [];
    POST "/v1/organizations/workspaces/{workspace_id}/rate_limits/{rate_limit_id}" =>
        WorkspaceRateLimitUpdate, IdIn::Path("rate_limit_id"), [];
    POST "/v1/organizations/users/{user_id}" => UserUpdate, IdIn::Path("user_id"), ["role"];
    DELETE "/v1/organizations/users/{user_id}" => UserRemove, IdIn::Path("user_id"), [];
    POST "/v1/organizations/users/{user_id}/sign_out" => UserSignOut, IdIn::Path("user_id"), [];
    POST "/v1/organizations/invites" => InviteCreate, IdIn::Answer, ["email", "role", "expires_at"];
    DELETE "/v1/organizations/invites/{invite_id}" => InviteDelete, IdIn::Path("invite_id"), [];
    POST "/v1/organizations/workspaces/{workspace_id}/members" =>
        WorkspaceMemberAdd, IdIn::AnswerField("user_id"), ["workspace_role"];
    POST "/v1/organizations/workspaces/{workspace_id}/members/{user_id}" =>
        WorkspaceMemberUpdate, IdIn::Path("user_id"), ["workspace_role"];
    DELETE "/v1/organizations/workspaces/{workspace_id}/members/{user_id}" =>
        WorkspaceMemberRemove, IdIn::Path("user_id"), [];
    POST "/v1/organizations/api_keys" => ApiKeyCreate, IdIn::Answer, ["name", "expires_at"];
    POST "/v1/organizations/api_keys/{api_key_id}" => ApiKeyUpdate, IdIn::Path("api_key_id"), ["name", "status"];
    POST "/v1/environments/{environment}/keys" => EnvironmentKeyCreate, IdIn::Answer, ["environment_id"];
    POST "/v1/environments/{environment}/keys/{key}/revoke" => EnvironmentKeyRevoke, IdIn::Path("key"), ["environment_id"];
    DELETE "/v1/memory_stores/{store}" => MemoryStoreDelete, IdIn::Path("store"), [];
    DELETE "/v1/sessions/{session}" => SessionDelete, IdIn::Path("session"), [];
    POST "/v1/memory_stores/{store}/memory_versions/{version}/redact" =>
        MemoryVersionRedact, IdIn::Path("version"), ["memory_id"];
    POST "/v1/memory_stores/{store}/version_retention" =>
        MemoryStoreRetentionUpdate, IdIn::Path("store"), ["retention", "effective"];
};

/// The most of an audited answer read to find its id and details: answers of audited routes
/// are single small objects.
const MAX_ANSWER_BYTES: usize = 1 << 20;

fn audited(method: &Method, route: &str) -> Option<&'static Audited> {
    AUDITED.iter().find(|a| a.method == *method && a.route == route)
}

/// The value of parameter `name` of `route` in `path` (both split on `/`).
fn path_param(route: &str, path: &str, name: &str) -> Option<String> {
    let wanted = format!("{{{name}}}");
    route.split('/').zip(path.split('/')).find(|(r, _)| *r == wanted).map(|(_, p)| p.to_owned())
}

/// Records the audited requests, once answered (see the module's doc).
pub(crate) async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned());
    let Some(audited) = route.as_deref().and_then(|r| audited(req.method(), r)) else {
        return next.run(req).await;
    };
    let path = req.uri().path().to_owned();
    let served = req.extensions().get::<ServedIn>().cloned();
    let client: Option<IpAddr> = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let response = next.run(req).await;
    // No caller (a refused credential): nobody to name, and failed authentications have their
    // own throttle.
    let Some(actor) = served.as_ref().and_then(|s| s.actor().cloned()) else { return response };
    let success = response.status().is_success();
    let (response, answer) = if success { read_answer(response).await } else { (response, None) };
    let route = route.as_deref().unwrap_or_default();
    let resource_id = match audited.id {
        IdIn::Path(name) => path_param(route, &path, name),
        IdIn::Answer => answer.as_ref().and_then(|a| a.get("id")?.as_str().map(str::to_owned)),
        IdIn::AnswerField(field) => answer.as_ref().and_then(|a| a.get(field)?.as_str().map(str::to_owned)),
    };
    let resource =
        audited.action.resource_type().zip(resource_id).map(|(kind, id)| AuditResource { kind: kind.into(), id });
    let mut details = Map::new();
    if let Some(answer) = &answer {
        for field in audited.details {
            if let Some(value) = answer.get(*field).filter(|v| !v.is_null()) {
                details.insert((*field).into(), value.clone());
            }
        }
    }
    if !success {
        details.insert("status".into(), response.status().as_u16().into());
    }
    let workspace = served
        .as_ref()
        .and_then(|s| s.workspace().cloned())
        .or_else(|| answer_workspace(answer.as_ref()))
        .or_else(|| path_param(route, &path, "workspace_id").and_then(|w| w.parse::<WorkspaceId>().ok()));
    let event = NewAuditEvent {
        action: audited.action,
        workspace,
        actor,
        resource,
        client_ip: client.map(|ip| ip.to_string()),
        outcome: if success { AuditOutcome::Success } else { AuditOutcome::Failure },
        details: Value::Object(details),
    };
    if let Err(e) = state.store.record_audit_event(event).await {
        tracing::error!(error = %e.chain(), action = %audited.action, "could not record an audit event");
    }
    response
}

/// The workspace an Admin API answer names: a key's `scope.workspace_id`, or a workspace's own
/// `id`.
fn answer_workspace(answer: Option<&Value>) -> Option<WorkspaceId> {
    let answer = answer?;
    let id = match answer.get("type")?.as_str()? {
        "workspace" => answer.get("id"),
        _ => answer.get("scope").and_then(|s| s.get("workspace_id")),
    };
    id?.as_str()?.parse().ok()
}

/// The answer's JSON object, and the answer rebuilt from the bytes read.
async fn read_answer(response: Response) -> (Response, Option<Value>) {
    let (parts, body) = response.into_parts();
    match axum::body::to_bytes(body, MAX_ANSWER_BYTES).await {
        Ok(bytes) => {
            let value = serde_json::from_slice::<Value>(&bytes).ok().filter(Value::is_object);
            (Response::from_parts(parts, Body::from(bytes)), value)
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read an audited answer");
            (Response::from_parts(parts, Body::empty()), None)
        }
    }
}

/// The audit log's filters and page (`GET /v1/organizations/audit_events`).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Entries of this workspace only (`workspace_id`); also `actor_type` (`admin_key`,
    /// `api_key`, `environment_key`, `session`, `user`, `system`), `actor_id`, `action`
    /// (`api_key.update`), `starting_at` (inclusive) and `ending_at` (exclusive), RFC 3339.
    #[param(rename = "workspace_id", value_type = Option<String>)]
    filter: AuditFilter,
    /// Page size, 1–1000 (default 20); `after_id` / `before_id`: the entries older / newer
    /// than that id.
    #[param(rename = "limit", value_type = Option<u32>)]
    page: AdminPageQuery,
}

impl FromQuery for AuditQuery {
    const ONCE: &'static [&'static str] = &[
        "workspace_id",
        "actor_type",
        "actor_id",
        "action",
        "starting_at",
        "ending_at",
        "limit",
        "after_id",
        "before_id",
    ];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let workspace = filter_id::<WorkspaceId>("workspace_id", q.one("workspace_id"))?;
        let actor_type = q
            .one("actor_type")
            .map(|t| {
                AuditActorType::ALL.iter().find(|k| k.as_str() == t).map(|k| k.as_str().to_owned()).ok_or_else(|| {
                    let names: Vec<_> = AuditActorType::ALL.iter().map(|k| k.as_str()).collect();
                    BadInput::Invalid(format!("actor_type must be one of {} (got `{t}`)", names.join(", ")))
                })
            })
            .transpose()?;
        let micros = |name| timestamp(name, q.one(name)).map(|t| t.map(|t| t.timestamp_micros()));
        let filter = AuditFilter {
            workspace,
            actor_type,
            actor_id: q.one("actor_id").map(str::to_owned),
            action: q.one("action").map(str::to_owned),
            starting_at: micros("starting_at")?,
            ending_at: micros("ending_at")?,
        };
        let limit = q
            .one("limit")
            .map(|l| {
                l.parse::<u32>().map_err(|_| BadInput::Invalid(format!("limit must be a whole number (got `{l}`)")))
            })
            .transpose()?;
        let params = AdminPageParams {
            limit,
            after_id: q.one("after_id").map(str::to_owned),
            before_id: q.one("before_id").map(str::to_owned),
        };
        let page = params.resolve().map_err(|e| BadInput::Invalid(e.0))?;
        Ok(Self { filter, page })
    }
}

/// Reading the audit log.
pub(crate) struct ReadAuditLog;

impl Permit for ReadAuditLog {
    const ACTION: Action<'static> = Action::ReadAuditLog;
}

/// Lists the audit log, newest first.
#[utoipa::path(
    get,
    path = "/v1/organizations/audit_events",
    operation_id = "organization.audit_events.list",
    tag = "organization",
    summary = "List the audit log, newest first (mnemo extension): who did what, when, from where, and how it ended",
    params(AuditQuery),
    responses((status = 200, description = "OK.", body = mnemo_api::AdminPage<mnemo_api::AuditEvent>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    _: Allowed<ReadAuditLog>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<AdminPage<AuditEvent>>, ApiError> {
    Ok(Json(state.store.list_audit_events(query.filter, query.page).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_parameter_is_read_from_its_place_in_the_route() {
        let route = "/v1/memory_stores/{store}/memory_versions/{version}/redact";
        let path = "/v1/memory_stores/memstore_a/memory_versions/memver_b/redact";
        assert_eq!(path_param(route, path, "version").as_deref(), Some("memver_b"));
        assert_eq!(path_param(route, path, "store").as_deref(), Some("memstore_a"));
        assert_eq!(path_param(route, path, "session"), None);
    }

    #[test]
    fn every_audited_route_names_a_parameter_its_template_has() {
        for a in AUDITED {
            if let IdIn::Path(name) = a.id {
                assert!(a.route.contains(&format!("{{{name}}}")), "{} names `{name}`", a.route);
            }
            assert!(a.action.resource_type().is_some(), "{} acts on a resource", a.action);
        }
    }

    #[test]
    fn an_admin_answer_names_its_workspace() {
        let key = serde_json::json!({"type": "api_key", "id": "apikey_a", "scope": {"type": "workspace", "workspace_id": "wrkspc_0000000000000000000001"}});
        assert_eq!(
            answer_workspace(Some(&key)).map(|w| w.to_string()).as_deref(),
            Some("wrkspc_0000000000000000000001")
        );
        let ws = serde_json::json!({"type": "workspace", "id": "wrkspc_0000000000000000000002"});
        assert_eq!(
            answer_workspace(Some(&ws)).map(|w| w.to_string()).as_deref(),
            Some("wrkspc_0000000000000000000002")
        );
        assert_eq!(answer_workspace(Some(&serde_json::json!({"type": "memory_store", "id": "memstore_x"}))), None);
    }
}
