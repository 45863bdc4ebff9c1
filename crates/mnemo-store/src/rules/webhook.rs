//! Webhooks: which change yields which event types ([`event_types`]), which endpoints an event
//! goes to ([`subscribed`], [`Outbox::plan`]), what an attempt's answer means for its
//! delivery ([`after_attempt`]: delivered, tried again after an exponential, jittered delay,
//! or given up), and the life of a delivery in the store: which ones a claim takes and in which
//! order ([`CLAIMABLE`], [`claim_order`]), how long until the next one is due ([`due_in`]),
//! what a claim writes ([`claim`]), which report is
//! recorded and what it writes ([`record`]), what pruning removes ([`FINISHED`],
//! [`prune_before`]); and how long a rotated-out secret still signs ([`previous_secret_until`],
//! [`previous_secret_signs`]).
//!
//! A backend gathers the changes a write makes in an [`Outbox`], and before it commits loads
//! the endpoints, asks [`Outbox::plan`] which deliveries to create, and writes them in the same
//! transaction as the change (the outbox): an event is recorded if and only if its change
//! commits.

use std::time::Duration;

use mnemo_api::{Backoff, DeliveryStatus, Event, EventFilter, Jitter, WebhookEventId, WebhookEventType as T};

use crate::WebhookEndpointPatch;
use crate::webhook::{MAX_CLAIM, MIN_CLAIM_LEASE};

/// Microseconds since the Unix epoch (the store's clock).
pub type Micros = i64;

/// The kinds of resource webhook events are about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Session,
    MemoryStore,
    Environment,
    Agent,
}

/// A change a write made.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    Created(Resource),
    /// An update; `changed`: it changed the resource (an agent update that changes nothing
    /// makes no new version).
    Updated {
        resource: Resource,
        changed: bool,
    },
    /// An archive; `already`: the resource was archived before (archiving again changes nothing).
    Archived {
        resource: Resource,
        already: bool,
    },
    Deleted(Resource),
    /// An event recorded in a session's log: its status changes are webhook events.
    Logged(&'a Event),
}

/// The webhook event types a change yields, in the order they are sent.
///
/// A session's status change yields the event mirroring its log's status event
/// (`session.status_run_started`, `session.status_idled`, `session.status_terminated`) and, for
/// running and idle, the state it is now in — `session.requires_action` when it idles waiting
/// for tool results or confirmations, `session.idled` for any other stop reason. A memory store
/// update yields nothing (the reference SDK has no such event).
pub fn event_types(change: &Change<'_>) -> &'static [T] {
    use Resource::*;
    match change {
        Change::Created(Session) => &[T::SessionCreated],
        Change::Created(MemoryStore) => &[T::MemoryStoreCreated],
        Change::Created(Environment) => &[T::EnvironmentCreated],
        Change::Created(Agent) => &[T::AgentCreated],
        Change::Updated { changed: false, .. } | Change::Archived { already: true, .. } => &[],
        Change::Updated { resource: Session, .. } => &[T::SessionUpdated],
        Change::Updated { resource: MemoryStore, .. } => &[],
        Change::Updated { resource: Environment, .. } => &[T::EnvironmentUpdated],
        Change::Updated { resource: Agent, .. } => &[T::AgentUpdated],
        Change::Archived { resource: Session, .. } => &[T::SessionArchived],
        Change::Archived { resource: MemoryStore, .. } => &[T::MemoryStoreArchived],
        Change::Archived { resource: Environment, .. } => &[T::EnvironmentArchived],
        Change::Archived { resource: Agent, .. } => &[T::AgentArchived],
        Change::Deleted(Session) => &[T::SessionDeleted],
        Change::Deleted(MemoryStore) => &[T::MemoryStoreDeleted],
        Change::Deleted(Environment) => &[T::EnvironmentDeleted],
        // mnemo deletes no agents (they are archived).
        Change::Deleted(Agent) => &[],
        Change::Logged(Event::StatusRunning) => &[T::SessionStatusRunStarted, T::SessionRunning],
        Change::Logged(Event::StatusIdle(idle)) if idle.stop_reason.requires_action() => {
            &[T::SessionStatusIdled, T::SessionRequiresAction]
        }
        Change::Logged(Event::StatusIdle(_)) => &[T::SessionStatusIdled, T::SessionIdled],
        Change::Logged(Event::StatusTerminated) => &[T::SessionStatusTerminated],
        Change::Logged(_) => &[],
    }
}

/// Whether an endpoint with `filter` is sent events of type `t`.
pub fn subscribed(filter: &EventFilter, t: T) -> bool {
    filter.as_ref().is_none_or(|types| types.contains(&t))
}

/// The webhook events of one write, gathered while it runs.
#[derive(Debug, Clone, Default)]
pub struct Outbox {
    events: Vec<(T, String)>,
}

/// One event to record, and the endpoints (by the backend's key) to deliver it to.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned<K> {
    pub id: WebhookEventId,
    pub kind: T,
    pub resource_id: String,
    pub endpoints: Vec<K>,
}

impl Outbox {
    /// Notes the events `change` of the resource `resource_id` yields.
    pub fn record(&mut self, change: Change<'_>, resource_id: &str) {
        for t in event_types(&change) {
            self.events.push((*t, resource_id.to_owned()));
        }
    }

    /// Whether the write yielded no event (the backend need not even load the endpoints).
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The events to record, in order, each with the endpoints subscribed to it; an event no
    /// endpoint is subscribed to is not recorded at all.
    pub fn plan<K: Copy>(self, endpoints: &[(K, EventFilter)]) -> Vec<Planned<K>> {
        self.events
            .into_iter()
            .filter_map(|(kind, resource_id)| {
                let to: Vec<K> = endpoints.iter().filter(|(_, f)| subscribed(f, kind)).map(|(k, _)| *k).collect();
                (!to.is_empty()).then(|| Planned { id: WebhookEventId::generate(), kind, resource_id, endpoints: to })
            })
            .collect()
    }
}

/// How deliveries are attempted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeliveryPolicy {
    /// Attempts in all, the first included; after the last one fails the delivery is failed.
    pub max_attempts: u32,
    /// The delays between attempts: `initial` before the second, each later one doubled up to
    /// `max`, spread either way at random so endpoints coming back are not hit by every retry
    /// at once. Its `retries` is not used: `max_attempts` bounds the attempts.
    pub retry: Backoff,
}

impl Default for DeliveryPolicy {
    /// 8 attempts: retries after about 30 s, 1, 2, 4, 8, 16 and 32 min — about an hour in all.
    fn default() -> Self {
        Self {
            max_attempts: 8,
            retry: Backoff::doubling(Duration::from_secs(30), Duration::from_secs(3600))
                .with_jitter(Jitter::Spread(0.25)),
        }
    }
}

/// What an attempt got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The endpoint answered with this HTTP status.
    Status(u16),
    /// No answer: the connection failed or the attempt timed out.
    NoAnswer,
}

/// What becomes of a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    Delivered,
    /// Attempt again after this long.
    RetryIn(Duration),
    /// No more attempts.
    Failed,
}

/// The delay before the attempt after attempt `attempt` (1: the first) failed, before jitter.
pub fn retry_delay(policy: &DeliveryPolicy, attempt: u32) -> Duration {
    Backoff { jitter: Jitter::None, ..policy.retry }.delay_with(attempt.saturating_sub(1), 0.0)
}

/// What attempt number `attempt` (1: the first) getting `answer` means: a 2xx delivers; any
/// other status (redirects included: they are not followed) or no answer is tried again after
/// [`retry_delay`] jittered by `policy.retry` (`random` in `[0, 1)` picks where), unless it was
/// the last attempt.
pub fn after_attempt(answer: Answer, attempt: u32, policy: &DeliveryPolicy, random: f64) -> Next {
    if let Answer::Status(200..=299) = answer {
        return Next::Delivered;
    }
    if attempt >= policy.max_attempts {
        return Next::Failed;
    }
    Next::RetryIn(policy.retry.delay_with(attempt.saturating_sub(1), random))
}

/// The status of a delivery a claim may take: only a pending one is ever attempted.
pub const CLAIMABLE: DeliveryStatus = DeliveryStatus::Pending;

/// The statuses of a delivery that is over (no attempt is made any more): what pruning removes.
pub const FINISHED: [DeliveryStatus; 2] = [DeliveryStatus::Delivered, DeliveryStatus::Failed];

/// Whether a delivery in `status` whose next attempt is at `next_attempt_at` is due at `now`.
pub fn is_due(status: DeliveryStatus, next_attempt_at: Option<Micros>, now: Micros) -> bool {
    status == CLAIMABLE && next_attempt_at.is_some_and(|at| at <= now)
}

/// How long from `now` until an attempt due at `next_attempt_at` falls due: zero once it is
/// due ([`is_due`]). What an idle sender sleeps, so a retry stored by an earlier process (or a
/// claim whose lease runs out) is made on time without looking at the outbox on a timer.
pub fn due_in(next_attempt_at: Micros, now: Micros) -> Duration {
    Duration::from_micros(u64::try_from(next_attempt_at.saturating_sub(now)).unwrap_or(0))
}

/// The key claims order due deliveries by, smallest first: the oldest due first (the one whose
/// next attempt has waited longest), and among deliveries due at the same moment the one
/// created first (`seq`, its row number: a write's events in the order they happened, each to
/// its endpoints in the order they were created). A claim of `limit` takes the first `limit`
/// in this order and returns them in it, so they are sent in it.
pub fn claim_order(next_attempt_at: Micros, seq: i64) -> (Micros, i64) {
    (next_attempt_at, seq)
}

/// How many deliveries a claim asking for `limit` takes at the most.
pub fn claim_limit(limit: u32) -> u32 {
    limit.min(MAX_CLAIM)
}

/// What a claim at `now` writes to a delivery that has had `attempts` attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// This attempt's number (1: the first); the delivery's attempt count becomes it.
    pub attempt: u32,
    pub last_attempt_at: Micros,
    /// The delivery is due again then (the claim's lease), in case the attempt is never
    /// reported.
    pub next_attempt_at: Micros,
}

/// A claim at `now` of a delivery that has had `attempts` attempts, for `lease` (at least
/// [`MIN_CLAIM_LEASE`]): the attempt is counted when it is claimed, not when it is reported.
pub fn claim(attempts: u32, now: Micros, lease: Duration) -> Claim {
    Claim {
        attempt: attempts.saturating_add(1),
        last_attempt_at: now,
        next_attempt_at: now.saturating_add(micros(lease.max(MIN_CLAIM_LEASE))),
    }
}

/// What recording an attempt's outcome writes to its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub status: DeliveryStatus,
    /// When it is due again (pending only).
    pub next_attempt_at: Option<Micros>,
    /// When it finished (delivered or failed only).
    pub finished_at: Option<Micros>,
}

/// The transition of a delivery in `status` after `attempts` attempts when attempt `attempt`
/// reports `next` at `now`: pending → delivered, pending → failed (both finished now), or
/// pending → pending due again after the delay. `None` (nothing is recorded): the delivery is
/// no longer pending, or the report is of an attempt that is not its latest (its lease ran out
/// and a later claim made another).
pub fn record(status: DeliveryStatus, attempts: u32, attempt: u32, next: Next, now: Micros) -> Option<Recorded> {
    if status != DeliveryStatus::Pending || attempts != attempt {
        return None;
    }
    Some(match next {
        Next::Delivered => {
            Recorded { status: DeliveryStatus::Delivered, next_attempt_at: None, finished_at: Some(now) }
        }
        Next::Failed => Recorded { status: DeliveryStatus::Failed, next_attempt_at: None, finished_at: Some(now) },
        Next::RetryIn(delay) => Recorded {
            status: DeliveryStatus::Pending,
            next_attempt_at: Some(now.saturating_add(micros(delay))),
            finished_at: None,
        },
    })
}

/// Pruning at `now` removes [`FINISHED`] deliveries that finished before this: more than `age`
/// ago.
pub fn prune_before(now: Micros, age: Duration) -> Micros {
    now.saturating_sub(micros(age))
}

/// Until when the secret a rotation at `now` replaces keeps signing beside the new one: `keep`
/// from now; `None` (a zero `keep`): it stops at once and is not kept at all.
pub fn previous_secret_until(now: Micros, keep: Duration) -> Option<Micros> {
    (!keep.is_zero()).then(|| now.saturating_add(micros(keep)))
}

/// Whether a replaced secret kept until `until` still signs at `now` (and the endpoint shows
/// `until`): strictly before it.
pub fn previous_secret_signs(until: Option<Micros>, now: Micros) -> bool {
    until.is_some_and(|until| now < until)
}

/// An endpoint's URL, filter and description after `patch`: each field it names replaces the
/// current one, the others stay.
pub fn patch_endpoint(
    url: &str,
    filter: &EventFilter,
    description: Option<&str>,
    patch: WebhookEndpointPatch,
) -> (String, EventFilter, Option<String>) {
    (
        patch.url.unwrap_or_else(|| url.to_owned()),
        patch.event_types.unwrap_or_else(|| filter.clone()),
        patch.description.unwrap_or_else(|| description.map(str::to_owned)),
    )
}

fn micros(d: Duration) -> Micros {
    Micros::try_from(d.as_micros()).unwrap_or(Micros::MAX)
}

#[cfg(test)]
mod tests {
    use mnemo_api::{StatusIdle, StopReason};

    use super::*;

    fn idle(reason: StopReason) -> Event {
        Event::StatusIdle(StatusIdle { stop_reason: reason, stop_details: None })
    }

    #[test]
    fn each_change_yields_its_event_types() {
        use Resource::*;
        let requires = idle(StopReason::RequiresAction { event_ids: vec![] });
        let end_turn = idle(StopReason::EndTurn);
        let message = Event::parse(serde_json::json!({"type": "user.message", "content": []})).unwrap();
        let table: &[(Change<'_>, &[T])] = &[
            (Change::Created(Session), &[T::SessionCreated]),
            (Change::Created(MemoryStore), &[T::MemoryStoreCreated]),
            (Change::Created(Environment), &[T::EnvironmentCreated]),
            (Change::Created(Agent), &[T::AgentCreated]),
            (Change::Updated { resource: Session, changed: true }, &[T::SessionUpdated]),
            (Change::Updated { resource: Environment, changed: true }, &[T::EnvironmentUpdated]),
            (Change::Updated { resource: Agent, changed: true }, &[T::AgentUpdated]),
            (Change::Updated { resource: Agent, changed: false }, &[]),
            (Change::Updated { resource: MemoryStore, changed: true }, &[]),
            (Change::Archived { resource: Session, already: false }, &[T::SessionArchived]),
            (Change::Archived { resource: MemoryStore, already: false }, &[T::MemoryStoreArchived]),
            (Change::Archived { resource: Environment, already: false }, &[T::EnvironmentArchived]),
            (Change::Archived { resource: Agent, already: false }, &[T::AgentArchived]),
            (Change::Archived { resource: MemoryStore, already: true }, &[]),
            (Change::Deleted(Session), &[T::SessionDeleted]),
            (Change::Deleted(MemoryStore), &[T::MemoryStoreDeleted]),
            (Change::Deleted(Environment), &[T::EnvironmentDeleted]),
            (Change::Logged(&Event::StatusRunning), &[T::SessionStatusRunStarted, T::SessionRunning]),
            (Change::Logged(&requires), &[T::SessionStatusIdled, T::SessionRequiresAction]),
            (Change::Logged(&end_turn), &[T::SessionStatusIdled, T::SessionIdled]),
            (Change::Logged(&Event::StatusTerminated), &[T::SessionStatusTerminated]),
            (Change::Logged(&message), &[]),
        ];
        for (change, want) in table {
            assert_eq!(event_types(change), *want, "{change:?}");
        }
    }

    #[test]
    fn events_go_only_to_subscribed_endpoints_and_unwanted_ones_are_not_recorded() {
        let mut outbox = Outbox::default();
        outbox.record(Change::Created(Resource::Agent), "agent_1");
        outbox.record(Change::Logged(&Event::StatusTerminated), "sesn_1");
        outbox.record(Change::Updated { resource: Resource::MemoryStore, changed: true }, "memstore_1");
        assert!(!outbox.is_empty());
        let endpoints = [(1, None), (2, Some(vec![T::SessionStatusTerminated])), (3, Some(vec![T::SessionDeleted]))];
        let planned = outbox.plan(&endpoints);
        let got: Vec<(T, &str, Vec<i32>)> =
            planned.iter().map(|p| (p.kind, p.resource_id.as_str(), p.endpoints.clone())).collect();
        assert_eq!(
            got,
            vec![(T::AgentCreated, "agent_1", vec![1]), (T::SessionStatusTerminated, "sesn_1", vec![1, 2])]
        );
        assert_ne!(planned[0].id, planned[1].id);
        let mut none = Outbox::default();
        none.record(Change::Created(Resource::Agent), "agent_1");
        assert!(none.plan::<i32>(&[(3, Some(vec![T::SessionDeleted]))]).is_empty());
        assert!(Outbox::default().is_empty());
    }

    #[test]
    fn a_2xx_delivers_anything_else_is_retried_with_growing_jittered_delays_until_the_last_attempt() {
        let policy = DeliveryPolicy::default();
        assert_eq!(after_attempt(Answer::Status(200), 1, &policy, 0.5), Next::Delivered);
        assert_eq!(after_attempt(Answer::Status(204), 8, &policy, 0.5), Next::Delivered);
        for answer in [Answer::Status(500), Answer::Status(301), Answer::Status(404), Answer::NoAnswer] {
            assert_eq!(after_attempt(answer, 1, &policy, 0.5), Next::RetryIn(Duration::from_secs(30)), "{answer:?}");
            assert_eq!(after_attempt(answer, 8, &policy, 0.5), Next::Failed, "{answer:?}");
        }
        let delays: Vec<u64> = (1..8).map(|n| retry_delay(&policy, n).as_secs()).collect();
        assert_eq!(delays, [30, 60, 120, 240, 480, 960, 1920]);
        // About an hour from the first attempt to the last.
        assert_eq!(delays.iter().sum::<u64>(), 3810);
        assert_eq!(after_attempt(Answer::NoAnswer, 2, &policy, 0.0), Next::RetryIn(Duration::from_secs(45)));
        assert_eq!(after_attempt(Answer::NoAnswer, 2, &policy, 1.0), Next::RetryIn(Duration::from_secs(75)));
        let capped =
            DeliveryPolicy { max_attempts: 50, retry: Backoff { max: Duration::from_secs(100), ..policy.retry } };
        assert_eq!(retry_delay(&capped, 40), Duration::from_secs(100));
    }

    #[test]
    fn a_claim_counts_the_attempt_and_hides_the_delivery_for_its_lease() {
        let s = 1_000_000;
        let table: &[(u32, Micros, Duration, Claim)] = &[
            (0, 10, Duration::from_secs(60), Claim { attempt: 1, last_attempt_at: 10, next_attempt_at: 10 + 60 * s }),
            (3, 10, Duration::from_secs(5), Claim { attempt: 4, last_attempt_at: 10, next_attempt_at: 10 + 5 * s }),
            // A lease shorter than the least is the least.
            (1, 10, Duration::ZERO, Claim { attempt: 2, last_attempt_at: 10, next_attempt_at: 10 + s }),
            (1, 10, Duration::from_millis(10), Claim { attempt: 2, last_attempt_at: 10, next_attempt_at: 10 + s }),
            (
                u32::MAX,
                10,
                Duration::MAX,
                Claim { attempt: u32::MAX, last_attempt_at: 10, next_attempt_at: Micros::MAX },
            ),
        ];
        for (attempts, now, lease, want) in table {
            assert_eq!(claim(*attempts, *now, *lease), *want, "{attempts} {lease:?}");
        }
        assert_eq!([claim_limit(0), claim_limit(3), claim_limit(MAX_CLAIM), claim_limit(u32::MAX)], [0, 3, 100, 100]);
    }

    #[test]
    fn only_a_pending_delivery_that_is_due_is_claimed_oldest_due_first() {
        use DeliveryStatus::*;
        let table: &[(DeliveryStatus, Option<Micros>, Micros, bool)] = &[
            (Pending, Some(5), 5, true),
            (Pending, Some(4), 5, true),
            (Pending, Some(6), 5, false),
            (Pending, None, 5, false),
            (Delivered, Some(4), 5, false),
            (Failed, Some(4), 5, false),
        ];
        for (status, at, now, due) in table {
            assert_eq!(is_due(*status, *at, *now), *due, "{status:?} {at:?} {now}");
        }
        assert!(!FINISHED.contains(&CLAIMABLE) && FINISHED.contains(&Delivered) && FINISHED.contains(&Failed));
        // (next attempt at, row number): a retry due at 5 goes before a first attempt due at 7
        // of an older row, and rows due together go in the order they were made.
        let mut due = [(7, 1), (5, 9), (7, 3), (5, 2)];
        due.sort_by_key(|(at, seq)| claim_order(*at, *seq));
        assert_eq!(due, [(5, 2), (5, 9), (7, 1), (7, 3)]);
    }

    #[test]
    fn the_wait_for_an_attempt_is_what_is_left_until_it_is_due_and_never_negative() {
        let table: &[(Micros, Micros, Duration)] = &[
            (100, 100, Duration::ZERO),
            (100, 101, Duration::ZERO),
            (1_500_000, 500_000, Duration::from_secs(1)),
            (101, 100, Duration::from_micros(1)),
            (Micros::MIN, Micros::MAX, Duration::ZERO),
            (Micros::MAX, Micros::MIN, Duration::from_micros(Micros::MAX as u64)),
        ];
        for (at, now, want) in table {
            assert_eq!(due_in(*at, *now), *want, "due at {at}, now {now}");
            assert_eq!(due_in(*at, *now).is_zero(), is_due(CLAIMABLE, Some(*at), *now), "due at {at}, now {now}");
        }
    }

    #[test]
    fn a_report_of_the_latest_attempt_moves_a_pending_delivery_on_any_other_changes_nothing() {
        use DeliveryStatus::*;
        let done = |status| Some(Recorded { status, next_attempt_at: None, finished_at: Some(100) });
        let table: &[(DeliveryStatus, u32, u32, Next, Option<Recorded>)] = &[
            (Pending, 1, 1, Next::Delivered, done(Delivered)),
            (Pending, 8, 8, Next::Failed, done(Failed)),
            (
                Pending,
                2,
                2,
                Next::RetryIn(Duration::from_secs(30)),
                Some(Recorded { status: Pending, next_attempt_at: Some(100 + 30_000_000), finished_at: None }),
            ),
            (
                Pending,
                2,
                2,
                Next::RetryIn(Duration::ZERO),
                Some(Recorded { status: Pending, next_attempt_at: Some(100), finished_at: None }),
            ),
            // An attempt whose lease ran out and was made again reports too late.
            (Pending, 2, 1, Next::Delivered, None),
            (Pending, 0, 1, Next::Delivered, None),
            // A finished delivery stays as it finished.
            (Delivered, 2, 2, Next::Failed, None),
            (Failed, 8, 8, Next::Delivered, None),
        ];
        for (status, attempts, attempt, next, want) in table {
            assert_eq!(
                record(*status, *attempts, *attempt, *next, 100),
                *want,
                "{status:?} {attempts} {attempt} {next:?}"
            );
        }
        assert_eq!(prune_before(100_000_000, Duration::from_secs(60)), 40_000_000);
        assert_eq!(prune_before(100, Duration::ZERO), 100);
        assert_eq!(prune_before(Micros::MIN, Duration::MAX), Micros::MIN);
    }

    #[test]
    fn a_rotated_out_secret_signs_for_the_time_kept_and_not_at_all_when_none_is() {
        let s = 1_000_000;
        let table: &[(Duration, Option<Micros>)] = &[
            (Duration::ZERO, None),
            (Duration::from_secs(1), Some(10 + s)),
            (Duration::from_secs(86_400), Some(10 + 86_400 * s)),
            (Duration::MAX, Some(Micros::MAX)),
        ];
        for (keep, want) in table {
            assert_eq!(previous_secret_until(10, *keep), *want, "{keep:?}");
        }
        let signs: &[(Option<Micros>, Micros, bool)] =
            &[(None, 10, false), (Some(11), 10, true), (Some(10), 10, false), (Some(9), 10, false)];
        for (until, now, want) in signs {
            assert_eq!(previous_secret_signs(*until, *now), *want, "{until:?} at {now}");
        }
    }

    #[test]
    fn an_endpoint_patch_replaces_what_it_names() {
        let filter = Some(vec![T::SessionCreated]);
        type Want<'a> = (&'a str, EventFilter, Option<&'a str>);
        let table: &[(WebhookEndpointPatch, Want<'_>)] = &[
            (WebhookEndpointPatch::default(), ("https://a", filter.clone(), Some("d"))),
            (
                WebhookEndpointPatch {
                    url: Some("https://b".into()),
                    event_types: Some(None),
                    description: Some(None),
                },
                ("https://b", None, None),
            ),
            (
                WebhookEndpointPatch { description: Some(Some("e".into())), ..Default::default() },
                ("https://a", filter.clone(), Some("e")),
            ),
        ];
        for (patch, (url, types, description)) in table {
            let got = patch_endpoint("https://a", &filter, Some("d"), patch.clone());
            assert_eq!(got, (url.to_string(), types.clone(), description.map(str::to_owned)), "{patch:?}");
        }
    }
}
