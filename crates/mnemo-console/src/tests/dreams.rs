//! Dreams in the console: the list and its archived toggle, a dream's page with every field,
//! cancel and archive through CSRF-checked forms, the comparison of a dream's output with its
//! input, escaping, and who may see and do what. Dreams are made and run through the store the
//! way the server's runner does (claim, start with its session, copy, write, finish), without a
//! model.

use std::time::Duration;

use axum::http::StatusCode;
use mnemo_api::{Dream, DreamError, DreamRequest, DreamStatus, DreamUsage, MemoryStore, OrgRole, SessionId};
use mnemo_store::MemoryChange;
use mnemo_store::ops::dreams::Copied;
use mnemo_store::rules::dream::Outcome;
use mnemo_store_tests::cases::fixtures;

use super::people::{add_member, person, person_session};
use super::*;

const RUNNER: &str = "console-test-runner";

impl Harness {
    /// A session of the Default workspace, titled `title`, for a dream to read.
    async fn used_session(&self, title: &str) -> SessionId {
        let ws = self.store.default_workspace().await.unwrap();
        let env = fixtures::environment(&*self.store.store, false).await;
        let agent = fixtures::agent(&*self.store.store).await;
        let new = mnemo_store::NewSession { title: Some(title.into()), ..fixtures::new_session(&agent, &env) };
        self.store.create_session(&ws, new).await.unwrap().id
    }

    /// A pending `create_new` dream of `input` over `sessions`.
    async fn dream(
        &self,
        input: &MemoryStore,
        sessions: &[&SessionId],
        model: &str,
        instructions: Option<&str>,
    ) -> Dream {
        let ws = self.store.default_workspace().await.unwrap();
        let mut sessions: Vec<SessionId> = sessions.iter().map(|s| (*s).clone()).collect();
        sessions.sort();
        let request = DreamRequest {
            store: input.id.clone(),
            sessions,
            model: model.into(),
            instructions: instructions.map(str::to_owned),
            update_existing: false,
        };
        self.store.create_dream(&ws, request, None, 100).await.unwrap()
    }

    /// Runs the oldest pending dream (which must be `dream`) as the server's runner would, up to
    /// its copy of the input: the dream, `running`, with its session and output store.
    async fn start_running(&self, dream: &Dream) -> Dream {
        let ws = self.store.default_workspace().await.unwrap();
        let claimed = self.store.claim_dream(RUNNER, Duration::from_secs(600), 10).await.unwrap().expect("a dream");
        assert_eq!(claimed.dream.id, dream.id, "the oldest pending dream is claimed first");
        let env = fixtures::environment(&*self.store.store, true).await;
        let agent = fixtures::agent(&*self.store.store).await;
        let new = mnemo_store::NewSession {
            title: Some(format!("Dream {}", dream.id)),
            ..fixtures::new_session(&agent, &env)
        };
        let started = self.store.start_dream(&ws, &dream.id, RUNNER, new).await.unwrap();
        let session = started.session_id.clone().unwrap();
        let actor = Actor::SessionActor { session_id: session };
        match self.store.copy_dream_input(&ws, &dream.id, RUNNER, actor, 8 << 20).await.unwrap() {
            Copied::Done { dream, .. } => *dream,
            Copied::Refused(e) => panic!("the copy was refused: {e:?}"),
        }
    }

    /// Ends a claimed dream with `outcome` and `usage`.
    async fn finish(&self, dream: &Dream, outcome: Outcome, usage: DreamUsage) -> Dream {
        let ws = self.store.default_workspace().await.unwrap();
        self.store.set_dream_usage(&ws, &dream.id, usage).await.unwrap();
        self.store.finish_dream(&ws, &dream.id, RUNNER, outcome).await.unwrap()
    }

    async fn dream_now(&self, dream: &Dream) -> Dream {
        self.store.get_dream(&self.store.default_workspace().await.unwrap(), &dream.id).await.unwrap()
    }

    async fn store_now(&self, id: &mnemo_api::MemoryStoreId) -> MemoryStore {
        self.store.get_memory_store(&self.store.default_workspace().await.unwrap(), id).await.unwrap()
    }
}

/// The output's memory at `path`.
async fn memory_at(h: &Harness, store: &mnemo_api::MemoryStoreId, path: &str) -> mnemo_api::Memory {
    let ws = h.store.default_workspace().await.unwrap();
    let listing = h
        .store
        .list_memories(
            &ws,
            store,
            mnemo_store::ListMemories {
                prefix: mnemo_api::PathPrefix::root(),
                depth: 0,
                limit: 100,
                view: View::Basic,
                after: None,
            },
        )
        .await
        .unwrap();
    listing
        .items
        .into_iter()
        .find_map(|i| match i {
            mnemo_api::MemoryListItem::Memory(m) if m.path == path => Some(m),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no memory at {path}"))
}

/// A completed dream whose output, against its input, has `/added.md` and `/moved-to.md`
/// added, `/removed.md` and `/moved-from.md` removed, `/changed.md` changed and `/same.md`
/// unchanged.
async fn completed_dream(h: &Harness) -> (MemoryStore, Dream, SessionId) {
    let input = h.memory_store("Team notes").await;
    h.memory(&input, "/same.md", "unchanged\n").await;
    h.memory(&input, "/changed.md", "line one\nstaging db: port 5432\nline three\n").await;
    h.memory(&input, "/removed.md", "a duplicate\n").await;
    h.memory(&input, "/moved-from.md", "moved as it is\n").await;
    let used = h.used_session("Deploy friday").await;
    let dream = h.dream(&input, &[&used], "fake-model", Some("Keep one file per system.")).await;
    let running = h.start_running(&dream).await;
    let output = running.output_store().unwrap().clone();
    let ws = h.store.default_workspace().await.unwrap();
    let writer = Actor::SessionActor { session_id: running.session_id.clone().unwrap() };
    let changed = memory_at(h, &output, "/changed.md").await;
    let change = MemoryChange {
        content: Some("line one\nstaging db: port 5433\nline three\n".into()),
        path: None,
        expected_sha256: None,
    };
    h.store.update_memory(&ws, &output, &changed.id, change, writer.clone()).await.unwrap();
    let removed = memory_at(h, &output, "/removed.md").await;
    h.store.delete_memory(&ws, &output, &removed.id, None, writer.clone()).await.unwrap();
    let moved = memory_at(h, &output, "/moved-from.md").await;
    let rename = MemoryChange {
        content: None,
        path: Some(mnemo_api::MemoryPath::parse("/moved-to.md").unwrap()),
        expected_sha256: None,
    };
    h.store.update_memory(&ws, &output, &moved.id, rename, writer.clone()).await.unwrap();
    let path = mnemo_api::MemoryPath::parse("/added.md").unwrap();
    h.store.create_memory(&ws, &output, path, "a new insight\n".into(), writer).await.unwrap();
    let usage = DreamUsage {
        input_tokens: 1200,
        output_tokens: 345,
        cache_creation_input_tokens: 2048,
        cache_read_input_tokens: 14336,
    };
    let done = h.finish(&running, Outcome::Completed, usage).await;
    assert_eq!(done.status, DreamStatus::Completed);
    (input, done, used)
}

#[tokio::test]
async fn the_dreams_page_lists_the_workspaces_dreams_newest_first_and_hides_archived_ones() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let empty = h.get("/console/dreams", &cookie).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert!(empty.body.contains("No dreams yet.") && empty.body.contains("POST /v1/dreams"), "{}", empty.body);
    assert!(empty.body.contains("href=\"/console/dreams\" aria-current=\"page\">Dreams</a>"), "{}", empty.body);

    let (input, done, _) = completed_dream(&h).await;
    let used = h.used_session("Another week").await;
    let other = h.used_session("A third week").await;
    let pending = h.dream(&input, &[&used, &other], "other-model", None).await;
    let list = h.get("/console/dreams", &cookie).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    let newer = list.body.find(pending.id.as_str()).expect("the pending dream is listed");
    let older = list.body.find(done.id.as_str()).expect("the completed dream is listed");
    assert!(newer < older, "newest first");
    let output = h.store_now(done.output_store().unwrap()).await;
    for shown in [
        "status-completed\">completed</span>",
        "status-pending\">pending</span>",
        "<code>fake-model</code>",
        "<code>other-model</code>",
        &format!("<a href=\"/console/stores/{}\">Team notes</a>", input.id),
        &format!("<a href=\"/console/stores/{}\">{}</a>", output.id, output.name),
        "data-label=\"Sessions\">2</td>",
        "data-label=\"Sessions\">1</td>",
        // Fresh, cache-written and cache-read input tokens together; output tokens.
        "data-label=\"Tokens in\">17,584</td>",
        "data-label=\"Tokens out\">345</td>",
        "none yet",
        &format!("href=\"/console/dreams/{}\"", done.id),
    ] {
        assert!(list.body.contains(shown), "the list lacks {shown}: {}", list.body);
    }

    // Archived dreams leave the list unless asked for.
    let archived = h.post(&format!("/console/dreams/{}/archive", done.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(archived.status, StatusCode::SEE_OTHER, "{}", archived.body);
    let list = h.get("/console/dreams", &cookie).await;
    assert!(!list.body.contains(done.id.as_str()) && list.body.contains(pending.id.as_str()), "{}", list.body);
    assert!(list.body.contains("Show archived dreams"));
    let all = h.get("/console/dreams?archived=true", &cookie).await;
    assert!(all.body.contains(done.id.as_str()) && all.body.contains("<span class=\"badge\">archived</span>"));
    assert!(all.body.contains("Hide archived dreams"));
}

#[tokio::test]
async fn the_dream_list_pages_keep_the_archived_toggle() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let input = h.memory_store("s").await;
    let used = h.used_session("used").await;
    let mut made = Vec::new();
    for _ in 0..51 {
        made.push(h.dream(&input, &[&used], "m", None).await.id);
    }
    let first = h.get("/console/dreams?archived=true", &cookie).await;
    assert_eq!(first.body.matches("href=\"/console/dreams/drm_").count(), 50, "a page holds 50 dreams");
    let at = first.body.find("/console/dreams?page=").expect("a next page link");
    let next = first.body[at..].split('"').next().unwrap().replace("&#38;", "&");
    assert!(next.ends_with("&archived=true"), "{next}");
    let second = h.get(&next, &cookie).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    assert!(second.body.contains(made[0].as_str()), "the oldest is on the second page: {}", second.body);
    assert!(!second.body.contains("Next page"));
}

#[tokio::test]
async fn a_dreams_page_shows_every_field_links_and_the_actions_its_status_allows() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let (input, done, used) = completed_dream(&h).await;
    let page = h.get(&format!("/console/dreams/{}", done.id), &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let output = done.output_store().unwrap();
    let session = done.session_id.as_ref().unwrap();
    for shown in [
        format!("Dream <span class=\"id\">{}</span>", done.id),
        "status-completed\">completed</span>".to_owned(),
        "<code>fake-model</code> <span class=\"muted\">(standard)</span>".to_owned(),
        "create_new: a new store that starts as a copy of the input".to_owned(),
        format!("<a href=\"/console/stores/{}\">Team notes</a>", input.id),
        format!("<a href=\"/console/stores/{output}\">"),
        format!("<a href=\"/console/sessions/{used}\">Deploy friday</a>"),
        format!("<a href=\"/console/sessions/{session}\">Dream {}</a>", done.id),
        format!("href=\"/console/sessions/{session}\">Open the dream's transcript</a>"),
        "<p class=\"instructions\">Keep one file per system.</p>".to_owned(),
        "17,584 tokens in (14,336 from the cache), 345 out".to_owned(),
        "<dt>Input tokens</dt><dd>1200</dd>".to_owned(),
        "<dt>Cache write tokens</dt><dd>2048</dd>".to_owned(),
        "<dt>Cache read tokens</dt><dd>14336</dd>".to_owned(),
        format!("href=\"/console/stores/{output}/compare?with={}\">Compare output with input</a>", input.id),
        format!("href=\"/console/stores/{output}/history?session={session}\">Changes the dream wrote</a>"),
        ">Archive dream</button>".to_owned(),
        format!("action=\"/console/dreams/{}/archive\"", done.id),
        "Input sessions (1)".to_owned(),
    ] {
        assert!(page.body.contains(&shown), "the page lacks {shown}: {}", page.body);
    }
    assert!(!page.body.contains("Cancel dream"), "a completed dream cannot be canceled");
    assert!(!page.body.contains("not ended yet"), "{}", page.body);

    // A pending dream: nothing recorded yet, and it can be canceled but not archived.
    let pending = h.dream(&input, &[&used], "m", None).await;
    let page = h.get(&format!("/console/dreams/{}", pending.id), &cookie).await;
    for shown in [">Cancel dream</button>", "none yet (it appears", "not started yet", "None: the dream follows"] {
        assert!(page.body.contains(shown), "{shown}: {}", page.body);
    }
    assert!(!page.body.contains("Archive dream") && !page.body.contains("Compare output"), "{}", page.body);
    assert!(page.body.contains("This dream has not ended yet"), "{}", page.body);
}

#[tokio::test]
async fn a_failed_dream_shows_its_error_type_and_message() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let input = h.memory_store("s").await;
    let used = h.used_session("used").await;
    let dream = h.dream(&input, &[&used], "m", None).await;
    let running = h.start_running(&dream).await;
    let error = DreamError::new("model_error", "the model provider kept failing (529 overloaded)");
    let failed = h.finish(&running, Outcome::Failed(error), DreamUsage::default()).await;
    assert_eq!(failed.status, DreamStatus::Failed);
    let page = h.get(&format!("/console/dreams/{}", dream.id), &cookie).await;
    assert!(page.body.contains("<strong>Failed: <code>model_error</code></strong>"), "{}", page.body);
    assert!(page.body.contains("the model provider kept failing (529 overloaded)"), "{}", page.body);
    assert!(page.body.contains("<dt>Tokens</dt><dd>none</dd>"), "{}", page.body);
    assert!(page.body.contains(">Archive dream</button>") && !page.body.contains("Cancel dream"));
}

#[tokio::test]
async fn cancel_and_archive_are_csrf_checked_posts_refused_in_the_stores_words() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let input = h.memory_store("s").await;
    let used = h.used_session("used").await;
    let dream = h.dream(&input, &[&used], "m", None).await;
    let cancel = format!("/console/dreams/{}/cancel", dream.id);
    let archive = format!("/console/dreams/{}/archive", dream.id);

    // A form without the token, or from another site, changes nothing.
    for (form, extra) in [
        (vec![], vec![]),
        (vec![("csrf", "forged")], vec![]),
        (vec![("csrf", csrf.as_str())], vec![("sec-fetch-site", "cross-site")]),
    ] {
        let answer = h.post(&cancel, &cookie, &form, &extra).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{form:?} {extra:?}");
    }
    assert_eq!(h.dream_now(&dream).await.status, DreamStatus::Pending);
    // A pending dream is not archived: cancel it first, says the store.
    let early = h.post(&archive, &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(early.status, StatusCode::BAD_REQUEST, "{}", early.body);
    assert!(early.body.contains("the dream was not archived"), "{}", early.body);
    assert!(h.dream_now(&dream).await.archived_at.is_none());

    let canceled = h.post(&cancel, &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(
        (canceled.status, canceled.location()),
        (StatusCode::SEE_OTHER, format!("/console/dreams/{}", dream.id).as_str())
    );
    let now = h.dream_now(&dream).await;
    assert_eq!(now.status, DreamStatus::Canceled);
    assert!(now.ended_at.is_some());
    // Canceling a canceled dream answers it unchanged, as the API does.
    let again = h.post(&cancel, &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "{}", again.body);
    let page = h.get(&format!("/console/dreams/{}", dream.id), &cookie).await;
    assert!(page.body.contains("status-canceled\">canceled</span>") && page.body.contains(">Archive dream</button>"));
    assert!(!page.body.contains("Cancel dream"));

    let archived = h.post(&archive, &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(archived.status, StatusCode::SEE_OTHER, "{}", archived.body);
    let now = h.dream_now(&dream).await;
    assert!(now.archived_at.is_some() && now.status == DreamStatus::Canceled, "archiving keeps the status");
    let page = h.get(&format!("/console/dreams/{}", dream.id), &cookie).await;
    assert!(!page.body.contains("Archive dream") && page.body.contains("<dt>Archived</dt>"), "{}", page.body);

    // A completed dream is not canceled.
    let (_, done, _) = completed_dream(&h).await;
    let late = h.post(&format!("/console/dreams/{}/cancel", done.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(late.status, StatusCode::BAD_REQUEST, "{}", late.body);
    assert!(late.body.contains("the dream was not canceled"), "{}", late.body);
    assert_eq!(h.dream_now(&done).await.status, DreamStatus::Completed);
    // The action's address opened directly leads to the dream's page.
    let opened = h.get(&cancel, &cookie).await;
    assert_eq!(
        (opened.status, opened.location()),
        (StatusCode::SEE_OTHER, format!("/console/dreams/{}", dream.id).as_str())
    );
}

#[tokio::test]
async fn the_comparison_shows_added_removed_changed_and_unchanged_paths_with_line_diffs() {
    let h = harness().await;
    let (cookie, csrf) = h.signed_in().await;
    let (input, done, _) = completed_dream(&h).await;
    let output = done.output_store().unwrap().clone();
    let url = format!("/console/stores/{output}/compare?with={}", input.id);
    let page = h.get(&url, &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let summary = "<strong>2</strong> added · <strong>2</strong> removed · <strong>1</strong> changed · <strong>1</strong> unchanged";
    assert!(page.body.contains(summary), "{}", page.body);
    let section = |from: &str, to: &str| {
        let start = page.body.find(from).unwrap_or_else(|| panic!("no {from}"));
        let end = page.body[start..].find(to).map_or(page.body.len(), |e| start + e);
        page.body[start..end].to_owned()
    };
    let added = section("<h2>Added", "<h2>Removed");
    assert!(added.contains(">/added.md</a>") && added.contains(">/moved-to.md</a>"), "{added}");
    assert!(added.contains("same content as <span class=\"path\">/moved-from.md</span> in the input (moved)"));
    assert!(!added.contains("/same.md") && !added.contains(">/changed.md<"), "{added}");
    let removed = section("<h2>Removed", "<h2>Changed");
    assert!(removed.contains(">/removed.md</a>") && removed.contains(">/moved-from.md</a>"), "{removed}");
    let added_link = memory_at(&h, &output, "/added.md").await;
    assert!(added.contains(&format!("/console/stores/{output}/memories/{}", added_link.id)), "{added}");
    let gone = memory_at(&h, &input.id, "/removed.md").await;
    assert!(removed.contains(&format!("/console/stores/{}/memories/{}", input.id, gone.id)), "{removed}");
    let changed = section("<h2>Changed", "<h2>Unchanged");
    assert!(changed.contains("<h3 class=\"path\">/changed.md</h3>"), "{changed}");
    assert!(changed.contains("<tr class=\"removed\"><td class=\"ln\">2</td><td class=\"ln\"></td><td class=\"sign\">−</td><td class=\"src\">staging db: port 5432</td></tr>"), "{changed}");
    assert!(changed.contains("<tr class=\"added\"><td class=\"ln\"></td><td class=\"ln\">2</td><td class=\"sign\">+</td><td class=\"src\">staging db: port 5433</td></tr>"), "{changed}");
    assert!(page.body.contains("1 memory is the same in both stores."), "{}", page.body);
    // Both stores open from here, and the dream that wrote the output is named.
    for link in [
        format!("href=\"/console/stores/{output}\">Open output store</a>"),
        format!("href=\"/console/stores/{}\">Open input store</a>", input.id),
        format!("href=\"/console/dreams/{}\">dream", done.id),
    ] {
        assert!(page.body.contains(&link), "{link}: {}", page.body);
    }
    // How to use the output in a session: the exact resources entry, escaped as text.
    assert!(page.body.contains("<h2 id=\"attach-heading\">Use this store in a session</h2>"), "{}", page.body);
    let attach = format!(
        "<code id=\"attach-json\">{{&#34;type&#34;:&#34;memory_store&#34;,&#34;memory_store_id&#34;:&#34;{output}&#34;}}</code>"
    );
    assert!(page.body.contains(&attach), "{}", page.body);

    // Archiving the output from here comes back here, the store archived.
    let form = page.body.find("action=\"/console/stores/").map(|at| &page.body[at..]).unwrap();
    assert!(form.starts_with(&format!("action=\"/console/stores/{output}/archive\"")), "{form}");
    let next = url.replace('&', "&#38;");
    assert!(page.body.contains(&format!("name=\"next\" value=\"{next}\"")), "{}", page.body);
    assert!(page.body.contains(">Archive output store</button>"));
    let archived =
        h.post(&format!("/console/stores/{output}/archive"), &cookie, &[("csrf", &csrf), ("next", &url)], &[]).await;
    assert_eq!((archived.status, archived.location()), (StatusCode::SEE_OTHER, url.as_str()), "{}", archived.body);
    assert!(h.store_now(&output).await.archived_at.is_some());
    assert!(h.store_now(&input.id).await.archived_at.is_none(), "only the output is archived");
    let page = h.get(&url, &cookie).await;
    assert!(page.body.contains("The output store is archived") && !page.body.contains("Archive output store"));
    assert!(!page.body.contains("Use this store in a session"), "an archived store cannot be attached");
    // A `next` outside the console is not followed.
    let other = h.memory_store("other").await;
    let away = h
        .post(
            &format!("/console/stores/{}/archive", other.id),
            &cookie,
            &[("csrf", &csrf), ("next", "https://evil.test/")],
            &[],
        )
        .await;
    assert_eq!(away.location(), "/console");
}

#[tokio::test]
async fn a_comparison_shows_diffs_for_the_first_fifty_changed_memories_only() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let a = h.memory_store("a").await;
    let b = h.memory_store("b").await;
    for i in 0..52 {
        h.memory(&a, &format!("/m{i:02}.md"), &format!("new {i}\n")).await;
        h.memory(&b, &format!("/m{i:02}.md"), &format!("old {i}\n")).await;
    }
    let page = h.get(&format!("/console/stores/{}/compare?with={}", a.id, b.id), &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<strong>52</strong> changed"), "{}", page.body);
    assert_eq!(page.body.matches("aria-label=\"Line changes\"").count(), 50);
    assert!(page.body.contains("The first 50 are shown with their line changes"), "{}", page.body);
    assert!(!page.body.contains("written by"), "a store no dream wrote names none");
}

#[tokio::test]
async fn hostile_text_in_a_dream_and_its_stores_is_escaped() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let payload = "<script>alert(1)</script><img src=x onerror=\"alert(2)\">";
    let ws = h.store.default_workspace().await.unwrap();
    let input = h
        .store
        .create_memory_store(
            &ws,
            NewMemoryStore { name: payload.into(), description: payload.into(), metadata: Default::default() },
        )
        .await
        .unwrap();
    h.memory(&input, "/a.md", "before\n").await;
    let used = h.used_session(payload).await;
    let dream = h.dream(&input, &[&used], payload, Some(payload)).await;
    let running = h.start_running(&dream).await;
    let output = running.output_store().unwrap().clone();
    let a = memory_at(&h, &output, "/a.md").await;
    let change = MemoryChange { content: Some(format!("{payload}\n")), path: None, expected_sha256: None };
    h.store.update_memory(&ws, &output, &a.id, change, someone()).await.unwrap();
    let error = DreamError::new(payload, payload);
    h.finish(&running, Outcome::Failed(error), DreamUsage::default()).await;
    for path in [
        "/console/dreams".to_owned(),
        format!("/console/dreams/{}", dream.id),
        format!("/console/stores/{output}/compare?with={}", input.id),
    ] {
        let page = h.get(&path, &cookie).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(
            !page.body.contains("<script>alert") && !page.body.contains("<img src=x"),
            "{path} lets markup through"
        );
        assert!(page.body.contains("&#60;script&#62;alert(1)&#60;"), "{path} does not show the text: {}", page.body);
    }
}

#[tokio::test]
async fn another_workspaces_dream_is_not_found_and_a_workspace_user_only_reads() {
    let h = harness().await;
    let input = h.memory_store("s").await;
    let used = h.used_session("used").await;
    let dream = h.dream(&input, &[&used], "m", None).await;
    h.other_workspace("Team B", KEY_B).await;
    let (cookie_b, csrf_b) = h.signed_in_as(KEY_B).await;
    let list = h.get("/console/dreams", &cookie_b).await;
    assert!(!list.body.contains(dream.id.as_str()) && list.body.contains("No dreams yet."), "{}", list.body);
    let page = h.get(&format!("/console/dreams/{}", dream.id), &cookie_b).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND, "{}", page.body);
    for action in ["cancel", "archive"] {
        let post =
            h.post(&format!("/console/dreams/{}/{action}", dream.id), &cookie_b, &[("csrf", &csrf_b)], &[]).await;
        assert_eq!(post.status, StatusCode::NOT_FOUND, "{action}: {}", post.body);
    }
    let compare = h.get(&format!("/console/stores/{}/compare?with={}", input.id, input.id), &cookie_b).await;
    assert_eq!(compare.status, StatusCode::NOT_FOUND, "{}", compare.body);
    assert_eq!(h.dream_now(&dream).await.status, DreamStatus::Pending);

    let ws = h.store.default_workspace().await.unwrap();
    let eve = person(&h, "link-dream-e", "eve@example.com", OrgRole::User).await;
    add_member(&h, &ws, &eve, "workspace_user").await;
    let (cookie, csrf) = person_session(&h, "eve@example.com").await;
    let page = h.get(&format!("/console/dreams/{}", dream.id), &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains("Cancel dream"), "no control that would be refused: {}", page.body);
    let post = h.post(&format!("/console/dreams/{}/cancel", dream.id), &cookie, &[("csrf", &csrf)], &[]).await;
    assert_eq!(post.status, StatusCode::FORBIDDEN, "{}", post.body);
    assert_eq!(h.dream_now(&dream).await.status, DreamStatus::Pending);
}

#[tokio::test]
async fn malformed_ids_and_a_missing_store_to_compare_with_are_answered_in_plain_words() {
    let h = harness().await;
    let (cookie, _) = h.signed_in().await;
    let store = h.memory_store("s").await;
    for (path, status, says) in [
        ("/console/dreams/nope".to_owned(), StatusCode::NOT_FOUND, "dream `nope` not found".to_owned()),
        (
            "/console/dreams/drm_0000000000000000000000".to_owned(),
            StatusCode::NOT_FOUND,
            "drm_0000000000000000000000".to_owned(),
        ),
        (
            format!("/console/stores/{}/compare?with=nope", store.id),
            StatusCode::NOT_FOUND,
            "memory store `nope` not found".to_owned(),
        ),
        (
            format!("/console/stores/{}/compare", store.id),
            StatusCode::BAD_REQUEST,
            "name the store to compare with".to_owned(),
        ),
        (
            "/console/dreams?page=zzz".to_owned(),
            StatusCode::BAD_REQUEST,
            "that page link is not valid any more".to_owned(),
        ),
    ] {
        let page = h.get(&path, &cookie).await;
        assert_eq!(page.status, status, "{path}: {}", page.body);
        assert!(page.body.contains(&says), "{path}: {}", page.body);
        let signed_out = h.get(&path, "").await;
        assert_eq!(signed_out.status, StatusCode::SEE_OTHER, "{path}: sign in first");
    }
}
