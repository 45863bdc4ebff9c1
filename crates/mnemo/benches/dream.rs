//! Dreams (issue 34): the server's own time in a dream — everything but the model — over a store
//! of 1,000 memories and 100 sessions × 50 events, with the scripted fake provider answering at
//! once: the start (session, atomic copy of the input, transcripts rendered), each tool call by
//! kind (p50/p99), and the total outside model calls.
//!
//! Run with `cargo bench -p mnemo --bench dream`. Knobs: `MNEMO_BENCH_POSTGRES` (also on
//! PostgreSQL, a throw-away schema), `MNEMO_BENCH_DIR` (where the SQLite file goes).
//!
//! The model makes one tool call per model call, so each call's time is read from the dream
//! session's log: from the `agent.tool_use` to its `agent.tool_result` (the tool run and the
//! append of its result). The model calls' own time is `span.model_request_start` →
//! `span.model_request_end`. This is a benchmark, not a test: it asserts nothing about timings.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_api::{DreamRequest, DreamStatus, Event, MemoryPath, Message, SessionId, Timestamp, WorkspaceId};
use mnemo_model::ModelConfig;
use mnemo_model::testing::{FakeModelServer, FakeReply};
use mnemo_server::AppState;
use mnemo_server::agent::Limits;
use mnemo_store::{AgentRef, EventAuthor, MemoryWriteOp, NewEnvironment, NewMemoryStore, NewSession, Store};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};
use serde_json::{Value, json};

#[path = "common/pg_schema.rs"]
mod pg_schema;

const MEMORIES: usize = 1000;
const SESSIONS: usize = 100;
const EVENTS: usize = 50;
const OUT: &str = "/mnt/memory/output";

fn actor() -> mnemo_api::Actor {
    mnemo_api::Actor::ApiActor { api_key_id: "apikey_bench".parse().unwrap() }
}

fn note(i: usize) -> String {
    format!("# Note {i}\n\nThe service {i} listens on port {}.\n{}\n", 8000 + i % 50, "Some context. ".repeat(60))
}

/// The input store and the sessions, filled.
async fn fill(store: &Arc<dyn Store>) -> (WorkspaceId, mnemo_api::MemoryStoreId, Vec<SessionId>) {
    let ws = store.default_workspace().await.unwrap();
    let new = NewMemoryStore { name: "team notes".into(), description: String::new(), metadata: Default::default() };
    let id = store.create_memory_store(&ws, new).await.unwrap().id;
    for chunk in (0..MEMORIES).collect::<Vec<_>>().chunks(100) {
        let ops = chunk
            .iter()
            .map(|i| MemoryWriteOp::Create {
                path: MemoryPath::parse(&format!("/notes/{i:04}.md")).unwrap(),
                content: note(*i),
            })
            .collect();
        store.write_memories(&ws, &id, ops, actor()).await.unwrap();
    }
    let env = store
        .create_environment(
            &ws,
            NewEnvironment {
                name: "bench".into(),
                description: None,
                metadata: Default::default(),
                config: json!({"type": "cloud"}),
                scope: None,
            },
        )
        .await
        .unwrap();
    let params: mnemo_api::AgentParams = serde_json::from_value(json!({"name": "worker", "model": "outside"})).unwrap();
    let agent = store.create_agent(&ws, mnemo_api::AgentSpec::from_params(&params).unwrap()).await.unwrap();
    let author = EventAuthor::ApiKey("apikey_bench".parse().unwrap());
    let mut sessions = Vec::new();
    for s in 0..SESSIONS {
        let new = NewSession {
            agent: AgentRef { id: agent.id.clone(), version: None, overrides: None },
            environment: env.id.clone(),
            attachments: Vec::new(),
            title: Some(format!("session {s}")),
            metadata: Default::default(),
            budget: None,
            initial_events: Vec::new(),
            poster: mnemo_api::EventPoster::ApiActor { api_key_id: "apikey_bench".parse().unwrap() },
            mount_root: mnemo_api::DEFAULT_MEMORY_MOUNT_ROOT.into(),
        };
        let session = store.create_session(&ws, new).await.unwrap().id;
        let events = (0..EVENTS)
            .map(|e| {
                let text = format!(
                    "step {e} of session {s}: we changed service {} to port {}. {}",
                    e % 50,
                    9000 + e,
                    "Detail. ".repeat(20)
                );
                let content = vec![mnemo_api::ContentBlock::text(text)];
                if e % 2 == 0 {
                    Event::UserMessage(Message { content })
                } else {
                    Event::AgentMessage(Message { content })
                }
            })
            .collect();
        store.append_events(&ws, &session, events, author.clone()).await.unwrap();
        sessions.push(session);
    }
    (ws, id, sessions)
}

/// One tool call per model call: read the index and the head of every transcript (the whole
/// conversation is sent on every call, and the fake takes requests up to 2 MB, as a model's
/// context is bounded too), glob, grep, then merge pairs of notes (read both, rewrite one,
/// delete the other), then the summary.
fn script(sessions: &[SessionId]) -> Vec<FakeReply> {
    let call = |name: &str, input: Value| FakeReply::tool(name, input);
    let mut out = vec![
        call("read", json!({"file_path": "/mnt/dream/sessions/_index.md"})),
        call("glob", json!({"pattern": "/mnt/memory/output/**"})),
    ];
    for s in sessions {
        out.push(call("read", json!({"file_path": format!("/mnt/dream/sessions/{s}.md"), "limit": 20})));
    }
    for g in 0..10 {
        out.push(call("grep", json!({"pattern": format!("port 80{g}[0-9]"), "path": OUT})));
    }
    for pair in 0..100 {
        let (a, b) = (format!("{OUT}/notes/{:04}.md", pair * 2), format!("{OUT}/notes/{:04}.md", pair * 2 + 1));
        out.push(call("read", json!({"file_path": a})));
        out.push(call("read", json!({"file_path": b})));
        out.push(call(
            "write",
            json!({"file_path": a, "content": format!("{}{}", note(pair * 2), note(pair * 2 + 1))}),
        ));
        out.push(call("delete", json!({"file_path": b})));
    }
    out.push(FakeReply::text("Merged 100 pairs of notes."));
    out
}

fn micros(t: &str) -> i64 {
    serde_json::from_value::<Timestamp>(json!(t)).unwrap().timestamp_micros()
}

fn pct(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn measure(store: Arc<dyn Store>, backend: &str) {
    let fill_started = Instant::now();
    let (ws, input, sessions) = fill(&store).await;
    let filled = fill_started.elapsed();
    let fake = FakeModelServer::start(script(&sessions)).await;
    // Only the dream's model is run here: the input sessions' agents stay driven from outside.
    let toml = format!(
        "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"fake-key\"\n[models]\n\"bench-model\" = \"fake/bench\"\n",
        fake.url()
    );
    let config = ModelConfig::from_toml(&toml).unwrap();
    let request = DreamRequest {
        store: input,
        sessions,
        model: "bench-model".into(),
        instructions: None,
        update_existing: false,
    };
    let dream = store.create_dream(&ws, request, None, 100).await.unwrap();
    let started = Instant::now();
    let mut limits = Limits::default();
    limits.dreams.max_model_calls = 1000;
    limits.scan_every = Duration::from_millis(200);
    let _state = AppState::new(Arc::clone(&store)).with_agent_loop(Arc::new(move |m: &str| config.resolve(m)), limits);
    let done = loop {
        let d = store.get_dream(&ws, &dream.id).await.unwrap();
        if d.status.is_final() {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let wall = started.elapsed();
    let log: Vec<Value> = store
        .events_after(&ws, done.session_id.as_ref().unwrap(), 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.to_json())
        .collect();
    if done.status != DreamStatus::Completed {
        let errors: Vec<&Value> = log.iter().filter(|e| e["type"] == "session.error").collect();
        let calls = log.iter().filter(|e| e["type"] == "span.model_request_start").count();
        let asked = fake.requests();
        let last = asked.last().map(|r| r.body.to_string().chars().take(600).collect::<String>());
        panic!(
            "the dream ended {:?} after {calls} model calls ({} requests reached the fake, the last {last:?}): {:?}; {errors:?}",
            done.status,
            asked.len(),
            done.error
        );
    }
    let mut model = 0_i64;
    let mut start_at = None;
    let mut first_call = None;
    let mut by_kind: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut uses: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for e in &log {
        let at = micros(e["processed_at"].as_str().unwrap());
        match e["type"].as_str().unwrap() {
            "span.model_request_start" => {
                first_call.get_or_insert(at);
                start_at = Some(at);
            }
            "span.model_request_end" => model += at - start_at.take().unwrap(),
            "agent.tool_use" | "agent.custom_tool_use" => {
                uses.insert(e["id"].as_str().unwrap().into(), (e["name"].as_str().unwrap().into(), at));
            }
            "agent.tool_result" => {
                let (name, used) = uses.remove(e["tool_use_id"].as_str().unwrap()).unwrap();
                by_kind.entry(name).or_default().push(at - used);
            }
            _ => {}
        }
    }
    let first = micros(log[0]["processed_at"].as_str().unwrap());
    let last = micros(log.last().unwrap()["processed_at"].as_str().unwrap());
    let start = first_call.unwrap() - first;
    let mut all: Vec<i64> = by_kind.values().flatten().copied().collect();
    all.sort_unstable();
    let tools: i64 = all.iter().sum();
    println!(
        "\n### {backend}: {MEMORIES} memories, {SESSIONS} sessions × {EVENTS} events (filled in {:.1} s)\n",
        filled.as_secs_f64()
    );
    println!("| | |\n|---|---:|");
    println!("| wall time, create → completed | {:.2} s |", wall.as_secs_f64());
    println!(
        "| model calls ({}), the fake's HTTP answer included | {:.2} s |",
        log.iter().filter(|e| e["type"] == "span.model_request_end").count(),
        model as f64 / 1e6
    );
    println!(
        "| **the server's own time** (session log first → last event, minus model calls) | **{:.2} s** |",
        (last - first - model) as f64 / 1e6
    );
    println!(
        "| of which the start: session, copy of {MEMORIES} memories, {SESSIONS} transcripts rendered | {:.0} ms |",
        start as f64 / 1e3
    );
    println!("| of which {} tool calls (run + result appended) | {:.2} s |", all.len(), tools as f64 / 1e6);
    println!("| per tool call, all kinds: p50 / p99 | {:.2} / {:.2} ms |", pct(&all, 0.5), pct(&all, 0.99));
    for (kind, mut times) in by_kind {
        times.sort_unstable();
        println!("| `{kind}` ×{}: p50 / p99 | {:.2} / {:.2} ms |", times.len(), pct(&times, 0.5), pct(&times, 0.99));
    }
}

fn sqlite_settings(path: &Path) -> SqliteSettings {
    let mut s = SqliteSettings::from_url(&format!("sqlite://{}", path.display())).unwrap();
    s.durability = Durability::Full;
    s
}

async fn run() {
    let dir = match std::env::var("MNEMO_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let s = SqliteStore::open(&sqlite_settings(&dir.path().join("dream.sqlite"))).unwrap();
    measure(Arc::new(s.clone()), "SQLite (`synchronous=FULL`)").await;
    s.close_blocking();
    if let Ok(url) = std::env::var("MNEMO_BENCH_POSTGRES") {
        let name = format!("mnemo_bench_dream_{}", std::process::id());
        let s: Arc<dyn Store> = Arc::new(PostgresStore::open(&pg_schema::settings(&url, &name).await).await.unwrap());
        measure(Arc::clone(&s), "PostgreSQL").await;
        s.close().await;
        pg_schema::exec(&url, &format!("DROP SCHEMA {name} CASCADE")).await;
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(run());
}
