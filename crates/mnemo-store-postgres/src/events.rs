//! Session events. (Being ported from the SQLite backend.)
#![allow(unused_variables, clippy::unused_async, clippy::needless_pass_by_value)]

use mnemo_api::{Event, SessionId};
use mnemo_store::{Appended, EventAuthor, ListEvents, Listing, Result, SessionEvent};

use crate::engine::{Tx, failure};

pub(crate) async fn list(tx: &Tx<'_>, session: &SessionId, q: &ListEvents) -> Result<Listing<SessionEvent>> { Err(failure("unported")) }
pub(crate) async fn after(tx: &Tx<'_>, session: &SessionId, after: i64) -> Result<Vec<SessionEvent>> { Err(failure("unported")) }
pub(crate) async fn append(tx: &Tx<'_>, session: &SessionId, events: Vec<Event>, author: EventAuthor, lease_ttl: u64) -> Result<Appended> { Err(failure("unported")) }
