//! Throttled guessing: failed authentications (an API call whose key is unknown, a console
//! sign-in that fails) are rate limited per client address.
//!
//! Each failure takes a cell of the address's budget (a GCRA limiter from `governor`: a burst of
//! `failures_per_minute`, refilled at that rate). A failure past the budget is answered `429`
//! with `retry-after`, and from then until the budget refills the address is *blocked*: a
//! credential it presents is not even looked up, so a right guess and a wrong one get the same
//! `429` and the answers tell nothing about which keys exist. Credentials that already
//! succeeded from that address (remembered for an hour) are not blocked, so the valid keys of
//! a client sharing the address with a guesser — and every successful request — are never
//! slowed. IPv6 addresses count by their /64, which one host usually holds whole.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use mnemo_store::CredentialHash;

/// How failed authentications are limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthThrottleConfig {
    /// Failed authentications an address may make per minute (and at once); `0` turns the
    /// limit off.
    pub failures_per_minute: u32,
}

impl AuthThrottleConfig {
    /// Default [`failures_per_minute`](Self::failures_per_minute): ample for a person mistyping
    /// a key or a script with a stale one, hopeless for guessing a 32-character key.
    pub const DEFAULT_FAILURES_PER_MINUTE: u32 = 20;
}

impl Default for AuthThrottleConfig {
    fn default() -> Self {
        Self { failures_per_minute: Self::DEFAULT_FAILURES_PER_MINUTE }
    }
}

/// How long a credential that succeeded from an address stays exempt from that address's block.
const PROVEN_FOR: Duration = Duration::from_secs(3600);
/// How often a remembered success is refreshed (so a busy client does not write each time).
const PROVEN_REFRESH: Duration = Duration::from_secs(60);
/// Most remembered successes; past it the oldest hour is forgotten early.
const MAX_PROVEN: usize = 100_000;
/// How often stale entries are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The per-address limit on failed authentications.
pub(crate) struct AuthThrottle {
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    state: Mutex<State>,
}

impl std::fmt::Debug for AuthThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthThrottle").field("on", &self.limiter.is_some()).finish_non_exhaustive()
    }
}

struct State {
    /// Addresses over their budget, until when.
    blocked: HashMap<IpAddr, Instant>,
    /// Credentials (by hash) that succeeded from an address, and when last.
    proven: HashMap<(IpAddr, CredentialHash), Instant>,
    swept: Instant,
}

/// The key an address counts under: IPv4 as it is (an IPv4-mapped IPv6 address as its IPv4),
/// IPv6 by its /64.
fn bucket(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl AuthThrottle {
    pub(crate) fn new(config: AuthThrottleConfig) -> Self {
        let limiter = NonZeroU32::new(config.failures_per_minute)
            .map(|n| RateLimiter::keyed(Quota::per_minute(n).allow_burst(n)));
        let state = State { blocked: HashMap::new(), proven: HashMap::new(), swept: Instant::now() };
        Self { limiter, state: Mutex::new(state) }
    }

    /// Before a credential from `peer` is looked up: `Err(wait)` while the address is blocked
    /// and `credential` has not succeeded from it (`None`: a sign-in, never exempt).
    pub(crate) fn admit(&self, peer: Option<IpAddr>, credential: Option<&CredentialHash>) -> Result<(), Duration> {
        let (Some(_), Some(peer)) = (&self.limiter, peer.map(bucket)) else { return Ok(()) };
        let mut state = self.state.lock().expect("throttle state poisoned");
        let Some(until) = state.blocked.get(&peer).copied() else { return Ok(()) };
        let now = Instant::now();
        if until <= now {
            state.blocked.remove(&peer);
            return Ok(());
        }
        if credential.is_some_and(|c| state.proven.get(&(peer, *c)).is_some_and(|at| at.elapsed() < PROVEN_FOR)) {
            return Ok(());
        }
        Err(until - now)
    }

    /// After a failed authentication from `peer`: `Err(wait)` when it was over the address's
    /// budget (the address is blocked for `wait`).
    pub(crate) fn failed(&self, peer: Option<IpAddr>) -> Result<(), Duration> {
        let (Some(limiter), Some(peer)) = (&self.limiter, peer.map(bucket)) else { return Ok(()) };
        let checked = limiter.check_key(&peer);
        let mut state = self.state.lock().expect("throttle state poisoned");
        if state.swept.elapsed() >= SWEEP_EVERY {
            state.swept = Instant::now();
            let now = Instant::now();
            state.blocked.retain(|_, until| *until > now);
            state.proven.retain(|_, at| at.elapsed() < PROVEN_FOR);
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        match checked {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(limiter.clock().now()).max(Duration::from_secs(1));
                state.blocked.insert(peer, Instant::now() + wait);
                Err(wait)
            }
        }
    }

    /// After `credential` succeeded from `peer`: it stays exempt from that address's blocks.
    pub(crate) fn succeeded(&self, peer: Option<IpAddr>, credential: &CredentialHash) {
        let (Some(_), Some(peer)) = (&self.limiter, peer.map(bucket)) else { return };
        let mut state = self.state.lock().expect("throttle state poisoned");
        if state.proven.get(&(peer, *credential)).is_some_and(|at| at.elapsed() < PROVEN_REFRESH) {
            return;
        }
        if state.proven.len() >= MAX_PROVEN {
            state.proven.retain(|_, at| at.elapsed() < PROVEN_FOR / 2);
            if state.proven.len() >= MAX_PROVEN {
                state.proven.clear();
            }
        }
        state.proven.insert((peer, *credential), Instant::now());
    }
}

/// Failed password sign-ins one account may have (at once, then refilled one a minute): a
/// guesser spreading over many addresses gets ten tries, then one a minute, whatever address
/// they use — hopeless against a 12-character password, while its owner who mistyped waits a
/// minute at most after ten mistakes.
pub(crate) const ACCOUNT_FAILURES_BURST: u32 = 10;

/// The per-account limit on failed password sign-ins (the console's), beside the per-address
/// one: an account is keyed by a digest of the email typed, whether it belongs to anyone or not,
/// so being throttled says nothing about which emails exist.
pub(crate) struct AccountThrottle {
    limiter: DefaultKeyedRateLimiter<CredentialHash>,
    /// Accounts over their budget, until when.
    blocked: Mutex<HashMap<CredentialHash, Instant>>,
}

impl AccountThrottle {
    pub(crate) fn new(burst: u32) -> Self {
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_minute(NonZeroU32::MIN).allow_burst(burst);
        Self { limiter: RateLimiter::keyed(quota), blocked: Mutex::default() }
    }

    /// Before a password is checked: `Err(wait)` while the account is blocked.
    pub(crate) fn admit(&self, account: &CredentialHash) -> Result<(), Duration> {
        let mut blocked = self.blocked.lock().expect("throttle state poisoned");
        let Some(until) = blocked.get(account).copied() else { return Ok(()) };
        let now = Instant::now();
        if until <= now {
            blocked.remove(account);
            return Ok(());
        }
        Err(until - now)
    }

    /// After a failed password for `account`: `Err(wait)` when it was over the budget.
    pub(crate) fn failed(&self, account: &CredentialHash) -> Result<(), Duration> {
        let checked = self.limiter.check_key(account);
        let mut blocked = self.blocked.lock().expect("throttle state poisoned");
        let now = Instant::now();
        blocked.retain(|_, until| *until > now);
        self.limiter.retain_recent();
        match checked {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.limiter.clock().now()).max(Duration::from_secs(1));
                blocked.insert(*account, now + wait);
                Err(wait)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn failures_past_the_budget_block_unproven_credentials_of_that_address_only() {
        let throttle = AuthThrottle::new(AuthThrottleConfig { failures_per_minute: 3 });
        let (good, guess) = ([1u8; 32], [2u8; 32]);
        throttle.succeeded(ip("192.0.2.1"), &good);
        for _ in 0..3 {
            assert_eq!(throttle.admit(ip("192.0.2.1"), Some(&guess)), Ok(()));
            assert_eq!(throttle.failed(ip("192.0.2.1")), Ok(()), "within the budget a failure is a plain 401");
        }
        let wait = throttle.failed(ip("192.0.2.1")).expect_err("the fourth failure is over the budget");
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(60), "{wait:?}");
        assert!(throttle.admit(ip("192.0.2.1"), Some(&guess)).is_err(), "blocked: not even looked up");
        assert!(throttle.admit(ip("192.0.2.1"), None).is_err(), "sign-ins are blocked too");
        assert_eq!(throttle.admit(ip("192.0.2.1"), Some(&good)), Ok(()), "a key that worked from here still works");
        assert_eq!(throttle.admit(ip("192.0.2.2"), Some(&guess)), Ok(()), "other addresses are not blocked");
        assert_eq!(throttle.failed(ip("192.0.2.2")), Ok(()));
        assert_eq!(throttle.admit(None, Some(&guess)), Ok(()), "no address, no throttle (in-process calls)");
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_and_mapped_ones_as_ipv4() {
        let throttle = AuthThrottle::new(AuthThrottleConfig { failures_per_minute: 1 });
        assert_eq!(throttle.failed(ip("2001:db8:1:2::1")), Ok(()));
        assert!(throttle.failed(ip("2001:db8:1:2::99")).is_err(), "another address of the same /64 shares the budget");
        assert_eq!(throttle.failed(ip("2001:db8:1:3::1")), Ok(()));
        assert_eq!(throttle.failed(ip("::ffff:192.0.2.9")), Ok(()));
        assert!(throttle.failed(ip("192.0.2.9")).is_err(), "a mapped address is its IPv4 address");
    }

    #[test]
    fn an_account_is_blocked_after_its_burst_whatever_the_address() {
        let accounts = AccountThrottle::new(3);
        let (ada, eve) = ([1u8; 32], [2u8; 32]);
        for _ in 0..3 {
            assert_eq!(accounts.admit(&ada), Ok(()));
            assert_eq!(accounts.failed(&ada), Ok(()));
        }
        let wait = accounts.failed(&ada).expect_err("the fourth failure is over the budget");
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(60), "{wait:?}");
        assert!(accounts.admit(&ada).is_err(), "blocked: the password is not even checked");
        assert_eq!(accounts.admit(&eve), Ok(()), "other accounts are not");
    }

    #[test]
    fn zero_turns_the_limit_off() {
        let throttle = AuthThrottle::new(AuthThrottleConfig { failures_per_minute: 0 });
        for _ in 0..100 {
            assert_eq!(throttle.failed(ip("192.0.2.1")), Ok(()));
        }
        assert_eq!(throttle.admit(ip("192.0.2.1"), None), Ok(()));
    }
}
