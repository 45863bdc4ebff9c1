//! Every store operation, written once.
//!
//! An operation here loads what a rule of [`crate::rules`] needs, asks the rule, and writes what
//! it decided — the events, the lease transitions, the webhook outbox — through the SQL
//! primitives of one transaction. The primitives are per-domain traits ([`SessionSql`],
//! [`WorkSql`], [`WebhookSql`], …) that each backend implements on its own transaction:
//! PostgreSQL on a pooled transaction, SQLite on its writer thread's connection. A backend
//! decides nothing: it runs SQL, holds the locks a primitive's name promises (`lock_*` and
//! `hold_*` lock on PostgreSQL; SQLite's single writer already excludes every other writer) and
//! reports rows. Whether to retry a transaction, and how writes are batched, stays the
//! backend's too.
//!
//! The traits use `async fn`. PostgreSQL's primitives await the database; SQLite's never
//! suspend, and [`run_ready`] runs an operation over them to completion on the writer thread.
//! Operations are generic over the backend, so whether their futures are `Send` is judged per
//! backend: PostgreSQL's are, as its store's methods need.

// The traits are implemented for concrete transaction types only, whose futures' auto traits the
// compiler sees; no caller needs a `Send` bound it cannot name.
#![allow(async_fn_in_trait)]

pub mod agents;
pub mod audit;
pub mod console;
pub mod credentials;
pub mod dreams;
pub mod embeddings;
pub mod environments;
pub mod events;
pub mod memories;
pub mod people;
pub mod rate_limits;
pub mod retention;
pub mod sessions;
pub mod sso;
pub mod stores;
pub mod versions;
pub mod webhooks;
pub mod work;
pub mod workspaces;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

pub use agents::AgentRow;
pub use agents::AgentSql;
pub use audit::{AuditFilter, AuditSql, AuditWindow, NewAuditEvent};
pub use console::{ConsoleKey, ConsoleRow, ConsoleSql};
pub use credentials::CredentialSql;
pub use dreams::DreamSql;
pub use embeddings::EmbeddingSql;
pub use environments::EnvironmentColumns;
pub use environments::{EnvironmentRow, EnvironmentRowSql, EnvironmentSql};
pub use events::{SessionRow, SessionSql};
pub use memories::{MemoryRow, MemorySql, NewVersion, Written};
pub use people::PeopleSql;
pub use rate_limits::{BucketKey, BucketRow, RateLimitSql};
pub use retention::RetentionSql;
pub use sessions::{NewSessionRow, SessionRowSql};
pub use sso::SsoSql;
pub use stores::{LockedStore, StoreSql};
pub use versions::{VersionRow, VersionSql};
pub use webhooks::WebhookSql;
pub use webhooks::{DeliveryRow, EndpointRow, NewEndpointRow, SendRow};
pub use work::{NewWork, StoredToken, TokenHolder, WorkFilter, WorkRow, WorkSql};
pub use workspaces::{NewWorkspaceRow, WorkspaceSql};

use crate::{Result, StoreError};

/// A row's number: the integer key a backend orders and joins rows by.
pub type Seq = i64;
/// Microseconds since the Unix epoch.
pub type Micros = i64;

/// The transaction's clock.
pub trait Clock {
    /// Now, in microseconds since the epoch. PostgreSQL reads the database server's clock (one
    /// clock for every replica), when asked rather than at the transaction's start, so a writer
    /// that waited for a lock stamps its rows after the writer it waited for.
    async fn now(&self) -> Result<Micros>;
}

/// How a transaction tells others what it changed.
pub trait SignalSql {
    /// Sends `signal` once the transaction commits, to this process and (on a backend several
    /// processes share) to every other; a transaction that rolls back sends nothing. A backend
    /// with one process drops the signals only other processes need.
    async fn signal(&self, signal: crate::Signal) -> Result<()>;
}

/// Runs `op` to completion without an executor: every primitive it awaits must be ready at
/// once, as SQLite's are (they run on the calling thread). One that is not is a bug, reported as
/// a failure rather than a hang.
pub fn run_ready<T>(op: impl Future<Output = Result<T>>) -> Result<T> {
    let op = pin!(op);
    match op.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(StoreError::backend("a store operation waited on a primitive that cannot wait")),
    }
}

/// `None` for an object that does not exist; any other failure stays a failure.
pub fn found<T>(lookup: Result<T>) -> Result<Option<T>> {
    match lookup {
        Ok(object) => Ok(Some(object)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(StoreError::Coded { code, .. }) if code.is_not_found() => Ok(None),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_over_ready_primitives_runs_to_its_end() {
        async fn ready(n: i64) -> Result<i64> {
            Ok(n + 1)
        }
        let out = run_ready(async { Ok(ready(1).await? + ready(2).await?) });
        assert_eq!(out.unwrap(), 5);
    }

    #[test]
    fn an_operation_that_would_wait_is_a_failure_not_a_hang() {
        let out: Result<()> = run_ready(async {
            std::future::pending::<()>().await;
            Ok(())
        });
        let Err(StoreError::Backend(cause)) = out else { panic!("{out:?}") };
        assert!(cause.to_string().contains("cannot wait"), "{cause}");
    }
}
