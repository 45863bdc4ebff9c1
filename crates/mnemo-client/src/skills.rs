//! The skills endpoints the worker needs: resolve a skill version and download its files.
//!
//! Like the reference client's skills resource, these calls send no `anthropic-beta` header
//! (see `beta_for`). The skill and version are single path segments: they are percent-encoded
//! here, and callers must refuse empty values and dot segments (`.`, `..`) beforehand, which
//! URL normalisation would otherwise fold into a different path.

use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;

use crate::{Client, ClientError, Result, backoff, server_delay, should_retry};

impl Client {
    /// `GET /v1/skills/{skill}/versions/{version}`: one version of a skill, as raw JSON
    /// (`id`, `name`, `skill_id`, …). `version` may be the alias `latest`; the answer's `id`
    /// is then the concrete version.
    pub async fn get_skill_version(&self, skill: &str, version: &str) -> Result<Value> {
        let path = format!("/v1/skills/{}/versions/{}", segment(skill), segment(version));
        self.send(|| self.request(Method::GET, &path)).await
    }

    /// `GET /v1/skills/{skill}/versions/{version}/content` with `Accept: application/binary`:
    /// the version's files as one archive, as bytes. Same retry policy and error decoding as the
    /// JSON calls (a failure while the body is being read is not retried). A body longer than
    /// `max_bytes` fails with [`ClientError::Decode`] without being read further.
    pub async fn download_skill_content(&self, skill: &str, version: &str, max_bytes: u64) -> Result<Vec<u8>> {
        let path = format!("/v1/skills/{}/versions/{}/content", segment(skill), segment(version));
        let mut resp =
            self.send_raw(|| self.request(Method::GET, &path).header("accept", "application/binary")).await?;
        let status = resp.status().as_u16();
        let too_long = || ClientError::Decode { status, message: format!("response body exceeds {max_bytes} bytes") };
        if resp.content_length().is_some_and(|n| n > max_bytes) {
            return Err(too_long());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(ClientError::Transport)? {
            if (body.len() + chunk.len()) as u64 > max_bytes {
                return Err(too_long());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// [`Client::send`] for a body that is not JSON: the same retries, the error envelope decoded
    /// on failure, and the successful response handed back unread.
    async fn send_raw(&self, build: impl Fn() -> RequestBuilder) -> Result<Response> {
        let mut attempt = 0;
        loop {
            let outcome = build().send().await;
            let retry_after = match &outcome {
                Ok(resp) if resp.status().is_success() => None,
                Ok(resp) => should_retry(resp).then(|| server_delay(resp)),
                Err(e) => (e.is_connect() || e.is_timeout() || e.is_request()).then_some(None),
            };
            match (retry_after, attempt < self.max_retries) {
                (Some(delay), true) => {
                    let delay = delay.unwrap_or_else(|| backoff(attempt));
                    tracing::debug!(attempt, ?delay, "retrying request");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                _ => {
                    let resp = outcome.map_err(ClientError::Transport)?;
                    if resp.status().is_success() {
                        return Ok(resp);
                    }
                    let status = resp.status().as_u16();
                    let request_id = resp.headers().get("request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
                    let body = resp.bytes().await.map_err(ClientError::Transport)?;
                    return Err(ClientError::from_response(status, request_id, &body));
                }
            }
        }
    }
}

/// `value` percent-encoded as one URI path segment: everything outside RFC 3986's `pchar` set
/// (so `/` too) becomes `%XX`, as the reference client's path templates do.
fn segment(value: &str) -> String {
    const KEEP: &[u8] = b"-._~!$&'()*+,;=:@";
    let mut out = String::with_capacity(value.len());
    for &b in value.as_bytes() {
        if b.is_ascii_alphanumeric() || KEEP.contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::segment;
    use crate::beta_for;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("skill_01AbC"), "skill_01AbC");
        assert_eq!(segment("latest"), "latest");
        assert_eq!(segment("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
        assert_eq!(segment("x:@!$&'()*+,;=-._~"), "x:@!$&'()*+,;=-._~");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn skills_paths_send_no_beta() {
        assert_eq!(beta_for("/v1/skills/s/versions/latest"), None);
        assert_eq!(beta_for("/v1/skills"), None);
        assert_eq!(beta_for("/v1/skillsets"), Some(crate::MANAGED_AGENTS_BETA));
        assert_eq!(beta_for("/v1/memory_stores/x"), Some(crate::MEMORY_BETA));
        assert_eq!(beta_for("/v1/sessions/x"), Some(crate::MANAGED_AGENTS_BETA));
    }
}
