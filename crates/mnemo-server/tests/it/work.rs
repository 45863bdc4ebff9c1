//! Sessions, the work queue and the credential matrix.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer, toolset};

/// An agent, a self-hosted environment with a key, and two memory stores.
pub(crate) struct World {
    pub(crate) s: TestServer,
    pub(crate) env: String,
    pub(crate) env_key: String,
    pub(crate) agent: String,
    pub(crate) rw_store: String,
    pub(crate) ro_store: String,
}

pub(crate) async fn world(ttl: u64) -> World {
    world_on(TestServer::with_limits(mnemo_store::Limits { work_lease_ttl_seconds: ttl, ..Default::default() }).await)
        .await
}

/// The same world on a server of the caller's making.
pub(crate) async fn world_on(s: TestServer) -> World {
    let agent = s.new_agent(toolset()).await;
    let (env, env_key) = s.new_environment_with_key().await;
    let (_, rw) = s
        .call(Method::POST, "/v1/memory_stores", KEY, Some(json!({"name": "User Preferences", "description": "prefs"})))
        .await;
    let (_, ro) = s.call(Method::POST, "/v1/memory_stores", KEY, Some(json!({"name": "user preferences!"}))).await;
    World {
        env,
        env_key,
        agent,
        rw_store: rw["id"].as_str().unwrap().to_owned(),
        ro_store: ro["id"].as_str().unwrap().to_owned(),
        s,
    }
}

impl World {
    pub(crate) async fn session(&self) -> Value {
        let (status, session) = self
            .s
            .call(
                Method::POST,
                "/v1/sessions",
                KEY,
                Some(json!({
                    "agent": self.agent,
                    "environment_id": self.env,
                    "resources": [
                        {"type": "memory_store", "memory_store_id": self.rw_store, "instructions": "keep it tidy"},
                        {"type": "memory_store", "memory_store_id": self.ro_store, "access": "read_only"}
                    ]
                })),
            )
            .await;
        assert_eq!(status, 200, "{session}");
        session
    }

    pub(crate) fn work(&self, suffix: &str) -> String {
        format!("/v1/environments/{}/work{suffix}", self.env)
    }

    pub(crate) async fn poll(&self) -> Value {
        self.s.call(Method::GET, &self.work("/poll?block_ms=50"), &self.env_key, None).await.1
    }

    /// A new session whose item is polled and acknowledged: (session id, item id, token).
    pub(crate) async fn leased(&self) -> (String, String, String) {
        let session = self.session().await;
        let work = self.poll().await;
        let id = work["id"].as_str().unwrap().to_owned();
        assert_eq!(self.s.call(Method::POST, &self.work(&format!("/{id}/ack")), &self.env_key, None).await.0, 200);
        (session["id"].as_str().unwrap().to_owned(), id, Self::token(&work))
    }

    fn token(work: &Value) -> String {
        mnemo_api::WorkSecret::decode(work["secret"].as_str().unwrap()).unwrap().sessions_token.into_exposed()
    }
}

#[tokio::test]
async fn sessions_snapshot_their_stores_with_distinct_mount_paths() {
    let w = world(300).await;
    let session = w.session().await;
    assert_eq!(session["status"], "idle");
    assert_eq!(session["agent"]["tools"][0]["default_config"]["permission_policy"]["type"], "always_allow");
    let r = &session["resources"];
    assert_eq!(r[0]["mount_path"], "/mnt/memory/user-preferences");
    assert_eq!(r[1]["mount_path"], "/mnt/memory/user-preferences-2", "colliding slugs get distinct paths");
    assert_eq!((r[0]["access"].as_str(), r[1]["access"].as_str()), (Some("read_write"), Some("read_only")));
    assert_eq!((r[0]["name"].as_str(), r[0]["description"].as_str()), (Some("User Preferences"), Some("prefs")));
    let prompt = session["memory_prompt"].as_str().unwrap();
    assert!(
        prompt.contains("/mnt/memory/user-preferences")
            && prompt.contains("keep it tidy")
            && prompt.contains("read-only")
    );

    // Refusals: other resource types, too many stores, archived stores, unknown agents.
    let bad = |resources: Value| json!({"agent": w.agent, "environment_id": w.env, "resources": resources});
    let (st, body) =
        w.s.call(Method::POST, "/v1/sessions", KEY, Some(bad(json!([{"type": "file", "file_id": "f"}])))).await;
    assert_eq!(st, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("self-hosted environment"));
    let nine: Vec<Value> = (0..9).map(|_| json!({"type": "memory_store", "memory_store_id": w.rw_store})).collect();
    assert_eq!(w.s.call(Method::POST, "/v1/sessions", KEY, Some(bad(Value::Array(nine)))).await.0, 400);
    w.s.call(Method::POST, &format!("/v1/memory_stores/{}/archive", w.ro_store), KEY, None).await;
    let archived = bad(json!([{"type": "memory_store", "memory_store_id": w.ro_store}]));
    assert_eq!(w.s.call(Method::POST, "/v1/sessions", KEY, Some(archived)).await.0, 400);
    let unknown = json!({"agent": "agent_nope", "environment_id": w.env});
    assert_eq!(w.s.call(Method::POST, "/v1/sessions", KEY, Some(unknown)).await.0, 400);

    let id = session["id"].as_str().unwrap();
    let (_, listed) =
        w.s.call(Method::GET, &format!("/v1/sessions?memory_store_id={}&statuses[]=idle", w.rw_store), KEY, None).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed["data"][0]["id"], id);
    let (_, none) = w.s.call(Method::GET, "/v1/sessions?statuses[]=running", KEY, None).await;
    assert!(none["data"].as_array().unwrap().is_empty());
    let (st, updated) =
        w.s.call(Method::POST, &format!("/v1/sessions/{id}"), KEY, Some(json!({"title": "t", "metadata": {"a": "1"}})))
            .await;
    assert_eq!((st, updated["title"].as_str(), updated["metadata"]["a"].as_str()), (200, Some("t"), Some("1")));
    let (_, cleared) = w
        .s
        .call(Method::POST, &format!("/v1/sessions/{id}"), KEY, Some(json!({"title": null, "metadata": {"a": null}})))
        .await;
    assert_eq!((&cleared["title"], cleared["metadata"].as_object().unwrap().len()), (&Value::Null, 0));
    let (_, archived) = w.s.call(Method::POST, &format!("/v1/sessions/{id}/archive"), KEY, None).await;
    assert_eq!(archived["status"], "terminated");
}

#[tokio::test]
async fn the_lease_state_machine() {
    let w = world(300).await;
    let session = w.session().await;

    let empty_stats = w.s.call(Method::GET, &w.work("/stats"), &w.env_key, None).await.1;
    assert_eq!((empty_stats["depth"].as_u64(), empty_stats["pending"].as_u64()), (Some(1), Some(0)));

    let work = w.poll().await;
    assert_eq!(work["type"], "work");
    assert_eq!(work["data"], json!({"type": "session", "id": session["id"]}));
    let id = work["id"].as_str().unwrap().to_owned();
    assert_eq!(w.poll().await, Value::Null, "a delivered item is hidden from other polls");
    let stats = w.s.call(Method::GET, &w.work("/stats"), &w.env_key, None).await.1;
    assert_eq!((stats["depth"].as_u64(), stats["pending"].as_u64()), (Some(0), Some(1)));

    let (st, acked) = w.s.call(Method::POST, &w.work(&format!("/{id}/ack")), &w.env_key, None).await;
    assert_eq!((st, acked["state"].as_str(), acked["secret"].as_str()), (200, Some("starting"), None));
    assert_eq!(w.s.call(Method::POST, &w.work(&format!("/{id}/ack")), &w.env_key, None).await.0, 409);

    let token = World::token(&work);
    let hb = |expected: &str| format!("/{id}/heartbeat?expected_last_heartbeat={}", urlencode(expected));
    let (st, first) = w.s.call(Method::POST, &w.work(&hb("NO_HEARTBEAT")), &token, None).await;
    assert_eq!(st, 200, "{first}");
    assert_eq!(
        (first["state"].as_str(), first["lease_extended"].as_bool(), first["ttl_seconds"].as_u64()),
        (Some("active"), Some(true), Some(300))
    );
    let last = first["last_heartbeat"].as_str().unwrap().to_owned();
    let (st, stale) = w.s.call(Method::POST, &w.work(&hb("NO_HEARTBEAT")), &w.env_key, None).await;
    assert_eq!(st, 412);
    assert_eq!(stale["error"]["details"]["error_code"], "heartbeat_precondition_failed");
    assert_eq!(stale["error"]["details"]["current_state"]["last_heartbeat"], last.as_str());
    let (st, second) = w.s.call(Method::POST, &w.work(&hb(&last)), &token, None).await;
    assert_eq!(st, 200);
    assert_ne!(second["last_heartbeat"], first["last_heartbeat"]);

    // A graceful stop is learned through a normal heartbeat; the forced stop ends it.
    let (_, stopping) = w.s.call(Method::POST, &w.work(&format!("/{id}/stop")), KEY, Some(json!({}))).await;
    assert_eq!(stopping["state"], "stopping");
    let (st, told) = w.s.call(Method::POST, &w.work(&hb("whatever")), &token, None).await;
    assert_eq!((st, told["state"].as_str(), told["lease_extended"].as_bool()), (200, Some("stopping"), Some(false)));
    let (_, stopped) =
        w.s.call(Method::POST, &w.work(&format!("/{id}/stop")), &token, Some(json!({"force": true}))).await;
    assert_eq!(stopped["state"], "stopped");
    let resp =
        w.s.raw(Method::POST, &w.work(&format!("/{id}/stop")))
            .bearer_auth(KEY)
            .json(&json!({"force": true}))
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status(), 409);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    // The sessions token died with the item.
    assert_eq!(
        w.s.call(Method::GET, &format!("/v1/sessions/{}", session["id"].as_str().unwrap()), &token, None).await.0,
        401
    );
    let (_, listed) = w.s.call(Method::GET, &w.work(""), &w.env_key, None).await;
    assert_eq!(listed["data"][0]["state"], "stopped");
    assert_eq!(listed["data"][0]["secret"], Value::Null);
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test]
async fn unacknowledged_deliveries_and_lapsed_leases_return_to_the_queue() {
    let w = world(1).await;
    w.session().await;
    let (_, first) =
        w.s.call(Method::GET, &w.work("/poll?block_ms=10&reclaim_older_than_ms=1"), &w.env_key, None).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (_, again) =
        w.s.call(Method::GET, &w.work("/poll?block_ms=10&reclaim_older_than_ms=60000"), &w.env_key, None).await;
    assert_eq!(again["id"], first["id"], "redelivered after the reclaim window");
    assert_ne!(again["secret"], first["secret"], "with a fresh secret");
    let old_token = World::token(&first);
    let id = again["id"].as_str().unwrap().to_owned();
    assert_eq!(
        w.s.call(Method::GET, &format!("/v1/sessions/{}", again["data"]["id"].as_str().unwrap()), &old_token, None)
            .await
            .0,
        401
    );

    assert_eq!(w.s.call(Method::POST, &w.work(&format!("/{id}/ack")), &w.env_key, None).await.0, 200);
    let token = World::token(&again);
    let (st, _) =
        w.s.call(Method::POST, &w.work(&format!("/{id}/heartbeat?expected_last_heartbeat=NO_HEARTBEAT")), &token, None)
            .await;
    assert_eq!(st, 200);
    // No heartbeat for longer than the 1 s TTL: the item is queued again for another worker.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let reclaimed = w.poll().await;
    assert_eq!(reclaimed["id"], id.as_str());
    assert_eq!(reclaimed["state"], "queued");
    let (st, _) =
        w.s.call(Method::POST, &w.work(&format!("/{id}/heartbeat?expected_last_heartbeat=NO_HEARTBEAT")), &token, None)
            .await;
    assert_eq!(st, 401, "the lapsed lease's token is dead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pollers_never_share_an_item() {
    let w = world(300).await;
    for _ in 0..20 {
        w.session().await;
    }
    let base = w.s.base.clone();
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let (base, key, path) = (base.clone(), w.env_key.clone(), w.work("/poll?block_ms=100"));
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut got = Vec::new();
                for _ in 0..6 {
                    let v: Value = client
                        .get(format!("{base}{path}"))
                        .bearer_auth(&key)
                        .header("anthropic-worker-id", format!("worker-{i}"))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    if let Some(id) = v["id"].as_str() {
                        got.push(id.to_owned());
                    }
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), unique.len(), "an item was delivered twice");
    assert_eq!(unique.len(), 20, "every item was delivered");
    let stats = w.s.call(Method::GET, &w.work("/stats"), &w.env_key, None).await.1;
    assert_eq!(stats["workers_polling"], 12);
}

#[tokio::test]
async fn a_long_poll_wakes_when_work_arrives() {
    let w = world(300).await;
    let (base, key, path) = (w.s.base.clone(), w.env_key.clone(), w.work("/poll?block_ms=999"));
    let poller = tokio::spawn(async move {
        reqwest::Client::new()
            .get(format!("{base}{path}"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    w.session().await;
    let got = poller.await.unwrap();
    assert_eq!(got["type"], "work", "{got}");
    assert_eq!(w.s.call(Method::GET, &w.work("/poll?block_ms=0"), &w.env_key, None).await.0, 400);
}

#[tokio::test]
async fn the_credential_matrix() {
    let w = world(300).await;
    let session = w.session().await;
    let sid = session["id"].as_str().unwrap().to_owned();
    let other_session = w.session().await;
    let work = w.poll().await;
    let id = work["id"].as_str().unwrap().to_owned();
    let token = World::token(&work);
    let (_, other_env) = w.s.call(Method::POST, "/v1/environments", KEY, Some(json!({"name": "other"}))).await;
    let (_, other_key) =
        w.s.call(Method::POST, &format!("/v1/environments/{}/keys", other_env["id"].as_str().unwrap()), KEY, None)
            .await;
    let other_key = other_key["key"].as_str().unwrap().to_owned();

    let expect = |what: &str, got: u16, want: u16| assert_eq!(got, want, "{what}");
    // The work queue.
    expect("poll with an API key", w.s.call(Method::GET, &w.work("/poll"), KEY, None).await.0, 403);
    expect(
        "poll with another environment's key",
        w.s.call(Method::GET, &w.work("/poll"), &other_key, None).await.0,
        403,
    );
    expect("poll with a sessions token", w.s.call(Method::GET, &w.work("/poll"), &token, None).await.0, 403);
    expect(
        "retrieve with the environment key",
        w.s.call(Method::GET, &w.work(&format!("/{id}")), &w.env_key, None).await.0,
        403,
    );
    expect("retrieve with an API key", w.s.call(Method::GET, &w.work(&format!("/{id}")), KEY, None).await.0, 200);
    expect("stats with an API key", w.s.call(Method::GET, &w.work("/stats"), KEY, None).await.0, 200);
    // Sessions.
    let other_sid = other_session["id"].as_str().unwrap();
    expect(
        "own session with its token",
        w.s.call(Method::GET, &format!("/v1/sessions/{sid}"), &token, None).await.0,
        200,
    );
    expect(
        "another session with a token",
        w.s.call(Method::GET, &format!("/v1/sessions/{other_sid}"), &token, None).await.0,
        403,
    );
    expect(
        "session with the environment key",
        w.s.call(Method::GET, &format!("/v1/sessions/{sid}"), &w.env_key, None).await.0,
        200,
    );
    expect(
        "session with another environment's key",
        w.s.call(Method::GET, &format!("/v1/sessions/{sid}"), &other_key, None).await.0,
        403,
    );
    expect(
        "create a session with a token",
        w.s.call(Method::POST, "/v1/sessions", &token, Some(json!({}))).await.0,
        403,
    );
    // Memory: the environment key is refused; the token reaches only its session's stores.
    let mem = |store: &str| format!("/v1/memory_stores/{store}/memories");
    expect(
        "memories with the environment key",
        w.s.call(Method::GET, &mem(&w.rw_store), &w.env_key, None).await.0,
        403,
    );
    expect("list stores with a token", w.s.call(Method::GET, "/v1/memory_stores", &token, None).await.0, 403);
    let (st, created) =
        w.s.call(Method::POST, &mem(&w.rw_store), &token, Some(json!({"path": "/a.md", "content": "x"}))).await;
    expect("write an attached read_write store", st, 200);
    expect("read a read_only store", w.s.call(Method::GET, &mem(&w.ro_store), &token, None).await.0, 200);
    let (st, refused) =
        w.s.call(Method::POST, &mem(&w.ro_store), &token, Some(json!({"path": "/b.md", "content": "x"}))).await;
    assert_eq!((st, refused["error"]["type"].as_str()), (403, Some("permission_error")));
    let (_, foreign) = w.s.call(Method::POST, "/v1/memory_stores", KEY, Some(json!({"name": "foreign"}))).await;
    expect(
        "an unattached store",
        w.s.call(Method::GET, &mem(foreign["id"].as_str().unwrap()), &token, None).await.0,
        403,
    );
    expect(
        "redact with a token",
        w.s.call(
            Method::POST,
            &format!(
                "/v1/memory_stores/{}/memory_versions/{}/redact",
                w.rw_store,
                created["memory_version_id"].as_str().unwrap()
            ),
            &token,
            None,
        )
        .await
        .0,
        403,
    );
    // Versions written with the token name the session.
    let (_, versions) =
        w.s.call(Method::GET, &format!("/v1/memory_stores/{}/memory_versions?session_id={sid}", w.rw_store), KEY, None)
            .await;
    assert_eq!(versions["data"][0]["created_by"], json!({"type": "session_actor", "session_id": sid}));
    // Administration needs an API key.
    expect("agents with the environment key", w.s.call(Method::GET, "/v1/agents", &w.env_key, None).await.0, 403);
    expect("environments with a token", w.s.call(Method::GET, "/v1/environments", &token, None).await.0, 403);
    // The token dies when its item stops.
    w.s.call(Method::POST, &w.work(&format!("/{id}/stop")), KEY, Some(json!({"force": true}))).await;
    expect("token after stop", w.s.call(Method::GET, &mem(&w.rw_store), &token, None).await.0, 401);
}

#[tokio::test]
async fn healthchecks_and_time_filters() {
    let w = world(300).await;
    let (st, hc) = w.s.call(Method::POST, &w.work("/healthcheck"), KEY, None).await;
    assert_eq!((st, hc["data"]["type"].as_str(), hc["state"].as_str()), (200, Some("healthcheck"), Some("queued")));
    assert_eq!(w.s.call(Method::POST, &w.work("/healthcheck"), &w.env_key, None).await.0, 403);
    let polled = w.poll().await;
    assert_eq!(polled["id"], hc["id"]);
    // Regression: the worker acks a healthcheck and force-stops it with its sessions token,
    // which has no session; that stop was a 500 and the item came back after every lease.
    let id = polled["id"].as_str().unwrap();
    assert_eq!(w.s.call(Method::POST, &w.work(&format!("/{id}/ack")), &w.env_key, None).await.0, 200);
    let token = World::token(&polled);
    let (st, stopped) =
        w.s.call(Method::POST, &w.work(&format!("/{id}/stop")), &token, Some(json!({"force": true}))).await;
    assert_eq!((st, stopped["state"].as_str()), (200, Some("stopped")), "{stopped}");

    let first = w.session().await;
    let created = first["created_at"].as_str().unwrap();
    let enc = |t: &str| form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>();
    let (_, at) = w
        .s
        .call(Method::GET, &format!("/v1/sessions?created_at[gte]={0}&created_at[lte]={0}", enc(created)), KEY, None)
        .await;
    assert_eq!(at["data"].as_array().unwrap().len(), 1);
    let (_, after) = w.s.call(Method::GET, &format!("/v1/sessions?created_at[gt]={}", enc(created)), KEY, None).await;
    assert!(after["data"].as_array().unwrap().is_empty());
    let (st, _) = w.s.call(Method::GET, "/v1/sessions?created_at[gte]=yesterday", KEY, None).await;
    assert_eq!(st, 400);
}

/// Regression: a sessions token stopped authenticating only when a later poll or heartbeat in
/// its environment happened to expire the lease. It now dies the moment the lease lapses.
#[tokio::test]
async fn a_sessions_token_dies_the_moment_its_lease_lapses() {
    let w = world(1).await;
    let (sid, _, token) = w.leased().await;
    let own_session = format!("/v1/sessions/{sid}");
    assert_eq!(w.s.call(Method::GET, &own_session, &token, None).await.0, 200, "alive while leased");
    // Nothing else happens in the environment: no poll, no heartbeat.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (st, body) = w.s.call(Method::GET, &own_session, &token, None).await;
    assert_eq!(st, 401, "{body}");
    let store = format!("/v1/memory_stores/{}/memories", w.rw_store);
    assert_eq!(w.s.call(Method::GET, &store, &token, None).await.0, 401, "on every endpoint");
}

/// Regression: an item stopped gracefully whose worker died stayed `stopping` for ever, and
/// its session never got work again.
#[tokio::test]
async fn a_stopping_item_whose_worker_is_gone_frees_its_session() {
    let w = world(1).await;
    let (sid, id, _) = w.leased().await;
    let (_, stopping) = w.s.call(Method::POST, &w.work(&format!("/{id}/stop")), KEY, Some(json!({}))).await;
    assert_eq!(stopping["state"], "stopping");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let message = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "again"}]}]});
    let (st, _) = w.s.call(Method::POST, &format!("/v1/sessions/{sid}/events"), KEY, Some(message)).await;
    assert_eq!(st, 200);
    let next = w.poll().await;
    assert_eq!(next["data"]["id"], sid.as_str(), "the new input queued new work");
    assert_ne!(next["id"], id.as_str());
    let (_, old) = w.s.call(Method::GET, &w.work(&format!("/{id}")), KEY, None).await;
    assert_eq!(old["state"], "stopped");
}

#[tokio::test]
async fn a_key_is_revoked_only_through_its_own_environment() {
    let w = world(300).await;
    let (_, other) = w
        .s
        .call(Method::POST, "/v1/environments", KEY, Some(json!({"name": "other", "config": {"type": "self_hosted"}})))
        .await;
    let other = other["id"].as_str().unwrap();
    let (_, keys) = w.s.call(Method::GET, &format!("/v1/environments/{}/keys", w.env), KEY, None).await;
    let key_id = keys["data"][0]["id"].as_str().unwrap();
    let (st, body) = w.s.call(Method::POST, &format!("/v1/environments/{other}/keys/{key_id}/revoke"), KEY, None).await;
    assert_eq!(st, 404, "{body}");
    assert_eq!(w.s.call(Method::GET, &w.work("/poll"), &w.env_key, None).await.0, 200, "the key still works");
    let (st, revoked) =
        w.s.call(Method::POST, &format!("/v1/environments/{}/keys/{key_id}/revoke", w.env), KEY, None).await;
    assert_eq!(st, 200);
    assert!(revoked["revoked_at"].is_string());
    assert_eq!(w.s.call(Method::GET, &w.work("/poll"), &w.env_key, None).await.0, 401);
}

/// The lease sweep sleeps until the next lease lapses instead of writing on a tick: with a
/// one-second lease and a sweep allowed to be a minute apart, the listing (which judges no
/// lease itself) shows the item back in the queue right after it lapsed.
#[tokio::test]
async fn the_lease_sweep_wakes_when_a_lease_lapses() {
    use mnemo_store_tests::cases::fixtures::{environment, fresh_hash, session};
    let s = TestServer::with_limits(mnemo_store::Limits { work_lease_ttl_seconds: 1, ..Default::default() }).await;
    let store = s.store();
    let ws = store.default_workspace().await.unwrap();
    let env = environment(&*store, true).await;
    session(&*store, &env).await;
    let item = store.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().expect("the session's item");
    store.ack_work(&ws, &env.id, &item.id).await.unwrap();
    let sweep = tokio::spawn(mnemo_server::expire_work_leases(store.clone(), Duration::from_secs(60)));
    let listed = || async {
        let listing = store.list_work(&ws, &env.id, 10, None).await.unwrap();
        listing.items.into_iter().find(|w| w.id == item.id).unwrap().state
    };
    assert_eq!(listed().await, mnemo_api::WorkState::Starting);
    let requeued = tokio::time::timeout(Duration::from_secs(20), async {
        while listed().await != mnemo_api::WorkState::Queued {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    sweep.abort();
    assert!(requeued.is_ok(), "the sweep applied the lapsed lease without waiting for its minute");
}
