//! Ids in a route's path: `Id<MemoryStoreId>` takes the route's `{store}`.

use std::str::FromStr;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use mnemo_api::{
    AgentId, ApiKeyId, DreamId, EnvironmentId, EnvironmentKeyId, InviteId, MemoryId, MemoryStoreId, MemoryVersionId,
    SessionId, UserId, WebhookEndpointId, WorkId, WorkspaceId,
};

use crate::{BadInput, Refuse};

/// An id type that routes carry in their path.
pub trait PathId: FromStr + Send + Sized {
    /// The route parameter that holds it (`store` in `/v1/memory_stores/{store}`); every route
    /// names an id of this type so.
    const PARAM: &'static str;
    /// What a person calls it, in the not-found message.
    const NOUN: &'static str;
    /// The `error_code` of the API's not-found answer for it, if it has one.
    const NOT_FOUND_CODE: Option<&'static str> = None;

    /// Parses the path's text. An id that cannot exist is answered as one that does not: a
    /// `404` naming what was asked for, never a `400` about the id's shape.
    fn from_path(raw: &str) -> Result<Self, BadInput> {
        raw.parse().map_err(|_| BadInput::NotFound {
            noun: Self::NOUN,
            raw: raw.to_owned(),
            code: Self::NOT_FOUND_CODE,
        })
    }
}

macro_rules! path_id {
    ($($ty:ty => $param:literal, $noun:literal $(, $code:literal)?;)*) => {$(
        impl PathId for $ty {
            const PARAM: &'static str = $param;
            const NOUN: &'static str = $noun;
            $(const NOT_FOUND_CODE: Option<&'static str> = Some($code);)?
        }
    )*};
}

path_id! {
    MemoryStoreId => "store", "memory store";
    MemoryId => "memory", "memory";
    MemoryVersionId => "version", "memory version";
    AgentId => "agent", "agent";
    EnvironmentId => "environment", "environment", "environment_not_found";
    EnvironmentKeyId => "key", "environment key";
    WorkId => "work", "work item";
    SessionId => "session", "session";
    WebhookEndpointId => "endpoint", "webhook endpoint";
    WorkspaceId => "workspace_id", "workspace";
    ApiKeyId => "api_key_id", "API key";
    UserId => "user_id", "user";
    InviteId => "invite_id", "invite";
    DreamId => "dream", "dream";
}

/// The id in the route parameter `T::PARAM`, parsed. A handler with two ids takes two of these,
/// in the order the path names them (which is the order their refusals are checked in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id<T>(pub T);

impl<T: PathId, S: Refuse> FromRequestParts<S> for Id<T> {
    type Rejection = S::Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match from_parts::<T, S>(parts, state).await {
            Ok(id) => Ok(Self(id)),
            Err(bad) => Err(state.refuse(parts, bad).await),
        }
    }
}

async fn from_parts<T: PathId, S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<T, BadInput> {
    let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state).await.map_err(BadInput::Path)?;
    let raw = params.iter().find(|(name, _)| name == T::PARAM).ok_or(BadInput::NoSuchParam(T::PARAM))?;
    T::from_path(&raw.1)
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    /// Refuses with the status and the words it would show, as plain text.
    #[derive(Clone)]
    struct Plain;

    impl Refuse for Plain {
        type Rejection = Response;

        async fn refuse(&self, _: &mut Parts, bad: BadInput) -> Response {
            match bad {
                BadInput::NotFound { noun, raw, code } => {
                    let code = code.map(|c| format!(" [{c}]")).unwrap_or_default();
                    (StatusCode::NOT_FOUND, format!("{}{code}", BadInput::not_found_message(noun, &raw)))
                        .into_response()
                }
                BadInput::Path(rejection) => rejection.into_response(),
                BadInput::NoSuchParam(name) => (StatusCode::INTERNAL_SERVER_ERROR, name).into_response(),
                other => (StatusCode::BAD_REQUEST, format!("{other:?}")).into_response(),
            }
        }
    }

    async fn answer(uri: &str) -> (u16, String) {
        let app = Router::new()
            .route("/stores/{store}", get(|Id(s): Id<MemoryStoreId>| async move { s.to_string() }))
            .route(
                "/stores/{store}/memories/{memory}",
                get(|Id(s): Id<MemoryStoreId>, Id(m): Id<MemoryId>| async move { format!("{s} {m}") }),
            )
            .route("/environments/{environment}", get(|Id(e): Id<EnvironmentId>| async move { e.to_string() }))
            .route("/wrong/{id}", get(|Id(s): Id<SessionId>| async move { s.to_string() }))
            .with_state(Plain);
        let response = app.oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn each_path_id_is_parsed_or_not_found_in_the_words_of_today() {
        let store = MemoryStoreId::generate();
        let memory = MemoryId::generate();
        let cases: Vec<(String, u16, String)> = vec![
            (format!("/stores/{store}"), 200, store.to_string()),
            (format!("/stores/{store}/memories/{memory}"), 200, format!("{store} {memory}")),
            ("/stores/bad".into(), 404, "memory store `bad` not found".into()),
            // The store is checked first, as the path names it first.
            ("/stores/bad/memories/worse".into(), 404, "memory store `bad` not found".into()),
            (format!("/stores/{store}/memories/{store}"), 404, format!("memory `{store}` not found")),
            // Percent-escapes are decoded before the id is judged (and quoted decoded).
            ("/stores/memstore_%E2%80%8B".into(), 404, "memory store `memstore_\u{200b}` not found".into()),
            ("/environments/env_".into(), 404, "environment `env_` not found [environment_not_found]".into()),
            // Not UTF-8 once decoded: axum's own answer, as before there were typed ids.
            ("/stores/%FF".into(), 400, "Invalid URL: Invalid UTF-8 in `store`".into()),
            // A route whose parameter is not the id's: a wiring mistake, never a guess.
            ("/wrong/sesn_abc".into(), 500, "session".into()),
        ];
        for (uri, status, body) in cases {
            assert_eq!(answer(&uri).await, (status, body), "{uri}");
        }
    }

    #[test]
    fn every_id_names_its_route_parameter_and_noun() {
        let table: &[(&str, &str, Option<&str>)] = &[
            (MemoryStoreId::PARAM, MemoryStoreId::NOUN, MemoryStoreId::NOT_FOUND_CODE),
            (MemoryId::PARAM, MemoryId::NOUN, MemoryId::NOT_FOUND_CODE),
            (MemoryVersionId::PARAM, MemoryVersionId::NOUN, MemoryVersionId::NOT_FOUND_CODE),
            (AgentId::PARAM, AgentId::NOUN, AgentId::NOT_FOUND_CODE),
            (EnvironmentId::PARAM, EnvironmentId::NOUN, EnvironmentId::NOT_FOUND_CODE),
            (EnvironmentKeyId::PARAM, EnvironmentKeyId::NOUN, EnvironmentKeyId::NOT_FOUND_CODE),
            (WorkId::PARAM, WorkId::NOUN, WorkId::NOT_FOUND_CODE),
            (SessionId::PARAM, SessionId::NOUN, SessionId::NOT_FOUND_CODE),
            (WebhookEndpointId::PARAM, WebhookEndpointId::NOUN, WebhookEndpointId::NOT_FOUND_CODE),
        ];
        let expected: &[(&str, &str, Option<&str>)] = &[
            ("store", "memory store", None),
            ("memory", "memory", None),
            ("version", "memory version", None),
            ("agent", "agent", None),
            ("environment", "environment", Some("environment_not_found")),
            ("key", "environment key", None),
            ("work", "work item", None),
            ("session", "session", None),
            ("endpoint", "webhook endpoint", None),
        ];
        assert_eq!(table, expected);
    }
}
