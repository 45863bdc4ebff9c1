//! The database going away and coming back, seen from the store: calls fail fast as
//! `Unavailable` (the server answers 503 with `retry-after`), nothing acknowledged is lost, and
//! the store reconnects by itself — its signals included. A TCP proxy in front of the test
//! database plays the outage, so other tests sharing the database are not disturbed.
//!
//! Needs `MNEMO_TEST_POSTGRES` (see `mnemo_store_tests::Postgres`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_store::{Limits, NewMemoryStore, Operations, Signal, Store, StoreError};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_tests::Postgres;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// Forwards connections on a fixed local port to the database until cut.
struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Self {
        let mut proxy = Self { addr: "127.0.0.1:0".parse().unwrap(), upstream, task: None };
        proxy.resume().await;
        proxy
    }

    /// Accepts again, on the same port.
    async fn resume(&mut self) {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(self.addr).unwrap();
        let listener: TcpListener = socket.listen(64).unwrap();
        self.addr = listener.local_addr().unwrap();
        let upstream = self.upstream;
        self.task = Some(tokio::spawn(async move {
            let mut links = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                links.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        }));
    }

    /// Drops every open connection and refuses new ones: the database is "down".
    async fn cut(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

fn upstream() -> SocketAddr {
    let settings = mnemo_store_postgres::PostgresSettings::from_url(&Postgres::url()).unwrap();
    let host = match &settings.config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("the fault test needs a TCP database host, not {other:?}"),
    };
    let port = settings.config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}").parse().expect("MNEMO_TEST_POSTGRES names an IP address")
}

/// Settings for `schema` in the test database, reached at `127.0.0.1:port` instead.
fn via(port: u16, schema: &str) -> mnemo_store_postgres::PostgresSettings {
    let test = Postgres::settings(schema, Limits::default());
    let mut config = tokio_postgres::Config::new();
    config.host("127.0.0.1").port(port).dbname(test.config.get_dbname().unwrap());
    if let Some(user) = test.config.get_user() {
        config.user(user);
    }
    if let Some(password) = test.config.get_password() {
        config.password(password);
    }
    config.options(test.config.get_options().unwrap_or_default());
    mnemo_store_postgres::PostgresSettings { config, connect_timeout: Duration::from_secs(2), ..test }
}

fn store_named(name: &str) -> NewMemoryStore {
    NewMemoryStore { name: name.into(), description: String::new(), metadata: Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_fast_loses_nothing_and_heals_itself() {
    let mut proxy = Proxy::start(upstream()).await;
    let schema = Postgres::fresh_schema().await;
    let settings = via(proxy.addr.port(), &schema);
    let store = Arc::new(PostgresStore::open(&settings).await.expect("open through the proxy"));
    let mut signals = store.signals().expect("a shared store signals");
    let ws = store.default_workspace().await.expect("the Default workspace");

    let before = store.create_memory_store(&ws, store_named("before")).await.expect("a write while up");

    proxy.cut().await;
    let started = Instant::now();
    let down = store.get_memory_store(&ws, &before.id).await.expect_err("the database is down");
    assert!(matches!(down, StoreError::Unavailable(_)), "an outage is Unavailable (503), not {down:?}");
    assert!(down.is_retryable());
    let write = store.create_memory_store(&ws, store_named("during")).await.expect_err("no write while down");
    assert!(matches!(write, StoreError::Unavailable(_)), "{write:?}");
    // Fails fast: bounded by the connect timeout, not by a hung request.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());

    proxy.resume().await;
    let healed = async {
        loop {
            match store.get_memory_store(&ws, &before.id).await {
                Ok(found) => return found,
                Err(e) => {
                    assert!(e.is_retryable(), "while reconnecting, failures stay retryable: {e:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    };
    let found = tokio::time::timeout(Duration::from_secs(20), healed).await.expect("the store reconnects by itself");
    assert_eq!(found.id, before.id, "an acknowledged write survives the outage");
    let after = store.create_memory_store(&ws, store_named("after")).await.expect("writes work again");

    // The listener reconnects too: a change made now is heard.
    let heard = async {
        loop {
            match signals.recv().await {
                Ok(Signal::Credentials) => return,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("signals ended: {e}"),
            }
        }
    };
    let env = store
        .create_environment(
            &ws,
            mnemo_store::NewEnvironment {
                name: "e".into(),
                description: None,
                metadata: Default::default(),
                config: serde_json::json!({"type": "self_hosted"}),
                scope: None,
            },
        )
        .await
        .expect("create an environment");
    let listened = async {
        loop {
            store.archive_environment(&ws, &env.id).await.expect("archive");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::select! {
        () = heard => {}
        () = listened => unreachable!(),
        () = tokio::time::sleep(Duration::from_secs(20)) => panic!("no signal after the listener reconnected"),
    }
    assert_ne!(after.id, before.id);
    store.close().await;
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_failure_at_start() {
    // Nothing listens here: the port of a listener we just closed.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let mut settings = via(closed.port(), "unused");
    settings.config.password("hunter2-secret");
    let err = PostgresStore::open(&settings).await.expect_err("nothing listens");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(!format!("{err:?} {}", err.chain()).contains("hunter2-secret"), "the password leaked");
}
