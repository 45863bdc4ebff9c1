//! Environments: the primitives other operations need of them.

use mnemo_api::{Environment, EnvironmentId};

use super::{Clock, Seq};
use crate::Result;

/// An environment and its row number.
#[derive(Debug, Clone)]
pub struct EnvironmentRow {
    pub environment: Environment,
    pub seq: Seq,
}

/// SQL over environments.
pub trait EnvironmentSql: Clock {
    /// The environment, held against deletion until the transaction ends (PostgreSQL: `FOR KEY
    /// SHARE`), so rows written under it never reference a deleted one. Unknown: not found.
    async fn hold_environment(&self, id: &EnvironmentId) -> Result<EnvironmentRow>;
}
