//! The console's static files, embedded in the binary.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Every asset: name, content type, bytes.
pub(crate) const ASSETS: &[(&str, &str, &[u8])] = &[
    ("console.css", "text/css; charset=utf-8", include_bytes!("../assets/console.css")),
    ("console.js", "text/javascript; charset=utf-8", include_bytes!("../assets/console.js")),
    ("favicon.svg", "image/svg+xml", include_bytes!("../assets/favicon.svg")),
];

pub(crate) async fn serve(Path(name): Path<String>) -> Response {
    let Some((_, kind, body)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let mut response = (*body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    // Assets change only with the binary; an hour's cache keeps pages fast without going stale
    // for long after an upgrade.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    response
}
