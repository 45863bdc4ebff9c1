//! The subcommands, one file each. Those that run the server or open its database (`serve`,
//! `quickstart`, `db`, `admin`) are built with the `server` feature only, the default: without it
//! the binary is what a sandbox host needs (`mount`, `worker`, `mcp` and the API's clients).

#[cfg(feature = "server")]
mod admin;
mod args;
mod completions;
#[cfg(feature = "server")]
mod db;
mod dream;
mod env_key;
mod healthcheck;
mod mcp;
mod mount;
#[cfg(feature = "server")]
mod oidc;
mod organization;
#[cfg(feature = "server")]
mod quickstart;
#[cfg(feature = "server")]
mod serve;
mod session;
mod signals;
mod store;
mod webhook;
mod worker;

use clap::{Parser, Subcommand};

use crate::logging::LogFormat;

/// What `mnemo --version` prints after the name: the version and the commit the binary was built
/// from (`0.1.0 (git 130fd4b)`, `-dirty` with uncommitted changes, `unknown` without git; see
/// build.rs).
#[cfg(feature = "server")]
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("MNEMO_GIT_COMMIT"), ")");
/// The sandbox build says so: `0.1.0 (git 130fd4b, sandbox build)`.
#[cfg(not(feature = "server"))]
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("MNEMO_GIT_COMMIT"), ", sandbox build)");

/// mnemo: memory that survives agent sessions.
///
/// One binary: `serve` runs the API server and its web console, `worker` serves a self-hosted
/// environment's sessions on a sandbox host, `mount` keeps one memory store and a folder in sync;
/// the other commands are tools around them. Run `mnemo help COMMAND` for the details of one.
#[derive(Debug, Parser)]
#[command(name = "mnemo", version = VERSION, about)]
#[cfg_attr(
    not(feature = "server"),
    command(long_about = "mnemo: memory that survives agent sessions (the sandbox build).\n\n\
        The commands a sandbox host runs: `worker` serves a self-hosted environment's sessions, \
        `mount` keeps one memory store and a folder in sync, `mcp` serves memory stores to an agent; \
        the other commands call a server's API. `mnemo serve` and the commands that open its \
        database are in the full build. Run `mnemo help COMMAND` for the details of one.")
)]
pub(crate) struct Cli {
    /// Log line format (logs go to stderr).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "MNEMO_LOG_FORMAT")]
    pub(crate) log_format: LogFormat,

    #[command(subcommand)]
    pub(crate) command: Command,
}

// One value per process, parsed once: how its variants' sizes differ costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    #[cfg(feature = "server")]
    /// Run the server: the Managed Agents API and the web console.
    ///
    /// Serves Anthropic's Managed Agents beta API — memory stores and their versions,
    /// self-hosted environments and their work queue, agents, sessions and their events — and
    /// the web console at /console, on an embedded SQLite file or on a PostgreSQL database that
    /// several replicas share. When ready it prints `listening on http://ADDR` on stdout, and
    /// GET /healthz answers 200; GET /v1/openapi.json describes the API (OpenAPI 3.1). SIGTERM/
    /// SIGINT finish in-flight requests (30 s at most), then close the database.
    Serve(serve::Serve),
    /// Mint, list and revoke a self-hosted environment's keys (workers poll with them).
    #[command(subcommand)]
    EnvKey(env_key::EnvKey),
    #[cfg(feature = "server")]
    /// Recover the organization's administration: `mnemo admin bootstrap` prints a new admin key.
    #[command(subcommand)]
    Admin(admin::Admin),
    /// Create, list and archive workspaces (with an admin key).
    #[command(subcommand)]
    Workspace(organization::WorkspaceCmd),
    /// Mint, list and deactivate API keys of workspaces (with an admin key).
    #[command(subcommand)]
    ApiKey(organization::ApiKeyCmd),
    /// Register, list and remove webhook endpoints, and see their deliveries.
    #[command(subcommand)]
    Webhook(webhook::Webhook),
    /// Drive a session as its agent from a script of tool calls, as an external driver does
    /// for an agent whose model `mnemo serve --models` does not run.
    #[command(subcommand)]
    Session(session::Session),
    /// Mount one memory store as a local folder, kept in sync until SIGINT/SIGTERM.
    ///
    /// Downloads the store into DIR, syncs both ways every --interval seconds (and live, as
    /// changes happen, against `mnemo serve`), and on SIGINT/SIGTERM runs a final sync and a
    /// push-only flush, then removes the folder unless --keep. A second signal aborts at once.
    Mount(mount::Mount),
    /// Export a memory store to one file, or import one: move memory between servers (the
    /// hosted API and `mnemo serve`) or keep a copy.
    #[command(subcommand)]
    Store(store::Store),
    /// Run dreams: a model curates a memory store from the sessions that used it — merges
    /// duplicates, keeps the latest of conflicting facts, adds what the sessions showed — into a
    /// new store (or in place), as an asynchronous job (beta `dreaming-2026-04-21`).
    ///
    /// `create` starts one (`--wait` follows it to its end), `list`, `get`, `cancel` and
    /// `archive` manage them; on `mnemo serve` a dream runs on a model of its --models file.
    #[command(subcommand)]
    Dream(dream::DreamCmd),
    /// Serve memory stores to any agent over the Model Context Protocol (stdin/stdout): the
    /// memory tool's commands (view, create, str_replace, insert, delete, rename, history) and
    /// each memory as a resource.
    ///
    /// For example, for Claude Code: `claude mcp add memory -- mnemo mcp --store memstore_…`
    /// with ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY set. Every write is a memory version
    /// under that key, refused if the file changed since it was read.
    Mcp(mcp::Mcp),
    /// Serve a self-hosted environment's sessions on this host.
    ///
    /// Claims the environment's work items, runs each session's tool calls (bash, read, write,
    /// edit, glob, grep), mounts its memory stores as folders (under /mnt/memory by default) and
    /// keeps them in sync with the server, like the official SDK's EnvironmentWorker. At the end
    /// of a session, or on SIGTERM/SIGINT: a final sync and a flush (up to 30 s each), then the
    /// folders are removed and the work item is stopped.
    #[command(subcommand)]
    Worker(worker::Worker),
    #[cfg(feature = "server")]
    /// See the whole product in a minute: a server on a temporary SQLite database, a demo
    /// store, environment and agent, a worker in this process, and two scripted sessions that
    /// show memory surviving from one to the next; then serves until Ctrl-C and cleans up.
    Quickstart(quickstart::Quickstart),
    #[cfg(feature = "server")]
    /// Database maintenance: copy a deployment between SQLite and PostgreSQL, back up, check.
    #[command(subcommand)]
    Db(db::Db),
    /// Print a shell completion script on stdout.
    ///
    /// For example: `mnemo completions bash > /etc/bash_completion.d/mnemo`,
    /// `mnemo completions zsh > "${fpath[1]}/_mnemo"`,
    /// `mnemo completions fish > ~/.config/fish/completions/mnemo.fish`.
    Completions(completions::Completions),
    /// Exit 0 if a server's /healthz answers 200 (a health check that needs no curl).
    ///
    /// Prints nothing when healthy. Otherwise exits 1 with the reason on stderr: nothing
    /// listening, no answer within --timeout, or another status (redirects are not followed).
    Healthcheck(healthcheck::Healthcheck),
}

impl Command {
    /// Whether this runs on a sandbox host next to an agent (worker, mount) rather than serving.
    pub(crate) fn is_sandbox_side(&self) -> bool {
        matches!(self, Self::Worker(_) | Self::Mount(_))
    }

    /// Whether the command keeps one memory store in sync and nothing else (`mnemo mount`).
    pub(crate) fn is_single_store(&self) -> bool {
        matches!(self, Self::Mount(_))
    }

    /// Whether logs default to warnings only: the command prints its own story (quickstart), or
    /// its stdout is a protocol whose client shows stderr as the server's log (mcp).
    pub(crate) fn is_chatty(&self) -> bool {
        match self {
            #[cfg(feature = "server")]
            Self::Quickstart(_) => true,
            Self::Mcp(_) => true,
            _ => false,
        }
    }

    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            #[cfg(feature = "server")]
            Self::Serve(cmd) => cmd.run().await,
            Self::Mount(cmd) => cmd.run().await,
            Self::Store(cmd) => cmd.run().await,
            Self::Dream(cmd) => cmd.run().await,
            Self::Mcp(cmd) => cmd.run().await,
            Self::EnvKey(cmd) => cmd.run().await,
            #[cfg(feature = "server")]
            Self::Admin(cmd) => cmd.run().await,
            Self::Workspace(cmd) => cmd.run().await,
            Self::ApiKey(cmd) => cmd.run().await,
            Self::Webhook(cmd) => cmd.run().await,
            Self::Session(cmd) => cmd.run().await,
            Self::Worker(cmd) => cmd.run().await,
            #[cfg(feature = "server")]
            Self::Db(cmd) => cmd.run().await,
            Self::Completions(cmd) => cmd.run(),
            Self::Healthcheck(cmd) => cmd.run().await,
            #[cfg(feature = "server")]
            Self::Quickstart(cmd) => cmd.run().await,
        }
    }
}
