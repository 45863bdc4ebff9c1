//! Agents: the primitives other operations need of them.

use mnemo_api::{Agent, AgentId};

use super::Clock;
use crate::Result;

/// SQL over agents and their versions.
pub trait AgentSql: Clock {
    /// Version `version` of the agent (`None`: its latest). Unknown: not found.
    async fn get_agent(&self, id: &AgentId, version: Option<u32>) -> Result<Agent>;
}
