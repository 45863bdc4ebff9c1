//! `mnemo`: the memory server, the worker and the command line, in one binary.
//!
//! This crate is thin glue: clap parsing, logging set-up, signals and exit codes. The work
//! happens in the library crates.
//!
//! - `command::serve` opens the backend its `--database` URL's scheme names (`database`:
//!   `sqlite://`, `postgres://`), reads the models file (`models`), and runs the server until
//!   SIGTERM/SIGINT; starting (`Serve::start`) is split from serving, so `quickstart` runs the same
//!   server in process beside an in-process worker.
//! - `command::db` is `mnemo db copy | backup | check`, over the backends' own code.
//! - `command::mount` runs one `mnemo_sync::StoreSync` on a timer (and live) until a signal, then
//!   the shared teardown; `command::store` is `mnemo store export | import` around
//!   `mnemo_export`, writing `--out` atomically and drawing progress on a terminal.
//! - `command::worker` turns signals into cancellation of the poll loop or the single item;
//!   `credentials`, called first in `main` before any thread, takes a worker's key and work
//!   secret out of its environment and arguments and re-executes the binary with them sealed in
//!   a pipe, so `/proc/<pid>/environ` and `cmdline` never hold them.
//! - `command::{env_key, webhook, session, dream}` call the API as a client; `healthcheck` GETs
//!   `/healthz` (the Docker image's probe); `completions` prints shell completions.
//! - `metrics` installs the Prometheus recorder and serves `--metrics-listen` on a listener of its
//!   own (the libraries only call the `metrics` facade). `build.rs` records the git commit for
//!   `--version` (`MNEMO_GIT_COMMIT` overrides it).

mod command;
mod credentials;
#[cfg(feature = "server")]
mod database;
mod logging;
mod metrics;
#[cfg(feature = "server")]
mod models;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Before anything else (no thread yet): a worker re-executes itself here without the
    // credentials in its environment block and command line.
    if let Err(err) = credentials::seal() {
        eprintln!("error: {err:#}");
        return ExitCode::FAILURE;
    }
    let cli = command::Cli::parse();
    if cli.command.is_sandbox_side() {
        mnemo_sync::allocator::single_arena();
    }
    let json = cli.log_format == logging::LogFormat::Json;
    logging::init(cli.log_format, cli.command.is_chatty().then_some(logging::QUIET_FILTER));
    let mut builder = if cli.command.is_single_store() {
        // One store's sync is one task at a time (the engine, its change feed, a signal): a
        // single-threaded runtime does it, and the worker threads it saves held their stacks
        // and allocator caches for nothing (files are still written and hashed on the blocking
        // pool below).
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    if cli.command.is_sandbox_side() {
        // A worker's blocking work (file I/O, hashing) is short; a small pool keeps the
        // allocator's per-thread arenas few, which cut the worker's peak memory by a tenth.
        builder.max_blocking_threads(4);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli.command.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if err
                .chain()
                .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
            {
                return ExitCode::SUCCESS;
            }
            if json {
                // Log collectors read one JSON object per line; the reason is one too.
                tracing::error!(error = %format!("{err:#}"), "mnemo failed");
            } else {
                eprintln!("error: {err:#}");
            }
            ExitCode::FAILURE
        }
    }
}
