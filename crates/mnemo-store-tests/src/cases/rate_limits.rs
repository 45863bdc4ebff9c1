//! Rate-limit buckets (admin-api.md §8.9): a bucket of capacity N admits N at once, then
//! refuses with a wait after which one request fits; workspaces and entries have buckets of
//! their own; concurrent takers (a pool's connections are separate transactions, as replicas'
//! are) together admit no more than one taker would; a model call's tokens leave their bucket in
//! debt, which the next call waits out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use mnemo_api::LimiterType;
use mnemo_store::rules::rate_limit::{Draw, MANAGED_AGENTS_ENTRY_ID, Outcome};
use mnemo_store::{Limits, Store};

use crate::StoreFactory;

const RPM: LimiterType = LimiterType::RequestsPerMinute;

async fn take(s: &dyn Store, ws: &mnemo_api::WorkspaceId, capacity: u64) -> Outcome {
    s.take_rate_limit(ws, MANAGED_AGENTS_ENTRY_ID, &RPM, capacity, Draw::One).await.unwrap()
}

/// The most a bucket of `capacity` per minute may admit over `elapsed`: its capacity plus the
/// refill, plus one for a token refilled while the last request was counted.
fn bound(capacity: u64, elapsed: Duration) -> usize {
    capacity as usize + (elapsed.as_secs_f64() * capacity as f64 / 60.0).ceil() as usize
}

pub async fn a_bucket_admits_its_capacity_then_refuses_with_a_wait(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let started = Instant::now();
    let first = take(&*s, &ws, 5).await;
    let Outcome::Admitted { remaining, .. } = first else { panic!("a new bucket is full: {first:?}") };
    assert_eq!(remaining, 4);
    let mut admitted = 1;
    let refused = loop {
        match take(&*s, &ws, 5).await {
            Outcome::Admitted { .. } => admitted += 1,
            Outcome::Limited { retry_after_secs } => break retry_after_secs,
        }
        assert!(admitted <= bound(5, started.elapsed()), "{admitted} admitted by a bucket of 5");
    };
    assert!(admitted >= 5, "a bucket of 5 admits 5 at once, not {admitted}");
    // 5 per minute: one request every 12 seconds.
    assert!((1..=12).contains(&refused), "retry after {refused} s");
    assert!(matches!(take(&*s, &ws, 5).await, Outcome::Limited { .. }), "a refused request takes nothing back");
}

pub async fn buckets_refill_by_the_store_clock(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    // 60 per minute: one token a second.
    let wait = loop {
        if let Outcome::Limited { retry_after_secs } = take(&*s, &ws, 60).await {
            break retry_after_secs;
        }
    };
    assert_eq!(wait, 1, "at 60/min a token is never more than a second away");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(matches!(take(&*s, &ws, 60).await, Outcome::Admitted { .. }), "a second later one request fits");
}

pub async fn workspaces_and_entries_have_buckets_of_their_own(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let default = s.default_workspace().await.unwrap();
    let other = s.create_workspace("other").await.unwrap();
    assert!(matches!(take(&*s, &default, 1).await, Outcome::Admitted { remaining: 0, .. }));
    assert!(matches!(take(&*s, &default, 1).await, Outcome::Limited { .. }), "the Default workspace's is empty");
    assert!(matches!(take(&*s, &other, 1).await, Outcome::Admitted { .. }), "another workspace's is full");
    let model = s.take_rate_limit(&default, "ratelimit_model_x", &RPM, 1, Draw::One).await.unwrap();
    assert!(matches!(model, Outcome::Admitted { .. }), "another entry's bucket is full");
    let tokens =
        s.take_rate_limit(&default, MANAGED_AGENTS_ENTRY_ID, &LimiterType::TokensPerMinute, 1, Draw::One).await;
    assert!(matches!(tokens.unwrap(), Outcome::Admitted { .. }), "another limiter's bucket is full");
}

pub async fn concurrent_takers_together_admit_one_buckets_worth(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    const CAPACITY: u64 = 20;
    let started = Instant::now();
    let handles: Vec<_> = (0..60)
        .map(|_| {
            let (s, ws) = (Arc::clone(&s.store), ws.clone());
            tokio::spawn(async move { take(&*s, &ws, CAPACITY).await })
        })
        .collect();
    let outcomes: Vec<Outcome> = join_all(handles).await.into_iter().map(|r| r.expect("a task panicked")).collect();
    let elapsed = started.elapsed();
    let admitted = outcomes.iter().filter(|o| matches!(o, Outcome::Admitted { .. })).count();
    assert!(admitted >= CAPACITY as usize, "a full bucket of {CAPACITY} admits {CAPACITY}, not {admitted}");
    assert!(admitted <= bound(CAPACITY, elapsed), "{admitted} of 60 admitted by a bucket of {CAPACITY} in {elapsed:?}");
    let mut remaining: Vec<u64> = outcomes
        .iter()
        .filter_map(|o| if let Outcome::Admitted { remaining, .. } = o { Some(*remaining) } else { None })
        .collect();
    remaining.sort_unstable();
    remaining.dedup();
    assert!(remaining.len() >= CAPACITY as usize, "each admitted taker saw its own count: {remaining:?}");
}

pub async fn model_tokens_leave_a_debt_the_next_call_waits_out(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let (entry, otpm) = ("ratelimit_model_x", LimiterType::OutputTokensPerMinute);
    let draw = |draw| {
        let (s, ws, otpm) = (Arc::clone(&s.store), ws.clone(), otpm.clone());
        async move { s.take_rate_limit(&ws, entry, &otpm, 60, draw).await.unwrap() }
    };
    assert!(matches!(draw(Draw::Admit).await, Outcome::Admitted { remaining: 60, .. }), "admitting takes nothing");
    // 62 tokens from a bucket of 60 per minute (one a second): two in debt.
    assert!(matches!(draw(Draw::Charge(62)).await, Outcome::Admitted { remaining: 0, .. }), "a charge is taken");
    let Outcome::Limited { retry_after_secs } = draw(Draw::Admit).await else {
        panic!("a bucket in debt admits no call")
    };
    assert!((2..=3).contains(&retry_after_secs), "three tokens short at one a second: {retry_after_secs} s");
    tokio::time::sleep(Duration::from_secs(retry_after_secs)).await;
    assert!(matches!(draw(Draw::Admit).await, Outcome::Admitted { .. }), "after the wait it was told, a call fits");
}
