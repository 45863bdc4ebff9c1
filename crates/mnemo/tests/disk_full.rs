//! Full disks, end to end: a `mnemo serve` whose SQLite volume fills up, and a `mnemo mount`
//! folder on a volume that fills up. Each runs on a small tmpfs mounted by the test (the tests
//! run as root, as CI does; without root or `mount(8)` they fail, they never skip) and unmounted
//! again whatever happens.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_api::{CreateMemoryStore, MemoryStoreId, View};
use mnemo_client::{Client, ClientError};

use common::{KEY, Server, mnemo, remote_files, signal, wait_until, wait_until_async};

/// A size-limited tmpfs mounted at a folder, unmounted on drop.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Self {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount(8) ({e}): the disk-full tests need root and mount(8)"));
        assert!(
            out.status.success(),
            "mount -t tmpfs -o size={size} failed ({}): the disk-full tests must run as root (as CI does); they \
             never skip",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Self { path: path.to_owned() }
    }

    /// Gives the volume a new size (space returns without deleting anything).
    fn resize(&self, size: &str) {
        let out = Command::new("mount").args(["-o", &format!("remount,size={size}")]).arg(&self.path).output().unwrap();
        assert!(out.status.success(), "remount: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.path).status().is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a process of a failed test): detach it now, it goes when they do.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

/// Fills the volume holding `dir` with one file, to the last byte; returns the file.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0xa5u8; 64 << 10];
    let mut small = false;
    loop {
        let chunk = if small { &block[..512] } else { &block[..] };
        match f.write(chunk) {
            Ok(n) if n > 0 => {}
            _ if !small => small = true,
            _ => break,
        }
    }
    path
}

/// Memory content of `n` bytes, unique to `tag`.
fn content(tag: &str, n: usize) -> String {
    let mut s = format!("{tag}\n");
    while s.len() < n {
        s.push_str(tag);
        s.push('.');
    }
    s.truncate(n);
    s
}

/// Memory content of `n` bytes, unique to `tag`, that does not compress (PostgreSQL compresses
/// large values): letters and digits from a generator seeded by the tag.
fn noise(tag: &str, n: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
    let mut x = tag.bytes().fold(0x9e37_79b9_7f4a_7c15_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut s = format!("{tag}\n");
    while s.len() < n {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push(char::from(ALPHABET[(x % 64) as usize]));
    }
    s.truncate(n);
    s
}

async fn new_store(client: &Client) -> MemoryStoreId {
    client.create_memory_store(&CreateMemoryStore { name: "disk".into(), ..Default::default() }).await.unwrap().id
}

/// A new store holding five 4 KB memories under `/before/` (their content made by `make`),
/// and those memories: what every later write adds to.
async fn store_of_five(client: &Client, make: fn(&str, usize) -> String) -> (MemoryStoreId, BTreeMap<String, String>) {
    let store = new_store(client).await;
    let mut acked = BTreeMap::new();
    for i in 0..5 {
        let (path, body) = (format!("/before/{i}.md"), make(&format!("before-{i}"), 4_000));
        client.create_memory(&store, &path, &body, None).await.unwrap();
        acked.insert(path, body);
    }
    (store, acked)
}

/// A write refused because the database's disk is full: a 507 with its code, never a 500.
fn assert_disk_full(e: &ClientError) {
    assert_eq!(e.status(), Some(507), "a write on a full disk is a 507: {e}");
    assert_eq!(e.error_code(), Some("database_disk_full"), "{e}");
    assert!(e.to_string().contains("disk is full"), "the message says so: {e}");
}

/// Writes memories of `size` bytes until the database refuses one; returns what was acknowledged.
async fn write_until_full(
    client: &Client,
    store: &MemoryStoreId,
    tag: &str,
    size: usize,
    acked: &mut BTreeMap<String, String>,
) -> ClientError {
    write_until_full_of(client, store, tag, size, acked, content).await
}

/// [`write_until_full`] with the content `make` makes.
async fn write_until_full_of(
    client: &Client,
    store: &MemoryStoreId,
    tag: &str,
    size: usize,
    acked: &mut BTreeMap<String, String>,
    make: fn(&str, usize) -> String,
) -> ClientError {
    for i in 0..2_000 {
        let (path, body) = (format!("/{tag}/{i}.md"), make(&format!("{tag}-{i}"), size));
        match client.create_memory(store, &path, &body, None).await {
            Ok(m) => assert!(acked.insert(m.path, body).is_none()),
            Err(e) => return e,
        }
    }
    panic!("2,000 writes of {size} bytes fitted on a small volume");
}

async fn db(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || mnemo().args(&args).output().unwrap()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_volume_refuses_writes_with_507_keeps_reads_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let volume = Tmpfs::mount(&tmp.path().join("vol"), "2m");
    let db_path = volume.path.join("mnemo.sqlite");
    let url = format!("sqlite://{}", db_path.display());
    let mut server = Server::start(&db_path, &["--api-key", KEY]);
    let client = server.client();
    let (store, mut acked) = store_of_five(&client, content).await;

    // 1. A filler file eats the space: writes get a clear 507, reads keep working.
    let filler = fill(&volume.path);
    let refused = write_until_full(&client, &store, "filled", 20_000, &mut acked).await;
    assert_disk_full(&refused);
    for i in 0..5 {
        let e = client.create_memory(&store, &format!("/again/{i}.md"), &content("again", 20_000), None).await;
        if let Err(e) = e {
            assert_disk_full(&e);
        }
        // (A write that still fitted in free pages is fine; it is acknowledged.)
        if let Ok(m) = client.create_memory(&store, &format!("/tiny/{i}.md"), "t", None).await {
            acked.insert(m.path, "t".into());
        }
    }
    let e = client.create_memory_store(&CreateMemoryStore { name: "more".into(), ..Default::default() }).await;
    if let Err(e) = e {
        assert_disk_full(&e);
    }
    assert_eq!(remote_files(&client, &store).await, acked, "reads keep working and see every acknowledged write");

    // 2. The filler goes: writes succeed again at once.
    std::fs::remove_file(&filler).unwrap();
    let body = content("after-filler", 20_000);
    let m = client.create_memory(&store, "/after/filler.md", &body, None).await.expect("writes resume");
    acked.insert(m.path, body);

    // 3. The database itself fills the volume; then the server is killed while it is full.
    let refused = write_until_full(&client, &store, "grown", 30_000, &mut acked).await;
    assert_disk_full(&refused);
    assert_eq!(remote_files(&client, &store).await, acked);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let log = server.stderr();
    assert!(log.contains("the database's disk is full; free space on its volume"), "the log says why: {log}");
    assert!(!log.contains("internal server error"), "{log}");

    // 4. Space returns: the database checks out, nothing acknowledged is lost, writes resume.
    volume.resize("16m");
    let out = db(&["db", "check", "--database", &url]).await;
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "db check: {report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains(": ok"), "{report}");
    let server = Server::start(&db_path, &["--api-key", KEY]);
    let client = server.client();
    assert_eq!(remote_files(&client, &store).await, acked, "every acknowledged write survived");
    client.create_memory(&store, "/after/restart.md", "fine", None).await.expect("writes resume after a restart");
    eprintln!("{} memories acknowledged on a 2 MiB volume", acked.len());
}

/// `mnemo mount` with its stderr collected as it comes.
struct Mount {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Mount {
    fn start(server: &Server, store: &MemoryStoreId, dir: &Path, extra: &[&str]) -> Self {
        let mut child = mnemo()
            .args(["mount", store.as_str()])
            .arg(dir)
            .args(["--base-url", &server.base, "--api-key", KEY])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (stderr, sink) = (child.stderr.take().unwrap(), Arc::clone(&log));
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        Self { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn finish(mut self, sig: &str) -> (bool, String) {
        signal(&self.child, sig);
        let ok = self.child.wait().unwrap().success();
        // The reader thread ends with the pipe.
        assert!(wait_until(Duration::from_secs(5), || Arc::strong_count(&self.log) == 1));
        (ok, self.log())
    }
}

/// [`local`] at a moment no write is under way: a temp file may exist while the engine writes
/// (and is removed when the write fails), but one that never goes away is a leftover.
fn settled(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let clean = wait_until(Duration::from_secs(10), || {
        files = local(dir);
        files.keys().all(|p| !p.rsplit('/').next().unwrap().starts_with(".fs-"))
    });
    assert!(clean, "a temp file is left in the folder: {:?}", files.keys().collect::<Vec<_>>());
    files
}

fn journal_of(dir: &Path) -> PathBuf {
    dir.with_file_name(format!(".{}.mnemo-journal", dir.file_name().unwrap().to_string_lossy()))
}

/// Every file below `dir` (marker excluded), as path → content; temp files included, so a
/// leftover shows. A file or folder gone between its listing and its reading (a temp file the
/// engine removed or renamed into place meanwhile) is left out: the next look sees the result.
fn local(dir: &Path) -> BTreeMap<String, String> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Err(e) if gone(&e) && d != dir => continue,
            listed => listed.unwrap(),
        };
        for e in entries {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_name() != ".anthropic-memory-store" {
                let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                let content = match std::fs::read(e.path()) {
                    Err(e) if gone(&e) => continue,
                    read => read.unwrap(),
                };
                out.insert(format!("/{rel}"), String::from_utf8_lossy(&content).into_owned());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_mount_volume_fails_pulls_clearly_uploads_nothing_torn_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let store = new_store(&client).await;
    for i in 0..3 {
        client.create_memory(&store, &format!("/notes/{i}.md"), &content(&format!("n{i}"), 2_000), None).await.unwrap();
    }
    let volume = Tmpfs::mount(&tmp.path().join("vol"), "1m");
    let dir = volume.path.join("mem");
    let mount = Mount::start(&server, &store, &dir, &["--interval", "5"]);
    assert!(wait_until(Duration::from_secs(20), || journal_of(&dir).exists()), "downloaded: {}", mount.log());

    // An edit that fits, then a filler eats the rest of the volume.
    std::fs::write(dir.join("notes/0.md"), "edited before the disk filled").unwrap();
    let filler = fill(&volume.path);
    // The agent's own write is cut short by the full disk: what landed is its content.
    let agent = content("agent", 60_000);
    let agent_write = std::fs::write(dir.join("agent.md"), &agent);
    assert!(agent_write.is_err(), "the volume is full");
    // Remote changes that cannot be written here.
    let mut incoming = BTreeMap::new();
    for i in 0..4 {
        let (path, body) = (format!("/incoming/{i}.md"), content(&format!("in{i}"), 50_000));
        client.create_memory(&store, &path, &body, None).await.unwrap();
        incoming.insert(path, body);
    }
    let n1 = client.list_all_memories(&store, View::Basic).await.unwrap();
    let n1 = n1.into_iter().find(|m| m.path == "/notes/1.md").unwrap();
    let remote_edit = content("remote edit", 30_000);
    client
        .update_memory(
            &store,
            &n1.id,
            &mnemo_api::UpdateMemory { content: Some(remote_edit.clone()), ..Default::default() },
            None,
        )
        .await
        .unwrap();

    // Pulls fail with a line that names the folder, the path and the full disk.
    let said = wait_until(Duration::from_secs(30), || {
        let log = mount.log();
        log.contains("failed to write memory") && log.contains("incoming/") && log.contains("is full")
    });
    assert!(said, "a failed pull is logged clearly: {}", mount.log());
    let log = mount.log();
    assert!(log.contains(&dir.display().to_string()), "the line names the folder: {log}");
    // Nothing half-written is left in the folder, and the file that could not be replaced is intact.
    let files = settled(&dir);
    for (path, body) in &files {
        if let Some(want) = incoming.get(path) {
            assert_eq!(body, want, "a pulled file is whole or absent");
        }
    }
    assert_eq!(files["/notes/1.md"], content("n1", 2_000), "a failed pull leaves the old file whole");
    // The edit made before the disk filled reached the server anyway; the engine uploaded no
    // torn file: whatever it sent of agent.md is what the agent's write left on disk.
    let pushed = wait_until_async(Duration::from_secs(30), || async {
        remote_files(&client, &store).await.get("/notes/0.md").is_some_and(|c| c == "edited before the disk filled")
    })
    .await;
    assert!(pushed, "uploads still work on a full disk: {}", mount.log());
    let on_disk = std::fs::read_to_string(dir.join("agent.md")).unwrap_or_default();
    assert!(agent.starts_with(&on_disk), "the disk holds a prefix of the agent's write");
    if let Some(sent) = remote_files(&client, &store).await.get("/agent.md") {
        assert!(agent.starts_with(sent.as_str()), "only the agent's own bytes are ever uploaded");
    }

    // Space returns: the next sync converges both sides, the agent rewrites its file whole.
    std::fs::remove_file(&filler).unwrap();
    std::fs::write(dir.join("agent.md"), &agent).unwrap();
    let converged = wait_until_async(Duration::from_secs(40), || async {
        let (files, server_side) = (local(&dir), remote_files(&client, &store).await);
        files == server_side && server_side.get("/agent.md") == Some(&agent)
    })
    .await;
    assert!(converged, "folder and store converge once space returns: {}", mount.log());
    let files = local(&dir);
    for (path, body) in &incoming {
        assert_eq!(files.get(path), Some(body), "{path} arrived whole");
    }
    assert_eq!(files["/notes/1.md"], remote_edit);
    let (ok, log) = mount.finish("-TERM");
    assert!(ok, "{log}");
    assert!(!dir.exists() && !journal_of(&dir).exists(), "the folder and its journal are removed on exit");
    drop(volume);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_larger_than_the_mount_volume_downloads_what_fits_whole_and_the_rest_once_space_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let store = new_store(&client).await;
    let mut want = BTreeMap::new();
    for i in 0..14 {
        let (path, body) = (format!("/big/{i:02}.md"), content(&format!("b{i}"), 100_000));
        client.create_memory(&store, &path, &body, None).await.unwrap();
        want.insert(path, body);
    }
    let volume = Tmpfs::mount(&tmp.path().join("vol"), "1m");
    let dir = volume.path.join("mem");
    let mount = Mount::start(&server, &store, &dir, &["--interval", "5"]);
    let said = wait_until(Duration::from_secs(30), || mount.log().contains("failed to write memory"));
    let log = mount.log();
    assert!(said, "the files that do not fit are logged: {log}");
    assert!(log.contains("is full") && log.contains(&dir.display().to_string()), "saying why and where: {log}");
    // What was written is whole; nothing half-written is left.
    let files = settled(&dir);
    assert!(files.len() < want.len(), "1 MiB cannot hold 1.4 MB: {}", files.len());
    for (path, body) in &files {
        assert_eq!(want.get(path), Some(body), "{path} is whole, not torn (and no temp file is left)");
    }
    // Space returns: the next sync pulls the rest, and nothing was ever sent back.
    volume.resize("8m");
    let converged = wait_until(Duration::from_secs(40), || local(&dir) == want);
    assert!(converged, "the rest arrives once space returns: {}", mount.log());
    assert_eq!(remote_files(&client, &store).await, want, "the store is untouched");
    let (ok, log) = mount.finish("-TERM");
    assert!(ok, "{log}");
    assert!(!dir.exists() && !journal_of(&dir).exists(), "the folder and its journal are removed on exit");
    drop(volume);
}

/// A PostgreSQL cluster of the test's own (`initdb`), listening on 127.0.0.1 only, run as the
/// `postgres` user (PostgreSQL refuses to run as root); stopped on drop, its files going with the
/// test's temporary folder. Made as
/// `.ci/postgres` makes one, from the binaries under `/usr/lib/postgresql/*/bin`.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    options: String,
}

impl Cluster {
    /// Initialises a cluster in `dir/data` with the extra `initdb` arguments, and starts it
    /// with the extra server `options` (`-c name=value …`).
    fn start(dir: &Path, initdb: &[&str], options: &str) -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| {
                // The newest version (by number: 9 is older than 15).
                d.filter_map(Result::ok)
                    .filter(|e| e.path().join("bin/initdb").exists())
                    .max_by_key(|e| e.file_name().to_string_lossy().parse::<f64>().unwrap_or(0.0).to_bits())
                    .map(|e| e.path().join("bin"))
            })
            .expect("PostgreSQL's binaries under /usr/lib/postgresql/*/bin (`.ci/postgres start` installs them)");
        chown_postgres(dir);
        let data = dir.join("data");
        let out = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "mnemo", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"])
            .args(initdb)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        // A free port: bound, then released for the cluster.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={} -c fsync=on {options}",
            dir.display()
        );
        let cluster = Self { bin, data, port, options };
        cluster.start_again();
        cluster
    }

    /// Starts the (stopped) cluster again.
    fn start_again(&self) {
        let log = self.data.parent().unwrap().join("log").display().to_string();
        let out = self.pg_ctl(&["-l", &log, "-w", "-o", &self.options, "start"]);
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Whether the cluster's postmaster runs.
    fn running(&self) -> bool {
        self.pg_ctl(&["status"]).status.success()
    }

    /// The cluster's log.
    fn log(&self) -> String {
        std::fs::read_to_string(self.data.parent().unwrap().join("log")).unwrap_or_default()
    }

    fn pg_ctl(&self, args: &[&str]) -> std::process::Output {
        as_postgres(&self.bin.join("pg_ctl")).arg("-D").arg(&self.data).args(args).output().unwrap()
    }

    /// Runs SQL as the cluster's superuser, on database `db`.
    fn psql(&self, db: &str, sql: &str) {
        let out = as_postgres(&self.bin.join("psql"))
            .args([
                "-X",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "mnemo",
                "-d",
                db,
            ])
            .args(["-c", sql])
            .output()
            .unwrap();
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://mnemo@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }
}

fn as_postgres(program: &Path) -> Command {
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", "postgres", "--"]).arg(program);
    cmd
}

fn chown_postgres(path: &Path) {
    let out = Command::new("chown").arg("postgres:").arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "chown postgres {}: {} (the PostgreSQL disk-full test runs as root, with a `postgres` user; `.ci/postgres \
         start` makes one)",
        path.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// PostgreSQL whose database lives in a tablespace on a small tmpfs (the write-ahead log stays
/// on the cluster's own disk): the volume fills — first by a filler file, then by the database
/// itself — and `mnemo serve` on it answers writes `507 database_disk_full` (PostgreSQL's
/// `53100`), keeps serving reads, and takes writes again as soon as space returns (the filler
/// removed, the volume enlarged), without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_postgres_tablespace_refuses_writes_with_507_keeps_reads_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    // Mounted first, so that it is unmounted after the cluster stopped.
    let volume = Tmpfs::mount(&tmp.path().join("vol"), "24m");
    let cluster = Cluster::start(tmp.path(), &[], "");
    chown_postgres(&volume.path);
    cluster.psql("postgres", &format!("CREATE TABLESPACE small LOCATION '{}'", volume.path.display()));
    cluster.psql("postgres", "CREATE DATABASE mnemo TABLESPACE small");
    let mut server = Server::on(&cluster.url("mnemo"), &["--api-key", KEY]);
    let client = server.client();
    let (store, mut acked) = store_of_five(&client, noise).await;

    // 1. A filler file eats the space: writes get a clear 507, reads keep working.
    let filler = fill(&volume.path);
    let refused = write_until_full_of(&client, &store, "filled", 20_000, &mut acked, noise).await;
    assert_disk_full(&refused);
    let e = client.create_memory_store(&CreateMemoryStore { name: "more".into(), ..Default::default() }).await;
    if let Err(e) = e {
        assert_disk_full(&e);
    }
    assert_eq!(remote_files(&client, &store).await, acked, "reads keep working and see every acknowledged write");

    // 2. The filler goes: writes succeed again at once.
    std::fs::remove_file(&filler).unwrap();
    let body = noise("after-filler", 20_000);
    let m = client.create_memory(&store, "/after/filler.md", &body, None).await.expect("writes resume");
    acked.insert(m.path, body);

    // 3. The database itself fills the volume.
    let refused = write_until_full_of(&client, &store, "grown", 30_000, &mut acked, noise).await;
    assert_disk_full(&refused);
    assert_eq!(remote_files(&client, &store).await, acked, "reads keep working");

    // 4. The volume is enlarged: writes resume on the running server, nothing acknowledged lost.
    volume.resize("64m");
    let body = noise("after-resize", 30_000);
    let m = client.create_memory(&store, "/after/resize.md", &body, None).await.expect("writes resume");
    acked.insert(m.path, body);
    assert_eq!(remote_files(&client, &store).await, acked, "every acknowledged write is there");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let log = server.stderr();
    assert!(log.contains("the database's disk is full; free space on its volume"), "the log says why: {log}");
    assert!(!log.contains("internal server error"), "{log}");
    eprintln!("{} memories acknowledged on a full PostgreSQL tablespace", acked.len());
}

/// PostgreSQL whose write-ahead log (`pg_wal`) is on a small tmpfs, held by a replication slot
/// nobody reads (the usual way `pg_wal` fills in production): PostgreSQL cannot write its log,
/// and PANICs. What `mnemo serve` answers meanwhile, and that writes resume once space returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_postgres_wal_volume_is_a_clear_5xx_and_writes_resume_when_space_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let volume = Tmpfs::mount(&tmp.path().join("vol"), "12m");
    chown_postgres(&volume.path);
    let wal = volume.path.join("wal");
    let cluster = Cluster::start(
        tmp.path(),
        &["--wal-segsize=1", &format!("--waldir={}", wal.display())],
        "-c min_wal_size=2MB -c max_wal_size=4MB -c restart_after_crash=on",
    );
    cluster.psql("postgres", "CREATE DATABASE mnemo");
    cluster.psql("postgres", "SELECT pg_create_physical_replication_slot('held', true)");
    let mut server = Server::on(&cluster.url("mnemo"), &["--api-key", KEY]);
    let client = server.client();
    let store = new_store(&client).await;
    let mut acked = BTreeMap::new();
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    let mut refused = 0;
    for i in 0..3_000 {
        let (path, body) = (format!("/wal/{i}.md"), noise(&format!("wal-{i}"), 20_000));
        match client.create_memory(&store, &path, &body, None).await {
            Ok(m) => {
                acked.insert(m.path, body);
            }
            Err(e) => {
                *answers.entry(format!("{:?} {:?}", e.status(), e.error_code())).or_default() += 1;
                refused += 1;
                if refused >= 20 {
                    break;
                }
            }
        }
    }
    eprintln!("{} writes acknowledged, then refused: {answers:?}", acked.len());
    assert!(refused > 0, "a 12 MiB log volume held by a slot fills within 3,000 writes of 20 kB");
    for answer in answers.keys() {
        assert!(
            answer == "Some(507) Some(\"database_disk_full\")" || answer == "Some(503) None",
            "a write PostgreSQL cannot log is a 507 (the write that hit the full disk) or a 503 (while \
             PostgreSQL recovers from its PANIC), never anything else: {answers:?}"
        );
    }
    // Reads need the database too: while it recovers they are a 503 as well, never a 500.
    let read = client.list_all_memories(&store, View::Basic).await;
    assert!(read.as_ref().map_or_else(|e| e.status() == Some(503), |_| true), "a read meanwhile: {:?}", read.err());

    // Space returns: PostgreSQL's postmaster restarts the database by itself
    // (`restart_after_crash`, the default); if it gave up, it is started again, as an operator
    // would. `mnemo serve` is never restarted.
    volume.resize("64m");
    if !cluster.running() {
        eprintln!("the postmaster gave up; starting it again");
        cluster.start_again();
    }
    let resumed = wait_until_async(Duration::from_secs(60), || async {
        client.create_memory(&store, "/after/space.md", "back", None).await.is_ok()
    })
    .await;
    assert!(resumed, "writes resume once the log has space: {}", cluster.log());
    let now = remote_files(&client, &store).await;
    for (path, body) in &acked {
        assert_eq!(now.get(path), Some(body), "an acknowledged write survives PostgreSQL's PANIC: {path}");
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let log = server.stderr();
    // A write that met the full log before PostgreSQL PANICked was told so, and the log says why;
    // when the PANIC came first (a write's log records filled the volume at once), every client
    // only ever saw the database restarting, and only PostgreSQL's own log can say why.
    if answers.keys().any(|a| a.contains("507")) {
        assert!(log.contains("the database's disk is full; free space on its volume"), "the log says why: {log}");
    }
    assert!(log.contains("the database is unavailable"), "{log}");
    assert!(!log.contains("internal server error"), "{log}");
    let pg = cluster.log();
    assert!(pg.contains("PANIC"), "PostgreSQL PANICs on a full log volume: {pg}");
    for line in pg.lines().filter(|l| l.contains("PANIC") || l.contains("terminated by signal")) {
        eprintln!("postgres: {line}");
    }
}
