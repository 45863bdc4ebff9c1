//! The OpenAI-compatible chat completions API.
use crate::config::ProviderSettings;
use crate::{ModelError, ModelRequest, Provider, ReplyStream};

/// A provider for OpenAI-compatible chat completions (vLLM, Ollama, llama.cpp...).
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    settings: ProviderSettings,
}
impl OpenAiProvider {
    pub fn new(settings: ProviderSettings) -> Self {
        OpenAiProvider { settings }
    }
}
#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    async fn stream(&self, _request: ModelRequest) -> Result<ReplyStream, ModelError> {
        Err(ModelError::Transport(format!("not yet implemented ({})", self.settings.base_url)))
    }
}
