//! Version retention (issue 35 item 3): how long a store keeps the versions of its memories,
//! and which versions a purge may delete.
//!
//! A server has a default window (`--version-retention`, default: keep everything); a store may
//! override it (a window of its own, or `forever`). Versions created before `now − window` are
//! purged, except each live memory's newest version, which is its current content. A deleted
//! memory has no newest version to keep: its history goes version by version as each ages out,
//! the deletion last. Redacted versions are purged like any other.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How many versions one purge transaction deletes at most: small enough that a store's
/// writers never wait long behind it, large enough that a million versions take a few hundred
/// transactions.
pub const PURGE_BATCH: u32 = 1000;

/// How long versions are kept: a window, or forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retention {
    /// Every version is kept.
    Forever,
    /// Versions older than this are purged (each live memory's newest kept).
    Window(Duration),
}

/// The longest window: a century. Longer is `forever` in all but name, and refusing it keeps
/// `now − window` inside the clock's range.
const MAX_WINDOW_SECS: u64 = 100 * 365 * 86_400;

/// Why a retention is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a version retention is a whole number followed by `s`, `m`, `h` or `d` (`90s`, `12h`, `30d`), at least 1 second and at most 100 years, or `forever` (got `{0}`)"
)]
pub struct BadRetention(pub String);

impl FromStr for Retention {
    type Err = BadRetention;

    fn from_str(raw: &str) -> Result<Self, BadRetention> {
        let bad = || BadRetention(raw.chars().take(40).collect());
        let text = raw.trim();
        if text.eq_ignore_ascii_case("forever") {
            return Ok(Self::Forever);
        }
        let unit_at = text.len().checked_sub(1).filter(|i| text.is_char_boundary(*i)).ok_or_else(bad)?;
        let (number, unit) = text.split_at(unit_at);
        let scale = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => return Err(bad()),
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let secs = number.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)).ok_or_else(bad)?;
        if secs == 0 || secs > MAX_WINDOW_SECS {
            return Err(bad());
        }
        Ok(Self::Window(Duration::from_secs(secs)))
    }
}

impl fmt::Display for Retention {
    /// The shortest exact form (`30d`, `36h`, `90s`), or `forever`: what parses back to it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self::Window(window) = self else { return f.write_str("forever") };
        let secs = window.as_secs();
        for (unit, scale) in [("d", 86_400), ("h", 3600), ("m", 60)] {
            if secs % scale == 0 {
                return write!(f, "{}{unit}", secs / scale);
            }
        }
        write!(f, "{secs}s")
    }
}

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
    fn parses_what_an_operator_writes() {
        let table: &[(&str, Option<Retention>)] = &[
            ("30d", Some(window(30 * 86_400))),
            ("12h", Some(window(12 * 3600))),
            ("90s", Some(window(90))),
            ("45m", Some(window(45 * 60))),
            (" 7d ", Some(window(7 * 86_400))),
            ("forever", Some(Retention::Forever)),
            ("Forever", Some(Retention::Forever)),
            ("36500d", Some(window(36_500 * 86_400))),
            ("0d", None),
            ("36501d", None),
            ("99999999999999999999d", None),
            ("30", None),
            ("d", None),
            ("-3d", None),
            ("1.5h", None),
            ("30 d", None),
            ("3w", None),
            ("", None),
            ("é", None),
            ("3é", None),
        ];
        for (raw, want) in table {
            assert_eq!(raw.parse::<Retention>().ok(), *want, "{raw:?}");
        }
        let err = "3w".parse::<Retention>().unwrap_err().to_string();
        assert!(err.contains("`30d`") && err.contains("`forever`") && err.contains("(got `3w`)"), "{err}");
    }

    #[test]
    fn displays_the_shortest_exact_form() {
        for (secs, want) in [(86_400 * 30, "30d"), (3600 * 36, "36h"), (90, "90s"), (120, "2m"), (86_400 + 1, "86401s")]
        {
            assert_eq!(window(secs).to_string(), want);
            assert_eq!(want.parse::<Retention>().unwrap(), window(secs), "{want} parses back");
        }
        assert_eq!(Retention::Forever.to_string(), "forever");
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
