//! Argument types shared by the commands: the client commands' server and key (`mount`,
//! `store`), and the sandbox-side commands' sync settings (`mount`, `worker`).

use std::time::Duration;

use clap::{Args, ValueEnum};
use mnemo_api::Secret;
use mnemo_client::Client;
use mnemo_sync::DeletionMode;

/// Where and as whom a client command calls: `mnemo serve` or the hosted API, one API key.
#[derive(Debug, Args)]
pub(crate) struct Api {
    /// API base URL (`mnemo serve` or the hosted API).
    #[arg(long, env = "ANTHROPIC_BASE_URL", default_value = "https://api.anthropic.com")]
    pub(crate) base_url: String,

    /// An API key of that server.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    pub(crate) api_key: Secret,
}

impl Api {
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::new(&self.base_url, self.api_key.expose())?)
    }
}

/// What syncs do with files deleted locally.
#[derive(Debug, Clone, Copy, ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum Deletions {
    Enabled,
    LogOnly,
    Disabled,
}

impl From<Deletions> for DeletionMode {
    fn from(d: Deletions) -> Self {
        match d {
            Deletions::Enabled => DeletionMode::Enabled,
            Deletions::LogOnly => DeletionMode::LogOnly,
            Deletions::Disabled => DeletionMode::Disabled,
        }
    }
}

/// A sync interval in seconds (`15`, `7.5`, `15s`), at least 5.
pub(crate) fn parse_interval(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim().trim_end_matches('s').parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    // NaN is not finite, so it is refused too.
    if !secs.is_finite() || secs < 5.0 {
        return Err(format!("the sync interval must be at least 5 seconds (got {s})"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_below_five_seconds_or_nan_are_refused() {
        assert_eq!(parse_interval("15").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_interval("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_interval("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_interval("7.5").unwrap(), Duration::from_millis(7500));
        for bad in ["4.99", "4.9", "0", "-1", "NaN", "nan", "inf", "soon", ""] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }
}
