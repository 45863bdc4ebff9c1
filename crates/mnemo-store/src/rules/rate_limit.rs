//! Rate limits (spec `admin-api.md` §4.4, §8.9): the catalogue of entries, the organization
//! values of `--rate-limit`, the limit that applies to a workspace, the token bucket, the 429
//! message, and which traffic is counted.
//!
//! The bucket is pure arithmetic over a stored state, so where the state lives (a row every
//! replica locks) decides how far replicas agree, not this module: with one row per
//! (workspace, entry, limiter) updated in the request's transaction, the total admitted over
//! any window stays within N plus the window's refill.

use std::collections::BTreeMap;

use mnemo_api::{
    LimitSource, LimiterType, RateLimit, RateLimitGroup, RateLimitGroupType, RateLimitUpdate, RateLimitValue,
    WorkspaceId, WorkspaceLimitValue, WorkspaceRateLimit,
};

use super::refusal::Refusal;
use crate::ops::Micros;

/// The entry of every Managed Agents endpoint.
pub const MANAGED_AGENTS_ENTRY_ID: &str = "ratelimit_api";
/// Its group's id, the same on every server.
pub const MANAGED_AGENTS_GROUP_ID: &str = "rlg_mnemo_managed_agents";

/// A model family the agent loop is configured with: one `model_group` entry each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFamily {
    /// What the console and the API show (`display_name`), e.g. `Claude Sonnet`.
    pub display_name: String,
    /// The model names the family covers.
    pub models: Vec<String>,
}

/// One entry of the catalogue: a group and the limiters it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Stable per server: the `rate_limit_id` of workspace overrides.
    pub id: String,
    pub group: RateLimitGroup,
    /// The models of a model group; `None` for other groups.
    pub models: Option<Vec<String>>,
    pub limiters: Vec<LimiterType>,
}

/// The lower-case, `_`-joined form of a family name used in its entry and group ids.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_owned()
}

/// Every entry of this server: the Managed Agents entry, then one per model family (in the
/// order given; families whose names give the same id after the first are dropped).
pub fn catalogue(families: &[ModelFamily]) -> Vec<Entry> {
    let mut out = vec![Entry {
        id: MANAGED_AGENTS_ENTRY_ID.into(),
        group: RateLimitGroup {
            kind: RateLimitGroupType::ManagedAgents,
            id: MANAGED_AGENTS_GROUP_ID.into(),
            display_name: None,
        },
        models: None,
        limiters: vec![LimiterType::RequestsPerMinute],
    }];
    for family in families {
        let slug = slug(&family.display_name);
        let id = format!("ratelimit_model_{slug}");
        if slug.is_empty() || out.iter().any(|e| e.id == id) {
            continue;
        }
        out.push(Entry {
            id,
            group: RateLimitGroup {
                kind: RateLimitGroupType::ModelGroup,
                id: format!("rlg_mnemo_model_{slug}"),
                display_name: Some(family.display_name.clone()),
            },
            models: Some(family.models.clone()),
            limiters: vec![
                LimiterType::RequestsPerMinute,
                LimiterType::InputTokensPerMinute,
                LimiterType::OutputTokensPerMinute,
            ],
        });
    }
    out
}

/// [`catalogue`], refusing two families whose names give one entry id (`Claude Sonnet` and
/// `claude-sonnet`), which would otherwise share one set of limits unannounced.
pub fn checked_catalogue(families: &[ModelFamily]) -> Result<Vec<Entry>, String> {
    for (i, a) in families.iter().enumerate() {
        if let Some(b) = families[..i].iter().find(|b| slug(&b.display_name) == slug(&a.display_name)) {
            return Err(format!(
                "model families {:?} and {:?} give one rate limit id (`ratelimit_model_{}`); rename one",
                b.display_name,
                a.display_name,
                slug(&a.display_name)
            ));
        }
    }
    Ok(catalogue(families))
}

/// The entry that limits a model call, if its family is configured.
pub fn entry_for_model<'a>(catalogue: &'a [Entry], model: &str) -> Option<&'a Entry> {
    catalogue.iter().find(|e| e.models.as_ref().is_some_and(|m| m.iter().any(|x| x == model)))
}

/// Organization values: (entry id, limiter) → N.
pub type OrgLimits = BTreeMap<(String, LimiterType), u64>;

/// Parses the `--rate-limit` values `GROUP:TYPE=N` against the catalogue. `GROUP` names an
/// entry by its id (`ratelimit_api`), its group's id (`rlg_…`), its group type for the
/// Managed Agents entry (`managed_agents`) or its model family's name (case and spacing
/// ignored); `TYPE` is one of the entry's limiters; `N` a positive integer. A later value for
/// the same pair replaces an earlier one.
pub fn parse_org_limits(flags: &[String], catalogue: &[Entry]) -> Result<OrgLimits, String> {
    let mut out = OrgLimits::new();
    for flag in flags {
        let bad = |why: String| {
            format!("--rate-limit `{flag}`: {why} (expected GROUP:TYPE=N, e.g. managed_agents:requests_per_minute=600)")
        };
        let (group, rest) = flag.split_once(':').ok_or_else(|| bad("no `:` after the group".into()))?;
        let (kind, n) = rest.split_once('=').ok_or_else(|| bad("no `=` before the value".into()))?;
        let wanted = slug(group);
        let entry = catalogue
            .iter()
            .find(|e| {
                e.id == group
                    || e.group.id == group
                    || (e.group.kind == RateLimitGroupType::ManagedAgents && group == "managed_agents")
                    || e.group.display_name.as_deref().is_some_and(|d| slug(d) == wanted)
            })
            .ok_or_else(|| {
                let known: Vec<&str> = catalogue.iter().map(|e| e.id.as_str()).collect();
                bad(format!("unknown group `{group}` (known: managed_agents, {})", known.join(", ")))
            })?;
        let limiter = LimiterType::parse(kind);
        if !entry.limiters.contains(&limiter) {
            let known: Vec<&str> = entry.limiters.iter().map(LimiterType::as_str).collect();
            return Err(bad(format!("`{}` has no limiter `{kind}` (it has: {})", entry.id, known.join(", "))));
        }
        let value: u64 =
            n.trim().parse().ok().filter(|v| *v > 0).ok_or_else(|| bad(format!("`{n}` is not a positive integer")))?;
        out.insert((entry.id.clone(), limiter), value);
    }
    Ok(out)
}

/// The limit that applies: the lower of the workspace's override and the organization's value;
/// `None` when neither is set (no limit).
pub fn effective(workspace: Option<u64>, org: Option<u64>) -> Option<u64> {
    match (workspace, org) {
        (Some(w), Some(o)) => Some(w.min(o)),
        (w, o) => w.or(o),
    }
}

/// The organization entry as `GET /v1/organizations/rate_limits` lists it: the limiters that
/// have a configured value.
pub fn org_view(entry: &Entry, org: &OrgLimits) -> RateLimit {
    RateLimit {
        id: entry.id.clone(),
        group: entry.group.clone(),
        limits: entry
            .limiters
            .iter()
            .filter_map(|l| {
                org.get(&(entry.id.clone(), l.clone())).map(|v| RateLimitValue { kind: l.clone(), value: *v })
            })
            .collect(),
        models: entry.models.clone(),
    }
}

/// A workspace's view of an entry, from its overrides (limiter → N): every limiter when
/// `include_inherited`, else only the overridden ones.
pub fn workspace_view(
    entry: &Entry,
    workspace: &WorkspaceId,
    overrides: &BTreeMap<LimiterType, u64>,
    org: &OrgLimits,
    include_inherited: bool,
) -> WorkspaceRateLimit {
    let limits = entry
        .limiters
        .iter()
        .filter(|l| include_inherited || overrides.contains_key(l))
        .map(|l| {
            let org_limit = org.get(&(entry.id.clone(), l.clone())).copied();
            let own = overrides.get(l).copied();
            WorkspaceLimitValue {
                kind: l.clone(),
                value: own.or(org_limit),
                org_limit,
                source: if own.is_some() { LimitSource::Workspace } else { LimitSource::Organization },
            }
        })
        .collect();
    WorkspaceRateLimit {
        rate_limit_id: entry.id.clone(),
        workspace_id: workspace.clone(),
        group: entry.group.clone(),
        models: entry.models.clone(),
        limits,
    }
}

/// A workspace's overrides with `body` applied: a value sets, `null` clears, limiters not named
/// stay. Every named limiter must be one the entry has.
pub fn apply_update(
    entry: &Entry,
    current: &BTreeMap<LimiterType, u64>,
    body: &RateLimitUpdate,
) -> Result<BTreeMap<LimiterType, u64>, Refusal> {
    body.validate()?;
    let mut next = current.clone();
    for change in &body.limits {
        if !entry.limiters.contains(&change.kind) {
            let known: Vec<&str> = entry.limiters.iter().map(LimiterType::as_str).collect();
            return Err(Refusal::invalid(format!(
                "rate limit `{}` has no limiter `{}` (it has: {})",
                entry.id,
                change.kind,
                known.join(", ")
            )));
        }
        match change.value {
            Some(v) => next.insert(change.kind.clone(), v),
            None => next.remove(&change.kind),
        };
    }
    Ok(next)
}

// ---------------------------------------------------------------------------------------------
// The token bucket

/// One bucket as stored: the tokens it held at `updated_at` (microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    pub updated_at: Micros,
}

/// What a request met.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Let through; `remaining` whole requests fit now, and the bucket is full again at
    /// `reset_at` (microseconds): the `anthropic-ratelimit-requests-*` values.
    Admitted { remaining: u64, reset_at: Micros },
    /// Refused: one request fits in `retry_after_secs` seconds (1–60, rounded up).
    Limited { retry_after_secs: u64 },
}

const MICROS_PER_SEC: f64 = 1_000_000.0;

/// The tokens a bucket of `capacity` holds at `now`: its stored tokens plus N/60 per second
/// since `updated_at`, at most `capacity` (and at least `-capacity`). A clock behind the stored time (another replica's)
/// refills nothing rather than draining. A missing bucket is full.
fn level(state: Option<Bucket>, capacity: u64, now: Micros) -> f64 {
    let cap = capacity as f64;
    match state {
        None => cap,
        Some(b) => {
            let elapsed = now.saturating_sub(b.updated_at).max(0) as f64 / MICROS_PER_SEC;
            // A debt deeper than a minute's (a capacity lowered since) is forgiven.
            (b.tokens + elapsed * cap / 60.0).clamp(-cap, cap)
        }
    }
}

/// What one use takes from a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// A request: one token, refused while less than one is left.
    One,
    /// A model call about to start, whose tokens are only known once it ends: takes nothing,
    /// refused while the bucket holds less than one token (earlier calls left it in debt).
    Admit,
    /// The tokens a finished model call used: always taken, the bucket running into debt, at
    /// most one minute's capacity below empty (so one huge call delays the next by at most
    /// two minutes, not hours).
    Charge(u64),
}

/// Draws `draw` from a bucket of capacity `capacity` per minute at `now`: the state to store
/// and the outcome. A refused draw still stores the refilled state (so the stored time never
/// moves backwards).
pub fn take(state: Option<Bucket>, capacity: u64, now: Micros, draw: Draw) -> (Bucket, Outcome) {
    let cap = capacity as f64;
    let tokens = level(state, capacity, now);
    let updated_at = state.map_or(now, |b| b.updated_at.max(now));
    // Seconds until the bucket holds `tokens_short` more: N/60 tokens refill per second.
    let seconds_for = |tokens_short: f64| tokens_short * 60.0 / cap;
    let refusable = !matches!(draw, Draw::Charge(_));
    if refusable && !(capacity > 0 && tokens >= 1.0 - ROUNDING) {
        let wait = if capacity > 0 { seconds_for(1.0 - tokens).ceil() as u64 } else { 60 };
        return (Bucket { tokens, updated_at }, Outcome::Limited { retry_after_secs: wait.clamp(1, 60) });
    }
    let left = match draw {
        Draw::One => (tokens - 1.0).max(0.0),
        Draw::Admit => tokens,
        Draw::Charge(n) => (tokens - n as f64).max(-cap),
    };
    let to_full = (seconds_for(cap - left) * MICROS_PER_SEC).ceil() as Micros;
    let outcome =
        Outcome::Admitted { remaining: left.max(0.0).floor() as u64, reset_at: updated_at.saturating_add(to_full) };
    (Bucket { tokens: left, updated_at }, outcome)
}

/// What a model call of the agent loop draws before it starts, in this order: it waits while
/// either token bucket of its model family is empty or in debt (earlier calls' tokens), then
/// takes one request. Token buckets come first, so a call that waits for tokens holds no
/// request it has not made.
pub const BEFORE_MODEL_CALL: [(LimiterType, Draw); 3] = [
    (LimiterType::InputTokensPerMinute, Draw::Admit),
    (LimiterType::OutputTokensPerMinute, Draw::Admit),
    (LimiterType::RequestsPerMinute, Draw::One),
];

/// What a finished model call is charged: its input tokens, counting those written to the
/// prompt cache but not those read from it (as the hosted API counts input tokens per minute),
/// and its output tokens. A zero charge is left out.
pub fn after_model_call(input: u64, cache_creation: u64, _cache_read: u64, output: u64) -> Vec<(LimiterType, Draw)> {
    [(LimiterType::InputTokensPerMinute, input + cache_creation), (LimiterType::OutputTokensPerMinute, output)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| (kind, Draw::Charge(n)))
        .collect()
}

/// How far below one token still counts as one: the refill's floating-point rounding, so a
/// request sent exactly `retry-after` seconds later fits.
const ROUNDING: f64 = 1e-9;

/// The message of the `429 rate_limit_error` a limited request gets.
pub fn limited_message(workspace: &WorkspaceId, limiter: &LimiterType, limit: u64, retry_after_secs: u64) -> String {
    format!(
        "rate limit exceeded: workspace {workspace} over {limiter} ({limit}); retry after {retry_after_secs} {}",
        if retry_after_secs == 1 { "second" } else { "seconds" }
    )
}

/// Who sends a request, as far as rate limits care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A workspace API key on a Managed Agents endpoint.
    ApiKey,
    /// An admin key (on the Admin API; Managed Agents refuse it before any bucket).
    AdminKey,
    /// A self-hosted worker's environment key.
    EnvironmentKey,
    /// A work item's sessions token.
    SessionsToken,
    /// A person calling the API with their own token: counted like an API key.
    Person,
    /// The web console.
    Console,
}

/// Which caller a credential is (a console session never reaches the API's extractors: the
/// console is its own front end).
pub fn caller_of(credential: &crate::Credential) -> Caller {
    use crate::Credential;
    match credential {
        Credential::AdminKey(_) => Caller::AdminKey,
        Credential::ApiKey(_) => Caller::ApiKey,
        Credential::EnvironmentKey { .. } => Caller::EnvironmentKey,
        Credential::SessionToken { .. } => Caller::SessionsToken,
        Credential::Person { .. } => Caller::Person,
    }
}

/// Whether a caller's requests are counted. Worker traffic never is (a throttled heartbeat
/// would cost a lease), nor the console's, nor the Admin API's.
pub fn counted(caller: Caller) -> bool {
    matches!(caller, Caller::ApiKey | Caller::Person)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: Micros = 1_000_000;

    fn families() -> Vec<ModelFamily> {
        vec![
            ModelFamily { display_name: "Claude Sonnet".into(), models: vec!["claude-sonnet-4-5".into()] },
            ModelFamily { display_name: "claude sonnet".into(), models: vec!["dup".into()] },
            ModelFamily { display_name: "Local (llama)".into(), models: vec!["llama3".into(), "llama3.1".into()] },
        ]
    }

    #[test]
    fn the_catalogue() {
        let cat = catalogue(&families());
        let ids: Vec<(&str, &str)> = cat.iter().map(|e| (e.id.as_str(), e.group.id.as_str())).collect();
        assert_eq!(
            ids,
            [
                ("ratelimit_api", "rlg_mnemo_managed_agents"),
                ("ratelimit_model_claude_sonnet", "rlg_mnemo_model_claude_sonnet"),
                ("ratelimit_model_local_llama", "rlg_mnemo_model_local_llama"),
            ]
        );
        assert_eq!(cat[0].limiters, [LimiterType::RequestsPerMinute]);
        assert_eq!(cat[0].group.kind, RateLimitGroupType::ManagedAgents);
        assert_eq!(cat[1].group.kind, RateLimitGroupType::ModelGroup);
        assert_eq!(cat[1].limiters.len(), 3);
        assert_eq!(entry_for_model(&cat, "llama3.1").map(|e| e.id.as_str()), Some("ratelimit_model_local_llama"));
        assert_eq!(entry_for_model(&cat, "dup"), None, "a family whose id repeats another's is dropped");
        assert_eq!(catalogue(&[]).len(), 1);
        let clash = checked_catalogue(&families()).unwrap_err();
        assert!(clash.contains(r#""Claude Sonnet" and "claude sonnet""#), "{clash}");
        assert_eq!(checked_catalogue(&families()[..1]).unwrap().len(), 2);
    }

    /// (rule, flag, the one value it sets or part of the refusal)
    type FlagRow = (&'static str, &'static str, Result<(&'static str, LimiterType, u64), &'static str>);

    #[test]
    fn org_limits_from_flags() {
        let cat = catalogue(&families());
        let one = |flag: &str| parse_org_limits(&[flag.to_owned()], &cat);
        let rpm = LimiterType::RequestsPerMinute;
        #[rustfmt::skip]
        let rows: Vec<FlagRow> = vec![
            ("by group type", "managed_agents:requests_per_minute=600", Ok(("ratelimit_api", rpm.clone(), 600))),
            ("by entry id", "ratelimit_api:requests_per_minute=5", Ok(("ratelimit_api", rpm.clone(), 5))),
            ("by group id", "rlg_mnemo_managed_agents:requests_per_minute=5", Ok(("ratelimit_api", rpm.clone(), 5))),
            ("by family name", "Claude-Sonnet:output_tokens_per_minute=9000",
                Ok(("ratelimit_model_claude_sonnet", LimiterType::OutputTokensPerMinute, 9000))),
            ("no colon", "managed_agents", Err("no `:` after the group")),
            ("no value", "managed_agents:requests_per_minute", Err("no `=` before the value")),
            ("an unknown group", "batch:requests_per_minute=1", Err("unknown group `batch`")),
            ("a limiter the entry lacks", "managed_agents:tokens_per_minute=1", Err("`ratelimit_api` has no limiter `tokens_per_minute`")),
            ("zero", "managed_agents:requests_per_minute=0", Err("`0` is not a positive integer")),
            ("not a number", "managed_agents:requests_per_minute=lots", Err("`lots` is not a positive integer")),
        ];
        for (rule, flag, expected) in rows {
            match (one(flag), expected) {
                (Ok(map), Ok((id, limiter, n))) => {
                    assert_eq!(map.into_iter().collect::<Vec<_>>(), [((id.to_owned(), limiter), n)], "rule: {rule}");
                }
                (Err(e), Err(part)) => {
                    assert!(e.contains(part) && e.starts_with(&format!("--rate-limit `{flag}`")), "rule: {rule}: {e}");
                }
                (got, _) => panic!("rule: {rule}: {got:?}"),
            }
        }
        let twice = parse_org_limits(
            &["managed_agents:requests_per_minute=1".into(), "ratelimit_api:requests_per_minute=2".into()],
            &cat,
        )
        .unwrap();
        assert_eq!(twice.get(&("ratelimit_api".into(), rpm)), Some(&2), "the later value wins");
    }

    #[test]
    fn the_lower_value_applies() {
        let rows = [
            (None, None, None),
            (Some(10), None, Some(10)),
            (None, Some(20), Some(20)),
            (Some(10), Some(20), Some(10)),
            (Some(30), Some(20), Some(20)),
        ];
        for (ws, org, expected) in rows {
            assert_eq!(effective(ws, org), expected, "workspace {ws:?}, org {org:?}");
        }
    }

    #[test]
    fn views_and_overrides() {
        let cat = catalogue(&families());
        let ws: WorkspaceId = "wrkspc_w".parse().unwrap();
        let rpm = LimiterType::RequestsPerMinute;
        let org: OrgLimits = [(("ratelimit_api".to_owned(), rpm.clone()), 600)].into();
        assert_eq!(org_view(&cat[0], &org).limits, [RateLimitValue { kind: rpm.clone(), value: 600 }]);
        assert!(org_view(&cat[1], &org).limits.is_empty(), "nothing configured: no limiter listed");

        let none = BTreeMap::new();
        assert!(workspace_view(&cat[0], &ws, &none, &org, false).limits.is_empty(), "only overrides by default");
        let inherited = workspace_view(&cat[0], &ws, &none, &org, true);
        assert_eq!(
            inherited.limits,
            [WorkspaceLimitValue {
                kind: rpm.clone(),
                value: Some(600),
                org_limit: Some(600),
                source: LimitSource::Organization
            }]
        );

        let body: RateLimitUpdate =
            serde_json::from_value(serde_json::json!({"limits": [{"type": "requests_per_minute", "value": 60}]}))
                .unwrap();
        let set = apply_update(&cat[0], &none, &body).unwrap();
        assert_eq!(set.get(&rpm), Some(&60));
        let own = workspace_view(&cat[0], &ws, &set, &org, false);
        assert_eq!(
            own.limits,
            [WorkspaceLimitValue { kind: rpm, value: Some(60), org_limit: Some(600), source: LimitSource::Workspace }]
        );
        let clear: RateLimitUpdate =
            serde_json::from_value(serde_json::json!({"limits": [{"type": "requests_per_minute", "value": null}]}))
                .unwrap();
        assert!(apply_update(&cat[0], &set, &clear).unwrap().is_empty(), "null clears");
        let foreign: RateLimitUpdate =
            serde_json::from_value(serde_json::json!({"limits": [{"type": "tokens_per_minute", "value": 5}]})).unwrap();
        assert_eq!(
            apply_update(&cat[0], &set, &foreign).unwrap_err().message,
            "rate limit `ratelimit_api` has no limiter `tokens_per_minute` (it has: requests_per_minute)"
        );
    }

    #[test]
    fn the_bucket() {
        let full = |at| Some(Bucket { tokens: 60.0, updated_at: at });
        let empty = |at| Some(Bucket { tokens: 0.0, updated_at: at });
        #[rustfmt::skip]
        let rows: Vec<(&str, Option<Bucket>, u64, Micros, Outcome)> = vec![
            ("a new bucket is full", None, 60, 0, Outcome::Admitted { remaining: 59, reset_at: S }),
            ("a full bucket admits", full(0), 60, 0, Outcome::Admitted { remaining: 59, reset_at: S }),
            ("an empty bucket refuses, one token a second at 60/min", empty(0), 60, 0, Outcome::Limited { retry_after_secs: 1 }),
            ("after a second it holds one again", empty(0), 60, S, Outcome::Admitted { remaining: 0, reset_at: 61 * S }),
            ("at 1/min the wait is up to a minute", empty(0), 1, 0, Outcome::Limited { retry_after_secs: 60 }),
            ("half a token at 1/min waits 30 s", Some(Bucket { tokens: 0.5, updated_at: 0 }), 1, 0, Outcome::Limited { retry_after_secs: 30 }),
            ("refill stops at capacity", empty(0), 10, 3_600 * S, Outcome::Admitted { remaining: 9, reset_at: 3_600 * S + 6 * S }),
            ("a lowered capacity clips the tokens", full(0), 5, 0, Outcome::Admitted { remaining: 4, reset_at: 12 * S }),
            ("a clock behind the stored time refills nothing", empty(10 * S), 60, 5 * S, Outcome::Limited { retry_after_secs: 1 }),
            ("a huge limit waits at least a second", Some(Bucket { tokens: 0.999, updated_at: 0 }), 6_000_000, 0, Outcome::Limited { retry_after_secs: 1 }),
        ];
        for (rule, state, n, now, expected) in rows {
            assert_eq!(take(state, n, now, Draw::One).1, expected, "rule: {rule}");
        }
        let (after, _) = take(empty(10 * S), 60, 5 * S, Draw::One);
        assert_eq!(after.updated_at, 10 * S, "the stored time never moves backwards");
    }

    #[test]
    fn what_a_model_call_draws() {
        let kinds: Vec<&LimiterType> = BEFORE_MODEL_CALL.iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [&LimiterType::InputTokensPerMinute, &LimiterType::OutputTokensPerMinute, &LimiterType::RequestsPerMinute],
            "tokens are waited for before a request is taken"
        );
        assert_eq!(BEFORE_MODEL_CALL.map(|(_, d)| d), [Draw::Admit, Draw::Admit, Draw::One]);
        let (itpm, otpm) = (LimiterType::InputTokensPerMinute, LimiterType::OutputTokensPerMinute);
        // (rule, [input, cache creation, cache read, output], the input and output charged).
        #[rustfmt::skip]
        let rows = [
            ("input and output", [100, 0, 0, 20], [Some(100), Some(20)]),
            ("cache writes count as input", [100, 50, 0, 20], [Some(150), Some(20)]),
            ("cache reads do not", [100, 0, 900, 20], [Some(100), Some(20)]),
            ("nothing used, nothing charged", [0, 0, 0, 0], [None, None]),
            ("only output", [0, 0, 7, 3], [None, Some(3)]),
        ];
        for (rule, [input, creation, read, output], [charged_in, charged_out]) in rows {
            let expected: Vec<(LimiterType, Draw)> = [(itpm.clone(), charged_in), (otpm.clone(), charged_out)]
                .into_iter()
                .filter_map(|(kind, n)| Some((kind, Draw::Charge(n?))))
                .collect();
            assert_eq!(after_model_call(input, creation, read, output), expected, "rule: {rule}");
        }
    }

    /// (rule, the stored bucket, capacity, the draw, the tokens after, the outcome).
    type DrawRow = (&'static str, Option<Bucket>, u64, Draw, f64, Outcome);

    #[test]
    fn model_calls_are_admitted_then_charged_their_tokens() {
        let at = |tokens| Some(Bucket { tokens, updated_at: 0 });
        #[rustfmt::skip]
        let rows: Vec<DrawRow> = vec![
            ("a call is admitted without taking", at(10.0), 60, Draw::Admit, 10.0, Outcome::Admitted { remaining: 10, reset_at: 50 * S }),
            ("one token left admits a call", at(1.0), 60, Draw::Admit, 1.0, Outcome::Admitted { remaining: 1, reset_at: 59 * S }),
            ("a bucket in debt admits no call", at(-2.0), 60, Draw::Admit, -2.0, Outcome::Limited { retry_after_secs: 3 }),
            ("a deep debt waits at most a minute per answer", at(-100.0), 60, Draw::Admit, -60.0, Outcome::Limited { retry_after_secs: 60 }),
            ("the tokens used are charged", at(60.0), 60, Draw::Charge(20), 40.0, Outcome::Admitted { remaining: 40, reset_at: 20 * S }),
            ("more than is left runs into debt", at(10.0), 60, Draw::Charge(12), -2.0, Outcome::Admitted { remaining: 0, reset_at: 62 * S }),
            ("the debt stops one minute below empty", at(10.0), 60, Draw::Charge(10_000), -60.0, Outcome::Admitted { remaining: 0, reset_at: 120 * S }),
            ("a charge is never refused", at(-60.0), 60, Draw::Charge(1), -60.0, Outcome::Admitted { remaining: 0, reset_at: 120 * S }),
        ];
        for (rule, state, n, draw, tokens, expected) in rows {
            let (after, outcome) = take(state, n, 0, draw);
            assert_eq!(outcome, expected, "rule: {rule}");
            assert!((after.tokens - tokens).abs() < 1e-9, "rule: {rule}: {} tokens", after.tokens);
        }
        let (debt, _) = take(at(0.0), 60, 0, Draw::Charge(2));
        let after_wait = take(Some(debt), 60, 3 * S, Draw::Admit).1;
        assert!(matches!(after_wait, Outcome::Admitted { .. }), "the wait it was told is enough: {after_wait:?}");
    }

    #[test]
    fn the_429_message_and_who_is_counted() {
        let ws: WorkspaceId = "wrkspc_w".parse().unwrap();
        assert_eq!(
            limited_message(&ws, &LimiterType::RequestsPerMinute, 600, 2),
            "rate limit exceeded: workspace wrkspc_w over requests_per_minute (600); retry after 2 seconds"
        );
        assert!(limited_message(&ws, &LimiterType::RequestsPerMinute, 1, 1).ends_with("retry after 1 second"));
        #[rustfmt::skip]
        let rows = [
            (Caller::ApiKey, true),
            (Caller::Person, true),
            (Caller::AdminKey, false),
            (Caller::EnvironmentKey, false),
            (Caller::SessionsToken, false),
            (Caller::Console, false),
        ];
        for (caller, expected) in rows {
            assert_eq!(counted(caller), expected, "{caller:?}");
        }
        let (env, work) = ("env_e".parse().unwrap(), "work_w".parse().unwrap());
        #[rustfmt::skip]
        let credentials = [
            (crate::Credential::ApiKey("apikey_a".parse().unwrap()), Caller::ApiKey),
            (crate::Credential::AdminKey("admkey_a".parse().unwrap()), Caller::AdminKey),
            (crate::Credential::EnvironmentKey { id: "envkey_k".parse().unwrap(), environment: env }, Caller::EnvironmentKey),
            (crate::Credential::SessionToken { work, session: None, environment: "env_e".parse().unwrap() }, Caller::SessionsToken),
        ];
        for (credential, expected) in credentials {
            assert_eq!(caller_of(&credential), expected, "{credential:?}");
        }
    }

    proptest! {
        /// Over any request sequence, the requests admitted within any window of T seconds are
        /// at most N + N·T/60: the bucket's capacity plus its refill over the window.
        #[test]
        fn admitted_within_any_window_is_bounded(
            n in 1u64..200,
            gaps in proptest::collection::vec(0i64..3 * S, 1..400),
        ) {
            let mut state = None;
            let mut now = 0;
            let mut admitted = Vec::new();
            for gap in gaps {
                now += gap;
                let (next, outcome) = take(state, n, now, Draw::One);
                state = Some(next);
                if let Outcome::Admitted { remaining, .. } = outcome {
                    prop_assert!(remaining < n);
                    admitted.push(now);
                } else if let Outcome::Limited { retry_after_secs } = outcome {
                    prop_assert!((1..=60).contains(&retry_after_secs));
                }
            }
            for (i, start) in admitted.iter().enumerate() {
                for (j, end) in admitted.iter().enumerate().skip(i) {
                    let t = (end - start) as f64 / 1e6;
                    let count = (j - i + 1) as f64;
                    let bound = n as f64 + n as f64 * t / 60.0;
                    prop_assert!(count <= bound + 1e-6, "{count} admitted within {t} s, limit {n}/min");
                }
            }
        }

        /// A refused request is told a wait after which one request does fit.
        #[test]
        fn retry_after_is_enough(n in 1u64..120, tokens in 0.0f64..1.0, at in 0i64..1_000_000_000) {
            let (state, outcome) = take(Some(Bucket { tokens, updated_at: at }), n, at, Draw::One);
            if let Outcome::Limited { retry_after_secs } = outcome {
                let later = at + retry_after_secs as i64 * S;
                let fits = matches!(take(Some(state), n, later, Draw::One).1, Outcome::Admitted { .. });
                prop_assert!(fits || retry_after_secs == 60);
            }
        }
    }
}
