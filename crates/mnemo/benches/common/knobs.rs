//! What the in-process benches share: their environment knobs, a throw-away folder, and how
//! they print a latency.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

/// The number in the environment variable `name`, or `default`.
pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The store sizes of `MNEMO_BENCH_SIZES` (comma-separated), or `default`.
pub(crate) fn sizes(default: &str) -> Vec<usize> {
    std::env::var("MNEMO_BENCH_SIZES")
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// A throw-away folder named `prefix…` under `MNEMO_BENCH_DIR` (default: the temp dir).
pub(crate) fn bench_dir(prefix: &str) -> tempfile::TempDir {
    let base: PathBuf = std::env::var("MNEMO_BENCH_DIR").map(PathBuf::from).unwrap_or_else(|_| std::env::temp_dir());
    tempfile::Builder::new().prefix(prefix).tempdir_in(&base).unwrap()
}

/// The nearest-rank `p`-th percentile of `sorted`.
pub(crate) fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Milliseconds with two decimals.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}
