//! Webhooks end to end: endpoints registered over the API, events POSTed by the delivery task
//! to a receiver on 127.0.0.1, signed as Standard Webhooks; failing receivers are retried with
//! the same event id until they answer 2xx or the attempts run out.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use mnemo_api::{CreateWebhookEndpoint, DeliveryStatus, UpdateWebhookEndpoint, WebhookDelivery, WebhookEndpoint};
use mnemo_server::{WebhookConfig, WebhookTargets};
use mnemo_store::rules::webhook::DeliveryPolicy;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer, error_type, toolset};

/// What the receiver does with the next request.
#[derive(Debug, Clone, Copy)]
enum Reply {
    Status(u16),
    /// Answers 200, but only after this long (longer than the attempt's timeout).
    Hang(Duration),
}

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: String,
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    /// What it answers once the script is used up.
    otherwise: Mutex<Option<u16>>,
    received: Mutex<Vec<Received>>,
}

/// An HTTP server on 127.0.0.1 that records every request and answers as scripted.
struct Receiver {
    url: String,
    script: Arc<Script>,
}

impl Receiver {
    async fn start(replies: &[Reply], otherwise: u16) -> Self {
        let script = Arc::new(Script::default());
        script.replies.lock().unwrap().extend(replies.iter().copied());
        *script.otherwise.lock().unwrap() = Some(otherwise);
        let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, script }
    }

    fn received(&self) -> Vec<Received> {
        self.script.received.lock().unwrap().clone()
    }
}

async fn receive(State(script): State<Arc<Script>>, headers: HeaderMap, body: String) -> StatusCode {
    script.received.lock().unwrap().push(Received { headers, body });
    let next = script.replies.lock().unwrap().pop_front();
    let reply = next.unwrap_or_else(|| Reply::Status(script.otherwise.lock().unwrap().unwrap_or(200)));
    match reply {
        Reply::Status(code) => StatusCode::from_u16(code).unwrap(),
        Reply::Hang(d) => {
            tokio::time::sleep(d).await;
            StatusCode::OK
        }
    }
}

/// Quick retries, so the tests wait little; private targets allowed (the receivers are on
/// 127.0.0.1), as `--webhook-allow-private` does.
fn fast(max_attempts: u32) -> WebhookConfig {
    WebhookConfig { targets: WebhookTargets::public_only().allow_private(true), ..public_only(max_attempts) }
}

/// Quick retries, public targets only (the default).
fn public_only(max_attempts: u32) -> WebhookConfig {
    WebhookConfig {
        policy: DeliveryPolicy {
            max_attempts,
            retry: mnemo_api::Backoff { initial: Duration::from_millis(100), ..DeliveryPolicy::default().retry },
        },
        timeout: Duration::from_millis(500),
        poll_interval: Duration::from_millis(50),
        ..Default::default()
    }
}

/// A server whose API and sender both judge targets by `config.targets`.
async fn server_delivering(config: WebhookConfig) -> (TestServer, tokio::task::JoinHandle<()>) {
    let targets = config.targets.clone();
    let s = TestServer::configured(Default::default(), |state| state.with_webhook_targets(targets)).await;
    let task = tokio::spawn(mnemo_server::deliver_webhooks(s.store(), config));
    (s, task)
}

async fn register(s: &TestServer, url: &str, events: Option<&[&str]>) -> WebhookEndpoint {
    let body = CreateWebhookEndpoint {
        url: url.into(),
        event_types: events.map(|e| e.iter().map(|t| (*t).to_owned()).collect()),
        description: None,
    };
    s.client.create_webhook_endpoint(&body).await.unwrap()
}

async fn deliveries(s: &TestServer, endpoint: &WebhookEndpoint) -> Vec<WebhookDelivery> {
    s.client.list_webhook_deliveries(&endpoint.id, None, Some(100), None).await.unwrap().data
}

/// Waits (up to 20 s) until `done` holds of the endpoint's deliveries.
async fn until(
    s: &TestServer,
    endpoint: &WebhookEndpoint,
    done: impl Fn(&[WebhookDelivery]) -> bool,
) -> Vec<WebhookDelivery> {
    for _ in 0..400 {
        let list = deliveries(s, endpoint).await;
        if done(&list) {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the deliveries never got there: {:?}", deliveries(s, endpoint).await);
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers.get(name).unwrap_or_else(|| panic!("no {name} header")).to_str().unwrap()
}

/// Checks a request the way a Standard Webhooks verifier does, with `secret`.
fn verify(r: &Received, secret: &str) -> bool {
    let id = header(r, "webhook-id");
    let timestamp: i64 = header(r, "webhook-timestamp").parse().unwrap();
    let want = mnemo_server::webhooks::sign(secret, id, timestamp, &r.body).unwrap();
    header(r, "webhook-signature").split(' ').any(|s| s == want)
}

/// An event goes to the endpoints of its resource's workspace only, and says which workspace
/// and organization it is of.
#[tokio::test]
async fn events_reach_only_their_workspaces_endpoints() {
    const KEY_B: &str = "sk-test-key-of-workspace-b";
    let (s, _task) = server_delivering(fast(3)).await;
    let b = s.store().create_workspace("B").await.unwrap();
    s.store().ensure_api_key_in(&b, mnemo_server::hash_credential(KEY_B), "b").await.unwrap();
    let (to_a, to_b) = (Receiver::start(&[], 200).await, Receiver::start(&[], 200).await);
    register(&s, &to_a.url, Some(&["environment.created"])).await;
    let body = json!({"url": to_b.url, "event_types": ["environment.created"]});
    let (status, hook_b) = s.call(reqwest::Method::POST, "/v1/webhook_endpoints", KEY_B, Some(body)).await;
    assert_eq!(status, 200, "{hook_b}");

    let (status, env_b) = s.call(reqwest::Method::POST, "/v1/environments", KEY_B, Some(json!({"name": "of B"}))).await;
    assert_eq!(status, 200, "{env_b}");
    let (status, env_a) = s.call(reqwest::Method::POST, "/v1/environments", KEY, Some(json!({"name": "of A"}))).await;
    assert_eq!(status, 200, "{env_a}");

    let organization = s.store().organization().await.unwrap();
    let a = s.store().default_workspace().await.unwrap();
    for (receiver, env, ws) in [(&to_a, &env_a, json!(a)), (&to_b, &env_b, json!(b))] {
        for _ in 0..400 {
            if !receiver.received().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let got = receiver.received();
        assert_eq!(
            got.len(),
            1,
            "one event, of its own workspace: {:?}",
            got.iter().map(|r| &r.body).collect::<Vec<_>>()
        );
        let payload: Value = serde_json::from_str(&got[0].body).unwrap();
        assert_eq!(payload["data"]["id"], env["id"], "{payload}");
        assert_eq!(payload["data"]["workspace_id"], ws, "{payload}");
        assert_eq!(payload["data"]["organization_id"], json!(organization.id), "{payload}");
    }
    let (_, listed) = s.call(reqwest::Method::GET, "/v1/webhook_endpoints", KEY_B, None).await;
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1), "B lists its own endpoint only: {listed}");
}

#[tokio::test]
async fn events_are_delivered_signed_and_listed() {
    let (s, _task) = server_delivering(fast(3)).await;
    let receiver = Receiver::start(&[], 200).await;
    let endpoint = register(&s, &receiver.url, None).await;
    let secret = endpoint.secret.clone().expect("the creation shows the secret").into_exposed();
    assert!(secret.starts_with("whsec_"));

    let store = s.new_store("hooked").await;
    let list = until(&s, &endpoint, |l| l.len() == 1 && l[0].status == DeliveryStatus::Delivered).await;
    let d = &list[0];
    assert_eq!((d.attempts, d.last_status_code, d.last_error.as_deref()), (1, Some(200), None));
    assert_eq!(d.resource_id, store.id.as_str());
    assert!(d.finished_at.is_some() && d.next_attempt_at.is_none());

    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(header(r, "content-type"), "application/json");
    assert!(verify(r, &secret), "signed with the endpoint's secret");
    assert!(!verify(r, &mnemo_api::generate_webhook_secret()), "and no other");
    let payload: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(payload["type"], "event");
    assert_eq!(payload["id"], header(r, "webhook-id"));
    assert_eq!(payload["id"], json!(d.event_id));
    assert_eq!(payload["data"]["type"], "memory_store.created");
    assert_eq!(payload["data"]["id"], json!(store.id));
    // The server's organization and the resource's workspace (the Default one's, here).
    let organization = s.store().organization().await.unwrap();
    assert_eq!(payload["data"]["organization_id"], json!(organization.id));
    assert_eq!(payload["data"]["workspace_id"], json!(s.store().default_workspace().await.unwrap()));
    chrono::DateTime::parse_from_rfc3339(payload["created_at"].as_str().unwrap()).expect("RFC 3339");
    let now = chrono::Utc::now().timestamp();
    let sent: i64 = header(r, "webhook-timestamp").parse().unwrap();
    assert!((now - sent).abs() < 60, "the timestamp is the time of sending");
}

#[tokio::test]
async fn a_failing_endpoint_is_retried_with_the_same_event_until_it_answers() {
    // A 500, then no answer within the timeout, then a 200.
    let (s, _task) = server_delivering(fast(5)).await;
    let receiver = Receiver::start(&[Reply::Status(500), Reply::Hang(Duration::from_secs(3))], 200).await;
    let endpoint = register(&s, &receiver.url, Some(&["memory_store.created"])).await;
    s.new_store("flaky").await;

    let list = until(&s, &endpoint, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Delivered)).await;
    assert_eq!((list[0].attempts, list[0].last_status_code), (3, Some(200)));
    let got = receiver.received();
    assert_eq!(got.len(), 3, "one request per attempt");
    let ids: Vec<&str> = got.iter().map(|r| header(r, "webhook-id")).collect();
    assert!(ids.iter().all(|id| *id == list[0].event_id.as_str()), "every attempt is the same event: {ids:?}");
    assert!(got.iter().all(|r| r.body == got[0].body), "the same payload bytes on every attempt");
    assert!(got.iter().all(|r| verify(r, endpoint.secret.as_ref().unwrap().expose())), "each attempt signed afresh");
}

#[tokio::test]
async fn a_delivery_that_keeps_failing_is_marked_failed_with_why() {
    let (s, _task) = server_delivering(fast(3)).await;
    let receiver = Receiver::start(&[], 503).await;
    let endpoint = register(&s, &receiver.url, None).await;
    s.new_store("doomed").await;

    let list = until(&s, &endpoint, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Failed)).await;
    let d = &list[0];
    assert_eq!((d.attempts, d.last_status_code), (3, Some(503)));
    assert_eq!(d.last_error.as_deref(), Some("the endpoint answered 503"));
    assert!(d.finished_at.is_some() && d.next_attempt_at.is_none());
    assert_eq!(receiver.received().len(), 3, "the last attempt was the third");
    let failed = s.client.list_webhook_deliveries(&endpoint.id, Some("failed"), None, None).await.unwrap().data;
    assert_eq!(failed.len(), 1);

    // An endpoint nobody listens on: the error says so, without the URL.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/hook?token=hunter2", closed.local_addr().unwrap());
    drop(closed);
    let nobody = register(&s, &dead, Some(&["memory_store.archived"])).await;
    let (status, _) =
        s.call(Method::POST, &format!("/v1/memory_stores/{}/archive", list[0].resource_id), KEY, None).await;
    assert_eq!(status, 200);
    let list = until(&s, &nobody, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Failed)).await;
    let error = list[0].last_error.as_deref().unwrap();
    assert!(error.starts_with("could not connect"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
    assert_eq!(list[0].last_status_code, None);
}

#[tokio::test]
async fn endpoints_are_validated_filtered_updated_and_removed() {
    let (s, _task) = server_delivering(fast(3)).await;
    for (url, says) in [
        ("ftp://example.com/hook", "http:// or https://"),
        ("not a url", "absolute"),
        ("https://user:secret@example.com/hook", "credentials"),
    ] {
        let (status, body) = s.call(Method::POST, "/v1/webhook_endpoints", KEY, Some(json!({"url": url}))).await;
        assert_eq!(status, 400, "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{url}: {message}");
    }
    let (status, body) = s
        .call(
            Method::POST,
            "/v1/webhook_endpoints",
            KEY,
            Some(json!({"url": "https://x.test/", "event_types": ["session.bogus"]})),
        )
        .await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("unknown event type `session.bogus`"), "{body}");

    let receiver = Receiver::start(&[], 200).await;
    let endpoint = register(&s, &receiver.url, Some(&["memory_store.archived"])).await;
    let shown = s.client.get_webhook_endpoint(&endpoint.id).await.unwrap();
    assert_eq!(shown.secret, None, "a retrieval never carries the secret");
    let listed = s.client.list_webhook_endpoints(None, None).await.unwrap().data;
    assert!(listed.iter().all(|e| e.secret.is_none()));
    assert_eq!(s.client.webhook_endpoint_secret(&endpoint.id).await.unwrap().secret, endpoint.secret);

    // Only the subscribed type is sent.
    let store = s.new_store("filtered").await;
    s.client.archive_memory_store(&store.id).await.unwrap();
    let list = until(&s, &endpoint, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Delivered)).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].event_type.as_str(), "memory_store.archived");

    let patch =
        UpdateWebhookEndpoint { event_types: Some(None), description: Some(Some("all".into())), ..Default::default() };
    let updated = s.client.update_webhook_endpoint(&endpoint.id, &patch).await.unwrap();
    assert_eq!((updated.event_types, updated.description.as_deref()), (None, Some("all")));
    s.client.delete_memory_store(&store.id).await.unwrap();
    until(&s, &endpoint, |l| l.len() == 2 && l[0].status == DeliveryStatus::Delivered).await;

    s.client.delete_webhook_endpoint(&endpoint.id).await.unwrap();
    assert_eq!(error_type(s.client.get_webhook_endpoint(&endpoint.id).await), (404, "not_found_error".into()));
    let r = s.client.list_webhook_deliveries(&endpoint.id, None, None, None).await;
    assert_eq!(error_type(r), (404, "not_found_error".into()));
    let (status, _) = s.call(Method::GET, "/v1/webhook_endpoints/whep_nope/deliveries", KEY, None).await;
    assert_eq!(status, 404);
    let (status, body) = s.call(Method::GET, "/v1/webhook_endpoints/whep_nope/deliveries?status=lost", KEY, None).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn session_status_changes_are_sent_as_the_hosted_api_names_them() {
    let (s, _task) = server_delivering(fast(3)).await;
    let receiver = Receiver::start(&[], 200).await;
    let endpoint = register(
        &s,
        &receiver.url,
        Some(&[
            "session.created",
            "session.status_run_started",
            "session.status_idled",
            "session.requires_action",
            "session.status_terminated",
            "session.archived",
        ]),
    )
    .await;
    let agent = s.new_agent(toolset()).await;
    let (env, _) = s.new_environment_with_key().await;
    let (status, session) =
        s.call(Method::POST, "/v1/sessions", KEY, Some(json!({"agent": agent, "environment_id": env}))).await;
    assert_eq!(status, 200, "{session}");
    let id = session["id"].as_str().unwrap();
    let call = json!({"events": [{"type": "agent.tool_use", "name": "read", "input": {"file_path": "/x"}}]});
    let (status, body) = s.call(Method::POST, &format!("/v1/sessions/{id}/events"), KEY, Some(call)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = s.call(Method::POST, &format!("/v1/sessions/{id}/archive"), KEY, None).await;
    assert_eq!(status, 200);

    let list = until(&s, &endpoint, |l| l.len() == 6 && l.iter().all(|d| d.status == DeliveryStatus::Delivered)).await;
    let mut types: Vec<&str> = list.iter().rev().map(|d| d.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "session.created",
            "session.status_run_started",
            "session.status_idled",
            "session.requires_action",
            "session.status_terminated",
            "session.archived"
        ]
    );
    assert!(list.iter().all(|d| d.resource_id == id));
    let mut sent: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.body).unwrap()["data"]["type"].as_str().unwrap().to_owned())
        .collect();
    sent.sort();
    types.sort();
    assert_eq!(sent, types, "each sent once");
}

/// Two senders on one database (as two replicas sharing PostgreSQL run them): every event
/// reaches the receiver once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_senders_on_one_database_send_each_event_once() {
    const EVENTS: usize = 30;
    let (s, _a) = server_delivering(fast(3)).await;
    let _b = tokio::spawn(mnemo_server::deliver_webhooks(s.store(), fast(3)));
    let receiver = Receiver::start(&[], 200).await;
    let endpoint = register(&s, &receiver.url, Some(&["memory_store.created"])).await;
    for i in 0..EVENTS {
        s.new_store(&format!("twice-{i}")).await;
    }
    let list =
        until(&s, &endpoint, |l| l.len() == EVENTS && l.iter().all(|d| d.status == DeliveryStatus::Delivered)).await;
    assert!(list.iter().all(|d| d.attempts == 1), "one attempt each: {list:?}");
    let got = receiver.received();
    let ids: std::collections::HashSet<&str> = got.iter().map(|r| header(r, "webhook-id")).collect();
    assert_eq!((got.len(), ids.len()), (EVENTS, EVENTS), "each event sent once");
}

/// After a rotation a delivery carries two signatures, one per secret, so a receiver holding
/// either accepts it; with no overlap, only the new secret signs.
#[tokio::test]
async fn a_rotation_signs_with_both_secrets_while_they_overlap() {
    let (s, _task) = server_delivering(fast(3)).await;
    let receiver = Receiver::start(&[], 200).await;
    let endpoint = register(&s, &receiver.url, Some(&["memory_store.created"])).await;
    let old = endpoint.secret.clone().unwrap().into_exposed();
    let rotated = s.client.rotate_webhook_secret(&endpoint.id, Some(3600)).await.unwrap();
    let new = rotated.secret.clone().unwrap().into_exposed();
    assert_ne!(new, old);
    assert!(rotated.previous_secret_expires_at.is_some());
    s.new_store("rotating").await;
    let first = until(&s, &endpoint, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Delivered)).await;
    assert_eq!(first.len(), 1);
    let got = receiver.received();
    assert_eq!(header(&got[0], "webhook-signature").split(' ').count(), 2);
    assert!(verify(&got[0], &old) && verify(&got[0], &new), "either secret verifies");

    let (status, body) = s
        .call(
            Method::POST,
            &format!("/v1/webhook_endpoints/{}/rotate_secret", endpoint.id),
            KEY,
            Some(json!({"keep_previous_seconds": 0})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let newest = body["secret"].as_str().unwrap().to_owned();
    assert_eq!(body["previous_secret_expires_at"], Value::Null);
    s.new_store("rotated").await;
    until(&s, &endpoint, |l| l.len() == 2 && l[0].status == DeliveryStatus::Delivered).await;
    let last = receiver.received().pop().unwrap();
    assert_eq!(header(&last, "webhook-signature").split(' ').count(), 1);
    assert!(verify(&last, &newest) && !verify(&last, &new));

    let (status, body) = s
        .call(
            Method::POST,
            &format!("/v1/webhook_endpoints/{}/rotate_secret", endpoint.id),
            KEY,
            Some(json!({"keep_previous_seconds": 604801})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
}

/// Every spelling of a private address is refused when an endpoint is registered or moved
/// there, with a message that says what to do; nothing is stored.
#[tokio::test]
async fn endpoints_on_private_addresses_are_refused_in_every_spelling() {
    let (s, _task) = server_delivering(public_only(1)).await;
    let public = register(&s, "https://hooks.example.com/in", None).await;
    for url in [
        "http://127.0.0.1/hook",
        "http://127.1/hook",
        "http://2130706433/hook",
        "http://0x7f000001/hook",
        "http://0177.0.0.1/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/hook",
        "http://172.16.5.4:8080/hook",
        "http://192.168.1.1/hook",
        "http://100.64.0.1/hook",
        "http://[fd00::1]/hook",
        "http://[fe80::1]/hook",
        "http://localhost:8080/hook",
        "http://api.localhost/hook",
    ] {
        let (status, body) = s.call(Method::POST, "/v1/webhook_endpoints", KEY, Some(json!({"url": url}))).await;
        assert_eq!(status, 400, "{url}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("--webhook-allow-private"), "{url}: the message says what to do: {message}");
        let path = format!("/v1/webhook_endpoints/{}", public.id);
        let (status, body) = s.call(Method::POST, &path, KEY, Some(json!({"url": url}))).await;
        assert_eq!(status, 400, "moving an endpoint to {url}: {body}");
    }
    let listed = s.client.list_webhook_endpoints(None, None).await.unwrap().data;
    assert_eq!(listed.len(), 1, "only the public endpoint is stored");
    assert_eq!(listed[0].url, "https://hooks.example.com/in");
}

/// Names are judged on the addresses they resolve to when a delivery connects: an endpoint
/// whose name resolves to loopback (stored before the check existed, or rebound since) reaches
/// nothing, and neither does a literal address stored that way; the recorded error is the same
/// coarse text for an open port and a closed one.
#[tokio::test]
async fn deliveries_never_connect_to_private_addresses_whatever_the_name() {
    let (s, _task) = server_delivering(public_only(2)).await;
    let listening = Receiver::start(&[], 200).await;
    let port = listening.url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/hook").to_owned();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut endpoints = Vec::new();
    for url in [
        format!("http://localhost:{port}/hook"),
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        format!("http://localhost:{closed_port}/hook"),
    ] {
        // Straight into the store, as an endpoint registered under other rules would be.
        let new = mnemo_store::NewWebhookEndpoint {
            url: mnemo_api::parse_webhook_url(&url).unwrap(),
            event_types: None,
            description: None,
            secret: mnemo_api::generate_webhook_secret().into(),
        };
        let ws = s.store().default_workspace().await.unwrap();
        endpoints.push(s.store().create_webhook_endpoint(&ws, new).await.unwrap());
    }
    s.new_store("never-sent").await;
    for endpoint in &endpoints {
        let list = until(&s, endpoint, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Failed)).await;
        assert_eq!(list[0].last_error.as_deref(), Some("connection failed"), "{}: {:?}", endpoint.url, list[0]);
        assert_eq!(list[0].last_status_code, None);
    }
    assert!(listening.received().is_empty(), "nothing reached the loopback receiver");
}

/// `--webhook-allow-hosts` lets the named hosts through (and only them).
#[tokio::test]
async fn allowed_hosts_are_reached_and_others_still_refused() {
    let targets = WebhookTargets::public_only().allow_hosts(&["127.0.0.1"]).unwrap();
    let (s, _task) = server_delivering(WebhookConfig { targets, ..public_only(2) }).await;
    let receiver = Receiver::start(&[], 200).await;
    let endpoint = register(&s, &receiver.url, None).await;
    s.new_store("allowed").await;
    until(&s, &endpoint, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Delivered)).await;
    assert_eq!(receiver.received().len(), 1);
    let (status, body) =
        s.call(Method::POST, "/v1/webhook_endpoints", KEY, Some(json!({"url": "http://[::1]:9/hook"}))).await;
    assert_eq!(status, 400, "{body}");

    // Without --webhook-allow-private a real connection that fails says no more than that.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let nobody = register(&s, &dead, Some(&["memory_store.archived"])).await;
    let store = s.new_store("archived").await;
    s.client.archive_memory_store(&store.id).await.unwrap();
    let list = until(&s, &nobody, |l| l.first().is_some_and(|d| d.status == DeliveryStatus::Failed)).await;
    assert_eq!(list[0].last_error.as_deref(), Some("connection failed"), "a closed port is not told apart");
}
