//! Agents and their versions. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async)]

use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec};
use mnemo_store::{Cursor, Listing, Result};

use crate::engine::{Tx, failure};

pub(crate) async fn get(tx: &Tx<'_>, id: &AgentId, version: Option<u32>) -> Result<Agent> { Err(failure("unported")) }
pub(crate) async fn create(tx: &Tx<'_>, spec: &AgentSpec) -> Result<Agent> { Err(failure("unported")) }
pub(crate) async fn update(tx: &Tx<'_>, id: &AgentId, base: u32, params: &AgentParams) -> Result<Agent> { Err(failure("unported")) }
pub(crate) async fn list(tx: &Tx<'_>, include_archived: bool, limit: u32, after: Option<&Cursor>) -> Result<Listing<Agent>> { Err(failure("unported")) }
pub(crate) async fn archive(tx: &Tx<'_>, id: &AgentId) -> Result<Agent> { Err(failure("unported")) }
