//! Extractors whose rejections speak the error envelope.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use mnemo_http::{BadInput, Refuse};
use serde::de::DeserializeOwned;

use crate::{ApiError, AppState};

/// A JSON body. The content type is not required (some clients omit it on empty bodies), and
/// an empty body reads as `{}`.
#[derive(Debug)]
pub(crate) struct Json<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    mnemo_api::ErrorType::RequestTooLarge,
                    format!("request body exceeds {} bytes", crate::MAX_BODY_BYTES),
                )
            } else {
                ApiError::invalid(format!("could not read the request body: {e}"))
            }
        })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { &bytes };
        serde_json::from_slice(bytes).map(Json).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
    }
}

/// The client's [`WRITER_HEADER`](mnemo_api::headers::WRITER_HEADER), if it sent one: on a
/// memory write, the change hub remembers it wrote the version; on a change feed, its own
/// versions come without their content ([`crate::changes`]). A malformed one is a `400`.
#[derive(Debug)]
pub(crate) struct Writer(pub(crate) Option<mnemo_api::headers::WriterId>);

impl FromRequestParts<AppState> for Writer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        use mnemo_api::headers::{WRITER_HEADER, WriterId};
        let Some(raw) = parts.headers.get(WRITER_HEADER) else { return Ok(Self(None)) };
        let raw = raw.to_str().map_err(|_| ApiError::invalid(format!("{WRITER_HEADER} must be ASCII")))?;
        WriterId::parse(raw).map(|w| Self(Some(w))).map_err(ApiError::invalid)
    }
}

/// How the API shows input it refuses: as its error envelope, in the words it has always used
/// (the one exception is a path that does not decode, which axum answers itself).
impl Refuse for AppState {
    type Rejection = Response;

    async fn refuse(&self, _: &mut Parts, bad: BadInput) -> Response {
        match bad {
            BadInput::Path(rejection) => rejection.into_response(),
            other => ApiError::from(other).into_response(),
        }
    }
}

impl From<BadInput> for ApiError {
    fn from(bad: BadInput) -> Self {
        match bad {
            BadInput::NotFound { noun, raw, code } => {
                let err = Self::not_found(BadInput::not_found_message(noun, &raw));
                match code {
                    Some(code) => err.with_code(code),
                    None => err,
                }
            }
            BadInput::Invalid(message) => Self::invalid(message),
            BadInput::Cursor(e) => Self::from(e),
            BadInput::Duplicate(name) => Self::invalid(format!("invalid query string: duplicate field `{name}`")),
            BadInput::Path(rejection) => Self::invalid(rejection.body_text()),
            BadInput::NoSuchParam(name) => Self::internal(format!("the route has no `{{{name}}}` parameter")),
        }
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{EnvironmentId, MemoryStoreId};
    use mnemo_http::PathId;
    use serde_json::{Value, json};

    use super::*;

    fn render(bad: BadInput) -> (u16, Value) {
        let response = ApiError::from(bad).into_response();
        let status = response.status().as_u16();
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX)).unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        (status, body["error"].clone())
    }

    #[test]
    fn bad_input_renders_as_the_api_has_always_answered_it() {
        let cases: Vec<(BadInput, u16, Value)> = vec![
            (
                MemoryStoreId::from_path("bad").unwrap_err(),
                404,
                json!({"type": "not_found_error", "message": "memory store `bad` not found"}),
            ),
            (
                EnvironmentId::from_path("env_").unwrap_err(),
                404,
                json!({"type": "not_found_error", "message": "environment `env_` not found",
                       "details": {"error_code": "environment_not_found"}}),
            ),
            (
                BadInput::Invalid("limit must be an integer from 1 to 100 (got `0`)".into()),
                400,
                json!({"type": "invalid_request_error", "message": "limit must be an integer from 1 to 100 (got `0`)"}),
            ),
            (
                mnemo_http::cursor(Some("zzz")).unwrap_err(),
                400,
                json!({"type": "invalid_request_error", "message": mnemo_store::StoreError::InvalidCursor.to_string()}),
            ),
            (
                BadInput::Duplicate("limit"),
                400,
                json!({"type": "invalid_request_error", "message": "invalid query string: duplicate field `limit`"}),
            ),
            (BadInput::NoSuchParam("store"), 500, json!({"type": "api_error", "message": "internal server error"})),
        ];
        for (bad, status, error) in cases {
            let label = format!("{bad:?}");
            assert_eq!(render(bad), (status, error), "{label}");
        }
    }
}
