//! `mnemo webhook`: register, list and remove a server's webhook endpoints, and see what became
//! of their deliveries.

use anyhow::Context;
use clap::{Args, Subcommand};
use mnemo_api::{CreateWebhookEndpoint, WebhookEndpoint, WebhookEndpointId};

use super::env_key::Server;

#[derive(Debug, Subcommand)]
pub(crate) enum Webhook {
    /// Register an endpoint; prints its id, then its signing secret (`whsec_…`) on its own line.
    ///
    /// The server POSTs each event to URL signed with that secret (Standard Webhooks headers:
    /// webhook-id, webhook-timestamp, webhook-signature), as the hosted API does; the official
    /// SDK's `client.beta.webhooks.unwrap(payload, headers=…, key=SECRET)` verifies it.
    Add {
        /// Where events are POSTed (http:// or https://).
        url: String,
        /// Only these event types, comma-separated (e.g. `session.status_idled,session.requires_action`);
        /// every type when omitted.
        #[arg(long, value_delimiter = ',')]
        events: Vec<String>,
        /// A note about the endpoint.
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        server: Server,
    },
    /// List the endpoints: id, URL, event types (never secrets).
    List {
        #[command(flatten)]
        server: Server,
    },
    /// Print an endpoint's signing secret.
    Secret {
        /// The endpoint (`whep_…`).
        id: WebhookEndpointId,
        #[command(flatten)]
        server: Server,
    },
    /// Replace an endpoint's signing secret and print the new one; the old one keeps signing
    /// beside it for --keep-previous seconds, so receivers can switch without refusing a delivery.
    Rotate {
        /// The endpoint (`whep_…`).
        id: WebhookEndpointId,
        /// Seconds the old secret still signs (0–604800; the server's default is a day).
        #[arg(long, value_name = "SECS")]
        keep_previous: Option<u64>,
        #[command(flatten)]
        server: Server,
    },
    /// Remove an endpoint; its pending deliveries are never sent.
    Remove {
        /// The endpoint (`whep_…`).
        id: WebhookEndpointId,
        #[command(flatten)]
        server: Server,
    },
    /// An endpoint's recent deliveries, newest first: status, attempts, last answer or error,
    /// next attempt.
    Deliveries(Deliveries),
}

#[derive(Debug, Args)]
pub(crate) struct Deliveries {
    /// The endpoint (`whep_…`).
    id: WebhookEndpointId,
    /// Only `pending`, `delivered` or `failed` ones.
    #[arg(long)]
    status: Option<String>,
    /// How many (1–100).
    #[arg(long, default_value_t = 20)]
    limit: u32,
    #[command(flatten)]
    server: Server,
}

fn types(e: &WebhookEndpoint) -> String {
    match &e.event_types {
        None => "*".to_owned(),
        Some(types) => types.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(","),
    }
}

impl Webhook {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Add { url, events, description, server } => {
                let body =
                    CreateWebhookEndpoint { url, event_types: (!events.is_empty()).then_some(events), description };
                let endpoint = server.client()?.create_webhook_endpoint(&body).await?;
                tracing::info!(webhook_endpoint.id = %endpoint.id, "registered webhook endpoint");
                println!("{}", endpoint.id);
                println!("{}", endpoint.secret.context("the server returned no secret")?.expose());
            }
            Self::List { server } => {
                let client = server.client()?;
                let mut page = client.list_webhook_endpoints(Some(100), None).await?;
                loop {
                    for e in &page.data {
                        println!("{}\t{}\t{}", e.id, e.url, types(e));
                    }
                    match page.next_page.filter(|p| !p.is_empty()) {
                        Some(next) => page = client.list_webhook_endpoints(Some(100), Some(&next)).await?,
                        None => break,
                    }
                }
            }
            Self::Secret { id, server } => {
                let endpoint = server.client()?.webhook_endpoint_secret(&id).await?;
                println!("{}", endpoint.secret.context("the server returned no secret")?.expose());
            }
            Self::Rotate { id, keep_previous, server } => {
                let endpoint = server.client()?.rotate_webhook_secret(&id, keep_previous).await?;
                tracing::info!(webhook_endpoint.id = %endpoint.id, "rotated webhook signing secret");
                println!("{}", endpoint.secret.context("the server returned no secret")?.expose());
            }
            Self::Remove { id, server } => {
                server.client()?.delete_webhook_endpoint(&id).await?;
                println!("{id} removed");
            }
            Self::Deliveries(d) => {
                let page =
                    d.server.client()?.list_webhook_deliveries(&d.id, d.status.as_deref(), Some(d.limit), None).await?;
                for x in page.data {
                    let last = match (x.last_status_code, &x.last_error) {
                        (Some(code), _) => format!("HTTP {code}"),
                        (None, Some(e)) => e.clone(),
                        (None, None) => "-".to_owned(),
                    };
                    let next = x.next_attempt_at.map_or_else(|| "-".to_owned(), |t| t.to_rfc3339());
                    println!(
                        "{}\t{}\t{}\t{}\t{}\tattempts={}\tlast={last}\tnext={next}",
                        x.id,
                        x.created_at.to_rfc3339(),
                        x.event_type,
                        x.resource_id,
                        x.status.as_str(),
                        x.attempts
                    );
                }
            }
        }
        Ok(())
    }
}
