//! `mnemo dream create | list | get | cancel | archive`: dreams (beta `dreaming-2026-04-21`) on
//! `mnemo serve` or the hosted API. The job runs on the server; this file checks the command
//! line, calls [`mnemo_client::Client`]'s dream methods and prints: the data (a dream's id, its
//! fields, or with `--json` the API's object) on stdout, the progress of `--wait` on stderr.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mnemo_api::{
    Dream, DreamId, DreamRequest, DreamStatus, DreamUsage, MAX_DREAM_INSTRUCTIONS_CHARS, MAX_DREAM_MODEL_CHARS,
    MAX_DREAM_SESSIONS, MemoryStoreId, OutputBehavior, SessionId,
};
use mnemo_client::{Client, ListDreamsParams};

use super::args::Api;
use super::signals::Signals;

/// How often `--wait` reads the dream again.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// The model of `create` when `--model` is not given: the one the hosted API's Dreams guide uses.
const DEFAULT_MODEL: &str = "claude-sonnet-4-6";

#[derive(Debug, Subcommand)]
pub(crate) enum DreamCmd {
    /// Start a dream over one memory store and 1–100 sessions; prints its id (`drm_…`).
    #[command(long_about = CREATE_ABOUT)]
    Create(Create),
    /// List dreams, newest first, one per line: id, status, created, model, input store, output
    /// store, archived (`-` for none); tab-separated.
    List(List),
    /// Show one dream: status, inputs, output store, usage, error; --wait follows it to its end.
    Get(Get),
    /// Cancel a pending or running dream: it stops at once, and its output store keeps what was
    /// written. A canceled dream is answered unchanged; a completed or failed one is refused.
    Cancel(Target),
    /// Archive a completed, failed or canceled dream: hidden from `list` (but not `list --all`),
    /// still readable with `get`; irreversible. Its output store is not touched.
    Archive(Target),
}

const CREATE_ABOUT: &str = "\
Start a dream: a model reads one memory store and the transcripts of 1 to 100 past sessions, \
then writes a reorganized store — duplicates merged, stale or contradicted entries replaced by \
the latest value, patterns seen across sessions added. By default the result is a new store that \
starts as a copy of the input, which is left untouched (review the new store, then attach it to \
later sessions or archive it); --update-existing rewrites the input store itself instead.

A dream takes minutes to tens of minutes and costs the chosen model's tokens. Without --wait this \
prints the new dream's id on stdout and returns; follow it with `mnemo dream get ID --wait`. With \
--wait it shows the progress on stderr (status changes, the output store once it exists, token \
usage as it grows), reading the dream every second, then prints the finished dream on stdout; it \
exits non-zero if the dream failed (with the error's type and message) or was canceled. Ctrl-C \
stops waiting, not the dream: `mnemo dream cancel ID` stops it.

--model defaults to claude-sonnet-4-6. On `mnemo serve` any model id that its --models file maps \
to a provider works (another one is refused); the hosted API takes the models its Dreams guide \
lists.

Works against `mnemo serve` and the hosted API alike (--base-url, --api-key); every call sends \
`anthropic-beta: dreaming-2026-04-21`.

Example: mnemo dream create --store memstore_… --session sesn_A,sesn_B \\
           --instructions 'Keep deployment notes verbatim' --wait";

#[derive(Debug, Args)]
pub(crate) struct Create {
    /// The memory store to curate (`memstore_…`).
    #[arg(long, value_name = "ID")]
    store: MemoryStoreId,

    /// A session whose transcript the dream reads (`sesn_…`): 1 to 100, each once; repeat the
    /// flag, or separate ids with commas or spaces.
    #[arg(long = "session", value_name = "ID", required = true, num_args = 1.., value_delimiter = ',')]
    sessions: Vec<SessionId>,

    /// The model that does the work (on `mnemo serve`: one its --models file maps).
    #[arg(long, value_name = "MODEL", default_value = DEFAULT_MODEL)]
    model: String,

    /// Guidance for the whole pass, 1 to 4096 characters: what to look at closely, what to keep
    /// verbatim, how to lay out the store (line-level edits are better made on the result).
    #[arg(long, value_name = "TEXT")]
    instructions: Option<String>,

    /// Rewrite the input store itself instead of a new copy of it. There is no rollback on
    /// failure or cancel (the store's version history is the undo), and one such dream per
    /// store runs at a time.
    #[arg(long)]
    update_existing: bool,

    /// Follow the dream until it ends (progress on stderr); exit non-zero unless it completed.
    #[arg(long)]
    wait: bool,

    /// Print the dream as JSON (the API's object) instead of its id or fields.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    api: Api,
}

impl Create {
    /// The request, checked here so a mistake is named by its flag before anything is sent.
    fn request(&self) -> anyhow::Result<DreamRequest> {
        if self.sessions.len() > MAX_DREAM_SESSIONS {
            bail!("a dream reads at most {MAX_DREAM_SESSIONS} sessions (got {} --session ids)", self.sessions.len());
        }
        let mut seen = BTreeSet::new();
        if let Some(twice) = self.sessions.iter().find(|s| !seen.insert(*s)) {
            bail!("--session {twice} is given twice: name each session once");
        }
        let chars = self.model.chars().count();
        if chars == 0 || chars > MAX_DREAM_MODEL_CHARS {
            bail!("--model must be 1 to {MAX_DREAM_MODEL_CHARS} characters (got {chars})");
        }
        if let Some(text) = &self.instructions {
            let chars = text.chars().count();
            if chars == 0 || chars > MAX_DREAM_INSTRUCTIONS_CHARS {
                bail!("--instructions must be 1 to {MAX_DREAM_INSTRUCTIONS_CHARS} characters (got {chars})");
            }
        }
        Ok(DreamRequest {
            store: self.store.clone(),
            sessions: self.sessions.clone(),
            model: self.model.clone(),
            instructions: self.instructions.clone(),
            update_existing: self.update_existing,
        })
    }

    async fn run(self) -> anyhow::Result<()> {
        let request = self.request()?;
        let client = self.api.client()?;
        let dream = client.create_dream(&request).await.context("create the dream")?;
        if self.wait {
            let done = follow(&client, dream).await?;
            return finish(&done, self.json);
        }
        if self.json {
            print_json(&dream)?;
        } else {
            println!("{}", dream.id);
        }
        eprintln!("dream {0} is {1}; follow it with `mnemo dream get {0} --wait`", dream.id, dream.status);
        Ok(())
    }
}

/// Statuses as clap parses them (completion and `--help` list the five).
fn status_parser() -> impl TypedValueParser<Value = DreamStatus> {
    PossibleValuesParser::new(DreamStatus::ALL.map(DreamStatus::as_str))
        .map(|s| DreamStatus::parse(&s).expect("clap lets only the possible values through"))
}

#[derive(Debug, Args)]
pub(crate) struct List {
    /// Only dreams in these statuses; repeat the flag or separate with commas.
    #[arg(long = "status", value_name = "STATUS", num_args = 1.., value_delimiter = ',', value_parser = status_parser())]
    statuses: Vec<DreamStatus>,

    /// Archived dreams too.
    #[arg(long)]
    all: bool,

    /// Print a JSON array of the dreams (the API's objects) instead of lines.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    api: Api,
}

impl List {
    async fn run(self) -> anyhow::Result<()> {
        let client = self.api.client()?;
        let mut params = ListDreamsParams {
            statuses: self.statuses,
            include_archived: self.all.then_some(true),
            limit: Some(100),
            ..Default::default()
        };
        let mut dreams = Vec::new();
        loop {
            let page = client.list_dreams(&params).await.context("list the dreams")?;
            dreams.extend(page.data);
            match page.next_page.filter(|p| !p.is_empty()) {
                Some(next) => params.page = Some(next),
                None => break,
            }
        }
        if self.json {
            return print_json(&dreams);
        }
        if dreams.is_empty() {
            eprintln!("no dreams{}", if self.all { "" } else { " (archived ones are left out; --all lists them)" });
        }
        let mut out = std::io::stdout().lock();
        for dream in &dreams {
            writeln!(out, "{}", line(dream))?;
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
pub(crate) struct Get {
    /// The dream (`drm_…`).
    id: DreamId,

    /// Follow it until it ends, as `create --wait` does; exit non-zero unless it completed.
    #[arg(long)]
    wait: bool,

    /// Print the dream as JSON (the API's object) instead of its fields.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    api: Api,
}

impl Get {
    async fn run(self) -> anyhow::Result<()> {
        let client = self.api.client()?;
        let dream = client.get_dream(&self.id).await.with_context(|| format!("read dream {}", self.id))?;
        if self.wait {
            let done = follow(&client, dream).await?;
            return finish(&done, self.json);
        }
        if self.json {
            return print_json(&dream);
        }
        print!("{}", view(&dream));
        Ok(())
    }
}

/// A dream to act on.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// The dream (`drm_…`).
    id: DreamId,

    /// Print the dream as JSON (the API's object) instead of a line.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    api: Api,
}

impl DreamCmd {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Create(cmd) => cmd.run().await,
            Self::List(cmd) => cmd.run().await,
            Self::Get(cmd) => cmd.run().await,
            Self::Cancel(t) => {
                let dream =
                    t.api.client()?.cancel_dream(&t.id).await.with_context(|| format!("cancel dream {}", t.id))?;
                if t.json {
                    return print_json(&dream);
                }
                match dream.status {
                    DreamStatus::Canceled => println!("{} canceled", dream.id),
                    other => println!("{} {other} (it ended before the cancel)", dream.id),
                }
                if let Some(store) = dream.output_store() {
                    eprintln!("its output store {store} keeps what the dream wrote");
                }
                Ok(())
            }
            Self::Archive(t) => {
                let dream =
                    t.api.client()?.archive_dream(&t.id).await.with_context(|| format!("archive dream {}", t.id))?;
                if t.json {
                    return print_json(&dream);
                }
                println!("{} archived ({})", dream.id, dream.status);
                Ok(())
            }
        }
    }
}

/// Reads the dream every [`POLL_EVERY`] until its status is final, showing each change on
/// stderr; answers the final dream. A signal stops the waiting, never the dream.
async fn follow(client: &Client, mut dream: Dream) -> anyhow::Result<Dream> {
    let id = dream.id.clone();
    let progress = Progress::new(&id);
    let started = Instant::now();
    let mut signals = Signals::install()?;
    let mut before: Option<Dream> = None;
    loop {
        let at = clock(started.elapsed());
        for change in changes(before.as_ref(), &dream) {
            match change {
                Change::Event(line) => progress.event(&format!("[{at:>6}] {line}")),
                Change::Usage(line) => progress.usage(&format!("[{at:>6}] {line}")),
            }
        }
        if dream.status.is_final() {
            progress.finish();
            return Ok(dream);
        }
        before = Some(dream);
        let next = async {
            tokio::time::sleep(POLL_EVERY).await;
            client.get_dream(&id).await
        };
        dream = tokio::select! {
            got = next => got.with_context(|| format!(
                "lost track of dream {id} (it may still be running on the server: see it with `mnemo dream get {id}`)"
            ))?,
            () = signals.next() => {
                progress.finish();
                bail!(
                    "stopped waiting; dream {id} is still running on the server: follow it again with \
                     `mnemo dream get {id} --wait`, stop it with `mnemo dream cancel {id}`"
                );
            }
        };
    }
}

/// Prints the finished dream on stdout; an error unless it completed.
fn finish(dream: &Dream, json: bool) -> anyhow::Result<()> {
    match json {
        true => print_json(dream)?,
        false => print!("{}", view(dream)),
    }
    std::io::stdout().flush()?;
    let id = &dream.id;
    match (dream.status, &dream.error) {
        (DreamStatus::Failed, Some(e)) => bail!("dream {id} failed: {}: {}", e.kind, e.message),
        (DreamStatus::Failed, None) => bail!("dream {id} failed (the server gave no error)"),
        (DreamStatus::Canceled, _) => match dream.output_store() {
            Some(store) => bail!("dream {id} was canceled; its output store {store} keeps what it wrote"),
            None => bail!("dream {id} was canceled"),
        },
        _ => Ok(()),
    }
}

/// One thing `--wait` shows.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    /// A line: where the dream stands, a new status, its session, its output store.
    Event(String),
    /// The usage, when it moved.
    Usage(String),
}

/// What changed between two readings of a dream, in the order to show it: the status first
/// (a final one last, after what it brought), the session and the output store once they
/// appear, the usage when it moved. The first reading (`before: None`) says where the dream
/// stands.
fn changes(before: Option<&Dream>, now: &Dream) -> Vec<Change> {
    let mut out = Vec::new();
    let status = match before {
        None => Some(format!(
            "dream {} {}: {} reads {} and {} session{} ({})",
            now.id,
            status_text(now),
            now.model.id,
            now.input_store().map_or_else(|| "-".to_owned(), ToString::to_string),
            now.input_sessions().len(),
            if now.input_sessions().len() == 1 { "" } else { "s" },
            match now.output_behavior {
                OutputBehavior::CreateNew => "into a new store",
                OutputBehavior::UpdateExisting { .. } => "rewriting it in place",
            }
        )),
        Some(b) if b.status != now.status => Some(status_text(now)),
        Some(_) => None,
    };
    let (first, last) = match status {
        Some(line) if before.is_some() && now.status.is_final() => (None, Some(line)),
        line => (line, None),
    };
    out.extend(first.map(Change::Event));
    if let Some(session) = now.session_id.as_ref().filter(|s| before.is_none_or(|b| b.session_id.as_ref() != Some(*s)))
    {
        out.push(Change::Event(format!("session {session} (its events show what the dream reads and writes)")));
    }
    if let Some(store) = now.output_store().filter(|s| before.is_none_or(|b| b.output_store() != Some(*s))) {
        out.push(Change::Event(format!("output store {store}")));
    }
    let moved = match before {
        None => now.usage != DreamUsage::default(),
        Some(b) => b.usage != now.usage,
    };
    if moved {
        out.push(Change::Usage(format!("usage: {}", usage_text(&now.usage))));
    }
    out.extend(last.map(Change::Event));
    out
}

fn status_text(d: &Dream) -> String {
    match (&d.status, &d.error) {
        (DreamStatus::Failed, Some(e)) => format!("failed ({}: {})", e.kind, e.message),
        (status, _) => status.to_string(),
    }
}

fn usage_text(u: &DreamUsage) -> String {
    format!(
        "{} input, {} output, {} cache-write, {} cache-read tokens",
        u.input_tokens, u.output_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens
    )
}

/// How times are shown (the API's instants are UTC).
const TIME: &str = "%Y-%m-%dT%H:%M:%SZ";

/// One dream as `get` prints it: a field per line.
fn view(d: &Dream) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("dream", d.id.to_string()),
        ("status", d.status.to_string()),
        ("model", d.model.id.clone()),
        ("input store", d.input_store().map_or_else(|| "-".to_owned(), ToString::to_string)),
        ("sessions", d.input_sessions().iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
        ("output store", output_text(d)),
        ("instructions", d.instructions.clone().unwrap_or_else(|| "-".to_owned())),
        ("session", d.session_id.as_ref().map_or_else(|| "-".to_owned(), ToString::to_string)),
        ("usage", usage_text(&d.usage)),
    ];
    if let Some(e) = &d.error {
        rows.push(("error", format!("{}: {}", e.kind, e.message)));
    }
    rows.push(("created", d.created_at.format(TIME).to_string()));
    rows.push(("ended", d.ended_at.map_or_else(|| "-".to_owned(), |t| t.format(TIME).to_string())));
    if let Some(t) = d.archived_at {
        rows.push(("archived", t.format(TIME).to_string()));
    }
    let mut out = String::new();
    for (name, value) in rows {
        // Continuation lines (instructions, an error message) line up under the value.
        out.push_str(&format!("{name:<14}{}\n", value.replace('\n', &format!("\n{:14}", ""))));
    }
    out
}

fn output_text(d: &Dream) -> String {
    match (&d.output_behavior, d.output_store()) {
        (OutputBehavior::UpdateExisting { .. }, Some(s)) => format!("{s} (the input store, rewritten in place)"),
        (OutputBehavior::UpdateExisting { .. }, None) => "- (will rewrite the input store in place)".to_owned(),
        (OutputBehavior::CreateNew, Some(s)) => format!("{s} (a new store; the input is untouched)"),
        (OutputBehavior::CreateNew, None) if d.status.is_final() => "- (none was created)".to_owned(),
        (OutputBehavior::CreateNew, None) => "- (a new store, not created yet)".to_owned(),
    }
}

/// One dream as `list` prints it: tab-separated fields, `-` for none.
fn line(d: &Dream) -> String {
    let or_dash = |s: Option<String>| s.unwrap_or_else(|| "-".to_owned());
    [
        d.id.to_string(),
        d.status.to_string(),
        d.created_at.format(TIME).to_string(),
        d.model.id.clone(),
        or_dash(d.input_store().map(ToString::to_string)),
        or_dash(d.output_store().map(ToString::to_string)),
        or_dash(d.archived_at.map(|t| t.format(TIME).to_string())),
    ]
    .join("\t")
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// An elapsed time as `42s` or `12m03s`.
fn clock(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        _ => format!("{}m{:02}s", secs / 60, secs % 60),
    }
}

/// Where `--wait` shows progress: on a terminal, a spinner whose message is the usage, with the
/// events printed above it; elsewhere (a log, a pipe), one line per event and per usage change.
enum Progress {
    Lines,
    Spinner(ProgressBar),
}

impl Progress {
    fn new(id: &DreamId) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self::Lines;
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("the template is valid"));
        bar.set_message(format!("waiting for dream {id}"));
        bar.enable_steady_tick(Duration::from_millis(120));
        Self::Spinner(bar)
    }

    fn event(&self, line: &str) {
        match self {
            Self::Lines => eprintln!("{line}"),
            Self::Spinner(bar) => bar.println(line),
        }
    }

    fn usage(&self, line: &str) {
        match self {
            Self::Lines => eprintln!("{line}"),
            Self::Spinner(bar) => bar.set_message(line.to_owned()),
        }
    }

    fn finish(&self) {
        if let Self::Spinner(bar) = self {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{DreamError, DreamOutput};
    use serde_json::json;

    use super::*;

    fn dream() -> Dream {
        serde_json::from_value(json!({
            "type": "dream", "id": "drm_01", "status": "pending",
            "inputs": [{"type": "memory_store", "memory_store_id": "memstore_in"},
                       {"type": "sessions", "session_ids": ["sesn_01", "sesn_02"]}],
            "output_behavior": {"type": "create_new"}, "outputs": [],
            "model": {"id": "claude-sonnet-4-6", "speed": "standard"}, "instructions": "keep deploy notes\nverbatim",
            "session_id": null,
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            "error": null, "created_at": "2026-12-01T10:00:00.250Z", "ended_at": null, "archived_at": null,
        }))
        .unwrap()
    }

    #[test]
    fn each_reading_shows_what_changed_since_the_last() {
        let event = |s: &str| Change::Event(s.to_owned());
        let pending = dream();
        assert_eq!(
            changes(None, &pending),
            [event("dream drm_01 pending: claude-sonnet-4-6 reads memstore_in and 2 sessions (into a new store)")],
            "no usage yet"
        );
        assert_eq!(changes(Some(&pending), &pending), [], "nothing changed, nothing shown");

        let mut running = pending.clone();
        running.status = DreamStatus::Running;
        running.session_id = Some("sesn_dr".parse().unwrap());
        assert_eq!(
            changes(Some(&pending), &running),
            [event("running"), event("session sesn_dr (its events show what the dream reads and writes)")]
        );

        let mut copied = running.clone();
        copied.outputs = vec![DreamOutput { memory_store_id: "memstore_out".parse().unwrap() }];
        copied.usage.input_tokens = 1200;
        copied.usage.output_tokens = 80;
        let usage = Change::Usage("usage: 1200 input, 80 output, 0 cache-write, 0 cache-read tokens".into());
        assert_eq!(changes(Some(&running), &copied), [event("output store memstore_out"), usage]);

        let mut failed = copied.clone();
        failed.status = DreamStatus::Failed;
        failed.error = Some(DreamError::new("model_error", "the provider kept failing"));
        failed.usage.output_tokens = 90;
        assert_eq!(
            changes(Some(&copied), &failed),
            [
                Change::Usage("usage: 1200 input, 90 output, 0 cache-write, 0 cache-read tokens".into()),
                event("failed (model_error: the provider kept failing)"),
            ],
            "a final status comes last, after what it brought"
        );
        // Following a dream that is already under way starts with all it has.
        let all = changes(None, &failed);
        assert_eq!(all.len(), 4, "{all:?}");
        assert!(matches!(&all[0], Change::Event(l) if l.starts_with("dream drm_01 failed (model_error")), "{all:?}");
    }

    #[test]
    fn a_dream_is_shown_field_by_field_and_listed_on_one_line() {
        let mut d = dream();
        assert_eq!(
            view(&d),
            "dream         drm_01\n\
             status        pending\n\
             model         claude-sonnet-4-6\n\
             input store   memstore_in\n\
             sessions      sesn_01, sesn_02\n\
             output store  - (a new store, not created yet)\n\
             instructions  keep deploy notes\n              verbatim\n\
             session       -\n\
             usage         0 input, 0 output, 0 cache-write, 0 cache-read tokens\n\
             created       2026-12-01T10:00:00Z\n\
             ended         -\n"
        );
        assert_eq!(line(&d), "drm_01\tpending\t2026-12-01T10:00:00Z\tclaude-sonnet-4-6\tmemstore_in\t-\t-");

        d.status = DreamStatus::Failed;
        d.error = Some(DreamError::new("timeout", "ran for over an hour"));
        d.ended_at = Some(d.created_at);
        d.archived_at = Some(d.created_at);
        d.output_behavior = OutputBehavior::UpdateExisting { memory_store_id: "memstore_in".parse().unwrap() };
        d.outputs = vec![DreamOutput { memory_store_id: "memstore_in".parse().unwrap() }];
        let shown = view(&d);
        assert!(shown.contains("\nerror         timeout: ran for over an hour\n"), "{shown}");
        assert!(shown.contains("\noutput store  memstore_in (the input store, rewritten in place)\n"), "{shown}");
        assert!(
            shown.ends_with("\nended         2026-12-01T10:00:00Z\narchived      2026-12-01T10:00:00Z\n"),
            "{shown}"
        );
        assert_eq!(
            line(&d),
            "drm_01\tfailed\t2026-12-01T10:00:00Z\tclaude-sonnet-4-6\tmemstore_in\tmemstore_in\t2026-12-01T10:00:00Z"
        );
    }

    #[test]
    fn elapsed_times_read_as_seconds_then_minutes() {
        assert_eq!(clock(Duration::from_millis(999)), "0s");
        assert_eq!(clock(Duration::from_secs(59)), "59s");
        assert_eq!(clock(Duration::from_secs(60)), "1m00s");
        assert_eq!(clock(Duration::from_secs(754)), "12m34s");
    }

    /// The command line as a user types it, parsed.
    fn create(args: &[&str]) -> Result<Create, clap::Error> {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            create: Create,
        }
        let base = ["mnemo", "--api-key", "k", "--store", "memstore_in"];
        Cli::try_parse_from(base.iter().chain(args)).map(|c| c.create)
    }

    #[test]
    fn sessions_come_repeated_or_comma_separated_and_mistakes_are_named_by_their_flag() {
        let c = create(&["--session", "sesn_01,sesn_02", "--session", "sesn_03"]).unwrap();
        let request = c.request().unwrap();
        assert_eq!(request.sessions.len(), 3);
        assert_eq!(request.model, DEFAULT_MODEL);
        assert!(!request.update_existing && request.instructions.is_none());
        assert!(create(&["--session", "sesn_01", "--update-existing"]).unwrap().request().unwrap().update_existing);

        let err = |args: &[&str]| create(args).unwrap().request().unwrap_err().to_string();
        assert_eq!(err(&["--session", "sesn_01,sesn_01"]), "--session sesn_01 is given twice: name each session once");
        let many: Vec<String> = (0..101).map(|i| format!("sesn_{i:03}")).collect();
        assert_eq!(err(&["--session", &many.join(",")]), "a dream reads at most 100 sessions (got 101 --session ids)");
        assert_eq!(
            err(&["--session", "sesn_01", "--instructions", ""]),
            "--instructions must be 1 to 4096 characters (got 0)"
        );
        let long = "é".repeat(4097);
        assert_eq!(
            err(&["--session", "sesn_01", "--instructions", &long]),
            "--instructions must be 1 to 4096 characters (got 4097)"
        );
        assert_eq!(err(&["--session", "sesn_01", "--model", ""]), "--model must be 1 to 256 characters (got 0)");

        // clap refuses what is not an id, and a create without sessions.
        let refused = create(&["--session", "memstore_x"]).unwrap_err().to_string();
        assert!(refused.contains("`memstore_x` is not a valid session id"), "{refused}");
        let refused = create(&[]).unwrap_err().to_string();
        assert!(refused.contains("--session <ID>"), "{refused}");
    }
}
