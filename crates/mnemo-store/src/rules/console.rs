//! Console sessions: how long a sign-in lasts and how long an ended one is kept.
//!
//! A person signs in to the web console with an API key and gets a cookie; its session lives
//! for the TTL the server asks for, clamped so its end can always be shown, and a session that
//! ended (expired or revoked) is kept a day — long enough to tell "signed out" from "unknown"
//! in the logs — before the next sign-in by the same key deletes it.

use crate::ops::Micros;

/// How long an expired or revoked console session is kept before a sign-in by its key deletes
/// it: 24 hours.
pub const ENDED_KEPT_MICROS: Micros = 24 * 60 * 60 * 1_000_000;

/// The latest end a console session can have: the last microsecond of year 9999, beyond which
/// a timestamp cannot be shown.
pub const LATEST_EXPIRY: Micros = 253_402_300_799_000_000;

/// When a session started at `now` with `ttl_seconds` ends: far in the future for an absurd
/// TTL (clamped to [`LATEST_EXPIRY`]), never before `now`.
pub fn expiry(now: Micros, ttl_seconds: u64) -> Micros {
    let ttl = i64::try_from(ttl_seconds).unwrap_or(i64::MAX).saturating_mul(1_000_000);
    now.saturating_add(ttl).min(LATEST_EXPIRY.max(now))
}

/// Sessions of a key that ended before this (at `now`) are deleted by its next sign-in.
pub fn kept_since(now: Micros) -> Micros {
    now.saturating_sub(ENDED_KEPT_MICROS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Micros = 86_400_000_000;

    #[test]
    fn a_session_ends_after_its_ttl_clamped_to_a_showable_time() {
        let cases = [
            // (now, ttl seconds, ends)
            (5, 2, 2_000_005),
            (5, 0, 5),
            (0, 3_600, 3_600_000_000),
            (5, u64::MAX, LATEST_EXPIRY),
            (5, i64::MAX as u64, LATEST_EXPIRY),
            (LATEST_EXPIRY - 1, 10, LATEST_EXPIRY),
            // A clock past the latest showable time never ends a session before it starts.
            (LATEST_EXPIRY + 7, 10, LATEST_EXPIRY + 7),
            (i64::MAX, 10, i64::MAX),
        ];
        for (now, ttl, ends) in cases {
            assert_eq!(expiry(now, ttl), ends, "now {now}, ttl {ttl}");
        }
        assert!(crate::row::ts(expiry(5, u64::MAX)).timestamp() > 0);
    }

    #[test]
    fn ended_sessions_are_kept_one_day() {
        let cases = [(10 * DAY, 9 * DAY), (DAY, 0), (0, -DAY), (i64::MIN, i64::MIN)];
        for (now, since) in cases {
            assert_eq!(kept_since(now), since, "now {now}");
        }
        assert_eq!(ENDED_KEPT_MICROS, DAY);
    }
}
