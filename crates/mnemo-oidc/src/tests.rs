//! Against a small provider served in the test (discovery, JWKS, token and userinfo endpoints),
//! with ES256 keys generated here. The end-to-end tests against the real `oidc-provider` are in
//! `browser/test_oidc.py`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

use super::*;

const CLIENT: &str = "mnemo-test";
const SECRET: &str = "s3cret-client-secret-value";

struct Key {
    kid: String,
    pkcs8: Vec<u8>,
    jwk: Value,
}

impl Key {
    fn generate(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        Self { kid: kid.into(), pkcs8: pkcs8.as_ref().to_vec(), jwk }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8)).unwrap()
    }
}

#[derive(Default)]
struct FakeState {
    issuer: String,
    served_issuer: Option<String>,
    jwks: Vec<Value>,
    jwks_fetches: usize,
    /// The code the token endpoint accepts, with its PKCE challenge and the ID token it returns.
    code: Option<(String, String, String)>,
    userinfo: Value,
}

type Shared = Arc<Mutex<FakeState>>;

async fn discovery(State(s): State<Shared>) -> Json<Value> {
    let s = s.lock().unwrap();
    let issuer = s.served_issuer.clone().unwrap_or_else(|| s.issuer.clone());
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{}/auth", s.issuer),
        "token_endpoint": format!("{}/token", s.issuer),
        "jwks_uri": format!("{}/jwks", s.issuer),
        "userinfo_endpoint": format!("{}/me", s.issuer),
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
}

async fn jwks(State(s): State<Shared>) -> Json<Value> {
    let mut s = s.lock().unwrap();
    s.jwks_fetches += 1;
    Json(json!({ "keys": s.jwks }))
}

async fn token(
    State(s): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<std::collections::HashMap<String, String>>,
) -> Response {
    let expected_auth =
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT}:{SECRET}")));
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected_auth.as_str()) {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"}))).into_response();
    }
    let mut s = s.lock().unwrap();
    let Some((code, challenge, id_token)) = s.code.clone() else {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))).into_response();
    };
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    if form.get("code") != Some(&code) || flow::pkce_challenge(&verifier) != challenge {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant", "error_description": SECRET})))
            .into_response();
    }
    // A code is redeemed once.
    s.code = None;
    Json(json!({"access_token": "opaque-access", "token_type": "Bearer", "id_token": id_token})).into_response()
}

async fn userinfo(State(s): State<Shared>, headers: HeaderMap) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer opaque-access") {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Json(s.lock().unwrap().userinfo.clone()).into_response()
}

async fn serve() -> (String, Shared) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let state: Shared = Arc::new(Mutex::new(FakeState { issuer: issuer.clone(), ..FakeState::default() }));
    let app = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/token", post(token))
        .route("/me", get(userinfo))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (issuer, state)
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn config(issuer: &str) -> OidcConfig {
    let mut c = OidcConfig::new(issuer, CLIENT, Secret::new(SECRET));
    c.jwks_min_refetch = Duration::ZERO;
    c
}

async fn provider(min_refetch: Duration) -> (Provider, Shared, Key) {
    let (issuer, state) = serve().await;
    let key = Key::generate("k1");
    state.lock().unwrap().jwks = vec![key.jwk.clone()];
    let mut c = config(&issuer);
    c.jwks_min_refetch = min_refetch;
    (Provider::discover(c).await.unwrap(), state, key)
}

fn claims(issuer: &str) -> Value {
    json!({"iss": issuer, "sub": "alice", "aud": CLIENT, "exp": now() + 300, "iat": now(), "nonce": "n-1", "email": "a@example.com", "groups": ["eng", "ops"]})
}

fn with(mut base: Value, changes: &[(&str, Value)]) -> Value {
    for (k, v) in changes {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(*k);
        } else {
            base[*k] = v.clone();
        }
    }
    base
}

fn unsigned(claims: &Value, alg: &str) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": alg, "typ": "JWT"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

#[tokio::test]
async fn hostile_tokens_are_refused_and_a_good_one_accepted() {
    let (p, _state, key) = provider(Duration::ZERO).await;
    let iss = p.issuer().to_owned();
    let other = Key::generate("k1");
    let stranger = Key::generate("k-unknown");
    let base = claims(&iss);
    let hs256_with_public_key = {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some(key.kid.clone());
        let public = serde_json::to_vec(&key.jwk).unwrap();
        jsonwebtoken::encode(&h, &base, &EncodingKey::from_secret(&public)).unwrap()
    };
    let table: Vec<(&str, String, Result<(), TokenError>)> = vec![
        ("good", key.sign(&base), Ok(())),
        ("expired", key.sign(&with(base.clone(), &[("exp", json!(now() - 3600))])), Err(TokenError::Expired)),
        (
            "not yet valid (nbf)",
            key.sign(&with(base.clone(), &[("nbf", json!(now() + 3600))])),
            Err(TokenError::NotYetValid),
        ),
        (
            "issued in the future",
            key.sign(&with(base.clone(), &[("iat", json!(now() + 3600))])),
            Err(TokenError::NotYetValid),
        ),
        (
            "within the leeway",
            key.sign(&with(base.clone(), &[("exp", json!(now() - 20)), ("nbf", json!(now() + 20))])),
            Ok(()),
        ),
        ("wrong audience", key.sign(&with(base.clone(), &[("aud", json!("someone-else"))])), Err(TokenError::Audience)),
        (
            "several audiences, no azp",
            key.sign(&with(base.clone(), &[("aud", json!([CLIENT, "other"]))])),
            Err(TokenError::Audience),
        ),
        (
            "several audiences, azp us",
            key.sign(&with(base.clone(), &[("aud", json!([CLIENT, "other"])), ("azp", json!(CLIENT))])),
            Ok(()),
        ),
        ("azp another client", key.sign(&with(base.clone(), &[("azp", json!("other"))])), Err(TokenError::Audience)),
        (
            "wrong issuer",
            key.sign(&with(base.clone(), &[("iss", json!("https://evil.example"))])),
            Err(TokenError::Issuer),
        ),
        ("no sub", key.sign(&with(base.clone(), &[("sub", Value::Null)])), Err(TokenError::MissingClaim)),
        ("no exp", key.sign(&with(base.clone(), &[("exp", Value::Null)])), Err(TokenError::MissingClaim)),
        ("bad signature (another key, same kid)", other.sign(&base), Err(TokenError::Signature)),
        (
            "tampered claims",
            {
                let t = key.sign(&base);
                let parts: Vec<&str> = t.split('.').collect();
                let forged = URL_SAFE_NO_PAD.encode(with(base.clone(), &[("sub", json!("admin"))]).to_string());
                format!("{}.{}.{}", parts[0], forged, parts[2])
            },
            Err(TokenError::Signature),
        ),
        ("alg none", unsigned(&base, "none"), Err(TokenError::Algorithm)),
        ("alg None", unsigned(&base, "None"), Err(TokenError::Algorithm)),
        ("HS256 signed with the provider's public key", hs256_with_public_key, Err(TokenError::Algorithm)),
        ("unknown kid", stranger.sign(&base), Err(TokenError::UnknownKey)),
        ("opaque", "2YotnFZFEjr1zCsicMWpAA".into(), Err(TokenError::Opaque)),
        ("garbage", "a.b.c".into(), Err(TokenError::Malformed)),
    ];
    for (name, token, want) in table {
        let got = p.validate_bearer(&token).await.map(|_| ());
        assert_eq!(got, want, "{name}");
    }
}

#[tokio::test]
async fn the_id_token_of_a_sign_in_must_carry_its_nonce() {
    let (p, _state, key) = provider(Duration::ZERO).await;
    let base = claims(p.issuer());
    assert!(p.validate_id_token(&key.sign(&base), "n-1").await.is_ok());
    assert_eq!(p.validate_id_token(&key.sign(&base), "n-2").await, Err(TokenError::Nonce));
    let no_nonce = with(base, &[("nonce", Value::Null)]);
    assert_eq!(p.validate_id_token(&key.sign(&no_nonce), "n-1").await, Err(TokenError::Nonce));
}

#[tokio::test]
async fn a_rotated_out_key_is_refused_once_the_provider_drops_it() {
    let (p, state, old) = provider(Duration::ZERO).await;
    let base = claims(p.issuer());
    assert!(p.validate_bearer(&old.sign(&base)).await.is_ok());
    let new = Key::generate("k2");
    state.lock().unwrap().jwks = vec![new.jwk.clone()];
    // The new key's unknown kid refetches the set, which no longer holds the old key.
    assert!(p.validate_bearer(&new.sign(&base)).await.is_ok());
    assert_eq!(p.validate_bearer(&old.sign(&base)).await, Err(TokenError::UnknownKey));
}

#[tokio::test]
async fn a_stale_key_set_is_refetched_even_for_a_known_kid() {
    let (issuer, state) = serve().await;
    let old = Key::generate("k1");
    state.lock().unwrap().jwks = vec![old.jwk.clone()];
    let mut c = config(&issuer);
    c.jwks_max_age = Duration::ZERO;
    let p = Provider::discover(c).await.unwrap();
    assert!(p.validate_bearer(&old.sign(&claims(&issuer))).await.is_ok());
    state.lock().unwrap().jwks = vec![Key::generate("k2").jwk];
    assert_eq!(p.validate_bearer(&old.sign(&claims(&issuer))).await, Err(TokenError::UnknownKey));
}

#[tokio::test]
async fn unknown_kids_refetch_the_keys_at_most_once_per_interval() {
    let (p, state, _key) = provider(Duration::from_secs(3600)).await;
    let base = claims(p.issuer());
    for i in 0..20 {
        let forged = Key::generate(&format!("forged-{i}"));
        assert_eq!(p.validate_bearer(&forged.sign(&base)).await, Err(TokenError::UnknownKey));
    }
    assert_eq!(state.lock().unwrap().jwks_fetches, 1);
}

#[tokio::test]
async fn discovery_refuses_another_issuer_and_plain_http_off_loopback() {
    let (issuer, state) = serve().await;
    state.lock().unwrap().served_issuer = Some(format!("{issuer}/"));
    match Provider::discover(config(&issuer)).await {
        Err(OidcError::IssuerMismatch { .. }) => {}
        other => panic!("{other:?}"),
    }
    for bad in ["http://idp.example.com", "ftp://127.0.0.1", "not a url"] {
        assert!(matches!(Provider::discover(config(bad)).await, Err(OidcError::BadIssuer(_))), "{bad}");
    }
}

#[tokio::test]
async fn a_sign_in_redeems_its_code_with_pkce_and_reads_groups_from_userinfo() {
    let (p, state, key) = provider(Duration::ZERO).await;
    let (url, sign_in) = p.begin("http://127.0.0.1:1/console/oidc/callback");
    let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["state"], sign_in.state);
    assert_eq!(query["nonce"], sign_in.nonce);
    assert!(query["scope"].split(' ').any(|s| s == "openid"));
    assert!(!url.as_str().contains(&sign_in.pkce_verifier));
    assert!(sign_in.state_matches(&query["state"]));
    assert!(!sign_in.state_matches("forged"));

    let id_claims = with(claims(p.issuer()), &[("nonce", json!(sign_in.nonce)), ("groups", Value::Null)]);
    state.lock().unwrap().userinfo = json!({"sub": "alice", "groups": ["eng"], "name": "Alice"});
    state.lock().unwrap().code = Some(("c-1".into(), query["code_challenge"].clone(), key.sign(&id_claims)));
    let claims = p.finish(&sign_in, "c-1", "http://127.0.0.1:1/console/oidc/callback").await.unwrap();
    assert_eq!(claims.subject, "alice");
    assert_eq!(claims.groups("groups"), vec!["eng".to_owned()]);
    assert_eq!(claims.name.as_deref(), Some("Alice"));

    // Replayed: the provider refuses, and the error carries its code, not its prose.
    let err = p.finish(&sign_in, "c-1", "http://127.0.0.1:1/console/oidc/callback").await.unwrap_err();
    assert!(matches!(&err, OidcError::Exchange(c) if c == "invalid_grant"), "{err:?}");
    // A wrong verifier is refused by the provider, whose echo of the secret never surfaces.
    state.lock().unwrap().code = Some(("c-2".into(), query["code_challenge"].clone(), key.sign(&id_claims)));
    let mut other = sign_in.clone();
    other.pkce_verifier = "x".repeat(43);
    let err = p.finish(&other, "c-2", "http://127.0.0.1:1/console/oidc/callback").await.unwrap_err();
    assert!(!err.to_string().contains(SECRET));
}

#[tokio::test]
async fn the_userinfo_answer_of_another_subject_is_refused() {
    let (p, state, key) = provider(Duration::ZERO).await;
    let (url, sign_in) = p.begin("http://127.0.0.1:1/cb");
    let challenge = url.query_pairs().find(|(k, _)| k == "code_challenge").unwrap().1.into_owned();
    let id_claims = with(claims(p.issuer()), &[("nonce", json!(sign_in.nonce))]);
    state.lock().unwrap().userinfo = json!({"sub": "mallory", "groups": ["admins"]});
    state.lock().unwrap().code = Some(("c".into(), challenge, key.sign(&id_claims)));
    assert!(p.finish(&sign_in, "c", "http://127.0.0.1:1/cb").await.is_err());
}

#[tokio::test]
async fn nothing_secret_shows_in_debug() {
    let (p, _state, _key) = provider(Duration::ZERO).await;
    let (_, sign_in) = p.begin("http://127.0.0.1:1/cb");
    let shown = format!("{p:?} {sign_in:?}");
    assert!(!shown.contains(SECRET));
    assert!(
        !shown.contains(&sign_in.nonce) && !shown.contains(&sign_in.pkce_verifier) && !shown.contains(&sign_in.state)
    );
}

#[test]
fn jwt_shape() {
    for (token, jwt) in [
        ("a.b.c", true),
        ("eyJ.eyJ.sig-_", true),
        ("a.b.", false),
        ("a.b", false),
        ("sk-mnemo-abc", false),
        ("a.b.c.d", false),
        ("a+b.c.d", false),
    ] {
        assert_eq!(looks_like_jwt(token), jwt, "{token}");
    }
}

#[test]
fn groups_claim_shapes() {
    let c = |v: Value| Claims::from_map(json!({"iss": "i", "sub": "s", "g": v}).as_object().unwrap().clone()).unwrap();
    assert_eq!(c(json!(["a", 1, "b"])).groups("g"), vec!["a", "b"]);
    assert_eq!(c(json!("a")).groups("g"), vec!["a"]);
    assert!(c(json!({"a": 1})).groups("g").is_empty());
    assert!(c(json!("a")).groups("other").is_empty());
}
