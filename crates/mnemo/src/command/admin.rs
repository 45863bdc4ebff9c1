//! `mnemo admin bootstrap` (admin-api.md §8.3): a new admin key, written into the database
//! directly, for whoever runs the host and lost every admin key.

use anyhow::Context;
use clap::Subcommand;
use mnemo_api::{ADMIN_KEY_PREFIX, generate_secret};
use mnemo_server::hash_credential;
use mnemo_store::Limits;

/// Makes a one-time setup link (admin-api.md §8.3) under `base`: only its secret's hash is kept.
pub(crate) async fn setup_link(store: &dyn mnemo_store::Store, base: &str) -> anyhow::Result<mnemo_api::Secret> {
    let secret = generate_secret("mnemo-setup-");
    store
        .create_setup_link(hash_credential(&secret), mnemo_store::rules::people::SETUP_LINK_TTL_SECS)
        .await
        .context("make the setup link")?;
    Ok(mnemo_api::Secret::new(format!("{}/console/setup/{secret}", base.trim_end_matches('/'))))
}

#[derive(Debug, Subcommand)]
pub(crate) enum Admin {
    /// Print a new admin key, opening the database directly (for a lost admin credential).
    ///
    /// Nothing is revoked. While no person is an active admin, it also prints a one-time
    /// console setup link (24 hours) that makes one.
    Bootstrap {
        /// The database: `sqlite://PATH` or `postgres://USER:PASS@HOST:PORT/DB`.
        #[arg(long, env = "MNEMO_DATABASE_URL", hide_env_values = true)]
        database: String,
        /// Where people reach the server (the setup link's base).
        #[arg(long, value_name = "URL", env = "MNEMO_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
        public_url: String,
        #[command(flatten)]
        postgres: crate::database::PostgresArgs,
    },
}

impl Admin {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Bootstrap { database, postgres, public_url } => {
                let store = crate::database::open(&database, Limits::default(), &postgres).await?;
                let key = generate_secret(ADMIN_KEY_PREFIX);
                let id = store.ensure_admin_key(hash_credential(&key), "mnemo admin bootstrap").await?;
                let link =
                    if store.setup_wanted().await? { Some(setup_link(&*store, &public_url).await?) } else { None };
                store.close().await;
                eprintln!("Created admin key {id} (shown once; only its hash is stored).");
                println!("{key}");
                if let Some(link) = link {
                    eprintln!(
                        "No person is an admin: this one-time console setup link (valid 24 hours) makes one:\n\n    {}\n",
                        link.expose()
                    );
                }
            }
        }
        Ok(())
    }
}
