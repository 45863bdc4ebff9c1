//! OpenID Connect for mnemo: people signing in to the console with their company's identity
//! provider, and their tokens accepted on the API.
//!
//! [`Provider::discover`] reads the provider's discovery document (its `issuer` must equal the
//! configured one exactly, so a document served for another issuer is never trusted).
//! [`Provider::begin`] starts an authorization-code sign-in with PKCE (S256), `state` and
//! `nonce`; [`Provider::finish`] redeems the code with the client's id and secret and validates
//! the ID token. [`Provider::validate_bearer`] validates a token presented on the API.
//!
//! Every token is checked the same way ([`validate`]): an asymmetric algorithm only (`none` and
//! every `HS*` are refused before a key is looked at, so an HMAC "signed" with the provider's
//! public key never verifies), a key from the provider's JWKS by `kid` ([`jwks`]: an unknown `kid`
//! refetches the set at most once per `jwks_min_refetch`, and a key the provider dropped is
//! dropped here too), the signature, `iss`, `aud` (our client id), `azp`, `exp`, `nbf` and `iat`
//! with a small leeway, and the `nonce` of the sign-in.
//!
//! Bearer tokens must be JWTs (an ID token, or a JWT access token whose `aud` holds our client
//! id). Opaque access tokens are refused, not sent to the provider's userinfo endpoint: a call to
//! the provider on every API request would hand anyone holding a random string a way to make
//! mnemo hammer the provider, and tie the API's latency and availability to it.
//!
//! This crate knows nothing of mnemo's people, roles or HTTP routes; the console and the server
//! map [`Claims`] to people.

use std::time::Duration;

use mnemo_api::Secret;
use serde::Deserialize;
use url::Url;

mod flow;
pub mod jwks;
pub mod validate;

pub use flow::SignIn;
pub use validate::{Claims, TokenError};

/// What can go wrong talking to the identity provider. Messages never hold a token, a code, the
/// client secret or a PKCE verifier.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the OpenID Connect issuer {0:?} is not usable: it must be an https URL (http only on a loopback address)")]
    BadIssuer(String),
    #[error("the identity provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the identity provider's discovery document is not usable: {0}")]
    Discovery(String),
    #[error(
        "the identity provider's discovery document names the issuer {found:?}, not {expected:?}; --oidc-issuer must be exactly the provider's issuer"
    )]
    IssuerMismatch { expected: String, found: String },
    #[error("the identity provider refused the authorization code ({0})")]
    Exchange(String),
    #[error("the token was refused: {0}")]
    Token(#[from] TokenError),
}

/// How mnemo is registered at the provider.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The issuer URL, exactly as the provider writes it in its tokens.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// Scopes asked for at sign-in; `openid` is always sent.
    pub scopes: Vec<String>,
    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    pub leeway: Duration,
    /// An unknown `kid` refetches the JWKS at most this often, so a stream of forged `kid`s cannot
    /// make mnemo hammer the provider.
    pub jwks_min_refetch: Duration,
    /// The JWKS is refetched when older than this, so a key the provider rotated out stops
    /// verifying even if no unknown `kid` came along.
    pub jwks_max_age: Duration,
}

impl OidcConfig {
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>, secret: Secret) -> Self {
        Self {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: secret,
            scopes: vec!["openid".into(), "email".into(), "profile".into()],
            leeway: Duration::from_secs(60),
            jwks_min_refetch: Duration::from_secs(10),
            jwks_max_age: Duration::from_secs(300),
        }
    }
}

/// The parts of the discovery document mnemo uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub jwks_uri: Url,
    #[serde(default)]
    pub userinfo_endpoint: Option<Url>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub end_session_endpoint: Option<Url>,
}

/// A discovered provider: its metadata, its key cache and the HTTP client to reach it.
#[derive(Debug)]
pub struct Provider {
    config: OidcConfig,
    metadata: Metadata,
    http: reqwest::Client,
    jwks: jwks::JwksCache,
}

/// Whether `url` may carry OpenID Connect traffic: https, or http on a loopback host (a
/// provider on the same machine, as in tests).
fn url_allowed(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d == "localhost",
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// The HTTP client for the provider: TLS through rustls, no redirects followed (a token endpoint
/// that redirects is misconfigured, and following it would send the code elsewhere), timeouts.
pub fn http_client() -> Result<reqwest::Client, OidcError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| OidcError::Unreachable(e.without_url().to_string()))
}

impl Provider {
    /// Reads `<issuer>/.well-known/openid-configuration` and checks it.
    pub async fn discover(config: OidcConfig) -> Result<Self, OidcError> {
        Self::discover_with(config, http_client()?).await
    }

    pub async fn discover_with(config: OidcConfig, http: reqwest::Client) -> Result<Self, OidcError> {
        let issuer = Url::parse(&config.issuer)
            .ok()
            .filter(url_allowed)
            .ok_or_else(|| OidcError::BadIssuer(config.issuer.clone()))?;
        let well_known = format!("{}/.well-known/openid-configuration", issuer.as_str().trim_end_matches('/'));
        let response = http
            .get(&well_known)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| OidcError::Unreachable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(OidcError::Discovery(format!("{well_known} answered {}", response.status())));
        }
        let metadata: Metadata =
            response.json().await.map_err(|e| OidcError::Discovery(e.without_url().to_string()))?;
        if metadata.issuer != config.issuer {
            return Err(OidcError::IssuerMismatch { expected: config.issuer.clone(), found: metadata.issuer });
        }
        for (name, url) in [
            ("authorization_endpoint", Some(&metadata.authorization_endpoint)),
            ("token_endpoint", Some(&metadata.token_endpoint)),
            ("jwks_uri", Some(&metadata.jwks_uri)),
            ("userinfo_endpoint", metadata.userinfo_endpoint.as_ref()),
        ] {
            if let Some(url) = url
                && !url_allowed(url)
            {
                return Err(OidcError::Discovery(format!("{name} {url} is not https")));
            }
        }
        let jwks = jwks::JwksCache::new(metadata.jwks_uri.clone(), config.jwks_min_refetch, config.jwks_max_age);
        Ok(Self { config, metadata, http, jwks })
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    pub fn client_id(&self) -> &str {
        &self.config.client_id
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Validates an ID token of a sign-in: everything [`validate`] checks, and its `nonce`.
    pub async fn validate_id_token(&self, token: &str, nonce: &str) -> Result<Claims, TokenError> {
        self.validate(token, Some(nonce)).await
    }

    /// Validates a token presented as `Authorization: Bearer` on the API: a JWT of this issuer
    /// for our client id (an ID token, or a JWT access token with our client id in `aud`).
    /// Opaque tokens are refused ([`TokenError::Opaque`]); see the crate docs for why.
    pub async fn validate_bearer(&self, token: &str) -> Result<Claims, TokenError> {
        self.validate(token, None).await
    }

    async fn validate(&self, token: &str, nonce: Option<&str>) -> Result<Claims, TokenError> {
        let header = validate::parse_header(token)?;
        let key = self.jwks.key_for(&self.http, &header).await?;
        validate::check(
            token,
            &header,
            &key,
            &validate::Expect {
                issuer: &self.config.issuer,
                client_id: &self.config.client_id,
                nonce,
                leeway: self.config.leeway,
            },
        )
    }
}

/// The host of an issuer URL (the provider's default display name), or the URL itself.
pub fn issuer_host(issuer: &str) -> String {
    Url::parse(issuer).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_else(|| issuer.to_owned())
}

/// Whether `token` has the shape of a JWT (three base64url parts), the only kind of bearer token
/// [`Provider::validate_bearer`] looks at.
pub fn looks_like_jwt(token: &str) -> bool {
    let mut parts = 0;
    for part in token.split('.') {
        parts += 1;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return false;
        }
    }
    parts == 3
}

#[cfg(test)]
mod tests;
