//! `mnemo healthcheck [URL]`: one GET of a server's `/healthz`, exit status 0 on a 200, so a
//! container image needs no curl for its `HEALTHCHECK`.

use std::error::Error;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct Healthcheck {
    /// The health endpoint of a `mnemo serve`.
    #[arg(default_value = "http://127.0.0.1:8080/healthz")]
    url: String,

    /// Seconds to wait for the answer, connecting included.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 5,
        value_parser = clap::value_parser!(u64).range(1..=300)
    )]
    timeout: u64,
}

impl Healthcheck {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(self.timeout))
            // Healthy means this URL answers 200 itself, not something it points to.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("build the HTTP client")?;
        let response = client.get(&self.url).send().await.map_err(|e| {
            let url = &self.url;
            let cause = root_cause(&e);
            if e.is_timeout() {
                anyhow::anyhow!("unhealthy: {url} did not answer within {} s", self.timeout)
            } else if e.is_connect() {
                anyhow::anyhow!("unhealthy: cannot connect to {url} ({cause}); is `mnemo serve` listening there?")
            } else if e.is_builder() {
                anyhow::anyhow!("`{url}` is not an http:// or https:// URL ({cause})")
            } else {
                anyhow::anyhow!("unhealthy: GET {url} failed: {cause}")
            }
        })?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            bail!("unhealthy: {} answered {status}", self.url);
        }
        Ok(())
    }
}

/// The innermost error: for a refused connection, `Connection refused (os error 111)` rather
/// than reqwest's layers around it.
fn root_cause(e: &reqwest::Error) -> String {
    let mut cause: &dyn Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
