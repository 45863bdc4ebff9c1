//! Who is calling: bearer tokens and `x-api-key`, resolved by looking the token up.
//!
//! Every credential kind (API key, environment key, sessions token) can arrive as
//! `Authorization: Bearer`, so the kind is decided by the lookup, never by the header. When
//! both headers are present, `x-api-key` wins: it can only ever carry an API key.
//!
//! Handlers say what they accept through the extractor they take: [`Caller`] (anything, then
//! [`Caller::allow`] for the action), [`MemoryCaller`] or [`ApiKeyCaller`]. What each
//! credential may do is decided by `mnemo_store::rules::scope`, in one place.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::Method;
use axum::http::request::Parts;
use mnemo_api::{Actor, MemoryStoreId, WorkspaceId};
use mnemo_store::rules::scope::{self, Action, Decision, MemoryOp, OrgOp};
use mnemo_store::{Credential, CredentialHash, Principal, Store};
use sha2::{Digest, Sha256};

use crate::throttle::AuthThrottle;
use crate::{ApiError, AppState};

/// The SHA-256 under which a credential is stored.
pub fn hash_credential(secret: &str) -> CredentialHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// How long a credential is remembered when other processes share the store and may revoke
/// it: their revocation signal normally arrives at once, and this bounds the wait when one is
/// lost.
const SHARED_MEMORY: Duration = Duration::from_secs(1);

/// Resolves credentials, remembering the ones it has seen, and throttles addresses that fail
/// too often (see [`crate::throttle`]).
pub(crate) struct Authenticator {
    store: Arc<dyn Store>,
    known: RwLock<HashMap<CredentialHash, (Principal, Instant)>>,
    /// How long a remembered credential stays trusted (`None`: until [`Self::forget_all`]).
    remember_for: Option<Duration>,
}

/// The `429` of an address over its budget of failed authentications: the same whether the
/// credential it sent exists or not.
pub(crate) fn throttled(wait: Duration) -> ApiError {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    ApiError::rate_limited(
        format!("too many failed authentications from this address; retry in {secs}s with a valid key"),
        wait,
    )
}

impl Authenticator {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        let remember_for = store.signals().is_some().then_some(SHARED_MEMORY);
        Self { store, known: RwLock::default(), remember_for }
    }

    /// The credential `secret` stands for, from `peer` (the client's address, when known),
    /// failures counted by `throttle`.
    async fn resolve(
        &self,
        secret: &str,
        peer: Option<IpAddr>,
        throttle: &AuthThrottle,
    ) -> Result<Principal, ApiError> {
        let hash = hash_credential(secret);
        // A blocked address's guesses are not looked up (the cache is a lookup too).
        throttle.admit(peer, Some(&hash)).map_err(throttled)?;
        let cached = match self.known.read().expect("credential cache poisoned").get(&hash) {
            Some((found, at)) if self.remember_for.is_none_or(|d| at.elapsed() < d) => Some(found.clone()),
            _ => None,
        };
        let found = match cached {
            Some(found) => found,
            None => match self.store.resolve_credential(hash).await? {
                // Sessions tokens die with their work item's lease; never remember them.
                Some(found @ Principal { credential: Credential::SessionToken { .. }, .. }) => found,
                Some(found) => {
                    self.known
                        .write()
                        .expect("credential cache poisoned")
                        .insert(hash, (found.clone(), Instant::now()));
                    found
                }
                None => {
                    throttle.failed(peer).map_err(|wait| {
                        tracing::info!(peer = ?peer, "authentication failures over the limit; throttling the address");
                        throttled(wait)
                    })?;
                    return Err(ApiError::authentication("invalid x-api-key or bearer token"));
                }
            },
        };
        throttle.succeeded(peer, &hash);
        Ok(found)
    }

    /// Forgets every remembered credential (after a revocation).
    pub(crate) fn forget_all(&self) {
        self.known.write().expect("credential cache poisoned").clear();
    }
}

/// An authenticated caller, whatever its credential, and the workspace it works in. What it
/// may do is decided by [`mnemo_store::rules::scope::decide`]; [`Caller::allow`] asks.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) credential: Credential,
    /// `None` only for an admin key, which the scope rules keep off every Managed Agents route.
    workspace: Option<WorkspaceId>,
}

impl Caller {
    /// Whether this caller may take `action`: `Ok`, or the `401`/`403` to answer.
    pub(crate) fn allow(&self, action: Action<'_>) -> Result<(), ApiError> {
        decision(scope::decide(Some(&self.credential), action))
    }

    /// The workspace this caller's request works in: its credential's (admin-api.md §8.2).
    pub(crate) fn workspace(&self) -> Result<&WorkspaceId, ApiError> {
        self.workspace.as_ref().ok_or_else(|| ApiError::permission(scope::ADMIN_KEY_OUTSIDE_ADMIN_API))
    }
}

fn decision(d: Decision) -> Result<(), ApiError> {
    match d {
        Decision::Allow => Ok(()),
        Decision::Unauthenticated(message) => Err(ApiError::authentication(message)),
        Decision::Forbidden(message) => Err(ApiError::permission(message)),
    }
}

/// A caller allowed on the memory endpoints: anything but an environment key (which the hosted
/// API refuses there too), a sessions token only on the stores attached to its session.
#[derive(Debug, Clone)]
pub(crate) struct MemoryCaller {
    actor: Actor,
    caller: Caller,
}

impl MemoryCaller {
    /// The actor recorded on the versions this caller writes.
    pub(crate) fn actor(&self) -> Actor {
        self.actor.clone()
    }

    /// The credential it called with (what its open streams count against).
    pub(crate) fn credential(&self) -> &Credential {
        &self.caller.credential
    }

    /// The workspace it works in.
    pub(crate) fn workspace(&self) -> Result<&WorkspaceId, ApiError> {
        self.caller.workspace()
    }

    /// The session whose attached stores are all this caller reaches (a sessions token's).
    pub(crate) fn attached_to(&self) -> Option<&mnemo_api::SessionId> {
        scope::attachment_lookup(&self.caller.credential)
    }
}

/// A caller holding an API key (administration: environments, keys, agents).
#[derive(Debug, Clone)]
pub(crate) struct ApiKeyCaller(pub(crate) Caller);

/// The client's address, which `serve` puts on every request (absent in in-process calls).
pub(crate) fn peer(parts: &Parts) -> Option<IpAddr> {
    parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip())
}

/// `anthropic-workspace-id` on a Managed Agents request (admin-api.md §8.2): every credential
/// is bound to one workspace, so the header only checks it — a malformed value is a `400`, a
/// different workspace a `403` with `details.error_code: "workspace_mismatch"`.
fn check_workspace_header(parts: &Parts, bound: Option<&WorkspaceId>) -> Result<(), ApiError> {
    let Some(value) = parts.headers.get("anthropic-workspace-id") else { return Ok(()) };
    let named: WorkspaceId = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| ApiError::invalid("the anthropic-workspace-id header is not a workspace id (`wrkspc_…`)"))?;
    match bound {
        Some(own) if *own != named => Err(ApiError::permission(format!(
            "this credential works in workspace `{own}`, not the `{named}` that anthropic-workspace-id names"
        ))
        .with_code("workspace_mismatch")),
        _ => Ok(()),
    }
}

/// In front of `/mcp`: lets through only a request whose credential is known and may use
/// memory stores (the MCP server then acts with that credential, call by call, through the
/// API). A refusal is the API's own `401`/`403`, with `WWW-Authenticate` as MCP clients
/// expect; unknown keys count against their address as anywhere.
pub(crate) async fn memory_credential(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let checked = async {
        let Principal { credential, workspace } = principal(&parts, &state, false).await?;
        check_workspace_header(&parts, workspace.as_ref())?;
        decision(scope::reach(&credential, false))?;
        decision(scope::decide(Some(&credential), Action::MemoryStores { create: false }))
    };
    match checked.await {
        Ok(()) => next.run(axum::extract::Request::from_parts(parts, body)).await,
        Err(refused) => {
            let mut response = refused.into_response();
            if response.status() == axum::http::StatusCode::UNAUTHORIZED {
                response
                    .headers_mut()
                    .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

/// Who sent the request: a key or token of this server, or a token of the identity provider
/// (`organization`: an Admin API request, where `anthropic-workspace-id` is ignored).
async fn principal(parts: &Parts, state: &AppState, organization: bool) -> Result<Principal, ApiError> {
    let Some(secret) = credential(parts).filter(|s| !s.is_empty()) else {
        return Err(ApiError::authentication(scope::MISSING_CREDENTIALS));
    };
    match state.sso.as_deref() {
        // mnemo's keys are never JWT-shaped (`sk-mnemo-…` has no dots), so the shape decides.
        Some(sso) if mnemo_oidc::looks_like_jwt(secret) => {
            person_of_token(parts, state, sso, secret, organization).await
        }
        _ => state.auth.resolve(secret, peer(parts), &state.throttle).await,
    }
}

fn credential(parts: &Parts) -> Option<&str> {
    if let Some(key) = parts.headers.get("x-api-key") {
        return key.to_str().ok().map(str::trim);
    }
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let organization = parts.uri.path().starts_with("/v1/organizations/");
        let Principal { credential, workspace } = principal(parts, state, organization).await?;
        if !organization {
            check_workspace_header(parts, workspace.as_ref())?;
        }
        if let Some(slot) = parts.extensions.get::<crate::request::ServedIn>() {
            // Admin API answers name no workspace; the audit log still learns who called.
            let served = if organization { None } else { workspace.as_ref() };
            slot.set(served, mnemo_store::rules::audit::actor_of(&credential));
        }
        decision(scope::reach(&credential, organization))?;
        if !organization && let Some(ws) = &workspace {
            crate::rate_limit::count(parts, state, &credential, ws).await?;
        }
        Ok(Caller { credential, workspace })
    }
}

/// The principal of a person presenting a token of the identity provider (issue 33 item 4):
/// validated like a sign-in's ID token ([`mnemo_oidc::Provider::validate_bearer`]), the person
/// found by issuer and subject. A token that carries the groups claim also sets their roles, as
/// a sign-in does, when its groups give other roles than they hold (so a group removed at the
/// provider takes effect with its next token), and creates them if they never signed in; a
/// token without it acts with the roles they hold. Every refusal is the same `401` as an unknown
/// key, counted against the address: the presenter learns nothing of why.
async fn person_of_token(
    parts: &Parts,
    state: &AppState,
    sso: &mnemo_console::oidc::Sso,
    token: &str,
    organization: bool,
) -> Result<Principal, ApiError> {
    let peer = peer(parts);
    state.throttle.admit(peer, None).map_err(throttled)?;
    let refused = |why: &str| {
        tracing::debug!(reason = why, "a bearer token of the identity provider was refused");
        match state.throttle.failed(peer) {
            Ok(()) => ApiError::authentication("invalid x-api-key or bearer token"),
            Err(wait) => throttled(wait),
        }
    };
    let claims = match sso.provider.validate_bearer(token).await {
        Ok(claims) => claims,
        Err(reason) => return Err(refused(&reason.to_string())),
    };
    let known = state.store.sso_person(claims.issuer.clone(), claims.subject.clone()).await?;
    let user = if claims.all.contains_key(&sso.groups_claim) {
        let wanted = mnemo_store::rules::sso::grants(&sso.mappings, &claims.groups(&sso.groups_claim));
        match (wanted, known) {
            (None, _) => {
                mnemo_console::oidc::record_failure(&*state.store, peer, "no mapped group").await;
                return Err(refused("no mapped group"));
            }
            (Some(wanted), Some((user, held))) if held == wanted => user.id,
            (Some(_), _) => match mnemo_console::oidc::sign_in_person(&*state.store, sso, &claims, peer).await {
                Ok(done) => done.user.id,
                Err(mnemo_console::oidc::Refused::Plain(_)) => return Err(refused("refused by the store")),
                Err(mnemo_console::oidc::Refused::Store(e)) => return Err(e.into()),
            },
        }
    } else {
        match known {
            Some((user, _)) => user.id,
            None => return Err(refused("unknown person and no groups claim")),
        }
    };
    // A person may be in several workspaces: the header picks one (ignored on the Admin API).
    let named = match parts.headers.get("anthropic-workspace-id") {
        Some(value) if !organization => {
            Some(value.to_str().ok().and_then(|v| v.trim().parse::<WorkspaceId>().ok()).ok_or_else(|| {
                ApiError::invalid("the anthropic-workspace-id header is not a workspace id (`wrkspc_…`)")
            })?)
        }
        _ => None,
    };
    match state.store.person_principal(&user, named.as_ref()).await {
        Err(mnemo_store::StoreError::Unauthenticated(_)) => Err(refused("removed person")),
        // On the Admin API a person acts in the organization, in as many workspaces as they are
        // in (or none yet): what they may do about one workspace is judged by their role there
        // (`AdminCaller`), so no workspace is theirs here and their org role alone counts.
        Err(mnemo_store::StoreError::WorkspaceUnspecified { .. } | mnemo_store::StoreError::Forbidden(_))
            if organization =>
        {
            let person = state.store.get_user(&user).await?;
            let role = scope::PersonRole { org: person.role, workspace: mnemo_api::WorkspaceRole::WorkspaceUser };
            Ok(Principal { credential: Credential::Person { user, role }, workspace: None })
        }
        other => Ok(other?),
    }
}

impl FromRequestParts<AppState> for MemoryCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let Some(rest) = parts.uri.path().strip_prefix("/v1/memory_stores/") else {
            let action = if parts.uri.path() == "/v1/memories:search" {
                Action::SearchMemories
            } else {
                Action::MemoryStores { create: !matches!(parts.method, Method::GET | Method::HEAD) }
            };
            caller.allow(action)?;
            return Ok(Self { actor: actor(&caller)?, caller });
        };
        let (store, tail) = rest.split_once('/').unwrap_or((rest, ""));
        // Judged here, before the handler's `Id`, because the scope rules need the store: the
        // raw path's text, so a store id never needs decoding.
        let store = <MemoryStoreId as mnemo_http::PathId>::from_path(store)?;
        let op = match (&parts.method, tail) {
            (&Method::GET, _) => MemoryOp::Read,
            (_, "memories" | "memories:batch") => MemoryOp::WriteMemories,
            (_, t) if t.starts_with("memories/") => MemoryOp::WriteMemories,
            _ => MemoryOp::Administer,
        };
        let attached = match scope::attachment_lookup(&caller.credential) {
            Some(session) => state.store.session_store_access(caller.workspace()?, session, &store).await?,
            None => None,
        };
        caller.allow(Action::Memory { store: &store, op, attached })?;
        Ok(Self { actor: actor(&caller)?, caller })
    }
}

/// The caller as the versions it writes record it, once the scope rules let it in.
fn actor(caller: &Caller) -> Result<Actor, ApiError> {
    scope::memory_actor(&caller.credential)
        .ok_or_else(|| ApiError::permission("this credential cannot be recorded as the author of a memory version"))
}

/// What an [`Allowed`] caller may do, named by a type.
pub(crate) trait Permit {
    const ACTION: Action<'static>;
}

/// Proof that the caller may do `P`'s action. The check runs as the caller is extracted, before the path
/// and the body are read: a credential that may not call an operation is refused (403) whatever
/// it sends, and learns nothing from how its input would have been judged.
pub(crate) struct Allowed<P>(PhantomData<P>);

impl<P: Permit> FromRequestParts<AppState> for Allowed<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.allow(P::ACTION)?;
        Ok(Self(PhantomData))
    }
}

/// An Admin API operation about one workspace, named by a type: API keys, members, a
/// workspace's rate limits.
pub(crate) trait WorkspacePermit {
    const OP: OrgOp;
}

/// A caller on an Admin API operation about one workspace ([`WorkspacePermit`]): allowed it
/// organization-wide (an admin key, an org admin), or a person whose role in that workspace
/// decides ([`scope::judged_in_workspace`]) once the handler knows which workspace it is about
/// and asks [`AdminCaller::allow_in`]. Anyone else is refused as it is extracted, before the
/// path and the body are read.
pub(crate) struct AdminCaller<P> {
    caller: Caller,
    _op: PhantomData<fn() -> P>,
}

impl<P: WorkspacePermit> AdminCaller<P> {
    /// Whether this caller may do `P`'s operation about `ws`. A person who has no role there is
    /// answered as for an unknown workspace (`404`): a workspace they are not in does not exist
    /// for them.
    pub(crate) async fn allow_in(&self, state: &AppState, ws: &WorkspaceId) -> Result<(), ApiError> {
        let (Some(user), Some(row)) =
            (scope::judged_in_workspace(&self.caller.credential), scope::workspace_row(P::OP))
        else {
            return self.caller.allow(Action::Organization(P::OP));
        };
        let there = state.store.person_principal(user, Some(ws)).await?;
        decision(scope::decide(Some(&there.credential), Action::Workspace(row)))
    }

    /// Whether this caller may do `P`'s operation across every workspace at once (a list with no
    /// workspace named): organization-wide callers only.
    pub(crate) fn allow_everywhere(&self) -> Result<(), ApiError> {
        match scope::judged_in_workspace(&self.caller.credential) {
            Some(_) => Err(ApiError::permission(
                "your role is in workspaces, not the organization: name one (`workspace_id`) to act on its own",
            )),
            None => self.caller.allow(Action::Organization(P::OP)),
        }
    }

    /// The person acting, to record as who made what they create.
    pub(crate) fn person(&self) -> Option<&mnemo_api::UserId> {
        match &self.caller.credential {
            Credential::Person { user, .. } => Some(user),
            _ => None,
        }
    }
}

impl<P: WorkspacePermit> FromRequestParts<AppState> for AdminCaller<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if scope::judged_in_workspace(&caller.credential).is_none() {
            caller.allow(Action::Organization(P::OP))?;
        }
        Ok(Self { caller, _op: PhantomData })
    }
}

/// Proof that the caller may do `P`'s operation about the workspace of the path
/// (`/v1/organizations/workspaces/{workspace_id}/…`), by [`AdminCaller::allow_in`].
pub(crate) struct AllowedIn<P>(PhantomData<fn() -> P>);

impl<P: WorkspacePermit> FromRequestParts<AppState> for AllowedIn<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let admin = AdminCaller::<P>::from_request_parts(parts, state).await?;
        if scope::judged_in_workspace(&admin.caller.credential).is_some() {
            let raw = parts.uri.path().strip_prefix("/v1/organizations/workspaces/").unwrap_or_default();
            let ws = <WorkspaceId as mnemo_http::PathId>::from_path(raw.split('/').next().unwrap_or_default())?;
            admin.allow_in(state, &ws).await?;
        }
        Ok(Self(PhantomData))
    }
}

impl FromRequestParts<AppState> for ApiKeyCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        // Reading is a row of its own: a person's role may allow it without allowing changes.
        let action =
            if matches!(parts.method, Method::GET | Method::HEAD) { Action::Inspect } else { Action::Administer };
        caller.allow(action)?;
        Ok(Self(caller))
    }
}
