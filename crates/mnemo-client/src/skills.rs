//! The skills endpoints the worker needs: resolve a skill version and download its files.
//!
//! Like the reference client's skills resource, these calls send no `anthropic-beta` header
//! (see `beta_for`). The skill and version are single path segments: they are percent-encoded
//! here, and callers must refuse empty values and dot segments (`.`, `..`) beforehand, which
//! URL normalisation would otherwise fold into a different path.

use reqwest::Method;
use serde::Deserialize;

use crate::lenient::{string, text};
use crate::{Client, ClientError, Result};

/// What the worker reads of a skill version, leniently (an odd value reads as absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SkillVersion {
    /// The concrete version (also when it was asked for as `latest`); a number is read as text.
    #[serde(deserialize_with = "text")]
    pub id: Option<String>,
    /// The skill's name; its last `/`-separated part names the skill's folder.
    #[serde(deserialize_with = "string")]
    pub name: Option<String>,
}

impl Client {
    /// `GET /v1/skills/{skill}/versions/{version}`: one version of a skill. `version` may be the
    /// alias `latest`; the answer's `id` is then the concrete version.
    pub async fn get_skill_version(&self, skill: &str, version: &str) -> Result<SkillVersion> {
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
