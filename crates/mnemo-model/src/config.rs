//! The providers file of `mnemo serve --models FILE`: providers, the model mapping, the loop's
//! limits. Keys come from the file (`api_key`) or, better, from the environment (`api_key_env`);
//! they are never logged, and `Debug` redacts them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use mnemo_api::Secret;
use serde::Deserialize;

use crate::Provider;
use crate::anthropic::AnthropicProvider;
use crate::embeddings::{Embedder, EmbeddingsSettings, MAX_BATCH_SIZE};
use crate::openai::OpenAiProvider;

/// The hosted Anthropic API.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// A parsed, validated providers file.
#[derive(Clone)]
pub struct ModelConfig {
    providers: BTreeMap<String, ProviderEntry>,
    /// Agent model id → (provider name, provider model name).
    models: BTreeMap<String, (String, String)>,
    /// The provider for any other model id (same model name).
    default: Option<String>,
    /// The model families rate limits count by (`[families]`).
    families: Vec<Family>,
    pub limits: Limits,
    /// How dreams run (`[dreams]`).
    pub dreams: Dreams,
    /// What embeds memories for semantic search (`[embeddings]`), if anything.
    embedder: Option<Embedder>,
}

/// A model family: agent model ids whose calls count against one rate-limit entry of each
/// workspace (admin-api.md §8.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// What the Admin API and the console show, e.g. `Claude Sonnet`.
    pub name: String,
    /// The agent model ids it covers.
    pub models: Vec<String>,
}

#[derive(Clone)]
struct ProviderEntry {
    settings: ProviderSettings,
    provider: Arc<dyn Provider>,
}

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// The OpenAI-compatible chat completions API.
    OpenAi,
}

/// One provider's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    /// Without a trailing `/`.
    pub base_url: String,
    /// Never logged; `Debug` prints `[redacted]`.
    pub api_key: Option<Secret>,
    /// The TCP (and TLS) connect timeout.
    pub connect_timeout: Duration,
    /// The longest wait for the response head, or between two chunks of the stream.
    pub idle_timeout: Duration,
}

/// The loop's limits (`[limits]`; read by the agent loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// `max_tokens` of each model call.
    pub max_tokens: u32,
    /// A turn making more model calls stops (a runaway agent).
    pub max_model_calls_per_turn: u32,
    /// The wall-clock bound of a turn.
    pub turn_timeout_secs: u64,
    /// How long a turn's lease lasts unless its runner renews it: the longest a turn whose
    /// process died waits before another process carries it on.
    pub turn_lease_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_tokens: 8192, max_model_calls_per_turn: 50, turn_timeout_secs: 1800, turn_lease_secs: 30 }
    }
}

/// How dreams run (`[dreams]`; read by the dream runner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Dreams {
    /// Dreams running at once on one database.
    pub max_running: u32,
    /// Dreams waiting to run in one workspace.
    pub max_pending: u32,
    /// Wall time of one dream.
    pub timeout_secs: u64,
    /// Model calls of one dream.
    pub max_model_calls: u32,
    /// Bytes of live memories an input store may hold.
    pub max_input_bytes: u64,
    /// Characters of each tool result a transcript keeps.
    pub transcript_result_chars: usize,
}

impl Default for Dreams {
    fn default() -> Self {
        Dreams {
            max_running: mnemo_api::limits::DEFAULT_DREAM_MAX_RUNNING,
            max_pending: mnemo_api::limits::DEFAULT_DREAM_MAX_PENDING,
            timeout_secs: mnemo_api::limits::DEFAULT_DREAM_TIMEOUT_SECS,
            max_model_calls: mnemo_api::limits::DEFAULT_DREAM_MAX_MODEL_CALLS,
            max_input_bytes: mnemo_api::limits::DEFAULT_DREAM_MAX_INPUT_BYTES,
            transcript_result_chars: mnemo_api::limits::DEFAULT_DREAM_TRANSCRIPT_RESULT_CHARS,
        }
    }
}

/// Where an agent's model id goes.
#[derive(Clone)]
pub struct Resolved {
    pub provider: Arc<dyn Provider>,
    /// The provider's model name.
    pub model: String,
    /// The provider's name in the file (`[providers.NAME]`).
    pub provider_name: String,
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("model", &self.model)
            .field("provider_name", &self.provider_name)
            .finish_non_exhaustive()
    }
}

/// The `[families]` table checked against the models the file serves; without the table, one
/// family per `[models]` id.
fn families(
    table: Option<BTreeMap<String, Vec<String>>>,
    models: &BTreeMap<String, (String, String)>,
    has_default: bool,
) -> Result<Vec<Family>, ConfigError> {
    let Some(table) = table else {
        return Ok(models.keys().map(|id| Family { name: id.clone(), models: vec![id.clone()] }).collect());
    };
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, ids) in &table {
        let key = format!("families.{name:?}");
        if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
            return Err(invalid(key, "a family name needs a letter or digit (it becomes the rate limit's id)"));
        }
        if ids.is_empty() {
            return Err(invalid(key, "a family lists at least one agent model id"));
        }
        for id in ids {
            if !models.contains_key(id) && !has_default {
                return Err(invalid(key, format!("{id:?} is not in [models] and there is no default provider")));
            }
            if let Some(other) = owner.insert(id, name) {
                return Err(invalid(key, format!("{id:?} is already in family {other:?}")));
            }
        }
    }
    Ok(table.into_iter().map(|(name, models)| Family { name, models }).collect())
}

/// A bad providers file. Each names the key at fault; none holds a key's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("models file: {0}")]
    Syntax(String),
    #[error("models file: `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("models file {path}: {message}")]
    Read { path: String, message: String },
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), message: message.into() }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    models: BTreeMap<String, String>,
    families: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    dreams: Dreams,
    embeddings: Option<EmbeddingsSettings>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    kind: String,
    base_url: Option<String>,
    api_key: Option<String>,
    api_key_env: Option<String>,
    connect_timeout_secs: Option<f64>,
    idle_timeout_secs: Option<f64>,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let providers: BTreeMap<_, _> = self.providers.iter().map(|(k, v)| (k, &v.settings)).collect();
        f.debug_struct("ModelConfig")
            .field("providers", &providers)
            .field("models", &self.models)
            .field("default", &self.default)
            .field("families", &self.families)
            .field("limits", &self.limits)
            .field("dreams", &self.dreams)
            .field("embedder", &self.embedder)
            .finish()
    }
}

impl ModelConfig {
    /// Parses and validates a providers file; `api_key_env` reads the process environment.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Self::from_toml_with_env(text, |name| std::env::var(name).ok())
    }

    /// Reads and parses a providers file (`mnemo serve --models FILE`).
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read { path: path.display().to_string(), message: e.to_string() })?;
        Self::from_toml(&text)
    }

    /// [`ModelConfig::from_toml`] with the environment given (for tests).
    pub fn from_toml_with_env(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Syntax(redact_toml_error(&e)))?;
        let mut providers = BTreeMap::new();
        for (name, p) in raw.providers {
            let key = |k: &str| format!("providers.{name}.{k}");
            if name.is_empty() || name.contains('/') {
                return Err(invalid(format!("providers.{name}"), "a provider name is non-empty and has no `/`"));
            }
            let kind = match p.kind.as_str() {
                "anthropic" => ProviderKind::Anthropic,
                "openai" => ProviderKind::OpenAi,
                other => {
                    return Err(invalid(
                        key("kind"),
                        format!("unknown kind {other:?} (expected \"anthropic\" or \"openai\")"),
                    ));
                }
            };
            let base_url = match (p.base_url, kind) {
                (Some(u), _) => u,
                (None, ProviderKind::Anthropic) => ANTHROPIC_DEFAULT_BASE_URL.to_string(),
                (None, ProviderKind::OpenAi) => return Err(invalid(key("base_url"), "required for kind \"openai\"")),
            };
            match reqwest::Url::parse(&base_url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => return Err(invalid(key("base_url"), "not an http(s) URL")),
            }
            let base_url = base_url.trim_end_matches('/').to_string();
            let api_key = match (p.api_key, p.api_key_env) {
                (Some(_), Some(_)) => return Err(invalid(key("api_key"), "give `api_key` or `api_key_env`, not both")),
                (Some(k), None) => Some(k),
                (None, Some(var)) => match env(&var).filter(|v| !v.is_empty()) {
                    Some(v) => Some(v),
                    None if kind == ProviderKind::Anthropic => {
                        return Err(invalid(key("api_key_env"), format!("the environment variable {var} is not set")));
                    }
                    None => {
                        tracing::warn!(provider = %name, variable = %var, "api_key_env is not set: calling without a key");
                        None
                    }
                },
                (None, None) => None,
            };
            if kind == ProviderKind::Anthropic && api_key.is_none() {
                return Err(invalid(key("api_key_env"), "kind \"anthropic\" needs a key (`api_key_env` or `api_key`)"));
            }
            if api_key.as_deref().is_some_and(|k| k.contains(['\r', '\n'])) {
                return Err(invalid(key("api_key"), "the key holds a line break"));
            }
            // It travels in a header (`x-api-key`, `Authorization: Bearer`): say so now, not at
            // the first call.
            if api_key
                .as_deref()
                .is_some_and(|k| reqwest::header::HeaderValue::from_str(&format!("Bearer {k}")).is_err())
            {
                return Err(invalid(
                    key("api_key"),
                    "the key holds a control character, which an HTTP header cannot carry",
                ));
            }
            let secs = |v: Option<f64>, k: &str, default: f64| -> Result<Duration, ConfigError> {
                let v = v.unwrap_or(default);
                if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                    return Err(invalid(key(k), "seconds, more than 0 and at most 86400"));
                }
                Ok(Duration::from_secs_f64(v))
            };
            let settings = ProviderSettings {
                kind,
                base_url,
                api_key: api_key.map(Secret::from),
                connect_timeout: secs(p.connect_timeout_secs, "connect_timeout_secs", 10.0)?,
                idle_timeout: secs(p.idle_timeout_secs, "idle_timeout_secs", 300.0)?,
            };
            let provider: Arc<dyn Provider> = match kind {
                ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(settings.clone())),
                ProviderKind::OpenAi => Arc::new(OpenAiProvider::new(settings.clone())),
            };
            providers.insert(name, ProviderEntry { settings, provider });
        }
        let mut models = BTreeMap::new();
        let mut default = None;
        for (id, target) in raw.models {
            let key = format!("models.{id:?}");
            if id == "default" {
                if !providers.contains_key(&target) {
                    return Err(invalid("models.default", format!("no provider named {target:?}")));
                }
                default = Some(target);
                continue;
            }
            let Some((provider, model)) = target.split_once('/') else {
                return Err(invalid(key, "expected \"provider/model\""));
            };
            if !providers.contains_key(provider) {
                return Err(invalid(key, format!("no provider named {provider:?}")));
            }
            if model.is_empty() {
                return Err(invalid(key, "the model name after `/` is empty"));
            }
            models.insert(id, (provider.to_string(), model.to_string()));
        }
        let families = families(raw.families, &models, default.is_some())?;
        let limits = raw.limits;
        if limits.max_tokens == 0 {
            return Err(invalid("limits.max_tokens", "at least 1"));
        }
        if limits.max_model_calls_per_turn == 0 {
            return Err(invalid("limits.max_model_calls_per_turn", "at least 1"));
        }
        if limits.turn_lease_secs < 3 {
            return Err(invalid("limits.turn_lease_secs", "at least 3"));
        }
        if limits.turn_timeout_secs == 0 {
            return Err(invalid("limits.turn_timeout_secs", "at least 1"));
        }
        let dreams = raw.dreams;
        if dreams.max_running == 0 {
            return Err(invalid("dreams.max_running", "at least 1"));
        }
        if dreams.max_model_calls == 0 || dreams.timeout_secs == 0 {
            return Err(invalid("dreams", "max_model_calls and timeout_secs must be at least 1"));
        }
        let embedder = raw.embeddings.as_ref().map(|e| embedder(e, &providers)).transpose()?;
        Ok(ModelConfig { providers, models, default, families, limits, dreams, embedder })
    }

    /// What embeds memories for semantic search (`[embeddings]`); `None` when the file names no
    /// embeddings provider.
    pub fn embedder(&self) -> Option<&Embedder> {
        self.embedder.as_ref()
    }

    /// The model families rate limits count by: the `[families]` table's, or without one, each
    /// id `[models]` maps as a family of its own.
    pub fn families(&self) -> &[Family] {
        &self.families
    }

    /// The agent's `model.id` → which provider and which provider model name; None = external driver.
    pub fn resolve(&self, agent_model_id: &str) -> Option<Resolved> {
        let (name, model) = match self.models.get(agent_model_id) {
            Some((p, m)) => (p.clone(), m.clone()),
            None => (self.default.clone()?, agent_model_id.to_string()),
        };
        let entry = self.providers.get(&name)?;
        Some(Resolved { provider: Arc::clone(&entry.provider), model, provider_name: name })
    }

    /// The agent model ids the `[models]` table maps, in order.
    pub fn mapped_models(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// Whether any other model id goes to a default provider.
    pub fn has_default(&self) -> bool {
        self.default.is_some()
    }

    /// A provider's settings by name.
    pub fn provider_settings(&self, name: &str) -> Option<&ProviderSettings> {
        self.providers.get(name).map(|e| &e.settings)
    }
}

/// The `[embeddings]` table checked against the providers.
fn embedder(e: &EmbeddingsSettings, providers: &BTreeMap<String, ProviderEntry>) -> Result<Embedder, ConfigError> {
    let Some(entry) = providers.get(&e.provider) else {
        return Err(invalid("embeddings.provider", format!("no provider named {:?}", e.provider)));
    };
    if entry.settings.kind != ProviderKind::OpenAi {
        return Err(invalid(
            "embeddings.provider",
            "an embeddings provider speaks the OpenAI-compatible API (`kind = \"openai\"`, `POST {base_url}/embeddings`)",
        ));
    }
    if e.model.trim().is_empty() {
        return Err(invalid("embeddings.model", "the embedding model's name is empty"));
    }
    if !(1..=MAX_BATCH_SIZE).contains(&e.batch_size) {
        return Err(invalid("embeddings.batch_size", format!("from 1 to {MAX_BATCH_SIZE}")));
    }
    if e.max_input_chars < 64 {
        return Err(invalid("embeddings.max_input_chars", "at least 64"));
    }
    Ok(Embedder::new(entry.settings.clone(), e))
}

/// A TOML error's message without the source excerpt (which could show an `api_key` value).
fn redact_toml_error(e: &toml::de::Error) -> String {
    let mut m = e.message().to_string();
    if let Some(span) = e.span() {
        m.push_str(&format!(" (at byte {})", span.start));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[providers.anthropic]
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8000/v1/"
api_key_env = "OPENAI_API_KEY"
idle_timeout_secs = 30
[models]
"claude-sonnet-4-5" = "anthropic/claude-sonnet-4-5"
"qwen" = "local/Qwen2.5-7B-Instruct"
default = "anthropic"
[limits]
max_tokens = 4096
"#;

    fn env(name: &str) -> Option<String> {
        (name == "ANTHROPIC_API_KEY").then(|| "sk-ant-secret-123".to_string())
    }

    #[test]
    fn parses_the_documented_shape() {
        let c = ModelConfig::from_toml_with_env(FILE, env).unwrap();
        let a = c.provider_settings("anthropic").unwrap();
        assert_eq!(a.base_url, ANTHROPIC_DEFAULT_BASE_URL);
        assert_eq!(a.api_key.as_ref().map(Secret::expose), Some("sk-ant-secret-123"));
        let l = c.provider_settings("local").unwrap();
        assert_eq!(l.base_url, "http://127.0.0.1:8000/v1");
        assert_eq!(l.api_key, None);
        assert_eq!(l.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.limits, Limits { max_tokens: 4096, ..Limits::default() });
        let r = c.resolve("qwen").unwrap();
        assert_eq!((r.provider_name.as_str(), r.model.as_str()), ("local", "Qwen2.5-7B-Instruct"));
        let r = c.resolve("claude-opus-4-1").unwrap();
        assert_eq!((r.provider_name.as_str(), r.model.as_str()), ("anthropic", "claude-opus-4-1"));
    }

    #[test]
    fn without_a_default_unmapped_models_are_external() {
        let text = FILE.replace("default = \"anthropic\"\n", "");
        let c = ModelConfig::from_toml_with_env(&text, env).unwrap();
        assert!(c.resolve("claude-opus-4-1").is_none());
        assert!(c.resolve("qwen").is_some());
        assert!(ModelConfig::from_toml_with_env("", env).unwrap().resolve("x").is_none());
    }

    #[test]
    fn families_group_model_ids_for_rate_limits() {
        let family = |name: &str, models: &[&str]| Family {
            name: name.into(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
        };
        let c = ModelConfig::from_toml_with_env(FILE, env).unwrap();
        assert_eq!(
            c.families(),
            [family("claude-sonnet-4-5", &["claude-sonnet-4-5"]), family("qwen", &["qwen"])],
            "without [families], each mapped id is its own"
        );
        let text = format!("{FILE}[families]\n\"Claude\" = [\"claude-sonnet-4-5\", \"claude-opus-4-1\"]\n");
        let c = ModelConfig::from_toml_with_env(&text, env).unwrap();
        assert_eq!(
            c.families(),
            [family("Claude", &["claude-sonnet-4-5", "claude-opus-4-1"])],
            "the default serves opus"
        );
        #[rustfmt::skip]
        let refused = [
            ("\"Empty\" = []", "at least one agent model id"),
            ("\"--\" = [\"qwen\"]", "needs a letter or digit"),
            ("A = [\"qwen\"]\nB = [\"qwen\"]", "\"qwen\" is already in family \"A\""),
        ];
        for (table, message) in refused {
            let e = ModelConfig::from_toml_with_env(&format!("{FILE}[families]\n{table}\n"), env).unwrap_err();
            assert!(e.to_string().contains(message) && e.to_string().contains("`families."), "{table}: {e}");
        }
        let no_default = FILE.replace("default = \"anthropic\"\n", "") + "[families]\nX = [\"claude-opus-4-1\"]\n";
        let e = ModelConfig::from_toml_with_env(&no_default, env).unwrap_err().to_string();
        assert!(e.contains("not in [models] and there is no default provider"), "{e}");
    }

    #[test]
    fn keys_never_in_debug_or_errors() {
        let c = ModelConfig::from_toml_with_env(FILE, env).unwrap();
        let dbg = format!("{c:?} {:?}", c.resolve("qwen").unwrap());
        assert!(!dbg.contains("sk-ant-secret-123"), "{dbg}");
        assert!(dbg.contains("[redacted]"), "{dbg}");
        // A syntax error on the key's line does not quote the line.
        let bad = "[providers.a]\nkind = \"anthropic\"\napi_key = \"sk-ant-secret-123\nx\"\n";
        let e = ModelConfig::from_toml_with_env(bad, env).unwrap_err().to_string();
        assert!(!e.contains("sk-ant-secret-123"), "{e}");
        let bad = "[providers.a]\nkind = \"anthropic\"\napi_key = \"sk-ant-secret-123\"\napi_key_env = \"X\"\n";
        let e = ModelConfig::from_toml_with_env(bad, env).unwrap_err().to_string();
        assert!(!e.contains("sk-ant-secret-123"), "{e}");
    }

    #[test]
    fn from_file_reads_or_says_which_file() {
        let dir = std::env::temp_dir().join(format!("mnemo-model-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("models.toml");
        std::fs::write(
            &path,
            "[providers.l]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[models]\ndefault = \"l\"\n",
        )
        .unwrap();
        assert_eq!(ModelConfig::from_file(&path).unwrap().resolve("m").unwrap().provider_name, "l");
        let e = ModelConfig::from_file(&dir.join("missing.toml")).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }) && e.to_string().contains("missing.toml"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn embeddings_name_an_openai_provider_and_a_model() {
        let text = "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\napi_key = \"sk-embed\"\n\
                    [embeddings]\nprovider = \"local\"\nmodel = \"nomic-embed-text\"\n";
        let config = ModelConfig::from_toml_with_env(text, env).unwrap();
        let e = config.embedder().expect("an embedder");
        assert_eq!((e.model(), e.batch_size()), ("nomic-embed-text", 32));
        assert!(!format!("{config:?}").contains("sk-embed"));
        assert!(ModelConfig::from_toml_with_env("", env).unwrap().embedder().is_none());
        let unknown = "[providers.local]\nkind = \"openai\"\nbase_url = \"http://h\"\n[embeddings]\nprovider = \"local\"\nmodel = \"m\"\ndims = 3\n";
        let e = ModelConfig::from_toml_with_env(unknown, env).unwrap_err();
        assert!(e.to_string().contains("dims"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[providers.a]\nkind = \"gemini\"\napi_key = \"k\"\n", "providers.a.kind"),
            ("[providers.a]\nkind = \"openai\"\n", "providers.a.base_url"),
            ("[providers.a]\nkind = \"openai\"\nbase_url = \"ftp://x\"\n", "providers.a.base_url"),
            ("[providers.a]\nkind = \"anthropic\"\napi_key_env = \"NOPE\"\n", "providers.a.api_key_env"),
            ("[providers.a]\nkind = \"anthropic\"\n", "providers.a.api_key_env"),
            ("[providers.a]\nkind = \"anthropic\"\napi_key = \"k\\u0007ey\"\n", "providers.a.api_key"),
            (
                "[providers.a]\nkind = \"anthropic\"\napi_key = \"k\"\nidle_timeout_secs = 0\n",
                "providers.a.idle_timeout_secs",
            ),
            ("[models]\nx = \"nobody/m\"\n", "models.\"x\""),
            ("[providers.a]\nkind = \"anthropic\"\napi_key = \"k\"\n[models]\nx = \"a\"\n", "models.\"x\""),
            ("[models]\ndefault = \"nobody\"\n", "models.default"),
            ("[limits]\nmax_tokens = 0\n", "limits.max_tokens"),
            ("[limits]\nturn_lease_secs = 2\n", "limits.turn_lease_secs"),
            ("[embeddings]\nprovider = \"nobody\"\nmodel = \"m\"\n", "embeddings.provider"),
            (
                "[providers.a]\nkind = \"anthropic\"\napi_key = \"k\"\n[embeddings]\nprovider = \"a\"\nmodel = \"m\"\n",
                "embeddings.provider",
            ),
            (
                "[providers.a]\nkind = \"openai\"\nbase_url = \"http://h\"\n[embeddings]\nprovider = \"a\"\nmodel = \" \"\n",
                "embeddings.model",
            ),
            (
                "[providers.a]\nkind = \"openai\"\nbase_url = \"http://h\"\n[embeddings]\nprovider = \"a\"\nmodel = \"m\"\nbatch_size = 0\n",
                "embeddings.batch_size",
            ),
            (
                "[providers.a]\nkind = \"openai\"\nbase_url = \"http://h\"\n[embeddings]\nprovider = \"a\"\nmodel = \"m\"\nmax_input_chars = 3\n",
                "embeddings.max_input_chars",
            ),
        ];
        for (text, key) in cases {
            let e = ModelConfig::from_toml_with_env(text, env).unwrap_err();
            assert!(e.to_string().contains(&format!("`{key}`")), "{text}: {e}");
        }
        let e = ModelConfig::from_toml_with_env("[providers.a]\nkind = \"anthropic\"\nbogus = 1\n", env).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = ModelConfig::from_toml_with_env("[limits]\nmax_tokens = \"many\"\n", env).unwrap_err();
        assert!(matches!(e, ConfigError::Syntax(_)), "{e}");
    }
}
