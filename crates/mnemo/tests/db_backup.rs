//! `mnemo db backup` and `mnemo db check` end to end: a backup taken while writers keep
//! creating, updating and renaming memories through a running `mnemo serve`, checked, restored
//! under a second `mnemo serve`, and compared with what the writers were told.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{KEY, Server};
use mnemo_api::{CreateMemoryStore, MemoryStoreId, MemoryVersion, Operation, UpdateMemory, View, content_sha256};
use mnemo_client::{Client, ListMemoryStoresParams, ListMemoryVersionsParams};

const WRITERS: usize = 4;

/// One acknowledged write: the version it made, and what the memory then held.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Write {
    version: String,
    memory: String,
    path: String,
    sha256: String,
}

/// Each writer's acknowledged writes, in the order it made them.
type Logs = Arc<Vec<Mutex<Vec<Write>>>>;

/// A server accepting [`KEY`] (its stderr is drained by [`Server`]).
fn serve(db: &Path) -> Server {
    Server::start(db, &["--api-key", KEY])
}

/// Writer `w`: creates memories, then updates and now and then renames each, until `stop`.
async fn writer(
    w: usize,
    client: Client,
    stores: Vec<MemoryStoreId>,
    logs: Logs,
    total: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let record = |memory: &mnemo_api::Memory| {
        logs[w].lock().unwrap().push(Write {
            version: memory.memory_version_id.to_string(),
            memory: memory.id.to_string(),
            path: memory.path.clone(),
            sha256: memory.content_sha256.clone(),
        });
        total.fetch_add(1, Ordering::SeqCst);
    };
    let mut n = 0_usize;
    while !stop.load(Ordering::SeqCst) {
        let store = &stores[n % stores.len()];
        let body = |v: usize| format!("writer {w} memory {n} version {v}\n{}", "lorem ipsum ".repeat(150));
        let created =
            client.create_memory(store, &format!("/w{w}/m{n}.md"), &body(0), Some(View::Basic)).await.unwrap();
        record(&created);
        for v in 1..=2 {
            let path = (v == 2 && n.is_multiple_of(3)).then(|| format!("/w{w}/renamed/m{n}.md"));
            let change = UpdateMemory { content: Some(body(v)), path, precondition: None };
            let updated = client.update_memory(store, &created.id, &change, Some(View::Basic)).await.unwrap();
            record(&updated);
        }
        n += 1;
    }
}

/// Runs `mnemo db ARGS` to its end.
async fn db(args: &[&str]) -> Output {
    let mut cmd = common::mnemo();
    cmd.arg("db").args(args).env_remove("MNEMO_DATABASE");
    tokio::process::Command::from(cmd).output().await.unwrap()
}

fn succeeded(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The value of the `name  value` line of a report.
fn field<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(name).filter(|rest| rest.starts_with("  ")))
        .unwrap_or_else(|| panic!("no `{name}` line in\n{report}"))
        .trim()
}

/// Every version of a store, oldest first.
async fn all_versions(client: &Client, store: &MemoryStoreId) -> Vec<MemoryVersion> {
    let mut params = ListMemoryVersionsParams { limit: Some(100), ..Default::default() };
    let mut out = Vec::new();
    loop {
        let page = client.list_memory_versions(store, &params).await.unwrap();
        out.extend(page.data);
        match page.next_page {
            Some(next) => params.page = Some(next),
            None => break,
        }
    }
    out.reverse();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_write_load_restores_to_a_consistent_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("db.sqlite");
    let live = serve(&db_path);
    let client = live.client();
    let mut stores = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let store = client.create_memory_store(&CreateMemoryStore { name: name.into(), ..Default::default() }).await;
        stores.push(store.unwrap().id);
    }

    let logs: Logs = Arc::new((0..WRITERS).map(|_| Mutex::new(Vec::new())).collect());
    let total = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let args = (live.client(), stores.clone(), Arc::clone(&logs), Arc::clone(&total), Arc::clone(&stop));
            tokio::spawn(writer(w, args.0, args.1, args.2, args.3, args.4))
        })
        .collect();
    let wrote = |n: usize| {
        let total = Arc::clone(&total);
        async move {
            common::wait_until_async(Duration::from_secs(120), || async { total.load(Ordering::SeqCst) >= n }).await
        }
    };
    let each_wrote = common::wait_until_async(Duration::from_secs(120), || async {
        total.load(Ordering::SeqCst) >= 150 && logs.iter().all(|log| log.lock().unwrap().len() >= 10)
    });
    assert!(each_wrote.await, "the writers got going");

    // The backup runs while the writers keep writing: small steps, many pauses between them.
    let before_backup = total.load(Ordering::SeqCst);
    let backup = dir.path().join("backups/mnemo.sqlite");
    let url = format!("sqlite://{}", db_path.display());
    let out = db(&["backup", "--database", &url, "--pages-per-step", "8", backup.to_str().unwrap()]).await;
    let report = succeeded("the backup", &out);
    // Writes acknowledged from here on cannot be in the snapshot.
    let after_backup = total.load(Ordering::SeqCst);
    eprintln!(
        "{} writes acknowledged during the backup: {}",
        after_backup - before_backup,
        report.lines().next().unwrap()
    );
    assert!(wrote(after_backup + 3 * WRITERS).await, "the writers kept going after the backup");
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    assert!(
        report.starts_with(&format!("backed up SQLite database {} to {}", db_path.display(), backup.display())),
        "{report}"
    );
    assert!(field(&report, "check").starts_with("ok (integrity_check, foreign_key_check, schema, "), "{report}");
    assert_eq!(field(&report, "memory stores"), "3", "{report}");
    let names: Vec<String> = std::fs::read_dir(backup.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["mnemo.sqlite"], "one self-contained file, no temporary left");

    // The copy checks out, and a second backup to the same path is refused.
    let checked =
        succeeded("the check", &db(&["check", "--database", &format!("sqlite://{}", backup.display())]).await);
    assert!(checked.starts_with(&format!("checked SQLite database {}: ok\n", backup.display())), "{checked}");
    assert_eq!(field(&checked, "memories"), field(&report, "memories"));
    let again = db(&["backup", "--database", &url, backup.to_str().unwrap()]).await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; pass --force to replace it"));

    // Restore: the file in place of a database, under a server of its own.
    let restored_path = dir.path().join("restored/db.sqlite");
    std::fs::create_dir_all(restored_path.parent().unwrap()).unwrap();
    std::fs::copy(&backup, &restored_path).unwrap();
    let restored = serve(&restored_path);
    let copy = restored.client();

    let listed =
        copy.list_memory_stores(&ListMemoryStoresParams { limit: Some(100), ..Default::default() }).await.unwrap();
    let found: BTreeSet<_> = listed.data.iter().map(|s| s.id.clone()).collect();
    assert_eq!(found, stores.iter().cloned().collect::<BTreeSet<_>>(), "every store is there");

    // What the copy holds, from its API.
    let mut versions = Vec::new();
    let mut memories = Vec::new();
    for store in &stores {
        versions.extend(all_versions(&copy, store).await);
        memories.extend(copy.list_all_memories(store, View::Full).await.unwrap());
    }
    let all_writes: Vec<Write> = logs.iter().flat_map(|log| log.lock().unwrap().clone()).collect();
    let by_version: HashMap<&str, &Write> = all_writes.iter().map(|w| (w.version.as_str(), w)).collect();

    // Every version is one the writers were told about, as they were told.
    for v in &versions {
        let write = by_version.get(v.id.as_str()).unwrap_or_else(|| panic!("a version nobody wrote: {v:?}"));
        assert_eq!(v.memory_id.as_str(), write.memory);
        assert_eq!(v.path.as_deref(), Some(write.path.as_str()));
        assert_eq!(v.content_sha256.as_deref(), Some(write.sha256.as_str()));
    }
    // One snapshot: of each writer's writes, exactly the first so many are in the copy.
    let in_copy: BTreeSet<&str> = versions.iter().map(|v| v.id.as_str()).collect();
    let mut kept_total = 0;
    for log in logs.iter() {
        let log = log.lock().unwrap();
        let kept = log.iter().take_while(|w| in_copy.contains(w.version.as_str())).count();
        assert!(log[kept..].iter().all(|w| !in_copy.contains(w.version.as_str())), "a gap in a writer's history");
        assert!(kept > 0, "every writer had written before the backup");
        kept_total += kept;
    }
    assert_eq!(kept_total, versions.len());
    // At most one write per writer was in flight when the snapshot was taken.
    assert!(versions.len() <= after_backup + WRITERS, "writes acknowledged after the backup are not in it");
    assert!(versions.len() < all_writes.len());

    // Each memory's versions form a complete chain ending in what the memory serves.
    let mut chains: BTreeMap<&str, Vec<&MemoryVersion>> = BTreeMap::new();
    for v in &versions {
        chains.entry(v.memory_id.as_str()).or_default().push(v);
    }
    assert_eq!(chains.len(), memories.len(), "every memory with versions is live, and only those");
    for memory in &memories {
        let chain = &chains[memory.id.as_str()];
        assert_eq!(chain[0].operation, Operation::Created, "{chain:?}");
        assert!(chain[1..].iter().all(|v| v.operation == Operation::Modified), "{chain:?}");
        let newest = chain.last().unwrap();
        assert_eq!(newest.id, memory.memory_version_id);
        assert_eq!(newest.path.as_deref(), Some(memory.path.as_str()));
        assert_eq!(memory.content_sha256, content_sha256(memory.content.as_deref().unwrap().as_bytes()));
        assert_eq!(newest.content_sha256.as_deref(), Some(memory.content_sha256.as_str()));
    }
    assert_eq!(field(&report, "memories"), format!("{} ({} versions)", memories.len(), versions.len()));

    // The restored server takes new writes.
    let more = copy.create_memory(&stores[0], "/after-restore.md", "new", None).await.unwrap();
    assert_eq!(more.path, "/after-restore.md");
    drop(live);
}

#[tokio::test]
async fn a_damaged_copy_fails_the_check_and_postgres_gets_directions() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("db.sqlite");
    {
        let live = serve(&db_path);
        let client = live.client();
        let store =
            client.create_memory_store(&CreateMemoryStore { name: "s".into(), ..Default::default() }).await.unwrap();
        for i in 0..40 {
            client.create_memory(&store.id, &format!("/m{i}.md"), &"x".repeat(3000), None).await.unwrap();
        }
        let backup = dir.path().join("copy.sqlite");
        succeeded(
            "the backup",
            &db(&["backup", "--database", &format!("sqlite://{}", db_path.display()), backup.to_str().unwrap()]).await,
        );
    }
    let backup = dir.path().join("copy.sqlite");
    // Scribble over a page in the middle of the file.
    let mut bytes = std::fs::read(&backup).unwrap();
    let middle = bytes.len() / 2 / 4096 * 4096;
    bytes[middle..middle + 4096].fill(0xA5);
    std::fs::write(&backup, &bytes).unwrap();
    let out = db(&["check", "--database", &format!("sqlite://{}", backup.display())]).await;
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains(": PROBLEMS FOUND\n"), "{stdout}");
    assert!(stdout.contains("integrity_check     FAILED"), "{stdout}");
    assert!(stderr.contains(&format!("error: {} has ", backup.display())), "{stderr}");
    assert!(stderr.contains("\n  integrity_check: "), "{stderr}");

    let out = db(&["backup", "--database", "postgres://mnemo:hunter2@127.0.0.1:5432/mnemo", "/tmp/x.dump"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("pg_dump --format=custom --file=/tmp/x.dump postgres://mnemo@127.0.0.1:5432/mnemo"),
        "{stderr}"
    );
    assert!(stderr.contains("pg_restore "), "{stderr}");
    assert!(!stderr.contains("hunter2"), "a password leaked: {stderr}");
    // Nothing listens on port 1: the check fails to connect, saying where, never with the password.
    let out = db(&["check", "--database", "postgres://mnemo:hunter2@127.0.0.1:1/mnemo"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("check PostgreSQL database `mnemo` on 127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "a password leaked: {stderr}");
}

/// `mnemo db check` on a PostgreSQL deployment while its server runs: ok, then (a store's count
/// broken by hand, the schema marked newer) the problems, named, and a failing exit.
#[tokio::test]
async fn a_postgres_deployment_is_checked_in_place() {
    let schema = mnemo_store_tests::Postgres::fresh_schema().await;
    let base = mnemo_store_tests::Postgres::url();
    let url = format!("{base}{}options=-csearch_path%3D{schema}", if base.contains('?') { '&' } else { '?' });
    let live = Server::on(&url, &["--api-key", KEY]);
    let client = live.client();
    let store =
        client.create_memory_store(&CreateMemoryStore { name: "s".into(), ..Default::default() }).await.unwrap();
    for i in 0..5 {
        client.create_memory(&store.id, &format!("/m{i}.md"), "x", None).await.unwrap();
    }
    let report = succeeded("the check", &db(&["check", "--database", &url]).await);
    assert!(report.starts_with("checked PostgreSQL database `mnemo` on "), "{report}");
    assert!(report.lines().next().unwrap().ends_with(": ok"), "{report}");
    assert_eq!(field(&report, "schema"), schema);
    assert_eq!(field(&report, "memory stores"), "1");
    assert_eq!(field(&report, "memories"), "5 (5 versions)");
    assert_eq!(field(&report, "memory_count"), "ok");

    let (sql, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    sql.batch_execute(&format!("UPDATE {schema}.memory_stores SET memory_count = 7")).await.unwrap();
    let out = db(&["check", "--database", &url]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stdout.contains(": PROBLEMS FOUND\n") && stdout.contains("memory_count        FAILED"), "{stdout}");
    assert!(stderr.contains("memory_count: 1 memory store breaks"), "{stderr}");
    assert!(stderr.contains(&format!("{} (memory_count 7, live memories 5)", store.id)), "{stderr}");

    sql.batch_execute(&format!("UPDATE {schema}.mnemo_schema SET version = 99")).await.unwrap();
    let out = db(&["check", "--database", &url]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(stdout.contains("schema version 99 is newer than this mnemo knows"), "{stdout}");
    assert!(stdout.contains("memory_count        skipped: "), "{stdout}");
    drop(live);
}
