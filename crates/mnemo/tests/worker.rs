//! `mnemo worker` end to end: real `mnemo serve` and `mnemo worker` processes on 127.0.0.1, the
//! agent side played by `mnemo session script` or by the test through the events endpoint.

mod common;
#[path = "common/fixture.rs"]
mod fixture;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use mnemo_client::Method;
use serde_json::{Value, json};

use common::{KEY, mnemo, signal, wait_until, wait_until_async};
use fixture::Setup;

impl Setup {
    /// The store's memories as path → content.
    async fn memories(&self, store: &str) -> Vec<(String, String)> {
        let page = self
            .api
            .json(Method::GET, &format!("/v1/memory_stores/{store}/memories?view=full&limit=100"), None)
            .await
            .unwrap();
        let mut out: Vec<(String, String)> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["type"] == "memory")
            .map(|m| (m["path"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or_default().to_owned()))
            .collect();
        out.sort();
        out
    }

    /// `mnemo worker poll` against this server.
    fn worker(&self, state_dir: &Path, extra: &[&str]) -> Proc {
        Proc(Some(self.poll(state_dir).args(extra).spawn().unwrap()))
    }

    /// Posts one tool call as the agent; answers its event id.
    async fn call(&self, session: &str, tool: &str, input: Value) -> String {
        common::call(&self.api, session, tool, input).await
    }

    /// Waits for the result of `tool_use_id`.
    async fn result(&self, session: &str, tool_use_id: &str) -> Value {
        common::result(&self.api, session, tool_use_id).await
    }

    async fn end_turn(&self, session: &str) {
        let body = json!({"events": [{"type": "session.status_idle"}]});
        self.api.json(Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();
    }

    /// Whether the session's one work item is `stopped` within `secs` seconds.
    async fn stopped_within(&self, session: &str, secs: u64) -> bool {
        wait_until_async(Duration::from_secs(secs), || async { self.work_states(session).await == ["stopped"] }).await
    }
}

/// A worker process: killed on drop, its log printed when the test failed.
struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                eprintln!("---- worker log ----\n{err}");
            }
        }
    }
}

fn text(result: &Value) -> String {
    result["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect()
}

fn stop(mut proc: Proc, sig: &str) -> (bool, String) {
    let mut child = proc.0.take().unwrap();
    signal(&child, sig);
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.success(), err)
}

/// Every tool through `mnemo session script`, on two stores (one read-only), with the worker
/// logging JSON at debug level: the memories end as the tools left them, read-only refusals
/// come from the file tools and from bash, folders are removed, the item is stopped, and no
/// credential appears in the logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_session_uses_every_tool_and_its_memory_lands() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "alpha\n"), ("/dir/b.md", "bravo\n")]).await;
    let reference = s.store("ref", &[("/r.md", "reference\n")]).await;
    let (n, r) = (s.mnt().join("notes"), s.mnt().join("ref"));
    let (n, r) = (n.to_str().unwrap(), r.to_str().unwrap());
    let steps = json!([
        {"tool": "read", "input": {"file_path": format!("{n}/a.md")}},
        {"tool": "write", "input": {"file_path": format!("{n}/new.md"), "content": "hello"}},
        {"tool": "edit", "input": {"file_path": format!("{n}/a.md"), "old_string": "alpha", "new_string": "beta"}},
        {"tool": "glob", "input": {"pattern": "**/*.md", "path": n}},
        {"tool": "grep", "input": {"pattern": "bra+vo", "path": n}},
        {"tool": "bash", "input": {"command": format!("cat {r}/r.md; echo \"key=[$ANTHROPIC_ENVIRONMENT_KEY]\"")}},
        {"tool": "write", "input": {"file_path": format!("{r}/r.md"), "content": "vandalised"}},
        {"tool": "edit", "input": {"file_path": format!("{r}/r.md"), "old_string": "reference", "new_string": "x"}},
        {"tool": "bash", "input": {"command": format!("echo vandalised > {r}/r.md")}},
        {"tool": "bash", "input": {"command": format!("rm {n}/dir/b.md && ls {n}")}},
        {"tool": "read", "input": {"file_path": "/etc/hostname"}},
    ]);
    let script = json!({
        "agent": s.agent, "environment_id": s.env_id,
        "resources": [
            {"type": "memory_store", "memory_store_id": notes},
            {"type": "memory_store", "memory_store_id": reference, "access": "read_only"},
        ],
        "steps": steps,
    });
    let file = s.tmp.path().join("script.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let state = s.tmp.path().join("state");
    let worker = Proc(Some(
        mnemo()
            .args([
                "--log-format",
                "json",
                "worker",
                "poll",
                "--environment-id",
                &s.env_id,
                "--base-url",
                &s.server.base,
            ])
            .arg("--workdir")
            .arg(s.workdir())
            .arg("--state-dir")
            .arg(&state)
            .args(["--max-idle", "1s"])
            .env("MNEMO_MEMORY_MOUNT_ROOT", s.mnt())
            .env("ANTHROPIC_ENVIRONMENT_KEY", &s.env_key)
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let out = mnemo()
        .args(["session", "script"])
        .arg(&file)
        .args(["--base-url", &s.server.base, "--api-key", KEY, "--timeout", "60"])
        .output()
        .unwrap();
    let (_, logs) = stop(worker, "-TERM");
    assert!(out.status.success(), "script failed: {}\n{logs}", String::from_utf8_lossy(&out.stderr));
    let results: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let step = |i: usize| (results[i]["is_error"].as_bool().unwrap(), results[i]["text"].as_str().unwrap().to_owned());

    assert_eq!(step(0), (false, "alpha\n".into()));
    assert_eq!(step(1), (false, format!("wrote 5 bytes to {n}/new.md")));
    assert_eq!(step(2), (false, format!("edited {n}/a.md (1 replacement(s))")));
    let (err, globbed) = step(3);
    assert!(!err);
    let mut globbed: Vec<&str> = globbed.lines().collect();
    globbed.sort();
    assert_eq!(globbed, [format!("{n}/a.md"), format!("{n}/dir/b.md"), format!("{n}/new.md")]);
    assert_eq!(step(4), (false, format!("{n}/dir/b.md:1:bravo")));
    assert_eq!(step(5), (false, "reference\nkey=[]".into()), "bash sees no credential");
    assert_eq!(step(6), (true, format!("write: {r}/r.md is inside read-only directory {r}")));
    assert_eq!(step(7), (true, format!("edit: {r}/r.md is inside read-only directory {r}")));
    let (err, refused) = step(8);
    // In a mount namespace when the host allows it (root here), else by file modes.
    assert!(
        err && (refused.contains("Read-only file system") || refused.contains("Permission denied")),
        "bash must not write a read-only store: {refused}"
    );
    assert_eq!(step(9), (false, "a.md\ndir\nnew.md".into()));
    let (err, outside) = step(10);
    assert!(err && outside.contains("is outside the session's working directory"), "{outside}");

    // The final sync carried the edits, the new file and the deletion; the read-only store is
    // untouched; the folders are gone and the item is stopped.
    assert_eq!(s.memories(&notes).await, [("/a.md".into(), "beta\n".into()), ("/new.md".into(), "hello".into())]);
    assert_eq!(s.memories(&reference).await, [("/r.md".into(), "reference\n".into())]);
    assert!(!s.mnt().join("notes").exists() && !s.mnt().join("ref").exists());
    let versions =
        s.api.json(Method::GET, &format!("/v1/memory_stores/{notes}/memory_versions?limit=100"), None).await.unwrap();
    let mut by_session: Vec<&str> = versions["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["created_by"]["type"] == "session_actor")
        .map(|v| v["operation"].as_str().unwrap())
        .collect();
    by_session.sort();
    assert_eq!(by_session, ["created", "deleted", "modified"], "the worker's versions are made by the session");

    // Nothing secret in a debug-level JSON log.
    assert!(logs.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()), "every log line is JSON");
    for secret in [s.env_key.as_str(), KEY, "sk-mnemo-sess-", "sk-mnemo-env-", "\"secret\""] {
        assert!(!logs.contains(secret), "the log contains {secret:?}");
    }
    assert!(logs.contains("heartbeat"), "debug logging was on");
}

/// SIGTERM while a session is being served drains it: the final sync (a deletion included) and
/// the flush run, the folder is removed, the item stopped, and the worker exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_session_drains_the_session_and_stops_the_item() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "one"), ("/b.md", "gone soon")]).await;
    let worker = s.worker(&s.tmp.path().join("state"), &["--memory-sync-interval", "600"]);
    let session = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    let folder = s.mnt().join("notes");
    let id = s.call(&session, "write", json!({"file_path": folder.join("a.md"), "content": "two"})).await;
    assert!(!s.result(&session, &id).await["is_error"].as_bool().unwrap());
    let id = s.call(&session, "bash", json!({"command": format!("rm {}/b.md", folder.display())})).await;
    assert!(!s.result(&session, &id).await["is_error"].as_bool().unwrap());
    assert_eq!(s.memories(&notes).await.len(), 2, "no sync is due yet");
    let (ok, logs) = stop(worker, "-TERM");
    assert!(ok, "the worker exits 0 after a drain: {logs}");
    assert_eq!(s.memories(&notes).await, [("/a.md".into(), "two".into())], "{logs}");
    assert!(!folder.exists());
    assert_eq!(s.work_states(&session).await, ["stopped"]);
}

/// kill -9 mid-session: a new session attaching the same store is refused with the documented
/// message, and the killed session's item, reclaimed after the lease TTL by a worker on the same
/// host, recovers the unsynced edit from the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_leaves_a_folder_that_only_its_session_takes_back() {
    let s = Setup::new(&["--work-lease-ttl", "3"]).await;
    let notes = s.store("notes", &[("/a.md", "one")]).await;
    let state = s.tmp.path().join("state");
    let mut first = s.worker(&state, &["--memory-sync-interval", "600"]);
    let session = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    let folder = s.mnt().join("notes");
    let id = s.call(&session, "write", json!({"file_path": folder.join("a.md"), "content": "unsynced"})).await;
    s.result(&session, &id).await;
    // The kill comes once the mount's first journal is durable: it commits in the background
    // after the download, and a folder killed before it has none (it is then refused and left
    // as it is, as after a kill during the download).
    let journal = s.mnt().join(".notes.mnemo-journal");
    assert!(wait_until(Duration::from_secs(20), || journal.exists()), "the first journal lands");
    let mut first = first.0.take().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(folder.exists());

    let second = s.worker(&state, &[]);
    let other = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    assert!(s.stopped_within(&other, 20).await, "the other session's item fails and is stopped");
    // The killed session's lease lapses, its item is queued again and reclaimed.
    assert!(
        wait_until_async(Duration::from_secs(30), || async {
            s.memories(&notes).await == [("/a.md".to_owned(), "unsynced".to_owned())]
        })
        .await,
        "the edit made before the crash reaches the server"
    );
    s.end_turn(&session).await;
    assert!(wait_until(Duration::from_secs(20), || !folder.exists()), "the recovered folder is removed at the end");
    let (_, logs) = stop(second, "-TERM");
    assert!(logs.contains("something already exists at the memory store's path"), "{logs}");
    assert!(logs.contains("resuming the memory store folder"), "{logs}");
    assert_eq!(s.work_states(&session).await.last().unwrap(), "stopped");
}

/// Two workers on one environment never serve the same session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_never_serve_one_session_twice() {
    let s = Setup::new(&[]).await;
    let a = s.worker(&s.tmp.path().join("a"), &["--no-memory"]);
    let b = s.worker(&s.tmp.path().join("b"), &["--no-memory"]);
    let mut sessions = Vec::new();
    for i in 0..6 {
        let session = s.session(json!([])).await;
        let id = s.call(&session, "bash", json!({"command": format!("echo served {i}")})).await;
        sessions.push((session, id));
    }
    for (i, (session, id)) in sessions.iter().enumerate() {
        assert_eq!(text(&s.result(session, id).await), format!("served {i}"));
        s.end_turn(session).await;
    }
    for (session, _) in &sessions {
        assert!(s.stopped_within(session, 30).await);
    }
    let (_, la) = stop(a, "-TERM");
    let (_, lb) = stop(b, "-TERM");
    let claimed = |logs: &str| -> Vec<String> {
        logs.lines()
            .filter(|l| l.contains("claimed a work item"))
            .filter_map(|l| l.split("work_id=").nth(1))
            .map(|rest| rest.split_whitespace().next().unwrap().to_owned())
            .collect()
    };
    let (ca, cb) = (claimed(&la), claimed(&lb));
    assert_eq!(ca.len() + cb.len(), 6, "each session claimed once:\n{la}\n{lb}");
    assert!(ca.iter().all(|w| !cb.contains(w)));
    for (session, _) in &sessions {
        let log = s.api.json(Method::GET, &format!("/v1/sessions/{session}/events?limit=1000"), None).await.unwrap();
        let results = log["data"].as_array().unwrap().iter().filter(|e| e["type"] == "user.tool_result").count();
        assert_eq!(results, 1);
    }
}

/// `--on-work` hands each item to a script, which runs `mnemo worker run` with the secret from
/// its stdin: memory is mounted there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_work_scripts_can_run_the_single_item_worker() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "one")]).await;
    let script = s.tmp.path().join("on-work.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nset -e\nsecret=$(sed -n 's/.*\"secret\":\"\\([^\"]*\\)\".*/\\1/p')\n\
             test -n \"$secret\"\nunset ANTHROPIC_ENVIRONMENT_KEY\n\
             ANTHROPIC_WORK_SECRET=\"$secret\" exec {} worker run --workdir {} --state-dir {} --max-idle 1s\n",
            env!("CARGO_BIN_EXE_mnemo"),
            s.workdir().display(),
            s.tmp.path().join("inner-state").display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    let poller = s.worker(&s.tmp.path().join("state"), &["--on-work", script.to_str().unwrap()]);
    let session = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    let folder = s.mnt().join("notes");
    let id = s
        .call(&session, "bash", json!({"command": format!("cat {0}/a.md && echo two > {0}/a.md", folder.display())}))
        .await;
    let result = s.result(&session, &id).await;
    assert_eq!(text(&result), "one");
    s.end_turn(&session).await;
    assert!(s.stopped_within(&session, 30).await);
    let (_, logs) = stop(poller, "-TERM");
    assert_eq!(s.memories(&notes).await, [("/a.md".into(), "two\n".into())], "{logs}");
    assert!(!folder.exists());
}

/// An `always_ask` call waits for its confirmation; a denied call (by the user, or by a disabled
/// tool) is never run and gets no result from the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmations_gate_calls_and_denials_run_nothing() {
    let s = Setup::new(&[]).await;
    let agent = json!({"name": "careful", "model": "m", "tools": [{"type": "agent_toolset_20260401", "configs": [
        {"name": "bash", "permission_policy": {"type": "always_ask"}},
        {"name": "write", "enabled": false},
    ]}]});
    let agent = s.api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
    let body = json!({"agent": agent["id"], "environment_id": s.env_id});
    let session = s.api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let worker = s.worker(&s.tmp.path().join("state"), &["--no-memory"]);
    let marker = s.workdir().join("ran");

    let asked = s.call(&session, "bash", json!({"command": "echo asked"})).await;
    let denied = s.call(&session, "bash", json!({"command": format!("touch {}", marker.display())})).await;
    let _disabled = s.call(&session, "write", json!({"file_path": marker, "content": "x"})).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let results = |log: &Value| -> Vec<String> {
        log["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "user.tool_result")
            .map(|e| e["tool_use_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let events = format!("/v1/sessions/{session}/events?limit=1000");
    assert!(results(&s.api.json(Method::GET, &events, None).await.unwrap()).is_empty(), "nothing runs unconfirmed");

    for (id, verdict) in [(&asked, "allow"), (&denied, "deny")] {
        let body = json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": id, "result": verdict}]});
        s.api.json(Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();
    }
    assert_eq!(text(&s.result(&session, &asked).await), "asked");
    s.end_turn(&session).await;
    assert!(s.stopped_within(&session, 20).await);
    let (_, logs) = stop(worker, "-TERM");
    assert_eq!(results(&s.api.json(Method::GET, &events, None).await.unwrap()), [asked], "{logs}");
    assert!(!marker.exists(), "denied calls never run");
}

/// Without live sync: with the interval passed, the call after an edit syncs it up, and a
/// remote change reaches the folder, while the session is still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_syncs_both_ways_during_the_session() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "one")]).await;
    let worker = s.worker(&s.tmp.path().join("state"), &["--memory-sync-interval", "5", "--no-live"]);
    let session = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    let folder = s.mnt().join("notes");
    let id = s.call(&session, "write", json!({"file_path": folder.join("a.md"), "content": "two"})).await;
    s.result(&session, &id).await;
    // Someone else changes another memory meanwhile.
    let body = json!({"path": "/remote.md", "content": "from elsewhere"});
    s.api.json(Method::POST, &format!("/v1/memory_stores/{notes}/memories"), Some(&body)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5200)).await;
    // This call is followed by a sync: the interval has passed.
    let id = s.call(&session, "bash", json!({"command": "true"})).await;
    s.result(&session, &id).await;
    assert!(
        wait_until_async(Duration::from_secs(10), || async {
            s.memories(&notes).await.contains(&("/a.md".to_owned(), "two".to_owned()))
        })
        .await,
        "the edit is uploaded before the session ends"
    );
    let id = s.call(&session, "read", json!({"file_path": folder.join("remote.md")})).await;
    assert_eq!(text(&s.result(&session, &id).await), "from elsewhere", "the remote change was pulled");
    s.end_turn(&session).await;
    assert!(s.stopped_within(&session, 20).await);
    let (_, logs) = stop(worker, "-TERM");
    assert!(!folder.exists(), "{logs}");
}

/// Live sync (the default against `mnemo serve`): with the interval at 15 s and no call that
/// could trigger it, a memory changed and one created through the API reach the agent's next
/// reads, an agent's write reaches the store, and nothing waits for the interval (the timing
/// itself is measured by `bench/live`, not asserted here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_memory_reaches_the_next_read_and_the_store_between_calls() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "one")]).await;
    let team = s.store("team", &[("/rules.md", "v1")]).await;
    let worker = s.worker(&s.tmp.path().join("state"), &[]);
    let resources = json!([
        {"type": "memory_store", "memory_store_id": notes},
        {"type": "memory_store", "memory_store_id": team, "access": "read_only"},
    ]);
    let session = s.session(resources).await;
    let (folder, team_folder) = (s.mnt().join("notes"), s.mnt().join("team"));
    let started = std::time::Instant::now();
    let id = s.call(&session, "read", json!({"file_path": folder.join("a.md")})).await;
    assert_eq!(text(&s.result(&session, &id).await), "one");

    // Elsewhere: a.md is changed, remote.md created, and the read-only store's file changed.
    let page = s.api.json(Method::GET, &format!("/v1/memory_stores/{notes}/memories"), None).await.unwrap();
    let a_id = page["data"][0]["id"].as_str().unwrap();
    let body = json!({"content": "two"});
    s.api.json(Method::POST, &format!("/v1/memory_stores/{notes}/memories/{a_id}"), Some(&body)).await.unwrap();
    let body = json!({"path": "/remote.md", "content": "from elsewhere"});
    s.api.json(Method::POST, &format!("/v1/memory_stores/{notes}/memories"), Some(&body)).await.unwrap();
    let page = s.api.json(Method::GET, &format!("/v1/memory_stores/{team}/memories"), None).await.unwrap();
    let rules_id = page["data"][0]["id"].as_str().unwrap();
    let body = json!({"content": "v2"});
    s.api.json(Method::POST, &format!("/v1/memory_stores/{team}/memories/{rules_id}"), Some(&body)).await.unwrap();

    // The agent reads again until it sees them: no interval sync can have run meanwhile.
    let read_until = async |path: PathBuf, want: &str| {
        loop {
            let id = s.call(&session, "read", json!({"file_path": path})).await;
            if text(&s.result(&session, &id).await) == want {
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(12), "{} never showed {want:?}", path.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    read_until(folder.join("a.md"), "two").await;
    read_until(folder.join("remote.md"), "from elsewhere").await;
    read_until(team_folder.join("rules.md"), "v2").await;

    // The agent writes; the store has it without any further call.
    let id = s.call(&session, "write", json!({"file_path": folder.join("mine.md"), "content": "by the agent"})).await;
    s.result(&session, &id).await;
    assert!(
        wait_until_async(Duration::from_secs(10), || async {
            s.memories(&notes).await.contains(&("/mine.md".to_owned(), "by the agent".to_owned()))
        })
        .await,
        "the agent's write is uploaded without waiting for a call or the interval"
    );
    assert!(started.elapsed() < Duration::from_secs(15), "all of it before the first interval sync was due");
    s.end_turn(&session).await;
    assert!(s.stopped_within(&session, 20).await);
    let (_, logs) = stop(worker, "-TERM");
    assert!(!folder.exists() && !team_folder.exists(), "{logs}");
    let mine = s.memories(&notes).await;
    assert_eq!(
        mine,
        [("/a.md", "two"), ("/mine.md", "by the agent"), ("/remote.md", "from elsewhere")]
            .map(|(p, c)| (p.to_owned(), c.to_owned()))
    );
}

/// `--metrics-listen`: tool calls by tool and outcome, syncs and served items are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_counts_tool_calls_syncs_and_items() {
    let s = Setup::new(&[]).await;
    let notes = s.store("notes", &[("/a.md", "one")]).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let worker = s.worker(&s.tmp.path().join("state"), &["--metrics-listen", &format!("127.0.0.1:{port}")]);
    let session = s.session(json!([{"type": "memory_store", "memory_store_id": notes}])).await;
    let folder = s.mnt().join("notes");
    let id = s.call(&session, "read", json!({"file_path": folder.join("a.md")})).await;
    s.result(&session, &id).await;
    let id = s.call(&session, "read", json!({"file_path": folder.join("missing.md")})).await;
    s.result(&session, &id).await;
    let id = s.call(&session, "write", json!({"file_path": folder.join("b.md"), "content": "two"})).await;
    s.result(&session, &id).await;
    s.end_turn(&session).await;
    assert!(s.stopped_within(&session, 20).await);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
    for line in [
        r#"mnemo_tool_calls_total{tool="read",outcome="ok"} 1"#,
        r#"mnemo_tool_calls_total{tool="read",outcome="error"} 1"#,
        r#"mnemo_tool_calls_total{tool="write",outcome="ok"} 1"#,
        r#"mnemo_worker_items_total{outcome="served"} 1"#,
        r#"mnemo_sync_uploaded_total{kind="live"} 1"#,
        r#"mnemo_syncs_total{kind="final",result="ok"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(text.contains(r#"mnemo_tool_call_duration_seconds_count{tool="read"} 2"#), "{text}");
    drop(worker);
}

/// An `--on-work` script that runs no worker of its own: the poller keeps the item's lease alive
/// while it runs (past the TTL), then stops the item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_work_keeps_the_lease_of_a_script_that_does_not_heartbeat() {
    let s = Setup::new(&["--work-lease-ttl", "2"]).await;
    let script = s.tmp.path().join("slow.sh");
    std::fs::write(&script, "#!/bin/sh\ncat > /dev/null\nsleep 6\n").unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    let poller = s
        .worker(&s.tmp.path().join("state"), &["--on-work", script.to_str().unwrap(), "--on-work-lease-wait", "500ms"]);
    let session = s.session(json!([])).await;
    assert!(
        wait_until_async(Duration::from_secs(10), || async { s.work_states(&session).await == ["active"] }).await,
        "the poller heartbeats the item"
    );
    // Well past the 2 s TTL the item is still leased, not queued again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(s.work_states(&session).await, ["active"]);
    assert!(
        wait_until_async(Duration::from_secs(15), || async {
            matches!(s.work_states(&session).await.as_slice(), [state] if state == "stopping" || state == "stopped")
        })
        .await,
        "the item is stopped once the script exits"
    );
    let (_, logs) = stop(poller, "-TERM");
    assert!(logs.contains("keeping its lease alive while the script runs"), "{logs}");
}
