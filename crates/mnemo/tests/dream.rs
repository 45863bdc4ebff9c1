//! `mnemo dream create | list | get | cancel | archive` against `mnemo serve --models` on the
//! fake model server: a dream followed to completion, one canceled while `--wait` follows it (and
//! a Ctrl-C that stops only a follower), one that fails, and the refusals of bad input.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Output, Stdio};
use std::time::Duration;

use mnemo_api::{DreamStatus, MemoryStoreId};
use mnemo_client::{ListDreamsParams, Method};
use mnemo_model::testing::{FakeModelServer, FakeReply};
use serde_json::{Value, json};

use common::{KEY, Server, mnemo, remote_files, wait_until_async};

/// A server whose models all go to the fake, a store with one memory, and one session.
struct Setup {
    _tmp: tempfile::TempDir,
    server: Server,
    fake: FakeModelServer,
    store: MemoryStoreId,
    session: String,
}

async fn setup(script: Vec<FakeReply>) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeModelServer::start(script).await;
    let models = tmp.path().join("models.toml");
    // `default = "fake"`: every model id, the dreams' included, goes to the fake.
    std::fs::write(&models, fake.config_toml()).unwrap();
    let server =
        Server::start(&tmp.path().join("db.sqlite"), &["--api-key", KEY, "--models", models.to_str().unwrap()]);
    let api = server.client();
    let store = api.json(Method::POST, "/v1/memory_stores", Some(&json!({"name": "team notes"}))).await.unwrap();
    let store: MemoryStoreId = store["id"].as_str().unwrap().parse().unwrap();
    let body = json!({"path": "/db.md", "content": "staging db: port 5432\n"});
    api.json(Method::POST, &format!("/v1/memory_stores/{store}/memories"), Some(&body)).await.unwrap();
    let agent = json!({"name": "a", "model": "m", "tools": [{"type": "agent_toolset_20260401"}]});
    let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let body = json!({"agent": agent["id"], "environment_id": env["id"]});
    let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    Setup { _tmp: tmp, server, fake, store, session }
}

/// `mnemo dream ARGS` against `base`, run to its end off the runtime's threads.
async fn dream(base: &str, args: &[&str]) -> Output {
    let mut cmd = mnemo();
    cmd.arg("dream").args(args).args(["--base-url", base, "--api-key", KEY]);
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the exit code and answers (stdout, stderr).
fn exited(out: &Output, code: i32) -> (String, String) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(code), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

/// The value of one field of `mnemo dream get`'s view.
fn field<'a>(view: &'a str, name: &str) -> &'a str {
    view.lines()
        .find_map(|l| l.strip_prefix(name).filter(|rest| rest.starts_with("  ")))
        .unwrap_or_else(|| panic!("no {name} in\n{view}"))
        .trim()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dream_is_created_followed_to_completion_listed_and_archived() {
    let s = setup(vec![
        FakeReply::tool("read", json!({"file_path": "/mnt/memory/output/db.md"})),
        FakeReply::tool(
            "write",
            json!({"file_path": "/mnt/memory/output/db.md", "content": "staging db: port 5433\n"}),
        ),
        FakeReply::text("Merged the database notes: the port is 5433 now."),
    ])
    .await;
    let base = s.server.base.clone();
    let store = s.store.to_string();
    let out = dream(
        &base,
        &[
            "create",
            "--store",
            &store,
            "--session",
            &s.session,
            "--model",
            "fake-model",
            "--instructions",
            "Keep one file per system.",
            "--wait",
        ],
    )
    .await;
    let (view, progress) = exited(&out, 0);

    // The progress: where it stands first, then each change as a line (stderr is no terminal).
    let first = progress.lines().find(|l| l.contains("] dream drm_")).unwrap_or_else(|| panic!("{progress}"));
    assert!(first.starts_with("[    0s] dream drm_"), "{first}");
    assert!(
        first.ends_with(&format!(" pending: fake-model reads {store} and 1 session (into a new store)")),
        "{first}"
    );
    for line in ["] session sesn_", "] output store memstore_", "] usage: ", "] completed"] {
        assert!(progress.contains(line), "{line} missing from\n{progress}");
    }
    // The finished dream on stdout.
    let id = field(&view, "dream").to_owned();
    assert_eq!(
        first,
        format!("[    0s] dream {id} pending: fake-model reads {store} and 1 session (into a new store)")
    );
    assert_eq!(field(&view, "status"), "completed");
    assert_eq!(field(&view, "model"), "fake-model");
    assert_eq!(field(&view, "input store"), store);
    assert_eq!(field(&view, "sessions"), s.session);
    assert_eq!(field(&view, "instructions"), "Keep one file per system.");
    let output = field(&view, "output store").strip_suffix(" (a new store; the input is untouched)").unwrap();
    let output: MemoryStoreId = output.parse().unwrap();
    assert_ne!(field(&view, "usage"), "0 input, 0 output, 0 cache-write, 0 cache-read tokens", "{view}");
    assert!(field(&view, "ended").ends_with('Z'), "{view}");
    let api = s.server.client();
    let files = remote_files(&api, &output).await;
    assert_eq!(files.into_iter().collect::<Vec<_>>(), [("/db.md".to_owned(), "staging db: port 5433\n".to_owned())]);
    assert_eq!(remote_files(&api, &s.store).await["/db.md"], "staging db: port 5432\n", "the input is untouched");
    // The fake saw the instructions, under the dreaming beta's work.
    assert!(s.fake.requests()[0].body.to_string().contains("Keep one file per system."));

    // list: one tab-separated line; filters by status.
    let (listed, _) = exited(&dream(&base, &["list"]).await, 0);
    let row: Vec<&str> = listed.trim_end().split('\t').collect();
    assert_eq!(row.len(), 7, "{listed}");
    assert_eq!((row[0], row[1], row[3], row[4], row[6]), (id.as_str(), "completed", "fake-model", store.as_str(), "-"));
    assert_eq!(row[5], output.as_str());
    let (none, said) = exited(&dream(&base, &["list", "--status", "pending,running", "--status", "failed"]).await, 0);
    assert_eq!(none, "");
    assert!(said.contains("no dreams"), "{said}");
    let (again, _) = exited(&dream(&base, &["list", "--status", "completed"]).await, 0);
    assert_eq!(again, listed);

    // get --json: the API's object.
    let (json, _) = exited(&dream(&base, &["get", &id, "--json"]).await, 0);
    let object: Value = serde_json::from_str(&json).unwrap();
    assert_eq!((object["id"].as_str(), object["status"].as_str()), (Some(id.as_str()), Some("completed")));
    assert_eq!(object["outputs"][0]["memory_store_id"], output.as_str());
    assert!(object["usage"]["output_tokens"].as_u64().unwrap() > 0, "{object}");

    // A completed dream cannot be canceled; it can be archived, once and again.
    let (_, refused) = exited(&dream(&base, &["cancel", &id]).await, 1);
    assert!(refused.contains(&format!("error: cancel dream {id}: 400 invalid_request_error")), "{refused}");
    let (archived, _) = exited(&dream(&base, &["archive", &id]).await, 0);
    assert_eq!(archived, format!("{id} archived (completed)\n"));
    let (archived, _) = exited(&dream(&base, &["archive", &id]).await, 0);
    assert_eq!(archived, format!("{id} archived (completed)\n"));
    let (hidden, said) = exited(&dream(&base, &["list"]).await, 0);
    assert_eq!(hidden, "");
    assert!(said.contains("--all lists them"), "{said}");
    let (all, _) = exited(&dream(&base, &["list", "--all"]).await, 0);
    assert!(all.starts_with(&format!("{id}\tcompleted\t")) && !all.trim_end().ends_with("\t-"), "{all}");
    let (view, _) = exited(&dream(&base, &["get", &id]).await, 0);
    assert!(field(&view, "archived").ends_with('Z'), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_on_a_dream_that_is_canceled_exits_non_zero() {
    // The model's answer stalls after its first frame: the dream stays running.
    let s = setup(vec![FakeReply::text("Let me read the transcripts first.").slow(Duration::from_secs(300))]).await;
    let base = s.server.base.clone();
    let store = s.store.to_string();
    let waiting = mnemo()
        .args(["dream", "create", "--store", &store, "--session", &s.session, "--update-existing", "--wait"])
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_API_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let api = s.server.client();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let id = loop {
        let page = api.list_dreams(&ListDreamsParams::default()).await.unwrap();
        match page.data.first() {
            Some(d) if d.status == DreamStatus::Running => break d.id.to_string(),
            _ => assert!(std::time::Instant::now() < deadline, "the dream never ran: {page:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(wait_until_async(Duration::from_secs(10), || async { !s.fake.requests().is_empty() }).await);

    // Ctrl-C stops a second follower, not the dream.
    let mut follower = mnemo()
        .args(["dream", "get", &id, "--wait", "--base-url", &base, "--api-key", KEY])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = follower.stderr.take().unwrap();
    let (first, rest) = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stderr);
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        (first, lines)
    })
    .await
    .unwrap();
    assert!(first.starts_with(&format!("[    0s] dream {id} running: ")), "{first}");
    common::signal(&follower, "-INT");
    let (status, said) = tokio::task::spawn_blocking(move || {
        let mut said = String::new();
        let mut rest = rest;
        rest.read_to_string(&mut said).unwrap();
        (follower.wait().unwrap(), said)
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("error: stopped waiting; dream {id} is still running on the server")), "{said}");
    assert_eq!(api.get_dream(&id.parse().unwrap()).await.unwrap().status, DreamStatus::Running);

    // A running dream cannot be archived.
    let (_, refused) = exited(&dream(&base, &["archive", &id]).await, 1);
    assert!(refused.contains(&format!("error: archive dream {id}: 400 invalid_request_error")), "{refused}");

    let (canceled, _) = exited(&dream(&base, &["cancel", &id]).await, 0);
    assert_eq!(canceled, format!("{id} canceled\n"));

    // `--wait` sees it and exits non-zero, saying so.
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || waiting.wait_with_output().unwrap()),
    )
    .await
    .expect("--wait ends once the dream is canceled")
    .unwrap();
    let (view, progress) = exited(&out, 1);
    let first =
        format!("[    0s] dream {id} pending: claude-sonnet-4-6 reads {store} and 1 session (rewriting it in place)");
    assert!(progress.starts_with(&first), "{progress}");
    assert!(progress.contains("] canceled\n"), "{progress}");
    assert!(
        progress
            .trim_end()
            .ends_with(&format!("error: dream {id} was canceled; its output store {store} keeps what it wrote")),
        "{progress}"
    );
    assert_eq!(field(&view, "status"), "canceled");
    assert_eq!(field(&view, "output store"), format!("{store} (the input store, rewritten in place)"));

    // Canceling again answers the same; then it can be archived.
    let (again, note) = exited(&dream(&base, &["cancel", &id]).await, 0);
    assert_eq!(again, format!("{id} canceled\n"));
    assert!(note.contains(&format!("its output store {store} keeps what the dream wrote")), "{note}");
    let (archived, _) = exited(&dream(&base, &["archive", &id, "--json"]).await, 0);
    let archived: Value = serde_json::from_str(&archived).unwrap();
    assert_eq!(archived["status"], "canceled");
    assert!(archived["archived_at"].is_string(), "{archived}");
    // `get --wait` on a finished dream ends at once, non-zero for a canceled one.
    let (_, said) = exited(&dream(&base, &["get", &id, "--wait"]).await, 1);
    assert!(said.contains(&format!("error: dream {id} was canceled")), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_on_a_dream_that_fails_prints_the_error_and_exits_non_zero() {
    let s = setup(vec![FakeReply::bad_request("this model cannot dream")]).await;
    let base = s.server.base.clone();
    let store = s.store.to_string();
    let out = dream(&base, &["create", "--store", &store, "--session", &s.session, "--wait", "--json"]).await;
    let (json, progress) = exited(&out, 1);
    let object: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(object["status"], "failed");
    let kind = object["error"]["type"].as_str().unwrap();
    let message = object["error"]["message"].as_str().unwrap();
    assert_eq!(kind, "model_error");
    let id = object["id"].as_str().unwrap();
    assert!(progress.contains(&format!("] failed ({kind}: {message})")), "{progress}");
    assert!(progress.trim_end().ends_with(&format!("error: dream {id} failed: {kind}: {message}")), "{progress}");
    // Without --wait, get shows the failure and exits 0: reading a failed dream is no failure.
    let (view, _) = exited(&dream(&base, &["get", id]).await, 0);
    assert_eq!(field(&view, "status"), "failed");
    assert_eq!(field(&view, "error"), format!("{kind}: {message}"));
    let (listed, _) = exited(&dream(&base, &["list", "--status", "failed"]).await, 0);
    assert!(listed.starts_with(&format!("{id}\tfailed\t")), "{listed}");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // No --models: this server runs no dream.
    let server = Server::with_key(tmp.path());
    let base = server.base.clone();
    let store = MemoryStoreId::generate().to_string();

    let (_, said) = exited(&dream(&base, &["create", "--store", "notes", "--session", "sesn_01"]).await, 2);
    assert!(said.contains("`notes` is not a valid memory store id (expected `memstore_…`)"), "{said}");
    let (_, said) = exited(&dream(&base, &["create", "--store", &store]).await, 2);
    assert!(said.contains("--session <ID>"), "{said}");
    let (_, said) = exited(&dream(&base, &["create", "--store", &store, "--session", "sesn_01,sesn_01"]).await, 1);
    assert_eq!(said, "error: --session sesn_01 is given twice: name each session once\n");
    let (_, said) =
        exited(&dream(&base, &["create", "--store", &store, "--session", "sesn_01", "--instructions", ""]).await, 1);
    assert_eq!(said, "error: --instructions must be 1 to 4096 characters (got 0)\n");
    let (_, said) = exited(&dream(&base, &["list", "--status", "done"]).await, 2);
    assert!(said.contains("possible values: pending, running, completed, failed, canceled"), "{said}");

    // What only the server can judge: the model (the default one here) maps to no provider.
    let (out, said) = exited(&dream(&base, &["create", "--store", &store, "--session", "sesn_01"]).await, 1);
    assert_eq!(out, "");
    assert!(
        said.contains(
            "error: create the dream: 400 invalid_request_error: model: `claude-sonnet-4-6` maps to no configured model provider"
        ),
        "{said}"
    );
    let missing = mnemo_api::DreamId::generate().to_string();
    let (_, said) = exited(&dream(&base, &["get", &missing]).await, 1);
    assert!(said.contains(&format!("error: read dream {missing}: 404 not_found_error")), "{said}");
    let (listed, _) = exited(&dream(&base, &["list", "--json"]).await, 0);
    assert_eq!(listed, "[]\n");
}
