//! The authorization-code flow with PKCE: the sign-in's own secrets, the authorization URL, and
//! the code's redemption.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rand::RngCore as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use url::Url;

use crate::validate::{Claims, TokenError, constant_time_eq};
use crate::{OidcError, Provider};

/// One sign-in's secrets, kept by the caller between [`Provider::begin`] and
/// [`Provider::finish`] (the console keeps them server-side). `Debug` shows none of them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignIn {
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

impl fmt::Debug for SignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SignIn([redacted])")
    }
}

/// 32 random bytes from the thread's CSPRNG, base64url: 256 bits, 43 characters (also a valid
/// PKCE verifier, RFC 7636 4.1).
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The S256 challenge of a PKCE verifier (RFC 7636 4.2).
pub(crate) fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

impl SignIn {
    pub fn new() -> Self {
        Self { state: random_token(), nonce: random_token(), pkce_verifier: random_token() }
    }

    /// Whether the `state` the provider sent back is this sign-in's.
    pub fn state_matches(&self, state: &str) -> bool {
        constant_time_eq(self.state.as_bytes(), state.as_bytes())
    }
}

impl Default for SignIn {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    id_token: Option<String>,
    access_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
}

/// RFC 6749 2.3.1: the client id and secret are form-encoded before they go in Basic.
fn basic_auth(client_id: &str, secret: &str) -> String {
    let encode = |s: &str| form_urlencoded_component(s);
    format!("Basic {}", STANDARD.encode(format!("{}:{}", encode(client_id), encode(secret))))
}

fn form_urlencoded_component(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

impl Provider {
    /// Starts a sign-in: the provider's authorization URL to redirect the browser to, and the
    /// secrets to keep until the callback.
    pub fn begin(&self, redirect_uri: &str) -> (Url, SignIn) {
        let sign_in = SignIn::new();
        let mut scopes = vec!["openid".to_owned()];
        scopes.extend(self.config.scopes.iter().filter(|s| *s != "openid").cloned());
        let mut url = self.metadata.authorization_endpoint.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &sign_in.state)
            .append_pair("nonce", &sign_in.nonce)
            .append_pair("code_challenge", &pkce_challenge(&sign_in.pkce_verifier))
            .append_pair("code_challenge_method", "S256");
        (url, sign_in)
    }

    /// Redeems `code` for tokens, validates the ID token (with the sign-in's nonce) and adds the
    /// claims of the provider's userinfo answer the ID token lacks (many providers put groups
    /// only there). The caller has already checked `state` with [`SignIn::state_matches`].
    pub async fn finish(&self, sign_in: &SignIn, code: &str, redirect_uri: &str) -> Result<Claims, OidcError> {
        let use_post = self.metadata.token_endpoint_auth_methods_supported.as_ref().is_some_and(|m| {
            !m.iter().any(|m| m == "client_secret_basic") && m.iter().any(|m| m == "client_secret_post")
        });
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", sign_in.pkce_verifier.as_str()),
        ];
        let mut request =
            self.http.post(self.metadata.token_endpoint.clone()).header(reqwest::header::ACCEPT, "application/json");
        if use_post {
            form.push(("client_id", &self.config.client_id));
            form.push(("client_secret", self.config.client_secret.expose()));
        } else {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                basic_auth(&self.config.client_id, self.config.client_secret.expose()),
            );
        }
        let response =
            request.form(&form).send().await.map_err(|e| OidcError::Unreachable(e.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            // Only the OAuth error code goes into the message (cut to its alphabet), never the
            // provider's prose, which could echo what was sent.
            let code = response
                .json::<ErrorResponse>()
                .await
                .map(|e| e.error.chars().filter(|c| c.is_ascii_lowercase() || *c == '_').take(40).collect::<String>())
                .unwrap_or_default();
            return Err(OidcError::Exchange(if code.is_empty() {
                format!("status {}", status.as_u16())
            } else {
                code
            }));
        }
        let tokens: TokenResponse =
            response.json().await.map_err(|_| OidcError::Exchange("the token response is not JSON".into()))?;
        let id_token =
            tokens.id_token.ok_or_else(|| OidcError::Exchange("no id_token in the token response".into()))?;
        let mut claims = self.validate_id_token(&id_token, &sign_in.nonce).await?;
        if let (Some(endpoint), Some(access)) = (&self.metadata.userinfo_endpoint, &tokens.access_token) {
            match self.userinfo(endpoint, access).await {
                Ok(info) => {
                    if info.get("sub").and_then(Value::as_str) != Some(claims.subject.as_str()) {
                        return Err(OidcError::Token(TokenError::MissingClaim));
                    }
                    claims.merge_userinfo(info);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the identity provider's userinfo endpoint failed; using the ID token's claims alone")
                }
            }
        }
        Ok(claims)
    }

    async fn userinfo(&self, endpoint: &Url, access_token: &str) -> Result<Map<String, Value>, OidcError> {
        let response = self
            .http
            .get(endpoint.clone())
            .bearer_auth(access_token)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| OidcError::Unreachable(e.without_url().to_string()))?;
        // A signed (JWT) userinfo answer is not asked for at registration, so JSON is expected.
        response.json().await.map_err(|_| OidcError::Discovery("the userinfo answer is not JSON".into()))
    }
}
