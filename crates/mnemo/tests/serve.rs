//! End-to-end tests of `mnemo serve` as a real process on an ephemeral port.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mnemo_api::{CreateMemoryStore, View};
use mnemo_client::Client;

use common::Server;

#[tokio::test]
async fn first_start_creates_and_prints_one_key_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let mut server = Server::start(&db, &[]);
    server.signal("-TERM");
    assert!(server.child.wait().unwrap().success(), "SIGTERM shuts down cleanly");
    let err = server.stderr();
    let key =
        err.lines().map(str::trim).find(|l| l.starts_with("sk-mnemo-")).expect("the key is printed once").to_owned();
    // And, once, the console's setup link for the first admin, under the address it listens on.
    let link = err.lines().map(str::trim).find(|l| l.contains("/console/setup/")).expect("the setup link is printed");
    assert!(link.starts_with(&format!("{}/console/setup/mnemo-setup-", server.base)), "{link}");

    let mut again = Server::start(&db, &[]);
    let client = Client::new(&again.base, &key).unwrap();
    client.create_memory_store(&CreateMemoryStore { name: "x".into(), ..Default::default() }).await.unwrap();
    again.signal("-INT");
    assert!(again.child.wait().unwrap().success());
    let again = again.stderr();
    assert!(!again.contains("sk-mnemo-"), "no new key once one exists");
    assert!(!again.contains("/console/setup/"), "the setup link is printed on the first start only");
}

const FLAG_ONE: &str = "sk-flag-one-0123456789abcdefghijklmn";
const FLAG_TWO: &str = "sk-flag-two-0123456789abcdefghijklmn";

#[tokio::test]
async fn api_keys_from_flags_work_and_are_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&dir.path().join("db.sqlite"), &["--api-key", FLAG_ONE, "--api-key", FLAG_TWO]);
    for key in [FLAG_ONE, FLAG_TWO] {
        let client = Client::new(&server.base, key).unwrap();
        client.list_memory_stores(&Default::default()).await.unwrap();
    }
    let wrong = Client::new(&server.base, "sk-wrong").unwrap();
    assert_eq!(wrong.list_memory_stores(&Default::default()).await.unwrap_err().status(), Some(401));
    server.signal("-TERM");
    server.child.wait().unwrap();
    let log = server.stderr();
    assert!(!log.contains("sk-flag") && !log.contains("sk-wrong"), "{log}");
}

#[test]
fn bad_database_urls_fail_with_a_clear_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database", "mysql://root:hunter2@db/mnemo"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unsupported database scheme `mysql:`; this build supports `sqlite://PATH"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the URL's password leaked: {stderr}");
}

/// Writers hammer the server; it is killed with SIGKILL mid-flight; every write it had
/// acknowledged is there after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_never_loses_an_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let mut server = Server::start(&db, &["--api-key", common::KEY]);
    let client = Client::new(&server.base, common::KEY).unwrap().with_max_retries(0);
    let store =
        client.create_memory_store(&CreateMemoryStore { name: "crash".into(), ..Default::default() }).await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (client, store, stop) = (client.clone(), store.id.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let path = format!("/w{w}/m{i}");
                    match client.create_memory(&store, &path, &format!("content {w} {i}"), None).await {
                        Ok(m) => acked.push((path, m.content_sha256)),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(acked.len() > 8, "the writers made progress before the kill ({})", acked.len());

    let server = Server::start(&db, &["--api-key", common::KEY]);
    let client = Client::new(&server.base, common::KEY).unwrap();
    let stored = client.list_all_memories(&store.id, View::Basic).await.unwrap();
    let stored: std::collections::HashMap<_, _> = stored.into_iter().map(|m| (m.path, m.content_sha256)).collect();
    for (path, sha) in &acked {
        assert_eq!(stored.get(path), Some(sha), "acknowledged write {path} was lost");
    }
}

#[tokio::test]
async fn env_key_create_prints_the_key_alone_and_revoke_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db.sqlite"), &["--api-key", common::KEY]);
    let client = Client::new(&server.base, common::KEY).unwrap();
    let env = client
        .create_environment(&mnemo_api::CreateEnvironment { name: "e".into(), ..Default::default() })
        .await
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["env-key", "create", env.id.as_str(), "--base-url", &server.base, "--api-key", common::KEY])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout:?}");
    assert!(lines[0].starts_with("sk-mnemo-env-"));

    let keys = client.list_environment_keys(&env.id).await.unwrap().data;
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args([
            "env-key",
            "revoke",
            env.id.as_str(),
            keys[0].id.as_str(),
            "--base-url",
            &server.base,
            "--api-key",
            common::KEY,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(client.list_environment_keys(&env.id).await.unwrap().data[0].revoked_at.is_some());

    let bad = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["env-key", "create", "env_doesnotexist", "--base-url", &server.base, "--api-key", common::KEY])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not found"));
}

/// The connection flags reach the server: a client stalled in its headers is cut off after
/// `--header-read-timeout`, and with `--max-connections 1` the next client is served only then.
#[tokio::test]
async fn connection_flags_cut_off_a_client_stalled_in_its_headers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        &dir.path().join("db.sqlite"),
        &[
            "--api-key",
            common::KEY,
            "--header-read-timeout",
            "1",
            "--body-timeout",
            "1",
            "--max-connections",
            "1",
            "--max-connections-per-address",
            "0",
        ],
    );
    let addr = server.base.strip_prefix("http://").unwrap().to_owned();
    let started = std::time::Instant::now();
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stalled.write_all(b"GET /healthz HTTP/1.1\r\nhost: mnemo\r\n").await.unwrap();
    let client = Client::new(&server.base, common::KEY).unwrap().with_max_retries(0);
    // Waits for the only slot, which the stalled client holds until its second is up.
    client.list_memory_stores(&Default::default()).await.unwrap();
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(std::time::Duration::from_secs(30), stalled.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "the stalled client was disconnected: {closed:?}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));

    server.signal("-TERM");
    assert!(server.child.wait().unwrap().success());

    let zero = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["serve", "--listen", "127.0.0.1:0", "--max-connections", "0"])
        .output()
        .unwrap();
    assert!(!zero.status.success(), "--max-connections 0 is refused");
}

/// A receiver on 127.0.0.1 that records the `webhook-id` of every POST and answers with the
/// status `answer` holds at the time.
async fn webhook_receiver(answer: Arc<std::sync::atomic::AtomicU16>) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let got = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else { return };
            let (answer, got) = (Arc::clone(&answer), Arc::clone(&got));
            tokio::spawn(async move {
                let mut conn = BufReader::new(conn);
                loop {
                    let (mut length, mut id) = (0usize, None);
                    let mut line = String::new();
                    if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        conn.read_line(&mut line).await.unwrap();
                        let header = line.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        let (name, value) = header.split_once(':').unwrap();
                        match name.to_ascii_lowercase().as_str() {
                            "content-length" => length = value.trim().parse().unwrap(),
                            "webhook-id" => id = Some(value.trim().to_owned()),
                            _ => {}
                        }
                    }
                    let mut body = vec![0; length];
                    conn.read_exact(&mut body).await.unwrap();
                    got.lock().unwrap().push(id.expect("a webhook-id header"));
                    let status = answer.load(Ordering::SeqCst);
                    let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
                    conn.get_mut().write_all(reply.as_bytes()).await.unwrap();
                }
            });
        }
    });
    (url, seen)
}

/// `mnemo webhook` registers an endpoint; its delivery keeps failing until the server is
/// killed (-9); after a restart on the same database the pending delivery resumes and is
/// delivered as the same event; `deliveries`, `list`, `secret` and `remove` show and undo it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_deliveries_resume_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let flags = [
        "--api-key",
        common::KEY,
        "--webhook-allow-private",
        "--webhook-retry-delay",
        "0.1",
        "--webhook-poll-interval",
        "0.05",
        "--webhook-max-attempts",
        "100",
    ];
    let answer = Arc::new(std::sync::atomic::AtomicU16::new(500));
    let (url, seen) = webhook_receiver(Arc::clone(&answer)).await;
    let mut server = Server::start(&db, &flags);
    let at = |server: &Server| ["--base-url".to_owned(), server.base.clone(), "--api-key".into(), common::KEY.into()];

    let bad = common::mnemo().args(["webhook", "add", "ftp://example.com/"]).args(at(&server)).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("http:// or https://"), "{bad:?}");
    let added = common::mnemo()
        .args(["webhook", "add", &url, "--events", "memory_store.created"])
        .args(at(&server))
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let out = String::from_utf8(added.stdout).unwrap();
    let (id, secret) = out.trim().split_once('\n').expect("the id, then the secret");
    assert!(id.starts_with("whep_") && secret.starts_with("whsec_"), "{out}");

    let store = server
        .client()
        .create_memory_store(&CreateMemoryStore { name: "hooked".into(), ..Default::default() })
        .await
        .unwrap();
    let failing = || seen.lock().unwrap().len() >= 2;
    assert!(common::wait_until(std::time::Duration::from_secs(20), failing), "the failing delivery is retried");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let before = seen.lock().unwrap().clone();
    answer.store(200, Ordering::SeqCst);

    let server = Server::start(&db, &flags);
    let deliveries = || {
        let out = common::mnemo().args(["webhook", "deliveries", id]).args(at(&server)).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        common::wait_until(std::time::Duration::from_secs(20), || deliveries().contains("\tdelivered\t")),
        "the pending delivery resumes after the restart: {}",
        deliveries()
    );
    let listed = deliveries();
    assert!(listed.contains("memory_store.created") && listed.contains(store.id.as_str()), "{listed}");
    assert!(listed.contains("last=HTTP 200"), "{listed}");
    let after = seen.lock().unwrap().clone();
    assert!(after.len() > before.len());
    assert!(after.iter().all(|e| *e == before[0]), "every attempt, before and after the restart, is one event");

    let run = |args: &[&str]| {
        let out = common::mnemo().args(["webhook"]).args(args).args(at(&server)).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&["list"]).trim(), format!("{id}\t{url}\tmemory_store.created"));
    assert_eq!(run(&["secret", id]).trim(), secret);
    let rotated = run(&["rotate", id, "--keep-previous", "0"]);
    let rotated = rotated.trim();
    assert!(rotated.starts_with("whsec_") && rotated != secret, "{rotated}");
    assert_eq!(run(&["secret", id]).trim(), rotated);
    run(&["remove", id]);
    assert_eq!(run(&["list"]), "");
}

/// Two `mnemo serve` replicas on one PostgreSQL schema, each sending webhooks: every event,
/// whichever replica made the change, reaches the receiver exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_send_each_webhook_event_once() {
    const EVENTS: usize = 40;
    let schema = mnemo_store_tests::Postgres::fresh_schema().await;
    let base = mnemo_store_tests::Postgres::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
    let flags = ["--api-key", common::KEY, "--webhook-allow-private", "--webhook-poll-interval", "0.05"];
    let a = Server::on(&url, &flags);
    let b = Server::on(&url, &flags);
    let answer = Arc::new(std::sync::atomic::AtomicU16::new(200));
    let (hook, seen) = webhook_receiver(answer).await;
    let body = mnemo_api::CreateWebhookEndpoint {
        url: hook,
        event_types: Some(vec!["memory_store.created".into()]),
        description: None,
    };
    a.client().create_webhook_endpoint(&body).await.unwrap();
    for i in 0..EVENTS {
        let via = if i % 2 == 0 { &a } else { &b };
        via.client()
            .create_memory_store(&CreateMemoryStore { name: format!("r{i}"), ..Default::default() })
            .await
            .unwrap();
    }
    let all = || seen.lock().unwrap().len() >= EVENTS;
    assert!(common::wait_until(std::time::Duration::from_secs(30), all), "every event arrives");
    // Whatever a duplicate would need (a second claim of a delivery) would have happened by the
    // time every delivery is recorded as delivered.
    let endpoint = a.client().list_webhook_endpoints(None, None).await.unwrap().data.remove(0);
    let done = || async {
        let list = b.client().list_webhook_deliveries(&endpoint.id, None, Some(100), None).await.unwrap().data;
        list.len() == EVENTS && list.iter().all(|d| d.status == mnemo_api::DeliveryStatus::Delivered)
    };
    assert!(common::wait_until_async(std::time::Duration::from_secs(30), done).await);
    let got = seen.lock().unwrap().clone();
    let distinct: std::collections::HashSet<&String> = got.iter().collect();
    assert_eq!((got.len(), distinct.len()), (EVENTS, EVENTS), "each event sent once: {got:?}");
}

/// Operator-given keys shorter than 32 characters are refused at start, from the flag and from
/// `MNEMO_API_KEY` alike, without the key in the message.
#[test]
fn short_api_keys_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("db.sqlite").display());
    let serve = |key_flag: Option<&str>, key_env: Option<&str>| {
        let mut cmd = common::mnemo();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--database", &db]).env_remove("MNEMO_API_KEY");
        if let Some(key) = key_flag {
            cmd.args(["--api-key", key]);
        }
        if let Some(key) = key_env {
            cmd.env("MNEMO_API_KEY", key);
        }
        cmd.output().unwrap()
    };
    for (flag, env) in [
        (Some("a"), None),
        (Some("sk-short-but-not-short-enough"), None),
        (None, Some("sk-env-too-short")),
        (None, Some(&format!("{},tiny-key", common::KEY)[..])),
    ] {
        let out = serve(flag, env);
        assert!(!out.status.success(), "{flag:?} / {env:?} must be refused");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("at least 32"), "the message says what is wanted: {stderr}");
        for secret in ["sk-short-but", "sk-env-too-short", "tiny-key"] {
            assert!(!stderr.contains(secret), "the key is not shown: {stderr}");
        }
        assert!(!dir.path().join("db.sqlite").exists(), "nothing is opened before the check");
    }
}

/// The fairness and webhook flags are checked at start: streams must leave connections for
/// other requests, and allowed webhook hosts must be hosts.
#[test]
fn bad_fairness_and_webhook_flags_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("db.sqlite").display());
    for (flags, says) in [
        (&["--max-connections", "20", "--max-streams", "20"][..], "--max-streams must be below --max-connections"),
        (&["--webhook-allow-hosts", "http://hooks.internal/"][..], "--webhook-allow-hosts"),
    ] {
        let out = common::mnemo()
            .args(["serve", "--listen", "127.0.0.1:0", "--database", &db, "--api-key", common::KEY])
            .args(flags)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}

/// By default `mnemo serve` refuses webhook endpoints on private addresses (the CLI shows why);
/// `--webhook-allow-private` lets them in.
#[tokio::test]
async fn webhook_endpoints_on_private_addresses_need_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let add = |server: &Server, url: &str| {
        common::mnemo()
            .args(["webhook", "add", url])
            .args(["--base-url", &server.base, "--api-key", common::KEY])
            .output()
            .unwrap()
    };
    let strict = Server::start(&dir.path().join("a.sqlite"), &["--api-key", common::KEY]);
    for url in ["http://127.0.0.1:9/hook", "http://0x7f000001/hook", "http://169.254.169.254/", "http://localhost/"] {
        let out = add(&strict, url);
        assert!(!out.status.success(), "{url} is refused");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--webhook-allow-private"), "{out:?}");
    }
    let open = Server::start(&dir.path().join("b.sqlite"), &["--api-key", common::KEY, "--webhook-allow-private"]);
    let out = add(&open, "http://127.0.0.1:9/hook");
    assert!(out.status.success(), "{out:?}");
}

/// Sends what `make` builds until it is not refused at the door for the address's connection
/// cap (that answer, written before any request is read, has no `request-id`), while a
/// connection the test just closed is still being counted.
async fn past_the_address_cap(make: impl Fn() -> reqwest::RequestBuilder) -> reqwest::Response {
    for _ in 0..500 {
        let resp = make().send().await.unwrap();
        if resp.status() == 429 && resp.headers().get("request-id").is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            continue;
        }
        return resp;
    }
    panic!("always refused at the door");
}

/// The fairness flags reach the server: `--max-connections-per-address` refuses one connection
/// too many from an address, `--max-streams-per-credential` one stream too many of a key, and
/// `--auth-failures-per-minute` throttles a guesser.
#[tokio::test]
async fn fairness_flags_reach_the_server() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--api-key",
        common::KEY,
        "--max-connections-per-address",
        "2",
        "--max-streams-per-credential",
        "1",
        "--auth-failures-per-minute",
        "2",
    ];
    let server = Server::start(&dir.path().join("db.sqlite"), &flags);
    let client = server.client();
    let store =
        client.create_memory_store(&CreateMemoryStore { name: "fair".into(), ..Default::default() }).await.unwrap();
    drop(client);
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let feed = format!("{}/v1/memory_stores/{}/changes", server.base, store.id);
    let first = past_the_address_cap(|| http.get(&feed).bearer_auth(common::KEY)).await;
    assert_eq!(first.status(), 200);
    // The feed holds one of the address's two connections, a stalled client the other.
    let addr = server.base.strip_prefix("http://").unwrap().to_owned();
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stalled.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    third.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    third.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 429") && answer.contains("2 connections"), "{answer}");
    drop(stalled);

    let second = past_the_address_cap(|| http.get(&feed).bearer_auth(common::KEY)).await;
    assert_eq!(second.status(), 429, "one stream per credential");
    let body: serde_json::Value = second.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("1 open streams"), "{body}");
    drop(first);

    let mut statuses = Vec::new();
    for i in 0..3 {
        let guess = format!("sk-guess-{i:032}");
        let resp = past_the_address_cap(|| http.get(format!("{}/v1/memory_stores", server.base)).bearer_auth(&guess));
        statuses.push(resp.await.status().as_u16());
    }
    assert_eq!(statuses, [401, 401, 429], "the third failure is over the budget");
}

/// A stored event or session that cannot be read back is a `500` whose log line, under the
/// request's id, names the table, the row and the column; `mnemo db check` reports the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_that_cannot_be_read_back_is_a_500_logged_with_its_table_row_and_column() {
    use mnemo_client::{ClientError, Method};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let mut server = Server::start(&db, &["--api-key", common::KEY]);
    let api = Client::new(&server.base, common::KEY).unwrap().with_max_retries(0);
    let agent = api.json(Method::POST, "/v1/agents", Some(&json!({"name": "a", "model": "m"}))).await.unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let body = json!({"agent": agent["id"], "environment_id": env["id"],
                      "initial_events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]});
    let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/sessions/{session}/events");
    let log = api.json(Method::GET, &events, None).await.unwrap();
    let event = log["data"][0]["id"].as_str().unwrap().to_owned();

    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute("UPDATE session_events SET body = '{\"type\": \"user.message\", \"id\": 3' WHERE id = ?1", [&event])
        .unwrap();
    drop(c);
    let refused = api.json(Method::GET, &events, None).await.unwrap_err();
    let ClientError::Api { status, error, request_id } = refused else { panic!("{refused}") };
    assert_eq!((status, error.kind.as_str(), error.message.as_str()), (500, "api_error", "internal server error"));
    assert!(!format!("{error:?}").contains("session_events"), "the caller is told nothing of the database");
    let request_id = request_id.expect("a request id");

    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute("UPDATE sessions SET status = 'napping' WHERE id = ?1", [&session]).unwrap();
    drop(c);
    let refused = api.json(Method::GET, &format!("/v1/sessions/{session}"), None).await.unwrap_err();
    assert!(matches!(refused, ClientError::Api { status: 500, .. }), "{refused}");

    let out =
        common::mnemo().args(["db", "check", "--database", &format!("sqlite://{}", db.display())]).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{report}");
    assert!(
        report.contains(&format!("table `session_events`, row `{event}`, column `body` cannot be read")),
        "{report}"
    );
    assert!(report.contains(&format!("table `sessions`, row `{session}`, column `status` cannot be read")), "{report}");

    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let log = server.stderr();
    let line = log
        .lines()
        .find(|l| l.contains(&request_id) && l.contains("request failed"))
        .unwrap_or_else(|| panic!("no failure logged under {request_id}: {log}"));
    assert!(line.contains(&format!("table `session_events`, row `{event}`, column `body` cannot be read")), "{line}");
}
