//! `mnemo store export | import`: one memory store as one file, and back; `mnemo store search`. The work is
//! [`mnemo_export`]; this file reads and writes the file, shows progress and prints the report.

use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mnemo_api::MemoryStoreId;
use mnemo_export::export::Step;
use mnemo_export::{ExportFile, ExportOptions, ImportOptions, ImportReport, MemoryEntry, Target};

use super::args::Api;
use super::signals::Signals;

#[derive(Debug, Subcommand)]
pub(crate) enum Store {
    /// Write one memory store to one file: its name, description and metadata, and every live
    /// memory's path and exact content with its SHA-256 (and, with --versions, the history).
    #[command(long_about = EXPORT_ABOUT)]
    Export(Export),
    /// Recreate a store's live memories from an export file, in a new store or an existing one;
    /// safe to run again (what is there already is skipped). The history is not replayed.
    #[command(long_about = IMPORT_ABOUT)]
    Import(Import),
    /// Search one store's memories (or, with `-`, every store the key reaches) and print the
    /// best matches with their snippets (a mnemo extension).
    #[command(long_about = SEARCH_ABOUT)]
    Search(Search),
}

const SEARCH_ABOUT: &str = "\
Search memories and print the best matches first: one line per result with its path, score, \
memory id (and store id, when searching everywhere), then its snippet, the matched terms between \
« and ». STORE is a memory store id, or `-` for every store the credential reaches.

The query: words (all must match, as case-insensitive substrings of the path or content, so \
`staging-db-02` and `snake_case` are found as typed), \"exact phrases\", prefix*, -excluded, \
path:notes/ (only paths starting /notes/). Quote the query for the shell: \
mnemo store search memstore_… 'staging -\"old notes\" path:ops/'.

--mode semantic ranks by meaning (\"where do we keep the database?\" finds a note about postgres), --mode hybrid fuses both rankings; both need a server whose models file names an embeddings provider. If the provider cannot be reached the server answers by full text and this prints its notice on stderr.

A mnemo extension: the hosted API has no search (it answers 404).";

#[derive(Debug, Args)]
pub(crate) struct Search {
    /// The memory store to search (`memstore_…`), or `-` for every store the key reaches.
    store: String,

    /// What to find, in the query language above.
    query: String,

    /// Only memories under this prefix (`/` or a path ending in `/`).
    #[arg(long, value_name = "PREFIX")]
    path_prefix: Option<String>,

    /// How many results to print (1–100).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    limit: u32,

    /// How to rank: `text` (words must match), `semantic` (by meaning) or `hybrid` (both).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    mode: Option<mnemo_api::SearchMode>,

    /// Print the page as JSON (the API's answer) instead of lines.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    api: Api,
}

impl Search {
    async fn run(self) -> anyhow::Result<()> {
        let client = self.api.client()?;
        let store: Option<MemoryStoreId> = match self.store.as_str() {
            "-" => None,
            id => Some(id.parse().map_err(|e| anyhow::anyhow!("{id} is not a memory store id: {e}"))?),
        };
        let params = mnemo_client::SearchMemoriesParams {
            q: self.query,
            path_prefix: self.path_prefix,
            limit: Some(self.limit),
            page: None,
            mode: self.mode,
        };
        let page = client.search_memories(store.as_ref(), &params).await.context("search the memories")?;
        if let Some(notice) = &page.notice {
            eprintln!("note: {notice}");
        }
        let mut out = std::io::stdout().lock();
        if self.json {
            serde_json::to_writer_pretty(&mut out, &page)?;
            writeln!(out)?;
            return Ok(());
        }
        if page.data.is_empty() {
            eprintln!("no memory matches");
        }
        for hit in &page.data {
            let place = match store {
                Some(_) => String::new(),
                None => format!(" {}", hit.memory_store_id),
            };
            writeln!(out, "{}  ({:.3}, {}{place})", hit.path, hit.score, hit.memory_id)?;
            writeln!(out, "    {}", hit.snippet)?;
        }
        Ok(())
    }
}

/// `--mode` ([`mnemo_api::SearchMode::parse`]).
fn parse_mode(raw: &str) -> Result<mnemo_api::SearchMode, String> {
    mnemo_api::SearchMode::parse(raw)
}

const EXPORT_ABOUT: &str = "\
Write one memory store to one file: its name, description and metadata, and every live memory's \
path and exact content with its SHA-256 digest and size. With --versions, also every memory's \
version history (operation, actor, time, redaction, content where the server kept it), and \
that of memories deleted since.

The file is JSON Lines: a header (format and version, the mnemo that wrote it, when, the source \
base URL — never the API key — and the store's fields), one line per memory, and a trailer \
counting them, so an import can tell a whole file from a cut one. With --out FILE it is written \
to a temporary file beside FILE and renamed over it once complete (mode 0600): an interrupted \
export leaves no partial FILE. Without --out, or with `--out -`, it goes to stdout.

Works against `mnemo serve` and the hosted API alike (--base-url, --api-key). A store that \
changes during an export is not caught at one instant: each memory is as its page of the \
listing saw it.";

const IMPORT_ABOUT: &str = "\
Recreate the live memories of an export file (`mnemo store export`) in a memory store: a new \
store named as in the file (or --name), with the file's description and metadata (and not \
archived, even if the source was), or an existing one (--into STORE_ID, whose own fields stay as they are). Paths and bytes come out \
exactly as exported; the digests are checked on reading the file and again in the store.

Nothing is written unless the whole file checks out: its format and version, the trailer's \
counts (a truncated file is refused), every path, size and SHA-256 digest, no path twice, no \
line longer than 1 MiB (a memory's line is at most ~625 KB, every byte escaped; a history is read version by \
version). The check keeps no content: the contents are read again as they are uploaded (stdin \
is kept in an unnamed temporary file meanwhile), so memory stays bounded whatever the file's \
size, and a file that changed in between is refused.

Safe to run again: a memory already at its path with the same bytes is skipped, so an import \
that was interrupted resumes where it stopped when run again with --into the same store (an \
import into a new store prints that store's id first, for this). A path that holds other \
content, or a memory above or below a path, is left alone and reported; the command then exits \
non-zero. --overwrite replaces memories whose path holds other content (not overlapping ones), \
provided they do not change meanwhile. When the store reaches its server's cap on memories, the \
import stops creating and says how many were left out.

Versions cannot be replayed: servers create them, one per write, with the writer as actor. The \
import writes one version per memory it writes, by the API key it uses; the history in a file \
exported with --versions stays in the file, for audit.

Works against `mnemo serve` and the hosted API alike (--base-url, --api-key); up to 8 memories \
are uploaded at once.";

impl Store {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Export(cmd) => cmd.run().await,
            Self::Import(cmd) => cmd.run().await,
            Self::Search(cmd) => cmd.run().await,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct Export {
    /// The memory store to export (`memstore_…`).
    store_id: MemoryStoreId,

    /// Write the export to FILE (atomically: whole or not at all) instead of stdout; `-` is
    /// stdout.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,

    /// Also export the version history of every memory, deleted ones included: operations,
    /// actors, times, redactions, and content where the server kept it. Import does not replay
    /// it (it stays in the file, for audit).
    #[arg(long)]
    versions: bool,

    #[command(flatten)]
    api: Api,
}

impl Export {
    async fn run(self) -> anyhow::Result<()> {
        let client = self.api.client()?;
        let out = self.out.filter(|p| p.as_os_str() != "-");
        if let Some(path) = &out {
            check_writable_dir(path)?;
        }
        let options = ExportOptions { versions: self.versions, mnemo_version: super::VERSION.to_owned() };
        let bar = progress(None, "{spinner} exporting memory store: {pos} memories {msg} ({elapsed})");
        let step = |step| match step {
            Step::Versions(n) => bar.set_message(format!("(history: {n} versions)")),
            Step::Memories(n) => bar.set_position(n),
        };
        let started = Instant::now();
        let (summary, shown) = match out {
            None => {
                let mut stdout = std::io::BufWriter::new(std::io::stdout());
                let summary = mnemo_export::export(&client, &self.store_id, &options, &mut stdout, &step).await;
                bar.finish_and_clear();
                (summary?, "stdout".to_owned())
            }
            Some(path) => {
                let mut buf = Vec::new();
                let summary = mnemo_export::export(&client, &self.store_id, &options, &mut buf, &step).await;
                bar.finish_and_clear();
                let summary = summary?;
                let target = path.clone();
                tokio::task::spawn_blocking(move || mnemo_sync::fs::atomic_write(&target, &buf))
                    .await
                    .context("the writing task failed")?
                    .with_context(|| format!("write {}", path.display()))?;
                (summary, path.display().to_string())
            }
        };
        let history = match self.versions {
            true => format!(", {} versions of history ({} of deleted memories)", summary.versions, summary.histories),
            false => String::new(),
        };
        eprintln!(
            "exported {} memories ({} bytes){history} from {} to {shown} in {:.1} s",
            summary.memories,
            summary.content_bytes,
            self.store_id,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// Fails now, not after a long export, when FILE's folder does not exist.
fn check_writable_dir(path: &Path) -> anyhow::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!("cannot write {}: the folder {} does not exist", path.display(), parent.display());
    }
    Ok(())
}

#[derive(Debug, Args)]
pub(crate) struct Import {
    /// The export file (`mnemo store export`), or `-` for stdin.
    file: PathBuf,

    /// Import into this existing store (`memstore_…`) instead of a new one; its name,
    /// description and metadata stay as they are. Use it to finish an interrupted import.
    #[arg(long, value_name = "STORE_ID", conflicts_with = "name")]
    into: Option<MemoryStoreId>,

    /// Name the new store NAME instead of the name in the file.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Replace memories whose path holds other content (instead of reporting them as
    /// conflicts). Memories lying above or below a path are still reported, never deleted.
    #[arg(long)]
    overwrite: bool,

    #[command(flatten)]
    api: Api,
}

impl Import {
    async fn run(self) -> anyhow::Result<()> {
        let shown = self.file.display().to_string();
        let (file, source) =
            read_export(&self.file).await.with_context(|| format!("cannot import {shown}; nothing was written"))?;
        let client = self.api.client()?;
        let target = match &self.into {
            Some(id) => Target::Into(id.clone()),
            None => Target::New { name: self.name.clone() },
        };
        let (store, created) = mnemo_export::open_target(&client, &file, &target).await?;
        let resume = format!("mnemo store import {shown} --into {}", store.id);
        if created {
            eprintln!(
                "created memory store {} ({:?}); if this import is interrupted, finish it with `{resume}`",
                store.id, store.name
            );
        }
        if file.header.versions {
            eprintln!(
                "note: the file's history ({} versions) is not replayed — the server writes one new version per memory \
                 written, by this API key; the history stays in the file",
                file.trailer.versions
            );
        }
        let total = file.memories.len();
        let bar = progress(Some(total as u64), "{spinner} importing [{bar:30}] {pos}/{len} memories ({elapsed})");
        let tick = |done: usize| bar.set_position(done as u64);
        let options = ImportOptions { overwrite: self.overwrite, ..ImportOptions::default() };
        let started = Instant::now();
        let mut signals = Signals::install()?;
        let contents = source.open(&file).with_context(|| format!("cannot read {shown} again to import it"))?;
        let outcome = tokio::select! {
            outcome = mnemo_export::import(&client, &store.id, &file, contents, options, &tick) => outcome,
            () = signals.next() => {
                bar.finish_and_clear();
                bail!("interrupted; nothing imported so far is lost: run `{resume}` to finish (what is there is skipped)");
            }
        };
        bar.finish_and_clear();
        let report = outcome?;
        print!("{}", summary(&report, total, &store.id, started.elapsed()));
        std::io::stdout().flush()?;
        if report.is_complete() {
            return Ok(());
        }
        let missing = total - report.created - report.skipped - report.overwritten;
        let mut next = Vec::new();
        if !report.conflicts.is_empty() {
            next.push("resolve the conflicts (or pass --overwrite for those holding other content)".to_owned());
        }
        if report.store_full.is_some() {
            next.push(
                "make room in the store (delete memories, or raise the server's cap: mnemo serve --max-memories-per-store)"
                    .to_owned(),
            );
        }
        bail!(
            "{missing} of {total} memories were not imported (see above); {}{}run `{resume}` again: what is already there is skipped",
            next.join(" and "),
            if next.is_empty() { "" } else { ", then " }
        )
    }
}

/// Where the second reading of an export comes from (its memories' contents, as they are
/// imported): the file again, or the copy of a pipe kept in an unnamed temporary file.
enum Source {
    Path(PathBuf),
    Copy(std::fs::File),
}

impl Source {
    /// The file's memories read again, [`mnemo_export::IMPORT_CONCURRENCY`] ahead at most.
    fn open(
        self,
        file: &ExportFile,
    ) -> anyhow::Result<futures::stream::BoxStream<'static, Result<MemoryEntry, mnemo_export::FileError>>> {
        let reader = match self {
            Self::Path(path) => std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?,
            Self::Copy(mut copy) => {
                copy.seek(SeekFrom::Start(0)).context("rewind the temporary copy")?;
                copy
            }
        };
        let contents = file.contents(BufReader::new(reader));
        Ok(mnemo_export::read_contents(contents, mnemo_export::IMPORT_CONCURRENCY))
    }
}

/// Reads and checks the whole export (stdin for `-`), keeping no content: an import reads the
/// file twice (checks first, contents as they are written), so what it holds is bounded by the
/// longest line and the number of memories, never by the file's size. What cannot be read twice
/// (stdin, a pipe) is copied to an unnamed temporary file as it is checked.
async fn read_export(path: &Path) -> anyhow::Result<(ExportFile, Source)> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || -> anyhow::Result<(ExportFile, Source)> {
        let copy_of = |reader: &mut dyn BufRead| -> anyhow::Result<(ExportFile, Source)> {
            let mut copy = tempfile::tempfile().context("create a temporary file for a copy of the input")?;
            let file = ExportFile::read_copying(reader, BufWriter::new(&mut copy))?;
            Ok((file, Source::Copy(copy)))
        };
        if path.as_os_str() == "-" {
            return copy_of(&mut std::io::stdin().lock());
        }
        let file = std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
        let regular = file.metadata().with_context(|| format!("read {}", path.display()))?.is_file();
        if !regular {
            return copy_of(&mut BufReader::new(file));
        }
        Ok((ExportFile::read(BufReader::new(file))?, Source::Path(path)))
    })
    .await
    .context("the reading task failed")?
}

/// What the import did, for stdout.
fn summary(report: &ImportReport, total: usize, store: &MemoryStoreId, took: Duration) -> String {
    let mut out = format!(
        "import of {total} memories into {store} ({:.1} s): {} created, {} skipped (already there), {} overwritten\n",
        took.as_secs_f64(),
        report.created,
        report.skipped,
        report.overwritten
    );
    if !report.conflicts.is_empty() {
        out.push_str(&format!("conflicts ({}), left as they are:\n", report.conflicts.len()));
        for (path, conflict) in &report.conflicts {
            out.push_str(&format!("  {path}: {conflict}\n"));
        }
    }
    if !report.failures.is_empty() {
        out.push_str(&format!("failed ({}):\n", report.failures.len()));
        for (path, why) in &report.failures {
            out.push_str(&format!("  {path}: {why}\n"));
        }
    }
    if let Some((left, message)) = &report.store_full {
        out.push_str(&format!("the store is full: {left} memories were left out (the server says: {message})\n"));
    }
    if report.others > 0 {
        out.push_str(&format!(
            "the store also holds {} memories that are not in the file (left as they are)\n",
            report.others
        ));
    }
    out
}

/// A progress display on stderr, or a hidden one when stderr is not a terminal.
fn progress(len: Option<u64>, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    bar.set_style(ProgressStyle::with_template(template).expect("the template is valid").progress_chars("=> "));
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

#[cfg(test)]
mod tests {
    use mnemo_export::plan::Conflict;

    use super::*;

    #[test]
    fn the_summary_lists_every_memory_left_out() {
        let report = ImportReport {
            created: 3,
            skipped: 2,
            overwritten: 0,
            conflicts: vec![
                ("/a.md".into(), Conflict::Differs { store_sha256: Some("ab".repeat(32)) }),
                ("/d/x".into(), Conflict::Overlaps { path: "/d".into() }),
            ],
            failures: vec![("/f".into(), "the server failed (500: boom); run the command again".into())],
            store_full: Some((4, "memory store `memstore_x` already holds 5 memories".into())),
            others: 1,
        };
        let store: MemoryStoreId = "memstore_0357RbCaZGDhQDl3zapm8E".parse().unwrap();
        let text = summary(&report, 12, &store, Duration::from_millis(1500));
        assert_eq!(
            text,
            format!(
                "import of 12 memories into {store} (1.5 s): 3 created, 2 skipped (already there), 0 overwritten\n\
                 conflicts (2), left as they are:\n  /a.md: the store holds different content there (sha256 abababababab)\n  \
                 /d/x: the memory at /d overlaps it\n\
                 failed (1):\n  /f: the server failed (500: boom); run the command again\n\
                 the store is full: 4 memories were left out (the server says: memory store `memstore_x` already holds 5 memories)\n\
                 the store also holds 1 memories that are not in the file (left as they are)\n"
            )
        );
    }
}
