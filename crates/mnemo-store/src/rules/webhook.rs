//! Webhooks: which change yields which event types ([`event_types`]), which endpoints an event
//! goes to ([`subscribed`], [`Outbox::plan`]), and what an attempt's answer means for its
//! delivery ([`after_attempt`]: delivered, tried again after an exponential, jittered delay,
//! or given up).
//!
//! A backend gathers the changes a write makes in an [`Outbox`], and before it commits loads
//! the endpoints, asks [`Outbox::plan`] which deliveries to create, and writes them in the same
//! transaction as the change (the outbox): an event is recorded if and only if its change
//! commits.

use std::time::Duration;

use mnemo_api::{Backoff, Event, EventFilter, Jitter, WebhookEventId, WebhookEventType as T};

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
}
