//! `--models FILE`: the model providers the agent loop runs sessions' agents on.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mnemo_model::ModelConfig;
use mnemo_server::agent::{Limits, Resolve};
use mnemo_store::rules::rate_limit::ModelFamily;

/// Reads and checks the providers file.
pub(crate) fn read(path: &Path) -> anyhow::Result<ModelConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("read the model providers file {}", path.display()))?;
    ModelConfig::from_toml(&text).with_context(|| format!("bad model providers file {}", path.display()))
}

/// What the agent loop runs on: how agent model ids resolve, the loop's limits, and the model
/// families its calls are rate-limited by.
pub(crate) struct Loaded {
    pub(crate) resolve: Resolve,
    pub(crate) limits: Limits,
    pub(crate) families: Vec<ModelFamily>,
    /// What embeds memories for semantic search (`[embeddings]`), if the file names it.
    pub(crate) embedder: Option<mnemo_model::Embedder>,
}

/// Reads and checks the providers file.
pub(crate) fn load(path: &Path) -> anyhow::Result<Loaded> {
    let config = read(path)?;
    let families = config
        .families()
        .iter()
        .map(|f| ModelFamily { display_name: f.name.clone(), models: f.models.clone() })
        .collect();
    let limits = Limits {
        max_tokens: config.limits.max_tokens,
        max_model_calls_per_turn: config.limits.max_model_calls_per_turn,
        turn_timeout: Duration::from_secs(config.limits.turn_timeout_secs),
        lease_ttl: Duration::from_secs(config.limits.turn_lease_secs),
        // Often enough that a lapsed lease is found within half its length again, at most 15 s.
        scan_every: Duration::from_secs(config.limits.turn_lease_secs / 2)
            .clamp(Duration::from_secs(1), Duration::from_secs(15)),
        dreams: mnemo_store::rules::dream::DreamLimits {
            max_running: config.dreams.max_running,
            max_pending: config.dreams.max_pending,
            timeout_secs: config.dreams.timeout_secs,
            max_model_calls: config.dreams.max_model_calls,
            max_input_bytes: config.dreams.max_input_bytes,
            transcript_result_chars: config.dreams.transcript_result_chars,
        },
        ..Limits::default()
    };
    let embedder = config.embedder().cloned();
    let config = Arc::new(config);
    Ok(Loaded { resolve: Arc::new(move |model: &str| config.resolve(model)), limits, families, embedder })
}
