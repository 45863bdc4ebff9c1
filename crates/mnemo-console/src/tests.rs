//! The console's handlers and templates, driven in-process through the router on a real
//! store (SQLite, or the backend `MNEMO_TEST_DATABASE` names): authentication, cookie flags, CSRF refusals, escaping, actors, conflicts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use mnemo_api::{Actor, MemoryPath, SessionId, View};
use mnemo_store::{ListMemoryStores, ListMemoryVersions, NewEnvironment, NewMemoryStore, StoreError, Streamed};
use mnemo_store_tests::{TestStore, from_env};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;
use tower::ServiceExt;

use crate::{Console, ConsoleConfig, Hooks};

const KEY: &str = "sk-mnemo-test-key-0123456789abcdefghijklmnop";

#[derive(Default)]
struct CountingHooks {
    credentials_changed: AtomicUsize,
    /// What embeds search queries (`None`: the server ranks by words only).
    embedder: Option<Arc<dyn mnemo_store::search::QueryEmbedder>>,
}

#[async_trait]
impl Hooks for CountingHooks {
    fn credentials_changed(&self) {
        self.credentials_changed.fetch_add(1, Ordering::SeqCst);
    }

    fn query_embedder(&self) -> Option<Arc<dyn mnemo_store::search::QueryEmbedder>> {
        self.embedder.clone()
    }

    async fn subscribe(
        &self,
        _: &mnemo_api::WorkspaceId,
        _: &SessionId,
    ) -> Result<broadcast::Receiver<Streamed>, StoreError> {
        Ok(broadcast::channel(4).1)
    }
}

struct Harness {
    store: TestStore,
    hooks: Arc<CountingHooks>,
    app: Router,
    api_key: mnemo_api::ApiKeyId,
}

async fn harness_with(config: ConsoleConfig) -> Harness {
    harness_with_hooks(config, CountingHooks::default()).await
}

async fn harness_with_hooks(config: ConsoleConfig, hooks: CountingHooks) -> Harness {
    let store = from_env().open(mnemo_store::Limits::default()).await;
    let api_key = store.ensure_api_key(Sha256::digest(KEY.as_bytes()).into(), "test").await.unwrap();
    let hooks = Arc::new(hooks);
    let console = Console::new(Arc::clone(&store.store), Arc::clone(&hooks) as Arc<dyn Hooks>, config);
    Harness { app: crate::router(console), store, hooks, api_key }
}

async fn harness() -> Harness {
    harness_with(ConsoleConfig::default()).await
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn location(&self) -> &str {
        self.headers.get(header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    fn set_cookies(&self) -> Vec<String> {
        self.headers.get_all(header::SET_COOKIE).iter().map(|v| v.to_str().unwrap().to_owned()).collect()
    }

    /// The value of the hidden field `name` in the page's first form that has one.
    fn field(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let at = self.body.find(&marker).unwrap_or_else(|| panic!("no field {name} in {}", self.body)) + marker.len();
        self.body[at..].split('"').next().unwrap().to_owned()
    }
}

impl Harness {
    async fn send(&self, req: Request<Body>) -> Answer {
        let response = self.app.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    }

    async fn get(&self, path: &str, cookie: &str) -> Answer {
        let mut req = Request::get(path).header(header::HOST, "console.test");
        if !cookie.is_empty() {
            req = req.header(header::COOKIE, cookie);
        }
        self.send(req.body(Body::empty()).unwrap()).await
    }

    async fn post(&self, path: &str, cookie: &str, form: &[(&str, &str)], extra: &[(&str, &str)]) -> Answer {
        let body = serde_urlencoded::to_string(form).unwrap();
        let mut req = Request::post(path)
            .header(header::HOST, "console.test")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::COOKIE, cookie);
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        self.send(req.body(Body::from(body)).unwrap()).await
    }

    async fn memory_store(&self, name: &str) -> mnemo_api::MemoryStore {
        let new = NewMemoryStore { name: name.into(), description: String::new(), metadata: Default::default() };
        self.store.create_memory_store(&self.store.default_workspace().await.unwrap(), new).await.unwrap()
    }

    /// A memory at `path` in `store` holding `content`, written by [`someone`].
    async fn memory(&self, store: &mnemo_api::MemoryStore, path: &str, content: &str) -> mnemo_api::Memory {
        let ws = self.store.default_workspace().await.unwrap();
        let path = MemoryPath::parse(path).unwrap();
        self.store.create_memory(&ws, &store.id, path, content.into(), someone()).await.unwrap()
    }

    /// What `memory` holds now.
    async fn content_of(&self, store: &mnemo_api::MemoryStore, memory: &mnemo_api::Memory) -> Option<String> {
        let ws = self.store.default_workspace().await.unwrap();
        self.store.get_memory(&ws, &store.id, &memory.id).await.unwrap().content
    }

    async fn self_hosted_environment(&self) -> mnemo_api::Environment {
        let ws = self.store.default_workspace().await.unwrap();
        self.store
            .create_environment(
                &ws,
                NewEnvironment {
                    name: "e".into(),
                    description: None,
                    metadata: Default::default(),
                    config: serde_json::json!({"type": "self_hosted"}),
                    scope: None,
                },
            )
            .await
            .unwrap()
    }

    /// Signs in with `key`; returns the session cookie (`name=value`) and the CSRF token.
    async fn sign_in_with(&self, key: &str, extra: &[(&str, &str)]) -> (Answer, String) {
        let form = self.get("/console/sign-in", "").await;
        let token = form.field("token");
        let cookie = format!("mnemo_console_sign_in={token}");
        let answer = self
            .post("/console/sign-in", &cookie, &[("api_key", key), ("token", &token), ("next", "/console")], extra)
            .await;
        (answer, cookie)
    }

    async fn signed_in(&self) -> (String, String) {
        self.signed_in_as(KEY).await
    }
}

/// An actor other than the signed-in person.
fn someone() -> Actor {
    Actor::UserActor { user_id: "u".into() }
}

#[tokio::test]
async fn pages_ask_to_sign_in_first_and_come_back() {
    let h = harness().await;
    let home = h.get("/console", "").await;
    assert_eq!((home.status, home.location()), (StatusCode::SEE_OTHER, "/console/sign-in"));
    let deep = h.get("/console/sessions?page=x", "").await;
    assert_eq!(deep.location(), "/console/sign-in?next=%2Fconsole%2Fsessions%3Fpage%3Dx");
    let bogus = h.get("/console", "mnemo_console=mcs_not-a-session").await;
    assert_eq!(bogus.location(), "/console/sign-in");
    let root = h.get("/", "").await;
    assert_eq!(root.location(), "/console");
}

#[tokio::test]
async fn every_page_carries_a_strict_policy() {
    let h = harness().await;
    let page = h.get("/console/sign-in", "").await;
    let csp = page.headers.get(header::CONTENT_SECURITY_POLICY).unwrap().to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'")
            && csp.contains("script-src 'self'")
            && csp.contains("frame-ancestors 'none'")
    );
    assert!(!csp.contains("unsafe-inline") && !csp.contains("http"), "{csp}");
    assert_eq!(page.headers.get(header::X_FRAME_OPTIONS).unwrap(), "DENY");
    assert_eq!(page.headers.get(header::X_CONTENT_TYPE_OPTIONS).unwrap(), "nosniff");
    assert_eq!(page.headers.get(header::CACHE_CONTROL).unwrap(), "no-store");
    // No inline script or style anywhere: everything comes from the console's own files.
    assert!(!page.body.contains("<script>") && !page.body.contains("style="), "{}", page.body);
    assert!(page.body.contains("<label for=\"api_key\">API key</label>"));
}

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie_and_never_echoes_the_key() {
    let h = harness().await;
    let (answer, _) = h.sign_in_with(KEY, &[]).await;
    assert_eq!((answer.status, answer.location()), (StatusCode::SEE_OTHER, "/console"));
    let session = answer.set_cookies().into_iter().find(|c| c.starts_with("mnemo_console=")).unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=43200"] {
        assert!(session.contains(flag), "{session} lacks {flag}");
    }
    assert!(!session.contains("Secure"), "plain HTTP must not mark the cookie Secure: {session}");
    assert!(!session.contains(KEY));

    let (behind_tls, _) = h.sign_in_with(KEY, &[("x-forwarded-proto", "https")]).await;
    assert!(behind_tls.set_cookies().iter().all(|c| c.contains("; Secure")), "{:?}", behind_tls.set_cookies());
    let forced = harness_with(ConsoleConfig { secure_cookies: true, ..ConsoleConfig::default() }).await;
    let (answer, _) = forced.sign_in_with(KEY, &[]).await;
    assert!(answer.set_cookies().iter().all(|c| c.contains("; Secure")));
}

#[tokio::test]
async fn wrong_keys_environment_keys_and_stale_forms_do_not_sign_in() {
    let h = harness().await;
    let env = h.self_hosted_environment().await;
    let env_key = "sk-mnemo-env-test-0123456789abcdefghijklmnopq";
    let ws = h.store.default_workspace().await.unwrap();
    h.store.create_environment_key(&ws, &env.id, Sha256::digest(env_key.as_bytes()).into()).await.unwrap();
    for (key, says) in [
        ("sk-wrong-0123456789abcdefghijklmnopqrstuv", "not known to this server"),
        (env_key, "environment key"),
        ("", "enter an API key"),
    ] {
        let (answer, _) = h.sign_in_with(key, &[]).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{key}");
        assert!(answer.body.contains(says), "{key}: {}", answer.body);
        assert!(answer.set_cookies().iter().all(|c| !c.starts_with("mnemo_console=")), "{key}");
        assert!(!answer.body.contains(env_key), "a refused key is echoed back");
    }
    // A sign-in form from elsewhere (no matching token cookie) is refused even with a real key.
    let stale = h.post("/console/sign-in", "", &[("api_key", KEY), ("token", "forged")], &[]).await;
    assert_eq!(stale.status, StatusCode::UNAUTHORIZED);
    assert!(stale.body.contains("expired"));
}

#[tokio::test]
async fn a_form_without_the_right_token_or_from_another_site_changes_nothing() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    type Pairs<'a> = &'a [(&'a str, &'a str)];
    let cases: [(Pairs<'_>, Pairs<'_>); 4] = [
        (&[("name", "a")], &[]),
        (&[("name", "b"), ("csrf", "0000")], &[]),
        (&[("name", "c"), ("csrf", &csrf)], &[("sec-fetch-site", "cross-site")]),
        (&[("name", "d"), ("csrf", &csrf)], &[("origin", "http://evil.test")]),
    ];
    for (form, extra) in cases {
        let answer = h.post("/console/stores", &cookie, form, extra).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{form:?} {extra:?}: {}", answer.body);
        assert!(answer.body.contains("reload the page"), "{}", answer.body);
    }
    let stores = |h: &Harness| {
        let store = Arc::clone(&h.store.store);
        async move {
            store
                .list_memory_stores(
                    &store.default_workspace().await.unwrap(),
                    ListMemoryStores {
                        include_archived: true,
                        created_at_gte: None,
                        created_at_lte: None,
                        limit: 100,
                        after: None,
                    },
                )
                .await
                .unwrap()
                .items
        }
    };
    assert!(stores(&h).await.is_empty(), "a refused form created a store");
    let ok = h
        .post("/console/stores", &cookie, &[("name", "Notes"), ("csrf", &csrf)], &[("origin", "http://console.test")])
        .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    assert_eq!(stores(&h).await.len(), 1);
}

#[tokio::test]
async fn hostile_text_is_escaped_everywhere_it_shows() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let payload = "<script>alert(1)</script><img src=x onerror=\"alert(2)\">";
    let store = h
        .store
        .create_memory_store(
            &h.store.default_workspace().await.unwrap(),
            NewMemoryStore { name: payload.into(), description: payload.into(), metadata: Default::default() },
        )
        .await
        .unwrap();
    let memory = h
        .store
        .create_memory(
            &h.store.default_workspace().await.unwrap(),
            &store.id,
            MemoryPath::parse("/x/a.md").unwrap(),
            payload.into(),
            Actor::UserActor { user_id: payload.into() },
        )
        .await
        .unwrap();
    for path in [
        "/console".to_owned(),
        format!("/console/stores/{}", store.id),
        format!("/console/stores/{}?prefix=/x/", store.id),
        format!("/console/stores/{}/memories/{}", store.id, memory.id),
        format!("/console/stores/{}/memories/{}/edit", store.id, memory.id),
        format!("/console/stores/{}/history", store.id),
        format!("/console/stores/{}/versions/{}", store.id, memory.memory_version_id),
        "/console/search?q=alert".to_owned(),
        format!("/console/search?q=script&store={}", store.id),
    ] {
        let page = h.get(&path, &cookie).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(
            !page.body.contains("<script>alert") && !page.body.contains("<img src=x"),
            "{path} lets markup through"
        );
        assert!(page.body.contains("&#60;script&#62;alert(1)&#60;"), "{path} does not show the text: {}", page.body);
    }
}

#[tokio::test]
async fn what_a_person_writes_is_recorded_as_their_api_key() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let store = h.memory_store("s").await;
    let created = h
        .post(
            &format!("/console/stores/{}/memories", store.id),
            &cookie,
            &[("csrf", &csrf), ("path", "/notes/a.md"), ("content", "one\r\ntwo\r\n")],
            &[],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let versions = h
        .store
        .list_memory_versions(
            &h.store.default_workspace().await.unwrap(),
            &store.id,
            ListMemoryVersions { view: View::Full, ..ListMemoryVersions::newest(10) },
        )
        .await
        .unwrap();
    let v = &versions.items[0];
    assert_eq!(v.created_by, Some(Actor::ApiActor { api_key_id: h.api_key.clone() }));
    assert_eq!(v.content.as_deref(), Some("one\ntwo\n"), "a browser's CRLF line breaks are stored as LF");
}

#[tokio::test]
async fn a_stale_save_shows_both_versions_and_overwrites_nothing() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let store = h.memory_store("s").await;
    let memory = h.memory(&store, "/a.md", "first").await;
    let edit_url = format!("/console/stores/{}/memories/{}/edit", store.id, memory.id);
    let form = h.get(&edit_url, &cookie).await;
    let expected = form.field("expected");
    assert_eq!(expected, memory.content_sha256);
    let change = mnemo_store::MemoryChange { content: Some("theirs".into()), path: None, expected_sha256: None };
    h.store
        .update_memory(&h.store.default_workspace().await.unwrap(), &store.id, &memory.id, change, someone())
        .await
        .unwrap();
    let saved = h.post(&edit_url, &cookie, &[("csrf", &csrf), ("content", "mine"), ("expected", &expected)], &[]).await;
    assert_eq!(saved.status, StatusCode::CONFLICT, "{}", saved.body);
    assert!(saved.body.contains(">theirs<") && saved.body.contains("mine"), "{}", saved.body);
    assert_eq!(h.content_of(&store, &memory).await.as_deref(), Some("theirs"));
    // The conflict form is guarded by what the memory holds now: saving it is a knowing choice.
    let again = h
        .post(&edit_url, &cookie, &[("csrf", &csrf), ("content", "mine"), ("expected", &saved.field("expected"))], &[])
        .await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "{}", again.body);
    assert_eq!(h.content_of(&store, &memory).await.as_deref(), Some("mine"));
}

#[tokio::test]
async fn refusals_use_the_apis_words() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let store = h.memory_store("s").await;
    h.memory(&store, "/a/b.md", "x").await;
    let url = format!("/console/stores/{}/memories", store.id);
    for (path, says) in [("/a", "overlaps the memory at /a/b.md"), ("no-slash", "invalid path `no-slash`")] {
        let answer = h.post(&url, &cookie, &[("csrf", &csrf), ("path", path), ("content", "y")], &[]).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}");
        let expected = match path {
            "/a" => h
                .store
                .create_memory(
                    &h.store.default_workspace().await.unwrap(),
                    &store.id,
                    MemoryPath::parse("/a").unwrap(),
                    "y".into(),
                    someone(),
                )
                .await
                .unwrap_err()
                .to_string(),
            _ => MemoryPath::parse_request(path).unwrap_err(),
        };
        assert!(expected.contains(says), "{expected}");
        let shown = expected.replace('\'', "&#39;");
        assert!(answer.body.contains(&expected) || answer.body.contains(&shown), "{path}: {}", answer.body);
        assert!(answer.body.contains(&format!("value=\"{path}\"")), "the form keeps what was typed");
    }
    h.store.archive_memory_store(&h.store.default_workspace().await.unwrap(), &store.id).await.unwrap();
    let archived = h.post(&url, &cookie, &[("csrf", &csrf), ("path", "/c.md"), ("content", "y")], &[]).await;
    assert!(archived.body.contains("archived"), "{}", archived.body);
}

#[tokio::test]
async fn signing_out_ends_the_session_for_good() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let out = h.post("/console/sign-out", &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!((out.status, out.location()), (StatusCode::SEE_OTHER, "/console/sign-in"));
    assert!(out.set_cookies().iter().any(|c| c.starts_with("mnemo_console=;") && c.contains("Max-Age=0")));
    let after = h.get("/console", &cookie).await;
    assert_eq!(after.location(), "/console/sign-in", "the old cookie still opens the console");
}

#[tokio::test]
async fn revoking_a_key_in_the_console_tells_the_server() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let env = h.self_hosted_environment().await;
    let minted = h.post(&format!("/console/environments/{}/keys", env.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(minted.status, StatusCode::OK);
    let at = minted.body.find("sk-mnemo-env-").expect("the new key is shown");
    let secret: String = minted.body[at..].chars().take_while(char::is_ascii_alphanumeric_or_dash).collect();
    let found =
        h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().map(|p| p.credential);
    let Some(mnemo_store::Credential::EnvironmentKey { id, .. }) = found else {
        panic!("the shown key is not the stored one: {found:?}")
    };
    let page = h.get(&format!("/console/environments/{}", env.id), &cookie).await;
    assert!(!page.body.contains(&secret), "the key is shown again");
    let revoked =
        h.post(&format!("/console/environments/{}/keys/{id}/revoke", env.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(revoked.status, StatusCode::SEE_OTHER, "{}", revoked.body);
    assert_eq!(h.hooks.credentials_changed.load(Ordering::SeqCst), 1);
    assert!(h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().is_none());
}

trait KeyChar {
    fn is_ascii_alphanumeric_or_dash(&self) -> bool;
}

impl KeyChar for char {
    fn is_ascii_alphanumeric_or_dash(&self) -> bool {
        self.is_ascii_alphanumeric() || *self == '-'
    }
}

#[tokio::test]
async fn unknown_pages_and_ids_are_plain_not_found_pages() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    for path in ["/console/nowhere", "/console/stores/memstore_nope", "/console/sessions/sesn_0000000000000000000000"] {
        let page = h.get(path, &cookie).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert!(page.body.contains("<h1>Not found</h1>"), "{path}: {}", page.body);
    }
}

#[test]
fn every_asset_together_weighs_under_100_kb() {
    let total: usize = crate::assets::ASSETS.iter().map(|(_, _, body)| body.len()).sum();
    assert!(total <= 100_000, "the console's assets weigh {total} bytes");
}

#[tokio::test]
async fn a_form_address_opened_directly_leads_to_its_page() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    for (path, to) in [
        ("/console/sign-out", "/console"),
        ("/console/stores/memstore_x/memories", "/console/stores/memstore_x"),
        ("/console/environments/env_x/keys", "/console/environments/env_x"),
        ("/console/stores/memstore_x/versions/memver_y/restore", "/console/stores/memstore_x/versions/memver_y"),
    ] {
        let answer = h.get(path, &cookie).await;
        assert_eq!((answer.status, answer.location()), (StatusCode::SEE_OTHER, to), "{path}");
        assert!(answer.headers.contains_key(header::CONTENT_SECURITY_POLICY), "{path}");
    }
    let put = h.send(Request::put("/console/sign-out").body(Body::empty()).unwrap()).await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(put.body.contains("<h1>"), "{}", put.body);
}

#[tokio::test]
async fn a_signed_in_persons_error_page_keeps_the_navigation() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let page = h.get("/console/stores/memstore_nope", &cookie).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains("Sign out") && page.body.contains(h.api_key.as_str()), "{}", page.body);
    let anonymous = h.get("/console/assets/nope.css", "").await;
    assert!(!anonymous.body.contains("Sign out"));
}

#[tokio::test]
async fn a_malformed_id_is_not_found_in_each_pages_words_after_the_sign_in_check() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let store = h.memory_store("s").await;
    let env = h.self_hosted_environment().await;
    let cases = [
        ("/console/stores/nope".to_owned(), "memory store `nope` not found"),
        (format!("/console/stores/{}/memories/nope", store.id), "memory `nope` not found"),
        (format!("/console/stores/{}/versions/nope", store.id), "memory version `nope` not found"),
        // The store is judged first, as the path names it first.
        ("/console/stores/bad/versions/worse".to_owned(), "memory store `bad` not found"),
        ("/console/sessions/nope".to_owned(), "session `nope` not found"),
        ("/console/environments/nope".to_owned(), "environment `nope` not found"),
        (format!("/console/environments/{}/keys/nope/revoke", env.id), "environment key `nope` not found"),
    ];
    for (path, message) in &cases {
        let page = h.get(path, &cookie).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}: {}", page.body);
        assert!(page.body.contains(message), "{path}: {}", page.body);
        assert!(page.body.contains("Sign out"), "{path}: the page keeps the navigation");
        // Someone signed out is sent to sign in, never told what exists.
        let signed_out = h.get(path, "").await;
        assert_eq!(signed_out.status, StatusCode::SEE_OTHER, "{path}");
        assert!(signed_out.location().starts_with("/console/sign-in?next="), "{path}: {}", signed_out.location());
    }
    // A form posted to a malformed id: signed out, to sign in; signed in, not found.
    let post = h.post("/console/stores/nope/archive", "", &[("csrf", "x")], &[]).await;
    assert_eq!(post.status, StatusCode::SEE_OTHER);
    assert!(post.location().starts_with("/console/sign-in"), "{}", post.location());
    let post = h.post("/console/stores/nope/archive", &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(post.status, StatusCode::NOT_FOUND, "{}", post.body);
    // A page link the console did not make.
    let stale = h.get("/console/sessions?page=not-a-cursor", &cookie).await;
    assert_eq!(stale.status, StatusCode::BAD_REQUEST);
    assert!(stale.body.contains("that page link is not valid any more; start from the first page"), "{}", stale.body);
}

#[tokio::test]
async fn a_page_link_given_twice_is_refused_as_axum_refused_it() {
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Before {
        page: Option<String>,
        archived: Option<String>,
    }
    let uri: axum::http::Uri = "/console?page=a&page=b".parse().unwrap();
    let before = axum::extract::Query::<Before>::try_from_uri(&uri).unwrap_err();
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    for path in ["/console?page=a&page=b", "/console/sessions?page=a&page=b", "/console/environments?page=a&page=b"] {
        let answer = h.get(path, &cookie).await;
        assert_eq!((answer.status, answer.body.as_str()), (before.status(), before.body_text().as_str()), "{path}");
    }
}

#[tokio::test]
async fn list_queries_are_read_by_the_shared_extractor_in_the_consoles_words() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let store = h.memory_store("s").await;
    let s = store.id.as_str();
    let duplicate = |name: &str| format!("Failed to deserialize query string: duplicate field `{name}`");
    // (path, status, what the answer says)
    let cases: Vec<(String, StatusCode, String)> = vec![
        ("/console?archived=true".into(), StatusCode::OK, "Showing archived stores too.".into()),
        // Only the toggle's own value shows archived ones; others hide them, as before.
        ("/console?archived=yes".into(), StatusCode::OK, "Archived stores are hidden.".into()),
        ("/console/environments?archived=true".into(), StatusCode::OK, "Showing archived environments too.".into()),
        ("/console?archived=true&archived=false".into(), StatusCode::BAD_REQUEST, duplicate("archived")),
        (
            format!("/console/stores/{s}?prefix=%2Fx"),
            StatusCode::OK,
            "<strong aria-current=\"page\">x/</strong>".into(),
        ),
        (format!("/console/stores/{s}?prefix=x"), StatusCode::BAD_REQUEST, "`x/` is not a folder".into()),
        // A filter searches its own folder; the prefix is not judged then.
        (format!("/console/stores/{s}?filter=+notes&prefix=x"), StatusCode::OK, "value=\"notes\"".into()),
        (format!("/console/stores/{s}?filter=a&filter=b"), StatusCode::BAD_REQUEST, duplicate("filter")),
        (
            format!("/console/stores/{s}?page=zzz"),
            StatusCode::BAD_REQUEST,
            "that page link is not valid any more".into(),
        ),
        (format!("/console/stores/{s}/history?session=+&operation=created"), StatusCode::OK, "Clear filters".into()),
        (
            format!("/console/stores/{s}/history?session=nope"),
            StatusCode::BAD_REQUEST,
            "`nope` is not a session id".into(),
        ),
        (format!("/console/stores/{s}/history?api_key=x"), StatusCode::BAD_REQUEST, "`x` is not an API key id".into()),
        (format!("/console/stores/{s}/history?memory=x"), StatusCode::BAD_REQUEST, "`x` is not a memory id".into()),
        (
            format!("/console/stores/{s}/history?operation=made"),
            StatusCode::BAD_REQUEST,
            "`made` is not an operation (created, modified or deleted)".into(),
        ),
        (format!("/console/stores/{s}/memories/new?prefix=%2Fa%2F"), StatusCode::OK, "value=\"/a/\"".into()),
        (format!("/console/stores/{s}/memories/new?prefix=a"), StatusCode::OK, "value=\"/\"".into()),
        ("/console/sign-in?next=a&next=b".into(), StatusCode::BAD_REQUEST, duplicate("next")),
        (
            "/console/sessions/sesn_0000000000000000000000/live?after=x".into(),
            StatusCode::BAD_REQUEST,
            "after must be".into(),
        ),
    ];
    for (path, status, says) in cases {
        let answer = h.get(&path, &cookie).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        assert!(answer.body.contains(&says), "{path} does not say {says:?}: {}", answer.body);
    }
}

// ---- the workspace's API keys, rate limits and audit log; the organization's pages --------

impl Harness {
    /// Signs in with `key`; returns the session cookie (`name=value`) and the CSRF token.
    async fn signed_in_as(&self, key: &str) -> (String, String) {
        let (answer, _) = self.sign_in_with(key, &[]).await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
        let session =
            answer.set_cookies().into_iter().find(|c| c.starts_with("mnemo_console=mcs_")).expect("a session cookie");
        let cookie = session.split(';').next().unwrap().to_owned();
        let page = self.get("/console", &cookie).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        (cookie, page.field("csrf"))
    }

    /// A second workspace named `name` with an API key `key`.
    async fn other_workspace(&self, name: &str, key: &str) -> (mnemo_api::WorkspaceId, mnemo_api::ApiKeyId) {
        let ws = self.store.create_workspace(name).await.unwrap();
        let id = self.store.ensure_api_key_in(&ws, Sha256::digest(key.as_bytes()).into(), "b").await.unwrap();
        (ws, id)
    }

    async fn audit_of(&self, ws: &mnemo_api::WorkspaceId) -> Vec<mnemo_api::AuditEvent> {
        let filter = mnemo_store::ops::AuditFilter { workspace: Some(ws.clone()), ..Default::default() };
        let page = mnemo_api::AdminPageQuery { limit: 100, cursor: mnemo_api::AdminCursor::Start };
        self.store.list_audit_events(filter, page).await.unwrap().data
    }
}

/// The whole `sk-mnemo-…` secret a page shows, if any (not a key's short hint).
fn shown_secret(body: &str) -> Option<String> {
    body.match_indices("sk-mnemo-")
        .map(|(at, _)| body[at..].chars().take_while(char::is_ascii_alphanumeric_or_dash).collect::<String>())
        .find(|s| s.len() > 30)
}

const KEY_B: &str = "sk-mnemo-test-key-of-b-0123456789abcdefghijk";

#[tokio::test]
async fn an_api_key_is_minted_shown_once_deactivated_reactivated_and_archived() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let (cookie, csrf) = h.signed_in().await;
    let minted = h.post("/console/api-keys", &cookie, &[("csrf", &csrf), ("name", "CI pipeline")], &[]).await;
    assert_eq!(minted.status, StatusCode::OK, "{}", minted.body);
    assert_eq!(minted.headers.get(header::CACHE_CONTROL).unwrap(), "no-store");
    let secret = shown_secret(&minted.body).expect("the new key is shown");
    assert_eq!(minted.body.matches(&secret).count(), 1, "the secret is shown once on its page");
    let found = h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().unwrap();
    let mnemo_store::Credential::ApiKey(id) = found.credential else { panic!("not an API key: {found:?}") };
    let key = h.store.get_api_key(&id).await.unwrap();
    assert_eq!((key.name.as_str(), key.status), ("CI pipeline", mnemo_api::ApiKeyStatus::Active));
    assert!(matches!(&key.scope, mnemo_api::ApiKeyScope::Workspace { workspace_id } if *workspace_id == ws));

    let list = h.get("/console/api-keys", &cookie).await;
    assert!(shown_secret(&list.body).is_none(), "the list shows a secret again");
    assert!(list.body.contains(key.partial_key_hint.as_deref().unwrap()) && list.body.contains("this sign-in"));

    let off = h.post(&format!("/console/api-keys/{id}/deactivate"), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!((off.status, off.location()), (StatusCode::SEE_OTHER, "/console/api-keys"), "{}", off.body);
    assert_eq!(h.hooks.credentials_changed.load(Ordering::SeqCst), 1, "the server forgets the key at once");
    assert!(h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().is_none());
    let on = h.post(&format!("/console/api-keys/{id}/activate"), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(on.status, StatusCode::SEE_OTHER, "{}", on.body);
    assert!(h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().is_some());

    let confirm = h.get(&format!("/console/api-keys/{id}/archive"), &cookie).await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("Archive this API key?") && confirm.body.contains("cannot be undone"));
    assert_eq!(h.store.get_api_key(&id).await.unwrap().status, mnemo_api::ApiKeyStatus::Active, "asking archived it");
    let archived = h.post(&format!("/console/api-keys/{id}/archive"), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(archived.status, StatusCode::SEE_OTHER, "{}", archived.body);
    assert_eq!(h.store.get_api_key(&id).await.unwrap().status, mnemo_api::ApiKeyStatus::Archived);
    // Archived is final: the API's own refusal, shown as a page.
    let again = h.post(&format!("/console/api-keys/{id}/activate"), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(again.status.as_u16() / 100, 4, "{}", again.body);
    assert_eq!(h.store.get_api_key(&id).await.unwrap().status, mnemo_api::ApiKeyStatus::Archived);

    // The audit log has each step, by the signed-in key, and never the secret.
    let log = h.audit_of(&ws).await;
    let actions: Vec<(&str, String)> = log
        .iter()
        .filter(|e| e.resource.as_ref().is_some_and(|r| r.id == id.as_str()))
        .map(|e| (e.action.as_str(), e.details.to_string()))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("api_key.update", r#"{"status":"archived"}"#.to_owned()),
            ("api_key.update", r#"{"status":"active"}"#.to_owned()),
            ("api_key.update", r#"{"status":"inactive"}"#.to_owned()),
            ("api_key.create", r#"{"name":"CI pipeline"}"#.to_owned()),
        ]
    );
    assert!(log.iter().all(|e| e.actor.id == h.api_key.as_str()), "{log:?}");
    assert!(!serde_json::to_string(&log).unwrap().contains(&secret));
}

#[tokio::test]
async fn minting_without_a_name_or_with_a_past_last_day_is_refused_and_mints_nothing() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let refused = h.post("/console/api-keys", &cookie, &[("csrf", &csrf), ("name", "  ")], &[]).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("role=\"alert\"") && shown_secret(&refused.body).is_none(), "{}", refused.body);
    assert_eq!(h.store.count_api_keys().await.unwrap(), 1);
    // A last day in the past is refused in the API's words; a future one is the key's expiry.
    let past =
        h.post("/console/api-keys", &cookie, &[("csrf", &csrf), ("name", "old"), ("expires", "2001-01-01")], &[]).await;
    assert_eq!(past.status, StatusCode::BAD_REQUEST);
    assert!(past.body.contains("expires_at") && past.body.contains("value=\"old\""), "{}", past.body);
    assert_eq!(h.store.count_api_keys().await.unwrap(), 1);
    let next_year = (chrono::Utc::now() + chrono::Duration::days(366)).date_naive();
    let dated = h
        .post(
            "/console/api-keys",
            &cookie,
            &[("csrf", &csrf), ("name", "dated"), ("expires", &next_year.to_string())],
            &[],
        )
        .await;
    assert_eq!(dated.status, StatusCode::OK, "{}", dated.body);
    let secret = shown_secret(&dated.body).unwrap();
    let Some(mnemo_store::Credential::ApiKey(id)) =
        h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().map(|p| p.credential)
    else {
        panic!("no key")
    };
    let expires = h.store.get_api_key(&id).await.unwrap().expires_at.unwrap();
    assert_eq!(expires.date_naive(), next_year.succ_opt().unwrap());
    assert!(dated.body.contains("expires "), "the list shows the expiry");
    // And no form of another site mints one.
    let forged = h.post("/console/api-keys", &cookie, &[("csrf", "forged"), ("name", "x")], &[]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(h.store.count_api_keys().await.unwrap(), 2);
}

#[tokio::test]
async fn a_key_of_workspace_b_never_sees_or_touches_workspace_as_keys_or_audit_entries() {
    let h = harness().await;
    let a = h.store.default_workspace().await.unwrap();
    let (b, b_key) = h.other_workspace("Team B", KEY_B).await;
    let (cookie_a, csrf_a) = h.signed_in().await;
    let minted = h.post("/console/api-keys", &cookie_a, &[("csrf", &csrf_a), ("name", "alpha only")], &[]).await;
    let secret = shown_secret(&minted.body).unwrap();
    let Some(mnemo_store::Credential::ApiKey(alpha)) =
        h.store.resolve_credential(Sha256::digest(secret.as_bytes()).into()).await.unwrap().map(|p| p.credential)
    else {
        panic!("no key minted")
    };

    let (cookie_b, csrf_b) = h.signed_in_as(KEY_B).await;
    let keys_b = h.get("/console/api-keys", &cookie_b).await;
    assert!(keys_b.body.contains("Team B"), "the header names B's workspace");
    assert!(keys_b.body.contains(b_key.as_str()));
    for of_a in [alpha.as_str(), h.api_key.as_str(), "alpha only"] {
        assert!(!keys_b.body.contains(of_a), "B's key list shows A's {of_a}");
    }
    // A's key answers B exactly like a key that does not exist.
    let unknown = mnemo_api::ApiKeyId::generate();
    for path in [format!("/console/api-keys/{alpha}/archive"), format!("/console/api-keys/{unknown}/archive")] {
        let page = h.get(&path, &cookie_b).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}: {}", page.body);
        let id = path.split('/').nth(3).unwrap();
        assert!(page.body.contains(&format!("API key `{id}` not found")), "{}", page.body);
    }
    for action in ["deactivate", "archive"] {
        let post = h.post(&format!("/console/api-keys/{alpha}/{action}"), &cookie_b, &[("csrf", &csrf_b)], &[]).await;
        assert_eq!(post.status, StatusCode::NOT_FOUND, "{action}");
    }
    assert_eq!(h.store.get_api_key(&alpha).await.unwrap().status, mnemo_api::ApiKeyStatus::Active);

    let log_b = h.get("/console/audit-log", &cookie_b).await;
    assert_eq!(log_b.status, StatusCode::OK);
    assert!(!log_b.body.contains(alpha.as_str()) && !log_b.body.contains(h.api_key.as_str()), "{}", log_b.body);
    assert!(log_b.body.contains("No entries match."));
    let log_a = h.get("/console/audit-log", &cookie_a).await;
    assert!(log_a.body.contains(alpha.as_str()) && log_a.body.contains("api_key.create"), "{}", log_a.body);
    assert!(!h.audit_of(&a).await.is_empty() && h.audit_of(&b).await.is_empty());
}

#[tokio::test]
async fn the_audit_log_filters_by_action_actor_and_day_and_pages() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let (cookie, csrf) = h.signed_in().await;
    for i in 0..52 {
        h.post("/console/api-keys", &cookie, &[("csrf", &csrf), ("name", &format!("key {i}"))], &[]).await;
    }
    let first = h.get("/console/audit-log", &cookie).await;
    assert_eq!(first.body.matches("api_key.create</code>").count(), 50, "a page holds 50 entries");
    assert!(!first.body.contains("Newer entries"));
    let at = first.body.find("/console/audit-log?older_than=").expect("a link to older entries");
    let older: String = first.body[at..].split('"').next().unwrap().replace("&amp;", "&");
    let second = h.get(&older, &cookie).await;
    assert_eq!(second.body.matches("api_key.create</code>").count(), 2);
    assert!(second.body.contains("Newer entries") && !second.body.contains("Older entries"));

    let today = chrono::Utc::now().date_naive();
    let filtered = h.get(&format!("/console/audit-log?action=api_key.update&actor=&from={today}"), &cookie).await;
    assert!(filtered.body.contains("No entries match.") && filtered.body.contains("Clear filters"));
    let by_kind = h.get("/console/audit-log?actor=admin_key", &cookie).await;
    assert!(by_kind.body.contains("No entries match."));
    let yesterday = today.pred_opt().unwrap();
    let until = h.get(&format!("/console/audit-log?until={yesterday}"), &cookie).await;
    assert!(until.body.contains("No entries match."));
    let bad = h.get("/console/audit-log?from=soon", &cookie).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(h.audit_of(&ws).await.len(), 52);
}

#[tokio::test]
async fn the_rate_limits_page_shows_the_workspaces_overrides_and_what_applies() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let entry = mnemo_store::rules::rate_limit::catalogue(&[]).remove(0);
    let body: mnemo_api::RateLimitUpdate =
        serde_json::from_value(serde_json::json!({"limits": [{"type": "requests_per_minute", "value": 42}]})).unwrap();
    h.store.update_workspace_rate_limits(&ws, entry, body).await.unwrap();
    let (cookie, _) = h.signed_in().await;
    let page = h.get("/console/rate-limits", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    for shown in ["Managed Agents API requests", "requests per minute", "no limit", "<strong>42</strong>"] {
        assert!(page.body.contains(shown), "{shown}: {}", page.body);
    }
}

#[tokio::test]
async fn the_organizations_pages_are_refused_to_an_api_keys_sign_in_as_the_api_refuses_it() {
    let h = harness().await;
    let out = h.get("/console/workspaces", "").await;
    assert_eq!(out.location(), "/console/sign-in?next=%2Fconsole%2Fworkspaces");
    let (cookie, csrf) = h.signed_in().await;
    for path in ["/console/workspaces", "/console/workspaces/new"] {
        let page = h.get(path, &cookie).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
        assert!(page.body.contains("organization admin"), "{}", page.body);
    }
    let post = h.post("/console/workspaces", &cookie, &[("csrf", &csrf), ("name", "x")], &[]).await;
    assert_eq!(post.status, StatusCode::FORBIDDEN);
    let all = mnemo_store::ops::workspaces::ListWorkspaces {
        ids: None,
        include_archived: true,
        include_default: true,
        page: mnemo_api::AdminPageQuery { limit: 100, cursor: mnemo_api::AdminCursor::Start },
    };
    assert_eq!(h.store.list_workspaces(all).await.unwrap().data.len(), 1, "only Default exists");
}

#[tokio::test]
async fn key_lifecycles_and_deletions_made_in_the_console_are_in_the_audit_log() {
    let h = harness().await;
    let ws = h.store.default_workspace().await.unwrap();
    let (cookie, csrf) = h.signed_in().await;
    let env = h.self_hosted_environment().await;
    let minted = h.post(&format!("/console/environments/{}/keys", env.id), &cookie, &[("csrf", &csrf)], &[]).await;
    let key = h.store.list_environment_keys(&ws, &env.id).await.unwrap().remove(0);
    let revoke = format!("/console/environments/{}/keys/{}/revoke", env.id, key.id);
    assert_eq!(h.post(&revoke, &cookie, &[("csrf", &csrf)], &[]).await.status, StatusCode::SEE_OTHER);
    let store = h.memory_store("doomed").await;
    let delete = h.post(&format!("/console/stores/{}/delete", store.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(delete.status, StatusCode::SEE_OTHER, "{}", delete.body);
    let log = h.audit_of(&ws).await;
    let seen: Vec<(&str, &str)> =
        log.iter().map(|e| (e.action.as_str(), e.resource.as_ref().map_or("", |r| r.id.as_str()))).collect();
    assert_eq!(
        seen,
        vec![
            ("memory_store.delete", store.id.as_str()),
            ("environment_key.revoke", key.id.as_str()),
            ("environment_key.create", key.id.as_str()),
        ]
    );
    let secret = shown_secret(&minted.body).or_else(|| {
        let at = minted.body.find("sk-mnemo-env-")?;
        Some(minted.body[at..].chars().take_while(char::is_ascii_alphanumeric_or_dash).collect())
    });
    let printed = serde_json::to_string(&log).unwrap();
    assert!(!printed.contains(&secret.unwrap()) && printed.contains(env.id.as_str()), "{printed}");
    assert!(log.iter().all(|e| e.actor.id == h.api_key.as_str()));
}

/// Opens a join page (`/console/invite/…` or `/console/setup/…`) and posts its form with `fields`.
async fn join_with(h: &Harness, path: &str, fields: &[(&str, &str)]) -> Answer {
    let page = h.get(path, "").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let token = page.field("token");
    let cookie = format!("mnemo_console_sign_in={token}");
    let mut form = vec![("token", token.as_str())];
    form.extend_from_slice(fields);
    h.post(path, &cookie, &form, &[]).await
}

#[tokio::test]
async fn an_invite_link_lets_a_person_join_once_with_a_long_enough_password() {
    let h = harness().await;
    let invite = mnemo_api::NewInvite { email: "ada@example.com".into(), role: mnemo_api::OrgRole::Developer };
    let secret = "mnemo-invite-console-test";
    h.store.create_invite(invite, crate::auth::hash(secret), 3600).await.unwrap();
    let path = format!("/console/invite/{secret}");

    let page = h.get(&path, "").await;
    assert!(page.body.contains("ada@example.com") && page.body.contains("as developer"), "{}", page.body);
    assert!(page.body.contains("<label for=\"password\">"), "labelled fields");

    let short =
        join_with(&h, &path, &[("name", "Ada"), ("password", "too short"), ("password_again", "too short")]).await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST);
    assert!(short.body.contains("at least 12 characters"), "{}", short.body);
    let differ = join_with(
        &h,
        &path,
        &[("name", "Ada"), ("password", "a long password"), ("password_again", "another long one")],
    )
    .await;
    assert!(differ.body.contains("the two passwords differ"), "{}", differ.body);
    let stale = h.post(&path, "", &[("token", "forged"), ("name", "Ada")], &[]).await;
    assert!(stale.body.contains("this form has expired"), "no token cookie, no joining: {}", stale.body);

    let joined = join_with(
        &h,
        &path,
        &[("name", "Ada Lovelace"), ("password", "a long password"), ("password_again", "a long password")],
    )
    .await;
    assert_eq!(joined.status, StatusCode::OK, "{}", joined.body);
    assert!(joined.body.contains("Welcome, Ada Lovelace"), "{}", joined.body);
    assert!(!joined.body.contains("a long password"), "the password is never echoed");
    let page = mnemo_api::AdminPageQuery { limit: 20, cursor: mnemo_api::AdminCursor::Start };
    let users = h.store.list_users(mnemo_store::ops::people::ListUsers { email: None, roles: vec![], page }).await;
    let users = users.unwrap().data;
    assert_eq!(users.len(), 1);
    assert_eq!((users[0].name.as_str(), users[0].role), ("Ada Lovelace", mnemo_api::OrgRole::Developer));

    let used = h.get(&path, "").await;
    assert_eq!(used.status, StatusCode::NOT_FOUND, "an accepted invite's link no longer works");
    assert!(
        used.body.contains("no longer valid") && !used.body.contains("<form method=\"post\" action=\"/console/invite")
    );
    let unknown = h.get("/console/invite/mnemo-invite-nobody", "").await;
    assert_eq!((unknown.status, unknown.body.contains("no longer valid")), (StatusCode::NOT_FOUND, true));
}

#[tokio::test]
async fn the_setup_link_makes_the_first_admin() {
    let h = harness().await;
    let secret = "mnemo-setup-console-test";
    h.store.create_setup_link(crate::auth::hash(secret), 3600).await.unwrap();
    let path = format!("/console/setup/{secret}");
    let fields = [
        ("email", "Root@Example.com"),
        ("name", "Root"),
        ("password", "correct horse battery"),
        ("password_again", "correct horse battery"),
    ];
    let joined = join_with(&h, &path, &fields).await;
    assert_eq!(joined.status, StatusCode::OK, "{}", joined.body);
    assert!(
        joined.body.contains("<strong>admin</strong>") && joined.body.contains("root@example.com"),
        "{}",
        joined.body
    );
    assert!(!h.store.setup_wanted().await.unwrap());
    assert_eq!(h.get(&path, "").await.status, StatusCode::NOT_FOUND, "a setup link is used once");
}

#[tokio::test]
async fn search_shows_marked_snippets_linking_to_the_memory() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let notes = h.memory_store("notes").await;
    let other = h.memory_store("other").await;
    let hit = h.memory(&notes, "/ops/db.md", "The staging host is staging-db-02.").await;
    h.memory(&other, "/elsewhere.md", "staging-db-02 again").await;

    // A store's page offers a labelled search box that searches that store.
    let store_page = h.get(&format!("/console/stores/{}", notes.id), &cookie).await;
    assert!(store_page.body.contains("<label for=\"store-q\">Search this store</label>"), "{}", store_page.body);
    let page = h.get(&format!("/console/search?q=staging-db-02&store={}", notes.id), &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("The staging host is <mark>staging-db-02</mark>."), "{}", page.body);
    let link = format!("/console/stores/{}/memories/{}#:~:text=staging-db-02", notes.id, hit.id);
    assert!(page.body.contains(&link), "{}", page.body);
    assert!(!page.body.contains("/elsewhere.md"), "only the store asked for");

    // The workspace's search page covers every store and names each result's store.
    let page = h.get("/console/search?q=%22staging-db-02%22", &cookie).await;
    assert!(page.body.contains("/elsewhere.md") && page.body.contains("/ops/db.md"), "{}", page.body);
    assert!(page.body.contains("in <a href=\"/console/stores/"), "{}", page.body);
    assert!(page.body.contains("aria-current=\"page\">Search</a>"), "{}", page.body);

    // A malformed query is shown back with what to do; an empty one shows the form only.
    let page = h.get("/console/search?q=%22unclosed", &cookie).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("role=\"alert\">the search opens a phrase"), "{}", page.body);
    let page = h.get("/console/search", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<label for=\"q\">Words to find</label>") && !page.body.contains("No memory matches"));
    let page = h.get("/console/search?q=nothing-like-this", &cookie).await;
    assert!(page.body.contains("No memory matches nothing-like-this."), "{}", page.body);
}

/// A toy embeddings provider: how much a text is about databases, and how much not.
struct ToyEmbedder {
    down: bool,
}

fn toy_vector(text: &str) -> Vec<f32> {
    let words: Vec<String> = text.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase).collect();
    let db = words.iter().filter(|w| ["database", "postgres", "db"].contains(&w.as_str())).count() as f32;
    let other = words.iter().filter(|w| !w.is_empty()).count() as f32 - db;
    let norm = (db * db + other * other).sqrt().max(1.0);
    vec![db / norm, other / norm]
}

#[async_trait]
impl mnemo_store::search::QueryEmbedder for ToyEmbedder {
    fn model(&self) -> &str {
        "toy"
    }

    async fn embed_query(&self, meaning: &str) -> Result<Vec<f32>, String> {
        if self.down { Err("the provider is down".into()) } else { Ok(toy_vector(meaning)) }
    }
}

#[tokio::test]
async fn search_ranks_by_meaning_only_where_the_server_can() {
    // Without a provider: no choice offered, and a link asking for meaning ranks by words.
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let notes = h.memory_store("notes").await;
    h.memory(&notes, "/pg.md", "we run postgres").await;
    let page = h.get("/console/search?q=postgres&mode=semantic", &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains("Rank by") && page.body.contains("/pg.md"), "{}", page.body);

    // With one: "Rank by", meaning finds what no word matches, and the choice is kept.
    let hooks = CountingHooks { embedder: Some(Arc::new(ToyEmbedder { down: false })), ..Default::default() };
    let h = harness_with_hooks(ConsoleConfig::default(), hooks).await;
    let (cookie, _) = h.signed_in().await;
    let notes = h.memory_store("notes").await;
    h.memory(&notes, "/pg.md", "we run postgres").await;
    h.memory(&notes, "/lunch.md", "pizza on fridays with the whole team").await;
    let pending = h.store.pending_embeddings("toy", 0, 10).await.unwrap();
    let made = pending
        .iter()
        .map(|p| (p.memory, p.version, Some(mnemo_store::rules::semantic::encode(&toy_vector(&p.content)))))
        .collect();
    h.store.put_embeddings("toy", made).await.unwrap();
    let page = h.get("/console/search", &cookie).await;
    assert!(page.body.contains("<label for=\"mode\">Rank by</label>"), "{}", page.body);
    let page = h.get("/console/search?q=database&mode=text", &cookie).await;
    assert!(page.body.contains("No memory matches database."), "{}", page.body);
    let page = h.get("/console/search?q=database&mode=semantic", &cookie).await;
    let (pg, lunch) = (page.body.find("/pg.md").unwrap(), page.body.find("/lunch.md").unwrap());
    assert!(pg < lunch, "closest in meaning first: {}", page.body);
    assert!(page.body.contains("<option value=\"semantic\" selected>Meaning</option>"), "{}", page.body);
    let page = h.get("/console/search?q=database&mode=vector", &cookie).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);

    // While the provider is down, words rank and the page says so.
    let hooks = CountingHooks { embedder: Some(Arc::new(ToyEmbedder { down: true })), ..Default::default() };
    let h = harness_with_hooks(ConsoleConfig::default(), hooks).await;
    let (cookie, _) = h.signed_in().await;
    let notes = h.memory_store("notes").await;
    h.memory(&notes, "/pg.md", "we run postgres").await;
    let page = h.get("/console/search?q=postgres&mode=hybrid", &cookie).await;
    assert!(page.body.contains("/pg.md"), "{}", page.body);
    assert!(
        page.body.contains("role=\"status\">ranked by full text only: the embeddings provider could not embed the query (the provider is down)"),
        "{}",
        page.body
    );
}

mod dreams;
mod people;
