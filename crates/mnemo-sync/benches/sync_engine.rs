//! mnemo's sync engine, measured the same way as the SDK's (`bench/sync/sdk_engine.py`).
//!
//! Not a statistics harness: `bench/sync/run.py` builds this target, starts `mnemo serve`, seeds
//! one store and runs this binary once per measurement, each time in a fresh process with a fresh
//! folder so that the peak RSS it reports is its own. It prints one JSON line on stdout.
//!
//! Configuration, from `--name=value` arguments or the environment (arguments win):
//!
//! | argument      | environment             | meaning                                            |
//! |---------------|-------------------------|----------------------------------------------------|
//! | `--url`       | `MNEMO_BENCH_URL`       | server base URL (`http://127.0.0.1:PORT`)          |
//! | `--key`       | `MNEMO_BENCH_KEY`       | API key                                            |
//! | `--store`     | `MNEMO_BENCH_STORE`     | memory store id                                    |
//! | `--dir`       | `MNEMO_BENCH_DIR`       | folder to mount into; must not exist               |
//! | `--edits`     | `MNEMO_BENCH_EDITS`     | files edited before the edit sync (50)             |
//! | `--reps`      | `MNEMO_BENCH_REPS`      | repetitions of each no-op sync measurement (5)     |
//! | `--tag`       | `MNEMO_BENCH_TAG`       | written into edited files so every run changes them |
//! | `--mode`      | `MNEMO_BENCH_MODE`      | `engine` (default) or `breakdown`                  |
//! | `--pause-ms`  | `MNEMO_BENCH_PAUSE_MS`  | wait between the last edit and the sync (0)        |
//! | `--server-pid`| `MNEMO_BENCH_SERVER_PID`| the server's process, whose CPU time is read too   |
//!
//! `engine` mode: mount (download), no-op syncs right after the download (files younger than the
//! two-second settle window, so every file is re-hashed), no-op syncs once the files settled (stat
//! cache warm), then `edits` local edits and one sync, verified against the server; peak RSS last.
//! The no-op syncs and the edit sync also report their CPU time, this process's and (given its
//! pid) the server's, from the kernel's per-thread run-time counters (`/proc/<pid>/task/*/schedstat`,
//! nanoseconds; threads that exit during a measurement are not counted).
//!
//! `profile` mode: for a profiler attached to this process and the server (`perf record -p`):
//! mount, wait for the files to settle, then `reps` no-op syncs, then `reps` rounds of `edits`
//! edits and a sync each; it prints the CPU per operation and the phases' wall-clock bounds.
//!
//! `breakdown` mode: the pieces of those operations timed one by one (listings, the write path
//! with and without fsync, scans, the journal), to show where the engine's time goes.
//!
//! Run without a URL (e.g. by a plain `cargo bench`) it prints a note and exits successfully.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mnemo_api::{MemoryStoreId, View, content_sha256};
use mnemo_client::Client;
use mnemo_sync::fs::{FileStore, MARKER_NAME, RelPath};
use mnemo_sync::{StoreConfig, StoreSync, SyncReport};
use serde_json::{Value, json};

/// Files younger than this are re-hashed on every scan (the engine's settle window is 2 s).
const SETTLE: Duration = Duration::from_millis(2_500);

struct Config {
    url: String,
    key: String,
    store: String,
    dir: PathBuf,
    edits: usize,
    reps: usize,
    tag: String,
    mode: String,
    pause: Duration,
    server_pid: Option<u32>,
}

fn setting(args: &[String], name: &str, env: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    args.iter()
        .rev()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
        .or_else(|| std::env::var(env).ok())
        .filter(|v| !v.is_empty())
}

fn config() -> Option<Config> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = setting(&args, "url", "MNEMO_BENCH_URL")?;
    let need = |name: &str, env: &str| {
        setting(&args, name, env).unwrap_or_else(|| {
            eprintln!("sync_engine: --{name} (or {env}) is required");
            std::process::exit(2)
        })
    };
    let number = |name: &str, env: &str, default: usize| {
        setting(&args, name, env).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| {
                eprintln!("sync_engine: --{name} must be a number, got {v:?}");
                std::process::exit(2)
            })
        })
    };
    Some(Config {
        url,
        key: need("key", "MNEMO_BENCH_KEY"),
        store: need("store", "MNEMO_BENCH_STORE"),
        dir: PathBuf::from(need("dir", "MNEMO_BENCH_DIR")),
        edits: number("edits", "MNEMO_BENCH_EDITS", 50),
        reps: number("reps", "MNEMO_BENCH_REPS", 5).max(1),
        tag: setting(&args, "tag", "MNEMO_BENCH_TAG").unwrap_or_else(|| "0".into()),
        mode: setting(&args, "mode", "MNEMO_BENCH_MODE").unwrap_or_else(|| "engine".into()),
        pause: Duration::from_millis(number("pause-ms", "MNEMO_BENCH_PAUSE_MS", 0) as u64),
        server_pid: setting(&args, "server-pid", "MNEMO_BENCH_SERVER_PID").map(|_| {
            u32::try_from(number("server-pid", "MNEMO_BENCH_SERVER_PID", 0)).unwrap_or_else(|_| {
                eprintln!("sync_engine: --server-pid is out of range");
                std::process::exit(2)
            })
        }),
    })
}

fn main() {
    // As `mnemo mount` starts: one allocator arena.
    mnemo_sync::allocator::single_arena();
    let Some(cfg) = config() else {
        eprintln!("sync_engine: no server given (MNEMO_BENCH_URL); run bench/sync/run.py, which starts one. Skipping.");
        return;
    };
    // Warnings from the engine (failed uploads, refusals) go to stderr, where run.py keeps them.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MNEMO_BENCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    // The runtime `mnemo mount` and `mnemo worker` run on (see the binary's `main`).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(4)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let out = match cfg.mode.as_str() {
        "engine" => rt.block_on(engine(&cfg)),
        "breakdown" => rt.block_on(breakdown(&cfg)),
        "profile" => rt.block_on(profile(&cfg)),
        other => {
            eprintln!("sync_engine: unknown mode {other:?} (engine | breakdown | profile)");
            std::process::exit(2)
        }
    };
    match out {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("sync_engine: {e}");
            std::process::exit(1)
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// `VmHWM` and `VmRSS` of this process, in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Nanoseconds the live threads of a process have run on a CPU (`None`: no such process).
fn cpu_ns(pid: &str) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let total = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum();
    Some(total)
}

/// CPU time of this process and of the server, read around a measurement.
#[derive(Clone, Copy)]
struct Cpu {
    own: u64,
    server: Option<u64>,
}

impl Cpu {
    fn now(server_pid: Option<u32>) -> Self {
        Cpu { own: cpu_ns("self").unwrap_or(0), server: server_pid.and_then(|p| cpu_ns(&p.to_string())) }
    }

    /// `{client_cpu_ms, server_cpu_ms}` spent since `self`, divided by `per` (the repetitions).
    fn since(self, server_pid: Option<u32>, per: usize) -> Value {
        let now = Cpu::now(server_pid);
        let each = |a: u64, b: u64| ((b.saturating_sub(a)) as f64 / per.max(1) as f64 / 1e3).round() / 1e3;
        json!({
            "client_cpu_ms": each(self.own, now.own),
            "server_cpu_ms": match (self.server, now.server) {
                (Some(a), Some(b)) => json!(each(a, b)),
                _ => Value::Null,
            },
        })
    }
}

/// Every regular file below `root` except the marker, as sorted `/`-separated relative paths.
fn local_paths(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            match entry.file_type() {
                Ok(t) if t.is_dir() => walk(&entry.path(), &rel, out),
                Ok(t) if t.is_file() && rel != MARKER_NAME => out.push(rel),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(root, "", &mut out);
    out.sort();
    out
}

/// The `i`-th edit's new content: exactly 4,096 bytes of text, unique per engine, tag and file.
/// `bench/sync/sdk_engine.py` builds the same bytes.
fn edited_content(engine: &str, tag: &str, i: usize) -> String {
    let mut s = format!("edited by {engine} run {tag} file {i}\n");
    let filler = "the quick brown fox jumps over the lazy dog 0123456789\n";
    while s.len() < 4096 {
        s.push_str(filler);
    }
    s.truncate(4096);
    s
}

/// Which of the sorted paths get edited: `count` of them, spread evenly.
fn pick(paths: &[String], count: usize) -> Vec<String> {
    let count = count.min(paths.len());
    (0..count).map(|i| paths[i * paths.len() / count].clone()).collect()
}

/// The server's `content_sha256` per memory path.
async fn server_shas(client: &Client, store: &MemoryStoreId) -> Res<BTreeMap<String, String>> {
    Ok(client.list_all_memories(store, View::Basic).await?.into_iter().map(|m| (m.path, m.content_sha256)).collect())
}

fn report_json(r: &SyncReport) -> Value {
    json!({
        "pulled": r.pulled, "uploaded": r.uploaded, "removed_locally": r.removed_locally,
        "deleted_remotely": r.deleted_remotely, "conflicts": r.conflicts, "refused": r.refused,
        "failed": r.failed, "recovered": r.recovered, "skipped": r.skipped,
    })
}

/// Times `reps` syncs; fails if one of them changed anything.
async fn noop_syncs(engine: &mut StoreSync, reps: usize) -> Res<Vec<f64>> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let report = engine.sync(false).await?;
        times.push(ms(t.elapsed()));
        if report.changed() || report.failed > 0 || report.skipped {
            return Err(format!("a no-op sync changed something: {report}").into());
        }
    }
    Ok(times)
}

async fn engine(cfg: &Config) -> Res<Value> {
    let client = Client::new(&cfg.url, &cfg.key)?;
    let store: MemoryStoreId = cfg.store.parse()?;
    let started = Instant::now();

    // 1. The download.
    let t = Instant::now();
    let mut engine = StoreSync::mount(client.clone(), StoreConfig::new(store.clone(), &cfg.dir))
        .await
        .map_err(|e| format!("mount: {e}"))?;
    let download = ms(t.elapsed());
    // Ready above (the agent may start); durable here (the first journal, committed in the
    // background after the `syncfs` of every file, is in place).
    engine.first_journal_done().await;
    let download_durable = ms(t.elapsed());
    let downloaded = engine.baseline_len();
    let mounted_at = Instant::now();

    // 2. No-op syncs: right after the download, then with the files settled and the cache warm.
    let noop_fresh = noop_syncs(&mut engine, 3).await?;
    tokio::time::sleep(SETTLE.saturating_sub(mounted_at.elapsed())).await;
    let noop_first_settled = noop_syncs(&mut engine, 1).await?;
    let cpu = Cpu::now(cfg.server_pid);
    let noop_warm = noop_syncs(&mut engine, cfg.reps).await?;
    let noop_cpu = cpu.since(cfg.server_pid, cfg.reps);

    // 3. Edits, one sync, then check the server holds every edited file's bytes.
    let paths = pick(&local_paths(&cfg.dir), cfg.edits);
    let mut expected = BTreeMap::new();
    for (i, rel) in paths.iter().enumerate() {
        let content = edited_content("mnemo", &cfg.tag, i);
        std::fs::write(cfg.dir.join(rel), &content)?;
        expected.insert(format!("/{rel}"), content_sha256(content.as_bytes()));
    }
    if !cfg.pause.is_zero() {
        tokio::time::sleep(cfg.pause).await;
    }
    let cpu = Cpu::now(cfg.server_pid);
    let t = Instant::now();
    let edit_report = engine.sync(false).await?;
    let edit_sync = ms(t.elapsed());
    let edit_cpu = cpu.since(cfg.server_pid, 1);
    let on_server = server_shas(&client, &store).await?;
    let missing: Vec<&String> =
        expected.iter().filter(|(path, sha)| on_server.get(*path) != Some(*sha)).map(|(path, _)| path).collect();
    let verified = expected.len() - missing.len();
    // Diagnostics only, untimed: if the sync missed edits, does a later one pick them up?
    let mut followup = Value::Null;
    if !missing.is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let report = engine.sync(false).await?;
        let on_server = server_shas(&client, &store).await?;
        let still = expected.iter().filter(|(path, sha)| on_server.get(*path) != Some(*sha)).count();
        followup = json!({"after_ms": 200, "report": report_json(&report), "still_missing": still});
    }

    let (hwm, rss) = rss_kib();
    let elapsed = ms(started.elapsed());
    // No `dispose`: deleting 2,000 files would slow the next run's file creation (ext4 skips
    // recently freed inodes), penalising whichever engine runs next. run.py removes the folders
    // once every run is over.
    drop(engine);
    Ok(json!({
        "engine": "mnemo",
        "memories_downloaded": downloaded,
        "download_ms": download,
        "download_durable_ms": download_durable,
        "noop_fresh_ms": median(noop_fresh.clone()),
        "noop_fresh_all_ms": noop_fresh,
        "noop_first_settled_ms": noop_first_settled[0],
        "noop_ms": median(noop_warm.clone()),
        "noop_all_ms": noop_warm,
        "noop_client_cpu_ms": noop_cpu["client_cpu_ms"],
        "noop_server_cpu_ms": noop_cpu["server_cpu_ms"],
        "edits": paths.len(),
        "edit_sync_ms": edit_sync,
        "edit_client_cpu_ms": edit_cpu["client_cpu_ms"],
        "edit_server_cpu_ms": edit_cpu["server_cpu_ms"],
        "edit_report": report_json(&edit_report),
        "edits_verified_on_server": verified,
        "edits_missing_on_server": missing,
        "followup_sync": followup,
        "peak_rss_kib": hwm,
        "rss_kib": rss,
        "total_ms": elapsed,
    }))
}

/// On-CPU nanoseconds per thread name of this process.
fn cpu_by_thread() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for t in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default().trim().to_owned();
        let ns = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
            .unwrap_or(0);
        *out.entry(name).or_default() += ns;
    }
    out
}

async fn profile(cfg: &Config) -> Res<Value> {
    let client = Client::new(&cfg.url, &cfg.key)?;
    let store: MemoryStoreId = cfg.store.parse()?;
    let mut engine =
        StoreSync::mount(client.clone(), StoreConfig::new(store, &cfg.dir)).await.map_err(|e| format!("mount: {e}"))?;
    engine.first_journal_done().await;
    tokio::time::sleep(SETTLE).await;
    noop_syncs(&mut engine, 1).await?;
    let epoch = std::time::SystemTime::now();
    let cpu = Cpu::now(cfg.server_pid);
    let t = Instant::now();
    noop_syncs(&mut engine, cfg.reps).await?;
    let noop_wall = ms(t.elapsed());
    let noop = cpu.since(cfg.server_pid, cfg.reps);
    let edits_from = ms(epoch.elapsed()?);
    let paths = pick(&local_paths(&cfg.dir), cfg.edits);
    let (mut edit_ns, mut threads) = (0u64, BTreeMap::<String, i64>::new());
    let mut edit_wall = Duration::ZERO;
    for round in 0..cfg.reps {
        for (i, rel) in paths.iter().enumerate() {
            std::fs::write(cfg.dir.join(rel), edited_content("profile", &format!("{}-{round}", cfg.tag), i))?;
        }
        // The listing our own uploads invalidated is refreshed by an untimed sync after each
        // timed one, as in `engine` mode, where no-op syncs precede the edit sync.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (before, own) = (cpu_by_thread(), cpu_ns("self").unwrap_or(0));
        let t = Instant::now();
        let report = engine.sync(false).await?;
        edit_wall += t.elapsed();
        edit_ns += cpu_ns("self").unwrap_or(0) - own;
        for (name, ns) in cpu_by_thread() {
            *threads.entry(name.clone()).or_default() += ns as i64 - *before.get(&name).unwrap_or(&0) as i64;
        }
        if report.uploaded != paths.len() {
            return Err(format!("an edit sync uploaded {} of {} edits: {report}", report.uploaded, paths.len()).into());
        }
        engine.sync(false).await?;
    }
    let threads: BTreeMap<String, f64> =
        threads.into_iter().map(|(k, v)| (k, v as f64 / cfg.reps as f64 / 1e6)).collect();
    let edit = json!({"client_cpu_ms": edit_ns as f64 / cfg.reps as f64 / 1e6, "by_thread_ms": threads});
    Ok(json!({
        "noop_syncs": cfg.reps, "noop_wall_ms_each": noop_wall / cfg.reps as f64, "noop_cpu": noop,
        "edit_syncs": cfg.reps, "edits_each": paths.len(), "edit_wall_ms_each": ms(edit_wall) / cfg.reps as f64,
        "edit_cpu_each": edit, "edits_start_at_ms": edits_from,
    }))
}

/// Writes `contents` below `root` one file after the other, the way `variant` says.
fn write_variant(variant: &str, root: &Path, contents: &[(RelPath, String)]) -> Res<()> {
    use std::io::Write;
    if variant == "engine" {
        let files = FileStore::new(root).with_utf8_only(false);
        files.create_root()?;
        for (rel, content) in contents {
            files.write(rel, content.as_bytes())?;
        }
        return Ok(());
    }
    for (i, (rel, content)) in contents.iter().enumerate() {
        let path = root.join(rel.as_str());
        let parent = path.parent().expect("a file has a folder");
        std::fs::create_dir_all(parent)?;
        if variant == "plain" {
            std::fs::write(&path, content)?;
            continue;
        }
        let temp = parent.join(format!(".bench-{i}.tmp"));
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(content.as_bytes())?;
        if variant == "atomic_fsync_file" {
            f.sync_all()?;
        }
        drop(f);
        std::fs::rename(&temp, &path)?;
    }
    Ok(())
}

async fn timed_blocking<T: Send + 'static>(f: impl FnOnce() -> Res<T> + Send + 'static) -> Res<(f64, T)> {
    tokio::task::spawn_blocking(move || {
        let t = Instant::now();
        let out = f()?;
        Ok((ms(t.elapsed()), out))
    })
    .await?
}

async fn breakdown(cfg: &Config) -> Res<Value> {
    let client = Client::new(&cfg.url, &cfg.key)?;
    let store: MemoryStoreId = cfg.store.parse()?;
    std::fs::create_dir(&cfg.dir)?;
    let mut out = serde_json::Map::new();

    // Listings: the network, server and JSON part of a download (full view, 20 per page) and of
    // every sync (basic view, 100 per page), page after page as the engine requests them.
    let mut full = Vec::new();
    let mut memories = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        memories = client.list_all_memories(&store, View::Full).await?;
        full.push(ms(t.elapsed()));
    }
    out.insert("list_full_ms".into(), json!(median(full)));
    let mut basic = Vec::new();
    for _ in 0..cfg.reps {
        let t = Instant::now();
        client.list_all_memories(&store, View::Basic).await?;
        basic.push(ms(t.elapsed()));
    }
    out.insert("list_basic_ms".into(), json!(median(basic)));
    out.insert("memories".into(), json!(memories.len()));

    let contents: Vec<(RelPath, String)> = memories
        .into_iter()
        .filter_map(|m| {
            let rel = RelPath::from_memory_path(&m.path).ok()?;
            Some((rel, m.content.unwrap_or_default()))
        })
        .collect();
    let contents = std::sync::Arc::new(contents);

    // Hashing 2,000 × 4 KB in memory: the floor of a scan that re-reads everything.
    let c = contents.clone();
    let (hash_ms, _) =
        timed_blocking(move || Ok(c.iter().map(|(_, s)| content_sha256(s.as_bytes()).len()).sum::<usize>())).await?;
    out.insert("sha256_in_memory_ms".into(), json!(hash_ms));

    // The write path, each variant into a fresh folder, interleaved and repeated (file creation
    // on a shared virtual disk is noisy; nothing is deleted until the end, see `engine`): plain writes; the atomic temp-file-and-rename without
    // any fsync; the same with the file fsynced; and the engine's own write (file fsync, rename,
    // folder fsync). The differences are what the fsyncs cost.
    let variants = ["plain", "atomic", "atomic_fsync_file", "engine"];
    let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let rounds = 5;
    for round in 0..rounds {
        for variant in variants {
            let dir = cfg.dir.join(format!("write-{variant}-{round}"));
            let c = contents.clone();
            let (t, ()) = timed_blocking(move || write_variant(variant, &dir, &c)).await?;
            times.entry(variant).or_default().push(t);
        }
    }
    for (variant, t) in &times {
        out.insert(format!("write_{variant}_ms"), json!(median(t.clone())));
        out.insert(format!("write_{variant}_min_ms"), json!(t.iter().copied().fold(f64::INFINITY, f64::min)));
        out.insert(format!("write_{variant}_all_ms"), json!(t));
    }
    let files =
        std::sync::Arc::new(FileStore::new(cfg.dir.join(format!("write-engine-{}", rounds - 1))).with_utf8_only(false));
    let written_at = Instant::now();

    // Scans: every file re-hashed while the files are younger than the settle window, then
    // served from the stat cache.
    let fs = files.clone();
    let (t, n) = timed_blocking(move || Ok(fs.scan()?.len())).await?;
    out.insert("scan_unsettled_ms".into(), json!(t));
    out.insert("scan_files".into(), json!(n));
    tokio::time::sleep(SETTLE.saturating_sub(written_at.elapsed())).await;
    let fs = files.clone();
    let (t, _) = timed_blocking(move || Ok(fs.scan()?.len())).await?;
    out.insert("scan_first_settled_ms".into(), json!(t));
    let mut warm = Vec::new();
    for _ in 0..cfg.reps {
        let fs = files.clone();
        warm.push(timed_blocking(move || Ok(fs.scan()?.len())).await?.0);
    }
    out.insert("scan_warm_ms".into(), json!(median(warm)));

    // The journal: the same mount and no-op syncs with and without it.
    for (name, journal) in [("journal", true), ("nojournal", false)] {
        let mut sc = StoreConfig::new(store.clone(), cfg.dir.join(format!("mount-{name}")));
        sc.journal = journal;
        let t = Instant::now();
        let mut engine = StoreSync::mount(client.clone(), sc).await.map_err(|e| format!("mount: {e}"))?;
        out.insert(format!("mount_{name}_ms"), json!(ms(t.elapsed())));
        let mounted_at = Instant::now();
        let fresh = noop_syncs(&mut engine, 3).await?;
        out.insert(format!("noop_fresh_{name}_ms"), json!(median(fresh)));
        tokio::time::sleep(SETTLE.saturating_sub(mounted_at.elapsed())).await;
        noop_syncs(&mut engine, 1).await?;
        let warm = noop_syncs(&mut engine, cfg.reps).await?;
        out.insert(format!("noop_{name}_ms"), json!(median(warm)));
        drop(engine);
    }
    let (hwm, _) = rss_kib();
    out.insert("peak_rss_kib".into(), json!(hwm));
    std::fs::remove_dir_all(&cfg.dir)?;
    Ok(Value::Object(out))
}
