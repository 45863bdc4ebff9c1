//! Retrying a store call that failed transiently.

use std::future::Future;
use std::time::Duration;

use crate::StoreError;

/// How often and how patiently [`retry_transient`] tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The wait after the first failure; each later wait doubles, up to `max_delay`.
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Five attempts, waiting 5, 10, 20 and 40 ms: enough for a serialization failure or a
    /// deadlock between a few writers to clear, short enough to stay inside a request.
    fn default() -> Self {
        Self { attempts: 5, first_delay: Duration::from_millis(5), max_delay: Duration::from_millis(200) }
    }
}

/// Runs `call` until it succeeds, fails with anything but [`StoreError::Retryable`], or has
/// used `policy.attempts`; the last error is returned. A transaction that failed transiently
/// committed nothing, so a backend can wrap each transaction in this.
pub async fn retry_transient<T, F, Fut>(policy: RetryPolicy, mut call: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut delay = policy.first_delay;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e) if e.is_retryable() && attempt < policy.attempts => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(policy.max_delay);
                attempt += 1;
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn quick(attempts: u32) -> RetryPolicy {
        RetryPolicy { attempts, first_delay: Duration::from_millis(1), max_delay: Duration::from_millis(2) }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_until_success_or_the_last_attempt() {
        let calls = AtomicU32::new(0);
        let flaky = || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n < 2 { Err(StoreError::Retryable("deadlock detected".into())) } else { Ok(n) }
        };
        assert_eq!(retry_transient(quick(5), flaky).await.unwrap(), 2);
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        calls.store(0, Ordering::SeqCst);
        let always = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(StoreError::Retryable("serialization failure".into()))
        };
        assert!(retry_transient(quick(3), always).await.unwrap_err().is_retryable());
        assert_eq!(calls.load(Ordering::SeqCst), 3, "no more than the attempts allowed");
    }

    #[tokio::test]
    async fn other_failures_are_not_retried() {
        let calls = AtomicU32::new(0);
        let refused = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(StoreError::Conflict("already stopped".into()))
        };
        assert!(matches!(retry_transient(quick(5), refused).await, Err(StoreError::Conflict(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
