//! End-to-end tests of `mnemo mount` against a real `mnemo serve`.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mnemo_api::{CreateMemoryStore, MemoryStoreId, UpdateMemory, View};
use mnemo_client::Client;
use tempfile::TempDir;

use common::{KEY, Server, mnemo, remote_files, signal, wait_until, wait_until_async};

const MARKER: &str = ".anthropic-memory-store";

/// A server in a temp folder, a client of it, and a new store.
struct Fixture {
    tmp: TempDir,
    server: Server,
    client: Client,
    store: MemoryStoreId,
}

/// The [`Fixture`], its store holding `memories` (path, content).
async fn fixture(memories: &[(&str, &str)]) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    let client = server.client();
    let store = new_store(&client, memories).await;
    Fixture { tmp, server, client, store }
}

/// `mnemo mount STORE DIR` against `server` with the API key `key`, then `extra`.
fn mount_command(server: &Server, store: &MemoryStoreId, dir: &Path, key: &str, extra: &[&str]) -> Command {
    let mut cmd = mnemo();
    cmd.args(["mount", store.as_str()]).arg(dir).args(["--base-url", &server.base, "--api-key", key]).args(extra);
    cmd
}

/// Starts `mnemo mount` and waits until the download finished (the marker appears).
fn mount(server: &Server, store: &MemoryStoreId, dir: &Path, extra: &[&str]) -> Child {
    let child =
        mount_command(server, store, dir, KEY, extra).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // The journal beside the folder is written once the download is complete.
    let journal = dir.with_file_name(format!(".{}.mnemo-journal", dir.file_name().unwrap().to_string_lossy()));
    assert!(wait_until(Duration::from_secs(20), || journal.exists()), "the mount never finished downloading");
    child
}

fn finish(mut child: Child, sig: &str) -> (bool, String) {
    signal(&child, sig);
    child.wait_with_output_stderr()
}

trait WaitStderr {
    fn wait_with_output_stderr(&mut self) -> (bool, String);
}

impl WaitStderr for Child {
    fn wait_with_output_stderr(&mut self) -> (bool, String) {
        use std::io::Read;
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        (self.wait().unwrap().success(), err)
    }
}

async fn new_store(client: &Client, memories: &[(&str, &str)]) -> MemoryStoreId {
    let store =
        client.create_memory_store(&CreateMemoryStore { name: "e2e".into(), ..Default::default() }).await.unwrap();
    for (path, content) in memories {
        client.create_memory(&store.id, path, content, None).await.unwrap();
    }
    store.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_edit_and_teardown_round_trip() {
    let Fixture { tmp, server, client, store } =
        fixture(&[("/notes/todo.md", "- ship\n"), ("/prefs.md", "vim"), ("/gone.md", "bye"), ("/ünï/cödé.md", "ok")])
            .await;
    let dir = tmp.path().join("mnt/prefs");
    let child = mount(&server, &store, &dir, &[]);

    // Downloaded: contents, marker, modes.
    assert_eq!(std::fs::read_to_string(dir.join("notes/todo.md")).unwrap(), "- ship\n");
    assert_eq!(std::fs::read_to_string(dir.join("ünï/cödé.md")).unwrap(), "ok");
    assert_eq!(std::fs::read_to_string(dir.join(MARKER)).unwrap(), format!("version 1\n{store}"));
    assert_eq!(std::fs::metadata(dir.join("prefs.md")).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(dir.join("notes")).unwrap().permissions().mode() & 0o777, 0o700);

    // Local edits of every kind, plus files that must never be uploaded.
    std::fs::write(dir.join("prefs.md"), "emacs").unwrap();
    std::fs::write(dir.join("notes/new.md"), "fresh").unwrap();
    std::fs::remove_file(dir.join("gone.md")).unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "TOP SECRET").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.txt"), dir.join("link.md")).unwrap();
    std::fs::write(dir.join("big.md"), "x".repeat(102_401)).unwrap();
    std::fs::write(dir.join("binary.md"), [0xff, 0xfe, 0x00, 0x80]).unwrap();

    let (ok, log) = finish(child, "-TERM");
    assert!(ok, "SIGTERM ends cleanly: {log}");
    assert!(!dir.exists(), "the folder is removed on exit");

    let remote = remote_files(&client, &store).await;
    let want: BTreeMap<String, String> =
        [("/notes/todo.md", "- ship\n"), ("/notes/new.md", "fresh"), ("/prefs.md", "emacs"), ("/ünï/cödé.md", "ok")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
    assert_eq!(remote, want, "log:\n{log}");
    assert!(!log.contains("TOP SECRET"));
    assert!(log.contains("big.md") && log.contains("binary.md"), "refusals are logged: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_takes_over_a_folder_that_holds_files_and_keeps_it() {
    let Fixture { tmp, server, client, store } =
        fixture(&[("/store.md", "from the store"), ("/both.md", "the store's")]).await;
    let dir = tmp.path().join("memory");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mine.md"), "from the folder").unwrap();
    std::fs::write(dir.join("both.md"), "the folder's").unwrap();

    let child = mount(&server, &store, &dir, &["--adopt"]);
    assert_eq!(std::fs::read_to_string(dir.join("store.md")).unwrap(), "from the store");
    assert_eq!(std::fs::read_to_string(dir.join("both.md")).unwrap(), "the store's", "the store wins");
    let (ok, log) = finish(child, "-TERM");
    assert!(ok, "SIGTERM ends cleanly: {log}");
    assert!(log.contains("conflict: /both.md: differed from the store"), "the conflict is printed: {log}");
    assert_eq!(std::fs::read_to_string(dir.join("mine.md")).unwrap(), "from the folder", "the folder stays");

    let remote = remote_files(&client, &store).await;
    let want: BTreeMap<String, String> =
        [("/both.md", "the store's"), ("/mine.md", "from the folder"), ("/store.md", "from the store")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
    assert_eq!(remote, want, "log:\n{log}");
    let both = client.list_all_memories(&store, View::Basic).await.unwrap().into_iter().find(|m| m.path == "/both.md");
    let params = mnemo_client::ListMemoryVersionsParams {
        memory_id: Some(both.unwrap().id.to_string()),
        view: Some(View::Full),
        ..Default::default()
    };
    let kept: Vec<String> =
        client.list_all_memory_versions(&store, params).await.unwrap().into_iter().filter_map(|v| v.content).collect();
    assert!(kept.iter().any(|c| c == "the folder's"), "the folder's bytes are a version: {kept:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_sync_pulls_remote_changes_and_pushes_local_ones() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one")]).await;
    let dir = tmp.path().join("store");
    let child = mount(&server, &store, &dir, &["--interval", "5"]);

    let a = client.list_all_memories(&store, View::Basic).await.unwrap().remove(0);
    client
        .update_memory(&store, &a.id, &UpdateMemory { content: Some("two".into()), ..Default::default() }, None)
        .await
        .unwrap();
    client.create_memory(&store, "/b/new.md", "remote", None).await.unwrap();
    std::fs::write(dir.join("local.md"), "mine").unwrap();

    assert!(
        wait_until(Duration::from_secs(30), || std::fs::read_to_string(dir.join("a.md")).is_ok_and(|s| s == "two")
            && std::fs::read_to_string(dir.join("b/new.md")).is_ok_and(|s| s == "remote")),
        "remote changes arrive"
    );
    let pushed = wait_until_async(Duration::from_secs(30), || async {
        remote_files(&client, &store).await.get("/local.md").is_some_and(|c| c == "mine")
    })
    .await;
    assert!(pushed, "local files are uploaded");
    let (ok, _) = finish(child, "-INT");
    assert!(ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mounts_pull_but_never_push() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one"), ("/b.md", "two")]).await;
    let dir = tmp.path().join("ro");
    let child = mount(&server, &store, &dir, &["--read-only"]);
    std::fs::write(dir.join("a.md"), "edited").unwrap();
    std::fs::write(dir.join("c.md"), "new").unwrap();
    std::fs::remove_file(dir.join("b.md")).unwrap();
    let (ok, log) = finish(child, "-TERM");
    assert!(ok, "{log}");
    let remote = remote_files(&client, &store).await;
    assert_eq!(remote.len(), 2);
    assert_eq!(remote["/a.md"], "one");
    assert_eq!(remote["/b.md"], "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_whose_marker_is_gone_is_left_alone() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one"), ("/b.md", "two")]).await;
    let dir = tmp.path().join("m");
    let child = mount(&server, &store, &dir, &[]);
    std::fs::remove_file(dir.join(MARKER)).unwrap();
    std::fs::write(dir.join("a.md"), "changed without a marker").unwrap();
    std::fs::remove_file(dir.join("b.md")).unwrap();
    let (ok, log) = finish(child, "-TERM");
    assert!(ok, "{log}");
    assert!(log.contains("the marker file is gone"), "{log}");
    assert!(dir.join("a.md").exists(), "a folder failing the marker check is kept on disk");
    let remote = remote_files(&client, &store).await;
    assert_eq!((remote["/a.md"].as_str(), remote["/b.md"].as_str()), ("one", "two"), "nothing was synced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_wipe_never_propagates() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one"), ("/b/c.md", "two")]).await;
    let dir = tmp.path().join("wipe");
    let child = mount(&server, &store, &dir, &["--keep"]);
    std::fs::remove_dir_all(&dir).unwrap();
    let (ok, log) = finish(child, "-TERM");
    assert!(ok, "{log}");
    assert_eq!(remote_files(&client, &store).await.len(), 2, "{log}");
    assert_eq!(std::fs::read_to_string(dir.join("b/c.md")).unwrap(), "two", "re-downloaded and kept (--keep)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_kill_9_uploads_edits_made_while_down() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one"), ("/b.md", "two")]).await;
    let dir = tmp.path().join("crash");
    let mut child = mount(&server, &store, &dir, &[]);
    child.kill().unwrap();
    child.wait().unwrap();

    // While nothing runs: edit a file; meanwhile the store changes another one.
    std::fs::write(dir.join("a.md"), "edited while down").unwrap();
    let b =
        client.list_all_memories(&store, View::Basic).await.unwrap().into_iter().find(|m| m.path == "/b.md").unwrap();
    client
        .update_memory(&store, &b.id, &UpdateMemory { content: Some("remote".into()), ..Default::default() }, None)
        .await
        .unwrap();

    // A plain mount refuses the leftover folder with the documented message.
    let refused = mount_command(&server, &store, &dir, KEY, &[]).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("something already exists at the memory store's path"));

    let child = mount_command(&server, &store, &dir, KEY, &["--resume"]).stderr(Stdio::piped()).spawn().unwrap();
    let pulled =
        wait_until(Duration::from_secs(20), || std::fs::read_to_string(dir.join("b.md")).is_ok_and(|s| s == "remote"));
    let (ok, log) = finish(child, "-TERM");
    assert!(pulled && ok, "{log}");
    let remote = remote_files(&client, &store).await;
    assert_eq!(remote["/a.md"], "edited while down", "{log}");
    assert_eq!(remote["/b.md"], "remote");
    assert!(!dir.exists());

    // A folder without its journal is refused by --resume.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(MARKER), format!("version 1\n{store}")).unwrap();
    let out = mount_command(&server, &store, &dir, KEY, &["--resume"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot resume"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn bad_invocations_fail_with_the_documented_messages() {
    let Fixture { tmp, server, store, .. } = fixture(&[]).await;
    let run_as = |dir: &Path, key: &str, extra: &[&str]| {
        let out = mount_command(&server, &store, dir, key, extra).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let run = |dir: &Path, extra: &[&str]| run_as(dir, KEY, extra);
    let existing = tmp.path().join("exists");
    std::fs::create_dir(&existing).unwrap();
    let (ok, err) = run(&existing, &[]);
    assert!(!ok);
    assert!(
        err.contains("something already exists at the memory store's path")
            && err.contains("it must not exist when the session starts"),
        "{err}"
    );

    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let (ok, err) = run(&file.join("below"), &[]);
    assert!(!ok);
    assert!(err.contains("cannot create the memory store's folder"), "{err}");

    for bad in ["4", "NaN"] {
        let (ok, err) = run(&tmp.path().join("x"), &["--interval", bad]);
        assert!(!ok && err.contains("at least 5 seconds"), "{err}");
    }
    let (ok, err) = run_as(&tmp.path().join("y"), "sk-wrong-key", &[]);
    assert!(!ok && err.contains("failed to download memory store"), "{err}");
    assert!(!tmp.path().join("y").exists(), "a failed download leaves no folder");
    assert!(!err.contains("sk-wrong-key"), "the key is not echoed: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_aborts_a_stuck_teardown_at_once() {
    let Fixture { tmp, server, store, .. } = fixture(&[("/a.md", "a")]).await;
    let dir = tmp.path().join("stuck");
    let mut child = mount(&server, &store, &dir, &[]);
    // Freeze the server: the final sync's requests now wait for an answer that never comes.
    server.signal("-STOP");
    signal(&child, "-TERM");
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the teardown is waiting on the frozen server");
    signal(&child, "-TERM");
    let exited = wait_until(Duration::from_secs(5), || child.try_wait().unwrap().is_some());
    server.signal("-CONT");
    assert!(exited, "the second signal ends the process at once");
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sync_carries_a_write_from_one_mount_to_another_long_before_the_interval() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one")]).await;
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = mount(&server, &store, &dir_a, &["--interval", "300"]);
    let b = mount(&server, &store, &dir_b, &["--interval", "300"]);

    // A write in A: uploaded after its quiet period, pulled by B from the change feed.
    std::fs::write(dir_a.join("a.md"), "two").unwrap();
    std::fs::create_dir_all(dir_a.join("d")).unwrap();
    std::fs::write(dir_a.join("d/new.md"), "fresh").unwrap();
    let arrived = wait_until(Duration::from_secs(5), || {
        read(&dir_b.join("a.md")).as_deref() == Some("two") && read(&dir_b.join("d/new.md")).as_deref() == Some("fresh")
    });
    assert!(arrived, "A's writes reach B within seconds: b/a.md = {:?}", read(&dir_b.join("a.md")));

    // An API write reaches both.
    client.create_memory(&store, "/api.md", "from the api", None).await.unwrap();
    let both = wait_until(Duration::from_secs(5), || {
        read(&dir_a.join("api.md")).as_deref() == Some("from the api")
            && read(&dir_b.join("api.md")).as_deref() == Some("from the api")
    });
    assert!(both, "an API write reaches both mounts");

    // A local deletion is not sent live: it waits for a full sync's corroboration window.
    std::fs::remove_file(dir_a.join("a.md")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(remote_files(&client, &store).await.contains_key("/a.md"), "deletions are never sent live");
    assert_eq!(read(&dir_b.join("a.md")).as_deref(), Some("two"));

    let (ok_a, log_a) = finish(a, "-TERM");
    let (ok_b, log_b) = finish(b, "-TERM");
    assert!(ok_a && ok_b, "A:\n{log_a}\nB:\n{log_b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_live_changes_wait_for_the_interval() {
    let Fixture { tmp, server, client, store } = fixture(&[("/a.md", "one")]).await;
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = mount(&server, &store, &dir_a, &["--interval", "300", "--no-live"]);
    let b = mount(&server, &store, &dir_b, &["--interval", "300", "--no-live"]);
    std::fs::write(dir_a.join("a.md"), "two").unwrap();
    client.create_memory(&store, "/api.md", "from the api", None).await.unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(read(&dir_b.join("a.md")).as_deref(), Some("one"), "nothing moves before the interval");
    assert_eq!(read(&dir_a.join("api.md")), None);
    assert_eq!(remote_files(&client, &store).await.get("/a.md").map(String::as_str), Some("one"));
    let (ok_a, _) = finish(a, "-TERM");
    let (ok_b, _) = finish(b, "-TERM");
    assert!(ok_a && ok_b);
}
