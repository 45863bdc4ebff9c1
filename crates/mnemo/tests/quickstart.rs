//! `mnemo quickstart` end to end: the real binary, its server on 127.0.0.1, its worker in
//! process, the two demo sessions.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{mnemo, signal};

/// The folder named by the `removed …` line, and whether the demo's story was told.
fn removed_folder(out: &str) -> Option<PathBuf> {
    out.lines().find_map(|l| l.strip_prefix("removed ")).map(PathBuf::from)
}

#[test]
fn the_demo_shows_memory_surviving_a_session_and_cleans_up() {
    let out =
        mnemo().args(["quickstart", "--exit", "--listen", "127.0.0.1:0"]).env_remove("RUST_LOG").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for want in ["[1] Starting mnemo serve", "[2] Creating a memory store", "[3] Starting a worker", "[4] Session 1"] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    // Session 2 read what session 1 wrote: the result line follows its read call.
    let after = stdout.split("[5] Session 2").nth(1).expect("a second session");
    assert!(after.contains("← The user prefers short answers."), "{stdout}");
    assert!(stdout.contains("/console") && stdout.contains("Memory survived the session"), "{stdout}");
    let folder = removed_folder(&stdout).expect("the temporary folder is removed");
    assert!(!folder.exists(), "{} is still there", folder.display());
    // The story is on stdout; logs default to warnings only.
    assert!(!stderr.contains(" INFO "), "{stderr}");
}

#[test]
fn ctrl_c_stops_the_server_and_removes_the_data_folder_and_data_dir_keeps_it() {
    let mut child = mnemo()
        .args(["quickstart", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        let line = rx.recv_timeout(Duration::from_secs(90)).expect("the demo reaches 'Serving until Ctrl-C'");
        let serving = line.starts_with("Serving until Ctrl-C");
        seen.push(line);
        if serving {
            break;
        }
    }
    signal(&child, "-INT");
    let status = child.wait().unwrap();
    seen.extend(rx.try_iter());
    let text = seen.join("\n");
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{text}\n{err}");
    let folder = removed_folder(&text).expect("the temporary folder is removed");
    assert!(!folder.exists());

    // With --data-dir the database stays.
    let dir = tempfile::tempdir().unwrap();
    let out = mnemo()
        .args(["quickstart", "--exit", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join("mnemo.sqlite").exists());
    assert!(removed_folder(&String::from_utf8_lossy(&out.stdout)).is_none());
}

/// With `--models`, the two sessions are asked in plain words and the (fake) model calls the tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_model_the_demo_agent_reads_and_writes_its_memory_itself() {
    use mnemo_model::testing::{FakeModelServer, FakeReply};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("mnt").join("demo-notes");
    let fake = FakeModelServer::start(vec![
        FakeReply::tool("read", json!({"file_path": folder.join("welcome.md")})),
        FakeReply::tool(
            "write",
            json!({"file_path": folder.join("learned.md"), "content": "Short answers, please.\n"}),
        ),
        FakeReply::text("I read the welcome note and wrote down that you like short answers."),
        FakeReply::tool("read", json!({"file_path": folder.join("learned.md")})),
        FakeReply::text("An earlier session learned that you like short answers."),
    ])
    .await;
    let models = dir.path().join("models.toml");
    std::fs::write(&models, format!("{}\"demo-model\" = \"fake/fake-1\"\n", fake.config_toml())).unwrap();
    let out = tokio::task::spawn_blocking({
        let (dir, models) = (dir.path().to_owned(), models.clone());
        move || {
            mnemo()
                .args(["quickstart", "--exit", "--listen", "127.0.0.1:0", "--data-dir"])
                .arg(&dir)
                .arg("--models")
                .arg(&models)
                .env_remove("RUST_LOG")
                .env_remove("MNEMO_MODELS")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("on the model `demo-model`"), "{stdout}");
    let first = stdout.split("[4] Session 1").nth(1).unwrap().split("[5] Session 2").next().unwrap();
    assert!(first.contains("user: Your memory is the folder"), "{first}");
    assert!(first.contains("agent → write"), "{first}");
    assert!(first.contains("agent: I read the welcome note"), "{first}");
    let second = stdout.split("[5] Session 2").nth(1).unwrap();
    assert!(second.contains("← Short answers, please."), "session 2 read what session 1 wrote:\n{stdout}");
    assert!(second.contains("agent: An earlier session learned"), "{second}");
    assert_eq!(fake.requests().len(), 5, "three model calls for the first session, two for the second");
    // The model was told where its memory is.
    assert!(fake.requests()[0].body.to_string().contains(folder.to_str().unwrap()));
}
