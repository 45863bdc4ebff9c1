//! Version retention (issue 35 item 3): how long a store keeps the versions of its memories,
//! and which versions a purge may delete.
//!
//! A server has a default window (`--version-retention`, default: keep everything); a store may
//! override it (a window of its own, or `forever`). Versions created before `now − window` are
//! purged, except each live memory's newest version, which is its current content. A deleted
//! memory has no newest version to keep: its history goes version by version as each ages out,
//! the deletion last. Redacted versions are purged like any other.

#[cfg(test)]
use std::time::Duration;

/// How many versions one purge transaction deletes at most: small enough that a store's
/// writers never wait long behind it, large enough that a million versions take a few hundred
/// transactions.
pub const PURGE_BATCH: u32 = 1000;

pub use mnemo_api::{BadRetention, Retention};

/// What applies to a store: its own retention, else the server's.
pub fn effective(server_default: Retention, store_override: Option<Retention>) -> Retention {
    store_override.unwrap_or(server_default)
}

/// The instant (microseconds) before which versions are purged at `now`; `None`: nothing is.
pub fn cutoff(now_micros: i64, retention: Retention) -> Option<i64> {
    match retention {
        Retention::Forever => None,
        Retention::Window(window) => {
            let micros = i64::try_from(window.as_micros()).unwrap_or(i64::MAX);
            Some(now_micros.saturating_sub(micros))
        }
    }
}

/// One version as a purge sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionAge {
    /// When it was created (microseconds).
    pub created_at: i64,
    /// Whether it is a live memory's newest version (its current content).
    pub current: bool,
}

/// Whether a purge whose cutoff is `cutoff` deletes `version`.
pub fn purgeable(version: VersionAge, cutoff: i64) -> bool {
    version.created_at < cutoff && !version.current
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(secs: u64) -> Retention {
        Retention::Window(Duration::from_secs(secs))
    }

    #[test]
    fn a_stores_own_retention_wins_over_the_servers() {
        let rows = [
            (Retention::Forever, None, Retention::Forever),
            (window(60), None, window(60)),
            (window(60), Some(Retention::Forever), Retention::Forever),
            (Retention::Forever, Some(window(5)), window(5)),
        ];
        for (server, store, want) in rows {
            assert_eq!(effective(server, store), want, "{server} / {store:?}");
        }
    }

    #[test]
    fn which_versions_a_purge_deletes() {
        let now = 1_000_000_000;
        assert_eq!(cutoff(now, Retention::Forever), None);
        let cut = cutoff(now, window(10)).unwrap();
        assert_eq!(cut, now - 10_000_000);
        let rows = [
            ("old, superseded", VersionAge { created_at: cut - 1, current: false }, true),
            ("old, a live memory's newest", VersionAge { created_at: cut - 1, current: true }, false),
            ("at the cutoff", VersionAge { created_at: cut, current: false }, false),
            ("young", VersionAge { created_at: cut + 1, current: false }, false),
        ];
        for (why, version, want) in rows {
            assert_eq!(purgeable(version, cut), want, "{why}");
        }
        assert_eq!(cutoff(i64::MIN + 5, window(10)), Some(i64::MIN), "never wraps");
    }
}
