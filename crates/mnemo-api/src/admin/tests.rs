//! Round trips of SDK-shaped fixtures, and one row per validation rule.

use super::*;
use chrono::TimeZone;
use serde_json::json;

fn t(secs: i64) -> DateTime<Utc> {
    chrono::Utc.timestamp_opt(secs, 0).unwrap()
}

/// Parses `fixture`, and checks that writing it back gives the same JSON.
fn round_trip<T: Serialize + for<'de> Deserialize<'de>>(fixture: &Value) -> T {
    let parsed = T::deserialize(fixture).unwrap();
    assert_eq!(&serde_json::to_value(&parsed).unwrap(), fixture);
    parsed
}

fn workspace_fixture() -> Value {
    json!({
        "type": "workspace",
        "id": "wrkspc_01JABCDEFGHJKMNPQRSTVWXYZ",
        "name": "Research",
        "display_color": "#6C5BB9",
        "tags": {"team": "ml"},
        "created_at": "2026-11-02T10:00:00Z",
        "archived_at": null,
        "data_residency": {
            "workspace_geo": "us",
            "allowed_inference_geos": "unrestricted",
            "default_inference_geo": "global"
        },
        "compartment_id": "wrkspc_01JABCDEFGHJKMNPQRSTVWXYZ",
        "external_key_id": null,
        "user_profile_id": null
    })
}

fn workspace() -> Workspace {
    serde_json::from_value(workspace_fixture()).unwrap()
}

#[test]
fn objects_round_trip_in_the_sdk_shapes() {
    let org: Organization =
        round_trip(&json!({"type": "organization", "id": "0f8e6b1e-6b7a-4c55-9d43-1f0e2b3c4d5e", "name": "mnemo"}));
    assert_eq!(org.name, "mnemo");

    let ws: Workspace = round_trip(&workspace_fixture());
    assert_eq!(ws.data_residency, DataResidency::default());
    let mut listed = workspace_fixture();
    listed["data_residency"]["allowed_inference_geos"] = json!(["us", "eu"]);
    let ws: Workspace = round_trip(&listed);
    assert_eq!(ws.data_residency.allowed_inference_geos, AllowedInferenceGeos::Only(vec!["us".into(), "eu".into()]));

    let key: ApiKey = round_trip(&json!({
        "type": "api_key",
        "id": "apikey_01JABCDEFGHJKMNPQRSTVWXYZ",
        "name": "ci",
        "status": "active",
        "scope": {"type": "workspace", "workspace_id": "wrkspc_01JABCDEFGHJKMNPQRSTVWXYZ"},
        "principal": null,
        "created_by": {"id": "user_01JABC", "type": "user"},
        "created_at": "2026-11-02T10:00:00Z",
        "expires_at": null,
        "partial_key_hint": "sk-mnemo-abc…WXYZ",
        "workspace_id": "wrkspc_01JABCDEFGHJKMNPQRSTVWXYZ"
    }));
    assert_eq!(key.status, ApiKeyStatus::Active);
    let legacy: ApiKey = round_trip(&json!({
        "type": "api_key", "id": "apikey_x1", "name": "key 1", "status": "expired",
        "scope": {"type": "organization"},
        "principal": {"type": "service_account_actor", "service_account_id": "svac_1"},
        "created_by": null, "created_at": "2026-11-02T10:00:00Z", "expires_at": "2026-12-02T10:00:00Z",
        "partial_key_hint": null, "workspace_id": null
    }));
    assert_eq!(legacy.scope, ApiKeyScope::Organization);
    assert!(legacy.created_by.is_none());

    let page: AdminPage<Workspace> = round_trip(&json!({
        "data": [workspace_fixture()], "has_more": false,
        "first_id": "wrkspc_01JABCDEFGHJKMNPQRSTVWXYZ", "last_id": "wrkspc_01JABCDEFGHJKMNPQRSTVWXYZ"
    }));
    assert_eq!(page.data.len(), 1);
    let empty: AdminPage<ApiKey> =
        round_trip(&json!({"data": [], "has_more": false, "first_id": null, "last_id": null}));
    assert!(empty.data.is_empty());
}

#[test]
fn a_created_key_carries_its_secret_once_and_never_prints_it() {
    let fixture = json!({
        "type": "api_key", "id": "apikey_x1", "name": "ci", "status": "active",
        "scope": {"type": "workspace", "workspace_id": "wrkspc_w1"},
        "principal": null, "created_by": null, "created_at": "2026-11-02T10:00:00Z",
        "expires_at": null, "partial_key_hint": "sk-mnemo-TOP…CRET", "workspace_id": "wrkspc_w1",
        "key": "sk-mnemo-TOPSECRET"
    });
    let created: ApiKeyCreated = round_trip(&fixture);
    assert_eq!(created.key.expose(), "sk-mnemo-TOPSECRET");
    assert_eq!(created.api_key.name, "ci");
    let printed = format!("{created:?}");
    assert!(!printed.contains("sk-mnemo-TOPSECRET"), "{printed}");
    // A client that knows only the plain object reads the answer too (the SDK's lenient parse).
    let plain: ApiKey = serde_json::from_value(fixture).unwrap();
    assert_eq!(plain, created.api_key);
}

#[test]
fn rate_limit_objects_parse_unknown_names_and_round_trip() {
    let org: RateLimit = round_trip(&json!({
        "type": "rate_limit", "id": "ratelimit_api",
        "group": {"type": "managed_agents", "id": "rlg_mnemo_managed_agents"},
        "limits": [{"type": "requests_per_minute", "value": 600}],
        "models": null
    }));
    assert_eq!(org.group.kind, RateLimitGroupType::ManagedAgents);
    let hosted: RateLimit = round_trip(&json!({
        "type": "rate_limit", "id": "rl_1",
        "group": {"type": "priority_tier", "id": "rlg_x", "display_name": "Priority"},
        "limits": [{"type": "images_per_minute", "value": 5}],
        "models": ["claude-x"]
    }));
    assert_eq!(hosted.group.kind, RateLimitGroupType::Other("priority_tier".into()));
    assert_eq!(hosted.limits[0].kind, LimiterType::Other("images_per_minute".into()));

    let ws: WorkspaceRateLimit = round_trip(&json!({
        "type": "workspace_rate_limit", "rate_limit_id": "ratelimit_api", "workspace_id": "wrkspc_w1",
        "group": {"type": "managed_agents", "id": "rlg_mnemo_managed_agents"}, "models": null,
        "limits": [
            {"type": "requests_per_minute", "value": 60, "org_limit": 600, "source": {"type": "workspace"}},
            {"type": "tokens_per_minute", "value": null, "org_limit": null, "source": {"type": "organization"}}
        ]
    }));
    assert_eq!(ws.limits[0].source, LimitSource::Workspace);
    assert_eq!(ws.limits[1].org_limit, None);

    let update: RateLimitUpdate = round_trip(&json!({"limits": [{"type": "requests_per_minute", "value": null}]}));
    assert_eq!(update.limits[0].value, None);
    for known in LimiterType::KNOWN {
        assert_eq!(&LimiterType::parse(known.as_str()), known);
    }
    for known in RateLimitGroupType::KNOWN {
        assert_eq!(&RateLimitGroupType::parse(known.as_str()), known);
    }
}

#[test]
fn audit_events_round_trip() {
    let event: AuditEvent = round_trip(&json!({
        "type": "audit_event", "id": "audit_01JABC", "created_at": "2026-11-02T10:00:00Z",
        "workspace_id": "wrkspc_w1",
        "actor": {"type": "admin_key", "id": "admkey_01JABC"},
        "action": "api_key.update",
        "resource": {"type": "api_key", "id": "apikey_x1"},
        "client_ip": "203.0.113.7",
        "outcome": "success",
        "details": {"status": {"from": "active", "to": "inactive"}}
    }));
    assert_eq!(event.actor.kind, AuditActorType::AdminKey);
    let sign_in: AuditEvent = round_trip(&json!({
        "type": "audit_event", "id": "audit_2", "created_at": "2026-11-02T10:00:00Z", "workspace_id": null,
        "actor": {"type": "system", "id": "system"}, "action": "sign_in.failed", "resource": null,
        "client_ip": null, "outcome": "failure", "details": {}
    }));
    assert_eq!(sign_in.outcome, AuditOutcome::Failure);
    for kind in AuditActorType::ALL {
        assert_eq!(AuditActorType::parse(kind.as_str()), Some(kind));
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
    let query = AuditEventListQuery { starting_at: Some(t(10)), ending_at: Some(t(10)), ..Default::default() };
    assert!(query.validate().is_err());
    let query = AuditEventListQuery { starting_at: Some(t(10)), ending_at: Some(t(11)), ..Default::default() };
    assert!(query.validate().is_ok());
}

fn create(body: Value) -> Result<NewWorkspace, String> {
    serde_json::from_value::<WorkspaceCreate>(body).unwrap().validate().map_err(|e| e.0)
}

#[test]
fn workspace_create_rules() {
    let ok = create(json!({"name": "Research"})).unwrap();
    assert_eq!(
        ok,
        NewWorkspace {
            name: "Research".into(),
            display_color: DEFAULT_DISPLAY_COLOR.into(),
            tags: BTreeMap::new(),
            data_residency: DataResidency::default(),
        }
    );
    let partial = create(json!({"name": "x", "data_residency": {"default_inference_geo": "us"}})).unwrap();
    assert_eq!(partial.data_residency.workspace_geo, "us");
    assert_eq!(partial.data_residency.default_inference_geo, "us");
    assert_eq!(partial.data_residency.allowed_inference_geos, AllowedInferenceGeos::Unrestricted);

    let many_tags: serde_json::Map<String, Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    let sixteen: serde_json::Map<String, Value> = (0..16).map(|i| (format!("k{i}"), json!("v"))).collect();
    #[rustfmt::skip]
    let rows: Vec<(&str, Value, Option<&str>)> = vec![
        ("a name of 255 characters", json!({"name": "n".repeat(255)}), None),
        ("an empty name", json!({"name": ""}), Some("name must be 1 to 255 characters long (got 0)")),
        ("a name of 256 characters", json!({"name": "n".repeat(256)}), Some("name must be 1 to 255 characters long (got 256)")),
        ("a control character in the name", json!({"name": "a\nb"}), Some("name must not contain control characters")),
        ("a colour", json!({"name": "x", "display_color": "#00ff7A"}), None),
        ("a colour without #", json!({"name": "x", "display_color": "00ff7A"}), Some("display_color must be a hex colour `#RRGGBB` (got `00ff7A`)")),
        ("a short colour", json!({"name": "x", "display_color": "#fff"}), Some("display_color must be a hex colour `#RRGGBB` (got `#fff`)")),
        ("a colour that is not hex", json!({"name": "x", "display_color": "#GGGGGG"}), Some("display_color must be a hex colour `#RRGGBB` (got `#GGGGGG`)")),
        ("16 tags", json!({"name": "x", "tags": sixteen}), None),
        ("17 tags", json!({"name": "x", "tags": many_tags}), Some("tags may hold at most 16 pairs (got 17)")),
        ("an empty tag key", json!({"name": "x", "tags": {"": "v"}}), Some("tag keys must be 1 to 64 characters long (got 0)")),
        ("a tag key of 65 characters", json!({"name": "x", "tags": {"k".repeat(65): "v"}}), Some("tag keys must be 1 to 64 characters long (got 65)")),
        ("a reserved tag key", json!({"name": "x", "tags": {"anthropic:team": "v"}}), Some("tag key `anthropic:team` must not start with `anthropic`")),
        ("a reserved tag key in capitals", json!({"name": "x", "tags": {"Anthropic-x": "v"}}), Some("tag key `Anthropic-x` must not start with `anthropic`")),
        ("a tag value of 512 characters", json!({"name": "x", "tags": {"k": "v".repeat(512)}}), None),
        ("a tag value of 513 characters", json!({"name": "x", "tags": {"k": "v".repeat(513)}}), Some("tag value for `k` must be at most 512 characters long (got 513)")),
        ("a null external key", json!({"name": "x", "external_key_id": null}), None),
        ("an external key", json!({"name": "x", "external_key_id": "ek_1"}), Some("external_key_id is not supported by this server (no customer-managed keys); omit it or send null")),
        ("a user profile", json!({"name": "x", "user_profile_id": "uprof_1"}), Some("user_profile_id is not supported by this server (no user profiles); omit it or send null")),
        ("a listed geography", json!({"name": "x", "data_residency": {"allowed_inference_geos": ["us"]}}), None),
        ("an empty geography", json!({"name": "x", "data_residency": {"workspace_geo": ""}}), Some("data_residency.workspace_geo must name a geography such as `us` or `global` (got ``)")),
    ];
    for (rule, body, expected) in rows {
        assert_eq!(create(body).err().as_deref(), expected, "rule: {rule}");
    }
    let word = serde_json::from_value::<WorkspaceCreate>(
        json!({"name": "x", "data_residency": {"allowed_inference_geos": "anywhere"}}),
    );
    assert!(word.unwrap_err().to_string().contains("\"unrestricted\""));
}

fn update(body: Value) -> Result<Workspace, String> {
    serde_json::from_value::<WorkspaceUpdate>(body).unwrap().apply(&workspace()).map_err(|e| e.0)
}

#[test]
fn workspace_update_rules() {
    let same = update(json!({})).unwrap();
    assert_eq!(same, workspace(), "fields not sent stay");
    let renamed = update(json!({"name": "Lab", "display_color": "#000000"})).unwrap();
    assert_eq!((renamed.name.as_str(), renamed.display_color.as_str()), ("Lab", "#000000"));
    let tags = update(json!({"tags": {"team": null, "cost": "42"}})).unwrap();
    assert_eq!(tags.tags, [("cost".to_owned(), "42".to_owned())].into(), "null removes, a string upserts");
    let geo = update(json!({"data_residency": {"workspace_geo": "us", "default_inference_geo": "us"}})).unwrap();
    assert_eq!(geo.data_residency.default_inference_geo, "us", "repeating workspace_geo is no change");
    assert!(update(json!({"external_key_id": null, "user_profile_id": null})).is_ok());

    let mut full = workspace_fixture();
    full["tags"] = (0..16).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>().into();
    let full: Workspace = serde_json::from_value(full).unwrap();
    let one_more: WorkspaceUpdate = serde_json::from_value(json!({"tags": {"k16": "v"}})).unwrap();
    let swap: WorkspaceUpdate = serde_json::from_value(json!({"tags": {"k0": null, "k16": "v"}})).unwrap();

    #[rustfmt::skip]
    let rows: Vec<(&str, Value, &str)> = vec![
        ("an empty name", json!({"name": ""}), "name must be 1 to 255 characters long (got 0)"),
        ("a bad colour", json!({"display_color": "red"}), "display_color must be a hex colour `#RRGGBB` (got `red`)"),
        ("a reserved tag", json!({"tags": {"anthropicx": "v"}}), "tag key `anthropicx` must not start with `anthropic`"),
        ("moving the workspace", json!({"data_residency": {"workspace_geo": "eu"}}), "data_residency.workspace_geo cannot be changed (the workspace is in `us`)"),
        ("setting an external key", json!({"external_key_id": "ek"}), "external_key_id is not supported by this server (no customer-managed keys); omit it or send null"),
        ("setting a user profile", json!({"user_profile_id": "up"}), "user_profile_id is not supported by this server (no user profiles); omit it or send null"),
    ];
    for (rule, body, expected) in rows {
        assert_eq!(update(body).err().as_deref(), Some(expected), "rule: {rule}");
    }
    assert_eq!(one_more.apply(&full).unwrap_err().0, "tags may hold at most 16 pairs (got 17)");
    assert_eq!(swap.apply(&full).unwrap().tags.len(), 16, "the cap counts the patched result");
    assert!(!serde_json::from_value::<WorkspaceUpdate>(json!({"name": "Research"})).unwrap().renames(&workspace()));
    assert!(serde_json::from_value::<WorkspaceUpdate>(json!({"name": "R2"})).unwrap().renames(&workspace()));
}

#[test]
fn api_key_body_rules() {
    let now = t(1_800_000_000);
    let body = |v: Value| serde_json::from_value::<NewApiKey>(v).unwrap();
    #[rustfmt::skip]
    let rows: Vec<(&str, NewApiKey, Option<&str>)> = vec![
        ("a name and a workspace", body(json!({"name": "ci", "workspace_id": "wrkspc_w1"})), None),
        ("a future expiry", body(json!({"name": "ci", "workspace_id": "wrkspc_w1", "expires_at": "2027-01-15T08:00:01Z"})), None),
        ("an expiry now", body(json!({"name": "ci", "workspace_id": "wrkspc_w1", "expires_at": "2027-01-15T08:00:00Z"})),
            Some("expires_at must be in the future (got 2027-01-15T08:00:00Z, it is now 2027-01-15T08:00:00Z)")),
        ("an empty name", body(json!({"name": "", "workspace_id": "wrkspc_w1"})), Some("name must be 1 to 255 characters long (got 0)")),
    ];
    for (rule, key, expected) in rows {
        assert_eq!(key.validate(now).err().map(|e| e.0).as_deref(), expected, "rule: {rule}");
    }
    assert!(serde_json::from_value::<NewApiKey>(json!({"name": "ci"})).is_err(), "workspace_id is required");
    assert!(serde_json::from_value::<NewApiKey>(json!({"name": "ci", "workspace_id": "env_1"})).is_err());

    let upd = |v: Value| serde_json::from_value::<ApiKeyUpdate>(v).unwrap().validate().map_err(|e| e.0);
    assert!(upd(json!({"status": "inactive", "name": "x"})).is_ok());
    assert!(upd(json!({"status": "archived"})).is_ok());
    assert!(upd(json!({"status": "expired"})).unwrap_err().starts_with("status must be one of `active`"));
    assert!(upd(json!({"name": ""})).is_err());
    assert!(serde_json::from_value::<ApiKeyUpdate>(json!({"status": "deleted"})).is_err());
}

#[test]
fn page_params_rules() {
    let p = |v: Value| serde_json::from_value::<AdminPageParams>(v).unwrap().resolve().map_err(|e| e.0);
    #[rustfmt::skip]
    let rows: Vec<(&str, Value, Result<AdminPageQuery, String>)> = vec![
        ("defaults", json!({}), Ok(AdminPageQuery { limit: 20, cursor: AdminCursor::Start })),
        ("the largest page", json!({"limit": 1000}), Ok(AdminPageQuery { limit: 1000, cursor: AdminCursor::Start })),
        ("after an id", json!({"after_id": "a"}), Ok(AdminPageQuery { limit: 20, cursor: AdminCursor::After("a".into()) })),
        ("before an id", json!({"before_id": "b", "limit": 1}), Ok(AdminPageQuery { limit: 1, cursor: AdminCursor::Before("b".into()) })),
        ("zero", json!({"limit": 0}), Err("limit must be between 1 and 1000 (got 0)".into())),
        ("too many", json!({"limit": 1001}), Err("limit must be between 1 and 1000 (got 1001)".into())),
        ("both ends", json!({"after_id": "a", "before_id": "b"}), Err("pass at most one of after_id and before_id".into())),
    ];
    for (rule, params, expected) in rows {
        assert_eq!(p(params), expected, "rule: {rule}");
    }
    let page = AdminPage::new(vec!["a", "b", "c"], true, |s| (*s).to_owned());
    assert_eq!((page.first_id.as_deref(), page.last_id.as_deref(), page.has_more), (Some("a"), Some("c"), true));
    let none = AdminPage::new(Vec::<&str>::new(), false, |s| (*s).to_owned());
    assert_eq!((none.first_id, none.last_id), (None, None));
}

#[test]
fn rate_limit_update_rules() {
    let v = |body: Value| serde_json::from_value::<RateLimitUpdate>(body).unwrap().validate().map_err(|e| e.0);
    assert!(v(json!({"limits": [{"type": "requests_per_minute", "value": 60}, {"type": "tokens_per_minute", "value": null}]})).is_ok());
    assert_eq!(v(json!({"limits": []})).unwrap_err(), "limits must name at least one limiter");
    assert!(
        v(json!({"limits": [{"type": "bananas_per_minute", "value": 1}]}))
            .unwrap_err()
            .starts_with("unknown limiter type `bananas_per_minute` (known: requests_per_minute,")
    );
    assert_eq!(
        v(json!({"limits": [{"type": "requests_per_minute", "value": 1}, {"type": "requests_per_minute", "value": null}]})).unwrap_err(),
        "limiter type `requests_per_minute` is named more than once"
    );
    assert_eq!(
        v(json!({"limits": [{"type": "requests_per_minute", "value": 0}]})).unwrap_err(),
        "the value of `requests_per_minute` must be a positive integer, or null to clear the override"
    );
    assert!(
        serde_json::from_value::<RateLimitUpdate>(json!({"limits": [{"type": "requests_per_minute", "value": -1}]}))
            .is_err()
    );
}

#[test]
fn error_codes_have_their_wire_names() {
    assert_eq!(AdminErrorCode::WorkspaceApiKeyLimitExceeded.as_str(), "workspace_api_key_limit_exceeded");
    assert_eq!(AdminErrorCode::OrgApiKeyLimitExceeded.as_str(), "org_api_key_limit_exceeded");
    assert_eq!(AdminErrorCode::WorkspaceMismatch.as_str(), "workspace_mismatch");
    for s in ApiKeyStatus::ALL {
        assert_eq!(ApiKeyStatus::parse(s.as_str()), Some(s));
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
}
