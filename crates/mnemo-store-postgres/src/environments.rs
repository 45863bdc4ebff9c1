//! Environments and their keys. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async)]

use mnemo_api::{Environment, EnvironmentId, EnvironmentKey, EnvironmentKeyId};
use mnemo_store::{CredentialHash, Cursor, EnvironmentPatch, Listing, NewEnvironment, Result};

use crate::engine::{Tx, failure};

pub(crate) async fn get_with_seq(tx: &Tx<'_>, id: &EnvironmentId) -> Result<(Environment, i64)> { Err(failure("unported")) }
pub(crate) async fn create(tx: &Tx<'_>, new: &NewEnvironment) -> Result<Environment> { Err(failure("unported")) }
pub(crate) async fn update(tx: &Tx<'_>, id: &EnvironmentId, patch: EnvironmentPatch) -> Result<Environment> { Err(failure("unported")) }
pub(crate) async fn list(tx: &Tx<'_>, include_archived: bool, limit: u32, after: Option<&Cursor>) -> Result<Listing<Environment>> { Err(failure("unported")) }
pub(crate) async fn archive(tx: &Tx<'_>, id: &EnvironmentId) -> Result<Environment> { Err(failure("unported")) }
pub(crate) async fn delete(tx: &Tx<'_>, id: &EnvironmentId) -> Result<()> { Err(failure("unported")) }
pub(crate) async fn create_key(tx: &Tx<'_>, environment: &EnvironmentId, hash: CredentialHash) -> Result<EnvironmentKey> { Err(failure("unported")) }
pub(crate) async fn revoke_key(tx: &Tx<'_>, environment: &EnvironmentId, id: &EnvironmentKeyId) -> Result<EnvironmentKey> { Err(failure("unported")) }
pub(crate) async fn list_keys(tx: &Tx<'_>, environment: &EnvironmentId) -> Result<Vec<EnvironmentKey>> { Err(failure("unported")) }
pub(crate) async fn find_key(tx: &Tx<'_>, hash: &CredentialHash) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> { Err(failure("unported")) }
