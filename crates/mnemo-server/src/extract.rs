//! Extractors whose rejections speak the error envelope.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
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

/// A query string, with `key[gte]`-style names spelled out in the target's serde renames.
#[derive(Debug)]
pub(crate) struct Query<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(query)
            .map(Query)
            .map_err(|e| ApiError::invalid(format!("invalid query string: {e}")))
    }
}

/// The query string as decoded pairs, for array parameters (`statuses[]=a&statuses[]=b`).
#[derive(Debug)]
pub(crate) struct RawQuery(pub(crate) Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for RawQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        Ok(Self(form_urlencoded::parse(query.as_bytes()).into_owned().collect()))
    }
}
