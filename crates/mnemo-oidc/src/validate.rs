//! The checks every token goes through, and the claims mnemo reads from it.
//!
//! The header is read by hand before anything else so that its `alg` is judged against an
//! allow-list of asymmetric algorithms first: `none` and `HS*` are refused without looking up a
//! key, which is what defeats an HMAC "signed" with the provider's public key.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Why a token was refused. Callers log it at debug level at most and answer a plain 401: the
/// reason is for the operator, never for the presenter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("not a well-formed JWT")]
    Malformed,
    #[error("an opaque token (mnemo accepts JWTs only)")]
    Opaque,
    #[error("its algorithm is not an accepted asymmetric one")]
    Algorithm,
    #[error("its key is not among the provider's current keys")]
    UnknownKey,
    #[error("the provider's keys could not be fetched")]
    KeysUnavailable,
    #[error("its signature does not verify")]
    Signature,
    #[error("it has expired")]
    Expired,
    #[error("it is not valid yet")]
    NotYetValid,
    #[error("it was issued by another issuer")]
    Issuer,
    #[error("it was issued for another audience")]
    Audience,
    #[error("its nonce does not match the sign-in")]
    Nonce,
    #[error("a required claim is missing")]
    MissingClaim,
}

/// The algorithms a provider may sign with. No `HS*` (a shared secret is not a provider's key)
/// and no `none`.
const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The parts of a JOSE header used to pick the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub alg: Algorithm,
    pub kid: Option<String>,
}

#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
}

/// Reads and judges the header of `token`.
pub fn parse_header(token: &str) -> Result<Header, TokenError> {
    let mut parts = token.split('.');
    let (Some(head), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(if token.contains('.') { TokenError::Malformed } else { TokenError::Opaque });
    };
    let bytes = URL_SAFE_NO_PAD.decode(head).map_err(|_| TokenError::Malformed)?;
    let raw: RawHeader = serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)?;
    if raw.crit.is_some() {
        // No extension is understood here, so one marked critical must be refused (RFC 7515 4.1.11).
        return Err(TokenError::Malformed);
    }
    let alg = match raw.alg.as_str() {
        "RS256" => Algorithm::RS256,
        "RS384" => Algorithm::RS384,
        "RS512" => Algorithm::RS512,
        "PS256" => Algorithm::PS256,
        "PS384" => Algorithm::PS384,
        "PS512" => Algorithm::PS512,
        "ES256" => Algorithm::ES256,
        "ES384" => Algorithm::ES384,
        "EdDSA" => Algorithm::EdDSA,
        _ => return Err(TokenError::Algorithm),
    };
    debug_assert!(ACCEPTED.contains(&alg));
    Ok(Header { alg, kid: raw.kid })
}

/// What a token must say.
#[derive(Debug)]
pub struct Expect<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    /// The sign-in's nonce; `None` for a bearer token, which is not tied to one sign-in.
    pub nonce: Option<&'a str>,
    pub leeway: Duration,
}

/// Verifies `token`'s signature with `key` and its claims against `expect`.
pub fn check(token: &str, header: &Header, key: &DecodingKey, expect: &Expect<'_>) -> Result<Claims, TokenError> {
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.leeway = expect.leeway.as_secs();
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.set_issuer(&[expect.issuer]);
    validation.set_audience(&[expect.client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation).map_err(|e| match e.kind() {
        ErrorKind::InvalidSignature | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidRsaKey(_) => TokenError::Signature,
        ErrorKind::ExpiredSignature => TokenError::Expired,
        ErrorKind::ImmatureSignature => TokenError::NotYetValid,
        ErrorKind::InvalidIssuer => TokenError::Issuer,
        ErrorKind::InvalidAudience => TokenError::Audience,
        ErrorKind::MissingRequiredClaim(_) => TokenError::MissingClaim,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => TokenError::Algorithm,
        _ => TokenError::Malformed,
    })?;
    let claims = data.claims;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    // `iat` in the future (beyond the leeway) is a token minted by a wrong clock or for later.
    if let Some(iat) = claims.get("iat") {
        let iat = iat.as_u64().ok_or(TokenError::Malformed)?;
        if iat > now + expect.leeway.as_secs() {
            return Err(TokenError::NotYetValid);
        }
    }
    // With several audiences, OpenID Connect Core 3.1.3.7 wants `azp` to name us; when present it
    // must name us anyway.
    let several_audiences = matches!(claims.get("aud"), Some(Value::Array(a)) if a.len() > 1);
    match claims.get("azp") {
        Some(Value::String(azp)) if azp == expect.client_id => {}
        Some(_) => return Err(TokenError::Audience),
        None if several_audiences => return Err(TokenError::Audience),
        None => {}
    }
    if let Some(expected) = expect.nonce {
        match claims.get("nonce") {
            Some(Value::String(n)) if constant_time_eq(n.as_bytes(), expected.as_bytes()) => {}
            _ => return Err(TokenError::Nonce),
        }
    }
    Claims::from_map(claims)
}

/// Compares two byte strings in time that depends on their lengths only.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The claims of a validated token (or of a sign-in's ID token merged with the provider's
/// userinfo answer).
#[derive(Debug, Clone, PartialEq)]
pub struct Claims {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: Option<bool>,
    pub name: Option<String>,
    /// Every claim, for the ones named by configuration (the groups claim).
    pub all: Map<String, Value>,
}

impl Claims {
    pub(crate) fn from_map(all: Map<String, Value>) -> Result<Self, TokenError> {
        let string = |name: &str| all.get(name).and_then(Value::as_str).map(str::to_owned);
        let issuer = string("iss").ok_or(TokenError::MissingClaim)?;
        let subject = string("sub").filter(|s| !s.is_empty()).ok_or(TokenError::MissingClaim)?;
        Ok(Self {
            issuer,
            subject,
            email: string("email"),
            email_verified: all.get("email_verified").and_then(Value::as_bool),
            name: string("name"),
            all,
        })
    }

    /// The groups named by the claim `claim`: an array of strings (other entries skipped), or one
    /// string; nothing when the claim is absent or of another type.
    pub fn groups(&self, claim: &str) -> Vec<String> {
        match self.all.get(claim) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            Some(Value::String(one)) => vec![one.clone()],
            _ => Vec::new(),
        }
    }

    /// Adds the claims of the provider's userinfo answer that the ID token lacks (OpenID Connect
    /// Core 5.3.2: the caller has checked that its `sub` is this token's).
    pub(crate) fn merge_userinfo(&mut self, userinfo: Map<String, Value>) {
        for (name, value) in userinfo {
            if matches!(name.as_str(), "iss" | "sub" | "aud" | "exp" | "iat" | "nbf" | "nonce" | "azp") {
                continue;
            }
            self.all.entry(name).or_insert(value);
        }
        let string = |name: &str| self.all.get(name).and_then(Value::as_str).map(str::to_owned);
        self.email = string("email");
        self.name = string("name");
        self.email_verified = self.all.get("email_verified").and_then(Value::as_bool);
    }
}
