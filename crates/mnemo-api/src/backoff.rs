//! Capped back-off with jitter: the one delay rule behind every retry loop of mnemo (the
//! client's requests and streams, the worker's polls and posts, the sync engine's downloads and
//! teardown, the agent loop's model calls, webhook deliveries, the stores' transaction retries).
//!
//! The type only computes delays; each caller sleeps (with tokio, a thread, or not at all: a
//! webhook delivery stores its next attempt's time). That keeps it in this crate, which every
//! other crate may depend on, and keeps the rule table-testable: [`Backoff::delay_with`] takes
//! the random draw as an argument. Each caller keeps its own numbers as a `const` [`Backoff`].

use std::time::Duration;

use rand::Rng;

/// How the delay grows from one retry to the next, before the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// `initial × 2^attempt`.
    Double,
    /// `initial × (attempt + 1)`.
    Linear,
}

/// How a delay is randomised, so that many clients failing together do not retry together.
/// Each takes a draw `r` uniform in `[0, 1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// The delay as computed.
    None,
    /// A random part of the delay, less than this fraction of it, is taken off:
    /// `delay × (1 − r × fraction)`.
    Shave(f64),
    /// A random amount below this is added: `delay + r × extra`.
    Add(Duration),
    /// "Full jitter": anything from nothing to the delay, `delay × r`.
    Full,
    /// Spread either way by up to this fraction (0.25: ±25 %): `delay × (1 + fraction × (2r − 1))`.
    Spread(f64),
}

/// `min(growth(initial, attempt), max)`, then [`Jitter`]; at most `retries` retries when set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The delay before the first retry (attempt 0).
    pub initial: Duration,
    /// The cap of the growth (before jitter).
    pub max: Duration,
    pub growth: Growth,
    pub jitter: Jitter,
    /// How many retries [`Backoff::retry`] allows (`None`: no limit; the caller bounds the loop
    /// some other way, by time or by cancellation).
    pub retries: Option<u32>,
}

impl Backoff {
    /// `initial`, doubling up to `max`, no jitter, no limit.
    pub const fn doubling(initial: Duration, max: Duration) -> Self {
        Self { initial, max, growth: Growth::Double, jitter: Jitter::None, retries: None }
    }

    /// `step`, `2 × step`, `3 × step`… up to `max`, no jitter, no limit.
    pub const fn linear(step: Duration, max: Duration) -> Self {
        Self { initial: step, max, growth: Growth::Linear, jitter: Jitter::None, retries: None }
    }

    /// The same delay every time (before jitter).
    pub const fn constant(delay: Duration) -> Self {
        Self::doubling(delay, delay)
    }

    /// This back-off with `jitter`.
    pub const fn with_jitter(self, jitter: Jitter) -> Self {
        Self { jitter, ..self }
    }

    /// This back-off allowing at most `retries` retries (`retries + 1` attempts in all).
    pub const fn with_retries(self, retries: u32) -> Self {
        Self { retries: Some(retries), ..self }
    }

    /// The delay before retry number `attempt` (0 for the first), jittered with a fresh draw.
    pub fn delay(&self, attempt: u32) -> Duration {
        let r = match self.jitter {
            Jitter::None => 0.0,
            _ => rand::rng().random_range(0.0..1.0),
        };
        self.delay_with(attempt, r)
    }

    /// The delay before retry number `attempt` (0 for the first) for the draw `r` in `[0, 1)`
    /// (clamped): the pure rule, for tests and for callers that draw their own randomness.
    pub fn delay_with(&self, attempt: u32, r: f64) -> Duration {
        let base = self.base(attempt).as_secs_f64();
        let r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
        let secs = match self.jitter {
            Jitter::None => base,
            Jitter::Shave(fraction) => base * (1.0 - r * fraction.clamp(0.0, 1.0)),
            Jitter::Add(extra) => base + r * extra.as_secs_f64(),
            Jitter::Full => base * r,
            Jitter::Spread(fraction) => base * (1.0 + fraction * (2.0 * r - 1.0)).max(0.0),
        };
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }

    /// The delay before retry number `attempt` (0 for the first), or `None` when the retries
    /// allowed are used up.
    pub fn retry(&self, attempt: u32) -> Option<Duration> {
        match self.retries {
            Some(limit) if attempt >= limit => None,
            _ => Some(self.delay(attempt)),
        }
    }

    /// The capped delay before jitter, computed in whole durations so that it is exact.
    fn base(&self, attempt: u32) -> Duration {
        let grown = match self.growth {
            Growth::Double => self.initial.saturating_mul(2u32.saturating_pow(attempt)),
            Growth::Linear => self.initial.saturating_mul(attempt.saturating_add(1)),
        };
        grown.min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_delay_sequences_of_each_shape() {
        // (back-off, draw, delays in ms for attempts 0, 1, 2…)
        let table: &[(Backoff, f64, &[u64])] = &[
            (Backoff::doubling(ms(500), ms(10_000)), 0.9, &[500, 1000, 2000, 4000, 8000, 10_000, 10_000]),
            (Backoff::linear(ms(200), ms(10_000)), 0.9, &[200, 400, 600, 800, 1000]),
            (Backoff::linear(ms(3), ms(1_000)), 0.0, &[3, 6, 9, 12]),
            (Backoff::constant(ms(1_000)), 0.5, &[1000, 1000, 1000]),
            // Shave a quarter at most: the draw 0.5 takes an eighth off.
            (Backoff::doubling(ms(800), ms(3_200)).with_jitter(Jitter::Shave(0.25)), 0.5, &[700, 1400, 2800, 2800]),
            (
                Backoff::doubling(ms(1_000), ms(4_000)).with_jitter(Jitter::Add(ms(1_000))),
                0.5,
                &[1500, 2500, 4500, 4500],
            ),
            (Backoff::doubling(ms(100), ms(1_000)).with_jitter(Jitter::Full), 0.5, &[50, 100, 200, 400, 500]),
            (Backoff::doubling(ms(100), ms(1_000)).with_jitter(Jitter::Full), 0.0, &[0, 0, 0]),
            (Backoff::doubling(ms(30_000), ms(3_600_000)).with_jitter(Jitter::Spread(0.25)), 0.0, &[22_500, 45_000]),
            (Backoff::doubling(ms(30_000), ms(3_600_000)).with_jitter(Jitter::Spread(0.25)), 1.0, &[37_500, 75_000]),
            (Backoff::doubling(ms(30_000), ms(3_600_000)).with_jitter(Jitter::Spread(0.25)), 0.5, &[30_000, 60_000]),
        ];
        for (i, (backoff, r, want)) in table.iter().enumerate() {
            let got: Vec<u64> = (0..want.len() as u32).map(|a| backoff.delay_with(a, *r).as_millis() as u64).collect();
            assert_eq!(&got, want, "row {i}: {backoff:?}");
        }
    }

    #[test]
    fn huge_attempts_stay_at_the_cap() {
        for backoff in [Backoff::doubling(ms(500), ms(10_000)), Backoff::linear(ms(500), ms(10_000))] {
            assert_eq!(backoff.delay(u32::MAX), ms(10_000));
            assert_eq!(backoff.delay(64), ms(10_000));
        }
        let uncapped = Backoff::doubling(Duration::from_secs(u64::MAX / 2), Duration::MAX);
        assert_eq!(uncapped.delay(40), Duration::MAX, "saturates instead of overflowing");
    }

    #[test]
    fn jitter_stays_in_its_band() {
        let shaved = Backoff::doubling(ms(500), ms(8_000)).with_jitter(Jitter::Shave(0.25));
        let added = Backoff::doubling(ms(1_000), ms(60_000)).with_jitter(Jitter::Add(ms(1_000)));
        let full = Backoff::doubling(ms(1_000), ms(60_000)).with_jitter(Jitter::Full);
        let spread = Backoff::doubling(ms(1_000), ms(60_000)).with_jitter(Jitter::Spread(0.25));
        for attempt in 0..20 {
            let base = (0.5 * 2f64.powi(attempt as i32)).min(8.0);
            let d = shaved.delay(attempt).as_secs_f64();
            assert!(d > base * 0.75 - 1e-9 && d <= base, "attempt {attempt}: {d}");
            let base = 2f64.powi(attempt.min(6) as i32).min(60.0);
            let d = added.delay(attempt).as_secs_f64();
            assert!(d >= base && d < base + 1.0, "attempt {attempt}: {d}");
            let d = full.delay(attempt).as_secs_f64();
            assert!((0.0..base).contains(&d), "attempt {attempt}: {d}");
            let d = spread.delay(attempt).as_secs_f64();
            assert!(d >= base * 0.75 - 1e-9 && d <= base * 1.25 + 1e-9, "attempt {attempt}: {d}");
        }
    }

    #[test]
    fn draws_outside_the_unit_interval_are_clamped() {
        let b = Backoff::constant(ms(1_000)).with_jitter(Jitter::Full);
        assert_eq!(b.delay_with(0, -3.0), Duration::ZERO);
        assert_eq!(b.delay_with(0, 7.0), ms(1_000));
        assert_eq!(b.delay_with(0, f64::NAN), Duration::ZERO);
        let b = Backoff::constant(ms(1_000)).with_jitter(Jitter::Spread(2.0));
        assert_eq!(b.delay_with(0, 0.0), Duration::ZERO, "a spread wider than the delay never goes negative");
    }

    #[test]
    fn retries_are_counted_only_when_limited() {
        let limited = Backoff::constant(ms(1)).with_retries(3);
        let allowed: Vec<bool> = (0..5).map(|a| limited.retry(a).is_some()).collect();
        assert_eq!(allowed, [true, true, true, false, false]);
        assert_eq!(Backoff::constant(ms(1)).with_retries(0).retry(0), None);
        assert_eq!(Backoff::constant(ms(1)).retry(u32::MAX), Some(ms(1)));
    }
}
