//! Capped exponential back-off with jitter: the one delay rule behind every retry loop of the
//! client, the worker and the CLI. Each caller keeps its own numbers as a `const` [`Backoff`].

use std::time::Duration;

use rand::Rng;

/// How a delay is randomised, so that many clients failing together do not retry together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// The delay as computed.
    None,
    /// A random part of the delay, less than this fraction of it, is taken off:
    /// `delay × (1 − uniform(0, fraction))`.
    Shave(f64),
    /// A random amount below this is added: `delay + uniform(0, extra)`.
    Add(Duration),
}

/// `min(initial × 2^attempt, max)`, then [`Jitter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The delay before the first retry (attempt 0).
    pub initial: Duration,
    /// The cap of the doubling (before jitter).
    pub max: Duration,
    pub jitter: Jitter,
}

impl Backoff {
    /// The delay before retry number `attempt` (0 for the first).
    pub fn delay(&self, attempt: u32) -> Duration {
        let grown = self.initial.as_secs_f64() * 2f64.powi(attempt.min(1023) as i32);
        let base = grown.min(self.max.as_secs_f64());
        let secs = match self.jitter {
            Jitter::None => base,
            Jitter::Shave(fraction) if fraction > 0.0 => base * (1.0 - rand::rng().random_range(0.0..fraction)),
            Jitter::Add(extra) if !extra.is_zero() => base + rand::rng().random_range(0.0..extra.as_secs_f64()),
            Jitter::Shave(_) | Jitter::Add(_) => base,
        };
        Duration::from_secs_f64(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn backoff(initial_ms: u64, max_ms: u64, jitter: Jitter) -> Backoff {
        Backoff { initial: Duration::from_millis(initial_ms), max: Duration::from_millis(max_ms), jitter }
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        let b = backoff(500, 10_000, Jitter::None);
        let delays: Vec<u128> = (0..8).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(10), "huge attempts stay at the cap");
    }

    #[test]
    fn jitter_stays_in_its_band() {
        let shaved = backoff(500, 8_000, Jitter::Shave(0.25));
        let added = backoff(1_000, 60_000, Jitter::Add(Duration::from_secs(1)));
        for attempt in 0..20 {
            let base = (0.5 * 2f64.powi(attempt as i32)).min(8.0);
            let d = shaved.delay(attempt).as_secs_f64();
            assert!(d > base * 0.75 - 1e-9 && d <= base, "attempt {attempt}: {d}");
            let base = 2f64.powi(attempt.min(6) as i32).min(60.0);
            let d = added.delay(attempt).as_secs_f64();
            assert!(d >= base && d < base + 1.0, "attempt {attempt}: {d}");
        }
    }

    #[test]
    fn a_constant_with_jitter_is_a_random_interval() {
        let b = backoff(1_000, 1_000, Jitter::Add(Duration::from_secs(2)));
        for attempt in 0..10 {
            let d = b.delay(attempt).as_secs_f64();
            assert!((1.0..3.0).contains(&d), "{d}");
        }
        assert_eq!(backoff(1_000, 1_000, Jitter::Shave(0.0)).delay(3), Duration::from_secs(1));
    }
}
