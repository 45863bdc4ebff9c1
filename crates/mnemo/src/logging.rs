//! Log set-up: `tracing` to stderr, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Without `RUST_LOG`.
const DEFAULT_FILTER: &str = "info";

/// For commands whose own output tells the story (the quick start): warnings and errors only.
pub(crate) const QUIET_FILTER: &str = "warn";

/// Logs at `default` (a filter directive) unless `RUST_LOG` says otherwise.
pub(crate) fn init(format: LogFormat, default: Option<&str>) {
    let default = default.unwrap_or(DEFAULT_FILTER);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            builder.with_ansi(ansi).init();
        }
        LogFormat::Json => builder.json().init(),
    }
}
