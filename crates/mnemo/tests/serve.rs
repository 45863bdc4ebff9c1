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

    let mut again = Server::start(&db, &[]);
    let client = Client::new(&again.base, &key).unwrap();
    client.create_memory_store(&CreateMemoryStore { name: "x".into(), ..Default::default() }).await.unwrap();
    again.signal("-INT");
    assert!(again.child.wait().unwrap().success());
    assert!(!again.stderr().contains("sk-mnemo-"), "no new key once one exists");
}

#[tokio::test]
async fn api_keys_from_flags_work_and_are_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let mut server =
        Server::start(&dir.path().join("db.sqlite"), &["--api-key", "sk-flag-one", "--api-key", "sk-flag-two"]);
    for key in ["sk-flag-one", "sk-flag-two"] {
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
    let mut server = Server::start(&db, &["--api-key", "k"]);
    let client = Client::new(&server.base, "k").unwrap().with_max_retries(0);
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

    let server = Server::start(&db, &["--api-key", "k"]);
    let client = Client::new(&server.base, "k").unwrap();
    let stored = client.list_all_memories(&store.id, View::Basic).await.unwrap();
    let stored: std::collections::HashMap<_, _> = stored.into_iter().map(|m| (m.path, m.content_sha256)).collect();
    for (path, sha) in &acked {
        assert_eq!(stored.get(path), Some(sha), "acknowledged write {path} was lost");
    }
}

#[tokio::test]
async fn env_key_create_prints_the_key_alone_and_revoke_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db.sqlite"), &["--api-key", "admin"]);
    let client = Client::new(&server.base, "admin").unwrap();
    let env = client
        .create_environment(&mnemo_api::CreateEnvironment { name: "e".into(), ..Default::default() })
        .await
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["env-key", "create", env.id.as_str(), "--base-url", &server.base, "--api-key", "admin"])
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
            "admin",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(client.list_environment_keys(&env.id).await.unwrap().data[0].revoked_at.is_some());

    let bad = Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["env-key", "create", "env_doesnotexist", "--base-url", &server.base, "--api-key", "admin"])
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
        &["--api-key", "k", "--header-read-timeout", "1", "--body-timeout", "1", "--max-connections", "1"],
    );
    let addr = server.base.strip_prefix("http://").unwrap().to_owned();
    let started = std::time::Instant::now();
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stalled.write_all(b"GET /healthz HTTP/1.1\r\nhost: mnemo\r\n").await.unwrap();
    let client = Client::new(&server.base, "k").unwrap().with_max_retries(0);
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
