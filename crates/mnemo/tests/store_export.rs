//! `mnemo store export` and `mnemo store import` against real `mnemo serve` processes.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use mnemo_api::{CreateMemoryStore, MemoryStoreId, UpdateMemory, View};
use mnemo_client::{Client, ListMemoryStoresParams, ListMemoryVersionsParams};
use serde_json::Value;

use common::{KEY, Server, mnemo, wait_until_async};

/// `mnemo store SUBCOMMAND …` against `server`.
fn store_cmd(server: &Server, args: &[&str]) -> Command {
    let mut cmd = mnemo();
    cmd.arg("store").args(args).args(["--base-url", &server.base, "--api-key", KEY]);
    cmd
}

fn run(server: &Server, args: &[&str]) -> Output {
    store_cmd(server, args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Both streams, for assertion messages.
fn shown(out: &Output) -> String {
    format!("status {}\nstdout:\n{}\nstderr:\n{}", out.status, text(&out.stdout), text(&out.stderr))
}

/// Panics, showing both streams, unless `stream` (the run's stdout or stderr) holds every one
/// of `fragments`.
fn assert_says(out: &Output, stream: &[u8], fragments: &[&str]) {
    let said = text(stream);
    for fragment in fragments {
        assert!(said.contains(fragment), "no {fragment:?} in {}", shown(out));
    }
}

fn export(server: &Server, store: &MemoryStoreId, file: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["export", store.as_str(), "--out", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(server, &args);
    assert!(out.status.success(), "export failed: {}", shown(&out));
    out
}

fn import(server: &Server, file: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["import", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(server, &args)
}

/// The id of the store an import created, from its first line on stderr.
fn created_store(out: &Output) -> MemoryStoreId {
    let err = text(&out.stderr);
    let line = err.lines().find(|l| l.starts_with("created memory store ")).unwrap_or_else(|| panic!("{}", shown(out)));
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// The "N created, M skipped" of an import's report.
fn created_and_skipped(out: &Output) -> (usize, usize) {
    let stdout = text(&out.stdout);
    let counts = stdout.split("): ").nth(1).unwrap_or_else(|| panic!("{}", shown(out)));
    let mut words = counts.split(", ").map(|part| part.split(' ').next().unwrap().parse::<usize>().unwrap());
    (words.next().unwrap(), words.next().unwrap())
}

async fn new_store(client: &Client, name: &str, memories: &[(String, String)]) -> MemoryStoreId {
    let body = CreateMemoryStore { name: name.into(), ..Default::default() };
    let store = client.create_memory_store(&body).await.unwrap();
    for (path, content) in memories {
        client.create_memory(&store.id, path, content, None).await.unwrap();
    }
    store.id
}

/// Every memory of a store: path → (content, content_sha256).
async fn contents(client: &Client, store: &MemoryStoreId) -> BTreeMap<String, (String, String)> {
    let memories = client.list_all_memories(store, View::Full).await.unwrap();
    memories.into_iter().map(|m| (m.path, (m.content.unwrap(), m.content_sha256))).collect()
}

/// The lines of an export file, parsed.
fn lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn write_lines(file: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(file, text).unwrap();
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect()
}

/// `n` memories of `size` bytes each under a few folders.
fn many(n: usize, size: usize) -> Vec<(String, String)> {
    (0..n).map(|i| (format!("/bulk/d{}/m{i:05}.md", i % 7), format!("{i:05}:{}", "x".repeat(size - 6)))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_round_trips_exactly_to_another_server() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        Server::start(&tmp.path().join("a.sqlite"), &["--api-key", KEY]),
        Server::start(&tmp.path().join("b.sqlite"), &["--api-key", KEY]),
    );
    let (ca, cb) = (a.client(), b.client());
    let body = CreateMemoryStore {
        name: "User Preferences ✓".into(),
        description: Some("what the user likes".into()),
        metadata: Some(BTreeMap::from([("end_user".into(), "u-42".into()), ("tier".into(), "gold".into())])),
    };
    let source = ca.create_memory_store(&body).await.unwrap().id;
    let memories = vec![
        ("/notes/todo.md".to_owned(), "- ship\n- test\n".to_owned()),
        ("/a/b/c/d/e/f/deep.md".to_owned(), "deep".to_owned()),
        ("/empty.md".to_owned(), String::new()),
        ("/ünï/cödé 🦀.md".to_owned(), "naïve café — 日本語 🦀\r\n\t\"quoted\" \\ \u{2028}\0end".to_owned()),
        ("/big/multibyte.md".to_owned(), "é".repeat(51_200)),
        ("/big/ascii.md".to_owned(), "y".repeat(102_399)),
    ];
    for (path, content) in &memories {
        ca.create_memory(&source, path, content, None).await.unwrap();
    }
    let file = tmp.path().join("prefs.jsonl");
    let out = export(&a, &source, &file, &[]);
    assert!(text(&out.stderr).contains("exported 6 memories"), "{}", shown(&out));
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!leftovers.iter().any(|n| n.to_string_lossy().ends_with(".tmp")), "no temp file left: {leftovers:?}");

    // The file: a header without the key, one line per memory, a trailer.
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(!raw.contains(KEY), "the API key is not in the export");
    let l = lines(&file);
    assert_eq!(
        (l[0]["type"].as_str(), l[0]["format"].as_str(), l[0]["format_version"].as_u64()),
        (Some("header"), Some("mnemo-memory-store"), Some(1))
    );
    assert_eq!(l[0]["source"]["base_url"], a.base.as_str());
    assert_eq!(l[0]["source"]["memory_store_id"], source.as_str());
    assert_eq!(l[0]["store"]["metadata"]["end_user"], "u-42");
    assert_eq!(l.len(), 8);
    assert_eq!(
        l[7],
        serde_json::json!({"type": "trailer", "memories": 6, "content_bytes": memories.iter().map(|(_, c)| c.len()).sum::<usize>(), "histories": 0, "versions": 0})
    );

    // Into a new store on another server: the same paths, bytes, digests and store fields.
    let out = import(&b, &file, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    let target = created_store(&out);
    assert!(text(&out.stdout).contains(": 6 created, 0 skipped (already there), 0 overwritten"), "{}", shown(&out));
    assert_eq!(contents(&cb, &target).await, contents(&ca, &source).await);
    let fields = cb.get_memory_store(&target).await.unwrap();
    assert_eq!((fields.name.as_str(), fields.description.as_str()), ("User Preferences ✓", "what the user likes"));
    assert_eq!(fields.metadata, body.metadata.unwrap());
    for (path, content) in &memories {
        let got = contents(&cb, &target).await.remove(path).unwrap();
        assert_eq!(got, (content.clone(), mnemo_api::content_sha256(content.as_bytes())), "{path}");
    }

    // Twice: everything is skipped, nothing is written.
    let versions_before =
        cb.list_all_memory_versions(&target, ListMemoryVersionsParams::default()).await.unwrap().len();
    let out = import(&b, &file, &["--into", target.as_str()]);
    assert!(out.status.success(), "{}", shown(&out));
    assert!(text(&out.stdout).contains(": 0 created, 6 skipped (already there), 0 overwritten"), "{}", shown(&out));
    let versions_after = cb.list_all_memory_versions(&target, ListMemoryVersionsParams::default()).await.unwrap().len();
    assert_eq!(versions_after, versions_before, "a second import writes nothing");

    // Through a pipe: export to stdout, import from stdin, under another name.
    let exported = run(&a, &["export", source.as_str()]);
    assert!(exported.status.success(), "{}", shown(&exported));
    let mut child = store_cmd(&b, &["import", "-", "--name", "piped"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&exported.stdout).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let piped = created_store(&out);
    assert_eq!(cb.get_memory_store(&piped).await.unwrap().name, "piped");
    assert_eq!(contents(&cb, &piped).await, contents(&ca, &source).await);
    for out in [&exported, &out] {
        assert!(!text(&out.stderr).contains(KEY), "no key in the output: {}", shown(out));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_resumes_after_half_of_it_landed_and_after_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let all = many(600, 4096);
    let source = new_store(&client, "source", &all).await;
    let file = tmp.path().join("export.jsonl");
    export(&server, &source, &file, &[]);

    // The first half is already there (as an interrupted import leaves it).
    let half = new_store(&client, "half", &all[..300]).await;
    let out = import(&server, &file, &["--into", half.as_str()]);
    assert!(out.status.success(), "{}", shown(&out));
    assert!(text(&out.stdout).contains(": 300 created, 300 skipped (already there)"), "{}", shown(&out));
    assert_eq!(contents(&client, &half).await, contents(&client, &source).await);

    // Killed part-way (SIGKILL: no chance to tidy up), then run again.
    let target = new_store(&client, "killed", &[]).await;
    let mut child = store_cmd(&server, &["import", file.to_str().unwrap(), "--into", target.as_str()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = wait_until_async(Duration::from_secs(30), || async {
        client.list_all_memories(&target, View::Basic).await.unwrap().len() >= 60
    })
    .await;
    assert!(started, "the import never got going");
    child.kill().unwrap();
    child.wait().unwrap();
    let landed = client.list_all_memories(&target, View::Basic).await.unwrap().len();
    eprintln!("{landed} of 600 memories had landed when the import was killed");
    let out = import(&server, &file, &["--into", target.as_str()]);
    assert!(out.status.success(), "{}", shown(&out));
    // Requests the killed import had sent may still land after the count: at least `landed`
    // are skipped, the rest created.
    let (created, skipped) = created_and_skipped(&out);
    assert!(created + skipped == 600 && skipped >= landed, "{landed} had landed: {}", shown(&out));
    assert_eq!(contents(&client, &target).await, contents(&client, &source).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_reported_and_left_alone_unless_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let source = new_store(
        &client,
        "source",
        &pairs(&[("/a.md", "from the file"), ("/dir/x.md", "x"), ("/same.md", "s"), ("/new.md", "n")]),
    )
    .await;
    let file = tmp.path().join("export.jsonl");
    export(&server, &source, &file, &[]);
    let target = new_store(
        &client,
        "target",
        &pairs(&[("/a.md", "edited here"), ("/dir", "a file, not a folder"), ("/same.md", "s"), ("/mine.md", "m")]),
    )
    .await;

    let out = import(&server, &file, &["--into", target.as_str()]);
    assert!(!out.status.success(), "conflicts fail the import: {}", shown(&out));
    assert_says(
        &out,
        &out.stdout,
        &[
            ": 1 created, 1 skipped (already there), 0 overwritten",
            "conflicts (2), left as they are:\n  /a.md: the store holds different content there (sha256 ",
            "  /dir/x.md: the memory at /dir overlaps it\n",
            "the store also holds 2 memories that are not in the file",
        ],
    );
    assert_says(&out, &out.stderr, &["error: 2 of 4 memories were not imported", "pass --overwrite"]);
    let now = contents(&client, &target).await;
    assert_eq!(now["/a.md"].0, "edited here", "not overwritten");
    assert_eq!(now["/new.md"].0, "n");
    assert!(!now.contains_key("/dir/x.md"));

    let out = import(&server, &file, &["--into", target.as_str(), "--overwrite"]);
    assert!(!out.status.success(), "the overlap is still a conflict: {}", shown(&out));
    assert_says(&out, &out.stdout, &[": 0 created, 2 skipped (already there), 1 overwritten", "conflicts (1)"]);
    let now = contents(&client, &target).await;
    assert_eq!(now["/a.md"].0, "from the file");
    assert_eq!(now["/dir"].0, "a file, not a folder", "an overlapping memory is never deleted");
    assert_eq!(now["/mine.md"].0, "m");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_stops_the_import_with_a_plain_message() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Server::start(&tmp.path().join("a.sqlite"), &["--api-key", KEY]);
    let capped = Server::start(&tmp.path().join("b.sqlite"), &["--api-key", KEY, "--max-memories-per-store", "3"]);
    let source = new_store(&a.client(), "five", &many(5, 64)).await;
    let file = tmp.path().join("export.jsonl");
    export(&a, &source, &file, &[]);

    let out = import(&capped, &file, &[]);
    assert!(!out.status.success(), "{}", shown(&out));
    let target = created_store(&out);
    assert_says(
        &out,
        &out.stdout,
        &[
            ": 3 created, 0 skipped",
            "the store is full: 2 memories were left out (the server says: memory store",
            "already holds 3 memories",
        ],
    );
    let into = format!("--into {target}");
    assert_says(
        &out,
        &out.stderr,
        &["2 of 5 memories were not imported", "mnemo serve --max-memories-per-store", &into],
    );
    assert_eq!(capped.client().list_all_memories(&target, View::Basic).await.unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_or_damaged_file_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let source =
        new_store(&client, "source", &pairs(&[("/a.md", "alpha"), ("/b.md", "beta"), ("/c.md", "gamma")])).await;
    let file = tmp.path().join("export.jsonl");
    export(&server, &source, &file, &[]);
    let good = lines(&file);
    let stores = || async {
        client
            .list_memory_stores(&ListMemoryStoresParams { limit: Some(100), ..Default::default() })
            .await
            .unwrap()
            .data
            .len()
    };
    let before = stores().await;

    let bad = tmp.path().join("bad.jsonl");
    let mut tampered = good.clone();
    tampered[2]["content"] = "BETA".into();
    let mut newer = good.clone();
    newer[0]["format_version"] = 2.into();
    let mut bad_path = good.clone();
    bad_path[1]["path"] = "/x/../a.md".into();
    let cases: [(&str, Vec<Value>, &str); 5] = [
        ("no trailer", good[..4].to_vec(), "without its trailer line: it is truncated"),
        (
            "a line missing",
            [&good[..2], &good[3..]].concat(),
            "the trailer says the file holds 3 memories, but it holds 2",
        ),
        ("altered content", tampered, "line 3: memory `/b.md`: content_sha256 is"),
        ("a newer format", newer, "format version 2, newer than this mnemo reads (version 1)"),
        ("an invalid path", bad_path, "line 2: invalid path `/x/../a.md`: path has a `.` or `..` segment"),
    ];
    for (what, content, expected) in cases {
        write_lines(&bad, &content);
        let out = import(&server, &bad, &[]);
        assert!(!out.status.success(), "{what}: {}", shown(&out));
        let stderr = text(&out.stderr);
        assert!(stderr.contains("nothing was written") && stderr.contains(expected), "{what}: {}", shown(&out));
    }
    // Cut inside a line.
    let raw = std::fs::read(&file).unwrap();
    std::fs::write(&bad, &raw[..raw.len() - 30]).unwrap();
    let out = import(&server, &bad, &["--into", source.as_str()]);
    assert!(text(&out.stderr).contains("line 5: is cut short"), "{}", shown(&out));
    std::fs::write(&bad, b"hello\n").unwrap();
    assert!(text(&import(&server, &bad, &[]).stderr).contains("this is not a mnemo memory store export"));
    assert_eq!(stores().await, before, "no store was created");
    assert_eq!(contents(&client, &source).await.len(), 3);

    // Export errors: an unknown store, a folder that does not exist, a wrong key.
    let missing: MemoryStoreId = "memstore_0357RbCaZGDhQDl3zapm8E".parse().unwrap();
    let out = run(&server, &["export", missing.as_str()]);
    assert!(text(&out.stderr).contains(&format!("memory store {missing} not found")), "{}", shown(&out));
    let out =
        run(&server, &["export", source.as_str(), "--out", tmp.path().join("no/such/dir/x.jsonl").to_str().unwrap()]);
    assert!(!out.status.success() && text(&out.stderr).contains("does not exist"), "{}", shown(&out));
    // A failed export leaves an existing --out file as it was; no key shows, even in trace logs.
    let previous = tmp.path().join("previous.jsonl");
    std::fs::write(&previous, "the previous export").unwrap();
    let out = mnemo()
        .args(["store", "export", source.as_str(), "--out", previous.to_str().unwrap()])
        .args(["--base-url", &server.base, "--api-key", "sk-wrong-secret"])
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_says(&out, &out.stderr, &["the server refused the API key (401"]);
    assert!(!text(&out.stderr).contains("sk-wrong-secret"), "{}", shown(&out));
    assert_eq!(std::fs::read_to_string(&previous).unwrap(), "the previous export");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_export_operations_actors_and_redactions() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let store = new_store(&client, "history", &pairs(&[("/kept.md", "v1"), ("/gone.md", "bye")])).await;
    let memories = client.list_all_memories(&store, View::Basic).await.unwrap();
    let (gone, kept) = (&memories[0], &memories[1]);
    let first = kept.memory_version_id.clone();
    client
        .update_memory(&store, &kept.id, &UpdateMemory { content: Some("v2".into()), ..Default::default() }, None)
        .await
        .unwrap();
    client.redact_memory_version(&store, &first).await.unwrap();
    client.delete_memory(&store, &gone.id, None).await.unwrap();
    client.set_version_retention(&store, Some("90d")).await.unwrap();

    let file = tmp.path().join("history.jsonl");
    export(&server, &store, &file, &["--versions"]);
    let l = lines(&file);
    assert_eq!(l[0]["versions"], true);
    assert_eq!(l[0]["store"]["version_retention"], "90d", "the store's own retention travels with it");
    let memory = &l[1];
    assert_eq!((memory["path"].as_str(), memory["content"].as_str()), (Some("/kept.md"), Some("v2")));
    let ops: Vec<&str> =
        memory["versions"].as_array().unwrap().iter().map(|v| v["operation"].as_str().unwrap()).collect();
    assert_eq!(ops, ["created", "modified"]);
    let v = &memory["versions"][0];
    assert_eq!(v["created_by"]["type"], "api_actor");
    assert!(v["created_by"]["api_key_id"].as_str().unwrap().starts_with("apikey_"));
    assert!(v["redacted_at"].is_string() && v["content"].is_null() && v["path"].is_null(), "redacted: {v}");
    assert_eq!(v["redacted_by"]["type"], "api_actor");
    assert_eq!(memory["versions"][1]["content"], "v2");
    let history = &l[2];
    assert_eq!((history["type"].as_str(), history["memory_id"].as_str()), (Some("history"), Some(gone.id.as_str())));
    let ops: Vec<&str> =
        history["versions"].as_array().unwrap().iter().map(|v| v["operation"].as_str().unwrap()).collect();
    assert_eq!(ops, ["created", "deleted"]);
    assert_eq!(history["versions"][0]["content"], "bye");
    assert_eq!(
        l[3],
        serde_json::json!({"type": "trailer", "memories": 1, "content_bytes": 2, "histories": 1, "versions": 4})
    );

    // The live memories import; the history stays in the file, and the import says so.
    let out = import(&server, &file, &[]);
    assert!(out.status.success(), "{}", shown(&out));
    assert!(text(&out.stderr).contains("the file's history (4 versions) is not replayed"), "{}", shown(&out));
    let target = created_store(&out);
    assert_eq!(contents(&client, &target).await, contents(&client, &store).await);
    let written = client.list_all_memory_versions(&target, ListMemoryVersionsParams::default()).await.unwrap();
    assert_eq!(written.len(), 1, "one created version per memory: {written:?}");
    let kept = client.get_version_retention(&target).await.unwrap().unwrap();
    assert_eq!(kept.retention.as_deref(), Some("90d"), "the new store keeps versions as the old one did");

    // A malformed retention in the file is refused before any store is made.
    let mut bad = lines(&file);
    bad[0]["store"]["version_retention"] = "a fortnight".into();
    let bad_file = tmp.path().join("bad.jsonl");
    write_lines(&bad_file, &bad);
    let stores_before = client
        .list_memory_stores(&ListMemoryStoresParams { limit: Some(100), ..Default::default() })
        .await
        .unwrap()
        .data
        .len();
    let out = import(&server, &bad_file, &[]);
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(text(&out.stderr).contains("version_retention"), "{}", shown(&out));
    assert_eq!(
        client
            .list_memory_stores(&ListMemoryStoresParams { limit: Some(100), ..Default::default() })
            .await
            .unwrap()
            .data
            .len(),
        stores_before,
        "no store was made"
    );
}

/// What a finished child did, and its peak resident memory (KiB).
struct Measured {
    out: Output,
    peak_kib: u64,
}

/// Runs `cmd` to its end, reading its peak resident memory (`VmHWM`, a high-water mark) from
/// `/proc/<pid>/status` every few milliseconds until it exits: the last reading is taken just
/// before the end (a zombie's status no longer has it).
fn measured(mut cmd: Command) -> Measured {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text.lines().find_map(|l| l.strip_prefix("VmHWM:")).map(|v| v.trim().trim_end_matches(" kB"));
            if let Some(kib) = hwm.and_then(|v| v.trim().parse::<u64>().ok()) {
                peak_kib = peak_kib.max(kib);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(3));
    };
    let out = Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    assert!(peak_kib > 0, "the child's memory was never read: {}", shown(&out));
    Measured { out, peak_kib }
}

/// The bound an import stays under, whatever the file: its longest line is at most 1 MiB and it
/// keeps no content beyond the few in flight.
const IMPORT_PEAK_KIB: u64 = 64 * 1024;

/// A header line for a hand-made export file.
fn header_line() -> String {
    serde_json::json!({
        "type": "header", "format": "mnemo-memory-store", "format_version": 1, "mnemo_version": "test",
        "exported_at": "2026-12-01T10:00:00Z",
        "source": {"base_url": "http://127.0.0.1:1", "memory_store_id": "memstore_0357RbCaZGDhQDl3zapm8E"},
        "store": {"name": "made by hand", "created_at": "2026-12-01T10:00:00Z"},
        "versions": false
    })
    .to_string()
}

/// A hostile file — a memory line of 300 MB — is refused by its length, naming the line and the
/// cap, in bounded memory (it was read whole before: 624 MB), from a file and from stdin alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_line_is_refused_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let file = tmp.path().join("hostile.jsonl");
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&file).unwrap());
        writeln!(w, "{}", header_line()).unwrap();
        write!(w, "{{\"type\":\"memory\",\"path\":\"/big\",\"content\":\"").unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..300 {
            w.write_all(&chunk).unwrap();
        }
        writeln!(w, "\",\"content_sha256\":\"{}\",\"size\":{}}}", "0".repeat(64), 300 << 20).unwrap();
        writeln!(
            w,
            "{{\"type\":\"trailer\",\"memories\":1,\"content_bytes\":{},\"histories\":0,\"versions\":0}}",
            300 << 20
        )
        .unwrap();
        w.flush().unwrap();
    }
    let from_file = measured(store_cmd(&server, &["import", file.to_str().unwrap()]));
    let mut piped = store_cmd(&server, &["import", "-"]);
    piped.stdin(std::fs::File::open(&file).unwrap());
    let from_stdin = measured(piped);
    for (how, m) in [("file", &from_file), ("stdin", &from_stdin)] {
        assert!(!m.out.status.success(), "{how}: {}", shown(&m.out));
        let stderr = text(&m.out.stderr);
        assert!(
            stderr.contains("nothing was written") && stderr.contains("line 2 is too long: more than 1048576 bytes"),
            "{how}: {}",
            shown(&m.out)
        );
        eprintln!("{how}: peak RSS {} KiB refusing a 300 MB line", m.peak_kib);
        assert!(m.peak_kib < IMPORT_PEAK_KIB, "{how}: peak RSS {} KiB: {}", m.peak_kib, shown(&m.out));
    }
    let stores = server.client().list_memory_stores(&ListMemoryStoresParams::default()).await.unwrap();
    assert!(stores.data.is_empty(), "no store was created");
}

/// A large valid file (1,000 memories of 96 KiB: 94 MiB of content) imports whole in bounded
/// memory: the contents are read again as they are written, never all held at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_imports_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let file = tmp.path().join("large.jsonl");
    let (n, size) = (1000usize, 96 * 1024);
    let content = |i: usize| format!("{i:06}:{}", "q".repeat(size - 7));
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&file).unwrap());
        writeln!(w, "{}", header_line()).unwrap();
        for i in 0..n {
            let c = content(i);
            let line = serde_json::json!({"type": "memory", "path": format!("/large/d{}/m{i:05}.md", i % 10),
                "content": c, "content_sha256": mnemo_api::content_sha256(c.as_bytes()), "size": c.len()});
            writeln!(w, "{line}").unwrap();
        }
        writeln!(w, "{}", serde_json::json!({"type": "trailer", "memories": n, "content_bytes": n * size, "histories": 0, "versions": 0}))
            .unwrap();
        w.flush().unwrap();
    }
    assert!(std::fs::metadata(&file).unwrap().len() > 90 << 20);
    let m = measured(store_cmd(&server, &["import", file.to_str().unwrap()]));
    assert!(m.out.status.success(), "{}", shown(&m.out));
    assert!(text(&m.out.stdout).contains(&format!(": {n} created, 0 skipped")), "{}", shown(&m.out));
    eprintln!("peak RSS {} KiB importing {n} memories of {size} bytes", m.peak_kib);
    assert!(m.peak_kib < IMPORT_PEAK_KIB, "peak RSS {} KiB", m.peak_kib);
    let target = created_store(&m.out);
    let listed = server.client().list_all_memories(&target, View::Basic).await.unwrap();
    assert_eq!(listed.len(), n);
    let sample = listed.iter().find(|l| l.path == "/large/d7/m00427.md").unwrap();
    assert_eq!(sample.content_sha256, mnemo_api::content_sha256(content(427).as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_search_prints_the_best_matches_with_their_snippets() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Server::start(&tmp.path().join("a.sqlite"), &["--api-key", KEY]);
    let client = a.client();
    let memories = vec![
        ("/ops/db.md".to_owned(), "The staging database is staging-db-02.".to_owned()),
        ("/ops/cache.md".to_owned(), "redis only".to_owned()),
    ];
    let store = new_store(&client, "notes", &memories).await;
    let other = new_store(&client, "other", &[("/x.md".to_owned(), "staging-db-02 again".to_owned())]).await;

    let out = run(&a, &["search", store.as_str(), "staging-db-02"]);
    assert!(out.status.success(), "{}", shown(&out));
    assert_says(&out, &out.stdout, &["/ops/db.md", "The staging database is «staging-db-02»."]);
    assert!(!text(&out.stdout).contains("/x.md"), "{}", shown(&out));

    // `-` searches every store the key reaches and names each result's store.
    let out = run(&a, &["search", "-", "\"staging-db-02\" -redis"]);
    assert!(out.status.success(), "{}", shown(&out));
    assert_says(&out, &out.stdout, &["/ops/db.md", "/x.md", other.as_str()]);
    let out = run(&a, &["search", "-", "staging-db-02", "--json"]);
    let page: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", shown(&out)));
    assert_eq!(page["data"].as_array().unwrap().len(), 2, "{page}");

    // A malformed query fails with the server's words; nothing found says so.
    let out = run(&a, &["search", store.as_str(), "\"unclosed"]);
    assert!(!out.status.success());
    assert_says(&out, &out.stderr, &["closing"]);
    let out = run(&a, &["search", store.as_str(), "nothing-like-this"]);
    assert!(out.status.success(), "{}", shown(&out));
    assert_says(&out, &out.stderr, &["no memory matches"]);
}
