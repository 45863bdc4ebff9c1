//! `mnemo`: the memory server, the worker and the command line, in one binary.
//!
//! This crate is thin glue: clap parsing, logging set-up and exit codes. The work happens in
//! the library crates.

mod command;
mod credentials;
mod database;
mod logging;
mod metrics;
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
    let mut builder = tokio::runtime::Builder::new_multi_thread();
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
