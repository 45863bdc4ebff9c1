//! `mnemo mount`: one memory store as a local folder, kept in sync until a signal.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use mnemo_api::MemoryStoreId;
use mnemo_sync::{FullSyncTicks, Live, LiveWork, ProgressFn, StoreConfig, StoreSync, TeardownSteps, teardown};
use tokio::time::MissedTickBehavior;

use super::args::{Api, Deletions, parse_interval};
use super::signals::Signals;

/// The reference worker's default sync interval.
const DEFAULT_INTERVAL: &str = "15";

#[derive(Debug, Args)]
pub(crate) struct Mount {
    /// The memory store to mount (`memstore_…`).
    store_id: MemoryStoreId,

    /// The folder to create; it must not exist yet (unless `--adopt` or `--resume`).
    dir: PathBuf,

    #[command(flatten)]
    api: Api,

    /// Seconds between syncs (at least 5).
    #[arg(long, default_value = DEFAULT_INTERVAL, value_parser = parse_interval)]
    interval: Duration,

    /// Whether local deletions reach the server.
    #[arg(long, value_enum, default_value_t = Deletions::Enabled)]
    deletions: Deletions,

    /// Pull changes but never push.
    #[arg(long)]
    read_only: bool,

    /// Leave the folder (and its journal) in place on exit.
    #[arg(long)]
    keep: bool,

    /// Take over DIR as left by a mount that was killed, using the journal beside it: edits
    /// made meanwhile are uploaded, nothing is re-downloaded over them.
    #[arg(long, conflicts_with = "adopt")]
    resume: bool,

    /// Take over DIR, a folder that already holds files (Claude Code's memory folder, a notes
    /// folder): what the store lacks is uploaded, what DIR lacks is pulled; a file that differs
    /// keeps the store's bytes, and its own become a version of that memory (printed, never
    /// lost). Symlinks and special files are left alone; DIR is never removed (as `--keep`).
    #[arg(long)]
    adopt: bool,

    /// Sync on the interval only: no change feed, no upload right after a local write. Live
    /// sync is on by default and turns itself off when the server has no change feed; while it
    /// runs, an interval with nothing left for a full sync (no change live sync did not settle,
    /// no deletion waiting) skips it, up to 19 in a row; a folder a pull could not
    /// complete (a full disk) gets one after 1, 2, 4 … intervals until it is complete.
    #[arg(long)]
    no_live: bool,

    /// Serve Prometheus metrics of the sync (`GET /metrics`) on this address (off by default).
    #[arg(long, value_name = "ADDR", env = "MNEMO_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
}

impl Mount {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let root = std::path::absolute(&self.dir).with_context(|| format!("resolve {}", self.dir.display()))?;
        let client = self.api.client()?;
        let cfg = StoreConfig {
            read_only: self.read_only,
            deletions: self.deletions.into(),
            ..StoreConfig::new(self.store_id.clone(), root)
        };
        let mut signals = Signals::install()?;
        if let Some(at) = self.metrics_listen {
            crate::metrics::serve(at, None).await?;
        }
        let started = std::time::Instant::now();
        let (resume, adopt, live) = (self.resume, self.adopt, !self.no_live);
        let open = async move {
            if adopt {
                let (mut engine, adoption) = StoreSync::adopt(client, cfg).await?;
                for path in &adoption.left_alone {
                    eprintln!("left alone (not a regular file): {}", path.display());
                }
                for conflict in &adoption.conflicts {
                    eprintln!("conflict: {conflict}");
                }
                let report = engine.sync(false).await?;
                tracing::info!(memory_store_id = %engine.store_id(), conflicts = adoption.conflicts.len(), "adopted: {report}");
                // As after a resume: the feed's opening asks for one more sync.
                let live = live.then(|| engine.live());
                Ok::<_, anyhow::Error>((engine, live))
            } else if resume {
                let mut engine = StoreSync::resume(client, cfg).await?;
                let report = engine.sync(false).await?;
                tracing::info!(memory_store_id = %engine.store_id(), "resumed: {report}");
                // The feed starts after the sync: its opening asks for one more.
                let live = live.then(|| engine.live());
                Ok((engine, live))
            } else {
                // Subscribed before the download, so nothing committed meanwhile is missed.
                let mut live = if live { Some(Live::subscribe(&client, cfg.store_id.clone()).await) } else { None };
                let bar = download_progress();
                let report = || bar.clone().map(|bar| -> ProgressFn { Box::new(move |n| bar.set_position(n as u64)) });
                let engine = StoreSync::mount_retrying_with_progress(client, cfg, report).await;
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
                let mut engine = engine?;
                if let Some(live) = &mut live {
                    engine.attach_live(live);
                }
                Ok((engine, live))
            }
        };
        let (mut engine, mut live) = tokio::select! {
            opened = open => opened?,
            () = signals.next() => anyhow::bail!("interrupted during the initial download"),
        };
        tracing::info!(
            memory_store_id = %engine.store_id(),
            root = %engine.root().display(),
            memories = engine.baseline_len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "mounted memory store"
        );

        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + self.interval, self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Which ticks run a full sync (live sync makes most needless; an incomplete folder
        // needs them until it is complete).
        let mut ticks = FullSyncTicks::default();
        ticks.ran(engine.is_incomplete());
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    let live_running = live.as_ref().is_some_and(Live::is_running);
                    if ticks.due(live_running, engine.full_sync_needed(), engine.is_incomplete()) {
                        full_sync(&mut engine).await;
                        ticks.ran(engine.is_incomplete());
                    }
                }
                work = next_live(&mut live) => {
                    let full = matches!(work, LiveWork::FullSync);
                    engine.run_live(work).await;
                    if full {
                        ticks.ran(engine.is_incomplete());
                    }
                }
                // Pulls of the feed's bytes leave the journal a few seconds behind.
                () = sleep_until_due(engine.journal_due()) => engine.write_due_journal().await,
                () = signals.next() => break,
            }
        }
        drop(live);

        // A second signal from here on aborts at once.
        signals.abort_on_next();
        tracing::info!(memory_store_id = %engine.store_id(), "stopping: final sync, flush, then cleanup");
        let steps = TeardownSteps { final_sync: true, dispose: !self.keep };
        if let Some(engine) = teardown(engine, steps).await {
            tracing::info!(root = %engine.root().display(), "keeping the folder (--keep)");
        }
        Ok(())
    }
}

/// One full sync on the interval (or when the change feed asks for one), logged.
async fn full_sync(engine: &mut StoreSync) {
    match engine.sync(false).await {
        Ok(report) if report.changed() => tracing::info!(memory_store_id = %engine.store_id(), "synced: {report}"),
        Ok(_) => tracing::debug!(memory_store_id = %engine.store_id(), "synced: no changes"),
        Err(e) => tracing::warn!(memory_store_id = %engine.store_id(), "memory sync failed: {e}"),
    }
}

/// Sleeps until `due`, or forever without one.
async fn sleep_until_due(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// The next live work, or never without live sync.
async fn next_live(live: &mut Option<Live>) -> LiveWork {
    match live {
        Some(live) => live.next().await,
        None => std::future::pending().await,
    }
}

/// A counter of downloaded memories on stderr, when stderr is a terminal.
fn download_progress() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} downloading memory store: {pos} memories ({elapsed})")
            .expect("the template is valid"),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    Some(bar)
}
